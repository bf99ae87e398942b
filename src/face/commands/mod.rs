//! One module per command (a group of `cage`'s subcommands where that reads
//! better), as `main.rs` dispatches them: each takes the clap values and
//! what `main.rs` resolved of the settings, calls the operations and prints
//! their results. None of them reads the config file itself.

pub mod cage;
pub mod completions;
pub mod create;
pub mod doctor;
pub mod files;
pub mod image;
pub mod inner;
pub mod limits;
pub mod man;
pub mod on;
pub mod outbox;
pub mod prune;
pub mod serve;
pub mod turn;
pub mod usage;
pub mod version;

use crate::error::{Error, Result};
use crate::ops::Context;

/// The context's notes, on stderr.
fn notes(ctx: &Context) {
    for line in ctx.take_notes() {
        eprintln!("shrooms-agent: {line}");
    }
}

/// The context's warnings (a killed turn's cage stopped on the way), on
/// stderr: said as soon as the operation that kept them returns, before
/// its result or its error.
fn warnings(ctx: &Context) {
    crate::face::output::warnings(&ctx.take_warnings());
}

/// Shows the context's warnings not said yet, then its notes, when the
/// command ends.
struct Notes<'a>(&'a Context);

impl Drop for Notes<'_> {
    fn drop(&mut self) {
        warnings(self.0);
        notes(self.0);
    }
}

/// Command words must be UTF-8 to go into podman's argument list as text.
fn strings(words: Vec<std::ffi::OsString>) -> Result<Vec<String>> {
    words
        .into_iter()
        .map(|w| {
            w.into_string()
                .map_err(|arg| Error::input(crate::error::InputProblem::ArgNotUtf8 { arg }))
        })
        .collect()
}
