//! The server shell: how `serve`, the model gateway and the cage's socket
//! serve a hyper service on their listeners until told to stop, written
//! once so that they cannot drift apart:
//!
//! - one accept loop over one or more listeners (TCP or Unix), which, when
//!   accepting fails (out of descriptors, say), waits [`ACCEPT_BACKOFF`]
//!   before it tries again rather than spin on a listener that stays
//!   ready, and says so at most once per [`ERROR_EVERY`];
//! - one task per connection, in one set, so that a stop can wait for the
//!   connections in flight ([`Drain`]);
//! - one head deadline ([`Limits::head`]): a connection must send a
//!   request's head whole within it of its accept, and, kept alive, each
//!   next head within it of when hyper starts reading it; a connection
//!   that does not is closed ([`Ended::HeadLate`]: serve answers it 408
//!   first), so a client that sends nothing, or a byte at a time, holds
//!   nothing but a task for that long;
//! - a graceful stop: the listeners closed, then the connections in flight
//!   finished or cut short as the caller asks.
//!
//! What a face does with a connection (serve's bounds per user, its
//! lingering close; the socket's cap) stays the face's own, in the
//! callback it gives the loop. The gateway and the cage's socket run on a
//! thread of their own for one turn ([`Background`]).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use crate::error::{Doing, Error, Result};

/// How long the loop leaves its listeners alone after accepting failed.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How often, at most, a failure to accept is written on stderr.
pub const ERROR_EVERY: Duration = Duration::from_secs(10);

/// A connection's future, run as a task of its own.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A listener the loop accepts on.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// A connection just accepted.
pub enum Accepted {
    /// With the client's address.
    Tcp(TcpStream, std::net::SocketAddr),
    Unix(UnixStream),
}

impl Accepted {
    /// The connection as one stream, for a face that serves both alike.
    pub fn stream(self) -> Stream {
        match self {
            Accepted::Tcp(s, _) => Stream::Tcp(s),
            Accepted::Unix(s) => Stream::Unix(s),
        }
    }
}

impl Listener {
    /// A listener from the standard library's, made non-blocking here.
    pub fn tcp(l: std::net::TcpListener) -> io::Result<Listener> {
        l.set_nonblocking(true)?;
        TcpListener::from_std(l).map(Listener::Tcp)
    }

    pub fn unix(l: std::os::unix::net::UnixListener) -> io::Result<Listener> {
        l.set_nonblocking(true)?;
        UnixListener::from_std(l).map(Listener::Unix)
    }

    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<Accepted>> {
        match self {
            Listener::Tcp(l) => l
                .poll_accept(cx)
                .map(|r| r.map(|(s, a)| Accepted::Tcp(s, a))),
            Listener::Unix(l) => l.poll_accept(cx).map(|r| r.map(|(s, _)| Accepted::Unix(s))),
        }
    }
}

/// What the loop accepts from (a trait so that a test can make accepting
/// fail).
pub trait Accept: Send {
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Accepted>>;
}

/// Several listeners, taken in turn so that a busy one does not starve
/// the others.
pub struct Listeners {
    all: Vec<Listener>,
    next: usize,
}

impl Listeners {
    pub fn new(all: Vec<Listener>) -> Listeners {
        Listeners { all, next: 0 }
    }
}

impl From<Listener> for Listeners {
    fn from(l: Listener) -> Listeners {
        Listeners::new(vec![l])
    }
}

impl Accept for Listeners {
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Accepted>> {
        let n = self.all.len();
        for i in 0..n {
            let at = (self.next + i) % n;
            if let Poll::Ready(r) = self.all[at].poll_accept(cx) {
                self.next = (at + 1) % n;
                return Poll::Ready(r);
            }
        }
        Poll::Pending
    }
}

/// What happens to the connections in flight once the loop is told to stop.
#[derive(Debug, Clone, Copy)]
pub enum Drain {
    /// They are finished, however long they take (serve: an operation
    /// cannot be cut short half-way).
    All,
    /// They are given this long, then cut short (a turn's servers end
    /// with the turn).
    For(Duration),
}

/// Accept on `listeners` until `stop` resolves. Each connection is given
/// to `on_conn` with the moment it was accepted; the future it returns,
/// if any, runs as a task of its own. `name` is how a failure to accept
/// is told on stderr.
pub async fn accept_loop<A, F>(
    name: &str,
    mut listeners: A,
    stop: impl Future<Output = ()>,
    drain: Drain,
    mut on_conn: F,
) where
    A: Accept,
    F: FnMut(Accepted, Instant) -> Option<Task>,
{
    let mut tasks = tokio::task::JoinSet::new();
    let mut told: Option<Instant> = None;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = std::future::poll_fn(|cx| listeners.poll_accept(cx)) => match accepted {
                Ok(c) => {
                    if let Some(task) = on_conn(c, Instant::now()) {
                        tasks.spawn(task);
                    }
                }
                Err(e) => {
                    if told.is_none_or(|t| t.elapsed() >= ERROR_EVERY) {
                        eprintln!("shrooms-agent: {name}: accepting a connection: {e}");
                        told = Some(Instant::now());
                    }
                    // Out of descriptors, say: the listener stays ready and
                    // fails again at once; leave it a moment.
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    drop(listeners);
    match drain {
        Drain::All => while tasks.join_next().await.is_some() {},
        Drain::For(d) => {
            let _ =
                tokio::time::timeout(d, async { while tasks.join_next().await.is_some() {} }).await;
            tasks.abort_all();
        }
    }
}

/// How a connection is read.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A request's head must arrive whole within this time: the first
    /// from the accept, each next one of a kept-alive connection from when
    /// its reading starts.
    pub head: Duration,
    /// The request line and headers together, at most (hyper's read
    /// buffer; its least is 8 KiB).
    pub max_head: usize,
    /// More than one request per connection.
    pub keep_alive: bool,
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// hyper is done with it (answered, closed by the client, or broken).
    Done,
    /// A head did not arrive in time; nothing was answered.
    HeadLate,
    /// `cut` resolved first.
    Cut,
}

/// Serve one connection with hyper (HTTP/1.1) under `limits`, from
/// `accepted` (when the loop accepted it), until it ends or `cut`
/// resolves. The connection's future is dropped when this returns, and
/// with it the request's.
pub async fn connection<I, S, B>(
    io: I,
    service: S,
    limits: &Limits,
    accepted: Instant,
    cut: impl Future<Output = ()>,
) -> Ended
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<hyper::Request<Incoming>, Response = hyper::Response<B>>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let head_read = Arc::new(AtomicBool::new(false));
    let service = Heads {
        inner: service,
        read: head_read.clone(),
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .keep_alive(limits.keep_alive)
        .max_buf_size(limits.max_head);
    // The first head's deadline counts from the accept (below); hyper's
    // own, which counts from when it starts reading a head, is for the
    // heads after it. It comes later than ours for the first, and is left
    // out where there is no second: the one deadline is ours.
    builder.header_read_timeout(limits.keep_alive.then_some(limits.head));
    let conn = builder.serve_connection(TokioIo::new(io), service);
    let first_head_late = async {
        tokio::time::sleep_until((accepted + limits.head).into()).await;
        if head_read.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        biased;
        _ = first_head_late => Ended::HeadLate,
        r = conn => match r {
            Err(e) if e.is_timeout() => Ended::HeadLate,
            _ => Ended::Done,
        },
        _ = cut => Ended::Cut,
    }
}

/// A service that notes when a head has been read (hyper calls it then).
struct Heads<S> {
    inner: S,
    read: Arc<AtomicBool>,
}

impl<S, R> hyper::service::Service<R> for Heads<S>
where
    S: hyper::service::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, req: R) -> Self::Future {
        self.read.store(true, Ordering::SeqCst);
        self.inner.call(req)
    }
}

/// A TCP or Unix connection, read and written alike.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// A server on a thread of its own with a runtime of its own, for as long
/// as a turn runs: stopped, and its thread joined, when dropped.
pub struct Background {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Run `serve(stop)` on a thread named `name` (two worker threads);
    /// `stop` resolves when this is dropped.
    pub fn start<F, Fut>(name: &str, serve: F) -> Result<Background>
    where
        F: FnOnce(Pin<Box<dyn Future<Output = ()> + Send>>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let doing = Doing::Start(name.to_string());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(name)
            .enable_all()
            .build()
            .map_err(|e| Error::act(doing.clone(), &e))?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let stopped: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
                    let _ = stopped.await;
                });
                runtime.block_on(serve(stopped));
                // What a task still holds (a blocking read) ends with the turn.
                runtime.shutdown_timeout(Duration::from_millis(200));
            })
            .map_err(|e| Error::act(doing, &e))?;
        Ok(Background {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Background {
    /// Serve `service` on the listener `listen` makes (on the new thread,
    /// where there is a runtime), on a thread named `thread`, until
    /// dropped: each connection a task, read under `limits`, at most
    /// `max_connections` at once (those past it are closed at once); the
    /// requests in flight are given 200 ms at the end. The gateway's and
    /// the socket's whole server. `name` says what failed, on stderr.
    pub fn serving<S, B>(
        thread: &str,
        name: &'static str,
        listen: impl FnOnce() -> io::Result<Listener> + Send + 'static,
        limits: Limits,
        max_connections: Option<usize>,
        service: S,
    ) -> Result<Background>
    where
        S: hyper::service::Service<hyper::Request<Incoming>, Response = hyper::Response<B>>
            + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        Background::start(thread, move |stop| async move {
            let listener = match listen() {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("shrooms-agent: {name} could not serve: {e}");
                    return;
                }
            };
            let slots = max_connections.map(|n| Arc::new(tokio::sync::Semaphore::new(n)));
            let drain = Drain::For(Duration::from_millis(200));
            let on_conn = move |c: Accepted, accepted| -> Option<Task> {
                let slot = match &slots {
                    // Past the cap a connection is closed at once.
                    Some(s) => Some(s.clone().try_acquire_owned().ok()?),
                    None => None,
                };
                let service = service.clone();
                Some(Box::pin(async move {
                    let _slot = slot;
                    let never = std::future::pending();
                    connection(c.stream(), service, &limits, accepted, never).await;
                }))
            };
            accept_loop(name, Listeners::from(listener), stop, drain, on_conn).await;
        })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::atomic::AtomicUsize;

    const SHORT: Limits = Limits {
        head: Duration::from_millis(400),
        max_head: 16 * 1024,
        keep_alive: true,
    };

    /// How long after it began a connection that sends `first`, then
    /// `then` a byte every 100 ms, is closed; and what it was answered.
    fn closed_after(
        connect: &dyn Fn() -> Box<dyn ReadWrite>,
        first: &[u8],
        then: &[u8],
    ) -> (Duration, String) {
        let mut c = connect();
        let t = Instant::now();
        c.write_all(first).unwrap();
        for b in then {
            std::thread::sleep(Duration::from_millis(100));
            if c.write_all(&[*b]).is_err() {
                break;
            }
        }
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got);
        (t.elapsed(), String::from_utf8_lossy(&got).into_owned())
    }

    trait ReadWrite: Read + Write {}
    impl<T: Read + Write> ReadWrite for T {}

    /// The head deadline, on a TCP and a Unix listener alike: half a head,
    /// a head a byte at a time, nothing at all, and half of a second head
    /// after a whole one are each cut off within the deadline; a whole one
    /// is answered.
    #[test]
    fn the_head_deadline_holds_on_tcp_and_unix() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let tcp = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = tcp.local_addr().unwrap().port();
        let unix = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let service = hyper::service::service_fn(|_req| async {
            Ok::<_, std::convert::Infallible>(hyper::Response::new("hi".to_string()))
        });
        let servers = [
            Background::serving(
                "shell-test",
                "a test",
                move || Listener::tcp(tcp),
                SHORT,
                None,
                service,
            )
            .unwrap(),
            Background::serving(
                "shell-test",
                "a test",
                move || Listener::unix(unix),
                SHORT,
                None,
                service,
            )
            .unwrap(),
        ];
        let p = path.clone();
        let connects: [Box<dyn Fn() -> Box<dyn ReadWrite>>; 2] = [
            Box::new(move || Box::new(std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())),
            Box::new(move || Box::new(std::os::unix::net::UnixStream::connect(&p).unwrap())),
        ];
        let whole = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        for connect in &connects {
            let (_, got) = closed_after(
                connect.as_ref(),
                b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                b"",
            );
            assert!(
                got.starts_with("HTTP/1.1 200") && got.ends_with("hi"),
                "{got}"
            );
            for (first, then) in [
                (&b"GET / HTTP/1.1\r\nHost"[..], &b""[..]),
                (b"G", b"ET / HTTP/1.1\r\nHost: x\r\n"),
                (b"", b""),
            ] {
                let (took, got) = closed_after(connect.as_ref(), first, then);
                assert!(
                    took >= SHORT.head - Duration::from_millis(50)
                        && took < SHORT.head + Duration::from_millis(300),
                    "{took:?} {first:?}"
                );
                assert_eq!(got, "", "{first:?}");
            }
            let mut second = whole.to_vec();
            second.extend_from_slice(b"GET / HT");
            let (took, got) = closed_after(connect.as_ref(), &second, b"");
            assert!(got.starts_with("HTTP/1.1 200"), "{got}");
            assert!(!got[10..].contains("HTTP/1.1"), "{got}");
            assert!(
                took >= SHORT.head - Duration::from_millis(50)
                    && took < SHORT.head * 2 + Duration::from_millis(300),
                "{took:?}"
            );
        }
        drop(servers);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Accepting that fails at once, again and again, is tried again only
    /// after [`ACCEPT_BACKOFF`], not in a loop that takes a core.
    #[test]
    fn a_failing_accept_does_not_spin() {
        struct Failing(Arc<AtomicUsize>);
        impl Accept for Failing {
            fn poll_accept(&mut self, _: &mut Context<'_>) -> Poll<io::Result<Accepted>> {
                self.0.fetch_add(1, Ordering::SeqCst);
                Poll::Ready(Err(io::Error::from_raw_os_error(24)))
            }
        }
        let tries = Arc::new(AtomicUsize::new(0));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let failing = Failing(tries.clone());
        runtime.block_on(async {
            let stop = tokio::time::sleep(Duration::from_millis(500));
            accept_loop("a test", failing, stop, Drain::All, |_, _| None).await
        });
        let n = tries.load(Ordering::SeqCst);
        // About ten; spinning makes tens of thousands. Loose, for a busy
        // machine.
        assert!((2..=40).contains(&n), "{n} tries in 500 ms");
    }
}
