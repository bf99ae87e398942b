//! End-to-end tests of what root in a cage is on the machine, and of where
//! root may make cages and keep its state. Made as root, a cage runs in a
//! user namespace of its own: root in it is an unprivileged uid outside,
//! which the host root's keyring and set-user-ID bits do not serve. No
//! cage reaches the kernel's keyrings at all. Root's projects are root's
//! own folders, and a state folder is used only when no other user can
//! change it.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::*;

/// The static probe of the attacks (`attacks/probe.c`), built once.
fn probe() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("rootful-probe-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let out = dir.join("probe");
        // The podman-5 lane runs the suite in a tree without gcc: its
        // script builds the probe beforehand and names it here.
        if let Some(built) = std::env::var_os("SHROOMS_TEST_PROBE") {
            fs::copy(&built, &out).unwrap();
        } else {
            let src = dir.join("probe.c");
            fs::write(&src, include_str!("attacks/probe.c")).unwrap();
            let r = Command::new("gcc")
                .args(["-static", "-O1", "-o"])
                .arg(&out)
                .arg(&src)
                .output()
                .expect("gcc (scripts/setup-host installs it)");
            assert!(r.status.success(), "gcc -static: {}", show_output(&r));
        }
        fs::set_permissions(&out, fs::Permissions::from_mode(0o755)).unwrap();
        out
    })
}

/// A project holding the probe, and a session made for it.
fn session_with_probe(w: &World, base: &str, sealed: bool) -> (String, PathBuf) {
    let name = w.session(base);
    let project = fs::canonicalize(w.dir(&format!("projects/{name}"))).unwrap();
    fs::copy(probe(), project.join("probe")).unwrap();
    w.chown_all();
    if sealed {
        let token = w.file(&format!("{name}.token"), "sk-ant-oat01-keyring-test\n");
        fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
        w.chown_all();
        let t = token.to_string_lossy().into_owned();
        w.create(&name, &project, &["--sealed", "--sealed-token", &t]);
    } else {
        w.create(&name, &project, &[]);
    }
    (name, project)
}

/// A key in the host root's own user keyring for the test's time.
struct HostKey {
    id: String,
    desc: String,
    secret: String,
}

impl HostKey {
    fn add() -> HostKey {
        let n = std::process::id();
        let desc = format!("shrooms-test-key-{n}-{}", rand_word());
        let secret = format!("host-root-secret-{}", rand_word());
        let out = Command::new(probe())
            .args(["keyadd", &desc, &secret])
            .output()
            .unwrap();
        assert!(out.status.success(), "keyadd: {}", show_output(&out));
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        // The probe works: on the machine, root reads its own key.
        let seen = Command::new(probe())
            .args(["keyring", &desc])
            .output()
            .unwrap();
        let seen = String::from_utf8_lossy(&seen.stdout).into_owned();
        assert!(seen.contains(&format!("read {secret}")), "{seen}");
        HostKey { id, desc, secret }
    }
}

impl Drop for HostKey {
    fn drop(&mut self) {
        let _ = Command::new(probe()).args(["keyrm", &self.id]).output();
    }
}

fn rand_word() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}", t & 0xffff_ffff)
}

/// Run the keyring probe in a session's cage and check what it said: the
/// secret never, and each keyring call refused by the cage's seccomp
/// profile (ENOSYS).
fn check_keyring(w: &World, session: (String, PathBuf), key: &HostKey, what: &str) {
    let (name, project) = session;
    let script = format!("{}/probe keyring {}", project.display(), key.desc);
    let out = w.sh(&name, &script).ok().stdout();
    assert!(
        !out.contains(&key.secret),
        "{what}: the cage read the host root's key\n{out}"
    );
    for call in ["keyctl", "add_key", "request_key"] {
        assert!(
            out.lines().any(|l| l == format!("{call} ENOSYS")),
            "{what}: {call} was not refused\n{out}"
        );
    }
}

/// The host root has a key in its user keyring; root in a rootful cage,
/// ordinary and sealed, tries to find it, link the keyring into its own,
/// read it, and to add and request keys: every call is refused, and the
/// secret never shows.
#[test]
fn the_host_roots_keyring_is_out_of_reach_of_a_rootful_cage() {
    let w = World::new();
    let key = HostKey::add();
    for (sealed, what) in [(false, "ordinary"), (true, "sealed")] {
        check_keyring(&w, session_with_probe(&w, "keys", sealed), &key, what);
    }
}

/// Every cage's profile refuses the keyring calls, rootless too.
#[test]
fn keyring_calls_are_refused_in_a_rootless_cage() {
    let w = World::rootless();
    let key = HostKey::add();
    check_keyring(&w, session_with_probe(&w, "keys", false), &key, "rootless");
}

/// The uids root's cages run as: the `containers` ranges of /etc/subuid.
fn cage_uids() -> Vec<(u64, u64)> {
    fs::read_to_string("/etc/subuid")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() == 3 && f[0] == "containers")
                .then(|| Some((f[1].parse().ok()?, f[2].parse().ok()?)))
                .flatten()
        })
        .collect()
}

fn is_cage_uid(uid: u32) -> bool {
    let uid = u64::from(uid);
    cage_uids()
        .iter()
        .any(|&(first, n)| uid >= first && uid - first < n)
}

/// A rootful cage writes its project; on the machine what it wrote is
/// owned by the cage's uid (one of the `containers` range, never root's),
/// and root reads and changes it. A file root makes there later is root's:
/// the cage reads it, and writes it once root gives it to the project
/// folder's owner (podman gives the folder over only when the folder itself
/// is not the cage's yet).
#[test]
fn a_rootful_cage_writes_its_project_and_root_keeps_the_use_of_it() {
    let w = World::new();
    let name = w.session("own");
    let project = fs::canonicalize(w.dir("own")).unwrap();
    fs::write(project.join("from-root"), "root wrote this\n").unwrap();
    w.create(&name, &project, &[]);
    let r = w
        .sh(
            &name,
            "echo made > made && mkdir -p d && echo deep > d/f && echo more >> from-root && \
             cat /proc/self/uid_map",
        )
        .ok();
    // Root in the cage is not root outside.
    let map = r.stdout();
    let first: Vec<&str> = map.split_whitespace().collect();
    assert_eq!(first.first(), Some(&"0"), "{map}");
    assert_ne!(
        first.get(1),
        Some(&"0"),
        "root in the cage is root outside: {map}"
    );
    for f in ["made", "d", "d/f", "from-root", "."] {
        let m = fs::symlink_metadata(project.join(f)).unwrap();
        assert!(
            m.uid() != 0 && is_cage_uid(m.uid()),
            "{f} belongs to uid {}",
            m.uid()
        );
    }
    assert_eq!(fs::read_to_string(project.join("made")).unwrap(), "made\n");
    assert_eq!(
        fs::read_to_string(project.join("from-root")).unwrap(),
        "root wrote this\nmore\n"
    );
    // Root changes what the cage wrote, and makes a file of its own.
    fs::write(project.join("made"), "root changed it\n").unwrap();
    fs::write(project.join("d/f"), "root again\n").unwrap();
    fs::write(project.join("new-from-root"), "x\n").unwrap();
    w.run(&["cage", "stop", &name]).ok();
    let r = w
        .sh(
            &name,
            "cat made && echo cage >> made && cat new-from-root && \
             (echo cage >> new-from-root 2>/dev/null && echo WROTE || echo REFUSED)",
        )
        .ok();
    assert_eq!(
        r.stdout(),
        "root changed it\nx\nREFUSED\n",
        "{}",
        r.explain()
    );
    assert_eq!(
        fs::read_to_string(project.join("made")).unwrap(),
        "root changed it\ncage\n"
    );
    let owner = fs::metadata(&project).unwrap();
    std::os::unix::fs::chown(
        project.join("new-from-root"),
        Some(owner.uid()),
        Some(owner.gid()),
    )
    .unwrap();
    let r = w
        .sh(&name, "echo cage >> new-from-root && cat new-from-root")
        .ok();
    assert_eq!(r.stdout(), "x\ncage\n", "{}", r.explain());
}

/// As root, `--dir` must be a folder root owns: not another user's home or
/// a folder in it, not a tree of the machine's programs or configuration,
/// not a folder another user owns. Refused with exit 2, nothing made.
#[test]
fn as_root_a_project_is_a_folder_root_owns() {
    let w = World::new();
    let u = test_user();
    let theirs = w.dir("theirs");
    let status = Command::new("chown")
        .arg(format!("{}:{}", u.uid, u.uid))
        .arg(&theirs)
        .status()
        .unwrap();
    assert!(status.success());
    let in_home = u
        .home
        .join(format!("shrooms-root-project-{}", std::process::id()));
    fs::create_dir_all(&in_home).unwrap();
    let mut refused: Vec<(PathBuf, String)> = vec![
        (u.home.clone(), format!("in {}'s home", u.name)),
        (in_home.clone(), format!("in {}'s home", u.name)),
        (theirs.clone(), format!("a folder of uid {}'s", u.uid)),
    ];
    for d in [
        "/etc/ssh",
        "/usr/local/bin",
        "/var/lib/containers/storage",
        "/usr/lib",
    ] {
        if Path::new(d).is_dir() {
            refused.push((d.into(), "a tree of the machine's".into()));
        }
    }
    for (dir, why) in &refused {
        let name = w.session("notroots");
        let d = dir.to_string_lossy();
        let r = w.run(&["cage", "create", &name, "--dir", &d]).code_is(2);
        let err = r.stderr();
        assert!(
            err.contains(&format!("{d} is ")) && err.contains(why.as_str()),
            "{}",
            r.explain()
        );
        assert!(err.contains("a folder root owns"), "{}", r.explain());
        assert!(w.containers_of(&name).is_empty(), "{d}");
        assert!(!w.record_path(&name).exists(), "{d}");
    }
    fs::remove_dir_all(&in_home).unwrap();
}

/// A state folder is used only when it and the folders above it are the
/// user's (or root's, above it) and no one else can write them; a sticky
/// folder above, such as /tmp, is fine (every test's state is under one).
#[test]
fn a_state_folder_another_user_can_change_is_not_used() {
    let w = World::new();
    let u = test_user();
    let chown = |p: &Path, uid: u32| {
        let s = Command::new("chown")
            .arg(format!("{uid}:{uid}"))
            .arg(p)
            .status()
            .unwrap();
        assert!(s.success());
    };
    let state = w.state.clone();
    fs::create_dir_all(&state).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    w.run(&["cage", "ls"]).ok();
    // Another user's state folder.
    chown(&state, u.uid);
    let r = w.run(&["cage", "ls"]).code_is(2);
    let s = state.display().to_string();
    for words in [
        s.as_str(),
        "state folder",
        &format!("belongs to uid {}", u.uid),
        "SHROOMS_AGENT_STATE_DIR",
    ] {
        assert!(r.stderr().contains(words), "{words}: {}", r.explain());
    }
    chown(&state, 0);
    // Writable by its group.
    fs::set_permissions(&state, fs::Permissions::from_mode(0o770)).unwrap();
    let r = w.run(&["cage", "ls"]).code_is(2);
    assert!(
        r.stderr().contains(&format!("chmod go-w {s}")),
        "{}",
        r.explain()
    );
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    // A folder above it that others can write, without the sticky bit.
    fs::set_permissions(&w.root, fs::Permissions::from_mode(0o777)).unwrap();
    let r = w.run(&["cage", "ls"]).code_is(2);
    assert!(
        r.stderr()
            .contains(&format!("{} is a folder above", w.root.display())),
        "{}",
        r.explain()
    );
    // The same with the sticky bit: fine.
    fs::set_permissions(&w.root, fs::Permissions::from_mode(0o1777)).unwrap();
    w.run(&["cage", "ls"]).ok();
    fs::set_permissions(&w.root, fs::Permissions::from_mode(0o755)).unwrap();
    // A state folder not made yet, under another user's folder.
    let above = w.dir("users-folder");
    chown(&above, u.uid);
    let r = w
        .run_env(
            &["cage", "ls"],
            &[(
                "SHROOMS_AGENT_STATE_DIR",
                &above.join("state").to_string_lossy(),
            )],
        )
        .code_is(2);
    assert!(
        r.stderr().contains(&format!("belongs to uid {}", u.uid)),
        "{}",
        r.explain()
    );
    assert!(!above.join("state").exists());
}
