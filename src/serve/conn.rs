//! One connection, from the accept to the close. hyper reads the request
//! and writes the answer (one request per connection: `Connection:
//! close`); around it, this file keeps what hyper does not:
//!
//! - the head's deadline: [`READ_TIMEOUT`] from the accept, answered 408
//!   (hyper's own header timeout closes without an answer). A connection
//!   still sending its head holds nothing but a task;
//! - the bounds: at most [`MAX_CONNECTIONS`] at once, and [`PER_PEER`]
//!   from one address other than loopback; past either, 503 at once;
//! - the lingering close: a connection answered before its body was read
//!   (401, 413...) is read from and what arrives thrown away, until the
//!   client stops or [`LINGER`] passes, and only then closed. Closed at
//!   once, the socket would answer the rest of the body with a reset, and
//!   a client still sending it would lose the answer it has not read yet
//!   (RFC 9112, 9.6);
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
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
/// Connections at once; past this, a new one is answered 503.
pub const MAX_CONNECTIONS: usize = 1024;
/// Connections in flight from one address other than loopback.
pub const PER_PEER: usize = 16;
/// How long a connection is read from after its answer before it is closed.
pub const LINGER: Duration = Duration::from_secs(2);

/// Who is at the other end.
#[derive(Debug, Clone, Copy)]
pub enum Peer {
    /// A TCP connection: the client's address, and ours.
    Tcp { peer: SocketAddr, ours: SocketAddr },
    /// The Unix socket (only its owner can connect: mode 0600).
    Unix,
}

impl Peer {
    /// The client as the log line names it: its address and port, or the
    /// Unix socket.
    pub fn for_log(&self) -> String {
        match self {
            Peer::Tcp { peer, .. } => {
                std::net::SocketAddr::new(super::canonical(peer.ip()), peer.port()).to_string()
            }
            Peer::Unix => "unix".to_string(),
        }
    }

    /// The address the request came from, for the machine it came from
    /// and a session's history; the Unix socket is this machine's own.
    pub fn ip(&self) -> IpAddr {
        match self {
            Peer::Tcp { peer, .. } => super::canonical(peer.ip()),
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

/// Connections in flight, in all and per address other than loopback.
#[derive(Default)]
pub struct Peers {
    inner: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// A connection's place; given back when dropped.
pub struct Slot {
    peers: Arc<Peers>,
    /// None for loopback, which is not counted per address: everything on
    /// this machine reaches it, so a cap there would stop no one and could
    /// stop `serve`'s own users.
    ip: Option<IpAddr>,
}

/// Why a connection gets no place.
#[derive(Debug, PartialEq)]
pub enum Full {
    All,
    Address,
}

impl Peers {
    pub fn admit(self: &Arc<Self>, ip: IpAddr, cap: usize, all: usize) -> Result<Slot, Full> {
        let ip = super::canonical(ip);
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if g.0 >= all {
            return Err(Full::All);
        }
        let counted = (!ip.is_loopback()).then_some(ip);
        if let Some(ip) = counted {
            let n = g.1.entry(ip).or_insert(0);
            if *n >= cap {
                return Err(Full::Address);
            }
            *n += 1;
        }
        g.0 += 1;
        Ok(Slot {
            peers: self.clone(),
            ip: counted,
        })
    }

    #[cfg(test)]
    fn in_flight(&self, ip: IpAddr) -> usize {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.1.get(&super::canonical(ip)).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut g = self.peers.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0 = g.0.saturating_sub(1);
        if let Some(ip) = self.ip
            && let Some(n) = g.1.get_mut(&ip)
        {
            *n -= 1;
            if *n == 0 {
                g.1.remove(&ip);
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
                    let mut b = [0u8; 1];
                    // SAFETY: recv(2) with MSG_PEEK into a live one-byte buffer.
                    let n = unsafe {
                        libc::recv(
                            std::os::fd::AsRawFd::as_raw_fd(self),
                            b.as_mut_ptr().cast(),
                            1,
                            libc::MSG_PEEK | libc::MSG_DONTWAIT,
                        )
                    };
                    if n < 0 {
                        Err(std::io::Error::last_os_error())
                    } else {
                        Ok(n as usize)
                    }
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
    _slot: Slot,
) {
    let info_peer = peer.for_log();
    let info = ConnInfo {
        peer,
        start,
        deadline: start + READ_TIMEOUT,
        body_read: Arc::new(Flag::default()),
    };
    let head_read = Arc::new(AtomicBool::new(false));
    let service = {
        let info = info.clone();
        let head_read = head_read.clone();
        hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            head_read.store(true, Ordering::SeqCst);
            let shared = shared.clone();
            let info = info.clone();
            if !has_body(&req) {
                info.body_read.set();
            }
            req.extensions_mut().insert(info.clone());
            async move { Ok::<_, std::convert::Infallible>(super::handle(shared, info, req).await) }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .keep_alive(false)
        .max_buf_size(MAX_HEAD)
        .header_read_timeout(None);
    let conn = builder.serve_connection(TokioIo::new(hyper_io), service);
    let head_late = async {
        tokio::time::sleep_until(info.deadline.into()).await;
        if head_read.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    };
    let gone = async {
        info.body_read.wait().await;
        mine.gone().await;
    };
    let mut late = false;
    tokio::select! {
        _ = conn => {}
        _ = head_late => late = true,
        // Dropping hyper's connection drops the request's future with it.
        _ = gone => {}
    }
    let mut mine = mine;
    if late {
        let r = Response::error(408, "the request did not arrive in time");
        let _ = tokio::time::timeout(Duration::from_secs(1), mine.write_all(&r.raw())).await;
        super::log(&info_peer, "-", "-", "408", start, "");
    }
    linger(mine).await;
}

/// Refuse a connection at once, reading nothing: 503 with Retry-After.
pub async fn refuse_busy<S: Socket>(mut s: S, why: &str) {
    let r = Response::error(503, why).with_header("retry-after", "1");
    // Small, on a socket that has sent nothing yet: it fits in the send
    // buffer, and the write does not wait.
    let _ = tokio::time::timeout(Duration::from_secs(1), s.write_all(&r.raw())).await;
    linger(s).await;
}

/// Shut our side, then read and throw away what the client still sends
/// until it closes its side or [`LINGER`] passes; then close.
async fn linger<S: Socket>(mut s: S) {
    let _ = s.shutdown().await;
    let end = tokio::time::Instant::now() + LINGER;
    let mut chunk = vec![0u8; 64 * 1024];
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
    fn each_address_has_its_own_places_and_loopback_is_not_counted() {
        let peers = Arc::new(Peers::default());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let b: IpAddr = "fd5e::2".parse().unwrap();
        let first = peers.admit(a, 2, 100).unwrap();
        let _second = peers.admit(mapped, 2, 100).unwrap();
        assert_eq!(peers.admit(a, 2, 100).err(), Some(Full::Address));
        assert_eq!(peers.in_flight(a), 2);
        let _other = peers.admit(b, 2, 100).unwrap();
        let loopback: Vec<Slot> = (0..10)
            .map(|_| peers.admit("127.0.0.1".parse().unwrap(), 2, 100).unwrap())
            .collect();
        assert_eq!(loopback.len(), 10);
        drop(first);
        assert_eq!(peers.in_flight(a), 1);
        let _again = peers.admit(a, 2, 100).unwrap();
        assert_eq!(peers.admit(a, 2, 100).err(), Some(Full::Address));
        // 13 in all now: the 14th of a bound of 13 has no place, whoever.
        assert_eq!(
            peers.admit("127.0.0.1".parse().unwrap(), 2, 13).err(),
            Some(Full::All)
        );
    }
}
