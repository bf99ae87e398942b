//! `cage exec` and `cage run` as a shell user meets them: the command's own
//! status passed through, and the tool's own failures on codes no command
//! of the cage's is mistaken for (125, 126, 127, as podman run, docker run
//! and env(1) keep them); a shell when no command is given; a command
//! without `--`; and `--join`, a second look at a running turn.

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use crate::common::*;

/// A session of the world, created, with its project folder.
fn created(w: &World, base: &str) -> (String, PathBuf) {
    let name = w.session(base);
    let dir = std::fs::canonicalize(w.dir(&format!("{base}-project"))).unwrap();
    w.create(&name, &dir, &[]);
    (name, dir)
}

/// Run the binary with `input` on its stdin (a pipe, no terminal).
fn run_with_stdin(w: &World, args: &[&str], input: &str) -> Run {
    let mut c = w.command(args);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn shrooms-agent");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    Run {
        what: format!("shrooms-agent {} <<< {input:?}", args.join(" ")),
        out: child.wait_with_output().expect("wait"),
    }
}

fn exit_codes(w: &World) {
    let (name, dir) = created(w, "codes");
    // The command's own status, whatever it is; no `--` needed.
    let r = w.run(&["cage", "exec", &name, "sh", "-c", "exit 3"]);
    assert_eq!(r.code(), 3, "{}", r.explain());
    let r = w.run(&["cage", "exec", &name, "--", "sh", "-c", "exit 0"]);
    assert_eq!(r.code(), 0, "{}", r.explain());
    // 127: no such command in the cage.
    let r = w.run(&["cage", "exec", &name, "--", "no-such-program-here"]);
    assert_eq!(r.code(), 127, "{}", r.explain());
    // 126: there, but not a program (a file of the project without x).
    std::fs::write(dir.join("not-a-program"), "just text\n").unwrap();
    w.chown_all();
    let r = w.run(&["cage", "exec", &name, "--", "./not-a-program"]);
    assert_eq!(r.code(), 126, "{}", r.explain());
    // 125: the tool refused; stderr and --json say which kind.
    let r = w
        .run(&["cage", "exec", "--json", "no-such-session-x", "--", "true"])
        .code_is(125);
    let j = r.json();
    assert_eq!(j["exit_code"], 125, "{}", r.explain());
    assert_eq!(j["kind"], "not_found", "{}", r.explain());
    assert!(
        r.stderr().contains("shrooms-agent: error (not_found): "),
        "{}",
        r.explain()
    );
    let r = w
        .run(&["cage", "run", "--json", "no-such-session-x"])
        .code_is(125);
    assert_eq!(r.json()["kind"], "not_found", "{}", r.explain());
    // Busy: another exec holds the session.
    let started = dir.join("holder-started");
    let script = format!("touch {}; sleep 4", started.display());
    let holder = w.spawn_env(&["cage", "exec", &name, "--", "sh", "-c", &script], &[]);
    assert!(
        wait_for_path(&started, Duration::from_secs(30)),
        "the holding exec did not start"
    );
    let r = w
        .run(&["cage", "exec", "--json", &name, "--", "true"])
        .code_is(125);
    assert_eq!(r.json()["kind"], "busy", "{}", r.explain());
    assert!(r.stderr().contains("error (busy)"), "{}", r.explain());
    finish("the holding exec", holder).ok();
    // A usage error of exec is its own failure too; other commands keep 2.
    w.run(&["cage", "exec"]).code_is(125);
    w.run(&["cage", "show"]).code_is(2);
    w.run(&["cage", "show", "no-such-session-x"]).code_is(2);
}

/// The command's status passes through `cage exec`; its own failures are
/// 125 (with the kind said), 126 and 127 come from podman exec.
#[test]
fn exec_passes_the_status_through_and_fails_on_125_126_127() {
    exit_codes(&World::new());
}

#[test]
fn exec_passes_the_status_through_and_fails_on_125_126_127_rootless() {
    exit_codes(&World::rootless());
}

fn shell(w: &World) {
    let (name, _) = created(w, "shell");
    // No command: a shell, here sh (the image has no bash), reading stdin.
    let r = run_with_stdin(
        w,
        &["cage", "exec", &name],
        "echo SHELL-$((1+2)) $BASH_VERSION; exit 4\n",
    );
    assert_eq!(r.code(), 4, "{}", r.explain());
    assert_eq!(r.stdout().trim(), "SHELL-3", "{}", r.explain());
    // On a terminal.
    let r = w.run_on_terminal(&["cage", "exec", &name], "echo TTY-$((2+3))\nexit\n");
    assert!(r.stdout().contains("TTY-5"), "{}", r.explain());
    // Where the image has bash, bash (one installed here, by the cage's root).
    w.run(&[
        "cage",
        "exec",
        &name,
        "sh",
        "-c",
        "printf '#!/bin/sh\\necho BASH-RAN\\nexec /bin/sh \"$@\"\\n' >/bin/bash; chmod 755 /bin/bash",
    ])
    .ok();
    let r = run_with_stdin(w, &["cage", "exec", &name], "echo AFTER\n").ok();
    assert_eq!(r.stdout(), "BASH-RAN\nAFTER\n", "{}", r.explain());
}

/// `cage exec NAME` alone opens a shell in the cage: bash where the image
/// has it, else sh; with a terminal or with commands on stdin.
#[test]
fn exec_without_a_command_opens_a_shell() {
    shell(&World::new());
}

#[test]
fn exec_without_a_command_opens_a_shell_rootless() {
    shell(&World::rootless());
}

fn join(w: &World) {
    let _agent = Listener::on(w.agent_port);
    let other = Listener::any();
    let (name, dir) = created(w, "join");
    let container = w.container(&name);
    // Stopped: refused, and not started.
    let r = w
        .run(&["cage", "exec", "--join", "--json", &name, "--", "true"])
        .code_is(125);
    assert_eq!(r.json()["kind"], "bad_input", "{}", r.explain());
    assert!(r.stderr().contains("not running"), "{}", r.explain());
    assert_ne!(
        w.container_state(&container).as_deref(),
        Some("running"),
        "--join started the cage"
    );

    // A turn holds the cage: the joined command runs beside it.
    let turn = w.hold(&name, &dir);
    let probe = format!(
        "ps -o args | grep -c '^{HOLDING_ARGS}'; {}; {}; exit 5",
        nc_probe(HOST_ADDR, w.agent_port),
        nc_probe(HOST_ADDR, other.port)
    );
    let r = w.run(&["cage", "exec", "--join", &name, "sh", "-c", &probe]);
    assert_eq!(r.code(), 5, "{}", r.explain());
    // It sees the turn's processes (its shell; a child of it forked for
    // its next `sleep` shows the same words for a moment), and the cage's
    // rules hold for it.
    let seen: u32 = r
        .stdout()
        .lines()
        .next()
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    assert!(seen >= 1, "{}", r.explain());
    assert!(
        r.stdout().contains(&format!("REFUSED-{}", w.agent_port)),
        "the joined command reached the agent port:\n{}",
        r.explain()
    );
    assert!(
        r.stdout().contains(&format!("CONNECTED-{}", other.port)),
        "the joined command reaches no network, so the refusal proves nothing:\n{}",
        r.explain()
    );
    // The joined command ended; the cage runs on, and the turn is still held.
    assert_eq!(
        w.container_state(&container).as_deref(),
        Some("running"),
        "the joined command's end stopped the cage"
    );
    w.run(&["cage", "exec", &name, "--", "true"]).code_is(125);
    let r = turn.release().ok();
    assert!(r.stdout().contains("HELD-DONE"), "{}", r.explain());
    // The turn's end stops the cage, as ever.
    assert_ne!(w.container_state(&container).as_deref(), Some("running"));
}

/// `cage exec --join` runs beside a running turn, never starting or
/// stopping the cage, under the cage's rules; refused when it is stopped.
#[test]
fn join_runs_beside_a_turn_and_is_refused_when_stopped() {
    join(&World::new());
}

#[test]
fn join_runs_beside_a_turn_and_is_refused_when_stopped_rootless() {
    join(&World::rootless());
}

/// In a Claude Code cage, the shell `cage exec NAME` opens finds `claude`
/// on its PATH: a link, in a folder of the tool's that the cage has
/// read-only, to the very program `cage run` runs. The cage can neither
/// change the link nor add one beside it, and its home holds none.
fn claude_on_a_shells_path(w: &World) {
    let (claude, image) = real_claude();
    w.write_config(&format!("[harness]\nclaude = \"{claude}\"\n"));
    let name = w.session("onpath");
    let dir = w.dir(&format!("projects/{name}"));
    w.create(&name, &dir, &["--image", &image]);
    let r = run_with_stdin(
        w,
        &["cage", "exec", &name],
        "command -v claude && claude --version\n",
    )
    .ok();
    let version = std::process::Command::new(&claude)
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout);
    assert!(version.contains("Claude Code"), "{version}");
    assert_eq!(
        r.stdout(),
        format!("/run/shrooms-agent-bin/claude\n{version}"),
        "{}",
        r.explain()
    );
    let r = w
        .run(&[
            "cage",
            "exec",
            &name,
            "--",
            "sh",
            "-c",
            "readlink /run/shrooms-agent-bin/claude; \
             rm -f /run/shrooms-agent-bin/claude 2>&1; \
             ln -s /bin/sh /run/shrooms-agent-bin/sh 2>&1; \
             touch /run/shrooms-agent-bin/x 2>&1; \
             ls -A /run/shrooms-agent-bin; \
             find \"$HOME\" -name claude -type l 2>/dev/null; true",
        ])
        .ok();
    let out = r.stdout();
    let lines: Vec<&str> = out.lines().collect();
    let target = std::fs::canonicalize(&claude).unwrap();
    assert_eq!(lines[0], target.to_str().unwrap(), "{}", r.explain());
    assert_eq!(lines[lines.len() - 1], "claude", "{}", r.explain());
    assert_eq!(lines.len(), 5, "{}", r.explain());
    for refused in &lines[1..4] {
        assert!(refused.contains("Read-only file system"), "{}", r.explain());
    }
}

#[test]
fn exec_finds_the_real_claude_code_on_a_shells_path() {
    claude_on_a_shells_path(&World::new());
}

#[test]
fn exec_finds_the_real_claude_code_on_a_shells_path_rootless() {
    claude_on_a_shells_path(&World::rootless());
}

/// A pi cage runs the image's own pi, which is on the image's PATH: the
/// shell finds it there (the cage is given no program, so no link folder).
fn pi_on_a_shells_path(w: &World) {
    let image = real_pi_image();
    w.write_config("");
    let name = w.session("onpathpi");
    let dir = w.dir(&format!("projects/{name}"));
    w.create(&name, &dir, &["--harness", "pi", "--image", &image]);
    let r = run_with_stdin(
        w,
        &["cage", "exec", &name],
        "command -v pi && pi --version >/dev/null && echo RAN; \
         test -e /run/shrooms-agent-bin || echo NO-LINKS\n",
    )
    .ok();
    assert_eq!(
        r.stdout(),
        "/usr/local/bin/pi\nRAN\nNO-LINKS\n",
        "{}",
        r.explain()
    );
}

#[test]
fn exec_finds_the_real_pi_on_a_shells_path() {
    pi_on_a_shells_path(&World::new());
}

#[test]
fn exec_finds_the_real_pi_on_a_shells_path_rootless() {
    pi_on_a_shells_path(&World::rootless());
}
