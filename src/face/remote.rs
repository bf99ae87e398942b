//! `--on MACHINE`: a cage command run by `shrooms-agent` on another
//! machine, over OpenSSH. The cage is made and run there, by the same tool,
//! because what makes a cage a cage (the seccomp profile, the bind-mount
//! sources, the first-process check, the gateway's socket in the cage's
//! network namespace) is read or done on the machine the cage runs on; the
//! way devpod's SSH provider and systemd's `ssh-exec:` varlink transport
//! run their own program at the far end.
//!
//! Here: the `[ssh]` table, the words sent (each quoted for the remote
//! shell: ssh(1) joins its command words with spaces and hands them to the
//! user's shell there), the version check, and, for a turn, the lender: a
//! Unix socket of this process that ssh forwards to the other machine
//! (`ssh -R`, ssh(1) "-R remote_socket:local_socket"). The gateway there
//! asks it for this machine's key at each model request, so the key is
//! never written there; the remote turn holds a connection to it whose end
//! means the ssh connection is gone (a hang-up), and says its exit status
//! on it, so that ssh's own 255 is told apart from the command's.

use std::io::{BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Doing, Error, RemoteProblem, Result};
use crate::host::process::{Process, shell_line};
use crate::settings::Settings;
pub use crate::settings::ssh_table::SshMachine;
#[cfg(test)]
use crate::settings::ssh_table::check_destination;
use crate::settings::ssh_table::machine;
use crate::turn::gateway::credentials::{Credential, MachineSources};

/// The protocol between the two ends: the words one sends and the other
/// takes, and the lender's lines. Raised when either changes in a way the
/// other end would misread.
pub const PROTOCOL: u32 = 1;

/// ssh's own failure (ssh(1), EXIT STATUS).
const SSH_FAILED: i32 = 255;

/// How long the version check may take (a connection, a login, a run).
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// Where `--on WORD` goes: a name of `[ssh]`, else WORD as ssh takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// As the user named it, in messages.
    pub name: String,
    pub machine: SshMachine,
    /// This machine's ssh program.
    pub ssh: PathBuf,
}

/// This machine's OpenSSH client, from the PATH.
fn ssh_program(settings: &Settings) -> Option<PathBuf> {
    crate::settings::find_program("ssh", settings.path_var.as_deref())
}

pub fn target(settings: &Settings, word: &str) -> Result<Target> {
    let ssh = ssh_program(settings).ok_or_else(|| Error::remote(word, RemoteProblem::NoSsh))?;
    if let Some(m) = settings.ssh.get(word) {
        return Ok(Target {
            name: word.to_string(),
            machine: m.clone(),
            ssh,
        });
    }
    let machine = machine(word, None, None).map_err(|why| {
        let config = settings.config_path.clone();
        Error::remote(word, RemoteProblem::NotAMachine { config, why })
    })?;
    Ok(Target {
        name: word.to_string(),
        machine,
        ssh,
    })
}

/// What the command needs of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// No terminal (`ssh -T`); the tool's exit codes, never 255.
    Plain,
    /// `cage run` or `cage exec`: the lender's socket forwarded, and a
    /// terminal (`ssh -t`) when asked.
    Turn { tty: bool },
}

/// ssh's arguments: its options, the destination, and the remote command
/// as one string of quoted words, which the remote user's shell reads back
/// into the same words (`process::shell_line`).
fn ssh_args(
    t: &Target,
    tty: Option<bool>,
    forward: Option<(&str, &Path)>,
    words: &[String],
) -> Result<Vec<String>> {
    let mut a: Vec<String> = vec!["-o".into(), "BatchMode=yes".into()];
    if let Some(c) = &t.machine.ssh_config {
        a.push("-F".into());
        a.push(c.to_string_lossy().into_owned());
    }
    a.push(if tty == Some(true) { "-t" } else { "-T" }.into());
    if let Some((remote, local)) = forward {
        // Without the forward the turn would have no key and no line:
        // ssh fails instead of going on without it.
        a.extend(["-o".into(), "ExitOnForwardFailure=yes".into(), "-R".into()]);
        a.push(format!("{remote}:{}", local.display()));
    }
    a.push("--".into());
    a.push(t.machine.destination.clone());
    let program = std::iter::once(t.machine.program.as_str());
    a.push(shell_line(program.chain(words.iter().map(String::as_str)))?);
    Ok(a)
}

/// What `shrooms-agent version --json` says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Version {
    pub version: String,
    pub protocol: u32,
    /// This machine's name among the machines (`machine_name`).
    pub machine: String,
    /// Where a turn's lent socket is put by ssh there: the user's runtime
    /// folder (0700, theirs alone), else the state folder.
    pub socket_dir: String,
    /// Whose key a turn from another machine uses here (`[gateway]
    /// remote_turns`).
    pub remote_turns: crate::settings::RemoteTurns,
}

/// This program's version, as another machine's `--on` asks for it.
pub fn version(settings: &Settings) -> Version {
    let runtime = settings
        .runtime_dir
        .as_deref()
        .filter(|d| d.is_dir())
        .map(|d| d.to_string_lossy().into_owned());
    Version {
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: PROTOCOL,
        machine: settings.machine_name.clone(),
        socket_dir: match runtime {
            Some(d) => d,
            None => settings.state_dir.to_string_lossy().into_owned(),
        },
        remote_turns: settings.gateway.remote_turns,
    }
}

/// ssh's 255, in words that name the machine.
fn ssh_failed(t: &Target) -> Error {
    let destination = t.machine.destination.clone();
    Error::remote(&t.name, RemoteProblem::SshFailed { destination })
}

/// Ask the other machine's tool its version and protocol; another protocol
/// is refused, with how to update.
pub fn check(t: &Target) -> Result<Version> {
    let out = Process::new(&t.ssh, format!("ssh to {}", t.name))
        .args(ssh_args(
            t,
            None,
            None,
            &["version".into(), "--json".into()],
        )?)
        .timeout(CHECK_TIMEOUT)
        .max_output(MAX_ANSWER)
        .capture()?;
    match out.code {
        Some(0) => {}
        Some(SSH_FAILED) => {
            eprint!("{}", out.stderr);
            return Err(ssh_failed(t));
        }
        Some(127) => {
            return Err(Error::remote(
                &t.name,
                RemoteProblem::NotFound {
                    program: t.machine.program.clone(),
                    said: out.last_stderr_line().to_string(),
                },
            ));
        }
        code => {
            return Err(Error::remote(
                &t.name,
                RemoteProblem::NoVersion {
                    exit: code,
                    said: out.last_stderr_line().to_string(),
                },
            ));
        }
    }
    let v: Version = serde_json::from_str(&out.stdout).map_err(|e| {
        let cause = crate::error::Cause::of(&e);
        Error::remote(&t.name, RemoteProblem::VersionUnread { cause })
    })?;
    if v.protocol != PROTOCOL {
        return Err(Error::remote(
            &t.name,
            RemoteProblem::OtherProtocol {
                version: v.version,
                protocol: v.protocol,
                ours: PROTOCOL,
            },
        ));
    }
    Ok(v)
}

/// Run `words` (a cage command, as the user typed it, without `--on`) on
/// the target's machine, and return its exit status.
pub fn run(
    settings: &Settings,
    env: &crate::settings::Env,
    t: &Target,
    words: Vec<String>,
    kind: Kind,
) -> Result<i32> {
    let v = check(t)?;
    // Its errors name it: the remote tool says where it failed.
    let mut all = vec!["--remote".to_string(), t.name.clone()];
    match kind {
        Kind::Plain => {
            all.extend(words);
            let code = Process::new(&t.ssh, format!("ssh to {}", t.name))
                .args(ssh_args(t, Some(false), None, &all)?)
                .interactive()?;
            // The tool's own exit codes are 0-4 and 125-127.
            if code == SSH_FAILED {
                return Err(ssh_failed(t));
            }
            Ok(code)
        }
        Kind::Turn { tty } => {
            let lend = v.remote_turns == crate::settings::RemoteTurns::Lent;
            let lender = Lender::open(settings, env, lend)?;
            let remote = format!(
                "{}/shrooms-lent-{}.sock",
                v.socket_dir.trim_end_matches('/'),
                random_hex()
            );
            all.extend(["--laptop".to_string(), remote.clone()]);
            all.extend(words);
            let ssh_pid = lender.ssh_pid.clone();
            let code = Process::new(&t.ssh, format!("ssh to {}", t.name))
                .args(ssh_args(t, Some(tty), Some((&remote, &lender.path)), &all)?)
                .interactive_seen(&|pid| {
                    let _ = ssh_pid.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst);
                })?;
            let said = *lender.exit.lock().unwrap_or_else(|p| p.into_inner());
            drop(lender);
            match said {
                // The turn said how it ended: that is its status, 255 too.
                Some(c) if c == code => Ok(code),
                _ if code == SSH_FAILED => Err(ssh_failed(t)),
                _ => Ok(code),
            }
        }
    }
}

fn random_hex() -> String {
    let mut b = [0u8; 12];
    rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()).ok();
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// This machine's end of a turn on another: a Unix socket in a folder of
/// this user's alone, forwarded by the turn's ssh, answered for that ssh
/// process only, for as long as the turn runs, then removed.
struct Lender {
    path: PathBuf,
    dir: PathBuf,
    /// The ssh process, once it runs: the one peer answered.
    ssh_pid: Arc<AtomicU32>,
    /// The exit status the remote turn said it ended with.
    exit: Arc<Mutex<Option<i32>>>,
}

impl Lender {
    fn open(settings: &Settings, env: &crate::settings::Env, lend: bool) -> Result<Lender> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = settings
            .state_dir
            .join(format!("lend-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::act(Doing::Make(dir.to_path_buf()), &e))?;
        let path = dir.join("s");
        let listener = UnixListener::bind(&path)
            .map_err(|e| Error::act(Doing::ListenOn(path.to_path_buf()), &e))?;
        let sources = lend.then(|| Arc::new(crate::turn::gateway::machine_sources(settings, env)));
        let ssh_pid = Arc::new(AtomicU32::new(0));
        let exit = Arc::new(Mutex::new(None));
        let (pid, said) = (ssh_pid.clone(), exit.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                if !from(&conn, &pid) {
                    continue;
                }
                let (sources, said) = (sources.clone(), said.clone());
                std::thread::spawn(move || serve_line(conn, sources.as_deref(), &said));
            }
        });
        Ok(Lender {
            path,
            dir,
            ssh_pid,
            exit,
        })
    }
}

impl Drop for Lender {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Is the peer the turn's ssh process (SO_PEERCRED, unix(7))? The
/// listener's folder is this user's alone; this answers that one
/// connection's forwards and no other process of the user.
fn from(conn: &UnixStream, ssh_pid: &AtomicU32) -> bool {
    let Ok(cred) = rustix::net::sockopt::socket_peercred(conn) else {
        return false;
    };
    // The pid is known once ssh started, before it can connect.
    for _ in 0..100 {
        let want = ssh_pid.load(Ordering::SeqCst);
        if want != 0 {
            return cred.pid.as_raw_nonzero().get() as u32 == want;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// The most of the other machine's answer read (its version, its
/// listing): what its programs print is its own to choose.
const MAX_ANSWER: usize = 16 << 20;

/// The longest line the lender reads: `exit -2147483648` fits.
pub const MAX_LINE: usize = 64;

/// One connection from the other machine: `key` is answered with the
/// credential (or why there is none); `hold` keeps the connection, whose
/// end the other side reads as a hang-up, and takes `exit N`.
fn serve_line(conn: UnixStream, sources: Option<&MachineSources>, said: &Mutex<Option<i32>>) {
    let Ok(mut w) = conn.try_clone() else { return };
    let mut r = BufReader::new(conn);
    // Each line is a word or two: a longer one (any process of the far
    // user can reach the forwarded socket) ends the connection, unread.
    while let Ok(Some(line)) = crate::host::bounded::read_line(&mut r, MAX_LINE) {
        match asked(&String::from_utf8_lossy(&line)) {
            Asked::Key => {
                let answer = match sources.map(MachineSources::resolve) {
                    Some(Ok(Credential::ApiKey(k))) => format!("api {k}\n"),
                    Some(Ok(Credential::OAuth(t))) => format!("oauth {t}\n"),
                    Some(Err(why)) => format!("error {}\n", one_line(&why)),
                    None => "error this machine lends no key: the other machine uses its own\n"
                        .to_string(),
                };
                if w.write_all(answer.as_bytes()).is_err() {
                    return;
                }
            }
            Asked::Exit(c) => *said.lock().unwrap_or_else(|p| p.into_inner()) = Some(c),
            Asked::Hold | Asked::Nothing => {}
        }
    }
}

/// What a line of the other machine asks of the lender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    Key,
    Hold,
    Exit(i32),
    /// Anything else: ignored.
    Nothing,
}

/// Pure: a line to the lender read (`key`, `hold`, `exit N`).
pub fn asked(line: &str) -> Asked {
    match line {
        "key" => Asked::Key,
        "hold" => Asked::Hold,
        other => match other.strip_prefix("exit ").and_then(|c| c.parse().ok()) {
            Some(c) => Asked::Exit(c),
            None => Asked::Nothing,
        },
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The turn's line to the other machine: held open while the turn runs;
/// its end (ssh killed, the connection dropped) is a hang-up here, as a
/// closed terminal is: SIGHUP to this process, whose turn then stops its
/// cage.
pub struct Line {
    stream: UnixStream,
    done: Arc<std::sync::atomic::AtomicBool>,
}

pub fn hold(socket: &Path) -> Result<Line> {
    let stream = UnixStream::connect(socket)
        .map_err(|e| Error::act(Doing::LineBack(socket.to_path_buf()), &e))?;
    let mut w = stream
        .try_clone()
        .map_err(|e| Error::act("the line to the other machine", &e))?;
    w.write_all(b"hold\n")
        .map_err(|e| Error::act("the line to the other machine", &e))?;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (r, d) = (stream.try_clone(), done.clone());
    std::thread::spawn(move || {
        if let Ok(r) = r {
            let mut buf = [0u8; 64];
            let mut r = &r;
            // It sends nothing on this connection: a read returns at its end.
            while matches!(std::io::Read::read(&mut r, &mut buf), Ok(n) if n > 0) {}
        }
        if !d.load(Ordering::SeqCst) {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::HUP,
            );
        }
    });
    Ok(Line { stream, done })
}

impl Line {
    /// Say how the turn ended; its end is then no hang-up.
    pub fn exit(mut self, code: i32) {
        self.done.store(true, Ordering::SeqCst);
        let _ = self.stream.write_all(format!("exit {code}\n").as_bytes());
    }
}

/// One machine's rows in `cage ls --all`.
#[derive(Debug, Serialize)]
pub struct MachineListing {
    pub machine: String,
    /// This machine's own (no ssh).
    pub here: bool,
    /// Its `cage ls --json` (sessions, leftovers, damaged), if it answered.
    pub listing: Option<serde_json::Value>,
    /// Why it did not.
    pub error: Option<String>,
}

/// `cage ls --all`: this machine's sessions and those of every machine of
/// `[ssh]`, each asked on its own; one that cannot be asked is named with
/// why, and does not hide the others (exit 1 then).
pub fn ls_all(ctx: &crate::ops::Context, json: bool) -> Result<std::process::ExitCode> {
    crate::ops::tidy::everything(ctx);
    let here = crate::ops::listing::ls(ctx);
    // A killed turn's cage stopped on the way, said before the listing.
    crate::face::output::warnings(&ctx.take_warnings());
    let mut all = vec![match here
        .and_then(|l| serde_json::to_value(l).map_err(|e| Error::act("the listing", &e)))
    {
        Ok(v) => MachineListing {
            machine: ctx.settings.machine_name.clone(),
            here: true,
            listing: Some(v),
            error: None,
        },
        Err(e) => MachineListing {
            machine: ctx.settings.machine_name.clone(),
            here: true,
            listing: None,
            error: Some(e.message()),
        },
    }];
    // Asked at once: a machine that is slow to answer does not hold up the
    // others.
    let ssh = ssh_program(&ctx.settings);
    let asked: Vec<(String, std::thread::JoinHandle<Result<serde_json::Value>>)> = ctx
        .settings
        .ssh
        .iter()
        .map(|(name, m)| {
            let t = ssh
                .clone()
                .ok_or_else(|| Error::remote(name, RemoteProblem::NoSsh))
                .map(|ssh| Target {
                    name: name.clone(),
                    machine: m.clone(),
                    ssh,
                });
            (name.clone(), std::thread::spawn(move || remote_ls(&t?)))
        })
        .collect();
    for (name, h) in asked {
        let got = h
            .join()
            .unwrap_or_else(|_| Err(Error::remote(&name, RemoteProblem::ListingLost)));
        all.push(match got {
            Ok(v) => MachineListing {
                machine: name,
                here: false,
                listing: Some(v),
                error: None,
            },
            Err(e) => MachineListing {
                machine: name,
                here: false,
                listing: None,
                error: Some(e.message()),
            },
        });
    }
    let failed = all.iter().any(|m| m.error.is_some());
    crate::face::output::show(&serde_json::json!({ "machines": all }), json, |_| {
        listing_text(&all)
    });
    Ok(if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    })
}

fn remote_ls(t: &Target) -> Result<serde_json::Value> {
    check(t)?;
    let words: Vec<String> = ["--remote", &t.name, "cage", "ls", "--json"]
        .iter()
        .map(|w| w.to_string())
        .collect();
    let out = Process::new(&t.ssh, format!("ssh to {}", t.name))
        .args(ssh_args(t, Some(false), None, &words)?)
        .timeout(CHECK_TIMEOUT)
        .max_output(MAX_ANSWER)
        .capture()?;
    match out.code {
        Some(0) => serde_json::from_str(&out.stdout)
            .map_err(|e| Error::act("its `cage ls --json` did not read", &e)),
        Some(SSH_FAILED) => Err(ssh_failed(t)),
        _ => Err(Error::remote(
            &t.name,
            RemoteProblem::ListingFailed {
                said: out.last_stderr_line().to_string(),
            },
        )),
    }
}

/// MACHINE NAME HARNESS STATE DIR, one session a line; then each machine
/// that could not be asked, and why.
fn listing_text(all: &[MachineListing]) -> String {
    let mut rows = vec![[
        "MACHINE".to_string(),
        "NAME".into(),
        "HARNESS".into(),
        "STATE".into(),
        "DIR".into(),
    ]];
    for m in all {
        let sessions = m
            .listing
            .as_ref()
            .and_then(|l| l["sessions"].as_array().cloned())
            .unwrap_or_default();
        for s in sessions {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or("-").to_string();
            let state = if s["busy"].is_object() {
                "busy".to_string()
            } else if s["cage"].is_object() {
                text(&s["cage"]["state"])
            } else {
                "uncaged".to_string()
            };
            rows.push([
                m.machine.clone(),
                text(&s["name"]),
                text(&s["harness"]),
                state,
                text(&s["dir"]),
            ]);
        }
    }
    let widths: Vec<usize> = (0..5)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i + 1 < r.len() {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for m in all {
        if let Some(e) = &m.error {
            out.push_str(&format!("{}: not listed: {e}\n", m.machine));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The remote command is read by the far user's shell: a hostile
    /// session name or path comes back as the very same words (shlex's
    /// reader standing for that shell), and a NUL byte, which no shell can
    /// be given, is a clear error.
    #[test]
    fn words_come_back_whole_from_the_remote_shell() {
        let t = Target {
            name: "big".into(),
            machine: machine("me@big", None, None).unwrap(),
            ssh: "/usr/bin/ssh".into(),
        };
        let words: Vec<String> = [
            "cage",
            "create",
            "it's \"$(rm -rf ~)\"",
            "--dir",
            "/home/me/a b/`id`;$HOME\nx\\y",
            "",
        ]
        .iter()
        .map(|w| w.to_string())
        .collect();
        let a = ssh_args(&t, Some(false), None, &words).unwrap();
        let line = a.last().unwrap();
        let mut sent = vec!["shrooms-agent".to_string()];
        sent.extend(words);
        assert_eq!(shlex::split(line).unwrap(), sent);
        let e = ssh_args(&t, Some(false), None, &["a\0b".into()]).unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::BadInput);
    }

    #[test]
    fn ssh_gets_an_argument_list() {
        let t = Target {
            name: "big".into(),
            machine: machine("me@big", None, Some("/c".into())).unwrap(),
            ssh: "/usr/bin/ssh".into(),
        };
        let a = ssh_args(
            &t,
            Some(true),
            Some(("/run/user/1/x.sock", Path::new("/s/l"))),
            &[
                "cage".into(),
                "exec".into(),
                "n".into(),
                "echo $HOME".into(),
            ],
        )
        .unwrap();
        assert_eq!(
            a,
            [
                "-o",
                "BatchMode=yes",
                "-F",
                "/c",
                "-t",
                "-o",
                "ExitOnForwardFailure=yes",
                "-R",
                "/run/user/1/x.sock:/s/l",
                "--",
                "me@big",
                "shrooms-agent cage exec n 'echo $HOME'"
            ]
        );
    }

    /// The lender answers the turn's ssh process alone: another process of
    /// the same user on its socket is not answered.
    #[test]
    fn the_lender_answers_its_ssh_alone() {
        let (a, _b) = UnixStream::pair().unwrap();
        let me = std::process::id();
        assert!(from(&a, &AtomicU32::new(me)));
        assert!(!from(&a, &AtomicU32::new(me + 1)));
    }

    #[test]
    fn destinations_that_are_not_one_are_refused() {
        for bad in ["", "-oProxyCommand=x", "a b", "a\nb"] {
            assert!(check_destination(bad).is_err(), "{bad:?}");
        }
        for good in ["big", "me@big", "ssh://me@big:2222", "me@[::1]"] {
            assert!(check_destination(good).is_ok(), "{good:?}");
        }
    }
}
