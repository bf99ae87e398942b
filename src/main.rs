// shrooms-agent: puts AI coding sessions into rootless podman cages.
//
// Data flows one way: argv -> `face::cli` (clap types) -> `settings`
// (resolved once, here) -> `face::commands` (a module per command) ->
// `ops` (typed results) -> `cage::spec` (CageSpec) ->
// `host::podman::argv` / `cage::envfile` (pure) -> `host::process` (the
// one place a process starts) -> results printed by `face::output`, as
// text or `--json`. The rooms: `face` and `serve` (the command line and
// HTTP), `ops` (the operations), `cage` (a cage's parts), `net` (the
// network), `turn` (the servers a turn talks to), `images`, `host` (this
// machine: podman, processes), `state` (what is kept on disk),
// `settings`, `error`.
// (Plain comments, not `//!`: src/lib.rs includes this file for the fuzz
// targets, and an included file can hold no inner attribute.)

mod cage;
mod error;
mod face;
mod host;
mod images;
mod net;
mod ops;
mod serve;
mod settings;
mod state;
mod turn;

// The properties the fuzz targets (fuzz/) check, exported by src/lib.rs;
// the unit tests run them over the seed corpus.
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;
use clap::Parser;

use error::{Error, Result};
use face::cli::{CageCommand, Cli, Command};
use face::commands;
use face::output;
use ops::Context;
use settings::{Env, Overrides, Settings};

fn main() -> ExitCode {
    // A Tab in a shell: the candidates, printed by clap_complete's engine,
    // and nothing else runs. Its generated scripts match subcommands by
    // names that go wrong for a program with a `-` in its name
    // (clap-rs/clap#6421); the engine reads the command itself instead.
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .var(commands::completions::COMPLETE_VAR)
        .completer("shrooms-agent")
        .complete();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return commands::usage::error(e),
    };
    let json = cli.json;
    let passes_status = matches!(
        cli.command,
        Command::Cage(CageCommand::Exec { .. } | CageCommand::Run { .. })
    );
    // Run here for another machine's `--on`: errors say where they happened.
    let here = cli.remote.clone();
    let result = match cli.on.clone() {
        Some(machine) => on_machine(&cli, &machine),
        None => run(cli),
    };
    let result = result.map_err(|e| match &here {
        Some(name) => e.context(error::Doing::OnMachine(name.clone())),
        None => e,
    });
    match result {
        Ok(code) => code,
        Err(e) if passes_status => {
            output::tool_error(&e, json);
            ExitCode::from(error::TOOL_FAILED)
        }
        Err(e) => {
            output::error(&e, json);
            ExitCode::from(e.kind.exit_code())
        }
    }
}

/// `--on MACHINE`: what cannot go there is refused before anything is
/// read; then a config file that cannot be read is the error, as it names
/// the machines.
fn on_machine(cli: &Cli, machine: &str) -> Result<ExitCode> {
    let sent = commands::on::sent(cli, machine)?;
    let (settings, bad, env) = lenient()?;
    if let Some(e) = bad {
        return Err(e);
    }
    commands::on::run(&settings, &env, machine, sent)
}

/// Each command, given what it needs of the settings, resolved here and
/// nowhere else: a command that needs none reads no config file (a Tab, a
/// man page, the helpers run in a cage's namespaces).
fn run(cli: Cli) -> Result<ExitCode> {
    let json = cli.json;
    match cli.command {
        Command::Version => commands::version::run(&lenient()?.0, json),
        Command::Completions { shell } => commands::completions::run(shell),
        Command::Man { dir } => commands::man::run(dir.as_deref()),
        Command::Doctor => {
            let (settings, bad_config, env) = lenient()?;
            let self_paths = self_paths(&env);
            let ctx = Context::new(settings, env, self_paths);
            commands::doctor::run(&ctx, bad_config.as_ref(), json)
        }
        Command::Mcp { sealed } => commands::inner::mcp(sealed, &settings::environment()),
        Command::GatewayListen { to } => commands::inner::gateway_listen(&to),
        Command::EgressListen {
            log,
            refused_log,
            pid_file,
            session,
            cage_pid,
        } => commands::inner::egress_listen(&log, &refused_log, &pid_file, &session, cage_pid),
        Command::Cage(cmd) => {
            let overrides = Overrides {
                laptop_socket: cli.laptop,
                ..commands::cage::overrides(&cmd)
            };
            let ctx = context_with(&overrides)?;
            commands::cage::run(&ctx, cmd, json)
        }
        Command::Image(cmd) => commands::image::run(&context()?, cmd, json),
        Command::Outbox(cmd) => commands::outbox::run(&context()?, cmd, json),
        Command::Files(cmd) => commands::files::run(&context()?, cmd, json),
        Command::Serve(a) => {
            let ctx = context_with(&commands::serve::overrides(a.listen))?;
            commands::serve::run(ctx, a.token_file.as_deref())
        }
    }
}

/// The settings, or, when the config file is bad, the defaults with its
/// error beside them (`Settings::load_or_defaults`), and the environment.
fn lenient() -> Result<(Settings, Option<Error>, Env)> {
    let env = settings::environment();
    let (settings, bad) = Settings::load_or_defaults(&env, &Overrides::default())?;
    Ok((settings, bad, env))
}

fn context() -> Result<Context> {
    context_with(&Overrides::default())
}

/// The context, with the command line's overrides resolved beside the config.
fn context_with(overrides: &Overrides) -> Result<Context> {
    let env = settings::environment();
    let settings = Settings::load(&env, overrides)?;
    state::session::check_state_dir(&settings.state_dir)?;
    let self_paths = self_paths(&env);
    Ok(Context::new(settings, env, self_paths))
}

/// The program itself, and the link it was called by if that is one, both
/// mounted read-only, so that the shrooms tools inside find it either way.
fn self_paths(env: &Env) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(exe) = std::env::current_exe().and_then(std::fs::canonicalize) {
        out.push(exe);
    }
    let arg0 = std::env::args_os().next().map(PathBuf::from);
    let called = arg0.and_then(|a| {
        if a.components().count() > 1 {
            std::path::absolute(&a).ok()
        } else {
            settings::find_program(&a.to_string_lossy(), env.get("PATH").map(String::as_str))
        }
    });
    if let Some(c) = called {
        let is_link = std::fs::symlink_metadata(&c)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false);
        if is_link && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line is checked whole (clap's own assertions), and each
    /// command's first help line is its own, not that of arguments
    /// flattened into it: the commands' arguments are built only when
    /// used (`#[command(defer = true)]`), after the variant's doc comment.
    #[test]
    fn every_command_is_whole_and_keeps_its_own_about() {
        let mut cli = Cli::command();
        cli.build();
        cli.clone().debug_assert();
        let about = |path: &[&str]| {
            let mut c = &cli;
            for p in path {
                c = c.find_subcommand(p).unwrap();
            }
            c.get_about().map(ToString::to_string).unwrap_or_default()
        };
        assert_eq!(
            about(&["cage", "create"]),
            "Record a session and make its container (made, not started)"
        );
        assert!(
            about(&["cage", "move"]).starts_with("Move a session into a fresh cage"),
            "{}",
            about(&["cage", "move"])
        );
        assert!(
            about(&["cage", "ls"]).starts_with("List"),
            "{}",
            about(&["cage", "ls"])
        );
    }
}
