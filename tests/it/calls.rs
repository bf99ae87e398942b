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
/// (a running cage stays as it is), the rules (rootless through `podman
/// unshare`, with the egress log's listener where none runs yet, and the
/// model gateway's listener), the `podman exec`, the `podman stop`. No
/// `podman info`, and no inspect: the first process's PID is in the file
/// podman writes at each start (`--pidfile`).
fn exec_makes_the_calls_it_needs(w: World) {
    let podman = Logged::new(&w);
    let name = w.session("calls");
    let dir = w.dir("calls");
    w.create(&name, &dir, &[]);
    let expected: Vec<&str> = if w.user.is_some() {
        vec![
            "start",
            "unshare nsenter",
            "unshare stat",
            "unshare nsenter",
            "exec",
            "stop",
        ]
    } else {
        vec!["start", "exec", "stop"]
    };
    // A cage just started has no egress log listener yet: one is started.
    let mut first = expected.clone();
    if w.user.is_some() {
        first.insert(3, "unshare nsenter");
    }
    podman.clear();
    let r = w.sh(&name, "echo ran").ok();
    assert!(r.stdout().contains("ran"), "{}", r.explain());
    assert_eq!(podman.verbs(), first, "stopped: {:#?}", podman.calls());
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

/// How soon serve's answers show what podman did behind its back: about
/// a second on a quiet machine (podman 4.3 without systemd polls its
/// events file every 250 ms), given room here for a test beside others on
/// two busy cores.
const SEEN_WITHIN: Duration = Duration::from_secs(10);

/// A cage stopped behind serve's back (`podman stop` directly) shows
/// stopped in serve's answers within a second or so, from podman's events.
fn serve_sees_a_stop_behind_its_back(w: World) {
    let name = w.session("live");
    let dir = w.dir("live");
    w.create(&name, &dir, &[]);
    w.run(&["cage", "start", &name]).ok();
    let container = w.container(&name);
    // Rootless, serve answers root's requests (the test's) with its token.
    let token = "live-token";
    let file = w.file("serve-token", &format!("{token}\n"));
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    let s = w.serve(&["--token-file", &file.to_string_lossy()], &[]);
    let auth = format!("Bearer {token}");
    let get = |url: &str| http("GET", url, None, &[("authorization", &auth)]);
    let url = format!("{}/v1/sessions/{name}", s.url);
    let shown = get(&url).is(200).json();
    assert_eq!(shown["cage"]["state"], "running", "{shown:#}");
    assert_eq!(shown["cage"]["running"], true, "{shown:#}");
    let stopped = w.podman(&["stop", "-t", "0", &container]);
    assert!(stopped.status.success(), "{}", show_output(&stopped));
    let at = Instant::now();
    let seen = eventually(SEEN_WITHIN, || {
        get(&url).json()["cage"]["state"] == "exited"
    });
    let after = at.elapsed();
    assert!(
        seen,
        "still {:#} after {after:?}\n{}",
        get(&url).json(),
        s.log_text()
    );
    let list = get(&format!("{}/v1/sessions", s.url)).is(200).json();
    let row = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name.as_str())
        .cloned()
        .unwrap();
    assert_eq!(
        (&row["cage"]["state"], &row["cage"]["running"]),
        (&serde_json::json!("exited"), &serde_json::json!(false)),
        "{list:#}"
    );
    // Started again behind its back, and removed: seen too.
    let started = w.podman(&["start", &container]);
    assert!(started.status.success(), "{}", show_output(&started));
    assert!(
        eventually(SEEN_WITHIN, || get(&url).json()["cage"]["state"]
            == "running"),
        "{}",
        s.log_text()
    );
    // podman 4.3 sometimes fails to unmount a container's shm just after a
    // start ("device or resource busy", seen under load): the test's own
    // removal is tried again, the tool is not what is tested here.
    let mut rm = w.podman(&["rm", "-f", "-t", "0", &container]);
    for _ in 0..3 {
        if rm.status.success() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
        // --ignore: the failed try may have removed it after all.
        rm = w.podman(&["rm", "-f", "--ignore", "-t", "0", &container]);
    }
    assert!(rm.status.success(), "{}", show_output(&rm));
    assert!(
        eventually(SEEN_WITHIN, || get(&url).json()["cage"]["state"]
            == "missing"),
        "{}",
        s.log_text()
    );
}

/// serve keeps its listing's answer until a record changes: a session
/// made, changed and removed by the CLI while serve runs shows in the very
/// next listing, with no wait.
fn serve_sees_a_record_change_behind_its_back(w: World) {
    let name = w.session("records");
    let dir = w.dir("records");
    let token = "records-token";
    let file = w.file("serve-token", &format!("{token}\n"));
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    let s = w.serve(&["--token-file", &file.to_string_lossy()], &[]);
    let auth = format!("Bearer {token}");
    let url = format!("{}/v1/sessions", s.url);
    let row = || {
        let list = http("GET", &url, None, &[("authorization", &auth)])
            .is(200)
            .json();
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name.as_str())
            .cloned()
    };
    assert_eq!(row(), None);
    // Asked twice: the answer is kept, and must still change below.
    assert_eq!(row(), None);
    w.create(&name, &dir, &[]);
    let made = row().unwrap_or_else(|| panic!("not listed after its create\n{}", s.log_text()));
    assert_eq!(
        made["tokens"]["budget"],
        serde_json::Value::Null,
        "{made:#}"
    );
    w.run(&["cage", "limits", &name, "--tokens", "5k"]).ok();
    let changed = row().unwrap();
    assert_eq!(changed["tokens"]["budget"], 5000, "{changed:#}");
    w.run(&["cage", "rm", &name]).ok();
    assert_eq!(row(), None, "still listed after its rm\n{}", s.log_text());
}

#[test]
fn serve_sees_a_record_changed_behind_its_back_in_the_next_listing() {
    serve_sees_a_record_change_behind_its_back(World::new());
}

#[test]
fn serve_sees_a_record_changed_behind_its_back_in_the_next_listing_rootless() {
    serve_sees_a_record_change_behind_its_back(World::rootless());
}

#[test]
fn serve_sees_a_cage_stopped_behind_its_back_within_a_second() {
    serve_sees_a_stop_behind_its_back(World::new());
}

#[test]
fn serve_sees_a_cage_stopped_behind_its_back_within_a_second_rootless() {
    serve_sees_a_stop_behind_its_back(World::rootless());
}

/// With a podman that only answers (the config's `podman` a script that
/// logs its calls and answers from files), 100 sessions: after serve's
/// start (its `podman ps` and `podman events`), `GET /v1/sessions`,
/// `GET /v1/sessions/{name}` and the status page make no podman call at all.
#[test]
fn listing_a_hundred_sessions_over_http_calls_no_podman() {
    let w = World::new();
    let real = |args: &[&str]| {
        let out = w.podman(args);
        assert!(out.status.success(), "{}", show_output(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let answers = w.dir("answers");
    fs::write(answers.join("info"), real(&["info", "--format", "json"])).unwrap();
    fs::write(
        answers.join("image"),
        real(&["image", "inspect", "--format", "json", "--", IMAGE]),
    )
    .unwrap();
    let program = w.root.join("answering-podman");
    let log = w.root.join("podman-calls.log");
    let a = answers.display();
    fs::write(
        &program,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\n\
             case \"$1\" in\n\
             info) cat '{a}/info' ;;\n\
             image) cat '{a}/image' ;;\n\
             create) echo 0123abcd ;;\n\
             ps) cat '{a}/ps' ;;\n\
             events) exec sleep 600 ;;\n\
             *) echo \"Error: no answer for $*\" >&2; exit 99 ;;\n\
             esac\n",
            log = log.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
    w.write_config(&format!("podman = \"{}\"", program.display()));
    let dir = w.dir("many");
    let mut ps = Vec::new();
    let mut names = Vec::new();
    for i in 0..100 {
        // Not `w.session`: there is no real container to clean up.
        let name = format!("many{i}-{}", std::process::id());
        w.create(&name, &dir, &[]);
        let container = w.container(&name);
        ps.push(
            serde_json::json!({"Id": "0123abcd", "Names": [container], "Image": IMAGE,
            "State": "exited", "Labels": {"xyz.vpavlin.shrooms.session": name}}),
        );
        names.push(name);
    }
    // Its containers are the fake's: nothing for the world to remove.
    fs::write(answers.join("ps"), serde_json::Value::from(ps).to_string()).unwrap();
    let s = w.serve(&[], &[]);
    let calls = || fs::read_to_string(&log).unwrap_or_default();
    assert!(
        eventually(Duration::from_secs(5), || calls().contains("events")),
        "serve did not follow podman's events:\n{}",
        calls()
    );
    let at_start = calls();
    // The status page (`GET /`) too: each session's state from the view.
    let page = get(&format!("{}/", s.url)).is(200);
    assert_eq!(
        page.body
            .matches(r#"<span class="state other">exited</span>"#)
            .count(),
        100,
        "{}",
        page.body
    );
    for _ in 0..3 {
        let list = get(&format!("{}/v1/sessions", s.url)).is(200).json();
        let sessions = list["sessions"].as_array().unwrap();
        assert_eq!(sessions.len(), 100, "{list:#}");
        assert!(
            sessions.iter().all(|r| r["cage"]["state"] == "exited"),
            "{list:#}"
        );
    }
    let one = get(&format!("{}/v1/sessions/{}", s.url, names[7]))
        .is(200)
        .json();
    assert_eq!(one["cage"]["state"], "exited", "{one:#}");
    assert_eq!(
        calls().strip_prefix(at_start.as_str()).unwrap_or("?"),
        "",
        "podman was called by a GET"
    );
    let started: Vec<&str> = at_start
        .lines()
        .filter(|l| !l.starts_with("image") && !l.starts_with("create"))
        .collect();
    assert!(
        started.iter().filter(|l| l.starts_with("info")).count() <= 1,
        "podman info asked more than once: {started:#?}"
    );
}

/// Waits until `f` holds, for at most `within`.
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

// ---- pi in a pi session's image ---------------------------------------------

/// The `podman run` calls among the logged ones: the look into an image.
fn runs(podman: &Logged) -> Vec<String> {
    podman
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("run "))
        .collect()
}

/// `cage create --harness pi` with an image that has no `pi` (the test
/// busybox image) is refused at create, exit 2, with a message that names
/// the image and what to do; over HTTP, 400 with the request's words. The
/// image is asked once, in a container run and removed: the next create,
/// the dry run and serve's create run nothing. Nothing is made.
fn pi_is_looked_for_once_and_its_absence_refused(w: World) {
    let podman = Logged::new(&w);
    let name = w.session("nopi");
    let project = w.dir(&format!("projects/{name}"));
    let dir = project.to_string_lossy().into_owned();
    let create = ["cage", "create", &name, "--dir", &dir, "--harness", "pi"];
    podman.clear();
    let r = w.run(&create).code_is(2);
    let err = r.stderr();
    for says in [
        format!("the image {IMAGE} has no `pi` program on its PATH"),
        "RUN npm install -g @mariozechner/pi-coding-agent".to_string(),
        "`pi = \"/path/to/pi\"` under `[harness]`".to_string(),
        "localhost/shrooms-workbench:latest), which has pi".to_string(),
        "--image IMAGE".to_string(),
    ] {
        assert!(err.contains(&says), "no {says:?} in:\n{}", r.explain());
    }
    let looked = runs(&podman);
    assert_eq!(looked.len(), 1, "{:?}", podman.calls());
    assert!(
        looked[0].starts_with("run --rm --network none --pull never --cap-drop ALL"),
        "{looked:?}"
    );
    assert!(!w.record_path(&name).exists(), "a record was made");
    assert!(w.containers_of(&name).is_empty(), "a container was made");
    // Kept: the look's container is gone, and the next create runs none.
    let left = w.podman(&["ps", "-a", "--format", "{{.Names}} {{.Command}}"]);
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains("command -v pi"),
        "the look's container was left: {}",
        show_output(&left)
    );
    podman.clear();
    let r = w.run(&create).code_is(2);
    assert!(
        r.stderr().contains("has no `pi` program"),
        "{}",
        r.explain()
    );
    assert!(
        runs(&podman).is_empty(),
        "asked again: {:?}",
        podman.calls()
    );

    // A dry run shows the argv and says it would be refused, with the code.
    let mut dry = create.to_vec();
    dry.push("--dry-run");
    let r = w.run(&dry).code_is(2);
    assert!(
        r.stdout()
            .contains("the real create would be refused: the image"),
        "{}",
        r.explain()
    );
    assert!(r.stdout().contains(" create "), "{}", r.explain());
    assert!(
        r.stderr().contains("has no `pi` program"),
        "{}",
        r.explain()
    );
    assert!(runs(&podman).is_empty(), "{:?}", podman.calls());

    // Over HTTP: 400, worded for a request.
    let token = "t0k3n-for-the-pi-test-0123456789abcdef";
    let file = w.file("serve-token", &format!("{token}\n"));
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    let s = w.serve(&["--token-file", &file.to_string_lossy()], &[]);
    let body = format!(r#"{{"name": "{name}", "dir": "{dir}", "harness": "pi"}}"#);
    let auth = format!("Bearer {token}");
    let r = http(
        "POST",
        &format!("{}/v1/sessions", s.url),
        Some(&body),
        &[("authorization", &auth)],
    )
    .is(400);
    let e = r.error();
    assert!(
        e.contains(&format!("the image {IMAGE} has no `pi` program")),
        "{e}"
    );
    assert!(e.contains("the request's \"image\""), "{e}");
    assert!(!e.contains("--image"), "{e}");
    assert!(runs(&podman).is_empty(), "{:?}", podman.calls());
    assert!(!w.record_path(&name).exists());
}

#[test]
fn pi_is_looked_for_once_and_its_absence_refused_rootful() {
    pi_is_looked_for_once_and_its_absence_refused(World::new());
}

#[test]
fn pi_is_looked_for_once_and_its_absence_refused_rootless() {
    pi_is_looked_for_once_and_its_absence_refused(World::rootless());
}

/// With the Debian image that has the real pi, the create passes, having
/// asked the image once; a second session with the same image asks nothing.
fn real_pi_image_is_looked_into_once(w: World) {
    let image = real_pi_image();
    let podman = Logged::new(&w);
    podman.clear();
    for n in ["withpi", "withpi2"] {
        let name = w.session(n);
        let project = w.dir(&format!("projects/{name}"));
        let r = w.create(&name, &project, &["--harness", "pi", "--image", &image]);
        assert!(!r.stderr().contains("`pi`"), "{}", r.explain());
        assert!(w.record_path(&name).exists());
    }
    let looked = runs(&podman);
    assert_eq!(looked.len(), 1, "{:?}", podman.calls());
}

#[test]
fn real_pi_image_is_looked_into_once_rootful() {
    real_pi_image_is_looked_into_once(World::new());
}

#[test]
fn real_pi_image_is_looked_into_once_rootless() {
    real_pi_image_is_looked_into_once(World::rootless());
}
