//! `cage exec`, `cage run` and the watcher of a turn (`cage watch-turn`).

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use super::{notes, strings, warnings};
use crate::error::{Error, Result};
use crate::face::{output, remote};
use crate::ops::{self, Context};

/// `cage exec`: a command in the cage (a shell without one), as the turn
/// or, with `--join`, beside it.
pub fn exec(
    ctx: &Context,
    join: bool,
    name: &str,
    cmd: Vec<OsString>,
    laptop: Option<&Path>,
) -> Result<ExitCode> {
    let cmd = strings(cmd)?;
    let what = if cmd.is_empty() {
        ops::exec::What::Shell
    } else {
        ops::exec::What::Command(cmd)
    };
    if join {
        let tty = std::io::stdin().is_terminal();
        let code = ops::exec::prepare_join(ctx, name, what, tty)?.run()?;
        return Ok(ExitCode::from(code.clamp(0, 255) as u8));
    }
    turn(ctx, name, what, laptop)
}

/// `cage run`: the session's harness, in its cage, or outside any cage
/// when it was taken out of one and `--uncaged` says so.
pub fn run(
    ctx: &Context,
    name: Option<String>,
    uncaged: bool,
    args: Vec<OsString>,
    laptop: Option<&Path>,
) -> Result<ExitCode> {
    let args = strings(args)?;
    let name = match name {
        Some(n) => n,
        None => {
            let cwd = std::env::current_dir().map_err(|e| {
                Error::input(crate::error::InputProblem::CwdUnreadable {
                    cause: e.to_string(),
                    for_: crate::error::CwdFor::Session,
                })
            })?;
            ops::exec::session_of_folder(ctx, &cwd)?
        }
    };
    if ops::exec::is_uncaged(ctx, &name)? {
        let uncaged = ops::exec::prepare_uncaged(ctx, &name, args, uncaged)?;
        output::warnings(std::slice::from_ref(&uncaged.notice));
        let code = uncaged.run()?;
        return Ok(ExitCode::from(code.clamp(0, 255) as u8));
    }
    if uncaged {
        return Err(Error::session(
            &name,
            crate::error::SessionProblem::CagedRunUncaged,
        ));
    }
    turn(ctx, &name, ops::exec::What::Harness(args), laptop)
}

/// `cage watch-turn`: its output is the cage's turn.log, a line when it
/// acted.
pub fn watch(ctx: &Context, req: ops::exec::WatchRequest) -> Result<ExitCode> {
    if let ops::exec::Watched::Stopped { signal } = ops::exec::watch(ctx, &req)? {
        let why = match signal {
            Some(s) => format!("this watcher got signal {s}"),
            None => "the process holding the turn ended without stopping it".into(),
        };
        output::warnings(&[format!("stopped {}: {why}", req.container)]);
    }
    Ok(ExitCode::SUCCESS)
}

/// The turn: run here, and said on the line to the machine that sent it,
/// if one did (`--on`, whose socket is `laptop`).
fn turn(
    ctx: &Context,
    name: &str,
    what: ops::exec::What,
    laptop: Option<&Path>,
) -> Result<ExitCode> {
    // A turn sent from another machine holds a line to it: the line's end
    // is a hang-up, and the turn's status is said on it.
    let line = match laptop {
        Some(socket) => Some(remote::hold(socket)?),
        None => None,
    };
    let code = turn_here(ctx, name, what)?;
    if let Some(line) = line {
        line.exit(i32::from(code));
        if let Some(socket) = laptop {
            let _ = std::fs::remove_file(socket);
        }
    }
    Ok(ExitCode::from(code))
}

fn turn_here(ctx: &Context, name: &str, what: ops::exec::What) -> Result<u8> {
    let tty = std::io::stdin().is_terminal();
    let prepared = ops::exec::prepare(ctx, name, what, tty);
    // A killed turn's cage stopped first, said whether this turn starts
    // or not.
    warnings(ctx);
    let prepared = prepared?;
    notes(ctx);
    output::warnings(&prepared.warnings);
    // The cage's egress log, while the turn runs: one that cannot be
    // written cuts the cage's network, which the user is told at once.
    let ended = prepared.run_reporting(&|log| match &log.problem {
        Some(p) => eprintln!("shrooms-agent: {name}: {p}"),
        None => eprintln!(
            "shrooms-agent: {name}: the egress log is written again; the cage's network is back"
        ),
    })?;
    if let Some(e) = &ended.stop_error {
        output::warnings(&[format!("the cage could not be stopped afterwards: {e}")]);
    }
    for line in &ended.after {
        eprintln!("shrooms-agent: {line}");
    }
    // Last on the screen, after the harness's own line (which would run it
    // outside the cage).
    if let Some(line) = &ended.resume {
        eprintln!("{line}");
    }
    // Ended by a signal: the code says so (128 + n), as a shell's would.
    Ok(ended.code.clamp(0, 255) as u8)
}
