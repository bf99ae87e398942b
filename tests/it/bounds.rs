//! What a cage controls is read within a bound (docs/network.md, "Network
//! policy"): a cage that grows its own hosts file does not grow the
//! memory of the command that loads its rules. Rootful and rootless.

use std::time::{Duration, Instant};

use crate::common::*;

/// The peak resident memory of process `pid` so far (VmHWM, proc(5)), in
/// KiB; None once it is gone.
pub fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The shrooms-agent process among those whose command line holds
/// `words` (the test user's runs through runuser and env, which execs it).
pub fn tool_pid(words: &str) -> Option<u32> {
    let program = bin().to_string_lossy().into_owned();
    cmdlines_containing(words)
        .into_iter()
        .find(|(_, line)| line.starts_with(&program))
        .map(|(pid, _)| pid)
}

/// The most it may hold: a command that loads a cage's rules stays far
/// below (a few tens of MiB); one that read the grown file whole went past
/// twice its size.
const MOST_KIB: u64 = 80 * 1024;
/// What the cage appends to its hosts file.
const GROWN: u64 = 100_000_000;

/// A cage beside a turn appends 100 MB to its hosts file; `cage exec
/// --join`, which loads the cage's rules again (and its pinned names into
/// that file), stays within 80 MiB, and the cage finds its hosts file cut
/// back to its first lines, under 1 MiB. Before, the file was read whole:
/// a cage that appended 309 MB had the command peak at 615 MB.
fn a_grown_hosts_file_is_read_within_a_bound(w: World) {
    let name = w.session("hosts");
    let d = w.dir("hosts");
    w.create(&name, &d, &[]);
    let held = w.hold(&name, &d);
    let container = w.container(&name);
    let grow = format!(
        "head -c {GROWN} /dev/zero | tr '\\0' x >> /etc/hosts; echo >> /etc/hosts; wc -c < /etc/hosts"
    );
    let out = w.podman(&["exec", &container, "sh", "-c", &grow]);
    let size: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(
        size > GROWN,
        "the hosts file did not grow:\n{}",
        show_output(&out)
    );

    let words = format!("exec --join {name} --");
    let mut child = w.spawn_env(
        &[
            "cage",
            "exec",
            "--join",
            &name,
            "--",
            "sh",
            "-c",
            "wc -c < /etc/hosts; grep -c localhost /etc/hosts; sleep 3",
        ],
        &[],
    );
    let mut peak = 0;
    let until = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() && Instant::now() < until {
        if let Some(kib) = tool_pid(&words).and_then(peak_kib) {
            peak = peak.max(kib);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let run = finish("cage exec --join", child).ok();
    eprintln!("cage exec --join beside a {size}-byte hosts file peaked at {peak} KiB");
    assert!(
        peak > 0,
        "the command's memory was never seen:\n{}",
        run.explain()
    );
    assert!(
        peak < MOST_KIB,
        "cage exec --join peaked at {peak} KiB beside a {size}-byte hosts file:\n{}",
        run.explain()
    );
    let mut lines = run
        .stdout()
        .lines()
        .map(str::to_string)
        .collect::<Vec<_>>()
        .into_iter();
    let now: u64 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(u64::MAX);
    assert!(
        now <= 1 << 20,
        "the hosts file is {now} bytes:\n{}",
        run.explain()
    );
    // podman's own lines are still there.
    let localhost: u64 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0);
    assert!(localhost > 0, "{}", run.explain());
    held.release().ok();
}

#[test]
fn bounds_a_grown_hosts_file_is_read_within_a_bound() {
    a_grown_hosts_file_is_read_within_a_bound(World::new());
}

#[test]
fn bounds_a_grown_hosts_file_is_read_within_a_bound_rootless() {
    a_grown_hosts_file_is_read_within_a_bound(World::rootless());
}
