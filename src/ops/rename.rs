//! `cage rename OLD NEW`: a session under another name (docs/cages.md, "Limits,
//! moving, history"). Everything kept under the session's name follows:
//! its record (settings, files policy, token budget and use), history,
//! egress log, received files (`uploads/<name>`), a sealed session's
//! outbox, and its cage's private home (a sealed cage's conversation is
//! there). A cage
//! mounts folders named after its session and podman cannot change a
//! container's mounts, so a caged session gets a new container, made as
//! `cage move` makes one (the same image, options and limits); the old one
//! goes once the new one is recorded. Only while idle; a running cage is
//! stopped first and left stopped. Each step is undone when a later one
//! fails: the session is under its old name or its new one, never half.

use std::path::PathBuf;

use serde::Serialize;

use super::make::CageChoice;
use super::plan::Step;
use super::{Context, create, make, moves, plan};
use crate::error::{Error, Result};
use crate::state::session::{self, CageRecord, HistoryEntry, Intent, validate_name};

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
    pub warnings: Vec<crate::error::Warning>,
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

pub fn rename(ctx: &Context, req: &RenameRequest) -> Result<Renamed> {
    validate_name(&req.name)?;
    validate_name(&req.to)?;
    if let Some(by) = &req.by {
        session::validate_who(by)?;
    }
    if req.to == req.name {
        return Err(Error::session(
            &req.name,
            crate::error::SessionProblem::NamedAlready,
        ));
    }
    let (lock, _) = plan::lock_and_load(ctx, &req.name)?;
    lock.note("rename");
    // The change lock too, the record read under it: a change of its
    // settings (which takes no session lock) waits for the rename and
    // then finds no session of the old name, instead of writing the old
    // record again beside the new one.
    let _change = ctx.store.change_lock(&req.name)?;
    let record = ctx.store.load(&req.name)?;
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

/// What a rename decides from, gathered before anything changes.
struct Facts<'a> {
    record: &'a session::Record,
    to: String,
    /// Another session has the new name.
    taken: bool,
    /// Its cage runs (idle: a busy one was refused): stopped first.
    running: bool,
    /// What is kept under the session's name on disk and is there (its
    /// folders, its egress log), each with its new place and whether that
    /// place is taken already.
    folders: Vec<(PathBuf, PathBuf, bool)>,
    /// Its history file, with its new place.
    history: Option<(PathBuf, PathBuf)>,
    /// The new cage (None: not in a cage).
    cage: Option<&'a make::CagePlan>,
    /// The old cage's private home, if there, with its new place (the
    /// new cage's, made empty by its files step).
    home: Option<(PathBuf, PathBuf)>,
    entry: HistoryEntry,
}

fn rename_locked(ctx: &Context, req: &RenameRequest, record: &session::Record) -> Result<Renamed> {
    let (old, new) = (req.name.as_str(), req.to.as_str());
    // An intent left under the new name (a create or rename of it that
    // died) is repaired first: this rename's intent goes there too.
    if let Some(line) = plan::repair(ctx, new)? {
        ctx.note(line);
    }
    let mut warnings = Vec::new();
    let (host, running, cage_plan) = look(ctx, old, new, record, &mut warnings)?;
    let facts = facts(ctx, req, record, running, cage_plan.as_ref());
    let what = facts.entry.what.clone();
    let steps = decide(&facts)?;
    if let Some(h) = host {
        // The old cage's git directory goes with it: what the session
        // committed comes in first, under its old name.
        let git = super::before_git_goes::before_its_git_goes(ctx, Some(h), record);
        warnings.extend(super::before_git_goes::said_before_removal(&git));
    }
    let ran = plan::execute(ctx, host, steps)?;
    if let Some(p) = &cage_plan {
        p.say_rebuilt(ran.rebuilt, &mut warnings);
    }
    warnings.extend(ran.warnings);
    Ok(Renamed {
        session: new.to_string(),
        from: old.to_string(),
        old_container: record.cage.as_ref().map(|c| c.container.clone()),
        container: cage_plan.map(|p| p.container),
        stopped: running,
        what,
        warnings,
    })
}

/// What podman says of the session's cage: its podman, whether it runs
/// (a busy cage is refused), and the new cage, planned before anything
/// changes (a refusal, its image gone, stops nothing).
fn look<'h>(
    ctx: &'h Context,
    old: &str,
    new: &str,
    record: &session::Record,
    warnings: &mut Vec<crate::error::Warning>,
) -> Result<(Option<&'h crate::host::Host>, bool, Option<make::CagePlan>)> {
    Ok(match &record.cage {
        Some(cage) => {
            let host = ctx.host_for_session()?;
            let running = super::idle::check_idle(host, old, cage, "rename")?;
            let p = moves::new_cage(
                ctx,
                host,
                record,
                new,
                &record.dir,
                choice_of(cage),
                warnings,
            )?;
            (Some(host), running, Some(p))
        }
        None => (None, false, None),
    })
}

/// The facts of a rename of `record` to `req.to`, with its new cage.
fn facts<'a>(
    ctx: &Context,
    req: &RenameRequest,
    record: &'a session::Record,
    running: bool,
    cage_plan: Option<&'a make::CagePlan>,
) -> Facts<'a> {
    let (old, new) = (req.name.as_str(), req.to.as_str());
    let home = &ctx.settings.home;
    let folders = [
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
    // Its egress log, the file rotated out of it, and its listener's
    // errors (its pid file goes with the old record: the cage is stopped).
    .chain(
        ctx.store
            .egress_files(old)
            .into_iter()
            .zip(ctx.store.egress_files(new)),
    )
    .filter(|(from, _)| from.symlink_metadata().is_ok())
    .map(|(from, to)| {
        let there = to.symlink_metadata().is_ok();
        (from, to, there)
    })
    .collect();
    let history = ctx.store.history_path(old);
    let old_home = record
        .cage
        .as_ref()
        .map(|c| ctx.store.private_home(&c.container));
    Facts {
        record,
        to: new.to_string(),
        taken: ctx.store.exists(new),
        running,
        folders,
        history: history
            .is_file()
            .then(|| (history, ctx.store.history_path(new))),
        cage: cage_plan,
        home: match (old_home, cage_plan) {
            (Some(from), Some(p)) if from.is_dir() => {
                Some((from, ctx.store.private_home(&p.container)))
            }
            _ => None,
        },
        entry: HistoryEntry {
            when: crate::state::when::now(),
            who: req.by.clone().unwrap_or_else(|| ctx.settings.user.clone()),
            what: match cage_plan {
                Some(p) => format!("renamed from {old} (its new container {})", p.container),
                None => format!("renamed from {old}"),
            },
        },
    }
}

/// The steps a rename of `req` would run, in a few words, for the tests.
#[cfg(test)]
pub(super) fn planned(ctx: &Context, req: &RenameRequest) -> Result<Vec<String>> {
    let (_lock, record) = plan::lock_and_load(ctx, &req.name)?;
    let (_, running, cage_plan) = look(ctx, &req.name, &req.to, &record, &mut Vec::new())?;
    let facts = facts(ctx, req, &record, running, cage_plan.as_ref());
    Ok(decide(&facts)?.iter().map(Step::describe).collect())
}

/// Pure: a rename refused: the new name taken, or the new place of one of
/// the session's folders (a session of that name removed earlier left its
/// received files there).
fn refusal(f: &Facts) -> Result<()> {
    let (old, new) = (f.record.name.as_str(), f.to.as_str());
    if f.taken {
        return Err(create::already(new));
    }
    if let Some((_, to, _)) = f.folders.iter().find(|(_, _, there)| *there) {
        return Err(Error::session(
            old,
            crate::error::SessionProblem::FolderThere {
                to: to.clone(),
                new: new.to_string(),
            },
        ));
    }
    Ok(())
}

/// Pure: a refusal, or the steps of a rename. Everything is moved, and the
/// new cage made, before the record is written under the new name; the
/// old record goes after it, and past that the rename is done (the old
/// container is removed last, as a move removes it). The intent, under
/// both names, names every rename, so that a crash leaves the session
/// under one name or the other, never half.
fn decide<'a>(f: &Facts<'a>) -> Result<Vec<Step<'a>>> {
    let (old, new) = (f.record.name.as_str(), f.to.as_str());
    refusal(f)?;
    let moves: Vec<(PathBuf, PathBuf)> = f
        .folders
        .iter()
        .map(|(from, to, _)| (from.clone(), to.clone()))
        .chain(f.home.clone())
        .chain(f.history.clone())
        .collect();
    let old_cage = f.record.cage.as_ref().map(|c| c.container.clone());
    let intent = Intent::Rename {
        from: old.to_string(),
        to: new.to_string(),
        old: old_cage.clone(),
        new: f.cage.map(|p| p.container.clone()),
        moves,
    };
    let mut steps: Vec<Step> = [old, new]
        .into_iter()
        .map(|session| Step::Intent {
            session: session.to_string(),
            intent: intent.clone(),
        })
        .collect();
    // A running idle cage is stopped (not taken back: a cage stopped for
    // it is left stopped): its container is made again.
    if let (true, Some(c)) = (f.running, &old_cage) {
        steps.push(Step::Stop {
            container: c.clone(),
            best_effort: false,
        });
    }
    let moved = |(from, to): &(PathBuf, PathBuf)| Step::MoveFile {
        from: from.clone(),
        to: to.clone(),
    };
    for (from, to, _) in &f.folders {
        steps.push(moved(&(from.clone(), to.clone())));
    }
    if let Some(p) = f.cage {
        steps.extend(p.steps());
    }
    // The cage's private home follows (the harness's own files, a sealed
    // cage's conversation), over the new cage's, made empty.
    steps.extend(f.home.iter().map(moved));
    // The history first, so that the new record never stands without it.
    steps.extend(f.history.iter().map(moved));
    let mut renamed = f.record.clone();
    renamed.name = new.to_string();
    renamed.cage = f.cage.map(|p| p.record());
    steps.push(Step::WriteRecord(Box::new(renamed)));
    // The old name's record, lock, turn marker and intent.
    steps.push(Step::RemoveRecord {
        session: old.to_string(),
    });
    if let Some(name) = old_cage {
        steps.push(Step::RemoveContainer {
            name,
            best_effort: true,
        });
    }
    steps.push(Step::History {
        session: new.to_string(),
        entry: f.entry.clone(),
    });
    steps.push(Step::Done {
        session: new.to_string(),
    });
    Ok(steps)
}
