//! `cage move`: a session into a fresh cage with new options, or out of its
//! cage (README, "Limits, moving, history"). Only while idle. The new
//! container is made before the old one is deleted, so a failure leaves the
//! session as it was; the conversation continues, since every path in a
//! cage is the machine's own.

use serde::Serialize;

use super::make::{self, CageChoice};
use super::{Context, create};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::session::{CageRecord, HistoryEntry};

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
    pub warnings: Vec<String>,
}

pub fn move_session(ctx: &Context, req: &MoveRequest) -> Result<Moved> {
    if let Some(by) = &req.by {
        crate::session::validate_who(by)?;
    }
    // Checked before anything is locked or asked: it must exist, as at
    // create; a cage's own checks of it (not under the state folder, not a
    // sealed session's) are `make::plan`'s, as at create.
    let new_dir = req.dir.as_deref().map(create::project_dir).transpose()?;
    let (_lock, record) = ctx.store.lock_and_load(&req.name)?;
    _lock.note("move");
    let dir = new_dir.clone().unwrap_or_else(|| record.dir.clone());
    let old = record.cage.clone();
    // Without podman a caged session can still be taken out of its cage
    // (README, "Configuration", `cages = false`): its container is left for
    // `cage prune` once podman is back.
    let host = match (&old, req.out) {
        (None, true) => {
            return Err(Error::bad_input(format!(
                "session {} is not in a cage, so it cannot be taken out of one",
                req.name
            )));
        }
        (Some(_), true) => match ctx.host() {
            Ok(h) => Some(h),
            Err(e) if e.kind == crate::error::Kind::NoPodman => None,
            Err(e) => return Err(e),
        },
        (Some(_), false) => Some(ctx.host_for_session()?),
        (None, false) => Some(ctx.host()?),
    };
    // Seed, "After a sealed session": the folder is untrusted; run nothing
    // from it outside a cage. Out of the seal, the harness would run there
    // with the user's settings and hooks, or as the user itself.
    let sealed_now = old.as_ref().is_some_and(|c| c.sealed.is_some());
    if sealed_now && (req.out || !req.choice.sealed) && !req.unseal {
        return Err(Error::bad_input(format!(
            "session {} is sealed, and its folder is untrusted after a sealed session: what the \
             code under review left there (a git hook, a Makefile, an .envrc) would run as you \
             outside the seal; read it, then delete it or clone again. To take the session out \
             of its seal all the same, pass --unseal",
            req.name
        )));
    }
    if let (Some(cage), Some(host)) = (&old, host) {
        check_idle(host, &req.name, cage)?;
    }
    let mut warnings = Vec::new();
    let (to, what) = if req.out {
        if sealed_now {
            // --unseal, checked above: the owner trusts the folder again.
            super::sealed::forget_untrusted(&ctx.store, &record.dir, Some(&record.name))?;
        }
        if new_dir.is_some() {
            super::project::check_own_folder(
                &dir,
                ctx.env.get("XDG_RUNTIME_DIR").map(String::as_str),
            )?;
        }
        (None, "taken out of its cage".to_string())
    } else {
        let host = host.ok_or_else(|| Error::no_podman(crate::host::NO_PODMAN))?;
        // Without --image, the session keeps the image its cage was made
        // from, or, out of a cage, the one it was taken out of: a move
        // changes what was asked, not what was not (a switch to the
        // config's image could start a build nobody asked for).
        let image = req
            .choice
            .image
            .clone()
            .or_else(|| old.as_ref().map(|c| c.image.clone()))
            .or_else(|| record.last_image.clone());
        // So is its network policy, unless it is sealed now (a sealed
        // cage has its own rules).
        let net = match (&req.choice.net, req.choice.sealed) {
            (Some(n), _) => Some(n.clone()),
            (None, false) => old.as_ref().map(|c| c.net.clone()),
            (None, true) => None,
        };
        let choice = make::CageChoice {
            unseal: req.unseal,
            image,
            net,
            ..req.choice.clone()
        };
        let plan = make::plan(
            ctx,
            host,
            &record.name,
            &dir,
            record.harness,
            &choice,
            false,
        )?;
        // The session's own limits go with it into its new cage.
        let plan = match &old {
            Some(c) if c.own_limits => plan.with_own_limits(c.limits.clone()),
            _ => plan,
        };
        warnings.extend(plan.warnings.iter().cloned());
        let cage = plan.make(ctx, host)?;
        let name = cage.container.clone();
        let mut moved = record.clone();
        moved.cage = Some(cage);
        moved.dir = dir.clone();
        let what = match &old {
            None => format!("moved into a cage ({})", create::describe(&moved)),
            Some(_) => format!("given a new cage ({})", create::describe(&moved)),
        };
        (Some((name, moved.cage.unwrap())), what)
    };
    let what = match &new_dir {
        Some(d) if *d != record.dir => format!("{what}; its folder is {} now", d.display()),
        _ => what,
    };
    let new_cage = to.as_ref().map(|(_, c)| c.clone());
    // Out of its cage, the session remembers that cage's image for the
    // way back in.
    let last_image = match &new_cage {
        None => old.as_ref().map(|c| c.image.clone()),
        Some(_) => None,
    };
    let saved = ctx.store.update(&req.name, |r| {
        r.cage = new_cage;
        r.dir = dir.clone();
        r.last_image = last_image;
        Ok(())
    });
    if let Err(e) = saved {
        // The record still names the old cage: take the new one back.
        if let (Some((_, cage)), Some(host)) = (&to, host) {
            let _ = make::remove_cage(ctx, host, cage);
        }
        return Err(e);
    }
    if let Some(cage) = &old {
        let removed = match host {
            Some(host) => make::remove_cage(ctx, host, cage).map(|_| ()),
            None => Err(Error::failed("this machine has no podman")),
        };
        if let Err(e) = removed {
            warnings.push(format!(
                "the old container {} could not be removed ({e}); `shrooms-agent cage prune` \
                 removes it later",
                cage.container
            ));
        }
    }
    ctx.store.append_history(
        &req.name,
        &HistoryEntry {
            when: create::now(),
            who: req.by.clone().unwrap_or_else(|| ctx.settings.user.clone()),
            what: what.clone(),
        },
    )?;
    Ok(Moved {
        session: record.name,
        from: old.map(|c| c.container),
        to: to.map(|(n, _)| n),
        what,
        warnings,
    })
}

/// Idle: no command holds the session (the lock, taken by the caller) and
/// nothing but its first process runs in its cage: the machine's catatonit
/// (`<init path> -P`), or `sleep infinity` in a cage made before that.
fn check_idle(host: &Host, session: &str, cage: &CageRecord) -> Result<()> {
    let running = host
        .podman
        .container(&cage.container)?
        .is_some_and(|s| s.running);
    if !running {
        return Ok(());
    }
    let init = format!("{} -P", crate::podman::argv::init_path(&cage.container));
    let busy: Vec<String> = host
        .podman
        .top_args(&cage.container)?
        .into_iter()
        .filter(|args| *args != init && args != "sleep infinity")
        .collect();
    if busy.is_empty() {
        Ok(())
    } else {
        Err(Error::busy(format!(
            "session {session} is busy: {} runs in its cage; move it once it is idle",
            busy.join(", ")
        )))
    }
}
