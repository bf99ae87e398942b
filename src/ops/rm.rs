//! `cage rm`: remove a session: its container (`podman rm -f`, and with it
//! everything installed in it), its env file, its private home and proxy
//! folder, and its record: nothing of the session is left to clean up.

use std::path::PathBuf;

use serde::Serialize;

use super::Context;
use crate::error::Result;

#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    pub session: String,
    pub container: Option<String>,
    /// Files and folders removed, besides the container.
    pub files: Vec<PathBuf>,
}

pub fn rm(ctx: &Context, name: &str) -> Result<Removed> {
    let (_lock, record) = ctx.store.lock_and_load(name)?;
    _lock.note("rm");
    let mut files = Vec::new();
    let container = match &record.cage {
        Some(cage) => {
            // The container goes first: if podman cannot remove it, the
            // record stays, so the session can be removed again later.
            let host = ctx.host_for_session()?;
            files.extend(super::make::remove_cage(ctx, host, cage)?);
            Some(cage.container.clone())
        }
        None => None,
    };
    files.push(ctx.store.record_path(name));
    if ctx.store.history_path(name).exists() {
        files.push(ctx.store.history_path(name));
    }
    ctx.store.remove(name)?;
    Ok(Removed {
        session: record.name,
        container,
        files,
    })
}
