//! `cage stop`: stop a session's container, and with it everything the
//! session left running: a caged session may not keep processes running
//! after its turn's process ends.

use serde::Serialize;

use super::plan::Step;
use super::{Context, cage_of};
use crate::error::{Error, Kind, Result};
use crate::state::session::Damaged;

#[derive(Debug, Clone, Serialize)]
pub struct Stopped {
    pub session: String,
    pub container: String,
    /// False when it was not running.
    pub was_running: bool,
}

/// What `cage stop --all` did: the cages stopped (or found not running),
/// the sessions left as they were because another command held them, and
/// the records that do not read (whose container it cannot name).
#[derive(Debug, Clone, Serialize)]
pub struct StoppedAll {
    pub stopped: Vec<Stopped>,
    pub busy: Vec<String>,
    pub damaged: Vec<Damaged>,
}

impl StoppedAll {
    /// The error to end with: a damaged record (exit 1) before a busy
    /// session (exit 3), naming each; none when every cage was stopped.
    pub fn error(&self) -> Option<Error> {
        let damaged: Vec<String> = self.damaged.iter().map(|d| d.name.clone()).collect();
        (!self.busy.is_empty() || !damaged.is_empty())
            .then(|| Error::not_stopped(self.busy.clone(), damaged))
    }
}

/// `cage stop --all`: every cage of this user that runs. A session another
/// command holds is passed over and named at the end, so one long `exec`
/// does not keep every other cage running; a session removed meanwhile is
/// passed over too, and so is a record that does not read, named at the
/// end like a busy one, so that one bad file does not keep every cage
/// running.
pub fn stop_all(ctx: &Context) -> Result<StoppedAll> {
    let (records, damaged) = ctx.store.list_readable()?;
    let mut out = StoppedAll {
        stopped: Vec::new(),
        busy: Vec::new(),
        damaged,
    };
    for record in records {
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
    let (_lock, record) = super::plan::lock_and_load(ctx, name)?;
    _lock.note("stop");
    let cage = cage_of(&record)?;
    let host = ctx.host_for_session()?;
    // The one fact: does it run?
    let running = host
        .podman
        .container(&cage.container)?
        .is_some_and(|s| s.running);
    super::plan::execute(ctx, Some(host), steps(&cage.container, running))?;
    Ok(Stopped {
        session: record.name.clone(),
        container: cage.container.clone(),
        was_running: running,
    })
}

/// Pure: the plan of a stop: `podman stop` of a cage that runs, nothing
/// of one that does not.
pub fn steps(container: &str, running: bool) -> Vec<Step<'static>> {
    if !running {
        return Vec::new();
    }
    vec![Step::Stop {
        container: container.to_string(),
        best_effort: false,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_sessions_are_named_at_the_end() {
        let mut all = StoppedAll {
            stopped: vec![],
            busy: vec![],
            damaged: vec![],
        };
        assert_eq!(all.error(), None);
        all.busy.push("a".into());
        let e = all.error().unwrap();
        assert_eq!(e.kind, Kind::Busy);
        assert_eq!(
            e.message(),
            "not stopped, busy: a (another shrooms-agent command, an exec or run, is using it); \
             stop it when it ends"
        );
        all.busy.push("b".into());
        assert_eq!(
            all.error().unwrap().message(),
            "not stopped, busy: a, b (another shrooms-agent command, an exec or run, is using \
             each); stop them when it ends"
        );
    }

    /// A record that does not read is named, and ends the command as a
    /// failure (exit 1) even beside a busy session.
    #[test]
    fn a_damaged_record_is_named_and_fails() {
        let all = StoppedAll {
            stopped: vec![],
            busy: vec!["b".into()],
            damaged: vec![Damaged {
                name: "d".into(),
                error: Error::failed("bad"),
            }],
        };
        let e = all.error().unwrap();
        assert_eq!(e.kind, Kind::Failed);
        assert_eq!(
            e.message(),
            "not stopped, the record does not read: d (`shrooms-agent cage ls` says why); mend \
             the file or move it away, then stop it again; not stopped, busy: b (another \
             shrooms-agent command, an exec or run, is using it); stop it when it ends"
        );
    }
}
