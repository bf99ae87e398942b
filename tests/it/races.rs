//! Changes of a session's record at once never race (docs/cages.md, "Limits,
//! moving, history"): each is made from the record the one before left,
//! and the last one holds in the record and in the running cage alike.
//! Each race is run in a loop of rounds, rootful and rootless: before,
//! two `cage limits --net` beside a turn left the record saying one policy
//! while the cage had the other in a few rounds of twenty, and a rename
//! beside a change of settings brought the old name back as a second
//! record naming the container the rename removed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::attacks::{all_on_this_machine, listen_everywhere};
use crate::common::*;

/// Rounds of each race.
const ROUNDS: usize = 20;

/// Two `cage limits --net` at once beside a turn, `open` and `internet`,
/// twenty times: after each round the record, `cage show` and the cage
/// agree on the policy, and the cage reaches the LAN stand-in exactly when
/// the record says `open`. The cage is probed with podman's own exec
/// (`cage exec --join` would load the record's rules again first).
fn policy_changes_beside_a_turn(w: World) {
    let port = listen_everywhere();
    all_on_this_machine(&[LAN_ADDR]);
    let name = w.session("netrace");
    let d = w.dir("netrace");
    w.create(&name, &d, &[]);
    let held = w.hold(&name, &d);
    let container = w.container(&name);
    let probe = nc_probe(LAN_ADDR, port);
    let mut wrong = Vec::new();
    for round in 0..ROUNDS {
        let (one, two) = if round % 2 == 0 {
            ("open", "internet")
        } else {
            ("internet", "open")
        };
        let a = w.spawn_env(&["cage", "limits", &name, "--net", one], &[]);
        let b = w.spawn_env(&["cage", "limits", &name, "--net", two], &[]);
        finish("the first cage limits", a).ok();
        finish("the second cage limits", b).ok();
        let net = w.record(&name)["cage"]["net"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let shown = w.run(&["cage", "show", &name, "--json"]).ok().json();
        assert_eq!(
            shown["cage"]["net"],
            net.as_str(),
            "round {round}: {shown:#}"
        );
        let out = w.podman(&["exec", &container, "sh", "-c", &probe]);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        let reached = said.contains(&format!("CONNECTED-{port}"));
        assert!(
            reached || said.contains(&format!("REFUSED-{port}")),
            "round {round}: the probe said nothing:\n{}",
            show_output(&out)
        );
        if reached != (net == "open") {
            wrong.push(format!(
                "round {round}: the record says {net}, and the cage {} the LAN",
                if reached { "reached" } else { "did not reach" }
            ));
        }
    }
    held.release().ok();
    assert!(
        wrong.is_empty(),
        "the record and the cage disagreed:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn races_policy_changes_beside_a_turn() {
    policy_changes_beside_a_turn(World::new());
}

#[test]
fn races_policy_changes_beside_a_turn_rootless() {
    policy_changes_beside_a_turn(World::rootless());
}

/// `cage rename` beside changes of the old name's settings (serve's
/// `PATCH` and settings route from threads of their own, and `cage
/// accept-caged` from the command line, in loops for as long as the
/// rename runs), twenty times, renamed back and forth: after each, one
/// session, under the new name, with its new container; the old name has
/// no record and no container.
fn rename_beside_settings_changes(w: World) {
    let first = w.session("rnrace");
    let second = w.session("rnrace-b");
    let d = w.dir("rnrace");
    w.create(&first, &d, &[]);
    let serve = w.serve(&[], &[]);
    let (mut from, mut to) = (first.clone(), second.clone());
    for round in 0..ROUNDS {
        let stop = Arc::new(AtomicBool::new(false));
        let hammers: Vec<_> = (0..3)
            .map(|i| {
                let (stop, url) = (stop.clone(), serve.url.clone());
                let from = from.clone();
                let user = w.user;
                std::thread::spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let (method, path, body) = if i == 0 {
                            (
                                "POST",
                                format!("/v1/sessions/{from}/settings"),
                                r#"{"starred": true}"#,
                            )
                        } else if i == 1 {
                            (
                                "PATCH",
                                format!("/v1/sessions/{from}"),
                                r#"{"auto_approve": true}"#,
                            )
                        } else {
                            (
                                "POST",
                                format!("/v1/sessions/{from}/accept-caged"),
                                r#"{"accept_caged": true}"#,
                            )
                        };
                        // The test user's serve answers that user's
                        // processes alone: curl as them.
                        let url = format!("{url}{path}");
                        let status = curl_status(
                            user,
                            &[
                                "-X",
                                method,
                                "-H",
                                "Content-Type: application/json",
                                "-d",
                                body,
                                &url,
                            ],
                        );
                        assert!(
                            ["200", "404", "409"].contains(&status.as_str()),
                            "{method} {path}: {status}"
                        );
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let mut renamer = w.spawn_env(&["cage", "rename", &from, &to], &[]);
        let mut asked = 0;
        while renamer.try_wait().unwrap().is_none() {
            let r = w.run(&["cage", "accept-caged", &from, "on"]);
            assert!(
                [0, 2, 3].contains(&r.code()),
                "round {round}: {}",
                r.explain()
            );
            asked += 1;
        }
        finish("the rename", renamer).ok();
        stop.store(true, Ordering::SeqCst);
        let sent: usize = hammers.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(sent + asked > 0, "round {round}: no change was sent");
        let names = w.record_names();
        assert!(
            names.contains(&to) && !names.contains(&from),
            "round {round}: after renaming {from} to {to} the records are {names:?}"
        );
        let c = w.container(&to);
        assert!(w.container_exists(&c), "round {round}: {c} is gone");
        assert!(
            w.containers_of(&from).is_empty(),
            "round {round}: {from} has containers {:?}",
            w.containers_of(&from)
        );
        let listed = w.run(&["cage", "ls", "--json"]).ok().json();
        let sessions: Vec<String> = listed["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["name"].as_str().map(str::to_string))
            .filter(|n| *n == first || *n == second)
            .collect();
        assert_eq!(sessions, [to.clone()], "round {round}: {listed:#}");
        std::mem::swap(&mut from, &mut to);
    }
    drop(serve);
    // Settings changed once the renames are done reach the session.
    w.run(&["cage", "accept-caged", &from, "off"]).ok();
    assert_eq!(w.record(&from)["accept_caged"], false);
}

#[test]
fn races_rename_beside_settings_changes() {
    rename_beside_settings_changes(World::new());
}

#[test]
fn races_rename_beside_settings_changes_rootless() {
    rename_beside_settings_changes(World::rootless());
}
