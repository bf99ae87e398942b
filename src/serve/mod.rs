//! `serve`: the operations over HTTP (docs/serve.md, "HTTP API"), for the apps
//! and for other machines' `outbox send`. A thin face over typed
//! operations: `routes` parses a request, calls the
//! operation the CLI calls, on the same state under the same locks, and
//! maps its typed result or error to a response.
//!
//! - `conn`: a connection from its accept to its close, around hyper
//!   (deadlines, bounds, the lingering close, a client gone away);
//! - `body`: reading a request's body, with its deadline or its pace;
//! - `routes`: the operations' routes, each a handler with its
//!   `#[utoipa::path]`;
//! - `api`: the router and the OpenAPI document, both made from the
//!   routes' declarations (`routes`, `page`) by utoipa-axum;
//! - `reply`: what a route answers;
//! - `peer`: whose process a connection from this machine comes from;
//! - `state`: what `GET /v1/harnesses` says, looked at in the background;
//! - `live`: the cages' states, from `podman ps` and `podman events`, for
//!   `GET /v1/sessions` and `GET /v1/sessions/{name}`;
//! - `records`: the records in memory, and `GET /v1/sessions`'s answer
//!   built once per change (the sessions folder watched);
//! - `page`: `GET /`, the status page (HTML, no script);
//! - `form`: `POST /limits/{name}`, the status page's form that sets a
//!   session's token budget.
//!
//! The stack is hyper (HTTP/1.1) and axum (routing) on tokio. The
//! operations stay synchronous: each runs on tokio's blocking threads,
//! at most [`OPERATIONS`] at once, so that requests that wait on podman
//! never hold up those that do not (`GET /v1/harnesses` and the document
//! answer from memory, on the async threads).
//!
//! SIGTERM or SIGINT (flags set by `signal-hook`, and tokio's signal
//! stream to wake the loop) stop the accepting; the requests in flight
//! are finished, and `serve` exits 0. A second signal ends it at once
//! (exit 1). A panic in a request is answered 500; serve goes on.

mod api;
mod body;
mod conn;
mod form;
mod live;
mod page;
mod peer;
mod records;
mod reply;
mod routes;
mod state;

// The parsers the fuzz targets reach (src/fuzzing.rs).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use reply::{for_log, parse_query};
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use routes::check_bodies;

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use hyper::body::Incoming;
use tokio::sync::Semaphore;

use crate::error::{Doing, DropRefused, Error, Result};
use crate::host::Host;
use crate::ops::Context;
use crate::settings::{Env, Settings};
use conn::{ConnInfo, Peer};
use reply::Response;

/// Operations (the routes that read the state or call podman) run at once.
pub const OPERATIONS: usize = 8;
/// Requests waiting for an operation's place; past this, 503 at once.
pub const QUEUE: usize = 256;

/// What every request's context is made from.
pub struct Base {
    pub settings: Arc<Settings>,
    pub env: Arc<Env>,
    pub self_paths: Arc<Vec<PathBuf>>,
}

impl Base {
    /// A request's context: the settings, environment and paths shared by
    /// reference, the host's facts as serve last saw them.
    pub fn context(&self, host: Option<Host>) -> Context {
        let ctx = Context::shared(
            self.settings.clone(),
            self.env.clone(),
            self.self_paths.clone(),
        );
        match host {
            Some(h) => ctx.with_host(h),
            None => ctx,
        }
    }
}

/// What the requests share.
pub struct Shared {
    pub base: Arc<Base>,
    /// `--token-file`'s token: every request must carry it.
    token: Option<Vec<u8>>,
    pub state: Arc<state::State>,
    /// The cages' states as podman's events tell them; None where serve
    /// found no podman when it started.
    pub live: Option<Arc<live::Live>>,
    /// The records in memory, and the listing's answer kept.
    pub records: records::Records,
    /// An upload's time before its pace counts ([`reply::UPLOAD_GRACE`];
    /// `SHROOMS_AGENT_TEST_UPLOAD_GRACE_MS` makes it shorter, for tests).
    pub upload_grace: Duration,
    /// The places of the operations running at once.
    pub operations: Arc<Semaphore>,
    /// Requests waiting for one of those places.
    pub waiting: std::sync::atomic::AtomicUsize,
    /// The user serve runs as: the only one whose processes it answers
    /// over loopback without a token.
    pub uid: u32,
    /// The status page's secret, drawn when serve starts: each of its forms
    /// carries it, and `form` takes no post without it (another site's
    /// page, which cannot read the status page, does not have it).
    pub page_secret: String,
    /// The routes.
    pub router: axum::Router,
}

impl Shared {
    /// Whether a TCP client is answered by its user (no token, and serve
    /// is not root's, which answers TCP only with a token).
    pub fn by_user(&self) -> bool {
        self.token.is_none() && self.uid != 0
    }

    /// A request's own context.
    pub fn context(&self) -> Context {
        self.base.context(self.state.host())
    }

    /// The machine a request came from (see [`machine_of`]).
    pub fn machine_of(&self, ip: IpAddr) -> std::result::Result<String, DropRefused> {
        machine_of(&self.base.settings, ip)
    }
}

/// serve's live view of the cages, once loaded: where there is none (no
/// podman when serve started, or its `podman ps` failed), the routes and the page ask
/// podman through the operations.
fn ready_view(shared: &Shared) -> Option<Arc<live::Live>> {
    shared.live.clone().filter(|l| l.ready())
}

/// The machine a request came from, by its address, never from a header (a
/// header is whatever the sender writes): this machine when it came over
/// loopback, whatever `[machines]` says (an entry whose host is loopback
/// would otherwise be credited with every local program's drop, and any
/// local user could send as that machine); else the `[machines]` entry
/// whose host resolves to it.
pub fn machine_of(s: &Settings, ip: IpAddr) -> std::result::Result<String, DropRefused> {
    // `::ffff:10.0.0.1` is `10.0.0.1`.
    let ip = ip.to_canonical();
    if ip.is_loopback() {
        return Ok(s.machine_name.clone());
    }
    let matches: Vec<&String> = s
        .machines
        .iter()
        .filter(|(_, m)| {
            (m.host.as_str(), m.port)
                .to_socket_addrs()
                .map(|mut addrs| addrs.any(|a| a.ip().to_canonical() == ip))
                .unwrap_or(false)
        })
        .map(|(name, _)| name)
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(DropRefused::NoMachineAt { ip }),
        many => Err(DropRefused::MachinesAt {
            ip,
            machines: many.iter().map(|m| m.to_string()).collect(),
        }),
    }
}

/// `serve [--listen ADDR:PORT] [--token-file FILE]`, until SIGTERM or SIGINT.
pub fn run(ctx: Context, token_file: Option<&Path>) -> Result<()> {
    // `--listen`, read with the config (settings.rs).
    let addr: SocketAddr = ctx.settings.listen;
    let token = token(addr, token_file)?;
    check_port(addr, ctx.settings.agent_port)?;
    let stop = Arc::new(AtomicBool::new(false));
    on_signals(&stop)?;
    let runtime = runtime()?;
    let page_secret = form::draw_secret()?;
    let test_panic = ctx
        .env
        .get("SHROOMS_AGENT_TEST_PANIC_ROUTE")
        .is_some_and(|v| v == "1");
    let upload_grace = ctx
        .env
        .get("SHROOMS_AGENT_TEST_UPLOAD_GRACE_MS")
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(reply::UPLOAD_GRACE);
    let base = Arc::new(Base {
        settings: ctx.settings,
        env: ctx.env,
        self_paths: ctx.self_paths,
    });
    let socket = unix_socket_path(base.settings.runtime_dir.as_deref(), addr.port());
    // What `GET /v1/harnesses` says is looked at once before serve
    // listens: a client that can connect is answered at once.
    let (state, state_thread) = state::State::start(base.clone(), stop.clone());
    // The cages' states, loaded before serve listens too.
    let live = state
        .host()
        .map(|h| live::Live::start(h.podman.clone(), stop.clone()));
    stop_dead_turns(base.clone(), state.clone(), stop.clone());
    rebuild_a_stale_image(base.clone(), state.host());
    let (listener, unix) = match bind(&runtime, addr, socket.as_deref()) {
        Ok(l) => l,
        Err(e) => {
            stop.store(true, Ordering::SeqCst);
            let _ = state_thread.join();
            return Err(e);
        }
    };
    let records =
        records::Records::new(crate::state::session::Store::new(&base.settings.state_dir));
    let shared = Arc::new(Shared {
        base,
        token,
        state,
        live,
        records,
        upload_grace,
        operations: Arc::new(Semaphore::new(OPERATIONS)),
        waiting: Default::default(),
        uid: crate::ops::euid(),
        page_secret,
        router: api::router(test_panic),
    });
    eprintln!("shrooms-agent serve: listening on http://{addr}");
    if let Some(p) = &socket {
        eprintln!(
            "shrooms-agent serve: and on {} (its owner's only)",
            p.display()
        );
    }
    runtime.block_on(accept(shared, listener, unix, stop.clone()));
    // Operations whose clients went away finish too (they cannot be cut
    // short half-way): the runtime waits for them.
    drop(runtime);
    if let Some(p) = &socket {
        let _ = std::fs::remove_file(p);
    }
    stop.store(true, Ordering::SeqCst);
    let _ = state_thread.join();
    eprintln!("shrooms-agent serve: stopped");
    Ok(())
}

/// `--token-file`'s token, which every request must then carry; none is
/// refused where serve would listen beyond loopback.
fn token(addr: SocketAddr, token_file: Option<&Path>) -> Result<Option<Vec<u8>>> {
    match token_file {
        Some(f) => Ok(Some(
            crate::settings::token::read(f)
                .map_err(|e| e.context("--token-file"))?
                .into_bytes(),
        )),
        None if !addr.ip().is_loopback() => {
            Err(Error::listen(addr, crate::error::ListenProblem::NoToken))
        }
        None => Ok(None),
    }
}

/// Every cage is closed to the agent port only (rules.rs): a serve that
/// other machines reach on another port, cages would reach too.
fn check_port(addr: SocketAddr, agent_port: u16) -> Result<()> {
    if !addr.ip().is_loopback() && addr.port() != agent_port {
        return Err(Error::listen(
            addr,
            crate::error::ListenProblem::NotAgentPort { agent_port },
        ));
    }
    Ok(())
}

/// SIGTERM and SIGINT set `stop`.
fn on_signals(stop: &Arc<AtomicBool>) -> Result<()> {
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // The first signal asks for a clean stop; a second one, while
        // requests are still being finished, ends the process at once (1).
        signal_hook::flag::register_conditional_shutdown(signal, 1, stop.clone())
            .and_then(|_| signal_hook::flag::register(signal, stop.clone()))
            .map_err(|e| Error::act(Doing::HandleSignal(signal), &e))?;
    }
    Ok(())
}

/// serve's threads.
fn runtime() -> Result<tokio::runtime::Runtime> {
    // Few threads for blocking work: each holds a stack and an allocator
    // arena of its own, and under 50 clients tokio's default (up to 512)
    // made serve's memory grow with its clients rather than its sessions.
    // As many again as the operations (`OPERATIONS`, which may all wait on
    // a slow podman), so that a connection's peer lookup and the page are
    // never queued behind them.
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(2 * OPERATIONS)
        .thread_name("serve")
        .enable_all()
        .build()
        .map_err(|e| Error::act("starting serve's threads", &e))
}

/// Listen on `addr`, then on the Unix socket at `socket`, if any.
fn bind(
    runtime: &tokio::runtime::Runtime,
    addr: SocketAddr,
    socket: Option<&Path>,
) -> Result<(tokio::net::TcpListener, Option<tokio::net::UnixListener>)> {
    let l = runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .map_err(|e| Error::act(Doing::ListenAt(addr), &e))?;
    let unix = match socket {
        Some(p) => Some(
            runtime
                .block_on(async { listen_unix(p) })
                .map_err(|e| Error::act(Doing::ListenOn(p.to_path_buf()), &e))?,
        ),
        None => None,
    };
    Ok((l, unix))
}

/// How often serve looks for turns that died with their watchers.
const DEAD_TURNS_EVERY: Duration = Duration::from_secs(2);

/// Stop the cages of turns whose process and watcher were both killed
/// (`ops::dead_turn::reap_dead_turn`), every [`DEAD_TURNS_EVERY`], for as long
/// as serve runs: nobody else may look at the session for days. Only the
/// sessions with a turn's marker are looked at (one listing of a folder).
/// The machine's image, ours and stale, is built again when serve starts
/// (docs/images.md, "Images"), in the background: serve listens meanwhile.
fn rebuild_a_stale_image(base: Arc<Base>, host: Option<Host>) {
    let Some(host) = host else { return };
    std::thread::spawn(move || {
        let ctx = base.context(Some(host.clone()));
        match crate::ops::image::rebuild_if_stale(&ctx, &host) {
            Ok(Some(said)) => eprintln!("shrooms-agent serve: {said}"),
            Ok(None) => {}
            Err(e) => eprintln!(
                "shrooms-agent serve: could not look at the machine's image: {}",
                e.message()
            ),
        }
    });
}

fn stop_dead_turns(base: Arc<Base>, state: Arc<state::State>, stop: Arc<AtomicBool>) {
    let looking = std::thread::Builder::new()
        .name("serve-turns".into())
        .spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(DEAD_TURNS_EVERY);
                let Some(host) = state.host() else {
                    continue;
                };
                let ctx = base.context(Some(host));
                for name in ctx.store.turn_markers() {
                    if let Ok(r) = ctx.store.load(&name) {
                        crate::ops::dead_turn::reap_dead_turn(&ctx, &r);
                        crate::face::output::warnings(&ctx.take_warnings());
                    }
                }
            }
        });
    if let Err(e) = looking {
        eprintln!("shrooms-agent serve: no thread to stop the cages of killed turns: {e}");
    }
}

/// `$XDG_RUNTIME_DIR/shrooms-agent/serve-PORT.sock`, when the
/// environment has a runtime folder.
fn unix_socket_path(runtime_dir: Option<&Path>, port: u16) -> Option<PathBuf> {
    Some(
        runtime_dir?
            .join("shrooms-agent")
            .join(format!("serve-{port}.sock")),
    )
}

/// Listen on a Unix socket at `path`, in a folder of mode 0700 and with
/// mode 0600 itself: only its owner (and root) can connect. A socket left
/// by a serve that ended without removing it is replaced; one that
/// answers is another serve's, and refused.
fn listen_unix(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            "another serve listens there",
        ));
    }
    let _ = std::fs::remove_file(path);
    // Made 0600 before it listens: umask for the bind, then chmod.
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
    let l = tokio::net::UnixListener::bind(path);
    rustix::process::umask(old);
    let l = l?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

/// Accept connections until SIGTERM or SIGINT, then wait for those in
/// flight (the server shell's loop; what is done with a connection is
/// serve's own).
async fn accept(
    shared: Arc<Shared>,
    listener: tokio::net::TcpListener,
    unix: Option<tokio::net::UnixListener>,
    stop: Arc<AtomicBool>,
) {
    use crate::turn::server::{Accepted, Listener};
    let peers = Arc::new(conn::Peers::default());
    let mut lookup = peer::Lookup::new();
    let listeners = crate::turn::server::Listeners::new(
        std::iter::once(Listener::Tcp(listener))
            .chain(unix.map(Listener::Unix))
            .collect(),
    );
    let on_conn = move |c: Accepted, start: Instant| -> Option<crate::turn::server::Task> {
        match c {
            Accepted::Tcp(stream, peer) => {
                on_tcp(&shared, &peers, &mut lookup, stream, peer, start)
            }
            Accepted::Unix(stream) => on_unix(&shared, &peers, stream, start),
        }
    };
    // Operations whose clients went away finish too (they cannot be cut
    // short half-way).
    let drain = crate::turn::server::Drain::All;
    crate::turn::server::accept_loop("serve", listeners, stopped(stop), drain, on_conn).await;
}

/// The accepting's end: SIGTERM or SIGINT, or the stop flag set; then the
/// flag is set for the rest of serve.
async fn stopped(stop: Arc<AtomicBool>) {
    let mut signals = Vec::new();
    for kind in [
        tokio::signal::unix::SignalKind::terminate(),
        tokio::signal::unix::SignalKind::interrupt(),
    ] {
        if let Ok(s) = tokio::signal::unix::signal(kind) {
            signals.push(s);
        }
    }
    let (mut term, mut int) = (signals.pop(), signals.pop());
    async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    // Also a flag to look at now and then: a signal that came
    // before tokio's handler was set is seen there.
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = next(&mut term) => break,
            _ = next(&mut int) => break,
            _ = tick.tick() => if stop.load(Ordering::SeqCst) { break },
        }
    }
    stop.store(true, Ordering::SeqCst);
    eprintln!("shrooms-agent serve: stopping: finishing the requests in flight");
}

/// A TCP connection just accepted: its peer's user looked up (over
/// loopback), its place among the connections taken, then served; or
/// refused 503 when its peer's places (or all) are taken.
fn on_tcp(
    shared: &Arc<Shared>,
    peers: &Arc<conn::Peers>,
    lookup: &mut peer::Lookup,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    start: Instant,
) -> Option<crate::turn::server::Task> {
    let ours = stream.local_addr().unwrap_or(peer);
    // Asked at once, while a client that sent its request and
    // closed is still told apart from one that is there.
    let user = if peer.ip().to_canonical().is_loopback() {
        lookup.user(peer, ours)
    } else {
        Err("another machine")
    };
    let peer = Peer::Tcp { peer, user };
    let who = conn::Who::of_tcp(&peer);
    let slot = match peers.admit(who, &conn::BOUNDS) {
        Ok(slot) => slot,
        Err(full) => {
            let why = full_words(full, who);
            log(
                &peer.for_log(),
                "-",
                "-",
                "503",
                start,
                &format!(" ({why})"),
            );
            let peers = peers.clone();
            return Some(Box::pin(async move {
                conn::refuse(stream, 503, &why, &peers).await
            }));
        }
    };
    let dup = duplicate_tcp(&stream)?;
    Some(Box::pin(conn::serve(
        shared.clone(),
        stream,
        dup,
        peer,
        start,
        slot,
    )))
}

/// Pure: what a TCP client refused for want of a place is told.
fn full_words(full: conn::Full, who: conn::Who) -> String {
    match (full, who) {
        (conn::Full::All, _) => format!(
            "serve has {} connections already; try again when they are done",
            conn::MAX_CONNECTIONS
        ),
        (conn::Full::Own, conn::Who::Address(ip)) => format!(
            "{ip} has {} connections to this serve already; try again when \
             they are done",
            conn::PER_PEER
        ),
        (conn::Full::Own, _) => format!(
            "this user has {} connections to this serve already; try again \
             when they are done",
            conn::PER_USER
        ),
    }
}

/// A connection on the Unix socket: served when it comes from serve's own
/// user (the kernel's word, not the client's) and a place is free; else
/// refused, 403 or 503.
fn on_unix(
    shared: &Arc<Shared>,
    peers: &Arc<conn::Peers>,
    stream: tokio::net::UnixStream,
    start: Instant,
) -> Option<crate::turn::server::Task> {
    // SO_PEERCRED: the uid of the process that connected.
    let uid = stream.peer_cred().ok().map(|c| c.uid());
    if uid != Some(shared.uid) {
        let who = uid.map_or("an unknown user".to_string(), |u| format!("uid {u}"));
        let why = format!(
            "this socket answers only serve's own user (uid {}); this connection \
             came from {who}",
            shared.uid
        );
        let said = format!(" (from {who}, not serve's own user)");
        log("unix", "-", "-", "403", start, &said);
        let peers = peers.clone();
        return Some(Box::pin(async move {
            conn::refuse(stream, 403, &why, &peers).await
        }));
    }
    let Ok(slot) = peers.admit(conn::Who::Owner, &conn::BOUNDS) else {
        let said = " (too many connections on the socket)";
        log("unix", "-", "-", "503", start, said);
        let busy = "serve is busy; try again in a moment";
        let peers = peers.clone();
        return Some(Box::pin(async move {
            conn::refuse(stream, 503, busy, &peers).await
        }));
    };
    let dup = duplicate_unix(&stream)?;
    Some(Box::pin(conn::serve(
        shared.clone(),
        stream,
        dup,
        Peer::Unix,
        start,
        slot,
    )))
}

/// A second descriptor of a connection's socket (see `conn`).
fn duplicate_tcp(s: &tokio::net::TcpStream) -> Option<tokio::net::TcpStream> {
    let fd = std::os::fd::AsFd::as_fd(s).try_clone_to_owned().ok()?;
    let std = std::net::TcpStream::from(fd);
    std.set_nonblocking(true).ok()?;
    tokio::net::TcpStream::from_std(std).ok()
}

fn duplicate_unix(s: &tokio::net::UnixStream) -> Option<tokio::net::UnixStream> {
    let fd = std::os::fd::AsFd::as_fd(s).try_clone_to_owned().ok()?;
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(std).ok()
}

/// One request whose head is whole: the checks every route shares (one
/// Host, the peer's user, the token, web pages), then its route; one log
/// line, also when the client went away before the answer.
async fn handle(
    shared: Arc<Shared>,
    info: ConnInfo,
    req: hyper::Request<Incoming>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let method: String = req.method().as_str().chars().take(16).collect();
    let path = reply::for_log(req.uri().path(), req.uri().query());
    let mut line = LogLine {
        peer: info.peer.for_log(),
        method,
        path,
        start: info.start,
        status: None,
        why: String::new(),
    };
    let own_origin = form::takes_own_origin(req.method().as_str(), req.uri().path());
    if let Some(r) = refusal(&shared, &info, req.headers(), own_origin, &mut line.why)
        .or_else(|| api::caged_refusal(req.method().as_str(), req.uri().path(), req.headers()))
    {
        line.status = Some(r.status);
        return r.into_response();
    }
    let mut req = req.map(axum::body::Body::new);
    req.extensions_mut().insert(shared.clone());
    let response = match tower::ServiceExt::oneshot(shared.router.clone(), req).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    line.status = Some(response.status().as_u16());
    response
}

/// Why a request is refused before its route: two Host headers (400);
/// with a token, no token or a wrong one (401); without one, over TCP: a
/// web page (403), anyone when serve runs as root (403), another user's
/// process, a closed or unknown socket, or a container's network helper
/// (403). The Unix socket's client is serve's own user. `own_origin`:
/// the route takes a request from serve's own page (`form`). `why` gets
/// what the log line adds.
fn refusal(
    shared: &Shared,
    info: &ConnInfo,
    headers: &HeaderMap,
    own_origin: bool,
    why: &mut String,
) -> Option<Response> {
    // Two Hosts: the checks below and a proxy in front could read
    // different ones (RFC 9112, 3.2: "a server MUST respond with a 400").
    if headers.get_all(axum::http::header::HOST).iter().count() > 1 {
        return Some(Response::error(
            400,
            "the request has two Host headers; send one",
        ));
    }
    // The Unix socket's client is serve's own user (SO_PEERCRED, checked
    // when it connected): it could read the token file as well.
    if let Peer::Unix = info.peer {
        return None;
    }
    if let Some(token) = &shared.token {
        if !authorized(headers, token) {
            return Some(
                Response::error(
                    401,
                    "this serve needs its token: send Authorization: Bearer <token>",
                )
                .with_header("www-authenticate", "Bearer"),
            );
        }
        return None;
    }
    if let Peer::Tcp { user, .. } = info.peer {
        // A web page is refused first, whoever's browser it is in.
        if let Some(why) = from_a_web_page(headers, own_origin) {
            return Some(Response::error(403, &why));
        }
        if shared.uid == 0 {
            // Root's programs use the Unix socket. Over TCP the user of a
            // client is what the kernel says of its socket at one moment;
            // for root's serve no such moment is worth its power.
            *why = " (serve runs as root: TCP needs its token)".into();
            return Some(Response::error(
                403,
                "this serve runs as root and was started without --token-file: over TCP it \
                 answers no one. Use its Unix socket ($XDG_RUNTIME_DIR/shrooms-agent/serve-PORT.sock), \
                 or start it with --token-file FILE and give its token",
            ));
        }
        let who = match (user, &info.helper) {
            (Ok(l), None) if l.uid == shared.uid => return None,
            (Ok(l), Some(helper)) if l.uid == shared.uid => {
                format!("a container's network helper ({helper})")
            }
            (Ok(l), _) => format!("uid {}", l.uid),
            (Err(e), _) => e.to_string(),
        };
        *why = format!(" (from {who}, not serve's own user)");
        return Some(Response::error(
            403,
            &format!(
                "this serve answers only its own user's programs (uid {}); this request came \
                 from {who}. Start your own serve, or start this one with --token-file FILE and \
                 give its token",
                shared.uid
            ),
        ));
    }
    None
}

/// What the log says of one request, written when it is dropped: at the
/// answer, or when the client went away first.
struct LogLine {
    peer: String,
    method: String,
    path: String,
    start: Instant,
    status: Option<u16>,
    why: String,
}

impl Drop for LogLine {
    fn drop(&mut self) {
        match self.status {
            Some(s) => log(
                &self.peer,
                &self.method,
                &self.path,
                &s.to_string(),
                self.start,
                &self.why,
            ),
            None => log(
                &self.peer,
                &self.method,
                &self.path,
                "-",
                self.start,
                " (the client went away: not carried on)",
            ),
        }
    }
}

fn authorized(headers: &HeaderMap, token: &[u8]) -> bool {
    let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    // The scheme's name is case-insensitive (RFC 9110, 11.1).
    let Some((scheme, given)) = value.split_at_checked(7) else {
        return false;
    };
    scheme.eq_ignore_ascii_case(b"Bearer ") && reply::same_secret(given.trim_ascii(), token)
}

/// Why a request to a serve without a token looks like it came from a web
/// page, which must not drive it: without a token, anything that can reach
/// loopback is trusted, and a browser can be made to reach it by any page
/// (cross-site requests; a form needs no CORS preflight) or by a name that
/// a page's DNS points at 127.0.0.1 (DNS rebinding). Browsers always send
/// `Origin` on a cross-site request and on every POST, and `Host` is the
/// name the page used; curl and programs send no `Origin`, and address
/// loopback by number or as localhost. With a token none of this matters:
/// a page does not have it. The status page and its form (`own_origin`)
/// also take serve's own origin: a browser names it on the form's post,
/// and only serve's own page (no script) is of that origin.
fn from_a_web_page(headers: &HeaderMap, own_origin: bool) -> Option<String> {
    if let Some(origin) = headers.get("origin").map(|v| v.as_bytes())
        && !(own_origin && form::own_origin(headers))
    {
        return Some(format!(
            "serve takes no requests from web pages without a token (this one came from \
             Origin: {}); call it from a program, or start serve with --token-file FILE",
            String::from_utf8_lossy(origin)
                .chars()
                .take(100)
                .collect::<String>()
        ));
    }
    if let Some(site) = headers.get("sec-fetch-site").map(|v| v.as_bytes())
        && !matches!(site, b"none" | b"same-origin")
    {
        return Some(
            "serve takes no requests from web pages without a token (Sec-Fetch-Site says \
             this one is); call it from a program, or start serve with --token-file FILE"
                .into(),
        );
    }
    let host = headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !loopback_host(host) {
        return Some(format!(
            "serve without a token answers requests addressed to an IP address or localhost \
             only (this one was to Host: {}), so that no web page can reach it through a \
             name of its own; use http://127.0.0.1:PORT, or start serve with --token-file FILE",
            host.chars().take(100).collect::<String>()
        ));
    }
    None
}

/// A `Host` value that no web page's DNS can have chosen: an IP address
/// (with or without a port) or `localhost`.
fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6] or [v6]:port
        match rest.split_once(']') {
            Some((v6, tail)) if tail.is_empty() || tail.starts_with(':') => {
                return v6.parse::<std::net::Ipv6Addr>().is_ok();
            }
            _ => return false,
        }
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::Ipv4Addr>().is_ok()
}

/// The time (UTC, RFC 3339, to the millisecond), the client's address,
/// method, path (query names only), status, milliseconds, and why when
/// serve says: no body, no header value.
fn log(peer: &str, method: &str, path: &str, status: &str, start: Instant, why: &str) {
    eprintln!(
        "{}",
        log_line(
            chrono::Utc::now(),
            peer,
            method,
            path,
            status,
            start.elapsed().as_millis(),
            why
        )
    );
}

fn log_line(
    at: chrono::DateTime<chrono::Utc>,
    peer: &str,
    method: &str,
    path: &str,
    status: &str,
    ms: u128,
    why: &str,
) -> String {
    format!(
        "{} {peer} {method} {path} {status} {ms}ms{why}",
        at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_numbers_and_localhost_are_loopback_hosts() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:7387",
            "localhost",
            "LocalHost:7387",
            "[::1]",
            "[::1]:7387",
            "10.1.2.3:80",
            "[fd5e:ca9e:1::2]:7387",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "",
            "attacker.example",
            "attacker.example:7387",
            "localhost.attacker.example",
            "127.0.0.1.nip.io:7387",
            "[::1",
            "[::1]x",
            "[evil]:80",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    /// A web page is refused before any route; serve's own origin only
    /// where the route takes it (the status page and its form), and only
    /// at an address or localhost.
    #[test]
    fn serves_own_origin_passes_for_the_page_alone() {
        let mut h = HeaderMap::new();
        h.insert("host", "127.0.0.1:7387".parse().unwrap());
        h.insert("origin", "http://127.0.0.1:7387".parse().unwrap());
        assert_eq!(from_a_web_page(&h, true), None);
        assert!(from_a_web_page(&h, false).is_some());
        h.insert("sec-fetch-site", "same-origin".parse().unwrap());
        assert_eq!(from_a_web_page(&h, true), None);
        h.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(from_a_web_page(&h, true).is_some());
        h.remove("sec-fetch-site");
        h.insert("origin", "http://attacker.example".parse().unwrap());
        assert!(from_a_web_page(&h, true).is_some());
        h.insert("host", "rebind.attacker.example:7387".parse().unwrap());
        h.insert(
            "origin",
            "http://rebind.attacker.example:7387".parse().unwrap(),
        );
        assert!(from_a_web_page(&h, true).is_some());
    }

    #[test]
    fn a_log_line_has_the_time_and_the_client() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-30T18:05:09.123Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(
            log_line(at, "127.0.0.1:50312", "GET", "/v1/sessions", "200", 4, ""),
            "2026-11-30T18:05:09.123Z 127.0.0.1:50312 GET /v1/sessions 200 4ms"
        );
        let v6 = conn::Peer::Tcp {
            peer: "[::ffff:10.1.2.3]:4000".parse().unwrap(),
            user: Err("another machine"),
        };
        assert_eq!(v6.for_log(), "10.1.2.3:4000");
        assert_eq!(conn::Peer::Unix.for_log(), "unix");
    }

    #[test]
    fn a_drop_over_loopback_is_this_machines_whatever_machines_says() {
        let s = Settings::from_text(
            Some(
                "machine_name = \"here\"\n[machines]\nlocal = \"http://127.0.0.1:7400\"\n\
                 two = \"http://127.0.0.2\"\nfar = \"http://10.1.2.3:7387\"\n",
            ),
            Path::new("/cfg/config.toml"),
            PathBuf::from("/state"),
            PathBuf::from("/home/u"),
            &Env::new(),
        )
        .unwrap();
        for ip in ["127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(
                machine_of(&s, ip.parse().unwrap()),
                Ok("here".into()),
                "{ip}"
            );
        }
        assert_eq!(
            machine_of(&s, "10.1.2.3".parse().unwrap()),
            Ok("far".into())
        );
        assert!(machine_of(&s, "10.9.9.9".parse().unwrap()).is_err());
    }

    #[test]
    fn mapped_addresses_are_plain() {
        let ip: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert_eq!(ip.to_canonical(), "10.1.2.3".parse::<IpAddr>().unwrap());
        let ip: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(ip.to_canonical(), ip);
    }
}
