//! `cage`: make, run, inspect and remove caged sessions. The subcommands
//! that make or change a cage are in `create` and `limits`, the turns in
//! `turn`, `prune` in its own; the plain ones are here.

use std::process::ExitCode;

use super::{Notes, create, limits, prune, turn, warnings};
use crate::error::Result;
use crate::face::cli::{CageCommand, HistoryArgs, StopArgs};
use crate::face::{output, remote};
use crate::ops::{self, Context};
use crate::settings::Overrides;

/// What the cage command line says beside the config: the limits of
/// `cage limits`, read with the config by the same rules.
pub fn overrides(cmd: &CageCommand) -> Overrides {
    match cmd {
        CageCommand::Limits(a) => limits::overrides(a),
        _ => Overrides::default(),
    }
}

pub fn run(ctx: &Context, cmd: CageCommand, json: bool) -> Result<ExitCode> {
    ops::refuse_root(&ctx.settings)?;
    // The socket to the machine that sent this turn (`--on`), if one did.
    let laptop = ctx.settings.laptop_socket.as_deref();
    // What was repaired on the way (a command that died), one line each,
    // whether this one succeeded or not: shown when it ends.
    let _notes = Notes(ctx);
    match cmd {
        CageCommand::Create(a) => create::create(ctx, a, json),
        CageCommand::Start(a) => {
            let r = ops::start::start(ctx, &a.name);
            warnings(ctx);
            let r = r?;
            output::show(&r, json, |r| {
                format!("started {} ({})\n", r.session, r.container)
            });
            Ok(ExitCode::SUCCESS)
        }
        CageCommand::Stop(a) => stop(ctx, a, json),
        CageCommand::Move(a) => create::move_session(ctx, a, json),
        CageCommand::Rename(a) => create::rename(ctx, a, json),
        CageCommand::Limits(a) => limits::run(ctx, a, json),
        CageCommand::AcceptCaged { name, state } => accept_caged(ctx, &name, &state, json),
        CageCommand::History(a) => history(ctx, a, json),
        CageCommand::Rm(a) => {
            output::say_progress(ctx, json);
            let r = ops::rm::rm(ctx, &a.name)?;
            output::show(&r, json, output::removed);
            Ok(ExitCode::SUCCESS)
        }
        CageCommand::Exec { join, name, cmd } => turn::exec(ctx, join, &name, cmd, laptop),
        CageCommand::Run {
            name,
            uncaged,
            args,
        } => turn::run(ctx, name, uncaged, args, laptop),
        CageCommand::Ls { all: true, .. } => remote::ls_all(ctx, json),
        CageCommand::Ls { quiet, .. } => ls(ctx, quiet, json),
        CageCommand::Show(a) => {
            ops::tidy::session(ctx, &a.name);
            let r = ops::show::show(ctx, &a.name);
            warnings(ctx);
            let r = r?;
            output::show(&r, json, output::shown);
            Ok(ExitCode::SUCCESS)
        }
        CageCommand::Bring { name, ff } => {
            let r = ops::bring::bring(ctx, &name, ff)?;
            output::show(&r, json, output::brought);
            Ok(ExitCode::SUCCESS)
        }
        CageCommand::Prune { dry_run, yes } => prune::run(ctx, dry_run, yes, json),
        CageCommand::WatchTurn {
            session,
            container,
            podman,
            lock_fd,
            pipe_fd,
            ready_fd,
        } => turn::watch(
            ctx,
            ops::exec::WatchRequest {
                session,
                container,
                podman,
                lock_fd,
                pipe_fd,
                ready_fd,
            },
        ),
    }
}

fn stop(ctx: &Context, a: StopArgs, json: bool) -> Result<ExitCode> {
    if let Some(name) = a.name.filter(|_| !a.all) {
        let r = ops::stop::stop(ctx, &name)?;
        output::show(&r, json, output::stopped);
        return Ok(ExitCode::SUCCESS);
    }
    let r = ops::stop::stop_all(ctx)?;
    let text =
        |r: &ops::stop::StoppedAll| -> String { r.stopped.iter().map(output::stopped).collect() };
    match r.error() {
        // One shape with or without a busy session or a damaged
        // record: the error's keys are there, null, when every
        // cage could be stopped.
        None if json => output::show(&output::error_body(None, &r), true, |_| String::new()),
        None => output::show(&r, false, text),
        Some(e) => {
            output::error_after(&e, json, &r, text);
            return Ok(ExitCode::from(e.kind.exit_code()));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn accept_caged(ctx: &Context, name: &str, state: &str, json: bool) -> Result<ExitCode> {
    let r = ops::files::set_accept_caged(ctx, name, state == "on")?;
    output::show(&r, json, |r| {
        format!(
            "{} {} tasks and files from caged sessions\n",
            r.session,
            if r.accept_caged { "takes" } else { "refuses" }
        )
    });
    Ok(ExitCode::SUCCESS)
}

fn history(ctx: &Context, a: HistoryArgs, json: bool) -> Result<ExitCode> {
    if a.net {
        let r = ops::history::egress(ctx, &a.name)?;
        output::show(&r, json, output::egress);
    } else {
        let r = ops::history::history(ctx, &a.name)?;
        output::show(&r, json, output::history);
    }
    Ok(ExitCode::SUCCESS)
}

fn ls(ctx: &Context, quiet: bool, json: bool) -> Result<ExitCode> {
    ops::tidy::everything(ctx);
    let r = ops::listing::ls(ctx);
    warnings(ctx);
    let r = r?;
    if quiet {
        let names: Vec<&str> = r.sessions.iter().map(|s| s.name.as_str()).collect();
        output::show(&names, json, |n| output::names(n));
    } else {
        output::show(&r, json, output::listing);
    }
    Ok(ExitCode::SUCCESS)
}
