//! `serve`: the operations over HTTP (issue 6), for the apps and for other
//! machines' `outbox send`. A thin face (design.md, "CLI and HTTP as thin
//! faces over typed operations"): `routes` parses a request, calls the
//! operation the CLI calls, on the same state under the same locks, and
//! maps its typed result or error to a response.
//!
//! - `heads`: accepting connections and reading their heads, apart from
//!   the workers;
//! - `http`: reading a request (httparse) and writing a response, one
//!   request per connection;
//! - `routes`: the routes;
//! - `state`: what `GET /v1/harnesses` says, looked at in the background.
//!
//! One thread accepts connections and reads their heads with poll(2)
//! (`heads`), waking at least every 50 ms, so SIGTERM and Ctrl-C (flags
//! set by `signal-hook`) are seen soon: then it stops accepting, reads the
//! heads already begun, the workers finish what is queued and in flight,
//! and `serve` exits 0. A connection whose head is whole goes to a bounded
//! pool: [`WORKERS`] threads and a queue of [`QUEUE`]; when the queue is
//! full, it is answered 503 at once. A half-sent head holds no worker; a
//! head and a JSON body share one deadline, [`http::READ_TIMEOUT`] from
//! the accept, so a slow body holds one worker for at most that (an
//! upload: as long as it keeps its pace, [`http::Pace`], checked at every
//! read); an error answer (a missing token, say) closes the connection
//! without reading the body that was announced. A panic in a request is
//! caught and answered 500; the worker goes on.
//!
//! A `Context` holds a `OnceCell` and is not `Sync`, so each request gets
//! its own, given the host the state thread found (no `podman info` per
//! request).

mod heads;
mod http;
mod routes;
mod state;

use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::ops::Context;
use crate::settings::{Env, Settings};
use heads::Job;
use http::Response;

/// Worker threads: requests served at once.
pub const WORKERS: usize = 8;
/// Connections waiting for a worker; past this, 503 at once.
pub const QUEUE: usize = 256;

/// What every request's context is made from.
pub struct Base {
    pub settings: Settings,
    pub env: Env,
    pub self_paths: Vec<PathBuf>,
}

impl Base {
    pub fn context(&self, host: Option<Host>) -> Context {
        let ctx = Context::new(
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

/// What the workers share.
pub struct Shared {
    pub base: Arc<Base>,
    /// `--token-file`'s token: every request must carry it.
    token: Option<Vec<u8>>,
    pub state: Arc<state::State>,
    /// `SHROOMS_AGENT_TEST_PANIC_ROUTE=1`: `GET /v1/_test/panic` panics (tests only).
    pub test_panic: bool,
    /// Where a worker sends a connection it answered before the body was
    /// read, for `heads` to close gently.
    closing: std::sync::mpsc::Sender<heads::Closing>,
    /// An upload's time before its pace counts ([`http::UPLOAD_GRACE`];
    /// `SHROOMS_AGENT_TEST_UPLOAD_GRACE_MS` makes it shorter, for tests).
    pub upload_grace: Duration,
}

impl Shared {
    /// A request's own context.
    pub fn context(&self) -> Context {
        self.base.context(self.state.host())
    }

    /// The machine a request came from, by its address (issue 6: "known
    /// from where the request came from ..., never from a header"): the
    /// `[machines]` entry whose host resolves to it, else this machine
    /// when it came over loopback.
    pub fn machine_of(&self, ip: IpAddr) -> std::result::Result<String, String> {
        let ip = canonical(ip);
        let s = &self.base.settings;
        let matches: Vec<&String> = s
            .machines
            .iter()
            .filter(|(_, m)| {
                (m.host.as_str(), m.port)
                    .to_socket_addrs()
                    .map(|mut addrs| addrs.any(|a| canonical(a.ip()) == ip))
                    .unwrap_or(false)
            })
            .map(|(name, _)| name)
            .collect();
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            [] if ip.is_loopback() => Ok(s.machine_name.clone()),
            [] => Err(format!(
                "{ip} is the address of no machine in this machine's [machines]: \
                 files are taken only from machines it names"
            )),
            many => Err(format!(
                "{ip} is the address of several machines in [machines] ({}): \
                 it cannot tell which one sent this",
                many.iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// `::ffff:10.0.0.1` is `10.0.0.1`.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// `serve [--listen ADDR:PORT] [--token-file FILE]`, until SIGTERM or SIGINT.
pub fn run(ctx: Context, token_file: Option<&Path>) -> Result<()> {
    // `--listen`, read with the config (settings.rs).
    let addr: SocketAddr = ctx.settings.listen;
    let token = match token_file {
        Some(f) => Some(
            crate::token::read(f)
                .map_err(|e| e.context("--token-file"))?
                .into_bytes(),
        ),
        None if !addr.ip().is_loopback() => {
            return Err(Error::bad_input(format!(
                "--listen {addr} is reachable from other machines: give --token-file FILE \
                 too, so that every request must carry that token"
            )));
        }
        None => None,
    };
    // Every cage is closed to the agent port only (rules.rs): a serve that
    // other machines reach on another port, cages would reach too.
    if !addr.ip().is_loopback() && addr.port() != ctx.settings.agent_port {
        return Err(Error::bad_input(format!(
            "--listen {addr}: {} is not the config's agent_port ({}), the one port every cage \
             is closed to, so cages could reach this serve; listen on port {}, or set \
             agent_port = {} in the config (a cage takes it at its next start)",
            addr.port(),
            ctx.settings.agent_port,
            ctx.settings.agent_port,
            addr.port()
        )));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // The first signal asks for a clean stop; a second one, while
        // requests are still being finished, ends the process at once (1).
        signal_hook::flag::register_conditional_shutdown(signal, 1, stop.clone())
            .and_then(|_| signal_hook::flag::register(signal, stop.clone()))
            .map_err(|e| Error::failed(format!("handling signal {signal}: {e}")))?;
    }
    let listener =
        TcpListener::bind(addr).map_err(|e| Error::failed(format!("listening on {addr}: {e}")))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::failed(format!("listening on {addr}: {e}")))?;
    let test_panic = ctx
        .env
        .get("SHROOMS_AGENT_TEST_PANIC_ROUTE")
        .is_some_and(|v| v == "1");
    let upload_grace = ctx
        .env
        .get("SHROOMS_AGENT_TEST_UPLOAD_GRACE_MS")
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(http::UPLOAD_GRACE);
    let base = Arc::new(Base {
        settings: ctx.settings,
        env: ctx.env,
        self_paths: ctx.self_paths,
    });
    let (state, state_thread) = state::State::start(base.clone(), stop.clone());
    let (closing, closing_rx) = std::sync::mpsc::channel();
    let shared = Arc::new(Shared {
        base,
        token,
        closing,
        state,
        test_panic,
        upload_grace,
    });
    let (tx, rx) = sync_channel::<Job>(QUEUE);
    let rx = Arc::new(Mutex::new(rx));
    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            let rx = rx.clone();
            let shared = shared.clone();
            thread::Builder::new()
                .name(format!("serve-{i}"))
                .spawn(move || worker(&rx, &shared))
                .map_err(|e| Error::failed(format!("starting a worker: {e}")))
        })
        .collect::<Result<_>>()?;
    eprintln!("shrooms-agent serve: listening on http://{addr}");
    heads::serve(listener, &stop, &tx, &closing_rx);
    eprintln!("shrooms-agent serve: stopping: finishing the requests in flight");
    drop(tx);
    for w in workers {
        let _ = w.join();
    }
    stop.store(true, Ordering::SeqCst);
    let _ = state_thread.join();
    eprintln!("shrooms-agent serve: stopped");
    Ok(())
}

fn worker(rx: &Mutex<Receiver<Job>>, shared: &Shared) {
    loop {
        let job = {
            let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
            rx.recv()
        };
        let Ok(job) = job else {
            return;
        };
        // A panic anywhere in a request ends that request, not the worker.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle(job, shared)));
    }
}

/// One request whose head is whole: check the token, route, answer, log
/// one line.
fn handle(job: Job, shared: &Shared) {
    let Job {
        mut conn,
        req,
        start,
        _slot,
    } = job;
    if conn.set_blocking().is_err() {
        return;
    }
    let response = if let Some(token) = &shared.token
        && !authorized(&req, token)
    {
        Response::error(
            401,
            "this serve needs its token: send Authorization: Bearer <token>",
        )
        .with_header("WWW-Authenticate", "Bearer")
    } else if shared.token.is_none()
        && let Some(why) = from_a_web_page(&req)
    {
        Response::error(403, &why)
    } else {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            routes::route(&req, &mut conn, shared)
        }))
        .unwrap_or_else(|_| {
            Response::error(500, "the request failed inside serve (a bug); see its log")
        })
    };
    let _ = conn.respond(&response);
    let method: String = req.method.chars().take(16).collect();
    log(&method, &req.for_log(), response.status, start);
    if conn.body_left() {
        // Answered before its body: closed gently by `heads`, not here.
        let _ = shared.closing.send(heads::Closing { conn, _slot });
    }
}

fn authorized(req: &http::Request, token: &[u8]) -> bool {
    let Some(value) = req.header("authorization") else {
        return false;
    };
    // The scheme's name is case-insensitive (RFC 9110, 11.1).
    let Some((scheme, given)) = value.split_at_checked(7) else {
        return false;
    };
    scheme.eq_ignore_ascii_case(b"Bearer ") && http::same_secret(given.trim_ascii(), token)
}

/// Why a request to a serve without a token looks like it came from a web
/// page, which must not drive it: without a token, anything that can reach
/// loopback is trusted, and a browser can be made to reach it by any page
/// (cross-site requests; a form needs no CORS preflight) or by a name that
/// a page's DNS points at 127.0.0.1 (DNS rebinding). Browsers always send
/// `Origin` on a cross-site request and on every POST, and `Host` is the
/// name the page used; curl and programs send no `Origin`, and address
/// loopback by number or as localhost. With a token none of this matters:
/// a page does not have it.
fn from_a_web_page(req: &http::Request) -> Option<String> {
    if let Some(origin) = req.header("origin") {
        return Some(format!(
            "serve takes no requests from web pages without a token (this one came from \
             Origin: {}); call it from a program, or start serve with --token-file FILE",
            String::from_utf8_lossy(origin)
                .chars()
                .take(100)
                .collect::<String>()
        ));
    }
    if let Some(site) = req.header("sec-fetch-site")
        && !matches!(site, b"none" | b"same-origin")
    {
        return Some(
            "serve takes no requests from web pages without a token (Sec-Fetch-Site says \
             this one is); call it from a program, or start serve with --token-file FILE"
                .into(),
        );
    }
    let host = req.header_str("host").unwrap_or("");
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

/// Method, path (query names only), status, milliseconds: no body, no header value.
fn log(method: &str, path: &str, status: u16, start: Instant) {
    eprintln!("{method} {path} {status} {}ms", start.elapsed().as_millis());
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

    #[test]
    fn mapped_addresses_are_plain() {
        let ip: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert_eq!(canonical(ip), "10.1.2.3".parse::<IpAddr>().unwrap());
        let ip: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(canonical(ip), ip);
    }
}
