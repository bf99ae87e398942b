//! The one place a process is started (after cargo's `ProcessBuilder`,
//! crates/cargo-util/src/process_builder.rs): program and arguments held as a value, run with duct,
//! always an explicit argument list (no shell anywhere), and one error shape
//! that tells "could not start" from "ran and failed".

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::{Doing, Error, Kind, Result, What};

/// A command to run, as a value.
#[derive(Debug, Clone)]
pub struct Process {
    program: PathBuf,
    args: Vec<String>,
    stdin: Option<Vec<u8>>,
    timeout: Option<Duration>,
    /// The working folder (default /).
    cwd: Option<PathBuf>,
    /// How failures are named: "podman create", "nft".
    label: String,
    /// Sent SIGTERM when the thread that started it ends (`die_with_parent`).
    die_with_parent: bool,
    /// The kind of the error when it runs and fails (`run`).
    fails_as: Kind,
    /// Set in its environment, beside what it inherits.
    env: Vec<(String, String)>,
    /// The call as its failure names it, as data (`podman start NAME`);
    /// the label when not given.
    call: Option<String>,
    /// The most of its standard output `capture` keeps (`max_output`).
    max_stdout: usize,
}

/// The most of a program's standard output `capture` keeps, unless told
/// less: past it, the run fails, and nothing of it is read as an answer
/// (a program's output may carry what a cage or a far machine chose).
pub const MAX_STDOUT: usize = 64 << 20;
/// The most of its standard error kept: the end, where the reason is.
pub const MAX_STDERR: usize = 1 << 20;
/// The longest line `stream` hands over at once.
const MAX_LINE: usize = 1 << 20;

/// A process started with its output being read (`Process::start_captured`).
struct Capturing {
    handle: duct::Handle,
    out: std::thread::JoinHandle<(Vec<u8>, bool)>,
    err: std::thread::JoinHandle<Vec<u8>>,
}

/// What a finished process printed.
#[derive(Debug, Clone)]
pub struct Captured {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Captured {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
    /// The last non-empty line of stderr: podman puts its reason there.
    pub fn last_stderr_line(&self) -> &str {
        self.stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(str::trim)
            .unwrap_or("")
    }
}

impl Process {
    pub fn new(program: impl AsRef<Path>, label: impl Into<String>) -> Process {
        Process {
            program: program.as_ref().to_path_buf(),
            args: Vec::new(),
            stdin: None,
            timeout: None,
            cwd: None,
            label: label.into(),
            die_with_parent: false,
            fails_as: Kind::Failed,
            env: Vec::new(),
            call: None,
            max_stdout: MAX_STDOUT,
        }
    }
    /// Keep at most `bytes` of its standard output (`capture`): for an
    /// answer made of what a cage or another machine controls.
    pub fn max_output(mut self, bytes: usize) -> Process {
        self.max_stdout = bytes;
        self
    }
    /// One more variable in its environment (never a secret: a process's
    /// environment is readable by its user in /proc).
    pub fn env(mut self, name: &str, value: &str) -> Process {
        self.env.push((name.to_string(), value.to_string()));
        self
    }
    pub fn args<I, S>(mut self, args: I) -> Process
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Process {
        self.stdin = Some(bytes.into());
        self
    }
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Process {
        self.cwd = Some(dir.into());
        self
    }
    pub fn timeout(mut self, t: Duration) -> Process {
        self.timeout = Some(t);
        self
    }
    /// End it (SIGTERM) when this process ends, even by SIGKILL: an image
    /// build must not go on unseen once the process holding its lock is gone
    /// (a background build is started by serve or a CLI command that may
    /// end first). Linux sends it when the spawning *thread* ends, so
    /// only for processes waited for on the thread that started them.
    pub fn die_with_parent(mut self) -> Process {
        self.die_with_parent = true;
        self
    }

    /// The kind `run` gives its error when the program ran and failed
    /// (podman's calls: [`Kind::PodmanFailed`]).
    pub fn fails_as(mut self, kind: Kind) -> Process {
        self.fails_as = kind;
        self
    }

    /// The call its failure names as data ([`crate::error::Exited`]): the
    /// program, its verb and what it acts on, never a secret.
    pub fn call(mut self, call: impl Into<String>) -> Process {
        self.call = Some(call.into());
        self
    }

    /// The error of a run that ended without success: `<label>: <last
    /// stderr line>`, the exit status and the whole stderr kept.
    pub fn failure(&self, out: &Captured) -> Error {
        Error::ran(
            self.fails_as,
            self.label.clone(),
            crate::error::Exited {
                call: self.call.clone().unwrap_or_else(|| self.label.clone()),
                status: out.code,
                stderr: out.stderr.clone(),
            },
        )
    }

    fn expression(&self) -> duct::Expression {
        match &self.stdin {
            Some(b) => self.inheriting().stdin_bytes(b.clone()),
            None => self.inheriting().stdin_null(),
        }
    }

    /// The expression with our stdin, stdout and stderr (duct's default).
    fn inheriting(&self) -> duct::Expression {
        // Rootless podman fails where it cannot read its working folder
        // ("cannot chdir"); every path we pass is absolute, so use /.
        let cwd = self.cwd.clone().unwrap_or_else(|| PathBuf::from("/"));
        let mut e = duct::cmd(&self.program, &self.args).unchecked().dir(cwd);
        for (k, v) in &self.env {
            e = e.env(k, v);
        }
        if self.die_with_parent {
            use rustix::process::{Signal, getpid, getppid, kill_process};
            let parent = getpid();
            e = e.before_spawn(move |cmd| {
                use std::os::unix::process::CommandExt;
                let in_child = move || {
                    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::TERM));
                    // The parent may have died before prctl took effect.
                    if getppid() != Some(parent) {
                        let _ = kill_process(getpid(), Signal::TERM);
                    }
                    Ok(())
                };
                // SAFETY: pre_exec's closure runs in the child between fork
                // and exec, where only async-signal-safe calls are sound
                // (signal-safety(7)): rustix's prctl, getppid, getpid and
                // kill in `in_child` are each one system call, and it
                // allocates nothing and takes no lock.
                unsafe {
                    cmd.pre_exec(in_child);
                }
                Ok(())
            });
        }
        e
    }

    fn could_not_start(&self, e: std::io::Error) -> Error {
        Error::act(
            Doing::within(
                Doing::Run(self.label.clone()),
                Doing::CouldNotStart(self.program.clone()),
            ),
            &e,
        )
    }

    /// Run it with stdout and stderr captured, each read by a thread of its
    /// own as it comes (so a full stderr pipe cannot deadlock it) and kept
    /// within a bound: stdout's first [`Process::max_output`] bytes (past
    /// them the run fails), stderr's last [`MAX_STDERR`]. Any exit status
    /// is returned.
    pub fn capture(&self) -> Result<Captured> {
        self.capture_beside(|| ()).0
    }

    /// `capture`, with `beside` run here while the process runs (work that
    /// does not need its answer); both results, the process's once it has
    /// ended.
    pub fn capture_beside<T>(&self, beside: impl FnOnce() -> T) -> (Result<Captured>, T) {
        let started = self.start_captured();
        let local = beside();
        (started.and_then(|c| self.finish(c)), local)
    }

    /// Start it, its stdout and stderr each read by a thread of its own.
    fn start_captured(&self) -> Result<Capturing> {
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let handle = retrying_busy(|| {
            self.expression()
                .stdout_file(out_w.try_clone()?)
                .stderr_file(err_w.try_clone()?)
                .start()
        })
        .map_err(|e| self.could_not_start(e))?;
        // The child has its own: the readers see the end when it ends.
        drop((out_w, err_w));
        let max = self.max_stdout;
        let out = std::thread::spawn(move || keep_head(std::fs::File::from(out_r), max));
        let err = std::thread::spawn(move || keep_tail(std::fs::File::from(err_r), MAX_STDERR));
        Ok(Capturing { handle, out, err })
    }

    /// Wait for what `start_captured` started, within the timeout.
    fn finish(&self, c: Capturing) -> Result<Captured> {
        let Capturing { handle, out, err } = c;
        let max = self.max_stdout;
        let output = match self.timeout {
            None => handle.wait().map_err(|e| self.could_not_start(e))?.clone(),
            Some(t) => match handle
                .wait_timeout(t)
                .map_err(|e| self.could_not_start(e))?
            {
                Some(o) => o.clone(),
                None => {
                    let _ = handle.kill();
                    return Err(Error::of(
                        Kind::Failed,
                        What::NoAnswer {
                            label: self.label.clone(),
                            within: t,
                        },
                    ));
                }
            },
        };
        let (stdout, over) = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        // The recording fake podman's crash, in unit tests: the tool dies
        // right after this call, before it looks at the answer.
        #[cfg(test)]
        crash::crash_point(&self.program);
        if over {
            return Err(Error::of(
                Kind::Failed,
                What::SaidTooMuch {
                    label: self.label.clone(),
                    max,
                },
            ));
        }
        Ok(Captured {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }

    /// Run it and require success; a failure reads `<label>: <last stderr line>`.
    pub fn run(&self) -> Result<Captured> {
        self.run_beside(|| ()).0
    }

    /// `run`, with `beside` run here meanwhile (`capture_beside`).
    pub fn run_beside<T>(&self, beside: impl FnOnce() -> T) -> (Result<Captured>, T) {
        let (out, local) = self.capture_beside(beside);
        let out = out.and_then(|out| {
            if out.success() {
                Ok(out)
            } else {
                Err(self.failure(&out))
            }
        });
        (out, local)
    }

    /// Run it with stderr joined to stdout, handing each line to `on_line`
    /// as it comes (an image build's progress), and return its exit code
    /// (None: ended by a signal). No timeout: a build takes what it takes.
    pub fn stream(&self, on_line: &mut dyn FnMut(&str)) -> Result<Option<i32>> {
        use std::io::BufRead;
        let reader = retrying_busy(|| self.expression().stderr_to_stdout().reader())
            .map_err(|e| self.could_not_start(e))?;
        let mut lines = std::io::BufReader::new(&reader);
        let mut buf = Vec::new();
        // A line past MAX_LINE is handed over in pieces of that length.
        loop {
            buf.clear();
            match std::io::Read::take(&mut lines, MAX_LINE as u64).read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    on_line(line.trim_end_matches(['\n', '\r']));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(Error::act(
                        Doing::within(Doing::Run(self.label.clone()), "reading its output"),
                        &e,
                    ));
                }
            }
        }
        let output = loop {
            match reader.try_wait().map_err(|e| self.could_not_start(e))? {
                Some(o) => break o.clone(),
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        Ok(output.status.code())
    }

    /// Run it with the terminal passed through (stdin, stdout and stderr
    /// inherited) and return its exit code. While it runs, SIGINT, SIGQUIT,
    /// SIGTERM and SIGHUP do not end this process: the child gets the
    /// terminal's signals itself, and a SIGTERM or SIGHUP sent to us alone is
    /// passed on to it, so the caller can always clean up after it. The
    /// signals stay caught (signal-hook) for the rest of the process's life,
    /// as a turn's do ([`TurnSignals`]).
    pub fn interactive(&self) -> Result<i32> {
        self.interactive_seen(&|_| {})
    }

    /// [`Process::interactive`], telling `started` the child's pid once it
    /// runs (`--on`'s key lender answers that process alone).
    pub fn interactive_seen(&self, started: &dyn Fn(u32)) -> Result<i32> {
        let cwd = self.cwd.clone().unwrap_or_else(|| PathBuf::from("/"));
        let e = duct::cmd(&self.program, &self.args).unchecked().dir(cwd);
        let signals = TurnSignals::catch()?;
        let handle = retrying_busy(|| e.start()).map_err(|e| self.could_not_start(e))?;
        for pid in handle.pids() {
            started(pid);
        }
        let output = loop {
            match handle
                .wait_timeout(Duration::from_millis(100))
                .map_err(|e| self.could_not_start(e))?
            {
                Some(o) => break o.clone(),
                None => {
                    // A SIGTERM or SIGHUP sent to us alone is passed on; the
                    // terminal's own signals reached the child already, as
                    // it shares our process group.
                    if let Some(sig) = signals.take()
                        && (sig == libc::SIGTERM || sig == libc::SIGHUP)
                    {
                        for pid in handle.pids() {
                            signal_child(pid, sig);
                        }
                    }
                }
            }
        };
        Ok(exit_code(&output.status))
    }
}

/// Start a program that outlives this one (an image build in the
/// background): in a session of its own (setsid), so no terminal's hangup
/// reaches it; working folder /; stdin from /dev/null; stdout and stderr
/// appended to `log`. `keep_fds` are passed to it open (a build lock held
/// for it); every other descriptor of ours is close-on-exec. Returns its
/// pid, which is also its process group. A thread reaps it if it ends
/// while we still run.
pub fn spawn_detached(
    program: &Path,
    args: &[String],
    log: &Path,
    keep_fds: &[std::os::fd::RawFd],
) -> Result<u32> {
    let mut child = detached(program, args, Some(log), keep_fds)?;
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(pid)
}

/// `spawn_detached`'s start, the child left to the caller (`log` None:
/// stdout and stderr to /dev/null).
fn detached(
    program: &Path,
    args: &[String],
    log: Option<&Path>,
    keep_fds: &[std::os::fd::RawFd],
) -> Result<std::process::Child> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let label = Doing::StartProgram(program.to_path_buf());
    let (out, err) = match log {
        Some(log) => {
            let out = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(log)
                .map_err(|e| {
                    Error::act(
                        Doing::within(label.clone(), Doing::Open(log.to_path_buf())),
                        &e,
                    )
                })?;
            let err = out.try_clone().map_err(|e| Error::act(label.clone(), &e))?;
            (Stdio::from(out), Stdio::from(err))
        }
        None => (Stdio::null(), Stdio::null()),
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let fds = keep_fds.to_vec();
    let in_child = move || -> std::io::Result<()> {
        rustix::process::setsid()?;
        for &fd in &fds {
            // SAFETY: `keep_fds` are descriptors the caller holds open
            // across this call, so the child's copies are open too; the
            // borrow ends before exec.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let flags = rustix::io::fcntl_getfd(fd)?;
            rustix::io::fcntl_setfd(fd, flags - rustix::io::FdFlags::CLOEXEC)?;
        }
        Ok(())
    };
    // SAFETY: pre_exec's closure runs in the child between fork and exec,
    // where only async-signal-safe calls are sound (signal-safety(7)):
    // rustix's setsid and fcntl in `in_child` are each one system call,
    // and it allocates nothing (`fds` was made before) and takes no lock.
    unsafe {
        cmd.pre_exec(in_child);
    }
    retrying_busy(|| cmd.spawn()).map_err(|e| Error::act(label.clone(), &e))
}

/// Start a process with `start`, again while it fails with ETXTBSY.
/// execve(2) fails so while any process holds the program open for
/// writing, which includes a child another thread forked between a write
/// of the program and its own exec (the inherited descriptor lives until
/// that exec): a program just written or replaced, as a package upgrade or
/// a test's stand-in does. Go's os/exec meets the same race
/// (golang/go#22315); the window is short, so a few more tries.
fn retrying_busy<T>(mut start: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    let mut tries = 0;
    loop {
        match start() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 20 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

// ---- a turn: `cage exec` / `cage run` in a cage ----------------------------
//
// Whatever ends the process holding a turn, the cage must stop and the
// session must be free again: a caged session may not keep processes
// running after its turn's process ends. Two parts do it:
// - in this process, the signals that can be caught (`TurnSignals`) end the
//   command (`Process::turn`), put the terminal back as it was
//   (`Terminal`), and the caller stops the cage;
// - for what cannot be caught (SIGKILL, a crash), a watcher process started
//   before the cage (`spawn_watcher`), in a session of its own so that the
//   terminal's hangup does not reach it, holding the read end of a pipe
//   whose only write end is ours: when the pipe ends without our "done"
//   (`await_holder`), we are gone, and the watcher stops the cage.

/// The signals that end a turn: a terminal closing (SIGHUP), `kill`
/// (SIGTERM), and the keyboard's (SIGINT, SIGQUIT; while podman has the
/// terminal in raw mode these come only from `kill`, as Ctrl-C is passed to
/// the cage as a byte).
pub const TURN_SIGNALS: [libc::c_int; 4] =
    [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM];

/// The turn's signals, caught (with signal-hook) from `catch` on, for the
/// rest of the process's life: a second signal while the cage is being
/// stopped must not end us half-way either. Handlers are reset by exec, so
/// the programs we start get the signals' default actions.
pub struct TurnSignals {
    received: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl TurnSignals {
    pub fn catch() -> Result<TurnSignals> {
        let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for sig in TURN_SIGNALS {
            signal_hook::flag::register_usize(sig, received.clone(), sig as usize)
                .map_err(|e| Error::act(Doing::CatchSignal(sig), &e))?;
        }
        Ok(TurnSignals { received })
    }

    /// None caught (for tests of what reads them).
    #[cfg(test)]
    fn none() -> TurnSignals {
        TurnSignals {
            received: std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        }
    }

    /// The last of them that arrived since the last `take`, and forget it.
    pub fn take(&self) -> Option<i32> {
        match self.received.swap(0, Ordering::SeqCst) {
            0 => None,
            s => i32::try_from(s).ok(),
        }
    }

    /// The last of them that arrived, if any did.
    pub fn received(&self) -> Option<i32> {
        match self.received.load(Ordering::SeqCst) {
            0 => None,
            s => i32::try_from(s).ok(),
        }
    }
}

/// The modes of the terminal on standard input, as they were before the
/// command (podman exec -t puts it in raw mode and puts it back only when
/// it ends normally; killed, it leaves the terminal raw).
pub struct Terminal {
    saved: rustix::termios::Termios,
}

impl Terminal {
    /// Standard input's modes, if it is a terminal.
    pub fn save() -> Option<Terminal> {
        let saved = rustix::termios::tcgetattr(std::io::stdin()).ok()?;
        Some(Terminal { saved })
    }

    /// Put the modes back, where they differ. SIGTTOU is blocked meanwhile,
    /// as shells do, so that a turn run in the background is not stopped by
    /// it (tcsetattr(3)). A terminal that is gone (closed: EIO) is left be.
    pub fn restore(&self) {
        use rustix::termios::{OptionalActions, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        match tcgetattr(&stdin) {
            Ok(now) if !same_modes(&now, &self.saved) => {}
            _ => return,
        }
        // rustix has no signal masks (std neither): libc's pthread_sigmask.
        // SAFETY: sigset_t is plain data that sigemptyset initialises
        // before use; the mask changed is this thread's, and is put back.
        unsafe {
            let mut block: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut block);
            libc::sigaddset(&mut block, libc::SIGTTOU);
            libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
            let _ = tcsetattr(&stdin, OptionalActions::Now, &self.saved);
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
    }
}

/// Whether two terminals' modes are the same: the four flag words and
/// the control characters (rustix's `Termios` and its `SpecialCodes` have
/// no `==`; the codes are compared by name).
fn same_modes(a: &rustix::termios::Termios, b: &rustix::termios::Termios) -> bool {
    use rustix::termios::SpecialCodeIndex as I;
    a.input_modes == b.input_modes
        && a.output_modes == b.output_modes
        && a.control_modes == b.control_modes
        && a.local_modes == b.local_modes
        && [
            I::VINTR,
            I::VQUIT,
            I::VERASE,
            I::VKILL,
            I::VEOF,
            I::VTIME,
            I::VMIN,
            I::VSWTC,
            I::VSTART,
            I::VSTOP,
            I::VSUSP,
            I::VEOL,
            I::VREPRINT,
            I::VDISCARD,
            I::VWERASE,
            I::VLNEXT,
            I::VEOL2,
        ]
        .into_iter()
        .all(|i| a.special_codes[i] == b.special_codes[i])
}

/// How a turn's command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// By itself, with this exit code (128 + n when signal n ended it).
    Exited(i32),
    /// This signal reached us first, and the command was ended.
    Signal(i32),
}

/// How long an ended command gets to go after SIGTERM before SIGKILL.
const END_GRACE: Duration = Duration::from_secs(2);

impl Process {
    /// Run it as a turn's command: the terminal passed through, as
    /// `interactive`; it is sent SIGTERM if we die (PR_SET_PDEATHSIG), so it
    /// never outlives us; when one of the turn's signals reaches us, it is
    /// ended (SIGTERM, SIGKILL after two seconds) and reaped. Either way the
    /// terminal's modes are put back (`terminal`) before this returns.
    pub fn turn(&self, signals: &TurnSignals, terminal: Option<&Terminal>) -> Result<TurnEnd> {
        if let Some(sig) = signals.received() {
            return Ok(TurnEnd::Signal(sig));
        }
        let end = self.clone().die_with_parent().run_turn(signals);
        if let Some(t) = terminal {
            t.restore();
        }
        end
    }

    fn run_turn(&self, signals: &TurnSignals) -> Result<TurnEnd> {
        let handle =
            retrying_busy(|| self.inheriting().start()).map_err(|e| self.could_not_start(e))?;
        let wait = |t: Duration| handle.wait_timeout(t).map_err(|e| self.could_not_start(e));
        loop {
            if let Some(o) = wait(Duration::from_millis(100))? {
                return Ok(TurnEnd::Exited(exit_code(&o.status)));
            }
            if let Some(sig) = signals.received() {
                for pid in handle.pids() {
                    signal_child(pid, libc::SIGTERM);
                }
                if wait(END_GRACE)?.is_none() {
                    let _ = handle.kill();
                    let _ = handle.wait();
                }
                return Ok(TurnEnd::Signal(sig));
            }
        }
    }
}

/// Send `sig` (one of [`TURN_SIGNALS`]) to our own child `pid`, not yet
/// reaped; a child that ended meanwhile is no error.
fn signal_child(pid: u32, sig: i32) {
    use rustix::process::{Pid, Signal, kill_process};
    if let (Some(pid), Some(sig)) = (
        i32::try_from(pid).ok().and_then(Pid::from_raw),
        Signal::from_named_raw(sig),
    ) {
        let _ = kill_process(pid, sig);
    }
}

/// The first `max` bytes of `r`, read to its end, and whether there was
/// more (read and dropped, so the writer is never blocked).
fn keep_head(mut r: impl std::io::Read, max: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut over = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                over |= n > room;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (kept, over)
}

/// The last `max` bytes of `r`, read to its end.
fn keep_tail(mut r: impl std::io::Read, max: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * max {
                    kept.drain(..kept.len() - max);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if kept.len() > max {
        kept.drain(..kept.len() - max);
    }
    kept
}

/// A pipe, both ends close-on-exec from the start (pipe2), so that no
/// program started meanwhile by another thread holds an end.
fn pipe() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| Error::act("making a pipe", &e))
}

/// What the holder writes when it has stopped the cage itself.
const DONE: u8 = b'd';
/// What the watcher writes once it holds what it was given.
const READY: u8 = b'r';
/// How long a watcher may take to say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// A running watcher of a turn, and our end of its pipe.
pub struct Watcher {
    child: std::process::Child,
    tell: Option<std::fs::File>,
}

/// Start a turn's watcher and wait until it says it is ready: `program`
/// with the arguments `args` makes from two descriptor numbers, the read
/// end of the pipe it watches and the write end of the one it says
/// "ready" on; detached as `spawn_detached` (its own session, stdin
/// /dev/null, output appended to `log`, or dropped when None), given
/// `keep_fds` and those two ends. The write end of the watched pipe stays
/// ours alone: close-on-exec, so neither podman nor anything else we start
/// holds it, and the pipe ends when we do. A watcher that is not ready
/// (it refused what it was given, or hangs) is an error: a turn is not
/// run unwatched.
pub fn spawn_watcher(
    program: &Path,
    args: impl FnOnce(std::os::fd::RawFd, std::os::fd::RawFd) -> Vec<String>,
    log: Option<&Path>,
    keep_fds: &[std::os::fd::RawFd],
) -> Result<Watcher> {
    use std::os::fd::AsRawFd;
    let (read, write) = pipe()?;
    let (ready_read, ready_write) = pipe()?;
    let args = args(read.as_raw_fd(), ready_write.as_raw_fd());
    let mut fds = keep_fds.to_vec();
    fds.extend([read.as_raw_fd(), ready_write.as_raw_fd()]);
    let child = detached(program, &args, log, &fds)?;
    drop(read);
    drop(ready_write);
    let mut watcher = Watcher {
        child,
        tell: Some(std::fs::File::from(write)),
    };
    match read_byte(&ready_read, Some(READY_WITHIN), None) {
        Ok(Some(READY)) => Ok(watcher),
        other => {
            // Whatever it does not do now, it must not do later.
            let _ = watcher.child.kill();
            use crate::error::{TurnProblem, WatcherSilent};
            let why = match other {
                Ok(Some(_)) => WatcherSilent::SaidElse,
                Ok(None) => WatcherSilent::Quiet {
                    secs: READY_WITHIN.as_secs(),
                },
                Err(e) => {
                    return Err(e.context(
                        "the watcher that stops the cage if this process is killed did not start",
                    ));
                }
            };
            Err(Error::turn(TurnProblem::WatcherNotStarted(why)))
        }
    }
}

impl Watcher {
    /// The turn is over. `stopped`: we stopped the cage ourselves, and the
    /// watcher has nothing to do; otherwise it stops the cage. Either way,
    /// wait for it to end, so that the session's lock (which it holds too)
    /// is free when we return.
    pub fn finish(mut self, stopped: bool) {
        if stopped && let Some(mut t) = self.tell.take() {
            use std::io::Write;
            let _ = t.write_all(&[DONE]);
        }
        self.close_and_wait();
    }

    fn close_and_wait(&mut self) {
        self.tell = None;
        let _ = self.child.wait();
    }
}

impl Drop for Watcher {
    /// Dropped without `finish` (an error on the way): the watcher stops
    /// the cage, and we wait for it.
    fn drop(&mut self) {
        self.close_and_wait();
    }
}

/// One byte from a pipe: Some(byte), or None at its end (or when `within`
/// passed, or one of `signals` arrived: `signals.received()` tells).
/// signal-hook's handlers restart reads, so it polls, and looks at the
/// signals between.
fn read_byte(
    fd: &impl std::os::fd::AsFd,
    within: Option<Duration>,
    signals: Option<&TurnSignals>,
) -> Result<Option<u8>> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let end = within.map(|w| std::time::Instant::now() + w);
    let every = Timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    };
    loop {
        if signals.is_some_and(|s| s.received().is_some())
            || end.is_some_and(|e| std::time::Instant::now() >= e)
        {
            return Ok(None);
        }
        let mut p = [PollFd::new(fd, PollFlags::IN)];
        if !matches!(poll(&mut p, Some(&every)), Ok(n) if n > 0) {
            continue;
        }
        let mut byte = [0u8; 1];
        match rustix::io::read(fd, &mut byte) {
            Ok(0) => return Ok(None),
            Ok(_) => return Ok(Some(byte[0])),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(Error::act("reading a pipe", &e)),
        }
    }
}

/// A descriptor passed on to us as number `fd` by the process that started
/// us (a lock or a pipe's end, named on our command line), owned from here
/// on and made close-on-exec again at once, so that nothing we start holds
/// it; None when no such descriptor is open. To be taken once, before
/// anything else could own that number.
pub fn inherited_fd(fd: std::os::fd::RawFd) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
    if fd < 0 {
        return None;
    }
    // SAFETY: the number comes from the command line of a hidden
    // subcommand, which only `spawn_detached` and `spawn_watcher` start,
    // with that descriptor open for it; open since exec, its number cannot
    // have been given to a descriptor of ours, so nothing here owns it.
    // fcntl checks it is open before it is owned, and each caller takes
    // each number once.
    let owned = unsafe {
        rustix::io::fcntl_getfd(BorrowedFd::borrow_raw(fd)).ok()?;
        OwnedFd::from_raw_fd(fd)
    };
    let flags = rustix::io::fcntl_getfd(&owned).ok()?;
    let _ = rustix::io::fcntl_setfd(&owned, flags | rustix::io::FdFlags::CLOEXEC);
    Some(owned)
}

/// A pipe's end passed on to us as descriptor `fd`: made close-on-exec
/// again at once (nothing we start may hold it), and refused unless it is
/// a pipe.
fn inherited_pipe(fd: std::os::fd::RawFd) -> Result<std::fs::File> {
    use std::os::unix::fs::FileTypeExt;
    let Some(file) = (fd >= 3).then(|| inherited_fd(fd)).flatten() else {
        return Err(Error::turn(crate::error::TurnProblem::NotPassed { fd }));
    };
    let file = std::fs::File::from(file);
    let is_fifo = file
        .metadata()
        .map(|m| m.file_type().is_fifo())
        .unwrap_or(false);
    if !is_fifo {
        return Err(Error::turn(crate::error::TurnProblem::NotAPipe { fd }));
    }
    Ok(file)
}

/// What a watcher learnt of its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// It said it stopped the cage itself.
    Done,
    /// Its end of the pipe closed without that: it is gone.
    Gone,
    /// The watcher itself got this signal (a logout ending every process
    /// of the user, say): the turn cannot be watched any more.
    Signal(i32),
}

/// The watcher's side, once it holds what else it was given (the lock):
/// the watched pipe's read end and the "ready" pipe's write end, passed as
/// descriptors `watched` and `ready`; says "ready", then reads until the
/// holder says "done" or is gone, or one of `signals` arrives.
pub fn await_holder(
    watched: std::os::fd::RawFd,
    ready: std::os::fd::RawFd,
    signals: &TurnSignals,
) -> Result<Holder> {
    use std::io::Write;
    let pipe = inherited_pipe(watched)?;
    let mut ready = inherited_pipe(ready)?;
    ready
        .write_all(&[READY])
        .map_err(|e| Error::act("saying ready", &e))?;
    drop(ready);
    loop {
        match read_byte(&pipe, None, Some(signals))? {
            Some(DONE) => return Ok(Holder::Done),
            Some(_) => continue,
            None => {
                return Ok(match signals.received() {
                    Some(sig) => Holder::Signal(sig),
                    None => Holder::Gone,
                });
            }
        }
    }
}

/// The exit code a shell would report: the code, or 128 + the signal.
fn exit_code(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    }
}

impl fmt::Display for Process {
    /// The command as a shell would read it (for messages and `--dry-run`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let program = self.program.to_string_lossy();
        let words = std::iter::once(program.as_ref()).chain(self.args.iter().map(String::as_str));
        f.write_str(&shown_line(words))
    }
}

/// The one quoting of a word for a POSIX shell (the program's, for ssh's
/// remote command and for a command shown to a person): as it is when a
/// shell reads it as itself, else quoted, by shlex. A NUL byte cannot be
/// said to a shell (nor be an argument of a process): refused.
pub fn shell_quote(word: &str) -> Result<std::borrow::Cow<'_, str>> {
    shlex::try_quote(word).map_err(|e| {
        Error::input(crate::error::InputProblem::ShellNul {
            word: word.to_string(),
            cause: e.to_string(),
        })
    })
}

/// Words as one line that a shell reads back into the same words (ssh's
/// remote command, which the far user's shell reads): each quoted by
/// [`shell_quote`], joined by spaces.
pub fn shell_line<'a>(words: impl IntoIterator<Item = &'a str>) -> Result<String> {
    let quoted = words
        .into_iter()
        .map(shell_quote)
        .collect::<Result<Vec<_>>>()?;
    Ok(quoted.join(" "))
}

/// Words shown to a person as a shell would read them (messages,
/// `--dry-run`), never run. Showing does not fail: a word no shell can be
/// given (a NUL byte) is shown in double quotes with Rust's escapes.
pub fn shown_line<'a>(words: impl IntoIterator<Item = &'a str>) -> String {
    words
        .into_iter()
        .map(|w| shell_quote(w).unwrap_or_else(|_| format!("{w:?}").into()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A recording fake program's crash, in unit tests (`podman::fake`): the
/// runner stops the tool right after the call the fake was told to.
#[cfg(test)]
pub mod crash {
    use std::path::Path;

    /// The marker the fake leaves when the tool is to die after its call.
    pub const CRASHED: &str = "crashed";

    /// What the runner panics with when the fake says the tool dies here.
    #[derive(Debug)]
    pub struct Crash;

    /// Called by the runner after each process it ran, in unit tests: after
    /// the fake's chosen call, the tool dies (a panic with [`Crash`]).
    pub fn crash_point(program: &Path) {
        let Some(dir) = program.parent() else { return };
        let marker = dir.join(CRASHED);
        if std::fs::remove_file(&marker).is_ok() {
            std::panic::panic_any(Crash);
        }
    }

    /// Run `f` as the tool would run until it died: Ok when it ran to its end,
    /// Err(()) when the fake's crash ended it. Another panic is the test's.
    pub fn until_crash<T>(f: impl FnOnce() -> T) -> Result<T, ()> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(v) => Ok(v),
            Err(p) if p.is::<Crash>() => Err(()),
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    /// A fault of one of the state folder's writes (`session::write_atomic`,
    /// the history's append): it fails, or the tool dies right after it.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum WriteFault {
        Fail,
        Crash,
    }

    // Counted on the thread that writes: an operation under test runs on
    // its test's thread, and other tests run beside it on theirs.
    thread_local! {
        static WRITES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        static FAULT: std::cell::Cell<Option<(usize, WriteFault)>> =
            const { std::cell::Cell::new(None) };
    }

    /// The writes made on this thread so far.
    pub fn writes() -> usize {
        WRITES.get()
    }

    /// Give the `n`th write from now on this thread (1: the next) `fault`,
    /// once.
    pub fn fault_write(n: usize, fault: WriteFault) {
        FAULT.set(Some((WRITES.get() + n, fault)));
    }

    /// No fault for this thread's writes.
    pub fn no_write_fault() {
        FAULT.set(None);
    }

    /// Called by a write before it writes anything: counts it, and fails
    /// it when it is the one chosen.
    pub fn before_write() -> std::io::Result<()> {
        let n = WRITES.get() + 1;
        WRITES.set(n);
        if FAULT.get() == Some((n, WriteFault::Fail)) {
            FAULT.set(None);
            return Err(std::io::Error::other("injected failure"));
        }
        Ok(())
    }

    /// Called by a write once it is done: the tool dies here when it is the
    /// one chosen.
    pub fn after_write() {
        if FAULT.get() == Some((WRITES.get(), WriteFault::Crash)) {
            FAULT.set(None);
            std::panic::panic_any(Crash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_for_a_shell() {
        let p = Process::new("/usr/bin/podman", "podman").args(["exec", "a b", "it's", ""]);
        assert_eq!(p.to_string(), "/usr/bin/podman exec 'a b' \"it's\" ''");
        // shlex's choices: `=`, `,` and `%` quoted (an `a=b` first word is
        // an assignment, a `,` part of a brace expansion), `]` left bare.
        let p = Process::new("podman", "podman").args(["--label", "k=v", "a,b", "50%", "x]"]);
        assert_eq!(p.to_string(), "podman --label 'k=v' 'a,b' '50%' x]");
        // Showing never fails: a NUL byte is shown escaped.
        let p = Process::new("podman", "podman").args(["a\0b"]);
        assert_eq!(p.to_string(), "podman \"a\\0b\"");
    }

    /// What a hostile name or path could hold comes back from a shell's
    /// reading of the line as the very same words (shlex's own reader
    /// stands for the far user's shell).
    #[test]
    fn a_shell_line_reads_back_as_its_words() {
        let words = [
            "shrooms-agent",
            "a b",
            "it's",
            "\"q\"",
            "$(touch /tmp/pwned)",
            "`id`",
            "$HOME",
            "line\nbreak",
            "tab\there",
            "back\\slash",
            "!event",
            "^caret",
            "~user",
            "*?[x]",
            "{a,b}",
            "a;b|c&d>e<f",
            "#not-a-comment",
            "k=v",
            "ünïcödé",
            "",
        ];
        let line = shell_line(words).unwrap();
        assert_eq!(shlex::split(&line).unwrap(), words);
        for w in words {
            assert_eq!(shlex::split(&shell_quote(w).unwrap()).unwrap(), [w]);
        }
    }

    /// A NUL byte cannot be given to a shell: a clear error, no panic.
    #[test]
    fn a_nul_byte_is_refused() {
        let e = shell_quote("a\0b").unwrap_err();
        assert_eq!(e.kind, Kind::BadInput);
        assert!(e.message().contains("NUL"), "{}", e.message());
        let e = shell_line(["ok", "a\0b"]).unwrap_err();
        assert_eq!(e.kind, Kind::BadInput);
    }

    #[test]
    fn failure_names_the_label_and_the_last_stderr_line() {
        let p = Process::new("/bin/sh", "podman create").args([
            "-c",
            "echo first >&2; echo 'Error: no such image' >&2; exit 125",
        ]);
        let e = p.clone().run().unwrap_err();
        assert_eq!(e.message(), "podman create: Error: no such image");
        assert_eq!(e.kind, Kind::Failed);
        assert_eq!(
            e.exited(),
            Some(&crate::error::Exited {
                call: "podman create".into(),
                status: Some(125),
                stderr: "first\nError: no such image\n".into()
            })
        );
        let e = p
            .fails_as(Kind::PodmanFailed)
            .call("podman create web")
            .run()
            .unwrap_err();
        assert_eq!(e.kind, Kind::PodmanFailed);
        assert_eq!(
            e.podman(),
            Some(crate::error::PodmanCall {
                call: "podman create web".into(),
                status: Some(125)
            })
        );
    }

    #[test]
    fn a_missing_program_could_not_start() {
        let e = Process::new("/nonexistent/podman", "podman ps")
            .run()
            .unwrap_err();
        assert!(
            e.message()
                .starts_with("podman ps: could not start /nonexistent/podman"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn stdin_and_capture() {
        let out = Process::new("/bin/cat", "cat")
            .stdin("hello")
            .run()
            .unwrap();
        assert_eq!(out.stdout, "hello");
    }

    /// What a program prints is kept within a bound: stdout's beginning
    /// (past the bound the run fails), stderr's end.
    #[test]
    fn output_is_kept_within_a_bound() {
        let sh = |script: &str| {
            Process::new("/bin/sh", "sh")
                .args(["-c", script])
                .timeout(Duration::from_secs(60))
        };
        let out = sh("head -c 1000 /dev/zero")
            .max_output(1000)
            .capture()
            .unwrap();
        assert_eq!(out.stdout.len(), 1000);
        let e = sh("head -c 1001 /dev/zero; exit 0")
            .max_output(1000)
            .capture()
            .unwrap_err();
        assert!(
            e.message().contains("printed more than 1000 bytes"),
            "{}",
            e.message()
        );
        // Far more than the bound, and the program is not held up by it.
        let e = sh("head -c 50000000 /dev/zero")
            .max_output(1000)
            .capture()
            .unwrap_err();
        assert!(e.message().contains("more than"), "{}", e.message());
        let out =
            sh("head -c 3000000 /dev/zero | tr '\\0' e >&2; echo >&2; echo last-words >&2; exit 3")
                .capture()
                .unwrap();
        assert_eq!(out.code, Some(3));
        assert!(out.stderr.len() <= MAX_STDERR, "{}", out.stderr.len());
        assert!(
            out.last_stderr_line() == "last-words",
            "{}",
            out.stderr.len()
        );
    }

    #[test]
    fn a_timeout_kills_and_says_so() {
        let e = Process::new("/bin/sleep", "sleep")
            .args(["5"])
            .timeout(Duration::from_millis(200))
            .run()
            .unwrap_err();
        assert_eq!(e.message(), "sleep: no answer within 200ms");
    }

    #[test]
    fn stream_hands_over_each_line_of_both_outputs() {
        let mut lines = Vec::new();
        let code = Process::new("/bin/sh", "sh")
            .args(["-c", "echo one; echo two >&2; printf three; exit 3"])
            .die_with_parent()
            .stream(&mut |l| lines.push(l.to_string()))
            .unwrap();
        assert_eq!(code, Some(3));
        assert_eq!(lines, ["one", "two", "three"]);
    }

    #[test]
    fn spawn_detached_makes_a_session_and_passes_only_the_fds_asked() {
        use std::os::fd::AsRawFd;
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let log = dir.join("log");
        let kept = std::fs::File::create(dir.join("kept")).unwrap();
        let other = std::fs::File::create(dir.join("other")).unwrap();
        let (k, o) = (kept.as_raw_fd(), other.as_raw_fd());
        let script = format!(
            "read -r pid comm state ppid pgrp sid rest < /proc/$$/stat; \
             echo \"$pid $sid $pgrp\"; [ -e /proc/$$/fd/{k} ] && echo kept; \
             [ -e /proc/$$/fd/{o} ] && echo leaked; pwd; echo done"
        );
        let pid = spawn_detached(
            Path::new("/bin/sh"),
            &["-c".to_string(), script],
            &log,
            &[k],
        )
        .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let text = loop {
            let t = std::fs::read_to_string(&log).unwrap_or_default();
            if t.contains("done") || std::time::Instant::now() > deadline {
                break t;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(text, format!("{pid} {pid} {pid}\nkept\n/\ndone\n"));
    }

    #[test]
    fn a_watcher_learns_done_or_gone_and_says_ready() {
        use std::io::{Read, Write};
        use std::os::fd::IntoRawFd;
        let signals = TurnSignals::none();
        for done in [true, false] {
            let (watched, tell) = pipe().unwrap();
            let (ready_read, ready) = pipe().unwrap();
            let mut tell = std::fs::File::from(tell);
            if done {
                tell.write_all(&[DONE]).unwrap();
            } else {
                drop(tell);
            }
            let heard = await_holder(watched.into_raw_fd(), ready.into_raw_fd(), &signals);
            let expected = if done { Holder::Done } else { Holder::Gone };
            assert_eq!(heard.unwrap(), expected);
            let mut said = Vec::new();
            std::fs::File::from(ready_read)
                .read_to_end(&mut said)
                .unwrap();
            assert_eq!(said, [READY]);
        }
    }

    #[test]
    fn a_watcher_that_does_not_say_ready_is_an_error() {
        let e = spawn_watcher(Path::new("/bin/true"), |_, _| Vec::new(), None, &[])
            .err()
            .expect("refused");
        assert_eq!(
            e.message(),
            "the watcher that stops the cage if this process is killed did not start: \
             it ended or did not answer within 30s"
        );
    }

    #[test]
    fn interactive_returns_the_exit_code() {
        let code = Process::new("/bin/sh", "sh")
            .args(["-c", "exit 7"])
            .interactive()
            .unwrap();
        assert_eq!(code, 7);
    }
}
