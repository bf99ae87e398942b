//! `cage prune`: leftovers this state folder made, removed after asking.

use std::io::IsTerminal;
use std::process::ExitCode;

use crate::error::{Error, Result};
use crate::face::output;
use crate::ops::{self, Context};

/// What it would remove is shown first; it removes only with `--yes`, or
/// when asked on a terminal and answered yes. Without a terminal and
/// without `--yes` it removes nothing and says so (exit 2).
pub fn run(ctx: &Context, dry_run: bool, yes: bool, json: bool) -> Result<ExitCode> {
    // Its listing stops a killed turn's cage first: said before the plan.
    let planned = ops::prune::plan(ctx);
    super::warnings(ctx);
    let planned = planned?;
    if dry_run || planned.removes_nothing() {
        output::show(&planned, json, output::pruned);
        return Ok(ExitCode::SUCCESS);
    }
    if !yes {
        let tty = std::io::stdin().is_terminal();
        if !tty {
            let e = Error::input(crate::error::InputProblem::PruneUnasked {
                would: output::prune_count(&planned),
            });
            output::error_after(&e, json, &planned, output::pruned);
            return Ok(ExitCode::from(e.kind.exit_code() as u8));
        }
        eprint!("{}", output::pruned(&planned));
        eprint!("remove {}? [y/N] ", output::prune_count(&planned));
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") {
            eprintln!("nothing was removed");
            output::show(&planned, json, |_| String::new());
            return Ok(ExitCode::SUCCESS);
        }
    }
    let done = ops::prune::apply(ctx, &planned)?;
    output::show(&done, json, output::pruned);
    Ok(ExitCode::SUCCESS)
}
