//! `shrooms-agent mcp` as a harness drives it, with no container: the
//! built program on pipes, speaking MCP's JSON-RPC lines, and in place of
//! the cage's socket a recording stand-in on a Unix socket in a temporary
//! folder, which answers as the socket and the agents behind it would.
//! Every tool must make the socket's request for it and give back its
//! answer; without a socket, the tools say where they work.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};

/// One request as the stand-in received it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// Path and query, as sent.
    target: String,
    content_type: Option<String>,
    body: Vec<u8>,
}

impl Seen {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// What the stand-in answers: the socket's list of machines, and the
/// agents behind it.
fn answer(method: &str, target: &str, body: &[u8]) -> (u16, String) {
    let task = |state: &str, text: &str| {
        json!({"id": "web:m1", "status": {"state": state,
            "message": {"role": "ROLE_AGENT", "parts": [{"text": text}]}}})
    };
    let rpc = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    let result = |v: Value| json!({"jsonrpc": "2.0", "id": rpc["id"], "result": v}).to_string();
    match (method, target) {
        ("GET", "/machines") => (
            200,
            json!([{"name": "here", "addr": "127.0.0.1:7387"},
                   {"name": "delta", "addr": "[fd00::1]:9000"}])
            .to_string(),
        ),
        ("GET", "/peer/127.0.0.1:7387/v1/sessions") => (
            200,
            json!({"sessions": [
                {"name": "web", "harness": "claude", "state": "running", "dir": "/src/web"},
                {"name": "notes", "harness": "pi", "state": "exited", "dir": "/src/notes"}]})
            .to_string(),
        ),
        ("GET", "/peer/%5Bfd00::1%5D:9000/v1/sessions") => (
            502,
            json!({"error": "machine delta did not answer"}).to_string(),
        ),
        ("POST", "/peer/127.0.0.1:7387/a2a/web") => (
            200,
            result(json!({"task": task("TASK_STATE_COMPLETED", "42")})),
        ),
        ("POST", "/peer/127.0.0.1:7387/a2a") => match rpc["method"].as_str() {
            Some("GetTask") => (200, result(task("TASK_STATE_WORKING", "thinking"))),
            Some("AckTask") => (200, result(task("TASK_STATE_COMPLETED", "42"))),
            _ => (400, "{}".into()),
        },
        ("POST", "/peer/127.0.0.1:7387/v1/tasks/web:m1") => (
            200,
            task("TASK_STATE_COMPLETED", "probe written").to_string(),
        ),
        ("POST", t) if t.starts_with("/peer/127.0.0.1:7387/v1/sessions/web/drop?") => (
            201,
            json!({"path": "/state/uploads/web/from-here_jimmy/notes.txt", "size": 9})
                .to_string(),
        ),
        ("POST", t) if t.starts_with("/peer/127.0.0.1:7387/v1/sessions/shy/drop?") => (
            403,
            json!({"error": "shy takes no files from here/jimmy: `shrooms-agent files allow shy here/jimmy` on here lets them in"})
                .to_string(),
        ),
        _ => (
            404,
            json!({"error": format!("no route {method} {target}")}).to_string(),
        ),
    }
}

/// The stand-in for the cage's socket, serving on `path` until the test
/// ends; what it received is in the returned list.
fn stand_in(path: &Path) -> Arc<Mutex<Vec<Seen>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let s = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::UnixListener::from_std(listener).unwrap();
            loop {
                let Ok((stream, _)) = l.accept().await else {
                    continue;
                };
                let s = s.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let s = s.clone();
                            async move {
                                let method = req.method().to_string();
                                let target = req
                                    .uri()
                                    .path_and_query()
                                    .map(|p| p.as_str().to_string())
                                    .unwrap_or_default();
                                let content_type = req
                                    .headers()
                                    .get("content-type")
                                    .and_then(|v| v.to_str().ok())
                                    .map(str::to_string);
                                let body = req.into_body().collect().await?.to_bytes().to_vec();
                                let (status, text) = answer(&method, &target, &body);
                                s.lock().unwrap().push(Seen {
                                    method,
                                    target,
                                    content_type,
                                    body,
                                });
                                let mut r = hyper::Response::new(Full::new(Bytes::from(text)));
                                *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                                r.headers_mut()
                                    .insert("content-type", "application/json".parse().unwrap());
                                Ok::<_, hyper::Error>(r)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    seen
}

/// A temporary folder of this test's own.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("shrooms-mcp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run `shrooms-agent mcp` (with `extra` args) with `env`, send it the
/// handshake and then `calls` (method, params), one id each from 2 on,
/// and return each answer by its id.
fn session(extra: &[&str], env: &[(&str, &str)], calls: &[(&str, Value)]) -> BTreeMap<u64, Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shrooms-agent"))
        .arg("mcp")
        .args(extra)
        .env_remove("SHROOMS_AGENT_PROXY")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    // The handshake as Claude Code makes it.
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for (i, (method, params)) in calls.iter().enumerate() {
        send(json!({"jsonrpc": "2.0", "id": i + 2, "method": method, "params": params}));
    }
    let mut got = BTreeMap::new();
    while got.len() < calls.len() + 1 {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("answers so far: {got:?}"));
        let v: Value = serde_json::from_str(&line).unwrap();
        let id = v["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("a line without an id: {line}"));
        assert!(got.insert(id, v).is_none(), "two answers to {id}");
    }
    drop(stdin);
    // Its input closed, it ends.
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    got
}

/// A tool call's text, and whether it is an error.
fn told(v: &Value) -> (String, bool) {
    let r = &v["result"];
    assert!(v["error"].is_null(), "a protocol error: {v}");
    (
        r["content"][0]["text"].as_str().unwrap_or("").to_string(),
        r["isError"].as_bool().unwrap_or(false),
    )
}

fn call(name: &str, arguments: Value) -> (&'static str, Value) {
    ("tools/call", json!({"name": name, "arguments": arguments}))
}

#[test]
fn the_six_tools_through_the_cage_socket() {
    let dir = temp_dir("tools");
    let socket = dir.join("proxy.sock");
    let seen = stand_in(&socket);
    let file = dir.join("notes.txt");
    std::fs::write(&file, "the notes").unwrap();
    let file = file.to_string_lossy().into_owned();
    let got = session(
        &[],
        &[
            ("SHROOMS_AGENT_PROXY", &socket.to_string_lossy()),
            ("SHROOMS_AGENT_SESSION", "jimmy"),
        ],
        &[
            ("tools/list", json!({})),
            call("list_agents", json!({})),
            call(
                "ask_agent",
                json!({"to": "here/web", "text": "what is 6*7?", "title": "Six times seven"}),
            ),
            call("task_status", json!({"task": "here/web:m1"})),
            call(
                "task_update",
                json!({"task": "web:m1", "state": "done", "summary": "probe written"}),
            ),
            call("task_ack", json!({"task": "here/web:m1"})),
            call(
                "send_file",
                json!({"to": "here/web", "path": file, "note": "read it"}),
            ),
            call(
                "ask_agent",
                json!({"to": "here/web", "text": "use main", "task": "here/web:m1", "wait": false}),
            ),
            call("send_file", json!({"to": "here/shy", "path": file})),
            call("ask_agent", json!({"to": "nowhere/web", "text": "hi"})),
            call("task_status", json!({"task": "web"})),
        ],
    );

    // The handshake, and the six tools with their schemas.
    let init = &got[&1]["result"];
    assert_eq!(init["serverInfo"]["name"], "shrooms", "{init}");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    let tools = got[&2]["result"]["tools"].as_array().unwrap().clone();
    let by_name: BTreeMap<String, Value> = tools
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t.clone()))
        .collect();
    assert_eq!(
        by_name.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "ask_agent",
            "list_agents",
            "send_file",
            "task_ack",
            "task_status",
            "task_update"
        ]
    );
    let required = |n: &str| by_name[n]["inputSchema"]["required"].clone();
    let properties = |n: &str| {
        let mut p: Vec<String> = by_name[n]["inputSchema"]["properties"]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        p.sort();
        p
    };
    for t in &tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(
            t["description"].as_str().is_some_and(|d| d.len() > 40),
            "{t}"
        );
    }
    assert!(properties("list_agents").is_empty());
    assert_eq!(
        properties("ask_agent"),
        ["task", "text", "title", "to", "wait"]
    );
    assert_eq!(required("ask_agent"), json!(["to", "text"]));
    assert_eq!(properties("task_status"), ["task"]);
    assert_eq!(required("task_status"), json!(["task"]));
    assert_eq!(required("task_ack"), json!(["task"]));
    assert_eq!(required("task_update"), json!(["task", "state", "summary"]));
    assert_eq!(
        by_name["task_update"]["inputSchema"]["properties"]["state"]["enum"],
        json!(["done", "blocked", "failed"])
    );
    assert_eq!(properties("send_file"), ["note", "path", "to"]);
    assert_eq!(required("send_file"), json!(["to", "path"]));

    let seen = seen.lock().unwrap().clone();
    let find = |method: &str, target: &str| -> Vec<Seen> {
        seen.iter()
            .filter(|s| s.method == method && s.target == target)
            .cloned()
            .collect()
    };

    // list_agents: the machines from the socket, then each one's sessions;
    // a machine that did not answer is named, not hidden.
    let (text, err) = told(&got[&3]);
    assert!(!err, "{text}");
    assert_eq!(
        text,
        "here/web\tclaude, running, in /src/web\n\
         here/notes\tpi, exited, in /src/notes\n\
         (left out: its sessions: machine delta answered 502 Bad Gateway: machine delta did not answer)\n"
    );
    assert_eq!(find("GET", "/peer/127.0.0.1:7387/v1/sessions").len(), 1);
    assert_eq!(find("GET", "/peer/%5Bfd00::1%5D:9000/v1/sessions").len(), 1);

    // ask_agent: SendMessage to the session, blocking, with its title.
    let (text, err) = told(&got[&4]);
    assert!(!err, "{text}");
    assert_eq!(text, "task here/web:m1: completed\n\n42\n");
    let sends = find("POST", "/peer/127.0.0.1:7387/a2a/web");
    assert_eq!(sends.len(), 2, "{seen:?}");
    let sends: Vec<Value> = sends.iter().map(Seen::json).collect();
    let first = sends
        .iter()
        .find(|s| s["params"]["message"]["taskId"].is_null())
        .unwrap();
    assert_eq!(first["method"], "SendMessage");
    assert_eq!(
        first["params"]["message"]["parts"][0]["text"],
        "what is 6*7?"
    );
    assert_eq!(first["params"]["message"]["role"], "ROLE_USER");
    assert_eq!(
        first["params"]["message"]["metadata"]["shrooms/title"],
        "Six times seven"
    );
    assert_eq!(first["params"]["configuration"]["blocking"], true);
    // An answer to a task names it, carries no title, and need not wait.
    let answer = sends
        .iter()
        .find(|s| !s["params"]["message"]["taskId"].is_null())
        .unwrap();
    assert_eq!(answer["params"]["message"]["taskId"], "web:m1");
    assert_eq!(answer["params"]["configuration"]["blocking"], false);
    assert!(answer["params"]["message"]["metadata"]["shrooms/title"].is_null());
    assert!(!told(&got[&9]).1);

    // task_status and task_ack: GetTask and AckTask to the machine's /a2a.
    let (text, err) = told(&got[&5]);
    assert!(!err, "{text}");
    assert_eq!(text, "task here/web:m1: working\n\nthinking\n");
    let (text, err) = told(&got[&7]);
    assert!(!err, "{text}");
    assert_eq!(text, "task here/web:m1: completed\n\n42\n");
    let mut methods: Vec<String> = find("POST", "/peer/127.0.0.1:7387/a2a")
        .iter()
        .map(|s| {
            let v = s.json();
            assert_eq!(v["params"]["id"], "web:m1", "{v}");
            v["method"].as_str().unwrap().to_string()
        })
        .collect();
    methods.sort();
    assert_eq!(methods, ["AckTask", "GetTask"]);

    // task_update: this machine's agent (the socket's first), the task's
    // id in the path, the state and summary in the body.
    let (text, err) = told(&got[&6]);
    assert!(!err, "{text}");
    assert_eq!(text, "task here/web:m1: completed\n\nprobe written\n");
    let updates = find("POST", "/peer/127.0.0.1:7387/v1/tasks/web:m1");
    assert_eq!(updates.len(), 1);
    let u = updates[0].json();
    assert_eq!(u["state"], "done");
    assert_eq!(u["summary"], "probe written");
    assert_eq!(updates[0].content_type.as_deref(), Some("application/json"));

    // send_file: the file's bytes to the session's drop, its name and note
    // in the query; a refusal comes back in the receiver's words.
    let (text, err) = told(&got[&8]);
    assert!(!err, "{text}");
    assert_eq!(
        text,
        "sent notes.txt to here/web, kept there at /state/uploads/web/from-here_jimmy/notes.txt\n"
    );
    let drops = find(
        "POST",
        "/peer/127.0.0.1:7387/v1/sessions/web/drop?name=notes%2Etxt&note=read%20it",
    );
    assert_eq!(drops.len(), 1, "{seen:?}");
    assert_eq!(drops[0].body, b"the notes");
    assert_eq!(
        drops[0].content_type.as_deref(),
        Some("application/octet-stream")
    );
    let (text, err) = told(&got[&10]);
    assert!(err, "{text}");
    assert_eq!(
        text,
        "send_file: machine here answered 403 Forbidden: shy takes no files from here/jimmy: \
         `shrooms-agent files allow shy here/jimmy` on here lets them in"
    );

    // Bad arguments: an error the model reads, and nothing sent for them.
    let (text, err) = told(&got[&11]);
    assert!(err, "{text}");
    assert!(text.starts_with("no machine called \"nowhere\""), "{text}");
    let (text, err) = told(&got[&12]);
    assert!(err, "{text}");
    assert!(text.contains("want MACHINE/SESSION:MESSAGE-ID"), "{text}");
    assert!(
        seen.iter().all(|s| !s.target.contains("nowhere")),
        "{seen:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Outside a cage, or with no turn serving the socket, the server still
/// starts and lists its tools; each call says why it cannot work.
#[test]
fn without_the_socket_the_tools_say_why() {
    let dir = temp_dir("nosocket");
    let stale = dir.join("proxy.sock");
    // A socket file nobody listens on: a turn that ended.
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let missing = dir.join("missing.sock");
    for (env, says) in [
        (
            None,
            "SHROOMS_AGENT_PROXY is not set: the shrooms tools work only inside a cage",
        ),
        (
            Some(missing.to_string_lossy().into_owned()),
            "missing.sock: there is no socket there. It is served by the shrooms-agent process \
             holding this cage's turn",
        ),
        (
            Some(stale.to_string_lossy().into_owned()),
            "proxy.sock: nothing answers there. It is served by the shrooms-agent process \
             holding this cage's turn",
        ),
    ] {
        let env: Vec<(&str, &str)> = env
            .as_deref()
            .map(|e| vec![("SHROOMS_AGENT_PROXY", e)])
            .unwrap_or_default();
        let got = session(
            &[],
            &env,
            &[
                ("tools/list", json!({})),
                call("list_agents", json!({})),
                call(
                    "task_update",
                    json!({"task": "web:m1", "state": "done", "summary": "x"}),
                ),
            ],
        );
        assert_eq!(got[&2]["result"]["tools"].as_array().unwrap().len(), 6);
        for id in [3, 4] {
            let (text, err) = told(&got[&id]);
            assert!(err && text.contains(says), "{env:?}: {text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sealed cage's server offers task_update alone: the one request its
/// socket forwards.
#[test]
fn sealed_lists_only_task_update() {
    let got = session(&["--sealed"], &[], &[("tools/list", json!({}))]);
    let names: Vec<&str> = got[&2]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["task_update"]);
}
