//! The one place a process is started (design.md, habit 2, after cargo's
//! `ProcessBuilder`): program and arguments held as a value, run with duct,
//! always an explicit argument list (no shell anywhere), and one error shape
//! that tells "could not start" from "ran and failed".

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use crate::error::{Error, Kind, Result};

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
        }
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
    /// (issue 4, point 4). Linux sends it when the spawning *thread* ends, so
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

    /// The error of a run that ended without success: `<label>: <last
    /// stderr line>`, the exit status and the whole stderr kept.
    pub fn failure(&self, out: &Captured) -> Error {
        let line = out.last_stderr_line();
        let why = if line.is_empty() {
            format!("exited with {}", describe_code(out.code))
        } else {
            line.to_string()
        };
        Error::exited(
            self.fails_as,
            format!("{}: {why}", self.label),
            out.code,
            out.stderr.clone(),
        )
    }

    fn expression(&self) -> duct::Expression {
        // Rootless podman fails where it cannot read its working folder
        // ("cannot chdir"); every path we pass is absolute, so use /.
        let cwd = self.cwd.clone().unwrap_or_else(|| PathBuf::from("/"));
        let mut e = duct::cmd(&self.program, &self.args).unchecked().dir(cwd);
        e = match &self.stdin {
            Some(b) => e.stdin_bytes(b.clone()),
            None => e.stdin_null(),
        };
        if self.die_with_parent {
            // SAFETY: getpid cannot fail.
            let parent = unsafe { libc::getpid() };
            e = e.before_spawn(move |cmd| {
                use std::os::unix::process::CommandExt;
                // SAFETY: prctl, getppid and kill are async-signal-safe; the
                // closure allocates nothing.
                unsafe {
                    cmd.pre_exec(move || {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                        // The parent may have died before prctl took effect.
                        if libc::getppid() != parent {
                            libc::kill(libc::getpid(), libc::SIGTERM);
                        }
                        Ok(())
                    });
                }
                Ok(())
            });
        }
        e
    }

    fn could_not_start(&self, e: std::io::Error) -> Error {
        Error::failed(format!(
            "{}: could not start {}: {e}",
            self.label,
            self.program.display()
        ))
    }

    /// Run it with stdout and stderr captured (duct reads both at once, so a
    /// full stderr pipe cannot deadlock it); any exit status is returned.
    pub fn capture(&self) -> Result<Captured> {
        let handle = self
            .expression()
            .stdout_capture()
            .stderr_capture()
            .start()
            .map_err(|e| self.could_not_start(e))?;
        let output = match self.timeout {
            None => handle.wait().map_err(|e| self.could_not_start(e))?.clone(),
            Some(t) => match handle
                .wait_timeout(t)
                .map_err(|e| self.could_not_start(e))?
            {
                Some(o) => o.clone(),
                None => {
                    let _ = handle.kill();
                    return Err(Error::failed(format!(
                        "{}: no answer within {:?}",
                        self.label, t
                    )));
                }
            },
        };
        Ok(Captured {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }

    /// Run it and require success; a failure reads `<label>: <last stderr line>`.
    pub fn run(&self) -> Result<Captured> {
        let out = self.capture()?;
        if out.success() {
            Ok(out)
        } else {
            Err(self.failure(&out))
        }
    }

    /// Run it with stderr joined to stdout, handing each line to `on_line`
    /// as it comes (an image build's progress), and return its exit code
    /// (None: ended by a signal). No timeout: a build takes what it takes.
    pub fn stream(&self, on_line: &mut dyn FnMut(&str)) -> Result<Option<i32>> {
        use std::io::BufRead;
        let reader = self
            .expression()
            .stderr_to_stdout()
            .reader()
            .map_err(|e| self.could_not_start(e))?;
        let mut lines = std::io::BufReader::new(&reader);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match lines.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    on_line(line.trim_end_matches(['\n', '\r']));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(Error::failed(format!(
                        "{}: reading its output: {e}",
                        self.label
                    )));
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
    /// passed on to it, so the caller can always clean up after it.
    pub fn interactive(&self) -> Result<i32> {
        let cwd = self.cwd.clone().unwrap_or_else(|| PathBuf::from("/"));
        let e = duct::cmd(&self.program, &self.args).unchecked().dir(cwd);
        let guard = SignalGuard::install();
        let handle = e.start().map_err(|e| self.could_not_start(e))?;
        let output = loop {
            match handle
                .wait_timeout(Duration::from_millis(100))
                .map_err(|e| self.could_not_start(e))?
            {
                Some(o) => break o.clone(),
                None => {
                    let sig = guard.pending();
                    if sig != 0 {
                        for pid in handle.pids() {
                            // SAFETY: kill(2) on our own child's pid.
                            unsafe {
                                libc::kill(pid as libc::pid_t, sig);
                            }
                        }
                        guard.clear();
                    }
                }
            }
        };
        drop(guard);
        Ok(exit_code(&output.status))
    }
}

/// Start a program that outlives this one (issue 4: an image build in the
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
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::process::CommandExt;
    let label = format!("starting {}", program.display());
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log)
        .map_err(|e| Error::failed(format!("{label}: opening {}: {e}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(|e| Error::failed(format!("{label}: {e}")))?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err);
    let fds = keep_fds.to_vec();
    // SAFETY: setsid and fcntl are async-signal-safe; nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            for &fd in &fds {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags == -1 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::failed(format!("{label}: {e}")))?;
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(pid)
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

fn describe_code(code: Option<i32>) -> String {
    code.map(|c| format!("status {c}"))
        .unwrap_or_else(|| "a signal".into())
}

impl fmt::Display for Process {
    /// The command as a shell would read it (for messages and `--dry-run`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", shell_quote(&self.program.to_string_lossy()))?;
        for a in &self.args {
            write!(f, " {}", shell_quote(a))?;
        }
        Ok(())
    }
}

/// Quote a word for display in a POSIX shell: only for showing, never run.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The signal last received while a guard was installed (0: none).
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn remember(sig: libc::c_int) {
    PENDING.store(sig, Ordering::SeqCst);
}

/// Handlers (not SIG_IGN, which a child would inherit through exec) for the
/// signals that would otherwise end us before we stop the cage.
struct SignalGuard {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

const GUARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP];

impl SignalGuard {
    fn install() -> SignalGuard {
        PENDING.store(0, Ordering::SeqCst);
        let mut old = Vec::new();
        for sig in GUARDED {
            // SAFETY: installing a handler that only stores to an atomic.
            unsafe {
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = remember as *const () as usize;
                libc::sigemptyset(&mut new.sa_mask);
                new.sa_flags = libc::SA_RESTART;
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &new, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        SignalGuard { old }
    }
    /// A SIGTERM or SIGHUP to pass on; the terminal's own signals already
    /// reached the child, which shares our process group.
    fn pending(&self) -> libc::c_int {
        match PENDING.load(Ordering::SeqCst) {
            s if s == libc::SIGTERM || s == libc::SIGHUP => s,
            _ => 0,
        }
    }
    fn clear(&self) {
        PENDING.store(0, Ordering::SeqCst);
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restoring the handler we replaced.
            unsafe {
                libc::sigaction(*sig, prev, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_for_a_shell() {
        let p = Process::new("/usr/bin/podman", "podman").args(["exec", "a b", "it's", ""]);
        assert_eq!(p.to_string(), "/usr/bin/podman exec 'a b' 'it'\\''s' ''");
    }

    #[test]
    fn failure_names_the_label_and_the_last_stderr_line() {
        let p = Process::new("/bin/sh", "podman create").args([
            "-c",
            "echo first >&2; echo 'Error: no such image' >&2; exit 125",
        ]);
        let e = p.clone().run().unwrap_err();
        assert_eq!(e.message, "podman create: Error: no such image");
        assert_eq!(e.kind, Kind::Failed);
        assert_eq!(
            e.exited.as_deref(),
            Some(&crate::error::Exited {
                status: Some(125),
                stderr: "first\nError: no such image\n".into()
            })
        );
        let e = p.fails_as(Kind::PodmanFailed).run().unwrap_err();
        assert_eq!(e.kind, Kind::PodmanFailed);
    }

    #[test]
    fn a_missing_program_could_not_start() {
        let e = Process::new("/nonexistent/podman", "podman ps")
            .run()
            .unwrap_err();
        assert!(
            e.message
                .starts_with("podman ps: could not start /nonexistent/podman"),
            "{}",
            e.message
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

    #[test]
    fn a_timeout_kills_and_says_so() {
        let e = Process::new("/bin/sleep", "sleep")
            .args(["5"])
            .timeout(Duration::from_millis(200))
            .run()
            .unwrap_err();
        assert_eq!(e.message, "sleep: no answer within 200ms");
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
        let dir = std::env::temp_dir().join(format!("shrooms-detach-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
    fn interactive_returns_the_exit_code() {
        let code = Process::new("/bin/sh", "sh")
            .args(["-c", "exit 7"])
            .interactive()
            .unwrap();
        assert_eq!(code, 7);
    }
}
