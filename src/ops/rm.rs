//! `cage rm`: remove a session: its container (`podman rm -f`, and with it
//! everything installed in it), its env file, its private home and proxy
//! folder, and its record: nothing of the session is left to clean up.

use std::path::PathBuf;

use serde::Serialize;

use super::Context;
use super::plan::{self, Step};
use crate::error::Result;
use crate::state::session::{Intent, Record};

#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    pub session: String,
    pub container: Option<String>,
    /// Files and folders removed, besides the container.
    pub files: Vec<PathBuf>,
    /// The session's commits brought into your repository before its
    /// cage's git directory went, or refused (docs/security.md, "Git in a cage").
    #[serde(skip_serializing_if = "crate::cage::git::bring::Report::is_empty")]
    pub git: crate::cage::git::bring::Report,
}

pub fn rm(ctx: &Context, name: &str) -> Result<Removed> {
    let (_lock, record) = plan::lock_and_load(ctx, name)?;
    _lock.note("rm");
    let host = match &record.cage {
        Some(_) => Some(ctx.host_for_session()?),
        None => None,
    };
    let mut files = Vec::new();
    if let Some(cage) = &record.cage {
        for f in [
            ctx.store.env_file(&cage.container),
            ctx.store.cage_dir(&cage.container),
        ] {
            if f.exists() {
                files.push(f);
            }
        }
    }
    files.push(ctx.store.record_path(name));
    if ctx.store.history_path(name).exists() {
        files.push(ctx.store.history_path(name));
    }
    let git = super::before_git_goes::before_its_git_goes(ctx, host, &record);
    plan::execute(ctx, host, steps(&record))?;
    Ok(Removed {
        session: record.name,
        container: record.cage.map(|c| c.container),
        files,
        git,
    })
}

/// Pure: the steps of a removal. The container goes first: if podman
/// cannot remove it, the record stays, so the session can be removed again
/// later. The intent is written before it: a crash once the container is
/// gone leaves a record the next command finishes removing, not one whose
/// container seems removed by hand.
pub fn steps(record: &Record) -> Vec<Step<'static>> {
    let session = record.name.clone();
    let container = record.cage.as_ref().map(|c| c.container.clone());
    let mut steps = vec![Step::Intent {
        session: session.clone(),
        intent: Intent::Remove {
            container: container.clone(),
        },
    }];
    if let Some(name) = container {
        steps.push(Step::RemoveContainer {
            name,
            best_effort: false,
        });
    }
    steps.push(Step::RemoveRecord { session });
    steps
}
