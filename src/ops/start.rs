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
    let (_lock, record) = super::plan::lock_and_load(ctx, name)?;
    _lock.note("start");
    // A cage a killed turn left running has its marker still: stopped and
    // the marker gone, so that the cage started here is not taken for the
    // turn's later.
    super::dead_turn::end_held(ctx, &record);
    let cage = cage_of(&record)?;
    let host = ctx.host_for_session()?;
    ensure_running(ctx, host, &record)?;
    Ok(Started {
        session: record.name.clone(),
        container: cage.container.clone(),
    })
}
