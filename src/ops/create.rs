//! `cage create`: record a session and make its container (made, not
//! started). The cage is decided and made by `make`; if recording the
//! session fails, the cage is taken back: never a half-made cage.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Context;
use super::make::{self, CageChoice};
use super::plan::Step;
use crate::cage::harness::Harness;
use crate::error::{Error, Result};
use crate::state::session::{self, HistoryEntry, Intent, RECORD_VERSION, Record};
use crate::state::when::now;

#[derive(Debug, Clone)]
pub struct CreateRequest {
    pub name: String,
    pub dir: PathBuf,
    pub harness: Harness,
    pub choice: CageChoice,
    pub dry_run: bool,
    /// Kept in the record for the apps.
    pub auto_approve: bool,
    /// `dir` is the current folder, taken since no `--dir` was given: a
    /// refusal of it says how to give another.
    pub dir_from_cwd: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Created {
    pub session: String,
    pub container: String,
    pub image: String,
    pub network: String,
    pub harness: Harness,
    pub dir: PathBuf,
    pub sealed: bool,
    pub dry_run: bool,
    /// The full podman command line, program first.
    pub argv: Vec<String>,
    /// The env file as `exec` would write it now, secrets redacted.
    pub env_file: String,
    pub warnings: Vec<crate::error::Warning>,
    /// A dry run's: the real command would be refused, and why (the argv
    /// is shown all the same), its kind kept for the exit code. JSON gives
    /// its words, as `would_be_refused`; null otherwise.
    #[serde(rename = "would_be_refused")]
    pub refused: Option<crate::error::Error>,
}

pub fn create(ctx: &Context, req: &CreateRequest) -> Result<Created> {
    session::validate_name(&req.name)?;
    let dir = chosen_dir(ctx, req)?;
    // With an intent beside the record, a create that died after writing
    // it: repaired under the lock below before the refusal.
    if ctx.store.exists(&req.name) && !ctx.store.intent_path(&req.name).exists() {
        return Err(already(&req.name));
    }
    let host = ctx.host()?;
    // The session's lock is taken before the checks that read the
    // neighbouring sessions' records, so that two creates cannot both pass
    // them; a dry run writes nothing, not even a lock file.
    let _lock = if req.dry_run {
        None
    } else {
        Some(lock_new(ctx, &req.name)?)
    };
    let plan = match make::prepare(
        ctx,
        host,
        &req.name,
        &dir,
        req.harness,
        &req.choice,
        req.dry_run,
    ) {
        Ok(plan) => plan,
        Err(e) => {
            if !req.dry_run {
                ctx.store.forget_lock(&req.name);
            }
            return Err(e);
        }
    };
    let mut result = created(req, host, &dir, &plan);
    if req.dry_run {
        return Ok(result);
    }
    let mut record = new_record(req, &dir, &plan);
    // The machine's budgets (`[budget] tokens`, `usd`), which the record
    // keeps as its own from now on.
    record.tokens.budget = ctx.settings.budget.tokens;
    record.tokens.usd_budget = ctx.settings.budget.usd;
    let who = ctx.settings.user.clone();
    match super::plan::execute(ctx, Some(host), steps(&plan, &record, who)) {
        Ok(ran) => {
            // The state folder's identity another create kept first, if
            // one did, is the one the container was made with.
            if let Some(id) = &ran.state_id {
                result.argv = crate::host::podman::argv::relabel_state(&result.argv, id);
            }
            plan.say_rebuilt(ran.rebuilt, &mut result.warnings)
        }
        Err(e) => {
            ctx.store.forget_lock(&req.name);
            return Err(e);
        }
    }
    Ok(result)
}

/// The project folder `req` names. Without `--dir` it is the current
/// folder: its refusals come first, each with the way to another folder.
fn chosen_dir(ctx: &Context, req: &CreateRequest) -> Result<PathBuf> {
    if !req.dir_from_cwd {
        return project_dir(&req.dir);
    }
    project_dir(&req.dir)
        .and_then(
            |d| match make::folder_refusal(ctx, &d, req.harness, &req.choice) {
                Some(e) => Err(e),
                None => Ok(d),
            },
        )
        .map_err(|e| {
            e.then_on_terminal(
                "Without --dir, `cage create` takes the current folder: pass --dir with the \
                 project folder, or cd to it first",
            )
        })
}

/// The lock of a session about to be made, once a create of that name
/// that died is repaired; refused when the session is there already.
fn lock_new(ctx: &Context, name: &str) -> Result<session::SessionLock> {
    let lock = match ctx.store.lock(name) {
        // Another create of this name won, and has made its record.
        Err(e) if e.kind == crate::error::Kind::Busy && ctx.store.exists(name) => {
            return Err(already(name));
        }
        held => held?,
    };
    // A create of this name that died left its intent: its container
    // is taken back before this one is made.
    if let Some(line) = super::plan::repair(ctx, name)? {
        ctx.note(line);
    }
    if ctx.store.exists(name) {
        return Err(already(name));
    }
    lock.note("create");
    Ok(lock)
}

/// What a create answers: the cage `plan` makes for `req`, with the full
/// podman command line and the env file as `exec` would write it.
fn created(
    req: &CreateRequest,
    host: &crate::host::Host,
    dir: &Path,
    plan: &make::CagePlan,
) -> Created {
    let mut argv = vec![host.podman.program().to_string_lossy().into_owned()];
    argv.extend(plan.create_argv.iter().cloned());
    Created {
        session: req.name.clone(),
        container: plan.container.clone(),
        image: plan.image.clone(),
        network: plan.spec.network.name().to_string(),
        harness: req.harness,
        dir: dir.to_path_buf(),
        sealed: plan.is_sealed(),
        dry_run: req.dry_run,
        argv,
        env_file: plan.env_redacted(),
        warnings: plan.warnings.clone(),
        refused: plan.refused.clone(),
    }
}

/// The record of a session made by `req` in `plan`'s cage.
fn new_record(req: &CreateRequest, dir: &Path, plan: &make::CagePlan) -> Record {
    Record {
        version: RECORD_VERSION,
        name: req.name.clone(),
        dir: dir.to_path_buf(),
        harness: req.harness,
        created: now(),
        cage: Some(plan.record()),
        auto_approve: req.auto_approve,
        starred: false,
        files: Default::default(),
        tokens: Default::default(),
        // Unset: it follows the session in and out of its cage (on while
        // caged) until someone sets it.
        accept_caged: None,
        last_image: None,
        after_turn: None,
    }
}

/// Pure: the steps of a create. Its intent first: a crash after `podman
/// create` and before the record would leave a container of no session.
pub fn steps<'a>(plan: &'a make::CagePlan, record: &Record, who: String) -> Vec<Step<'a>> {
    let session = record.name.clone();
    let mut steps = vec![Step::Intent {
        session: session.clone(),
        intent: Intent::Create {
            container: plan.container.clone(),
        },
    }];
    steps.extend(plan.steps());
    steps.push(Step::NewRecord(Box::new(record.clone())));
    steps.push(Step::History {
        session: session.clone(),
        entry: HistoryEntry {
            when: record.created,
            who,
            what: format!("created in a cage ({})", describe(record)),
        },
    });
    steps.push(Step::Done { session });
    steps
}

pub(super) fn already(name: &str) -> Error {
    Error::session(name, crate::error::SessionProblem::Exists)
}

/// A cage in a few words, for the history: its image and options.
pub fn describe(record: &Record) -> String {
    let Some(c) = &record.cage else {
        return "no cage".into();
    };
    let mut parts = vec![format!("image {}", c.image)];
    if c.sealed.is_some() {
        parts.push("sealed".into());
    } else {
        parts.push(format!("net {}", c.net));
    }
    if c.options.github {
        parts.push("github".into());
    }
    if c.options.nix.is_some() {
        parts.push("nix".into());
    }
    if let Some(v) = &c.options.shared {
        parts.push(format!("shared {v}"));
    }
    for w in &c.options.writable {
        parts.push(format!("writable {w}"));
    }
    parts.join(", ")
}

/// The project folder: it must exist and be a folder; kept canonical.
pub fn project_dir(dir: &Path) -> Result<PathBuf> {
    use crate::error::FolderProblem;
    let canonical = std::fs::canonicalize(dir).map_err(|e| {
        let cause = crate::error::Cause::of(&e);
        Error::folder(dir, FolderProblem::Unusable { cause })
    })?;
    if !canonical.is_dir() {
        return Err(Error::folder(dir, FolderProblem::NotAFolder));
    }
    if canonical.to_str().is_none() {
        return Err(Error::folder(dir, FolderProblem::NotUtf8));
    }
    Ok(canonical)
}
