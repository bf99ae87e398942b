//! One connection, from the accept to the close. hyper reads the request
//! and writes the answer (one request per connection: `Connection:
//! close`); around it, this file keeps what hyper does not:
//!
//! - the head's deadline: [`READ_TIMEOUT`] from the accept, answered 408
//!   (hyper's own header timeout closes without an answer). A connection
//!   still sending its head holds nothing but a task;
//! - the bounds: places are counted per user of this machine (the uid of
//!   the client's socket, [`PER_USER`]) and per address of another
//!   machine ([`PER_PEER`]), at most [`MAX_CONNECTIONS`] over TCP in all;
//!   past any of them, 503 at once. serve's own user on its Unix socket
//!   has places of its own ([`UNIX_CONNECTIONS`]), which no one else's
//!   connections take. A place is given back once the answer is written
//!   and serve's side of the connection shut: what follows is no longer
//!   the client's request but serve's courtesy (below), and a client that
//!   keeps N connections open never finds more than N of its places
//!   taken, however late serve gets to see that it closed them;
//! - the lingering close: a connection answered before its body was read
//!   (401, 413...) is read from and what arrives thrown away, until the
//!   client stops or [`LINGER`] passes, and only then closed. Closed at
//!   once, the socket would answer the rest of the body with a reset, and
//!   a client still sending it would lose the answer it has not read yet
//!   (RFC 9112, 9.6). At most [`LINGERING`] connections linger at once,
//!   whoever's; past that, one is closed at once;
//! - a client gone away: once the request is read whole, the end of the
//!   connection from the client's side ends the request (a route not
//!   begun yet is never begun; an operation under way finishes, and its
//!   answer is dropped).
//!
//! For these, the connection's socket is kept twice: hyper has one file
//! descriptor, this file a duplicate, which outlives hyper's to answer
//! 408 and to linger.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

use super::Shared;
use super::reply::Response;

/// A request's head and a JSON body must arrive within this time, in all,
/// from when the connection is accepted; and no read of an upload may
/// wait longer than this for its next bytes.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The request line and headers together may be at most this long
/// (hyper's smallest buffer).
pub const MAX_HEAD: usize = 16 * 1024;
/// How hyper reads a connection: one request, its head within
/// [`READ_TIMEOUT`] of the accept (the server shell's deadline, answered
/// 408 here).
const LIMITS: crate::turn::server::Limits = crate::turn::server::Limits {
    head: READ_TIMEOUT,
    max_head: MAX_HEAD,
    keep_alive: false,
};
/// TCP connections at once; past this, a new one is answered 503.
pub const MAX_CONNECTIONS: usize = 1024;
/// TCP connections in flight from one address of another machine.
pub const PER_PEER: usize = 16;
/// TCP connections in flight from one user of this machine (and from
/// those of this machine whose user the kernel could not name, together).
pub const PER_USER: usize = 256;
/// Connections on the Unix socket (its owner's only), besides the TCP ones.
pub const UNIX_CONNECTIONS: usize = 256;
/// How long a connection is read from after its answer before it is closed.
pub const LINGER: Duration = Duration::from_secs(2);
/// Connections lingering at once (any user's, any socket's).
pub const LINGERING: usize = 512;

/// Who is at the other end.
#[derive(Debug, Clone, Copy)]
pub enum Peer {
    /// A TCP connection: the client's address; for a client on this
    /// machine, the user of its socket as the kernel said when the
    /// connection was accepted (why not, else).
    Tcp {
        peer: SocketAddr,
        user: Result<super::peer::Local, &'static str>,
    },
    /// The Unix socket (mode 0600), from serve's own user: SO_PEERCRED
    /// said so when it connected, and anyone else was refused then.
    Unix,
}

impl Peer {
    /// The client as the log line names it: its address and port, or the
    /// Unix socket.
    pub fn for_log(&self) -> String {
        match self {
            Peer::Tcp { peer, .. } => {
                std::net::SocketAddr::new(peer.ip().to_canonical(), peer.port()).to_string()
            }
            Peer::Unix => "unix".to_string(),
        }
    }

    /// The address the request came from, for the machine it came from
    /// and a session's history; the Unix socket is this machine's own.
    pub fn ip(&self) -> IpAddr {
        match self {
            Peer::Tcp { peer, .. } => peer.ip().to_canonical(),
            Peer::Unix => IpAddr::from([127, 0, 0, 1]),
        }
    }
}

/// What a request knows of its connection (a request extension).
#[derive(Clone)]
pub struct ConnInfo {
    pub peer: Peer,
    /// When the connection was accepted (for the log line's milliseconds).
    pub start: Instant,
    /// When the head and a JSON body must have arrived.
    pub deadline: Instant,
    /// Set once the request's body is read whole (or it has none): from
    /// then on the client's end of the connection means it went away.
    pub body_read: Arc<Flag>,
    /// The network helper (slirp4netns, pasta...) holding the client's
    /// socket, when serve answers by user and the client is serve's own.
    pub helper: Option<String>,
}

/// A flag a task can wait for.
#[derive(Default)]
pub struct Flag {
    set: AtomicBool,
    notify: Notify,
}

impl Flag {
    pub fn set(&self) {
        self.set.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }
}

/// Whose place a connection takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Who {
    /// serve's own user on the Unix socket.
    Owner,
    /// A user of this machine over TCP, by the uid of its socket.
    User(u32),
    /// Clients of this machine over TCP whose user is not known.
    Unknown,
    /// Another machine, by its address.
    Address(IpAddr),
}

impl Who {
    /// A TCP client's: a loopback client's user, else its address.
    pub fn of_tcp(peer: &Peer) -> Who {
        match peer {
            Peer::Tcp { peer, user, .. } if peer.ip().to_canonical().is_loopback() => match user {
                Ok(l) => Who::User(l.uid),
                Err(_) => Who::Unknown,
            },
            Peer::Tcp { peer, .. } => Who::Address(peer.ip().to_canonical()),
            Peer::Unix => Who::Owner,
        }
    }
}

/// How many places there are.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// TCP connections in all.
    pub all: usize,
    pub per_user: usize,
    pub per_address: usize,
    /// The owner's Unix socket, apart from the others.
    pub owner: usize,
}

pub const BOUNDS: Bounds = Bounds {
    all: MAX_CONNECTIONS,
    per_user: PER_USER,
    per_address: PER_PEER,
    owner: UNIX_CONNECTIONS,
};

/// Connections in flight: over TCP in all, and per [`Who`]; and those
/// lingering.
#[derive(Default)]
pub struct Peers {
    inner: Mutex<(usize, HashMap<Who, usize>)>,
    lingering: AtomicUsize,
}

/// A connection's place; given back when dropped.
pub struct Slot {
    peers: Arc<Peers>,
    who: Who,
}

/// Why a connection gets no place.
#[derive(Debug, PartialEq)]
pub enum Full {
    /// Every TCP place is taken.
    All,
    /// Every place of that user, address or socket is taken.
    Own,
}

impl Peers {
    pub fn admit(self: &Arc<Self>, who: Who, bounds: &Bounds) -> Result<Slot, Full> {
        let who = match who {
            Who::Address(ip) => Who::Address(ip.to_canonical()),
            w => w,
        };
        let cap = match who {
            Who::Owner => bounds.owner,
            Who::User(_) | Who::Unknown => bounds.per_user,
            Who::Address(_) => bounds.per_address,
        };
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let tcp = who != Who::Owner;
        if tcp && g.0 >= bounds.all {
            return Err(Full::All);
        }
        let n = g.1.entry(who).or_insert(0);
        if *n >= cap {
            return Err(Full::Own);
        }
        *n += 1;
        if tcp {
            g.0 += 1;
        }
        Ok(Slot {
            peers: self.clone(),
            who,
        })
    }

    /// A place to linger in, if one of the `bound` is free.
    pub fn linger_place(self: &Arc<Self>, bound: usize) -> Option<LingerPlace> {
        self.lingering
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < bound).then_some(n + 1)
            })
            .ok()
            .map(|_| LingerPlace(self.clone()))
    }

    #[cfg(test)]
    fn in_flight(&self, who: Who) -> usize {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.1.get(&who).copied().unwrap_or(0)
    }
}

/// A lingering connection's place; given back when dropped.
pub struct LingerPlace(Arc<Peers>);

impl Drop for LingerPlace {
    fn drop(&mut self) {
        self.0.lingering.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut g = self.peers.inner.lock().unwrap_or_else(|e| e.into_inner());
        if self.who != Who::Owner {
            g.0 = g.0.saturating_sub(1);
        }
        if let Some(n) = g.1.get_mut(&self.who) {
            *n -= 1;
            if *n == 0 {
                g.1.remove(&self.who);
            }
        }
    }
}

/// A socket this file can read from and write to after hyper is done
/// with its own descriptor of it.
pub trait Socket: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Whether the client has gone: its end closed, or the connection
    /// failed. Waits while nothing happens; never returns if the client
    /// sends more (that is not a client gone).
    fn gone(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

impl Socket for tokio::net::TcpStream {
    fn gone(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let mut b = [0u8; 1];
            match self.peek(&mut b).await {
                Ok(0) | Err(_) => {}
                Ok(_) => std::future::pending().await,
            }
        })
    }
}

impl Socket for tokio::net::UnixStream {
    fn gone(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            loop {
                if self.readable().await.is_err() {
                    return;
                }
                // Through try_io, so that "nothing yet" clears the
                // readiness and the next readable() waits.
                let peeked = self.try_io(tokio::io::Interest::READABLE, || {
                    use rustix::net::{RecvFlags, recv};
                    let mut b = [0u8; 1];
                    let (n, _) = recv(self, &mut b, RecvFlags::PEEK | RecvFlags::DONTWAIT)?;
                    Ok(n)
                });
                match peeked {
                    Ok(0) => return,
                    Ok(_) => std::future::pending::<()>().await,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return,
                }
            }
        })
    }
}

/// Serve one connection: `hyper_io` is given to hyper, `mine` is the same
/// socket's duplicate.
pub async fn serve<S: Socket>(
    shared: Arc<Shared>,
    hyper_io: S,
    mine: S,
    peer: Peer,
    start: Instant,
    slot: Slot,
) {
    let info_peer = peer.for_log();
    let helper = match peer {
        Peer::Tcp { user: Ok(l), .. } if shared.by_user() && l.uid == shared.uid => {
            tokio::task::spawn_blocking(move || super::peer::network_helper(l.inode, l.uid))
                .await
                .unwrap_or_else(|_| Some("one serve could not look for".into()))
        }
        _ => None,
    };
    let info = ConnInfo {
        peer,
        start,
        deadline: start + READ_TIMEOUT,
        body_read: Arc::new(Flag::default()),
        helper,
    };
    let service = {
        let info = info.clone();
        hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            let shared = shared.clone();
            let info = info.clone();
            if !has_body(&req) {
                info.body_read.set();
            }
            req.extensions_mut().insert(info.clone());
            async move { Ok::<_, std::convert::Infallible>(super::handle(shared, info, req).await) }
        })
    };
    let gone = async {
        info.body_read.wait().await;
        mine.gone().await;
    };
    // Dropping hyper's connection when the client is gone drops the
    // request's future with it.
    let ended = crate::turn::server::connection(hyper_io, service, &LIMITS, start, gone).await;
    let late = ended == crate::turn::server::Ended::HeadLate;
    let mut mine = mine;
    if late {
        let r = Response::error(408, "the request did not arrive in time");
        let _ = tokio::time::timeout(Duration::from_secs(1), mine.write_all(&r.raw())).await;
        super::log(&info_peer, "-", "-", "408", start, "");
    }
    let _ = mine.shutdown().await;
    // Answered and shut: the client's place is free (see the top of this
    // file).
    let peers = slot.peers.clone();
    drop(slot);
    linger(mine, &peers).await;
}

/// Refuse a connection at once, reading nothing: `status` (503 with
/// Retry-After).
pub async fn refuse<S: Socket>(mut s: S, status: u16, why: &str, peers: &Arc<Peers>) {
    let mut r = Response::error(status, why);
    if status == 503 {
        r = r.with_header("retry-after", "1");
    }
    // Small, on a socket that has sent nothing yet: it fits in the send
    // buffer, and the write does not wait.
    let _ = tokio::time::timeout(Duration::from_secs(1), s.write_all(&r.raw())).await;
    let _ = s.shutdown().await;
    linger(s, peers).await;
}

/// With serve's side shut: read and throw away what the client still
/// sends until it closes its side or [`LINGER`] passes; then close. With
/// [`LINGERING`] connections lingering already, close at once.
async fn linger<S: Socket>(mut s: S, peers: &Arc<Peers>) {
    let Some(_place) = peers.linger_place(LINGERING) else {
        return;
    };
    let end = tokio::time::Instant::now() + LINGER;
    // Small, and no allocation of its own: most connections linger only
    // until the client's end closes (one read of nothing). A buffer of
    // 64 KiB each was 12.6 MiB of serve's heap at its peak under 100
    // clients (heaptrack), most of what it held.
    let mut chunk = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(end, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return,
        }
    }
}

/// The request announces a body: a Content-Length other than 0, or a
/// Transfer-Encoding.
fn has_body(req: &hyper::Request<Incoming>) -> bool {
    let h = req.headers();
    h.contains_key(hyper::header::TRANSFER_ENCODING)
        || h.get(hyper::header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_user_and_address_has_its_own_places_and_the_owner_its_socket() {
        let peers = Arc::new(Peers::default());
        let b = Bounds {
            all: 13,
            per_user: 3,
            per_address: 2,
            owner: 4,
        };
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let first = peers.admit(Who::Address(a), &b).unwrap();
        let _second = peers.admit(Who::Address(mapped), &b).unwrap();
        assert_eq!(peers.admit(Who::Address(a), &b).err(), Some(Full::Own));
        assert_eq!(peers.in_flight(Who::Address(a)), 2);
        drop(first);
        let _again = peers.admit(Who::Address(a), &b).unwrap();
        // One user of this machine fills its own places, not another's.
        let other: Vec<Slot> = (0..3)
            .map(|_| peers.admit(Who::User(1001), &b).unwrap())
            .collect();
        assert_eq!(peers.admit(Who::User(1001), &b).err(), Some(Full::Own));
        let _root = peers.admit(Who::User(0), &b).unwrap();
        let _unknown: Vec<Slot> = (0..3)
            .map(|_| peers.admit(Who::Unknown, &b).unwrap())
            .collect();
        assert_eq!(peers.admit(Who::Unknown, &b).err(), Some(Full::Own));
        // 9 over TCP now; 4 more fill every TCP place, whoever's.
        let _more: Vec<Slot> = (0..3)
            .map(|_| peers.admit(Who::User(1002), &b).unwrap())
            .collect();
        let _last = peers
            .admit(Who::Address("10.0.0.2".parse().unwrap()), &b)
            .unwrap();
        assert_eq!(peers.admit(Who::User(0), &b).err(), Some(Full::All));
        // The owner's socket still has all of its own.
        let owner: Vec<Slot> = (0..4)
            .map(|_| peers.admit(Who::Owner, &b).unwrap())
            .collect();
        assert_eq!(peers.admit(Who::Owner, &b).err(), Some(Full::Own));
        drop(owner);
        drop(other);
        assert_eq!(peers.in_flight(Who::User(1001)), 0);
        let _back = peers.admit(Who::User(0), &b).unwrap();
    }

    /// The Unix socket's `gone` (a peek that takes nothing): a client that
    /// sends more is still there, and still is after the peek; one that
    /// closed its end is gone.
    #[test]
    fn a_unix_client_is_gone_only_when_its_end_closes() {
        use std::io::Write;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            ours.set_nonblocking(true).unwrap();
            let ours = tokio::net::UnixStream::from_std(ours).unwrap();
            let mut theirs = theirs;
            theirs.write_all(b"more").unwrap();
            let waited = tokio::time::timeout(Duration::from_millis(200), ours.gone()).await;
            assert!(waited.is_err(), "a client that sends more is not gone");
            let mut b = [0u8; 4];
            ours.try_read(&mut b).unwrap();
            assert_eq!(&b, b"more", "the peek took nothing");
            drop(theirs);
            tokio::time::timeout(Duration::from_secs(5), ours.gone())
                .await
                .expect("a closed end is gone");
        });
    }

    /// At most LINGERING connections linger: past that, one is closed at
    /// once although its client has not closed its end; with a place free,
    /// it is read from until the client closes. The place is given back
    /// either way.
    #[test]
    fn lingering_has_a_bound_of_its_own() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let peers = Arc::new(Peers::default());
            let all: Vec<LingerPlace> = (0..LINGERING)
                .map(|_| peers.linger_place(LINGERING).unwrap())
                .collect();
            assert!(peers.linger_place(LINGERING).is_none());
            let (ours, _theirs) = tokio::net::UnixStream::pair().unwrap();
            tokio::time::timeout(LINGER / 2, linger(ours, &peers))
                .await
                .expect("lingered with no place free");
            drop(all);
            let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
            let lingering = tokio::spawn({
                let peers = peers.clone();
                async move { linger(ours, &peers).await }
            });
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(
                !lingering.is_finished(),
                "closed while the client was there"
            );
            assert_eq!(peers.lingering.load(Ordering::SeqCst), 1);
            drop(theirs);
            tokio::time::timeout(LINGER / 2, lingering)
                .await
                .expect("lingered after the client closed")
                .unwrap();
            assert_eq!(peers.lingering.load(Ordering::SeqCst), 0);
        });
    }
}
