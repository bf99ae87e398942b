//! A cage starts every time: `cage exec` on a stopped cage (start, rules,
//! exec, stop) and `cage create`/`exec`/`rm` in loops, rootful and
//! rootless, while other containers start and stop beside them (what
//! shares podman's network state with the cages: rootful, the bridge's
//! address leases). One start that passes proves little; a start that
//! fails one time in twenty does not pass a loop.
//!
//! The size of the loops: `SHROOMS_SOAK_CYCLES` start/exec/stop cycles and
//! `SHROOMS_SOAK_CREATES` create/exec/rm cycles (scripts/test's long mode
//! runs 200 and 50; an ordinary run the defaults below, which fit CI).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Instant;

use crate::common::*;

fn size(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Containers that start and stop beside the loop until it is done, as
/// the same user (rootful ones in a user namespace of their own, as
/// rootful cages are): other work on the same podman.
struct Churn {
    done: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<usize>>,
}

impl Churn {
    fn start(user: Option<&'static TestUser>) -> Churn {
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = thread::spawn(move || {
            let mut runs = 0;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("shrooms-soak-churn-{}-{runs}", std::process::id());
                let mut args = vec!["run", "--rm", "--name", &name];
                if user.is_none() {
                    args.push("--userns=auto:size=65536");
                }
                args.extend([IMAGE, "true"]);
                // Its own failures are not the test's: what counts is that
                // it keeps podman busy beside the loop.
                let _ = podman(user, &args);
                runs += 1;
            }
            runs
        });
        Churn {
            done,
            thread: Some(thread),
        }
    }

    /// Stop, and say how many containers ran beside.
    fn stop(mut self) -> usize {
        self.done.store(true, Ordering::SeqCst);
        self.thread.take().map_or(0, |t| t.join().unwrap_or(0))
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
    }
}

/// `cycles` times `cage exec` on the stopped cage: each starts it, loads
/// its rules, runs a command that writes its number into the project,
/// and stops it. Every one must pass, and the cage be stopped after it.
fn exec_cycles(w: &World, cycles: usize) {
    let name = w.session("soak");
    let dir = std::fs::canonicalize(w.dir("soak-project")).unwrap();
    w.create(&name, &dir, &[]).ok();
    let container = w.container(&name);
    let churn = Churn::start(w.user);
    let t0 = Instant::now();
    let mut failed = Vec::new();
    for i in 0..cycles {
        let r = w.run(&[
            "cage",
            "exec",
            &name,
            "--",
            "sh",
            "-c",
            &format!("echo {i} > n"),
        ]);
        if r.code() != 0 {
            failed.push(format!("cycle {i}: {}", r.explain()));
            continue;
        }
        let n = std::fs::read_to_string(dir.join("n")).unwrap_or_default();
        if n.trim() != i.to_string() {
            failed.push(format!("cycle {i}: the command did not run (n = {n:?})"));
        }
    }
    let beside = churn.stop();
    assert!(
        failed.is_empty(),
        "{} of {cycles} start/exec/stop cycles failed ({beside} containers ran beside):\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert_eq!(
        w.container_state(&container).as_deref(),
        Some("exited"),
        "the cage is stopped after its last exec"
    );
    eprintln!(
        "soak: {cycles} start/exec/stop cycles in {:.1} s, {beside} containers beside",
        t0.elapsed().as_secs_f64()
    );
}

/// `cycles` times a new cage: create, exec, rm. Nothing is left.
fn create_cycles(w: &World, cycles: usize) {
    let dir = std::fs::canonicalize(w.dir("soak-made")).unwrap();
    let churn = Churn::start(w.user);
    let t0 = Instant::now();
    let mut failed = Vec::new();
    for i in 0..cycles {
        let name = w.session("made");
        let steps: [&[&str]; 3] = [
            &["cage", "create", &name, "--dir", &dir.to_string_lossy()],
            &["cage", "exec", &name, "--", "true"],
            &["cage", "rm", &name],
        ];
        for args in steps {
            let r = w.run(args);
            if r.code() != 0 {
                failed.push(format!("cycle {i}: {}", r.explain()));
                break;
            }
        }
        if !w.containers_of(&name).is_empty() {
            failed.push(format!("cycle {i}: {name}'s container is left"));
        }
    }
    let beside = churn.stop();
    assert!(
        failed.is_empty(),
        "{} of {cycles} create/exec/rm cycles failed ({beside} containers ran beside):\n{}",
        failed.len(),
        failed.join("\n")
    );
    eprintln!(
        "soak: {cycles} create/exec/rm cycles in {:.1} s, {beside} containers beside",
        t0.elapsed().as_secs_f64()
    );
}

const CYCLES: usize = 30;
const CREATES: usize = 10;

#[test]
fn a_cage_starts_every_time_rootful() {
    exec_cycles(&World::new(), size("SHROOMS_SOAK_CYCLES", CYCLES));
}

#[test]
fn a_cage_starts_every_time_rootless() {
    exec_cycles(&World::rootless(), size("SHROOMS_SOAK_CYCLES", CYCLES));
}

#[test]
fn a_new_cage_starts_every_time_rootful() {
    create_cycles(&World::new(), size("SHROOMS_SOAK_CREATES", CREATES));
}

#[test]
fn a_new_cage_starts_every_time_rootless() {
    create_cycles(&World::rootless(), size("SHROOMS_SOAK_CREATES", CREATES));
}

/// podman's network backend for root: "cni" (podman 4.3 here) or
/// "netavark" (the podman-5 lane).
fn network_backend() -> String {
    let out = podman(None, &["info", "--format", "{{.Host.NetworkBackend}}"]);
    assert!(out.status.success(), "{}", show_output(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The failure the loops above hunt, made on purpose: CNI's lease of a
/// rootful cage's address left from its last run (what a teardown that
/// goes wrong leaves: containers/podman#18753, #9465 and #11558). podman alone
/// refuses the next start ("duplicate allocation is not allowed"); the
/// cage starts, and the lease is gone. With netavark (podman 5's backend,
/// the podman-5 lane) there is no such file to leave: said, not skipped.
#[test]
fn a_cage_starts_though_its_last_address_lease_was_left_rootful() {
    let backend = network_backend();
    if backend != "cni" {
        assert_eq!(backend, "netavark", "a backend this test does not know");
        assert!(podman5_lane(), "netavark outside the podman-5 lane");
        return;
    }
    let w = World::new();
    let name = w.session("lease");
    let dir = std::fs::canonicalize(w.dir("lease-project")).unwrap();
    w.create(&name, &dir, &[]).ok();
    let container = w.container(&name);
    let out = podman(None, &["inspect", "--format", "{{.Id}}", &container]);
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(id.len(), 64, "{}", show_output(&out));
    // An address of the default network's range that no container has.
    let leases = std::path::Path::new("/var/lib/cni/networks/podman");
    let lease = (2..250)
        .map(|i| leases.join(format!("10.88.254.{i}")))
        .find(|p| !p.exists())
        .expect("a free address");
    for round in 0..3 {
        std::fs::create_dir_all(leases).unwrap();
        std::fs::write(&lease, format!("{id}\r\neth0")).unwrap();
        let r = w.run(&["cage", "exec", &name, "--", "true"]);
        let _ = std::fs::remove_file(&lease);
        assert_eq!(r.code(), 0, "round {round}: {}", r.explain());
    }
    // podman alone, for the record: the same lease refuses its start.
    std::fs::write(&lease, format!("{id}\r\neth0")).unwrap();
    let out = podman(None, &["start", &container]);
    let _ = std::fs::remove_file(&lease);
    let _ = podman(None, &["stop", &container]);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("duplicate allocation"),
        "podman alone started it: the lease planted here is not the failure it stands for: {}",
        show_output(&out)
    );
}
