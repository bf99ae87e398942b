//! Whether a session's cage is idle: nothing but its first process runs
//! there. `cage move`, `cage rename` and `cage bring` act only on an idle
//! cage, and refuse a busy one with what runs in it.

use crate::error::{Error, Result, SessionProblem};
use crate::host::Host;
use crate::state::session::CageRecord;

/// Idle: no command holds the session (the lock, taken by the caller) and
/// nothing but its first process runs in its cage: the machine's catatonit
/// (`<init path> -P`), or `sleep infinity` in a cage made before that.
/// `verb`: what the refusal says to do once it is idle. Idle, whether its
/// cage runs.
pub(super) fn check_idle(
    host: &Host,
    session: &str,
    cage: &CageRecord,
    verb: &str,
) -> Result<bool> {
    let running = host
        .podman
        .container(&cage.container)?
        .is_some_and(|s| s.running);
    if !running {
        return Ok(false);
    }
    let busy = not_the_init(&cage.container, host.podman.top_args(&cage.container)?);
    if busy.is_empty() {
        Ok(true)
    } else {
        Err(busy_in_its_cage(session, busy, verb))
    }
}

/// Pure: of the command lines `podman top` shows of a cage, those that are
/// not its first process: the tool's init (its path alone), or in a cage
/// made before it the machine's catatonit in pause mode (`-P`) or, earlier
/// still, the image's `sleep infinity`.
fn not_the_init(container: &str, running: Vec<String>) -> Vec<String> {
    let init = crate::host::podman::argv::init_path(container);
    let catatonit = format!("{init} -P");
    running
        .into_iter()
        .filter(|args| *args != init && *args != catatonit && args != "sleep infinity")
        .collect()
}

/// A session refused as busy for what runs in its cage (`running`: each
/// process's command line), kept as data for `--json` and HTTP.
pub(crate) fn busy_in_its_cage(session: &str, running: Vec<String>, verb: &str) -> Error {
    Error::session(
        session,
        SessionProblem::Running {
            running,
            verb: verb.to_string(),
        },
    )
}

#[cfg(test)]
mod tests {
    /// The first process, however a cage was made, is no work of its own;
    /// anything else is.
    #[test]
    fn what_runs_beside_the_init() {
        let c = "shrooms-web-0a1b2c";
        let init = crate::host::podman::argv::init_path(c);
        let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(super::not_the_init(c, lines(&[&init])).is_empty());
        assert!(super::not_the_init(c, lines(&[&format!("{init} -P")])).is_empty());
        assert!(super::not_the_init(c, lines(&["sleep infinity"])).is_empty());
        assert_eq!(
            super::not_the_init(c, lines(&[&init, "bash", &format!("{init} -x")])),
            lines(&["bash", &format!("{init} -x")])
        );
        // Another cage's init is not this one's.
        let other = crate::host::podman::argv::init_path("shrooms-x-0a1b2c");
        assert_eq!(super::not_the_init(c, lines(&[&other])), lines(&[&other]));
    }

    /// The error module's sample of this refusal (its golden renderings
    /// are checked there) is this refusal, word for word.
    #[test]
    fn the_busy_sample_is_this_refusal() {
        let running = vec!["bash".to_string(), "claude --resume".to_string()];
        assert_eq!(
            super::busy_in_its_cage("s", running, "move"),
            crate::error::samples::busy_in_its_cage()
        );
    }
}
