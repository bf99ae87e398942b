//! The egress log: each connection a cage opens or is refused, written
//! outside the cage by a listener of ours in its network namespace; shown by
//! `cage history --net`, serve's route and the status page; bounded; out of
//! the cage's reach.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::attacks::{all_on_this_machine, listen_everywhere};
use crate::common::*;

fn log_path(w: &World, name: &str) -> PathBuf {
    w.state
        .join("sessions")
        .join(format!("{name}.egress.jsonl"))
}

/// The file of a session's refusals, kept apart from its allowed
/// connections.
fn refused_path(w: &World, name: &str) -> PathBuf {
    w.state
        .join("sessions")
        .join(format!("{name}.egress-refused.jsonl"))
}

/// The lines of a session's log, allowed and refused (current files).
fn both(w: &World, name: &str) -> Vec<Value> {
    let mut all = lines(&log_path(w, name));
    all.extend(lines(&refused_path(w, name)));
    all
}

/// The log's lines, as JSON.
fn lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Is there a line for this destination with this verdict and rule?
fn has(lines: &[Value], addr: &str, port: u16, allowed: bool, rule: &str) -> bool {
    lines.iter().any(|l| {
        l["address"] == addr
            && l["port"] == port
            && l["protocol"] == "tcp"
            && l["allowed"] == allowed
            && l["rule"] == rule
    })
}

/// A GET's body, as the world's user (root's serve wants its token, which
/// `get` sends; a user's serve answers that user).
fn fetch(w: &World, url: &str) -> String {
    match w.user {
        None => get(url).is(200).body,
        Some(u) => {
            let out = as_user(Some(u), "curl", &["-sf", "--max-time", "20", url], &[]);
            assert!(out.status.success(), "{url}: {}", show_output(&out));
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    }
}

/// A session with a project folder, created.
fn created(w: &World, base: &str, extra: &[&str]) -> String {
    let name = w.session(base);
    let dir = fs::canonicalize(w.dir(&format!("{base}-project"))).unwrap();
    w.create(&name, &dir, extra);
    name
}

/// An ordinary cage connects to a listener and is refused the agent port:
/// the log has both, with their verdicts and rules; root in the cage can
/// neither see the log nor take the NFLOG group from our listener; the
/// listener ends with the cage; `cage history --net` shows the lines; `cage
/// rm` removes the log.
fn open_cage_is_logged(w: World) {
    let other = Listener::any();
    let name = created(&w, "egress", &["--net", "open"]);
    let script = format!(
        "nc -w 3 {HOST_ADDR} {agent} </dev/null 2>&1; {probe}; \
         ls {state} 2>&1 | head -1",
        agent = w.agent_port,
        probe = nc_probe(HOST_ADDR, other.port),
        state = w.state.join("sessions").display(),
    );
    let run = w.sh(&name, &script).ok();
    let out = run.stdout();
    assert!(out.contains("Connection refused"), "{}", run.explain());
    assert!(
        out.contains(&format!("CONNECTED-{}", other.port)),
        "{}",
        run.explain()
    );
    // The state folder, where the log is, is not in the cage.
    assert!(
        out.contains("No such file or directory"),
        "{}",
        run.explain()
    );

    let path = log_path(&w, &name);
    let mut got = Vec::new();
    wait_until("the log's lines", Duration::from_secs(5), || {
        got = both(&w, &name);
        has(&got, HOST_ADDR, w.agent_port, false, "agent-port")
            && has(&got, HOST_ADDR, other.port, true, "open")
    });
    assert!(got.iter().all(|l| l["session"] == name.as_str()), "{got:?}");
    assert!(
        got.iter()
            .all(|l| l["time"].as_str().is_some_and(|t| t.ends_with('Z'))),
        "{got:?}"
    );
    assert_eq!(mode_of(&path), 0o600);
    assert_eq!(mode_of(&refused_path(&w, &name)), 0o600);

    // The turn is over and the cage stopped: its listener is gone too.
    let pid_file = w.state.join("sessions").join(format!("{name}.egress.pid"));
    wait_until("the listener to end", Duration::from_secs(20), || {
        cmdlines_containing(&format!("--session {name} ")).is_empty()
    });
    assert!(!pid_file.exists());
    // A started cage has its listener until it is stopped.
    w.run(&["cage", "start", &name]).ok();
    // (Rootless, `podman unshare` waits beside it, with its command line.)
    assert!(
        !cmdlines_containing(&format!("egress-listen --log {} ", path.display())).is_empty(),
        "no listener runs for the started cage"
    );
    w.run(&["cage", "stop", &name]).ok();
    wait_until("the listener to end", Duration::from_secs(20), || {
        cmdlines_containing(&format!("--session {name} ")).is_empty()
    });

    let h = w
        .run(&["cage", "history", &name, "--net", "--json"])
        .ok()
        .json();
    let entries = h["connections"].as_array().unwrap();
    assert!(
        entries.iter().any(|l| l["port"] == w.agent_port
            && l["allowed"] == false
            && l["rule"] == "agent-port"),
        "{h}"
    );
    let text = w.run(&["cage", "history", &name, "--net"]).ok().stdout();
    assert!(
        text.contains(&format!(
            "refused {HOST_ADDR}:{} tcp (agent-port)",
            w.agent_port
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("allowed {HOST_ADDR}:{} tcp (open)", other.port)),
        "{text}"
    );

    w.run(&["cage", "rm", &name]).ok();
    assert!(!path.exists());
    assert!(!refused_path(&w, &name).exists());
}

#[test]
fn an_open_cage_s_connections_are_logged() {
    open_cage_is_logged(World::new());
}

#[test]
fn an_open_rootless_cage_s_connections_are_logged() {
    open_cage_is_logged(World::rootless());
}

/// A sealed cage is refused a stand-in LAN address and let through to the
/// internet stand-in: the log has both, with their rules; serve's route
/// and status page show them. Its log, filled to its bound before, is
/// rotated by the listener, not grown past it.
fn sealed_cage_is_logged(w: World) {
    let other = Listener::any();
    let name = w.session("egress-sealed");
    let dir = fs::canonicalize(w.dir("egress-sealed-project")).unwrap();
    let token = w.file(&format!("{name}.token"), "sk-ant-oat01-egress-test\n");
    fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // The log, full but for a line.
    let path = log_path(&w, &name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let filler = format!(
        "{{\"time\":\"2026-01-01T00:00:00.000Z\",\"session\":\"{name}\",\"address\":\"192.0.2.1\",\
         \"name\":null,\"port\":80,\"protocol\":\"tcp\",\"allowed\":true,\"rule\":\"open\"}}\n"
    );
    let bound: usize = 1024 * 1024;
    let full = filler.repeat((bound - 50) / filler.len());
    fs::write(&path, &full).unwrap();
    w.chown_all();
    w.create(
        &name,
        &dir,
        &["--sealed", "--sealed-token", &token.to_string_lossy()],
    );

    let script = format!(
        "nc -w 3 {LAN_ADDR} {port} </dev/null 2>&1; {probe}",
        port = other.port,
        probe = nc_probe(HOST_ADDR, other.port),
    );
    let run = w.sh(&name, &script).ok();
    assert!(
        run.stdout().contains(&format!("CONNECTED-{}", other.port)),
        "{}",
        run.explain()
    );
    let mut got = Vec::new();
    wait_until("the log's lines", Duration::from_secs(5), || {
        got = both(&w, &name);
        has(&got, LAN_ADDR, other.port, false, "private")
            && has(&got, HOST_ADDR, other.port, true, "default")
    });
    // Rotated at the bound: the old lines are in the older file, neither
    // file is past the bound.
    let older = w
        .state
        .join("sessions")
        .join(format!("{name}.egress.1.jsonl"));
    assert_eq!(fs::read_to_string(&older).unwrap(), full);
    assert!(fs::metadata(&path).unwrap().len() < 4096, "{got:?}");

    let s = w.serve(&[], &[]);
    let body = fetch(&w, &format!("{}/v1/sessions/{name}/egress", s.url));
    let r: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let all = r["connections"].as_array().unwrap().clone();
    assert!(all.len() > 1000, "the rotated lines are not served");
    assert!(
        has(&all, LAN_ADDR, other.port, false, "private"),
        "{:?}",
        &all[all.len() - 3..]
    );
    let page = fetch(&w, &format!("{}/", s.url));
    let want = format!("refused {LAN_ADDR}:{} tcp (private)", other.port);
    assert!(page.contains(&want), "{want:?} not on the page:\n{page}");
}

/// A rootless cage on slirp4netns under `open` (podman 4.3 here; the
/// podman-5 lane's pasta has no such address): 10.0.2.2, slirp4netns's
/// address for the machine's loopback, which the cage is never let reach
/// (`allow_host_loopback=false`), is refused at once and logged so,
/// rather than logged as let through and then going nowhere; the rest of
/// the machine stays open.
fn the_machines_loopback_is_logged_refused(w: World) {
    let other = Listener::any();
    let name = created(&w, "hostlo", &["--net", "open"]);
    let network = w.record(&name)["cage"]["network"].clone();
    assert_eq!(
        network,
        rootless_network(),
        "this machine's rootless network"
    );
    if network == "pasta" {
        // pasta keeps no address for the machine's loopback (its gateway
        // is the machine's only with --map-gw, which a cage is refused),
        // and 10.0.2.2 is then an address of the network outside, which
        // no test sends to.
        return;
    }
    let port = other.port;
    let script = format!(
        "{}; {}",
        nc_probe("10.0.2.2", port),
        nc_probe(HOST_ADDR, port)
    );
    let run = w.sh(&name, &script).ok();
    assert_eq!(
        run.stdout(),
        format!("REFUSED-{port}\nCONNECTED-{port}\n"),
        "{}",
        run.explain()
    );
    let want = |got: &[Value]| {
        has(got, "10.0.2.2", port, false, "host-loopback")
            && has(got, HOST_ADDR, port, true, "open")
    };
    let mut got = both(&w, &name);
    for _ in 0..50 {
        if want(&got) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        got = both(&w, &name);
    }
    assert!(want(&got), "{got:?}");
    assert!(
        !got.iter()
            .any(|l| l["address"] == "10.0.2.2" && l["allowed"] == true),
        "{got:?}"
    );
}

#[test]
fn an_open_rootless_cage_is_refused_the_machines_loopback_and_says_so() {
    the_machines_loopback_is_logged_refused(World::rootless());
}

#[test]
fn a_sealed_cage_s_connections_are_logged() {
    sealed_cage_is_logged(World::new());
}

#[test]
fn a_sealed_rootless_cage_s_connections_are_logged() {
    sealed_cage_is_logged(World::rootless());
}

/// A small file system of the test's own: a tmpfs (mounted by root, the
/// world's user owning it), unmounted when dropped.
struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    fn new(w: &World, megabytes: u64) -> SmallDisk {
        let path = w.root.join("small-disk");
        fs::create_dir_all(&path).unwrap();
        let uid = w.user.map_or(0, |u| u.uid);
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={megabytes}m,mode=0755,uid={uid},gid={uid}"),
                "shrooms-test-small-disk",
            ])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "mount: {}", show_output(&out));
        SmallDisk { path }
    }

    fn dir(&self, w: &World, name: &str) -> PathBuf {
        let p = self.path.join(name);
        fs::create_dir_all(&p).unwrap();
        w.chown_all();
        p
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.path)
            .status();
    }
}

/// The loop a turn runs in the cage: a connection to the internet
/// stand-in every 0.3 s, each line with its uptime, until `stop` exists
/// (at most some 3 minutes); then one to `last`. `before` runs first.
fn probe_loop(port: u16, last: u16, stop: &Path, before: &str) -> String {
    format!(
        "{before}i=0; while [ $i -lt 600 ] && [ ! -e {stop} ]; do \
         echo \"T $(cut -d' ' -f1 /proc/uptime) $({probe})\"; sleep 0.3; i=$((i+1)); done; \
         {last_probe}",
        stop = stop.display(),
        probe = nc_probe(HOST_ADDR, port),
        last_probe = nc_probe(HOST_ADDR, last),
    )
}

/// The loop's lines: (uptime, connected).
fn loop_lines(out: &str) -> Vec<(f64, bool)> {
    out.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("T ")?;
            let (t, v) = rest.split_once(' ')?;
            Some((t.parse().ok()?, v.starts_with("CONNECTED")))
        })
        .collect()
}

/// Wait until `f` holds, at most `timeout`: whether it did.
fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// The cage's egress log as `cage show --json` gives it.
fn shown_log(w: &World, name: &str) -> Value {
    let show = w.run(&["cage", "show", name, "--json"]).ok().json();
    show["cage"]["egress_log"].clone()
}

/// The egress log fails closed. A cage fills the disk that holds the
/// state folder and its project (a small tmpfs of the test's own): the
/// listener cannot write, and from then on the cage's connections are
/// refused (before, the listener died and the cage ran on unlogged); the
/// turn says so on stderr, `cage show` and the status page say so; once
/// there is room again, the log is written again (a `cut` line says the
/// gap) and the cage's network is back, its connections logged. A
/// listener killed is the same: the cage is cut within the gate's few
/// seconds, `cage show` says its listener is not running, and the next
/// turn starts it again.
fn egress_log_fails_closed(mut w: World) {
    all_on_this_machine(&[HOST_ADDR]);
    let port = listen_everywhere();
    let last = listen_everywhere();
    let disk = SmallDisk::new(&w, 400);
    if w.user.is_some() {
        // Its own podman, started after the mount (`World::rootless_alone`).
        w.build_own_image();
    }
    w.state = disk.dir(&w, "state");
    let project = disk.dir(&w, "project");
    let name = w.session("egress-full");
    w.create(&name, &project, &[]);
    let s = w.serve(&[], &[]);

    // The turn: one connection, the disk filled from inside, then the loop.
    let stop = project.join("stop");
    let fill = project.join("fill");
    let script = probe_loop(
        port,
        last,
        &stop,
        &format!(
            "{}; dd if=/dev/zero of={} bs=1M 2>/dev/null; echo FILLED; ",
            nc_probe(HOST_ADDR, port),
            fill.display()
        ),
    );
    let child = w.spawn_env(&["cage", "exec", &name, "--", "sh", "-c", &script], &[]);
    // Until `cage show` says the log cannot be written (while the turn
    // starts, its cage runs a moment before its listener does: the log is
    // said to be down then too, for another reason). Not a failure here
    // when it does not: the loop's lines below tell whether the cage was
    // cut, and they are what an older program fails on.
    let said = wait_for(Duration::from_secs(90), || {
        let log = shown_log(&w, &name);
        log["problem"]
            .as_str()
            .is_some_and(|p| p.contains("no space is left"))
    });
    let down = uptime();
    let text = w.run(&["cage", "show", &name]).ok().stdout();
    let page = fetch(&w, &format!("{}/", s.url));
    // Some seconds of the loop while it is down.
    std::thread::sleep(Duration::from_secs(3));
    fs::remove_file(&fill).unwrap();
    let freed = uptime();
    let back = wait_for(Duration::from_secs(30), || {
        shown_log(&w, &name)["ok"] == true
    });
    fs::write(&stop, "").unwrap();
    w.chown_all();
    let run = finish("the turn", child);
    let out = run.stdout();
    assert!(out.contains("FILLED"), "{}", run.explain());
    let lines = loop_lines(&out);
    // Cut while the log could not be written. (Not every line of those
    // seconds: whatever frees a page of the small disk, a file the tool
    // replaces, lets the log be written again for a moment, and the cage
    // connect, logged.)
    let cut = lines
        .iter()
        .filter(|(t, connected)| *t > down && *t < freed && !connected)
        .count();
    assert!(
        cut >= 3,
        "the cage was not cut while its egress log could not be written:\n{}",
        run.explain()
    );
    assert!(said, "cage show never said the log could not be written");
    assert!(
        text.contains("egress    CUT: the egress log cannot be written (no space is left"),
        "{text}"
    );
    assert!(
        page.contains("CUT: the egress log cannot be written"),
        "the status page does not say the log is down:\n{page}"
    );
    assert!(back, "cage show never said the log was written again");
    let err = run.stderr();
    assert!(
        err.contains(&format!(
            "shrooms-agent: {name}: the egress log cannot be written (no space is left"
        )) && err.contains("the egress log is written again; the cage's network is back"),
        "the turn did not say it on stderr:\n{}",
        run.explain()
    );
    // Back: the last connection is logged, after a line that says the gap.
    assert!(
        out.contains(&format!("CONNECTED-{last}")),
        "{}",
        run.explain()
    );
    let mut got = Vec::new();
    wait_until(
        "the last connection's line",
        Duration::from_secs(10),
        || {
            got = both(&w, &name);
            has(&got, HOST_ADDR, last, true, "default")
        },
    );
    assert!(got.iter().any(|l| l["rule"] == "cut"), "{got:?}");
    // Every connection the cage made is in the log: the first, before the
    // disk was full, and each of the loop's that went through.
    let connected = 1 + lines.iter().filter(|(_, c)| *c).count();
    let logged = got
        .iter()
        .filter(|l| l["port"] == port && l["allowed"] == true)
        .count();
    assert!(
        logged >= connected,
        "{connected} connections, {logged} logged:\n{}\n{got:?}",
        run.explain()
    );

    // A listener killed: the cage is cut within the gate's timeout. (The
    // last turn's listener ends first, with its cage, so that the one
    // killed is the next turn's.)
    wait_until("the last listener to end", Duration::from_secs(20), || {
        cmdlines_containing(&format!("--session {name} ")).is_empty()
    });
    let stop2 = project.join("stop2");
    let script = probe_loop(port, last, &stop2, "");
    let child = w.spawn_env(&["cage", "exec", &name, "--", "sh", "-c", &script], &[]);
    let pid_file = w.state.join("sessions").join(format!("{name}.egress.pid"));
    let mut pid = 0;
    wait_until("the listener", Duration::from_secs(60), || {
        pid = fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        pid > 0 && shown_log(&w, &name)["ok"] == true
    });
    // SAFETY: kill(2) on the listener's pid, read from its pid file just now.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let dead = uptime();
    wait_until(
        "cage show to say the listener is not running",
        Duration::from_secs(30),
        || {
            shown_log(&w, &name)["problem"]
                .as_str()
                .is_some_and(|p| p.contains("listener is not running"))
        },
    );
    // The gate's timeout (3 s) and some lines past it.
    std::thread::sleep(Duration::from_secs(6));
    fs::write(&stop2, "").unwrap();
    w.chown_all();
    let run = finish("the turn", child);
    let lines = loop_lines(&run.stdout());
    let after: Vec<&(f64, bool)> = lines.iter().filter(|(t, _)| *t > dead + 4.0).collect();
    assert!(
        !after.is_empty() && after.iter().all(|(_, connected)| !connected),
        "the cage connected with its listener dead:\n{}",
        run.explain()
    );
    assert!(
        run.stderr()
            .contains("the egress log's listener is not running"),
        "{}",
        run.explain()
    );
    // The next turn starts a listener again, and the cage connects.
    let run = w.sh(&name, &nc_probe(HOST_ADDR, last)).ok();
    assert!(
        run.stdout().contains(&format!("CONNECTED-{last}")),
        "{}",
        run.explain()
    );
    drop(s);
    w.run(&["cage", "rm", &name]).ok();
}

#[test]
fn the_egress_log_fails_closed() {
    egress_log_fails_closed(World::new());
}

#[test]
fn the_egress_log_fails_closed_rootless() {
    egress_log_fails_closed(World::rootless_alone());
}

/// A flood of refusals cannot push an allowed connection out of the log:
/// a cage (under `internet`) connects to the internet stand-in once, then
/// sends 40,000 datagrams to the LAN stand-in, each refused and logged,
/// more than the log's files hold; the allowed connection is still in
/// `cage history --net` (refusals are kept in a file of their own), and so
/// are the flood's newest refusals.
fn refusal_flood_keeps_allowed_lines(w: World) {
    all_on_this_machine(&[HOST_ADDR, LAN_ADDR]);
    let port = listen_everywhere();
    let name = w.session("egress-flood");
    let project = w.dir(&format!("projects/{name}"));
    let tools = crate::attacks::Tools::new(&w);
    let t = crate::attacks::Tools::into(&tools, &w, &project);
    w.create(&name, &project, &[]);
    let p = t.join("probe");
    let script = format!(
        "{p} tcp {HOST_ADDR} {port}; {p} flood {LAN_ADDR} 9 40000 50",
        p = p.display()
    );
    let run = w.sh(&name, &script).ok();
    let out = run.stdout();
    assert!(
        out.contains(&format!("tcp {HOST_ADDR} CONNECTED"))
            && out.contains("flood SENT 0 FAILED 40000"),
        "{}",
        run.explain()
    );
    let h = w
        .run(&["cage", "history", &name, "--net", "--json"])
        .ok()
        .json();
    let lines = h["connections"].as_array().unwrap();
    let refused = lines
        .iter()
        .filter(|l| l["address"] == LAN_ADDR && l["allowed"] == false && l["rule"] == "private")
        .count();
    assert!(
        has(lines, HOST_ADDR, port, true, "default"),
        "the allowed connection was pushed out of the log by {refused} refusals"
    );
    // The flood filled the refusals' files past their bound: more lines
    // than one file holds were written.
    let rotated = w
        .state
        .join("sessions")
        .join(format!("{name}.egress-refused.1.jsonl"));
    assert!(
        refused > 5000 && rotated.exists(),
        "the flood was not logged past the bound ({refused} refusals shown)"
    );
}

#[test]
fn a_refusal_flood_keeps_allowed_connections_in_the_log() {
    refusal_flood_keeps_allowed_lines(World::new());
}

#[test]
fn a_refusal_flood_keeps_allowed_connections_in_the_log_rootless() {
    refusal_flood_keeps_allowed_lines(World::rootless());
}
