//! The shrooms tools inside a real cage: the shrooms-agent program, put in
//! the state folder's `tools/` that every cage mounts, runs there as `shrooms-agent mcp`
//! and answers an MCP client (these tests, on its standard input and
//! output through `cage exec`) with its six tools. The image is the Debian
//! one the harness tests use: the program needs the C library it was built
//! against, which a busybox image lacks.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

/// Speak MCP to `shrooms-agent mcp` in the cage of session `name`: the
/// handshake, then `calls`; the answers by id (1 is the handshake's).
fn mcp_in_cage(w: &World, name: &str, calls: &[(&str, Value)]) -> Vec<Value> {
    let program = w.tools_program().to_string_lossy().into_owned();
    let mut c = w.command(&["cage", "exec", name, "--", &program, "mcp"]);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut lines = vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "e2e", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    for (i, (method, params)) in calls.iter().enumerate() {
        lines.push(json!({"jsonrpc": "2.0", "id": i + 2, "method": method, "params": params}));
    }
    for l in &lines {
        writeln!(stdin, "{l}").unwrap();
    }
    stdin.flush().unwrap();
    let mut got: Vec<Value> = Vec::new();
    while got.len() < calls.len() + 1 {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => got.push(serde_json::from_str(&line).unwrap()),
            Err(_) => {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "answers so far: {got:?}\nstderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    got.sort_by_key(|v| v["id"].as_u64());
    got
}

fn lists_its_tools(w: World) {
    let (_, image) = real_claude();
    let name = w.session("mcp");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--image", &image]);
    // This machine's agent API, where the socket sends `list_agents`.
    let _serve = w.serve_for_cages("here", "");
    let got = mcp_in_cage(
        &w,
        &name,
        &[
            ("tools/list", json!({})),
            (
                "tools/call",
                json!({"name": "list_agents", "arguments": {}}),
            ),
        ],
    );
    assert_eq!(got[0]["result"]["serverInfo"]["name"], "shrooms", "{got:?}");
    let mut names: Vec<&str> = got[1]["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{got:?}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ask_agent",
            "list_agents",
            "send_file",
            "task_ack",
            "task_status",
            "task_update"
        ]
    );
    // Through the cage's socket, which `cage exec` serves for the turn, to
    // this machine's serve: the session itself is among the agents.
    let text = got[2]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert_ne!(got[2]["result"]["isError"], true, "{got:?}");
    assert!(text.contains(&format!("/{name}\t")), "{text}");
}

#[test]
fn mcp_in_a_cage_lists_its_six_tools() {
    lists_its_tools(World::new());
}

#[test]
fn mcp_in_a_cage_lists_its_six_tools_rootless() {
    lists_its_tools(World::rootless());
}

/// `task_update` with a task id as the apps write it (`SESSION:MESSAGE-ID`)
/// from `shrooms-agent mcp` in a real cage reaches this machine's agent (a
/// recording one at the agent port) through the real socket, ordinary and
/// sealed, at `/v1/tasks/SESSION:MESSAGE-ID`, with the cage's session
/// written in (the socket once refused the `:` with a 403, so the tool
/// never got through).
fn task_update_reaches_the_agent(w: World, sealed: bool) {
    let (_, image) = real_claude();
    let agent = crate::socket::Agent::on(w.agent_port);
    let name = w.session(if sealed { "mcptasks" } else { "mcptask" });
    let project = w.dir(&format!("projects/{name}"));
    let token = w.file("sealed-token", "sk-ant-oat01-test-token-for-mcp\n");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    w.chown_all();
    let token = token.to_string_lossy().into_owned();
    let mut flags = vec!["--image", image.as_str()];
    if sealed {
        flags.extend(["--sealed", "--sealed-token", &token]);
    }
    w.create(&name, &project, &flags);
    let got = mcp_in_cage(
        &w,
        &name,
        &[(
            "tools/call",
            json!({"name": "task_update", "arguments": {
                "task": "review:m1", "state": "done", "summary": "all good"}}),
        )],
    );
    assert_ne!(got[1]["result"]["isError"], true, "{got:?}");
    let seen = agent.seen();
    assert_eq!(seen.len(), 1, "{got:?}\n{seen:?}");
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].target, "/v1/tasks/review:m1", "{seen:?}");
    let body: Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(body["state"], "done", "{body}");
    assert_eq!(body["summary"], "all good", "{body}");
    assert_eq!(body["session"], name.as_str(), "{body}");
    assert_eq!(
        seen[0].headers.get("x-shrooms-caged").map(String::as_str),
        Some(name.as_str())
    );
}

#[test]
fn mcp_task_update_reaches_the_agent() {
    task_update_reaches_the_agent(World::new(), false);
}

#[test]
fn mcp_task_update_reaches_the_agent_rootless() {
    task_update_reaches_the_agent(World::rootless(), false);
}

#[test]
fn mcp_task_update_reaches_the_agent_sealed() {
    task_update_reaches_the_agent(World::new(), true);
}
