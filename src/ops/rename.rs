//! `cage rename OLD NEW`: a session under another name (README, "Limits,
//! moving, history"). Everything kept under the session's name follows:
//! its record (settings, files policy, token budget and use), history,
//! received files (`uploads/<name>`), a sealed session's outbox, and its
//! cage's private home (a sealed cage's conversation is there). A cage
//! mounts folders named after its session and podman cannot change a
//! container's mounts, so a caged session gets a new container, made as
//! `cage move` makes one (the same image, options and limits); the old one
//! goes once the new one is recorded. Only while idle; a running cage is
//! stopped first and left stopped. Each step is undone when a later one
//! fails: the session is under its old name or its new one, never half.

use std::path::PathBuf;

use serde::Serialize;

use super::make::CageChoice;
use super::{Context, create, make, moves, plan};
use crate::error::{Error, Result};
use crate::session::{self, CageRecord, HistoryEntry, validate_name};

#[derive(Debug, Clone, Default)]
pub struct RenameRequest {
    pub name: String,
    pub to: String,
    /// Who renamed it (default: the user running the tool).
    pub by: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Renamed {
    /// The session's new name.
    pub session: String,
    /// Its old name.
    pub from: String,
    /// The container it had, now deleted (None: not in a cage).
    pub old_container: Option<String>,
    /// The container it has now, made (not started).
    pub container: Option<String>,
    /// Its cage was running, and was stopped first.
    pub stopped: bool,
    /// The history entry written.
    pub what: String,
    pub warnings: Vec<String>,
}

/// The cage options a session's cage was made with, to make it again as
/// it is (its image, seal, token file, options, writable paths).
fn choice_of(cage: &CageRecord) -> CageChoice {
    CageChoice {
        image: Some(cage.image.clone()),
        sealed: cage.sealed.is_some(),
        sealed_token: cage.sealed.as_ref().map(|s| s.token_file.clone()),
        conversation: None,
        github: cage.options.github,
        nix: cage.options.nix.is_some(),
        shared: cage.options.shared.is_some(),
        meshes: cage.options.meshes.clone(),
        unseal: false,
        writable: cage.options.writable.clone(),
        // A sealed cage has its own rules, not a policy.
        net: cage.sealed.is_none().then(|| cage.net.clone()),
    }
}

/// Folders renamed so far, put back by `undo` when a later step fails.
#[derive(Default)]
struct Renames(Vec<(PathBuf, PathBuf)>);

impl Renames {
    fn rename(&mut self, from: PathBuf, to: PathBuf) -> Result<()> {
        std::fs::rename(&from, &to).map_err(|e| {
            Error::failed(format!(
                "renaming {} to {}: {e}",
                from.display(),
                to.display()
            ))
        })?;
        self.0.push((from, to));
        Ok(())
    }

    fn undo(&mut self) {
        for (from, to) in self.0.drain(..).rev() {
            let _ = std::fs::rename(&to, &from);
        }
    }
}

pub fn rename(ctx: &Context, req: &RenameRequest) -> Result<Renamed> {
    validate_name(&req.name)?;
    validate_name(&req.to)?;
    if let Some(by) = &req.by {
        session::validate_who(by)?;
    }
    if req.to == req.name {
        return Err(Error::bad_input(format!(
            "session {} is named {} already",
            req.name, req.to
        )));
    }
    let (lock, record) = plan::lock_and_load(ctx, &req.name)?;
    lock.note("rename");
    taken(ctx, &req.to)?;
    // The new name's lock too: a `cage create` of it is refused as busy
    // meanwhile, and this rename while one is making it.
    let new_lock = ctx.store.lock(&req.to)?;
    new_lock.note("rename");
    let renamed = rename_locked(ctx, req, &record);
    if renamed.is_err() {
        // No lock file is left for a name that has no session.
        ctx.store.forget_lock(&req.to);
    }
    renamed
}

/// Refuse a name another session has.
fn taken(ctx: &Context, new: &str) -> Result<()> {
    if ctx.store.exists(new) {
        return Err(create::already(new));
    }
    Ok(())
}

fn rename_locked(ctx: &Context, req: &RenameRequest, record: &session::Record) -> Result<Renamed> {
    let (old, new) = (req.name.as_str(), req.to.as_str());
    // Asked again under its lock: made in between, it is there now.
    taken(ctx, new)?;
    let host = match &record.cage {
        Some(cage) => {
            let host = ctx.host_for_session()?;
            let running = moves::check_idle(host, old, cage, "rename")?;
            Some((host, cage, running))
        }
        None => None,
    };
    // What is kept under the session's name on disk, each with its new
    // place: refused before anything changes if the new place is taken
    // (a session of that name removed earlier left its received files).
    let home = &ctx.settings.home;
    let folders: Vec<(PathBuf, PathBuf)> = [
        (
            ctx.store.session_uploads(old),
            ctx.store.session_uploads(new),
        ),
        (
            super::sealed::outbox_dir(home, old),
            super::sealed::outbox_dir(home, new),
        ),
    ]
    .into_iter()
    .filter(|(from, _)| from.symlink_metadata().is_ok())
    .collect();
    for (_, to) in &folders {
        if to.symlink_metadata().is_ok() {
            return Err(Error::new(
                crate::error::Kind::Exists,
                format!(
                    "{} is there already (left by an earlier session {new}?), and session {old}'s \
                 own would go there: move it away, or pick another name",
                    to.display()
                ),
            ));
        }
    }
    let mut warnings = Vec::new();
    // A running idle cage is stopped: its container is made again.
    let stopped = match host {
        Some((host, cage, true)) => {
            host.podman.stop(&cage.container)?;
            true
        }
        _ => false,
    };
    let mut renames = Renames::default();
    let mut made: Option<CageRecord> = None;
    let mut renamed = record.clone();
    renamed.name = new.to_string();
    let steps = (|| -> Result<()> {
        for (from, to) in &folders {
            renames.rename(from.clone(), to.clone())?;
        }
        if let Some((host, cage, _)) = host {
            let cage_plan = moves::new_cage(
                ctx,
                host,
                record,
                new,
                &record.dir,
                choice_of(cage),
                &mut warnings,
            )?;
            // The executor takes back its own steps when one fails; past
            // it, the container is this function's to remove on failure.
            warnings.extend(plan::execute(ctx, Some(host), cage_plan.steps())?.warnings);
            let new_cage = cage_plan.record();
            let (from, to) = (
                ctx.store.private_home(&cage.container),
                ctx.store.private_home(&new_cage.container),
            );
            made = Some(new_cage);
            // The cage's private home follows (the harness's own files, a
            // sealed cage's conversation): the new one is empty, made now.
            if from.is_dir() {
                std::fs::remove_dir(&to)
                    .map_err(|e| Error::failed(format!("removing {}: {e}", to.display())))?;
                renames.rename(from, to)?;
            }
        }
        renamed.cage = made.clone();
        // The record under its new name, then the old one gone: past that
        // the rename is done. The history goes first, so the new record
        // never stands without it.
        let history = ctx.store.history_path(old);
        if history.exists() {
            renames.rename(history, ctx.store.history_path(new))?;
        }
        ctx.store.save(&renamed)?;
        session::remove_file_if_there(&ctx.store.record_path(old))
    })();
    if let Err(e) = steps {
        // Back as it was, in the reverse order: the new record, what was
        // renamed (the home back out of the new cage's folder), then the
        // new cage.
        let _ = session::remove_file_if_there(&ctx.store.record_path(new));
        renames.undo();
        if let (Some((host, ..)), Some(cage)) = (host, &made) {
            let _ = make::remove_container(ctx, host, &cage.container);
        }
        return Err(e);
    }
    let new_cage = made;
    // The old name's lock, record lock and turn marker (its history is
    // under the new name now).
    let _ = ctx.store.remove(old);
    if let Some((host, cage, _)) = host
        && let Err(e) = make::remove_container(ctx, host, &cage.container)
    {
        warnings.push(format!(
            "the old container {} could not be removed ({e}); `shrooms-agent cage prune` \
             removes it later",
            cage.container
        ));
    }
    let what = match &new_cage {
        Some(c) => format!("renamed from {old} (its new container {})", c.container),
        None => format!("renamed from {old}"),
    };
    let entry = HistoryEntry {
        when: create::now(),
        who: req.by.clone().unwrap_or_else(|| ctx.settings.user.clone()),
        what: what.clone(),
    };
    if let Err(e) = ctx.store.append_history(new, &entry) {
        warnings.push(format!("the history could not be written: {e}"));
    }
    Ok(Renamed {
        session: new.to_string(),
        from: old.to_string(),
        old_container: record.cage.as_ref().map(|c| c.container.clone()),
        container: new_cage.map(|c| c.container),
        stopped,
        what,
        warnings,
    })
}
