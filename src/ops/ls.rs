//! `cage ls`: one `podman ps` call, joined with the records. Containers that
//! carry the session label but belong to no session are leftovers.

use std::path::PathBuf;

use serde::Serialize;

use super::Context;
use crate::error::Result;
use crate::harness::Harness;
use crate::podman::inspect::PsEntry;
use crate::spec::SESSION_LABEL;

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub session: String,
    pub container: Option<String>,
    pub image: Option<String>,
    /// podman's state (running, exited, created), "missing" when the
    /// container is gone, "uncaged" for a session out of its cage.
    pub state: String,
    pub dir: PathBuf,
    pub harness: Harness,
    pub network: Option<String>,
    /// A sealed cage.
    pub sealed: bool,
    /// When the session was made, RFC 3339 with the local offset.
    pub created: String,
    /// The same in Unix seconds, for the text's AGE.
    #[serde(skip)]
    pub created_secs: u64,
    /// What holds the session now (a turn, a create, ...) and since when;
    /// null when nothing does.
    pub busy: Option<crate::session::Busy>,
}

#[derive(Debug, Clone, Serialize)]
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

#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    pub sessions: Vec<Row>,
    pub leftovers: Vec<Leftover>,
    /// Records that do not read: listed, not hidden, and not in the way of
    /// the others.
    pub damaged: Vec<crate::session::Damaged>,
}

pub fn ls(ctx: &Context) -> Result<Listing> {
    let (records, damaged) = ctx.store.list_readable()?;
    // Without podman the sessions are still listed, their state unknown: a
    // caged session can still be taken out of its cage there.
    let ps = match ctx.host() {
        Ok(host) => Some(host.podman.ps_cages()?),
        Err(e) if e.kind == crate::error::Kind::NoPodman => None,
        Err(e) => return Err(e),
    };
    let mut listing = join(&records, ps.as_deref());
    listing.damaged = damaged;
    for row in &mut listing.sessions {
        row.busy = ctx.store.busy(&row.session)?;
    }
    Ok(listing)
}

/// Pure: the records joined with what podman listed (None: no podman).
pub fn join(records: &[crate::session::Record], ps: Option<&[PsEntry]>) -> Listing {
    let no_podman = ps.is_none();
    let ps = ps.unwrap_or_default();
    let sessions = records
        .iter()
        .map(|r| {
            let cage = r.cage.as_ref();
            let entry = cage.and_then(|c| ps.iter().find(|e| e.name() == c.container));
            Row {
                session: r.name.clone(),
                container: cage.map(|c| c.container.clone()),
                image: cage.map(|c| c.image.clone()),
                state: match (cage, entry) {
                    (None, _) => "uncaged".into(),
                    (Some(_), None) if no_podman => "no podman".into(),
                    (Some(_), None) => "missing".into(),
                    (Some(_), Some(e)) => e.state.clone(),
                },
                dir: r.dir.clone(),
                harness: r.harness,
                network: cage.map(|c| c.network.name().to_string()),
                sealed: cage.is_some_and(|c| c.sealed.is_some()),
                created: crate::when::rfc3339(r.created),
                created_secs: r.created,
                busy: None,
            }
        })
        .collect();
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
            state_folder: e.label(crate::spec::STATE_LABEL).map(str::to_string),
        })
        .collect();
    Listing {
        sessions,
        leftovers,
        damaged: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Record;

    fn record(name: &str, container: &str) -> Record {
        Record {
            version: 1,
            name: name.into(),
            dir: "/p".into(),
            harness: Harness::Claude,
            created: 0,
            cage: Some(crate::session::sample_cage(container)),
            auto_approve: false,
            files: Default::default(),
            tokens: Default::default(),
            accept_caged: None,
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
        let l = join(&records, Some(&ps));
        assert_eq!(l.sessions[0].state, "running");
        assert_eq!(l.sessions[1].state, "missing");
        assert_eq!(l.leftovers.len(), 1);
        assert_eq!(l.leftovers[0].container, "shrooms-old-3");
        assert_eq!(l.leftovers[0].session, "old");
        // Without podman: listed, the state unknown, no leftovers.
        let l = join(&records, None);
        assert_eq!(l.sessions[0].state, "no podman");
        assert!(l.leftovers.is_empty());
    }

    /// A machine without cages is told by the error's kind: `ls` lists
    /// without podman, and a caged session's command gets the words for it, still of that kind (503 over HTTP, exit 1).
    #[test]
    fn no_podman_is_told_by_its_kind() {
        let state =
            std::env::temp_dir().join(format!("shrooms-ls-nopodman-{}", std::process::id()));
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
            (e.kind, e.message.as_str()),
            (crate::error::Kind::NoPodman, crate::host::NO_PODMAN)
        );
        let e = ctx.host_for_session().unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str(), e.http_status()),
            (
                crate::error::Kind::NoPodman,
                crate::host::NO_PODMAN_FOR_SESSION,
                503
            )
        );
        let l = ls(&ctx).unwrap();
        assert!(l.sessions.is_empty() && l.leftovers.is_empty());
        let _ = std::fs::remove_dir_all(&state);
    }
}
