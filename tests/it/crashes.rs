//! The tool killed (SIGKILL) right after each podman call of `cage
//! create`, `rm`, `move` and `exec`, against real podman, rootful and
//! rootless: the config's podman is a wrapper that runs podman, then, after
//! the chosen call, kills its parent, the tool (every call the tool waits
//! on: the egress log's listener, which runs beside the cage, is not one). The next command must find
//! a consistent session and work: no container without a record, no second
//! container, no record whose container the tool removed, no intent,
//! temporary file or lock left.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::common::*;

/// A podman that counts its calls and kills the tool after the chosen one.
struct Killing {
    count: PathBuf,
    at: PathBuf,
}

impl Killing {
    fn new(w: &World) -> Killing {
        let program = w.root.join("killing-podman");
        let count = w.root.join("podman-count");
        let at = w.root.join("crash-at");
        fs::write(
            &program,
            format!(
                "#!/bin/sh\n\
                 case \" $* \" in *' {listen} '*) exec '{podman}' \"$@\" ;; esac\n\
                 n=$(( $(cat '{count}' 2>/dev/null || echo 0) + 1 ))\n\
                 echo $n > '{count}'\n\
                 '{podman}' \"$@\"\n\
                 st=$?\n\
                 if [ \"$n\" = \"$(cat '{at}' 2>/dev/null)\" ]; then kill -KILL $PPID; fi\n\
                 exit $st\n",
                count = count.display(),
                at = at.display(),
                podman = podman_program(),
                // The egress log's listener runs as long as the cage does,
                // started and not waited for (`egress::ensure_listener`):
                // not a call the tool waits on, so not one to die after.
                listen = "egress-listen",
            ),
        )
        .unwrap();
        fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
        w.write_config(&format!("podman = \"{}\"", program.display()));
        w.chown_all();
        Killing { count, at }
    }

    fn count(&self) -> usize {
        fs::read_to_string(&self.count)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Kill the tool after the `n`th call from now.
    fn crash_after(&self, n: usize) {
        fs::write(&self.at, format!("{}\n", self.count() + n)).unwrap();
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

/// Kill `op` after each of its calls in turn, on a session `setup` made;
/// then run `next` and check.
fn after_each_call(
    w: &World,
    what: &str,
    setup: impl Fn(&World, &str),
    op: impl Fn(&World, &str) -> Run,
    next: impl Fn(&World, &str) -> Run,
) {
    let k = Killing::new(w);
    // The first command of a world asks podman about itself too: counted
    // on the second.
    let s = w.session(what);
    setup(w, &s);
    op(w, &s).ok();
    let s = w.session(what);
    setup(w, &s);
    let before = k.count();
    op(w, &s).ok();
    let n = k.count() - before;
    assert!(n > 0, "{what} made no podman call");
    let mut bad = Vec::new();
    for i in 1..=n {
        let s = w.session(what);
        setup(w, &s);
        k.crash_after(i);
        let killed = op(w, &s);
        k.off();
        if killed.out.status.success() {
            bad.push(format!("{what}, call {i}: not killed"));
        }
        let next = next(w, &s);
        if next.stderr().contains("removed by hand") || next.stderr().contains("is busy") {
            bad.push(format!("{what}, call {i}: {}", next.explain()));
        }
        if let Err(why) = check(w, &s) {
            bad.push(format!("{what}, call {i}: {why}\n{}", next.explain()));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

fn made(w: &World, s: &str) {
    let dir = w.dir(&format!("p-{s}"));
    w.create(s, &dir, &[]);
}

fn create(w: &World) {
    after_each_call(
        w,
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

fn rm(w: &World) {
    after_each_call(
        w,
        "crrm",
        made,
        |w, s| w.run(&["cage", "rm", s]),
        |w, s| w.run(&["cage", "start", s]),
    );
}

fn moved(w: &World) {
    after_each_call(
        w,
        "crmove",
        made,
        |w, s| w.run(&["cage", "move", s]),
        |w, s| w.run(&["cage", "start", s]),
    );
}

fn exec(w: &World) {
    after_each_call(
        w,
        "crexec",
        made,
        |w, s| w.run(&["cage", "exec", s, "--", "true"]),
        |w, s| w.run(&["cage", "exec", s, "--", "true"]),
    );
}

#[test]
fn create_killed_after_each_podman_call() {
    create(&World::new());
}

#[test]
fn create_killed_after_each_podman_call_rootless() {
    create(&World::rootless());
}

#[test]
fn rm_killed_after_each_podman_call() {
    rm(&World::new());
}

#[test]
fn rm_killed_after_each_podman_call_rootless() {
    rm(&World::rootless());
}

#[test]
fn move_killed_after_each_podman_call() {
    moved(&World::new());
}

#[test]
fn move_killed_after_each_podman_call_rootless() {
    moved(&World::rootless());
}

#[test]
fn exec_killed_after_each_podman_call() {
    exec(&World::new());
}

#[test]
fn exec_killed_after_each_podman_call_rootless() {
    exec(&World::rootless());
}
