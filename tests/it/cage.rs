//! End-to-end tests of ordinary cages, as root, against real podman. One
//! test per promise; each looks at what really
//! happened (podman's state, files on the host, what a command inside saw).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;

/// A rootful world that shares root's podman with the other tests.
fn world() -> World {
    World::new()
}

/// A project folder in the world, as its canonical path.
fn project(w: &World, rel: &str) -> PathBuf {
    fs::canonicalize(w.dir(rel)).unwrap()
}

/// A session of the world with a project folder, created.
fn created(w: &World, base: &str) -> (String, PathBuf) {
    let name = w.session(base);
    let dir = project(w, &format!("{base}-project"));
    w.create(&name, &dir, &[]);
    (name, dir)
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Promise 1: create makes a labelled, named container that is made but not
/// started, and a record; ls and show list it; exec, stop and start work;
/// rm removes the container, the env file, the private folders and the record.
#[test]
fn create_ls_show_exec_stop_start_rm() {
    let w = world();
    let name = w.session("life");
    let dir = project(&w, "project");
    w.create(&name, &dir, &[]);

    let mine: Vec<_> = labelled_containers(None)
        .into_iter()
        .filter(|(_, session, _)| *session == name)
        .collect();
    assert_eq!(mine.len(), 1, "one container labelled {name}: {mine:?}");
    let (container, _, state) = &mine[0];
    assert_eq!(state, "created", "made, not started");
    let hex = container
        .strip_prefix(&format!("shrooms-{name}-"))
        .unwrap_or_else(|| panic!("{container} is not shrooms-{name}-<hex>"));
    assert!(
        hex.len() == 6
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{container}: not 6 hex digits at the end"
    );
    assert!(w.record_path(&name).is_file());
    assert_eq!(&w.container(&name), container);

    let ls = w.run(&["cage", "ls"]).ok();
    let row = ls
        .stdout()
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("cage ls does not list {name}:\n{}", ls.explain()));
    assert!(
        row.contains(container.as_str()) && row.contains("created"),
        "{row}"
    );

    let ls = w.run(&["cage", "ls", "--json"]).ok().json();
    let row = ls["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name.as_str())
        .unwrap_or_else(|| panic!("cage ls --json does not list {name}: {ls:#}"));
    assert_eq!(row["cage"]["container"], container.as_str());
    assert_eq!(row["cage"]["state"], "created");
    assert_eq!(row["dir"], s(&dir).as_str());
    assert!(
        !ls["leftovers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["container"] == container.as_str()),
        "its own container is listed as a leftover: {ls:#}"
    );

    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(show["cage"]["state"], "created");
    // One session object: `cage show --json` is its `cage ls --json` row.
    assert_eq!(
        show, *row,
        "cage show --json and its cage ls --json row differ"
    );
    let argv: Vec<&str> = show["cage"]["create_argv"]
        .as_array()
        .unwrap_or_else(|| panic!("no argv in cage show: {show:#}"))
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv[0], "create");
    let label = format!("xyz.vpavlin.shrooms.session={name}");
    assert!(
        argv.windows(2).any(|p| p == ["--name", container.as_str()]),
        "{argv:?}"
    );
    assert!(
        argv.windows(2).any(|p| p == ["--label", label.as_str()]),
        "{argv:?}"
    );
    // The first process is the tool's own init at a path of the
    // container's own; nothing of the image's.
    let init = format!("/.shrooms-init-{container}");
    assert!(
        argv.windows(2)
            .any(|p| p == ["--entrypoint", init.as_str()]),
        "{argv:?}"
    );
    assert!(argv.ends_with(&["--", IMAGE]), "{argv:?}");

    let r = w
        .sh(&name, "echo \"in $SHROOMS_AGENT_SESSION at $(pwd)\"")
        .ok();
    assert_eq!(r.stdout().trim(), format!("in {name} at {}", dir.display()));
    assert_ne!(
        w.container_state(container).as_deref(),
        Some("running"),
        "exec stops the cage"
    );

    w.run(&["cage", "start", &name]).ok();
    assert_eq!(w.container_state(container).as_deref(), Some("running"));
    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(show["cage"]["state"], "running");
    assert_eq!(show["cage"]["running"], true);

    w.run(&["cage", "stop", &name]).ok();
    let stopped = w.container_state(container);
    assert!(
        stopped.is_some() && stopped.as_deref() != Some("running"),
        "{stopped:?}"
    );

    w.run(&["cage", "start", &name]).ok();
    assert_eq!(w.container_state(container).as_deref(), Some("running"));

    let env_file = w.state.join("cages").join(format!("{container}.env"));
    let private = w.state.join("cages").join(container);
    assert!(env_file.is_file(), "exec wrote no env file");
    assert!(private.is_dir(), "no private folder {}", private.display());
    w.run(&["cage", "rm", &name]).ok();
    assert!(
        !w.container_exists(container),
        "the container is still there"
    );
    assert!(!env_file.exists(), "the env file is still there");
    assert!(!private.exists(), "the private folder is still there");
    assert!(!w.record_path(&name).exists(), "the record is still there");
    assert!(w.ls_row(&name).is_none(), "cage ls still lists {name}");
}

/// Promise 2: the project is mounted read-write at its own path: what the
/// host put there is seen inside, and a file written inside lands on the host.
#[test]
fn the_project_is_writable_and_lands_on_the_host() {
    let w = world();
    let (name, dir) = created(&w, "proj");
    fs::write(dir.join("from-host.txt"), "put there by the host\n").unwrap();
    let inside = dir.join("from-cage.txt");
    let r = w
        .sh(
            &name,
            &format!(
                "cat from-host.txt && echo \"written in {name}\" > {}",
                inside.display()
            ),
        )
        .ok();
    assert_eq!(r.stdout(), "put there by the host\n");
    assert_eq!(
        fs::read_to_string(&inside).unwrap_or_else(|e| panic!("{}: {e}", inside.display())),
        format!("written in {name}\n")
    );
}

/// Promise 3: of the home directory the cage sees only its private
/// ~/.claude: no ~/.ssh, no other project's conversations, no history.jsonl;
/// its own project's conversation folder is there, writable, and shared
/// with the host.
#[test]
fn the_home_directory_is_hidden_but_the_projects_conversations() {
    let w = world();
    w.file(
        "home/.ssh/id_ed25519",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    );
    w.file(
        "home/.claude/projects/-other-project/x.jsonl",
        "{\"other\":true}\n",
    );
    w.file(
        "home/.claude/history.jsonl",
        "{\"display\":\"secret prompt\"}\n",
    );
    let name = w.session("home");
    let dir = project(&w, "home-project");
    let conv = w.home.join(".claude/projects").join(claude_folder(&dir));
    fs::create_dir_all(&conv).unwrap();
    fs::write(conv.join("earlier.jsonl"), "{\"earlier\":true}\n").unwrap();
    w.create(&name, &dir, &[]);

    let h = s(&w.home);
    let c = s(&conv);
    let script = format!(
        "for p in {h}/.ssh {h}/.ssh/id_ed25519 {h}/.claude/projects/-other-project \
         {h}/.claude/projects/-other-project/x.jsonl {h}/.claude/history.jsonl; do \
           if test -e $p; then echo PRESENT $p; fi; done; \
         echo HOME-HAS $(ls -A {h}); \
         cat {c}/earlier.jsonl; \
         echo '{{\"new\":true}}' > {c}/new.jsonl && echo WROTE"
    );
    let r = w.sh(&name, &script).ok();
    let out = r.stdout();
    assert!(!out.contains("PRESENT"), "seen inside:\n{}", r.explain());
    assert!(
        out.contains("HOME-HAS .claude\n"),
        "the home holds more than .claude:\n{}",
        r.explain()
    );
    assert!(
        out.contains("{\"earlier\":true}"),
        "its conversations are not there:\n{}",
        r.explain()
    );
    assert!(out.contains("WROTE"), "{}", r.explain());
    assert_eq!(
        fs::read_to_string(conv.join("new.jsonl")).unwrap(),
        "{\"new\":true}\n"
    );
    // The host's own files stayed as they were.
    assert!(w.home.join(".ssh/id_ed25519").exists());
    assert!(w.home.join(".claude/history.jsonl").exists());
}

/// Promise 4: the harness's host code (settings.json, as a copy; hooks/)
/// is visible inside, and read-only: writing fails and the host files are
/// unchanged.
#[test]
fn host_code_files_are_read_only() {
    let w = world();
    let settings = w.file("home/.claude/settings.json", "{\"hooks\":{}}\n");
    let hook = w.file("home/.claude/hooks/guard.sh", "#!/bin/sh\nexit 0\n");
    let (name, _) = created(&w, "ro");
    let (st, hk) = (s(&settings), s(&hook));
    let hooks = s(hook.parent().unwrap());
    let script = format!(
        "cat {st}; cat {hk}; \
         echo '{{\"hooks\":\"planted\"}}' > {st} && echo WROTE-SETTINGS; \
         echo 'curl evil' >> {hk} && echo WROTE-HOOK; \
         touch {hooks}/planted.sh && echo PLANTED; \
         rm -f {st} 2>/dev/null; test -e {st} || echo REMOVED; \
         true"
    );
    let r = w.sh(&name, &script).ok();
    let out = r.stdout();
    assert!(
        out.starts_with("{\n  \"hooks\": {},") && out.contains("}\n#!/bin/sh\nexit 0\n"),
        "the files are not visible inside:\n{}",
        r.explain()
    );
    for bad in ["WROTE-SETTINGS", "WROTE-HOOK", "PLANTED", "REMOVED"] {
        assert!(!out.contains(bad), "{bad}:\n{}", r.explain());
    }
    assert!(
        r.stderr().contains("Read-only file system"),
        "{}",
        r.explain()
    );
    assert_eq!(fs::read_to_string(&settings).unwrap(), "{\"hooks\":{}}\n");
    assert_eq!(fs::read_to_string(&hook).unwrap(), "#!/bin/sh\nexit 0\n");
    assert!(!hook.with_file_name("planted.sh").exists());
}

/// Promise 5: a secret in the caller's environment does not reach the cage,
/// a variable named in pass_env does, and neither value stands on any
/// process's command line while the exec runs.
#[test]
fn secrets_stay_out_and_no_value_is_on_a_command_line() {
    let w = world();
    w.write_config("pass_env = [\"MY_CHOSEN_VAR\"]");
    let (name, dir) = created(&w, "env");
    let container = w.container(&name);
    let secret = format!("sk-test-secret-{}-{}", std::process::id(), w.agent_port);
    let chosen = format!("chosen-value-{}-{}", std::process::id(), w.agent_port);
    let env = [
        ("FOO_API_KEY", secret.as_str()),
        ("MY_CHOSEN_VAR", chosen.as_str()),
    ];

    let r = w.run_env(&["cage", "exec", &name, "--", "env"], &env).ok();
    let out = r.stdout();
    assert!(
        !out.contains("FOO_API_KEY") && !out.contains(&secret),
        "{}",
        r.explain()
    );
    assert!(
        out.lines().any(|l| l == format!("MY_CHOSEN_VAR={chosen}")),
        "{}",
        r.explain()
    );
    assert!(
        out.lines()
            .any(|l| l == format!("SHROOMS_AGENT_SESSION={name}")),
        "{}",
        r.explain()
    );

    let started = dir.join("exec-started");
    let script = format!("touch {}; sleep 3", started.display());
    let child = w.spawn_env(&["cage", "exec", &name, "--", "sh", "-c", &script], &env);
    assert!(
        wait_for_path(&started, Duration::from_secs(30)),
        "the exec did not start"
    );
    // The scan sees the running podman exec's own command line...
    let execs = cmdlines_containing(&container);
    assert!(
        execs.iter().any(|(_, c)| c.contains("--env-file")),
        "no podman exec of {container} among {} processes: {execs:?}",
        cmdline_count()
    );
    // ... and no value of the environment on any command line.
    for _ in 0..5 {
        assert_eq!(
            cmdlines_containing(&secret),
            vec![],
            "the secret is on a command line"
        );
        assert_eq!(
            cmdlines_containing(&chosen),
            vec![],
            "a pass_env value is on a command line"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    finish("cage exec (sleep 3)", child).ok();
}

/// Promise 6: the env file is 0600 in a 0700 folder.
#[test]
fn the_env_file_is_private() {
    let w = world();
    let (name, _) = created(&w, "mode");
    let container = w.container(&name);
    w.sh(&name, "true").ok();
    let env_file = w.state.join("cages").join(format!("{container}.env"));
    let text = fs::read_to_string(&env_file).unwrap();
    assert!(
        text.lines()
            .any(|l| l == format!("SHROOMS_AGENT_SESSION={name}")),
        "{text}"
    );
    assert_eq!(mode_of(&env_file), 0o600, "{}", env_file.display());
    assert_eq!(mode_of(env_file.parent().unwrap()), 0o700);
    assert_eq!(mode_of(&w.state), 0o700);
}

/// Promise 7: the host's agent port is reachable from a plain container but
/// refused from a cage, also after a stop and a new start (a new network
/// namespace); another port stays reachable from the cage.
#[test]
fn the_agent_port_is_closed_in_the_cage_only() {
    let w = world();
    let _agent = Listener::on(w.agent_port);
    let other = Listener::any();
    let (name, _) = created(&w, "port");
    let container = w.container(&name);

    let plain = w.podman(&[
        "run",
        "--rm",
        "--network",
        "bridge",
        IMAGE,
        "sh",
        "-c",
        &nc_probe(HOST_ADDR, w.agent_port),
    ]);
    let plain_out = String::from_utf8_lossy(&plain.stdout);
    assert!(
        plain_out.contains(&format!("CONNECTED-{}", w.agent_port)),
        "a plain container does not reach the listener, so the test proves nothing:\n{}",
        show_output(&plain)
    );

    // nc's own message tells "refused" (the rule's reset) from a timeout.
    let probe = format!(
        "nc -w 3 {HOST_ADDR} {} </dev/null 2>&1; {}",
        w.agent_port,
        nc_probe(HOST_ADDR, other.port)
    );
    let check = |r: &Run, when: &str| {
        let out = r.stdout();
        assert!(
            out.contains("Connection refused"),
            "{when}: agent port not refused:\n{}",
            r.explain()
        );
        assert!(
            out.contains(&format!("CONNECTED-{}", other.port)),
            "{when}: the other port is not reachable:\n{}",
            r.explain()
        );
    };
    check(&w.sh(&name, &probe).ok(), "first exec");
    w.run(&["cage", "stop", &name]).ok();
    check(&w.sh(&name, &probe).ok(), "exec after stop");
    // `cage start` closes it too, for anything run in the cage afterwards.
    w.run(&["cage", "start", &name]).ok();
    let direct = w.podman(&["exec", &container, "sh", "-c", &probe]);
    check(
        &Run {
            what: "podman exec after cage start".into(),
            out: direct,
        },
        "after cage start",
    );
}

/// Promise 8: bad session names, a missing project folder and a name in use
/// exit 2 and make nothing (and leave the first session of a name intact).
#[test]
fn bad_input_exits_2_and_makes_nothing() {
    let w = world();
    let dir = project(&w, "bad-project");
    let d = s(&dir);
    let long = "a".repeat(64);
    for bad in ["-x", ".x", "a b", "a/b", long.as_str(), ""] {
        // After `--`, so the name reaches the tool and not clap's option parser.
        let r = w
            .run(&["cage", "create", "--dir", &d, "--", bad])
            .code_is(2);
        assert!(
            r.stderr().contains("is not a session name"),
            "{bad:?}:\n{}",
            r.explain()
        );
        let made: Vec<_> = labelled_containers(None)
            .into_iter()
            .filter(|(_, l, _)| l == bad)
            .collect();
        assert!(made.is_empty(), "{bad:?} made {made:?}");
        assert_eq!(
            w.record_names(),
            Vec::<String>::new(),
            "{bad:?} left a record"
        );
    }

    let name = w.session("bad");
    let missing = w.root.join("no-such-folder");
    let r = w
        .run(&["cage", "create", &name, "--dir", &s(&missing)])
        .code_is(2);
    assert!(r.stderr().contains("no-such-folder"), "{}", r.explain());
    assert!(w.containers_of(&name).is_empty());
    assert!(!w.record_path(&name).exists());

    w.create(&name, &dir, &[]);
    let record = fs::read_to_string(w.record_path(&name)).unwrap();
    let first = w.containers_of(&name);
    assert_eq!(first.len(), 1);
    let other = project(&w, "other-project");
    let r = w
        .run(&["cage", "create", &name, "--dir", &s(&other)])
        .code_is(2);
    assert!(r.stderr().contains("already"), "{}", r.explain());
    assert_eq!(w.containers_of(&name), first, "the first container changed");
    assert_eq!(fs::read_to_string(w.record_path(&name)).unwrap(), record);
    assert_eq!(w.container_state(&first[0]).as_deref(), Some("created"));
}

/// Promise 9: while one exec holds a session, a second exits 3 and says the
/// session is busy; the first finishes normally.
#[test]
fn a_second_exec_on_a_busy_session_exits_3() {
    let w = world();
    let (name, dir) = created(&w, "busy");
    let first = w.hold(&name, &dir);
    let second = w.sh(&name, "echo SECOND-RAN").code_is(125);
    assert!(
        second.stderr().contains("error (busy):"),
        "{}",
        second.explain()
    );
    assert!(!second.stdout().contains("SECOND-RAN"));
    first.release().ok();
    // And once it is done, the session is free again.
    assert_eq!(w.sh(&name, "echo again").ok().stdout(), "again\n");
}

/// Promise 10: exec returns the command's exit status, and what the command
/// left running ends with it (the cage is stopped).
#[test]
fn exec_returns_the_status_and_stops_what_was_left_running() {
    let w = world();
    let (name, _) = created(&w, "status");
    let container = w.container(&name);
    // A duration no other process on the machine is likely to sleep for.
    let secs = 100_000 + u32::from(w.agent_port);
    let needle = format!("sleep {secs}");
    let r = w
        .sh(&name, &format!("{needle} & echo LEFT-RUNNING; exit 7"))
        .code_is(7);
    assert!(r.stdout().contains("LEFT-RUNNING"), "{}", r.explain());
    let state = w.container_state(&container);
    assert!(
        state.is_some() && state.as_deref() != Some("running"),
        "{state:?}"
    );
    assert_eq!(
        cmdlines_containing(&needle),
        vec![],
        "the background process survived"
    );
    assert_eq!(w.sh(&name, "exit 0").code(), 0);
    assert_eq!(w.sh(&name, "exit 42").code(), 42);
}

/// Promise 11: --dry-run prints the podman command line and the env file,
/// with a secret-looking pass_env value redacted, and makes nothing.
#[test]
fn dry_run_shows_argv_and_env_redacted_and_makes_nothing() {
    let w = world();
    w.write_config("pass_env = [\"MY_PLAIN_VAR\"]\npass_secrets = [\"FOO_API_KEY\"]");
    let name = w.session("dry");
    let dir = project(&w, "dry-project");
    let secret = format!("sk-dry-run-{}-{}", std::process::id(), w.agent_port);
    let r = w
        .run_env(
            &["cage", "create", &name, "--dir", &s(&dir), "--dry-run"],
            &[("FOO_API_KEY", &secret), ("MY_PLAIN_VAR", "plain-value")],
        )
        .ok();
    let out = r.stdout();
    let argv_line = out
        .lines()
        .find(|l| l.contains(" create --name "))
        .unwrap_or_else(|| panic!("no podman create line:\n{}", r.explain()));
    assert!(argv_line.starts_with(podman_program()), "{argv_line}");
    assert!(
        argv_line.contains(&format!("--name shrooms-{name}-")),
        "{argv_line}"
    );
    // The line reads back, as a shell reads it, into podman's words.
    let words = shlex::split(argv_line).unwrap_or_else(|| panic!("not shell words: {argv_line}"));
    let label = format!("xyz.vpavlin.shrooms.session={name}");
    assert!(
        words.windows(2).any(|p| p == ["--label", label.as_str()]),
        "{argv_line}"
    );
    assert!(
        argv_line.contains(&format!("type=bind,src={d},dst={d}", d = dir.display())),
        "{argv_line}"
    );
    assert!(argv_line.ends_with(&format!("-- {IMAGE}")), "{argv_line}");
    assert!(
        out.lines().any(|l| l == "FOO_API_KEY=<redacted>"),
        "{}",
        r.explain()
    );
    assert!(
        out.lines().any(|l| l == "MY_PLAIN_VAR=plain-value"),
        "{}",
        r.explain()
    );
    assert!(
        out.lines()
            .any(|l| l == format!("SHROOMS_AGENT_SESSION={name}")),
        "{}",
        r.explain()
    );
    assert!(
        !out.contains(&secret) && !r.stderr().contains(&secret),
        "{}",
        r.explain()
    );

    assert!(w.containers_of(&name).is_empty(), "a container was made");
    assert!(!w.record_path(&name).exists(), "a record was made");
    assert!(!w.state.join("cages").exists(), "the state was touched");
}

/// Promise 12: no cages on this machine (`cages = false`, or no podman on
/// PATH): create fails with `NO_PODMAN`'s words; a caged session on such a
/// machine fails with the other sentence. (A `podman` the config names
/// that is not there is the config's error: tests/it/cli.rs.)
#[test]
fn no_podman_says_so_in_the_seeds_words() {
    let w = world();
    let dir = project(&w, "nopodman-project");
    let expect = "shrooms-agent: error: this machine has no podman to cage sessions with";
    let no_podman = [("PATH", "/nonexistent-bin")];
    for (config, env) in [("cages = false", &[][..]), ("", &no_podman[..])] {
        w.write_config(config);
        let name = w.session("nopodman");
        let r = w
            .run_env(&["cage", "create", &name, "--dir", &s(&dir)], env)
            .code_is(1);
        assert_eq!(r.stderr().trim_end(), expect, "{config}:\n{}", r.explain());
        assert!(!w.record_path(&name).exists());
        assert!(w.containers_of(&name).is_empty());
    }

    w.write_config("");
    let (name, _) = created(&w, "nopodman-caged");
    let r = w
        .run_env(
            &["cage", "exec", &name, "--", "sh", "-c", "echo RAN"],
            &no_podman,
        )
        .code_is(125);
    assert_eq!(
        r.stderr().trim_end(),
        "shrooms-agent: error (no_podman): this session is caged, and this machine has no podman to cage it with",
        "{}",
        r.explain()
    );
    assert!(!r.stdout().contains("RAN"));

    // Still listed, and it can still be taken out of its cage (docs/configuration.md,
    // "Configuration", `cages = false`); its container is left for
    // `cage prune` once podman is back.
    w.write_config("cages = false");
    let container = w.container(&name);
    let row = w.ls_row(&name).unwrap_or_default();
    assert_eq!(row["cage"]["state"], "no podman", "{row:#}");
    let r = w.run(&["cage", "move", &name, "--out"]).ok();
    assert!(r.stderr().contains("cage prune"), "{}", r.explain());
    assert!(w.record(&name)["cage"].is_null());
    w.write_config("");
    // (Not `cage prune` here: in root's shared storage it would take other
    // tests' cages for leftovers; tests/it/cage.rs prune_removes_leftovers_only
    // shows prune.)
    assert!(w.container_exists(&container));
    assert!(w.podman(&["rm", "-f", &container]).status.success());
}

/// Promise 13: an unknown config key and a bad value each exit 2 and name
/// the key and the file; `doctor` makes it one failing check (exit 1) and
/// runs the others.
#[test]
fn config_errors_name_the_key_and_the_file() {
    let w = world();
    let file = s(&w.config);
    for (config, key) in [
        ("colour = \"blue\"", "colour"),
        ("memory = \"lots\"", "memory"),
    ] {
        w.write_config(config);
        let r = w.run(&["cage", "ls"]).code_is(2);
        let err = r.stderr();
        assert!(
            err.contains(key) && err.contains(&file),
            "{config}:\n{}",
            r.explain()
        );
        let r = w.run(&["doctor"]).code_is(1);
        let out = r.stdout();
        assert!(
            out.lines()
                .any(|l| l.starts_with("FAIL") && l.contains(key) && l.contains(&file))
                && out.lines().any(|l| l.starts_with("pass  podman")),
            "{config}:\n{}",
            r.explain()
        );
    }
}

/// Promise 14: `cage run` runs the configured claude program, its symlink
/// resolved and its folder mounted read-only.
#[test]
fn run_runs_the_configured_claude_through_its_link() {
    let w = world();
    let program = w.file(
        "claude-install/versions/fakeclaude",
        "#!/bin/sh\necho \"fake claude $@\"\n",
    );
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
    let link = w.dir("bin").join("claude");
    std::os::unix::fs::symlink(&program, &link).unwrap();
    w.write_config(&format!("[harness]\nclaude = \"{}\"", link.display()));
    let (name, _) = created(&w, "run");

    let r = w.run(&["cage", "run", &name, "--", "--hello"]).ok();
    // Handed the shrooms tools first: the program as the cage has it.
    let tools = serde_json::json!({"mcpServers": {"shrooms": {
        "type": "stdio",
        "command": s(&w.tools_program()),
        "args": ["mcp"],
    }}});
    assert_eq!(
        r.stdout(),
        format!("fake claude --mcp-config={tools} --hello\n"),
        "{}",
        r.explain()
    );
    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(
        show["cage"]["program"],
        s(&fs::canonicalize(&program).unwrap()).as_str()
    );

    let versions = s(program.parent().unwrap());
    let r = w
        .sh(
            &name,
            &format!("touch {versions}/planted && echo PLANTED; true"),
        )
        .ok();
    assert!(!r.stdout().contains("PLANTED"), "{}", r.explain());
    assert!(
        r.stderr().contains("Read-only file system"),
        "{}",
        r.explain()
    );
    assert!(!program.with_file_name("planted").exists());
}

/// Promise 15: as root the configured limits are enforced: the cage's
/// cgroup carries the memory and pids limits.
#[test]
fn limits_are_enforced() {
    let w = world();
    w.write_config("memory = \"256m\"\npids = 321");
    let (name, _) = created(&w, "limits");
    let r = w
        .sh(
            &name,
            "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max",
        )
        .ok();
    let out = r.stdout();
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(lines, vec!["268435456", "321"], "{}", r.explain());
}

/// Promise 16: prune removes labelled containers with no session and env
/// files of no session (and --dry-run only lists them); a real session's
/// container is untouched.
#[test]
fn prune_removes_leftovers_only() {
    // Its own podman storage: other tests' cages are not leftovers to it.
    let w = World::alone();
    let (name, _) = created(&w, "keep");
    let kept = w.container(&name);
    w.sh(&name, "true").ok(); // so that it has an env file too
    let gone = w.session("gone");
    let leftover = format!("shrooms-{gone}-abcdef");
    let label = format!("xyz.vpavlin.shrooms.session={gone}");
    // Made by this state folder: its label says so.
    let id = fs::read_to_string(w.state.join("state-id")).unwrap();
    let state = format!("xyz.vpavlin.shrooms.state={}", id.trim());
    let made = w.podman(&[
        "create", "--label", &label, "--label", &state, "--name", &leftover, IMAGE, "sleep",
        "infinity",
    ]);
    assert!(made.status.success(), "{}", show_output(&made));
    let stray = w.state.join("cages").join("shrooms-gone-123456.env");
    fs::write(&stray, "X=1\n").unwrap();

    let ls = w.run(&["cage", "ls", "--json"]).ok().json();
    let leftovers: Vec<(&str, &str)> = ls["leftovers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["container"].as_str().unwrap(),
                l["session"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(leftovers, vec![(leftover.as_str(), gone.as_str())]);

    let dry = w.run(&["cage", "prune", "--dry-run", "--json"]).ok().json();
    assert_eq!(dry["containers"], serde_json::json!([leftover]));
    assert_eq!(dry["files"], serde_json::json!([s(&stray)]));
    assert!(
        w.container_exists(&leftover),
        "--dry-run removed the container"
    );
    assert!(stray.exists(), "--dry-run removed the file");

    let pruned = w.run(&["cage", "prune", "--yes", "--json"]).ok().json();
    assert_eq!(pruned["containers"], serde_json::json!([leftover]));
    assert_eq!(pruned["files"], serde_json::json!([s(&stray)]));
    assert!(
        !w.container_exists(&leftover),
        "the leftover is still there"
    );
    assert!(!stray.exists(), "the stray env file is still there");
    assert!(
        w.container_exists(&kept),
        "the session's own container was removed"
    );
    let env_file = w.state.join("cages").join(format!("{kept}.env"));
    assert!(env_file.exists(), "the session's env file was removed");
    assert!(
        w.state.join("cages").join(&kept).is_dir(),
        "the session's folder was removed"
    );
    assert_eq!(w.sh(&name, "echo still-here").ok().stdout(), "still-here\n");

    // A damaged record: its container looks like a leftover, so prune
    // removes nothing and says why (exit 1).
    let record = w.record_path(&name);
    let good = fs::read(&record).unwrap();
    fs::write(&record, &good[..good.len() / 2]).unwrap();
    let r = w.run(&["cage", "prune", "--yes"]).code_is(1);
    assert!(r.stderr().contains("damaged"), "{}", r.explain());
    assert!(
        w.container_exists(&kept),
        "prune removed a damaged session's container"
    );
    fs::write(&record, &good).unwrap();
}

/// Promise 17: doctor tells the truth here: all well with the test image
/// (podman and nft pass), a FAIL for an image that is not there.
#[test]
fn doctor_passes_here_and_fails_on_a_missing_image() {
    let w = world();
    let r = w.run(&["doctor"]).ok();
    let out = r.stdout();
    for check in ["podman", "nft", "image"] {
        assert!(
            out.lines()
                .any(|l| l.starts_with("pass") && l.split_whitespace().nth(1) == Some(check)),
            "no pass line for {check}:\n{}",
            r.explain()
        );
    }
    assert!(!out.contains("FAIL"), "{}", r.explain());

    // The world's config names the test image; this one names another.
    fs::write(
        &w.config,
        format!(
            "image = \"localhost/nope:1\"\nagent_port = {}\nallow_root = true\n",
            w.agent_port
        ),
    )
    .unwrap();
    let r = w.run(&["doctor"]).code_is(1);
    let out = r.stdout();
    let fail: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(fail.len(), 1, "{}", r.explain());
    assert!(
        fail[0].split_whitespace().nth(1) == Some("image") && fail[0].contains("localhost/nope:1"),
        "{}",
        r.explain()
    );
}

/// The terminal is passed through: on a terminal, `cage exec` adds `-t`, so
/// the command inside has one too; without one (as in every other test),
/// it has none.
#[test]
fn exec_passes_the_terminal_through() {
    let w = world();
    let (name, _) = created(&w, "tty");
    let probe = "test -t 0 && echo HAS-A-TTY || echo NO-TTY";
    // Without a terminal.
    let out = w.sh(&name, probe).ok().stdout();
    assert!(out.contains("NO-TTY"), "{out}");
    // On one: `script` gives the command a pseudo-terminal.
    let inner = w.command(&["cage", "exec", &name, "--", "sh", "-c", probe]);
    let words: Vec<String> = std::iter::once(inner.get_program().to_string_lossy().into_owned())
        .chain(inner.get_args().map(|a| a.to_string_lossy().into_owned()))
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    let mut outer = std::process::Command::new("script");
    outer.env_clear();
    for (k, v) in inner.get_envs() {
        if let Some(v) = v {
            outer.env(k, v);
        }
    }
    outer
        .args(["-qec", &words.join(" "), "/dev/null"])
        .current_dir("/tmp")
        .stdin(std::process::Stdio::null());
    let out = outer.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", show_output(&out));
    assert!(text.contains("HAS-A-TTY"), "{text}");
}

/// A cage runs nothing of the image's ENTRYPOINT: its first process is the
/// tool's own init, and an entrypoint would run before the network
/// rules are set.
#[test]
fn the_images_entrypoint_does_not_run() {
    let w = world();
    let ctx = w.dir("ep-image");
    fs::write(
        ctx.join("Containerfile"),
        format!(
            "FROM {IMAGE}\nENTRYPOINT [\"/bin/sh\", \"-c\", \"echo ran > /entrypoint-ran; exec \\\"$@\\\"\", \"--\"]\n"
        ),
    )
    .unwrap();
    let image = format!("localhost/shrooms-it-entrypoint-{}", std::process::id());
    // Removed by the world's Drop, after the cage made from it, also when
    // an assertion fails.
    w.podman_on_drop(&["rmi", "-f", &image]);
    let built = w.podman(&["build", "-q", "-t", &image, &s(&ctx)]);
    assert!(built.status.success(), "{}", show_output(&built));
    let name = w.session("ep");
    let d = project(&w, "ep-project");
    w.create(&name, &d, &["--image", &image]);
    let out = w
        .sh(
            &name,
            "ls /entrypoint-ran 2>/dev/null && echo RAN || echo NOT-RUN",
        )
        .ok()
        .stdout();
    // The same image run plainly does run it (the test can tell).
    let plain = w.podman(&["run", "--rm", &image, "cat", "/entrypoint-ran"]);
    w.run(&["cage", "rm", &name]).ok();
    assert!(out.contains("NOT-RUN"), "{out}");
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "ran\n");
}

/// runc follows links when it mounts, at every start. So no cage may write
/// a folder another mount comes from: a project inside or above another
/// session's is refused, as is a project holding the cage's own program
/// (where links lead); and a cage whose mount now leads elsewhere than
/// when it was made (a folder replaced by a link, as a cage on the folder
/// above could do) is not started, and says why.
#[test]
fn no_cage_can_redirect_what_a_cage_mounts() {
    let w = world();
    let outer = w.session("outer");
    let outer_dir = project(&w, "nest/outer");
    w.create(&outer, &outer_dir, &[]);
    let inner_dir = project(&w, "nest/outer/sub");
    let above_dir = project(&w, "nest");
    for (dir, says) in [(&inner_dir, "inside"), (&above_dir, "above")] {
        let name = w.session("nested");
        let r = w
            .run(&["cage", "create", &name, "--dir", &s(dir)])
            .code_is(2);
        assert!(r.stderr().contains(says), "{}", r.explain());
        assert!(r.stderr().contains(&outer), "{}", r.explain());
        assert!(w.containers_of(&name).is_empty(), "{}", r.explain());
        assert!(!w.record_path(&name).exists(), "{}", r.explain());
    }
    // The same folder for a second session is fine.
    let twin = w.session("twin");
    w.create(&twin, &outer_dir, &[]);

    // The program inside the project, through a link from elsewhere.
    let tools = project(&w, "tools");
    let program = w.file("tools/bin/claude", "#!/bin/sh\necho hi\n");
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
    let link = w.dir("elsewhere").join("claude");
    std::os::unix::fs::symlink(&program, &link).unwrap();
    w.write_config(&format!("[harness]\nclaude = \"{}\"", link.display()));
    let name = w.session("holds");
    let r = w
        .run(&["cage", "create", &name, "--dir", &s(&tools)])
        .code_is(2);
    assert!(r.stderr().contains("holds"), "{}", r.explain());
    assert!(w.containers_of(&name).is_empty(), "{}", r.explain());
    w.write_config("");

    // A mount source replaced by a link after the cage was made.
    let (victim, victim_dir) = created(&w, "victim");
    let secret = project(&w, "secret");
    fs::write(secret.join("id_key"), "key").unwrap();
    let moved = victim_dir.with_file_name("victim-project.old");
    fs::rename(&victim_dir, &moved).unwrap();
    std::os::unix::fs::symlink(&secret, &victim_dir).unwrap();
    let r = w.run(&["cage", "exec", &victim, "--", "ls"]).code_is(125);
    assert!(r.stderr().contains("was not started"), "{}", r.explain());
    assert!(r.stderr().contains("is a link now"), "{}", r.explain());
    assert!(!r.stdout().contains("id_key"), "{}", r.explain());
    let container = w.containers_of(&victim).pop().unwrap();
    assert_ne!(w.container_state(&container).as_deref(), Some("running"));
    // Put back, it starts.
    fs::remove_file(&victim_dir).unwrap();
    fs::rename(&moved, &victim_dir).unwrap();
    w.run(&["cage", "exec", &victim, "--", "true"]).ok();
    let _ = (outer, twin);

    // A link that was there may lead elsewhere after an upgrade (a stow or
    // home-manager link of the harness's settings): the cage still starts,
    // and sees the new file.
    let dot_a = w.file("dotfiles-a/settings.json", "{\"v\": \"a\"}");
    let dot_b = w.file("dotfiles-b/settings.json", "{\"v\": \"b\"}");
    let settings = w.dir_in_home(".claude").join("settings.json");
    std::os::unix::fs::symlink(&dot_a, &settings).unwrap();
    let (stowed, _) = created(&w, "stowed");
    fs::remove_file(&settings).unwrap();
    std::os::unix::fs::symlink(&dot_b, &settings).unwrap();
    let r = w
        .run(&["cage", "exec", &stowed, "--", "cat", &s(&settings)])
        .ok();
    assert!(r.stdout().contains("\"b\""), "{}", r.explain());
}

/// Never a half-made cage: when podman create fails late (here a podman
/// that makes the container, then says it failed, as a time-out would),
/// everything made before is taken back: the container, the env file, the
/// cage's private folders, and the harness folders made on the way
/// (~/.claude on a machine where Claude Code never ran); no record is left.
#[test]
fn a_create_that_fails_late_leaves_nothing() {
    let w = world();
    let fake = w.file(
        "fake-podman",
        "#!/bin/sh\n\
         if [ \"$1\" = create ]; then\n\
           /usr/bin/podman \"$@\" >/dev/null\n\
           echo 'Error: a simulated time-out after the container was made' >&2\n\
           exit 125\n\
         fi\n\
         exec /usr/bin/podman \"$@\"\n",
    );
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    w.write_config(&format!("podman = \"{}\"", fake.display()));
    assert!(!w.home.join(".claude").exists());
    let name = w.session("late");
    let dir = project(&w, "late-project");
    let r = w
        .run(&["cage", "create", &name, "--dir", &s(&dir)])
        .code_is(1);
    assert!(r.stderr().contains("simulated time-out"), "{}", r.explain());
    assert!(w.containers_of(&name).is_empty(), "{}", r.explain());
    assert!(!w.record_path(&name).exists());
    assert!(
        !w.state
            .join("sessions")
            .join(format!("{name}.lock"))
            .exists(),
        "the session's lock file was left"
    );
    assert!(!w.home.join(".claude").exists(), "{}", r.explain());
    // The env file and the cage's private folders live in cages/.
    let left: Vec<_> = fs::read_dir(w.state.join("cages"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "cages/: {left:?}");
}

/// Messages that lead somewhere: `cage limits NAME` without flags shows
/// the limits, configured and as podman reports them; a project folder
/// renamed and a container removed by hand are each named with the `cage
/// move` that brings the session back, and the moves keep its history.
#[test]
fn a_renamed_folder_and_a_removed_container_lead_to_cage_move() {
    let w = world();
    let (name, dir) = created(&w, "lead");
    let r = w.run(&["cage", "limits", &name]).ok();
    assert!(
        r.stdout().contains(&format!("{name}: configured memory "))
            && r.stdout().contains(&format!("{name}: applied memory "))
            && r.stdout().contains(" GiB, cpus ")
            && !r.stdout().contains(" bytes"),
        "{}",
        r.explain()
    );

    let new = dir.with_file_name("lead-renamed");
    fs::rename(&dir, &new).unwrap();
    let r = w.sh(&name, "true").code_is(125);
    assert!(
        r.stderr()
            .contains(&format!("`shrooms-agent cage move {name} --dir NEW`")),
        "{}",
        r.explain()
    );
    w.run(&["cage", "move", &name, "--dir", &s(&new)]).ok();
    assert_eq!(w.record(&name)["dir"], s(&new));
    let r = w.sh(&name, "pwd").ok();
    assert_eq!(r.stdout().trim(), s(&new), "{}", r.explain());

    let container = w.record(&name)["cage"]["container"]
        .as_str()
        .unwrap()
        .to_string();
    w.podman(&["rm", "-f", &container]);
    let r = w.sh(&name, "true").code_is(125);
    assert!(
        r.stderr().contains(&format!(
            "`shrooms-agent cage move {name}` gives it a new cage and keeps its history"
        )),
        "{}",
        r.explain()
    );
    w.run(&["cage", "move", &name]).ok();
    w.sh(&name, "true").ok();
    let r = w.run(&["cage", "history", &name]).ok();
    assert!(
        r.stdout()
            .contains(&format!("its folder is {} now", s(&new))),
        "{}",
        r.explain()
    );
}

/// `$CLAUDE_CONFIG_DIR` names Claude Code's folder for every part: the
/// cage's copy of its settings is made from there (the gateway reads the
/// machine's login from the same folder), and the cage sees it at that
/// path; ~/.claude is not used.
#[test]
fn claude_config_dir_is_the_folder_the_cage_copies() {
    let w = world();
    let elsewhere = w.dir_in_home("elsewhere-claude");
    fs::write(elsewhere.join("settings.json"), "{\"from\": \"elsewhere\"}").unwrap();
    let home_settings = w.dir_in_home(".claude").join("settings.json");
    fs::write(&home_settings, "{\"from\": \"home\"}").unwrap();
    w.chown_all();
    let name = w.session("ccd");
    let dir = project(&w, "ccd-project");
    let env = [("CLAUDE_CONFIG_DIR", s(&elsewhere))];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    w.run_env(&["cage", "create", &name, "--dir", &s(&dir)], &env)
        .ok();
    let copy = s(&elsewhere.join("settings.json"));
    let r = w
        .run_env(&["cage", "exec", &name, "--", "cat", &copy], &env)
        .ok();
    assert!(r.stdout().contains("elsewhere"), "{}", r.explain());
    assert!(!r.stdout().contains("home"), "{}", r.explain());
}

/// On a terminal, `cage create`, `move` and `rm` say each slow step as it
/// begins (podman making or removing the container), one line each; with
/// `--json`, or without a terminal, they say nothing of it.
fn slow_steps_said(w: &World) {
    let name = w.session("steps");
    let dir = project(w, "steps-project");
    let d = s(&dir);
    let r = w.run_on_terminal(&["cage", "create", &name, "--dir", &d], "");
    assert_eq!(r.code(), 0, "{}", r.explain());
    let out = r.stdout();
    let making = out
        .lines()
        .position(|l| l.trim_start().starts_with("Making container shrooms-"))
        .unwrap_or_else(|| panic!("no step said:\n{}", r.explain()));
    assert!(
        out.lines()
            .nth(making)
            .unwrap()
            .ends_with(&format!(" from {IMAGE}")),
        "{}",
        r.explain()
    );
    let r = w.run_on_terminal(&["cage", "move", &name], "");
    assert_eq!(r.code(), 0, "{}", r.explain());
    for said in ["Removing container shrooms-", "Making container shrooms-"] {
        assert!(
            r.stdout().lines().any(|l| l.trim_start().starts_with(said)),
            "{said}: {}",
            r.explain()
        );
    }
    let r = w.run_on_terminal(&["cage", "rm", &name], "");
    assert_eq!(r.code(), 0, "{}", r.explain());
    assert!(
        r.stdout()
            .lines()
            .any(|l| l.trim_start().starts_with("Removing container shrooms-")),
        "{}",
        r.explain()
    );
    // Not on a terminal, or --json: nothing of it, on either stream.
    let r = w.run(&["cage", "create", &name, "--dir", &d]).ok();
    assert!(
        !r.stderr().contains(" container shrooms-"),
        "{}",
        r.explain()
    );
    let r = w.run_on_terminal(&["cage", "rm", "--json", &name], "");
    assert_eq!(r.code(), 0, "{}", r.explain());
    assert!(
        !r.stdout().contains("Removing container"),
        "{}",
        r.explain()
    );
}

#[test]
fn create_move_and_rm_say_their_slow_steps_on_a_terminal() {
    slow_steps_said(&world());
}

#[test]
fn create_move_and_rm_say_their_slow_steps_on_a_terminal_rootless() {
    slow_steps_said(&World::rootless());
}
