//! The session's commits brought into the user's repository before its
//! git directory goes (`cage rm`, `cage move`, `cage rename`), as `cage
//! bring` brings them on demand, and what is said of it.

use super::Context;
use crate::cage::git::bring::{Refused, Report};
use crate::host::Host;
use crate::state::session::Record;

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
            why: crate::error::NotBrought::Failed(Box::new(e)),
        }],
    })
}

/// Lines for a removal or a move: what came in, and what is lost.
pub fn said_before_removal(git: &Report) -> Vec<crate::error::Warning> {
    let mut said = git.said();
    if !git.refused.is_empty() {
        said.push(crate::error::Warning::CommitsGo);
    }
    said
}
