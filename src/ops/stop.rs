//! `cage stop`: stop a session's container, and with it everything the
//! session left running: a caged session may not keep processes running
//! after its turn's process ends.

use serde::Serialize;

use super::{Context, cage_of};
use crate::error::{Error, Kind, Result};

#[derive(Debug, Clone, Serialize)]
pub struct Stopped {
    pub session: String,
    pub container: String,
    /// False when it was not running.
    pub was_running: bool,
}

/// What `cage stop --all` did: the cages stopped (or found not running),
/// and the sessions left as they were because another command held them.
#[derive(Debug, Clone, Serialize)]
pub struct StoppedAll {
    pub stopped: Vec<Stopped>,
    pub busy: Vec<String>,
}

impl StoppedAll {
    /// The error to end with when a session was busy (exit 3), naming them.
    pub fn busy_error(&self) -> Option<Error> {
        (!self.busy.is_empty()).then(|| {
            Error::busy(format!(
                "not stopped, busy: {} (another shrooms-agent command, an exec or run, is using \
                 {}); stop {} when it ends",
                self.busy.join(", "),
                if self.busy.len() == 1 { "it" } else { "each" },
                if self.busy.len() == 1 { "it" } else { "them" },
            ))
        })
    }
}

/// `cage stop --all`: every cage of this user that runs. A session another
/// command holds is passed over and named at the end, so one long `exec`
/// does not keep every other cage running; a session removed meanwhile is
/// passed over too.
pub fn stop_all(ctx: &Context) -> Result<StoppedAll> {
    let mut out = StoppedAll {
        stopped: Vec::new(),
        busy: Vec::new(),
    };
    for record in ctx.store.list()? {
        if record.cage.is_none() {
            continue;
        }
        match stop(ctx, &record.name) {
            Ok(s) => out.stopped.push(s),
            Err(e) if e.kind == Kind::Busy => out.busy.push(record.name),
            Err(e) if e.kind == Kind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

pub fn stop(ctx: &Context, name: &str) -> Result<Stopped> {
    let (_lock, record) = ctx.store.lock_and_load(name)?;
    _lock.note("stop");
    let cage = cage_of(&record)?;
    let host = ctx.host_for_session()?;
    let running = host
        .podman
        .container(&cage.container)?
        .map(|s| s.running)
        .unwrap_or(false);
    if running {
        host.podman.stop(&cage.container)?;
    }
    Ok(Stopped {
        session: record.name.clone(),
        container: cage.container.clone(),
        was_running: running,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_sessions_are_named_at_the_end() {
        let mut all = StoppedAll {
            stopped: vec![],
            busy: vec![],
        };
        assert_eq!(all.busy_error(), None);
        all.busy.push("a".into());
        let e = all.busy_error().unwrap();
        assert_eq!(e.kind, Kind::Busy);
        assert_eq!(
            e.message,
            "not stopped, busy: a (another shrooms-agent command, an exec or run, is using it); \
             stop it when it ends"
        );
        all.busy.push("b".into());
        assert_eq!(
            all.busy_error().unwrap().message,
            "not stopped, busy: a, b (another shrooms-agent command, an exec or run, is using \
             each); stop them when it ends"
        );
    }
}
