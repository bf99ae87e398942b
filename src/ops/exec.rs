//! `cage exec` and `cage run`: run a command in a session's cage, with the
//! terminal passed through, and stop the cage when it ends (what the session
//! left running ends with it). The session's lock is held throughout, so a
//! second exec on it is refused as busy.
//!
//! However the process holding the turn ends, the cage stops and the
//! session is free again: a signal that can be caught ends the command,
//! puts the terminal back and stops the cage here (`Prepared::run`); for
//! one that cannot (SIGKILL), a watcher started before the cage (`watch`,
//! the hidden `cage watch-turn`) sees our end of a pipe close and stops it.
//! The watcher holds the session's lock too (the same open file
//! description), so no other command can take the session until the cage
//! is stopped. Should both die (each SIGKILLed), the turn's marker, made
//! before the cage starts and removed once it is stopped, is left with
//! nobody holding the lock: the next command that looks at the session, or
//! serve, stops the cage then (`dead_turn`).

use std::path::PathBuf;

use super::{Context, cage_of};
use crate::cage::spec;
use crate::error::{Doing, Error, FolderProblem, NoTools, Result, SessionProblem, Warning};
use crate::host::Host;
use crate::host::podman::{Podman, argv};
use crate::host::process::{
    self as runner, Holder, Process, Terminal, TurnEnd, TurnSignals, Watcher,
};
use crate::state::session::{self, SessionLock};

/// What to run in the cage.
#[derive(Debug, Clone)]
pub enum What {
    /// `cage exec NAME -- CMD...`
    Command(Vec<String>),
    /// `cage run NAME -- ARGS...`: the harness's program with these args.
    Harness(Vec<String>),
    /// `cage exec NAME` alone: a shell ([`SHELL`]).
    Shell,
}

/// The shell `cage exec NAME` opens: bash where the cage's image has it,
/// else sh. Decided inside the cage, by the cage's own sh, in the one
/// `podman exec` (no second call to look first); on this machine it is an
/// argv like any other, and no shell runs here.
pub const SHELL: [&str; 3] = [
    "sh",
    "-c",
    "if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh",
];

impl What {
    /// The words `podman exec` is given for a command or a shell (None for
    /// the harness, whose program only the record knows).
    fn words(self) -> Result<Vec<String>, Vec<String>> {
        match self {
            What::Command(cmd) => Ok(cmd),
            What::Shell => Ok(SHELL.iter().map(|w| w.to_string()).collect()),
            What::Harness(args) => Err(args),
        }
    }
}

/// A command ready to run: the cage is running, the port closed, the env
/// file written, the lock held.
pub struct Prepared<'a> {
    ctx: &'a Context,
    /// The session, its project and its cage's create argv, for what the
    /// turn leaves behind (`after_turn`).
    session: String,
    dir: PathBuf,
    git: Option<crate::cage::git::GitRecord>,
    /// The files other tools run later, as they were before the turn.
    before: super::later::Snapshot,
    host: &'a Host,
    container: String,
    process: Process,
    /// Stops the cage if this process dies without doing so.
    watcher: Watcher,
    /// The turn's marker (`Store::turn_marker`), removed once the cage is
    /// stopped.
    marker: PathBuf,
    /// Served until the turn ends (dropped after the cage is stopped, and
    /// before the lock: the turn's line goes into the history under it).
    _gateway: crate::turn::gateway::Gateway,
    /// The cage's socket, served until the turn ends, then removed.
    _socket: crate::turn::cage_socket::Socket,
    _lock: SessionLock,
    /// Variables left out of the env file, and why: for the face to show.
    pub warnings: Vec<Warning>,
    /// An interactive `cage run`: the transcripts it may write, for the
    /// way back in (`resume`).
    resume: Option<super::resume::Watch>,
    /// The cage's egress log listener's pid file, whose state the turn
    /// reports while it runs (`run_reporting`).
    egress_pid_file: PathBuf,
}

/// How it ended.
#[derive(Debug)]
pub struct Ended {
    /// The command's exit code; 128 + n when signal n ended the turn.
    pub code: i32,
    /// Set when the cage could not be stopped afterwards.
    pub stop_error: Option<Error>,
    /// After an interactive `cage run`: how to go back into its
    /// conversation, in the cage.
    pub resume: Option<String>,
    /// What the turn left for the machine, a line each: the agent's
    /// commits brought in or refused, the files other tools run later it
    /// created or changed.
    pub after: Vec<Warning>,
}

/// `cage run` on a session taken out of its cage: its harness on the
/// machine itself, in its folder (docs/cages.md, "Limits, moving,
/// history"), only when asked for with `--uncaged`
/// (`allowed`): a harness never runs outside a cage by surprise.
pub fn prepare_uncaged(
    ctx: &Context,
    name: &str,
    args: Vec<String>,
    allowed: bool,
) -> Result<Uncaged> {
    let (lock, record) = super::plan::lock_and_load(ctx, name)?;
    lock.note("turn");
    if record.cage.is_some() {
        return Err(Error::session(name, SessionProblem::Caged));
    }
    if !allowed {
        return Err(uncaged_refused(name));
    }
    let (configured, program) = match record.harness {
        crate::cage::harness::Harness::Claude => (ctx.settings.claude.clone(), "claude"),
        crate::cage::harness::Harness::Pi => (ctx.settings.pi.clone(), "pi"),
        crate::cage::harness::Harness::Codex => (ctx.settings.codex.clone(), "codex"),
        crate::cage::harness::Harness::Opencode => (ctx.settings.opencode.clone(), "opencode"),
    };
    let path = configured
        .or_else(|| crate::settings::find_program(program, ctx.settings.path_var.as_deref()))
        .ok_or_else(|| Error::session(name, SessionProblem::NoProgramHere { program }))?;
    Ok(Uncaged {
        notice: format!(
            "session {name} is not in a cage: running {} on this machine, in {}",
            path.display(),
            record.dir.display()
        ),
        process: Process::new(&path, program).args(args).cwd(&record.dir),
        _lock: lock,
    })
}

/// Why `cage run` does not run an uncaged session's harness unasked.
pub fn uncaged_refused(name: &str) -> Error {
    Error::session(name, SessionProblem::UncagedRun)
}

/// A harness to run on the machine, out of any cage.
pub struct Uncaged {
    /// Said on stderr before it runs.
    pub notice: String,
    process: Process,
    _lock: SessionLock,
}

impl Uncaged {
    pub fn run(self) -> Result<i32> {
        self.process.interactive()
    }
}

/// `cage run` without a name: the one session whose project is `cwd`
/// (exactly that folder, links resolved). None, or more than one, is
/// refused with the sessions there are, so that a turn never runs in a
/// session that was not meant.
pub fn session_of_folder(ctx: &Context, cwd: &std::path::Path) -> Result<String> {
    let here = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let (records, _) = ctx.store.list_readable()?;
    let mine: Vec<&str> = records
        .iter()
        .filter(|r| r.dir == here)
        .map(|r| r.name.as_str())
        .collect();
    match mine.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(Error::folder(&here, FolderProblem::NoSessionHere)),
        several => Err(Error::folder(
            &here,
            FolderProblem::SessionsHere {
                sessions: several.iter().map(|s| s.to_string()).collect(),
            },
        )),
    }
}

/// Is the session out of its cage? (`cage run` then runs on the machine.)
pub fn is_uncaged(ctx: &Context, name: &str) -> Result<bool> {
    Ok(ctx.store.load(name)?.cage.is_none())
}

pub fn prepare<'a>(ctx: &'a Context, name: &str, what: What, tty: bool) -> Result<Prepared<'a>> {
    let (lock, record) = super::plan::lock_and_load(ctx, name)?;
    super::dead_turn::end_held(ctx, &record);
    // "start" until the cage's rules are in: `cage limits` changes a
    // turn's cage beside it only once its start is done.
    lock.note("start");
    let holder = match what {
        What::Command(_) | What::Shell => "exec",
        What::Harness(_) => "turn",
    };
    let cage = cage_of(&record)?;
    let mut notes = Vec::new();
    let (cmd, wants_resume) = match what.words() {
        Ok(cmd) => (cmd, false),
        Err(args) => {
            let wants_resume = tty && super::resume::interactive(&args);
            let cmd = harness_words(ctx, name, &record, cage, args, &mut notes)?;
            (cmd, wants_resume)
        }
    };
    let host = ctx.host_for_session()?;
    // Its own login, checked before the cage starts; the gateway reads it
    // again at every request and it never enters the cage.
    if let Some(s) = &cage.sealed {
        super::sealed::read_token(&s.token_file)?;
    }
    ctx.store.ensure()?;
    let mut pi_plan = pi_providers(ctx, &record, cage)?;
    let pi_warnings = pi_plan
        .as_mut()
        .map(|p| std::mem::take(&mut p.warnings))
        .unwrap_or_default();
    let marker = ctx.store.turn_marker(&record.name);
    let before = super::later::snapshot(&record.dir, &cage.create_argv);
    // The facts, the start's decision in the turn's plan, and the plan run:
    // a failed step takes back those before it (`turn_steps`).
    let facts = super::start_facts(ctx, &record)?;
    let start = super::decide_start(&facts, host)?;
    let ran = super::plan::execute(
        ctx,
        Some(host),
        turn_steps(start, &record, lock.share()?, pi_plan),
    )?;
    lock.note(holder);
    notes.extend(ran.warnings);
    let (Some(watcher), Some(gateway), Some(socket), Some(env)) =
        (ran.watcher, ran.gateway, ran.socket, ran.env)
    else {
        return Err(Error::unmet("the turn's plan did not open its servers"));
    };
    let args = argv::exec(&cage.container, &record.dir, &env.file, tty, &cmd);
    let resume = wants_resume.then(|| super::resume::Watch::begin(&ctx.store, &record, cage));
    Ok(Prepared {
        ctx,
        session: record.name.clone(),
        dir: record.dir.clone(),
        git: cage.git.clone(),
        before,
        resume,
        egress_pid_file: ctx.store.egress_pid_path(name),
        host,
        container: cage.container.clone(),
        process: host.podman.process(&args),
        watcher,
        marker,
        _gateway: gateway,
        _socket: socket,
        _lock: lock,
        warnings: turn_warnings(env.left_out, pi_warnings, notes),
    })
}

/// What the face shows before the turn: the variables left out of the
/// env file and why, pi's providers' warnings, and the turn's own notes.
fn turn_warnings(left_out: Vec<Warning>, pi: Vec<Warning>, notes: Vec<Warning>) -> Vec<Warning> {
    left_out.into_iter().chain(pi).chain(notes).collect()
}

/// The words `podman exec` is given for a `cage run`: the harness's program
/// in the cage with `args`, and (for Claude Code) the shrooms tools; why
/// they are not given goes into `notes`.
fn harness_words(
    ctx: &Context,
    name: &str,
    record: &session::Record,
    cage: &session::CageRecord,
    args: Vec<String>,
    notes: &mut Vec<Warning>,
) -> Result<Vec<String>> {
    let program = cage
        .program
        .clone()
        .or_else(|| {
            (record.harness == crate::cage::harness::Harness::Pi).then(|| PathBuf::from("pi"))
        })
        .ok_or_else(|| Error::session(name, SessionProblem::NoHarnessProgram))?;
    let tools = match record.harness {
        crate::cage::harness::Harness::Claude => {
            let found = tools_in_cage(ctx, name, &cage.create_argv);
            let found = found.map_err(|why| notes.push(Warning::NoTools(why))).ok();
            found.map(|p| (p, cage.sealed.is_some()))
        }
        crate::cage::harness::Harness::Pi
        | crate::cage::harness::Harness::Codex
        | crate::cage::harness::Harness::Opencode => None,
    };
    Ok(harness_command(&program, tools, args))
}

/// pi's providers, from the machine's models.json read now: the gateway's
/// routes to them, and the cage's copy (`pi_models`). None for Claude Code
/// and for a sealed cage.
fn pi_providers(
    ctx: &Context,
    record: &session::Record,
    cage: &session::CageRecord,
) -> Result<Option<crate::cage::pi_models::Plan>> {
    Ok(match (record.harness, &cage.sealed) {
        (crate::cage::harness::Harness::Pi, None) => Some(crate::cage::pi_models::plan_from(
            &cage.harness_dir,
            spec::DUMMY_KEY,
            &|n| ctx.env.get(n).cloned(),
        )?),
        _ => None,
    })
}

/// Pure: a turn's plan around its start's (`decide_start`): the turn's
/// marker and its watcher before the cage starts (from there on, however
/// this process ends, the cage is stopped), then the start, then the
/// model gateway, what the turn's process reads (its env file, Claude
/// Code's `.claude.json`, pointed at the gateway) and the cage's socket. A
/// step that fails takes back the ones before it: the env file removed,
/// the cage stopped, the watcher told, the marker removed. `lock` is the
/// session's, shared with the watcher (`SessionLock::share`).
pub fn turn_steps<'a>(
    start: Vec<super::plan::Step<'a>>,
    record: &session::Record,
    lock: SessionLock,
    pi: Option<crate::cage::pi_models::Plan>,
) -> Vec<super::plan::Step<'a>> {
    use super::plan::Step;
    let container = record
        .cage
        .as_ref()
        .map(|c| c.container.clone())
        .unwrap_or_default();
    // A refusal is the start's alone: no turn is begun for it.
    if start.iter().any(|s| matches!(s, Step::Refuse(_))) {
        return start;
    }
    let mut steps = vec![
        Step::TurnMarker {
            session: record.name.clone(),
        },
        Step::Watcher {
            session: record.name.clone(),
            container,
            lock,
        },
    ];
    steps.extend(start);
    steps.push(Step::Gateway {
        record: Box::new(record.clone()),
        pi: pi.map(std::cell::RefCell::new),
    });
    steps.push(Step::TurnEnv(Box::new(record.clone())));
    steps.push(Step::Socket(Box::new(record.clone())));
    steps
}

/// The shrooms-agent program as the cage sees it. A cage made with the
/// state folder's `tools/` gets this program put there (`crate::cage::tools`),
/// wherever it has moved since; one made before, the program at its path
/// of then (`program_mounted`). Err says why the run goes without.
fn tools_in_cage(
    ctx: &Context,
    session: &str,
    create_argv: &[String],
) -> std::result::Result<PathBuf, NoTools> {
    let exe = ctx.self_paths.first().ok_or(NoTools::NoOwnPath)?;
    if super::mounts_tools(ctx, create_argv) {
        return crate::cage::tools::provide(&ctx.store.tools_dir(), exe)
            .map_err(|e| NoTools::NotProvided(Box::new(e)));
    }
    program_mounted(&ctx.self_paths, create_argv).ok_or_else(|| NoTools::Moved {
        exe: exe.clone(),
        session: session.to_string(),
    })
}

/// In a cage made before `tools/`: the first of this program's paths that
/// the cage was made with a mount of (at the machine's own path). None when
/// the program has moved since.
fn program_mounted(self_paths: &[PathBuf], create_argv: &[String]) -> Option<PathBuf> {
    self_paths
        .iter()
        .find(|p| {
            let m = argv::mount(&spec::Mount {
                src: p.to_path_buf(),
                dst: p.to_path_buf(),
                read_only: true,
            });
            create_argv.contains(&m)
        })
        .cloned()
}

/// The harness's command line for `cage run`: its program, the shrooms
/// tools' MCP server when `tools` names the program inside (Claude Code's
/// `--mcp-config`; with `true`, a sealed cage's, which offers only
/// task_update), then the caller's arguments. The option is given in its
/// `--name=value` form, first: Claude Code's `--mcp-config` takes several
/// values, and in its separate form would take the caller's next words
/// (a prompt) as more of them.
fn harness_command(
    program: &std::path::Path,
    tools: Option<(PathBuf, bool)>,
    args: Vec<String>,
) -> Vec<String> {
    let mut cmd = vec![program.to_string_lossy().into_owned()];
    if let Some((shrooms_agent, sealed)) = tools {
        let mut server_args = vec!["mcp"];
        if sealed {
            server_args.push("--sealed");
        }
        let config = serde_json::json!({
            "mcpServers": {
                "shrooms": {
                    "type": "stdio",
                    "command": shrooms_agent.to_string_lossy(),
                    "args": server_args,
                }
            }
        });
        cmd.push(format!("--mcp-config={config}"));
    }
    cmd.extend(args);
    cmd
}

/// `cage exec --join`: a command ready to run beside the turn that holds a
/// running cage. It takes neither the session's lock nor the turn, and
/// never starts or stops the cage.
pub struct Joined {
    process: Process,
}

/// Prepare `cage exec --join NAME -- CMD`: refused unless the cage is
/// running. The cage's rules hold for the joined command as for the turn's:
/// they are loaded again (the load replaces the table whole, so the turn's
/// own are not disturbed) and the namespace and first process checked as at
/// every exec; where that fails the command is refused, and the cage left
/// to the turn that holds it. The turn wrote the env file (with its
/// gateway's address); the joined command is given the same.
pub fn prepare_join(ctx: &Context, name: &str, what: What, tty: bool) -> Result<Joined> {
    // The rules are loaded from the record as it is under the change lock,
    // so a `cage limits --net` at once is either before or after them.
    let _change = ctx.store.change_lock(name)?;
    let record = ctx.store.load(name)?;
    let cage = cage_of(&record)?;
    let cmd = match what.words() {
        Ok(cmd) => cmd,
        Err(_) => return Err(Error::session(name, SessionProblem::RunJoined)),
    };
    let host = ctx.host_for_session()?;
    let inspected = host.podman.inspect(&cage.container)?.ok_or_else(|| {
        Error::session(
            name,
            SessionProblem::ContainerGone {
                container: cage.container.clone(),
            },
        )
    })?;
    if !inspected.state.running {
        return Err(Error::session(name, SessionProblem::NothingToJoin));
    }
    let running = crate::net::netns::Running::of(&inspected).ok_or_else(|| {
        Error::session(
            name,
            SessionProblem::OldCage {
                container: cage.container.clone(),
            },
        )
    })?;
    if let Err(e) = super::load_rules(ctx, host, name, cage, &running) {
        return Err(e.context(Doing::RulesUnchecked {
            session: name.to_string(),
        }));
    }
    let env_file = ctx.store.env_file(&cage.container);
    if !env_file.is_file() {
        return Err(Error::session(
            name,
            SessionProblem::EnvFileMissing { env_file },
        ));
    }
    let args = argv::exec(&cage.container, &record.dir, &env_file, tty, &cmd);
    Ok(Joined {
        process: host.podman.process(&args),
    })
}

impl Joined {
    /// Run the command; the cage is left running. The signals that end a
    /// turn end this command alone (128 + the signal), the terminal's
    /// modes put back.
    pub fn run(self) -> Result<i32> {
        let end = TurnSignals::catch()
            .and_then(|signals| self.process.turn(&signals, Terminal::save().as_ref()))?;
        Ok(match end {
            TurnEnd::Exited(code) => code,
            TurnEnd::Signal(sig) => 128 + sig,
        })
    }
}

impl Prepared<'_> {
    /// Run the command, then stop the cage, whatever the command's outcome.
    /// SIGHUP, SIGINT, SIGQUIT and SIGTERM end the turn: the command is
    /// ended, the terminal's modes put back, the cage stopped, and the code
    /// is 128 + the signal, as a shell reports it.
    /// The cage's egress log is looked at every second while the command
    /// runs: `report` is given its state each time it changes (a log that
    /// cannot be written cuts the cage's network; docs/network.md, "The egress
    /// log"), from another thread.
    pub fn run_reporting(
        self,
        report: &(dyn Fn(&crate::net::egress::LogState) + Sync),
    ) -> Result<Ended> {
        let pid_file = self.egress_pid_file.clone();
        let (done, stop) = std::sync::mpsc::channel::<()>();
        let end = std::thread::scope(|scope| {
            scope.spawn(move || {
                let mut ok = true;
                loop {
                    // Once more when the command has ended (its cage still
                    // runs): a change just before is told too.
                    let ended = !matches!(
                        stop.recv_timeout(std::time::Duration::from_secs(1)),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                    );
                    let now = crate::net::egress::state(&pid_file);
                    if now.ok != ok {
                        ok = now.ok;
                        report(&now);
                    }
                    if ended {
                        break;
                    }
                }
            });
            let end = TurnSignals::catch()
                .and_then(|signals| self.process.turn(&signals, Terminal::save().as_ref()));
            drop(done);
            end
        });
        let stop_error = self.host.podman.stop(&self.container).err();
        if stop_error.is_none() {
            let _ = session::remove_file_if_there(&self.marker);
        }
        self.watcher.finish(stop_error.is_none());
        let code = match end? {
            TurnEnd::Exited(code) => code,
            TurnEnd::Signal(sig) => 128 + sig,
        };
        let resume = self.resume.as_ref().and_then(super::resume::Watch::line);
        // Only from a stopped cage: nothing in it writes meanwhile.
        let after = if stop_error.is_none() {
            after_turn(
                self.ctx,
                &self.session,
                &self.dir,
                self.git.as_ref(),
                Some(&self.before),
                &self.container,
            )
        } else {
            Vec::new()
        };
        Ok(Ended {
            code,
            stop_error,
            resume,
            after,
        })
    }
}

/// What a turn left for the machine, looked at with its cage stopped and
/// the session's lock held: the agent's new commits brought into the
/// user's repository (`git::bring`), and the files other tools run later
/// that changed since `before` (`later`). Kept in the record
/// (`after_turn`) and the history; a line each for the terminal.
pub fn after_turn(
    ctx: &Context,
    session: &str,
    dir: &std::path::Path,
    git: Option<&crate::cage::git::GitRecord>,
    before: Option<&super::later::Snapshot>,
    container: &str,
) -> Vec<Warning> {
    let mut lines = Vec::new();
    let report = match git {
        Some(g) => {
            let program = crate::settings::find_program("git", ctx.settings.path_var.as_deref());
            crate::cage::git::bring::bring(
                session,
                dir,
                &g.own,
                &ctx.store.git_base(container),
                program.as_deref(),
            )
            .unwrap_or_else(|e| {
                lines.push(Warning::NothingBrought(Box::new(e)));
                Default::default()
            })
        }
        None => Default::default(),
    };
    let files = before
        .map(|b| {
            let create_argv = ctx
                .store
                .load(session)
                .ok()
                .and_then(|r| r.cage.map(|c| c.create_argv))
                .unwrap_or_default();
            b.changes(&super::later::snapshot(dir, &create_argv))
        })
        .unwrap_or_default();
    lines.extend(report.said());
    lines.extend(super::later::said(&files));
    let when = crate::state::when::now();
    let left = (!report.is_empty() || !files.is_empty()).then_some(session::AfterTurn {
        when,
        git: report,
        files,
    });
    if left.is_some() {
        let what = lines
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        let _ = ctx.store.append_history(
            session,
            &session::HistoryEntry {
                when,
                who: "shrooms-agent".into(),
                what,
            },
        );
    }
    if left.is_some() || before.is_some() {
        let _ = ctx.store.update(session, |r| {
            r.after_turn = left.clone();
            Ok(())
        });
    }
    lines
}

/// What the hidden `cage watch-turn` is given (by `acts::turn::start_watcher`).
#[derive(Debug)]
pub struct WatchRequest {
    pub session: String,
    pub container: String,
    pub podman: PathBuf,
    pub lock_fd: i32,
    pub pipe_fd: i32,
    pub ready_fd: i32,
}

/// What a turn's watcher did.
#[derive(Debug, PartialEq, Eq)]
pub enum Watched {
    /// The holder stopped the cage itself: nothing to do.
    Done,
    /// The holder ended without stopping the cage (killed), or the watcher
    /// itself was sent this signal: the cage was stopped.
    Stopped { signal: Option<i32> },
}

/// The hidden `cage watch-turn`: hold the session's lock and wait for the
/// holder; unless it says it stopped the cage, stop it, then let the lock
/// go (by ending). A signal to the watcher itself (a logout ending all of
/// the user's processes) stops the cage too: a turn is not left running
/// unwatched.
pub fn watch(ctx: &Context, req: &WatchRequest) -> Result<Watched> {
    let _lock = ctx.store.inherited_lock(&req.session, req.lock_fd)?;
    let signals = TurnSignals::catch()?;
    let signal = match runner::await_holder(req.pipe_fd, req.ready_fd, &signals)? {
        Holder::Done => return Ok(Watched::Done),
        Holder::Gone => None,
        Holder::Signal(sig) => Some(sig),
    };
    // Said in the lock file: the next command waits for the stop rather
    // than being told the session is busy (`Store::lock`).
    _lock.note(session::STOPPING);
    let podman = Podman::new(&req.podman);
    // A second and third try: the lock goes when this ends, and a cage
    // left running then would run with nobody's turn.
    let mut tries = 0;
    loop {
        match podman.stop(&req.container) {
            Ok(()) => {
                let _ = session::remove_file_if_there(&ctx.store.turn_marker(&req.session));
                return Ok(Watched::Stopped { signal });
            }
            Err(e) if tries >= 2 => return Err(e),
            Err(_) => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cage run` of Claude Code hands it the shrooms tools' server, at
    /// the path the cage was given the program at, before the caller's words.
    #[test]
    fn claude_is_handed_the_shrooms_tools() {
        let claude = std::path::Path::new("/opt/claude/bin/claude");
        let args = vec!["-p".to_string(), "say hi".to_string()];
        assert_eq!(
            harness_command(
                claude,
                Some(("/usr/local/bin/shrooms-agent".into(), false)),
                args.clone()
            ),
            vec![
                "/opt/claude/bin/claude",
                "--mcp-config={\"mcpServers\":{\"shrooms\":{\"args\":[\"mcp\"],\
                 \"command\":\"/usr/local/bin/shrooms-agent\",\"type\":\"stdio\"}}}",
                "-p",
                "say hi",
            ]
        );
        assert_eq!(
            harness_command(
                claude,
                Some(("/usr/local/bin/shrooms-agent".into(), true)),
                vec![]
            ),
            vec![
                "/opt/claude/bin/claude",
                "--mcp-config={\"mcpServers\":{\"shrooms\":{\"args\":[\"mcp\",\"--sealed\"],\
                 \"command\":\"/usr/local/bin/shrooms-agent\",\"type\":\"stdio\"}}}",
            ]
        );
        assert_eq!(
            harness_command(std::path::Path::new("pi"), None, args),
            vec!["pi", "-p", "say hi"]
        );
    }

    /// In a cage made before `tools/`, the program is named only where the
    /// cage was made with it mounted.
    #[test]
    fn the_program_as_the_cage_was_made_with_it() {
        let paths = vec![
            PathBuf::from("/opt/sa/shrooms-agent"),
            PathBuf::from("/usr/local/bin/shrooms-agent"),
        ];
        let made = |p: &str| {
            vec![
                "create".to_string(),
                "--mount".to_string(),
                format!("type=bind,src={p},dst={p},ro=true,nosuid,nodev"),
            ]
        };
        assert_eq!(
            program_mounted(&paths, &made("/usr/local/bin/shrooms-agent")),
            Some(PathBuf::from("/usr/local/bin/shrooms-agent"))
        );
        assert_eq!(
            program_mounted(&paths, &made("/opt/sa/shrooms-agent")),
            Some(PathBuf::from("/opt/sa/shrooms-agent"))
        );
        assert_eq!(program_mounted(&paths, &made("/old/shrooms-agent")), None);
    }
}
