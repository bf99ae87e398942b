//! `serve`: the same operations over HTTP.

use std::path::Path;
use std::process::ExitCode;

use crate::error::Result;
use crate::ops::{self, Context};
use crate::settings::Overrides;

/// `--listen` is read with the config, by the same rules.
pub fn overrides(listen: Option<String>) -> Overrides {
    Overrides {
        listen,
        ..Overrides::default()
    }
}

pub fn run(ctx: Context, token_file: Option<&Path>) -> Result<ExitCode> {
    // serve makes, runs and removes cages for its callers.
    ops::refuse_root(&ctx.settings)?;
    crate::serve::run(ctx, token_file)?;
    Ok(ExitCode::SUCCESS)
}
