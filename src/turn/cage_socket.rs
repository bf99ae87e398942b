//! The cage's socket: while a turn runs, the process holding it serves HTTP
//! on a Unix socket that the cage sees at `/run/shrooms-agent/proxy.sock`
//! (docs/cages.md, "The cage's socket"). It is how the shrooms tools inside a cage
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

use crate::error::{Doing, Error, Result};
use crate::settings::Settings;

/// The header that names the caged session a request comes from. Only
/// this socket sets it (docs/cages.md, "The cage's socket": why `serve` may
/// believe it).
pub const CAGED_HEADER: &str = "x-shrooms-caged";
/// The header a drop names its sending session in (`serve`'s drop route).
pub const FROM_SESSION_HEADER: &str = "x-shrooms-from-session";
/// A request's body that is read before it is forwarded (an A2A call, a
/// task update), at most: a cage holds at most this much of the turn's
/// memory per connection. Files go by drop, streamed.
pub const MAX_BODY: u64 = 1024 * 1024;
/// The JSON values in such a body, at most (each costs more memory parsed
/// than written).
pub const MAX_JSON_VALUES: usize = 50_000;
/// Connections served at once, at most; those past it are closed at once.
pub const MAX_CONNECTIONS: usize = 32;
/// A request head's bytes, at most (hyper's read buffer; its least is 8 KiB).
const MAX_HEAD: usize = 64 * 1024;
/// A body that is read before it is forwarded must arrive within this time.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// A drop's body, at most: what a session takes in one file.
pub const MAX_DROP: u64 = crate::state::session::MAX_FILE;
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

/// A task id as a path segment holds it, percent-decoded once: the apps
/// name a task `SESSION:MESSAGE-ID`, so `:` is one of its characters (and
/// `@ + = ,`, which a path takes as they are), besides a name's. Nothing
/// that a server could read as another path or a second escape: no `/`, no
/// `.` or `..` alone, no `%` left after decoding, no control or other
/// character. None: not a task id.
pub fn task_id(segment: &str) -> Option<String> {
    let id = percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .ok()?;
    let ok = !id.is_empty()
        && id != "."
        && id != ".."
        && id.len() <= 200
        && id.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'_' | b'-' | b'.' | b'~' | b':' | b'@' | b'+' | b'=' | b','
                )
        });
    ok.then(|| id.into_owned())
}

/// The path a request is forwarded to: a task update's id as it was
/// decoded (its characters need no escape in a path), the rest as it came.
pub(crate) fn forwarded_path(kind: Kind, path: &str) -> String {
    if kind == Kind::TaskUpdate
        && let Some(id) = path.strip_prefix("/v1/tasks/").and_then(task_id)
    {
        return format!("/v1/tasks/{id}");
    }
    path.to_string()
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

/// The routes a cage may reach (docs/cages.md, "The cage's socket", as the agent API of the
/// system it describes has them), or None: refused. `rpc` is the JSON-RPC
/// method of a `POST /a2a` body.
pub fn classify(method: &str, path: &str, rpc: Option<&str>) -> Option<Kind> {
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    if !path.starts_with('/') {
        return None;
    }
    // A task update's id is a task id ([`task_id`]); every other segment
    // a plain name.
    if let ("POST", ["v1", "tasks", id]) = (method, segs.as_slice()) {
        return task_id(id).map(|_| Kind::TaskUpdate);
    }
    if segs.iter().any(|s| !segment_ok(s)) {
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
/// message's metadata on a send, `session` on a task update. `v` is the
/// body as [`strict_json`] read it; what is forwarded is that value
/// written again ([`forwarded`]), never the cage's bytes.
pub fn rewrite(
    kind: Kind,
    v: &mut Value,
    machine: &str,
    session: &str,
) -> std::result::Result<(), String> {
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
        Kind::TaskUpdate => {
            v.as_object_mut()
                .ok_or("a task update is a JSON object")?
                .insert("session".into(), Value::String(session.into()));
        }
        _ => {}
    }
    Ok(())
}

/// The body forwarded for a request the socket read: `v` rewritten for
/// `kind` and written again, or why not. A key the rewriting adds beside
/// one of another case (`Metadata`, `ſession`) would be two names for one
/// field to a receiver that folds case: refused.
pub fn forwarded(
    kind: Kind,
    mut v: Value,
    machine: &str,
    session: &str,
) -> std::result::Result<Bytes, String> {
    rewrite(kind, &mut v, machine, session)?;
    strict_json::check(&v)?;
    Ok(Bytes::from(v.to_string()))
}

/// The JSON-RPC method of a body, if it is a JSON-RPC request: the
/// `method` key exactly (no other spelling of it is in a body that
/// [`strict_json`] read).
pub fn rpc_method(v: &Value) -> Option<String> {
    v.get("method")?.as_str().map(str::to_string)
}

/// JSON read as a receiver that folds the case of keys would read it, so
/// that what the socket checked is what an agent reads. Go's
/// `encoding/json` (the reference agent's) matches an object's key to a
/// field whatever its case, with Unicode's simple case folding (`ſ` is
/// `s`, the Kelvin sign `K` is `k`), the last one winning; serde_json
/// takes the last of two equal keys, other readers the first. An object
/// with two keys that fold alike (equal ones included) is refused, and
/// what is forwarded is the value read, written again.
pub mod strict_json {
    use std::cell::Cell;
    use std::collections::HashSet;
    use std::fmt;

    use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Value};

    /// A key as a case-folding receiver compares it: each character to
    /// the lower case of its upper case (`ſ` to `s`, `K` to `k`, `ẞ` and
    /// `ß` alike); a character whose case changes its length stays as
    /// its lower case, or itself. At least as many keys meet as under
    /// Go's `bytes.EqualFold`.
    pub fn fold(key: &str) -> String {
        fn single(mut it: impl Iterator<Item = char>) -> Option<char> {
            match (it.next(), it.next()) {
                (Some(c), None) => Some(c),
                _ => None,
            }
        }
        key.chars()
            .map(|c| {
                single(c.to_uppercase())
                    .and_then(|u| single(u.to_lowercase()))
                    .or_else(|| single(c.to_lowercase()))
                    .unwrap_or(c)
            })
            .collect()
    }

    /// Read `bytes` as one JSON value, refusing keys that fold alike in
    /// an object and more than `max_values` values.
    pub fn parse(bytes: &[u8], max_values: usize) -> Result<Value, String> {
        let count = Cell::new(0usize);
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let v = Strict {
            count: &count,
            max: max_values,
        }
        .deserialize(&mut de)
        .map_err(|e| format!("the body is not JSON the socket passes: {e}"))?;
        de.end()
            .map_err(|e| format!("the body is not JSON the socket passes: {e}"))?;
        Ok(v)
    }

    /// No object in `v` has two keys that fold alike.
    pub fn check(v: &Value) -> Result<(), String> {
        match v {
            Value::Object(m) => {
                let mut seen = HashSet::new();
                for (k, inner) in m {
                    if !seen.insert(fold(k)) {
                        return Err(twice(k));
                    }
                    check(inner)?;
                }
                Ok(())
            }
            Value::Array(a) => a.iter().try_for_each(check),
            _ => Ok(()),
        }
    }

    fn twice(k: &str) -> String {
        format!(
            "the body names the key {k:?} twice, or in two spellings that an agent may read as \
             one (case, or a character such as ſ or K): each key once, as it is spelt"
        )
    }

    struct Strict<'a> {
        count: &'a Cell<usize>,
        max: usize,
    }

    impl Strict<'_> {
        fn counted<E: de::Error>(&self) -> Result<(), E> {
            self.count.set(self.count.get() + 1);
            if self.count.get() > self.max {
                return Err(E::custom(format!(
                    "more than {} values in one body",
                    self.max
                )));
            }
            Ok(())
        }
        fn again(&self) -> Strict<'_> {
            Strict {
                count: self.count,
                max: self.max,
            }
        }
    }

    impl<'de> DeserializeSeed<'de> for Strict<'_> {
        type Value = Value;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Strict<'_> {
        type Value = Value;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
            self.counted()?;
            Ok(Value::Bool(b))
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
            self.counted()?;
            Ok(Value::from(n))
        }
        fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
            self.counted()?;
            Ok(Value::from(n))
        }
        fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
            self.counted()?;
            serde_json::Number::from_f64(n)
                .map(Value::Number)
                .ok_or_else(|| E::custom("a number JSON cannot hold"))
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
            self.counted()?;
            Ok(Value::String(s.to_string()))
        }
        fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
            self.counted()?;
            Ok(Value::String(s))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
            self.counted()?;
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            self.counted()?;
            let mut out = Vec::new();
            while let Some(v) = seq.next_element_seed(self.again())? {
                out.push(v);
            }
            Ok(Value::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            self.counted()?;
            let mut out = Map::new();
            let mut seen = HashSet::new();
            while let Some(k) = map.next_key::<String>()? {
                if !seen.insert(fold(&k)) {
                    return Err(de::Error::custom(twice(&k)));
                }
                let v = map.next_value_seed(self.again())?;
                out.insert(k, v);
            }
            Ok(Value::Object(out))
        }
    }
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
    /// Made at the socket's first request to an agent, not while the cage
    /// starts (its TLS configuration takes milliseconds to build).
    client: std::sync::OnceLock<std::result::Result<reqwest::Client, String>>,
}

/// A socket being served: served until dropped (the turn's end), then
/// removed.
pub struct Socket {
    path: PathBuf,
    server: Option<crate::turn::server::Background>,
}

/// How the socket reads a connection.
pub const LIMITS: crate::turn::server::Limits = crate::turn::server::Limits {
    head: HEAD_TIMEOUT,
    max_head: MAX_HEAD,
    keep_alive: true,
};

/// Serve `config` on a Unix socket at `path` on a thread of its own.
pub fn start(path: &Path, config: Config) -> Result<Socket> {
    use std::os::unix::fs::PermissionsExt;
    let doing = Doing::ServeCageSocket(path.to_path_buf());
    // One left by a turn that was killed: this turn holds the session's
    // lock, so no one else serves it. remove_file takes a link itself,
    // never what it points to.
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::act(doing.clone(), &e)),
    }
    let listener = bind_short(path).map_err(|e| Error::act(doing.clone(), &e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::act(doing.clone(), &e))?;
    give_to_the_cages_root(path).map_err(|e| Error::act(doing.clone(), &e))?;
    let state = Arc::new(State {
        config,
        client: std::sync::OnceLock::new(),
    });
    let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
    // Past MAX_CONNECTIONS a connection is closed at once: a cage holds no
    // more of the turn's process than that. Requests still in flight end
    // with the turn.
    let server = crate::turn::server::Background::serving(
        "shrooms-cage-socket",
        "the cage's socket",
        move || crate::turn::server::Listener::unix(listener),
        LIMITS,
        Some(MAX_CONNECTIONS),
        service,
    )
    .map_err(|e| e.context(doing))?;
    Ok(Socket {
        path: path.to_path_buf(),
        server: Some(server),
    })
}

/// Bind a Unix socket at `path`, however long: a socket's path is at most
/// 107 bytes (unix(7), `sun_path`), and a state folder's path with a long
/// session's container name in it passes that. The socket is bound
/// through its folder opened here, as `/proc/self/fd/N/NAME` (proc(5): the
/// link names the open folder itself), which is short whatever the
/// folder's path.
pub fn bind_short(path: &Path) -> std::io::Result<std::os::unix::net::UnixListener> {
    use std::os::fd::AsRawFd;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("not a path to a socket"));
    };
    let folder = rustix::fs::open(
        dir,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let mut short = std::ffi::OsString::from(format!("/proc/self/fd/{}/", folder.as_raw_fd()));
    short.push(name);
    std::os::unix::net::UnixListener::bind(Path::new(&short))
}

/// As root, a cage's proxy folder belongs to the cage's root once the cage
/// has started (podman gives it at each start: `argv::userns`), and root in
/// the cage is no one to a socket of the machine's root: the socket goes to
/// the folder's owner, so that root in the cage connects. The folder (0700,
/// read-only inside) still keeps every other user out.
pub fn give_to_the_cages_root(socket: &Path) -> std::io::Result<()> {
    let Some(dir) = socket.parent() else {
        return Ok(());
    };
    if let Some((uid, gid)) = crate::host::userns::cage_owner_of(dir)? {
        std::os::unix::fs::lchown(socket, Some(uid), Some(gid))?;
    }
    Ok(())
}

impl Drop for Socket {
    fn drop(&mut self) {
        drop(self.server.take());
        let _ = std::fs::remove_file(&self.path);
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
        return machines(state, &method);
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
    // A body is read only where its JSON-RPC method or its sender is
    // needed, and only once the rest of the request could pass (a cage
    // holds no memory here with a request that is refused anyway); a drop
    // is streamed.
    let looks_like_drop = classify(&method, &path, None) == Some(Kind::Drop);
    if !looks_like_drop && method != "GET" && method != "HEAD" {
        let rpc = (!state.config.sealed && is_rpc_route(&method, &path)).then_some("SendMessage");
        if let Err(why) = decide(
            state.config.sealed,
            &method,
            &path,
            rpc,
            &addr,
            &state.config.agents,
        ) {
            return error(403, &why);
        }
        let body = match read_body(incoming).await {
            Ok(b) => b,
            Err((status, why)) => return error(status, &why),
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
        let length = match drop_length(&parts.headers) {
            Ok(l) => l,
            Err((status, why)) => return error(status, why),
        };
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        Some(reqwest::Body::wrap(Limited::new(incoming, length as usize)))
    } else {
        None
    };
    forward(state, kind, agent, &method, &path, query, headers, body).await
}

/// `GET /machines`: the machines the cage may reach, by name and address.
fn machines(state: &State, method: &str) -> Reply {
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
    reply(200, serde_json::to_string(&list).unwrap_or_default())
}

/// A request's body, read whole: at most [`MAX_BODY`], within
/// [`BODY_TIMEOUT`]; or the status and words that refuse it.
async fn read_body(incoming: Incoming) -> std::result::Result<Bytes, (u16, String)> {
    let read = Limited::new(incoming, MAX_BODY as usize).collect();
    match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err((
            413,
            "the body is over 1 MiB, what the cage's socket reads of a request \
             (files go by drop)"
                .to_string(),
        )),
        Ok(Err(e)) => Err((400, format!("reading the body: {e}"))),
        Err(_) => Err((408, "the body did not arrive in time".to_string())),
    }
}

/// A drop's length, as its Content-Length says: at most [`MAX_DROP`]; or
/// the status and words that refuse it.
fn drop_length(headers: &HeaderMap) -> std::result::Result<u64, (u16, &'static str)> {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let Some(length) = length else {
        return Err((411, "a drop needs Content-Length"));
    };
    if length > MAX_DROP {
        return Err((
            413,
            "the file is over 100 MiB, what the cage's socket passes in a drop",
        ));
    }
    Ok(length)
}

#[allow(clippy::too_many_arguments)]
async fn forward_buffered(
    state: &State,
    method: &str,
    path: &str,
    query: Option<String>,
    addr: &str,
    incoming: &HeaderMap,
    body: Bytes,
) -> Reply {
    // Read as a receiver that folds case reads it; what goes on is what
    // was read, written again.
    let value = match strict_json::parse(&body, MAX_JSON_VALUES) {
        Ok(v) => v,
        Err(why) => return error(400, &why),
    };
    drop(body);
    let rpc = is_rpc_route(method, path)
        .then(|| rpc_method(&value))
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
    let body = match forwarded(kind, value, &state.config.machine, &state.config.session) {
        Ok(b) => b,
        Err(why) => return error(400, &why),
    };
    let path = &forwarded_path(kind, path);
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
        let token = match crate::settings::token::read(f) {
            Ok(t) => t,
            Err(e) => {
                return error(
                    502,
                    &format!("the token file of machine {}: {}", agent.name, e.message()),
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
    let client = state.client.get_or_init(|| {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(FORWARD_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            // The agents are reached directly, never through a proxy the
            // environment names.
            .no_proxy()
            .build()
            .map_err(|e| e.to_string())
    });
    let client = match client {
        Ok(c) => c,
        Err(e) => return error(502, &format!("the socket's HTTP client: {e}")),
    };
    let mut request = client.request(method, &url).headers(headers);
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
            ("POST", "/v1/tasks/review:m1", None, Kind::TaskUpdate),
            ("POST", "/v1/tasks/review%3Am1", None, Kind::TaskUpdate),
            (
                "POST",
                "/v1/tasks/web.2:msg-01HZX@a",
                None,
                Kind::TaskUpdate,
            ),
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
            ("POST", "/v1/tasks/a%2Fb", None),
            ("POST", "/v1/tasks/..", None),
            ("POST", "/v1/tasks/%2E%2E", None),
            ("POST", "/v1/tasks/a%252Fb", None),
            ("POST", "/v1/tasks/a%0Ab", None),
            ("POST", "/v1/tasks/a%00", None),
            ("POST", "/v1/tasks/a b", None),
            ("POST", "/v1/tasks/a?b", None),
            ("POST", "/v1/tasks/%", None),
            ("POST", "/v1/tasks/", None),
            ("POST", "/v1/tasks/a:b/cancel", None),
            ("GET", "/v1/tasks/a:b", None),
            ("POST", "/v1/sessions/a:b/drop", None),
        ];
        for (m, p, rpc) in refused {
            assert_eq!(classify(m, p, rpc), None, "{m} {p} {rpc:?}");
        }
    }

    #[test]
    fn task_ids_as_the_apps_write_them() {
        assert_eq!(task_id("review:m1").as_deref(), Some("review:m1"));
        assert_eq!(task_id("review%3Am1").as_deref(), Some("review:m1"));
        assert_eq!(task_id("a%252Fb"), None);
        assert_eq!(
            forwarded_path(Kind::TaskUpdate, "/v1/tasks/review%3Am1"),
            "/v1/tasks/review:m1"
        );
        assert_eq!(forwarded_path(Kind::Read, "/v1/sessions"), "/v1/sessions");
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
        let v = strict_json::parse(body.as_bytes(), MAX_JSON_VALUES)?;
        forwarded(kind, v, "alpha", "web").map(|b| String::from_utf8(b.to_vec()).unwrap())
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
            // The rest passes as it was read, written again.
            (
                Kind::Rpc,
                r#"{"method":"GetTask",  "params":{"id":"t\u0031"}}"#,
                r#"{"method":"GetTask","params":{"id":"t1"}}"#,
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
            // A key the socket writes, already there in another spelling.
            (
                Kind::Send,
                r#"{"method":"SendMessage","params":{"message":{"Metadata":{"shrooms/from":"beta/boss"}}}}"#,
            ),
            (
                Kind::Send,
                r#"{"method":"SendMessage","params":{"message":{"metadata":{"ſhrooms/from":"beta/boss"}}}}"#,
            ),
            (
                Kind::TaskUpdate,
                r#"{"ſession":"boss","state":"completed"}"#,
            ),
            (Kind::TaskUpdate, r#"{"SESSION":"boss"}"#),
        ] {
            assert!(rw(kind, input).is_err(), "{input}");
        }
        // The words the cage is answered with (docs/cages.md).
        assert_eq!(
            rw(Kind::Send, r#"{"method":"SendMessage","params":{}}"#).unwrap_err(),
            "a send needs params.message, an object"
        );
    }

    /// What a receiver that folds case (Go's encoding/json) would read
    /// otherwise than the socket: two keys of one name, in any spelling,
    /// in any object, are refused; so is a body of too many values.
    #[test]
    fn keys_that_fold_alike_are_refused() {
        use strict_json::{fold, parse};
        assert_eq!(fold("Method"), "method");
        assert_eq!(fold("METHOD"), "method");
        assert_eq!(fold("meſsage"), "message");
        assert_eq!(fold("\u{212A}ind"), "kind");
        assert_eq!(fold("\u{1E9E}"), fold("ß"));
        for bad in [
            r#"{"method":"GetTask","Method":"CancelTask"}"#,
            r#"{"method":"GetTask","METHOD":"CancelTask"}"#,
            r#"{"method":"GetTask","method":"CancelTask"}"#,
            r#"{"method":"GetTask","me\u0074hod":"CancelTask"}"#,
            r#"{"method":"SendMessage","params":{"message":{"parts":[]},"meſsage":{"metadata":{"shrooms/from":"x/boss"}}}}"#,
            r#"{"a":[{"\u212Aey":1,"key":2}]}"#,
            r#"{"x":1} {"y":2}"#,
        ] {
            let e = parse(bad.as_bytes(), 100).unwrap_err();
            assert!(e.contains("not JSON the socket passes"), "{bad}: {e}");
        }
        let ok = r#"{"method":"GetTask","params":{"id":"t1","Other":{"method":1}},"list":[{"k":1},{"k":2}]}"#;
        assert_eq!(
            parse(ok.as_bytes(), 100).unwrap(),
            serde_json::from_str::<Value>(ok).unwrap()
        );
        let many = format!("[{}0]", "0,".repeat(100));
        assert!(
            parse(many.as_bytes(), 100)
                .unwrap_err()
                .contains("more than 100")
        );
        assert!(parse(many.as_bytes(), 102).is_ok());
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
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
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
