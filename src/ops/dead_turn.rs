//! A turn that died with its watcher (both SIGKILLed: nothing was left to
//! stop its cage): its cage stopped and its marker removed by the next
//! command that looks at the session (`cage exec`, `cage start`, `cage
//! show`, `cage ls`), or by serve. `exec.rs` says how a turn ends
//! otherwise.

use super::Context;
use crate::error::Result;
use crate::state::session;

/// Stop the cage of a turn whose process and watcher both died (both
/// SIGKILLed: nothing was left to stop it), and remove its marker. Some
/// line saying so when the cage was running; None when there was no such
/// turn (a cage `cage start` started has no marker, a live turn holds the
/// lock).
pub fn stop_dead_turn(ctx: &Context, record: &session::Record) -> Result<Option<String>> {
    let Some(cage) = &record.cage else {
        return Ok(None);
    };
    let Some(_lock) = ctx.store.dead_turn(&record.name)? else {
        return Ok(None);
    };
    let podman = &ctx.host_for_session()?.podman;
    let running = podman
        .container(&cage.container)?
        .is_some_and(|c| c.running);
    if running {
        podman.stop(&cage.container)?;
    }
    session::remove_file_if_there(&ctx.store.turn_marker(&record.name))?;
    Ok(running.then(|| {
        format!(
            "stopped {}: the turn on session {} ended without stopping it (its process and its \
             watcher were killed)",
            cage.container, record.name
        )
    }))
}

/// [`stop_dead_turn`], its line kept as a warning of the context for the
/// face to say (a failure too: the command that looked goes on).
pub fn reap_dead_turn(ctx: &Context, record: &session::Record) {
    let line = match stop_dead_turn(ctx, record) {
        Ok(Some(line)) => line,
        Ok(None) => return,
        Err(e) => format!(
            "session {}'s turn ended without stopping its cage, which could not be stopped: {}",
            record.name, e.message
        ),
    };
    ctx.warn(line);
}
