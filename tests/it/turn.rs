//! The cage stops however the turn's process ends: `cage exec S -- sleep N`
//! runs on a terminal of the test's own (a pty), and the process holding
//! the turn is ended by SIGHUP, SIGTERM, SIGINT, SIGKILL, or by its terminal
//! closing, ten times each. Each time, within 10 s: the cage is not running
//! (`podman ps`), the command inside is gone, and the session's lock is
//! free; after a signal that can be caught, the terminal's modes are back
//! as they were before podman put it in raw mode. The next round's `cage
//! exec` on the same session is refused if the session was left busy.
//! And a turn whose process and watcher are both SIGKILLed has its cage
//! stopped by the next command that looks at the session, or by serve.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// How the holder is ended.
#[derive(Debug, Clone, Copy)]
enum End {
    Signal(libc::c_int),
    /// The terminal closes: the test closes the pty's master.
    CloseTerminal,
}

impl End {
    fn catchable(self) -> bool {
        matches!(self, End::Signal(s) if s != libc::SIGKILL)
    }
}

const ALL: [End; 5] = [
    End::Signal(libc::SIGHUP),
    End::Signal(libc::SIGTERM),
    End::Signal(libc::SIGINT),
    End::Signal(libc::SIGKILL),
    End::CloseTerminal,
];

const ROUNDS: usize = 10;
/// The promise: stopped, and the session free, within this.
const WITHIN: Duration = Duration::from_secs(10);

/// A pseudo-terminal: the master (the test, as a terminal emulator) and
/// the slave (the holder's stdin, stdout and stderr, and its controlling
/// terminal). Both close-on-exec from the start: a copy of the master in
/// any other process (tests run in parallel and start programs all the
/// time) would keep the terminal from closing.
struct Pty {
    master: Option<File>,
    slave: OwnedFd,
}

impl Pty {
    fn open() -> Pty {
        // SAFETY: open/unlockpt/ptsname_r on descriptors and buffers we own.
        unsafe {
            let m = libc::open(
                c"/dev/ptmx".as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK,
            );
            assert!(m >= 0, "/dev/ptmx: {}", std::io::Error::last_os_error());
            let master = File::from_raw_fd(m);
            assert_eq!(libc::unlockpt(m), 0);
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
            let s = libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            assert!(s >= 0, "pty slave: {}", std::io::Error::last_os_error());
            Pty {
                master: Some(master),
                slave: OwnedFd::from_raw_fd(s),
            }
        }
    }

    /// The terminal's modes (on Linux the master's termios calls read the
    /// slave's: tty_mode_ioctl).
    fn modes(&self) -> libc::termios {
        let fd = self.master.as_ref().expect("open").as_raw_fd();
        // SAFETY: tcgetattr into a struct we own.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            assert_eq!(
                libc::tcgetattr(fd, &mut t),
                0,
                "{}",
                std::io::Error::last_os_error()
            );
            t
        }
    }

    fn raw(&self) -> bool {
        self.modes().c_lflag & (libc::ICANON | libc::ECHO) == 0
    }

    /// What the holder wrote so far (non-blocking).
    fn drain(&mut self, into: &mut Vec<u8>) {
        if let Some(m) = self.master.as_mut() {
            let mut buf = [0u8; 4096];
            while let Ok(n) = m.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.extend_from_slice(&buf[..n]);
            }
        }
    }
}

/// `cage exec SESSION -- sleep SECS` on the pty, in a session of its own
/// whose controlling terminal is the pty (as a terminal emulator starts a
/// shell): the terminal's hangup reaches it as it would a user's. With
/// `shell`, an interactive shell is that session's leader and runs it as a
/// job, as on a user's terminal: its hangup then comes twice (from the
/// kernel, and from the shell passing its own on), which is how the cage
/// was left running before.
fn start_holder(w: &World, session: &str, secs: &str, pty: &Pty, shell: bool) -> Child {
    let mut c = w.direct_command(&["cage", "exec", session, "--", "sleep", secs]);
    if shell {
        c = in_a_shell(w, &c);
    }
    let stdio = || Stdio::from(pty.slave.try_clone().unwrap());
    c.stdin(stdio()).stdout(stdio()).stderr(stdio());
    // SAFETY: setsid and ioctl are async-signal-safe; nothing is allocated.
    unsafe {
        c.pre_exec(|| {
            if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.spawn().expect("start the holder")
}

/// The same command, run by an interactive shell as a foreground job (as
/// on a user's terminal): the terminal's hangup reaches the shell, which
/// sends it on to its jobs and exits.
fn in_a_shell(w: &World, c: &std::process::Command) -> std::process::Command {
    let words: Vec<String> = std::iter::once(c.get_program())
        .chain(c.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', "'\\''")))
        .collect();
    let mut sh = std::process::Command::new("/bin/bash");
    sh.env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            sh.env(k, v);
        }
    }
    sh.args([
        "--norc",
        "--noprofile",
        "-i",
        "-c",
        &format!("{}; true", words.join(" ")),
    ]);
    if let Some(u) = w.user {
        sh.uid(u.uid).gid(u.uid);
    }
    sh.current_dir("/tmp");
    sh
}

/// Is the container among podman's running ones?
fn running(w: &World, container: &str) -> bool {
    let out = w.podman(&["ps", "--format", "{{.Names}}"]);
    assert!(out.status.success(), "podman ps: {}", show_output(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim() == container)
}

/// Is the session's lock free? Taken and let go at once if so.
fn lock_free(w: &World, session: &str) -> bool {
    let path = w.state.join("sessions").join(format!("{session}.lock"));
    let Ok(f) = File::open(&path) else {
        return true;
    };
    // SAFETY: flock on a descriptor we own; closing lets it go.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// One round: start the turn, wait until the command runs inside on a raw
/// terminal, end the holder as `end` says, and check the promise.
fn round(w: &World, session: &str, container: &str, end: End, n: usize) {
    let secs = format!("{}", 200_000 + u32::from(w.agent_port));
    let inside = format!("sleep {secs}");
    let mut pty = Pty::open();
    let before = pty.modes();
    assert!(!pty.raw(), "a fresh pty is not raw");
    let mut holder = start_holder(w, session, &secs, &pty, matches!(end, End::CloseTerminal));
    let mut said = Vec::new();
    let what = |said: &[u8]| {
        format!(
            "{end:?}, round {n}; the terminal showed:\n{}",
            String::from_utf8_lossy(said)
        )
    };
    // Running: podman has the terminal raw and the command is seen.
    let started = Instant::now();
    loop {
        pty.drain(&mut said);
        if let Some(status) = holder.try_wait().unwrap() {
            panic!(
                "the turn ended by itself ({status}): left busy? {}",
                what(&said)
            );
        }
        if pty.raw() && !cmdlines_containing(&inside).is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the turn did not start: {}",
            what(&said)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let t0 = Instant::now();
    match end {
        // SAFETY: kill(2) on our own child, not yet reaped.
        End::Signal(sig) => unsafe {
            assert_eq!(libc::kill(holder.id() as libc::pid_t, sig), 0);
        },
        End::CloseTerminal => drop(pty.master.take()),
    }
    let mut status = None;
    loop {
        pty.drain(&mut said);
        if status.is_none() {
            status = holder.try_wait().unwrap();
        }
        let done = status.is_some() && lock_free(w, session) && !running(w, container);
        if done {
            break;
        }
        assert!(
            t0.elapsed() < WITHIN,
            "not within {WITHIN:?}: holder ended: {status:?}, lock free: {}, cage running: {}; {}",
            lock_free(w, session),
            running(w, container),
            what(&said)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        cmdlines_containing(&inside),
        vec![],
        "the command inside survived: {}",
        what(&said)
    );
    if let End::Signal(sig) = end
        && end.catchable()
    {
        assert_eq!(
            status.unwrap().code(),
            Some(128 + sig),
            "exit code: {}",
            what(&said)
        );
        let after = pty.modes();
        assert!(
            after.c_lflag & libc::ICANON != 0 && after.c_lflag & libc::ECHO != 0,
            "the terminal was left raw: {}",
            what(&said)
        );
        assert_eq!(
            (after.c_iflag, after.c_oflag, after.c_lflag),
            (before.c_iflag, before.c_oflag, before.c_lflag),
            "the terminal's modes were not put back: {}",
            what(&said)
        );
    }
}

/// Every way of ending, ten times each, on one session; then the session
/// still works and no watcher is left.
fn every_end(w: &World, ends: &[End]) {
    let name = w.session("turn");
    let dir = std::fs::canonicalize(w.dir("turn-project")).unwrap();
    w.create(&name, &dir, &[]);
    let container = w.container(&name);
    let t = Instant::now();
    for &end in ends {
        for n in 0..ROUNDS {
            round(w, &name, &container, end, n);
        }
    }
    eprintln!("{} rounds in {:?}", ends.len() * ROUNDS, t.elapsed());
    assert_eq!(
        w.run(&["cage", "exec", &name, "--", "echo", "again"])
            .ok()
            .stdout(),
        "again\n"
    );
    assert_eq!(
        cmdlines_containing(&format!("watch-turn --session {name} ")),
        vec![],
        "a watcher was left"
    );
}

#[test]
fn the_cage_stops_however_the_turns_process_ends() {
    every_end(&World::new(), &ALL);
}

/// Rootless, the ways that reach past this process: the terminal's hangup
/// (twice, with a shell), and SIGKILL (the watcher's podman runs in the
/// user's namespace). What a caught SIGTERM or SIGINT does here is the
/// same code as rootful, shown above.
#[test]
fn rootless_the_cage_stops_however_the_turns_process_ends() {
    every_end(
        &World::rootless(),
        &[
            End::Signal(libc::SIGHUP),
            End::Signal(libc::SIGKILL),
            End::CloseTerminal,
        ],
    );
}

/// Is `sleep N` running in the cage (its own process, not the command
/// lines that name it)?
fn sleeping_inside(inside: &str) -> bool {
    cmdlines_containing(inside)
        .iter()
        .any(|(_, t)| t.trim_end() == inside)
}

/// Start a turn (`cage exec S -- sleep N`) and SIGKILL its watcher, then
/// its process: nothing is left to stop the cage, which still runs (with
/// no gateway and no socket) until something looks at the session.
fn kill_turn_and_watcher(w: &World, session: &str, secs: &str) {
    let inside = format!("sleep {secs}");
    let watcher = format!("watch-turn --session {session} ");
    let pty = Pty::open();
    let mut holder = start_holder(w, session, secs, &pty, false);
    let started = Instant::now();
    while !sleeping_inside(&inside) || cmdlines_containing(&watcher).is_empty() {
        assert!(
            holder.try_wait().unwrap().is_none(),
            "the turn ended by itself"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the turn did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The watcher first: killed second, it would see the turn's process
    // go and stop the cage itself.
    for (pid, _) in cmdlines_containing(&watcher) {
        // SAFETY: kill(2) of the watcher this test's turn started.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    while !cmdlines_containing(&watcher).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(70),
            "the watcher lived on"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    holder.kill().unwrap();
    holder.wait().unwrap();
}

/// A turn whose process and watcher were both killed leaves its cage
/// running; the next command that looks at the session (`cage show`)
/// stops it and says so, and serve does within a few seconds. A cage
/// `cage start` started is left running by both.
fn dead_turn(w: &World) {
    let name = w.session("deadturn");
    let dir = std::fs::canonicalize(w.dir("deadturn-project")).unwrap();
    w.create(&name, &dir, &[]);
    let container = w.container(&name);
    let secs = format!("{}", 300_000 + u32::from(w.agent_port));
    w.run(&["cage", "start", &name]).ok();
    w.run(&["cage", "ls"]).ok();
    assert!(running(w, &container), "cage ls stopped a started cage");

    kill_turn_and_watcher(w, &name, &secs);
    std::thread::sleep(Duration::from_secs(1));
    assert!(lock_free(w, &name), "the session's lock is still held");
    assert!(running(w, &container), "the cage was stopped already");
    let shown = w.run(&["cage", "show", &name]).ok();
    assert!(
        !running(w, &container),
        "cage show left the dead turn's cage running: {}",
        shown.explain()
    );
    assert!(
        shown.stderr().contains(&format!("stopped {container}")),
        "cage show did not say it stopped the cage: {}",
        shown.explain()
    );
    // The next turn stops it first, and starts the cage afresh.
    kill_turn_and_watcher(w, &name, &secs);
    let again = w.run(&["cage", "exec", &name, "--", "echo", "again"]).ok();
    assert_eq!(again.stdout(), "again\n");
    assert!(
        again.stderr().contains(&format!("stopped {container}")),
        "cage exec did not stop the dead turn's cage: {}",
        again.explain()
    );
    assert!(
        !sleeping_inside(&format!("sleep {secs}")),
        "the dead turn's command lived on"
    );
    // `cage ls` stops one too, and says so on stderr: its listing on
    // stdout stays the listing alone.
    kill_turn_and_watcher(w, &name, &secs);
    let listed = w.run(&["cage", "ls", "--json"]).ok();
    assert!(
        !running(w, &container),
        "cage ls left the dead turn's cage running: {}",
        listed.explain()
    );
    assert!(
        listed.stderr().contains(&format!("stopped {container}")),
        "cage ls did not say it stopped the cage: {}",
        listed.explain()
    );
    serde_json::from_str::<serde_json::Value>(&listed.stdout()).unwrap();
    // Said once: the marker is gone, and a cage started again stays up.
    w.run(&["cage", "start", &name]).ok();
    let listed = w.run(&["cage", "ls"]).ok();
    assert!(!listed.stderr().contains("stopped"), "{}", listed.explain());
    assert!(running(w, &container), "cage ls stopped a started cage");

    let serve = w.serve(&[], &[]);
    kill_turn_and_watcher(w, &name, &secs);
    let t0 = Instant::now();
    // Its line comes once `podman stop` has returned.
    while running(w, &container) || !serve.log_text().contains(&format!("stopped {container}")) {
        assert!(
            t0.elapsed() < WITHIN,
            "serve did not stop the dead turn's cage (running: {}); its log:\n{}",
            running(w, &container),
            serve.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        !sleeping_inside(&format!("sleep {secs}")),
        "the command inside survived"
    );
}

#[test]
fn a_turn_killed_with_its_watcher_is_stopped_by_the_next_look() {
    dead_turn(&World::new());
}

#[test]
fn rootless_a_turn_killed_with_its_watcher_is_stopped_by_the_next_look() {
    dead_turn(&World::rootless());
}
