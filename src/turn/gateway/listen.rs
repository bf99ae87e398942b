//! A listener on the cage's own loopback, made from outside.
//!
//! The harness in a cage must find its model at an `http://127.0.0.1:PORT`
//! base URL, yet nothing of ours runs in the cage and the credential must
//! stay outside it. A TCP socket belongs to the network namespace it was
//! made in, whoever holds it later (socket(7), network_namespaces(7)): so a
//! short-lived copy of this program enters the cage's network namespace
//! (`nsenter -t PID -n`, through `podman unshare` when podman is rootless,
//! whose user namespace owns that network namespace, as for the firewall
//! rules), binds 127.0.0.1 on a free port there, and hands the listening
//! socket back over a Unix socket (SCM_RIGHTS, unix(7)). The process that
//! holds the turn accepts on it in its own namespaces, so what it sends
//! upstream leaves from the machine, not from the cage.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Doing, Error, Result, TurnProblem};
use crate::host::process::Process;

/// The hidden subcommand the helper runs as (left out of completions).
pub const SUBCOMMAND: &str = "gateway-listen";

/// How long the helper may take to hand the socket over.
const HANDOVER: Duration = Duration::from_secs(20);

/// How to enter a container's network namespace from here.
pub struct Enter<'a> {
    /// The container's first process, as podman reports it.
    pub pid: i64,
    pub nsenter: &'a Path,
    /// `Some(podman)` when podman is rootless: enter through `podman unshare`.
    pub rootless_podman: Option<&'a Path>,
    /// This program, which the helper runs.
    pub self_exe: &'a Path,
}

/// The helper's command line (pure, for tests and messages).
pub fn helper_argv(enter: &Enter<'_>, socket: &Path) -> (PathBuf, Vec<String>) {
    let mut args: Vec<String> = Vec::new();
    let program = match enter.rootless_podman {
        Some(podman) => {
            args.push("unshare".into());
            args.push(enter.nsenter.to_string_lossy().into_owned());
            podman.to_path_buf()
        }
        None => enter.nsenter.to_path_buf(),
    };
    args.extend([
        "-t".to_string(),
        enter.pid.to_string(),
        "-n".to_string(),
        enter.self_exe.to_string_lossy().into_owned(),
        SUBCOMMAND.to_string(),
        "--to".to_string(),
        socket.to_string_lossy().into_owned(),
    ]);
    (program, args)
}

/// Make a listener on 127.0.0.1 inside the container's network namespace.
/// `socket` is a path for the handover, in a folder only we can reach.
pub fn listener_in(enter: &Enter<'_>, socket: &Path) -> Result<TcpListener> {
    let doing = "opening the model gateway in the cage";
    let _ = std::fs::remove_file(socket);
    let server = UnixListener::bind(socket)
        .map_err(|e| Error::act(Doing::within(doing, Doing::At(socket.to_path_buf())), &e))?;
    let _gone = RemoveOnDrop(socket.to_path_buf());
    server
        .set_nonblocking(true)
        .map_err(|e| Error::act(doing, &e))?;
    let (program, args) = helper_argv(enter, socket);
    let process = Process::new(&program, "the model gateway's listener")
        .args(args)
        .timeout(HANDOVER);
    let mut helper = Some(std::thread::spawn(move || process.run()));
    let deadline = Instant::now() + HANDOVER;
    let mut outcome = None;
    let stream = loop {
        match server.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let ended = helper.as_ref().is_none_or(|h| h.is_finished());
                if ended || Instant::now() > deadline {
                    outcome = helper.take().map(|h| h.join());
                    // It may have handed the socket over and ended between
                    // the look above and the one before it (this thread
                    // put aside meanwhile, on a busy machine): its
                    // connection waits to be taken.
                    if let Ok((s, _)) = server.accept() {
                        break s;
                    }
                    // It ended without connecting: its error says why.
                    return Err(match outcome {
                        Some(Ok(Err(e))) => e.context(doing),
                        _ => Error::turn(TurnProblem::NoHandover),
                    });
                }
                // The helper hands it over within milliseconds.
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(Error::act(doing, &e)),
        }
    };
    stream
        .set_nonblocking(false)
        .map_err(|e| Error::act(doing, &e))?;
    stream
        .set_read_timeout(Some(HANDOVER))
        .map_err(|e| Error::act(doing, &e))?;
    let fd = receive_fd(&stream)
        .map_err(|e| Error::act(Doing::within(doing, "receiving the socket"), &e))?;
    // The helper has nothing left to do; its outcome is logged by its error.
    if let Some(Ok(Err(e))) = outcome.or_else(|| helper.take().map(|h| h.join())) {
        return Err(e.context(doing));
    }
    let listener = TcpListener::from(fd);
    match listener.local_addr() {
        Ok(a) if a.ip() == std::net::IpAddr::V4(Ipv4Addr::LOCALHOST) => Ok(listener),
        Ok(addr) => Err(Error::turn(TurnProblem::NotLoopback { addr })),
        Err(e) => Err(Error::act(doing, &e)),
    }
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The helper itself (`shrooms-agent gateway-listen --to PATH`), run in the
/// cage's network namespace: bind 127.0.0.1 on a port the kernel picks, and
/// send the listening socket to PATH.
pub fn helper(to: &Path) -> Result<()> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| Error::act(SUBCOMMAND, &e))?;
    let stream = UnixStream::connect(to)
        .map_err(|e| Error::act(Doing::within(SUBCOMMAND, Doing::At(to.to_path_buf())), &e))?;
    send_fd(&stream, listener.as_fd()).map_err(|e| Error::act(SUBCOMMAND, &e))
}

/// Send one descriptor over a Unix socket (SCM_RIGHTS, unix(7)), with one
/// byte of data, through rustix's safe ancillary-data buffers.
fn send_fd(stream: &UnixStream, fd: BorrowedFd<'_>) -> io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for the socket in the message"));
    }
    sendmsg(
        stream,
        &[IoSlice::new(b"L")],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Receive the descriptor `send_fd` sent (close-on-exec at once).
fn receive_fd(stream: &UnixStream) -> io::Result<OwnedFd> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    let mut byte = [0u8];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    recvmsg(
        stream,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message
            && let Some(fd) = fds.next()
        {
            return Ok(fd);
        }
    }
    Err(io::Error::other("no socket in the message"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_argv_rootful_and_rootless() {
        let enter = Enter {
            pid: 42,
            nsenter: Path::new("/usr/bin/nsenter"),
            rootless_podman: None,
            self_exe: Path::new("/usr/local/bin/shrooms-agent"),
        };
        let (p, a) = helper_argv(&enter, Path::new("/s/gw1.sock"));
        assert_eq!(p, Path::new("/usr/bin/nsenter"));
        assert_eq!(
            a,
            [
                "-t",
                "42",
                "-n",
                "/usr/local/bin/shrooms-agent",
                "gateway-listen",
                "--to",
                "/s/gw1.sock"
            ]
        );
        let rootless = Enter {
            rootless_podman: Some(Path::new("/usr/bin/podman")),
            ..enter
        };
        let (p, a) = helper_argv(&rootless, Path::new("/s/gw1.sock"));
        assert_eq!(p, Path::new("/usr/bin/podman"));
        assert_eq!(
            a,
            [
                "unshare",
                "/usr/bin/nsenter",
                "-t",
                "42",
                "-n",
                "/usr/local/bin/shrooms-agent",
                "gateway-listen",
                "--to",
                "/s/gw1.sock"
            ]
        );
    }

    #[test]
    fn a_listener_passes_over_a_unix_socket() {
        let (a, b) = UnixStream::pair().unwrap();
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = l.local_addr().unwrap();
        send_fd(&a, l.as_fd()).unwrap();
        drop(l);
        let got = TcpListener::from(receive_fd(&b).unwrap());
        assert_eq!(got.local_addr().unwrap(), addr);
    }
}
