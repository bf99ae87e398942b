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

/// A GET's body, as the world's user (root's serve wants its token, which
/// `get` sends; a user's serve answers that user).
fn fetch(w: &World, url: &str) -> String {
    match w.user {
        None => get(url).is(200).body,
        Some(u) => {
            let out = as_user(Some(u), "curl", &["-sf", "--max-time", "20", url], &[]);
            assert!(out.status.success(), "{url}: {}", show_output(&out));
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    }
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
    let name = created(&w, "egress", &["--net", "open"]);
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
    wait_until("the listener to end", Duration::from_secs(20), || {
        cmdlines_containing(&format!("--session {name} ")).is_empty()
    });
    assert!(!pid_file.exists());
    // A started cage has its listener until it is stopped.
    w.run(&["cage", "start", &name]).ok();
    // (Rootless, `podman unshare` waits beside it, with its command line.)
    assert!(
        !cmdlines_containing(&format!("egress-listen --log {} ", path.display())).is_empty(),
        "no listener runs for the started cage"
    );
    w.run(&["cage", "stop", &name]).ok();
    wait_until("the listener to end", Duration::from_secs(20), || {
        cmdlines_containing(&format!("--session {name} ")).is_empty()
    });

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

/// A sealed cage is refused a stand-in LAN address and let through to the
/// internet stand-in: the log has both, with their rules; serve's route
/// and status page show them. Its log, filled to its bound before, is
/// rotated by the listener, not grown past it.
fn sealed_cage_is_logged(w: World) {
    let other = Listener::any();
    let name = w.session("egress-sealed");
    let dir = fs::canonicalize(w.dir("egress-sealed-project")).unwrap();
    let token = w.file(&format!("{name}.token"), "sk-ant-oat01-egress-test\n");
    fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // The log, full but for a line.
    let path = log_path(&w, &name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let filler = format!(
        "{{\"time\":\"2026-01-01T00:00:00.000Z\",\"session\":\"{name}\",\"address\":\"192.0.2.1\",\
         \"name\":null,\"port\":80,\"protocol\":\"tcp\",\"allowed\":true,\"rule\":\"open\"}}\n"
    );
    let bound: usize = 1024 * 1024;
    let full = filler.repeat((bound - 50) / filler.len());
    fs::write(&path, &full).unwrap();
    w.chown_all();
    w.create(
        &name,
        &dir,
        &["--sealed", "--sealed-token", &token.to_string_lossy()],
    );

    let script = format!(
        "nc -w 3 {LAN_ADDR} {port} </dev/null 2>&1; {probe}",
        port = other.port,
        probe = nc_probe(HOST_ADDR, other.port),
    );
    let run = w.sh(&name, &script).ok();
    assert!(
        run.stdout().contains(&format!("CONNECTED-{}", other.port)),
        "{}",
        run.explain()
    );
    let mut got = Vec::new();
    wait_until("the log's lines", Duration::from_secs(5), || {
        got = lines(&path);
        has(&got, LAN_ADDR, other.port, false, "private")
            && has(&got, HOST_ADDR, other.port, true, "default")
    });
    // Rotated at the bound: the old lines are in the older file, neither
    // file is past the bound.
    let older = w
        .state
        .join("sessions")
        .join(format!("{name}.egress.1.jsonl"));
    assert_eq!(fs::read_to_string(&older).unwrap(), full);
    assert!(fs::metadata(&path).unwrap().len() < 4096, "{got:?}");

    let s = w.serve(&[], &[]);
    let body = fetch(&w, &format!("{}/v1/sessions/{name}/egress", s.url));
    let r: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let all = r["connections"].as_array().unwrap().clone();
    assert!(all.len() > 1000, "the rotated lines are not served");
    assert!(
        has(&all, LAN_ADDR, other.port, false, "private"),
        "{:?}",
        &all[all.len() - 3..]
    );
    let page = fetch(&w, &format!("{}/", s.url));
    let want = format!("refused {LAN_ADDR}:{} tcp (private)", other.port);
    assert!(page.contains(&want), "{want:?} not on the page:\n{page}");
}

#[test]
fn a_sealed_cage_s_connections_are_logged() {
    sealed_cage_is_logged(World::new());
}

#[test]
fn a_sealed_rootless_cage_s_connections_are_logged() {
    sealed_cage_is_logged(World::rootless());
}
