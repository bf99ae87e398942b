//! Saying what is true: a session moved back into a cage keeps its image;
//! limits podman does not enforce are shown as such wherever limits are
//! shown; a token budget already spent is taken with a warning that is
//! true; budgets are written as people write them (`5k`, `5M`).

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::common::*;
use crate::gateway::{MACHINE_KEY, Mock, REQ_FN, read, session_in, status, world_for};

/// `cage move NAME` after `--out` makes the cage from the image it was
/// taken out of, not the config's.
#[test]
fn moving_back_in_keeps_the_image() {
    let w = World::new();
    let tag = format!(
        "localhost/shrooms-test-busybox:moved-{}",
        std::process::id()
    );
    assert!(w.podman(&["tag", IMAGE, &tag]).status.success());
    // Untagged again once the world's containers are gone.
    w.podman_on_drop(&["rmi", &tag]);
    let name = w.session("moveimg");
    let dir = fs::canonicalize(w.dir(&format!("{name}-project"))).unwrap();
    w.create(&name, &dir, &["--image", &tag]);
    w.run(&["cage", "move", &name, "--out"]).ok();
    assert!(w.record(&name)["cage"].is_null());
    let r = w.run(&["cage", "move", &name]).ok();
    assert_eq!(
        w.record(&name)["cage"]["image"],
        tag.as_str(),
        "{}",
        r.explain()
    );
    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(show["cage"]["image"], tag.as_str(), "{show:#}");
}

/// Where limits are shown: `cage limits` (setting a budget, and showing),
/// `cage show`, `cage ls --json`, `GET /v1/sessions/{name}`, the status
/// page. Rootless on this machine's cgroups v1 podman ignores them, and
/// each says so; rootful each shows them plainly.
fn limits_shown_as_they_are(w: World, enforced: bool) {
    let name = w.session("enforced");
    let dir = fs::canonicalize(w.dir(&format!("{name}-project"))).unwrap();
    w.create(&name, &dir, &[]);
    let note = "NOT enforced";
    let says = |text: &str| text.contains(note);

    let r = w.run(&["cage", "limits", &name, "--tokens", "5k"]).ok();
    assert!(
        r.stdout().contains("token budget 5000 (applied now)"),
        "{}",
        r.explain()
    );
    assert_eq!(says(&r.stdout()), !enforced, "{}", r.explain());
    assert_eq!(w.record(&name)["tokens"]["budget"], 5000);
    let j = w
        .run(&["cage", "limits", &name, "--tokens", "5M", "--json"])
        .ok()
        .json();
    assert_eq!(j["tokens_after"], 5_000_000, "{j:#}");
    assert_eq!(j["enforced"], enforced, "{j:#}");

    let r = w.run(&["cage", "limits", &name]).ok();
    assert_eq!(says(&r.stdout()), !enforced, "{}", r.explain());
    let j = w.run(&["cage", "limits", &name, "--json"]).ok().json();
    assert_eq!(j["enforced"], enforced, "{j:#}");

    let r = w.run(&["cage", "show", &name]).ok();
    let limits_line = r
        .stdout()
        .lines()
        .find(|l| l.starts_with("limits"))
        .unwrap_or_default()
        .to_string();
    assert_eq!(says(&limits_line), !enforced, "{}", r.explain());
    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(show["cage"]["limits_enforced"], enforced, "{show:#}");
    let row = w.ls_row(&name).unwrap_or_default();
    assert_eq!(row["cage"]["limits_enforced"], enforced, "{row:#}");

    let token = "truth-token";
    let file = w.file("serve-token", &format!("{token}\n"));
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    let s = w.serve(&["--token-file", &file.to_string_lossy()], &[]);
    let auth = format!("Bearer {token}");
    let h = [("authorization", auth.as_str())];
    let one = http("GET", &format!("{}/v1/sessions/{name}", s.url), None, &h).is(200);
    assert_eq!(
        one.json()["cage"]["limits_enforced"],
        enforced,
        "{:#}",
        one.json()
    );
    let page = http("GET", &format!("{}/", s.url), None, &h).is(200);
    let row = page
        .body
        .split("<tr>")
        .find(|r| r.contains(name.as_str()))
        .unwrap_or_default();
    assert!(row.contains("memory "), "{}", page.body);
    assert_eq!(says(row), !enforced, "{row}");
    // Over HTTP, budgets are written the same way.
    let set = http(
        "POST",
        &format!("{}/v1/sessions/{name}/cage/limits", s.url),
        Some(r#"{"tokens": "2.5M"}"#),
        &h,
    )
    .is(200);
    assert_eq!(set.json()["tokens_after"], 2_500_000, "{:#}", set.json());
    assert_eq!(set.json()["enforced"], enforced, "{:#}", set.json());
}

#[test]
fn limits_shown_as_enforced() {
    limits_shown_as_they_are(World::new(), true);
}

#[test]
fn unenforced_limits_shown_as_not_enforced_rootless() {
    limits_shown_as_they_are(World::rootless(), false);
}

/// A budget at or below what was already spent is taken (exit 0), with a
/// warning that the next turn will be refused where the config's `[budget]
/// wait` is 0; and it is. Where requests at a budget wait, the warning
/// says so (budgets.rs shows them waiting).
#[test]
fn a_budget_already_spent_is_taken_with_a_true_warning() {
    let w = World::new();
    let mock = Mock::start();
    world_for(&w, &mock, crate::gateway::REFUSE_AT_ONCE);
    let (name, project) = session_in(&w, "spentbudget");
    let p = project.display();
    let turn = |file: &str| {
        w.run_env(
            &[
                "cage",
                "exec",
                &name,
                "--",
                "sh",
                "-c",
                &format!("{REQ_FN}req POST /v1/messages {p}/{file}"),
            ],
            &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
        )
        .ok()
    };
    turn("a.txt");
    assert_eq!(status(&read(&project.join("a.txt"))), 200);
    let spent = w.record(&name)["tokens"]["used"]["input_tokens"].clone();
    assert!(spent.as_u64().is_some_and(|n| n > 1), "{}", w.record(&name));

    let r = w.run(&["cage", "limits", &name, "--tokens", "1"]).ok();
    assert!(
        r.stderr().contains("warning: session")
            && r.stderr().contains("already spent")
            && r.stderr().contains("next model request will be refused"),
        "{}",
        r.explain()
    );
    assert_eq!(w.record(&name)["tokens"]["budget"], 1);
    let j = w
        .run(&["cage", "limits", &name, "--tokens", "1", "--json"])
        .ok()
        .json();
    assert!(
        j["warnings"][0]
            .as_str()
            .is_some_and(|t| t.contains("next model request will be refused")),
        "{j:#}"
    );
    // True: the next turn's request is refused, and never reaches the mock.
    let before = mock.seen().len();
    turn("b.txt");
    assert_eq!(status(&read(&project.join("b.txt"))), 400);
    assert_eq!(mock.seen().len(), before, "{}", mock.explain());
    // Where a request at a budget waits, the warning says it will wait.
    world_for(&w, &mock, "");
    let r = w.run(&["cage", "limits", &name, "--tokens", "2"]).ok();
    assert!(
        r.stderr()
            .contains("next model request will wait until it is raised"),
        "{}",
        r.explain()
    );
    // A budget above what was spent says nothing.
    let r = w.run(&["cage", "limits", &name, "--tokens", "5M"]).ok();
    assert!(!r.stderr().contains("warning"), "{}", r.explain());
}
