//! A cage's own files on the machine, made and taken back: the step that
//! makes them runs through `MakeFiles` (the create decision's plan
//! implements it), so that the executor holds no operation's type.

use std::path::PathBuf;

use crate::error::Result;
use crate::host::Host;
use crate::ops::Context;
use crate::ops::protect;
use crate::state::session;

/// What a cage's files step runs: made by a decision above the executor.
pub trait MakeFiles {
    /// The cage's container name, for the step's description.
    #[cfg(test)]
    fn container(&self) -> &str;
    /// Make the folders and files; what was made goes into `undo`, which
    /// the executor takes back when a later step fails.
    fn make_files(&self, ctx: &Context, undo: &mut FilesUndo) -> Result<()>;
}

/// Remove a cage: the container (and everything installed in it), its env
/// file and its private folders. Returns what was removed besides the
/// container.
pub fn remove_container(ctx: &Context, host: &Host, container: &str) -> Result<Vec<PathBuf>> {
    host.podman.rm_force(container)?;
    let mut files = Vec::new();
    for f in [ctx.store.env_file(container), ctx.store.cage_dir(container)] {
        if f.is_dir() {
            if let Err(e) = session::remove_dir_if_there(&f) {
                // Rootless, what the cage's root made under another of its
                // uids belongs to a subordinate uid of the user, which only
                // the user namespace can remove.
                if !host.rootless {
                    return Err(e);
                }
                host.podman.unshare_rm(&f)?;
            }
            files.push(f);
        } else if f.exists() {
            session::remove_file_if_there(&f)?;
            files.push(f);
        }
    }
    Ok(files)
}

/// What the cage's files step made, to take back when a later step fails
/// (the container is the executor's own step).
#[derive(Default)]
pub struct FilesUndo {
    pub(in crate::ops) dirs: Vec<PathBuf>,
    /// Protected paths made empty in the project: removed if still empty.
    pub(in crate::ops) made: Vec<PathBuf>,
}

impl FilesUndo {
    pub fn run(&self) {
        for d in self.dirs.iter().rev() {
            let _ = session::remove_dir_if_there(d);
        }
        protect::take_back(&self.made);
    }
}
