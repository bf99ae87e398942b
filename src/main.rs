// shrooms-agent: puts AI coding sessions into rootless podman cages.
//
// Data flows one way: argv -> `face::cli` (clap types) -> `settings`
// (resolved once) -> `ops` (typed results) -> `cage::spec` (CageSpec) ->
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

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;
use clap::Parser;

use cage::harness;
use face::{cli, manual, output, remote};
use images::workbench;
use net::{egress, netpolicy};
use state::session;
use turn::{gateway, mcp};

use cli::{CageCommand, Cli, Command, HarnessArg};
use error::{Error, Result};
use ops::Context;
use settings::{Env, Settings};

/// The variable the completion scripts set when they ask for candidates.
const COMPLETE_VAR: &str = "SHROOMS_AGENT_COMPLETE";

fn main() -> ExitCode {
    // A Tab in a shell: the candidates, printed by clap_complete's engine,
    // and nothing else runs. Its generated scripts match subcommands by
    // names that go wrong for a program with a `-` in its name
    // (clap-rs/clap#6421); the engine reads the command itself instead.
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .var(COMPLETE_VAR)
        .completer("shrooms-agent")
        .complete();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let json = cli.json;
    let passes_status = matches!(
        cli.command,
        Command::Cage(CageCommand::Exec { .. } | CageCommand::Run { .. })
    );
    // Run here for another machine's `--on`: errors say where they happened.
    let here = cli.remote.clone();
    if let Some(socket) = cli.laptop.clone() {
        remote::set_laptop(socket);
    }
    let result = match cli.on.clone() {
        Some(machine) => on_machine(cli, &machine),
        None => run(cli),
    };
    let result = result.map_err(|e| match &here {
        Some(name) => e.context(format!("on {name}")),
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

/// Is this `cage exec` or `cage run`, whose own failures exit 125? The
/// first two words that are not options.
fn passes_status(args: &[std::ffi::OsString]) -> bool {
    let words: Vec<&std::ffi::OsString> = args
        .iter()
        .take_while(|a| *a != "--")
        .filter(|a| !a.to_string_lossy().starts_with('-'))
        .take(2)
        .collect();
    matches!(words.as_slice(), [c, e] if *c == "cage" && (*e == "exec" || *e == "run"))
}

/// A command line clap could not take. `--help` and `--version` are
/// printed as clap prints them; an error too, on stderr, with its usage;
/// and when `--json` was asked for, stdout gets the error in the shape of
/// every other error (`{"error": ..., "exit_code": 2}`), so a caller that
/// reads JSON is never left with nothing.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let shown = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    if shown {
        e.exit();
    }
    let err = Error::bad_input(usage_message(e.kind(), &e.render().to_string()));
    if passes_status(&args) {
        let _ = e.print();
        if json_asked(&args) {
            output::tool_error_json(&err);
        }
        return ExitCode::from(error::TOOL_FAILED);
    }
    if !json_asked(&args) {
        e.exit();
    }
    let _ = e.print();
    output::error_json(&err);
    ExitCode::from(err.kind.exit_code())
}

/// Is `--json` among the options (before any `--`)?
fn json_asked(args: &[std::ffi::OsString]) -> bool {
    args.iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--json")
}

/// clap's error text in one line: what was wrong, its tips, and the usage.
fn usage_message(kind: clap::error::ErrorKind, text: &str) -> String {
    let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let what = if kind == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        // clap prints the help here, not an error line.
        "a command is missing: `--help` lists them".to_string()
    } else {
        let first = text.split("\n\n").next().unwrap_or("").trim();
        one_line(first.strip_prefix("error:").unwrap_or(first))
    };
    let mut out = what;
    for tip in text.lines().filter_map(|l| l.trim().strip_prefix("tip:")) {
        out.push_str(&format!("; tip: {}", one_line(tip)));
    }
    if let Some(usage) = text.lines().find_map(|l| l.strip_prefix("Usage: ")) {
        out.push_str(&format!("; usage: {}", one_line(usage)));
    }
    out
}

/// `--on MACHINE`: the same cage command, run by shrooms-agent on that
/// machine over ssh (`remote`); its exit status passes through.
fn on_machine(cli: Cli, machine: &str) -> Result<ExitCode> {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let words = strings(words_without_on(&raw, &cli)?)?;
    let kind = match &cli.command {
        Command::Cage(CageCommand::Create(a)) if a.dir.is_none() => {
            return Err(Error::bad_input(format!(
                "cage create --on {machine}: give the project folder with --dir, a path on {machine} \
                 (this machine's current folder is not there)"
            )));
        }
        Command::Cage(CageCommand::Run { name: None, .. }) => {
            return Err(Error::bad_input(format!(
                "cage run --on {machine}: give the session's name (this machine's current folder \
                 says nothing of {machine}'s sessions)"
            )));
        }
        Command::Cage(CageCommand::WatchTurn { .. } | CageCommand::Prune { .. }) => {
            return Err(Error::bad_input(format!(
                "--on {machine}: this command runs on its own machine only (ssh there and run it)"
            )));
        }
        Command::Cage(CageCommand::Run { .. } | CageCommand::Exec { .. }) => {
            let tty = std::io::stdin().is_terminal();
            remote::Kind::Turn { tty }
        }
        Command::Cage(_) => remote::Kind::Plain,
        _ => {
            return Err(Error::bad_input(format!(
                "--on {machine} runs cage commands only (cage create, run, exec, ls, show, stop, \
                 rm, limits, move, history, ...)"
            )));
        }
    };
    let env = environment();
    let (settings, bad) = Settings::load_or_defaults(&env, &settings::Overrides::default())?;
    if let Some(e) = bad {
        return Err(e);
    }
    let target = remote::target(&settings, machine)?;
    let code = remote::run(&settings, &env, &target, words, kind)?;
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// The command line without `--on MACHINE`: the one occurrence whose removal
/// leaves the same command, so a `--on` among a command's own words
/// (`cage exec NAME grep --on x`) stays there.
fn words_without_on(raw: &[std::ffi::OsString], cli: &Cli) -> Result<Vec<std::ffi::OsString>> {
    let want = format!("{:?}", cli.command);
    for i in 1..raw.len() {
        let w = raw[i].to_string_lossy();
        let take = if w == "--on" {
            2
        } else if w.starts_with("--on=") {
            1
        } else {
            continue;
        };
        let mut rest: Vec<std::ffi::OsString> = raw[..i].to_vec();
        rest.extend(raw.iter().skip(i + take).cloned());
        if let Ok(c) = Cli::try_parse_from(&rest)
            && c.on.is_none()
            && c.json == cli.json
            && format!("{:?}", c.command) == want
        {
            return Ok(rest.into_iter().skip(1).collect());
        }
    }
    Err(Error::bad_input(
        "--on MACHINE could not be told apart from the command's words: put it first \
         (shrooms-agent --on MACHINE cage ...)",
    ))
}

fn run(cli: Cli) -> Result<ExitCode> {
    let json = cli.json;
    match cli.command {
        Command::Version => {
            let env = environment();
            let (settings, _) = Settings::load_or_defaults(&env, &settings::Overrides::default())?;
            let v = remote::version(&settings);
            output::show(&v, json, |v| {
                format!("shrooms-agent {} (protocol {})\n", v.version, v.protocol)
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { shell } => {
            output::raw(&completion_script(shell)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir: None } => {
            output::raw(&manual::top()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir: Some(dir) } => {
            // As `install -D` would: the folder is made when it is not there.
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::failed(format!("making {}: {e}", dir.display())))?;
            for page in manual::pages()? {
                let path = dir.join(&page.file);
                std::fs::write(&path, &page.text)
                    .map_err(|e| Error::failed(format!("writing {}: {e}", path.display())))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor => {
            // A bad config file is one failing check: the others run with
            // the defaults.
            let env = environment();
            let (settings, bad_config) =
                Settings::load_or_defaults(&env, &settings::Overrides::default())?;
            let self_paths = self_paths(&env);
            let ctx = Context::new(settings, env, self_paths);
            let report = ops::doctor::doctor_with(&ctx, bad_config.as_ref());
            let colour = ctx.settings.colour;
            output::show(&report, json, |r| output::doctor(r, colour));
            Ok(if report.failed() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Mcp { sealed } => {
            mcp::run(sealed, &environment())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::GatewayListen { to } => {
            gateway::listen::helper(&to)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::EgressListen {
            log,
            refused_log,
            pid_file,
            session,
            cage_pid,
        } => {
            egress::listen(&egress::Listen {
                log: &log,
                refused_log: &refused_log,
                pid_file: &pid_file,
                session: &session,
                cage_pid,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cage(cmd) => cage(cmd, json),
        Command::Image(cmd) => image(cmd, json),
        Command::Outbox(cli::OutboxCommand::Pack {
            name,
            output,
            only,
            force,
        }) => {
            let ctx = context()?;
            let r = ops::outbox::pack(&ctx, &name, only.as_deref(), &output, force)?;
            output::show(&r, json, output::packed);
            Ok(ExitCode::SUCCESS)
        }
        Command::Outbox(cli::OutboxCommand::Send { name, to, only }) => {
            let ctx = context()?;
            let req = ops::outbox::SendRequest { name, to, only };
            let r = ops::outbox::send(&ctx, &req)?;
            output::show(&r, json, |r| format!("{}\n", r.result));
            Ok(ExitCode::SUCCESS)
        }
        Command::Files(cmd) => {
            let ctx = context()?;
            let r = match cmd {
                cli::FilesCommand::Allow { name, from } => ops::files::allow(&ctx, &name, &from)?,
                cli::FilesCommand::Deny { name, from } => ops::files::deny(&ctx, &name, &from)?,
                cli::FilesCommand::List { name } => ops::files::list(&ctx, &name)?,
                cli::FilesCommand::Ignore { name, from } => ops::files::ignore(&ctx, &name, &from)?,
                cli::FilesCommand::Received { name } => {
                    let r = ops::files::received(&ctx, &name)?;
                    output::show(&r, json, output::received);
                    return Ok(ExitCode::SUCCESS);
                }
                cli::FilesCommand::Clear { name, from, file } => {
                    let r = ops::files::clear(&ctx, &name, &from, &file)?;
                    output::show(&r, json, output::received);
                    return Ok(ExitCode::SUCCESS);
                }
            };
            output::show(&r, json, output::files);
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(a) => {
            let ctx = context_with(&settings::Overrides {
                listen: a.listen,
                ..settings::Overrides::default()
            })?;
            // serve makes, runs and removes cages for its callers.
            ops::refuse_root(&ctx.settings)?;
            serve::run(ctx, a.token_file.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The script that registers the completions with a shell: at each Tab it
/// runs `shrooms-agent` with SHROOMS_AGENT_COMPLETE set, and clap_complete's
/// engine answers from the command definition and the session names.
fn completion_script(shell: clap_complete::Shell) -> Result<Vec<u8>> {
    use clap_complete::Shell;
    use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Zsh};
    let completer: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
        Shell::Elvish => &Elvish,
        Shell::PowerShell => &Powershell,
        other => {
            return Err(Error::bad_input(format!(
                "no completions for {other}: bash, zsh, fish, elvish or powershell"
            )));
        }
    };
    let mut out = Vec::new();
    completer
        .write_registration(
            COMPLETE_VAR,
            "shrooms-agent",
            "shrooms-agent",
            "shrooms-agent",
            &mut out,
        )
        .map_err(|e| Error::failed(format!("writing the completion script: {e}")))?;
    if shell == Shell::Zsh {
        out.extend_from_slice(ZSH_AUTOLOADED.as_bytes());
    }
    Ok(out)
}

/// Appended to the zsh script. Installed as `_shrooms-agent` in a folder on
/// `$fpath` (the package's /usr/share/zsh/vendor-completions, `~/.zfunc`),
/// compinit autoloads the file as that function's body at the first Tab:
/// clap_complete's script there only defines its completer and registers
/// it, so the first Tab of every new shell offered nothing (seen with zsh
/// 5.9). Run from there, it completes that Tab too; sourced, it does not.
const ZSH_AUTOLOADED: &str = r#"
if [[ ${funcstack[1]-} == _shrooms-agent ]]; then
    _clap_dynamic_completer_shrooms_agent "$@"
fi
"#;

fn cage(cmd: CageCommand, json: bool) -> Result<ExitCode> {
    // The command line's limits are read with the config, by the same rules.
    let overrides = match &cmd {
        CageCommand::Limits(a) => settings::Overrides {
            memory: a.memory.clone(),
            cpus: a.cpus.clone(),
            pids: a.pids.clone(),
            ..settings::Overrides::default()
        },
        _ => settings::Overrides::default(),
    };
    let ctx = context_with(&overrides)?;
    ops::refuse_root(&ctx.settings)?;
    // What was repaired on the way (a command that died), one line each,
    // whether this one succeeded or not: shown when it ends.
    let _notes = Notes(&ctx);
    match cmd {
        CageCommand::Create(a) => {
            // Without --dir: the folder it is run in, as a container tool's
            // users expect; refused as --dir would be, and said so.
            let dir_from_cwd = a.dir.is_none();
            let dir = match a.dir {
                Some(d) => d,
                None => std::env::current_dir().map_err(|e| {
                    Error::bad_input(format!(
                        "the current folder cannot be read ({e}): pass --dir with the project folder"
                    ))
                })?,
            };
            let req = ops::create::CreateRequest {
                name: a.name,
                dir,
                dir_from_cwd,
                harness: match a.harness {
                    HarnessArg::Claude => harness::Harness::Claude,
                    HarnessArg::Pi => harness::Harness::Pi,
                },
                choice: ops::make::CageChoice {
                    unseal: a.unseal,
                    ..choice(a.cage)?
                },
                dry_run: a.dry_run,
                auto_approve: false,
            };
            let created = ops::create::create(&ctx, &req)?;
            output::warnings(&created.warnings);
            // A dry run the real command would refuse: the argv, then the
            // refusal, with its exit code.
            if let Some(e) = &created.refused {
                output::error_after(e, json, &created, output::created);
                return Ok(ExitCode::from(e.kind.exit_code()));
            }
            output::show(&created, json, output::created);
        }
        CageCommand::Start(a) => {
            let r = ops::start::start(&ctx, &a.name)?;
            output::show(&r, json, |r| {
                format!("started {} ({})\n", r.session, r.container)
            });
        }
        CageCommand::Stop(a) => match a.name {
            Some(name) if !a.all => {
                let r = ops::stop::stop(&ctx, &name)?;
                output::show(&r, json, output::stopped);
            }
            _ => {
                let r = ops::stop::stop_all(&ctx)?;
                let text = |r: &ops::stop::StoppedAll| -> String {
                    r.stopped.iter().map(output::stopped).collect()
                };
                match r.error() {
                    // One shape with or without a busy session or a damaged
                    // record: the error's keys are there, null, when every
                    // cage could be stopped.
                    None if json => {
                        output::show(&output::error_body(None, &r), true, |_| String::new())
                    }
                    None => output::show(&r, false, text),
                    Some(e) => {
                        output::error_after(&e, json, &r, text);
                        return Ok(ExitCode::from(e.kind.exit_code()));
                    }
                }
            }
        },
        CageCommand::Move(a) => {
            let req = ops::moves::MoveRequest {
                name: a.name,
                out: a.out,
                choice: choice(a.cage)?,
                by: a.by,
                unseal: a.unseal,
                dir: a.dir,
            };
            let r = ops::moves::move_session(&ctx, &req)?;
            output::warnings(&r.warnings);
            output::show(&r, json, |r| format!("{}: {}\n", r.session, r.what));
        }
        CageCommand::Rename(a) => {
            let req = ops::rename::RenameRequest {
                name: a.name,
                to: a.new,
                by: a.by,
            };
            let r = ops::rename::rename(&ctx, &req)?;
            output::warnings(&r.warnings);
            output::show(&r, json, |r| format!("{}: {}\n", r.session, r.what));
        }
        CageCommand::Limits(a)
            if a.memory.is_none()
                && a.cpus.is_none()
                && a.pids.is_none()
                && a.tokens.is_none()
                && a.net.is_none()
                && !a.reset
                && a.by.is_none() =>
        {
            let r = ops::limits::show(&ctx, &a.name)?;
            output::show(&r, json, output::limits_shown);
        }
        CageCommand::Limits(a) => {
            let req = ops::limits::LimitsRequest {
                name: a.name,
                asked: ctx.settings.asked_limits.clone(),
                reset: a.reset,
                tokens: a
                    .tokens
                    .as_deref()
                    .map(ops::limits::parse_tokens)
                    .transpose()?,
                net: a
                    .net
                    .as_deref()
                    .map(netpolicy::NetPolicy::parse)
                    .transpose()?,
                by: a.by,
            };
            let r = ops::limits::limits(&ctx, &req)?;
            output::warnings(&r.warnings);
            output::show(&r, json, output::limits);
        }
        CageCommand::AcceptCaged { name, state } => {
            let r = ops::files::set_accept_caged(&ctx, &name, state == "on")?;
            output::show(&r, json, |r| {
                format!(
                    "{} {} tasks and files from caged sessions\n",
                    r.session,
                    if r.accept_caged { "takes" } else { "refuses" }
                )
            });
        }
        CageCommand::History(a) if a.net => {
            let r = ops::history::egress(&ctx, &a.name)?;
            output::show(&r, json, output::egress);
        }
        CageCommand::History(a) => {
            let r = ops::history::history(&ctx, &a.name)?;
            output::show(&r, json, output::history);
        }
        CageCommand::Rm(a) => {
            let r = ops::rm::rm(&ctx, &a.name)?;
            output::show(&r, json, output::removed);
        }
        CageCommand::Exec { join, name, cmd } => {
            let cmd = strings(cmd)?;
            let what = if cmd.is_empty() {
                ops::exec::What::Shell
            } else {
                ops::exec::What::Command(cmd)
            };
            if join {
                let tty = std::io::stdin().is_terminal();
                let code = ops::exec::prepare_join(&ctx, &name, what, tty)?.run()?;
                return Ok(ExitCode::from(code.clamp(0, 255) as u8));
            }
            return exec(&ctx, &name, what);
        }
        CageCommand::Run {
            name,
            uncaged,
            args,
        } => {
            let args = strings(args)?;
            let name = match name {
                Some(n) => n,
                None => {
                    let cwd = std::env::current_dir().map_err(|e| {
                        Error::bad_input(format!(
                            "the current folder cannot be read ({e}): give the session's name"
                        ))
                    })?;
                    ops::exec::session_of_folder(&ctx, &cwd)?
                }
            };
            if ops::exec::is_uncaged(&ctx, &name)? {
                let uncaged = ops::exec::prepare_uncaged(&ctx, &name, args, uncaged)?;
                output::warnings(std::slice::from_ref(&uncaged.notice));
                let code = uncaged.run()?;
                return Ok(ExitCode::from(code.clamp(0, 255) as u8));
            }
            if uncaged {
                return Err(Error::bad_input(format!(
                    "session {name} is in a cage, and `cage run` runs its harness there; \
                     leave out --uncaged"
                )));
            }
            return exec(&ctx, &name, ops::exec::What::Harness(args));
        }
        CageCommand::Ls { all: true, .. } => return remote::ls_all(&ctx, json),
        CageCommand::Ls { quiet, .. } => {
            let r = ops::ls::ls(&ctx)?;
            if quiet {
                let names: Vec<&str> = r.sessions.iter().map(|s| s.name.as_str()).collect();
                output::show(&names, json, |n| output::names(n));
            } else {
                output::show(&r, json, output::listing);
            }
        }
        CageCommand::Show(a) => {
            let r = ops::show::show(&ctx, &a.name)?;
            output::show(&r, json, output::shown);
        }
        CageCommand::Bring { name, ff } => {
            let r = ops::bring::bring(&ctx, &name, ff)?;
            output::show(&r, json, output::brought);
        }
        CageCommand::Prune { dry_run, yes } => return prune(&ctx, dry_run, yes, json),
        CageCommand::WatchTurn {
            session,
            container,
            podman,
            lock_fd,
            pipe_fd,
            ready_fd,
        } => {
            let req = ops::exec::WatchRequest {
                session,
                container,
                podman,
                lock_fd,
                pipe_fd,
                ready_fd,
            };
            // Its output is the cage's turn.log: a line when it acted.
            if let ops::exec::Watched::Stopped { signal } = ops::exec::watch(&ctx, &req)? {
                let why = match signal {
                    Some(s) => format!("this watcher got signal {s}"),
                    None => "the process holding the turn ended without stopping it".into(),
                };
                output::warnings(&[format!("stopped {}: {why}", req.container)]);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cage prune`: what it would remove is shown first; it removes only
/// with `--yes`, or when asked on a terminal and answered yes. Without a
/// terminal and without `--yes` it removes nothing and says so (exit 2).
fn prune(ctx: &ops::Context, dry_run: bool, yes: bool, json: bool) -> Result<ExitCode> {
    let planned = ops::prune::plan(ctx)?;
    if dry_run || planned.removes_nothing() {
        output::show(&planned, json, output::pruned);
        return Ok(ExitCode::SUCCESS);
    }
    if !yes {
        let tty = std::io::stdin().is_terminal();
        if !tty {
            let e = Error::bad_input(format!(
                "cage prune removed nothing: it asks before it removes, and there is no \
                 terminal to ask on. It would remove {}; pass --yes to remove them, or \
                 --dry-run to list them",
                output::prune_count(&planned)
            ));
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

fn image(cmd: cli::ImageCommand, json: bool) -> Result<ExitCode> {
    let ctx = context()?;
    match cmd {
        cli::ImageCommand::Build(a) => {
            let stages = match a.which {
                cli::ImageWhich::Workbench => vec![workbench::Stage::Workbench],
                cli::ImageWhich::Desktop => vec![workbench::Stage::Desktop],
                cli::ImageWhich::All => workbench::Stage::ALL.to_vec(),
            };
            let req = ops::image::BuildRequest {
                stages,
                wait: a.wait,
                containerfile: a.containerfile,
            };
            let tty = std::io::stderr().is_terminal();
            let r = if tty && !json && req.wait {
                build_with_progress(&ctx, &req)?
            } else {
                ops::image::build(&ctx, &req, &mut |e| output::image_event(&e, tty))?
            };
            output::show(&r, json, output::image_built);
        }
        cli::ImageCommand::Status => {
            let r = ops::image::status(&ctx)?;
            output::show(&r, json, output::image_status);
        }
        cli::ImageCommand::BuildWorker { jobs } => ops::image::worker(&ctx, &jobs)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `image build --wait` on a terminal: one progress line, rewritten as
/// each step starts and once a second (a long RUN step prints nothing for
/// minutes), by a thread of its own that stops when the build returns.
fn build_with_progress(
    ctx: &Context,
    req: &ops::image::BuildRequest,
) -> Result<ops::image::BuildReport> {
    use std::io::Write;
    use std::sync::{Mutex, mpsc};
    let progress = Mutex::new(output::Progress::new());
    let write = |text: String| {
        if !text.is_empty() {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(text.as_bytes());
            let _ = err.flush();
        }
    };
    let (done, stop) = mpsc::channel::<()>();
    let (progress, write) = (&progress, &write);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) =
                stop.recv_timeout(std::time::Duration::from_secs(1))
            {
                let p = progress.lock().unwrap_or_else(|p| p.into_inner());
                write(p.tick(output::stderr_width()));
            }
        });
        let built = ops::image::build(ctx, req, &mut |e| {
            let mut p = progress.lock().unwrap_or_else(|p| p.into_inner());
            write(p.event(&e, output::stderr_width()));
        });
        drop(done);
        built
    })
}

/// The context's notes, on stderr.
fn notes(ctx: &Context) {
    for line in ctx.take_notes() {
        eprintln!("shrooms-agent: {line}");
    }
}

/// Shows the context's notes when the command ends.
struct Notes<'a>(&'a Context);

impl Drop for Notes<'_> {
    fn drop(&mut self) {
        notes(self.0);
    }
}

fn exec(ctx: &Context, name: &str, what: ops::exec::What) -> Result<ExitCode> {
    // A turn sent from another machine holds a line to it: the line's end
    // is a hang-up, and the turn's status is said on it.
    let line = match remote::laptop() {
        Some(socket) => Some(remote::hold(socket)?),
        None => None,
    };
    let code = exec_here(ctx, name, what)?;
    if let Some(line) = line {
        line.exit(i32::from(code));
        if let Some(socket) = remote::laptop() {
            let _ = std::fs::remove_file(socket);
        }
    }
    Ok(ExitCode::from(code))
}

fn exec_here(ctx: &Context, name: &str, what: ops::exec::What) -> Result<u8> {
    let tty = std::io::stdin().is_terminal();
    let prepared = ops::exec::prepare(ctx, name, what, tty)?;
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

/// The cage flags as the operations take them.
fn choice(a: cli::CageArgs) -> Result<ops::make::CageChoice> {
    Ok(ops::make::CageChoice {
        image: a.image,
        sealed: a.sealed,
        sealed_token: a.sealed_token,
        conversation: a.conversation,
        github: a.github,
        nix: a.nix,
        shared: a.shared,
        meshes: a.meshes,
        unseal: false,
        writable: a.writable,
        net: a
            .net
            .as_deref()
            .map(netpolicy::NetPolicy::parse)
            .transpose()?,
    })
}

/// Command words must be UTF-8 to go into podman's argument list as text.
fn strings(words: Vec<std::ffi::OsString>) -> Result<Vec<String>> {
    words
        .into_iter()
        .map(|w| {
            w.into_string()
                .map_err(|w| Error::bad_input(format!("the argument {w:?} is not valid UTF-8")))
        })
        .collect()
}

fn context() -> Result<Context> {
    context_with(&settings::Overrides::default())
}

/// The context, with the command line's overrides resolved beside the config.
fn context_with(overrides: &settings::Overrides) -> Result<Context> {
    let env = environment();
    let settings = Settings::load(&env, overrides)?;
    session::check_state_dir(&settings.state_dir)?;
    let self_paths = self_paths(&env);
    Ok(Context::new(settings, env, self_paths))
}

/// The environment, as the settings read it.
fn environment() -> Env {
    settings::environment()
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
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> clap::Error {
        let mut all = vec!["shrooms-agent"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).unwrap_err()
    }

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

    /// clap's usage errors in one line, as `--json` gives them.
    #[test]
    fn usage_errors_in_one_line() {
        let msg = |args: &[&str]| {
            let e = parse(args);
            usage_message(e.kind(), &e.render().to_string())
        };
        assert_eq!(
            msg(&["cage", "ls", "--nope"]),
            "unexpected argument '--nope' found; usage: shrooms-agent cage ls [OPTIONS]"
        );
        assert_eq!(
            msg(&["cage", "create"]),
            "the following required arguments were not provided: <NAME>; \
             usage: shrooms-agent cage create <NAME>"
        );
        assert_eq!(
            msg(&["cage", "lss"]),
            "unrecognized subcommand 'lss'; tip: a similar subcommand exists: 'ls'; \
             usage: shrooms-agent cage [OPTIONS] <COMMAND>"
        );
        assert_eq!(
            usage_message(
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand,
                "About\n\nUsage: shrooms-agent image [OPTIONS] <COMMAND>\n\nCommands: ..."
            ),
            "a command is missing: `--help` lists them; usage: shrooms-agent image [OPTIONS] <COMMAND>"
        );
        assert_eq!(parse(&["--json", "--help"]).kind(), ErrorKind::DisplayHelp);
    }

    /// `cage exec` and `cage run` are told apart by their first two words
    /// that are not options; what follows `--` is the command's.
    #[test]
    fn exec_and_run_are_found_among_the_words() {
        let passes = |args: &[&str]| {
            passes_status(
                &args
                    .iter()
                    .map(std::ffi::OsString::from)
                    .collect::<Vec<_>>(),
            )
        };
        assert!(passes(&["cage", "exec"]));
        assert!(passes(&["--json", "cage", "run", "s"]));
        assert!(passes(&[
            "cage", "--json", "exec", "--join", "s", "--", "true"
        ]));
        assert!(!passes(&["cage", "show", "exec"]));
        assert!(!passes(&["cage", "ls"]));
        assert!(!passes(&["--", "cage", "exec"]));
        assert!(!passes(&["image", "exec"]));
    }

    /// `--on MACHINE` is taken out where it is an option, and left where
    /// it is a word of the command run in the cage.
    #[test]
    fn on_is_taken_out_of_the_words_sent() {
        let sent = |args: &[&str]| -> Vec<String> {
            let raw: Vec<std::ffi::OsString> = std::iter::once("shrooms-agent")
                .chain(args.iter().copied())
                .map(std::ffi::OsString::from)
                .collect();
            let cli = Cli::try_parse_from(&raw).unwrap();
            assert!(cli.on.is_some());
            words_without_on(&raw, &cli)
                .unwrap()
                .into_iter()
                .map(|w| w.into_string().unwrap())
                .collect()
        };
        assert_eq!(
            sent(&["--on", "far", "cage", "exec", "n", "grep", "--on", "x"]),
            ["cage", "exec", "n", "grep", "--on", "x"]
        );
        assert_eq!(
            sent(&["cage", "--on=far", "ls", "--json"]),
            ["cage", "ls", "--json"]
        );
        assert_eq!(
            sent(&["cage", "exec", "--on", "far", "n", "--", "--on", "y"]),
            ["cage", "exec", "n", "--", "--on", "y"]
        );
    }

    #[test]
    fn json_is_asked_for_before_a_double_dash_only() {
        let asked = |args: &[&str]| {
            json_asked(
                &args
                    .iter()
                    .map(std::ffi::OsString::from)
                    .collect::<Vec<_>>(),
            )
        };
        assert!(asked(&["cage", "ls", "--json", "--nope"]));
        assert!(asked(&["--json", "cage"]));
        assert!(!asked(&["cage", "ls", "--nope"]));
        assert!(!asked(&["cage", "exec", "s", "--", "--json"]));
        assert!(!asked(&["cage", "ls", "--jsonx"]));
    }
}
