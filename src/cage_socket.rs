//! The cage's socket: while a turn runs, the process holding it serves HTTP
//! on a Unix socket that the cage sees at `/run/shrooms-agent/proxy.sock`
//! (README, "The cage's socket"). It is how the shrooms tools inside a cage
//! reach agents: the agent port is closed inside every cage (rules.rs), so
//! this socket is the one way out to an agent, and it passes only what the
//! tools need.
//!
//! - `GET /machines`: this machine, then the config's `[machines]`, as
//!   `[{name, addr}]`.
//! - `/peer/{addr}/{path}`: forwarded to that machine's agent API, for the
//!   routes of [`classify`] only; the rest is 403 and never leaves.
//! - A sealed cage gets `GET /machines` and its own task updates only.
//! - The socket names the sender itself: `X-Shrooms-Caged: <session>`, and
//!   the sender in the body ([`rewrite`]); of the cage's own headers only
//!   `Content-Type` and `Accept` pass on, and of the answer's only
//!   `Content-Type` and `Cache-Control` come back.
//!
//! Where it lives: the socket is made in the cage's proxy folder of the
//! state (`cages/<container>/proxy`, mode 0700, the user's), which the cage
//! has mounted read-only at `/run/shrooms-agent`. The cage therefore cannot
//! put a link or a socket of its own there for this process to follow.
//! It is made by this process (the user; root in a rootless cage is the
//! user, and a rootful cage's root is root), mode 0600, at the turn's start
//! and removed at its end.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::settings::Settings;

/// The header that names the caged session a request comes from. Only
/// this socket sets it (README, "The cage's socket": why `serve` may
/// believe it).
pub const CAGED_HEADER: &str = "x-shrooms-caged";
/// The header a drop names its sending session in (`serve`'s drop route).
pub const FROM_SESSION_HEADER: &str = "x-shrooms-from-session";
/// A request's body, at most (16 MiB).
pub const MAX_BODY: u64 = 16 * 1024 * 1024;
/// A drop's body, at most: what a session takes in one file.
pub const MAX_DROP: u64 = crate::ops::files::MAX_FILE;
/// A request's head must arrive within this time.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// A forwarded request, at most (a blocking send may be held ten minutes).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(11 * 60);

/// A machine as `GET /machines` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MachineAddr {
    pub name: String,
    /// What `/peer/{addr}/` takes: the host, with `:port` when the port is
    /// not the agent port.
    pub addr: String,
}

/// A machine the socket forwards to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub name: String,
    pub addr: String,
    /// Its agent API's base URL, without a trailing `/`.
    pub url: String,
    /// Its `serve` token's file, when it has one.
    pub token_file: Option<PathBuf>,
}

fn addr_text(host: &str, port: u16, agent_port: u16) -> String {
    match (port == agent_port, host.contains(':')) {
        (true, _) => host.to_string(),
        (false, true) => format!("[{host}]:{port}"),
        (false, false) => format!("{host}:{port}"),
    }
}

/// This machine's serve first (where it listens; an unspecified address
/// is reached on loopback), then `[machines]` by name. An
/// entry of this machine's own name is not another machine: it gives this
/// machine's serve its token (one started with `--token-file`).
pub fn agents(s: &Settings) -> Vec<Agent> {
    let ip = match s.listen.ip() {
        std::net::IpAddr::V4(v) if v.is_unspecified() => std::net::IpAddr::from([127, 0, 0, 1]),
        std::net::IpAddr::V6(v) if v.is_unspecified() => std::net::IpAddr::from([127, 0, 0, 1]),
        ip => ip,
    };
    let here = Agent {
        name: s.machine_name.clone(),
        addr: addr_text(&ip.to_string(), s.listen.port(), s.agent_port),
        url: format!("http://{}", std::net::SocketAddr::new(ip, s.listen.port())),
        token_file: s
            .machines
            .get(&s.machine_name)
            .and_then(|m| m.token_file.clone()),
    };
    std::iter::once(here)
        .chain(
            s.machines
                .iter()
                .filter(|(name, _)| **name != s.machine_name)
                .map(|(name, m)| Agent {
                    name: name.clone(),
                    addr: addr_text(&m.host, m.port, s.agent_port),
                    url: m.url.clone(),
                    token_file: m.token_file.clone(),
                }),
        )
        .collect()
}

/// What a forwarded request is, for the socket's rewriting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `GET`: the sessions, an agent card.
    Read,
    /// `SendMessage` / `SendStreamingMessage`: the sender is written in.
    Send,
    /// `GetTask` / `AckTask`.
    Rpc,
    /// `POST /v1/tasks/{id}`: this machine only; the session is written in.
    TaskUpdate,
    /// `POST /v1/sessions/{name}/drop`: named by the headers.
    Drop,
}

/// A path segment a route may take as a name or an id: no `.`/`..`, no
/// escapes, nothing a server could read as another path.
fn segment_ok(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.len() <= 200
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'~'))
}

/// Does this route need its JSON-RPC method read from the body?
pub fn is_rpc_route(method: &str, path: &str) -> bool {
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    method == "POST"
        && match segs.as_slice() {
            ["a2a"] => true,
            ["a2a", name] => segment_ok(name),
            _ => false,
        }
}

/// The routes a cage may reach (README, "The cage's socket", as the agent API of the
/// system it describes has them), or None: refused. `rpc` is the JSON-RPC
/// method of a `POST /a2a` body.
pub fn classify(method: &str, path: &str, rpc: Option<&str>) -> Option<Kind> {
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    if !path.starts_with('/') || segs.iter().any(|s| !segment_ok(s)) {
        return None;
    }
    match (method, segs.as_slice()) {
        ("GET", ["v1", "sessions"])
        | ("GET", [".well-known", "agent-card.json"])
        | ("GET", ["a2a", _, ".well-known", "agent-card.json"]) => Some(Kind::Read),
        ("POST", ["a2a"]) | ("POST", ["a2a", _]) => match rpc {
            Some("SendMessage" | "SendStreamingMessage") => Some(Kind::Send),
            Some("GetTask" | "AckTask") => Some(Kind::Rpc),
            _ => None,
        },
        ("POST", ["v1", "tasks", _]) => Some(Kind::TaskUpdate),
        ("POST", ["v1", "sessions", _, "drop"]) => Some(Kind::Drop),
        _ => None,
    }
}

/// Where a cage's request goes, or why it does not (403).
pub fn decide<'a>(
    sealed: bool,
    method: &str,
    path: &str,
    rpc: Option<&str>,
    addr: &str,
    agents: &'a [Agent],
) -> std::result::Result<(Kind, &'a Agent), String> {
    let kind = classify(method, path, rpc);
    let what = match rpc {
        Some(m) => format!("{method} {path} ({m})"),
        None => format!("{method} {path}"),
    };
    if sealed && kind != Some(Kind::TaskUpdate) {
        return Err(format!(
            "a sealed cage asks nothing of any agent: its socket passes only GET /machines and \
             its own task updates, not {what}"
        ));
    }
    let kind = kind.ok_or_else(|| {
        format!(
            "the cage's socket does not pass {what}: only the machines' sessions, agent cards, \
             SendMessage, SendStreamingMessage, GetTask and AckTask, task updates and drops"
        )
    })?;
    let agent = agents.iter().find(|a| a.addr == addr).ok_or_else(|| {
        format!("{addr:?} is no machine of GET /machines: the socket forwards only to those")
    })?;
    if kind == Kind::TaskUpdate && !std::ptr::eq(agent, &agents[0]) {
        return Err("a cage updates only its own session's tasks, on its own machine".to_string());
    }
    Ok((kind, agent))
}

/// Write the sender into a body the socket forwards: `shrooms/from` in a
/// message's metadata on a send, `session` on a task update; other bodies
/// pass as they are.
pub fn rewrite(
    kind: Kind,
    body: Bytes,
    machine: &str,
    session: &str,
) -> std::result::Result<Bytes, String> {
    let mut v: Value = match kind {
        Kind::Send | Kind::TaskUpdate => {
            serde_json::from_slice(&body).map_err(|e| format!("the body is not JSON: {e}"))?
        }
        _ => return Ok(body),
    };
    match kind {
        Kind::Send => {
            let message = v
                .get_mut("params")
                .and_then(|p| p.get_mut("message"))
                .and_then(Value::as_object_mut)
                .ok_or("a send needs params.message, an object")?;
            let meta = message
                .entry("metadata")
                .or_insert_with(|| Value::Object(Default::default()));
            if !meta.is_object() {
                *meta = Value::Object(Default::default());
            }
            meta.as_object_mut().expect("an object").insert(
                "shrooms/from".into(),
                Value::String(format!("{machine}/{session}")),
            );
        }
        _ => {
            v.as_object_mut()
                .ok_or("a task update is a JSON object")?
                .insert("session".into(), Value::String(session.into()));
        }
    }
    Ok(Bytes::from(v.to_string()))
}

/// The JSON-RPC method of a body, if it is a JSON-RPC request.
pub fn rpc_method(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    v.get("method")?.as_str().map(str::to_string)
}

/// What the socket serves for.
pub struct Config {
    pub session: String,
    pub sealed: bool,
    pub machine: String,
    pub agents: Vec<Agent>,
}

struct State {
    config: Config,
    client: reqwest::Client,
}

/// A socket being served: served until dropped (the turn's end), then
/// removed.
pub struct Socket {
    path: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Serve a session's socket in its cage's proxy folder for one turn.
pub fn open(ctx: &crate::ops::Context, record: &crate::session::Record) -> Result<Socket> {
    let cage = crate::ops::cage_of(record)?;
    let dir = ctx.store.proxy_dir(&cage.container);
    crate::session::make_private_dir(&dir)?;
    start(
        &dir.join("proxy.sock"),
        Config {
            session: record.name.clone(),
            sealed: cage.sealed.is_some(),
            machine: ctx.settings.machine_name.clone(),
            agents: agents(&ctx.settings),
        },
    )
}

/// Serve `config` on a Unix socket at `path` on a thread of its own.
pub fn start(path: &Path, config: Config) -> Result<Socket> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |why: String| {
        Error::failed(format!(
            "serving the cage's socket at {}: {why}",
            path.display()
        ))
    };
    // One left by a turn that was killed: this turn holds the session's
    // lock, so no one else serves it. remove_file takes a link itself,
    // never what it points to.
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e.to_string())),
    }
    let listener = std::os::unix::net::UnixListener::bind(path).map_err(|e| fail(e.to_string()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| fail(e.to_string()))?;
    give_to_the_cages_root(path).map_err(|e| fail(e.to_string()))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| fail(e.to_string()))?;
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(FORWARD_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        // The agents are reached directly, never through a proxy the
        // environment names.
        .no_proxy()
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("shrooms-cage-socket")
        .enable_all()
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let state = Arc::new(State { config, client });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("shrooms-cage-socket".into())
        .spawn(move || {
            runtime.block_on(serve(listener, state, stopped));
            runtime.shutdown_timeout(Duration::from_millis(200));
        })
        .map_err(|e| fail(e.to_string()))?;
    Ok(Socket {
        path: path.to_path_buf(),
        stop: Some(stop),
        thread: Some(thread),
    })
}

/// As root, a cage's proxy folder belongs to the cage's root once the cage
/// has started (podman gives it at each start: `argv::userns`), and root in
/// the cage is no one to a socket of the machine's root: the socket goes to
/// the folder's owner, so that root in the cage connects. The folder (0700,
/// read-only inside) still keeps every other user out.
fn give_to_the_cages_root(socket: &Path) -> std::io::Result<()> {
    let Some(dir) = socket.parent() else {
        return Ok(());
    };
    if let Some((uid, gid)) = crate::userns::cage_owner_of(dir)? {
        std::os::unix::fs::lchown(socket, Some(uid), Some(gid))?;
    }
    Ok(())
}

impl Drop for Socket {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn serve(
    listener: std::os::unix::net::UnixListener,
    state: Arc<State>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("shrooms-agent: the cage's socket could not serve: {e}");
            return;
        }
    };
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return,
            a = listener.accept() => match a {
                Ok((s, _)) => s,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

type Reply = Response<reqwest::Body>;

fn reply(status: u16, body: String) -> Reply {
    let mut r = Response::new(reqwest::Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn error(status: u16, message: &str) -> Reply {
    reply(status, serde_json::json!({ "error": message }).to_string())
}

/// `/peer/{addr}/{path}` split; the address percent-decoded.
fn peer_target(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/peer/")?;
    let (addr, tail) = rest.split_once('/')?;
    let addr = percent_encoding::percent_decode_str(addr)
        .decode_utf8()
        .ok()?
        .into_owned();
    Some((addr, format!("/{tail}")))
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> std::result::Result<Reply, Infallible> {
    Ok(answer(&state, req).await)
}

async fn answer(state: &State, req: Request<Incoming>) -> Reply {
    let method = req.method().as_str().to_string();
    let full = req.uri().path().to_string();
    if full == "/machines" {
        if method != "GET" {
            return error(403, "the cage's socket answers GET /machines only");
        }
        let list: Vec<MachineAddr> = state
            .config
            .agents
            .iter()
            .map(|a| MachineAddr {
                name: a.name.clone(),
                addr: a.addr.clone(),
            })
            .collect();
        return reply(200, serde_json::to_string(&list).unwrap_or_default());
    }
    let Some((addr, path)) = peer_target(&full) else {
        return error(
            403,
            &format!(
                "the cage's socket does not pass {method} {full}: it answers GET /machines and \
                 forwards /peer/ADDR/PATH for the shrooms tools' routes only"
            ),
        );
    };
    let query = req.uri().query().map(str::to_string);
    let (parts, incoming) = req.into_parts();
    // A body is read before deciding only where its JSON-RPC method or its
    // sender is needed; a drop is streamed.
    let looks_like_drop = classify(&method, &path, None) == Some(Kind::Drop);
    if !looks_like_drop && method != "GET" && method != "HEAD" {
        let body = match Limited::new(incoming, MAX_BODY as usize).collect().await {
            Ok(b) => Some(b.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return error(413, "the body is over 16 MiB, what the cage's socket takes");
            }
            Err(e) => return error(400, &format!("reading the body: {e}")),
        };
        return forward_buffered(state, &method, &path, query, &addr, &parts.headers, body).await;
    }
    let (kind, agent) = match decide(
        state.config.sealed,
        &method,
        &path,
        None,
        &addr,
        &state.config.agents,
    ) {
        Ok(d) => d,
        Err(why) => return error(403, &why),
    };
    let mut headers = pass_headers(&parts.headers);
    let body = if kind == Kind::Drop {
        let length = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let Some(length) = length else {
            return error(411, "a drop needs Content-Length");
        };
        if length > MAX_DROP {
            return error(
                413,
                "the file is over 100 MiB, what the cage's socket passes in a drop",
            );
        }
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        Some(reqwest::Body::wrap(Limited::new(incoming, length as usize)))
    } else {
        None
    };
    forward(state, kind, agent, &method, &path, query, headers, body).await
}

#[allow(clippy::too_many_arguments)]
async fn forward_buffered(
    state: &State,
    method: &str,
    path: &str,
    query: Option<String>,
    addr: &str,
    incoming: &HeaderMap,
    body: Option<Bytes>,
) -> Reply {
    let body = body.unwrap_or_default();
    let rpc = is_rpc_route(method, path)
        .then(|| rpc_method(&body))
        .flatten();
    let (kind, agent) = match decide(
        state.config.sealed,
        method,
        path,
        rpc.as_deref(),
        addr,
        &state.config.agents,
    ) {
        Ok(d) => d,
        Err(why) => return error(403, &why),
    };
    let body = match rewrite(kind, body, &state.config.machine, &state.config.session) {
        Ok(b) => b,
        Err(why) => return error(400, &why),
    };
    let headers = pass_headers(incoming);
    forward(
        state,
        kind,
        agent,
        method,
        path,
        query,
        headers,
        Some(reqwest::Body::from(body)),
    )
    .await
}

/// Of the cage's headers, `Content-Type` and `Accept` only.
pub fn pass_headers(incoming: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in [header::CONTENT_TYPE, header::ACCEPT] {
        if let Some(v) = incoming.get(&name) {
            out.insert(name, v.clone());
        }
    }
    out
}

/// Of the answer's headers, `Content-Type` and `Cache-Control` only.
pub fn pass_back(incoming: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in [header::CONTENT_TYPE, header::CACHE_CONTROL] {
        if let Some(v) = incoming.get(&name) {
            out.insert(name, v.clone());
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
async fn forward(
    state: &State,
    kind: Kind,
    agent: &Agent,
    method: &str,
    path: &str,
    query: Option<String>,
    mut headers: HeaderMap,
    body: Option<reqwest::Body>,
) -> Reply {
    let session = &state.config.session;
    let Ok(caged) = HeaderValue::from_str(session) else {
        return error(500, "the session's name is not a header value");
    };
    headers.insert(CAGED_HEADER, caged.clone());
    if kind == Kind::Drop {
        headers.insert(FROM_SESSION_HEADER, caged);
    }
    if let Some(f) = &agent.token_file {
        let token = match crate::token::read(f) {
            Ok(t) => t,
            Err(e) => {
                return error(
                    502,
                    &format!("the token file of machine {}: {}", agent.name, e.message),
                );
            }
        };
        match HeaderValue::from_str(&format!("Bearer {token}")) {
            Ok(mut v) => {
                v.set_sensitive(true);
                headers.insert(header::AUTHORIZATION, v);
            }
            Err(_) => return error(502, "the machine's token is not a header value"),
        }
    }
    let url = match query {
        Some(q) => format!("{}{path}?{q}", agent.url),
        None => format!("{}{path}", agent.url),
    };
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return error(400, "a bad method");
    };
    let mut request = state.client.request(method, &url).headers(headers);
    if let Some(b) = body {
        request = request.body(b);
    }
    match request.send().await {
        Ok(r) => {
            // Streamed as it comes: status, Content-Type and Cache-Control.
            let (mut parts, body) = Response::<reqwest::Body>::from(r).into_parts();
            let kept = pass_back(&parts.headers);
            parts.headers = kept;
            Response::from_parts(parts, body)
        }
        Err(e) => error(
            502,
            &format!(
                "machine {} ({}) could not be reached: {e}",
                agent.name, agent.url
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agents_ab() -> Vec<Agent> {
        vec![
            Agent {
                name: "alpha".into(),
                addr: "127.0.0.1".into(),
                url: "http://127.0.0.1:7387".into(),
                token_file: None,
            },
            Agent {
                name: "beta".into(),
                addr: "127.0.0.1:9000".into(),
                url: "http://127.0.0.1:9000".into(),
                token_file: None,
            },
        ]
    }

    #[test]
    fn the_routes_that_pass() {
        let ok = [
            ("GET", "/v1/sessions", None, Kind::Read),
            ("GET", "/.well-known/agent-card.json", None, Kind::Read),
            (
                "GET",
                "/a2a/web/.well-known/agent-card.json",
                None,
                Kind::Read,
            ),
            ("POST", "/a2a", Some("SendMessage"), Kind::Send),
            ("POST", "/a2a/web", Some("SendStreamingMessage"), Kind::Send),
            ("POST", "/a2a/web", Some("GetTask"), Kind::Rpc),
            ("POST", "/a2a", Some("AckTask"), Kind::Rpc),
            ("POST", "/v1/tasks/t-1", None, Kind::TaskUpdate),
            ("POST", "/v1/sessions/web/drop", None, Kind::Drop),
        ];
        for (m, p, rpc, kind) in ok {
            assert_eq!(classify(m, p, rpc), Some(kind), "{m} {p} {rpc:?}");
        }
    }

    #[test]
    fn the_routes_that_do_not() {
        let refused = [
            ("POST", "/v1/sessions", None),
            ("DELETE", "/v1/sessions/web", None),
            ("GET", "/v1/sessions/web", None),
            ("POST", "/v1/sessions/web/cage", None),
            ("POST", "/v1/sessions/web/cage/limits", None),
            ("POST", "/v1/sessions/web/outbox/send", None),
            ("POST", "/v1/sessions/web/accept-caged", None),
            ("POST", "/v1/images/build", None),
            ("POST", "/v1/tasks/t-1/cancel", None),
            ("POST", "/v1/tasks/t-1/ack", None),
            ("GET", "/v1/tasks/t-1", None),
            ("POST", "/a2a", Some("CancelTask")),
            ("POST", "/a2a", None),
            ("POST", "/a2a/web/x", Some("SendMessage")),
            ("GET", "/a2a", Some("SendMessage")),
            ("PUT", "/a2a", Some("SendMessage")),
            ("POST", "/v1/sessions/../sessions/web/drop", None),
            ("POST", "/v1/sessions/web%2fx/drop", None),
            ("POST", "/v1/sessions//drop", None),
            ("GET", "/v1/sessions/", None),
            ("GET", "/v1/openapi.json", None),
            ("POST", "v1/tasks/t", None),
        ];
        for (m, p, rpc) in refused {
            assert_eq!(classify(m, p, rpc), None, "{m} {p} {rpc:?}");
        }
    }

    #[test]
    fn where_it_goes() {
        let a = agents_ab();
        let (k, to) = decide(false, "GET", "/v1/sessions", None, "127.0.0.1:9000", &a).unwrap();
        assert_eq!((k, to.name.as_str()), (Kind::Read, "beta"));
        // Task updates: its own machine only.
        assert!(decide(false, "POST", "/v1/tasks/t", None, "127.0.0.1", &a).is_ok());
        let e = decide(false, "POST", "/v1/tasks/t", None, "127.0.0.1:9000", &a).unwrap_err();
        assert!(e.contains("its own machine"), "{e}");
        // No such machine.
        let e = decide(false, "GET", "/v1/sessions", None, "10.9.9.9", &a).unwrap_err();
        assert!(e.contains("no machine"), "{e}");
        // Sealed: the task update alone.
        assert!(decide(true, "POST", "/v1/tasks/t", None, "127.0.0.1", &a).is_ok());
        for (m, p, rpc) in [
            ("GET", "/v1/sessions", None),
            ("POST", "/a2a", Some("SendMessage")),
            ("POST", "/v1/sessions/web/drop", None),
        ] {
            let e = decide(true, m, p, rpc, "127.0.0.1", &a).unwrap_err();
            assert!(e.contains("sealed"), "{e}");
        }
    }

    fn rw(kind: Kind, body: &str) -> std::result::Result<String, String> {
        rewrite(kind, Bytes::from(body.to_string()), "alpha", "web")
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
    }

    #[test]
    fn the_sender_is_written_in() {
        let golden = [
            (
                Kind::Send,
                r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"user","parts":[]}}}"#,
                r#"{"id":1,"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"metadata":{"shrooms/from":"alpha/web"},"parts":[],"role":"user"}}}"#,
            ),
            // A forged sender is replaced; other metadata stays.
            (
                Kind::Send,
                r#"{"method":"SendMessage","params":{"message":{"metadata":{"shrooms/from":"beta/boss","k":1}}}}"#,
                r#"{"method":"SendMessage","params":{"message":{"metadata":{"k":1,"shrooms/from":"alpha/web"}}}}"#,
            ),
            // Metadata that is not an object is replaced by one.
            (
                Kind::Send,
                r#"{"method":"SendMessage","params":{"message":{"metadata":"x"}}}"#,
                r#"{"method":"SendMessage","params":{"message":{"metadata":{"shrooms/from":"alpha/web"}}}}"#,
            ),
            (
                Kind::TaskUpdate,
                r#"{"state":"completed","session":"other"}"#,
                r#"{"session":"web","state":"completed"}"#,
            ),
            (Kind::TaskUpdate, r#"{}"#, r#"{"session":"web"}"#),
            // The rest passes untouched, byte for byte.
            (
                Kind::Rpc,
                r#"{"method":"GetTask",  "params":{}}"#,
                r#"{"method":"GetTask",  "params":{}}"#,
            ),
        ];
        for (kind, input, want) in golden {
            assert_eq!(rw(kind, input).unwrap(), want, "{input}");
        }
        for (kind, input) in [
            (Kind::Send, r#"{"method":"SendMessage","params":{}}"#),
            (Kind::Send, "not json"),
            (Kind::TaskUpdate, "[1]"),
            (Kind::TaskUpdate, ""),
        ] {
            assert!(rw(kind, input).is_err(), "{input}");
        }
    }

    #[test]
    fn only_content_type_and_accept_pass() {
        let mut h = HeaderMap::new();
        for (n, v) in [
            ("content-type", "application/json"),
            ("accept", "text/event-stream"),
            ("authorization", "Bearer forged"),
            ("x-shrooms-caged", "boss"),
            ("x-shrooms-from-session", "boss"),
            ("cookie", "a=b"),
            ("host", "evil"),
        ] {
            h.insert(
                hyper::header::HeaderName::from_static(n),
                HeaderValue::from_static(v),
            );
        }
        let out = pass_headers(&h);
        let mut names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(names, ["accept", "content-type"]);
    }

    #[test]
    fn peer_paths() {
        assert_eq!(
            peer_target("/peer/127.0.0.1:9000/v1/sessions"),
            Some(("127.0.0.1:9000".into(), "/v1/sessions".into()))
        );
        assert_eq!(
            peer_target("/peer/%5Bfd00%3A%3A1%5D:9000/a2a"),
            Some(("[fd00::1]:9000".into(), "/a2a".into()))
        );
        assert_eq!(peer_target("/peer/127.0.0.1"), None);
        assert_eq!(peer_target("/v1/sessions"), None);
    }

    /// The socket served for real: its mode, `GET /machines`, the bounds
    /// a drop is held to before anything is forwarded, a head that does not
    /// arrive in time, and the socket gone with the turn.
    #[test]
    fn a_socket_served() {
        use std::io::{Read, Write};
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::net::UnixStream;
        let dir = std::env::temp_dir().join(format!("cage-socket-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("proxy.sock");
        // One left behind is replaced.
        std::fs::write(&path, "stale").unwrap();
        let socket = start(
            &path,
            Config {
                session: "web".into(),
                sealed: false,
                machine: "alpha".into(),
                agents: agents_ab(),
            },
        )
        .unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let ask = |req: &str| {
            let mut c = UnixStream::connect(&path).unwrap();
            c.write_all(req.as_bytes()).unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).unwrap();
            s
        };
        let r = ask("GET /machines HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(
            r.ends_with(
                r#"[{"name":"alpha","addr":"127.0.0.1"},{"name":"beta","addr":"127.0.0.1:9000"}]"#
            ),
            "{r}"
        );
        let drop = "POST /peer/127.0.0.1/v1/sessions/inbox/drop?name=f HTTP/1.1\r\nHost: x\r\n";
        let r = ask(&format!(
            "{drop}Content-Length: {}\r\nConnection: close\r\n\r\n",
            MAX_DROP + 1
        ));
        assert!(r.starts_with("HTTP/1.1 413"), "{r}");
        let r = ask(&format!(
            "{drop}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n"
        ));
        assert!(r.starts_with("HTTP/1.1 411"), "{r}");
        let r = ask(
            "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        );
        assert!(r.starts_with("HTTP/1.1 403"), "{r}");
        // Half a head: the connection is closed after HEAD_TIMEOUT.
        let mut c = UnixStream::connect(&path).unwrap();
        c.write_all(b"GET /machines HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let t = std::time::Instant::now();
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
        let waited = t.elapsed();
        assert!(
            waited >= HEAD_TIMEOUT - Duration::from_secs(1) && waited < HEAD_TIMEOUT * 2,
            "{waited:?}"
        );
        assert!(!String::from_utf8_lossy(&rest).contains("200 OK"));
        std::mem::drop(socket);
        assert!(!path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_machines_from_the_settings() {
        let s = crate::settings::Settings::from_text(
            Some(
                "machine_name = \"alpha\"\nagent_port = 7387\n[machines]\n\
             beta = \"http://10.0.0.2:7387\"\n\
             gamma = { url = \"http://gamma.mesh:9000\", token_file = \"/t/gamma\" }\n\
             alpha = { url = \"http://127.0.0.1:7387\", token_file = \"/t/alpha\" }\n",
            ),
            Path::new("/cfg/config.toml"),
            PathBuf::from("/state"),
            PathBuf::from("/home/u"),
            &crate::settings::Env::new(),
        )
        .unwrap();
        let got: Vec<(String, String, String, Option<PathBuf>)> = agents(&s)
            .into_iter()
            .map(|a| (a.name, a.addr, a.url, a.token_file))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "alpha".into(),
                    "127.0.0.1".into(),
                    "http://127.0.0.1:7387".into(),
                    Some(PathBuf::from("/t/alpha"))
                ),
                (
                    "beta".into(),
                    "10.0.0.2".into(),
                    "http://10.0.0.2:7387".into(),
                    None
                ),
                (
                    "gamma".into(),
                    "gamma.mesh:9000".into(),
                    "http://gamma.mesh:9000".into(),
                    Some(PathBuf::from("/t/gamma"))
                ),
            ]
        );
    }

    #[test]
    fn addresses_as_listed() {
        assert_eq!(addr_text("10.0.0.2", 7387, 7387), "10.0.0.2");
        assert_eq!(addr_text("gamma.mesh", 9000, 7387), "gamma.mesh:9000");
        assert_eq!(addr_text("fd00::1", 9000, 7387), "[fd00::1]:9000");
    }
}
