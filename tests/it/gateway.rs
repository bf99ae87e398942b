//! End-to-end tests of the model gateway: a harness in a cage reaches its
//! model through the process holding the turn, which adds the machine's
//! credential on the way out. A mock of the model API on this machine's
//! loopback records every request it receives; the cage reaches only the
//! gateway, the gateway reaches the mock.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

/// The machine's key in these tests: it must reach the mock, never a cage.
pub const MACHINE_KEY: &str = "sk-ant-api03-machine-key-4f1c9e";
/// What a cage forges: it must never reach the mock.
const FORGED: &str = "forged-by-the-cage-77aa";
/// A prompt with this asks the mock for a Bash tool call.
pub const TOOL_MARKER: &str = "please-run-the-tool";
/// What follows this in a prompt, in hex (which JSON leaves as it is), is
/// the command of the tool call (`tool_prompt`); without it, the mock's
/// call writes `tool-ran.txt`.
const COMMAND_MARKER: &str = "command-in-hex-";

/// A prompt that has the mock call the shell tool with `command`.
pub fn tool_prompt(command: &str) -> String {
    let hex: String = command.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{TOOL_MARKER}: {COMMAND_MARKER}{hex}")
}

/// The command a request's prompt asks for (`tool_prompt`), if it asks.
fn command_asked(body: &str) -> Option<String> {
    let at = body.find(COMMAND_MARKER)? + COMMAND_MARKER.len();
    let hex: Vec<u8> = body[at..]
        .bytes()
        .take_while(u8::is_ascii_hexdigit)
        .collect();
    let bytes: Vec<u8> = hex
        .chunks(2)
        .filter_map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok())
        .collect();
    String::from_utf8(bytes).ok()
}
/// The path of the pi provider's base URL on the mock, in pi's tests.
const PI_UPSTREAM_PATH: &str = "/corp";

/// One request as the mock received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub target: String,
    /// Lower-case names.
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, n: &str) -> Option<&str> {
        self.headers.get(n).map(String::as_str)
    }
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// Holds the answer after its first event until released (streaming test).
#[derive(Default)]
struct Gate {
    released: Mutex<bool>,
    cond: Condvar,
}

/// A recording mock of the Messages API on 127.0.0.1.
pub struct Mock {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    gate: Option<Arc<Gate>>,
    /// When the mock sent the last event of an answer.
    last_sent: Arc<Mutex<Option<Instant>>>,
    /// Set when the gateway went away in the middle of an answer.
    cut: Arc<AtomicBool>,
}

/// How the mock writes its model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// As they are.
    Plain,
    /// Compressed with gzip when the request's Accept-Encoding takes it,
    /// as the model API and the proxies before it do.
    GzipWhenAsked,
    /// Compressed with gzip whatever the request said.
    GzipAlways,
    /// Said to be brotli (`Content-Encoding: br`), whatever was asked: an
    /// encoding the gateway does not read.
    Brotli,
    /// A streamed answer's first event, then [`LONG_DELTAS`] text deltas
    /// of [`LONG_DELTA`] bytes each, then held until `release`.
    LongThenHold,
    /// A plain JSON answer (no length) whose connection is closed
    /// [`LINGER`] after its last byte, as a slow upstream's may be: the
    /// harness has the whole answer before the gateway sees its end.
    Lingering,
}

/// How long [`Mode::Lingering`] keeps a connection after its answer.
pub const LINGER: Duration = Duration::from_millis(1500);

/// The text deltas of [`Mode::LongThenHold`], and the bytes of each.
pub const LONG_DELTAS: usize = 100;
pub const LONG_DELTA: usize = 300;

impl Mock {
    pub fn start() -> Mock {
        Self::make(None, Mode::Plain)
    }
    /// A mock whose answers are written as `mode` says.
    pub fn with(mode: Mode) -> Mock {
        let gate = (mode == Mode::LongThenHold).then(|| Arc::new(Gate::default()));
        Self::make(gate, mode)
    }
    /// A mock that sends the first event of each streamed answer, then
    /// waits for `release` before the rest.
    fn held() -> Mock {
        Self::make(Some(Arc::new(Gate::default())), Mode::Plain)
    }
    fn make(gate: Option<Arc<Gate>>, mode: Mode) -> Mock {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let last_sent = Arc::new(Mutex::new(None));
        let cut = Arc::new(AtomicBool::new(false));
        let (s, g, ls, ct) = (seen.clone(), gate.clone(), last_sent.clone(), cut.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { continue };
                let (s, g, ls, ct) = (s.clone(), g.clone(), ls.clone(), ct.clone());
                std::thread::spawn(move || {
                    if answer(c, &s, g.as_deref(), &ls, mode).is_none() {
                        ct.store(true, Ordering::SeqCst);
                    }
                });
            }
        });
        Mock {
            port,
            seen,
            gate,
            last_sent,
            cut,
        }
    }
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    pub fn release(&self) {
        let g = self.gate.as_ref().unwrap();
        *g.released.lock().unwrap() = true;
        g.cond.notify_all();
    }
    /// Everything it received, for failure messages.
    pub fn explain(&self) -> String {
        self.seen()
            .iter()
            .map(|s| format!("{} {} {:?}\n{}\n", s.method, s.target, s.headers, s.body))
            .collect()
    }
}

pub fn read_request(r: &mut BufReader<TcpStream>) -> Option<Seen> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.insert(n.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = Vec::new();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = headers.get("content-length").and_then(|v| v.parse().ok()) {
        body = vec![0; n];
        r.read_exact(&mut body).ok()?;
    }
    Some(Seen {
        method,
        target,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// The token counts the mock reports, distinct in each place, so that a
/// count taken from the wrong place shows (tests/it/usage.rs): a streamed
/// answer's `message_start` (whose output count is a first 1), its final
/// `message_delta` output count (cumulative, as the API's are), and a
/// plain JSON answer's.
pub struct Counts {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}
pub const STREAMED: Counts = Counts {
    input_tokens: 101,
    output_tokens: 11,
    cache_creation_input_tokens: 203,
    cache_read_input_tokens: 307,
};
pub const PLAIN: Counts = Counts {
    input_tokens: 41,
    output_tokens: 13,
    cache_creation_input_tokens: 5,
    cache_read_input_tokens: 3,
};
impl Counts {
    pub fn total(&self) -> u64 {
        self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
    }
    fn json(&self, output: u64) -> serde_json::Value {
        serde_json::json!({"input_tokens": self.input_tokens, "output_tokens": output,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens})
    }
}

fn event(kind: &str, data: serde_json::Value) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

/// The Messages API's events for one answer: a text, or a call of the
/// shell tool named `tool` (Claude Code's `Bash`, pi's `bash`) with
/// `command`.
fn events(tool: Option<&str>, command: &str) -> Vec<String> {
    use serde_json::json;
    let mut v = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_mock", "type": "message",
            "role": "assistant", "model": "claude-mock", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": STREAMED.json(1)}}),
    )];
    if let Some(name) = tool {
        v.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "tool_use", "id": "toolu_mock1", "name": name, "input": {}}}),
        ));
        v.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
                "partial_json": json!({"command": command, "description": "Run a command"}).to_string()}}),
        ));
    } else {
        v.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        v.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                "text": "hello from the mock"}}),
        ));
    }
    v.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    v.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": if tool.is_some() { "tool_use" } else { "end_turn" },
            "stop_sequence": null}, "usage": {"output_tokens": STREAMED.output_tokens}}),
    ));
    v.push(event("message_stop", json!({"type": "message_stop"})));
    v
}

/// The mock's answer to a request for no stream.
fn plain_answer() -> serde_json::Value {
    serde_json::json!({"id": "msg_mock", "type": "message", "role": "assistant",
        "model": "claude-mock", "content": [{"type": "text", "text": "hello from the mock"}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": PLAIN.json(PLAIN.output_tokens)})
}

/// Answer one request; None when the other side went away mid-answer.
fn answer(
    c: TcpStream,
    seen: &Mutex<Vec<Seen>>,
    gate: Option<&Gate>,
    last: &Mutex<Option<Instant>>,
    mode: Mode,
) -> Option<()> {
    let mut w = c.try_clone().unwrap();
    let mut r = BufReader::new(c);
    let Some(req) = read_request(&mut r) else {
        return Some(());
    };
    seen.lock().unwrap().push(req.clone());
    // A provider's base URL may have a path of its own (pi's tests give
    // one, `/corp`): the routes are the same under it.
    let path = req.path().to_string();
    let path = path
        .strip_prefix(PI_UPSTREAM_PATH)
        .unwrap_or(&path)
        .to_string();
    let head = |status: &str, ctype: &str| {
        format!("HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\nconnection: close\r\n\r\n")
    };
    match (req.method.as_str(), path.as_str()) {
        ("HEAD", "/api/hello") | ("GET", "/api/hello") => {
            let _ =
                w.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
        ("POST", "/v1/messages/count_tokens") => {
            let _ = w.write_all(head("200 OK", "application/json").as_bytes());
            let _ = w.write_all(b"{\"input_tokens\":12}");
        }
        ("POST", "/v1/messages") => {
            // A tool call where the prompt asks and the tool has not run
            // yet, of the shell tool the harness offers.
            let shell = if req.body.contains("\"Bash\"") {
                Some("Bash")
            } else if req.body.contains("\"bash\"") {
                Some("bash")
            } else {
                None
            };
            let tool = shell
                .filter(|_| req.body.contains(TOOL_MARKER) && !req.body.contains("tool_result"));
            let command =
                command_asked(&req.body).unwrap_or_else(|| "echo hi > tool-ran.txt".to_string());
            let streamed =
                req.body.contains("\"stream\":true") || req.body.contains("\"stream\": true");
            let gzip = match mode {
                Mode::GzipWhenAsked => req
                    .header("accept-encoding")
                    .is_some_and(|a| a.contains("gzip")),
                Mode::GzipAlways => true,
                _ => false,
            };
            if gzip || mode == Mode::Brotli {
                // The whole answer at once, compressed (or said to be).
                let (ctype, body) = if streamed {
                    ("text/event-stream", events(tool, &command).concat())
                } else {
                    ("application/json", plain_answer().to_string())
                };
                let (coding, bytes) = if gzip {
                    use flate2::write::GzEncoder;
                    let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
                    e.write_all(body.as_bytes()).unwrap();
                    ("gzip", e.finish().unwrap())
                } else {
                    ("br", b"\x1b\x00not really brotli".to_vec())
                };
                let _ = write!(
                    w,
                    "HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncontent-encoding: {coding}\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    bytes.len()
                );
                let _ = w.write_all(&bytes);
                return Some(());
            }
            if mode == Mode::LongThenHold && streamed {
                let _ = w.write_all(head("200 OK", "text/event-stream").as_bytes());
                let mut out = events(None, "")[0].clone();
                for i in 0..LONG_DELTAS {
                    let text = format!("{i:03}{}", "x".repeat(LONG_DELTA - 3));
                    out.push_str(&event(
                        "content_block_delta",
                        serde_json::json!({"type": "content_block_delta", "index": 0,
                            "delta": {"type": "text_delta", "text": text}}),
                    ));
                }
                w.write_all(out.as_bytes()).ok()?;
                w.flush().ok()?;
                let g = gate.unwrap();
                let released = g.released.lock().unwrap();
                let _ = g
                    .cond
                    .wait_timeout_while(released, Duration::from_secs(60), |r| !*r)
                    .unwrap();
                return Some(());
            }
            if !streamed {
                let _ = w.write_all(head("200 OK", "application/json").as_bytes());
                let _ = w.write_all(plain_answer().to_string().as_bytes());
                if mode == Mode::Lingering {
                    let _ = w.flush();
                    std::thread::sleep(LINGER);
                }
                return Some(());
            }
            let _ = w.write_all(head("200 OK", "text/event-stream").as_bytes());
            for (i, e) in events(tool, &command).iter().enumerate() {
                w.write_all(e.as_bytes()).ok()?;
                w.flush().ok()?;
                if i == 0
                    && let Some(g) = gate
                {
                    let released = g.released.lock().unwrap();
                    let _ = g
                        .cond
                        .wait_timeout_while(released, Duration::from_secs(60), |r| !*r)
                        .unwrap();
                }
                std::thread::sleep(Duration::from_millis(30));
            }
            *last.lock().unwrap() = Some(Instant::now());
        }
        _ => {
            let _ = w.write_all(head("404 Not Found", "application/json").as_bytes());
            let _ = w.write_all(b"{\"type\":\"error\",\"error\":{\"type\":\"not_found_error\",\"message\":\"mock\"}}");
        }
    }
    Some(())
}

/// A shell function for the busybox cage: `req METHOD TARGET OUTFILE
/// [HEADER...]` sends one HTTP/1.0 request to the gateway (the base URL the
/// cage was given) with a small Messages body, and writes the whole answer
/// (head and body) to OUTFILE. Its input stays open until the answer has
/// come and not grown for 2 s (at most 30 s): busybox nc ends its side at
/// the end of its input, and a client that goes away is one whose request
/// the gateway drops (a flat 2 s was all a busy machine had to answer).
/// `stream URL OUTFILE` posts the same body with wget, which writes the
/// answer's body as it comes.
pub const REQ_FN: &str = r#"req() {
  m=$1; t=$2; out=$3; shift 3
  hp=${ANTHROPIC_BASE_URL#http://}
  body='{"model":"claude-mock","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
  {
    printf '%s %s HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\nanthropic-version: 2023-06-01\r\n' "$m" "$t" "$hp"
    for h in "$@"; do printf '%s\r\n' "$h"; done
    printf 'Content-Length: %s\r\n\r\n%s' "${#body}" "$body"
    i=0; same=0; was=-1
    while [ $i -lt 300 ] && [ $same -lt 20 ]; do
      sleep 0.1; i=$((i+1)); n=$(wc -c 2>/dev/null < "$out"); n=${n:-0}
      if [ "$n" -gt 0 ] && [ "$n" -eq "$was" ]; then same=$((same+1)); else same=0; fi
      was=$n
    done
  } | nc "${hp%:*}" "${hp##*:}" > "$out"
}
stream() {
  body='{"model":"claude-mock","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
  wget -q -O "$2" --header 'x-api-key: forged' --header 'Content-Type: application/json' \
    --post-data "$body" "$ANTHROPIC_BASE_URL$1"
}
"#;

/// A world whose config sends the gateway to the mock.
/// The machine's pi models (`~/.pi/agent/models.json`), as the tests give
/// them; pi's folder.
pub fn write_pi_models(w: &World, models: &serde_json::Value) -> PathBuf {
    let agent = w.home.join(".pi/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
    agent
}

/// The config's words for a model request at a budget refused at once,
/// not held (`[budget] wait`): how a script would have it.
pub const REFUSE_AT_ONCE: &str = "[budget]\nwait = \"0\"\n";

pub fn world_for(w: &World, mock: &Mock, extra: &str) {
    w.write_config(&format!(
        "[gateway]\nanthropic_url = \"{}\"\n{extra}",
        mock.url()
    ));
}

pub fn session_in(w: &World, base: &str) -> (String, PathBuf) {
    let name = w.session(base);
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &[]);
    (name, project)
}

/// The status code of an answer nc wrote (`HTTP/1.x CODE ...`).
pub fn status(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Not an open proxy, and the machine's key, never the cage's: the model
/// routes reach the mock with the machine's key in place of the forged
/// ones; every other route, method or host is refused with 403 and never
/// reaches it; the key is nowhere in the cage.
fn only_model_routes_with_the_machines_key(w: World) {
    let mock = Mock::start();
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "gwroutes");
    let p = project.display();
    let script = format!(
        "{REQ_FN}\
         req POST '/v1/messages?beta=true' {p}/ok.txt 'x-api-key: {FORGED}' 'Authorization: Bearer {FORGED}' \
            'Cookie: s={FORGED}' 'anthropic-beta: oauth-2025-04-20,fine-2025' 'X-Auth-Token: {FORGED}'
         req HEAD /api/hello {p}/hello.txt
         req GET /v1/models {p}/models.txt
         req POST /v1/files {p}/files.txt
         req POST /v1/messages/../../v1/files {p}/dots.txt
         req GET /v1/messages {p}/get.txt
         req POST 'http://{HOST_ADDR}:{port}/elsewhere' {p}/abs.txt
         req CONNECT '{HOST_ADDR}:443' {p}/connect.txt
         echo BASE=$ANTHROPIC_BASE_URL KEY=$ANTHROPIC_API_KEY
         cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {MACHINE_KEY}
         grep -rls {MACHINE_KEY} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -5
         echo END",
        port = mock.port,
    );
    let run = w
        .run_env(
            &["cage", "exec", &name, "--", "sh", "-c", &script],
            &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
        )
        .ok();
    let out = run.stdout();
    let ok = read(&project.join("ok.txt"));
    assert_eq!(status(&ok), 200, "{ok}\n{}", run.explain());
    assert!(ok.contains("hello from the mock"), "{ok}");
    assert_eq!(status(&read(&project.join("hello.txt"))), 200);
    for f in ["models", "files", "dots", "get", "abs", "connect"] {
        let t = read(&project.join(format!("{f}.txt")));
        // An absolute-form target names its path: still refused, and the
        // host it names is never reached.
        assert_eq!(status(&t), 403, "{f}: {t}");
        assert!(t.contains("permission_error"), "{f}: {t}");
    }
    // What the mock saw: the two model requests, with the machine's key.
    let seen = mock.seen();
    let targets: Vec<String> = seen
        .iter()
        .map(|s| format!("{} {}", s.method, s.target))
        .collect();
    assert_eq!(
        targets,
        vec!["POST /v1/messages?beta=true", "HEAD /api/hello"],
        "{}",
        mock.explain()
    );
    let m = &seen[0];
    assert_eq!(m.header("x-api-key"), Some(MACHINE_KEY), "{:?}", m.headers);
    assert_eq!(m.header("authorization"), None, "{:?}", m.headers);
    assert_eq!(m.header("cookie"), None);
    assert_eq!(m.header("x-auth-token"), None);
    assert_eq!(m.header("anthropic-beta"), Some("fine-2025"));
    assert_eq!(m.header("anthropic-version"), Some("2023-06-01"));
    assert!(m.body.contains("claude-mock"), "{}", m.body);
    for s in &seen {
        assert!(
            !format!("{:?}{}", s.headers, s.body).contains(FORGED),
            "{s:?}"
        );
    }
    // The cage has the gateway and a dummy key, and nothing of the machine's.
    assert!(out.contains("BASE=http://127.0.0.1:"), "{out}");
    assert!(
        out.contains("KEY=shrooms-gateway-adds-the-real-key"),
        "{out}"
    );
    let lines: Vec<&str> = out.lines().collect();
    let end = lines.iter().position(|l| *l == "END").unwrap();
    assert_eq!(lines[end - 1..end], ["0"], "the key is in the cage:\n{out}");
    assert!(!out.contains(MACHINE_KEY), "{out}");
}

#[test]
fn gateway_only_model_routes_with_the_machines_key() {
    only_model_routes_with_the_machines_key(World::new());
}

#[test]
fn gateway_only_model_routes_with_the_machines_key_rootless() {
    only_model_routes_with_the_machines_key(World::rootless());
}

/// Each event reaches the harness as the upstream sends it: the cage's
/// client holds the first event while the mock still holds the rest.
fn streams(w: World) {
    let mock = Mock::held();
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "gwstream");
    let out = project.join("stream.txt");
    let script = format!("{REQ_FN}stream /v1/messages {}", out.display());
    let child = w.spawn_env(
        &["cage", "exec", &name, "--", "sh", "-c", &script],
        &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
    );
    wait_until(
        "the first event in the cage",
        Duration::from_secs(60),
        || read(&out).contains("message_start"),
    );
    let first_seen = Instant::now();
    assert!(
        mock.last_sent.lock().unwrap().is_none(),
        "the mock had sent everything"
    );
    assert!(!read(&out).contains("message_stop"));
    mock.release();
    let run = finish("cage exec (streaming)", child).ok();
    let text = read(&out);
    assert!(text.contains("message_stop"), "{text}\n{}", run.explain());
    assert!(mock.last_sent.lock().unwrap().unwrap() > first_seen);
}

/// A harness that goes away drops the upstream request: the client in the
/// cage is killed after the first event, and the mock's next events find
/// the gateway's connection closed while the turn still runs.
fn gone_harness_aborts(w: World) {
    let mock = Mock::held();
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "gwgone");
    let (out, marker) = (project.join("gone.txt"), project.join("killed"));
    let script = format!(
        "body='{{\"model\":\"m\",\"max_tokens\":9,\"stream\":true,\"messages\":[]}}'
         wget -q -O {out} --header 'Content-Type: application/json' --post-data \"$body\" \
           \"$ANTHROPIC_BASE_URL/v1/messages\" & pid=$!
         while ! grep -q message_start {out} 2>/dev/null; do sleep 0.1; done
         kill $pid; wait $pid; echo killed > {marker}; sleep 20",
        out = out.display(),
        marker = marker.display()
    );
    let mut child = w.spawn_env(
        &["cage", "exec", &name, "--", "sh", "-c", &script],
        &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
    );
    wait_until("the client killed", Duration::from_secs(60), || {
        marker.exists()
    });
    mock.release();
    wait_until(
        "the upstream request dropped",
        Duration::from_secs(10),
        || mock.cut.load(Ordering::SeqCst),
    );
    assert!(child.try_wait().unwrap().is_none(), "the turn ended first");
    let _ = child.kill();
    let _ = child.wait();
    assert!(!read(&out).contains("message_stop"));
}

#[test]
fn gateway_a_harness_that_goes_away_drops_the_upstream_request() {
    gone_harness_aborts(World::new());
}

#[test]
fn gateway_streams_each_event() {
    streams(World::new());
}

#[test]
fn gateway_streams_each_event_rootless() {
    streams(World::rootless());
}

/// With no credential anywhere, the harness gets an error in the API's
/// shape saying what to set, the terminal the same words, and nothing
/// reaches the mock. The machine's Claude Code login is the last source.
#[test]
fn gateway_without_a_credential_says_what_to_set_then_uses_the_login() {
    let w = World::new();
    let mock = Mock::start();
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "gwnokey");
    let script = format!("{REQ_FN}req POST /v1/messages {}/e.txt", project.display());
    let run = w
        .run(&["cage", "exec", &name, "--", "sh", "-c", &script])
        .ok();
    let e = read(&project.join("e.txt"));
    assert_eq!(status(&e), 401, "{e}");
    assert!(e.contains("\"authentication_error\""), "{e}");
    for words in [
        "[gateway] key_file",
        "ANTHROPIC_API_KEY",
        "log in with claude",
    ] {
        assert!(e.contains(words), "{e}");
        assert!(run.stderr().contains(words), "{}", run.explain());
    }
    assert!(mock.seen().is_empty(), "{}", mock.explain());

    // The machine's own login, read at the request.
    let login = "sk-ant-oat01-machine-login-5d2e";
    std::fs::create_dir_all(w.home.join(".claude")).unwrap();
    std::fs::write(
        w.home.join(".claude/.credentials.json"),
        format!(r#"{{"claudeAiOauth":{{"accessToken":"{login}","expiresAt":99999999999999}}}}"#),
    )
    .unwrap();
    w.run(&["cage", "exec", &name, "--", "sh", "-c", &script])
        .ok();
    let seen = mock.seen();
    assert_eq!(seen.len(), 1, "{}", mock.explain());
    assert_eq!(
        seen[0].header("authorization").map(str::to_string),
        Some(format!("Bearer {login}"))
    );
    assert_eq!(seen[0].header("anthropic-beta"), Some("oauth-2025-04-20"));
    assert_eq!(seen[0].header("x-api-key"), None);
}

/// `[gateway] key_file` comes first, before the environment.
#[test]
fn gateway_key_file_comes_first() {
    let w = World::new();
    let mock = Mock::start();
    let key = w.file("gw-key", "sk-ant-api03-from-the-key-file\n");
    world_for(&w, &mock, &format!("key_file = \"{}\"\n", key.display()));
    let (name, project) = session_in(&w, "gwkeyfile");
    let script = format!("{REQ_FN}req POST /v1/messages {}/o.txt", project.display());
    w.run_env(
        &["cage", "exec", &name, "--", "sh", "-c", &script],
        &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
    )
    .ok();
    let seen = mock.seen();
    assert_eq!(seen.len(), 1, "{}", mock.explain());
    assert_eq!(
        seen[0].header("x-api-key"),
        Some("sk-ant-api03-from-the-key-file")
    );
}

/// A sealed cage: its sealed token (the machine's, in the state folder)
/// reaches the upstream, and is nowhere in the cage.
fn sealed_token_reaches_the_upstream_only(w: World) {
    use std::os::unix::fs::PermissionsExt;
    let token = "sk-ant-oat01-sealed-token-of-this-machine-9c";
    let mock = Mock::start();
    world_for(&w, &mock, "");
    std::fs::create_dir_all(&w.state).unwrap();
    let p = w.state.join("sealed-claude-token");
    std::fs::write(&p, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    w.chown_all();
    let name = w.session("gwsealed");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--sealed"]);
    let script = format!(
        "{REQ_FN}req POST /v1/messages {}/s.txt 'x-api-key: {FORGED}'
         env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {token}
         grep -rls {token} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -5
         echo END",
        project.display()
    );
    let run = w
        .run_env(
            &["cage", "exec", &name, "--", "sh", "-c", &script],
            &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
        )
        .ok();
    let out = run.stdout();
    assert_eq!(
        status(&read(&project.join("s.txt"))),
        200,
        "{}",
        run.explain()
    );
    let seen = mock.seen();
    assert_eq!(seen.len(), 1, "{}", mock.explain());
    assert_eq!(
        seen[0].header("authorization").map(str::to_string),
        Some(format!("Bearer {token}"))
    );
    // Not the invoking environment's key: a sealed cage has its own login only.
    assert_eq!(seen[0].header("x-api-key"), None, "{:?}", seen[0].headers);
    assert!(!out.contains("CLAUDE_CODE_OAUTH_TOKEN"), "{out}");
    assert!(!out.contains(token), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let end = lines.iter().position(|l| *l == "END").unwrap();
    assert_eq!(lines[end - 1], "0", "{out}");
}

#[test]
fn gateway_sealed_token_reaches_the_upstream_only() {
    sealed_token_reaches_the_upstream_only(World::new());
}

#[test]
fn gateway_sealed_token_reaches_the_upstream_only_rootless() {
    sealed_token_reaches_the_upstream_only(World::rootless());
}

// ---- the real Claude Code ------------------------------------------------

/// What keeps pi's traffic to its model alone (no version check, no
/// telemetry).
pub const PI_QUIET: &[(&str, &str)] = &[
    ("PI_OFFLINE", "1"),
    ("PI_SKIP_VERSION_CHECK", "1"),
    ("PI_TELEMETRY", "0"),
];

/// What keeps Claude Code's traffic to its model alone (no updates,
/// telemetry or error reports: nothing may leave this machine).
pub const QUIET: &[(&str, &str)] = &[
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
    ("DISABLE_TELEMETRY", "1"),
    ("DISABLE_ERROR_REPORTING", "1"),
];

/// The real Claude Code, mounted from the machine, completes a text turn
/// and a tool turn in a Debian cage through the gateway: the mock saw the
/// machine's key on every request, and the cage holds it nowhere.
fn claude_turns(w: World, sealed: bool) {
    let (claude, image) = real_claude();
    let mock = Mock::start();
    world_for(&w, &mock, &format!("[harness]\nclaude = \"{claude}\"\n"));
    let token = "sk-ant-oat01-sealed-token-for-claude-3b7";
    let mut flags = vec!["--image", image.as_str()];
    if sealed {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&w.state).unwrap();
        let p = w.state.join("sealed-claude-token");
        std::fs::write(&p, format!("{token}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        w.chown_all();
        flags.push("--sealed");
    }
    let name = w.session(if sealed { "gwclaudes" } else { "gwclaude" });
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &flags);
    let mut env = QUIET.to_vec();
    env.push(("ANTHROPIC_API_KEY", MACHINE_KEY));

    let text = w
        .run_env(&["cage", "run", &name, "--", "-p", "say hi"], &env)
        .ok();
    assert!(
        text.stdout().contains("hello from the mock"),
        "{}\n{}",
        text.explain(),
        mock.explain()
    );
    let tool = w
        .run_env(
            &[
                "cage",
                "run",
                &name,
                "--",
                "-p",
                &format!("{TOOL_MARKER}: write hi to a file"),
                "--dangerously-skip-permissions",
            ],
            &env,
        )
        .ok();
    assert_eq!(
        read(&project.join("tool-ran.txt")),
        "hi\n",
        "{}\n{}",
        tool.explain(),
        mock.explain()
    );
    let seen = mock.seen();
    let routes: std::collections::BTreeSet<String> = seen
        .iter()
        .map(|s| format!("{} {}", s.method, s.path()))
        .collect();
    eprintln!("Claude Code's requests through the gateway: {routes:?}");
    assert!(routes.contains("POST /v1/messages"), "{routes:?}");
    assert!(
        seen.iter().any(|s| s.body.contains("tool_result")),
        "{}",
        mock.explain()
    );
    // `cage run` handed Claude Code the shrooms tools' MCP server, which it
    // started in the cage and offered the model: all six, or in a sealed
    // cage task_update alone. (Offered by name: as a tool, or in the list
    // of tools it loads when asked, depending on its tool search.)
    let offered = |tool: &str| {
        let name = format!("mcp__shrooms__{tool}");
        seen.iter().any(|s| {
            s.body.match_indices(&name).any(|(i, _)| {
                !s.body[i + name.len()..]
                    .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            })
        })
    };
    assert!(offered("task_update"), "{}", mock.explain());
    for tool in [
        "list_agents",
        "ask_agent",
        "task_status",
        "task_ack",
        "send_file",
    ] {
        assert_eq!(offered(tool), !sealed, "{tool}: {}", mock.explain());
    }
    for s in &seen {
        if sealed {
            assert_eq!(
                s.header("authorization").map(str::to_string),
                Some(format!("Bearer {token}")),
                "{s:?}"
            );
            assert_eq!(s.header("x-api-key"), None, "{s:?}");
        } else {
            assert_eq!(s.header("x-api-key"), Some(MACHINE_KEY), "{s:?}");
            assert_eq!(s.header("authorization"), None, "{s:?}");
        }
        assert!(!format!("{s:?}").contains("shrooms-gateway-adds"), "{s:?}");
    }
    // Nothing in the cage holds the machine's credential: its processes'
    // environments, and every file of its filesystem and mounts.
    let secret = if sealed { token } else { MACHINE_KEY };
    let look = w
        .run(&[
            "cage",
            "exec",
            &name,
            "--",
            "sh",
            "-c",
            &format!(
                "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {secret}; \
                 grep -rls {secret} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -5; \
                 echo END"
            ),
        ])
        .ok();
    assert_eq!(look.stdout(), "0\nEND\n", "{}", look.explain());
}

#[test]
fn gateway_real_claude_code_text_and_tool_turns() {
    claude_turns(World::new(), false);
}

#[test]
fn gateway_real_claude_code_text_and_tool_turns_rootless() {
    claude_turns(World::rootless(), false);
}

#[test]
fn gateway_real_claude_code_sealed() {
    claude_turns(World::new(), true);
}

/// An agent commits in a caged turn as it does uncaged: the real harness's
/// shell tool (the mock asks for the call) runs `git add` and `git commit`
/// in the project, and afterwards the commit is in the user's repository
/// as `cage/<session>/main`, said on the turn's stderr; the user's own
/// branch is where it was.
fn harness_commits(w: World, pi: bool) {
    use crate::protected::host_git_ok;
    let mock = Mock::start();
    let name = w.session(if pi { "gitpi" } else { "gitclaude" });
    let project = w.dir(&format!("projects/{name}"));
    host_git_ok(&w, &project, &["init", "-q", "-b", "main"]);
    w.file(&format!("projects/{name}/a.txt"), "a\n");
    host_git_ok(&w, &project, &["add", "a.txt"]);
    host_git_ok(&w, &project, &["commit", "-q", "-m", "first"]);
    let prompt = tool_prompt(
        "echo agent > agent.txt && git add agent.txt && \
         git -c user.name=agent -c user.email=agent@example.invalid commit -qm by-the-agent",
    );
    let mut env = if pi {
        PI_QUIET.to_vec()
    } else {
        QUIET.to_vec()
    };
    let run = if pi {
        world_for(&w, &mock, "");
        let models = serde_json::json!({"providers": {"corp": {
            "baseUrl": format!("{}{PI_UPSTREAM_PATH}", mock.url()),
            "api": "anthropic-messages",
            "apiKey": PI_KEY,
            "models": [{"id": "corp-mock", "name": "Corp mock", "reasoning": false}]
        }}});
        write_pi_models(&w, &models);
        w.chown_all();
        let image = crate::protected::pi_git_image(w.user);
        w.create(&name, &project, &["--harness", "pi", "--image", &image]);
        w.run_env(
            &[
                "cage",
                "run",
                &name,
                "--",
                "--provider",
                "corp",
                "--model",
                "corp-mock",
                "-p",
                &prompt,
            ],
            &env,
        )
    } else {
        let (claude, _) = real_claude();
        world_for(&w, &mock, &format!("[harness]\nclaude = \"{claude}\"\n"));
        let image = crate::protected::git_image(w.user);
        w.create(&name, &project, &["--image", &image]);
        env.push(("ANTHROPIC_API_KEY", MACHINE_KEY));
        w.run_env(
            &[
                "cage",
                "run",
                &name,
                "--",
                "-p",
                &prompt,
                "--dangerously-skip-permissions",
            ],
            &env,
        )
    }
    .ok();
    assert!(
        mock.seen().iter().any(|s| s.body.contains("tool_result")),
        "{}\n{}",
        run.explain(),
        mock.explain()
    );
    let theirs = format!("cage/{name}/main");
    assert!(
        run.stderr().contains(&format!("as {theirs}")),
        "{}",
        run.explain()
    );
    let log = host_git_ok(&w, &project, &["log", "--format=%s", &theirs]);
    assert_eq!(log, "by-the-agent\nfirst\n", "{}", run.explain());
    let mine = host_git_ok(&w, &project, &["log", "--format=%s", "main"]);
    assert_eq!(mine, "first\n");
    assert_eq!(read(&project.join("agent.txt")), "agent\n");
}

#[test]
fn a_caged_claude_code_commits_and_the_commit_comes_in() {
    harness_commits(World::new(), false);
}

#[test]
fn a_caged_claude_code_commits_and_the_commit_comes_in_rootless() {
    harness_commits(World::rootless(), false);
}

#[test]
fn a_caged_pi_commits_and_the_commit_comes_in() {
    harness_commits(World::new(), true);
}

#[test]
fn a_caged_pi_commits_and_the_commit_comes_in_rootless() {
    harness_commits(World::rootless(), true);
}

/// With no credential on the machine, the real Claude Code's turn ends
/// within seconds (not after minutes of retries), and what it prints says
/// which sources the gateway looked at and how to give one. Nothing reaches
/// the model API.
fn claude_without_a_credential(w: World) {
    let (claude, image) = real_claude();
    let mock = Mock::start();
    world_for(&w, &mock, &format!("[harness]\nclaude = \"{claude}\"\n"));
    let name = w.session("gwclaudenokey");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--image", &image]);
    let started = Instant::now();
    let run = w.run_env(&["cage", "run", &name, "--", "-p", "say hi"], QUIET);
    let took = started.elapsed();
    assert_ne!(run.code(), 0, "{}", run.explain());
    assert!(
        took < Duration::from_secs(60),
        "the turn took {took:?}:\n{}",
        run.explain()
    );
    // Claude Code's own line carries the gateway's words.
    let out = format!("{}{}", run.stdout(), run.stderr());
    let line = out
        .lines()
        .find(|l| l.contains("Failed to authenticate"))
        .unwrap_or_else(|| panic!("no 'Failed to authenticate':\n{}", run.explain()));
    told_what_to_set(line, &mock);
}

/// The harness's line carries the gateway's words (the sources it looked
/// at, and how to give one), and no model request reached the mock.
fn told_what_to_set(line: &str, mock: &Mock) {
    for words in [
        "401",
        "[gateway] key_file",
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
        ".credentials.json",
        "log in with claude",
    ] {
        assert!(line.contains(words), "{words:?} not in {line:?}");
    }
    assert!(
        !mock.seen().iter().any(|s| s.method == "POST"),
        "{}",
        mock.explain()
    );
}

#[test]
fn gateway_real_claude_code_without_a_credential_ends_at_once() {
    claude_without_a_credential(World::new());
}

#[test]
fn gateway_real_claude_code_without_a_credential_ends_at_once_rootless() {
    claude_without_a_credential(World::rootless());
}

/// `pass_env` refuses names that look like credentials and says to use
/// `pass_secrets`, making nothing; under `pass_secrets` the value passes.
#[test]
fn pass_env_refuses_credentials_unless_pass_secrets() {
    let w = World::new();
    w.write_config("pass_env = [\"OPENAI_API_KEY\"]");
    let name = w.session("passsecret");
    let project = w.dir(&format!("projects/{name}"));
    let d = project.to_string_lossy().into_owned();
    let r = w.run(&["cage", "create", &name, "--dir", &d]).code_is(2);
    assert!(
        r.stderr()
            .contains("OPENAI_API_KEY looks like a credential"),
        "{}",
        r.explain()
    );
    assert!(r.stderr().contains("pass_secrets"), "{}", r.explain());
    assert!(w.containers_of(&name).is_empty());
    w.write_config("pass_secrets = [\"OPENAI_API_KEY\"]");
    w.create(&name, &project, &[]);
    let out = w
        .run_env(
            &[
                "cage",
                "exec",
                &name,
                "--",
                "sh",
                "-c",
                "echo K=$OPENAI_API_KEY",
            ],
            &[("OPENAI_API_KEY", "sk-chosen-on-purpose")],
        )
        .ok()
        .stdout();
    assert!(out.contains("K=sk-chosen-on-purpose"), "{out}");
}

/// Not an open proxy through pi's routes either: under a provider's prefix
/// only the model routes pass, to that provider's URL with its key in
/// place of the cage's; a prefix naming no provider of the machine's file
/// (the one left out among them) is refused, and the mock never sees it.
fn pi_routes_are_only_model_routes(w: World) {
    let mock = Mock::start();
    // The test image has no pi of its own: a pi of the machine's.
    let pi = w.file("tools/pi", "#!/bin/sh\n");
    std::fs::set_permissions(&pi, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    world_for(&w, &mock, &format!("[harness]\npi = \"{}\"", pi.display()));
    let models = serde_json::json!({"providers": {
        "corp": {"baseUrl": format!("{}{PI_UPSTREAM_PATH}", mock.url()),
                 "api": "anthropic-messages", "apiKey": PI_KEY,
                 "headers": {"x-corp-team": "team-from-the-machine"},
                 "models": [{"id": "corp-mock"}]},
        "local": {"baseUrl": mock.url(), "api": "openai-completions",
                  "apiKey": PI_OTHER_KEY, "models": [{"id": "l"}]}
    }});
    write_pi_models(&w, &models);
    w.chown_all();
    let name = w.session("gwpiroutes");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--harness", "pi"]);
    let p = project.display();
    let script = format!(
        "{REQ_FN}\
         req POST /pi/corp/v1/messages {p}/ok.txt 'x-api-key: {FORGED}' 'Authorization: Bearer {FORGED}' \
            'x-corp-team: {FORGED}'
         req GET /pi/corp/v1/models {p}/models.txt
         req POST /pi/corp/v1/chat/completions {p}/chat.txt
         req POST /pi/corp/../../v1/files {p}/dots.txt
         req POST /pi/local/v1/messages {p}/local.txt
         req POST /pi/local/chat/completions {p}/localchat.txt
         req POST /pi/nobody/v1/messages {p}/nobody.txt
         echo END"
    );
    let run = w
        .run(&["cage", "exec", &name, "--", "sh", "-c", &script])
        .ok();
    let ok = read(&project.join("ok.txt"));
    assert_eq!(status(&ok), 200, "{ok}\n{}", run.explain());
    for f in ["models", "chat", "dots", "local", "localchat", "nobody"] {
        let t = read(&project.join(format!("{f}.txt")));
        assert_eq!(status(&t), 403, "{f}: {t}");
    }
    let seen = mock.seen();
    let targets: Vec<String> = seen
        .iter()
        .map(|s| format!("{} {}", s.method, s.target))
        .collect();
    assert_eq!(
        targets,
        vec!["POST /corp/v1/messages"],
        "{}",
        mock.explain()
    );
    let m = &seen[0];
    assert_eq!(m.header("x-api-key"), Some(PI_KEY), "{:?}", m.headers);
    assert_eq!(m.header("authorization"), None, "{:?}", m.headers);
    assert_eq!(m.header("x-corp-team"), Some("team-from-the-machine"));
    assert!(
        !format!("{:?}{}", m.headers, m.body).contains(FORGED),
        "{m:?}"
    );
}

#[test]
fn gateway_pi_routes_are_only_model_routes() {
    pi_routes_are_only_model_routes(World::new());
}

#[test]
fn gateway_pi_routes_are_only_model_routes_rootless() {
    pi_routes_are_only_model_routes(World::rootless());
}

// ---- the real pi -----------------------------------------------------------

/// The key of the pi provider in the machine's models.json: it must reach
/// the mock, never a cage.
const PI_KEY: &str = "sk-ant-api03-pi-models-json-key-91d2";
/// The key of a provider whose API the gateway does not speak: left out.
const PI_OTHER_KEY: &str = "sk-openai-literal-in-models-json-5e0";

/// The real pi from npm, in the image, completes a text turn and a tool
/// turn in a cage through the gateway, with its provider from the
/// machine's models.json: the mock saw that provider's key at that
/// provider's URL; the cage's models.json points at the gateway with a
/// dummy key and leaves out (with a warning) the provider of an API the
/// gateway does not speak; neither key is anywhere in the cage.
fn pi_turns(w: World) {
    let image = real_pi_image();
    let mock = Mock::start();
    world_for(&w, &mock, "");
    let models = serde_json::json!({"providers": {
        "corp": {
            "baseUrl": format!("{}{PI_UPSTREAM_PATH}", mock.url()),
            "api": "anthropic-messages",
            "apiKey": PI_KEY,
            "models": [{"id": "corp-mock", "name": "Corp mock", "reasoning": false}]
        },
        "local": {
            "baseUrl": format!("http://{HOST_ADDR}:9/v1"),
            "api": "openai-completions",
            "apiKey": PI_OTHER_KEY,
            "models": [{"id": "local-mock"}]
        }
    }});
    let agent = write_pi_models(&w, &models);
    w.chown_all();
    let name = w.session("gwpi");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--harness", "pi", "--image", &image]);
    let env = PI_QUIET;
    let pi = |prompt: &str| {
        w.run_env(
            &[
                "cage",
                "run",
                &name,
                "--",
                "--provider",
                "corp",
                "--model",
                "corp-mock",
                "-p",
                prompt,
            ],
            env,
        )
        .ok()
    };
    let text = pi("say hi");
    assert!(
        text.stdout().contains("hello from the mock"),
        "{}\n{}",
        text.explain(),
        mock.explain()
    );
    // The provider the gateway cannot speak is left out, and `cage run` says so.
    assert!(
        text.stderr().contains("provider local is left out"),
        "{}",
        text.explain()
    );
    let tool = pi(&format!("{TOOL_MARKER}: write hi to a file"));
    assert_eq!(
        read(&project.join("tool-ran.txt")),
        "hi\n",
        "{}\n{}",
        tool.explain(),
        mock.explain()
    );
    let seen = mock.seen();
    let routes: std::collections::BTreeSet<String> = seen
        .iter()
        .map(|s| format!("{} {}", s.method, s.path()))
        .collect();
    eprintln!("pi's requests through the gateway: {routes:?}");
    assert_eq!(
        routes,
        ["POST /corp/v1/messages".to_string()].into(),
        "{}",
        mock.explain()
    );
    assert!(
        seen.iter().any(|s| s.body.contains("tool_result")),
        "{}",
        mock.explain()
    );
    for s in &seen {
        assert_eq!(s.header("x-api-key"), Some(PI_KEY), "{s:?}");
        assert_eq!(s.header("authorization"), None, "{s:?}");
        assert!(!format!("{s:?}").contains("shrooms-gateway-adds"), "{s:?}");
    }
    // The cage's models.json: the provider at the gateway with the dummy
    // key, the other left out. Neither key is anywhere in the cage.
    let look = w
        .run(&[
            "cage",
            "exec",
            &name,
            "--",
            "sh",
            "-c",
            &format!(
                "cat {m}; echo; echo MODELS_END; \
                 cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -e {PI_KEY} -e {PI_OTHER_KEY}; \
                 grep -rls -e {PI_KEY} -e {PI_OTHER_KEY} / --exclude-dir=proc --exclude-dir=sys \
                   2>/dev/null | head -5; \
                 echo END",
                m = agent.join("models.json").display()
            ),
        ])
        .ok();
    let out = look.stdout();
    let (copy, rest) = out
        .split_once("MODELS_END\n")
        .unwrap_or_else(|| panic!("{}", look.explain()));
    let copy: serde_json::Value =
        serde_json::from_str(copy).unwrap_or_else(|e| panic!("{e}: {copy}"));
    let corp = &copy["providers"]["corp"];
    assert!(
        corp["baseUrl"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1:") && u.ends_with("/pi/corp")),
        "{copy}"
    );
    assert_eq!(
        corp["apiKey"], "shrooms-gateway-adds-the-real-key",
        "{copy}"
    );
    assert!(copy["providers"].get("local").is_none(), "{copy}");
    assert_eq!(
        rest,
        "0\nEND\n",
        "a key is in the cage:\n{}",
        look.explain()
    );

    // With no models.json, pi's built-in anthropic provider reaches the
    // gateway's default route, which adds the machine's own credential.
    std::fs::remove_file(agent.join("models.json")).unwrap();
    let before = mock.seen().len();
    let mut env = env.to_vec();
    env.push(("ANTHROPIC_API_KEY", MACHINE_KEY));
    let built_in = w
        .run_env(
            &[
                "cage",
                "run",
                &name,
                "--",
                "--provider",
                "anthropic",
                "--model",
                "claude-sonnet-4-5",
                "-p",
                "say hi",
            ],
            &env,
        )
        .ok();
    assert!(
        built_in.stdout().contains("hello from the mock"),
        "{}\n{}",
        built_in.explain(),
        mock.explain()
    );
    let seen = mock.seen();
    assert!(seen.len() > before, "{}", mock.explain());
    for s in &seen[before..] {
        assert_eq!(s.path(), "/v1/messages", "{s:?}");
        assert_eq!(s.header("x-api-key"), Some(MACHINE_KEY), "{s:?}");
    }
}

#[test]
fn gateway_real_pi_text_and_tool_turns() {
    pi_turns(World::new());
}

#[test]
fn gateway_real_pi_text_and_tool_turns_rootless() {
    pi_turns(World::rootless());
}

/// The real pi with no credential on the machine: its built-in anthropic
/// provider goes to the gateway, whose answer ends the turn within seconds
/// with the words that say what to set.
#[test]
fn gateway_real_pi_without_a_credential_ends_at_once() {
    let w = World::new();
    let image = real_pi_image();
    let mock = Mock::start();
    world_for(&w, &mock, "");
    let name = w.session("gwpinokey");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--harness", "pi", "--image", &image]);
    let env = PI_QUIET;
    let started = Instant::now();
    let run = w.run_env(&["cage", "run", &name, "--", "-p", "say hi"], env);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(60),
        "the turn took {took:?}:\n{}",
        run.explain()
    );
    let out = format!("{}{}", run.stdout(), run.stderr());
    let line = out
        .lines()
        .find(|l| l.contains("401") && l.contains("no credential to add"))
        .unwrap_or_else(|| panic!("no 401 with the gateway's words:\n{}", run.explain()));
    told_what_to_set(line, &mock);
}

// ---- what the cage is told when the gateway fails --------------------------

/// What a failing key command prints on its stderr: it goes to the
/// terminal of the turn, never into the cage.
const KEY_COMMAND_SECRET: &str = "key-vault-said-token-4e2a1-expired";

/// A failing `[gateway] key_command`, and a pi provider's failing
/// `!command` key: the harness gets fixed words (what to set), the
/// terminal of the turn the command's own last line; the cage never sees
/// that line (it once came back in the 401's message).
fn key_command_output_stays_on_the_machine(w: World) {
    let mock = Mock::start();
    let pi = w.file("tools/pi", "#!/bin/sh\n");
    std::fs::set_permissions(&pi, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let fail = format!("echo {KEY_COMMAND_SECRET} >&2; exit 3");
    world_for(
        &w,
        &mock,
        &format!(
            "key_command = [\"/bin/sh\", \"-c\", \"{fail}\"]\n[harness]\npi = \"{}\"\n",
            pi.display()
        ),
    );
    let models = serde_json::json!({"providers": {
        "corp": {"baseUrl": format!("{}{PI_UPSTREAM_PATH}", mock.url()),
                 "api": "anthropic-messages", "apiKey": format!("!{fail}"),
                 "models": [{"id": "corp-mock"}]}
    }});
    write_pi_models(&w, &models);
    w.chown_all();
    let name = w.session("gwkeycmd");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--harness", "pi"]);
    let p = project.display();
    let script = format!(
        "{REQ_FN}req POST /v1/messages {p}/default.txt
         req POST /pi/corp/v1/messages {p}/corp.txt"
    );
    let run = w
        .run_env(
            &["cage", "exec", &name, "--", "sh", "-c", &script],
            &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
        )
        .ok();
    for (f, words) in [
        ("default", "[gateway] key_file or key_command"),
        ("corp", "pi models.json"),
    ] {
        let t = read(&project.join(format!("{f}.txt")));
        assert_eq!(status(&t), 401, "{f}: {t}\n{}", run.explain());
        assert!(t.contains("\"authentication_error\""), "{f}: {t}");
        assert!(t.contains(words), "{f}: {t}");
        assert!(t.contains("the terminal of the turn"), "{f}: {t}");
        assert!(!t.contains(KEY_COMMAND_SECRET), "{f}: {t}");
    }
    // The machine's own log has it.
    assert!(
        run.stderr().contains(KEY_COMMAND_SECRET),
        "{}",
        run.explain()
    );
    assert!(mock.seen().is_empty(), "{}", mock.explain());
}

#[test]
fn gateway_key_command_output_stays_on_the_machine() {
    key_command_output_stays_on_the_machine(World::new());
}

#[test]
fn gateway_key_command_output_stays_on_the_machine_rootless() {
    key_command_output_stays_on_the_machine(World::rootless());
}

/// `[gateway] key_command` names its program as a shell would: a name is
/// looked up on the PATH of the command holding the turn (docs/gateway.md's own
/// `["pass", "show", "anthropic"]`, and `["sh", "-c", ...]`), and its key
/// reaches the model. A failing one is not run at the cage's request rate:
/// 20 requests in a row run it once or twice (backed off 10 s after a
/// failure, doubling), each answered 401; before, each request ran it.
fn key_command_on_path_and_backed_off(w: World) {
    let mock = Mock::start();
    let bin = w.dir("keybin");
    let runs = bin.join("runs");
    let pass = w.file(
        "keybin/pass",
        &format!(
            "#!/bin/sh\necho \"$*\" >> {}\n\
             [ \"$*\" = 'show anthropic' ] && {{ echo sk-ant-api03-from-pass; exit 0; }}\n\
             echo 'no such entry' >&2; exit 1\n",
            runs.display()
        ),
    );
    std::fs::set_permissions(&pass, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    w.chown_all();
    let path = format!(
        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        bin.display()
    );
    world_for(
        &w,
        &mock,
        "key_command = [\"pass\", \"show\", \"anthropic\"]\n",
    );
    let (name, project) = session_in(&w, "gwkeypath");
    let p = project.display();
    let run = w
        .sh_env(
            &name,
            &format!("{REQ_FN}req POST /v1/messages {p}/ok.txt"),
            &[("PATH", &path)],
        )
        .ok();
    let t = read(&project.join("ok.txt"));
    assert_eq!(status(&t), 200, "{t}\n{}", run.explain());
    let seen = mock.seen();
    assert_eq!(
        seen.last().and_then(|s| s.header("x-api-key")),
        Some("sk-ant-api03-from-pass"),
        "{}\n{}",
        mock.explain(),
        run.explain()
    );
    // sh, by name.
    world_for(
        &w,
        &mock,
        "key_command = [\"sh\", \"-c\", \"echo sk-ant-api03-from-sh\"]\n",
    );
    let run = w
        .sh(&name, &format!("{REQ_FN}req POST /v1/messages {p}/sh.txt"))
        .ok();
    let t = read(&project.join("sh.txt"));
    assert_eq!(status(&t), 200, "{t}\n{}", run.explain());
    assert_eq!(
        mock.seen().last().and_then(|s| s.header("x-api-key")),
        Some("sk-ant-api03-from-sh"),
        "{}",
        mock.explain()
    );

    // A failing one, asked 20 times in a row.
    std::fs::write(&runs, "").unwrap();
    w.chown_all();
    world_for(&w, &mock, "key_command = [\"pass\", \"show\", \"gone\"]\n");
    let before = mock.seen().len();
    let script = format!(
        "{REQ_FN}i=0; while [ $i -lt 20 ]; do stream /v1/messages {p}/r$i.txt; i=$((i+1)); done; \
         req POST /v1/messages {p}/last.txt"
    );
    let run = w.sh_env(&name, &script, &[("PATH", &path)]).ok();
    let t = read(&project.join("last.txt"));
    assert_eq!(status(&t), 401, "{t}\n{}", run.explain());
    let ran = read(&runs).lines().count();
    assert!(
        (1..=2).contains(&ran),
        "a failing key command ran {ran} times for 21 requests:\n{}",
        run.explain()
    );
    assert_eq!(mock.seen().len(), before, "{}", mock.explain());
    assert!(run.stderr().contains("no such entry"), "{}", run.explain());
}

#[test]
fn gateway_key_command_on_path_and_backed_off() {
    key_command_on_path_and_backed_off(World::new());
}

#[test]
fn gateway_key_command_on_path_and_backed_off_rootless() {
    key_command_on_path_and_backed_off(World::rootless());
}

/// The password in an upstream's URL (a pi provider's `baseUrl` with
/// `user:pass@`, a path with a key in it) never reaches the cage: an upstream
/// that cannot be reached is named by its origin alone in the 502 (the
/// whole URL once came back in it).
fn no_upstream_password_reaches_the_cage(w: World) {
    const PASS: &str = "upstream-pass-77c1d";
    const USER: &str = "gwuser-b6";
    let closed = free_port();
    let pi = w.file("tools/pi", "#!/bin/sh\n");
    std::fs::set_permissions(&pi, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // (`[gateway] anthropic_url` takes no user: refused when read.)
    w.write_config(&format!(
        "[gateway]\nanthropic_url = \"http://127.0.0.1:{closed}/base-{PASS}\"\n\
         [harness]\npi = \"{}\"\n",
        pi.display()
    ));
    let models = serde_json::json!({"providers": {
        "corp": {"baseUrl": format!("http://{USER}:{PASS}@127.0.0.1:{closed}/corp/key-{PASS}"),
                 "api": "anthropic-messages", "apiKey": PI_KEY,
                 "models": [{"id": "corp-mock"}]}
    }});
    write_pi_models(&w, &models);
    w.chown_all();
    let name = w.session("gwurlpass");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--harness", "pi"]);
    let p = project.display();
    let script = format!(
        "{REQ_FN}req POST /v1/messages {p}/default.txt
         req POST /pi/corp/v1/messages {p}/corp.txt
         grep -rls {PASS} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | grep -v '^{p}' | head -5
         echo END"
    );
    let run = w
        .run_env(
            &["cage", "exec", &name, "--", "sh", "-c", &script],
            &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
        )
        .ok();
    for f in ["default", "corp"] {
        let t = read(&project.join(format!("{f}.txt")));
        assert_eq!(status(&t), 502, "{f}: {t}\n{}", run.explain());
        assert!(
            t.contains(&format!("could not reach http://127.0.0.1:{closed}")),
            "{f}: {t}"
        );
        assert!(!t.contains(PASS) && !t.contains(USER), "{f}: {t}");
    }
    assert_eq!(run.stdout(), "END\n", "{}", run.explain());
}

#[test]
fn gateway_no_upstream_password_reaches_the_cage() {
    no_upstream_password_reaches_the_cage(World::new());
}

#[test]
fn gateway_no_upstream_password_reaches_the_cage_rootless() {
    no_upstream_password_reaches_the_cage(World::rootless());
}
