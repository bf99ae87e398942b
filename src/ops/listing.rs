//! The sessions listed (`cage ls`, `GET /v1/sessions`, and what `cage prune`
//! starts from): one `podman ps` call, joined with the records. Containers
//! that carry the session label but belong to no session are leftovers.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Context;
use super::session_object::{Seen, Session};
use crate::cage::spec::SESSION_LABEL;
use crate::error::Result;
use crate::host::podman::inspect::PsEntry;

/// A container that carries the session label and belongs to no session
/// here.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Leftover {
    pub container: String,
    /// The session named by its label.
    pub session: String,
    pub image: String,
    pub state: String,
    /// The identity of the state folder that made it (its label
    /// `xyz.vpavlin.shrooms.state`); None for a container made before
    /// containers carried it.
    pub state_folder: Option<String>,
}

/// The sessions (docs/cages.md, "The session object"), as `cage ls --json` and
/// `GET /v1/sessions` give them.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Listing {
    pub sessions: Vec<Session>,
    /// Containers that carry the session label and belong to no session
    /// here (`cage prune` removes those this state folder made).
    pub leftovers: Vec<Leftover>,
    /// Records that do not read: listed, not hidden, and not in the way of
    /// the others.
    pub damaged: Vec<crate::state::session::Damaged>,
}

/// A look: it changes nothing (the faces call `tidy::everything` first).
pub fn ls(ctx: &Context) -> Result<Listing> {
    // Podman is asked at once, and the records are read while it answers.
    if let Some(podman) = ctx.podman_program() {
        let (ps, local) = podman.ps_cages_beside(|| {
            let (records, damaged) = ctx.store.list_readable()?;
            let host = ctx.host()?;
            let busy = records
                .iter()
                .map(|r| ctx.store.busy(&r.name))
                .collect::<Result<Vec<_>>>()?;
            Ok::<_, crate::error::Error>((records, damaged, host, busy))
        });
        let (records, damaged, host, busy) = local?;
        let ps = ps?;
        let (volumes, enforced) = (
            host.volume_path.as_deref(),
            Some(crate::host::enforces_limits(host)),
        );
        return Ok(finish(
            ctx,
            join(records, Some(&ps), volumes, busy, enforced),
            damaged,
        ));
    }
    let (records, damaged) = ctx.store.list_readable()?;
    // Without podman the sessions are still listed, their state unknown: a
    // caged session can still be taken out of its cage there.
    let (ps, volumes, enforced) = match ctx.host() {
        Ok(host) => (
            Some(host.podman.ps_cages()?),
            host.volume_path.as_deref(),
            Some(crate::host::enforces_limits(host)),
        ),
        Err(e) if e.kind == crate::error::Kind::NoPodman => (None, None, None),
        Err(e) => return Err(e),
    };
    let mut busy = Vec::with_capacity(records.len());
    for r in &records {
        busy.push(ctx.store.busy(&r.name)?);
    }
    Ok(finish(
        ctx,
        join(records, ps.as_deref(), volumes, busy, enforced),
        damaged,
    ))
}

/// What both ways of listing add to the join: each running cage's egress
/// log (read from its listener, no podman call) and the damaged records.
fn finish(
    ctx: &Context,
    mut listing: Listing,
    damaged: Vec<crate::state::session::Damaged>,
) -> Listing {
    listing.sessions = listing
        .sessions
        .into_iter()
        .map(|s| super::session_object::with_egress_log(&ctx.store, s))
        .collect();
    listing.damaged = damaged;
    listing
}

/// Pure: the records joined with what podman listed (None: no podman),
/// podman's volume folder (for a shared folder's path) and what holds each
/// (in the records' order), and whether podman enforces limits here.
pub fn join(
    records: Vec<crate::state::session::Record>,
    ps: Option<&[PsEntry]>,
    volumes: Option<&Path>,
    busy: Vec<Option<crate::state::session::Busy>>,
    limits_enforced: Option<bool>,
) -> Listing {
    let no_podman = ps.is_none();
    let ps = ps.unwrap_or_default();
    let leftovers = ps
        .iter()
        .filter(|e| {
            !records
                .iter()
                .any(|r| r.cage.as_ref().is_some_and(|c| c.container == e.name()))
        })
        .map(|e| Leftover {
            container: e.name().to_string(),
            session: e.label(SESSION_LABEL).unwrap_or("").to_string(),
            image: e.image.clone(),
            state: e.state.clone(),
            state_folder: e.label(crate::cage::spec::STATE_LABEL).map(str::to_string),
        })
        .collect();
    let mut busy = busy.into_iter();
    // Each record moves into its session: a listing of many cages copies
    // none of their argv.
    let sessions = records
        .into_iter()
        .map(|r| {
            let entry = r
                .cage
                .as_ref()
                .and_then(|c| ps.iter().find(|e| e.name() == c.container));
            let seen = match entry {
                Some(e) => Seen::of_ps(&e.state),
                None if no_podman => Seen::of_ps("no podman"),
                None => Seen::missing(),
            };
            let shared = shared_path(volumes, &r);
            Session::new(r, seen, shared, busy.next().flatten(), limits_enforced)
        })
        .collect();
    Listing {
        sessions,
        leftovers,
        damaged: Vec::new(),
    }
}

/// A caged session's shared folder on the machine: podman's volume
/// folder, then VOLUME/_data (as [`crate::host::Host::shared_path`]).
pub fn shared_path(volumes: Option<&Path>, r: &crate::state::session::Record) -> Option<PathBuf> {
    let volume = r.cage.as_ref()?.options.shared.as_ref()?;
    Some(volumes?.join(volume).join("_data"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::session::Record;

    fn record(name: &str, container: &str) -> Record {
        Record {
            version: 1,
            created: 0,
            cage: Some(crate::state::session::sample_cage(container)),
            ..crate::state::session::sample_record(name)
        }
    }

    fn entry(name: &str, session: &str, state: &str) -> PsEntry {
        serde_json::from_value(serde_json::json!({
            "Names": [name], "Image": "img", "State": state,
            "Labels": {SESSION_LABEL: session}
        }))
        .unwrap()
    }

    #[test]
    fn joined_with_leftovers_and_missing() {
        let records = vec![record("a", "shrooms-a-1"), record("b", "shrooms-b-2")];
        let ps = vec![
            entry("shrooms-a-1", "a", "running"),
            entry("shrooms-old-3", "old", "exited"),
        ];
        let l = join(records.clone(), Some(&ps), None, vec![], Some(true));
        let state = |s: &Session| s.cage.as_ref().unwrap().state.clone();
        assert_eq!(state(&l.sessions[0]), "running");
        assert!(l.sessions[0].cage.as_ref().unwrap().running);
        assert_eq!(state(&l.sessions[1]), "missing");
        assert_eq!(l.leftovers.len(), 1);
        assert_eq!(l.leftovers[0].container, "shrooms-old-3");
        assert_eq!(l.leftovers[0].session, "old");
        // Without podman: listed, the state unknown, no leftovers.
        let l = join(records, None, None, vec![], None);
        assert_eq!(state(&l.sessions[0]), "no podman");
        assert!(l.leftovers.is_empty());
    }

    /// A machine without cages is told by the error's kind: `ls` lists
    /// without podman, and a caged session's command gets the words for it, still of that kind (503 over HTTP, exit 1).
    #[test]
    fn no_podman_is_told_by_its_kind() {
        let scratch = tempfile::tempdir().unwrap();
        let state = scratch.path().join("state");
        let settings = crate::settings::Settings::from_text(
            Some("cages = false\n"),
            std::path::Path::new("/cfg/config.toml"),
            state.clone(),
            PathBuf::from("/home/u"),
            &crate::settings::Env::new(),
        )
        .unwrap();
        let ctx = Context::new(settings, crate::settings::Env::new(), Vec::new());
        let e = ctx.host().unwrap_err();
        assert_eq!(
            (e.kind, e.message().as_str()),
            (crate::error::Kind::NoPodman, crate::error::NO_PODMAN)
        );
        let e = ctx.host_for_session().unwrap_err();
        assert_eq!(
            (e.kind, e.message().as_str(), e.http_status()),
            (
                crate::error::Kind::NoPodman,
                crate::error::NO_PODMAN_FOR_SESSION,
                503
            )
        );
        let l = ls(&ctx).unwrap();
        assert!(l.sessions.is_empty() && l.leftovers.is_empty());
        let _ = std::fs::remove_dir_all(&state);
    }
}
