//! End-to-end tests of what a cage may do to the machine's files and who
//! may start one: a fixed set of capabilities and folders mounted nosuid,
//! nodev; rootful podman only when the config allows it; a project that is
//! a folder of the user's own; and no harness run outside a cage unasked.
//! Each test performs the attack itself.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::*;

/// A small static probe for what busybox has no applet for: `setcap FILE`
/// sets a file capability with setxattr("security.capability"), as
/// setcap(8) does; `euid` prints the effective user id; `as UID PROGRAM
/// ARGS` becomes that user and group (as apt does for its downloads) and
/// runs PROGRAM.
const PROBE_C: &str = r#"
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "setcap") == 0) {
        /* struct vfs_cap_data, revision 2, effective: CAP_NET_RAW permitted. */
        unsigned int cap[5] = {0x02000001u, 1u << 13, 0, 0, 0};
        if (setxattr(argv[2], "security.capability", cap, sizeof cap, 0) == 0) {
            puts("SETCAP-SET");
            return 0;
        }
        printf("SETCAP-REFUSED %s\n", strerror(errno));
        return 1;
    }
    if (argc >= 2 && strcmp(argv[1], "euid") == 0) {
        printf("EUID-%u\n", (unsigned)geteuid());
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "as") == 0) {
        unsigned id = (unsigned)strtoul(argv[2], NULL, 10);
        if (setgroups(0, NULL) != 0 || setgid(id) != 0 || setuid(id) != 0) {
            printf("AS-REFUSED %s\n", strerror(errno));
            return 1;
        }
        execv(argv[3], argv + 3);
        printf("EXEC-FAILED %s\n", strerror(errno));
        return 1;
    }
    fputs("usage: probe setcap FILE | probe euid | probe as UID PROGRAM ARGS\n", stderr);
    return 2;
}
"#;

/// The probe, compiled once per test process with `gcc -static` (the test
/// image has no C library).
fn probe() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("policy-probe-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let src = dir.join("probe.c");
        fs::write(&src, PROBE_C).unwrap();
        let out = dir.join("probe");
        let r = Command::new("gcc")
            .args(["-static", "-O2", "-o"])
            .arg(&out)
            .arg(&src)
            .output()
            .expect("gcc is not installed: run scripts/test (scripts/setup-host installs it)");
        assert!(r.status.success(), "gcc: {}", show_output(&r));
        out
    })
}

/// The token the sealed cages of these tests are given.
fn token_file(w: &World) -> PathBuf {
    let p = w.file("sealed-token", "sk-ant-oat01-test-token-for-policy\n");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    w.chown_all();
    p
}

/// Rewrite a rootful world's config without `allow_root = true`.
fn config_without_allow_root(w: &World) {
    w.write_config("");
    let text = fs::read_to_string(&w.config).unwrap();
    assert!(text.contains("allow_root = true"), "{text}");
    let kept: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("allow_root"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&w.config, kept).unwrap();
}

/// What root inside tries, as an attacker and as a package manager would.
fn attack_script(project: &Path) -> String {
    let p = project.display();
    format!(
        "mkdir -p /tmp; cd {p}; \
         mknod /tmp/b b 7 0 && echo MKNOD-MADE || echo MKNOD-REFUSED; \
         mknod {p}/b b 7 0 && echo MKNOD-MADE || echo MKNOD-REFUSED; \
         touch /tmp/f {p}/f; ./probe setcap /tmp/f; ./probe setcap {p}/f; \
         cp probe /tmp/probe-root; cp probe suid-probe; \
         chown 0:0 /tmp/probe-root suid-probe; chmod 4755 /tmp/probe-root suid-probe; \
         echo ROOTFS-$(./probe as 1234 /tmp/probe-root euid); \
         echo PROJECT-$(./probe as 1234 {p}/suid-probe euid); \
         echo x > /tmp/o; chown 1234:1234 /tmp/o && chmod 000 /tmp/o && echo y >> /tmp/o \
           && echo OWNED-$(stat -c %u:%g:%a /tmp/o); \
         echo AS-$(./probe as 1234 /bin/id -u):$(./probe as 1234 /bin/id -g); \
         awk '{{print \"MOUNT \" $2 \" \" $4}}' /proc/mounts"
    )
}

/// Check what the attack script saw: no device node, no file capability,
/// no set-user-ID through a folder of the machine, every folder of the
/// machine under `under` (and the outbox) mounted nosuid,nodev; and what a
/// package manager needs still works.
fn check_attack(out: &str, under: &Path, what: &str) {
    assert!(!out.contains("MKNOD-MADE"), "{what}: a device node\n{out}");
    assert_eq!(out.matches("MKNOD-REFUSED").count(), 2, "{what}\n{out}");
    assert!(
        !out.contains("SETCAP-SET"),
        "{what}: a file capability\n{out}"
    );
    assert_eq!(out.matches("SETCAP-REFUSED").count(), 2, "{what}\n{out}");
    // set-user-ID works in the image's own folders (the probe is sound) ...
    assert!(out.contains("ROOTFS-EUID-0"), "{what}\n{out}");
    // ... and not from a folder of the machine.
    assert!(out.contains("PROJECT-EUID-1234"), "{what}: setuid\n{out}");
    assert!(out.contains("OWNED-1234:1234:0"), "{what}\n{out}");
    assert!(out.contains("AS-1234:1234"), "{what}\n{out}");
    let under = under.to_string_lossy();
    let mounts: Vec<(&str, &str)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("MOUNT "))
        .filter_map(|l| l.split_once(' '))
        .filter(|(at, _)| at.starts_with(under.as_ref()) || *at == "/outbox")
        .collect();
    assert!(mounts.len() >= 3, "{what}: {mounts:?}\n{out}");
    for (at, opts) in &mounts {
        let opts: Vec<&str> = opts.split(',').collect();
        assert!(
            opts.contains(&"nosuid") && opts.contains(&"nodev"),
            "{what}: {at} is mounted {opts:?}"
        );
    }
}

/// Root inside an ordinary and a sealed cage, rootful and rootless, cannot
/// make a block device node or set a file capability, and a set-user-ID
/// program it leaves in its project does nothing there; chown to another
/// user, chmod and becoming another user (what apt-get does) still work.
#[test]
fn no_device_nodes_file_capabilities_or_setuid_and_package_work_still_works() {
    for w in [World::new(), World::rootless()] {
        let who = if w.user.is_some() {
            "rootless"
        } else {
            "rootful"
        };
        let token = token_file(&w);
        let token = token.to_string_lossy().into_owned();
        for sealed in [false, true] {
            let name = w.session(if sealed { "caps-sealed" } else { "caps" });
            let project = fs::canonicalize(w.dir(&format!("projects/{name}"))).unwrap();
            fs::copy(probe(), project.join("probe")).unwrap();
            fs::set_permissions(project.join("probe"), fs::Permissions::from_mode(0o755)).unwrap();
            w.chown_all();
            let extra: Vec<&str> = if sealed {
                vec!["--sealed", "--sealed-token", &token]
            } else {
                vec![]
            };
            w.create(&name, &project, &extra);
            let r = w.sh(&name, &attack_script(&project)).ok();
            let root = fs::canonicalize(&w.root).unwrap();
            check_attack(
                &r.stdout(),
                &root,
                &format!("{who}, {}", if sealed { "sealed" } else { "ordinary" }),
            );
        }
    }
}

/// As root, cage commands refuse without `allow_root = true`, before any
/// cage is made: the design is rootless. `doctor` and `serve` say the
/// same. With `allow_root = true`, a cage runs in a user namespace of its
/// own: a set-user-ID root program it leaves in its project makes another
/// user of the machine the cage's uid, not root.
#[test]
fn as_root_cage_commands_refuse_without_allow_root() {
    let w = World::new();
    config_without_allow_root(&w);
    let name = w.session("asroot");
    let project = fs::canonicalize(w.dir("asroot")).unwrap();
    let p = project.to_string_lossy().into_owned();
    let r = w.run(&["cage", "create", &name, "--dir", &p]).code_is(2);
    let err = r.stderr();
    for words in [
        "runs as root",
        "chowned to the cage's own uid",
        "as your own user",
        "allow_root = true",
        &w.config.to_string_lossy(),
    ] {
        assert!(err.contains(words), "{words}:\n{}", r.explain());
    }
    assert!(w.containers_of(&name).is_empty());
    assert!(!w.record_path(&name).exists());
    assert!(!project.join("suid-left").exists());
    // Every cage command, and serve, the same way.
    // (exec's own refusals are 125: its status is the command's.)
    for (args, code) in [
        (vec!["cage", "ls"], 2),
        (vec!["cage", "exec", &name, "--", "true"], 125),
        (vec!["serve", "--listen", "127.0.0.1:1"], 2),
    ] {
        let r = w.run(&args).code_is(code);
        assert!(r.stderr().contains("allow_root = true"), "{}", r.explain());
    }
    let r = w.run(&["doctor", "--json"]).code_is(1);
    let report = r.json();
    let line = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "rootless")
        .cloned()
        .unwrap_or_default();
    assert_eq!(line["status"], "fail", "{report:#}");
    assert!(
        line["detail"]
            .as_str()
            .unwrap_or("")
            .contains("allow_root = true"),
        "{report:#}"
    );
    assert!(w.containers_of(&name).is_empty());

    // allow_root = true: root in the cage is no one outside. The cage's
    // root leaves a set-user-ID root program in the project; outside, it
    // belongs to the cage's own uid, and another user who runs it gets
    // that uid, never root (the machine's /tmp honours set-user-ID: the
    // program does change its euid).
    w.write_config("");
    fs::copy(probe(), project.join("probe")).unwrap();
    w.create(&name, &project, &[]);
    w.sh(
        &name,
        "cp probe suid-left && chown 0:0 suid-left && chmod 4755 suid-left",
    )
    .ok();
    let m = fs::metadata(project.join("suid-left")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o4755);
    assert_ne!(m.uid(), 0, "the cage left a set-user-ID root program");
    let u = test_user();
    let out = as_user(
        Some(u),
        &project.join("suid-left").to_string_lossy(),
        &["euid"],
        &[],
    );
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(said, format!("EUID-{}", m.uid()), "{}", show_output(&out));
    let doctor = w.run(&["doctor", "--json"]).json();
    let line = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "rootless")
        .cloned()
        .unwrap_or_default();
    assert_eq!(line["status"], "warn", "{doctor:#}");
}

/// A `--dir` to refuse: the folder, words the refusal must hold, and the
/// environment to run with.
type Refused = (String, &'static str, Vec<(&'static str, String)>);

/// `--dir` must be a folder of the user's own: shared temporary roots, the
/// runtime folder and anything in it, /run and anything in it, and the
/// system's trees are refused (exit 2, nothing made); a folder of the
/// user's below /tmp works.
#[test]
fn a_project_must_be_a_folder_of_the_users_own() {
    for w in [World::new(), World::rootless()] {
        let mut refused: Vec<Refused> = Vec::new();
        for d in ["/tmp", "/var/tmp", "/dev/shm"] {
            refused.push((d.into(), "every user of this machine shares", vec![]));
        }
        for d in [
            "/", "/etc", "/usr", "/var", "/boot", "/srv", "/opt", "/dev", "/proc", "/sys",
        ] {
            if Path::new(d).is_dir() {
                refused.push((d.into(), "", vec![]));
            }
        }
        refused.push(("/run".into(), "not a folder of your own", vec![]));
        refused.push(("/run/lock".into(), "not a folder of your own", vec![]));
        match w.user {
            // The test user's runtime folder, as its session has it.
            Some(u) => refused.push((format!("/run/user/{}", u.uid), "runtime folder", vec![])),
            // A runtime folder elsewhere, and a folder in it.
            None => {
                let rt = fs::canonicalize(w.dir("rt")).unwrap();
                let sub = w.dir("rt/proj");
                let env = vec![("XDG_RUNTIME_DIR", rt.to_string_lossy().into_owned())];
                refused.push((rt.to_string_lossy().into(), "runtime folder", env.clone()));
                refused.push((sub.to_string_lossy().into(), "runtime folder", env));
            }
        }
        for (dir, why, env) in &refused {
            let name = w.session("notown");
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let r = w
                .run_env(&["cage", "create", &name, "--dir", dir], &env)
                .code_is(2);
            let err = r.stderr();
            assert!(
                err.contains(&format!("{dir} is ")) && err.contains(why),
                "{}",
                r.explain()
            );
            assert!(err.contains("a folder of your own"), "{}", r.explain());
            assert!(w.containers_of(&name).is_empty(), "{dir}");
            assert!(!w.record_path(&name).exists(), "{dir}");
        }
        // The world is below /tmp: a folder of the user's there is fine.
        assert!(w.root.starts_with("/tmp"));
        let name = w.session("own");
        let project = w.dir("mine");
        w.create(&name, &project, &[]);
        w.sh(&name, "true").ok();
    }
}

/// `cage run` of a session taken out of its cage refuses (exit 2) unless
/// given --uncaged, and runs nothing; with it, the harness runs on the
/// machine; on a caged session --uncaged is refused.
#[test]
fn run_of_an_uncaged_session_needs_uncaged() {
    for w in [World::new(), World::rootless()] {
        let mark = w.root.join("harness-ran");
        let claude = w.file(
            "claude-install/claude",
            &format!(
                "#!/bin/sh\necho \"fake claude $*\"\necho ran >> {}\n",
                mark.display()
            ),
        );
        fs::set_permissions(&claude, fs::Permissions::from_mode(0o755)).unwrap();
        w.write_config(&format!("[harness]\nclaude = \"{}\"", claude.display()));
        let name = w.session("uncaged");
        let project = w.dir("uncaged");
        w.create(&name, &project, &[]);
        w.run(&["cage", "move", &name, "--out"]).ok();

        let r = w.run(&["cage", "run", &name, "--", "--hello"]).code_is(125);
        let err = r.stderr();
        assert!(
            err.contains("--uncaged")
                && err.contains(&format!("shrooms-agent cage move {name}"))
                && err.contains("not in a cage"),
            "{}",
            r.explain()
        );
        assert!(!r.stdout().contains("fake claude"), "{}", r.explain());
        assert!(!mark.exists(), "the harness ran");

        let r = w
            .run(&["cage", "run", "--uncaged", &name, "--", "--hello"])
            .ok();
        assert!(
            r.stdout().contains("fake claude --hello"),
            "{}",
            r.explain()
        );
        assert!(mark.exists());

        w.run(&["cage", "move", &name]).ok();
        let r = w
            .run(&["cage", "run", "--uncaged", &name, "--", "--hello"])
            .code_is(125);
        assert!(
            r.stderr().contains("leave out --uncaged"),
            "{}",
            r.explain()
        );
    }
}
