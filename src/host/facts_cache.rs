//! What `podman info` says, kept in the state folder so that an ordinary
//! command does not ask it again (a `podman info` costs about 300 ms). The
//! kept answer is used while it is current: while the podman program, every
//! configuration file podman reads, the user, the environment that points
//! podman at its files and the kernel's boot are the same as when it was
//! asked, and for at most [`MAX_AGE_SECS`] (an hour). Anything else asks podman again and
//! keeps the new answer. A file that does not read, or that is not the
//! user's own and private, is ignored and written again.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::PodmanFacts;
use crate::error::Result;
use crate::host::podman::Podman;
use crate::settings::{Env, Settings};
use crate::state::when;

/// The file in the state folder.
pub const FILE: &str = "podman-facts.json";
/// Held while podman is asked, so that commands started together ask once.
pub const LOCK: &str = "podman-facts.lock";

/// The longest a kept answer is used, whatever else stayed the same.
pub const MAX_AGE_SECS: u64 = 3600;

/// The variables that change which files podman reads, or which podman
/// answers (containers.conf(5), containers-storage.conf(5),
/// containers-registries.conf(5), podman-remote(1)).
const ENV_KEYS: &[&str] = &[
    "CONTAINERS_CONF",
    "CONTAINERS_CONF_OVERRIDE",
    "CONTAINERS_STORAGE_CONF",
    "CONTAINERS_REGISTRIES_CONF",
    "REGISTRIES_CONFIG_PATH",
    "XDG_CONFIG_HOME",
    "XDG_RUNTIME_DIR",
    "XDG_DATA_HOME",
    "HOME",
    "CONTAINER_HOST",
    "CONTAINER_CONNECTION",
];

/// What a file was when the answer was kept: None when it was not there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub path: PathBuf,
    pub seen: Option<[i64; 7]>,
}

impl Stamp {
    /// Device, inode, size, modification and change time (seconds and
    /// nanoseconds): a file edited in place, replaced or touched differs.
    pub fn of(path: &Path) -> Stamp {
        let seen = std::fs::metadata(path).ok().map(|m| {
            [
                m.dev() as i64,
                m.ino() as i64,
                m.size() as i64,
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
            ]
        });
        Stamp {
            path: path.to_path_buf(),
            seen,
        }
    }
}

/// Everything the kept answer depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    /// The podman program, as configured and as its links resolve.
    pub podman: Stamp,
    pub podman_resolved: Option<PathBuf>,
    /// Each configuration file and folder podman may read, there or not.
    pub files: Vec<Stamp>,
    pub env: Vec<(String, Option<String>)>,
    pub uid: u32,
    pub euid: u32,
    /// `/proc/sys/kernel/random/boot_id`: a new boot may have a new kernel,
    /// cgroups or podman.
    pub boot_id: String,
}

/// The file's content.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kept {
    pub key: Key,
    /// When podman was asked, in Unix seconds.
    pub asked_at: u64,
    pub facts: PodmanFacts,
}

/// Pure: every file and folder podman reads its configuration from, for
/// root and rootless alike (more than one of them reads is harmless: a
/// change there only asks podman once more). containers.conf(5):
/// `$CONTAINERS_CONF` (then alone), the files under /usr/share/containers
/// and /etc/containers, their `.d` folders and the rootful/rootless ones
/// (with a folder per uid), the user's under `$XDG_CONFIG_HOME`, then
/// `$CONTAINERS_CONF_OVERRIDE`; containers-storage.conf(5) and
/// containers-registries.conf(5) likewise.
pub fn config_paths(env: &Env, home: &Path, uid: u32) -> Vec<PathBuf> {
    let var = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let config = var("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config"));
    let mut paths = Vec::new();
    for v in [
        "CONTAINERS_CONF",
        "CONTAINERS_CONF_OVERRIDE",
        "CONTAINERS_STORAGE_CONF",
        "CONTAINERS_REGISTRIES_CONF",
        "REGISTRIES_CONFIG_PATH",
    ] {
        paths.extend(var(v));
    }
    for dir in [
        PathBuf::from("/usr/share/containers"),
        "/etc/containers".into(),
    ] {
        for name in [
            "containers.conf",
            "containers.conf.d",
            "containers.rootful.conf",
            "containers.rootful.conf.d",
            "containers.rootless.conf",
            "containers.rootless.conf.d",
            "storage.conf",
            "storage.conf.d",
            "registries.conf",
            "registries.conf.d",
        ] {
            paths.push(dir.join(name));
        }
        paths.push(dir.join(format!("containers.rootless.conf.d/{uid}")));
    }
    let user = config.join("containers");
    for name in [
        "containers.conf",
        "containers.conf.d",
        "storage.conf",
        "storage.conf.d",
        "registries.conf",
        "registries.conf.d",
    ] {
        paths.push(user.join(name));
    }
    paths
}

/// The stamps of these paths, a folder's entries after it (sorted), so a
/// file added to a `.d` folder, or changed there, is seen.
fn stamps(paths: &[PathBuf]) -> Vec<Stamp> {
    let mut out = Vec::new();
    for p in paths {
        out.push(Stamp::of(p));
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map(|r| r.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            entries.sort();
            out.extend(entries.iter().map(|e| Stamp::of(e)));
        }
    }
    out
}

/// The key as things are now.
pub fn key_now(podman: &Podman, settings: &Settings, env: &Env) -> Key {
    let (uid, euid) = (
        rustix::process::getuid().as_raw(),
        rustix::process::geteuid().as_raw(),
    );
    Key {
        podman: Stamp::of(podman.program()),
        podman_resolved: std::fs::canonicalize(podman.program()).ok(),
        files: stamps(&config_paths(env, &settings.home, euid)),
        env: ENV_KEYS
            .iter()
            .map(|k| (k.to_string(), env.get(*k).cloned()))
            .collect(),
        uid,
        euid,
        boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    }
}

/// Pure: may the kept answer be used, for this key, at this time? Not
/// when it was asked "in the future" (the clock was set back).
pub fn current(kept: &Kept, key: &Key, now: u64) -> bool {
    kept.key == *key && now >= kept.asked_at && now - kept.asked_at < MAX_AGE_SECS
}

/// The kept answer in this file, if it reads and is the user's own, not
/// writable by others.
fn read(path: &Path) -> Option<Kept> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let euid = rustix::process::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != euid || meta.mode() & 0o022 != 0 {
        return None;
    }
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The facts: the kept ones while current, else podman's answer now.
pub fn facts(podman: &Podman, settings: &Settings, env: &Env) -> Result<PodmanFacts> {
    let key = key_now(podman, settings, env);
    let path = settings.state_dir.join(FILE);
    if let Some(kept) = read(&path)
        && current(&kept, &key, when::now())
    {
        return Ok(kept.facts);
    }
    // Commands started together (a script making many cages at once) would
    // each ask podman; one asks, under a lock, and the others, waiting on
    // it, read its answer. Without the lock (no state folder yet), each asks.
    let _held = hold(&settings.state_dir);
    if _held.is_some()
        && let Some(kept) = read(&path)
        && current(&kept, &key, when::now())
    {
        return Ok(kept.facts);
    }
    ask(podman, settings, key)
}

/// The lock beside the kept facts, held while podman is asked.
fn hold(state_dir: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if !state_dir.is_dir() {
        crate::state::session::make_private_dir(state_dir).ok()?;
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(state_dir.join(LOCK))
        .ok()?;
    file.lock().ok()?;
    Some(file)
}

/// podman's answer now, kept for the next command.
pub fn fresh(podman: &Podman, settings: &Settings, env: &Env) -> Result<PodmanFacts> {
    let key = key_now(podman, settings, env);
    ask(podman, settings, key)
}

fn ask(podman: &Podman, settings: &Settings, key: Key) -> Result<PodmanFacts> {
    let asked_at = when::now();
    let facts = PodmanFacts::from_info(&podman.info()?);
    let kept = Kept {
        key,
        asked_at,
        facts,
    };
    // Keeping it is a saving, not a duty: a state folder that cannot be
    // written leaves the next command to ask again.
    let _ = keep(&settings.state_dir, &kept);
    Ok(kept.facts)
}

fn keep(state_dir: &Path, kept: &Kept) -> Result<()> {
    if !state_dir.is_dir() {
        crate::state::session::make_private_dir(state_dir)?;
    }
    let bytes = serde_json::to_vec_pretty(kept)
        .map_err(|e| crate::error::Error::act("podman's facts", &e))?;
    // A cache: lost, podman is asked again.
    crate::state::session::write_atomic_unsynced(&state_dir.join(FILE), &bytes, 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key {
            podman: Stamp {
                path: "/usr/bin/podman".into(),
                seen: Some([1, 2, 3, 4, 5, 6, 7]),
            },
            podman_resolved: Some("/usr/bin/podman".into()),
            files: vec![
                Stamp {
                    path: "/etc/containers/containers.conf".into(),
                    seen: None,
                },
                Stamp {
                    path: "/t/c.conf".into(),
                    seen: Some([1, 9, 40, 100, 0, 100, 0]),
                },
            ],
            env: vec![("CONTAINERS_CONF".into(), Some("/t/c.conf".into()))],
            uid: 1000,
            euid: 1000,
            boot_id: "b0".into(),
        }
    }

    fn kept(at: u64) -> Kept {
        Kept {
            key: key(),
            asked_at: at,
            facts: PodmanFacts {
                version: "4.3.1".into(),
                rootless: true,
                cgroup_v2: false,
                controllers: vec![],
                seccomp_profile: None,
                pasta: None,
                runtime: "runc".into(),
                volume_path: None,
                images_file: None,
            },
        }
    }

    #[test]
    fn current_while_nothing_changed_and_for_an_hour() {
        let k = kept(1_000_000);
        assert!(current(&k, &key(), 1_000_000));
        assert!(current(&k, &key(), 1_000_000 + 3599));
        assert!(!current(&k, &key(), 1_000_000 + 3600), "an hour old");
        assert!(!current(&k, &key(), 999_999), "asked in the future");
    }

    #[test]
    fn any_change_of_what_podman_depends_on_asks_again() {
        let k = kept(1_000_000);
        let at = 1_000_010;
        let changes: Vec<fn(&mut Key)> = vec![
            |k| k.podman.seen.as_mut().unwrap()[3] += 1,
            |k| k.podman.seen.as_mut().unwrap()[1] += 1,
            |k| k.podman_resolved = Some("/opt/podman/bin/podman".into()),
            |k| k.files[0].seen = Some([1, 2, 3, 4, 5, 6, 7]),
            |k| k.files[1].seen.as_mut().unwrap()[2] = 41,
            |k| k.files[1].seen.as_mut().unwrap()[4] = 1,
            |k| k.files[1].seen = None,
            |k| {
                k.files.push(Stamp {
                    path: "/etc/containers/containers.conf.d/x.conf".into(),
                    seen: Some([0; 7]),
                })
            },
            |k| k.env[0].1 = Some("/t/other.conf".into()),
            |k| k.uid = 0,
            |k| k.euid = 0,
            |k| k.boot_id = "b1".into(),
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut now = key();
            change(&mut now);
            assert!(!current(&k, &now, at), "change {i} was not seen");
        }
        assert!(current(&k, &key(), at));
    }

    #[test]
    fn podman_reads_these_files() {
        let env: Env = [
            ("CONTAINERS_CONF".to_string(), "/t/c.conf".to_string()),
            (
                "CONTAINERS_STORAGE_CONF".to_string(),
                "/t/s.conf".to_string(),
            ),
            ("XDG_CONFIG_HOME".to_string(), "/x".to_string()),
        ]
        .into();
        let p = config_paths(&env, Path::new("/home/u"), 1000);
        for want in [
            "/t/c.conf",
            "/t/s.conf",
            "/usr/share/containers/containers.conf",
            "/etc/containers/containers.conf.d",
            "/etc/containers/containers.rootless.conf.d/1000",
            "/etc/containers/storage.conf",
            "/etc/containers/registries.conf.d",
            "/x/containers/containers.conf",
            "/x/containers/storage.conf",
            "/x/containers/registries.conf",
        ] {
            assert!(p.contains(&PathBuf::from(want)), "{want}: {p:?}");
        }
        let p = config_paths(&Env::new(), Path::new("/home/u"), 1000);
        assert!(p.contains(&PathBuf::from("/home/u/.config/containers/containers.conf")));
    }

    /// A file in a `.d` folder is stamped, so adding or changing one is seen.
    #[test]
    fn folders_are_stamped_with_their_files() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let before = stamps(std::slice::from_ref(&dir));
        std::fs::write(dir.join("a.conf"), "x").unwrap();
        let after = stamps(std::slice::from_ref(&dir));
        assert_eq!(after.len(), 2);
        assert_ne!(before, after);
        std::fs::write(dir.join("a.conf"), "xy").unwrap();
        assert_ne!(after, stamps(std::slice::from_ref(&dir)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// podman is asked once; then its answer is used until something
    /// changes; a damaged file is ignored and written again.
    #[test]
    fn asked_once_then_kept_until_a_file_changes() {
        use crate::host::podman::fake::{Answer, FakePodman};
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().to_path_buf();
        let conf = root.join("containers.conf");
        std::fs::write(&conf, "[engine]\nruntime = \"runc\"\n").unwrap();
        let info = r#"{"host":{"security":{"rootless":true},"ociRuntime":{"name":"runc"}},
            "store":{"volumePath":"/v"},"version":{"Version":"4.3.1"}}"#;
        let fake = FakePodman::new(&root).on(&["info", "--format", "json"], Answer::out(info));
        let podman = fake.podman();
        let env: Env = [
            ("CONTAINERS_CONF".to_string(), conf.display().to_string()),
            ("HOME".to_string(), root.display().to_string()),
        ]
        .into();
        let settings = Settings::from_text(
            None,
            &root.join("config.toml"),
            root.join("state"),
            root.clone(),
            &env,
        )
        .unwrap();
        let asked = || fake.calls().len();
        let f = facts(&podman, &settings, &env).unwrap();
        assert_eq!((f.runtime.as_str(), f.version.as_str()), ("runc", "4.3.1"));
        assert_eq!(asked(), 1);
        let file = settings.state_dir.join(FILE);
        assert_eq!(
            std::fs::metadata(&file).unwrap().mode() & 0o777,
            0o600,
            "private to the user"
        );
        facts(&podman, &settings, &env).unwrap();
        assert_eq!(asked(), 1, "the kept answer was not used");
        std::fs::write(&conf, "[engine]\nruntime = \"crun\"\n").unwrap();
        facts(&podman, &settings, &env).unwrap();
        assert_eq!(asked(), 2, "a changed containers.conf was not seen");
        facts(&podman, &settings, &env).unwrap();
        assert_eq!(asked(), 2);
        std::fs::write(&file, "{ not json").unwrap();
        facts(&podman, &settings, &env).unwrap();
        assert_eq!(asked(), 3, "a damaged file was used");
        assert!(read(&file).is_some(), "it was not written again");
        fresh(&podman, &settings, &env).unwrap();
        assert_eq!(asked(), 4, "doctor's fresh look used the kept answer");
        // Eight commands at once, after a change: one asks, the others
        // wait for its answer.
        std::fs::write(&conf, "[engine]\nruntime = \"runc\"\n").unwrap();
        let start = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    start.wait();
                    facts(&podman, &settings, &env).unwrap();
                });
            }
        });
        assert_eq!(asked(), 5, "commands started together each asked podman");
        let _ = std::fs::remove_dir_all(&root);
    }
}
