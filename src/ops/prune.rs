//! `cage prune`: remove leftovers: containers that carry the session label
//! but belong to no session, and env files and private
//! folders whose container belongs to no session.
//!
//! Only what this state folder made. The same user's podman serves every
//! state folder of theirs (`SHROOMS_AGENT_STATE_DIR` or `XDG_DATA_HOME` can
//! differ between a shell and a systemd unit), and a container with no
//! record here may be a live session of another folder. So each container
//! is labelled with the identity of the state folder that made it
//! (`spec::STATE_LABEL`, the folder's `state-id`); prune removes only
//! those of its own, and lists apart, and keeps, those of another folder
//! and those made before containers carried the label.
//!
//! `plan` looks and writes nothing (a dry run, and what the CLI asks
//! about); `apply` removes, under each session's lock, what the plan
//! listed and is still a leftover then.

use std::path::PathBuf;

use serde::Serialize;

use super::Context;
use crate::error::{Error, Kind, Result};
use crate::session;

/// A leftover container prune keeps: not made by this state folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Kept {
    pub container: String,
    /// The session named by its label.
    pub session: String,
    /// The identity of the state folder that made it, where it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_folder: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Pruned {
    /// Nothing was removed: `--dry-run`, or the question answered no.
    pub dry_run: bool,
    /// The containers removed (or, in a dry run, that would be).
    pub containers: Vec<String>,
    pub files: Vec<PathBuf>,
    /// Leftovers another state folder made: never removed here.
    pub made_by_another_state_folder: Vec<Kept>,
    /// Leftovers without the state folder's label (made by a version
    /// before it): never removed by prune.
    pub made_before_state_labels: Vec<Kept>,
}

impl Pruned {
    /// Is there anything to remove?
    pub fn removes_nothing(&self) -> bool {
        self.containers.is_empty() && self.files.is_empty()
    }
}

/// What prune would remove, and what it keeps. Writes nothing at all: no
/// lock file, no state id.
pub fn plan(ctx: &Context) -> Result<Pruned> {
    survey(ctx, None)
}

/// Remove what `asked` lists that is still a leftover of this state
/// folder: nothing that was not shown (and asked about) first.
pub fn apply(ctx: &Context, asked: &Pruned) -> Result<Pruned> {
    survey(ctx, Some(asked))
}

fn survey(ctx: &Context, remove: Option<&Pruned>) -> Result<Pruned> {
    let host = ctx.host()?;
    let listing = super::ls::ls(ctx)?;
    // A damaged record's container looks like a leftover: nothing is
    // removed until every record reads.
    if let Some(d) = listing.damaged.first() {
        return Err(Error::failed(format!(
            "cage prune removes nothing while a record is damaged: {}",
            d.error
        )));
    }
    let ours = ctx.store.state_id_if_any()?;
    let mut containers = Vec::new();
    let mut another = Vec::new();
    let mut before = Vec::new();
    for leftover in &listing.leftovers {
        let kept = Kept {
            container: leftover.container.clone(),
            session: leftover.session.clone(),
            state_folder: leftover.state_folder.clone(),
        };
        match (&leftover.state_folder, &ours) {
            (None, _) => {
                before.push(kept);
                continue;
            }
            (Some(theirs), Some(ours)) if theirs == ours => {}
            (Some(_), _) => {
                another.push(kept);
                continue;
            }
        }
        // A session being made has its container before its record; its
        // lock is held meanwhile, so a container whose session is locked is
        // not a leftover yet.
        let _lock = match remove {
            None => match ctx.store.lock_held(&leftover.session) {
                Ok(true) => continue,
                _ => None,
            },
            Some(_) => match ctx.store.lock(&leftover.session) {
                Ok(l) => Some(Held::new(ctx, &leftover.session, l)),
                Err(e) if e.kind == Kind::Busy => continue,
                Err(_) => None, // a label that is not a valid name: no session can own it
            },
        };
        // A record that no longer reads (damaged meanwhile) owns it, for
        // all prune can tell.
        let owned = match ctx.store.load(&leftover.session) {
            Ok(r) => r.cage.is_some_and(|c| c.container == leftover.container),
            Err(e) => e.kind != Kind::NotFound,
        };
        if owned {
            continue;
        }
        if let Some(asked) = remove {
            if !asked.containers.contains(&leftover.container) {
                continue;
            }
            host.podman.rm_force(&leftover.container)?;
        }
        containers.push(leftover.container.clone());
    }
    // Files: cages/<container>.env and cages/<container>/ of no session.
    // They are in this state folder: this folder made them.
    let known: Vec<String> = ctx
        .store
        .list()?
        .into_iter()
        .filter_map(|r| r.cage.map(|c| c.container))
        .collect();
    let mut files = Vec::new();
    if let Ok(entries) = std::fs::read_dir(ctx.store.cages_dir()) {
        for entry in entries.flatten() {
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let container = file_name.strip_suffix(".env").unwrap_or(&file_name);
            if !container.starts_with("shrooms-") || known.iter().any(|k| k == container) {
                continue;
            }
            let session_name = session_of_container(container);
            // A container being made or moved has its files before its
            // record: skip a session that is locked, and look at its record
            // again under the lock.
            let _lock = match (&session_name, remove) {
                (Some(s), None) => match ctx.store.lock_held(s) {
                    Ok(false) => None,
                    _ => continue,
                },
                (Some(s), Some(_)) => match ctx.store.lock(s) {
                    Ok(l) => Some(Held::new(ctx, s, l)),
                    Err(_) => continue,
                },
                (None, _) => None,
            };
            let owned = session_name
                .as_ref()
                .and_then(|s| ctx.store.load(s).ok())
                .and_then(|r| r.cage)
                .is_some_and(|c| c.container == container);
            if owned {
                continue;
            }
            let path = entry.path();
            if let Some(asked) = remove {
                if !asked.files.contains(&path) {
                    continue;
                }
                if path.is_dir() {
                    session::remove_dir_if_there(&path)?;
                } else {
                    session::remove_file_if_there(&path)?;
                }
            }
            files.push(path);
        }
    }
    files.sort();
    Ok(Pruned {
        dry_run: remove.is_none(),
        containers,
        files,
        made_by_another_state_folder: another,
        made_before_state_labels: before,
    })
}

/// A session's lock taken by prune; the lock file, made for a name that
/// has no session, goes when it is let go (`Store::forget_lock`), so that
/// prune leaves no file of its own behind.
struct Held<'a> {
    ctx: &'a Context,
    session: String,
    _lock: session::SessionLock,
}

impl<'a> Held<'a> {
    fn new(ctx: &'a Context, session: &str, lock: session::SessionLock) -> Held<'a> {
        Held {
            ctx,
            session: session.to_string(),
            _lock: lock,
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Still held here: the lock is let go after the file is gone.
        self.ctx.store.forget_lock(&self.session);
    }
}

/// `shrooms-<session>-<6 hex>` -> `<session>`.
fn session_of_container(container: &str) -> Option<String> {
    let rest = container.strip_prefix("shrooms-")?;
    let (session, hex) = rest.rsplit_once('-')?;
    (hex.len() == 6 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| session.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn session_of_container() {
        assert_eq!(
            super::session_of_container("shrooms-my-web-0a1b2c").as_deref(),
            Some("my-web")
        );
        assert_eq!(super::session_of_container("shrooms-x-zz"), None);
        assert_eq!(super::session_of_container("other-x-0a1b2c"), None);
    }
}
