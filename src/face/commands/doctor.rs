//! `doctor`: this machine's checks.

use std::process::ExitCode;

use crate::error::{Error, Result};
use crate::face::output;
use crate::ops::{self, Context};

/// A bad config file is one failing check (`bad_config`): the others run
/// with the defaults.
pub fn run(ctx: &Context, bad_config: Option<&Error>, json: bool) -> Result<ExitCode> {
    let report = ops::doctor::doctor_with(ctx, bad_config);
    let colour = ctx.settings.colour;
    output::show(&report, json, |r| output::doctor(r, colour));
    Ok(if report.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
