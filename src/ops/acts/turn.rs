//! A turn's watcher and its servers, opened on its started cage
//! (`Step::Watcher`, `Step::Gateway`, `Step::Socket`), and what its
//! process reads (`Step::TurnEnv`).

use std::path::PathBuf;

use crate::cage::spec::{self, EnvRequest};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::host::podman::{Podman, envfile};
use crate::host::process::{self as runner, Watcher};
use crate::ops::{Context, cage_of, turn_servers};
use crate::state::session::{self, SessionLock};

/// Start the turn's watcher: this program again, as the hidden `cage
/// watch-turn`, given the session's lock. Its output goes to `turn.log` in
/// the cage's folder of the state (outside every mount), where there is one.
pub fn start_watcher(
    ctx: &Context,
    podman: &Podman,
    session: &str,
    container: &str,
    lock: &SessionLock,
) -> Result<Watcher> {
    let program = PathBuf::from(crate::cage::tools::THIS_PROGRAM);
    let dir = ctx.store.cage_dir(container);
    let log = dir.is_dir().then(|| dir.join("turn.log"));
    let lock_fd = lock.fd();
    runner::spawn_watcher(
        &program,
        |watched, ready| {
            [
                "cage",
                "watch-turn",
                "--session",
                session,
                "--container",
                container,
                "--podman",
                &podman.program().to_string_lossy(),
                "--lock-fd",
                &lock_fd.to_string(),
                "--pipe-fd",
                &watched.to_string(),
                "--ready-fd",
                &ready.to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        },
        log.as_deref(),
        &[lock_fd],
    )
}

/// End a turn that died with its watcher: its cage stopped where it runs,
/// its marker removed. The line saying so when the cage was running.
pub fn end_dead_turn(
    ctx: &Context,
    podman: &Podman,
    session: &str,
    container: &str,
) -> Result<Option<crate::error::Warning>> {
    let running = podman.container(container)?.is_some_and(|c| c.running);
    if running {
        podman.stop(container)?;
    }
    session::remove_file_if_there(&ctx.store.turn_marker(session))?;
    Ok(running.then(|| crate::error::Warning::DeadTurnStopped {
        session: session.to_string(),
        container: container.to_string(),
    }))
}

/// Open the turn's model gateway on its started cage (`pid`, its first
/// process), and point pi's copy of models.json, or Codex's or opencode's
/// copy of its config, at it, in the file the cage has mounted.
pub fn open_gateway(
    ctx: &Context,
    host: &Host,
    record: &session::Record,
    pid: i64,
    pi: Option<&std::cell::RefCell<crate::cage::pi_models::Plan>>,
) -> Result<crate::turn::gateway::Gateway> {
    let cage = cage_of(record)?;
    let routes = pi
        .map(|p| std::mem::take(&mut p.borrow_mut().routes))
        .unwrap_or_default();
    let opened = turn_servers::open_gateway(ctx, host, record, pid, routes).and_then(|g| {
        let copy_dir = ctx.store.settings_copy_dir(&cage.container);
        if let Some(p) = pi {
            crate::cage::pi_models::write_in_place(
                &copy_dir,
                &p.borrow().copy_text(&g.base_url()),
            )?;
        }
        if cage.sealed.is_none() {
            crate::ops::write_gateway_copy(
                record.harness,
                &cage.harness_dir,
                &copy_dir,
                Some(&g.base_url()),
                &record.dir,
            )?;
        }
        Ok(g)
    });
    opened.map_err(stopped_again)
}

/// Pure: the warning for a `--github` cage made before GitHub's token
/// stayed outside, which still mounts the machine's gh login folder
/// (`home`/.config/gh): the gateway's routes work there too, but the
/// login is in the cage until `cage move` makes it again.
pub fn github_login_mounted(
    record: &session::Record,
    home: &std::path::Path,
) -> Option<crate::error::Warning> {
    let cage = record.cage.as_ref()?;
    let gh = home.join(".config/gh");
    (cage.options.github && cage.mount_sources.iter().any(|m| m.path == gh)).then(|| {
        crate::error::Warning::GitHubLoginMounted {
            session: record.name.clone(),
            gh,
        }
    })
}

/// Serve a session's socket in its cage's proxy folder for one turn; its
/// failure said as one after the start.
pub fn open_socket(
    ctx: &Context,
    record: &session::Record,
) -> Result<crate::turn::cage_socket::Socket> {
    turn_servers::open_socket(ctx, record).map_err(stopped_again)
}

/// What a turn's process reads, written (`Step::TurnEnv`): the env file
/// `podman exec` is given, and each variable left out of it with why.
pub struct TurnEnv {
    pub file: PathBuf,
    pub left_out: Vec<crate::error::Warning>,
}

/// Write what the turn's process reads, pointed at its model gateway
/// (`url`): Claude Code's `.claude.json` in the cage's home, then the env
/// file. Its failure said as one after the start.
pub fn write_env(ctx: &Context, record: &session::Record, url: &str) -> Result<TurnEnv> {
    let cage = cage_of(record)?;
    let plan = env_plan(ctx, record, cage, url);
    let file = write_env_files(ctx, record, cage, &plan).map_err(stopped_again)?;
    let left_out = plan
        .left_out
        .iter()
        .map(|(name, why)| crate::error::Warning::EnvLeftOut {
            name: name.clone(),
            why: why.clone(),
        })
        .collect();
    Ok(TurnEnv { file, left_out })
}

/// `.claude.json` and the env file of `plan`; the env file's path.
fn write_env_files(
    ctx: &Context,
    record: &session::Record,
    cage: &session::CageRecord,
    plan: &spec::EnvPlan,
) -> Result<PathBuf> {
    // A fresh cage goes straight to the prompt: its own .claude.json says
    // onboarding is done, the project trusted, and the key it is given
    // approved (`cage_files::seeded_claude_json`).
    if record.harness == crate::cage::harness::Harness::Claude {
        let key = plan
            .vars
            .iter()
            .find(|(n, _)| n == "ANTHROPIC_API_KEY")
            .map(|(_, v)| v.as_str());
        crate::cage::cage_files::seed_claude_json(
            &ctx.store.private_home(&cage.container),
            &record.dir,
            key,
        )?;
    }
    let file = ctx.store.env_file(&cage.container);
    // Written again at each turn: not flushed to disk.
    let text = envfile::render(&plan.vars);
    session::write_atomic_unsynced(&file, text.as_bytes(), 0o600)?;
    Ok(file)
}

/// The turn's environment, pointed at its model gateway (`url`).
fn env_plan(
    ctx: &Context,
    record: &session::Record,
    cage: &session::CageRecord,
    url: &str,
) -> spec::EnvPlan {
    match &cage.sealed {
        Some(_) => spec::sealed_env_plan(&record.name, &cage.image_path, cage.linked, Some(url)),
        None => spec::env_plan(
            &EnvRequest {
                session: &record.name,
                harness: record.harness,
                home: &ctx.settings.home,
                harness_dir: &cage.harness_dir,
                image_path: &cage.image_path,
                linked: cage.linked,
                chosen: ctx.settings.chosen(),
                options: &cage.options,
                gateway: Some(url),
            },
            &ctx.env,
        ),
    }
}

/// A turn's preparation failed after its cage started, and the cage was
/// stopped: the error as it was (its kind gives the exit code and the HTTP
/// status: a busy session stays busy, a bad models.json bad input), with
/// what was done after it.
pub fn stopped_again(e: Error) -> Error {
    e.then("the cage was stopped again")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a `--github` cage that mounts the machine's gh folder is
    /// warned about.
    #[test]
    fn an_old_github_cage_is_warned_about() {
        let home = std::path::Path::new("/home/u");
        let mut record = session::sample_record("web");
        let mut cage = session::sample_cage("shrooms-web-1");
        cage.mount_sources.push(session::MountSource {
            path: home.join(".config/gh"),
            led_to: home.join(".config/gh"),
            links: None,
        });
        record.cage = Some(cage.clone());
        assert_eq!(github_login_mounted(&record, home), None);
        cage.options.github = true;
        record.cage = Some(cage.clone());
        assert!(github_login_mounted(&record, home).is_some());
        cage.mount_sources.clear();
        record.cage = Some(cage);
        assert_eq!(github_login_mounted(&record, home), None);
    }

    /// The gateway or the cage's socket failing once the cage started: the
    /// error keeps its kind and its process's exit (it was re-worded as a
    /// failure, so a busy session answered exit 1 and a 500).
    #[test]
    fn a_failure_after_the_start_keeps_its_kind() {
        use crate::error::Kind;
        let e = stopped_again(Error::busy("session x is held by pid 7"));
        assert_eq!(e.kind, Kind::Busy);
        assert_eq!(
            e.message(),
            "session x is held by pid 7; the cage was stopped again"
        );
        let e = stopped_again(Error::bad_input("models.json: it is not valid JSON"));
        assert_eq!(e.kind, Kind::BadInput);
        let e = stopped_again(Error::ran(
            Kind::PodmanFailed,
            "podman exec",
            crate::error::Exited {
                call: "podman exec".into(),
                status: Some(125),
                stderr: "Error: no\n".into(),
            },
        ));
        assert_eq!(e.kind, Kind::PodmanFailed);
        assert_eq!(e.exited().and_then(|x| x.status), Some(125));
        assert_eq!(
            e.message(),
            "podman exec: Error: no; the cage was stopped again"
        );
    }
}
