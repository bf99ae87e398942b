//! Accepting connections and reading their heads, apart from the workers.
//!
//! A connection that sends half a head and stalls used to hold a worker
//! for the head's 10 s, so eight of them, from anyone (the token is known
//! only from the head), stopped the server. Now one thread accepts and
//! reads every head with poll(2), a little at a time as it arrives, and a
//! connection goes to a worker only once its head is whole: however many
//! stall, they hold no worker, and the workers serve whole requests
//! meanwhile. Each head still has [`super::http::READ_TIMEOUT`] (408 after).
//!
//! The same thread closes gently the connections a worker answered before
//! their body was read (401, 413...): it reads and throws away what the
//! client still sends, until the client stops or [`LINGER`] passes, and
//! only then closes. Closed at once, the socket would answer the rest of
//! the body with a reset, and a client still sending it would lose the
//! answer it has not read yet (RFC 9112, 9.6). No worker waits for that.
//!
//! Bounds: at most [`MAX_HEADS`] heads are read at once, and at most
//! [`PER_PEER`] connections from one address other than loopback are in
//! flight (being read, queued or served); past either, 503 at once. Loopback
//! is not counted: everything on this machine reaches it, so a cap there
//! would stop no one and could stop `serve`'s own users.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::http::{Conn, HeadError, Request, Response};

/// Heads read at once; past this, a new connection is answered 503.
pub const MAX_HEADS: usize = 512;
/// Connections in flight from one address other than loopback.
pub const PER_PEER: usize = 16;
/// How long a connection answered before its body was read is read from
/// before it is closed.
pub const LINGER: Duration = Duration::from_secs(2);
/// Connections closed gently at once; past this, one is closed at once.
pub const MAX_CLOSING: usize = 512;
/// The longest poll(2) waits: the stop flag and the heads' deadlines are
/// looked at least this often.
const TICK: Duration = Duration::from_millis(50);

/// A connection whose head is whole, for a worker.
pub struct Job {
    pub conn: Conn,
    pub req: Request,
    /// When it was accepted (for the log line's milliseconds).
    pub start: Instant,
    /// Its place among its address's connections, freed when it is done.
    pub _slot: Slot,
}

/// A connection a worker answered before its body was read, to close gently.
pub struct Closing {
    pub conn: Conn,
    pub _slot: Slot,
}

/// A connection being closed gently, until `until`.
struct Lingering {
    closing: Closing,
    until: Instant,
}

/// A connection still sending its head.
struct Reading {
    conn: Conn,
    peer: SocketAddr,
    start: Instant,
    slot: Slot,
}

/// Accept connections and read their heads, handing each whole one to the
/// workers through `jobs`, and close gently those the workers send back
/// through `closing`, until `stop` is set; then the heads begun are read
/// to their end (or their time), and it returns.
pub fn serve(
    listener: TcpListener,
    stop: &AtomicBool,
    jobs: &SyncSender<Job>,
    closing: &Receiver<Closing>,
) {
    let peers = Arc::new(Peers::default());
    let mut listener = Some(listener);
    let mut reading: Vec<Reading> = Vec::new();
    let mut lingering: Vec<Lingering> = Vec::new();
    // After an accept error (out of descriptors, say), the listener stays
    // readable: leave it alone a moment rather than spin.
    let mut accept_after = Instant::now();
    loop {
        if stop.load(Ordering::SeqCst) {
            listener = None;
            if reading.is_empty() {
                return;
            }
        }
        let fds_of_reading = reading.iter().map(|r| pollfd(r.conn.as_raw_fd()));
        let fds_of_lingering = lingering.iter().map(|l| pollfd(l.closing.conn.as_raw_fd()));
        let mut fds: Vec<libc::pollfd> = fds_of_reading.chain(fds_of_lingering).collect();
        let listening = listener.as_ref().filter(|_| Instant::now() >= accept_after);
        if let Some(l) = listening {
            fds.push(pollfd(l.as_raw_fd()));
        }
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structs.
        let n = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                TICK.as_millis() as i32,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                eprintln!("shrooms-agent serve: waiting for connections: {e}");
                std::thread::sleep(TICK);
            }
            continue;
        }
        let now = Instant::now();
        let reading_before = reading.len();
        // Newest first, so that swap_remove moves only heads already seen.
        for i in (0..reading.len()).rev() {
            let r = &mut reading[i];
            let mut outcome = Ok(None);
            if fds[i].revents != 0 {
                outcome = r.conn.read_head_now(r.peer);
            }
            if matches!(outcome, Ok(None)) && now >= r.conn.deadline() {
                outcome = Err(HeadError::Timeout);
            }
            match outcome {
                Ok(None) => {}
                Ok(Some(req)) => hand_over(reading.swap_remove(i), req, jobs),
                Err(e) => refuse(reading.swap_remove(i), e),
            }
        }
        let lingering_fds = &fds[reading_before..reading_before + lingering.len()];
        for i in (0..lingering.len()).rev() {
            let l = &mut lingering[i];
            let open = lingering_fds[i].revents == 0 || l.closing.conn.discard_now();
            if !open || now >= l.until {
                lingering.swap_remove(i);
            }
        }
        while let Ok(c) = closing.try_recv() {
            // Non-blocking again: this thread never waits on one client.
            if lingering.len() < MAX_CLOSING && c.conn.set_nonblocking().is_ok() {
                lingering.push(Lingering {
                    closing: c,
                    until: Instant::now() + LINGER,
                });
            }
        }
        if let Some(l) = listening
            && fds.last().is_some_and(|f| f.revents != 0)
            && let Err(e) = accept_all(l, &peers, &mut reading)
        {
            eprintln!("shrooms-agent serve: accepting: {e}");
            accept_after = Instant::now() + Duration::from_millis(200);
        }
    }
}

fn pollfd(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Take every connection waiting on the listener.
fn accept_all(l: &TcpListener, peers: &Arc<Peers>, reading: &mut Vec<Reading>) -> io::Result<()> {
    loop {
        let (stream, peer) = match l.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        // Non-blocking while its head is read: one stalled client must
        // never stop this thread.
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        let mut conn = Conn::new(stream);
        if reading.len() >= MAX_HEADS {
            eprintln!("- - 503 0ms (too many heads being read)");
            conn.refuse_busy("the server is busy; try again in a moment");
            continue;
        }
        let Some(slot) = peers.admit(peer.ip(), PER_PEER) else {
            eprintln!(
                "- - 503 0ms (too many connections from {})",
                super::canonical(peer.ip())
            );
            conn.refuse_busy(&format!(
                "this address has {PER_PEER} connections to this serve already; \
                 try again when they are done"
            ));
            continue;
        };
        reading.push(Reading {
            conn,
            peer,
            start: Instant::now(),
            slot,
        });
    }
}

/// A whole head: to the workers' queue, or 503 when it is full.
fn hand_over(r: Reading, req: Request, jobs: &SyncSender<Job>) {
    let job = Job {
        conn: r.conn,
        req,
        start: r.start,
        _slot: r.slot,
    };
    match jobs.try_send(job) {
        Ok(()) => {}
        Err(TrySendError::Full(mut job)) => {
            eprintln!("- - 503 0ms (the queue is full)");
            job.conn
                .refuse_busy("the server is busy; try again in a moment");
        }
        Err(TrySendError::Disconnected(_)) => {}
    }
}

/// A head that will not be whole: 408 when it ran out of time, 400 when it
/// is no HTTP; nothing when the client went away.
fn refuse(mut r: Reading, e: HeadError) {
    let (status, why) = match e {
        HeadError::Closed | HeadError::Io => return,
        HeadError::Timeout => (408, "the request did not arrive in time".to_string()),
        HeadError::Bad(why) => (400, why),
    };
    // Small, on a socket that has sent nothing yet: it fits in the send
    // buffer, and the write does not wait.
    let _ = r.conn.respond(&Response::error(status, &why));
    super::log("-", "-", status, r.start);
}

/// Connections in flight per address other than loopback.
#[derive(Default)]
pub struct Peers {
    counts: Mutex<HashMap<IpAddr, usize>>,
}

/// A connection's place among its address's; given back when dropped.
pub struct Slot {
    peers: Arc<Peers>,
    /// None for loopback, which is not counted.
    ip: Option<IpAddr>,
}

impl Peers {
    /// A place for a connection from `ip`, unless `cap` from that address
    /// are in flight already.
    pub fn admit(self: &Arc<Self>, ip: IpAddr, cap: usize) -> Option<Slot> {
        let ip = super::canonical(ip);
        if ip.is_loopback() {
            return Some(Slot {
                peers: self.clone(),
                ip: None,
            });
        }
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let n = counts.entry(ip).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(Slot {
            peers: self.clone(),
            ip: Some(ip),
        })
    }

    #[cfg(test)]
    fn in_flight(&self, ip: IpAddr) -> usize {
        let counts = self.counts.lock().unwrap();
        counts.get(&ip).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(ip) = self.ip else {
            return;
        };
        let mut counts = self.peers.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_its_own_places_and_loopback_is_not_counted() {
        let peers = Arc::new(Peers::default());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let b: IpAddr = "fd5e::2".parse().unwrap();
        let first = peers.admit(a, 2).unwrap();
        let _second = peers.admit(mapped, 2).unwrap();
        assert!(peers.admit(a, 2).is_none());
        assert_eq!(peers.in_flight(a), 2);
        let _other = peers.admit(b, 2).unwrap();
        let loopback: Vec<Slot> = (0..10)
            .map(|_| peers.admit("127.0.0.1".parse().unwrap(), 2).unwrap())
            .collect();
        assert_eq!(loopback.len(), 10);
        drop(first);
        assert_eq!(peers.in_flight(a), 1);
        let _again = peers.admit(a, 2).unwrap();
        assert!(peers.admit(a, 2).is_none());
    }
}
