//! `cage bring`: the session's commits brought into the user's repository
//! on demand (docs/security.md, "Git in a cage"), as after each turn; with `--ff`,
//! the user's checked-out branch fast-forwarded to the session's commit of
//! the same branch, when that changes nothing under the user. And the same
//! bringing-in before a session's git directory goes (`cage rm`, `cage
//! move`, `cage rename`).

use serde::Serialize;

use super::Context;
use crate::cage::git::bring::{FastForward, Refused, Report};
use crate::error::{Error, Result};
use crate::host::Host;
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
        Error::bad_input(format!(
            "session {name} is not in a cage: its git is your repository's already"
        ))
    })?;
    if cage.git.is_none() {
        return Err(Error::bad_input(format!(
            "session {name}'s cage has no git directory of its own (made with --writable .git): \
             its commits are in your repository already"
        )));
    }
    let host = ctx.host_for_session()?;
    super::moves::check_idle(host, name, cage, "bring its commits in")?;
    let git = before_its_git_goes(ctx, None, &record);
    let program = crate::settings::find_program("git", ctx.settings.path_var.as_deref());
    let fast_forward = if ff {
        let done = crate::cage::git::bring::fast_forward(name, &record.dir, program.as_deref())
            .map_err(|why| {
                Error::failed(format!(
                    "your branch was not fast-forwarded to session {name}'s: {why}"
                ))
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

/// The session's commits brought in before its git directory goes (`cage
/// rm`, `cage move`, `cage rename`) or on demand, with its cage stopped
/// first where `host` is given (`cage rm` takes a running cage); what
/// failed is a refusal in the report, said to the user: the session's
/// commits that did not come in go with its git directory.
pub fn before_its_git_goes(ctx: &Context, host: Option<&Host>, record: &Record) -> Report {
    let (Some(cage), Some(dir)) = (&record.cage, record.dir.is_dir().then_some(&record.dir)) else {
        return Report::default();
    };
    let Some(git) = &cage.git else {
        return Report::default();
    };
    // No repository of the session's, or none of the user's: nothing to
    // bring, and the cage is left as it is.
    let user = crate::cage::git::locate(dir).filter(crate::cage::git::is_repository);
    if user.is_none() || std::fs::symlink_metadata(git.own.join("HEAD")).is_err() {
        return Report::default();
    }
    if let Some(h) = host {
        let _ = h.podman.stop(&cage.container);
    }
    let program = crate::settings::find_program("git", ctx.settings.path_var.as_deref());
    crate::cage::git::bring::bring(
        &record.name,
        dir,
        &git.own,
        &ctx.store.git_base(&cage.container),
        program.as_deref(),
    )
    .unwrap_or_else(|e| Report {
        brought: Vec::new(),
        refused: vec![Refused {
            branch: "*".into(),
            why: e.message,
        }],
    })
}

/// Lines for a removal or a move: what came in, and what is lost.
pub fn said_before_removal(git: &Report) -> Vec<String> {
    let mut lines = git.lines();
    if !git.refused.is_empty() {
        lines.push(
            "the session's commits that did not come in go with its cage's git directory"
                .to_string(),
        );
    }
    lines
}
