//! Who may drive `serve`, attacked from another local user: requests sent
//! blind (connect, send, close at once, never read the answer) by the
//! thousand, connections held until serve is full, and a cage that
//! reaches the host's loopback through podman's network helper.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::Duration;

use crate::common::*;

/// The suite's static probe (tests/it/attacks/probe.c), built into the
/// world's root (mode 0755, so that any user can run it).
fn probe(w: &World) -> PathBuf {
    let p = crate::attacks::build_probe(&w.root);
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A request as bytes, in a file any user can read.
fn request_file(w: &World, name: &str, method: &str, path: &str, body: &str) -> PathBuf {
    let text = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let p = w.file(&format!("blind/{name}"), &text);
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    p
}

/// Run the probe as `user` (a name), with its arguments; its stdout.
fn probe_as(user: &str, probe: &Path, args: &[&str]) -> String {
    let out = Command::new("runuser")
        .args(["-u", user, "--"])
        .arg(probe)
        .args(args)
        .current_dir("/")
        .output()
        .expect("runuser");
    assert!(
        out.status.success(),
        "probe {args:?}: {}",
        show_output(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The number after `word` in the probe's answer.
fn count(answer: &str, word: &str) -> u64 {
    answer
        .split_whitespace()
        .skip_while(|w| *w != word)
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {word} in {answer:?}"))
}

/// `attacker` sends serve `s` change requests blind, thousands of times
/// in a few seconds: remove the session, take it out of its cage, stop
/// it taking caged senders, make a session of the attacker's choosing.
/// Afterwards none of it has happened.
fn blind_requests_change_nothing(w: &World, s: &Serve, attacker: &str) {
    let name = w.session("target");
    let dir = w.dir(&format!("projects/{name}"));
    w.create(&name, &dir, &[]);
    let shown = |w: &World| w.run(&["cage", "show", &name, "--json"]).ok().json();
    let before = shown(w);
    assert_eq!(before["accept_caged"], true, "{before}");
    let planted = format!("planted-{}", std::process::id());
    let planted_dir = w.dir("planted");
    let files = [
        request_file(w, "delete", "DELETE", &format!("/v1/sessions/{name}"), ""),
        request_file(
            w,
            "out",
            "POST",
            &format!("/v1/sessions/{name}/cage"),
            r#"{"cage": null}"#,
        ),
        request_file(
            w,
            "accept",
            "POST",
            &format!("/v1/sessions/{name}/accept-caged"),
            r#"{"accept_caged": false}"#,
        ),
        request_file(
            w,
            "create",
            "POST",
            "/v1/sessions",
            &format!(
                r#"{{"name": "{planted}", "dir": "{}", "cage": null}}"#,
                planted_dir.display()
            ),
        ),
    ];
    let probe = probe(w);
    let port = s.port.to_string();
    let mut args = vec!["blind", "127.0.0.1", &port, "8"];
    let names: Vec<String> = files
        .iter()
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    args.extend(names.iter().map(String::as_str));
    let answer = probe_as(attacker, &probe, &args);
    assert!(
        count(&answer, "SENT") >= 500,
        "too few requests sent to show anything: {answer}"
    );
    // What serve still has in flight finishes.
    thread::sleep(Duration::from_secs(3));
    let log = s.log_text();
    let served: Vec<&str> = log
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 4 && f[4].starts_with('2')
        })
        .collect();
    assert!(
        served.is_empty(),
        "serve answered the other user's blind requests ({answer}):\n{}",
        served.join("\n")
    );
    assert!(w.record_path(&name).exists(), "the session was removed");
    let after = shown(w);
    assert_eq!(after["accept_caged"], true, "accept_caged flipped: {after}");
    assert_eq!(
        w.record(&name)["cage"]["container"],
        before["cage"]["container"],
        "taken out of its cage: {after}"
    );
    assert!(before["cage"]["container"].is_string(), "{before}");
    assert!(
        !w.record_path(&planted).exists(),
        "the attacker made a session"
    );
    assert_eq!(w.containers_of(&name).len(), 1, "its cage is gone");
}

/// The second local user against root's serve (started without a token:
/// every TCP client must have one, so none of these is answered).
#[test]
fn another_users_blind_requests_change_nothing_rootful() {
    let w = World::new();
    let s = w.serve_without_token(&[], &[]);
    blind_requests_change_nothing(&w, &s, &test_user().name);
}

/// The same against the test user's own serve (rootless podman), from a
/// third user (`nobody`).
#[test]
fn another_users_blind_requests_change_nothing_rootless() {
    let w = World::rootless();
    let s = w.serve(&[], &[]);
    blind_requests_change_nothing(&w, &s, "nobody");
}

/// Connection places are counted per user: another user holding more
/// connections than serve has places in all (each sends half a head and
/// waits) fills only its own, and serve's owner is still answered, over
/// TCP and on its Unix socket, never 503.
#[test]
fn another_user_filling_its_places_does_not_shut_the_owner_out() {
    let w = World::new();
    let run = w.dir("run");
    let run_dir = run.to_string_lossy().into_owned();
    let s = w.serve(&[], &[("XDG_RUNTIME_DIR", &run_dir)]);
    let probe = probe(&w);
    let port = s.port.to_string();
    let mut holder = Command::new("runuser")
        .args(["-u", &test_user().name, "--"])
        .arg(&probe)
        .args(["hold", "127.0.0.1", &port, "1100", "8"])
        .current_dir("/")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("runuser");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(count(&line, "OPEN") >= 1000, "{line}");
    let url = format!("{}/v1/harnesses", s.url);
    let socket = run.join(format!("shrooms-agent/serve-{}.sock", s.port));
    let sock = socket.to_string_lossy().into_owned();
    for _ in 0..3 {
        get(&url).is(200);
        assert_eq!(
            curl_status(
                None,
                &["--unix-socket", &sock, "http://localhost/v1/harnesses"]
            ),
            "200",
            "{}",
            s.log_text()
        );
    }
    let _ = holder.wait();
    let log = s.log_text();
    assert!(
        log.contains("this user has 256 connections to this serve already"),
        "{log}"
    );
    assert!(
        !log.lines()
            .any(|l| l.contains(" 127.0.0.1:") && l.contains(" 503 ") && l.contains("serve has")),
        "every place was taken:\n{log}"
    );
}

/// A container whose network helper reaches the host's loopback
/// (slirp4netns with `allow_host_loopback=true`, which podman's
/// containers.conf can set for every container) connects to its user's
/// serve from the helper, a process of that same user: serve refuses it
/// all the same, and nothing changes. The user's own program is answered.
#[test]
fn a_container_reaching_the_hosts_loopback_cannot_drive_its_users_serve() {
    let w = World::rootless();
    let name = w.session("helper");
    let dir = w.dir(&format!("projects/{name}"));
    w.create(&name, &dir, &[]);
    let s = w.serve(&[], &[]);
    let owner = test_user();
    assert_eq!(
        curl_status(Some(owner), &[&format!("{}/v1/sessions", s.url)]),
        "200"
    );
    let container = format!("shrooms-helper-{}", std::process::id());
    let script = format!(
        "wget -q -O- http://10.0.2.2:{port}/v1/sessions; echo \" rc=$?\"; \
         wget -q -O- --post-data '{{\"cage\": null}}' http://10.0.2.2:{port}/v1/sessions/{name}/cage; \
         echo \" rc=$?\"",
        port = s.port
    );
    let out = w.podman(&[
        "run",
        "--rm",
        "--name",
        &container,
        "--network",
        "slirp4netns:allow_host_loopback=true",
        IMAGE,
        "sh",
        "-c",
        &script,
    ]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let log = s.log_text();
    // The connections arrived (the helper reached the host's loopback).
    assert!(
        log.lines().any(|l| l.contains("GET /v1/sessions 403 ")),
        "{}\n{log}",
        show_output(&out)
    );
    assert!(log.contains("network helper"), "{log}");
    assert!(
        !said.contains(&name),
        "the container read the sessions: {said}"
    );
    assert!(
        !log.lines()
            .any(|l| l.contains(&format!("POST /v1/sessions/{name}/cage 2"))),
        "{log}"
    );
    assert!(w.record(&name)["cage"].is_object(), "{}", w.record(&name));
}

/// The test run's containers.conf with `extra` added under its `[engine]`
/// and `[network]` tables, for the test user to read; its path.
fn containers_conf_with(w: &World, engine: &str, network: &str) -> PathBuf {
    let base = fs::read_to_string(std::env::var("CONTAINERS_CONF").unwrap()).unwrap();
    let text = base.replacen("[engine]\n", &format!("[engine]\n{engine}\n"), 1)
        + &format!("\n[network]\n{network}\n");
    let p = w.file("loopback-containers.conf", &text);
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    p
}

/// podman's configuration lets every slirp4netns container reach the
/// host's loopback (`allow_host_loopback=true` in `network_cmd_options`):
/// a plain container does, a cage does not (its own
/// `slirp4netns:allow_host_loopback=false` comes after and wins), and
/// `doctor` passes its network. pasta options that open the host's
/// loopback are refused by `cage create` and failed by `doctor`, whatever
/// the network (the check reads the files as podman reads them).
#[test]
fn a_podman_configuration_that_opens_the_hosts_loopback() {
    let w = World::rootless();
    if rootless_network() == "pasta" {
        // The podman-5 lane: pasta options that open the host's loopback.
        let conf = containers_conf_with(&w, "", "pasta_options = [\"--map-gw\"]");
        w.set_env("CONTAINERS_CONF", &conf.to_string_lossy());
        let name = w.session("mapgw");
        let dir = w.dir(&format!("projects/{name}"));
        let r = w
            .run(&["cage", "create", &name, "--dir", &dir.to_string_lossy()])
            .code_is(1);
        assert!(r.stderr().contains("--map-gw"), "{}", r.explain());
        assert!(w.containers_of(&name).is_empty(), "{}", r.explain());
        assert!(!w.record_path(&name).exists(), "{}", r.explain());
        let d = w.run(&["doctor"]);
        assert!(d.stdout().contains("--map-gw"), "{}", d.explain());
        return;
    }
    let conf = containers_conf_with(
        &w,
        "network_cmd_options = [\"allow_host_loopback=true\"]",
        "",
    );
    w.set_env("CONTAINERS_CONF", &conf.to_string_lossy());
    let l = Listener::any();
    let probe = nc_probe("10.0.2.2", l.port);
    let conf_env = format!("CONTAINERS_CONF={}", conf.display());
    let plain = as_user(
        w.user,
        "env",
        &[
            &conf_env,
            podman_program(),
            "run",
            "--rm",
            "--network",
            "slirp4netns",
            IMAGE,
            "sh",
            "-c",
            &probe,
        ],
        &[],
    );
    assert!(
        String::from_utf8_lossy(&plain.stdout).contains(&format!("CONNECTED-{}", l.port)),
        "the configuration does not open the host's loopback, so this proves nothing:\n{}",
        show_output(&plain)
    );
    let name = w.session("loopback");
    let dir = w.dir(&format!("projects/{name}"));
    // Open: refused by the cage's own network, not by a policy.
    w.create(&name, &dir, &["--net", "open"]);
    let r = w.sh(&name, &probe);
    assert!(
        r.stdout().contains(&format!("REFUSED-{}", l.port)),
        "{}",
        r.explain()
    );
    // The cage closes it itself, so doctor does not name the option.
    let d = w.run(&["doctor"]);
    assert!(
        !d.stdout().contains("allow_host_loopback"),
        "{}",
        d.explain()
    );
}

/// A listener that keeps the head of every request it gets, answering 404.
fn recording_listener(addr: &str, port: u16) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind((addr, port))
        .unwrap_or_else(|e| panic!("bind {addr}:{port}: {e}"));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && c.read(&mut b).is_ok_and(|n| n == 1) {
                head.push(b[0]);
            }
            kept.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).into_owned());
            let _ = c.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
            );
        }
    });
    seen
}

/// A `[machines]` URL without a port is port 7387, listed and used alike:
/// `outbox send` goes to 127.0.0.2:7387 with the machine's token, and
/// nothing reaches port 80 of that address.
#[test]
fn a_machine_url_without_a_port_is_port_7387_for_its_token_too() {
    let w = World::new();
    let on_80 = recording_listener("127.0.0.2", 80);
    let on_7387 = recording_listener("127.0.0.2", 7387);
    let token = w.file("far-token", "far-s3cret\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    let sealed_token = w.file("sealed-token", "sk-ant-oat01-test-token\n");
    fs::set_permissions(&sealed_token, fs::Permissions::from_mode(0o600)).unwrap();
    w.write_config(&format!(
        "[machines]\nfar = {{ url = \"http://127.0.0.2\", token_file = \"{}\" }}\n",
        token.display()
    ));
    let name = w.session("portless");
    let dir = w.dir(&format!("projects/{name}"));
    w.create(
        &name,
        &dir,
        &[
            "--sealed",
            "--sealed-token",
            &sealed_token.to_string_lossy(),
        ],
    );
    fs::write(
        w.home.join("shrooms-outbox").join(&name).join("report.md"),
        "# findings\n",
    )
    .unwrap();
    let r = w.run(&["outbox", "send", &name, "far/inbox"]);
    assert_ne!(r.code(), 0, "{}", r.explain());
    assert!(r.stderr().contains("127.0.0.2:7387"), "{}", r.explain());
    let got = on_7387.lock().unwrap().clone();
    assert!(
        got.iter().any(|h| h
            .to_ascii_lowercase()
            .contains("authorization: bearer far-s3cret")),
        "{got:?}\n{}",
        r.explain()
    );
    assert!(
        on_80.lock().unwrap().is_empty(),
        "{:?}",
        on_80.lock().unwrap()
    );
}

/// A connection's place is given back once its answer is written and
/// serve's side shut, not when the client gets to closing its own: a
/// client that reads each answer and leaves the connection open a moment
/// (as a busy client closes late, while serve lingers on it) is not
/// refused for the connections it is done with. One address other than
/// loopback has 16 places: 24 requests in a row from it, each connection
/// left open after its answer, are all answered 200 (before, the 17th was
/// refused 503 while serve lingered on the first ones).
#[test]
fn answered_connections_left_open_take_no_place() {
    use std::io::Write;
    let w = World::new();
    let token = w.file("serve-token", "s3cret-token\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    // Beyond loopback, serve listens on agent_port only.
    let s = w.serve_listening(
        "0.0.0.0",
        w.agent_port,
        &["--token-file", &token.to_string_lossy()],
        &[],
    );
    // Each request takes milliseconds: the first ones are still open
    // at both ends (serve lingers 2 s) when the 17th is sent.
    let mut left_open = Vec::new();
    for i in 0..24 {
        let mut c = std::net::TcpStream::connect((HOST_ADDR, s.port)).unwrap();
        c.write_all(
            b"GET /v1/harnesses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-token\r\n\r\n",
        )
        .unwrap();
        // Until serve's side is shut: the answer is whole.
        let answer = read_until_closed(&c, Duration::from_secs(10));
        assert!(
            answer.starts_with("HTTP/1.1 200 "),
            "{i}: {answer:?}\n{}",
            s.log_text()
        );
        left_open.push(c);
    }
}
