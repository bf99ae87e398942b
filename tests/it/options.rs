//! End-to-end tests of the options that widen a cage, of limits, of moving
//! and of the history, against real podman.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::*;

/// A fake harness program that says where it runs.
fn fake_claude(w: &World) -> std::path::PathBuf {
    let p = w.file(
        "claude-install/claude",
        "#!/bin/sh\necho \"fake claude in $(pwd) with $*\"\n",
    );
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// --github: nothing of the machine's GitHub login enters, with it or
/// without: not ~/.config/gh, not GH_* / GITHUB_*. With it, gh's
/// configuration in the proxy folder (read-only) and a placeholder token.
/// (GitHub through the gateway itself: tests/it/github.rs.)
#[test]
fn github_login_never_enters() {
    let w = World::new();
    w.file(
        "home/.config/gh/hosts.yml",
        "github.com:\n  oauth_token: gho_hosts_value\n",
    );
    let gh = w.home.join(".config/gh");
    let with = w.session("gh");
    let d1 = w.dir("gh");
    w.create(&with, &d1, &["--github"]);
    let without = w.session("nogh");
    let d2 = w.dir("nogh");
    w.create(&without, &d2, &[]);
    let script = format!(
        "echo T=$GH_TOKEN G=$GITHUB_TOKEN H=$GH_HOST C=$GH_CONFIG_DIR; cat {gh}/hosts.yml 2>&1; \
         cat $GH_CONFIG_DIR/config.yml 2>&1; \
         echo x > $GH_CONFIG_DIR/config.yml 2>/dev/null && echo WROTE || echo READ-ONLY; \
         cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c _value; true",
        gh = gh.display()
    );
    let env = [
        ("GH_TOKEN", "ghp_test_value"),
        ("GITHUB_TOKEN", "gh2_value"),
        ("GH_HOST", "ghe_value.example"),
    ];
    let out = w
        .run_env(&["cage", "exec", &with, "--", "sh", "-c", &script], &env)
        .ok()
        .stdout();
    assert!(
        out.contains("T=shrooms-gateway-adds-the-github-token G= H= C=/run/shrooms-agent/gh\n"),
        "{out}"
    );
    assert!(
        out.contains("http_unix_socket: /run/shrooms-agent/github.sock\n"),
        "{out}"
    );
    assert!(!out.contains("gho_hosts_value"), "{out}");
    assert!(out.contains("READ-ONLY"), "{out}");
    assert!(out.ends_with("\n0\n"), "{out}");
    let out = w
        .run_env(&["cage", "exec", &without, "--", "sh", "-c", &script], &env)
        .ok()
        .stdout();
    assert!(out.contains("T= G= H= C=\n"), "{out}");
    assert!(!out.contains("gho_hosts_value"), "{out}");
    assert!(out.ends_with("\n0\n"), "{out}");
    assert_eq!(
        fs::read_to_string(gh.join("hosts.yml")).unwrap(),
        "github.com:\n  oauth_token: gho_hosts_value\n"
    );
    // GitHub's variables cannot come through pass_env.
    w.write_config("pass_env = [\"GH_TOKEN\"]");
    let r = w.run(&["cage", "ls"]).code_is(2);
    assert!(r.stderr().contains("pass_env"), "{}", r.explain());
}

/// --nix with a fake nix tree: /nix (read-only for a multi-user nix), the
/// daemon, NIX_REMOTE=daemon, and the profile's bin first on PATH.
#[test]
fn nix_gives_the_machines_nix() {
    let w = World::new();
    let nix = w.dir("fake/nix");
    fs::create_dir_all(nix.join("store")).unwrap();
    fs::create_dir_all(nix.join("var/nix")).unwrap();
    fs::write(nix.join("var/nix/daemon-socket"), "").unwrap();
    let hello = w.file(
        "fake/nix/var/nix/profiles/default/bin/hello",
        "#!/bin/sh\necho hello from nix\n",
    );
    fs::set_permissions(&hello, fs::Permissions::from_mode(0o755)).unwrap();
    // Without a nix on the machine, --nix is refused.
    w.set_env(
        "SHROOMS_AGENT_NIX_ROOT",
        &w.root.join("no-nix").to_string_lossy(),
    );
    let refused = w.session("nonix");
    let d = w.dir("nonix");
    let r = w
        .run(&[
            "cage",
            "create",
            &refused,
            "--dir",
            &d.to_string_lossy(),
            "--nix",
        ])
        .code_is(2);
    assert!(r.stderr().contains("has none"), "{}", r.explain());
    assert!(w.containers_of(&refused).is_empty());

    // With one (a later setting wins), the cage gets it.
    let w2 = w;
    w2.set_env("SHROOMS_AGENT_NIX_ROOT", &nix.to_string_lossy());
    let name = w2.session("nix");
    let d = w2.dir("nix");
    w2.create(&name, &d, &["--nix"]);
    let out = w2
        .sh(
            &name,
            "echo PATH=$PATH; echo REMOTE=$NIX_REMOTE; hello; \
             touch /nix/store/x 2>/dev/null && echo STORE-WRITABLE || echo STORE-READ-ONLY",
        )
        .ok()
        .stdout();
    let state_bin = format!(
        "{}/.local/state/nix/profiles/profile/bin",
        w2.home.display()
    );
    assert!(
        out.contains(&format!(
            "PATH={state_bin}:/nix/var/nix/profiles/default/bin:/usr/local/sbin"
        )),
        "{out}"
    );
    assert!(out.contains("REMOTE=daemon"), "{out}");
    assert!(out.contains("hello from nix"), "{out}");
    assert!(out.contains("STORE-READ-ONLY"), "{out}");
    let rec = w2.record(&name);
    assert_eq!(rec["cage"]["options"]["nix"]["multi_user"], true);
}

/// The shared folder: one volume for sessions on every mesh, another for a
/// set of meshes; a volume of that name defined another way is refused and
/// left as it is.
#[test]
fn the_shared_folder_is_one_per_set_of_meshes() {
    let w = World::new();
    let all = "shrooms-shared";
    let home_mesh = shared_name_for(&w, "home");
    let made_here: Vec<String> = [all.to_string(), home_mesh.clone()]
        .into_iter()
        .filter(|v| !w.podman(&["volume", "exists", v]).status.success())
        .collect();
    // Removed by the world's Drop, also when an assertion below fails: a
    // volume left behind changed the next run. Without -f, which would
    // also remove another test's containers that use the volume.
    for v in &made_here {
        w.podman_on_drop(&["volume", "rm", v]);
    }
    let a = w.session("sha");
    let b = w.session("shb");
    let h = w.session("shh");
    for (n, extra) in [
        (&a, vec!["--shared"]),
        (&b, vec!["--shared"]),
        (&h, vec!["--shared", "--mesh", "home"]),
    ] {
        let d = w.dir(n);
        w.create(n, &d, &extra);
    }
    let marker = format!("from-{a}");
    w.sh(
        &a,
        &format!("echo {marker} > /shared/{marker}; echo S=$SHROOMS_SHARED"),
    )
    .ok();
    let seen_b = w.sh(&b, "ls /shared").ok().stdout();
    assert!(seen_b.contains(&marker), "{seen_b}");
    let seen_h = w.sh(&h, "ls /shared").ok().stdout();
    assert!(!seen_h.contains(&marker), "{seen_h}");
    assert_eq!(
        w.record(&h)["cage"]["options"]["shared"],
        home_mesh.as_str()
    );
    // show gives the folder on the machine, and it holds the file
    let shown = w.run(&["cage", "show", &a, "--json"]).ok().json();
    let path = shown["cage"]["shared_path"].as_str().unwrap().to_string();
    assert!(path.ends_with(&format!("{all}/_data")), "{path}");
    assert!(Path::new(&path).join(&marker).exists());
    let _ = fs::remove_file(Path::new(&path).join(&marker));

    // A bind volume of a mesh's name is refused and left untouched.
    let mesh = format!("t{}", std::process::id());
    let bind_name = shared_name_for(&w, &mesh);
    let target = w.dir("bind-target");
    w.podman_on_drop(&["volume", "rm", &bind_name]);
    let made = w.podman(&[
        "volume",
        "create",
        "--opt",
        "type=none",
        "--opt",
        "o=bind",
        "--opt",
        &format!("device={}", target.display()),
        &bind_name,
    ]);
    assert!(made.status.success(), "{}", show_output(&made));
    let before = w.podman(&["volume", "inspect", &bind_name]);
    let refused = w.session("shbind");
    let d = w.dir("shbind");
    let r = w
        .run(&[
            "cage",
            "create",
            &refused,
            "--dir",
            &d.to_string_lossy(),
            "--shared",
            "--mesh",
            &mesh,
        ])
        .code_is(2);
    assert!(r.stderr().contains("a bind to"), "{}", r.explain());
    assert!(w.containers_of(&refused).is_empty());
    let after = w.podman(&["volume", "inspect", &bind_name]);
    assert_eq!(before.stdout, after.stdout);
    for s in [&a, &b, &h] {
        w.run(&["cage", "rm", s]).ok();
    }
}

/// The volume name the tool gives a set of meshes, from its dry run.
fn shared_name_for(w: &World, mesh: &str) -> String {
    let n = w.session("dry");
    let d = w.dir(&n);
    let out = w
        .run(&[
            "cage",
            "create",
            &n,
            "--dir",
            &d.to_string_lossy(),
            "--shared",
            "--mesh",
            mesh,
            "--dry-run",
        ])
        .ok()
        .stdout();
    let i = out.find("type=volume,src=").expect(&out) + "type=volume,src=".len();
    out[i..].split(',').next().unwrap().to_string()
}

/// The memory limit the cage's cgroup says (cgroups v1 or v2).
fn memory_limit(w: &World, container: &str) -> String {
    let out = w.podman(&[
        "exec",
        container,
        "sh",
        "-c",
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max",
    ]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn pids_limit(w: &World, container: &str) -> String {
    let out = w.podman(&[
        "exec",
        container,
        "sh",
        "-c",
        "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max",
    ]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Limits set on a running cage take effect at once and hold after a stop
/// and a start, with what was installed still there; set on a stopped cage
/// they hold from its next start; bad values are refused.
#[test]
fn limits_change_running_or_not_without_remaking() {
    let w = World::new();
    w.write_config("memory = \"256m\"");
    let name = w.session("lim");
    let d = w.dir("lim");
    w.create(&name, &d, &[]);
    let c = w.container(&name);
    w.run(&["cage", "start", &name]).ok();
    assert_eq!(memory_limit(&w, &c), "268435456");
    let out = w.podman(&["exec", &c, "sh", "-c", "echo installed > /installed"]);
    assert!(out.status.success());
    // running: at once
    let r = w
        .run(&["cage", "limits", &name, "--memory", "300m", "--json"])
        .ok()
        .json();
    assert_eq!(r["after"]["memory"], "300m");
    assert_eq!(memory_limit(&w, &c), "314572800");
    // after a stop and a start, the same container, still limited, still installed
    w.run(&["cage", "stop", &name]).ok();
    w.run(&["cage", "start", &name]).ok();
    assert_eq!(w.container(&name), c);
    assert_eq!(memory_limit(&w, &c), "314572800");
    let kept = w.podman(&["exec", &c, "cat", "/installed"]);
    assert_eq!(String::from_utf8_lossy(&kept.stdout), "installed\n");
    // stopped: from the next start
    w.run(&["cage", "stop", &name]).ok();
    w.run(&["cage", "limits", &name, "--memory", "200m", "--cpus", "1"])
        .ok();
    let seen = w
        .sh(&name, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max")
        .ok()
        .stdout();
    assert_eq!(seen.trim(), "209715200");
    // the process limit: podman 4.4+ updates it; 4.3 refuses, saying which version
    w.run(&["cage", "start", &name]).ok();
    let before = pids_limit(&w, &c);
    assert_eq!(before, "2048");
    let r = w.run(&["cage", "limits", &name, "--pids", "99"]);
    if podman5_lane() {
        r.ok();
        assert_eq!(pids_limit(&w, &c), "99");
    } else {
        let r = r.code_is(2);
        assert!(
            r.stderr().contains("podman 4.4.0 or later"),
            "{}",
            r.explain()
        );
        assert_eq!(pids_limit(&w, &c), before);
    }
    // bad values, each exit 2, nothing changed
    for bad in [
        vec!["--memory", "12x"],
        vec!["--memory", "1b"],
        vec!["--memory", "16"],
        vec!["--cpus", "0.0001"],
        vec!["--cpus", "0"],
        vec!["--cpus", "999"],
        vec!["--pids", "-3"],
    ] {
        let mut args = vec!["cage", "limits", name.as_str()];
        args.extend(bad.iter().copied());
        w.run(&args).code_is(2);
    }
    // Without flags: shown, nothing changed.
    let shown = w.run(&["cage", "limits", &name]).ok();
    assert!(
        shown.stdout().contains("memory 200m"),
        "{}",
        shown.explain()
    );
    assert_eq!(w.record(&name)["cage"]["limits"]["memory"], "200m");
    // --reset: back to the machine's
    w.run(&["cage", "limits", &name, "--reset"]).ok();
    assert_eq!(memory_limit(&w, &c), "268435456");
    let hist = w.run(&["cage", "history", &name, "--json"]).ok().json();
    let whats: Vec<String> = hist["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["what"].as_str().unwrap().to_string())
        .collect();
    assert!(
        whats.iter().any(|w| w.contains("memory 256m -> 300m")),
        "{whats:?}"
    );
    w.run(&["cage", "stop", &name]).ok();
}

/// Move in, change, out and back in: each step a fresh container (what was
/// installed is gone, the project stays), the history records each step and
/// who made it, and a move while the session is busy changes nothing.
#[test]
fn move_in_change_out_and_back() {
    let w = World::new();
    let claude = fake_claude(&w);
    w.write_config(&format!("[harness]\nclaude = \"{}\"", claude.display()));
    let name = w.session("mv");
    let d = w.dir("mv");
    w.create(&name, &d, &[]);
    let c1 = w.container(&name);
    w.sh(&name, "echo kept > project-file; echo gone > /installed")
        .ok();

    // busy: an exec holds the session
    let held = w.hold(&name, &d);
    let r = w.run(&["cage", "move", &name, "--github"]).code_is(3);
    assert!(r.stderr().contains("busy"), "{}", r.explain());
    held.release().ok();
    assert_eq!(w.container(&name), c1);
    // busy: something other than its first process runs in the cage
    w.run(&["cage", "start", &name]).ok();
    let bg = w.podman(&["exec", "-d", &c1, "sleep", "600"]);
    assert!(bg.status.success());
    let r = w
        .run(&["cage", "move", &name, "--github", "--json"])
        .code_is(3);
    assert!(r.stderr().contains("sleep 600"), "{}", r.explain());
    // What runs there, as data.
    let running = r.json()["running"].clone();
    assert!(
        running
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p == "sleep 600")),
        "{}",
        r.explain()
    );
    assert_eq!(w.container(&name), c1);
    w.run(&["cage", "stop", &name]).ok();

    // change: a new container with the new option, and the session's own
    // limits (set by `cage limits`) with it
    w.run(&["cage", "limits", &name, "--memory", "700m"]).ok();
    w.run(&["cage", "move", &name, "--github", "--by", "tester"])
        .ok();
    let c2 = w.container(&name);
    assert_ne!(c1, c2);
    assert!(!w.container_exists(&c1));
    assert_eq!(w.record(&name)["cage"]["options"]["github"], true);
    assert_eq!(w.record(&name)["cage"]["limits"]["memory"], "700m");
    w.run(&["cage", "start", &name]).ok();
    assert_eq!(memory_limit(&w, &c2), (700u64 << 20).to_string());
    w.run(&["cage", "stop", &name]).ok();
    let out = w
        .sh(
            &name,
            "cat project-file; cat /installed 2>/dev/null || echo NOT-INSTALLED",
        )
        .ok()
        .stdout();
    assert!(
        out.contains("kept") && out.contains("NOT-INSTALLED"),
        "{out}"
    );

    // out: no container; `cage run --uncaged` runs the harness on the machine
    w.run(&["cage", "move", &name, "--out"]).ok();
    assert!(!w.container_exists(&c2));
    assert!(w.record(&name)["cage"].is_null());
    assert!(w.containers_of(&name).is_empty());
    let r = w
        .run(&["cage", "run", "--uncaged", &name, "--", "--resume"])
        .ok();
    assert!(
        r.stdout().contains(&format!(
            "fake claude in {} with --resume",
            d.canonicalize().unwrap().display()
        )),
        "{}",
        r.explain()
    );
    assert!(r.stderr().contains("not in a cage"), "{}", r.explain());
    let row = w.ls_row(&name).unwrap();
    assert_eq!(row["cage"], serde_json::Value::Null, "{row:#}");
    w.run(&["cage", "move", &name, "--out"]).code_is(2);

    // back in
    w.run(&["cage", "move", &name]).ok();
    let c3 = w.container(&name);
    assert!(c3 != c1 && c3 != c2);
    assert_eq!(w.record(&name)["cage"]["options"]["github"], false);
    w.sh(&name, "cat project-file").ok();

    let hist = w.run(&["cage", "history", &name, "--json"]).ok().json();
    let entries = hist["entries"].as_array().unwrap();
    let whats: Vec<&str> = entries
        .iter()
        .map(|e| e["what"].as_str().unwrap())
        .collect();
    assert_eq!(whats.len(), 5, "{whats:?}");
    assert!(whats[0].starts_with("created in a cage"), "{whats:?}");
    assert_eq!(whats[1], "limits: memory 4g -> 700m");
    assert!(
        whats[2].starts_with("given a new cage") && whats[2].contains("github"),
        "{whats:?}"
    );
    assert_eq!(whats[3], "taken out of its cage");
    assert!(whats[4].starts_with("moved into a cage"), "{whats:?}");
    assert_eq!(entries[2]["who"], "tester");
    // JSON: `when`, RFC 3339 with the offset; text: the local date and
    // time, never the seconds.
    let at = entries[0]["when"].as_str().unwrap();
    assert!(
        at.len() == "2026-11-30T19:05:09+01:00".len() && at.as_bytes()[10] == b'T',
        "{at}"
    );
    let text = w.run(&["cage", "history", &name]).ok().stdout();
    let first = text.lines().next().unwrap();
    let b = first.as_bytes();
    assert!(
        b[4] == b'-' && b[10] == b' ' && b[13] == b':' && first.ends_with(whats[0]),
        "{text}"
    );
    assert!(!text.contains(&entries[0]["when"].to_string()), "{text}");

    // rm removes the history too, and says what it removed
    let r = w.run(&["cage", "rm", &name]).ok();
    assert!(r.stdout().contains("history"), "{}", r.explain());
    assert!(
        !w.state
            .join("sessions")
            .join(format!("{name}.history.jsonl"))
            .exists()
    );
}

/// `cage stop --all` stops every running cage of this user.
#[test]
fn stop_all() {
    let w = World::new();
    let a = w.session("sta");
    let b = w.session("stb");
    for n in [&a, &b] {
        let d = w.dir(n);
        w.create(n, &d, &[]);
        w.run(&["cage", "start", n]).ok();
    }
    let r = w.run(&["cage", "stop", "--all", "--json"]).ok().json();
    assert!(r["stopped"].as_array().unwrap().len() >= 2, "{r}");
    assert_eq!(r["busy"], serde_json::json!([]), "{r}");
    for n in [&a, &b] {
        assert_eq!(
            w.container_state(&w.container(n)).as_deref(),
            Some("exited")
        );
    }
}

/// A sealed cage is not widened: each option is refused by name.
#[test]
fn sealed_refuses_the_options_by_name() {
    let w = World::new();
    let tok = w.file("tok", "t\n");
    fs::set_permissions(&tok, fs::Permissions::from_mode(0o600)).unwrap();
    let d = w.dir("p");
    for flag in ["--github", "--nix", "--shared"] {
        let n = w.session("sealopt");
        let r = w
            .run(&[
                "cage",
                "create",
                &n,
                "--dir",
                &d.to_string_lossy(),
                "--sealed",
                "--sealed-token",
                &tok.to_string_lossy(),
                flag,
                "--json",
            ])
            .code_is(2);
        assert!(r.stderr().contains(flag), "{}", r.explain());
        // `--json` names the option refused as data.
        assert_eq!(r.json()["option"], flag, "{}", r.explain());
        assert!(w.containers_of(&n).is_empty());
    }
}

/// `doctor` says which limits behaviour applies with this podman.
#[test]
fn doctor_says_how_limits_work_here() {
    let w = World::new();
    let r = w.run(&["doctor", "--json"]).json();
    let update = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "update")
        .unwrap()
        .clone();
    let detail = update["detail"].as_str().unwrap();
    if podman5_lane() {
        assert!(
            detail.contains("persists and works on a stopped cage"),
            "{detail}"
        );
    } else {
        assert!(detail.contains("--pids needs podman 4.4"), "{detail}");
    }
}

/// No cage of the whole home, sealed or not: the project is mounted
/// read-write, so a cage of home would keep nothing out; nor of a folder
/// holding the state folder, where every cage's keys are.
#[test]
fn no_cage_of_the_home_or_the_state_folder() {
    let w = World::new();
    fs::create_dir_all(&w.state).unwrap();
    for (dir, says) in [
        (w.home.clone(), "home directory"),
        (w.root.clone(), "holds your home"),
        (w.state.clone(), "state folder"),
    ] {
        let n = w.session("homecage");
        let r = w
            .run(&["cage", "create", &n, "--dir", &dir.to_string_lossy()])
            .code_is(2);
        assert!(r.stderr().contains(says), "{}", r.explain());
        assert!(w.containers_of(&n).is_empty());
    }
}

// ---- what podman is called with -------------------------------------------

/// A podman that writes each call's arguments to a log (one call a line,
/// the arguments separated by \x1f), then runs the real one. A call with
/// `--all` among its options (before any `--`) is refused, not passed on:
/// it would remove every container of the machine.
fn recording_podman(w: &World) -> (std::path::PathBuf, std::path::PathBuf) {
    let log = w.root.join("podman-calls.log");
    let script = format!(
        "#!/bin/sh\n\
         {{ for a in \"$@\"; do printf '%s\\037' \"$a\"; done; printf '\\n'; }} >> '{log}'\n\
         for a in \"$@\"; do\n\
           [ \"$a\" = -- ] && break\n\
           [ \"$a\" = --all ] && {{ echo 'recording podman: --all refused' >&2; exit 125; }}\n\
         done\n\
         exec '{real}' \"$@\"\n",
        log = log.display(),
        real = podman_program()
    );
    let p = w.file("bin/podman", &script);
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    (p, log)
}

/// The calls a recording podman saw.
fn podman_calls(log: &Path) -> Vec<Vec<String>> {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            l.split('\x1f')
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect()
}

/// Every podman call that names a container or an image puts `--` before
/// the name, so that a name is never read as an option.
#[test]
fn podman_is_never_given_a_name_where_an_option_goes() {
    let w = World::new();
    let (podman, log) = recording_podman(&w);
    w.write_config(&format!("podman = \"{}\"", podman.display()));
    let name = w.session("dash");
    let d = w.dir("dash");
    w.create(&name, &d, &[]);
    let c1 = w.container(&name);
    w.sh(&name, "true").ok();
    w.run(&["cage", "start", &name]).ok();
    w.run(&["cage", "limits", &name, "--memory", "300m"]).ok();
    w.run(&["cage", "move", &name, "--by", "tester"]).ok();
    let c2 = w.container(&name);
    w.run(&["cage", "stop", &name]).ok();
    w.run(&["cage", "rm", &name]).ok();
    let calls = podman_calls(&log);
    let mut verbs = std::collections::BTreeSet::new();
    for call in &calls {
        for (i, a) in call.iter().enumerate() {
            let named = *a == c1 || *a == c2 || a == IMAGE;
            let a_value = i > 0 && ["--name", "-t"].contains(&call[i - 1].as_str());
            if named && !a_value {
                assert!(
                    call[..i].contains(&"--".to_string()),
                    "{a} is not after `--` in: podman {}",
                    call.join(" ")
                );
                verbs.insert(call[0].clone());
            }
        }
    }
    for verb in [
        "create", "inspect", "start", "exec", "stop", "update", "top", "rm",
    ] {
        assert!(
            verbs.contains(verb),
            "no `podman {verb}` naming the cage: {calls:?}"
        );
    }
}

/// A record edited by hand is refused as damaged, naming the file and what
/// to do: a record whose container is `--all` never reaches podman as
/// `podman rm -f --ignore --all`, and a record whose name is not its
/// file's is not taken for that session.
#[test]
fn a_record_edited_by_hand_is_refused_and_podman_is_not_called() {
    let w = World::new();
    let (podman, log) = recording_podman(&w);
    w.write_config(&format!("podman = \"{}\"", podman.display()));
    let a = w.session("dmg");
    let b = w.session("dmgother");
    for n in [&a, &b] {
        let d = w.dir(n);
        w.create(n, &d, &[]);
    }
    let ca = w.container(&a);
    let cb = w.container(&b);
    let path = w.record_path(&a);
    let original = fs::read_to_string(&path).unwrap();
    let mut rec = w.record(&a);
    rec["cage"]["container"] = "--all".into();
    fs::write(&path, serde_json::to_string(&rec).unwrap()).unwrap();
    let calls_before = podman_calls(&log).len();
    for args in [vec!["cage", "rm", &a], vec!["cage", "stop", &a]] {
        let r = w.run(&args).code_is(1);
        let err = r.stderr();
        assert!(
            err.contains(&format!("the record {} is damaged", path.display()))
                && err.contains("its container \"--all\" is not a name")
                && err.contains(&format!("`rm {}`", path.display())),
            "{}",
            r.explain()
        );
    }
    assert_eq!(podman_calls(&log).len(), calls_before, "podman was called");
    assert!(w.container_exists(&ca) && w.container_exists(&cb));
    assert!(path.exists());
    // b's record under a's name: refused too, and b's container is left.
    let mut other = w.record(&b);
    other["cage"]["container"] = ca.clone().into();
    fs::write(&path, serde_json::to_string(&other).unwrap()).unwrap();
    let r = w.run(&["cage", "rm", &a]).code_is(1);
    assert!(
        r.stderr()
            .contains(&format!("its name is \"{b}\", not \"{a}\"")),
        "{}",
        r.explain()
    );
    assert!(w.container_exists(&ca) && w.container_exists(&cb));
    fs::write(&path, original).unwrap();
    w.run(&["cage", "rm", &a]).ok();
    assert!(!w.container_exists(&ca) && w.container_exists(&cb));
}

/// `--by` is one plain line of 1 to 200 characters: a line break would add
/// a false entry to `cage history`'s text. Refused with exit 2 before
/// anything changes, on `move` and on `limits`.
#[test]
fn by_is_one_plain_line() {
    let w = World::new();
    let name = w.session("by");
    let d = w.dir("by");
    w.create(&name, &d, &[]);
    let c = w.container(&name);
    let long = "x".repeat(201);
    for by in ["", "  ", "eve\n1 mallory moved it", "a\tb", long.as_str()] {
        for args in [
            vec!["cage", "move", &name, "--github", "--by", by],
            vec!["cage", "limits", &name, "--memory", "300m", "--by", by],
        ] {
            let r = w.run(&args).code_is(2);
            assert!(r.stderr().contains("--by "), "{}", r.explain());
        }
    }
    assert_eq!(w.container(&name), c);
    assert_eq!(w.record(&name)["cage"]["limits"]["memory"], "4g");
    let hist = w.run(&["cage", "history", &name]).ok().stdout();
    assert_eq!(hist.lines().count(), 1, "{hist}");
    // 200 characters, not ASCII, are taken.
    let most = "é".repeat(200);
    w.run(&["cage", "limits", &name, "--memory", "300m", "--by", &most])
        .ok();
    let hist = w.run(&["cage", "history", &name, "--json"]).ok().json();
    assert_eq!(hist["entries"][1]["who"], most.as_str());
}

/// Hold a session's lock as a running `exec` does (an flock on its lock
/// file) until the returned file is dropped.
fn hold_session(w: &World, session: &str) -> fs::File {
    use std::os::unix::io::AsRawFd;
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(w.state.join("sessions").join(format!("{session}.lock")))
        .unwrap();
    // SAFETY: flock on a descriptor we own.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(r, 0, "could not take {session}'s lock");
    f
}

/// `cage stop --all` stops every cage it can: a session another command
/// holds is passed over, the rest are stopped, and the busy ones are named
/// at the end with exit 3 (in text, and in one JSON object with --json).
#[test]
fn stop_all_stops_the_rest_and_names_the_busy() {
    let w = World::new();
    let names: Vec<String> = ["stba", "stbb", "stbc"]
        .iter()
        .map(|b| w.session(b))
        .collect();
    for n in &names {
        let d = w.dir(n);
        w.create(n, &d, &[]);
        w.run(&["cage", "start", n]).ok();
    }
    let (held, rest) = (&names[1], [&names[0], &names[2]]);
    let lock = hold_session(&w, held);
    let r = w.run(&["cage", "stop", "--all"]).code_is(3);
    for n in rest {
        assert!(
            r.stdout()
                .contains(&format!("stopped {n} ({})", w.container(n))),
            "{}",
            r.explain()
        );
        assert_eq!(
            w.container_state(&w.container(n)).as_deref(),
            Some("exited")
        );
    }
    assert!(
        r.stderr().contains(&format!(
            "not stopped, busy: {held} (another shrooms-agent command"
        )),
        "{}",
        r.explain()
    );
    assert_eq!(
        w.container_state(&w.container(held)).as_deref(),
        Some("running")
    );
    // --json: one object, the error's shape with what was done; the same
    // keys when nothing is busy (below).
    let r = w.run(&["cage", "stop", "--all", "--json"]).code_is(3);
    let j = r.json();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        v.as_object()
            .unwrap_or_else(|| panic!("not an object: {v:#}"))
            .keys()
            .cloned()
            .collect()
    };
    let busy_keys = keys(&j);
    assert_eq!(j["kind"], "busy", "{j:#}");
    assert_eq!(j["exit_code"], 3, "{j:#}");
    assert!(
        j["error"].as_str().unwrap().contains(held.as_str()),
        "{j:#}"
    );
    assert_eq!(j["busy"], serde_json::json!([held]), "{j:#}");
    assert_eq!(j["stopped"].as_array().unwrap().len(), 2, "{j:#}");
    drop(lock);
    let j = w.run(&["cage", "stop", "--all", "--json"]).ok().json();
    assert_eq!(keys(&j), busy_keys, "{j:#}");
    assert_eq!(j["stopped"].as_array().unwrap().len(), 3, "{j:#}");
    assert_eq!(j["busy"], serde_json::json!([]), "{j:#}");
    assert_eq!(
        (&j["error"], &j["exit_code"], &j["kind"]),
        (
            &serde_json::Value::Null,
            &serde_json::json!(0),
            &serde_json::Value::Null
        ),
        "{j:#}"
    );
    assert_eq!(
        w.container_state(&w.container(held)).as_deref(),
        Some("exited")
    );
    // A record that does not read is passed over and named, like a busy
    // session: the other cages are still stopped, in the same shape, and
    // the command fails (exit 1).
    let broken = w.session("stbd");
    std::fs::write(
        w.state.join("sessions").join(format!("{broken}.json")),
        "{\"version\": 1, \"na",
    )
    .unwrap();
    w.run(&["cage", "start", &names[0]]).ok();
    let r = w.run(&["cage", "stop", "--all", "--json"]).code_is(1);
    let j = r.json();
    assert_eq!(keys(&j), busy_keys, "{j:#}");
    assert_eq!(j["kind"], "failed", "{j:#}");
    assert_eq!(j["damaged"][0]["name"], broken.as_str(), "{j:#}");
    assert!(
        j["error"]
            .as_str()
            .unwrap()
            .contains(&format!("not stopped, the record does not read: {broken}")),
        "{j:#}"
    );
    assert_eq!(j["stopped"].as_array().unwrap().len(), 3, "{j:#}");
    assert_eq!(
        w.container_state(&w.container(&names[0])).as_deref(),
        Some("exited")
    );
    std::fs::remove_file(w.state.join("sessions").join(format!("{broken}.json"))).unwrap();
}
