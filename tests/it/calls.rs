//! End-to-end tests of what a command costs in podman calls, against real
//! podman through a logging podman (the config's `podman` key names a
//! program that writes its argv to a log, then runs podman): podman's
//! facts are kept in the state folder and asked again when a
//! containers.conf changes; `cage exec` on a stopped and on a running cage
//! makes the calls its job needs and no more; serve's `GET /v1/sessions`
//! answers from its live view.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::*;

/// A podman that logs each call (its words joined by spaces) to `log`,
/// then is the real one.
struct Logged {
    log: PathBuf,
}

impl Logged {
    fn new(w: &World) -> Logged {
        let program = w.root.join("logging-podman");
        let log = w.root.join("podman-calls.log");
        fs::write(
            &program,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
                log.display(),
                podman_program()
            ),
        )
        .unwrap();
        fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
        w.write_config(&format!("podman = \"{}\"", program.display()));
        w.chown_all();
        Logged { log }
    }

    /// The calls since the last `clear`, one line each.
    fn calls(&self) -> Vec<String> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Their first words (with `unshare`'s program's name).
    fn verbs(&self) -> Vec<String> {
        self.calls()
            .iter()
            .map(|c| {
                let mut w = c.split(' ');
                let verb = w.next().unwrap_or("").to_string();
                match (verb.as_str(), w.next()) {
                    ("unshare", Some(p)) => {
                        format!("unshare {}", p.rsplit('/').next().unwrap_or(p))
                    }
                    _ => verb,
                }
            })
            .collect()
    }

    fn clear(&self) {
        let _ = fs::remove_file(&self.log);
        // Rootless, the test user writes it again.
        fs::write(&self.log, "").unwrap();
        fs::set_permissions(&self.log, fs::Permissions::from_mode(0o666)).unwrap();
    }

    fn infos(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.starts_with("info"))
            .count()
    }
}

/// A containers.conf of the world's own, the test run's with this
/// seccomp profile (a fact `podman info` reports).
fn conf_with_profile(w: &World, profile: &str) -> PathBuf {
    let base = fs::read_to_string(std::env::var("CONTAINERS_CONF").unwrap()).unwrap();
    let text = base.replacen(
        "[containers]\n",
        &format!("[containers]\nseccomp_profile = \"{profile}\"\n"),
        1,
    );
    assert!(text.contains(profile), "no [containers] in:\n{base}");
    let path = w.root.join("containers.conf");
    fs::write(&path, text).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    path
}

fn kept_profile(w: &World) -> String {
    let text = fs::read_to_string(w.state.join("podman-facts.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["facts"]["seccomp_profile"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// podman is asked about itself once; the next command uses what it said;
/// a changed containers.conf makes the next command ask again, and see
/// the change; `doctor` always asks.
fn facts_follow_containers_conf(w: World) {
    let podman = Logged::new(&w);
    let a = w.file("profile-a.json", "{}");
    let b = w.file("profile-b.json", "{}");
    let conf = conf_with_profile(&w, &a.to_string_lossy());
    w.set_env("CONTAINERS_CONF", &conf.to_string_lossy());
    podman.clear();
    w.run(&["cage", "ls", "--json"]).ok();
    assert_eq!(podman.infos(), 1, "{:?}", podman.calls());
    assert_eq!(kept_profile(&w), a.to_string_lossy());
    assert_eq!(
        mode_of(&w.state.join("podman-facts.json")) & 0o777,
        0o600,
        "the kept facts are the user's alone"
    );
    // Nothing changed: not asked again.
    w.run(&["cage", "ls", "--json"]).ok();
    assert_eq!(podman.infos(), 1, "{:?}", podman.calls());
    assert_eq!(
        podman.calls().len(),
        3,
        "`cage ls` is more than one `podman ps`: {:?}",
        podman.calls()
    );
    // The containers.conf changes: the next command sees it.
    let _ = conf_with_profile(&w, &b.to_string_lossy());
    w.chown_all();
    w.run(&["cage", "ls", "--json"]).ok();
    assert_eq!(podman.infos(), 2, "{:?}", podman.calls());
    assert_eq!(kept_profile(&w), b.to_string_lossy());
    // A damaged file is asked past, and written again.
    fs::write(w.state.join("podman-facts.json"), "{ not json").unwrap();
    w.chown_all();
    w.run(&["cage", "ls", "--json"]).ok();
    assert_eq!(podman.infos(), 3, "{:?}", podman.calls());
    assert_eq!(kept_profile(&w), b.to_string_lossy());
    // The doctor asks afresh.
    w.run(&["doctor"]);
    assert_eq!(podman.infos(), 4, "{:?}", podman.calls());
}

#[test]
fn podmans_facts_are_kept_until_its_containers_conf_changes() {
    facts_follow_containers_conf(World::new());
}

#[test]
fn podmans_facts_are_kept_until_its_containers_conf_changes_rootless() {
    facts_follow_containers_conf(World::rootless());
}

/// `cage exec` on a stopped cage, then on a running one: `podman start`
/// (a running cage stays as it is), one inspect, the rules (rootless
/// through `podman unshare`, with the model gateway's listener), the
/// `podman exec`, the `podman stop`. No `podman info`, no second inspect.
fn exec_makes_the_calls_it_needs(w: World) {
    let podman = Logged::new(&w);
    let name = w.session("calls");
    let dir = w.dir("calls");
    w.create(&name, &dir, &[]);
    let expected: Vec<&str> = if w.user.is_some() {
        vec![
            "start",
            "inspect",
            "unshare nsenter",
            "unshare stat",
            "unshare nsenter",
            "exec",
            "stop",
        ]
    } else {
        vec!["start", "inspect", "exec", "stop"]
    };
    podman.clear();
    let r = w.sh(&name, "echo ran").ok();
    assert!(r.stdout().contains("ran"), "{}", r.explain());
    assert_eq!(podman.verbs(), expected, "stopped: {:#?}", podman.calls());
    assert_ne!(
        w.container_state(&w.container(&name)).as_deref(),
        Some("running")
    );

    w.run(&["cage", "start", &name]).ok();
    assert_eq!(
        w.container_state(&w.container(&name)).as_deref(),
        Some("running")
    );
    podman.clear();
    let r = w.sh(&name, "echo ran").ok();
    assert!(r.stdout().contains("ran"), "{}", r.explain());
    assert_eq!(podman.verbs(), expected, "running: {:#?}", podman.calls());
}

#[test]
fn exec_makes_the_calls_it_needs_and_no_more() {
    exec_makes_the_calls_it_needs(World::new());
}

#[test]
fn exec_makes_the_calls_it_needs_and_no_more_rootless() {
    exec_makes_the_calls_it_needs(World::rootless());
}

/// Waits until `f` holds, for at most `within`.
#[allow(dead_code)]
fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
