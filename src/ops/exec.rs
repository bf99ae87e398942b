//! `cage exec` and `cage run`: run a command in a session's cage, with the
//! terminal passed through, and stop the cage when it ends (what the session
//! left running ends with it). The session's lock is held throughout, so a
//! second exec on it is refused as busy.

use std::path::PathBuf;

use super::{Context, cage_of, ensure_running};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::podman::{argv, envfile, runner::Process};
use crate::session::{self, SessionLock};
use crate::spec::{self, EnvRequest};

/// What to run in the cage.
#[derive(Debug, Clone)]
pub enum What {
    /// `cage exec NAME -- CMD...`
    Command(Vec<String>),
    /// `cage run NAME -- ARGS...`: the harness's program with these args.
    Harness(Vec<String>),
}

/// A command ready to run: the cage is running, the port closed, the env
/// file written, the lock held.
pub struct Prepared<'a> {
    host: &'a Host,
    container: String,
    process: Process,
    _lock: SessionLock,
    /// Served until the turn ends (dropped after the cage is stopped).
    _gateway: crate::gateway::Gateway,
    /// Variables left out of the env file, and why: for the face to show.
    pub warnings: Vec<String>,
}

/// How it ended.
#[derive(Debug)]
pub struct Ended {
    /// The command's exit code.
    pub code: i32,
    /// Set when the cage could not be stopped afterwards.
    pub stop_error: Option<Error>,
}

/// `cage run` on a session taken out of its cage: its harness on the
/// machine itself, in its folder (seed: "taking the session out of the
/// cage ... work as before").
pub fn prepare_uncaged(ctx: &Context, name: &str, args: Vec<String>) -> Result<Uncaged> {
    let (lock, record) = ctx.store.lock_and_load(name)?;
    if record.cage.is_some() {
        return Err(Error::bad_input(format!("session {name} is in a cage")));
    }
    let (configured, program) = match record.harness {
        crate::harness::Harness::Claude => (ctx.settings.claude.clone(), "claude"),
        crate::harness::Harness::Pi => (ctx.settings.pi.clone(), "pi"),
    };
    let path = configured
        .or_else(|| crate::settings::find_program(program, ctx.settings.path_var.as_deref()))
        .ok_or_else(|| {
            Error::failed(format!(
                "there is no {program} program on this machine: install it, or set [harness] {program} in the config"
            ))
        })?;
    Ok(Uncaged {
        notice: format!(
            "session {name} is not in a cage: running {} on this machine, in {}",
            path.display(),
            record.dir.display()
        ),
        process: Process::new(&path, program).args(args).cwd(&record.dir),
        _lock: lock,
    })
}

/// A harness to run on the machine, out of any cage.
pub struct Uncaged {
    /// Said on stderr before it runs.
    pub notice: String,
    process: Process,
    _lock: SessionLock,
}

impl Uncaged {
    pub fn run(self) -> Result<i32> {
        self.process.interactive()
    }
}

/// Is the session out of its cage? (`cage run` then runs on the machine.)
pub fn is_uncaged(ctx: &Context, name: &str) -> Result<bool> {
    Ok(ctx.store.load(name)?.cage.is_none())
}

pub fn prepare<'a>(ctx: &'a Context, name: &str, what: What, tty: bool) -> Result<Prepared<'a>> {
    let (lock, record) = ctx.store.lock_and_load(name)?;
    let cage = cage_of(&record)?;
    let cmd = match what {
        What::Command(cmd) => cmd,
        What::Harness(args) => {
            let program = cage
                .program
                .clone()
                .or_else(|| (record.harness == crate::harness::Harness::Pi).then(|| PathBuf::from("pi")))
                .ok_or_else(|| {
                    Error::failed(format!(
                        "session {name} has no claude program: none was found when its cage was made; \
                         set [harness] claude in the config, then make the session again"
                    ))
                })?;
            let mut cmd = vec![program.to_string_lossy().into_owned()];
            cmd.extend(args);
            cmd
        }
    };
    let host = ctx.host_for_session()?;
    // Its own login, checked before the cage starts; the gateway reads it
    // again at every request and it never enters the cage.
    if let Some(s) = &cage.sealed {
        super::sealed::read_token(&s.token_file)?;
    }
    ctx.store.ensure()?;
    ensure_running(ctx, host, &record)?;
    // The model gateway, served by this process for as long as the turn
    // runs (dropped with `Prepared`); the env file is written once its
    // port is known.
    let gateway = match crate::gateway::open(ctx, host, &record) {
        Ok(g) => g,
        Err(e) => {
            let _ = host.podman.stop(&cage.container);
            return Err(Error::failed(format!(
                "{}; the cage was stopped again",
                e.message
            )));
        }
    };
    let url = gateway.base_url();
    let plan = match &cage.sealed {
        Some(_) => spec::sealed_env_plan(&record.name, &cage.image_path, Some(&url)),
        None => spec::env_plan(
            &EnvRequest {
                session: &record.name,
                harness: record.harness,
                home: &ctx.settings.home,
                harness_dir: &cage.harness_dir,
                image_path: &cage.image_path,
                pass_env: &ctx.settings.pass_env,
                options: &cage.options,
                gateway: Some(&url),
            },
            &ctx.env,
        ),
    };
    let env_file = ctx.store.env_file(&cage.container);
    session::write_atomic(&env_file, envfile::render(&plan.vars).as_bytes(), 0o600)?;
    let args = argv::exec(&cage.container, &record.dir, &env_file, tty, &cmd);
    Ok(Prepared {
        host,
        container: cage.container.clone(),
        process: host.podman.process(&args),
        _lock: lock,
        _gateway: gateway,
        warnings: plan
            .left_out
            .iter()
            .map(|(n, why)| format!("{n} is left out of the cage's environment: {why}"))
            .collect(),
    })
}

impl Prepared<'_> {
    /// Run the command, then stop the cage, whatever the command's outcome.
    pub fn run(self) -> Result<Ended> {
        let result = self.process.interactive();
        let stop_error = self.host.podman.stop(&self.container).err();
        let code = result?;
        Ok(Ended { code, stop_error })
    }
}
