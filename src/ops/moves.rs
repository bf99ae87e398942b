//! `cage move`: a session into a fresh cage with new options, or out of its
//! cage (docs/cages.md, "Limits, moving, history"). Only while idle. The new
//! container is made before the old one is deleted, so a failure leaves the
//! session as it was; the conversation continues, since every path in a
//! cage is the machine's own.

use serde::Serialize;

use std::path::Path;

use super::make::{self, CageChoice};
use super::plan::{self, Step};
use super::{Context, create};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::state::session::{CageRecord, HistoryEntry, Intent, Record};

#[derive(Debug, Clone, Default)]
pub struct MoveRequest {
    pub name: String,
    /// Take it out of its cage.
    pub out: bool,
    pub choice: CageChoice,
    /// Who moved it (default: the user running the tool).
    pub by: Option<String>,
    /// Take a sealed session out of its seal (out of its cage, or into an
    /// ordinary one): refused without it.
    pub unseal: bool,
    /// The project folder's new place (`--dir`), for a folder moved or
    /// renamed: checked as `cage create` checks its folder.
    pub dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Moved {
    pub session: String,
    /// The container it had, now deleted.
    pub from: Option<String>,
    /// The container it has now; None when taken out.
    pub to: Option<String>,
    /// The history entry written.
    pub what: String,
    pub warnings: Vec<crate::error::Warning>,
}

pub fn move_session(ctx: &Context, req: &MoveRequest) -> Result<Moved> {
    if let Some(by) = &req.by {
        crate::state::session::validate_who(by)?;
    }
    // Checked before anything is locked or asked: it must exist, as at
    // create; a cage's own checks of it (not under the state folder, not a
    // sealed session's) are `make::prepare`'s, as at create.
    let new_dir = req.dir.as_deref().map(create::project_dir).transpose()?;
    let (_lock, record) = plan::lock_and_load(ctx, &req.name)?;
    _lock.note("move");
    let dir = new_dir.clone().unwrap_or_else(|| record.dir.clone());
    let old = record.cage.clone();
    decide_way_out(req, old.as_ref())?;
    // Without podman a caged session can still be taken out of its cage
    // (docs/configuration.md, "Configuration", `cages = false`): its container is left for
    // `cage prune` once podman is back.
    let host = match (&old, req.out) {
        (None, true) => None,
        (Some(_), true) => match ctx.host() {
            Ok(h) => Some(h),
            Err(e) if e.kind == crate::error::Kind::NoPodman => None,
            Err(e) => return Err(e),
        },
        (Some(_), false) => Some(ctx.host_for_session()?),
        (None, false) => Some(ctx.host()?),
    };
    decide_seal(req, old.as_ref())?;
    if let (Some(cage), Some(host)) = (&old, host) {
        super::idle::check_idle(host, &req.name, cage, "move")?;
    }
    let mut warnings = Vec::new();
    let plan = if req.out {
        if new_dir.is_some() {
            super::project::check_own_folder(&dir, ctx.settings.runtime_dir.as_deref())?;
        }
        None
    } else {
        let host = host.ok_or_else(Error::no_podman)?;
        let choice = decide_choice(req, old.as_ref());
        Some(new_cage(
            ctx,
            host,
            &record,
            &record.name,
            &dir,
            choice,
            &mut warnings,
        )?)
    };
    let who = req.by.clone().unwrap_or_else(|| ctx.settings.user.clone());
    let steps = steps(&record, plan.as_ref(), &dir, who);
    let what = match steps.iter().find_map(|s| match s {
        Step::History { entry, .. } => Some(entry.what.clone()),
        _ => None,
    }) {
        Some(w) => w,
        None => return Err(Error::unmet("a move without a history entry")),
    };
    if let Some(h) = host {
        // The old cage's git directory goes with it: what the session
        // committed comes in first.
        let git = super::before_git_goes::before_its_git_goes(ctx, Some(h), &record);
        warnings.extend(super::before_git_goes::said_before_removal(&git));
    }
    let ran = plan::execute(ctx, host, steps)?;
    if let Some(p) = &plan {
        p.say_rebuilt(ran.rebuilt, &mut warnings);
    }
    warnings.extend(ran.warnings);
    Ok(Moved {
        session: record.name,
        from: old.map(|c| c.container),
        to: plan.map(|p| p.container),
        what,
        warnings,
    })
}

/// Pure: a session out of its cage must have one.
fn decide_way_out(req: &MoveRequest, old: Option<&CageRecord>) -> Result<()> {
    if req.out && old.is_none() {
        return Err(Error::session(
            &req.name,
            crate::error::SessionProblem::NotCaged {
                then: ", so it cannot be taken out of one",
            },
        ));
    }
    Ok(())
}

/// Pure: seed, "After a sealed session": the folder is untrusted; run
/// nothing from it outside a cage. Out of the seal, the harness would run
/// there with the user's settings and hooks, or as the user itself.
fn decide_seal(req: &MoveRequest, old: Option<&CageRecord>) -> Result<()> {
    let sealed_now = old.is_some_and(|c| c.sealed.is_some());
    if sealed_now && (req.out || !req.choice.sealed) && !req.unseal {
        return Err(Error::session(
            &req.name,
            crate::error::SessionProblem::SealedOut,
        ));
    }
    Ok(())
}

/// Pure: the new cage's choice: what was asked, and the network policy the
/// cage has, unless it is sealed now (a sealed cage has its own rules).
fn decide_choice(req: &MoveRequest, old: Option<&CageRecord>) -> CageChoice {
    let net = match (&req.choice.net, req.choice.sealed) {
        (Some(n), _) => Some(n.clone()),
        (None, false) => old.map(|c| c.net.clone()),
        (None, true) => None,
    };
    make::CageChoice {
        unseal: req.unseal,
        net,
        ..req.choice.clone()
    }
}

/// A new cage for a session (`record`) under the name `session`, in `dir`,
/// planned as a move plans it: what `cage move` and `cage rename` share.
/// Without an image in `choice`, it keeps the image its cage was made from,
/// or, out of a cage, the one it was taken out of: a move changes what was
/// asked, not what was not (a switch to the config's image could start a
/// build nobody asked for). The session's own limits go with it.
pub(super) fn new_cage(
    ctx: &Context,
    host: &Host,
    record: &Record,
    session: &str,
    dir: &Path,
    choice: CageChoice,
    warnings: &mut Vec<crate::error::Warning>,
) -> Result<make::CagePlan> {
    let old = record.cage.as_ref();
    let image = choice
        .image
        .clone()
        .or_else(|| old.map(|c| c.image.clone()))
        .or_else(|| record.last_image.clone());
    let choice = make::CageChoice { image, ..choice };
    let plan = make::prepare(ctx, host, session, dir, record.harness, &choice, false)?;
    let mut plan = match old {
        Some(c) if c.own_limits => plan.with_own_limits(c.limits.clone()),
        _ => plan,
    };
    plan.warnings_put_at(warnings.len());
    warnings.extend(plan.warnings.iter().cloned());
    Ok(plan)
}

/// Pure: the steps of a move of `record` into `plan`'s cage (None: out of
/// its cage) with its folder at `dir`. The new container is made and the
/// record changed before the old one is removed, so that a failure leaves
/// the session as it was; the intent names both, so that a crash between
/// them leaves neither two containers nor none.
pub fn steps<'a>(
    record: &Record,
    plan: Option<&'a make::CagePlan>,
    dir: &Path,
    who: String,
) -> Vec<Step<'a>> {
    let session = record.name.clone();
    let old = record.cage.as_ref();
    let mut steps = vec![Step::Intent {
        session: session.clone(),
        intent: Intent::Move {
            from: old.map(|c| c.container.clone()),
            to: plan.map(|p| p.container.clone()),
        },
    }];
    // --unseal out of a cage (checked by the caller): the owner trusts the
    // folder again.
    if plan.is_none() && old.is_some_and(|c| c.sealed.is_some()) {
        steps.push(Step::Untrusted {
            dir: record.dir.clone(),
            session: session.clone(),
            remember: false,
        });
    }
    let new_cage = plan.map(|p| p.record());
    if let Some(p) = plan {
        steps.extend(p.steps());
    }
    let mut moved = record.clone();
    moved.cage = new_cage.clone();
    let what = match (old, &new_cage) {
        (_, None) => "taken out of its cage".to_string(),
        (None, Some(_)) => format!("moved into a cage ({})", create::describe(&moved)),
        (Some(_), Some(_)) => format!("given a new cage ({})", create::describe(&moved)),
    };
    let what = if dir != record.dir {
        format!("{what}; its folder is {} now", dir.display())
    } else {
        what
    };
    steps.push(Step::ChangeRecord {
        session: session.clone(),
        // Out of its cage, the session remembers that cage's image for the
        // way back in.
        last_image: match &new_cage {
            None => old.map(|c| c.image.clone()),
            Some(_) => None,
        },
        cage: new_cage.map(Box::new),
        dir: dir.to_path_buf(),
    });
    if let Some(c) = old {
        steps.push(Step::RemoveContainer {
            name: c.container.clone(),
            best_effort: true,
        });
    }
    steps.push(Step::History {
        session: session.clone(),
        entry: HistoryEntry {
            when: crate::state::when::now(),
            who,
            what,
        },
    });
    steps.push(Step::Done { session });
    steps
}
