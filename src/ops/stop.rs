//! `cage stop`: stop a session's container, and with it everything the
//! session left running (seed, "A caged session cannot ... keep processes
//! running after its turn's process ends").

use serde::Serialize;

use super::{Context, cage_of};
use crate::error::Result;

#[derive(Debug, Clone, Serialize)]
pub struct Stopped {
    pub session: String,
    pub container: String,
    /// False when it was not running.
    pub was_running: bool,
}

/// `cage stop --all`: every cage of this user that runs.
pub fn stop_all(ctx: &Context) -> Result<Vec<Stopped>> {
    let mut out = Vec::new();
    for record in ctx.store.list()? {
        if record.cage.is_some() {
            out.push(stop(ctx, &record.name)?);
        }
    }
    Ok(out)
}

pub fn stop(ctx: &Context, name: &str) -> Result<Stopped> {
    let (_lock, record) = ctx.store.lock_and_load(name)?;
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
