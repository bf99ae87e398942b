//! A cage's private home cannot redirect the mounts that go into it; `cage
//! prune` removes only what its own state folder made, and asks; `cage
//! limits` never leaves a session that cannot start; a create that loses a
//! race for a name is told so. Each as root and as the rootless test user.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The names in a folder, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

// ---- a link planted in the private home ------------------------------------

/// The attack: from inside, the cage replaces the folder of its private
/// home that holds its conversation folder's mount point (`projects/` of
/// `~/.claude`, `sessions/` of pi's folder) with a link to its project.
/// runc follows links in mount destinations, so the next start mounted the
/// conversation folder through it, and made its mount point on the machine,
/// in the project. Now the next start is refused, says what it found and
/// what to do, and nothing is mounted or made through the link; once the
/// link is gone the session starts again.
fn a_link_in_the_private_home_is_refused(w: World, harness: &str) {
    let name = w.session(&format!("homelink-{harness}"));
    let proj = fs::canonicalize(w.dir(&format!("homelink-{harness}-project"))).unwrap();
    let mut args = vec![];
    if harness == "pi" {
        args.extend(["--harness", "pi"]);
        // The test image has no pi of its own: a pi of the machine's.
        let pi = w.file("tools/pi", "#!/bin/sh\n");
        fs::set_permissions(&pi, fs::Permissions::from_mode(0o755)).unwrap();
        w.write_config(&format!("[harness]\npi = \"{}\"", pi.display()));
    }
    w.create(&name, &proj, &args);
    let (var, folder) = match harness {
        "pi" => ("PI_CODING_AGENT_DIR", "sessions"),
        _ => ("CLAUDE_CONFIG_DIR", "projects"),
    };
    let planted = w.sh(
        &name,
        &format!(
            "cd \"${var}\" && mv {folder} {folder}.old && ln -s {} {folder} && ls -l {folder}",
            s(&proj)
        ),
    );
    assert_eq!(planted.code(), 0, "{}", planted.explain());
    let before = entries(&proj);
    let container = w.container(&name);

    let r = w.run(&["cage", "exec", &name, "--", "true"]);
    assert_eq!(r.code(), 125, "the start was not refused:\n{}", r.explain());
    let home = w.state.join("cages").join(&container).join("home");
    let link = home.join(folder);
    let err = r.stderr();
    for says in [
        format!("{} is a link (to {})", link.display(), proj.display()),
        "cage was not started".to_string(),
        format!("rm {}", link.display()),
        format!("shrooms-agent cage move {name}"),
    ] {
        assert!(err.contains(&says), "no {says:?} in:\n{}", r.explain());
    }
    assert_eq!(
        entries(&proj),
        before,
        "something was made in the project through the link"
    );
    assert_ne!(
        w.container_state(&container).as_deref(),
        Some("running"),
        "the cage was started"
    );

    // Put back as it was, it starts again.
    fs::remove_file(&link).unwrap();
    fs::rename(home.join(format!("{folder}.old")), &link).unwrap();
    let r = w.sh(
        &name,
        &format!("ls -d \"${var}\"/{folder}/* && echo started"),
    );
    assert_eq!(r.code(), 0, "{}", r.explain());
    assert!(r.stdout().contains("started"), "{}", r.explain());
    assert_eq!(entries(&proj), before);
}

#[test]
fn a_link_in_the_private_home_is_refused_claude_rootful() {
    a_link_in_the_private_home_is_refused(World::new(), "claude");
}

#[test]
fn a_link_in_the_private_home_is_refused_pi_rootful() {
    a_link_in_the_private_home_is_refused(World::new(), "pi");
}

#[test]
fn a_link_in_the_private_home_is_refused_claude_rootless() {
    a_link_in_the_private_home_is_refused(World::rootless(), "claude");
}

#[test]
fn a_link_in_the_private_home_is_refused_pi_rootless() {
    a_link_in_the_private_home_is_refused(World::rootless(), "pi");
}

// ---- prune ------------------------------------------------------------------

/// Every file under a folder with its size: what "writes nothing" compares.
fn tree(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let m = fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                todo.push(e.path());
            }
            out.push((e.path(), if m.is_dir() { 0 } else { m.len() }));
        }
    }
    out.sort();
    out
}

fn names(v: &serde_json::Value) -> Vec<String> {
    let mut n: Vec<String> = v
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| {
            x.as_str()
                .or_else(|| x["container"].as_str())
                .unwrap()
                .to_string()
        })
        .collect();
    n.sort();
    n
}

/// `cage prune` of a second state folder of the same user, on the same
/// podman, removes nothing of the first's, even with `--yes`: it lists
/// the first's containers as made by another state folder. In its own
/// folder, prune removes only its own leftover: never without asking (no
/// terminal, no `--yes`: exit 2, nothing removed), never in a dry run
/// (which writes no file at all), and never a container without the
/// state folder's label (listed apart and kept).
fn prune_removes_only_what_its_state_folder_made(a: World) {
    let kept_dir = fs::canonicalize(a.dir("prune-kept")).unwrap();
    let kept = a.session("prunekept");
    a.create(&kept, &kept_dir, &[]);
    a.sh(&kept, "true").ok();
    let kept_c = a.container(&kept);
    // A leftover of this state folder: a session whose record is gone.
    let gone_dir = fs::canonicalize(a.dir("prune-gone")).unwrap();
    let gone = a.session("prunegone");
    a.create(&gone, &gone_dir, &[]);
    let gone_c = a.container(&gone);
    fs::remove_file(a.record_path(&gone)).unwrap();
    // A container made before containers carried the state folder's label.
    let old = a.session("pruneold");
    let old_c = format!("shrooms-{old}-abcdef");
    let label = format!("xyz.vpavlin.shrooms.session={old}");
    let made = a.podman(&[
        "create", "--label", &label, "--name", &old_c, IMAGE, "sleep", "infinity",
    ]);
    assert!(made.status.success(), "{}", show_output(&made));

    // Another state folder: it takes none of them.
    {
        let b = a.beside();
        let r = b.run(&["cage", "prune", "--yes", "--json"]).ok();
        let j = r.json();
        assert_eq!(
            names(&j["containers"]),
            Vec::<String>::new(),
            "{}",
            r.explain()
        );
        let another = names(&j["made_by_another_state_folder"]);
        for c in [&kept_c, &gone_c] {
            assert!(
                another.contains(c),
                "{c} not listed apart:\n{}",
                r.explain()
            );
        }
        assert!(
            names(&j["made_before_state_labels"]).contains(&old_c),
            "{}",
            r.explain()
        );
        let text = b.run(&["cage", "prune", "--yes"]).ok();
        assert!(
            text.stdout().contains("made by another state folder"),
            "{}",
            text.explain()
        );
        for c in [&kept_c, &gone_c, &old_c] {
            assert!(a.container_exists(c), "the other state folder removed {c}");
        }
    }

    // A dry run lists, and writes nothing in the state folder.
    let before = tree(&a.state);
    let r = a.run(&["cage", "prune", "--dry-run", "--json"]).ok();
    let j = r.json();
    assert_eq!(
        names(&j["containers"]),
        vec![gone_c.clone()],
        "{}",
        r.explain()
    );
    assert_eq!(
        tree(&a.state),
        before,
        "--dry-run wrote in the state folder:\n{}",
        r.explain()
    );

    // No terminal and no --yes: nothing removed, exit 2, and it says so.
    let r = a.run(&["cage", "prune"]).code_is(2);
    assert!(
        r.stderr().contains("removed nothing") && r.stderr().contains("--yes"),
        "{}",
        r.explain()
    );
    assert!(r.stdout().contains(&gone_c), "{}", r.explain());
    assert!(a.container_exists(&gone_c), "removed without asking");
    let r = a.run(&["cage", "prune", "--json"]).code_is(2);
    let j = r.json();
    assert_eq!(j["exit_code"], 2, "{}", r.explain());
    assert_eq!(
        names(&j["containers"]),
        vec![gone_c.clone()],
        "{}",
        r.explain()
    );
    assert!(a.container_exists(&gone_c), "removed without asking");

    // On a terminal it asks: "n" removes nothing.
    let r = a.run_on_terminal(&["cage", "prune"], "n\n");
    assert_eq!(r.code(), 0, "{}", r.explain());
    assert!(
        r.stdout()
            .contains(&format!("would remove container {gone_c}"))
            && r.stdout().contains("remove 1 container and")
            && r.stdout().contains("nothing was removed"),
        "{}",
        r.explain()
    );
    assert!(
        a.container_exists(&gone_c),
        "removed though the answer was no"
    );

    // --yes: its own leftover only.
    let r = a.run(&["cage", "prune", "--yes", "--json"]).ok();
    let j = r.json();
    assert_eq!(
        names(&j["containers"]),
        vec![gone_c.clone()],
        "{}",
        r.explain()
    );
    assert!(
        names(&j["made_before_state_labels"]).contains(&old_c),
        "{}",
        r.explain()
    );
    assert!(!a.container_exists(&gone_c), "the leftover is still there");
    assert!(a.container_exists(&kept_c), "the session's container went");
    assert!(a.container_exists(&old_c), "the unlabelled container went");
    let lock = a.state.join("sessions").join(format!("{gone}.lock"));
    assert!(!lock.exists(), "prune left {}", lock.display());
    assert_eq!(a.sh(&kept, "echo still-here").ok().stdout(), "still-here\n");
    let _ = a.podman(&["rm", "-f", &old_c]);
}

#[test]
fn prune_removes_only_what_its_state_folder_made_rootful() {
    // Its own podman storage, shared with the second state folder only.
    prune_removes_only_what_its_state_folder_made(World::alone());
}

#[test]
fn prune_removes_only_what_its_state_folder_made_rootless() {
    prune_removes_only_what_its_state_folder_made(World::rootless());
}

// ---- limits where podman does not enforce them -----------------------------

/// Rootless on cgroups v1 with `unenforced_limits = "warn"` (the rootless
/// world here): `cage limits` said it had worked, and every later start
/// failed with runc's `update` error until `--reset`. Now it is refused up
/// front, changes nothing, and the session starts; a record changed by an
/// older version starts too, and `--reset` works; `doctor`'s update line
/// says `cage limits` is refused here.
#[test]
fn limits_that_podman_ignores_are_refused_and_the_session_still_starts() {
    let w = World::rootless();
    let name = w.session("ignoredlimits");
    let proj = w.dir("ignoredlimits");
    w.create(&name, &proj, &[]);
    let before = w.record(&name)["cage"]["limits"].clone();

    let r = w.run(&["cage", "limits", &name, "--memory", "1g"]);
    assert_eq!(r.code(), 1, "not refused:\n{}", r.explain());
    assert!(
        r.stderr().contains("changes nothing on this machine") && r.stderr().contains("cgroups v1"),
        "{}",
        r.explain()
    );
    assert_eq!(w.record(&name)["cage"]["limits"], before);
    assert_eq!(w.sh(&name, "echo started").ok().stdout(), "started\n");
    // Running, too.
    let held = w.spawn_env(&["cage", "exec", &name, "--", "sleep", "8"], &[]);
    let c = w.container(&name);
    wait_until("the cage runs", Duration::from_secs(30), || {
        w.container_state(&c).as_deref() == Some("running")
    });
    let r = w.run(&["cage", "limits", &name, "--memory", "1g"]);
    assert_eq!(r.code(), 1, "not refused while running:\n{}", r.explain());
    finish("cage exec -- sleep 8", held).ok();

    // A record an older version changed: the session starts all the same.
    let path = w.record_path(&name);
    let mut rec = w.record(&name);
    rec["cage"]["limits"]["memory"] = "1g".into();
    rec["cage"]["own_limits"] = true.into();
    fs::write(&path, serde_json::to_string_pretty(&rec).unwrap()).unwrap();
    w.chown_all();
    assert_eq!(w.sh(&name, "echo started").ok().stdout(), "started\n");
    w.run(&["cage", "limits", &name, "--reset"]).ok();
    assert_eq!(w.record(&name)["cage"]["limits"], before);
    assert_eq!(w.record(&name)["cage"]["own_limits"], false);

    let d = w.run(&["doctor", "--json"]).json();
    let update = d["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "update")
        .unwrap()
        .clone();
    assert_eq!(update["status"], "warn", "{update}");
    assert!(
        update["detail"]
            .as_str()
            .unwrap()
            .contains("`cage limits` is refused here"),
        "{update}"
    );
}

// ---- two creates of one name ------------------------------------------------

/// Two `cage create` of one name at once: the one that finds the other
/// making the cage is told the session is being created (exit 3), not that
/// an exec or run holds it. The first one's `podman create` waits, in a
/// wrapper, until the second has answered, so the two overlap every time.
fn two_creates_of_one_name(w: World) {
    let mark = w.root.join("creating");
    let release = w.root.join("release");
    let wrapper = w.file(
        "slow-podman",
        &format!(
            "#!/bin/sh\n\
             if [ \"$1\" = create ]; then\n\
               : > {mark}\n\
               i=0; while [ ! -e {release} ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\n\
             fi\n\
             exec {podman} \"$@\"\n",
            mark = s(&mark),
            release = s(&release),
            podman = podman_program()
        ),
    );
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    w.write_config(&format!("podman = \"{}\"", s(&wrapper)));
    let name = w.session("twice");
    let one = w.dir("twice-one");
    let two = w.dir("twice-two");
    let first = w.spawn_env(&["cage", "create", &name, "--dir", &s(&one)], &[]);
    assert!(
        wait_for_path(&mark, Duration::from_secs(60)),
        "the first create never reached podman create"
    );
    let second = w.run(&["cage", "create", &name, "--dir", &s(&two)]);
    fs::write(&release, "").unwrap();
    let first = finish("cage create (first)", first).ok();
    assert_eq!(
        second.code(),
        3,
        "{}\n{}",
        second.explain(),
        first.explain()
    );
    let err = second.stderr();
    assert!(
        err.contains(&format!("session {name} is being created")),
        "{}",
        second.explain()
    );
    assert!(!err.contains("exec or run"), "{}", second.explain());
    assert_eq!(w.containers_of(&name).len(), 1);
    // Once made, a create of the name is told it is there.
    let third = w
        .run(&["cage", "create", &name, "--dir", &s(&two)])
        .code_is(2);
    assert!(third.stderr().contains("already"), "{}", third.explain());
}

#[test]
fn two_creates_of_one_name_rootful() {
    two_creates_of_one_name(World::new());
}

#[test]
fn two_creates_of_one_name_rootless() {
    two_creates_of_one_name(World::rootless());
}
