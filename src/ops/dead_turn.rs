//! A turn that died with its watcher (both SIGKILLed: nothing was left to
//! stop its cage): its cage stopped and its marker removed, by one step
//! (`Step::EndDeadTurn`), run by the next command that takes the session
//! (`cage exec`, `cage run`, `cage start`) or looks at it (`cage show`,
//! `cage ls`), or by serve. `exec.rs` says how a turn ends otherwise.

use super::Context;
use super::plan::{self, Step};
use crate::state::session::Record;

/// Pure: the step that ends a session's dead turn, where its marker is
/// left (`marker_there`) and the caller holds the session's lock (so no
/// turn that lives made it). None for a session without a cage.
pub fn steps(record: &Record, marker_there: bool) -> Vec<Step<'static>> {
    match &record.cage {
        Some(cage) if marker_there => vec![Step::EndDeadTurn {
            session: record.name.clone(),
            container: cage.container.clone(),
        }],
        _ => Vec::new(),
    }
}

/// For a command that holds the session's lock and is about to start its
/// cage: a marker left is a turn that died with its watcher. Its cage is
/// stopped first (this command starts it afresh, without what the dead
/// turn left running in it), said as a warning of the context.
pub fn end_held(ctx: &Context, record: &Record) {
    let marker_there = ctx.store.turn_marker(&record.name).exists();
    end(ctx, record, steps(record, marker_there));
}

/// For a command that looks at a session (`cage show`, `cage ls`, serve):
/// a dead turn's cage stopped, under the session's lock taken for it
/// (none is taken where there is no marker, or its lock is held); a
/// warning of the context says so, or why it could not be (the command
/// that looked goes on).
pub fn reap_dead_turn(ctx: &Context, record: &Record) {
    if record.cage.is_none() {
        return;
    }
    let _lock = match ctx.store.dead_turn(&record.name) {
        Ok(Some(lock)) => lock,
        Ok(None) => return,
        Err(e) => return ctx.warn(could_not(record, &e)),
    };
    end(ctx, record, steps(record, true));
}

fn end(ctx: &Context, record: &Record, steps: Vec<Step>) {
    if steps.is_empty() {
        return;
    }
    match ctx
        .host_for_session()
        .and_then(|host| plan::execute(ctx, Some(host), steps))
    {
        Ok(ran) => ran.warnings.into_iter().for_each(|w| ctx.warn(w)),
        Err(e) => ctx.warn(could_not(record, &e)),
    }
}

fn could_not(record: &Record, e: &crate::error::Error) -> crate::error::Warning {
    crate::error::Warning::DeadTurnNotStopped {
        session: record.name.clone(),
        error: Box::new(e.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A marker left, for a caged session: one step, which names the
    /// cage; no marker, or no cage: none.
    #[test]
    fn a_dead_turn_is_one_step_where_its_marker_is_left() {
        let container = "shrooms-web-abcdef";
        let record = Record {
            cage: Some(crate::state::session::sample_cage(container)),
            ..crate::state::session::sample_record("web")
        };
        let described = |s: Vec<Step>| s.iter().map(Step::describe).collect::<Vec<_>>();
        assert_eq!(
            described(steps(&record, true)),
            [format!("end dead turn {container}")]
        );
        assert!(steps(&record, false).is_empty());
        let uncaged = Record {
            cage: None,
            ..record
        };
        assert!(steps(&uncaged, true).is_empty());
    }
}
