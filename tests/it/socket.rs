//! End-to-end tests of the cage's socket (`/run/shrooms-agent/proxy.sock`),
//! asked from inside real cages: what passes reaches a recording agent on
//! this machine with the socket's identity, what does not is 403 and
//! never reaches it, and `serve` takes a caged drop only as the socket
//! names it and only where caged senders are accepted.
//!
//! The test image is busybox, whose nc has no Unix sockets: a small client
//! compiled here with `gcc -static` sends each request file to the socket
//! and writes the raw answer beside it.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use crate::common::*;
// The gateway tests' recording of one request, and its reader.
use crate::gateway::{Seen, read_request};

const CLIENT_C: &str = r#"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
/* usage: uclient SOCKET REQUEST-FILE: send the file, print the answer. */
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int f = open(argv[2], O_RDONLY);
    if (f < 0) { perror("open"); return 2; }
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a; memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 3; }
    char buf[65536]; ssize_t n;
    while ((n = read(f, buf, sizeof buf)) > 0) {
        ssize_t off = 0;
        while (off < n) { ssize_t w = write(s, buf + off, n - off); if (w <= 0) return 4; off += w; }
    }
    while ((n = read(s, buf, sizeof buf)) > 0) fwrite(buf, 1, n, stdout);
    return 0;
}
"#;

/// A cage that holds the socket's connections and memory: it opens N
/// connections, each a request head that promises a 16 MiB body to a
/// route that passes, then BYTES of the body; writes "holding" to MARK,
/// and holds them all for SECS seconds.
const FLOOD_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
/* usage: flood SOCKET N BYTES SECS MARK */
int main(int argc, char **argv) {
    if (argc != 6) return 2;
    signal(SIGPIPE, SIG_IGN);
    int n = atoi(argv[2]), bytes = atoi(argv[3]), secs = atoi(argv[4]);
    static char buf[65536];
    memset(buf, ' ', sizeof buf);
    const char *head = "POST /peer/127.0.0.1/a2a HTTP/1.1\r\nHost: cage\r\n"
        "Content-Type: application/json\r\nContent-Length: 16777216\r\n\r\n";
    int open_ok = 0;
    for (int i = 0; i < n; i++) {
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un a; memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
        struct timeval tv = {2, 0};
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) continue;
        if (write(s, head, strlen(head)) <= 0) continue;
        int sent = 0;
        while (sent < bytes) {
            int k = bytes - sent < (int)sizeof buf ? bytes - sent : (int)sizeof buf;
            ssize_t w = write(s, buf, k);
            if (w <= 0) break;
            sent += w;
        }
        if (sent == bytes) open_ok++;
    }
    FILE *m = fopen(argv[5], "w");
    fprintf(m, "holding %d\n", open_ok);
    fclose(m);
    sleep(secs);
    return 0;
}
"#;

/// A client that sends part of a request head and waits: it prints how
/// many seconds passed until the socket closed the connection. MODE:
/// `half` (half a head at once), `trickle` (a byte every 700 ms, never
/// its end), `after` (a whole request, then half of a second one).
const SLOWHEAD_C: &str = r#"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <pthread.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
static int s; static const char *mode;
static void *writer(void *x) {
    const char *half = "GET /machines HTTP/1.1\r\nHost: ca";
    if (strcmp(mode, "after") == 0) {
        const char *whole = "GET /machines HTTP/1.1\r\nHost: cage\r\n\r\n";
        write(s, whole, strlen(whole));
        sleep(1);
    }
    if (strcmp(mode, "trickle") == 0) {
        for (int i = 0; i < 60; i++) {
            if (write(s, half + (i % 20), 1) <= 0) break;
            usleep(700000);
        }
    } else write(s, half, strlen(half));
    return x;
}
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    signal(SIGPIPE, SIG_IGN);
    mode = argv[2];
    s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a; memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 3; }
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t w; pthread_create(&w, 0, writer, 0);
    char buf[4096];
    struct timeval tv = {60, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (read(s, buf, sizeof buf) > 0) {}
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%s %ld\n", mode, (long)(t1.tv_sec - t0.tv_sec));
    fflush(stdout);
    _exit(0);
}
"#;

/// The client, compiled once per test process.
fn client() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compiled("uclient", CLIENT_C))
}

/// The flood, compiled once per test process.
fn flood() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compiled("flood", FLOOD_C))
}

/// The slow head, compiled once per test process.
fn slowhead() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compiled("slowhead", SLOWHEAD_C))
}

/// A static program compiled from `source`.
fn compiled(name: &str, source: &str) -> PathBuf {
    {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("socket-client-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let src = dir.join(format!("{name}.c"));
        fs::write(&src, source).unwrap();
        let out = dir.join(name);
        let r = Command::new("gcc")
            .args(["-static", "-O1", "-pthread", "-o"])
            .arg(&out)
            .arg(&src)
            .output()
            .expect("gcc is not installed: run scripts/test (scripts/setup-host installs it)");
        assert!(r.status.success(), "gcc: {}", show_output(&r));
        fs::set_permissions(&out, fs::Permissions::from_mode(0o755)).unwrap();
        out
    }
}

/// A recording agent API on 127.0.0.1: it answers every request 200 with
/// JSON, and with headers the socket must not pass back.
pub struct Agent {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Agent {
    pub fn on(port: u16) -> Agent {
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { continue };
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut r = BufReader::new(c.try_clone().unwrap());
                    if let Some(got) = read_request(&mut r) {
                        s.lock().unwrap().push(got);
                        let body = r#"{"recorded":true}"#;
                        let mut c = c;
                        let _ = write!(
                            c,
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                             Cache-Control: no-store\r\nX-Leak: from-the-agent\r\n\
                             Set-Cookie: a=b\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                });
            }
        });
        Agent { port, seen }
    }
    fn any() -> Agent {
        Self::on(0)
    }
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// The headers a cage forges on every request: none may reach an agent.
const FORGED: &str = "Authorization: Bearer forged-by-the-cage\r\n\
    X-Shrooms-Caged: boss\r\nX-Shrooms-From-Session: boss\r\nCookie: c=forged\r\n\
    X-Other: forged\r\n";

/// A raw request (the client sends it as it is).
fn request(method: &str, target: &str, body: &str) -> String {
    let mut r = format!("{method} {target} HTTP/1.1\r\nHost: cage\r\n{FORGED}");
    if !body.is_empty() || method == "POST" {
        r.push_str(&format!(
            "Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    r.push_str("Connection: close\r\n\r\n");
    r.push_str(body);
    r
}

/// Send every request from inside the session's cage, in one turn; the
/// raw answers by key.
fn ask(w: &World, name: &str, project: &Path, reqs: &[(&str, String)]) -> BTreeMap<String, String> {
    let dir = project.join("reqs");
    fs::create_dir_all(&dir).unwrap();
    fs::copy(client(), project.join("uclient")).unwrap();
    for (key, text) in reqs {
        fs::write(dir.join(format!("{key}.req")), text).unwrap();
    }
    w.chown_all();
    let script = format!(
        "cd {}; ls -l /run/shrooms-agent/ > reqs/ls.txt; for f in reqs/*.req; do \
         ./uclient \"$SHROOMS_AGENT_PROXY\" \"$f\" > \"$f.out\" 2>&1; done; echo done",
        project.display()
    );
    let r = w.sh(name, &script);
    assert!(r.stdout().contains("done"), "{}", r.explain());
    let ls = fs::read_to_string(dir.join("ls.txt")).unwrap_or_default();
    assert!(ls.contains("proxy.sock"), "no socket in the cage: {ls}");
    reqs.iter()
        .map(|(key, _)| {
            (
                key.to_string(),
                fs::read_to_string(dir.join(format!("{key}.req.out"))).unwrap(),
            )
        })
        .collect()
}

fn status(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

fn header_names(answer: &str) -> Vec<String> {
    let head = answer.split_once("\r\n\r\n").map_or(answer, |(h, _)| h);
    let mut v: Vec<String> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, _)| n.trim().to_ascii_lowercase())
        .collect();
    v.sort();
    v
}

/// A world whose "this machine" is a recording agent (at the config's
/// agent port, where `serve` would listen), with a second recording agent
/// in `[machines]`, given a token.
fn two_agents(w: &mut World) -> (Agent, Agent) {
    let here = Agent::on(w.agent_port);
    let rec = Agent::any();
    let token = w.file("rec-token", "machine-token-for-rec\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    w.chown_all();
    w.write_config(&format!(
        "machine_name = \"here\"\n[machines]\nrec = {{ url = \"http://127.0.0.1:{}\", token_file = {:?} }}\n",
        rec.port,
        token.to_string_lossy()
    ));
    (here, rec)
}

fn routes_pass_with_the_sockets_identity(mut w: World) {
    let (here, rec) = two_agents(&mut w);
    let name = w.session("sock");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &[]);
    let r = format!("/peer/127.0.0.1:{}", rec.port);
    let h = "/peer/127.0.0.1";
    let send = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"shrooms/from":"beta/boss","keep":1}}}}"#;
    let stream = r#"{"jsonrpc":"2.0","id":2,"method":"SendStreamingMessage","params":{"message":{"role":"user","parts":[]}}}"#;
    let get_task = r#"{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{"id":"t1"}}"#;
    let ack_task = r#"{"jsonrpc":"2.0","id":4,"method":"AckTask","params":{"id":"t1"}}"#;
    let cancel = r#"{"jsonrpc":"2.0","id":5,"method":"CancelTask","params":{"id":"t1"}}"#;
    let update = r#"{"state":"completed","session":"boss"}"#;
    let allowed: Vec<(&str, String)> = vec![
        (
            "a-sessions",
            request("GET", &format!("{r}/v1/sessions"), ""),
        ),
        (
            "a-card",
            request("GET", &format!("{r}/.well-known/agent-card.json"), ""),
        ),
        (
            "a-card-web",
            request(
                "GET",
                &format!("{r}/a2a/web/.well-known/agent-card.json"),
                "",
            ),
        ),
        ("a-send", request("POST", &format!("{r}/a2a"), send)),
        ("a-stream", request("POST", &format!("{r}/a2a/web"), stream)),
        (
            "a-gettask",
            request("POST", &format!("{r}/a2a/web"), get_task),
        ),
        ("a-acktask", request("POST", &format!("{r}/a2a"), ack_task)),
        (
            "a-drop",
            request(
                "POST",
                &format!("{r}/v1/sessions/web/drop?name=f.txt"),
                "file-body",
            ),
        ),
        (
            "a-update",
            request("POST", &format!("{h}/v1/tasks/t1"), update),
        ),
    ];
    let refused: Vec<(&str, String)> = vec![
        (
            "r-create",
            request(
                "POST",
                &format!("{r}/v1/sessions"),
                r#"{"name":"x","dir":"/"}"#,
            ),
        ),
        (
            "r-delete",
            request("DELETE", &format!("{r}/v1/sessions/web"), ""),
        ),
        (
            "r-move",
            request(
                "POST",
                &format!("{r}/v1/sessions/web/cage"),
                r#"{"cage":null}"#,
            ),
        ),
        (
            "r-limits",
            request(
                "POST",
                &format!("{r}/v1/sessions/web/cage/limits"),
                r#"{"memory":"1g"}"#,
            ),
        ),
        (
            "r-accept",
            request(
                "POST",
                &format!("{r}/v1/sessions/web/accept-caged"),
                r#"{"accept_caged":true}"#,
            ),
        ),
        (
            "r-build",
            request(
                "POST",
                &format!("{r}/v1/images/build"),
                r#"{"image":"workbench"}"#,
            ),
        ),
        (
            "r-outbox",
            request(
                "POST",
                &format!("{r}/v1/sessions/web/outbox/send"),
                r#"{"to":"a/b"}"#,
            ),
        ),
        (
            "r-cancel",
            request("POST", &format!("{h}/v1/tasks/t1/cancel"), "{}"),
        ),
        ("r-cancel-rpc", request("POST", &format!("{r}/a2a"), cancel)),
        (
            "r-update-elsewhere",
            request("POST", &format!("{r}/v1/tasks/t1"), update),
        ),
        (
            "r-show",
            request("GET", &format!("{r}/v1/sessions/web"), ""),
        ),
        ("r-doc", request("GET", &format!("{h}/v1/openapi.json"), "")),
        (
            "r-dotdot",
            request(
                "POST",
                &format!("{r}/v1/sessions/../sessions/web/drop?name=f"),
                "x",
            ),
        ),
        (
            "r-unknown-machine",
            request("GET", "/peer/10.9.9.9/v1/sessions", ""),
        ),
        ("r-not-peer", request("GET", "/v1/sessions", "")),
    ];
    let mut all = vec![("machines", request("GET", "/machines", ""))];
    all.extend(allowed.iter().cloned());
    all.extend(refused.iter().cloned());
    let got = ask(&w, &name, &project, &all);
    let explain = || format!("{got:#?}\nhere: {:#?}\nrec: {:#?}", here.seen(), rec.seen());

    // GET /machines: this machine first, then [machines].
    let m = &got["machines"];
    assert_eq!(status(m), 200, "{}", explain());
    let list: serde_json::Value = serde_json::from_str(body(m)).unwrap();
    assert_eq!(
        list,
        serde_json::json!([
            {"name": "here", "addr": "127.0.0.1"},
            {"name": "rec", "addr": format!("127.0.0.1:{}", rec.port)},
        ])
    );

    for (key, _) in &allowed {
        let a = &got[*key];
        assert_eq!(status(a), 200, "{key}: {}", explain());
        // Back: status, Content-Type and Cache-Control only (and the framing).
        let names: Vec<String> = header_names(a)
            .into_iter()
            .filter(|n| {
                !matches!(
                    n.as_str(),
                    "content-length" | "date" | "transfer-encoding" | "connection"
                )
            })
            .collect();
        assert_eq!(names, ["cache-control", "content-type"], "{key}: {a}");
        assert_eq!(body(a), r#"{"recorded":true}"#, "{key}");
    }
    for (key, _) in &refused {
        assert_eq!(status(&got[*key]), 403, "{key}: {}", explain());
    }

    // The agents saw exactly the allowed requests, with the socket's identity.
    let seen_rec = rec.seen();
    let seen_here = here.seen();
    assert_eq!(seen_rec.len(), allowed.len() - 1, "{}", explain());
    assert_eq!(seen_here.len(), 1, "{}", explain());
    for s in seen_rec.iter().chain(&seen_here) {
        assert_eq!(
            s.headers.get("x-shrooms-caged").map(String::as_str),
            Some(name.as_str()),
            "{s:?}"
        );
        assert!(!s.headers.contains_key("cookie"), "{s:?}");
        assert!(!s.headers.contains_key("x-other"), "{s:?}");
        assert!(!format!("{s:?}").contains("forged-by-the-cage"), "{s:?}");
    }
    for s in &seen_rec {
        assert_eq!(
            s.headers.get("authorization").map(String::as_str),
            Some("Bearer machine-token-for-rec"),
            "{s:?}"
        );
    }
    assert!(!seen_here[0].headers.contains_key("authorization"));
    let find = |method: &str, target: &str, needle: &str| -> Seen {
        seen_rec
            .iter()
            .chain(&seen_here)
            .find(|s| s.method == method && s.target == target && s.body.contains(needle))
            .unwrap_or_else(|| panic!("{method} {target} {needle} never arrived: {}", explain()))
            .clone()
    };
    find("GET", "/v1/sessions", "");
    find("GET", "/.well-known/agent-card.json", "");
    find("GET", "/a2a/web/.well-known/agent-card.json", "");
    let s = find("POST", "/a2a", "\"SendMessage\"");
    let v: serde_json::Value = serde_json::from_str(&s.body).unwrap();
    assert_eq!(
        v["params"]["message"]["metadata"]["shrooms/from"],
        format!("here/{name}")
    );
    assert_eq!(v["params"]["message"]["metadata"]["keep"], 1);
    let s = find("POST", "/a2a/web", "SendStreamingMessage");
    let v: serde_json::Value = serde_json::from_str(&s.body).unwrap();
    assert_eq!(
        v["params"]["message"]["metadata"]["shrooms/from"],
        format!("here/{name}")
    );
    find("POST", "/a2a/web", "GetTask");
    find("POST", "/a2a", "AckTask");
    let s = find("POST", "/v1/sessions/web/drop?name=f.txt", "file-body");
    assert_eq!(s.body, "file-body");
    assert_eq!(s.headers.get("x-shrooms-from-session"), Some(&name));
    let s = find("POST", "/v1/tasks/t1", "completed");
    let v: serde_json::Value = serde_json::from_str(&s.body).unwrap();
    assert_eq!(v["session"], name.as_str());
    // The socket is gone with the turn.
    let cage = w.record(&name)["cage"]["container"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !w.state
            .join("cages")
            .join(&cage)
            .join("proxy/proxy.sock")
            .exists()
    );
}

#[test]
fn socket_routes_rootful() {
    routes_pass_with_the_sockets_identity(World::new());
}

#[test]
fn socket_routes_rootless() {
    routes_pass_with_the_sockets_identity(World::rootless());
}

/// A sealed cage's socket: the machines and its own task updates only.
#[test]
fn socket_sealed_gets_only_machines_and_task_updates() {
    let mut w = World::new();
    let (here, rec) = two_agents(&mut w);
    let name = w.session("sealsock");
    let project = w.dir(&format!("projects/{name}"));
    let token = w.file("sealed-token", "sk-ant-oat01-test-token-for-the-socket\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    w.create(
        &name,
        &project,
        &["--sealed", "--sealed-token", &token.to_string_lossy()],
    );
    let r = format!("/peer/127.0.0.1:{}", rec.port);
    let h = "/peer/127.0.0.1";
    let send =
        r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[]}}}"#;
    let got = ask(
        &w,
        &name,
        &project,
        &[
            ("machines", request("GET", "/machines", "")),
            (
                "update",
                request(
                    "POST",
                    &format!("{h}/v1/tasks/t9"),
                    r#"{"state":"completed"}"#,
                ),
            ),
            ("sessions", request("GET", &format!("{h}/v1/sessions"), "")),
            (
                "card",
                request("GET", &format!("{r}/.well-known/agent-card.json"), ""),
            ),
            ("send", request("POST", &format!("{r}/a2a"), send)),
            (
                "drop",
                request("POST", &format!("{h}/v1/sessions/web/drop?name=f"), "x"),
            ),
        ],
    );
    let explain = || format!("{got:#?}\nhere: {:#?}\nrec: {:#?}", here.seen(), rec.seen());
    assert_eq!(status(&got["machines"]), 200, "{}", explain());
    assert_eq!(status(&got["update"]), 200, "{}", explain());
    for k in ["sessions", "card", "send", "drop"] {
        assert_eq!(status(&got[k]), 403, "{k}: {}", explain());
    }
    assert!(rec.seen().is_empty(), "{}", explain());
    let seen = here.seen();
    assert_eq!(seen.len(), 1, "{}", explain());
    assert_eq!(seen[0].target, "/v1/tasks/t9");
    let v: serde_json::Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(v["session"], name.as_str());
}

fn caged_drop_to_serve(w: World) {
    let mut serve = w.serve_for_cages("here", "");
    let sender = w.session("sender");
    let project = w.dir(&format!("projects/{sender}"));
    w.create(&sender, &project, &[]);
    let inbox = w.session("inbox");
    let inbox_dir = w.dir(&format!("projects/{inbox}"));
    w.create(&inbox, &inbox_dir, &[]);
    // It takes files from the sender; caged senders are another question.
    w.run(&["files", "allow", &inbox, &format!("here/{sender}")])
        .ok();
    w.run(&["cage", "accept-caged", &inbox, "off"]).ok();
    assert_eq!(
        w.run(&["cage", "show", &inbox, "--json"]).ok().json()["accept_caged"],
        false
    );
    let drop = |file: &str| {
        request(
            "POST",
            &format!("/peer/127.0.0.1/v1/sessions/{inbox}/drop?name={file}"),
            "caged-file-body",
        )
    };
    let got = ask(&w, &sender, &project, &[("off", drop("one.txt"))]);
    assert_eq!(status(&got["off"]), 403, "{got:#?}\n{}", serve.log_text());
    assert!(body(&got["off"]).contains("caged"), "{got:#?}");
    w.run(&["cage", "accept-caged", &inbox, "on"]).ok();
    assert_eq!(
        w.run(&["cage", "show", &inbox, "--json"]).ok().json()["accept_caged"],
        true
    );
    let got = ask(&w, &sender, &project, &[("on", drop("two.txt"))]);
    assert_eq!(status(&got["on"]), 201, "{got:#?}\n{}", serve.log_text());
    // Credited to the caged session, not to the "boss" the cage wrote.
    let kept = w
        .state
        .join("uploads")
        .join(&inbox)
        .join("drop")
        .join(format!("from-here_{sender}"))
        .join("two.txt");
    assert_eq!(
        fs::read_to_string(&kept).unwrap(),
        "caged-file-body",
        "{got:#?}"
    );
    assert!(
        !w.state
            .join("uploads")
            .join(&inbox)
            .join("drop/from-here_boss")
            .exists()
    );
    serve.stop(std::time::Duration::from_secs(30));
}

#[test]
fn socket_caged_drop_rootful() {
    caged_drop_to_serve(World::new());
}

#[test]
fn socket_caged_drop_rootless() {
    caged_drop_to_serve(World::rootless());
}

/// serve's side, asked directly: a change carrying X-Shrooms-Caged is
/// refused, a route serve does not have is its own 404, and accept_caged is
/// set and shown over HTTP.
#[test]
fn serve_refuses_changes_from_caged_sessions() {
    let w = World::new();
    let mut serve = w.serve(&[], &[]);
    let name = w.session("acc");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &[]);
    let call = |method: &str, path: &str, body: &str, caged: bool| -> (u16, String) {
        let mut c = TcpStream::connect(("127.0.0.1", serve.port)).unwrap();
        let extra = if caged {
            "X-Shrooms-Caged: web\r\n"
        } else {
            ""
        };
        write!(
            c,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{}{extra}Content-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            owner_auth(serve.port),
            body.len()
        )
        .unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        (status(&s), body_of(&s))
    };
    fn body_of(s: &str) -> String {
        body(s).to_string()
    }
    let show = call("GET", &format!("/v1/sessions/{name}"), "", false);
    assert_eq!(show.0, 200);
    let v: serde_json::Value = serde_json::from_str(&show.1).unwrap();
    assert_eq!(
        v["accept_caged"], true,
        "a caged session takes caged senders by default"
    );
    let path = format!("/v1/sessions/{name}/accept-caged");
    let r = call("POST", &path, r#"{"accept_caged":false}"#, true);
    assert_eq!(r.0, 403, "{r:?}");
    assert!(r.1.contains("caged session"), "{r:?}");
    for (m, p, b) in [
        ("DELETE", format!("/v1/sessions/{name}"), ""),
        (
            "POST",
            format!("/v1/sessions/{name}/cage/limits"),
            r#"{"memory":"1g"}"#,
        ),
        (
            "POST",
            "/v1/sessions".to_string(),
            r#"{"name":"x","dir":"/"}"#,
        ),
    ] {
        assert_eq!(call(m, &p, b, true).0, 403, "{m} {p}");
    }
    assert!(w.record_path(&name).exists());
    // A2A is not serve's: its own 404, caged or not.
    assert_eq!(call("POST", "/a2a", "{}", true).0, 404);
    assert_eq!(call("POST", "/v1/tasks/t1", "{}", true).0, 404);
    // Set over HTTP, without the header.
    let r = call("POST", &path, r#"{"accept_caged":false}"#, false);
    assert_eq!(r.0, 200, "{r:?}");
    assert_eq!(w.record(&name)["accept_caged"], false);
    serve.stop(std::time::Duration::from_secs(30));
}

/// What the socket forwards is what it checked, read as a receiver that
/// folds the case of keys reads it (Go's encoding/json, the reference
/// agent's): a second spelling of `method` (`Method`, `METHOD`, the same
/// key twice), a second `meſsage`, a `ſession` beside the socket's own
/// are refused and never reach an agent (each once passed as what the
/// socket read first, and a Go agent ran the other); what passes reaches
/// the agent written again from what was read, not as the cage wrote it.
fn forwards_what_it_checked(mut w: World) {
    let (here, rec) = two_agents(&mut w);
    let name = w.session("sockjson");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &[]);
    let r = format!("/peer/127.0.0.1:{}", rec.port);
    let h = "/peer/127.0.0.1";
    let refused: Vec<(&str, String)> = vec![
        (
            "method-case",
            request(
                "POST",
                &format!("{r}/a2a"),
                r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","Method":"CancelTask","params":{"id":"t1"}}"#,
            ),
        ),
        (
            "method-upper",
            request(
                "POST",
                &format!("{r}/a2a"),
                r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","METHOD":"CancelTask","params":{"id":"t1"}}"#,
            ),
        ),
        (
            "method-twice",
            request(
                "POST",
                &format!("{r}/a2a"),
                r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"CancelTask","params":{"id":"t1"}}"#,
            ),
        ),
        (
            "message-long-s",
            request(
                "POST",
                &format!("{r}/a2a"),
                r#"{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"role":"user","parts":[]},"meſsage":{"role":"user","parts":[],"metadata":{"shrooms/from":"rec/boss"}}}}"#,
            ),
        ),
        (
            "session-long-s",
            request(
                "POST",
                &format!("{h}/v1/tasks/t1"),
                r#"{"state":"completed","ſession":"boss"}"#,
            ),
        ),
        (
            "metadata-case",
            request(
                "POST",
                &format!("{r}/a2a"),
                r#"{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"parts":[],"Metadata":{"shrooms/from":"rec/boss"}}}}"#,
            ),
        ),
    ];
    let mut all = refused.clone();
    all.push((
        "ok",
        request(
            "POST",
            &format!("{r}/a2a"),
            "{ \"jsonrpc\" : \"2.0\", \"id\": 3,\n \"method\": \"Get\\u0054ask\", \"params\": {\"id\": \"t1\"} }",
        ),
    ));
    let got = ask(&w, &name, &project, &all);
    let explain = || format!("{got:#?}\nhere: {:#?}\nrec: {:#?}", here.seen(), rec.seen());
    for (key, _) in &refused {
        assert_eq!(status(&got[*key]), 400, "{key}: {}", explain());
        assert!(
            body(&got[*key]).contains("spellings"),
            "{key}: {}",
            explain()
        );
    }
    assert_eq!(status(&got["ok"]), 200, "{}", explain());
    assert!(here.seen().is_empty(), "{}", explain());
    let seen = rec.seen();
    assert_eq!(seen.len(), 1, "{}", explain());
    assert_eq!(
        seen[0].body,
        r#"{"id":3,"jsonrpc":"2.0","method":"GetTask","params":{"id":"t1"}}"#,
        "{}",
        explain()
    );
}

#[test]
fn socket_forwards_what_it_checked_rootful() {
    forwards_what_it_checked(World::new());
}

#[test]
fn socket_forwards_what_it_checked_rootless() {
    forwards_what_it_checked(World::rootless());
}

/// The resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A cage opens 200 connections to its socket, each promising a 16 MiB
/// body and sending 900 KiB of it, and holds them: the turn's process
/// serves a fixed number of connections at once and reads no body before
/// its route could pass, so it grows by little (it once read up to 16 MiB
/// of each, 21 to 206 MiB with such a cage), and the socket still answers.
fn bounds_connections_and_memory(mut w: World) {
    let (_here, _rec) = two_agents(&mut w);
    let name = w.session("sockflood");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &[]);
    fs::copy(flood(), project.join("flood")).unwrap();
    fs::copy(client(), project.join("uclient")).unwrap();
    fs::write(
        project.join("machines.req"),
        request("GET", "/machines", ""),
    )
    .unwrap();
    w.chown_all();
    let p = project.display();
    let (ready, holding) = (project.join("ready"), project.join("holding"));
    let script = format!(
        "cd {p}; echo > ready; sleep 3; ./flood \"$SHROOMS_AGENT_PROXY\" 200 921600 8 holding; \
         i=0; while [ $i -lt 20 ]; do i=$((i+1)); \
         ./uclient \"$SHROOMS_AGENT_PROXY\" machines.req > machines.out 2>&1; \
         grep -q '^HTTP/1.1 200' machines.out && break; sleep 1; done; echo $i > tries; echo done"
    );
    let child = w
        .direct_command(&["cage", "exec", &name, "--", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_until("the turn ready", std::time::Duration::from_secs(60), || {
        ready.exists()
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before = rss_kib(pid);
    wait_until(
        "the flood holding",
        std::time::Duration::from_secs(90),
        || holding.exists(),
    );
    std::thread::sleep(std::time::Duration::from_secs(1));
    let during = rss_kib(pid);
    let run = finish("cage exec (flood)", child).ok();
    let grown = during.saturating_sub(before);
    eprintln!(
        "the turn's process: {before} KiB, {during} KiB with the flood ({})",
        fs::read_to_string(&holding).unwrap_or_default().trim()
    );
    assert!(before > 0 && during > 0, "{}", run.explain());
    assert!(
        grown < 64 * 1024,
        "the turn's process grew by {grown} KiB: {}",
        run.explain()
    );
    // The flood's connections end with it, each in its own task; until
    // their slots are free the socket closes a new connection at once, so
    // the cage asks again, once a second, for up to 20 s.
    let answer = fs::read_to_string(project.join("machines.out")).unwrap_or_default();
    let tries = fs::read_to_string(project.join("tries")).unwrap_or_default();
    eprintln!("answered at try {}", tries.trim());
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "no answer after the flood ({} tries): {answer:?}\n{}",
        tries.trim(),
        run.explain()
    );
}

#[test]
fn socket_bounds_connections_and_memory_rootful() {
    bounds_connections_and_memory(World::new());
}

#[test]
fn socket_bounds_connections_and_memory_rootless() {
    bounds_connections_and_memory(World::rootless());
}

/// A session of a long name (its container's name, in the socket's path
/// on the machine, makes that path longer than a Unix socket's 107 bytes)
/// still gets its socket: every turn of it once failed.
fn long_name_gets_its_socket(w: World) {
    let name = w.session("a-session-name-as-long-as-one-may-be-given-x");
    assert!(name.len() > 50 && name.len() <= 63, "{name}");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &[]);
    let got = ask(
        &w,
        &name,
        &project,
        &[("machines", request("GET", "/machines", ""))],
    );
    assert_eq!(status(&got["machines"]), 200, "{got:#?}");
    let cage = w.container(&name);
    let path = w.state.join("cages").join(&cage).join("proxy/proxy.sock");
    assert!(path.as_os_str().len() > 107, "{}", path.display());
}

#[test]
fn socket_long_session_name_rootful() {
    long_name_gets_its_socket(World::new());
}

#[test]
fn socket_long_session_name_rootless() {
    long_name_gets_its_socket(World::rootless());
}

/// The socket's head deadline holds for a request head that does not come
/// whole: half of one, one trickled a byte at a time, half of a second one
/// after a whole one; each connection is closed within the deadline (10 s)
/// of when it began (or its last answer).
fn head_deadline_holds(w: World) {
    let name = w.session("sockhead");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &[]);
    fs::copy(slowhead(), project.join("slowhead")).unwrap();
    w.chown_all();
    let script = format!(
        "cd {}; for m in half trickle after; do ./slowhead \"$SHROOMS_AGENT_PROXY\" $m > $m.out & done; wait; cat *.out",
        project.display()
    );
    let r = w.sh(&name, &script);
    let mut closed: Vec<(String, u64)> = r
        .stdout()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(m, s)| (m.to_string(), s.parse().unwrap()))
        .collect();
    closed.sort();
    assert_eq!(closed.len(), 3, "{}", r.explain());
    for (mode, secs) in &closed {
        let most = if mode == "after" { 14 } else { 13 };
        assert!(
            (9..=most).contains(secs),
            "{mode}: closed after {secs} s: {}",
            r.explain()
        );
    }
}

#[test]
fn socket_head_deadline_holds_rootful() {
    head_deadline_holds(World::new());
}

#[test]
fn socket_head_deadline_holds_rootless() {
    head_deadline_holds(World::rootless());
}

/// A turn whose socket cannot be served (a folder where the socket goes,
/// as a cage's root may leave one in the folder it has mounted) fails
/// whole: the cage stopped again, and the env file written for the turn
/// just before taken back with it.
fn unserved_socket_takes_the_env_file_back(w: World) {
    let name = w.session("sockfail");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &[]);
    let cage = w.container(&name);
    let env_file = w.state.join("cages").join(format!("{cage}.env"));
    let in_the_way = w.state.join("cages").join(&cage).join("proxy/proxy.sock");
    fs::create_dir_all(in_the_way.join("kept")).unwrap();
    w.chown_all();
    let r = w.run(&["cage", "exec", &name, "--", "true"]);
    assert_ne!(r.code(), 0, "{}", r.explain());
    assert!(
        r.stderr().contains("serving the cage's socket")
            && r.stderr().contains("the cage was stopped again"),
        "{}",
        r.explain()
    );
    assert!(!env_file.exists(), "the env file was left: {}", r.explain());
    assert_eq!(w.container_state(&cage).as_deref(), Some("exited"));
    // Taken out of the way, the next turn runs.
    fs::remove_dir_all(&in_the_way).unwrap();
    w.run(&["cage", "exec", &name, "--", "true"]).ok();
    assert!(env_file.is_file());
}

#[test]
fn socket_unserved_takes_the_turn_back_rootful() {
    unserved_socket_takes_the_env_file_back(World::new());
}

#[test]
fn socket_unserved_takes_the_turn_back_rootless() {
    unserved_socket_takes_the_env_file_back(World::rootless());
}
