//! A cage's project is a folder of the user's own: never a folder every
//! user of the machine shares, the user's runtime folder, or a tree of the
//! system. The project is mounted read-write, so a cage given `/tmp` could
//! write to what other programs keep there, such as tmux's socket in
//! `/tmp/tmux-UID` (tmux(1), "-S socket-path"): a way out of the cage.

use std::path::{Path, PathBuf};

use crate::error::{Error, FolderProblem, NotOwn, Result, RootNotOwn};

/// Temporary folders every user of the machine writes to: refused
/// themselves; a folder of the user's below them is fine.
const SHARED_TEMPORARY: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// Trees of the system: refused themselves (and `/`).
const SYSTEM_TREES: [&str; 10] = [
    "/", "/etc", "/usr", "/var", "/boot", "/srv", "/opt", "/dev", "/proc", "/sys",
];

/// Trees where no folder is the user's own: refused with all they hold.
/// `/run` holds every user's runtime folder and the system's sockets;
/// `/proc` and `/sys` are the kernel's.
const NOTHING_OF_THE_USERS: [&str; 3] = ["/run", "/proc", "/sys"];

/// Why `dir` (canonical) cannot be a project, if it cannot. `runtime` is the
/// user's runtime folder (`$XDG_RUNTIME_DIR`), canonical, if known.
pub fn refusal(dir: &Path, runtime: Option<&Path>) -> Option<Error> {
    let what = if SHARED_TEMPORARY.iter().any(|t| dir == Path::new(t)) {
        NotOwn::SharedTemporary
    } else if let Some(rt) = runtime.filter(|rt| dir.starts_with(rt)) {
        NotOwn::Runtime {
            rt: rt.to_path_buf(),
            holds: false,
        }
    } else if let Some(t) = NOTHING_OF_THE_USERS
        .iter()
        .find(|t| dir.starts_with(Path::new(t)))
    {
        NotOwn::RuntimeTree {
            tree: t,
            inside: dir != Path::new(t),
        }
    } else if SYSTEM_TREES.iter().any(|t| dir == Path::new(t)) {
        NotOwn::SystemTree
    } else if let Some(rt) = runtime.filter(|rt| rt.starts_with(dir)) {
        NotOwn::Runtime {
            rt: rt.to_path_buf(),
            holds: true,
        }
    } else {
        return None;
    };
    Some(Error::folder(dir, FolderProblem::NotOwn(what)))
}

/// Refuse a project that is not a folder of the user's own (exit 2).
/// `dir` is canonical; the runtime folder is resolved here. As root, also
/// a folder that is not root's (`root_refusal`).
pub fn check_own_folder(dir: &Path, runtime_dir: Option<&Path>) -> Result<()> {
    let runtime: Option<PathBuf> =
        runtime_dir.map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.to_path_buf()));
    if let Some(refused) = refusal(dir, runtime.as_deref()) {
        return Err(refused);
    }
    if super::euid() == 0 {
        use std::os::unix::fs::MetadataExt;
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let owner = std::fs::metadata(dir).map(|m| m.uid()).ok();
        let owner_ok =
            owner.is_some_and(|uid| crate::host::userns::owned_by_me_or_my_cages(uid, 0));
        if let Some(refused) = root_refusal(dir, owner.filter(|_| !owner_ok), &homes(&passwd)) {
            return Err(refused);
        }
    }
    Ok(())
}

/// Trees of the machine's own programs, configuration and data: as root,
/// refused with all they hold (`/etc/ssh`, `/usr/local/bin`,
/// `/var/lib/containers/storage`), since a cage given one writes what the
/// machine runs or trusts. An ordinary user owns nothing there anyway.
const ROOTS_SYSTEM_TREES: [&str; 10] = [
    "/etc", "/usr", "/var", "/boot", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
];

/// Pure: the home folders of /etc/passwd's users other than root, with
/// their names (a home of `/` is no one's folder).
pub fn homes(passwd: &str) -> Vec<(String, PathBuf)> {
    passwd
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            let (name, uid, home) = (f.first()?, f.get(2)?, f.get(5)?);
            (*uid != "0" && home.starts_with('/') && *home != "/")
                .then(|| (name.to_string(), PathBuf::from(home)))
        })
        .collect()
}

/// Pure: why root may not take `dir` (canonical) as a project, if it may
/// not: a folder of another user's (`other_owner`: its uid, when it is
/// neither root's nor a cage's of root's), in or above another user's home,
/// or in a tree of the machine's (`/var/tmp`'s own folders aside, as for
/// every user). A cage's project is mounted read-write and, as root, given
/// to the cage at each start: another user's files there would be the
/// cage's, and what the machine runs there the cage's to change.
pub fn root_refusal(
    dir: &Path,
    other_owner: Option<u32>,
    homes: &[(String, PathBuf)],
) -> Option<Error> {
    let what = if let Some((name, home)) = homes
        .iter()
        .find(|(_, h)| dir.starts_with(h) || h.starts_with(dir))
    {
        RootNotOwn::Home {
            name: name.clone(),
            home: home.clone(),
            holds: !dir.starts_with(home),
        }
    } else if let Some(t) = ROOTS_SYSTEM_TREES
        .iter()
        .find(|t| dir.starts_with(t) && !dir.starts_with("/var/tmp/"))
    {
        RootNotOwn::SystemTree {
            tree: t.to_string(),
        }
    } else if let Some(uid) = other_owner {
        RootNotOwn::OthersFolder { uid }
    } else {
        return None;
    };
    Some(Error::folder(dir, FolderProblem::RootNotOwn(what)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(dir: &str) -> bool {
        refusal(Path::new(dir), Some(Path::new("/run/user/1000"))).is_some()
    }

    #[test]
    fn shared_temporary_roots_are_refused_but_not_a_folder_below_them() {
        for d in ["/tmp", "/var/tmp", "/dev/shm"] {
            assert!(refused(d), "{d}");
            let why = refusal(Path::new(d), None).unwrap().message();
            assert!(why.contains("every user"), "{why}");
        }
        for d in ["/tmp/myproject", "/var/tmp/x/y", "/dev/shm/work"] {
            assert!(!refused(d), "{d}");
        }
    }

    #[test]
    fn the_runtime_folder_and_anything_in_it_are_refused() {
        let rt = Path::new("/home/me/.rt");
        for d in ["/home/me/.rt", "/home/me/.rt/x", "/home/me/.rt/tmux-1000"] {
            let why = refusal(Path::new(d), Some(rt)).unwrap().message();
            assert!(why.contains("runtime folder"), "{why}");
        }
        // A folder holding it, too.
        assert!(refusal(Path::new("/home/me"), Some(rt)).is_some());
        assert!(refusal(Path::new("/home/me/src"), Some(rt)).is_none());
        assert!(refusal(Path::new("/home/me/.rtx"), Some(rt)).is_none());
    }

    #[test]
    fn run_and_anything_in_it_are_refused() {
        for d in [
            "/run",
            "/run/user",
            "/run/user/1001/x",
            "/run/lock",
            "/proc/1",
            "/sys/fs",
        ] {
            assert!(refusal(Path::new(d), None).is_some(), "{d}");
        }
    }

    #[test]
    fn root_keeps_to_roots_folders() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nsync:x:4:65534:sync:/bin:/bin/sync\n\
                      systemd-network:x:998:998::/:/usr/sbin/nologin\n\
                      u:x:1001:1001::/home/u:/bin/bash\n";
        let h = homes(passwd);
        assert_eq!(
            h,
            [
                ("sync".to_string(), PathBuf::from("/bin")),
                ("u".to_string(), PathBuf::from("/home/u"))
            ]
        );
        let refused = |d: &str| root_refusal(Path::new(d), None, &h).map(|e| e.message());
        for d in [
            "/home/u",
            "/home/u/src",
            "/home",
            "/etc/ssh",
            "/usr/local/bin",
            "/var/lib/containers/storage",
            "/opt/app",
            "/lib64/x",
        ] {
            let why = refused(d).unwrap_or_else(|| panic!("{d} passed"));
            assert!(why.starts_with(&format!("{d} is ")), "{why}");
            assert!(why.contains("a folder root owns"), "{why}");
        }
        assert!(
            refused("/home/u/src")
                .unwrap()
                .contains("in u's home /home/u")
        );
        assert!(refused("/home").unwrap().contains("holding u's home"));
        for d in [
            "/root/web",
            "/srv/web",
            "/var/tmp/x",
            "/tmp/shrooms-it-1/proj",
            "/homework",
        ] {
            assert_eq!(refused(d), None, "{d}");
        }
        let why = root_refusal(Path::new("/srv/theirs"), Some(1001), &h)
            .unwrap()
            .message();
        assert!(why.contains("a folder of uid 1001's, not root's"), "{why}");
    }

    #[test]
    fn system_trees_themselves_are_refused_but_not_a_folder_of_the_users_below() {
        for d in [
            "/", "/etc", "/usr", "/var", "/boot", "/proc", "/sys", "/dev", "/srv", "/opt",
        ] {
            let why = refusal(Path::new(d), None).unwrap().message();
            assert!(why.starts_with(&format!("{d} is ")), "{why}");
        }
        for d in [
            "/var/home/me/src",
            "/srv/projects/web",
            "/opt/work/app",
            "/home/me/src/web",
            "/tmp/shrooms-it-1-2/proj",
            "/usr-projects",
        ] {
            assert!(!refused(d), "{d}");
        }
    }
}
