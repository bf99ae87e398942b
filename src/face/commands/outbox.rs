//! `outbox pack` and `outbox send`: what a sealed session left in its outbox.

use std::process::ExitCode;

use crate::error::Result;
use crate::face::cli::OutboxCommand;
use crate::face::output;
use crate::ops::{self, Context};

pub fn run(ctx: &Context, cmd: OutboxCommand, json: bool) -> Result<ExitCode> {
    match cmd {
        OutboxCommand::Pack {
            name,
            output,
            only,
            force,
        } => {
            let r = ops::outbox::pack(ctx, &name, only.as_deref(), &output, force)?;
            output::show(&r, json, output::packed);
        }
        OutboxCommand::Send(a) => {
            let r = ops::outbox::send(ctx, &a.into())?;
            output::show(&r, json, |r| format!("{}\n", r.result));
        }
    }
    Ok(ExitCode::SUCCESS)
}
