//! `cage create`, `cage move` and `cage rename`: a cage made, or made
//! again, from the cage flags (the requests built in `face::requests`).

use std::process::ExitCode;

use crate::error::Result;
use crate::face::cli::{CreateArgs, MoveArgs, RenameArgs};
use crate::face::output;
use crate::ops::{self, Context};

pub fn create(ctx: &Context, a: CreateArgs, json: bool) -> Result<ExitCode> {
    let req = ops::create::CreateRequest::try_from(a)?;
    output::say_progress(ctx, json);
    let created = ops::create::create(ctx, &req)?;
    output::warnings(&created.warnings);
    // A dry run the real command would refuse: the argv, then the
    // refusal, with its exit code.
    if let Some(e) = &created.refused {
        output::error_after(e, json, &created, output::created);
        return Ok(ExitCode::from(e.kind.exit_code()));
    }
    output::show(&created, json, output::created);
    Ok(ExitCode::SUCCESS)
}

pub fn move_session(ctx: &Context, a: MoveArgs, json: bool) -> Result<ExitCode> {
    let req = ops::moves::MoveRequest::try_from(a)?;
    output::say_progress(ctx, json);
    let r = ops::moves::move_session(ctx, &req)?;
    output::warnings(&r.warnings);
    output::show(&r, json, |r| format!("{}: {}\n", r.session, r.what));
    Ok(ExitCode::SUCCESS)
}

pub fn rename(ctx: &Context, a: RenameArgs, json: bool) -> Result<ExitCode> {
    let r = ops::rename::rename(ctx, &a.into())?;
    output::warnings(&r.warnings);
    output::show(&r, json, |r| format!("{}: {}\n", r.session, r.what));
    Ok(ExitCode::SUCCESS)
}
