//! Every podman call of `cage create`, `rm`, `move` and `exec` failing, and
//! the tool killed (SIGKILL) right after each, against real podman,
//! rootful and rootless: the config's podman is a wrapper that runs podman
//! and counts its calls (every call the tool waits on: the egress log's
//! listener, which runs beside the cage, is not one). At the chosen call
//! it either fails instead of running podman (status 125 and an `Error:`
//! line, as podman fails), or runs it and then kills its parent, the tool.
//! The next command must find a consistent session and work: no container
//! without a record, no second container, no record whose container the
//! tool removed, no intent, temporary file or lock left.
//!
//! A failure is modelled as podman's own: refused before it changes
//! anything (podman takes back a half-made container itself, and its
//! commands are transactions in its database), and the same model as the
//! recording fake's in the unit tests (`FakePodman::fail_call`). A call
//! that does its work and then fails is the crash after it, seen from
//! the other side: what the tool has not recorded, its intent repairs.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::common::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// podman is not run: status 125, `Error: injected failure`.
    Fail,
    /// podman runs, then the tool is killed.
    Kill,
}

/// A podman that counts its calls and, at the chosen one, fails or kills
/// the tool after it.
struct Wrapper {
    count: PathBuf,
    at: PathBuf,
}

impl Wrapper {
    fn new(w: &World) -> Wrapper {
        let program = w.root.join("faulty-podman");
        let count = w.root.join("podman-count");
        let at = w.root.join("fault-at");
        fs::write(
            &program,
            format!(
                "#!/bin/sh\n\
                 case \" $* \" in *' {listen} '*) exec '{podman}' \"$@\" ;; esac\n\
                 n=$(( $(cat '{count}' 2>/dev/null || echo 0) + 1 ))\n\
                 echo $n > '{count}.'$$ && mv -f '{count}.'$$ '{count}'\n\
                 at=$(cat '{at}' 2>/dev/null)\n\
                 if [ \"$at\" = \"$n Fail\" ]; then echo 'Error: injected failure' >&2; exit 125; fi\n\
                 '{podman}' \"$@\"\n\
                 st=$?\n\
                 if [ \"$at\" = \"$n Kill\" ]; then kill -KILL $PPID; fi\n\
                 exit $st\n",
                count = count.display(),
                at = at.display(),
                podman = podman_program(),
                // The egress log's listener runs as long as the cage does,
                // started and not waited for (`egress::ensure_listener`):
                // not a call the tool waits on, so not one to fault.
                listen = "egress-listen",
            ),
        )
        .unwrap();
        fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
        w.write_config(&format!("podman = \"{}\"", program.display()));
        w.chown_all();
        Wrapper { count, at }
    }

    fn count(&self) -> usize {
        fs::read_to_string(&self.count)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }

    /// `fault` at the `n`th call from now.
    fn fault(&self, n: usize, fault: Fault) {
        fs::write(&self.at, format!("{} {fault:?}\n", self.count() + n)).unwrap();
    }

    fn off(&self) {
        let _ = fs::remove_file(&self.at);
    }
}

/// The session as the next command left it: consistent, or why not.
fn check(w: &World, s: &str) -> Result<(), String> {
    let containers = w.containers_of(s);
    let record = w.record_path(s);
    let named = if record.exists() {
        w.record(s)["cage"]["container"]
            .as_str()
            .map(str::to_string)
    } else {
        None
    };
    let expected: Vec<String> = named.iter().cloned().collect();
    if containers != expected {
        return Err(format!(
            "containers {containers:?}, the record names {named:?}"
        ));
    }
    let sessions = w.state.join("sessions");
    for e in fs::read_dir(&sessions).unwrap().flatten() {
        let f = e.file_name().to_string_lossy().into_owned();
        if f.starts_with(&format!("{s}@intent")) || f.contains(".tmp-") {
            return Err(format!("{f} is left"));
        }
    }
    if record.exists()
        && let Some(row) = w.ls_row(s)
        && !row["busy"].is_null()
    {
        return Err(format!("busy: {}", row["busy"]));
    }
    Ok(())
}

/// `fault` at each call of `op` in turn, on a session `setup` made; then
/// run `next` and check.
fn at_each_call(
    w: &World,
    fault: Fault,
    what: &str,
    setup: impl Fn(&World, &str),
    op: impl Fn(&World, &str) -> Run,
    next: impl Fn(&World, &str) -> Run,
) {
    let k = Wrapper::new(w);
    // The first command of a world asks podman about itself too: counted
    // on the second.
    let s = w.session(what);
    setup(w, &s);
    op(w, &s).ok();
    let s = w.session(what);
    setup(w, &s);
    let before = k.count();
    op(w, &s).ok();
    let n = k.count().saturating_sub(before);
    assert!(n > 0, "{what} made no podman call");
    let mut bad = Vec::new();
    for i in 1..=n {
        let s = w.session(what);
        setup(w, &s);
        let start = k.count();
        k.fault(i, fault);
        let first = op(w, &s);
        k.off();
        let said = |why: &str| format!("{what}, call {i} {fault:?}: {why}");
        // (A dead turn's watcher may still be calling podman beside this
        // count, whose file the wrapper replaces whole, never half-written.)
        // (Fewer calls this time: a removal podman 4.3 refused once,
        // "device or resource busy", and the tool tried again, in the run
        // that counted them.)
        let made = k.count().saturating_sub(start);
        if fault == Fault::Kill && first.out.status.success() && made >= i {
            bad.push(said("not killed"));
        }
        // A failure changes nothing, or takes back what it changed.
        if fault == Fault::Fail
            && let Err(why) = check(w, &s)
        {
            bad.push(said(&format!(
                "after the failure: {why}\n{}",
                first.explain()
            )));
        }
        let next = next(w, &s);
        if next.stderr().contains("removed by hand") || next.stderr().contains("is busy") {
            bad.push(said(&next.explain()));
        }
        // After a failure, the next command does its work; after a kill,
        // or a failure the tool overcame (a removal is tried again), the
        // work may be done already (a create: the session exists).
        if fault == Fault::Fail && !first.out.status.success() && !next.out.status.success() {
            bad.push(said(&format!(
                "the next command failed\n{}",
                next.explain()
            )));
        }
        if let Err(why) = check(w, &s) {
            bad.push(said(&format!("{why}\n{}", next.explain())));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

fn made(w: &World, s: &str) {
    let dir = w.dir(&format!("p-{s}"));
    w.create(s, &dir, &[]);
}

fn create(w: &World, fault: Fault) {
    at_each_call(
        w,
        fault,
        "crcreate",
        |w, s| {
            w.dir(&format!("p-{s}"));
        },
        |w, s| {
            let dir = w.root.join(format!("p-{s}"));
            w.run(&["cage", "create", s, "--dir", &dir.to_string_lossy()])
        },
        |w, s| {
            let dir = w.root.join(format!("p-{s}"));
            w.run(&["cage", "create", s, "--dir", &dir.to_string_lossy()])
        },
    );
}

fn rm(w: &World, fault: Fault) {
    at_each_call(
        w,
        fault,
        "crrm",
        made,
        |w, s| w.run(&["cage", "rm", s]),
        |w, s| w.run(&["cage", "start", s]),
    );
}

fn moved(w: &World, fault: Fault) {
    at_each_call(
        w,
        fault,
        "crmove",
        made,
        |w, s| w.run(&["cage", "move", s]),
        |w, s| w.run(&["cage", "start", s]),
    );
}

fn exec(w: &World, fault: Fault) {
    at_each_call(
        w,
        fault,
        "crexec",
        made,
        |w, s| w.run(&["cage", "exec", s, "--", "true"]),
        |w, s| w.run(&["cage", "exec", s, "--", "true"]),
    );
}

/// A session moved into a sealed cage (its token, its rules).
fn sealed(w: &World, fault: Fault) {
    let token = crate::sealed::token_file(w);
    at_each_call(
        w,
        fault,
        "crseal",
        made,
        |w, s| {
            let token = token.to_string_lossy();
            w.run(&["cage", "move", s, "--sealed", "--sealed-token", &token])
        },
        |w, s| w.run(&["cage", "start", s]),
    );
}

#[test]
fn create_killed_after_each_podman_call() {
    create(&World::new(), Fault::Kill);
}

#[test]
fn create_killed_after_each_podman_call_rootless() {
    create(&World::rootless(), Fault::Kill);
}

#[test]
fn create_with_each_podman_call_failing() {
    create(&World::new(), Fault::Fail);
}

#[test]
fn create_with_each_podman_call_failing_rootless() {
    create(&World::rootless(), Fault::Fail);
}

#[test]
fn rm_killed_after_each_podman_call() {
    rm(&World::new(), Fault::Kill);
}

#[test]
fn rm_killed_after_each_podman_call_rootless() {
    rm(&World::rootless(), Fault::Kill);
}

#[test]
fn rm_with_each_podman_call_failing() {
    rm(&World::new(), Fault::Fail);
}

#[test]
fn rm_with_each_podman_call_failing_rootless() {
    rm(&World::rootless(), Fault::Fail);
}

#[test]
fn move_killed_after_each_podman_call() {
    moved(&World::new(), Fault::Kill);
}

#[test]
fn move_killed_after_each_podman_call_rootless() {
    moved(&World::rootless(), Fault::Kill);
}

#[test]
fn move_with_each_podman_call_failing() {
    moved(&World::new(), Fault::Fail);
}

#[test]
fn move_with_each_podman_call_failing_rootless() {
    moved(&World::rootless(), Fault::Fail);
}

#[test]
fn exec_killed_after_each_podman_call() {
    exec(&World::new(), Fault::Kill);
}

#[test]
fn exec_killed_after_each_podman_call_rootless() {
    exec(&World::rootless(), Fault::Kill);
}

#[test]
fn exec_with_each_podman_call_failing() {
    exec(&World::new(), Fault::Fail);
}

#[test]
fn exec_with_each_podman_call_failing_rootless() {
    exec(&World::rootless(), Fault::Fail);
}

#[test]
fn move_sealed_killed_after_each_podman_call() {
    sealed(&World::new(), Fault::Kill);
}

#[test]
fn move_sealed_with_each_podman_call_failing() {
    sealed(&World::new(), Fault::Fail);
}
