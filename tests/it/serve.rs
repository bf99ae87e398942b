//! End-to-end tests of `serve` (docs/serve.md, "HTTP API"), as root against real podman: every
//! route with a real HTTP client, docs/serve.md's curl examples as they
//! are written, each status code's error case, the CLI and `serve` on one state,
//! two machines sending an outbox between them, and robustness (malformed
//! bodies, large bodies, a request that stops half-way, 200 at once, SIGTERM).

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

const NO_PODMAN: &str = "this machine has no podman to cage sessions with";

fn cpus() -> usize {
    thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// One session object (docs/cages.md, "The session object"): `cage show --json`,
/// the session's element of `cage ls --json`, `GET /v1/sessions/{name}` and
/// its element of `GET /v1/sessions` are equal, on a real cage made and
/// then running; a damaged record is listed apart, by `cage ls` and serve
/// alike, and hides no other session.
fn one_session_object_everywhere(w: World) {
    let name = w.session("one");
    let dir = fs::canonicalize(w.dir("one-project")).unwrap();
    // With the shared folder, whose path on the machine each face tells
    // from what podman said of its volume folder. Removed with the world
    // when this test made it (without -f: another test's cage may use it).
    if !w
        .podman(&["volume", "exists", "shrooms-shared"])
        .status
        .success()
    {
        w.podman_on_drop(&["volume", "rm", "shrooms-shared"]);
    }
    w.create(&name, &dir, &["--shared"]);
    let broken = w.session("broken");
    fs::write(w.record_path(&broken), "{\"version\": 1, \"na").unwrap();
    w.chown_all();
    // Rootless, serve answers root's requests (the test's) with its token.
    let token = "one-token";
    let file = w.file("serve-token", &format!("{token}\n"));
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    let s = w.serve(&["--token-file", &file.to_string_lossy()], &[]);
    let auth = format!("Bearer {token}");
    let get = |url: &str| http("GET", url, None, &[("authorization", &auth)]);
    let one_url = format!("{}/v1/sessions/{name}", s.url);
    let list_url = format!("{}/v1/sessions", s.url);
    let element = |listing: &Value| -> Value {
        listing["sessions"]
            .as_array()
            .unwrap_or_else(|| panic!("no sessions: {listing:#}"))
            .iter()
            .find(|r| r["name"] == name.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("{name} not listed: {listing:#}"))
    };
    for (step, state) in [("made", "created"), ("started", "running")] {
        if step == "started" {
            w.run(&["cage", "start", &name]).ok();
        }
        let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
        assert_eq!(show["cage"]["state"], state, "{step}: {show:#}");
        assert!(
            show["cage"]["shared_path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/shrooms-shared/_data")),
            "{show:#}"
        );
        let ls = w.run(&["cage", "ls", "--json"]).ok().json();
        assert_eq!(
            element(&ls),
            show,
            "{step}: cage ls --json vs cage show --json"
        );
        // serve's view follows podman's events: the start may come a
        // moment later.
        wait_until("serve sees the state", Duration::from_secs(15), || {
            get(&one_url).json()["cage"]["state"] == state
        });
        let one = get(&one_url).is(200).json();
        assert_eq!(
            one, show,
            "{step}: GET /v1/sessions/NAME vs cage show --json"
        );
        let list = get(&list_url).is(200).json();
        assert_eq!(
            element(&list),
            show,
            "{step}: GET /v1/sessions vs cage show --json"
        );
        // The same listing object, damaged records apart.
        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(keys(&list), keys(&ls), "{list:#}\n{ls:#}");
        assert_eq!(list["damaged"], ls["damaged"], "{list:#}");
        assert_eq!(list["damaged"][0]["name"], broken.as_str(), "{list:#}");
        assert!(
            list["damaged"][0]["error"]
                .as_str()
                .unwrap()
                .contains("damaged"),
            "{list:#}"
        );
        // Times are RFC 3339 with an offset.
        let created = show["created"].as_str().unwrap();
        assert!(
            chrono::DateTime::parse_from_rfc3339(created).is_ok(),
            "{created}"
        );
    }
    fs::remove_file(w.record_path(&broken)).unwrap();
}

#[test]
fn one_session_object_in_the_cli_and_over_http() {
    one_session_object_everywhere(World::new());
}

#[test]
fn one_session_object_in_the_cli_and_over_http_rootless() {
    one_session_object_everywhere(World::rootless());
}

/// Every route's happy path and docs/serve.md's curl examples, on the state the
/// CLI uses: a session made over HTTP is in `cage ls`, one removed over
/// HTTP is gone from it; a move while `cage exec` holds the session is 409.
#[test]
fn routes_over_http_share_the_cli_state() {
    let w = World::new();
    let nix = w.root.join("fake-nix");
    // `--listen localhost:PORT`: taken as 127.0.0.1 (the Serve's url).
    let s = w.serve_listening(
        "localhost",
        free_port(),
        &[],
        &[("SHROOMS_AGENT_NIX_ROOT", &nix.to_string_lossy())],
    );
    let u = &s.url;

    // GET /v1/harnesses: the cage object, from what serve knows.
    let h = get(&format!("{u}/v1/harnesses")).is(200).json();
    let names: Vec<&str> = h["harnesses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["claude", "pi", "codex", "opencode"], "{h:#}");
    assert_eq!(h["cage"]["available"], true, "{h:#}");
    assert_eq!(h["cage"]["image"], IMAGE, "{h:#}");
    assert_eq!(h["cage"]["images"][0], IMAGE, "{h:#}");
    assert_eq!(
        h["cage"]["images"][1], "localhost/shrooms-workbench:latest",
        "{h:#}"
    );
    assert_eq!(
        h["cage"]["images"][2], "localhost/shrooms-workbench:desktop",
        "{h:#}"
    );
    assert_eq!(h["cage"]["ready"], true, "{h:#}");
    assert_eq!(h["cage"]["nix"], false, "{h:#}");
    assert_eq!(h["cage"]["sealed"], false, "{h:#}");
    assert_eq!(h["cage"]["shared"], true, "{h:#}");
    assert_eq!(h["cage"]["shared_in"], "/shared", "{h:#}");
    assert!(h["cage"]["shared_root"].is_string(), "{h:#}");

    // GET /v1/openapi.json: the file in assets/, as it is.
    let doc = get(&format!("{u}/v1/openapi.json")).is(200);
    let want =
        fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/openapi.json")).unwrap();
    assert_eq!(doc.body, want);
    assert_eq!(doc.json()["openapi"], "3.1.0");

    // POST /v1/sessions: docs/serve.md's example, with `dir` under ~/ (and
    // no GitHub login there: `github` needs none when a cage is made).
    let name = w.session("webapp");
    fs::create_dir_all(w.home.join("src/webapp")).unwrap();
    let body = format!(
        r#"{{"name": "{name}", "dir": "~/src/webapp", "auto_approve": true,
       "cage": {{"image": "{IMAGE}", "github": true}}}}"#
    );
    let made = post(&format!("{u}/v1/sessions"), &body).is(201).json();
    assert_eq!(made["name"], name.as_str(), "{made:#}");
    assert_eq!(made["auto_approve"], true, "{made:#}");
    assert_eq!(made["cage"]["options"]["github"], true, "{made:#}");
    assert_eq!(made["cage"]["state"], "created", "{made:#}");
    let dir = fs::canonicalize(w.home.join("src/webapp")).unwrap();
    assert_eq!(made["dir"], dir.to_string_lossy().as_ref(), "{made:#}");
    assert!(made["warnings"].is_array(), "{made:#}");
    assert_eq!(w.record(&name)["auto_approve"], true);
    // The same name again: 409 Conflict, and the first session unchanged.
    let record = w.record(&name);
    let r = post(&format!("{u}/v1/sessions"), &body).is(409);
    assert!(r.error().contains("already"), "{r:#?}");
    assert_eq!(w.record(&name), record);

    // The CLI sees it, on the same state.
    assert!(w.ls_row(&name).is_some(), "cage ls does not list {name}");
    let shown = get(&format!("{u}/v1/sessions/{name}")).is(200).json();
    let cli = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(shown, cli, "GET /v1/sessions/NAME is `cage show --json`");
    let list = get(&format!("{u}/v1/sessions")).is(200).json();
    assert_eq!(list["sessions"][0], cli, "{list:#}");
    assert_eq!(
        w.ls_row(&name).unwrap(),
        cli,
        "cage ls --json's row is `cage show --json`"
    );

    // Move with {"cage": {"nix": true}}: no nix on this machine, 400 ...
    let into_nix = r#"{"cage": {"nix": true}}"#;
    let r = post(&format!("{u}/v1/sessions/{name}/cage"), into_nix).is(400);
    assert!(r.error().contains("it has none"), "{r:#?}");
    // ... and with one (a store folder), 200 and a new cage with nix.
    fs::create_dir_all(nix.join("store")).unwrap();
    let old = w.container(&name);
    let moved = post(&format!("{u}/v1/sessions/{name}/cage"), into_nix)
        .is(200)
        .json();
    assert!(moved["cage"]["options"]["nix"].is_object(), "{moved:#}");
    assert_ne!(moved["cage"]["container"], old.as_str(), "{moved:#}");
    assert!(!w.container_exists(&old));
    // GET /v1/harnesses sees the nix within a few seconds.
    wait_until("harnesses says nix", Duration::from_secs(15), || {
        get(&format!("{u}/v1/harnesses")).json()["cage"]["nix"] == true
    });
    let history = w.run(&["cage", "history", &name, "--json"]).ok().json();
    let last = &history["entries"].as_array().unwrap().last().unwrap()["who"];
    assert!(last.as_str().unwrap().contains("over HTTP"), "{history:#}");

    // {"cage": null}: out of its cage; and back in with {}.
    let out = post(&format!("{u}/v1/sessions/{name}/cage"), r#"{"cage": null}"#)
        .is(200)
        .json();
    assert_eq!(out["cage"], Value::Null, "{out:#}");
    post(&format!("{u}/v1/sessions/{name}/cage"), r#"{"cage": {}}"#).is(200);

    // Limits: docs/serve.md's example is refused where the machine has fewer
    // than 8 CPUs, and taken with what it has.
    let seed_limits = r#"{"memory": "16g", "cpus": "8"}"#;
    let r = post(&format!("{u}/v1/sessions/{name}/cage/limits"), seed_limits);
    if cpus() < 8 {
        let r = r.is(400);
        assert!(r.error().contains("more than this machine's"), "{r:#?}");
    } else {
        r.is(200);
    }
    let l = post(
        &format!("{u}/v1/sessions/{name}/cage/limits"),
        r#"{"memory": "16g", "cpus": "1"}"#,
    )
    .is(200)
    .json();
    assert_eq!(l["after"]["memory"], "16g", "{l:#}");
    assert_eq!(l["after"]["cpus"], "1", "{l:#}");
    // Numbers read as well.
    let l = post(
        &format!("{u}/v1/sessions/{name}/cage/limits"),
        r#"{"memory": "512m", "cpus": 1}"#,
    )
    .is(200)
    .json();
    assert_eq!(l["after"]["cpus"], "1", "{l:#}");
    assert_eq!(w.record(&name)["cage"]["limits"]["memory"], "512m");
    // Under podman's minimum (a bare number is bytes): refused, unchanged.
    for (body, says) in [
        (r#"{"memory": 16}"#, "minimum of 6m"),
        (r#"{"memory": "1b"}"#, "minimum of 6m"),
        (r#"{"cpus": 0.0001}"#, "minimum of 0.01"),
    ] {
        let r = post(&format!("{u}/v1/sessions/{name}/cage/limits"), body).is(400);
        assert!(r.error().contains(says), "{r:#?}");
    }
    assert_eq!(w.record(&name)["cage"]["limits"]["memory"], "512m");
    // An HTTP client is told the field it sent, not a command-line option.
    let r = post(
        &format!("{u}/v1/sessions/{name}/cage/limits"),
        r#"{"tokens": 0}"#,
    )
    .is(400);
    assert!(
        r.error().starts_with("field \"tokens\": 0 would refuse") && !r.error().contains("--"),
        "{r:#?}"
    );
    assert_eq!(r.json()["field"], "tokens", "{r:#?}");

    // 409: a move while `cage exec` holds the session.
    // Its command runs in the cage only while it holds the session's lock.
    let exec = w.hold(&name, &w.home.join("src/webapp"));
    let r = post(&format!("{u}/v1/sessions/{name}/cage"), r#"{"cage": null}"#).is(409);
    assert!(r.error().contains("busy"), "{r:#?}");
    // What holds it, as data: the exec, since when, its process.
    let holder = &r.json()["holder"];
    assert_eq!(holder["what"], "exec", "{r:#?}");
    assert!(holder["since"].is_string(), "{r:#?}");
    assert!(holder["pid"].as_u64().is_some_and(|p| p > 1), "{r:#?}");
    // `cage ls` says what holds it and since when (BUSY), and its AGE.
    let row = w.ls_row(&name).unwrap();
    assert_eq!(row["busy"]["what"], "exec", "{row:#}");
    assert!(row["busy"]["since"].is_string(), "{row:#}");
    assert!(row["created"].as_str().unwrap().contains('T'), "{row:#}");
    // serve says the same of it, and `cage show` too.
    let api = get(&format!("{u}/v1/sessions/{name}")).is(200).json();
    assert_eq!(api, row, "GET /v1/sessions/NAME while busy");
    let cli = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(cli, row, "cage show --json while busy");
    let text = w.run(&["cage", "ls"]).ok().stdout();
    let head = text.lines().next().unwrap();
    assert!(
        head.starts_with("SESSION") && head.contains(" BUSY ") && head.contains(" AGE "),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(" exec (just now) ") || line.contains(" exec (for "),
        "{text}"
    );
    let names = w.run(&["cage", "ls", "-q"]).ok().stdout();
    assert!(names.lines().any(|l| l == name), "{names}");
    assert!(!names.contains("SESSION"), "{names}");
    exec.release().ok();
    let row = w.ls_row(&name).unwrap();
    assert!(row["busy"].is_null(), "{row:#}");

    // DELETE: what `cage rm` does.
    let container = w.container(&name);
    let r = http("DELETE", &format!("{u}/v1/sessions/{name}"), None, &[]).is(204);
    assert!(r.body.is_empty(), "{r:#?}");
    assert!(!w.container_exists(&container));
    get(&format!("{u}/v1/sessions/{name}")).is(404);
    assert!(w.ls_row(&name).is_none(), "cage ls still lists {name}");
    // One log line per request: the time (UTC, RFC 3339), the client's
    // address, method, path, status, milliseconds.
    let log = s.log_text();
    let line = log
        .lines()
        .find(|l| request_part(l).starts_with(&format!("DELETE /v1/sessions/{name} 204 ")))
        .unwrap_or_else(|| panic!("no log line of the DELETE:\n{log}"));
    assert!(line.ends_with("ms"), "{line}");
    let mut words = line.split(' ');
    let (time, client) = (words.next().unwrap(), words.next().unwrap());
    assert!(
        time.len() == "2026-11-30T18:05:09.123Z".len()
            && time.as_bytes()[10] == b'T'
            && time.ends_with('Z'),
        "{line}"
    );
    assert!(client.starts_with("127.0.0.1:"), "{line}");
}

/// The error cases, one per status code: 400, 401, 404, 405, 413, 500,
/// 503 with Retry-After; and a non-loopback address without a token is
/// refused.
#[test]
fn each_status_code_has_its_error_case() {
    let w = World::new();
    let s = w.serve(&[], &[("SHROOMS_AGENT_TEST_PANIC_ROUTE", "1")]);
    let u = &s.url;
    // 400: not JSON; an unknown field, named; a missing one.
    let r = post(
        &format!("{u}/v1/sessions"),
        r#"{"name": "x", "dir": "/tmp""#,
    )
    .is(400);
    assert!(r.error().starts_with("the body: "), "{r:#?}");
    let r = post(
        &format!("{u}/v1/sessions"),
        r#"{"name": "x", "dir": "/tmp", "colour": "red"}"#,
    )
    .is(400);
    assert!(r.error().contains("unknown field `colour`"), "{r:#?}");
    assert_eq!(r.json()["field"], "colour", "{r:#?}");
    let r = post(&format!("{u}/v1/sessions"), r#"{"dir": "/tmp"}"#).is(400);
    assert!(r.error().contains("missing field `name`"), "{r:#?}");
    assert_eq!(r.json().get("field"), None, "{r:#?}");
    // The CLI's words: a name that is no session name, a relative dir.
    let r = post(
        &format!("{u}/v1/sessions"),
        r#"{"name": "-x", "dir": "/tmp"}"#,
    )
    .is(400);
    assert!(r.error().contains("is not a session name"), "{r:#?}");
    let r = post(
        &format!("{u}/v1/sessions"),
        r#"{"name": "x", "dir": "tmp"}"#,
    )
    .is(400);
    assert!(r.error().contains("absolute path"), "{r:#?}");
    // An image named in the body that is not on the machine is the
    // request's fault.
    let project = w.dir("noimage-project");
    for image in ["localhost/nothing-here:1", "Not A Name"] {
        let body = format!(
            r#"{{"name": "{}", "dir": "{}", "cage": {{"image": "{image}"}}}}"#,
            w.session("noimage"),
            project.display()
        );
        let r = post(&format!("{u}/v1/sessions"), &body).is(400);
        assert!(r.error().contains("image"), "{r:#?}");
    }
    let r = post(&format!("{u}/v1/images/build"), r#"{"image": "nope"}"#).is(400);
    assert!(r.error().contains("not an image of ours"), "{r:#?}");
    // 404: no such route, no such session.
    let r = get(&format!("{u}/v1/nothing")).is(404);
    assert!(r.error().contains("no such route"), "{r:#?}");
    let r = get(&format!("{u}/v1/sessions/nobody")).is(404);
    assert!(
        r.error().contains("there is no session \"nobody\""),
        "{r:#?}"
    );
    http("DELETE", &format!("{u}/v1/sessions/nobody"), None, &[]).is(404);
    post(&format!("{u}/v1/sessions/nobody/cage"), r#"{"cage": null}"#).is(404);
    // 405, with Allow.
    let r = http("PUT", &format!("{u}/v1/sessions"), Some("{}"), &[]).is(405);
    assert_eq!(r.header("allow"), Some("GET, POST"), "{r:#?}");
    let r = http("GET", &format!("{u}/v1/images/build"), None, &[]).is(405);
    assert_eq!(r.header("allow"), Some("POST"), "{r:#?}");
    // 413: a JSON body of 2 MiB.
    let big = format!("{{\"name\": \"{}\"}}", "a".repeat(2 * 1024 * 1024));
    let r = post(&format!("{u}/v1/sessions"), &big).is(413);
    assert!(r.error().contains("at most"), "{r:#?}");
    // 500: a panic in a request; the server goes on.
    let r = get(&format!("{u}/v1/_test/panic")).is(500);
    assert!(r.error().contains("a bug"), "{r:#?}");
    get(&format!("{u}/v1/harnesses")).is(200);

    // 503 with Retry-After: an image of ours that is not there yet (its
    // build starts in the background); docs/serve.md's example as it is written.
    let repo = format!("localhost/shrooms-it-serve-{}", std::process::id());
    w.write_config(&format!("images_repo = \"{repo}\""));
    let s2 = w.serve(&[], &[]);
    let webapp = w.session("webapp");
    fs::create_dir_all(w.home.join("src/webapp")).unwrap();
    let seed = format!(
        r#"{{"name": "{webapp}", "dir": "~/src/webapp", "auto_approve": true,
       "cage": {{"image": "{repo}:desktop", "github": true}}}}"#
    );
    let r = post(&format!("{}/v1/sessions", s2.url), &seed).is(503);
    // The seed's sentence, word for word: no path of the machine.
    assert_eq!(
        r.error(),
        "the image for this session's cage is being built (a few minutes, the first time); \
         send again then",
        "{r:#?}"
    );
    assert_eq!(r.header("retry-after"), Some("30"), "{r:#?}");
    assert!(!w.record_path(&webapp).exists());
    // POST /v1/images/build: 202, a build started or running.
    let b = post(
        &format!("{}/v1/images/build", s2.url),
        r#"{"image": "workbench"}"#,
    )
    .is(202)
    .json();
    assert_eq!(b["images"][0]["stage"], "workbench", "{b:#}");
    assert!(
        ["started", "building"].contains(&b["images"][0]["outcome"].as_str().unwrap()),
        "{b:#}"
    );
    // The builds cannot succeed here (the config's base_mirror is a closed
    // port); wait for them to end.
    wait_until("the builds end", Duration::from_secs(120), || {
        let st = w.run(&["image", "status", "--json"]).ok().json();
        st["images"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["building"] == false)
    });
    drop(s2);

    // 503 with Retry-After: no podman (`cages = false`), in `NO_PODMAN`'s words.
    w.write_config("cages = false");
    let s3 = w.serve(&[], &[]);
    let h = get(&format!("{}/v1/harnesses", s3.url)).is(200).json();
    assert_eq!(h["cage"]["available"], false, "{h:#}");
    assert_eq!(h["cage"]["shared_root"], Value::Null, "{h:#}");
    let r = post(
        &format!("{}/v1/sessions", s3.url),
        &format!(
            r#"{{"name": "{}", "dir": "/tmp", "cage": {{}}}}"#,
            w.session("np")
        ),
    )
    .is(503);
    assert_eq!(r.error(), NO_PODMAN, "{r:#?}");
    assert!(r.header("retry-after").is_some(), "{r:#?}");
    drop(s3);
    w.write_config("");

    // 401: with --token-file, every request needs the token.
    let token = w.file("token", "s3cret-token\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    let s4 = w.serve(&["--token-file", &token.to_string_lossy()], &[]);
    let url = format!("{}/v1/harnesses", s4.url);
    let r = get(&url).is(401);
    assert!(r.error().contains("token"), "{r:#?}");
    http("GET", &url, None, &[("Authorization", "Bearer wrong")]).is(401);
    http(
        "GET",
        &url,
        None,
        &[("Authorization", "Bearer s3cret-token-x")],
    )
    .is(401);
    http(
        "GET",
        &url,
        None,
        &[("Authorization", "Basic s3cret-token")],
    )
    .is(401);
    http(
        "GET",
        &url,
        None,
        &[("Authorization", "Bearer s3cret-token")],
    )
    .is(200);
    // The log has no header value.
    assert!(!s4.log_text().contains("s3cret"), "{}", s4.log_text());
    drop(s4);

    // A non-loopback address without --token-file is refused (exit 2).
    let r = w
        .run(&["serve", "--listen", &format!("0.0.0.0:{}", free_port())])
        .code_is(2);
    assert!(r.stderr().contains("--token-file"), "{}", r.explain());
    // ... and, with one, a port other than agent_port, which cages are not
    // closed to.
    let token = w.file("other-port-token", "s3cret\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    let r = w
        .run(&[
            "serve",
            "--listen",
            &format!("0.0.0.0:{}", free_port()),
            "--token-file",
            &token.to_string_lossy(),
        ])
        .code_is(2);
    assert!(r.stderr().contains("agent_port"), "{}", r.explain());
}

/// Malformed JSON, a 2 MiB body, a request that sends its headers and
/// stops, 200 requests at once: each is answered, and the server stays up;
/// SIGTERM ends it with exit 0 after what is in flight.
#[test]
fn serve_stays_up_under_bad_and_many_requests() {
    let w = World::new();
    let mut s = w.serve(&[], &[]);
    let u = s.url.clone();
    // Malformed JSON.
    for bad in ["{", "[1,", "\u{0}", "null", "\"x\"", "{\"name\": 1}"] {
        post(&format!("{u}/v1/sessions"), bad).is(400);
    }
    // Not HTTP at all.
    let answer = raw(s.port, b"HELLO\r\n\r\n", Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    // 2 MiB of body over a raw connection: 413 without it being read as JSON.
    let mut req = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n",
        2 * 1024 * 1024
    )
    .into_bytes();
    req.extend(std::iter::repeat_n(b'x', 2 * 1024 * 1024));
    let answer = raw(s.port, &req, Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");

    // Headers sent, body promised, then nothing: the others are answered
    // meanwhile, and the stalled one gets 408 within the read timeout.
    let auth = owner_auth(s.port);
    let mut stalled = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    stalled
        .write_all(
            format!(
                "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Length: 100\r\n\r\n{{\"na"
            )
            .as_bytes(),
        )
        .unwrap();
    let mut half = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    half.write_all(b"GET /v1/harn").unwrap();
    let started = Instant::now();
    for _ in 0..5 {
        get(&format!("{u}/v1/harnesses")).is(200);
    }
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "others were held up: {:?}",
        started.elapsed()
    );
    stalled
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut answer = String::new();
    let _ = stalled.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(15), "{waited:?}");
    half.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut answer = String::new();
    let _ = half.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");

    // 200 at once.
    let handles: Vec<_> = (0..200)
        .map(|_| {
            let url = format!("{u}/v1/harnesses");
            thread::spawn(move || {
                let r = get(&url);
                (
                    r.status,
                    r.json()["cage"]["image"].as_str().map(str::to_string),
                )
            })
        })
        .collect();
    for h in handles {
        let (status, image) = h.join().unwrap();
        assert_eq!(status, 200);
        assert_eq!(image.as_deref(), Some(IMAGE));
    }
    assert!(s.running());
    get(&format!("{u}/v1/harnesses")).is(200);

    // SIGTERM with a request in flight (a slow body): it is finished, then exit 0.
    let mut slow = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    slow.write_all(
        format!("POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Length: 8\r\n\r\n{{\"a\"")
            .as_bytes(),
    )
    .unwrap();
    // Time for serve to take the connection (a busy machine's moment).
    thread::sleep(Duration::from_millis(1000));
    let pid = s.pid();
    let finisher = thread::spawn(move || {
        thread::sleep(Duration::from_millis(1500));
        let _ = slow.write_all(b": 1}");
        slow.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut answer = String::new();
        let _ = slow.read_to_string(&mut answer);
        answer
    });
    let status = s.stop(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "serve {pid}:\n{}", s.log_text());
    let answer = finisher.join().unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 400 "),
        "the request in flight was not finished: {answer:?}"
    );
    assert!(s.log_text().contains("stopped"), "{}", s.log_text());
    // It no longer listens.
    assert!(TcpStream::connect(("127.0.0.1", s.port)).is_err());
}

/// A world that is one machine: its name, and the other machines' serves.
fn machine(name: &str, others: &[(&str, u16)]) -> (World, u16) {
    let w = World::new();
    let port = free_port();
    let mut extra = format!("machine_name = \"{name}\"\n[machines]\n");
    for (n, p) in others {
        extra.push_str(&format!("{n} = \"http://127.0.0.1:{p}\"\n"));
    }
    w.write_config(&extra);
    (w, port)
}

/// Its serve, on the port the other machine's config names.
fn serve_on(w: &World, port: u16) -> Serve {
    w.serve_at(port, &[], &[])
}

/// Name the other machines' serves in a machine's config, with the token
/// file each will be given (root's serve answers TCP only with its token;
/// the harness writes it as `serve-token-PORT` in its world).
fn name_machines(w: &World, name: &str, others: &[(&str, &World, u16)]) {
    let mut extra = format!("machine_name = \"{name}\"\n[machines]\n");
    for (n, o, port) in others {
        extra.push_str(&format!(
            "{n} = {{ url = \"http://127.0.0.1:{port}\", token_file = \"{}\" }}\n",
            o.root.join(format!("serve-token-{port}")).display()
        ));
    }
    w.write_config(&extra);
}

/// Names in a .tar.gz, and the bytes of each regular file.
fn untar(path: &Path) -> Vec<(String, Vec<u8>)> {
    let f = fs::File::open(path).unwrap();
    let mut a = tar::Archive::new(flate2::read::GzDecoder::new(f));
    let mut out = Vec::new();
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        e.read_to_end(&mut bytes).unwrap();
        out.push((name, bytes));
    }
    out
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Two serves on two loopback ports as two machines: a sealed session on
/// alpha sends its outbox to a session on beta; refused (403, remembered)
/// until beta's session allows it, then accepted; the files arrive intact,
/// and a link in the outbox never leaves alpha.
#[test]
fn outbox_send_between_two_machines() {
    let port_a = free_port();
    let port_b = free_port();
    let (a, _) = machine("alpha", &[("beta", port_b)]);
    let (b, _) = machine("beta", &[("alpha", port_a)]);
    name_machines(&a, "alpha", &[("beta", &b, port_b)]);
    name_machines(&b, "beta", &[("alpha", &a, port_a)]);
    let _sa = serve_on(&a, port_a);
    let sb = serve_on(&b, port_b);
    // Both serves are on this machine's loopback, so beta credits alpha's
    // drops to itself: a loopback address is this machine's, whatever
    // [machines] says.

    // A sealed session on alpha, with files and a link in its outbox.
    let sealed = a.session("review");
    let project = a.dir(&format!("projects/{sealed}"));
    let token = a.file("sealed-token", "sk-ant-oat01-test-token\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    a.create(
        &sealed,
        &project,
        &["--sealed", "--sealed-token", &token.to_string_lossy()],
    );
    let outbox = a.home.join("shrooms-outbox").join(&sealed);
    assert!(outbox.is_dir());
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(outbox.join("report.md"), "# Review\nall good\n").unwrap();
    fs::create_dir_all(outbox.join("logs")).unwrap();
    fs::write(outbox.join("logs/run.bin"), &data).unwrap();
    fs::create_dir_all(outbox.join("empty")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", outbox.join("passwd-link")).unwrap();

    // A session on beta to receive.
    let receiver = b.session("inbox");
    let rdir = b.dir("receiver");
    b.create(&receiver, &rdir, &[]);
    let to = format!("beta/{receiver}");

    // Refused before `files allow`: 403 on beta, an error here, remembered there.
    let r = a.run(&["outbox", "send", &sealed, &to]).code_is(1);
    assert!(
        r.stderr()
            .contains(&format!("takes no files from beta/{sealed}")),
        "{}",
        r.explain()
    );
    let listed = b.run(&["files", "list", &receiver, "--json"]).ok().json();
    assert_eq!(
        listed["refused"][0]["from"],
        format!("beta/{sealed}"),
        "{listed:#}"
    );
    assert!(listed["allow"].as_array().unwrap().is_empty(), "{listed:#}");
    let text = b.run(&["files", "list", &receiver]).ok().stdout();
    assert!(text.contains(&format!("beta/{sealed}")), "{text}");
    let drop_dir = b.state.join("uploads").join(&receiver).join("drop");
    assert!(files_in(&drop_dir.join(format!("from-beta_{sealed}"))).is_empty());
    assert!(
        sb.log_text()
            .contains(&format!("POST /v1/sessions/{receiver}/drop?name 403 "))
    );

    // Allowed: accepted.
    b.run(&["files", "allow", &receiver, &format!("beta/{sealed}")])
        .ok();
    let r = a.run(&["outbox", "send", &sealed, &to]).ok();
    let line = r.stdout();
    assert!(
        line.starts_with(&format!("sent {sealed}-outbox-"))
            && line.contains(".tar.gz (2 files) to "),
        "{}",
        r.explain()
    );
    assert!(
        line.trim_end().ends_with(&format!(
            "to {to}; 1 left out (see README-UNTRUSTED.txt in it)"
        )),
        "{}",
        r.explain()
    );
    let folder = drop_dir.join(format!("from-beta_{sealed}"));
    let got = files_in(&folder);
    assert_eq!(got.len(), 1, "{got:?}");
    let archive = &got[0];
    let archive_name = archive.file_name().unwrap().to_string_lossy().into_owned();
    assert!(line.contains(&archive_name), "{line} / {archive_name}");
    assert_eq!(mode_of(archive), 0o600);
    assert_eq!(mode_of(&folder), 0o700);
    assert_eq!(mode_of(&drop_dir), 0o700);
    // Intact, and the link left out, listed in its README.
    let entries = untar(archive);
    let find = |n: &str| {
        entries
            .iter()
            .find(|(name, _)| name == n)
            .map(|(_, b)| b.clone())
    };
    assert_eq!(find("report.md").unwrap(), b"# Review\nall good\n");
    assert_eq!(find("logs/run.bin").unwrap(), data);
    assert!(
        !entries.iter().any(|(n, _)| n.contains("passwd-link")),
        "{:?}",
        entries.iter().map(|e| &e.0).collect::<Vec<_>>()
    );
    let readme = String::from_utf8(find("README-UNTRUSTED.txt").unwrap()).unwrap();
    assert!(readme.contains("passwd-link"), "{readme}");
    assert!(!entries.iter().any(|(_, b)| b.starts_with(b"root:")));

    // Over HTTP, one folder: the same operation; never over the first file.
    let r = post(
        &format!("{}/v1/sessions/{sealed}/outbox/send", _sa.url),
        &format!(r#"{{"to": "{to}", "only": "logs"}}"#),
    )
    .is(200)
    .json();
    let result = r["result"].as_str().unwrap();
    assert!(result.contains("(1 file) to "), "{r:#}");
    assert!(!result.contains("left out"), "{r:#}");
    assert_eq!(files_in(&folder).len(), 2);
    assert!(files_in(&folder).contains(archive));

    // Refusals that send nothing: an empty folder, no such machine, a
    // session that is not sealed, no such session.
    let r = a
        .run(&["outbox", "send", "--only", "empty", &sealed, &to])
        .code_is(2);
    assert!(
        r.stderr().contains("nothing in its outbox"),
        "{}",
        r.explain()
    );
    let r = a.run(&["outbox", "send", &sealed, "gamma/x"]).code_is(2);
    assert!(
        r.stderr().contains("there is no machine \"gamma\""),
        "{}",
        r.explain()
    );
    let plain = a.session("plain");
    let pdir = a.dir("plain");
    a.create(&plain, &pdir, &[]);
    let r = a.run(&["outbox", "send", &plain, &to]).code_is(2);
    assert!(r.stderr().contains("is not sealed"), "{}", r.explain());
    // A session beta does not have is beta's answer, not a session
    // missing here: exit 1 (500 over HTTP), saying who answered what.
    let r = a
        .run(&["outbox", "send", &sealed, "beta/nobody"])
        .code_is(1);
    assert!(
        r.stderr().contains(&format!(
            "machine beta (http://127.0.0.1:{port_b}) answered 404"
        )) && r.stderr().contains("there is no session \"nobody\""),
        "{}",
        r.explain()
    );
    let r = post(
        &format!("{}/v1/sessions/{sealed}/outbox/send", _sa.url),
        r#"{"to": "beta/nobody"}"#,
    )
    .is(500);
    assert!(r.error().contains("answered 404"), "{r:#?}");
    assert_eq!(files_in(&folder).len(), 2);

    // A drop straight to beta: its name made safe; one that breaks off
    // leaves nothing.
    let body = b"hello";
    let req = format!(
        "POST /v1/sessions/{receiver}/drop?name=..%2F..%2F.evil.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         X-Shrooms-From-Session: {sealed}\r\nContent-Type: application/gzip\r\nContent-Length: {}\r\n\r\nhello",
        body.len()
    );
    let answer = raw(port_b, req.as_bytes(), Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 201 "), "{answer}");
    assert!(folder.join("evil.txt").is_file(), "{:?}", files_in(&folder));
    assert_eq!(fs::read(folder.join("evil.txt")).unwrap(), body);
    assert!(!answer.contains("\"note\""), "{answer}");
    // A note travels with its file, as <name>.note; one over 4096 bytes
    // is refused and nothing is kept.
    let req = format!(
        "POST /v1/sessions/{receiver}/drop?name=findings.txt&note=read%20me%20first HTTP/1.1\r\n\
         Host: 127.0.0.1\r\nX-Shrooms-From-Session: {sealed}\r\nContent-Length: 5\r\n\r\nhello"
    );
    let answer = raw(port_b, req.as_bytes(), Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 201 "), "{answer}");
    assert!(answer.contains("findings.txt.note"), "{answer}");
    assert_eq!(
        fs::read_to_string(folder.join("findings.txt.note")).unwrap(),
        "read me first"
    );
    let mode = fs::metadata(folder.join("findings.txt.note"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let long = "n".repeat(4097);
    let req = format!(
        "POST /v1/sessions/{receiver}/drop?name=long.txt&note={long} HTTP/1.1\r\n\
         Host: 127.0.0.1\r\nX-Shrooms-From-Session: {sealed}\r\nContent-Length: 5\r\n\r\nhello"
    );
    let answer = raw(port_b, req.as_bytes(), Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("the note is over 4096 bytes"), "{answer}");
    assert!(!folder.join("long.txt").exists(), "{:?}", files_in(&folder));
    let mut s = TcpStream::connect(("127.0.0.1", port_b)).unwrap();
    write!(
        s,
        "POST /v1/sessions/{receiver}/drop?name=cut.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         {}X-Shrooms-From-Session: {sealed}\r\nContent-Length: 100000\r\n\r\n",
        owner_auth(port_b)
    )
    .unwrap();
    s.write_all(&[7u8; 1000]).unwrap();
    drop(s);
    wait_until(
        "the broken upload is answered",
        Duration::from_secs(20),
        || {
            sb.log_text().lines().any(|l| {
                request_part(l).starts_with(&format!("POST /v1/sessions/{receiver}/drop?name 400 "))
            })
        },
    );
    assert!(!folder.join("cut.bin").exists(), "{:?}", files_in(&folder));

    // `files deny`: refused again, and remembered again (the refusal before
    // `files allow` went off the list with it).
    b.run(&["files", "deny", &receiver, &format!("beta/{sealed}")])
        .ok();
    a.run(&["outbox", "send", &sealed, &to]).code_is(1);
    let listed = b.run(&["files", "list", &receiver, "--json"]).ok().json();
    assert_eq!(listed["refused"].as_array().unwrap().len(), 1, "{listed:#}");
    // MACHINE/* lets every session of that machine in.
    b.run(&["files", "allow", &receiver, "beta/*"]).ok();
    a.run(&["outbox", "send", &sealed, &to]).ok();
    assert_eq!(files_in(&folder).len(), 6);

    // beta's serve now wants a token alpha's config does not give: its
    // 401 is no refusal by a session (403 here) but a failure, exit 1
    // (500 over HTTP), that says what beta answered and why.
    drop(sb);
    let token = b.file("serve-token", "beta-token\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    let _sb = b.serve_at(port_b, &["--token-file", &token.to_string_lossy()], &[]);
    let r = a.run(&["outbox", "send", &sealed, &to]).code_is(1);
    assert!(
        r.stderr().contains(&format!(
            "machine beta (http://127.0.0.1:{port_b}) answered 401"
        )) && r.stderr().contains("token_file"),
        "{}",
        r.explain()
    );
    let r = post(
        &format!("{}/v1/sessions/{sealed}/outbox/send", _sa.url),
        &format!(r#"{{"to": "{to}"}}"#),
    )
    .is(500);
    assert!(r.error().contains("answered 401"), "{r:#?}");
    assert_eq!(files_in(&folder).len(), 6);
}

/// A `serve` that wants a token, and a token file it takes (mode 0600).
fn serve_with_token(w: &World, env: &[(&str, &str)]) -> (Serve, String) {
    let token = "s3cret-token";
    let file = w.file("serve-token", &format!("{token}\n"));
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    let s = w.serve(&["--token-file", &file.to_string_lossy()], env);
    (s, format!("Bearer {token}"))
}

/// Clients without the token that send headers announcing a large body
/// and then stall, dripping a byte of it every half second (which kept a
/// drain of the body going for 30 s), are each answered 401 and closed at
/// once, the body not waited for: ten of them (more than the workers) do
/// not hold up a request that carries the token.
#[test]
fn stalled_clients_without_the_token_do_not_hold_the_workers() {
    let w = World::new();
    let (s, auth) = serve_with_token(&w, &[]);
    let heads = [
        format!(
            "POST /v1/sessions/x/drop?name=big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             X-Shrooms-From-Session: y\r\nContent-Length: {}\r\n\r\n",
            100 * 1024 * 1024
        ),
        format!(
            "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{{\"na",
            1024 * 1024
        ),
        format!(
            "GET /v1/harnesses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n",
            50 * 1024 * 1024
        ),
    ];
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut drips = Vec::new();
    let stalled: Vec<TcpStream> = (0..10)
        .map(|i| {
            let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
            c.write_all(heads[i % heads.len()].as_bytes()).unwrap();
            let mut w = c.try_clone().unwrap();
            let stop = stop.clone();
            drips.push(thread::spawn(move || {
                let end = Instant::now() + Duration::from_secs(40);
                while !stop.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < end {
                    thread::sleep(Duration::from_millis(500));
                    if w.write_all(b"x").is_err() {
                        return;
                    }
                }
            }));
            c
        })
        .collect();
    // Let the workers take them.
    thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let r = http(
        "GET",
        &format!("{}/v1/harnesses", s.url),
        None,
        &[("Authorization", &auth)],
    )
    .is(200);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(6),
        "the request with the token waited {took:?} behind stalled ones:\n{}",
        s.log_text()
    );
    assert_eq!(r.json()["cage"]["image"], IMAGE, "{r:#?}");
    // Each stalled one has its 401 and a closed connection already,
    // while it still has not sent a byte of its body.
    for (i, c) in stalled.iter().enumerate() {
        let answer = read_until_closed(c, Duration::from_secs(10));
        assert!(answer.starts_with("HTTP/1.1 401 "), "{i}: {answer:?}");
        assert!(answer.contains("\"error\""), "{i}: {answer:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for d in drips {
        d.join().unwrap();
    }
    wait_until("ten 401s in the log", Duration::from_secs(5), || {
        s.log_text().lines().filter(|l| l.contains(" 401 ")).count() >= 10
    });
}

/// An upload that trickles in slower than its pace (here 256 KiB a second
/// after a grace of three seconds) is answered 408 and its
/// partial file removed; the server goes on.
#[test]
fn a_trickled_upload_runs_out_of_time_and_leaves_nothing() {
    let w = World::new();
    w.write_config("machine_name = \"alpha\"");
    let receiver = w.session("inbox");
    let rdir = w.dir("receiver");
    w.create(&receiver, &rdir, &[]);
    w.run(&["files", "allow", &receiver, "alpha/trickler"]).ok();
    let s = w.serve(&[], &[("SHROOMS_AGENT_TEST_UPLOAD_GRACE_MS", "3000")]);
    let folder = w
        .state
        .join("uploads")
        .join(&receiver)
        .join("drop/from-alpha_trickler");

    // A KiB every 100 ms is ten a second; 256 are due a second after the
    // grace.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    write!(
        c,
        "POST /v1/sessions/{receiver}/drop?name=slow.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         {}X-Shrooms-From-Session: trickler\r\nContent-Length: {}\r\n\r\n",
        owner_auth(s.port),
        300 * 1024
    )
    .unwrap();
    let started = Instant::now();
    let mut writer = c.try_clone().unwrap();
    let trickle = thread::spawn(move || {
        for _ in 0..300 {
            if writer.write_all(&[b'x'; 1024]).is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(100));
        }
    });
    // It is written as it arrives, under a hidden name ...
    wait_until("the partial file", Duration::from_secs(6), || {
        files_in(&folder)
            .iter()
            .any(|p| p.to_string_lossy().ends_with(".partial"))
    });
    assert!(!folder.join("slow.bin").exists());
    // ... and cut off soon after its grace, when it falls behind.
    let answer = read_until_closed(&c, Duration::from_secs(15));
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer:?}");
    assert!(answer.contains("did not arrive in time"), "{answer:?}");
    assert!(
        took >= Duration::from_millis(3000) && took < Duration::from_secs(9),
        "{took:?}"
    );
    assert!(files_in(&folder).is_empty(), "{:?}", files_in(&folder));
    drop(c);
    trickle.join().unwrap();
    assert!(
        s.log_text()
            .contains(&format!("POST /v1/sessions/{receiver}/drop?name 408 ")),
        "{}",
        s.log_text()
    );
    // A whole file in time is still taken.
    let req = format!(
        "POST /v1/sessions/{receiver}/drop?name=quick.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         X-Shrooms-From-Session: trickler\r\nContent-Length: 5\r\n\r\nhello"
    );
    let answer = raw(s.port, req.as_bytes(), Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 201 "), "{answer}");
    assert_eq!(fs::read(folder.join("quick.bin")).unwrap(), b"hello");
}

/// `outbox send` to a session of this same machine stores the archive
/// with the drop's own operation, with this machine as the sender's: no
/// `serve` needs to run; refused (and remembered) until `files allow`.
/// Through a `serve` that wants a token, the send route does the same
/// (no request to itself, so no 401), and many sends at once, more than
/// its workers, all finish.
#[test]
fn outbox_send_to_this_machine_needs_no_serve() {
    let w = World::new();
    w.write_config("machine_name = \"alpha\"");
    let sealed = w.session("review");
    let project = w.dir(&format!("projects/{sealed}"));
    let token = w.file("sealed-token", "sk-ant-oat01-test-token\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    w.create(
        &sealed,
        &project,
        &["--sealed", "--sealed-token", &token.to_string_lossy()],
    );
    let outbox = w.home.join("shrooms-outbox").join(&sealed);
    fs::write(outbox.join("report.md"), "# Review\nall good\n").unwrap();
    let receiver = w.session("inbox");
    let rdir = w.dir("receiver");
    w.create(&receiver, &rdir, &[]);
    let to = format!("alpha/{receiver}");
    let folder = w
        .state
        .join("uploads")
        .join(&receiver)
        .join(format!("drop/from-alpha_{sealed}"));

    // No serve anywhere: nothing listens on this machine's agent port.
    assert!(TcpStream::connect(("127.0.0.1", w.agent_port)).is_err());

    // Refused before `files allow`, and remembered.
    let r = w.run(&["outbox", "send", &sealed, &to]).code_is(1);
    assert!(
        r.stderr()
            .contains(&format!("takes no files from alpha/{sealed}")),
        "{}",
        r.explain()
    );
    let listed = w.run(&["files", "list", &receiver, "--json"]).ok().json();
    assert_eq!(
        listed["refused"][0]["from"],
        format!("alpha/{sealed}"),
        "{listed:#}"
    );
    assert!(files_in(&folder).is_empty(), "{:?}", files_in(&folder));

    // Allowed: stored, as a drop over HTTP would be.
    w.run(&["files", "allow", &receiver, &format!("alpha/{sealed}")])
        .ok();
    let r = w.run(&["outbox", "send", &sealed, &to]).ok();
    let line = r.stdout();
    assert!(
        line.starts_with(&format!("sent {sealed}-outbox-"))
            && line
                .trim_end()
                .ends_with(&format!(".tar.gz (1 file) to {to}")),
        "{}",
        r.explain()
    );
    let got = files_in(&folder);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        line.contains(&*got[0].file_name().unwrap().to_string_lossy()),
        "{line} / {got:?}"
    );
    assert_eq!(mode_of(&got[0]), 0o600);
    assert_eq!(mode_of(&folder), 0o700);
    let entries = untar(&got[0]);
    assert!(
        entries
            .iter()
            .any(|(n, b)| n == "report.md" && b == b"# Review\nall good\n"),
        "{:?}",
        entries.iter().map(|e| &e.0).collect::<Vec<_>>()
    );
    let json = w
        .run(&["outbox", "send", &sealed, &to, "--json"])
        .ok()
        .json();
    assert_eq!(json["to"], to.as_str(), "{json:#}");
    assert!(
        folder.join(json["path"].as_str().unwrap()).is_file(),
        "{json:#}"
    );

    // Through a serve that wants a token: the route, and 12 at once.
    let (s, auth) = serve_with_token(&w, &[]);
    let url = format!("{}/v1/sessions/{sealed}/outbox/send", s.url);
    let body = format!(r#"{{"to": "{to}"}}"#);
    let r = http("POST", &url, Some(&body), &[("Authorization", &auth)])
        .is(200)
        .json();
    assert!(
        r["result"].as_str().unwrap().contains(&format!("to {to}")),
        "{r:#}"
    );
    let started = Instant::now();
    let sends: Vec<_> = (0..12)
        .map(|_| {
            let (url, body, auth) = (url.clone(), body.clone(), auth.clone());
            thread::spawn(move || {
                http("POST", &url, Some(&body), &[("Authorization", &auth)]).status
            })
        })
        .collect();
    for h in sends {
        assert_eq!(h.join().unwrap(), 200, "{}", s.log_text());
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(files_in(&folder).len(), 2 + 1 + 12);
    // None of them went through HTTP.
    assert!(!s.log_text().contains("/drop"), "{}", s.log_text());
}

/// A token file others may read or write, or an empty one, is refused
/// (exit 2), naming the file and how to fix it.
#[test]
fn serve_refuses_a_token_file_open_to_others_or_empty() {
    let w = World::new();
    let listen = format!("127.0.0.1:{}", free_port());
    for (name, text, mode) in [
        ("group-read", "s3cret\n", 0o640),
        ("others-read", "s3cret\n", 0o644),
        ("others-write", "s3cret\n", 0o602),
    ] {
        let f = w.file(name, text);
        fs::set_permissions(&f, fs::Permissions::from_mode(mode)).unwrap();
        let f = f.to_string_lossy().into_owned();
        let r = serve_briefly(&w, &listen, &f).code_is(2);
        assert!(
            r.stderr().contains(&f) && r.stderr().contains(&format!("chmod 600 {f}")),
            "{name}: {}",
            r.explain()
        );
    }
    let f = w.file("empty", "");
    fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
    let f = f.to_string_lossy().into_owned();
    let r = serve_briefly(&w, &listen, &f).code_is(2);
    assert!(
        r.stderr().contains(&f) && r.stderr().contains("empty"),
        "{}",
        r.explain()
    );
    // Nothing was listening meanwhile.
    assert!(TcpStream::connect(&listen).is_err());
}

/// `serve --listen LISTEN --token-file FILE`, stopped (SIGKILL) if it is
/// still running after 15 s: a serve that took the file would never end.
fn serve_briefly(w: &World, listen: &str, file: &str) -> Run {
    let mut child = w.spawn_env(&["serve", "--listen", listen, "--token-file", file], &[]);
    let end = Instant::now() + Duration::from_secs(15);
    while child.try_wait().unwrap().is_none() && Instant::now() < end {
        thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    finish(&format!("serve --token-file {file}"), child)
}

/// The user unit in `assets/` (docs/serve.md, "HTTP API", under
/// systemd): systemd's own checker takes it with no complaint, with the
/// binary where its ExecStart looks (`%h/.cargo/bin`), and its ExecStart,
/// run as systemd would (that PATH, that HOME, no terminal), serves the
/// config's agent_port and ends with exit 0 on its KillSignal.
#[test]
fn the_systemd_unit_verifies_and_its_exec_start_serves() {
    let w = World::new();
    let unit_text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/shrooms-agent.service"),
    )
    .unwrap();
    let bin_dir = w.home.join(".cargo/bin");
    fs::create_dir_all(&bin_dir).unwrap();
    std::os::unix::fs::symlink(bin(), bin_dir.join("shrooms-agent")).unwrap();
    let unit = w.root.join("shrooms-agent.service");
    fs::write(&unit, &unit_text).unwrap();
    // --man=no: the man page is not installed on the test machine.
    let out = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .env("HOME", &w.home)
        .output()
        .expect("systemd-analyze (scripts/setup-host installs systemd)");
    let complaints = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && complaints.trim().is_empty(),
        "systemd-analyze verify: {:?}\n{complaints}",
        out.status
    );

    // What systemd would run: ExecStart's words with %h expanded, in the
    // environment the unit sets.
    let value = |key: &str| -> String {
        let lines: Vec<&str> = unit_text
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{key}=")))
            .collect();
        assert_eq!(lines.len(), 1, "one {key}= in the unit: {lines:?}");
        lines[0].replace("%h", &w.home.to_string_lossy())
    };
    let exec: Vec<String> = value("ExecStart")
        .split_whitespace()
        .map(String::from)
        .collect();
    let path = value("Environment")
        .strip_prefix("PATH=")
        .expect("the unit's Environment sets PATH")
        .to_string();
    assert_eq!(value("KillSignal"), "SIGTERM");
    // systemd's user manager gives its units XDG_RUNTIME_DIR.
    let run = w.dir("run");
    let mut child = std::process::Command::new(&exec[0])
        .args(&exec[1..])
        .env_clear()
        .env("HOME", &w.home)
        .env("XDG_RUNTIME_DIR", &run)
        .env("PATH", &path)
        .env("SHROOMS_AGENT_CONFIG", &w.config)
        .env("SHROOMS_AGENT_STATE_DIR", &w.state)
        .env(
            "CONTAINERS_CONF",
            std::env::var_os("CONTAINERS_CONF").unwrap_or_default(),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{}", w.agent_port);
    wait_until("the unit's serve listens", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", w.agent_port)).is_ok()
    });
    // As root, over TCP only with a token (this unit gives none); its
    // owner's programs use the Unix socket.
    get(&format!("{url}/v1/harnesses")).is(403);
    let sock = run.join(format!("shrooms-agent/serve-{}.sock", w.agent_port));
    assert_eq!(
        curl_status(
            None,
            &[
                "--unix-socket",
                &sock.to_string_lossy(),
                "http://localhost/v1/harnesses"
            ]
        ),
        "200"
    );
    // SAFETY: kill(2) on the pid of a child we have not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let end = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < end, "serve outlived TimeoutStopSec");
        thread::sleep(Duration::from_millis(50));
    };
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("GET /v1/harnesses 200 "), "{log}");
}

/// A log line without its first two words, the time and the client.
fn request_part(line: &str) -> &str {
    line.splitn(3, ' ').nth(2).unwrap_or("")
}

/// Without a token, serve is driven by anything on loopback, so it must not
/// be by a web page: a request carrying `Origin` (every cross-site request
/// and every POST from a browser) or `Sec-Fetch-Site: cross-site`, or one
/// addressed to a name (DNS rebinding), is refused 403 and does nothing;
/// the same with the token is served. `Bearer` is taken in any case.
#[test]
fn web_pages_cannot_drive_a_serve_without_a_token() {
    let w = World::new();
    let s = w.serve_without_token(&[], &[]);
    let u = &s.url;
    let dir = w.dir("page");
    let body = format!(
        r#"{{"name": "{}", "dir": "{}", "cage": {{}}}}"#,
        w.session("page"),
        dir.display()
    );
    // A form's POST: text/plain, with the page's Origin.
    let r = http(
        "POST",
        &format!("{u}/v1/sessions"),
        Some(&body),
        &[
            ("Origin", "http://attacker.example"),
            ("Content-Type", "text/plain"),
        ],
    )
    .is(403);
    assert!(
        r.error().contains("Origin: http://attacker.example"),
        "{r:#?}"
    );
    let r = http(
        "GET",
        &format!("{u}/v1/sessions"),
        None,
        &[("Sec-Fetch-Site", "cross-site")],
    )
    .is(403);
    assert!(r.error().contains("web pages"), "{r:#?}");
    // DNS rebinding: the page's own name, pointed at 127.0.0.1.
    let answer = raw(
        s.port,
        format!(
            "GET /v1/sessions HTTP/1.1\r\nHost: rebind.attacker.example:{}\r\n\r\n",
            s.port
        )
        .as_bytes(),
        Duration::from_secs(15),
    );
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(answer.contains("Host: rebind.attacker.example"), "{answer}");
    // Nothing was made. A program's request (no Origin, a number or
    // localhost as the host) is served by a serve of an ordinary user
    // (root's answers TCP only with a token).
    assert!(w.record_names().is_empty(), "{:?}", w.record_names());
    drop(s);
    let mine = World::rootless();
    let s = mine.serve(&[], &[]);
    let owner = Some(test_user());
    let u = &s.url;
    assert_eq!(curl_status(owner, &[&format!("{u}/v1/sessions")]), "200");
    let host = format!("Host: localhost:{}", s.port);
    assert_eq!(
        curl_status(owner, &["-H", &host, &format!("{u}/v1/harnesses")]),
        "200"
    );
    assert_eq!(
        curl_status(
            owner,
            &[
                "-H",
                "Origin: http://attacker.example",
                &format!("{u}/v1/harnesses")
            ]
        ),
        "403"
    );
    // serve's own origin is taken by the status page and its form alone
    // (docs/serve.md, "HTTP API"), never by the API.
    let own = format!("Origin: {u}");
    assert_eq!(
        curl_status(owner, &["-H", &own, &format!("{u}/v1/harnesses")]),
        "403"
    );
    assert_eq!(
        curl_status(
            owner,
            &[
                "-H",
                &own,
                "-d",
                r#"{"tokens": "none"}"#,
                &format!("{u}/v1/sessions/nosuch/cage/limits")
            ]
        ),
        "403"
    );
    assert_eq!(curl_status(owner, &["-H", &own, &format!("{u}/")]), "200");
    drop(s);

    // With a token, a page cannot have it: Origin is no reason to refuse.
    let (s, auth) = serve_with_token(&w, &[]);
    let lower = auth.replacen("Bearer", "bearer", 1);
    http(
        "GET",
        &format!("{}/v1/harnesses", s.url),
        None,
        &[("Authorization", &lower), ("Origin", "tauri://localhost")],
    )
    .is(200);
}

/// A tmpfs of `size` mounted on `dir` (made 0700) until dropped: a disk
/// that fills up, for the tests that write past it.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> SmallDisk {
        fs::create_dir_all(dir).unwrap();
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "mount: {}", show_output(&out));
        SmallDisk(dir.to_path_buf())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A drop whose file cannot be written (the disk is full) is this
/// machine's failure, 500, not "the upload broke off" (400, the
/// sender's); nothing of it is kept, and the sender's short body is
/// still 400.
#[test]
fn a_drop_the_disk_cannot_hold_is_500_and_leaves_nothing() {
    let w = World::new();
    w.write_config("machine_name = \"alpha\"");
    let receiver = w.session("inbox");
    let rdir = w.dir("receiver");
    w.create(&receiver, &rdir, &[]);
    w.run(&["files", "allow", &receiver, "alpha/filler"]).ok();
    let uploads = w.state.join("uploads").join(&receiver);
    let folder = uploads.join("drop/from-alpha_filler");
    fs::create_dir_all(&uploads).unwrap();
    fs::set_permissions(&uploads, fs::Permissions::from_mode(0o700)).unwrap();
    let _disk = SmallDisk::mount(&folder, "64k");
    let s = w.serve(&[], &[]);

    let len = 200 * 1024;
    let mut req = format!(
        "POST /v1/sessions/{receiver}/drop?name=big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         X-Shrooms-From-Session: filler\r\nContent-Length: {len}\r\n\r\n"
    )
    .into_bytes();
    req.extend(std::iter::repeat_n(b'x', len));
    let answer = raw(s.port, &req, Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 500 "), "{answer}");
    assert!(answer.contains("No space left"), "{answer}");
    assert!(!answer.contains("broke off"), "{answer}");
    assert!(files_in(&folder).is_empty(), "{:?}", files_in(&folder));

    // What fits is taken; a body that stops short is the sender's (400).
    let req = format!(
        "POST /v1/sessions/{receiver}/drop?name=small.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         X-Shrooms-From-Session: filler\r\nContent-Length: 5\r\n\r\nhello"
    );
    let answer = raw(s.port, req.as_bytes(), Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 201 "), "{answer}");
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    write!(
        c,
        "POST /v1/sessions/{receiver}/drop?name=short.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         {}X-Shrooms-From-Session: filler\r\nContent-Length: 10\r\n\r\nhel",
        owner_auth(s.port)
    )
    .unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let answer = read_until_closed(&c, Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("broke off"), "{answer}");
    let names: Vec<String> = files_in(&folder)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["small.txt"]);
}

/// A drop on its way is written to a hidden `.partial` name (0600) and
/// takes its own name only once whole: a serve killed (SIGKILL) halfway
/// leaves no file under that name, and the next drop into the folder
/// clears what it left.
#[test]
fn a_drop_on_its_way_is_hidden_and_a_killed_serve_leaves_no_file() {
    let w = World::new();
    w.write_config("machine_name = \"alpha\"");
    let receiver = w.session("inbox");
    let rdir = w.dir("receiver");
    w.create(&receiver, &rdir, &[]);
    w.run(&["files", "allow", &receiver, "alpha/slow"]).ok();
    let folder = w
        .state
        .join("uploads")
        .join(&receiver)
        .join("drop/from-alpha_slow");
    let mut s = w.serve(&[], &[]);
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    write!(
        c,
        "POST /v1/sessions/{receiver}/drop?name=slow.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         {}X-Shrooms-From-Session: slow\r\nContent-Length: {}\r\n\r\n",
        owner_auth(s.port),
        300 * 1024
    )
    .unwrap();
    c.write_all(&[b'x'; 10 * 1024]).unwrap();
    wait_until("the upload's file", Duration::from_secs(5), || {
        !files_in(&folder).is_empty()
    });
    let on_its_way = files_in(&folder);
    assert_eq!(on_its_way.len(), 1, "{on_its_way:?}");
    let partial = on_its_way[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        partial.starts_with('.') && partial.ends_with(".partial"),
        "{partial}"
    );
    assert_eq!(mode_of(&on_its_way[0]), 0o600);
    assert!(!folder.join("slow.bin").exists());

    // SIGKILL: nothing under the file's name.
    // SAFETY: kill(2) on the pid of serve, which this test started.
    unsafe { libc::kill(s.pid() as i32, libc::SIGKILL) };
    wait_until("serve is gone", Duration::from_secs(10), || !s.running());
    drop(c);
    assert!(!folder.join("slow.bin").exists(), "{:?}", files_in(&folder));

    // The next drop takes the name, and the leftover is cleared.
    let s2 = w.serve(&[], &[]);
    let req = format!(
        "POST /v1/sessions/{receiver}/drop?name=slow.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         X-Shrooms-From-Session: slow\r\nContent-Length: 5\r\n\r\nhello"
    );
    let answer = raw(s2.port, req.as_bytes(), Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 201 "), "{answer}");
    assert_eq!(files_in(&folder), [folder.join("slow.bin")]);
    assert_eq!(fs::read(folder.join("slow.bin")).unwrap(), b"hello");
}

/// The pace is kept at every read, not only in all: a sender that
/// announces 100 MiB and sends a byte every half second (each read well
/// within its 10 s) fell behind 256 KiB a second as soon as its grace
/// (here three seconds) ended, and is answered 408 then, its partial file
/// removed; the total (grace + 400 s) would have held a worker for minutes.
#[test]
fn an_upload_is_held_to_its_pace_at_every_read() {
    let w = World::new();
    w.write_config("machine_name = \"alpha\"");
    let receiver = w.session("inbox");
    let rdir = w.dir("receiver");
    w.create(&receiver, &rdir, &[]);
    w.run(&["files", "allow", &receiver, "alpha/drip"]).ok();
    let s = w.serve(&[], &[("SHROOMS_AGENT_TEST_UPLOAD_GRACE_MS", "3000")]);
    let folder = w
        .state
        .join("uploads")
        .join(&receiver)
        .join("drop/from-alpha_drip");
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    write!(
        c,
        "POST /v1/sessions/{receiver}/drop?name=drip.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         {}X-Shrooms-From-Session: drip\r\nContent-Length: {}\r\n\r\n",
        owner_auth(s.port),
        100 * 1024 * 1024
    )
    .unwrap();
    let started = Instant::now();
    let mut writer = c.try_clone().unwrap();
    let drip = thread::spawn(move || {
        for _ in 0..60 {
            if writer.write_all(b"x").is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(500));
        }
    });
    let answer = read_until_closed(&c, Duration::from_secs(15));
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 408 "), "{took:?}: {answer:?}");
    assert!(answer.contains("256 KiB a second"), "{answer:?}");
    assert!(took < Duration::from_secs(9), "{took:?}");
    assert!(files_in(&folder).is_empty(), "{:?}", files_in(&folder));
    drop(c);
    drip.join().unwrap();
}

/// Half-sent heads, more of them than there are workers (8), hold no
/// worker: heads are read apart from the workers, so a whole request is
/// answered at once meanwhile, and each half-sent one gets its 408 when
/// its 10 s are up.
#[test]
fn half_sent_heads_do_not_hold_the_workers() {
    let w = World::new();
    let s = w.serve(&[], &[]);
    let stalled: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
            c.write_all(b"GET /v1/harnesses HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .unwrap();
            c
        })
        .collect();
    let started = Instant::now();
    thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        let asked = Instant::now();
        get(&format!("{}/v1/harnesses", s.url)).is(200);
        let took = asked.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "a whole request waited {took:?} behind half-sent heads:\n{}",
            s.log_text()
        );
    }
    for (i, c) in stalled.iter().enumerate() {
        let answer = read_until_closed(c, Duration::from_secs(15));
        assert!(answer.starts_with("HTTP/1.1 408 "), "{i}: {answer:?}");
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(14),
        "{waited:?}"
    );
}

/// One address other than loopback may have 16 connections in flight:
/// the 17th is answered 503 at once, while loopback's requests are served,
/// and the address may connect again once one of its own is done.
#[test]
fn one_address_may_have_only_so_many_connections_in_flight() {
    let w = World::new();
    let token = w.file("serve-token", "s3cret-token\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    let auth = "Bearer s3cret-token";
    // Beyond loopback, serve listens on agent_port only.
    let s = w.serve_listening(
        "0.0.0.0",
        w.agent_port,
        &["--token-file", &token.to_string_lossy()],
        &[],
    );
    // Connections to HOST_ADDR (on lo) come from HOST_ADDR: not loopback.
    let far = format!("http://{HOST_ADDR}:{}", s.port);
    let mut held: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut c = TcpStream::connect((HOST_ADDR, s.port)).unwrap();
            c.write_all(b"GET /v1/harnesses HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            c
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let r = http(
        "GET",
        &format!("{far}/v1/harnesses"),
        None,
        &[("Authorization", auth)],
    )
    .is(503);
    assert!(started.elapsed() < Duration::from_secs(2), "{r:#?}");
    assert!(r.error().contains("16 connections"), "{r:#?}");
    assert_eq!(r.header("retry-after"), Some("1"), "{r:#?}");
    // Refused before anything is read: its time is serve's own, a few
    // milliseconds at most even on a busy machine.
    let why = format!("ms ({HOST_ADDR} has 16 connections to this serve");
    let log = s.log_text();
    let ms = log.lines().find_map(|l| {
        let (before, _) = l.split_once(&why)?;
        before.rsplit_once("503 ")?.1.parse::<u64>().ok()
    });
    assert!(ms.is_some_and(|ms| ms < 1000), "{log}");
    // Loopback is not counted.
    http(
        "GET",
        &format!("{}/v1/harnesses", s.url),
        None,
        &[("Authorization", auth)],
    )
    .is(200);
    // One of the address's connections is done: it may connect again.
    drop(held.pop());
    wait_until("a place for the address", Duration::from_secs(5), || {
        http(
            "GET",
            &format!("{far}/v1/harnesses"),
            None,
            &[("Authorization", auth)],
        )
        .status
            == 200
    });
}

/// An answer given before the body (413 for a JSON body over 1 MiB) is
/// not lost to a reset when the client sends the body anyway, after the
/// answer is on its way: serve reads and throws the body away (for 2 s
/// at most) before closing, so the client's writes do not fail, and it
/// reads its 413. (Closed at once, the socket answers the body with a
/// reset, and clients like ureq give up at the failed write, unread.)
#[test]
fn an_answer_before_the_body_is_not_lost_to_a_reset() {
    let w = World::new();
    let s = w.serve(&[], &[]);
    for _ in 0..5 {
        let len = 2 * 1024 * 1024;
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        write!(
            c,
            "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Content-Length: {len}\r\n\r\n",
            owner_auth(s.port)
        )
        .unwrap();
        // The answer is written, and serve has shut its side, by now.
        thread::sleep(Duration::from_millis(300));
        let sent = c.write_all(&vec![b'x'; len]);
        let answer = read_until_closed(&c, Duration::from_secs(10));
        assert!(
            sent.is_ok() && answer.starts_with("HTTP/1.1 413 "),
            "sending the body: {sent:?}; the answer: {answer:?}"
        );
    }
}

/// Without a token, serve answers only its own user's programs: over
/// loopback it finds the uid of the process at the other end (the
/// kernel's socket tables), and another user's gets 403 and a log line;
/// its Unix socket (mode 0600, in a folder of mode 0700) that user
/// cannot even open. The owner (root here) is answered on both.
#[test]
fn another_user_cannot_drive_a_serve_without_a_token() {
    let w = World::new();
    let run = w.dir("run");
    let run_dir = run.to_string_lossy().into_owned();
    let s = w.serve_without_token(&[], &[("XDG_RUNTIME_DIR", &run_dir)]);
    let sessions = format!("{}/v1/sessions", s.url);
    let other = test_user();
    // serve runs as root: over TCP, without its token, no one is answered.
    assert_eq!(curl_status(Some(other), &[&sessions]), "403");
    assert_eq!(
        curl_status(Some(other), &["-X", "DELETE", &format!("{sessions}/x")]),
        "403"
    );
    assert_eq!(curl_status(None, &[&sessions]), "403");
    let r = get(&sessions).is(403);
    assert!(r.error().contains("runs as root"), "{r:#?}");
    assert!(
        s.log_text()
            .lines()
            .any(|l| request_part(l).starts_with("GET /v1/sessions 403 ")
                && l.contains("(serve runs as root: TCP needs its token)")),
        "{}",
        s.log_text()
    );

    // Its owner uses the Unix socket, which the other user cannot even open.
    let socket = run.join(format!("shrooms-agent/serve-{}.sock", s.port));
    assert_eq!(mode_of(&socket), 0o600);
    assert_eq!(mode_of(socket.parent().unwrap()), 0o700);
    let sock = socket.to_string_lossy().into_owned();
    let via_socket = ["--unix-socket", &sock, "http://localhost/v1/sessions"];
    assert_eq!(curl_status(None, &via_socket), "200");
    // (curl says 000: it could not connect.)
    assert_eq!(curl_status(Some(other), &via_socket), "000");
    drop(s);
    assert!(!socket.exists(), "the socket outlived its serve");

    // With a token, the token decides: another user that has it is served.
    let (s, auth) = serve_with_token(&w, &[]);
    let header = format!("Authorization: {auth}");
    let url = format!("{}/v1/harnesses", s.url);
    assert_eq!(curl_status(Some(other), &["-H", &header, &url]), "200");
    assert_eq!(curl_status(Some(other), &[&url]), "401");
}

/// Two Host headers in one request: 400, not the first one's answer (a
/// proxy in front and serve's own checks could read different ones).
#[test]
fn two_host_headers_are_refused() {
    let w = World::new();
    let s = w.serve(&[], &[]);
    let answer = raw(
        s.port,
        b"GET /v1/harnesses HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: attacker.example\r\n\r\n",
        Duration::from_secs(15),
    );
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("two Host headers"), "{answer}");
    let answer = raw(
        s.port,
        b"GET /v1/harnesses HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        Duration::from_secs(15),
    );
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
}

/// A podman that takes `secs` seconds for every call: the config's
/// `podman` names a script that sleeps, then runs the real one.
fn slow_podman(w: &World, secs: u32) -> String {
    let script = w.file(
        "slow-podman",
        &format!(
            "#!/bin/sh\ncase \"$1\" in ps|inspect|image) sleep {secs} ;; esac\nexec {} \"$@\"\n",
            podman_program()
        ),
    );
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    format!("podman = \"{}\"", script.display())
}

/// `n` requests that wait on podman (`GET /v1/sessions` answers from
/// serve's live view, so not that one): sessions asked for with an image
/// that is not there, which podman is asked about (slowly) before the
/// refusal, 400. Nothing is made.
fn slow_requests(w: &World, url: &str, n: usize) -> Vec<thread::JoinHandle<u16>> {
    let dir = w.dir("slow-requests");
    (0..n)
        .map(|i| {
            let u = format!("{url}/v1/sessions");
            let body = format!(
                r#"{{"name": "slow{i}-{}", "dir": "{}", "cage": {{"image": "localhost/absent-slow:1"}}}}"#,
                std::process::id(),
                dir.display()
            );
            thread::spawn(move || post(&u, &body).status)
        })
        .collect()
}

/// Routes that call podman never hold up one that does not: with podman's
/// answers about containers taking 2 s and more requests that wait on it in flight than
/// there are places for operations, `GET /v1/harnesses` (answered from
/// what serve knows) is answered at once.
#[test]
fn a_slow_podman_does_not_hold_up_the_harnesses() {
    let w = World::new();
    let name = w.session("slowpoke");
    w.create(&name, &w.dir("slowpoke"), &[]);
    w.write_config(&slow_podman(&w, 5));
    let s = w.serve(&[], &[]);
    let url = s.url.clone();
    let slow = slow_requests(&w, &url, 12);
    thread::sleep(Duration::from_millis(500));
    for _ in 0..3 {
        let asked = Instant::now();
        get(&format!("{url}/v1/harnesses")).is(200);
        let took = asked.elapsed();
        assert!(
            // Well under the slow podman's 5 s: not behind it (room left
            // for a busy machine).
            took < Duration::from_secs(3),
            "GET /v1/harnesses waited {took:?} behind GET /v1/sessions:\n{}",
            s.log_text()
        );
    }
    for h in slow {
        assert_eq!(h.join().unwrap(), 400);
    }
}

/// A request whose client went away before its operation began is not
/// carried on: a DELETE waiting for a place behind slow operations, whose
/// client then closes, never removes the session; the log says so. The
/// same DELETE whose client waits removes it.
#[test]
fn a_request_whose_client_went_away_is_not_carried_on() {
    let w = World::new();
    let name = w.session("keepme");
    w.create(&name, &w.dir("keepme"), &[]);
    w.write_config(&slow_podman(&w, 2));
    let s = w.serve(&[], &[]);
    let url = s.url.clone();
    // Every place for an operation taken (8), for seconds: the first of
    // them at the slow podman, and a moment for the rest to come in
    // (they wait their turn at podman one by one, so are not counted).
    let slow = slow_requests(&w, &url, 10);
    wait_until(
        "an operation waiting on podman",
        Duration::from_secs(20),
        || {
            cmdlines_containing(&w.root.join("slow-podman").to_string_lossy())
                .iter()
                .any(|(_, line)| line.contains("absent-slow"))
        },
    );
    thread::sleep(Duration::from_secs(1));
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    write!(
        c,
        "DELETE /v1/sessions/{name} HTTP/1.1\r\nHost: 127.0.0.1\r\n{}\r\n",
        owner_auth(s.port)
    )
    .unwrap();
    thread::sleep(Duration::from_millis(300));
    drop(c);
    for h in slow {
        assert_eq!(h.join().unwrap(), 400);
    }
    wait_until("the DELETE's log line", Duration::from_secs(10), || {
        s.log_text().lines().any(|l| {
            request_part(l).starts_with(&format!("DELETE /v1/sessions/{name} - "))
                && l.contains("the client went away")
        })
    });
    // Time for it to have run, had it been carried on.
    thread::sleep(Duration::from_secs(5));
    assert!(w.record_path(&name).exists(), "{}", s.log_text());
    http("DELETE", &format!("{url}/v1/sessions/{name}"), None, &[]).is(204);
    assert!(!w.record_path(&name).exists());
}

/// The same rule for a serve of an ordinary user (rootless podman): its
/// user is answered, root's curl is another user's program and gets 403.
#[test]
fn another_user_cannot_drive_a_rootless_serve_without_a_token() {
    let w = World::rootless();
    let s = w.serve(&[], &[]);
    let url = format!("{}/v1/harnesses", s.url);
    let owner = test_user();
    assert_eq!(curl_status(Some(owner), &[&url]), "200");
    assert_eq!(curl_status(None, &[&url]), "403");
    assert!(
        s.log_text()
            .lines()
            .any(|l| request_part(l).starts_with("GET /v1/harnesses 403 ")
                && l.contains("(from uid 0,")),
        "{}",
        s.log_text()
    );
}

/// The apps' requests, as they send them, get the apps' answers: settings
/// by `POST .../settings` and `PATCH /v1/sessions/{name}` (each field
/// alone, unknown fields 400, the session object back, `accept-caged`
/// still an alias, a change through a cage's socket refused), a refused
/// sender dismissed without being allowed, received files listed and
/// deleted (a path refused, a caged caller refused), `caps` in the
/// harnesses, a session renamed (a path, a taken name, a caged caller
/// refused); and the CLI's `files ignore`, `files received`, `files clear`.
#[test]
fn the_apps_requests_get_the_apps_answers() {
    let w = World::new();
    w.write_config("machine_name = \"alpha\"");
    let name = w.session("inbox");
    let dir = w.dir("inbox-project");
    w.create(&name, &dir, &[]);
    let s = w.serve(&[], &[]);
    let u = &s.url;
    let one = format!("{u}/v1/sessions/{name}");
    let settings = format!("{one}/settings");

    // GET /v1/harnesses: caps.approve, true for claude, false for pi.
    let h = get(&format!("{u}/v1/harnesses")).is(200).json();
    let caps: Vec<(&str, bool)> = h["harnesses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["name"].as_str().unwrap(),
                x["caps"]["approve"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        caps,
        [
            ("claude", true),
            ("pi", false),
            ("codex", false),
            ("opencode", false)
        ],
        "{h:#}"
    );

    // Each field alone, by POST .../settings: the session object back,
    // the record changed.
    let shown = post(&settings, r#"{"accept_caged": false}"#).is(200).json();
    assert_eq!(shown["name"], name.as_str(), "{shown:#}");
    assert_eq!(shown["accept_caged"], false, "{shown:#}");
    assert_eq!(w.record(&name)["accept_caged"], false);
    let shown = post(&settings, r#"{"auto_approve": true}"#).is(200).json();
    assert_eq!(shown["auto_approve"], true, "{shown:#}");
    let shown = post(&settings, r#"{"starred": true}"#).is(200).json();
    assert_eq!(shown["starred"], true, "{shown:#}");
    assert_eq!(w.record(&name)["starred"], true);
    let shown = post(
        &settings,
        r#"{"accept_files_from": ["alpha/writer", "beta/*"]}"#,
    )
    .is(200)
    .json();
    assert_eq!(
        shown["files"]["allow"],
        serde_json::json!(["alpha/writer", "beta/*"]),
        "{shown:#}"
    );
    // The answer is the session object, as GET gives it.
    assert_eq!(shown, get(&one).is(200).json());
    // PATCH /v1/sessions/{name}, the same fields.
    let shown = http(
        "PATCH",
        &one,
        Some(r#"{"auto_approve": false, "starred": false}"#),
        &[],
    )
    .is(200)
    .json();
    assert_eq!(shown["auto_approve"], false, "{shown:#}");
    assert_eq!(shown["starred"], false, "{shown:#}");
    assert_eq!(w.record(&name)["auto_approve"], false);
    // The alias still answers.
    let r = post(&format!("{one}/accept-caged"), r#"{"accept_caged": true}"#)
        .is(200)
        .json();
    assert_eq!(r["accept_caged"], true, "{r:#}");
    // Unknown fields, a value of the wrong type, a bad sender: 400, the
    // field named as data, nothing changed.
    let before = w.record(&name);
    for (method, body, says, field) in [
        (
            "POST",
            r#"{"starred": true, "pinned": true}"#,
            "unknown field `pinned`",
            "pinned",
        ),
        ("PATCH", r#"{"gpu": 1}"#, "unknown field `gpu`", "gpu"),
        ("POST", r#"{"starred": "yes"}"#, "invalid type", "starred"),
        (
            "POST",
            r#"{"accept_files_from": ["../x"]}"#,
            "accept_files_from",
            "accept_files_from",
        ),
        (
            "PATCH",
            r#"{"ignore_file_request": "alpha/*"}"#,
            "ignore_file_request",
            "ignore_file_request",
        ),
    ] {
        let url = if method == "POST" { &settings } else { &one };
        let r = http(method, url, Some(body), &[]).is(400);
        assert!(r.error().contains(says), "{body}: {r:#?}");
        assert_eq!(r.json()["field"], field, "{body}: {r:#?}");
    }
    assert_eq!(w.record(&name), before);
    // A change through a cage's socket (X-Shrooms-Caged) is refused, and
    // so is deleting a received file.
    let caged = [("x-shrooms-caged", "other")];
    http("POST", &settings, Some(r#"{"starred": true}"#), &caged).is(403);
    http("PATCH", &one, Some(r#"{"starred": true}"#), &caged).is(403);
    http(
        "DELETE",
        &format!("{one}/drop?from=alpha/writer&file=a.txt"),
        None,
        &caged,
    )
    .is(403);
    assert_eq!(w.record(&name), before);
    // 404 for a session that is not there.
    let r = post(&format!("{u}/v1/sessions/nobody-here/settings"), "{}").is(404);
    assert!(r.error().contains("nobody-here"), "{r:#?}");

    // Drops: one taken, one refused (and remembered).
    let drop = |from: &str, file: &str, body: &str| {
        raw(
            s.port,
            format!(
                "POST /v1/sessions/{name}/drop?name={file}&note=hi HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 X-Shrooms-From-Session: {from}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
            Duration::from_secs(15),
        )
    };
    let answer = drop("writer", "a.txt", "hello");
    assert!(answer.starts_with("HTTP/1.1 201 "), "{answer}");
    let answer = drop("stranger", "b.txt", "nope");
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    let refused = get(&one).json()["files"]["refused"].clone();
    assert_eq!(refused[0]["from"], "alpha/stranger", "{refused:#}");

    // Dismissed without being allowed: off the refused list, not on the
    // allow list, and its next drop refused again.
    let shown = post(&settings, r#"{"ignore_file_request": "alpha/stranger"}"#)
        .is(200)
        .json();
    assert_eq!(
        shown["files"]["refused"],
        serde_json::json!([]),
        "{shown:#}"
    );
    assert_eq!(
        shown["files"]["allow"],
        serde_json::json!(["alpha/writer", "beta/*"]),
        "{shown:#}"
    );
    assert!(drop("stranger", "b.txt", "nope").starts_with("HTTP/1.1 403 "));
    // The CLI's way: `files ignore`.
    let list = w
        .run(&["files", "ignore", &name, "alpha/stranger", "--json"])
        .ok()
        .json();
    assert_eq!(list["refused"], serde_json::json!([]), "{list:#}");

    // GET .../drop: what arrived (the note beside it is not a file of its
    // own), as `files received` lists it.
    let listed = get(&format!("{one}/drop")).is(200).json();
    assert_eq!(
        listed["files"],
        serde_json::json!([{"from": "alpha/writer", "name": "a.txt", "size": 5}]),
        "{listed:#}"
    );
    let cli = w.run(&["files", "received", &name, "--json"]).ok().json();
    assert_eq!(cli, listed);
    let text = w.run(&["files", "received", &name]).ok().stdout();
    assert!(text.contains("alpha/writer  5  a.txt"), "{text}");

    // DELETE .../drop: a path, a hidden name, a bad sender refused (400);
    // a file not there 404; the file 204, its note with it.
    let folder = w
        .state
        .join("uploads")
        .join(&name)
        .join("drop/from-alpha_writer");
    let outside = w.state.join("uploads").join(&name).join("drop/keep.txt");
    fs::write(&outside, "keep").unwrap();
    for q in [
        "from=alpha/writer&file=..%2Fkeep.txt",
        "from=alpha/writer&file=..",
        "from=alpha/writer&file=.lock",
        "from=alpha%2F..&file=a.txt",
        "from=alpha/writer",
    ] {
        let r = http("DELETE", &format!("{one}/drop?{q}"), None, &[]).is(400);
        assert!(!r.error().is_empty(), "{q}");
    }
    assert!(outside.exists());
    http(
        "DELETE",
        &format!("{one}/drop?from=alpha/writer&file=zzz.txt"),
        None,
        &[],
    )
    .is(404);
    assert!(folder.join("a.txt").exists() && folder.join("a.txt.note").exists());
    let r = http(
        "DELETE",
        &format!("{one}/drop?from=alpha%2Fwriter&file=a.txt"),
        None,
        &[],
    )
    .is(204);
    assert!(r.body.is_empty(), "{r:#?}");
    assert!(!folder.join("a.txt").exists());
    assert!(!folder.join("a.txt.note").exists());
    let listed = get(&format!("{one}/drop")).is(200).json();
    assert_eq!(listed["files"], serde_json::json!([]), "{listed:#}");

    // The CLI's `files clear`, and its refusal of a path (exit 2, nothing gone).
    assert!(drop("writer", "c.txt", "again").starts_with("HTTP/1.1 201 "));
    let bad = w.run(&["files", "clear", &name, "alpha/writer", "../keep.txt"]);
    assert_eq!(bad.code(), 2, "{}", bad.explain());
    assert!(outside.exists());
    let left = w
        .run(&["files", "clear", &name, "alpha/writer", "c.txt", "--json"])
        .ok()
        .json();
    assert_eq!(left["files"], serde_json::json!([]), "{left:#}");
    assert!(!folder.join("c.txt").exists());

    // POST .../rename: a path, a bad name, an unknown field 400 with the
    // validation's words; a taken name 409; a caged caller 403; a session
    // that is not there 404; nothing changed by any of them.
    assert!(drop("writer", "d.txt", "moved").starts_with("HTTP/1.1 201 "));
    let taken = w.session("inbox-taken");
    w.create(&taken, &w.dir("inbox-taken"), &[]);
    let renamed = w.session("inbox-renamed");
    let rename = format!("{one}/rename");
    let before = w.record(&name);
    for (body, status, says) in [
        (
            r#"{"name": "../x"}"#.to_string(),
            400,
            "is not a session name",
        ),
        (r#"{"name": "/"}"#.to_string(), 400, "is not a session name"),
        (
            r#"{"name": ".."}"#.to_string(),
            400,
            "is not a session name",
        ),
        (
            format!(r#"{{"name": "{renamed}", "force": true}}"#),
            400,
            "unknown field `force`",
        ),
        (format!(r#"{{"name": "{taken}"}}"#), 409, "already"),
    ] {
        let r = post(&rename, &body).is(status);
        assert!(r.error().contains(says), "{body}: {r:#?}");
    }
    let body = format!(r#"{{"name": "{renamed}"}}"#);
    http("POST", &rename, Some(&body), &caged).is(403);
    post(&format!("{u}/v1/sessions/nobody-here/rename"), &body).is(404);
    assert_eq!(w.record(&name), before);
    // Renamed: the session object under its new name, its settings and
    // received files with it; the old name 404.
    let shown = post(&rename, &body).is(200).json();
    assert_eq!(shown["name"], renamed.as_str(), "{shown:#}");
    assert_eq!(
        shown["files"]["allow"],
        serde_json::json!(["alpha/writer", "beta/*"]),
        "{shown:#}"
    );
    assert_eq!(shown["accept_caged"], true, "{shown:#}");
    let again = get(&format!("{u}/v1/sessions/{renamed}")).is(200).json();
    assert_eq!(again["name"], renamed.as_str(), "{again:#}");
    get(&one).is(404);
    let listed = get(&format!("{u}/v1/sessions/{renamed}/drop"))
        .is(200)
        .json();
    assert_eq!(
        listed["files"],
        serde_json::json!([{"from": "alpha/writer", "name": "d.txt", "size": 5}]),
        "{listed:#}"
    );
}
