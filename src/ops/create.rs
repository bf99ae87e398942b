//! `cage create`: record a session and make its container (made, not
//! started). Every step that changed something is undone when a later step
//! fails: never a half-made cage.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Context, program_mount};
use crate::error::{Error, Result};
use crate::harness::Harness;
use crate::host::LimitsSupport;
use crate::podman::{argv, envfile};
use crate::rules;
use crate::session::{self, CageRecord, RECORD_VERSION, Record, SealedRecord};
use crate::settings::{Env, UnenforcedLimits};
use crate::spec::{self, EnvRequest, Found, FoundSealed, Request, SealedSpec};

use super::sealed;

#[derive(Debug, Clone)]
pub struct CreateRequest {
    pub name: String,
    pub dir: PathBuf,
    pub harness: Harness,
    pub image: Option<String>,
    pub dry_run: bool,
    pub sealed: bool,
    /// `--sealed-token FILE`.
    pub sealed_token: Option<PathBuf>,
    /// A conversation to copy into a sealed cage.
    pub conversation: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Created {
    pub session: String,
    pub container: String,
    pub image: String,
    pub network: String,
    pub harness: Harness,
    pub dir: PathBuf,
    pub sealed: bool,
    pub dry_run: bool,
    /// The full podman command line, program first.
    pub argv: Vec<String>,
    /// The env file as `exec` would write it now, secrets redacted.
    pub env_file: String,
    pub warnings: Vec<String>,
}

pub fn create(ctx: &Context, req: &CreateRequest) -> Result<Created> {
    session::validate_name(&req.name)?;
    let dir = project_dir(&req.dir)?;
    let sealed_token = if req.sealed {
        if req.harness != Harness::Claude {
            return Err(Error::bad_input(
                "a sealed cage runs Claude Code only: pi would need your model keys, \
                 and a sealed cage gets none of them",
            ));
        }
        sealed::check_project(&dir, &ctx.settings.home)?;
        let token_file = req
            .sealed_token
            .clone()
            .or_else(|| ctx.settings.sealed_token.clone())
            .unwrap_or_else(|| ctx.store.default_sealed_token());
        let token = sealed::read_token(&token_file)?;
        if let Some(id) = &req.conversation {
            // Checked now, so a wrong id makes nothing; copied below.
            let from = conversation_source(ctx, &dir)?;
            let transcript = from.join(format!("{id}.jsonl"));
            if !std::fs::symlink_metadata(&transcript).is_ok_and(|m| m.is_file()) {
                return Err(Error::bad_input(format!(
                    "there is no conversation {id:?} of this project: {} is missing",
                    transcript.display()
                )));
            }
        }
        Some((token_file, token))
    } else {
        None
    };
    if ctx.store.exists(&req.name) {
        return Err(Error::bad_input(format!(
            "there is a session {:?} already; pick another name, or `shrooms-agent cage rm {}` first",
            req.name, req.name
        )));
    }
    let host = ctx.host()?;
    let mut warnings = Vec::new();
    match host.limits_support() {
        LimitsSupport::Enforced => {}
        LimitsSupport::IgnoredRootlessV1 => match ctx.settings.unenforced_limits {
            UnenforcedLimits::Refuse => {
                return Err(Error::failed(
                    "podman cannot enforce a cage's limits here: it is rootless on cgroups v1, where \
                     \"Resource limits are not supported and ignored\"; use a machine with cgroups v2, \
                     or set unenforced_limits = \"warn\" in the config to make cages without limits",
                ));
            }
            UnenforcedLimits::Warn => warnings.push(
                "the cage's limits are not enforced: podman is rootless on cgroups v1 \
                 (unenforced_limits = \"warn\")"
                    .to_string(),
            ),
        },
        LimitsSupport::MissingControllers(missing) => {
            return Err(Error::failed(format!(
                "podman cannot apply a cage's limits: the cgroup controllers {} are not delegated \
                 to your user (see the README, \"Requirements\")",
                missing.join(", ")
            )));
        }
    }
    let network = host.network(ctx.settings.network)?;
    let image = req
        .image
        .clone()
        .unwrap_or_else(|| ctx.settings.image.clone());
    let image_info = host.podman.image(&image)?.ok_or_else(|| {
        Error::failed(format!(
            "there is no image {image} on this machine for this session's cage"
        ))
    })?;
    let container = container_name(&req.name)?;

    let (found, program) = gather(ctx, req.harness, &dir, &container, &mut warnings)?;
    let request = Request {
        session: &req.name,
        container: &container,
        image: &image,
        dir: &dir,
        network,
        limits: &ctx.settings.limits,
    };
    let image_path = image_info.path();
    let mut sealed_parts = None;
    let (spec, plan) = match &sealed_token {
        None => {
            let spec = spec::build(&request, &found)?;
            let plan = spec::env_plan(
                &EnvRequest {
                    session: &req.name,
                    harness: req.harness,
                    home: &ctx.settings.home,
                    harness_dir: &found.harness_dir,
                    image_path: &image_path,
                    pass_env: &ctx.settings.pass_env,
                },
                &ctx.env,
            );
            (spec, plan)
        }
        Some((token_file, token)) => {
            let profile_path = crate::seccomp::default_profile()?;
            let profile = crate::seccomp::sealed_from_file(&profile_path)?;
            let outbox = sealed::outbox_dir(&ctx.settings.home, &req.name);
            let found_sealed = FoundSealed {
                session_uploads: ctx.store.session_uploads(&req.name),
                private_config: found.private_home.clone(),
                outbox: outbox.clone(),
                proxy_dir: found.proxy_dir.clone(),
                program_dirs: found.program_dirs.clone(),
                self_paths: found.self_paths.clone(),
            };
            let seccomp_file = ctx.store.seccomp_file(&container);
            let spec = spec::build_sealed(
                &request,
                &found_sealed,
                SealedSpec {
                    dns: ctx.settings.sealed_dns.clone(),
                    seccomp_profile: seccomp_file.clone(),
                },
            )?;
            let plan = spec::sealed_env_plan(&req.name, &image_path, token);
            let record = SealedRecord {
                token_file: token_file.clone(),
                outbox,
                rules: format!("{} v{}", rules::SEALED_TABLE, rules::SEALED_VERSION),
                seccomp_file,
                seccomp: crate::seccomp::fingerprint(&profile),
                dns: ctx.settings.sealed_dns.clone(),
            };
            sealed_parts = Some((record, profile));
            (spec, plan)
        }
    };
    let create_argv = argv::create(&spec);
    for (name, why) in &plan.left_out {
        warnings.push(format!(
            "{name} is left out of the cage's environment: {why}"
        ));
    }
    let mut full_argv = vec![host.podman.program().to_string_lossy().into_owned()];
    full_argv.extend(create_argv.iter().cloned());
    let result = Created {
        session: req.name.clone(),
        container: container.clone(),
        image: image.clone(),
        network: network.name().to_string(),
        harness: req.harness,
        dir: dir.clone(),
        sealed: req.sealed,
        dry_run: req.dry_run,
        argv: full_argv,
        env_file: envfile::render_redacted(&plan.vars),
        warnings,
    };
    if req.dry_run {
        return Ok(result);
    }

    let _lock = ctx.store.lock(&req.name)?;
    if ctx.store.exists(&req.name) {
        return Err(Error::bad_input(format!(
            "there is a session {:?} already",
            req.name
        )));
    }
    ctx.store.ensure()?;
    let mut undo = Undo::default();
    let made = (|| {
        undo.dirs.push(ctx.store.cage_dir(&container));
        session::make_private_dir(&found.private_home)?;
        session::make_private_dir(&found.proxy_dir)?;
        match &sealed_parts {
            // A sealed cage has no conversation folder of the user's: its
            // config folder is its own.
            Some((record, profile)) => {
                session::write_atomic(&record.seccomp_file, profile.as_bytes(), 0o600)?;
                let uploads = ctx.store.session_uploads(&req.name);
                if !uploads.exists() {
                    undo.dirs.push(uploads.clone());
                    session::make_private_dir(&uploads)?;
                }
                // An outbox of an earlier session of this name holds its
                // results: it is kept, never removed by an undo.
                if !record.outbox.exists() {
                    undo.dirs.push(record.outbox.clone());
                }
                crate::outbox::make_outbox(&record.outbox)?;
                if let Some(id) = &req.conversation {
                    let from = conversation_source(ctx, &dir)?;
                    let folder = from.file_name().unwrap_or_default();
                    let to = found.private_home.join("projects").join(folder);
                    sealed::copy_conversation(&from, id, &to)?;
                }
            }
            None => {
                if !found.conversation_dir.exists() {
                    undo.dirs.push(found.conversation_dir.clone());
                    session::make_private_dir(&found.conversation_dir)?;
                }
            }
        }
        host.podman.create(&create_argv)?;
        undo.container = Some(container.clone());
        let record = Record {
            version: RECORD_VERSION,
            name: req.name.clone(),
            dir: dir.clone(),
            harness: req.harness,
            created: now(),
            cage: Some(CageRecord {
                container: container.clone(),
                image: image.clone(),
                network,
                limits: ctx.settings.limits.clone(),
                image_path: image_path.clone(),
                harness_dir: match sealed_parts {
                    Some(_) => PathBuf::from(spec::SEALED_CONFIG_DIR),
                    None => found.harness_dir.clone(),
                },
                program,
                create_argv: create_argv.clone(),
                sealed: sealed_parts.as_ref().map(|(r, _)| r.clone()),
            }),
        };
        ctx.store.save(&record)
    })();
    match made {
        Ok(()) => Ok(result),
        Err(e) => {
            undo.run(ctx);
            Err(e)
        }
    }
}

/// What to take back when a step fails.
#[derive(Default)]
struct Undo {
    container: Option<String>,
    dirs: Vec<PathBuf>,
}

impl Undo {
    fn run(&self, ctx: &Context) {
        if let (Some(c), Ok(host)) = (&self.container, ctx.host()) {
            let _ = host.podman.rm_force(c);
        }
        for d in self.dirs.iter().rev() {
            let _ = session::remove_dir_if_there(d);
        }
    }
}

/// This project's Claude Code conversation folder on the machine.
fn conversation_source(ctx: &Context, dir: &Path) -> Result<PathBuf> {
    let config = Harness::Claude.config_dir(&ctx.settings.home, &ctx.env);
    Harness::Claude
        .conversation_dir(&config, dir)
        .ok_or_else(|| {
            Error::bad_input("the project's path is too long to name its conversation folder")
        })
}

/// The project folder: it must exist and be a folder; kept canonical.
pub fn project_dir(dir: &Path) -> Result<PathBuf> {
    let canonical = std::fs::canonicalize(dir).map_err(|e| {
        Error::bad_input(format!(
            "the project folder {} cannot be used: {e}; --dir must name an existing folder",
            dir.display()
        ))
    })?;
    if !canonical.is_dir() {
        return Err(Error::bad_input(format!(
            "{} is not a folder; --dir must name an existing folder",
            dir.display()
        )));
    }
    if canonical.to_str().is_none() {
        return Err(Error::bad_input(format!(
            "the project folder {} is not valid UTF-8",
            dir.display()
        )));
    }
    Ok(canonical)
}

/// `shrooms-<session>-<6 random hex>`, chosen once (seed, "Checking on a
/// cage from a shell"): a renamed session keeps its container, a new session
/// of an old name gets its own.
fn container_name(session: &str) -> Result<String> {
    let mut bytes = [0u8; 3];
    // SAFETY: getrandom(2) fills the buffer we own.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        return Err(Error::failed("getrandom failed"));
    }
    Ok(format!(
        "shrooms-{session}-{:02x}{:02x}{:02x}",
        bytes[0], bytes[1], bytes[2]
    ))
}

/// Look at the machine for what the spec needs: which of the harness's
/// files exist, its conversation folder, its program.
fn gather(
    ctx: &Context,
    harness: Harness,
    dir: &Path,
    container: &str,
    warnings: &mut Vec<String>,
) -> Result<(Found, Option<PathBuf>)> {
    let home = ctx.settings.home.clone();
    let env: &Env = &ctx.env;
    let harness_dir = harness.config_dir(&home, env);
    let harness_read_only = harness
        .read_only_entries()
        .iter()
        .map(|e| harness_dir.join(e))
        // metadata follows links: a dangling one is left out, as podman would fail on it.
        .filter(|p| std::fs::metadata(p).is_ok())
        .collect();
    let conversation_dir = harness.conversation_dir(&harness_dir, dir).ok_or_else(|| {
        Error::bad_input(format!(
            "the project folder's path is too long for Claude Code's conversation folder \
             (over 200 characters once named), whose name cannot be known from outside: \
             use a shorter path for {}",
            dir.display()
        ))
    })?;
    let configured = match harness {
        Harness::Claude => ctx.settings.claude.clone(),
        Harness::Pi => ctx.settings.pi.clone(),
    };
    let found_program = configured.or_else(|| match harness {
        Harness::Claude => {
            crate::settings::find_program("claude", ctx.settings.path_var.as_deref())
        }
        // Seed, "Choosing an image": a caged pi session runs the pi
        // installed in the image, unless the config names one.
        Harness::Pi => None,
    });
    let mut program_dirs = Vec::new();
    let program = match found_program {
        Some(p) => {
            let (resolved, mount) = program_mount(&p)?;
            program_dirs.push(mount);
            Some(resolved)
        }
        None if harness == Harness::Claude => {
            warnings.push(
                "no claude program found on PATH: `cage run` will need one \
                 (set [harness] claude in the config and make the cage again)"
                    .to_string(),
            );
            None
        }
        None => None,
    };
    let found = Found {
        harness_dir,
        harness_read_only,
        conversation_dir,
        private_home: ctx.store.private_home(container),
        proxy_dir: ctx.store.proxy_dir(container),
        uploads_dir: ctx.store.uploads_dir(),
        program_dirs,
        self_paths: ctx.self_paths.clone(),
    };
    Ok((found, program))
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
