//! `cage rm`: remove a session: its container (`podman rm -f`, and with it
//! everything installed in it), its env file, its private home and proxy
//! folder, and its record (seed, "Cleaning up").

use std::path::PathBuf;

use serde::Serialize;

use super::Context;
use crate::error::Result;
use crate::session;

#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    pub session: String,
    pub container: Option<String>,
    /// Files and folders removed, besides the container.
    pub files: Vec<PathBuf>,
}

pub fn rm(ctx: &Context, name: &str) -> Result<Removed> {
    let record = ctx.store.load(name)?;
    let _lock = ctx.store.lock(name)?;
    let mut files = Vec::new();
    let container = match &record.cage {
        Some(cage) => {
            // The container goes first: if podman cannot remove it, the
            // record stays, so the session can be removed again later.
            let host = ctx.host_for_session()?;
            host.podman.rm_force(&cage.container)?;
            for f in [
                ctx.store.env_file(&cage.container),
                ctx.store.cage_dir(&cage.container),
            ] {
                if f.exists() {
                    if f.is_dir() {
                        session::remove_dir_if_there(&f)?;
                    } else {
                        session::remove_file_if_there(&f)?;
                    }
                    files.push(f);
                }
            }
            Some(cage.container.clone())
        }
        None => None,
    };
    files.push(ctx.store.record_path(name));
    ctx.store.remove(name)?;
    Ok(Removed {
        session: record.name,
        container,
        files,
    })
}
