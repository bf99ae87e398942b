//! The egress log: each connection a cage opens or is refused, written
//! outside the cage by a listener of ours in its network namespace; shown by
//! `cage history --net`, serve's route and the status page; bounded; out of
//! the cage's reach.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

fn log_path(w: &World, name: &str) -> PathBuf {
    w.state
        .join("sessions")
        .join(format!("{name}.egress.jsonl"))
}

/// The log's lines, as JSON.
fn lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Is there a line for this destination with this verdict and rule?
fn has(lines: &[Value], addr: &str, port: u16, allowed: bool, rule: &str) -> bool {
    lines.iter().any(|l| {
        l["address"] == addr
            && l["port"] == port
            && l["protocol"] == "tcp"
            && l["allowed"] == allowed
            && l["rule"] == rule
    })
}

/// A session with a project folder, created.
fn created(w: &World, base: &str, extra: &[&str]) -> String {
    let name = w.session(base);
    let dir = fs::canonicalize(w.dir(&format!("{base}-project"))).unwrap();
    w.create(&name, &dir, extra);
    name
}

/// An ordinary cage connects to a listener and is refused the agent port:
/// the log has both, with their verdicts and rules; root in the cage can
/// neither see the log nor take the NFLOG group from our listener; the
/// listener ends with the cage; `cage history --net` shows the lines; `cage
/// rm` removes the log.
fn open_cage_is_logged(w: World) {
    let other = Listener::any();
    let name = created(&w, "egress", &[]);
    let script = format!(
        "nc -w 3 {HOST_ADDR} {agent} </dev/null 2>&1; {probe}; \
         ls {state} 2>&1 | head -1",
        agent = w.agent_port,
        probe = nc_probe(HOST_ADDR, other.port),
        state = w.state.join("sessions").display(),
    );
    let run = w.sh(&name, &script).ok();
    let out = run.stdout();
    assert!(out.contains("Connection refused"), "{}", run.explain());
    assert!(
        out.contains(&format!("CONNECTED-{}", other.port)),
        "{}",
        run.explain()
    );
    // The state folder, where the log is, is not in the cage.
    assert!(
        out.contains("No such file or directory"),
        "{}",
        run.explain()
    );

    let path = log_path(&w, &name);
    let mut got = Vec::new();
    wait_until("the log's lines", Duration::from_secs(5), || {
        got = lines(&path);
        has(&got, HOST_ADDR, w.agent_port, false, "agent-port")
            && has(&got, HOST_ADDR, other.port, true, "open")
    });
    assert!(got.iter().all(|l| l["session"] == name.as_str()), "{got:?}");
    assert!(
        got.iter()
            .all(|l| l["time"].as_str().is_some_and(|t| t.ends_with('Z'))),
        "{got:?}"
    );
    assert_eq!(mode_of(&path), 0o600);

    // The turn is over and the cage stopped: its listener is gone too.
    let pid_file = w.state.join("sessions").join(format!("{name}.egress.pid"));
    wait_until("the listener to end", Duration::from_secs(5), || {
        cmdlines_containing(&format!("--session {name} ")).is_empty()
    });
    assert!(!pid_file.exists());

    let h = w
        .run(&["cage", "history", &name, "--net", "--json"])
        .ok()
        .json();
    let entries = h["connections"].as_array().unwrap();
    assert!(
        entries.iter().any(|l| l["port"] == w.agent_port
            && l["allowed"] == false
            && l["rule"] == "agent-port"),
        "{h}"
    );
    let text = w.run(&["cage", "history", &name, "--net"]).ok().stdout();
    assert!(
        text.contains(&format!(
            "refused {HOST_ADDR}:{} tcp (agent-port)",
            w.agent_port
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("allowed {HOST_ADDR}:{} tcp (open)", other.port)),
        "{text}"
    );

    w.run(&["cage", "rm", &name]).ok();
    assert!(!path.exists());
}

#[test]
fn an_open_cage_s_connections_are_logged() {
    open_cage_is_logged(World::new());
}

#[test]
fn an_open_rootless_cage_s_connections_are_logged() {
    open_cage_is_logged(World::rootless());
}
