//! End-to-end tests of sealed cages, against real podman, checked
//! from inside the cage: the internet and nothing local, its own login, no
//! user namespaces, its outbox, and the refusals that make nothing.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::*;

/// The token the tests give their machine.
const TOKEN: &str = "sk-ant-oat01-test-token-for-sealed-cages";

/// Write a 0600 token file in the world and return its path.
pub(crate) fn token_file(w: &World) -> PathBuf {
    let p = w.file("sealed-token", &format!("{TOKEN}\n"));
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// A sealed session of a world, made with the world's token.
fn sealed_session(w: &World, base: &str) -> (String, PathBuf) {
    let name = w.session(base);
    let project = w.dir(&format!("projects/{name}"));
    let token = token_file(w);
    w.create(
        &name,
        &project,
        &["--sealed", "--sealed-token", &token.to_string_lossy()],
    );
    (name, project)
}

/// The internet answers, the host's private address and the agent port do
/// not, the cage's own loopback does, and root inside cannot change the
/// network ("the internet and nothing local ... root inside cannot
/// remove it").
#[test]
fn sealed_cage_reaches_the_internet_and_nothing_local() {
    let mut w = World::new();
    let public = Listener::any();
    let private = Listener::any();
    let agent = Listener::any();
    w.agent_port = agent.port;
    w.write_config("");
    let (name, _) = sealed_session(&w, "net");

    // The same host listeners from an ordinary cage: all reachable but the
    // agent port, so the refusals below are the sealed rules' doing.
    let ordinary = w.session("plain");
    let plain_dir = w.dir("plain");
    w.create(&ordinary, &plain_dir, &["--net", "open"]);
    let seen = w
        .sh(
            &ordinary,
            &format!(
                "{}; {}",
                nc_probe(HOST_ADDR, public.port),
                nc_probe(LAN_ADDR, private.port)
            ),
        )
        .ok()
        .stdout();
    assert!(
        seen.contains(&format!("CONNECTED-{}", public.port)),
        "{seen}"
    );
    assert!(
        seen.contains(&format!("CONNECTED-{}", private.port)),
        "{seen}"
    );

    let script = format!(
        "{}; {}; {}; {}; \
         nc -ll -p 8089 -e /bin/echo hi & \
         i=0; until nc -w 3 127.0.0.1 8089 </dev/null >/dev/null 2>&1 || [ $i -ge 50 ]; do \
         sleep 0.2; i=$((i+1)); done; {}; \
         ip addr add 10.9.9.9/32 dev lo 2>/dev/null && echo IP-CHANGED || echo IP-REFUSED; \
         ip link set lo down 2>/dev/null && echo LINK-CHANGED || echo LINK-REFUSED",
        nc_probe(HOST_ADDR, public.port),
        nc_probe(LAN_ADDR, private.port),
        nc_probe(HOST_ADDR, agent.port),
        nc_probe(LAN_ADDR, agent.port),
        nc_probe("127.0.0.1", 8089),
    );
    let out = w.sh(&name, &script).ok().stdout();
    assert!(
        out.contains(&format!("CONNECTED-{}", public.port)),
        "the internet: {out}"
    );
    assert!(
        out.contains(&format!("REFUSED-{}", private.port)),
        "a private address of the host: {out}"
    );
    assert!(
        !out.contains(&format!("CONNECTED-{}", agent.port)),
        "the agent port: {out}"
    );
    assert!(out.contains("CONNECTED-8089"), "its own loopback: {out}");
    assert!(out.contains("IP-REFUSED"), "{out}");
    assert!(out.contains("LINK-REFUSED"), "{out}");
}

/// DNS goes to the public resolvers only: they are in resolv.conf, and port
/// 53 of any other address, public or not, is refused.
#[test]
fn sealed_dns_goes_only_to_its_resolvers() {
    let w = World::new();
    // A "DNS server" on a public-range address of the host that is not one
    // of the cage's resolvers.
    let dns_port = 53;
    crate::netpolicy::dns_listener();
    let (name, _) = sealed_session(&w, "dns");
    let ordinary = w.session("plaindns");
    let d = w.dir("plaindns");
    w.create(&ordinary, &d, &["--net", "open"]);
    let plain = w
        .sh(&ordinary, &nc_probe(HOST_ADDR, dns_port))
        .ok()
        .stdout();
    assert!(plain.contains("CONNECTED-53"), "{plain}");

    let out = w
        .sh(
            &name,
            &format!("cat /etc/resolv.conf; {}", nc_probe(HOST_ADDR, dns_port)),
        )
        .ok()
        .stdout();
    assert!(out.contains("nameserver 1.1.1.1"), "{out}");
    assert!(out.contains("nameserver 9.9.9.9"), "{out}");
    assert!(out.contains("REFUSED-53"), "{out}");
}

/// No user namespaces in a sealed cage; an ordinary cage has them; ordinary
/// programs, fork and threads still work in the sealed one.
#[test]
fn no_user_namespaces_in_a_sealed_cage() {
    let w = World::new();
    let (name, _) = sealed_session(&w, "userns");
    let ordinary = w.session("plainns");
    let d = w.dir("plainns");
    w.create(&ordinary, &d, &[]);
    let probe = "unshare -U true && echo USERNS-OK || echo USERNS-REFUSED";
    let plain = w.sh(&ordinary, probe).ok().stdout();
    assert!(plain.contains("USERNS-OK"), "ordinary cage: {plain}");
    let sealed = w
        .sh(
            &name,
            &format!(
                "{probe}; (echo forked) & wait; sh -c 'echo child'; ls / >/dev/null && echo LS-OK"
            ),
        )
        .ok()
        .stdout();
    assert!(sealed.contains("USERNS-REFUSED"), "sealed cage: {sealed}");
    assert!(
        sealed.contains("forked") && sealed.contains("child") && sealed.contains("LS-OK"),
        "{sealed}"
    );
    // The profile the record names is the one podman was given.
    let rec = w.record(&name);
    let profile = rec["cage"]["sealed"]["seccomp_file"].as_str().unwrap();
    let text = fs::read_to_string(profile).unwrap();
    assert!(text.contains("CLONE_NEWUSER"), "{profile}");
    assert_eq!(mode_of(Path::new(profile)), 0o600);
}

/// Its own login and nothing else: the token from the token file, none of
/// the invoking environment (not even pass_env), none of the user's
/// ~/.claude.
#[test]
fn sealed_environment_is_its_own_login_only() {
    let w = World::new();
    w.write_config("pass_env = [\"MY_CHOSEN\"]");
    fs::create_dir_all(w.home.join(".claude")).unwrap();
    fs::write(w.home.join(".claude/settings.json"), "{\"mine\": true}").unwrap();
    let (name, _) = sealed_session(&w, "env");
    let out = w
        .run_env(
            &[
                "cage",
                "exec",
                &name,
                "--",
                "sh",
                "-c",
                "env; echo HOME-IS=$HOME; ls -a /root/.claude; \
                 ls $HOME/.claude/settings.json 2>&1; cat /root/.claude/settings.json 2>&1; \
                 test -d /outbox && echo OUTBOX-THERE",
            ],
            &[
                ("FOO_API_KEY", "foo-secret-value"),
                ("MY_CHOSEN", "chosen-value"),
            ],
        )
        .ok()
        .stdout();
    // Its login stays outside: the model gateway adds it on the way out
    // (tests/it/gateway.rs shows it reaching the upstream).
    assert!(!out.contains(TOKEN), "{out}");
    assert!(!out.contains("CLAUDE_CODE_OAUTH_TOKEN"), "{out}");
    assert!(
        out.contains("ANTHROPIC_BASE_URL=http://127.0.0.1:"),
        "{out}"
    );
    assert!(out.contains("CLAUDE_CONFIG_DIR=/root/.claude"), "{out}");
    assert!(out.contains("HOME-IS=/root"), "{out}");
    assert!(out.contains("SHROOMS_OUTBOX=/outbox"), "{out}");
    assert!(out.contains("IS_SANDBOX=1"), "{out}");
    assert!(out.contains("LANG=C.UTF-8"), "{out}");
    assert!(out.contains("OUTBOX-THERE"), "{out}");
    assert!(!out.contains("foo-secret-value"), "{out}");
    assert!(!out.contains("chosen-value"), "{out}");
    assert!(!out.contains("\"mine\""), "{out}");
    // The user's home is not there at all.
    let home_probe = w
        .sh(
            &name,
            &format!("ls {} 2>&1 || echo NO-HOME", w.home.display()),
        )
        .ok()
        .stdout();
    assert!(home_probe.contains("NO-HOME"), "{home_probe}");
}

/// The marks: a label, `sealed` in ls and show, and the record of the rules
/// and profile it was made with.
#[test]
fn sealed_cages_are_marked() {
    let w = World::new();
    let (name, _) = sealed_session(&w, "mark");
    let container = w.container(&name);
    let out = w.podman(&[
        "inspect",
        "--format",
        "{{index .Config.Labels \"xyz.vpavlin.shrooms.sealed\"}}",
        &container,
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "true");
    let row = w.ls_row(&name).unwrap();
    assert_eq!(row["sealed"], true);
    let text = w.run(&["cage", "ls"]).ok().stdout();
    assert!(
        text.lines()
            .any(|l| l.contains(&name) && l.contains("sealed")),
        "{text}"
    );
    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(show["cage"]["sealed"]["rules"], "shrooms_sealed v3");
    assert_eq!(show["cage"]["sealed"]["dns"][0], "1.1.1.1");
    assert!(show["cage"]["sealed"]["seccomp"].as_str().unwrap().len() == 12);
    let show_text = w.run(&["cage", "show", &name]).ok().stdout();
    assert!(show_text.contains("sealed    yes"), "{show_text}");
}

/// The outbox: made at creation, 0700, with its README; what the cage
/// writes to /outbox lands there and packs; only its own uploads are seen.
#[test]
fn the_outbox_and_its_own_uploads() {
    let w = World::new();
    let (name, _) = sealed_session(&w, "outbox");
    let outbox = w.home.join("shrooms-outbox").join(&name);
    assert_eq!(mode_of(&outbox), 0o700);
    let readme = fs::read_to_string(outbox.join("README-UNTRUSTED.txt")).unwrap();
    assert!(readme.to_lowercase().contains("untrusted"), "{readme}");
    // Another session's uploads must not be visible.
    let other_uploads = w.state.join("uploads").join("someone-else");
    fs::create_dir_all(&other_uploads).unwrap();
    fs::write(other_uploads.join("theirs.txt"), "theirs").unwrap();
    let own = w.state.join("uploads").join(&name);
    let out = w
        .sh(
            &name,
            &format!(
                "mkdir -p /outbox/review && echo 'looks fine' > /outbox/review/notes.md; \
                 ls {} 2>&1 || true; ls {} >/dev/null 2>&1 && echo OWN-UPLOADS",
                other_uploads.display(),
                own.display()
            ),
        )
        .ok()
        .stdout();
    assert!(!out.contains("theirs.txt"), "{out}");
    assert!(out.contains("OWN-UPLOADS"), "{out}");
    assert_eq!(
        fs::read_to_string(outbox.join("review/notes.md")).unwrap(),
        "looks fine\n"
    );
    let archive = w.root.join("out.tar.gz");
    let packed = w
        .run(&[
            "outbox",
            "pack",
            &name,
            "-o",
            &archive.to_string_lossy(),
            "--json",
        ])
        .ok()
        .json();
    assert!(packed["files"].as_u64().unwrap() >= 1, "{packed}");
    let list = std::process::Command::new("tar")
        .args(["-tzf", &archive.to_string_lossy()])
        .output()
        .unwrap();
    let names = String::from_utf8_lossy(&list.stdout);
    assert!(names.contains("review/notes.md"), "{names}");
    assert!(names.contains("README-UNTRUSTED.txt"), "{names}");
    // An ordinary session has no outbox.
    let plain = w.session("plainbox");
    let d = w.dir("plainbox");
    w.create(&plain, &d, &[]);
    let r = w.run(&["outbox", "pack", &plain, "-o", &archive.to_string_lossy()]);
    let r = r.code_is(2);
    assert!(r.stderr().contains("not sealed"), "{}", r.explain());
}

/// Refusals: each exits 2 and makes nothing (no container, no record).
#[test]
fn sealed_refusals_make_nothing() {
    let w = World::new();
    let token = token_file(&w);
    let tok = token.to_string_lossy().into_owned();
    let project = w.dir("proj");
    let with_ssh = w.dir("withssh/.ssh").parent().unwrap().to_path_buf();
    let link_to_home = w.root.join("link-to-home");
    std::os::unix::fs::symlink(&w.home, &link_to_home).unwrap();
    let loose = w.file("loose-token", TOKEN);
    fs::set_permissions(&loose, fs::Permissions::from_mode(0o640)).unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                w.home.to_string_lossy().into(),
                "--sealed-token".into(),
                tok.clone(),
            ],
            "home directory",
        ),
        (
            vec!["/".into(), "--sealed-token".into(), tok.clone()],
            "holds your home",
        ),
        (
            vec![
                with_ssh.to_string_lossy().into(),
                "--sealed-token".into(),
                tok.clone(),
            ],
            ".ssh",
        ),
        (
            vec![
                link_to_home.to_string_lossy().into(),
                "--sealed-token".into(),
                tok.clone(),
            ],
            "home directory",
        ),
        (
            vec![
                project.to_string_lossy().into(),
                "--sealed-token".into(),
                tok.clone(),
                "--harness".into(),
                "pi".into(),
            ],
            "Claude Code only",
        ),
        (
            vec![
                project.to_string_lossy().into(),
                "--sealed-token".into(),
                loose.to_string_lossy().into(),
            ],
            "chmod 600",
        ),
        (
            vec![
                project.to_string_lossy().into(),
                "--sealed-token".into(),
                w.root.join("no-such-token").to_string_lossy().into(),
            ],
            "claude setup-token",
        ),
        // No flag and no config: the state folder's sealed-claude-token, absent.
        (
            vec![project.to_string_lossy().into()],
            "sealed-claude-token",
        ),
    ];
    for (args, says) in cases {
        let name = w.session("refused");
        let mut all: Vec<&str> = vec!["cage", "create", &name, "--sealed", "--dir"];
        all.extend(args.iter().map(String::as_str));
        let r = w.run(&all).code_is(2);
        assert!(
            r.stderr().contains(says),
            "expected {says:?}:\n{}",
            r.explain()
        );
        assert!(w.containers_of(&name).is_empty(), "{}", r.explain());
        assert!(!w.record_path(&name).exists(), "{}", r.explain());
    }
}

/// The default token location works once the token is there (docs/sealed.md,
/// "Sealed cages"): a turn starts, and the token stays outside the cage
/// (tests/it/gateway.rs shows the gateway adding it).
#[test]
fn the_machines_token_in_the_state_folder() {
    let w = World::new();
    fs::create_dir_all(&w.state).unwrap();
    let p = w.state.join("sealed-claude-token");
    fs::write(&p, "state-folder-token\n").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    let name = w.session("deftoken");
    let d = w.dir("deftoken");
    w.create(&name, &d, &["--sealed"]);
    let out = w.sh(&name, "echo T=$CLAUDE_CODE_OAUTH_TOKEN").ok().stdout();
    assert!(out.contains("T=\n"), "{out}");
}

/// Rootless too: the sealed rules go in through `podman unshare`, the
/// internet answers and a private address of the host does not, while an
/// ordinary rootless cage reaches it.
#[test]
fn sealed_cage_rootless() {
    let w = World::rootless();
    let public = Listener::any();
    let (name, _) = sealed_session(&w, "rootless");
    let ordinary = w.session("plainrl");
    let d = w.dir("plainrl");
    w.create(&ordinary, &d, &["--net", "open"]);
    let plain = w
        .sh(&ordinary, &nc_probe(LAN_ADDR, public.port))
        .ok()
        .stdout();
    assert!(
        plain.contains(&format!("CONNECTED-{}", public.port)),
        "{plain}"
    );
    let out = w
        .sh(
            &name,
            &format!(
                "{}; {}; unshare -U true && echo USERNS-OK || echo USERNS-REFUSED",
                nc_probe(HOST_ADDR, public.port),
                nc_probe(LAN_ADDR, public.port)
            ),
        )
        .ok()
        .stdout();
    assert!(out.contains(&format!("CONNECTED-{}", public.port)), "{out}");
    assert!(out.contains(&format!("REFUSED-{}", public.port)), "{out}");
    assert!(out.contains("USERNS-REFUSED"), "{out}");
}

/// Its conversation only: `--conversation ID` copies that transcript and
/// the folder beside it into the sealed config folder, and no other.
#[test]
fn a_sealed_cage_gets_its_own_conversation_only() {
    let w = World::new();
    let name = w.session("conv");
    let project = w.dir(&format!("projects/{name}"));
    let folder = claude_folder(&project);
    let host_conv = w.home.join(".claude/projects").join(&folder);
    fs::create_dir_all(host_conv.join("abc-123/subagents")).unwrap();
    fs::write(host_conv.join("abc-123.jsonl"), "{\"mine\":1}\n").unwrap();
    fs::write(host_conv.join("abc-123/subagents/agent-a.jsonl"), "sub\n").unwrap();
    fs::write(host_conv.join("other-456.jsonl"), "{\"other\":1}\n").unwrap();
    let token = token_file(&w);
    let tok = token.to_string_lossy().into_owned();
    let p = project.to_string_lossy().into_owned();
    // A wrong id makes nothing.
    let bad = w.session("convbad");
    w.run(&[
        "cage",
        "create",
        &bad,
        "--dir",
        &p,
        "--sealed",
        "--sealed-token",
        &tok,
        "--conversation",
        "nope",
    ])
    .code_is(2);
    assert!(w.containers_of(&bad).is_empty());
    w.create(
        &name,
        &project,
        &[
            "--sealed",
            "--sealed-token",
            &tok,
            "--conversation",
            "abc-123",
        ],
    );
    let inside = format!("/root/.claude/projects/{folder}");
    let out = w
        .sh(
            &name,
            &format!(
                "cat {inside}/abc-123.jsonl {inside}/abc-123/subagents/agent-a.jsonl; ls {inside}"
            ),
        )
        .ok()
        .stdout();
    assert!(out.contains("{\"mine\":1}") && out.contains("sub"), "{out}");
    assert!(!out.contains("other-456"), "{out}");
}

/// Over HTTP too: a move into a sealed cage carries the conversation to
/// keep (`"conversation"`, as `--conversation`), on the machine's token;
/// an id that is a path, or one for a cage that is not sealed, is refused
/// and changes nothing.
#[test]
fn a_move_over_http_into_a_sealed_cage_carries_its_conversation() {
    let w = World::new();
    let token = token_file(&w);
    w.write_config(&format!("sealed_token = \"{}\"", token.display()));
    let name = w.session("httpseal");
    let project = w.dir(&format!("projects/{name}"));
    let folder = claude_folder(&project);
    w.create(&name, &project, &[]);
    let host_conv = w.home.join(".claude/projects").join(&folder);
    fs::create_dir_all(&host_conv).unwrap();
    fs::write(host_conv.join("conv-1.jsonl"), "{\"turn\":1}\n").unwrap();
    fs::write(host_conv.join("conv-2.jsonl"), "other\n").unwrap();
    let s = w.serve(&[], &[]);
    let url = format!("{}/v1/sessions/{name}/cage", s.url);
    let before = w.record(&name);
    for (body, says) in [
        (
            r#"{"cage": {"sealed": true, "conversation": "../../.ssh/id"}}"#,
            "not a conversation id",
        ),
        (
            r#"{"cage": {"conversation": "conv-1"}}"#,
            "for a sealed cage",
        ),
        (
            r#"{"cage": {"sealed": true, "conversation": "nope"}}"#,
            "no conversation",
        ),
    ] {
        let r = post(&url, body).is(400);
        assert!(r.error().contains(says), "{body}: {r:#?}");
    }
    assert_eq!(w.record(&name), before);
    let moved = post(
        &url,
        r#"{"cage": {"sealed": true, "conversation": "conv-1"}}"#,
    )
    .is(200)
    .json();
    assert!(moved["cage"]["sealed"].is_object(), "{moved:#}");
    let out = w
        .sh(
            &name,
            &format!("ls /root/.claude/projects/{folder}; cat /root/.claude/projects/{folder}/conv-1.jsonl"),
        )
        .ok()
        .stdout();
    assert!(out.contains("{\"turn\":1}"), "{out}");
    assert!(!out.contains("conv-2"), "{out}");
}

/// A session moved into a sealed cage (the same spec as `create --sealed`)
/// keeps its conversation, and nothing else of the user's comes along.
#[test]
fn moving_a_session_into_a_sealed_cage() {
    let w = World::new();
    let name = w.session("mvseal");
    let project = w.dir(&format!("projects/{name}"));
    let folder = claude_folder(&project);
    w.create(&name, &project, &[]);
    // The ordinary cage writes its conversation into the user's folder.
    w.sh(
        &name,
        &format!("echo '{{\"turn\":1}}' > $HOME/.claude/projects/{folder}/conv-1.jsonl"),
    )
    .ok();
    let host_conv = w.home.join(".claude/projects").join(&folder);
    assert!(host_conv.join("conv-1.jsonl").exists());
    fs::write(host_conv.join("conv-2.jsonl"), "other\n").unwrap();
    let token = token_file(&w);
    w.run(&[
        "cage",
        "move",
        &name,
        "--sealed",
        "--sealed-token",
        &token.to_string_lossy(),
        "--conversation",
        "conv-1",
    ])
    .ok();
    assert!(w.record(&name)["cage"]["sealed"].is_object());
    let out = w
        .sh(
            &name,
            &format!("echo HOME=$HOME; ls /root/.claude/projects/{folder}; cat /root/.claude/projects/{folder}/conv-1.jsonl"),
        )
        .ok()
        .stdout();
    assert!(out.contains("HOME=/root"), "{out}");
    assert!(out.contains("{\"turn\":1}"), "{out}");
    assert!(!out.contains("conv-2"), "{out}");
}

/// The machine's own networks are local too, whatever their prefix: an
/// address of the host on a non-loopback interface with a non-private
/// prefix (198.51.100.1/24 on shr-lan0, like a LAN's global IPv6 /64), a
/// network reached by a route of the main table, and one reached by a
/// route of a table of its own (a VPN's) are reachable from an ordinary
/// cage and refused from a sealed one, rootful and rootless.
#[test]
fn the_machines_own_networks_are_refused() {
    for w in [World::new(), World::rootless()] {
        let own = Listener::any();
        let ordinary = w.session("ownnet");
        let d = w.dir("ownnet");
        w.create(&ordinary, &d, &["--net", "open"]);
        crate::attacks::all_on_this_machine(&[LINK_ADDR]);
        // An interface's network, a network reached by a route only, and
        // one reached by a route of another table than the main one.
        let probes = format!(
            "{}; {}; {}",
            nc_probe(LINK_ADDR, own.port),
            nc_probe(ROUTED_ADDR, own.port),
            nc_probe(TABLE_ADDR, own.port)
        );
        let plain = w.sh(&ordinary, &probes).ok().stdout();
        assert_eq!(
            plain.matches(&format!("CONNECTED-{}", own.port)).count(),
            3,
            "ordinary cage (run scripts/setup-host, which adds the routes): {plain}"
        );
        let (name, _) = sealed_session(&w, "ownnets");
        let out = w.sh(&name, &probes).ok().stdout();
        assert_eq!(
            out.matches(&format!("REFUSED-{}", own.port)).count(),
            3,
            "sealed cage: {out}"
        );
    }
}

/// A sealed session is not taken out of its seal by accident ("After
/// a sealed session"): moving it out, or into an ordinary cage, is refused
/// without --unseal and changes nothing; with it, it is done.
#[test]
fn a_sealed_session_leaves_its_seal_only_with_unseal() {
    let w = World::new();
    let (name, _) = sealed_session(&w, "unseal");
    let container = w.container(&name);
    for args in [vec!["--out"], vec!["--github"], vec![]] {
        let mut all = vec!["cage", "move", name.as_str()];
        all.extend(args.iter().copied());
        let r = w.run(&all).code_is(2);
        assert!(r.stderr().contains("--unseal"), "{}", r.explain());
        assert_eq!(w.container(&name), container);
    }
    w.run(&["cage", "move", &name, "--out", "--unseal"]).ok();
    assert!(w.record(&name)["cage"].is_null());
}

/// No cage, sealed or not, is given a folder that holds what cages keep out
/// (a harness's folder, keys, the outboxes, the config folder), a project
/// holding the config that a link leads to, or an outbox that is a link:
/// each is refused (exit 2), nothing is made, and the link's target is
/// left as it was (a review planted `~/shrooms-outbox/<session>` as a link
/// to a secret folder, and the sealed cage got it read-write at /outbox).
#[test]
fn no_cage_is_given_what_cages_keep_out() {
    let w = World::new();
    let token = token_file(&w);
    let tok = token.to_string_lossy().into_owned();
    let conversations = w.dir_in_home(".claude/projects");
    let dotfiles = w.dir_in_home("dotfiles");
    fs::write(dotfiles.join("config.toml"), fs::read(&w.config).unwrap()).unwrap();
    let linked_config = w.root.join("linked-config.toml");
    std::os::unix::fs::symlink(dotfiles.join("config.toml"), &linked_config).unwrap();
    let outbox_dir = w.dir_in_home("shrooms-outbox/x");
    for (dir, extra, env, says) in [
        (&conversations, vec![], None, ".claude"),
        (&outbox_dir, vec![], None, "outboxes"),
        (&dotfiles, vec![], Some(linked_config.clone()), "where"),
        (
            &conversations,
            vec!["--sealed", "--sealed-token", &tok],
            None,
            ".claude",
        ),
    ] {
        let name = w.session("kept");
        let d = dir.to_string_lossy().into_owned();
        let mut args = vec!["cage", "create", &name, "--dir", &d];
        args.extend(extra.iter().copied());
        let config = env.as_ref().map(|c| c.to_string_lossy().into_owned());
        let env: Vec<(&str, &str)> = config
            .as_deref()
            .map(|c| vec![("SHROOMS_AGENT_CONFIG", c)])
            .unwrap_or_default();
        let r = w.run_env(&args, &env).code_is(2);
        assert!(
            r.stderr().contains(says),
            "expected {says:?}:\n{}",
            r.explain()
        );
        assert!(w.containers_of(&name).is_empty(), "{}", r.explain());
        assert!(!w.record_path(&name).exists(), "{}", r.explain());
    }

    // The outbox a link to a secret folder: refused, the folder untouched.
    let secret = w.dir("secret");
    fs::write(secret.join("id_key"), "key").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o755)).unwrap();
    let name = w.session("linked");
    std::os::unix::fs::symlink(&secret, w.home.join("shrooms-outbox").join(&name)).unwrap();
    let project = w.dir("proj");
    let r = w
        .run(&[
            "cage",
            "create",
            &name,
            "--dir",
            &project.to_string_lossy(),
            "--sealed",
            "--sealed-token",
            &tok,
        ])
        .code_is(2);
    assert!(r.stderr().contains("is a link"), "{}", r.explain());
    assert!(w.containers_of(&name).is_empty(), "{}", r.explain());
    assert!(!w.record_path(&name).exists(), "{}", r.explain());
    let mode = fs::metadata(&secret).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755, "the link's target was changed");
    let names: Vec<_> = fs::read_dir(&secret)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("id_key")]);
}

/// After a sealed session its folder is untrusted ("After a sealed
/// session"), whatever becomes of the session: removing it and making an
/// ordinary cage on the folder, inside it or above it is refused (exit 2,
/// nothing made) from the CLI and over HTTP, until `--unseal` says the
/// owner trusts it; a folder deleted and cloned again is a new folder.
#[test]
fn a_sealed_sessions_folder_stays_untrusted_after_it() {
    let w = World::new();
    let (name, project) = sealed_session(&w, "taint");
    let project = fs::canonicalize(&project).unwrap();
    w.run(&["cage", "rm", &name]).ok();
    let inside = project.join("sub");
    fs::create_dir(&inside).unwrap();
    for dir in [&project, &inside] {
        let again = w.session("again");
        let r = w
            .run(&["cage", "create", &again, "--dir", &dir.to_string_lossy()])
            .code_is(2);
        assert!(r.stderr().contains("untrusted"), "{}", r.explain());
        assert!(r.stderr().contains(&name), "{}", r.explain());
        assert!(w.containers_of(&again).is_empty(), "{}", r.explain());
        assert!(!w.record_path(&again).exists(), "{}", r.explain());
    }
    // Over HTTP: refused, and there is no --unseal.
    let s = w.serve(&[], &[]);
    let again = w.session("http");
    let r = post(
        &format!("{}/v1/sessions", s.url),
        &format!(
            r#"{{"name": "{again}", "dir": "{}", "cage": {{}}}}"#,
            project.display()
        ),
    )
    .is(400);
    assert!(r.error().contains("untrusted"), "{r:#?}");
    // The way past it is the owner's, at the machine: said as such.
    assert!(
        r.error()
            .contains("pass `--unseal` (on the command line, at the machine)"),
        "{r:#?}"
    );
    drop(s);
    assert!(!w.record_path(&again).exists());
    // Another sealed cage there is fine: it is sealed.
    let token = token_file(&w);
    let resealed = w.session("resealed");
    w.create(
        &resealed,
        &project,
        &["--sealed", "--sealed-token", &token.to_string_lossy()],
    );
    w.run(&["cage", "rm", &resealed]).ok();
    // --unseal on a folder inside it trusts that folder, not the one above.
    let inside_ok = w.session("inside");
    w.create(&inside_ok, &inside, &["--unseal"]);
    w.run(&["cage", "rm", &inside_ok]).ok();
    let above = w.session("above");
    let r = w
        .run(&[
            "cage",
            "create",
            &above,
            "--dir",
            &project.to_string_lossy(),
        ])
        .code_is(2);
    assert!(r.stderr().contains("untrusted"), "{}", r.explain());
    // --unseal: the owner's decision; then the folder is trusted again.
    let unsealed = w.session("unsealed");
    w.create(&unsealed, &project, &["--unseal"]);
    w.run(&["cage", "rm", &unsealed]).ok();
    let after = w.session("after");
    w.create(&after, &project, &[]);
    w.run(&["cage", "rm", &after]).ok();

    // No seal is shared: a sealed cage where an ordinary session works,
    // or an ordinary cage (even with --unseal) where a sealed one works.
    let shared = w.dir("shared-folder");
    let plain = w.session("plain");
    w.create(&plain, &shared, &[]);
    let review = w.session("review");
    let r = w
        .run(&[
            "cage",
            "create",
            &review,
            "--dir",
            &shared.to_string_lossy(),
            "--sealed",
            "--sealed-token",
            &token.to_string_lossy(),
        ])
        .code_is(2);
    assert!(r.stderr().contains(&plain), "{}", r.explain());
    assert!(!w.record_path(&review).exists(), "{}", r.explain());
    w.run(&["cage", "rm", &plain]).ok();
    w.create(
        &review,
        &shared,
        &["--sealed", "--sealed-token", &token.to_string_lossy()],
    );
    let beside = w.session("beside");
    let r = w
        .run(&[
            "cage",
            "create",
            &beside,
            "--dir",
            &shared.to_string_lossy(),
            "--unseal",
        ])
        .code_is(2);
    assert!(
        r.stderr().contains(&review) && r.stderr().contains("sealed"),
        "{}",
        r.explain()
    );
    assert!(!w.record_path(&beside).exists(), "{}", r.explain());

    // Renamed after the review: still the same folder, still untrusted.
    let (name, project) = sealed_session(&w, "renamed");
    w.run(&["cage", "rm", &name]).ok();
    let reviewed = project.with_file_name(format!("{name}-reviewed"));
    fs::rename(&project, &reviewed).unwrap();
    let after_rename = w.session("afterrename");
    let r = w
        .run(&[
            "cage",
            "create",
            &after_rename,
            "--dir",
            &reviewed.to_string_lossy(),
        ])
        .code_is(2);
    assert!(r.stderr().contains("untrusted"), "{}", r.explain());
    assert!(r.stderr().contains("-reviewed"), "{}", r.explain());

    // Cloned again: a new folder at the same path is trusted.
    let (name, project) = sealed_session(&w, "reclone");
    w.run(&["cage", "rm", &name]).ok();
    fs::remove_dir_all(&project).unwrap();
    fs::create_dir(&project).unwrap();
    let fresh = w.session("fresh");
    w.create(&fresh, &project, &[]);
}

/// `outbox pack -o FILE` writes a new file, or over a regular file with
/// --force; it never replaces a FIFO, a folder or a link (`-o /dev/full`
/// replaced the device), nor writes into the outbox it packs. Each refusal
/// exits 2 and leaves what is there as it was.
#[test]
fn outbox_pack_writes_only_where_it_may() {
    let w = World::new();
    let (name, _) = sealed_session(&w, "packto");
    let outbox = PathBuf::from(
        w.record(&name)["cage"]["sealed"]["outbox"]
            .as_str()
            .unwrap(),
    );
    fs::write(outbox.join("findings.md"), "ok\n").unwrap();
    let pack = |out: &Path, extra: &[&str]| {
        let o = out.to_string_lossy().into_owned();
        let mut args = vec!["outbox", "pack", name.as_str(), "-o", &o];
        args.extend_from_slice(extra);
        w.run(&args)
    };
    let archive = w.root.join("review.tar.gz");
    fs::write(&archive, "mine").unwrap();
    let r = pack(&archive, &[]).code_is(2);
    assert!(
        r.stderr().contains(&format!(
            "{} exists; pass --force to replace it",
            archive.display()
        )),
        "{}",
        r.explain()
    );
    assert_eq!(fs::read(&archive).unwrap(), b"mine");
    pack(&archive, &["--force"]).ok();
    assert_ne!(fs::read(&archive).unwrap(), b"mine");

    let fifo = w.root.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let folder = w.dir("a-folder");
    for (target, what) in [(&fifo, "a FIFO"), (&folder, "a folder")] {
        let r = pack(target, &["--force"]).code_is(2);
        assert!(
            r.stderr().contains(&format!(
                "{} is {what}, not a regular file",
                target.display()
            )),
            "{}",
            r.explain()
        );
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(folder.is_dir());

    let inside = outbox.join("self.tar.gz");
    let r = pack(&inside, &[]).code_is(2);
    assert!(
        r.stderr().contains("is inside the outbox being packed"),
        "{}",
        r.explain()
    );
    assert!(!inside.exists());
}
