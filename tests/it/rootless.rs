//! End-to-end tests as an unprivileged user with rootless podman, as cages
//! are meant to run. Every command here runs as the test user through
//! `World::rootless()`; this machine has cgroups v1, where rootless podman
//! ignores limits, so the world's config says `unenforced_limits = "warn"`
//! unless a test rewrites it.

use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::thread;

use crate::common::*;

/// Rewrite the world's config without `unenforced_limits = "warn"`, so the
/// default policy (refuse) applies.
fn config_without_warn(w: &World) {
    w.write_config("");
    let text = fs::read_to_string(&w.config).unwrap();
    assert!(text.contains("unenforced_limits = \"warn\""), "{text}");
    let kept: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("unenforced_limits"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&w.config, kept).unwrap();
    w.chown_all();
}

/// A host listener on a port the kernel picks and that stays bound from
/// the start (`Listener::any` frees its port for a moment, so tests running
/// in parallel could take the same one).
fn listen() -> Listener {
    let l = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let _ = s.write_all(b"hello\n");
        }
    });
    Listener { port }
}

/// A listener on the host standing for the agent, whose port becomes this
/// world's `agent_port` (config rewritten).
fn agent_listener(w: &mut World) -> Listener {
    let l = listen();
    w.agent_port = l.port;
    w.write_config("");
    l
}

/// The line of `doctor`'s text output for a check.
fn doctor_line(out: &str, check: &str) -> String {
    out.lines()
        .find(|l| l.split_whitespace().nth(1) == Some(check))
        .unwrap_or_else(|| panic!("no {check} line in doctor's output:\n{out}"))
        .to_string()
}

/// The value of a `KEY=value` line a script printed.
fn field(run: &Run, key: &str) -> String {
    let prefix = format!("{key}=");
    run.stdout()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
        .unwrap_or_else(|| panic!("no {key}= in the output:\n{}", run.explain()))
}

/// Whether podman says this container is running (as the world's user).
fn running(w: &World, container: &str) -> bool {
    let out = w.podman(&[
        "inspect",
        "--type",
        "container",
        "--format",
        "{{.State.Running}}",
        container,
    ]);
    assert!(out.status.success(), "{}", show_output(&out));
    String::from_utf8_lossy(&out.stdout).trim() == "true"
}

/// Limits honestly: rootless on cgroups v1, where podman
/// would print "Resource limits are not supported and ignored", `cage
/// create` refuses and leaves nothing behind unless the config says
/// `unenforced_limits = "warn"`; then it warns and goes on. `doctor` says
/// which applies.
#[test]
fn limits_that_cannot_be_enforced_are_refused_unless_the_config_says_warn() {
    let w = World::rootless();
    let proj = w.dir("proj");
    let name = w.session("limits");
    let d = proj.to_string_lossy().into_owned();

    config_without_warn(&w);
    let refused = w.run(&["cage", "create", &name, "--dir", &d]);
    assert_eq!(refused.code(), 1, "{}", refused.explain());
    let err = refused.stderr();
    assert!(
        err.contains("Resource limits are not supported and ignored")
            && err.contains("unenforced_limits = \"warn\""),
        "the refusal must say why and how to go on:\n{}",
        refused.explain()
    );
    assert!(
        w.containers_of(&name).is_empty(),
        "a refused create left a container"
    );
    assert!(
        !w.state
            .join("sessions")
            .join(format!("{name}.json"))
            .exists(),
        "a refused create left a record"
    );
    let cages = w.state.join("cages");
    let left: Vec<_> = fs::read_dir(&cages)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "a refused create left {left:?} in {}",
        cages.display()
    );

    let doctor = w.run(&["doctor"]);
    assert_eq!(
        doctor.code(),
        1,
        "doctor must fail when cages would be refused:\n{}",
        doctor.explain()
    );
    let line = doctor_line(&doctor.stdout(), "limits");
    assert!(
        line.starts_with("FAIL") && line.contains("rootless") && line.contains("v1"),
        "{line}\n{}",
        doctor.explain()
    );

    w.write_config("");
    let made = w.create(&name, &proj, &[]);
    assert!(
        made.stderr()
            .contains("warning: the cage's limits are not enforced"),
        "no warning on stderr:\n{}",
        made.explain()
    );
    assert_eq!(w.containers_of(&name), vec![w.container(&name)]);

    let doctor = w.run(&["doctor"]);
    assert_eq!(doctor.code(), 0, "{}", doctor.explain());
    let line = doctor_line(&doctor.stdout(), "limits");
    assert!(
        line.starts_with("warn") && line.contains("NOT enforced"),
        "{line}\n{}",
        doctor.explain()
    );
    let rootless = doctor_line(&doctor.stdout(), "rootless");
    assert!(rootless.starts_with("pass"), "{rootless}");
}

/// A whole rootless session ("Files the agent writes into the project
/// belong to your user outside, even though it wrote them as root"): root
/// inside, the file lands on the host owned by the user, `~/.ssh` is not
/// there, the cage gets the rootless network of its podman (slirp4netns on
/// 4.3, pasta on 5), and it is stopped when the command ends.
#[test]
fn a_rootless_session_writes_as_root_inside_and_as_the_user_outside() {
    let w = World::rootless();
    let user = test_user();
    let proj = w.dir("proj");
    w.file("home/.ssh/id_ed25519", "PRIVATE KEY\n");
    let name = w.session("whole");
    w.create(&name, &proj, &[]);
    let network = rootless_network();
    assert_eq!(
        w.record(&name)["cage"]["network"],
        network,
        "{}",
        w.record(&name)
    );
    let shown = w.run(&["cage", "show", &name]).ok();
    assert!(
        shown.stdout().lines().any(
            |l| l.starts_with("network") && l.ends_with(&format!("{network}, policy internet"))
        ),
        "{}",
        shown.explain()
    );

    let ssh = w.home.join(".ssh");
    let script = format!(
        "echo uid=$(id -u); echo pwd=$(pwd); echo written-inside > made-inside; \
         if [ -e {ssh} ] || [ -e \"$HOME/.ssh\" ]; then echo ssh=present; else echo ssh=absent; fi; \
         ls -A \"$HOME\" | tr '\\n' ' ' | sed 's/^/home=/'; echo; exit 7",
        ssh = ssh.display()
    );
    let run = w.sh(&name, &script).code_is(7);
    assert_eq!(field(&run, "uid"), "0", "root inside");
    assert_eq!(
        field(&run, "pwd"),
        proj.to_string_lossy(),
        "the project is the working folder"
    );
    assert_eq!(
        field(&run, "ssh"),
        "absent",
        "~/.ssh must not be in the cage"
    );
    assert!(!field(&run, "home").contains(".ssh"), "{}", run.explain());

    let made = proj.join("made-inside");
    assert_eq!(fs::read_to_string(&made).unwrap(), "written-inside\n");
    let meta = fs::metadata(&made).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (user.uid, user.uid),
        "a file written by root inside must belong to {} outside",
        user.name
    );
    assert!(
        !running(&w, &w.container(&name)),
        "the cage keeps running after exec ended"
    );
}

/// The agent port, rootless ("The agent port is
/// closed inside every cage, by a rule its root cannot remove"): from the
/// cage the agent port is refused and another port connects; from a plain
/// slirp4netns container the agent port connects, so the refusal is the
/// rule's doing. Root inside has no NET_ADMIN and cannot change the network.
#[test]
fn the_agent_port_is_closed_in_a_rootless_cage_and_root_inside_cannot_reopen_it() {
    let mut w = World::rootless();
    let proj = w.dir("proj");
    let agent = agent_listener(&mut w);
    let other = listen();
    let name = w.session("port");
    w.create(&name, &proj, &[]);

    let script = format!(
        "{}; {}; echo cap=$(grep CapEff /proc/self/status | awk '{{print $2}}'); \
         echo bnd=$(grep CapBnd /proc/self/status | awk '{{print $2}}'); \
         if e=$(ip addr add 10.9.9.9/32 dev lo 2>&1); then echo ipaddr=allowed; else echo \"ipaddr=denied: $e\"; fi; \
         if e=$(ip link set lo down 2>&1); then echo iplink=allowed; else echo \"iplink=denied: $e\"; fi",
        nc_probe(HOST_ADDR, agent.port),
        nc_probe(HOST_ADDR, other.port)
    );
    let run = w.sh(&name, &script).ok();
    let out = run.stdout();
    assert!(
        out.contains(&format!("REFUSED-{}", agent.port)),
        "agent port open in the cage:\n{}",
        run.explain()
    );
    assert!(
        out.contains(&format!("CONNECTED-{}", other.port)),
        "another port closed in the cage:\n{}",
        run.explain()
    );

    // Neither held nor to be had (the bounding set): NET_ADMIN would
    // change the rules, NET_RAW would send frames around them.
    for set in ["cap", "bnd"] {
        let cap = u64::from_str_radix(&field(&run, set), 16).expect("a capability set in hex");
        const CAP_NET_ADMIN: u32 = 12;
        const CAP_NET_RAW: u32 = 13;
        assert_eq!(
            cap & (1 << CAP_NET_ADMIN | 1 << CAP_NET_RAW),
            0,
            "NET_ADMIN or NET_RAW in {set} {cap:016x}"
        );
    }
    for key in ["ipaddr", "iplink"] {
        let got = field(&run, key);
        assert!(
            got.starts_with("denied") && got.contains("Operation not permitted"),
            "root inside must be refused changing the network for lack of permission ({key}):\n{}",
            run.explain()
        );
    }

    let plain = w.podman(&[
        "run",
        "--rm",
        "--network",
        "slirp4netns",
        IMAGE,
        "sh",
        "-c",
        &nc_probe(HOST_ADDR, agent.port),
    ]);
    assert!(
        String::from_utf8_lossy(&plain.stdout).contains(&format!("CONNECTED-{}", agent.port)),
        "a plain rootless container cannot reach the agent port, so the test proves nothing:\n{}",
        show_output(&plain)
    );
}

/// The rule is set again after every start ("After every
/// start (the network namespace is new each time)"): after `cage exec`,
/// `cage start`, and `cage stop` then `cage exec`, the agent port is refused.
/// The control: the same container started by hand with `podman start`
/// reaches the agent port, so the rule did not survive the restart and it is
/// shrooms-agent that sets it again.
#[test]
fn the_agent_port_stays_closed_after_a_rootless_cage_is_stopped_and_started() {
    let mut w = World::rootless();
    let proj = w.dir("proj");
    let agent = agent_listener(&mut w);
    let other = listen();
    let name = w.session("restart");
    w.create(&name, &proj, &[]);
    let container = w.container(&name);
    let probe = format!(
        "{}; {}",
        nc_probe(HOST_ADDR, agent.port),
        nc_probe(HOST_ADDR, other.port)
    );
    let podman_exec = |what: &str| Run {
        what: format!("podman exec {container} ({what})"),
        out: w.podman(&["exec", &container, "sh", "-c", &probe]),
    };
    let closed = |run: &Run| {
        let out = run.stdout();
        assert!(
            out.contains(&format!("REFUSED-{}", agent.port)),
            "agent port open:\n{}",
            run.explain()
        );
        assert!(
            out.contains(&format!("CONNECTED-{}", other.port)),
            "other port closed:\n{}",
            run.explain()
        );
    };

    closed(&w.sh(&name, &probe).ok());
    assert!(
        !running(&w, &container),
        "exec should stop the cage when it ends"
    );

    w.run(&["cage", "start", &name]).ok();
    assert!(running(&w, &container));
    closed(&podman_exec("after cage start"));
    let stopped = w.run(&["cage", "stop", &name]).ok();
    assert!(
        stopped.stdout().starts_with("stopped"),
        "{}",
        stopped.explain()
    );
    assert!(!running(&w, &container));

    let by_hand = w.podman(&["start", &container]);
    assert!(by_hand.status.success(), "{}", show_output(&by_hand));
    let open = podman_exec("started by hand, bypassing shrooms-agent");
    assert!(
        open.stdout().contains(&format!("CONNECTED-{}", agent.port)),
        "the rule survived a restart, so this test cannot tell whether it is set again:\n{}",
        open.explain()
    );
    let by_hand = w.podman(&["stop", &container]);
    assert!(by_hand.status.success(), "{}", show_output(&by_hand));

    closed(&w.sh(&name, &probe).ok());
    assert!(!running(&w, &container));
}

/// `cage rm` as the user removes the
/// container, its env file, its private home and proxy folder, and the record.
#[test]
fn cage_rm_as_the_user_removes_everything_of_the_session() {
    let w = World::rootless();
    let proj = w.dir("proj");
    let name = w.session("rm");
    w.create(&name, &proj, &[]);
    w.sh(&name, "true").ok();
    let container = w.container(&name);
    let cages = w.state.join("cages");
    let env_file = cages.join(format!("{container}.env"));
    let cage_dir = cages.join(&container);
    let record = w.state.join("sessions").join(format!("{name}.json"));
    for p in [
        &env_file,
        &cage_dir.join("home"),
        &cage_dir.join("proxy"),
        &record,
    ] {
        assert!(p.exists(), "{} missing before rm", p.display());
        assert_eq!(
            fs::metadata(p).unwrap().uid(),
            test_user().uid,
            "{} not the user's",
            p.display()
        );
    }
    assert_eq!(fs::metadata(&env_file).unwrap().mode() & 0o777, 0o600);

    let rm = w.run(&["cage", "rm", &name]).ok();
    assert!(rm.stdout().contains(&container), "{}", rm.explain());
    assert!(
        w.containers_of(&name).is_empty(),
        "the container is still there"
    );
    let inspect = w.podman(&["container", "exists", &container]);
    assert_eq!(inspect.status.code(), Some(1), "{}", show_output(&inspect));
    for p in [&env_file, &cage_dir, &record] {
        assert!(
            !Path::new(p).exists(),
            "{} is still there after rm",
            p.display()
        );
    }
    let ls = w.run(&["--json", "cage", "ls"]).ok();
    assert!(!ls.stdout().contains(&name), "{}", ls.explain());
    let again = w.run(&["cage", "rm", &name]);
    assert_ne!(again.code(), 0, "{}", again.explain());
}

/// The network `auto` gives a rootless cage, checked from inside: on
/// podman 5 (the podman-5 lane) pasta with the cage's own address
/// fd5e:ca9e:1::2 and its default route via fd5e:ca9e:1::1; on Debian 12's
/// podman 4.3, which has no pasta, slirp4netns.
#[test]
fn the_rootless_network_is_the_one_auto_promises() {
    let w = World::rootless();
    let proj = w.dir("proj");
    let name = w.session("net");
    w.create(&name, &proj, &[]);
    let out = w
        .sh(&name, "ip -6 addr show; ip -6 route show; ip -4 addr show")
        .ok()
        .stdout();
    if podman5_lane() {
        assert_eq!(w.record(&name)["cage"]["network"], "pasta");
        assert!(out.contains("inet6 fd5e:ca9e:1::2/64"), "{out}");
        assert!(out.contains("default via fd5e:ca9e:1::1"), "{out}");
    } else {
        assert_eq!(w.record(&name)["cage"]["network"], "slirp4netns");
        // slirp4netns's fixed address for the container
        assert!(out.contains("inet 10.0.2.100/24"), "{out}");
    }
}
