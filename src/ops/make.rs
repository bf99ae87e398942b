//! Making a cage for a session: everything `cage create` and `cage move`
//! share. `plan` looks at the machine and decides (it changes nothing, so
//! `--dry-run` is a plan shown); `CagePlan::steps` are the steps that make
//! it, which the caller runs with its own (`ops::plan::execute`), each taken
//! back when a later one fails: never a half-made cage.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::acts::cage_files::{FilesUndo, MakeFiles};
use super::{Context, plan, program_mount, protect, sealed};
use crate::cage::harness::Harness;
use crate::cage::spec::{
    self, CageSpec, EnvPlan, EnvRequest, Found, FoundNix, FoundOptions, FoundSealed, NixOption,
    Options, Request, SHARED_LABEL, SealedSpec,
};
use crate::error::{
    ChoiceProblem, Error, FolderProblem, LimitsProblem, MakeProblem, Result, VolumeProblem, Warning,
};
use crate::host::podman::{argv, envfile};
use crate::host::{Host, LimitsSupport};
use crate::net::rules;
use crate::settings::{Env, Settings, UnenforcedLimits};
use crate::state::session::{self, CageRecord, MountSource, SealedRecord};

/// How a session's cage is to be made: the image and the options.
#[derive(Debug, Clone, Default)]
pub struct CageChoice {
    pub image: Option<String>,
    pub sealed: bool,
    /// `--sealed-token FILE`.
    pub sealed_token: Option<PathBuf>,
    /// A conversation to copy into a sealed cage.
    pub conversation: Option<String>,
    pub github: bool,
    pub nix: bool,
    pub shared: bool,
    pub meshes: Vec<String>,
    /// An ordinary cage for a folder a sealed session worked in, all the
    /// same (`--unseal`; never over HTTP).
    pub unseal: bool,
    /// Protected paths left writable (`--writable`; never over HTTP):
    /// docs/security.md, "Protected paths".
    pub writable: Vec<String>,
    /// `--net`: the network policy; None: the config's `net` (a move: the
    /// one its cage has).
    pub net: Option<crate::net::netpolicy::NetPolicy>,
}

/// A cage decided, not yet made.
pub struct CagePlan {
    /// A dry run's: why the real command would refuse (its argv is shown
    /// all the same).
    pub refused: Option<Error>,
    pub session: String,
    pub dir: PathBuf,
    pub container: String,
    pub image: String,
    pub image_path: String,
    pub spec: CageSpec,
    pub create_argv: Vec<String>,
    /// This state folder's identity, on the container's label.
    state_id: String,
    /// The state folder has no identity yet: `state_id` was drawn for it,
    /// and the plan's first step keeps it (`Step::StateId`).
    keep_state_id: bool,
    pub env: EnvPlan,
    pub warnings: Vec<Warning>,
    found: Found,
    program: Option<PathBuf>,
    /// The session's own limits (kept by a move), not the config's.
    own_limits: bool,
    /// `--unseal`: the folder is trusted again once the cage is made.
    unseal: bool,
    options: Options,
    /// The shared volume must be made (it does not exist yet).
    make_volume: bool,
    sealed: Option<SealedRecord>,
    /// Its network policy (docs/network.md, "Network policy").
    pub net: crate::net::netpolicy::NetPolicy,
    /// The cage's seccomp profile (written to `spec.seccomp_profile`).
    seccomp_profile: String,
    conversation: Option<String>,
    /// Protected paths missing now, made empty before the cage (a folder
    /// rather than a file), so that the cage cannot make them.
    protect_make: Vec<(PathBuf, protect::IfMissing)>,
    /// Its own git directory (None with `--writable .git`).
    git: Option<crate::cage::git::GitRecord>,
    /// A step before the cage is made: our image is stale, so its build
    /// starts again in the background (`Step::Rebuild`, before the cage's
    /// files),
    /// and the warning saying so goes in at this index of `warnings`
    /// ([`CagePlan::say_rebuilt`]).
    pub rebuild: Option<(crate::images::workbench::Stage, usize)>,
    /// The name the image is looked up by (ours: its stage's), as the
    /// rebuild's warning names it.
    looked_up: String,
}

/// Prepare a cage for a session: look (`first_facts`, then `facts_with`),
/// decide (`decide`, pure), and take the steps the decision leaves to its
/// caller, each named: `keep_learnt` before it, `refuse` (a refusal's
/// plan, which may start an image build, `Step::StartBuild`) and
/// `name_state_folder` after it (the id drawn there is kept by the plan's
/// first step, `Step::StateId`, and a stale image's rebuild is a step of
/// the plan too, `Step::Rebuild`). Checks everything
/// that can be checked before anything changes; with `dry_run`, changes
/// nothing at all (no image build is started). A caller that will make the
/// cage holds the session's lock already: the checks against neighbouring
/// sessions read their records under it.
pub fn prepare(
    ctx: &Context,
    host: &Host,
    session: &str,
    dir: &Path,
    harness: Harness,
    choice: &CageChoice,
    dry_run: bool,
) -> Result<CagePlan> {
    let first = first_facts(ctx, host, session, dir, harness, choice)?;
    // Refused from the first look alone: podman is asked nothing about a
    // cage that would be refused anyway (`decide` says the same again).
    decide_first(&first, harness, choice, &ctx.settings, dir)?;
    let facts = facts_with(ctx, host, session, dir, harness, choice, first)?;
    if !dry_run {
        keep_learnt(ctx, &facts)?;
    }
    let mut plan =
        decide(&facts, choice, &ctx.settings, dry_run).map_err(|r| refuse(ctx, host, r))?;
    if !dry_run {
        name_state_folder(&facts, &mut plan)?;
    }
    Ok(plan)
}

/// A step before the decision: what a look into the image learnt of pi is
/// kept, refused or not, so that the next create with this image runs
/// nothing. (A dry run writes nothing.)
fn keep_learnt(ctx: &Context, facts: &Facts) -> Result<()> {
    match &facts.pi {
        Some(look) => super::image::keep_pi(ctx, look),
        None => Ok(()),
    }
}

/// After a refusal: its plan run (`refusal_steps`), whose error is the
/// one the command fails with.
fn refuse(ctx: &Context, host: &Host, refused: Refused) -> Error {
    let error = refused.error.clone();
    // A refusal's plan always fails; were it to succeed, the decision's
    // own refusal stands.
    plan::execute(ctx, Some(host), refusal_steps(refused))
        .err()
        .unwrap_or(error)
}

/// Pure: the plan of a refusal. With an image build to start, the build
/// starts, and what that says is the error (being built, or the last
/// build's failure); else the refusal alone. A dry run's refusal never
/// names a build (`image::decide_for_cage`): it starts nothing.
pub fn refusal_steps(refused: Refused) -> Vec<plan::Step<'static>> {
    match refused.build {
        Some(stage) => vec![plan::Step::StartBuild { stage }],
        None => vec![plan::Step::Refuse(refused.error)],
    }
}

/// After the decision: which state folder made the container, on its
/// label (`cage prune` removes only its own). A state folder without an
/// identity yet gets one drawn now, which the plan's first step keeps
/// (`Step::StateId`: of two creates at once, both use the one kept
/// first); a dry run draws none and shows where it goes.
fn name_state_folder(facts: &Facts, plan: &mut CagePlan) -> Result<()> {
    if facts.state_id.is_none() {
        plan.set_state_id(session::draw_state_id()?);
        plan.keep_state_id = true;
    }
    Ok(())
}

/// What the first look finds, before podman is asked anything: what is
/// wrong with the project folder, a sealed cage's token and conversation,
/// the harness's files. What is wrong is kept as a fact; `decide_first`
/// refuses with it.
#[derive(Debug, Clone)]
pub struct FirstFacts {
    /// What makes the project folder no folder for a cage, if anything
    /// (`folder_refusal`).
    pub folder: Option<Error>,
    /// A sealed cage's token file, and what is wrong with it, if anything
    /// (missing, or open to others).
    pub token: Option<(PathBuf, Option<Error>)>,
    /// A sealed cage's `--conversation ID`: its transcript, and whether it
    /// is a file (None: the id is no id, or its folder cannot be named).
    pub transcript: Option<(PathBuf, bool)>,
    pub harness: HarnessFacts,
    /// The container's name, chosen now (random).
    pub container: String,
    /// Rootful: why root's cages have no user ids of their own, if they
    /// have none (`userns::auto_ranges_refusal`).
    pub auto_ranges: Option<crate::error::ShortRanges>,
}

/// What the machine, the records and podman say, gathered before anything
/// is decided: every read `decide` needs, so that it reads nothing itself.
/// What is wrong is gathered as it is found, and refused by `decide`.
#[derive(Debug, Clone)]
pub struct Facts {
    pub session: String,
    pub dir: PathBuf,
    pub harness: Harness,
    /// The invoking environment.
    pub env: Env,
    /// The host's facts (podman's version, rootless, cgroups, pasta...).
    pub host: Host,
    /// What was looked at before podman was asked.
    pub first: FirstFacts,
    /// The other sessions' records that read.
    pub others: Vec<session::Record>,
    /// The untrusted folder the project is, is in or holds; looked up for
    /// an ordinary cage without `--unseal`.
    pub untrusted: Option<sealed::Untrusted>,
    /// The cage's seccomp profile, made from podman's default one, and
    /// where it is written.
    pub seccomp_profile: String,
    pub seccomp_file: PathBuf,
    pub image: super::image::ImageFacts,
    /// A pi session with the image's own pi: whether the image has one.
    pub pi: Option<super::image::PiLook>,
    pub options: OptionFacts,
    /// This state folder's identity, if it has one yet.
    pub state_id: Option<String>,
    /// Where each path that a cage may mount leads (links followed); a path
    /// that cannot be followed leads to itself.
    pub led_to: BTreeMap<PathBuf, PathBuf>,
    /// The project's protected paths as they are on disk.
    pub protect: protect::ProtectFacts,
    /// podman's containers.conf files as it reads them, in its order, with
    /// their text (`host::loopback`).
    pub podman_confs: Vec<(PathBuf, String)>,
    /// Why the network policy cannot be enforced here, if it cannot (the
    /// machine resolves no address for a name of its allow-list).
    pub unenforceable: Option<Error>,
    /// The cage's first process: this program's init, in the state
    /// folder's `tools/` (`crate::cage::tools::INIT`).
    pub init: PathBuf,
}

/// What the machine has of the harness: its folder and the files of it a
/// cage gets, the project's conversation folder, its program; and the
/// cage's own folders in the state folder.
#[derive(Debug, Clone)]
pub struct HarnessFacts {
    pub harness_dir: PathBuf,
    /// Its read-only entries that are there (links followed).
    pub read_only: Vec<PathBuf>,
    /// The copies of its settings files: (copy, original).
    pub settings_copies: Vec<(PathBuf, PathBuf)>,
    /// This project's conversation folder; None: its name cannot be known
    /// from outside (a path too long).
    pub conversation_dir: Option<PathBuf>,
    /// The program found, with what a cage mounts for it, or why it cannot
    /// be used (None: none found, or pi's own).
    pub program: Option<std::result::Result<(PathBuf, PathBuf), Error>>,
    /// The cage's link folder, and the name of the link to the program in it
    /// (`spec::HarnessLink`).
    pub link: (PathBuf, &'static str),
    pub private_home: PathBuf,
    pub proxy_dir: PathBuf,
    /// Where podman writes the cage's PID at each start.
    pub pid_file: PathBuf,
    pub uploads_dir: PathBuf,
    pub tools_dir: Option<PathBuf>,
    /// The session's own git directory, and the `.git` file naming it.
    pub own_git: PathBuf,
    pub gitfile: PathBuf,
}

/// What the machine has for the options asked.
#[derive(Debug, Clone, Default)]
pub struct OptionFacts {
    /// `--nix`: the store is there, the machine's nix, the profile's PATH.
    pub nix: Option<(bool, FoundNix, Vec<String>)>,
    /// `--shared`: the volume's name and podman's inspect of it (None: it
    /// does not exist yet).
    pub shared: Option<(String, Option<crate::host::podman::inspect::VolumeInspect>)>,
}

/// Why `decide` made no plan, and the image build to start first, if any.
#[derive(Debug, Clone)]
pub struct Refused {
    pub error: Error,
    pub build: Option<crate::images::workbench::Stage>,
}

impl From<Error> for Refused {
    fn from(error: Error) -> Refused {
        Refused { error, build: None }
    }
}

/// Pure: the choice alone, before anything is looked at.
fn check_choice(choice: &CageChoice, harness: Harness) -> Result<()> {
    check_meshes(choice)?;
    if choice.sealed
        && let Some(net) = &choice.net
        && *net != crate::net::netpolicy::NetPolicy::Internet
    {
        let net = net.to_string();
        return Err(Error::choice(ChoiceProblem::SealedNet { net }));
    }
    if choice.sealed {
        // Seed, "Sealed cages": "GitHub, nix and the shared folder are not
        // offered". Refused by name, not dropped.
        for (on, field) in [
            (choice.github, "github"),
            (choice.nix, "nix"),
            (choice.shared, "shared"),
        ] {
            if on {
                return Err(Error::choice(ChoiceProblem::SealedWidened { field }));
            }
        }
        if harness != Harness::Claude {
            return Err(Error::choice(ChoiceProblem::SealedHarness));
        }
    }
    Ok(())
}

/// Look at the project folder: what makes it no folder for a cage, if
/// anything (a shared or system folder, the home or one holding it, the
/// state folder, the folders kept out of every cage, and what a sealed
/// cage refuses). A finding, kept as a fact: `decide_first` refuses with it.
pub fn folder_refusal(
    ctx: &Context,
    dir: &Path,
    harness: Harness,
    choice: &CageChoice,
) -> Option<Error> {
    look_at_folder(ctx, dir, harness, choice).err()
}

fn look_at_folder(ctx: &Context, dir: &Path, harness: Harness, choice: &CageChoice) -> Result<()> {
    if choice.sealed {
        sealed::check_project(dir, &ctx.settings.home, &ctx.settings.state_dir)?;
    }
    super::project::check_own_folder(dir, ctx.settings.runtime_dir.as_deref())?;
    sealed::check_any_project(
        dir,
        &ctx.settings.home,
        &ctx.settings.state_dir,
        crate::error::Mounted::Any,
    )?;
    let s = &ctx.settings;
    let guarded: Vec<PathBuf> = std::iter::once(s.config_path.clone())
        .chain(s.sealed_token.clone())
        .chain(s.machines.values().filter_map(|m| m.token_file.clone()))
        // The program mounted read-only into every cage: under a project,
        // a cage could put a link in its place, which the next start of
        // any cage would mount.
        .chain(ctx.self_paths.iter().cloned())
        // The harness's settings, copied into the cage at each start: a
        // cage that could write them would change what your own harness
        // on the machine obeys (a hook, an MCP server) and what later
        // cages get.
        .chain(
            (!choice.sealed)
                .then(|| {
                    let d = harness.config_dir(s);
                    crate::cage::cage_files::copied(harness)
                        .iter()
                        .map(move |n| d.join(n))
                })
                .into_iter()
                .flatten(),
        )
        // pi's models.json, whose keys the gateway uses and whose
        // `!command`s it runs on the machine: a cage must not write it.
        .chain(
            (harness == Harness::Pi)
                .then(|| harness.config_dir(s).join(crate::cage::pi_models::COPIED)),
        )
        // Codex's and opencode's configs, copied into their cages, and
        // their logins, which the gateway may read for any cage's requests.
        .chain([
            s.codex_dir.join(crate::cage::codex_config::COPIED),
            s.codex_dir.join(crate::cage::codex_config::LOGIN),
            s.opencode_dir.join(crate::cage::opencode_config::COPIED),
            s.opencode_data_dir
                .join(crate::cage::opencode_config::LOGIN),
        ])
        .collect();
    sealed::check_kept_out(dir, &s.home, &sealed::harness_folders(s), &guarded)
}

/// The first look: the project folder, a sealed cage's token and
/// conversation, the harness's files. Asks podman nothing, starts nothing,
/// writes nothing, refuses nothing; chooses the container's name.
pub fn first_facts(
    ctx: &Context,
    host: &Host,
    session: &str,
    dir: &Path,
    harness: Harness,
    choice: &CageChoice,
) -> Result<FirstFacts> {
    let container = container_name(session)?;
    let token = choice.sealed.then(|| {
        let token_file = choice
            .sealed_token
            .clone()
            .or_else(|| ctx.settings.sealed_token.clone())
            .unwrap_or_else(|| ctx.store.default_sealed_token());
        // Read now only to refuse a missing or open token at once; the
        // gateway reads it again at each request, outside the cage.
        let wrong = sealed::read_token(&token_file).err();
        (token_file, wrong)
    });
    let transcript = match (&choice.conversation, choice.sealed) {
        // Looked at only as an id: an id is no path.
        (Some(id), true) if sealed::check_conversation_id(id).is_ok() => {
            conversation_source(&ctx.settings, dir).ok().map(|from| {
                let transcript = from.join(format!("{id}.jsonl"));
                let there = std::fs::symlink_metadata(&transcript).is_ok_and(|m| m.is_file());
                (transcript, there)
            })
        }
        _ => None,
    };
    Ok(FirstFacts {
        folder: folder_refusal(ctx, dir, harness, choice),
        token,
        transcript,
        harness: harness_facts(ctx, harness, session, dir, &container),
        container,
        auto_ranges: if host.rootless {
            None
        } else {
            crate::host::userns::auto_ranges_refusal()
        },
    })
}

/// Gather every fact `decide` needs: the disk, the records, podman.
/// Starts nothing and writes nothing; refuses nothing (what is wrong is a
/// fact). Fails only where it cannot look (podman or a file that cannot
/// be read). `prepare` looks in two goes, deciding on the first look
/// before podman is asked; the decisions' tests look at once.
#[cfg(test)]
pub fn facts(
    ctx: &Context,
    host: &Host,
    session: &str,
    dir: &Path,
    harness: Harness,
    choice: &CageChoice,
) -> Result<Facts> {
    let first = first_facts(ctx, host, session, dir, harness, choice)?;
    facts_with(ctx, host, session, dir, harness, choice, first)
}

/// The facts after the first look: the records, the image, podman's.
pub fn facts_with(
    ctx: &Context,
    host: &Host,
    session: &str,
    dir: &Path,
    harness: Harness,
    choice: &CageChoice,
    first: FirstFacts,
) -> Result<Facts> {
    // The other sessions, read once for the checks against them. A damaged
    // record has no usable cage: it cannot be started until mended, and a
    // mended one is checked at its start.
    let others = ctx.store.list_readable()?.0;
    let untrusted = if !choice.sealed && !choice.unseal {
        sealed::untrusted_near(&ctx.store, dir)?
    } else {
        None
    };
    let image = choice
        .image
        .clone()
        .unwrap_or_else(|| ctx.settings.image.clone());
    let image = super::image::facts_for_cage(ctx, host, &image)?;
    // A caged pi runs the image's pi, unless the config names one of the
    // machine's (then that is mounted): docs/images.md, "Images".
    let pi = match (harness, &first.harness.program, &image.inspect) {
        (Harness::Pi, None, Some(inspect)) => Some(super::image::pi_in_image(ctx, host, inspect)),
        _ => None,
    };
    // Every cage's seccomp profile is derived from podman's default one.
    let seccomp_profile = crate::cage::seccomp::profile_from_file(
        &crate::cage::seccomp::default_profile()?,
        choice.sealed,
    )?;
    let options = option_facts(ctx, host, choice)?;
    let outbox = choice
        .sealed
        .then(|| sealed::outbox_dir(&ctx.settings.home, session));
    let led_to = mount_candidates(dir, &first.harness, &options, outbox)
        .into_iter()
        .map(|p| {
            let to = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
            (p, to)
        })
        .collect();
    let net = net_of(choice, &ctx.settings);
    Ok(Facts {
        seccomp_file: ctx.store.seccomp_file(&first.container),
        session: session.to_string(),
        dir: dir.to_path_buf(),
        harness,
        env: (*ctx.env).clone(),
        host: host.clone(),
        first,
        others,
        untrusted,
        image,
        pi,
        options,
        state_id: ctx.store.state_id_if_any()?,
        led_to,
        protect: protect::facts(dir, &ctx.settings.home, &git_configs(ctx)),
        podman_confs: crate::host::loopback::read(&ctx.env, host.rootless, &ctx.settings.home),
        seccomp_profile,
        unenforceable: crate::net::netpolicy::check_enforceable(
            &net,
            ctx.settings.hosts_file.as_deref(),
            &crate::net::netif::local_prefixes,
        )
        .err(),
        init: crate::cage::tools::init_path(&ctx.store.tools_dir()),
    })
}

/// git's config files outside a repository (git-config(1), "FILES"): one
/// may name a hooks folder relative to every work tree.
fn git_configs(ctx: &Context) -> Vec<PathBuf> {
    let home = &ctx.settings.home;
    let xdg = ctx
        .env
        .get("XDG_CONFIG_HOME")
        .filter(|x| x.starts_with('/'))
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"));
    vec![
        PathBuf::from("/etc/gitconfig"),
        xdg.join("git/config"),
        home.join(".gitconfig"),
    ]
}

/// Every path a cage of these facts may mount: where each leads is read
/// with the facts, for `check_sources`.
fn mount_candidates(
    dir: &Path,
    h: &HarnessFacts,
    options: &OptionFacts,
    outbox: Option<PathBuf>,
) -> Vec<PathBuf> {
    let mut paths = vec![
        dir.to_path_buf(),
        h.harness_dir.clone(),
        h.private_home.clone(),
        h.proxy_dir.clone(),
        h.uploads_dir.clone(),
    ];
    paths.extend(h.conversation_dir.iter().cloned());
    paths.extend(h.read_only.iter().cloned());
    paths.extend(h.settings_copies.iter().map(|(copy, _)| copy.clone()));
    if let Some(Ok((_, mount))) = &h.program {
        paths.push(mount.clone());
        // The link folder that goes with it (`harness_found`).
        paths.push(h.link.0.clone());
    }
    paths.extend(h.tools_dir.iter().cloned());
    if let Some((_, nix, _)) = &options.nix {
        paths.push(nix.root.clone());
        paths.push(nix.root.join("var/nix/daemon-socket"));
        paths.extend(nix.state_dir.iter().cloned());
        paths.extend(nix.config_dir.iter().cloned());
    }
    paths.extend(outbox);
    paths
}

/// Pure: the network policy a cage of this choice gets: a sealed cage's
/// rules are `internet` and more (`rules::sealed`).
fn net_of(choice: &CageChoice, settings: &Settings) -> crate::net::netpolicy::NetPolicy {
    if choice.sealed {
        crate::net::netpolicy::NetPolicy::Internet
    } else {
        choice.net.clone().unwrap_or_else(|| settings.net.clone())
    }
}

/// What a decision reads: the facts, the choice and the settings.
struct Given<'a> {
    f: &'a Facts,
    choice: &'a CageChoice,
    settings: &'a Settings,
}

/// What a decision says besides its plan: its warnings, and a dry run's
/// first refusal that leaves an argv to show (`CagePlan::refused`): a dry
/// run goes on past it, where the real command refuses.
struct Said {
    dry_run: bool,
    refused: Option<Refused>,
    warnings: Vec<Warning>,
}

impl Said {
    /// A refusal a dry run notes and goes on past.
    fn soft(&mut self, r: std::result::Result<(), Refused>) -> std::result::Result<(), Refused> {
        match r {
            Err(e) if self.dry_run => {
                self.refused.get_or_insert(e);
                Ok(())
            }
            other => other,
        }
    }
}

/// Pure: the plan for a cage from the facts, the choice and the settings,
/// or why there is none (and the image build to start, if that is why).
/// Reads nothing and changes nothing: the caller acts on `rebuild` and a
/// refusal's `build` (`prepare`). Each part is decided by a function of
/// its own, in the order the refusals are said.
pub fn decide(
    f: &Facts,
    choice: &CageChoice,
    settings: &Settings,
    dry_run: bool,
) -> std::result::Result<CagePlan, Refused> {
    let g = Given {
        f,
        choice,
        settings,
    };
    let (mut found, program) = decide_first(&f.first, f.harness, choice, settings, &f.dir)?;
    let mut said = Said {
        dry_run,
        refused: None,
        warnings: Vec::new(),
    };
    decide_neighbours(&g, &mut said)?;
    let (init, network) = decide_host(&g, &mut said)?;
    let (image_path, rebuild) = decide_image(&g, &mut said)?;
    decide_harness(&g, program.is_some(), &mut said)?;
    let (found_options, mut options, make_volume) = options(&f.options, choice)?;
    // docs/security.md, "Protected paths": what the machine runs later is read-only
    // in every cage, unless named writable.
    let (protection, git) = decide_protection(f, &choice.writable, &mut found)?;
    options.writable = choice.writable.clone();
    said.warnings
        .extend(writable_warnings(&f.dir, &choice.writable));
    let request = Request {
        session: &f.session,
        container: &f.first.container,
        image: &f.image.image,
        dir: &f.dir,
        network,
        limits: &settings.limits,
        init: &init,
        pid_file: Some(&found.pid_file),
    };
    let (mut spec, env, sealed) =
        decide_spec(&g, &request, &found, &found_options, &options, &image_path)?;
    spec.own
        .extend(git_owned(git.as_ref().map(|(r, _)| r), &f.first.harness));
    let sources = check_sources(
        &f.others,
        &f.session,
        &f.dir,
        &spec,
        &f.led_to,
        &found.protected,
    );
    said.soft(sources.map_err(Refused::from))?;
    for (name, why) in &env.left_out {
        said.warnings.push(Warning::EnvLeftOut {
            name: name.clone(),
            why: why.clone(),
        });
    }
    if let Some(e) = &f.unenforceable {
        // A policy that cannot be enforced is refused, never made open.
        return Err(e.clone().into());
    }
    let drafted = Drafted {
        image_path,
        rebuild,
        spec,
        env,
        found,
        program,
        options,
        make_volume,
        sealed,
        protect_make: protection.make,
        git: git.map(|(r, _)| r),
    };
    Ok(plan_of(&g, drafted, said))
}

/// Pure: the refusals of the first look (`FirstFacts`), in the order they
/// are said, and the harness's part of the cage.
fn decide_first(
    first: &FirstFacts,
    harness: Harness,
    choice: &CageChoice,
    settings: &Settings,
    dir: &Path,
) -> Result<(Found, Option<PathBuf>)> {
    check_choice(choice, harness)?;
    if let Some(e) = &first.folder {
        return Err(e.clone());
    }
    if let Some((_, Some(e))) = &first.token {
        return Err(e.clone());
    }
    if let (Some(id), true) = (&choice.conversation, choice.sealed) {
        // Checked before it names a file: an id is no path.
        sealed::check_conversation_id(id)?;
        conversation_source(settings, dir)?;
    }
    let found = harness_found(&first.harness, harness, dir)?;
    if let Some(why) = &first.auto_ranges {
        return Err(Error::make(MakeProblem::NoAutoRanges(why.clone())));
    }
    Ok(found)
}

/// Pure: the folder against its neighbours and its past (a sealed
/// session's), the meshes named, and the conversation a sealed cage is
/// given.
fn decide_neighbours(g: &Given, said: &mut Said) -> std::result::Result<(), Refused> {
    let (f, choice) = (g.f, g.choice);
    let sealed_ones = sealed::check_seal_neighbours(&f.others, &f.session, &f.dir, choice.sealed);
    said.soft(sealed_ones.map_err(Refused::from))?;
    if let Some(u) = &f.untrusted {
        said.soft(Err(untrusted_refusal(&f.dir, u).into()))?;
    }
    for m in &choice.meshes {
        validate_mesh(m)?;
    }
    if let Some((transcript, false)) = &f.first.transcript {
        let transcript = transcript.clone();
        return Err(Error::conversation(
            choice.conversation.as_deref().unwrap_or_default(),
            crate::error::ConversationProblem::Missing { transcript },
        )
        .into());
    }
    Ok(())
}

/// Pure: an ordinary cage refused in a folder a sealed session worked in.
fn untrusted_refusal(dir: &Path, u: &sealed::Untrusted) -> Error {
    Error::folder(
        dir,
        crate::error::FolderProblem::Untrusted {
            path: u.path.clone(),
            session: u.session.clone(),
        },
    )
}

/// Pure: what the machine gives every cage: its limits enforced, its init
/// (this program's own), its network, and the host's loopback closed to it.
fn decide_host(
    g: &Given,
    said: &mut Said,
) -> std::result::Result<(PathBuf, spec::Network), Refused> {
    let (f, settings) = (g.f, g.settings);
    let limits = check_limits(settings, &f.host, &mut said.warnings);
    said.soft(limits.map_err(Refused::from))?;
    let init = f.init.clone();
    let network = f.host.network(settings.network)?;
    if let Some(why) = crate::host::loopback::opening(network, &f.podman_confs) {
        said.soft(Err(Refused::from(Error::make(MakeProblem::LoopbackOpen(
            why,
        )))))?;
    }
    Ok((init, network))
}

/// Pure: the image's PATH, and the rebuild to start (with where its
/// warning goes). Ours: built when missing, rebuilt when stale; not ours:
/// must be here, as nothing here builds or pulls it.
fn decide_image(
    g: &Given,
    said: &mut Said,
) -> std::result::Result<(String, Option<(crate::images::workbench::Stage, usize)>), Refused> {
    let named = g.choice.image.is_some();
    let decided =
        super::image::decide_for_cage(&g.f.image, named, said.dry_run, &mut said.warnings);
    let image_choice = match decided {
        Ok(c) => Some(c),
        Err(n) => {
            said.soft(Err(Refused {
                error: n.error,
                build: n.build,
            }))?;
            None
        }
    };
    // The rebuild's warning goes where the image's warnings go.
    let rebuild = image_choice
        .as_ref()
        .and_then(|c| c.rebuild)
        .map(|s| (s, said.warnings.len()));
    let image_path = match &image_choice {
        Some(c) => c.inspect.path(),
        // A dry run without the image: its PATH cannot be known.
        None => "<the image's PATH>".to_string(),
    };
    Ok((image_path, rebuild))
}

/// Pure: the harness's program: Claude Code's on the machine, a caged pi's
/// in the image unless the config names one.
fn decide_harness(
    g: &Given,
    has_program: bool,
    said: &mut Said,
) -> std::result::Result<(), Refused> {
    let (f, settings) = (g.f, g.settings);
    if !has_program && f.harness != Harness::Pi {
        said.warnings.push(Warning::NoProgram {
            program: f.harness.name(),
        });
    }
    // An image without pi is refused now, not at the first turn with a
    // runtime's "executable file not found".
    if let Some(look) = &f.pi {
        let config = crate::settings::config_file_words(&settings.config_path);
        match &look.pi {
            super::image::Pi::Has => {}
            super::image::Pi::Lacks => {
                said.soft(Err(no_pi(&f.image.image, settings, &config).into()))?
            }
            super::image::Pi::Unknown(why) => said.warnings.push(Warning::PiUnlooked {
                image: f.image.image.clone(),
                why: why.clone(),
                config,
            }),
        }
    }
    Ok(())
}

/// Pure: what each `--writable` path lets the cage do, said.
fn writable_warnings(dir: &Path, writable: &[String]) -> Vec<Warning> {
    writable
        .iter()
        .map(|w| Warning::Writable {
            given: w.clone(),
            path: dir.join(w),
            why: protect::why(w.trim_start_matches("./").trim_end_matches('/')),
        })
        .collect()
}

/// Pure: the container's spec and environment, and a sealed cage's record.
fn decide_spec(
    g: &Given,
    request: &Request,
    found: &Found,
    found_options: &FoundOptions,
    options: &Options,
    image_path: &str,
) -> Result<(CageSpec, EnvPlan, Option<SealedRecord>)> {
    let (f, settings) = (g.f, g.settings);
    let (mut spec, env, sealed) = match &f.first.token {
        None => {
            let spec = spec::build(request, found, found_options)?;
            let env = spec::env_plan(
                &EnvRequest {
                    session: &f.session,
                    harness: f.harness,
                    home: &settings.home,
                    harness_dir: &found.harness_dir,
                    image_path,
                    linked: found.harness_link.is_some(),
                    chosen: settings.chosen(),
                    options,
                    gateway: None,
                },
                &f.env,
            );
            (spec, env, None)
        }
        Some((token_file, _)) => {
            let (spec, record) = decide_sealed_spec(g, request, found, token_file)?;
            let linked = found.harness_link.is_some();
            let env = spec::sealed_env_plan(&f.session, image_path, linked, None);
            (spec, env, Some(record))
        }
    };
    spec.seccomp_profile = Some(f.seccomp_file.clone());
    // Rootful podman: root in the cage is given a user namespace of its own,
    // or it would be root on the machine (docs/configuration.md, "As root").
    spec.own_userns = !f.host.rootless;
    Ok((spec, env, sealed))
}

/// Pure: a sealed cage's spec, and its record.
fn decide_sealed_spec(
    g: &Given,
    request: &Request,
    found: &Found,
    token_file: &Path,
) -> Result<(CageSpec, SealedRecord)> {
    let (f, settings) = (g.f, g.settings);
    let outbox = sealed::outbox_dir(&settings.home, &f.session);
    let sealed_found = FoundSealed {
        session_uploads: found.uploads_dir.clone(),
        private_config: found.private_home.clone(),
        outbox: outbox.clone(),
        proxy_dir: found.proxy_dir.clone(),
        program_dirs: found.program_dirs.clone(),
        harness_link: found.harness_link.clone(),
        tools_dir: found.tools_dir.clone(),
        protected: found.protected.clone(),
    };
    let spec = spec::build_sealed(
        request,
        &sealed_found,
        SealedSpec {
            dns: settings.sealed_dns.clone(),
        },
    )?;
    let record = SealedRecord {
        token_file: token_file.to_path_buf(),
        outbox,
        rules: format!("{} v{}", rules::SEALED_TABLE, rules::SEALED_VERSION),
        seccomp_file: f.seccomp_file.clone(),
        seccomp: crate::cage::seccomp::fingerprint(&f.seccomp_profile),
        dns: settings.sealed_dns.clone(),
    };
    Ok((spec, record))
}

/// The parts of a plan decided so far.
struct Drafted {
    image_path: String,
    rebuild: Option<(crate::images::workbench::Stage, usize)>,
    spec: CageSpec,
    env: EnvPlan,
    found: Found,
    program: Option<PathBuf>,
    options: Options,
    make_volume: bool,
    sealed: Option<SealedRecord>,
    protect_make: Vec<(PathBuf, protect::IfMissing)>,
    git: Option<crate::cage::git::GitRecord>,
}

/// Pure: what of the session's git the cage's root owns (given to it at
/// each start, rootful): its git directory, which it writes, and our
/// `.git` file, read-only in the cage, since git refuses a repository
/// whose `.git` file another user owns (git-config(1), safe.directory).
fn git_owned(git: Option<&crate::cage::git::GitRecord>, h: &HarnessFacts) -> Vec<PathBuf> {
    let Some(record) = git else {
        return Vec::new();
    };
    let mut own = vec![record.own.clone()];
    if record.layout == crate::cage::git::Layout::File {
        own.push(h.gitfile.clone());
    }
    own
}

/// Pure: the protected paths, and the session's own git directory where
/// the project's `.git` is with the user's read-only beside it (docs/security.md,
/// "Git in a cage"): their mounts over the project, in `found`.
#[allow(clippy::type_complexity)]
fn decide_protection(
    f: &Facts,
    writable: &[String],
    found: &mut Found,
) -> Result<(
    protect::Protection,
    Option<(crate::cage::git::GitRecord, Vec<spec::Mount>)>,
)> {
    let protection = protect::decide(&f.dir, &f.protect, writable)?;
    let git = decide_git(&f.dir, &f.protect, &f.first.harness, writable);
    found.protected = git.iter().flat_map(|(_, m)| m.iter().cloned()).collect();
    found.protected.extend(protection.mounts.iter().cloned());
    Ok((protection, git))
}

/// Pure: the session's own git directory and its mounts (docs/security.md, "Git in
/// a cage"), from where the project's repository is: its `.git` a file
/// (a linked worktree, a submodule) or a folder (none yet: the empty one
/// made for it, which a later `git init` of the user's fills). None with
/// `--writable .git`: the cage then writes the user's repository itself.
fn decide_git(
    dir: &Path,
    p: &protect::ProtectFacts,
    h: &HarnessFacts,
    writable: &[String],
) -> Option<(crate::cage::git::GitRecord, Vec<spec::Mount>)> {
    use crate::cage::git::Layout;
    if writable
        .iter()
        .any(|w| w.trim_start_matches("./").trim_end_matches('/') == ".git")
    {
        return None;
    }
    let (layout, common) = match &p.located {
        Some(l) => (l.layout.clone(), l.common_dir.clone()),
        None => (Layout::Folder, dir.join(".git")),
    };
    let modules = layout == Layout::Folder && p.modules;
    let mounts = crate::cage::git::mounts(dir, &layout, &common, &h.own_git, &h.gitfile, modules);
    let record = crate::cage::git::GitRecord {
        layout,
        own: h.own_git.clone(),
    };
    Some((record, mounts))
}

/// Pure: the plan of the parts decided. A dry run shows where the state
/// folder's id goes; a real one draws it (`name_state_folder`).
fn plan_of(g: &Given, d: Drafted, said: Said) -> CagePlan {
    let (f, choice) = (g.f, g.choice);
    let state_id = f
        .state_id
        .clone()
        .unwrap_or_else(|| "<this state folder's id, made with its first cage>".into());
    CagePlan {
        session: f.session.clone(),
        dir: f.dir.clone(),
        create_argv: argv::with_state_label(argv::create(&d.spec), &state_id),
        state_id,
        keep_state_id: false,
        container: f.first.container.clone(),
        image: f.image.image.clone(),
        image_path: d.image_path,
        spec: d.spec,
        env: d.env,
        warnings: said.warnings,
        found: d.found,
        program: d.program,
        own_limits: false,
        refused: said.refused.map(|r| r.error),
        unseal: choice.unseal,
        options: d.options,
        make_volume: d.make_volume,
        sealed: d.sealed,
        net: net_of(choice, g.settings),
        seccomp_profile: f.seccomp_profile.clone(),
        conversation: choice.conversation.clone(),
        protect_make: d.protect_make,
        git: d.git,
        rebuild: d.rebuild,
        looked_up: f.image.name.clone(),
    }
}

/// Pure: a pi session's image without pi: what to do instead (the face words
/// the other image: `--image`, or a body's `"image"`).
fn no_pi(image: &str, settings: &Settings, config: &str) -> Error {
    Error::make(MakeProblem::NoPi {
        image: image.to_string(),
        workbench: crate::images::workbench::image_name(
            &settings.images_repo,
            crate::images::workbench::Stage::Workbench,
        ),
        config: config.to_string(),
    })
    .next(crate::error::Next::OtherImage {
        config: config.to_string(),
    })
}

/// Pure: refuse a cage whose project holds another of its mount sources (where
/// links lead), or that is inside or above another session's project: runc
/// follows links at every start, so a cage that can write a folder another
/// mount comes from (its own later, or another session's) could put a link
/// there to anything of the user's, and the next start would mount it.
/// The same folder for two sessions is fine: neither gets more than the
/// other has. The protected paths are the project's own, mounted over
/// themselves where no link was on the way (`protect::decide`); they are
/// mount points in the cage, which it cannot rename or replace, and a
/// start refuses one that became a link (`MountSource::changed`).
fn check_sources(
    others: &[session::Record],
    session: &str,
    dir: &Path,
    spec: &spec::CageSpec,
    led_to: &BTreeMap<PathBuf, PathBuf>,
    protected: &[spec::Mount],
) -> Result<()> {
    for m in &spec.mounts {
        if protected.contains(m) {
            continue;
        }
        // Every source was looked at with the facts; one that was not is
        // this program's mistake, refused rather than let through.
        let led_to = led_to
            .get(&m.src)
            .cloned()
            .ok_or_else(|| Error::make(MakeProblem::SourceNotLooked { src: m.src.clone() }))?;
        if m.src != dir && (led_to.starts_with(dir) || m.src.starts_with(dir)) {
            let src = m.src.clone();
            return Err(Error::folder(
                dir,
                FolderProblem::HoldsMount { led_to, src },
            ));
        }
    }
    for other in others {
        if other.name == session || other.cage.is_none() || other.dir == dir {
            continue;
        }
        // What else the other's cage mounts (--nix's folders, a link it
        // was called by) must not be in this project either.
        // (Its protected paths are in its project: a folder holding one
        // is inside or above that project, said below.)
        let theirs = other.cage.iter().flat_map(|c| c.mount_sources.iter());
        if let Some(m) = theirs
            .filter(|m| !m.path.starts_with(&other.dir))
            .find(|m| m.path.starts_with(dir) || m.led_to.starts_with(dir))
        {
            return Err(Error::folder(
                dir,
                FolderProblem::HoldsOthersMount {
                    path: m.path.clone(),
                    other: other.name.clone(),
                },
            ));
        }
        if other.dir.starts_with(dir) || dir.starts_with(&other.dir) {
            return Err(Error::folder(
                dir,
                FolderProblem::Overlaps {
                    other: other.name.clone(),
                    other_dir: other.dir.clone(),
                },
            ));
        }
    }
    Ok(())
}

impl CagePlan {
    /// The state folder's identity, drawn once decided: on the container's
    /// label.
    fn set_state_id(&mut self, state_id: String) {
        self.create_argv = argv::with_state_label(argv::create(&self.spec), &state_id);
        self.state_id = state_id;
    }

    /// Give the cage the session's own limits instead of the config's: a
    /// move into a new cage keeps what `cage limits` set.
    pub fn with_own_limits(mut self, limits: crate::settings::Limits) -> CagePlan {
        self.spec.limits = limits;
        self.create_argv = argv::with_state_label(argv::create(&self.spec), &self.state_id);
        self.own_limits = true;
        self
    }

    /// The env file as `exec` would write it now, secrets shown as `<redacted>`.
    pub fn env_redacted(&self) -> String {
        envfile::render_redacted(&self.env.vars)
    }

    /// The plan's warnings are put at `offset` of a longer list: the
    /// rebuild's goes in where they went.
    pub fn warnings_put_at(&mut self, offset: usize) {
        if let Some((_, at)) = &mut self.rebuild {
            *at += offset;
        }
    }

    /// The rebuild's warning (`Ran::rebuilt`, once the plan ran) put in
    /// `warnings` where the image's warnings are.
    pub fn say_rebuilt(&self, rebuilt: Option<Warning>, warnings: &mut Vec<Warning>) {
        if let (Some((_, at)), Some(line)) = (self.rebuild, rebuilt) {
            warnings.insert(at.min(warnings.len()), line);
        }
    }

    pub fn is_sealed(&self) -> bool {
        self.sealed.is_some()
    }

    /// The steps that make it: the state folder's identity kept (the
    /// first cage's), its folders and files, the shared volume, the
    /// container, and what a sealed cage (or `--unseal`) says of its
    /// folder. The caller adds its intent and the record's steps.
    pub fn steps(&self) -> Vec<plan::Step<'_>> {
        let mut steps: Vec<_> = self
            .keep_state_id
            .then(|| plan::Step::StateId {
                id: self.state_id.clone(),
            })
            .into_iter()
            .collect();
        steps.extend(self.rebuild.map(|(stage, _)| plan::Step::Rebuild {
            stage,
            image: self.looked_up.clone(),
        }));
        steps.push(plan::Step::CageFiles(Box::new(self.files())));
        if let (true, Some(volume)) = (self.make_volume, &self.options.shared) {
            // A shared folder is for every session given it: once made, it
            // is not taken back by an undo.
            steps.push(plan::Step::CreateVolume {
                name: volume.clone(),
                label: format!("{SHARED_LABEL}=true"),
            });
        }
        steps.push(plan::Step::CreateContainer {
            name: self.container.clone(),
            argv: self.create_argv.clone(),
            image: self.image.clone(),
        });
        // Seed, "After a sealed session": its folder stays untrusted,
        // whatever becomes of the session.
        if self.sealed.is_some() || self.unseal {
            steps.push(plan::Step::Untrusted {
                dir: self.dir.clone(),
                session: self.session.clone(),
                remember: self.sealed.is_some(),
            });
        }
        steps
    }

    /// What the cage's files step makes, the plan's parts it reads copied:
    /// the step holds them rather than the plan.
    fn files(&self) -> CageFiles {
        CageFiles {
            session: self.session.clone(),
            dir: self.dir.clone(),
            container: self.container.clone(),
            found: self.found.clone(),
            sealed: self.sealed.clone(),
            seccomp_file: self.spec.seccomp_profile.clone(),
            seccomp_profile: self.seccomp_profile.clone(),
            conversation: self.conversation.clone(),
            protect_make: self.protect_make.clone(),
            git: self.git.clone(),
        }
    }

    /// The record of the cage once made. Where its mount sources lead is
    /// looked at by the step that writes the record, once they all exist.
    pub fn record(&self) -> CageRecord {
        CageRecord {
            container: self.container.clone(),
            image: self.image.clone(),
            network: self.spec.network,
            limits: self.spec.limits.clone(),
            own_limits: self.own_limits,
            image_path: self.image_path.clone(),
            harness_dir: match self.sealed {
                Some(_) => PathBuf::from(spec::SEALED_CONFIG_DIR),
                None => self.found.harness_dir.clone(),
            },
            program: self.program.clone(),
            linked: self.found.harness_link.is_some(),
            create_argv: self.create_argv.clone(),
            sealed: self.sealed.clone(),
            options: self.options.clone(),
            mount_sources: self
                .spec
                .mounts
                .iter()
                .map(|m| MountSource {
                    path: m.src.clone(),
                    led_to: m.src.clone(),
                    links: None,
                })
                .collect(),
            net: self.net.clone(),
            git: self.git.clone(),
        }
    }
}

/// The cage's folders and files as a plan decided them (`Step::CageFiles`):
/// its private home, proxy folder, seccomp profile, settings copies,
/// received files, outbox, own git directory, the protected paths made
/// empty.
struct CageFiles {
    session: String,
    dir: PathBuf,
    container: String,
    found: Found,
    sealed: Option<SealedRecord>,
    /// Where the seccomp profile is written (`CageSpec::seccomp_profile`),
    /// and what.
    seccomp_file: Option<PathBuf>,
    seccomp_profile: String,
    conversation: Option<String>,
    protect_make: Vec<(PathBuf, protect::IfMissing)>,
    git: Option<crate::cage::git::GitRecord>,
}

impl CageFiles {
    /// A sealed cage's own folders: its received files, its outbox, and
    /// the conversation it goes on with, copied into its home.
    fn make_sealed_files(
        &self,
        ctx: &Context,
        record: &SealedRecord,
        undo: &mut FilesUndo,
    ) -> Result<()> {
        self.make_uploads(ctx, undo)?;
        // An outbox of an earlier session of this name holds its
        // results: it is kept, never removed by an undo.
        if !record.outbox.exists() {
            undo.dirs.push(record.outbox.clone());
        }
        crate::cage::pack::make_outbox(&record.outbox)?;
        if let Some(id) = &self.conversation {
            let from = conversation_source(&ctx.settings, &self.dir)?;
            let folder = from.file_name().unwrap_or_default();
            let to = self.found.private_home.join("projects").join(folder);
            sealed::copy_conversation(&from, id, &to)?;
        }
        Ok(())
    }

    /// What a cage that is not sealed is given of the user's harness: its
    /// settings copied, its received files, and the user's conversation
    /// folder it mounts.
    fn make_harness_files(&self, ctx: &Context, undo: &mut FilesUndo) -> Result<()> {
        // Its copy of the user's settings (read-only inside), made
        // again at each start (`ensure_running`).
        let pi = self
            .found
            .settings_copies
            .iter()
            .any(|(_, at)| at.ends_with(crate::cage::pi_models::COPIED));
        if pi {
            // Written for real by each turn, once its gateway listens.
            crate::cage::pi_models::write_placeholder(
                &ctx.store.settings_copy_dir(&self.container),
            )?;
        }
        let pointed = [Harness::Codex, Harness::Opencode].into_iter().find(|h| {
            let name = super::gateway_copy_name(*h);
            self.found
                .settings_copies
                .iter()
                .any(|(_, at)| name.is_some_and(|n| at.ends_with(n)))
        });
        if let Some(harness) = pointed {
            // Without a gateway yet: each turn writes it again with its own.
            super::write_gateway_copy(
                harness,
                &self.found.harness_dir,
                &ctx.store.settings_copy_dir(&self.container),
                None,
                &self.dir,
            )?;
        } else if !self.found.settings_copies.is_empty() {
            let harness = if pi { Harness::Pi } else { Harness::Claude };
            let chosen = ctx.settings.chosen();
            crate::cage::cage_files::write_settings_copies(
                harness,
                &self.found.harness_dir,
                &ctx.store.settings_copy_dir(&self.container),
                &|name, value| spec::admit(name, value, harness, chosen).passed(),
            )?;
        }
        // Its own received files, and no other session's.
        self.make_uploads(ctx, undo)?;
        if let Some(conversations) = &self.found.conversation_dir
            && !conversations.exists()
        {
            // Each folder made on the way (~/.claude, its projects/
            // on a machine where the harness never ran) is taken
            // back too, outermost last.
            let mut made: Vec<PathBuf> = conversations
                .ancestors()
                .take_while(|a| !a.exists())
                .map(Path::to_path_buf)
                .collect();
            made.reverse();
            undo.dirs.extend(made);
            session::make_private_dir(conversations)?;
        }
        Ok(())
    }

    /// The session's folder of received files, made when it is missing
    /// (then an undo takes it back); one already there is left as it is.
    fn make_uploads(&self, ctx: &Context, undo: &mut FilesUndo) -> Result<()> {
        let uploads = ctx.store.session_uploads(&self.session);
        if !uploads.exists() {
            undo.dirs.push(uploads.clone());
            session::make_private_dir(&uploads)?;
        }
        Ok(())
    }
}

impl MakeFiles for CageFiles {
    #[cfg(test)]
    fn container(&self) -> &str {
        &self.container
    }
    /// The cage's folders and files on the machine; what was made is in
    /// `undo`, for the executor to take back.
    fn make_files(&self, ctx: &Context, undo: &mut FilesUndo) -> Result<()> {
        ctx.store.ensure()?;
        undo.dirs.push(ctx.store.cage_dir(&self.container));
        // docs/security.md, "Protected paths": a missing one is made empty, so that
        // the cage cannot make it.
        undo.made = protect::make_missing(&self.protect_make)?;
        session::make_private_dir(&self.found.private_home)?;
        session::make_private_dir(&self.found.proxy_dir)?;
        if let Some(git) = &self.git {
            session::make_private_dir(&git.own)?;
            if git.layout == crate::cage::git::Layout::File {
                let file = ctx.store.gitfile(&self.container);
                session::write_atomic(&file, crate::cage::git::gitfile_text().as_bytes(), 0o644)?;
            }
        }
        // podman reads the profile when it makes the container (into the
        // container's own configuration): not flushed to disk for later.
        if let Some(file) = &self.seccomp_file {
            session::write_atomic_unsynced(file, self.seccomp_profile.as_bytes(), 0o600)?;
        }
        // The program the cage runs as its tools, in the folder it mounts,
        // and its first process (kept for every cage of the state folder:
        // not taken back).
        if let (Some(tools), Some(exe)) = (&self.found.tools_dir, ctx.self_paths.first()) {
            crate::cage::tools::provide(tools, exe)?;
        }
        crate::cage::tools::provide_init(&ctx.store.tools_dir())?;
        if let Some(link) = &self.found.harness_link {
            crate::cage::cage_files::write_harness_link(link)?;
        }
        match &self.sealed {
            // A sealed cage has no conversation folder of the user's: its
            // config folder is its own.
            Some(record) => self.make_sealed_files(ctx, record, undo),
            None => self.make_harness_files(ctx, undo),
        }
    }
}

/// Pure: refuse (or warn, as configured) where podman would not enforce limits.
fn check_limits(settings: &Settings, host: &Host, warnings: &mut Vec<Warning>) -> Result<()> {
    match host.limits_support() {
        LimitsSupport::Enforced => Ok(()),
        LimitsSupport::IgnoredRootlessV1 => match settings.unenforced_limits {
            UnenforcedLimits::Refuse => Err(Error::limits(LimitsProblem::RootlessCgroupsV1)),
            UnenforcedLimits::Warn => {
                warnings.push(Warning::LimitsUnenforced);
                Ok(())
            }
        },
        LimitsSupport::MissingControllers(missing) => {
            Err(Error::limits(LimitsProblem::MissingControllers {
                missing: missing.clone(),
            }))
        }
    }
}

/// Pure: `--mesh` chooses which shared folder a cage gets (docs/cages.md, "Options
/// that widen a cage": one volume per set of meshes) and nothing else: without `--shared`,
/// or on a sealed cage, which has no shared folder, it would be taken and
/// do nothing, so it is refused. (Sealed with `--shared` too: `--shared`
/// is refused by name.)
fn check_meshes(choice: &CageChoice) -> Result<()> {
    if choice.meshes.is_empty() || choice.shared {
        return Ok(());
    }
    Err(Error::choice(ChoiceProblem::MeshesAlone {
        sealed: choice.sealed,
    }))
}

/// Pure: a mesh label: what a volume name can hold.
fn validate_mesh(m: &str) -> Result<()> {
    let ok = !m.is_empty()
        && m.len() <= 32
        && m.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !m.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::bad_field(
            "meshes",
            format!("{m:?} is not a mesh label: use 1 to 32 of a-z 0-9 - _, not starting with -"),
        ))
    }
}

/// The shared folder's volume for a set of meshes (docs/cages.md, "Options
/// that widen a cage", `--shared`): `shrooms-shared` for every mesh, else `shrooms-shared-<labels
/// sorted and joined>-<short hash of the sorted list>`, so the name is
/// stable and two different sets never share one.
pub fn shared_volume_name(meshes: &[String]) -> String {
    if meshes.is_empty() {
        return "shrooms-shared".into();
    }
    let mut sorted: Vec<&str> = meshes.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(sorted.join("\n").as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("shrooms-shared-{}-{hash}", sorted.join("-"))
}

/// Look at the machine for the options asked: nix, the shared volume.
/// (`--github` needs nothing of the machine's when a cage is made: its
/// token is looked for at each request, outside the cage.)
fn option_facts(ctx: &Context, host: &Host, choice: &CageChoice) -> Result<OptionFacts> {
    let home = &ctx.settings.home;
    let mut facts = OptionFacts::default();
    if choice.nix {
        let root = &ctx.settings.nix_root;
        let store = root.join("store").is_dir();
        let multi_user = root.join("var/nix/daemon-socket").exists();
        let state_dir = home.join(".local/state/nix");
        let config_dir = home.join(".config/nix");
        // The profile's bin folders, as they are seen inside: the user's
        // profile under ~/.local/state/nix (mounted), the old per-user one
        // and the default one under /nix.
        let mut path = Vec::new();
        if let Ok(target) = std::fs::read_link(home.join(".nix-profile"))
            && target.is_absolute()
        {
            path.push(format!("{}/bin", target.display()));
        }
        for p in [
            format!("{}/profiles/profile/bin", state_dir.display()),
            "/nix/var/nix/profiles/default/bin".to_string(),
        ] {
            if !path.contains(&p) {
                path.push(p);
            }
        }
        let nix = FoundNix {
            root: root.clone(),
            multi_user,
            state_dir: state_dir.is_dir().then_some(state_dir),
            config_dir: config_dir.is_dir().then_some(config_dir),
        };
        facts.nix = Some((store, nix, path));
    }
    if choice.shared {
        let name = shared_volume_name(&choice.meshes);
        let volume = host.podman.volume(&name)?;
        facts.shared = Some((name, volume));
    }
    Ok(facts)
}

/// Pure: the options from their facts, and whether the shared volume must
/// be made.
fn options(facts: &OptionFacts, choice: &CageChoice) -> Result<(FoundOptions, Options, bool)> {
    let mut found = FoundOptions::default();
    let mut options = Options {
        github: choice.github,
        meshes: choice.meshes.clone(),
        ..Options::default()
    };
    if let Some((store, nix, path)) = &facts.nix {
        if !store {
            let store = nix.root.join("store");
            return Err(Error::choice(ChoiceProblem::NoNix { store }));
        }
        found.nix = Some(nix.clone());
        options.nix = Some(NixOption {
            multi_user: nix.multi_user,
            path: path.clone(),
        });
    }
    let mut make_volume = false;
    if let Some((name, volume)) = &facts.shared {
        match volume {
            None => make_volume = true,
            Some(v) => check_shared_volume(v)?,
        }
        found.shared_volume = Some(name.clone());
        options.shared = Some(name.clone());
    }
    Ok((found, options, make_volume))
}

/// The tool makes the shared volume itself and refuses one of that name
/// defined any other way: another's files must not appear in a cage.
fn check_shared_volume(v: &crate::host::podman::inspect::VolumeInspect) -> Result<()> {
    let ours = v
        .labels
        .as_ref()
        .is_some_and(|l| l.get(SHARED_LABEL).is_some_and(|x| x == "true"));
    let options = v.options.clone().unwrap_or_default();
    let why = if v.driver != "local" {
        Some(VolumeProblem::Driver {
            driver: v.driver.clone(),
        })
    } else if !options.is_empty() {
        let device = options.get("device").cloned().unwrap_or_default();
        Some(if options.get("o").is_some_and(|o| o.contains("bind")) {
            VolumeProblem::BindTo { device }
        } else {
            VolumeProblem::Options {
                options: format!("{options:?}"),
            }
        })
    } else if !ours {
        Some(VolumeProblem::NotOurs {
            label: SHARED_LABEL,
        })
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Error::make(MakeProblem::SharedVolume {
            volume: v.name.clone(),
            why,
        })),
    }
}

/// `shrooms-<session>-<6 random hex>`, chosen once (docs/cages.md, "Using
/// it", `podman ps`): a renamed session keeps its container, a new session
/// of an old name gets its own.
fn container_name(session: &str) -> Result<String> {
    let mut bytes = [0u8; 3];
    let n = rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty());
    if n.ok() != Some(bytes.len()) {
        return Err(Error::no_random());
    }
    Ok(format!(
        "shrooms-{session}-{:02x}{:02x}{:02x}",
        bytes[0], bytes[1], bytes[2]
    ))
}

/// This project's Claude Code conversation folder on the machine.
fn conversation_source(settings: &Settings, dir: &Path) -> Result<PathBuf> {
    let config = Harness::Claude.config_dir(settings);
    Harness::Claude
        .conversation_dir(&config, dir)
        .ok_or_else(|| Error::make(MakeProblem::ConversationPathLong))
}

/// Look at the machine for what the spec needs: which of the harness's
/// files exist, its conversation folder, its program.
fn harness_facts(
    ctx: &Context,
    harness: Harness,
    session: &str,
    dir: &Path,
    container: &str,
) -> HarnessFacts {
    let harness_dir = harness.config_dir(&ctx.settings);
    let read_only = harness
        .read_only_entries()
        .iter()
        .map(|e| harness_dir.join(e))
        // metadata follows links: a dangling one is left out, as podman would fail on it.
        .filter(|p| std::fs::metadata(p).is_ok())
        .collect();
    let configured = match harness {
        Harness::Claude => ctx.settings.claude.clone(),
        Harness::Pi => ctx.settings.pi.clone(),
        Harness::Codex => ctx.settings.codex.clone(),
        Harness::Opencode => ctx.settings.opencode.clone(),
    };
    let found_program = configured.or_else(|| match harness {
        Harness::Claude | Harness::Codex | Harness::Opencode => {
            crate::settings::find_program(harness.name(), ctx.settings.path_var.as_deref())
        }
        // Seed, "Choosing an image": a caged pi session runs the pi
        // installed in the image, unless the config names one.
        Harness::Pi => None,
    });
    // Claude Code without a program: a warning of `decide`'s.
    let home = &ctx.settings.home;
    let program = found_program.map(|p| match harness {
        Harness::Codex => super::codex_mount(&p, home),
        _ => program_mount(&p, harness.name(), home),
    });
    // The harness's settings files go in as copies without credentials
    // (`cage_files`), each mounted read-only at its own place; pi's
    // models.json too: the copy points it at the gateway.
    let copy_dir = ctx.store.settings_copy_dir(container);
    let pi_models = (harness == Harness::Pi).then_some(crate::cage::pi_models::COPIED);
    let settings_copies = crate::cage::cage_files::copied(harness)
        .iter()
        .copied()
        .chain(pi_models)
        .chain(super::gateway_copy_name(harness))
        .map(|n| (copy_dir.join(n), harness_dir.join(n)))
        .collect();
    HarnessFacts {
        conversation_dir: harness.conversation_dir(&harness_dir, dir),
        read_only,
        settings_copies,
        program,
        link: (ctx.store.link_dir(container), harness.command()),
        private_home: ctx.store.private_home(container),
        proxy_dir: ctx.store.proxy_dir(container),
        pid_file: ctx.store.pid_file(container),
        uploads_dir: ctx.store.session_uploads(session),
        // The program's folder, only when the program knows where it is.
        tools_dir: ctx.self_paths.first().map(|_| ctx.store.tools_dir()),
        own_git: ctx.store.own_git(container),
        gitfile: ctx.store.gitfile(container),
        harness_dir,
    }
}

/// Pure: the harness's part of the cage from its facts: what it mounts,
/// and its program; or why there is none.
fn harness_found(
    h: &HarnessFacts,
    harness: Harness,
    dir: &Path,
) -> Result<(Found, Option<PathBuf>)> {
    let conversation_dir = match (&h.conversation_dir, harness) {
        (Some(d), _) => Some(d.clone()),
        (None, Harness::Codex | Harness::Opencode) => None,
        (None, _) => {
            return Err(Error::make(MakeProblem::ClaudePathLong {
                dir: dir.to_path_buf(),
            }));
        }
    };
    let mut program_dirs = Vec::new();
    let program = match &h.program {
        Some(Ok((resolved, mount))) => {
            program_dirs.push(mount.clone());
            Some(resolved.clone())
        }
        Some(Err(e)) => return Err(e.clone()),
        None => None,
    };
    let found = Found {
        harness_dir: h.harness_dir.clone(),
        harness_read_only: h.read_only.clone(),
        settings_copies: h.settings_copies.clone(),
        conversation_dir,
        private_home: h.private_home.clone(),
        proxy_dir: h.proxy_dir.clone(),
        uploads_dir: h.uploads_dir.clone(),
        program_dirs,
        harness_link: program.as_ref().map(|target| spec::HarnessLink {
            dir: h.link.0.clone(),
            name: h.link.1.to_string(),
            target: target.clone(),
        }),
        // Decided from the facts (`protect::decide`).
        protected: Vec::new(),
        tools_dir: h.tools_dir.clone(),
        pid_file: h.pid_file.clone(),
    };
    Ok((found, program))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_volume_names() {
        assert_eq!(shared_volume_name(&[]), "shrooms-shared");
        let a = shared_volume_name(&["office".into(), "home".into()]);
        let b = shared_volume_name(&["home".into(), "office".into()]);
        assert_eq!(a, b);
        assert!(a.starts_with("shrooms-shared-home-office-"), "{a}");
        assert_eq!(a.len(), "shrooms-shared-home-office-".len() + 8);
        assert_ne!(shared_volume_name(&["home".into()]), a);
        // a set that joins to the same text still gets another hash
        assert_ne!(
            shared_volume_name(&["a-b".into()]),
            shared_volume_name(&["a".into(), "b".into()])
        );
    }

    #[test]
    fn mesh_only_with_the_shared_folder() {
        let choice = |shared: bool, sealed: bool, meshes: &[&str]| CageChoice {
            shared,
            sealed,
            meshes: meshes.iter().map(|m| m.to_string()).collect(),
            ..CageChoice::default()
        };
        assert!(check_meshes(&choice(false, false, &[])).is_ok());
        assert!(check_meshes(&choice(true, false, &["home"])).is_ok());
        let e = check_meshes(&choice(false, false, &["home"])).unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::BadInput);
        assert_eq!(
            e.message(),
            "--mesh only chooses the shared folder's set of meshes, and does nothing without \
             --shared: add --shared, or leave out --mesh"
        );
        let e = check_meshes(&choice(false, true, &["home"])).unwrap_err();
        assert_eq!(
            e.message(),
            "--mesh only chooses the shared folder's set of meshes, and a sealed cage has no \
             shared folder: leave out --mesh"
        );
    }

    #[test]
    fn mesh_labels() {
        assert!(validate_mesh("home").is_ok());
        assert!(validate_mesh("my_mesh-2").is_ok());
        for bad in ["", "Home", "a b", "-x", "a/b", &"a".repeat(33)] {
            assert!(validate_mesh(bad).is_err(), "{bad:?}");
        }
    }

    fn volume(
        driver: &str,
        labelled: bool,
        options: &[(&str, &str)],
    ) -> crate::host::podman::inspect::VolumeInspect {
        serde_json::from_value(serde_json::json!({
            "Name": "shrooms-shared",
            "Driver": driver,
            "Labels": if labelled { serde_json::json!({SHARED_LABEL: "true"}) } else { serde_json::json!({}) },
            "Options": options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
        }))
        .unwrap()
    }

    #[test]
    fn only_our_own_plain_volume_is_the_shared_folder() {
        assert!(check_shared_volume(&volume("local", true, &[])).is_ok());
        let e = check_shared_volume(&volume("local", false, &[])).unwrap_err();
        assert!(e.message().contains("did not make it"), "{}", e.message());
        let e = check_shared_volume(&volume(
            "local",
            true,
            &[("device", "/home/u/data"), ("o", "bind"), ("type", "none")],
        ))
        .unwrap_err();
        assert!(
            e.message().contains("a bind to \"/home/u/data\""),
            "{}",
            e.message()
        );
        let e = check_shared_volume(&volume("nfs", true, &[])).unwrap_err();
        assert!(e.message().contains("driver"), "{}", e.message());
    }
}
