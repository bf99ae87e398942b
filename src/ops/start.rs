//! `cage start`: start a session's container and close the agent port.

use serde::Serialize;

use super::{Context, cage_of, ensure_running};
use crate::error::Result;

#[derive(Debug, Clone, Serialize)]
pub struct Started {
    pub session: String,
    pub container: String,
}

pub fn start(ctx: &Context, name: &str) -> Result<Started> {
    // A cage a killed turn left running has its marker still: stopped and
    // the marker gone, so that the cage started here is not taken for the
    // turn's later.
    if let Ok(record) = ctx.store.load(name) {
        super::dead_turn::reap_dead_turn(ctx, &record);
    }
    let (_lock, record) = super::plan::lock_and_load(ctx, name)?;
    _lock.note("start");
    let cage = cage_of(&record)?;
    let host = ctx.host_for_session()?;
    ensure_running(ctx, host, &record)?;
    Ok(Started {
        session: record.name.clone(),
        container: cage.container.clone(),
    })
}
