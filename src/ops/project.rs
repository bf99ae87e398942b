//! A cage's project is a folder of the user's own: never a folder every
//! user of the machine shares, the user's runtime folder, or a tree of the
//! system. The project is mounted read-write, so a cage given `/tmp` could
//! write to what other programs keep there, such as tmux's socket in
//! `/tmp/tmux-UID` (tmux(1), "-S socket-path"): a way out of the cage.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

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
pub fn refusal(dir: &Path, runtime: Option<&Path>) -> Option<String> {
    let shared_temporary = SHARED_TEMPORARY.iter().any(|t| dir == Path::new(t));
    let runtime_says = |rt: &Path, verb: &str| {
        format!(
            "{verb} your runtime folder {} ($XDG_RUNTIME_DIR), with the sockets of your \
             session's programs: a cage there could drive them, a way out of the cage",
            rt.display()
        )
    };
    let what = if shared_temporary {
        "a temporary folder every user of this machine shares: a cage there could write \
         to what other programs keep in it, such as tmux's socket in /tmp/tmux-UID, a way \
         out of the cage"
            .to_string()
    } else if let Some(rt) = runtime.filter(|rt| dir.starts_with(rt)) {
        runtime_says(rt, "in")
    } else if let Some(t) = NOTHING_OF_THE_USERS
        .iter()
        .find(|t| dir.starts_with(Path::new(t)))
    {
        format!(
            "{}{t}, the system's and every user's runtime files, not a folder of your own",
            if dir == Path::new(t) { "" } else { "in " }
        )
    } else if SYSTEM_TREES.iter().any(|t| dir == Path::new(t)) {
        "a tree of the system, not a folder of your own".to_string()
    } else if let Some(rt) = runtime.filter(|rt| rt.starts_with(dir)) {
        runtime_says(rt, "a folder holding")
    } else {
        return None;
    };
    Some(format!(
        "{} is {what}; a cage's project is mounted read-write: give it a folder of your own, \
         such as a new folder in your home directory{}",
        dir.display(),
        if shared_temporary {
            format!(" or {}/<project>", dir.display())
        } else {
            String::new()
        }
    ))
}

/// Refuse a project that is not a folder of the user's own (exit 2).
/// `dir` is canonical; the runtime folder is resolved here.
pub fn check_own_folder(dir: &Path, runtime_dir: Option<&str>) -> Result<()> {
    let runtime: Option<PathBuf> = runtime_dir
        .filter(|r| r.starts_with('/'))
        .map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| PathBuf::from(r)));
    match refusal(dir, runtime.as_deref()) {
        Some(why) => Err(Error::bad_input(why)),
        None => Ok(()),
    }
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
            let why = refusal(Path::new(d), None).unwrap();
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
            let why = refusal(Path::new(d), Some(rt)).unwrap();
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
    fn system_trees_themselves_are_refused_but_not_a_folder_of_the_users_below() {
        for d in [
            "/", "/etc", "/usr", "/var", "/boot", "/proc", "/sys", "/dev", "/srv", "/opt",
        ] {
            let why = refusal(Path::new(d), None).unwrap();
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
