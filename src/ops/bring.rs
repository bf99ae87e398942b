//! `cage bring`: the session's commits brought into the user's repository
//! on demand (docs/security.md, "Git in a cage"), as after each turn; with `--ff`,
//! the user's checked-out branch fast-forwarded to the session's commit of
//! the same branch, when that changes nothing under the user. The same
//! bringing-in before a session's git directory goes is
//! `before_git_goes.rs`'s.

use serde::Serialize;

use super::Context;
use crate::cage::git::bring::{FastForward, Report};
use crate::error::{Error, Result, SessionProblem};
use crate::state::session::{HistoryEntry, Record};

/// What `cage bring` did.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Brought {
    pub session: String,
    /// The session's branches brought in (`brought`) or refused (`refused`).
    pub git: Report,
    /// With `--ff`: the user's branch fast-forwarded (null when not asked).
    pub fast_forward: Option<FastForward>,
}

/// Bring a session's commits in (its cage idle: nothing but its first
/// process runs there), and fast-forward the user's branch when `ff`.
pub fn bring(ctx: &Context, name: &str, ff: bool) -> Result<Brought> {
    let (_lock, record) = super::plan::lock_and_load(ctx, name)?;
    _lock.note("bring");
    let cage = record.cage.as_ref().ok_or_else(|| {
        Error::session(
            name,
            crate::error::SessionProblem::NotCaged {
                then: ": its git is your repository's already",
            },
        )
    })?;
    if cage.git.is_none() {
        return Err(Error::session(name, SessionProblem::NoOwnGit));
    }
    let host = ctx.host_for_session()?;
    super::idle::check_idle(host, name, cage, "bring its commits in")?;
    let git = super::before_git_goes::before_its_git_goes(ctx, None, &record);
    let program = crate::settings::find_program("git", ctx.settings.path_var.as_deref());
    let fast_forward = if ff {
        let done = crate::cage::git::bring::fast_forward(name, &record.dir, program.as_deref())
            .map_err(|why| {
                Error::session(name, crate::error::SessionProblem::NotFastForwarded { why })
            });
        if let Err(e) = &done {
            remember(ctx, &record, &git, None);
            return Err(e.clone());
        }
        done.ok()
    } else {
        None
    };
    remember(ctx, &record, &git, fast_forward.as_ref());
    Ok(Brought {
        session: record.name,
        git,
        fast_forward,
    })
}

/// The history line of a bringing-in, and the record's `after_turn.git`
/// (the status page and `cage show` say what came in last).
fn remember(ctx: &Context, record: &Record, git: &Report, ff: Option<&FastForward>) {
    let mut lines = git.lines();
    if let Some(f) = ff {
        lines.push(ff_line(f));
    }
    if lines.is_empty() {
        return;
    }
    let when = crate::state::when::now();
    let _ = ctx.store.append_history(
        &record.name,
        &HistoryEntry {
            when,
            who: ctx.settings.user.clone(),
            what: lines.join("; "),
        },
    );
    if !git.is_empty() {
        let _ = ctx.store.update(&record.name, |r| {
            let mut after = r.after_turn.clone().unwrap_or_default();
            after.when = when;
            after.git = git.clone();
            r.after_turn = Some(after);
            Ok(())
        });
    }
}

/// The line saying what `--ff` did.
pub fn ff_line(f: &FastForward) -> String {
    match &f.from {
        Some(from) if *from == f.to => format!("your {} is the session's already", f.branch),
        Some(from) => format!(
            "fast-forwarded your {} from {} to {}",
            f.branch,
            &from[..from.len().min(12)],
            &f.to[..f.to.len().min(12)]
        ),
        None => format!(
            "your {} now names {}",
            f.branch,
            &f.to[..f.to.len().min(12)]
        ),
    }
}
