//! `cage prune`: remove leftovers: containers that carry the session label
//! but belong to no session (seed, "Cleaning up"), and env files and private
//! folders whose container belongs to no session.

use std::path::PathBuf;

use serde::Serialize;

use super::Context;
use crate::error::Result;
use crate::session;

#[derive(Debug, Clone, Serialize)]
pub struct Pruned {
    pub dry_run: bool,
    pub containers: Vec<String>,
    pub files: Vec<PathBuf>,
}

pub fn prune(ctx: &Context, dry_run: bool) -> Result<Pruned> {
    let host = ctx.host()?;
    let listing = super::ls::ls(ctx)?;
    // A damaged record's container looks like a leftover: nothing is
    // removed until every record reads.
    if let Some(d) = listing.damaged.first() {
        return Err(crate::error::Error::failed(format!(
            "cage prune removes nothing while a record is damaged: {}",
            d.error
        )));
    }
    let mut containers = Vec::new();
    for leftover in &listing.leftovers {
        // A session being made has its container before its record; its
        // lock is held meanwhile, so a container whose session is locked is
        // not a leftover yet.
        let _lock = match ctx.store.lock(&leftover.session) {
            Ok(l) => Some(l),
            Err(e) if e.kind == crate::error::Kind::Busy => continue,
            Err(_) => None, // a label that is not a valid name: no session can own it
        };
        // A record that no longer reads (damaged meanwhile) owns it, for
        // all prune can tell.
        let owned = match ctx.store.load(&leftover.session) {
            Ok(r) => r.cage.is_some_and(|c| c.container == leftover.container),
            Err(e) => e.kind != crate::error::Kind::NotFound,
        };
        if owned {
            continue;
        }
        if !dry_run {
            host.podman.rm_force(&leftover.container)?;
        }
        containers.push(leftover.container.clone());
    }
    // Files: cages/<container>.env and cages/<container>/ of no session.
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
            // Skip a container still being made (its session locked).
            let session_name = session_of_container(container);
            // A container being made or moved has its files before its
            // record: skip a session that is locked, and look at its record
            // again under the lock.
            let _lock = match &session_name {
                Some(s) => match ctx.store.lock(s) {
                    Ok(l) => Some(l),
                    Err(_) => continue,
                },
                None => None,
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
            if !dry_run {
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
        dry_run,
        containers,
        files,
    })
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
