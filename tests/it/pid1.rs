//! Nothing of the image or of the cage's own writable layers runs before
//! the cage's network rules are in place: its first process is the tool's
//! own init, the rules go into the namespace podman made for the
//! container, and the cage's first program is what `cage exec` starts.
//! And no process of the cage can trace that first process or write its
//! memory.
//!
//! Each test performs the attack: root in the cage replaces every program
//! on the image's PATH (the `sleep` a cage's first process used to be, and
//! every other busybox applet) with a script that reaches for a listener
//! of the host at once, or moves itself into a network namespace of its
//! own; then the cage is stopped and started ten times, each start by a
//! `cage exec`. The listener counts what reached it.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use crate::common::*;

const STARTS: usize = 10;

/// A host listener on every address, on a port the kernel picks (kept
/// bound from the start), that answers and counts each connection.
struct Counting {
    port: u16,
    seen: Arc<AtomicUsize>,
}

impl Counting {
    fn new() -> Counting {
        let l = TcpListener::bind("0.0.0.0:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(AtomicUsize::new(0));
        let count = seen.clone();
        thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let _ = s.write_all(b"hello\n");
            }
        });
        Counting { port, seen }
    }
    fn seen(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }
}

/// The world's agent port becomes the listener's (config rewritten).
fn agent_on(w: &mut World, l: &Counting) {
    w.agent_port = l.port;
    w.write_config("");
}

/// A plain container of the same podman reaches `addr:port`: the listener
/// and the address work, so a count of 0 later is the cage's rules' doing.
fn plain_container_reaches(w: &World, addr: &str, l: &Counting) {
    let network = if w.user.is_some() {
        rootless_network()
    } else {
        "bridge"
    };
    let before = l.seen();
    let out = w.podman(&[
        "run",
        "--rm",
        "--network",
        network,
        IMAGE,
        "sh",
        "-c",
        &nc_probe(addr, l.port),
    ]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("CONNECTED-{}", l.port)),
        "a plain container does not reach {addr}:{}, so the test proves nothing:\n{}",
        l.port,
        show_output(&out)
    );
    wait_until(
        "the listener counts the plain container",
        Duration::from_secs(5),
        || l.seen() > before,
    );
}

/// What each replaced program does before it becomes the applet it
/// replaced: the shell text of the attack.
enum Payload {
    /// Connect to this address and port, and note whether it could.
    Reach(String, u16),
    /// As the container's first process, leave a child behind that keeps
    /// reaching for this address and port, and move into a new user and
    /// network namespace (where the rules were then loaded, away from the
    /// child and the network podman set up).
    Unshare(String, u16),
}

/// Root in the cage replaces every program on the image's PATH but busybox
/// itself with the attack, writing what each run saw to `log` (in the
/// project, so the test reads it on the machine); and tries to replace the
/// init's mount point too.
fn plant(w: &World, name: &str, payload: &Payload, log: &Path) {
    let body = match payload {
        Payload::Reach(addr, port) => format!(
            "if /bin/busybox nc -w 2 {addr} {port} </dev/null >/dev/null 2>&1; \
             then r=CONNECTED; else r=REFUSED; fi\n\
             echo \"$r pid=$$ ${{0##*/}} $*\" >> {log}\n",
            log = log.display()
        ),
        Payload::Unshare(addr, port) => format!(
            "if [ $$ = 1 ]; then\n\
             echo \"UNSHARED pid=$$ ${{0##*/}} $*\" >> {log}\n\
             ( i=0; while [ $i -lt 40 ]; do\n\
               /bin/busybox nc -w 1 {addr} {port} </dev/null >/dev/null 2>&1 \
               && echo \"CONNECTED child of pid 1\" >> {log}\n\
               i=$((i+1)); /bin/busybox sleep 0.25; done ) &\n\
             exec /bin/busybox unshare -Urn /bin/busybox \"${{0##*/}}\" \"$@\"\n\
             fi\n",
            log = log.display()
        ),
    };
    let attack = format!("#!/bin/busybox sh\n{body}exec /bin/busybox \"${{0##*/}}\" \"$@\"\n");
    let script = format!(
        "cat > /attack <<'ATTACK'\n{attack}ATTACK\n\
         chmod 755 /attack\n\
         n=0\n\
         for f in /bin/* /sbin/* /usr/bin/* /usr/sbin/*; do\n\
           [ -e \"$f\" ] || [ -L \"$f\" ] || continue\n\
           [ \"$f\" = /bin/busybox ] && continue\n\
           /bin/busybox rm -f \"$f\" && /bin/busybox cp /attack \"$f\" && n=$((n+1))\n\
         done\n\
         echo replaced=$n\n\
         for i in /.shrooms-init-*; do\n\
           [ -e \"$i\" ] || continue\n\
           /bin/busybox rm -f \"$i\" 2>/dev/null && echo INIT-REMOVED\n\
           /bin/busybox mv \"$i\" /init-moved 2>/dev/null && echo INIT-MOVED\n\
           /bin/busybox ln -sf /attack \"$i\" 2>/dev/null && echo INIT-LINKED\n\
         done\n\
         /bin/busybox readlink /bin/sleep || echo sleep-is-the-attack"
    );
    let r = w.sh(name, &script).ok();
    let out = r.stdout();
    let replaced: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("replaced="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        replaced > 100,
        "busybox's applets were not replaced:\n{}",
        r.explain()
    );
    assert!(out.contains("sleep-is-the-attack"), "{}", r.explain());
    assert!(
        !out.contains("INIT-"),
        "the init's mount point was replaced:\n{}",
        r.explain()
    );
}

/// Stop and start the cage `STARTS` times, each start by `cage exec`
/// (running `probe` when given, else `true`), and return each exec's run.
fn restart(w: &World, name: &str, probe: Option<&str>) -> Vec<Run> {
    let mut runs = Vec::new();
    for _ in 0..STARTS {
        w.run(&["cage", "stop", name]).ok();
        let r = match probe {
            Some(p) => w.sh(name, p).ok(),
            None => w.run(&["cage", "exec", name, "--", "true"]).ok(),
        };
        runs.push(r);
        // Room for whatever the start left running to do its worst.
        thread::sleep(Duration::from_millis(300));
    }
    runs
}

/// The container's first process is the tool's own init, still (the
/// cage started by `cage start`, since `cage exec` stops it at the end).
fn first_process_is_the_init(w: &World, name: &str) {
    w.run(&["cage", "start", name]).ok();
    let container = w.container(name);
    let container = container.as_str();
    let top = w.podman(&["top", container, "pid", "args"]);
    let text = String::from_utf8_lossy(&top.stdout);
    let init = format!("/.shrooms-init-{container}");
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["1", init.as_str()]),
        "{}",
        show_output(&top)
    );
}

fn log_text(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

/// An ordinary cage whose programs all reach for the agent port at once,
/// at every start: nothing reaches it, and nothing of them ran at a start.
fn replaced_programs_never_reach_the_agent_port(mut w: World) {
    let agent = Counting::new();
    agent_on(&mut w, &agent);
    plain_container_reaches(&w, HOST_ADDR, &agent);
    let before = agent.seen();
    let name = w.session("pid1");
    let dir = w.dir("pid1");
    w.create(&name, &dir, &[]);
    let log = std::fs::canonicalize(&dir).unwrap().join("attack.log");
    plant(
        &w,
        &name,
        &Payload::Reach(HOST_ADDR.into(), agent.port),
        &log,
    );
    restart(&w, &name, None);
    let text = log_text(&log);
    assert_eq!(
        agent.seen(),
        before,
        "the agent port was reached from the cage; what the attack saw:\n{text}"
    );
    assert!(!text.contains("CONNECTED"), "{text}");
    // The attack did run, from `cage exec` only, after the rules: never as
    // the first process.
    assert!(
        text.contains("REFUSED"),
        "the planted programs never ran:\n{text}"
    );
    assert!(!text.contains("pid=1 "), "{text}");
    first_process_is_the_init(&w, &name);
}

#[test]
fn replaced_programs_never_reach_the_agent_port_at_start() {
    replaced_programs_never_reach_the_agent_port(World::new());
}

#[test]
fn replaced_programs_never_reach_the_agent_port_at_start_rootless() {
    replaced_programs_never_reach_the_agent_port(World::rootless());
}

/// A 0600 token file for sealed cages.
fn token_file(w: &World) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = w.file("sealed-token", "sk-ant-oat01-test-token-for-pid1\n");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// A sealed cage whose programs all reach for a LAN address at once, at
/// every start: nothing reaches it.
fn replaced_programs_never_reach_the_lan(w: World) {
    let lan = Counting::new();
    plain_container_reaches(&w, LAN_ADDR, &lan);
    let before = lan.seen();
    let name = w.session("pid1sealed");
    let dir = w.dir(&format!("projects/{name}"));
    let token = token_file(&w);
    w.create(
        &name,
        &dir,
        &["--sealed", "--sealed-token", &token.to_string_lossy()],
    );
    let log = std::fs::canonicalize(&dir).unwrap().join("attack.log");
    plant(&w, &name, &Payload::Reach(LAN_ADDR.into(), lan.port), &log);
    restart(&w, &name, None);
    let text = log_text(&log);
    assert_eq!(
        lan.seen(),
        before,
        "a LAN address was reached from the sealed cage; what the attack saw:\n{text}"
    );
    assert!(!text.contains("CONNECTED"), "{text}");
    assert!(
        text.contains("REFUSED"),
        "the planted programs never ran:\n{text}"
    );
    assert!(!text.contains("pid=1 "), "{text}");
    first_process_is_the_init(&w, &name);
}

#[test]
fn a_sealed_cages_replaced_programs_never_reach_the_lan_at_start() {
    replaced_programs_never_reach_the_lan(World::new());
}

#[test]
fn a_sealed_cages_replaced_programs_never_reach_the_lan_at_start_rootless() {
    replaced_programs_never_reach_the_lan(World::rootless());
}

/// A cage whose first process would move itself into a network namespace
/// of its own: the agent-port rule still holds for what `cage exec` runs,
/// at every start.
fn the_rules_hold_where_exec_runs(mut w: World) {
    let agent = Counting::new();
    agent_on(&mut w, &agent);
    plain_container_reaches(&w, HOST_ADDR, &agent);
    let before = agent.seen();
    let name = w.session("pid1ns");
    let dir = w.dir("pid1ns");
    w.create(&name, &dir, &[]);
    let log = std::fs::canonicalize(&dir).unwrap().join("attack.log");
    plant(
        &w,
        &name,
        &Payload::Unshare(HOST_ADDR.into(), agent.port),
        &log,
    );
    // With busybox itself (every other program is the attack): the agent
    // port answers with the rule's reset, and another port of the host is
    // reached, so `cage exec` runs in the network podman set up.
    let other = Counting::new();
    let probe = format!(
        "/bin/busybox nc -w 3 {HOST_ADDR} {} </dev/null 2>&1; \
         /bin/busybox nc -w 3 {HOST_ADDR} {} </dev/null >/dev/null 2>&1 \
         && echo CONNECTED-OTHER || echo NOT-OTHER",
        agent.port, other.port
    );
    let runs = restart(&w, &name, Some(&probe));
    let text = log_text(&log);
    assert_eq!(
        agent.seen(),
        before,
        "the agent port was reached from the cage; what the attack saw:\n{text}"
    );
    for (i, r) in runs.iter().enumerate() {
        let out = r.stdout();
        assert!(
            out.contains("Connection refused") && out.contains("CONNECTED-OTHER"),
            "start {}: `cage exec` reached the agent port, or not the network:\n{}",
            i + 1,
            r.explain()
        );
    }
    assert!(
        !text.contains("UNSHARED"),
        "the first process ran the attack:\n{text}"
    );
    first_process_is_the_init(&w, &name);
}

#[test]
fn a_first_process_in_a_namespace_of_its_own_leaves_the_rules_where_exec_runs() {
    the_rules_hold_where_exec_runs(World::new());
}

#[test]
fn a_first_process_in_a_namespace_of_its_own_leaves_the_rules_where_exec_runs_rootless() {
    the_rules_hold_where_exec_runs(World::rootless());
}

/// Root in the cage runs with its first process's user id, which let it
/// trace it and open its memory (`/proc/1/mem` read and write) where the
/// first process was dumpable (the machine's catatonit): the tool's init is
/// not, so each is refused: opening `/proc/1/mem` (to write or to read),
/// reading `/proc/1/environ`, ptrace(PTRACE_ATTACH), process_vm_writev.
/// It still reaps, and the cage still stops.
fn the_first_process_cannot_be_traced(w: World) {
    let name = w.session("pid1trace");
    let dir = w.dir(&format!("projects/{name}"));
    let probe = crate::attacks::build_probe(&dir);
    w.chown_all();
    w.create(&name, &dir, &[]);
    first_process_is_the_init(&w, &name);
    let script = format!(
        "(exec 3<>/proc/1/mem) 2>/dev/null && echo mem-rw OPENED || echo mem-rw REFUSED; \
         (exec 3</proc/1/mem) 2>/dev/null && echo mem-r OPENED || echo mem-r REFUSED; \
         cat /proc/1/environ >/dev/null 2>&1 && echo environ READ || echo environ REFUSED; \
         {} trace 1; \
         (sleep 0.2 &); i=0; while [ $i -lt 100 ]; do \
           if pgrep -x sleep >/dev/null || ps -o stat | grep -q '^Z'; then sleep 0.1; i=$((i+1)); \
           else echo reaped; break; fi; done",
        probe.display()
    );
    let r = w.sh(&name, &script).ok();
    let out = r.stdout();
    for line in [
        "mem-rw REFUSED",
        "mem-r REFUSED",
        "environ REFUSED",
        "ptrace EPERM",
        "vm_writev EPERM",
        "reaped",
    ] {
        assert!(
            out.lines().any(|l| l == line),
            "{line:?} not seen: the cage reached its first process:\n{}",
            r.explain()
        );
    }
    // And stopped as ever (podman's SIGKILL, the cage's stop signal).
    let container = w.container(&name);
    w.run(&["cage", "start", &name]).ok();
    w.run(&["cage", "stop", &name]).ok();
    assert_ne!(w.container_state(&container).as_deref(), Some("running"));
}

#[test]
fn the_first_process_cannot_be_traced_from_the_cage() {
    the_first_process_cannot_be_traced(World::new());
}

#[test]
fn the_first_process_cannot_be_traced_from_the_cage_rootless() {
    the_first_process_cannot_be_traced(World::rootless());
}

/// A cage made before (its first process `sleep infinity` from the image's
/// PATH) is not started: the command fails, naming `cage move`, which makes
/// the cage again with the machine's init.
#[test]
fn a_cage_made_before_is_not_started_until_moved() {
    let w = World::new();
    let name = w.session("oldpid1");
    let dir = w.dir("oldpid1");
    w.create(&name, &dir, &[]);
    let container = w.container(&name);
    // The container again, as the earlier shrooms-agent made it.
    let argv: Vec<String> = w.record(&name)["cage"]["create_argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let mut old: Vec<String> = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let a = argv[i].as_str();
        match a {
            "--init=false" | "--no-healthcheck" => i += 1,
            "--entrypoint" => i += 2,
            "--mount" if argv[i + 1].contains("dst=/.shrooms-init-") => i += 2,
            "--" => {
                old.extend(["--entrypoint".into(), String::new()]);
                old.push(a.into());
                i += 1;
            }
            _ => {
                old.push(a.into());
                i += 1;
            }
        }
    }
    // The image is the last word; the earlier first process came after it.
    old.extend(["sleep".into(), "infinity".into()]);
    let rm = w.podman(&["rm", "-f", "-t", "0", &container]);
    assert!(rm.status.success(), "{}", show_output(&rm));
    let args: Vec<&str> = old.iter().map(String::as_str).collect();
    let made = w.podman(&args);
    assert!(made.status.success(), "{:?}\n{}", old, show_output(&made));

    let r = w.run(&["cage", "exec", &name, "--", "true"]).code_is(125);
    assert!(
        r.stderr().contains("made by an earlier shrooms-agent")
            && r.stderr()
                .contains(&format!("`shrooms-agent cage move {name}`")),
        "{}",
        r.explain()
    );
    assert_ne!(w.container_state(&container).as_deref(), Some("running"));
    // Started behind the tool's back, it is stopped again.
    let started = w.podman(&["start", &container]);
    assert!(started.status.success(), "{}", show_output(&started));
    w.run(&["cage", "exec", &name, "--", "true"]).code_is(125);
    assert_ne!(w.container_state(&container).as_deref(), Some("running"));

    w.run(&["cage", "move", &name]).ok();
    let r = w.sh(&name, "echo moved-and-running").ok();
    assert!(r.stdout().contains("moved-and-running"), "{}", r.explain());
    first_process_is_the_init(&w, &name);
}
