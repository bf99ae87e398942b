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
use super::plan::{self, Step};
use crate::error::{Kind, Result};
use crate::state::session;

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
    let facts = facts(ctx, remove.is_some())?;
    let (pruned, steps) = decide(&facts, remove)?;
    if remove.is_some() {
        plan::execute(ctx, Some(host), steps)?;
    }
    Ok(pruned)
}

/// The steps prune would run (with `asked`: an apply), in a few words, for
/// the tests.
#[cfg(test)]
pub(super) fn planned(ctx: &Context, asked: Option<&Pruned>) -> Result<Vec<String>> {
    let facts = facts(ctx, asked.is_some())?;
    Ok(decide(&facts, asked)?
        .1
        .iter()
        .map(Step::describe)
        .collect())
}

/// A leftover container, as prune found it.
struct Leftover {
    kept: Kept,
    /// Made by this state folder (then `busy` and `owned` were looked at).
    ours: bool,
    /// Its session is locked by a command: a session being made has its
    /// container before its record, and is no leftover yet.
    busy: bool,
    /// Its session's record names it (or no longer reads: it may).
    owned: bool,
}

/// `cages/<container>.env` or `cages/<container>/` of no session's record.
struct LeftFile {
    path: PathBuf,
    /// Its session (told by the container's name) is locked, or its
    /// lock cannot be taken: a container being made or moved has its
    /// files before its record.
    busy: bool,
    /// Its session's record, read under its lock, names the container.
    owned: bool,
}

/// What prune decides from. With `lock`, each session looked at is locked
/// (and held until the plan is run); without, only asked whether it is.
struct Facts<'a> {
    /// The first damaged record: a damaged record's container looks like
    /// a leftover. Nothing else is gathered then.
    damaged: Option<crate::error::Error>,
    leftovers: Vec<Leftover>,
    files: Vec<LeftFile>,
    _held: Vec<Held<'a>>,
}

fn facts<'a>(ctx: &'a Context, lock: bool) -> Result<Facts<'a>> {
    super::tidy::everything(ctx);
    let listing = super::listing::ls(ctx)?;
    let ours = ctx.store.state_id_if_any()?;
    let mut facts = Facts {
        damaged: listing.damaged.first().map(|d| d.error.clone()),
        leftovers: Vec::new(),
        files: Vec::new(),
        _held: Vec::new(),
    };
    if facts.damaged.is_some() {
        return Ok(facts);
    }
    for leftover in &listing.leftovers {
        let found = leftover_facts(ctx, lock, &mut facts._held, leftover, ours.as_deref());
        facts.leftovers.push(found);
    }
    facts.files = left_files(ctx, lock, &mut facts._held)?;
    Ok(facts)
}

/// Is `session` busy? Locked (or asked) once per session, whatever it
/// holds: with `lock`, its lock is taken and kept in `held` (one held
/// there already is prune's own, not busy); without, it is only asked
/// whether it is locked. A lock held by another command is busy; one that
/// cannot be taken or asked about for another reason is when
/// `busy_if_err`.
fn is_busy<'a>(
    ctx: &'a Context,
    lock: bool,
    held: &mut Vec<Held<'a>>,
    session: &str,
    busy_if_err: bool,
) -> bool {
    if !lock {
        return match ctx.store.lock_held(session) {
            Ok(b) => b,
            Err(_) => busy_if_err,
        };
    }
    if held.iter().any(|h| h.session == session) {
        return false;
    }
    match ctx.store.lock(session) {
        Ok(l) => {
            held.push(Held::new(ctx, session, l));
            false
        }
        Err(e) => busy_if_err || e.kind == Kind::Busy,
    }
}

/// A leftover container as prune sees it: made by this state folder
/// (`ours`) or not, and if it is, whether its session is busy and whether
/// its record owns it after all.
fn leftover_facts<'a>(
    ctx: &'a Context,
    lock: bool,
    held: &mut Vec<Held<'a>>,
    leftover: &super::listing::Leftover,
    ours: Option<&str>,
) -> Leftover {
    let mine = leftover.state_folder.is_some() && leftover.state_folder.as_deref() == ours;
    let kept = Kept {
        container: leftover.container.clone(),
        session: leftover.session.clone(),
        state_folder: leftover.state_folder.clone(),
    };
    let busy = mine && is_busy(ctx, lock, held, &leftover.session, false);
    // A record that no longer reads (damaged meanwhile) owns it, for
    // all prune can tell.
    let owned = mine
        && !busy
        && match ctx.store.load(&leftover.session) {
            Ok(r) => r.cage.is_some_and(|c| c.container == leftover.container),
            Err(e) => e.kind != Kind::NotFound,
        };
    Leftover {
        kept,
        ours: mine,
        busy,
        owned,
    }
}

/// The files of no session: `cages/<container>.env` and
/// `cages/<container>/`. They are in this state folder: this folder made
/// them.
fn left_files<'a>(ctx: &'a Context, lock: bool, held: &mut Vec<Held<'a>>) -> Result<Vec<LeftFile>> {
    let known: Vec<String> = ctx
        .store
        .list()?
        .into_iter()
        .filter_map(|r| r.cage.map(|c| c.container))
        .collect();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(ctx.store.cages_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let container = file_name.strip_suffix(".env").unwrap_or(&file_name);
        if !container.starts_with("shrooms-") || known.iter().any(|k| k == container) {
            continue;
        }
        let session_name = session_of_container(container);
        let busy = session_name
            .as_ref()
            .is_some_and(|s| is_busy(ctx, lock, held, s, true));
        let owned = session_name
            .as_ref()
            .and_then(|s| ctx.store.load(s).ok())
            .and_then(|r| r.cage)
            .is_some_and(|c| c.container == container);
        files.push(LeftFile {
            path: entry.path(),
            busy,
            owned,
        });
    }
    Ok(files)
}

/// Pure: a refusal, or what prune finds, and the steps that remove it
/// (with `asked`: only what was shown and asked about).
fn decide(f: &Facts, asked: Option<&Pruned>) -> Result<(Pruned, Vec<Step<'static>>)> {
    if let Some(d) = &f.damaged {
        let mut e = d
            .clone()
            .context("cage prune removes nothing while a record is damaged");
        // As its words were said before, and no more: no hint or subject
        // of the record's own rides along.
        e.kind = Kind::Failed;
        e.next = None;
        e.subject = None;
        return Err(e);
    }
    let mut pruned = Pruned {
        dry_run: asked.is_none(),
        containers: Vec::new(),
        files: Vec::new(),
        made_by_another_state_folder: Vec::new(),
        made_before_state_labels: Vec::new(),
    };
    for l in &f.leftovers {
        match (&l.kept.state_folder, l.ours) {
            (None, _) => pruned.made_before_state_labels.push(l.kept.clone()),
            (Some(_), false) => pruned.made_by_another_state_folder.push(l.kept.clone()),
            _ if l.busy || l.owned => {}
            _ if asked.is_some_and(|a| !a.containers.contains(&l.kept.container)) => {}
            _ => pruned.containers.push(l.kept.container.clone()),
        }
    }
    for file in &f.files {
        if file.busy || file.owned || asked.is_some_and(|a| !a.files.contains(&file.path)) {
            continue;
        }
        pruned.files.push(file.path.clone());
    }
    pruned.files.sort();
    // A leftover's own files go with it (`acts::cage_files::remove_container`).
    let steps = pruned
        .containers
        .iter()
        .map(|name| Step::RemoveContainer {
            name: name.clone(),
            best_effort: false,
        })
        .chain(pruned.files.iter().map(|path| Step::RemoveFile {
            path: path.clone(),
            best_effort: false,
        }))
        .collect();
    Ok((pruned, steps))
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
