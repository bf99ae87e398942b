//! `cage limits`: a session's limits and token budget, shown or set.

use std::process::ExitCode;

use crate::error::Result;
use crate::face::cli::LimitsArgs;
use crate::face::output;
use crate::ops::{self, Context};
use crate::settings::Overrides;

/// The command line's limits are read with the config, by the same rules.
pub fn overrides(a: &LimitsArgs) -> Overrides {
    Overrides {
        memory: a.memory.clone(),
        cpus: a.cpus.clone(),
        pids: a.pids.clone(),
        ..Overrides::default()
    }
}

/// Without flags, shows them; with any, sets them.
pub fn run(ctx: &Context, a: LimitsArgs, json: bool) -> Result<ExitCode> {
    let shows = a.memory.is_none()
        && a.cpus.is_none()
        && a.pids.is_none()
        && a.tokens.is_none()
        && a.usd.is_none()
        && a.net.is_none()
        && !a.reset
        && a.by.is_none();
    if shows {
        let r = ops::limits::show(ctx, &a.name)?;
        output::show(&r, json, output::limits_shown);
        return Ok(ExitCode::SUCCESS);
    }
    let req = ops::limits::LimitsRequest::try_from((a, ctx.settings.asked_limits.clone()))?;
    let r = ops::limits::limits(ctx, &req)?;
    output::warnings(&r.warnings);
    output::show(&r, json, output::limits);
    Ok(ExitCode::SUCCESS)
}
