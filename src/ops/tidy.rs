//! What is finished before a look (`cage ls`, `cage show`, and serve's
//! answers to them): what a command that died left undone (its intent, a
//! temporary file), and the cage a turn killed with its watcher left
//! running (`dead_turn.rs`). The looks themselves (`listing::ls`,
//! `show::show`) change nothing: the faces call these first, and a warning
//! of the context says what was done.

use super::Context;
use super::dead_turn::reap_dead_turn;

/// Before the sessions are listed: every session's.
pub fn everything(ctx: &Context) {
    super::plan::repair_all(ctx);
    let markers = ctx.store.turn_markers();
    if markers.is_empty() || ctx.host().is_err() {
        return;
    }
    for name in markers {
        if let Ok(record) = ctx.store.load(&name) {
            reap_dead_turn(ctx, &record);
        }
    }
}

/// Before one session is shown: its dead turn's cage stopped.
pub fn session(ctx: &Context, name: &str) {
    if let Ok(record) = ctx.store.load(name) {
        reap_dead_turn(ctx, &record);
    }
}
