//! A turn's watcher and its servers, opened on its started cage
//! (`Step::Watcher`, `Step::Gateway`, `Step::Socket`).

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::host::Host;
use crate::host::podman::Podman;
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

/// Open the turn's model gateway on its started cage (`pid`, its first
/// process), and point pi's copy of models.json at it, in the file the
/// cage has mounted.
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
        if let Some(p) = pi {
            crate::cage::pi_models::write_in_place(
                &ctx.store.settings_copy_dir(&cage.container),
                &p.borrow().copy_text(&g.base_url()),
            )?;
        }
        Ok(g)
    });
    opened.map_err(stopped_again)
}

/// Serve a session's socket in its cage's proxy folder for one turn; its
/// failure said as one after the start.
pub fn open_socket(
    ctx: &Context,
    record: &session::Record,
) -> Result<crate::turn::cage_socket::Socket> {
    turn_servers::open_socket(ctx, record).map_err(stopped_again)
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

    /// The gateway or the cage's socket failing once the cage started: the
    /// error keeps its kind and its process's exit (it was re-worded as a
    /// failure, so a busy session answered exit 1 and a 500).
    #[test]
    fn a_failure_after_the_start_keeps_its_kind() {
        use crate::error::Kind;
        let e = stopped_again(Error::busy("session x is held by pid 7"));
        assert_eq!(e.kind, Kind::Busy);
        assert_eq!(
            e.message,
            "session x is held by pid 7; the cage was stopped again"
        );
        let e = stopped_again(Error::bad_input("models.json: it is not valid JSON"));
        assert_eq!(e.kind, Kind::BadInput);
        let e = stopped_again(Error::exited(
            Kind::PodmanFailed,
            "podman exec: no",
            Some(125),
            "Error: no\n",
        ));
        assert_eq!(e.kind, Kind::PodmanFailed);
        assert_eq!(e.exited.as_ref().and_then(|x| x.status), Some(125));
    }
}
