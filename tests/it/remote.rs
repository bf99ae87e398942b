//! `--on MACHINE`: cage commands run by shrooms-agent on another machine
//! over ssh. "The other machine" is this one: scripts/test-ssh starts an
//! sshd of its own on 127.0.0.1 that lets in the rootless test user alone,
//! and root's CLI drives cages there, with its own world (config, state)
//! named through the ssh connection's environment (SetEnv/AcceptEnv).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::gateway::{Mock, QUIET};

/// The key root's CLI lends: this test run's own, so that no other test's
/// command line (the gateway's tests put theirs on one) is taken for it.
fn lent_key() -> String {
    format!("sk-ant-api03-lent-by-this-machine-{}", std::process::id())
}

/// The sshd scripts/test-ssh started: its folder (root's client key, the
/// known host key) and its port.
fn sshd() -> (PathBuf, String) {
    let get = |n: &str| {
        std::env::var(n).unwrap_or_else(|_| {
            panic!("{n} is not set: run the tests through scripts/test (scripts/test-ssh)")
        })
    };
    (
        PathBuf::from(get("SHROOMS_TEST_SSH_DIR")),
        get("SHROOMS_TEST_SSH_PORT"),
    )
}

/// This machine (root, rootful) and "the other machine" (the test user,
/// rootless, reached over ssh as `far`).
struct Two {
    here: World,
    far: World,
}

/// The ssh config root's CLI uses for `far`: the test sshd, the test
/// user, the far world's config and state.
fn ssh_config(here: &World, far: &World, host: &str, port: &str) -> PathBuf {
    let (dir, _) = sshd();
    let conf = std::env::var("CONTAINERS_CONF").unwrap();
    let mut set = format!(
        "SHROOMS_AGENT_CONFIG={} SHROOMS_AGENT_STATE_DIR={} CONTAINERS_CONF={conf}",
        far.config.display(),
        far.state.display()
    );
    for (k, v) in QUIET {
        set.push_str(&format!(" {k}={v}"));
    }
    here.file(
        &format!("ssh-{host}.conf"),
        &format!(
            "Host {host}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  IdentityFile {dir}/id_ed25519\n  \
             IdentitiesOnly yes\n  UserKnownHostsFile {dir}/known_hosts\n  StrictHostKeyChecking yes\n  \
             SetEnv {set}\n",
            user = test_user().name,
            dir = dir.display(),
        ),
    )
}

impl Two {
    /// `program` is what the far machine runs (the binary under test,
    /// unless a test puts another there); `far_extra` goes into the far
    /// world's config.
    fn new(program: &Path, far_extra: &str) -> Two {
        let here = World::new();
        let far = World::rootless();
        far.write_config(far_extra);
        let (_, port) = sshd();
        let conf = ssh_config(&here, &far, "far", &port);
        ssh_config(&here, &far, "gone", "9");
        here.write_config(&format!(
            "[ssh]\nfar = {{ destination = \"far\", program = \"{}\", ssh_config = \"{}\" }}\n",
            program.display(),
            conf.display()
        ));
        Two { here, far }
    }

    /// Root's CLI with `--on far`.
    fn on(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut all = vec!["--on", "far"];
        all.extend_from_slice(args);
        self.here.run_env(&all, env)
    }
}

/// The other machine holds the lent key nowhere: not in the far world's
/// files, the test user's home and runtime folder, any process's command
/// line (this machine's ssh included), or the test user's processes'
/// environments.
fn key_nowhere_there(far: &World) -> Result<(), String> {
    let key = lent_key();
    let uid = test_user().uid.to_string();
    let look = std::process::Command::new("grep")
        .args(["-rlsF", &key])
        .arg(&far.root)
        .arg(&test_user().home)
        .arg(format!("/run/user/{uid}"))
        .output()
        .unwrap();
    let files = String::from_utf8_lossy(&look.stdout).into_owned();
    if !files.is_empty() {
        return Err(format!("files there hold the key: {files}"));
    }
    let lines = cmdlines_containing(&key);
    if !lines.is_empty() {
        return Err(format!("command lines hold the key: {lines:?}"));
    }
    let in_env = std::process::Command::new("sh")
        .args([
            "-c",
            &format!(
                "for p in $(pgrep -u {uid}); do tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null; done | grep -c {key}"
            ),
        ])
        .output()
        .unwrap();
    let n = String::from_utf8_lossy(&in_env.stdout).trim().to_string();
    if n != "0" {
        return Err(format!(
            "{n} environment entries of the test user's processes hold the key"
        ));
    }
    Ok(())
}

/// The far world's own view of its session (its `cage ls`, run there).
fn far_row(far: &World, session: &str) -> Option<serde_json::Value> {
    far.ls_row(session)
}

/// Create, a real Claude Code turn through the far machine's gateway with
/// the key lent over the forwarded socket, exec, ls across machines,
/// limits, move, rm: all from root's CLI with `--on far`.
#[test]
fn on_another_machine_a_real_claude_turn_with_the_lent_key() {
    let (claude, image) = real_claude();
    let mock = Mock::start();
    let two = Two::new(
        &bin(),
        &format!(
            "[gateway]\nanthropic_url = \"{}\"\n[harness]\nclaude = \"{claude}\"\n",
            mock.url()
        ),
    );
    let name = two.far.session("far");
    let project = two.far.dir(&format!("projects/{name}"));
    let p = project.to_string_lossy().into_owned();

    two.on(
        &["cage", "create", &name, "--dir", &p, "--image", &image],
        &[],
    )
    .ok();
    // Made there, by the test user's podman: nothing here.
    assert!(two.far.record_path(&name).exists());
    assert!(!two.here.record_path(&name).exists());

    // The key is in root's environment here, and nowhere there.
    let mut env = QUIET.to_vec();
    let key = lent_key();
    env.push(("ANTHROPIC_API_KEY", &key));
    let turn = two
        .on(&["cage", "run", &name, "--", "-p", "say hi"], &env)
        .ok();
    assert!(
        turn.stdout().contains("hello from the mock"),
        "{}\n{}",
        turn.explain(),
        mock.explain()
    );
    let seen = mock.seen();
    assert!(!seen.is_empty());
    for s in &seen {
        assert_eq!(
            s.headers.get("x-api-key").map(String::as_str),
            Some(key.as_str()),
            "{s:?}"
        );
    }
    key_nowhere_there(&two.far).unwrap_or_else(|e| panic!("after the turn: {e}"));
    // And while a turn runs there (its gateway open, the lender here
    // answering): an exec that waits while the test looks.
    let child = two.here.spawn_env(
        &["--on", "far", "cage", "exec", &name, "--", "sleep", "600"],
        &env,
    );
    let container = two.far.container(&name);
    wait_until("the far exec runs", Duration::from_secs(60), || {
        two.far.container_state(&container).as_deref() == Some("running")
            && !cmdlines_containing("sleep 600").is_empty()
    });
    let during = key_nowhere_there(&two.far);
    let _ = std::process::Command::new("pkill")
        .args(["-x", "-P", &child.id().to_string(), "ssh"])
        .status();
    let _ = finish("the far exec", child);
    during.unwrap_or_else(|e| panic!("while a turn ran: {e}"));
    wait_until("the far cage stops", Duration::from_secs(30), || {
        two.far.container_state(&container).as_deref() != Some("running")
    });

    // exec, with its status passed through, on no terminal.
    let ex = two.on(
        &["cage", "exec", &name, "--", "sh", "-c", "pwd; exit 7"],
        &[],
    );
    assert_eq!(ex.code(), 7, "{}", ex.explain());
    assert_eq!(ex.stdout(), format!("{p}\n"), "{}", ex.explain());
    // A word with a quote, a space and a `$` arrives as it was.
    let word = "it's $HOME; `x`";
    let ex = two
        .on(&["cage", "exec", &name, "--", "echo", word], &[])
        .ok();
    assert_eq!(ex.stdout(), format!("{word}\n"));

    // ls across machines: this one's name and far, each with its sessions.
    let here_name = two.here.session("here");
    let here_dir = two.here.dir(&format!("projects/{here_name}"));
    two.here.create(&here_name, &here_dir, &[]);
    let all = two.here.run(&["cage", "ls", "--all"]).ok();
    let far_line = all
        .stdout()
        .lines()
        .find(|l| l.contains(&name))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(far_line.starts_with("far "), "{}", all.explain());
    assert!(all.stdout().starts_with("MACHINE "), "{}", all.explain());
    assert!(all.stdout().contains(&here_name), "{}", all.explain());
    let js = two.here.run(&["cage", "ls", "--all", "--json"]).ok().json();
    let machines = js["machines"].as_array().unwrap();
    assert_eq!(machines.len(), 2, "{js}");
    assert_eq!(machines[1]["machine"], "far");
    assert!(
        machines[1]["listing"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == name.as_str()),
        "{js}"
    );

    // limits (a token budget: the rootless podman here on cgroups v1
    // enforces no others), move, rm: done there.
    two.on(&["cage", "limits", &name, "--tokens", "500k"], &[])
        .ok();
    assert_eq!(two.far.record(&name)["tokens"]["budget"], 500_000);
    let shown = two.on(&["--json", "cage", "limits", &name], &[]).ok();
    assert!(shown.stdout().contains("500000"), "{}", shown.explain());
    let old = two.far.container(&name);
    two.on(&["cage", "move", &name], &[]).ok();
    assert_ne!(two.far.container(&name), old);
    two.on(&["cage", "rm", &name], &[]).ok();
    assert!(!two.far.record_path(&name).exists());
    assert!(far_row(&two.far, &name).is_none());
}

/// A machine that cannot be asked is named with why, and the others are
/// still listed; ssh's own failure (255) is told apart from the tool's.
#[test]
fn on_another_machine_an_unreachable_one_is_named() {
    let two = Two::new(&bin(), "");
    let gone = two.here.root.join("ssh-gone.conf");
    let far_conf = two.here.root.join("ssh-far.conf");
    two.here.write_config(&format!(
        "[ssh]\nfar = {{ destination = \"far\", program = \"{}\", ssh_config = \"{}\" }}\n\
         gone = {{ destination = \"gone\", ssh_config = \"{}\" }}\n",
        bin().display(),
        far_conf.display(),
        gone.display()
    ));
    let all = two.here.run(&["cage", "ls", "--all"]).code_is(1);
    assert!(
        all.stdout().contains("gone: not listed: ssh to gone"),
        "{}",
        all.explain()
    );
    let js = two
        .here
        .run(&["--json", "cage", "ls", "--all"])
        .code_is(1)
        .json();
    let m = js["machines"].as_array().unwrap();
    assert_eq!(m.len(), 3, "{js}");
    assert!(
        m.iter()
            .any(|x| x["machine"] == "far" && x["error"].is_null()),
        "{js}"
    );
    // A command there: 1 (the tool failed) for an ordinary one, 125 for
    // exec; each says ssh failed, and where.
    let mut args = vec!["--on", "gone", "cage", "show", "x"];
    let r = two.here.run(&args).code_is(1);
    assert!(
        r.stderr().contains("ssh to gone (gone) failed (exit 255"),
        "{}",
        r.explain()
    );
    args[3] = "exec";
    args.push("true");
    let r = two.here.run(&args).code_is(125);
    assert!(r.stderr().contains("ssh to gone"), "{}", r.explain());
    // A missing --dir there is refused, naming the machine.
    let r = two
        .on(
            &["cage", "create", "nodir", "--dir", "/nonexistent/project"],
            &[],
        )
        .code_is(2);
    assert!(r.stderr().contains("on far: "), "{}", r.explain());
    assert!(
        r.stderr().contains("/nonexistent/project"),
        "{}",
        r.explain()
    );
}

/// Another protocol at the far end is refused before any command runs
/// there, with how to update.
#[test]
fn on_another_machine_refuses_another_protocol() {
    let here = World::new();
    let fake = here.file(
        "fake-agent",
        "#!/bin/sh\nif [ \"$1\" = version ]; then\n  echo '{\"version\":\"9.9.9\",\"protocol\":99,\"machine\":\"x\",\"socket_dir\":\"/tmp\",\"remote_turns\":\"lent\"}'\n  exit 0\nfi\nexit 0\n",
    );
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let two = Two::new(&fake, "");
    let r = two.on(&["cage", "ls"], &[]).code_is(1);
    assert!(
        r.stderr().contains("version 9.9.9 (protocol 99)")
            && r.stderr().contains("cargo install --locked --path ."),
        "{}",
        r.explain()
    );
    drop(here);
}

/// The ssh process killed in the middle of a turn: the far turn sees its
/// line end, as a closed terminal, and stops its cage within seconds; the
/// session is not left busy.
#[test]
fn on_another_machine_a_killed_ssh_stops_the_cage() {
    let two = Two::new(&bin(), "");
    let name = two.far.session("farhup");
    let project = two.far.dir(&format!("projects/{name}"));
    two.on(
        &["cage", "create", &name, "--dir", &project.to_string_lossy()],
        &[],
    )
    .ok();
    let mut all = vec!["--on", "far", "cage", "exec", &name, "--", "sleep", "600"];
    let child = two.here.spawn_env(&all, &[]);
    let container = two.far.container(&name);
    wait_until("the far cage runs", Duration::from_secs(60), || {
        two.far.container_state(&container).as_deref() == Some("running")
    });
    // Its ssh: the child of root's shrooms-agent.
    let ssh = std::process::Command::new("pgrep")
        .args(["-P", &child.id().to_string(), "-x", "ssh"])
        .output()
        .unwrap();
    let ssh = String::from_utf8_lossy(&ssh.stdout).trim().to_string();
    assert!(!ssh.is_empty(), "no ssh under {}", child.id());
    let killed = Instant::now();
    assert!(
        std::process::Command::new("kill")
            .args(["-KILL", &ssh])
            .status()
            .unwrap()
            .success()
    );
    wait_until("the far cage stops", Duration::from_secs(20), || {
        two.far.container_state(&container).as_deref() != Some("running")
    });
    eprintln!("stopped {:?} after ssh was killed", killed.elapsed());
    let r = finish("the killed --on exec", child);
    assert_ne!(r.code(), 0, "{}", r.explain());
    // Not busy: another exec takes it at once.
    all.truncate(5);
    all.extend(["--", "true"]);
    two.here.run(&all).ok();
    // A terminal there only for a terminal here (ssh -t, else -T).
    let probe = "[ -t 0 ] && echo on-a-terminal || echo no-terminal";
    let t = two.here.run_on_terminal(
        &[
            "--on", "far", "cage", "exec", &name, "--", "sh", "-c", probe,
        ],
        "",
    );
    assert!(t.stdout().contains("on-a-terminal"), "{}", t.explain());
    let t = two
        .on(&["cage", "exec", &name, "--", "sh", "-c", probe], &[])
        .ok();
    assert_eq!(t.stdout(), "no-terminal\n", "{}", t.explain());
}

/// Any process of the far user can reach the key lender through the socket
/// the turn's ssh forwards there (docs/machines.md, "The key stays here"): one that
/// sends 100 MB without a line's end is cut off after a line's worth, and
/// this machine's process does not grow by what it sent (before, it read
/// the line whole: 400 MiB sent, 419 MB held). The turn's key is still
/// lent afterwards.
#[test]
fn on_another_machine_the_lender_reads_a_line_within_a_bound() {
    let mock = Mock::start();
    let two = Two::new(
        &bin(),
        &format!("[gateway]\nanthropic_url = \"{}\"\n", mock.url()),
    );
    let name = two.far.session("farflood");
    let project = two.far.dir(&format!("projects/{name}"));
    two.on(
        &["cage", "create", &name, "--dir", &project.to_string_lossy()],
        &[],
    )
    .ok();
    let go = project.join("go");
    let ask = format!(
        "while [ ! -e {} ]; do sleep 0.1; done; \
         wget -q -O - --header 'Content-Type: application/json' \
         --post-data '{{\"model\":\"m\",\"max_tokens\":9,\"messages\":[]}}' \
         \"$ANTHROPIC_BASE_URL/v1/messages\"",
        go.display()
    );
    let key = lent_key();
    // The socket ssh forwards into the test user's runtime folder: this
    // turn's is the one that was not there before.
    let runtime = PathBuf::from(format!("/run/user/{}", test_user().uid));
    let lent = || -> Vec<PathBuf> {
        std::fs::read_dir(&runtime)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.to_string_lossy().contains("shrooms-lent-"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let others = lent();
    let child = two.here.spawn_env(
        &["--on", "far", "cage", "exec", &name, "--", "sh", "-c", &ask],
        &[("ANTHROPIC_API_KEY", &key)],
    );
    let here = child.id();
    let mut socket = None;
    wait_until("the forwarded socket", Duration::from_secs(60), || {
        socket = lent().into_iter().find(|p| !others.contains(p));
        socket.is_some()
    });
    let socket = socket.unwrap();
    let peak = || crate::bounds::peak_kib(here).unwrap_or(0);
    let before = peak();
    let mut sent = 0usize;
    if let Ok(mut s) = std::os::unix::net::UnixStream::connect(&socket) {
        use std::io::Write;
        s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        while sent < 100 << 20 {
            match s.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
    }
    let after = peak();
    std::fs::write(&go, "").unwrap();
    two.far.chown_all();
    let run = finish("the far exec", child).ok();
    eprintln!("sent {sent} bytes; this machine's process peaked at {before} then {after} KiB");
    assert!(
        after < before + 32 * 1024,
        "this machine's process grew from {before} to {after} KiB when {sent} bytes came \
         without a line's end"
    );
    assert!(sent < 100 << 20, "the lender read all {sent} bytes");
    assert!(
        run.stdout().contains("hello from the mock"),
        "{}",
        run.explain()
    );
    assert_eq!(
        mock.seen()
            .last()
            .and_then(|s| s.headers.get("x-api-key").cloned())
            .as_deref(),
        Some(key.as_str()),
        "{}",
        mock.explain()
    );
}

/// A server whose config says `remote_turns = "own"` uses its own key for
/// a turn sent from another machine; without it, the key lent for the turn
/// (a model request made with busybox's wget from the cage there).
#[test]
fn on_another_machine_a_server_may_use_its_own_key() {
    let mock = Mock::start();
    let own = "sk-ant-api03-the-servers-own-key-51d0";
    let two = Two::new(&bin(), "");
    let key_file = two.far.file("own-key", own);
    let config = |extra: &str| {
        two.far.write_config(&format!(
            "[gateway]\nanthropic_url = \"{}\"\nkey_file = \"{}\"\n{extra}",
            mock.url(),
            key_file.display()
        ))
    };
    config("remote_turns = \"own\"\n");
    let name = two.far.session("farown");
    let project = two.far.dir(&format!("projects/{name}"));
    two.on(
        &["cage", "create", &name, "--dir", &project.to_string_lossy()],
        &[],
    )
    .ok();
    let ask = "wget -q -O - --header 'Content-Type: application/json' \
               --post-data '{\"model\":\"m\",\"max_tokens\":9,\"messages\":[]}' \
               \"$ANTHROPIC_BASE_URL/v1/messages\"";
    let key = lent_key();
    let env = [("ANTHROPIC_API_KEY", key.as_str())];
    let r = two
        .on(&["cage", "exec", &name, "--", "sh", "-c", ask], &env)
        .ok();
    assert!(
        r.stdout().contains("hello from the mock"),
        "{}",
        r.explain()
    );
    let keys = || -> Vec<String> {
        mock.seen()
            .iter()
            .map(|s| s.headers.get("x-api-key").cloned().unwrap_or_default())
            .collect()
    };
    assert_eq!(keys(), [own], "{}", mock.explain());
    // Lent, the default: [gateway] key_file there is not used.
    config("");
    let r = two
        .on(&["cage", "exec", &name, "--", "sh", "-c", ask], &env)
        .ok();
    assert!(
        r.stdout().contains("hello from the mock"),
        "{}",
        r.explain()
    );
    assert_eq!(keys(), [own, key.as_str()], "{}", mock.explain());
}
