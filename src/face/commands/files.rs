//! `files`: whom a session takes files from, and what it received.

use std::process::ExitCode;

use crate::error::Result;
use crate::face::cli::FilesCommand;
use crate::face::output;
use crate::ops::{self, Context};

pub fn run(ctx: &Context, cmd: FilesCommand, json: bool) -> Result<ExitCode> {
    let r = match cmd {
        FilesCommand::Allow { name, from } => ops::files::allow(ctx, &name, &from)?,
        FilesCommand::Deny { name, from } => ops::files::deny(ctx, &name, &from)?,
        FilesCommand::List { name } => ops::files::list(ctx, &name)?,
        FilesCommand::Ignore { name, from } => ops::files::ignore(ctx, &name, &from)?,
        FilesCommand::Received { name } => {
            let r = ops::files::received(ctx, &name)?;
            output::show(&r, json, output::received);
            return Ok(ExitCode::SUCCESS);
        }
        FilesCommand::Clear { name, from, file } => {
            let r = ops::files::clear(ctx, &name, &from, &file)?;
            output::show(&r, json, output::received);
            return Ok(ExitCode::SUCCESS);
        }
    };
    output::show(&r, json, output::files);
    Ok(ExitCode::SUCCESS)
}
