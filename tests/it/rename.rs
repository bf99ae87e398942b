//! End-to-end tests of `cage rename` against real podman, rootful and
//! rootless: what follows the session to its new name, and what is refused
//! without changing anything.

use std::fs;

use crate::common::*;

/// A stopped cage with history, a file in its project, one in its private
/// home and a received file renamed: `cage show`, `cage history`, `files received` and `cage exec`
/// work under the new name and see the same files; the old name is gone,
/// with its container. Refused and changing nothing: a rename while busy,
/// to a taken name, to a path. A running idle cage is renamed too, and
/// left stopped.
fn rename_follows(w: World) {
    let name = w.session("rn");
    let new = w.session("rn-new");
    let other = w.session("rn-other");
    let d = w.dir("rn");
    w.create(&name, &d, &[]);
    w.create(&other, &w.dir("rn-other"), &[]);
    // A file in the project, and one in the cage's private harness home
    // (mounted at the machine's ~/.claude).
    let own = w.home.join(".claude/own-file");
    // And a line in its egress log: a refused connection to the agent port.
    w.sh(
        &name,
        &format!(
            "echo kept > project-file; echo mine > {}; nc -w 2 {HOST_ADDR} {} </dev/null; true",
            own.display(),
            w.agent_port
        ),
    )
    .ok();
    let egress = |session: &str| {
        w.run(&["cage", "history", session, "--net", "--json"])
            .ok()
            .json()["connections"]
            .clone()
    };
    let logged = egress(&name);
    assert!(
        logged
            .as_array()
            .is_some_and(|l| l.iter().any(|c| c["port"] == w.agent_port)),
        "{logged:#}"
    );
    let received = w
        .state
        .join("uploads")
        .join(&name)
        .join("drop/from-alpha_writer");
    fs::create_dir_all(&received).unwrap();
    fs::write(received.join("a.txt"), "hello").unwrap();
    w.chown_all();
    let c1 = w.container(&name);
    let before = w.record(&name);

    // Busy: an exec holds the session.
    let held = w.hold(&name, &d);
    let r = w.run(&["cage", "rename", &name, &new]).code_is(3);
    assert!(r.stderr().contains("busy"), "{}", r.explain());
    held.release().ok();
    // A taken name, a path.
    let r = w.run(&["cage", "rename", &name, &other]).code_is(2);
    assert!(r.stderr().contains("already"), "{}", r.explain());
    for bad in ["../x", "/", "a/b"] {
        let r = w.run(&["cage", "rename", &name, bad]).code_is(2);
        assert!(
            r.stderr().contains("is not a session name"),
            "{}",
            r.explain()
        );
    }
    assert_eq!(w.record(&name), before);
    assert_eq!(w.container(&name), c1);
    assert!(!w.record_path(&new).exists());
    assert!(received.join("a.txt").exists());

    w.run(&["cage", "rename", &name, &new, "--by", "tester"])
        .ok();
    // The old name is gone, and its container.
    let r = w.run(&["cage", "show", &name]).code_is(2);
    assert!(
        r.stderr().contains("there is no session"),
        "{}",
        r.explain()
    );
    assert!(!w.container_exists(&c1));
    assert!(w.containers_of(&name).is_empty());
    // The new name has a container of its own, labelled with it.
    let show = w.run(&["cage", "show", &new, "--json"]).ok().json();
    assert_eq!(show["name"], new.as_str(), "{show:#}");
    let c2 = w.container(&new);
    assert_ne!(c1, c2);
    assert_eq!(w.containers_of(&new), std::slice::from_ref(&c2));
    assert_eq!(w.record(&new)["created"], before["created"]);
    let history = w.run(&["cage", "history", &new]).ok().stdout();
    assert!(history.contains("created"), "{history}");
    assert!(
        history.contains(&format!("renamed from {name}")) && history.contains("tester"),
        "{history}"
    );
    let listed = w.run(&["files", "received", &new, "--json"]).ok().json();
    assert_eq!(
        listed["files"],
        serde_json::json!([{"from": "alpha/writer", "name": "a.txt", "size": 5}]),
        "{listed:#}"
    );
    let uploads = w.state.join("uploads").join(&new);
    let out = w
        .sh(
            &new,
            &format!(
                "cat project-file {} {}/drop/from-alpha_writer/a.txt",
                own.display(),
                uploads.display()
            ),
        )
        .ok()
        .stdout();
    assert_eq!(out.trim_end(), "kept\nmine\nhello", "{out}");
    // The egress log came along (a rename once deleted it), and the old
    // name's is gone.
    let now = egress(&new);
    assert!(
        now.as_array()
            .is_some_and(|l| l.starts_with(logged.as_array().unwrap())),
        "the egress log of {new} does not start with {name}'s:\n{now:#}\n{logged:#}"
    );
    let sessions = w.state.join("sessions");
    assert!(!sessions.join(format!("{name}.egress.jsonl")).exists());
    assert!(sessions.join(format!("{new}.egress.jsonl")).exists());

    // Running and idle: stopped, made again, left stopped.
    w.run(&["cage", "start", &new]).ok();
    w.run(&["cage", "rename", &new, &name]).ok();
    let c3 = w.container(&name);
    assert!(!w.container_exists(&c2));
    assert_ne!(w.container_state(&c3).as_deref(), Some("running"));
    w.sh(&name, "cat project-file").ok();
}

#[test]
fn rename_follows_the_session() {
    rename_follows(World::new());
}

#[test]
fn rename_follows_the_session_rootless() {
    rename_follows(World::rootless());
}
