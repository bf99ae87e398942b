//! The copy of this program that cages run as `shrooms-agent mcp` (the
//! shrooms tools), kept in the state folder's `tools/`.
//!
//! A cage's mounts are fixed when podman creates it. Had it been given the
//! program at the path it happened to have then (`~/.cargo/bin`,
//! `target/release`), moving or removing the program would leave the cage
//! without its tools, or unable to start at all (runc refuses a bind
//! mount whose source is gone). So every cage gets the folder `tools/`,
//! read-only, at its own path, and the program is put in it under a name
//! of its own version: `shrooms-agent-KEY`, where KEY is a hash of the
//! program file's device, inode, size and modification time, which every
//! install, update or build changes. A file that appears in a folder
//! bind-mounted into a running container is seen there at once (a bind
//! mount of a folder shares its entries), so a cage made by one version,
//! running or not, gets the next version's program at its next turn,
//! without being made again.
//!
//! The program put there is the one running (`/proc/self/exe`, which leads
//! to it even after an update replaced or removed its file): as a hard link
//! of its file when that is still it, the state folder is on the same file
//! system and the kernel allows it (fs.protected_hardlinks lets a user link
//! only files of their own), else as a copy; either way through a temporary
//! name and a rename, so a cage never sees half a program. Its key is read
//! from the metadata alone: hashing the program's content at every turn
//! would cost a second on a debug build.
//!
//! The same goes for the helpers this program starts (a turn's watcher, a
//! background image build): they are started from `/proc/self/exe`
//! ([`THIS_PROGRAM`]), never from the path the program was found at, which
//! an update may have emptied since it started. The gateway's listener,
//! which nsenter starts (through `podman unshare` when rootless), is
//! started from the program's copy here.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::error::{Doing, Error, Result};

/// The start of every program's name in `tools/`.
pub const PREFIX: &str = "shrooms-agent-";

/// The link to the program of the last turn or start.
pub const LINK: &str = "shrooms-agent";

fn fail(doing: Doing, e: std::io::Error) -> Error {
    Error::act(Doing::InTools(Box::new(doing)), &e)
}

/// Copies of other versions older than this are removed when a new one is
/// put in (a turn of an old version still running keeps its program: a
/// removed file stays open for the processes that run it).
const KEEP_OTHERS: Duration = Duration::from_secs(7 * 24 * 3600);

/// The name the program at `exe` has in `tools/`.
pub fn name_of(exe: &Path) -> Result<String> {
    let m = fs::metadata(exe).map_err(|e| Error::act(Doing::LookAt(exe.to_path_buf()), &e))?;
    Ok(name_from(
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
    ))
}

fn name_from(dev: u64, ino: u64, size: u64, secs: i64, nanos: i64) -> String {
    let digest = Sha256::digest(format!("{dev} {ino} {size} {secs}.{nanos}"));
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{hex}")
}

/// A cage's first process (PID 1), `init/shrooms-init.rs`, built by
/// build.rs as a static program of its own: it starts nothing, reaps, and
/// is not dumpable, so no process of the cage can trace it or write its
/// memory (docs/cages.md, "Nothing of the cage runs before its rules").
pub const INIT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/shrooms-init"));

/// The start of the init's name in `tools/` (`init_name`).
#[cfg(test)]
const INIT_PREFIX: &str = "shrooms-init-";

/// The init's name in `tools/`: by its content (the first 8 bytes of its
/// sha256, in hex, which build.rs computes), so that a cage made with one
/// keeps finding it there whatever version runs later (an init is never
/// removed: a stopped cage mounts its own again at its next start).
pub fn init_name() -> &'static str {
    concat!("shrooms-init-", env!("SHROOMS_INIT_SHA256_PREFIX"))
}

/// Where the init is in `tools`.
pub fn init_path(tools: &Path) -> PathBuf {
    tools.join(init_name())
}

/// Put the init in `tools` (0555), unless it is there already, through a
/// temporary name and a rename; its path.
pub fn provide_init(tools: &Path) -> Result<PathBuf> {
    make_dir(tools)?;
    let target = init_path(tools);
    if target.is_file() {
        return Ok(target);
    }
    let tmp = tools.join(temporary("init"));
    let put = fs::write(&tmp, INIT)
        .and_then(|()| fs::set_permissions(&tmp, fs::Permissions::from_mode(0o555)))
        .and_then(|()| fs::rename(&tmp, &target));
    if let Err(e) = put {
        let _ = fs::remove_file(&tmp);
        return Err(Error::act(Doing::PutInitIn(tools.to_path_buf()), &e));
    }
    Ok(target)
}

/// Make `tools` (0755: it holds nothing secret, and any user of a cage
/// may run what is in it), unless it is there.
fn make_dir(tools: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(tools)
        .map_err(|e| fail(Doing::Make(tools.to_path_buf()), e))
}

/// This program as another process starts it: the running file, whatever
/// became of its path. For a program this process starts itself.
pub const THIS_PROGRAM: &str = "/proc/self/exe";

/// Make `tools` and put the running program in it, unless it
/// is there already; `file` is where it was found (a hard link is made of
/// that file if it still is the program). Returns its path, which is the
/// same inside every cage that mounts `tools`.
pub fn provide(tools: &Path, file: &Path) -> Result<PathBuf> {
    provide_from(tools, Path::new(THIS_PROGRAM), file)
}

/// `provide`, of the program `exe` found at `file`.
fn provide_from(tools: &Path, exe: &Path, file: &Path) -> Result<PathBuf> {
    make_dir(tools)?;
    let name = name_of(exe)?;
    let target = tools.join(&name);
    if !target.is_file() {
        put(tools, exe, file, &target)?;
    }
    point_link(tools, &name)?;
    Ok(target)
}

/// Put the program `exe` in as `target`: a link of `file` when that is
/// the same file, else a copy; then renamed into place.
fn put(tools: &Path, exe: &Path, file: &Path, target: &Path) -> Result<()> {
    let tmp = tools.join(temporary("new"));
    let _ = fs::remove_file(&tmp);
    let same = |a: &Path, b: &Path| match (fs::metadata(a), fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    let linked = same(exe, file) && fs::hard_link(file, &tmp).is_ok() && same(exe, &tmp);
    let put = if linked {
        Ok(())
    } else {
        let _ = fs::remove_file(&tmp);
        fs::copy(exe, &tmp)
            .and_then(|_| fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755)))
    };
    if let Err(e) = put.and_then(|()| fs::rename(&tmp, target)) {
        let _ = fs::remove_file(&tmp);
        return Err(fail(Doing::PutProgramIn(tools.to_path_buf()), e));
    }
    remove_old(tools, target, SystemTime::now());
    Ok(())
}

/// A temporary name of this process and call (serve's requests run on
/// threads of one process).
fn temporary(what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        ".{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// `tools/shrooms-agent`: a link to the program of the last turn or start,
/// relative so that it leads there inside a cage too: a stable path for
/// what is configured by hand (pi's `mcp.json`).
fn point_link(tools: &Path, name: &str) -> Result<()> {
    let link = tools.join(LINK);
    if fs::read_link(&link).is_ok_and(|to| to == Path::new(name)) {
        return Ok(());
    }
    let tmp = tools.join(temporary("link"));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(name, &tmp)
        .and_then(|()| fs::rename(&tmp, &link))
        .map_err(|e| {
            let _ = fs::remove_file(&tmp);
            Error::act(Doing::MakeLink(link.to_path_buf()), &e)
        })
}

/// Remove other versions' programs put in more than [`KEEP_OTHERS`] ago
/// (the change time: when the link or the copy was made). Best effort.
fn remove_old(tools: &Path, keep: &Path, now: SystemTime) {
    let Ok(entries) = fs::read_dir(tools) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let ours = e.file_name().to_string_lossy().starts_with(PREFIX);
        if !ours || path == keep {
            continue;
        }
        let Ok(m) = fs::symlink_metadata(&path) else {
            continue;
        };
        let changed = SystemTime::UNIX_EPOCH + Duration::from_secs(m.ctime().max(0) as u64);
        if now
            .duration_since(changed)
            .is_ok_and(|age| age > KEEP_OTHERS)
        {
            let _ = fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The init every cage runs is a static program (an image may have no
    /// C library), put in once under its content's name, 0555.
    #[test]
    fn the_init_is_static_and_put_in_once() {
        assert_eq!(crate::host::elf_needs_interpreter(INIT), Some(false));
        let scratch = tempfile::tempdir().unwrap();
        let tools = scratch.path().to_path_buf();
        let p = provide_init(&tools).unwrap();
        assert_eq!(p, init_path(&tools));
        // The name build.rs gave it is its content's.
        let hex: String = Sha256::digest(INIT)[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(init_name(), format!("{INIT_PREFIX}{hex}"));
        assert_eq!(fs::read(&p).unwrap(), INIT);
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o555
        );
        let ino = fs::metadata(&p).unwrap().ino();
        assert_eq!(provide_init(&tools).unwrap(), p);
        assert_eq!(fs::metadata(&p).unwrap().ino(), ino, "put in again");
        let _ = fs::remove_dir_all(&tools);
    }

    /// Each version gets a name of its own; the same file keeps its name.
    #[test]
    fn the_name_follows_the_file() {
        let a = name_from(1, 2, 3, 4, 5);
        assert!(a.starts_with(PREFIX) && a.len() == PREFIX.len() + 16, "{a}");
        assert_eq!(a, name_from(1, 2, 3, 4, 5));
        for other in [
            name_from(9, 2, 3, 4, 5),
            name_from(1, 9, 3, 4, 5),
            name_from(1, 2, 9, 4, 5),
            name_from(1, 2, 3, 9, 5),
            name_from(1, 2, 3, 4, 9),
        ] {
            assert_ne!(a, other);
        }
    }

    /// The program is put in once, survives the original being removed, and
    /// a new program beside it gets a second name; a stale copy goes.
    #[test]
    fn provide_puts_each_version_in_once() {
        let scratch = tempfile::tempdir().unwrap();
        let d = scratch.path().to_path_buf();
        let exe = d.join("bin/shrooms-agent");
        fs::create_dir_all(exe.parent().unwrap()).unwrap();
        fs::write(&exe, "#!/bin/sh\necho one\n").unwrap();
        let tools = d.join("state/tools");
        let first = provide_from(&tools, &exe, &exe).unwrap();
        assert_eq!(first.parent(), Some(tools.as_path()));
        assert_eq!(fs::read_to_string(&first).unwrap(), "#!/bin/sh\necho one\n");
        assert_eq!(
            fs::metadata(&tools).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_eq!(provide_from(&tools, &exe, &exe).unwrap(), first);
        let link = tools.join(LINK);
        assert_eq!(fs::read_link(&link).unwrap(), first.file_name().unwrap());

        // An update replaces the program (a new file, renamed over it).
        fs::write(d.join("bin/new"), "#!/bin/sh\necho two\n").unwrap();
        fs::rename(d.join("bin/new"), &exe).unwrap();
        let second = provide_from(&tools, &exe, &exe).unwrap();
        assert_ne!(second, first);
        assert_eq!(fs::read_to_string(&first).unwrap(), "#!/bin/sh\necho one\n");
        assert_eq!(
            fs::read_to_string(&second).unwrap(),
            "#!/bin/sh\necho two\n"
        );
        assert_eq!(fs::read_to_string(&link).unwrap(), "#!/bin/sh\necho two\n");
        fs::remove_file(&exe).unwrap();
        assert!(second.is_file());
        let names: Vec<_> = fs::read_dir(&tools)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");

        // Found at a path that now holds another file (an update replaced
        // it): the running program is copied, not the file there.
        let other = d.join("bin/other");
        fs::write(&other, "not the program").unwrap();
        let running = d.join("bin/running");
        fs::write(&running, "#!/bin/sh\necho three\n").unwrap();
        let third = provide_from(&tools, &running, &other).unwrap();
        assert_eq!(
            fs::read_to_string(&third).unwrap(),
            "#!/bin/sh\necho three\n"
        );
        assert_eq!(fs::read_link(&link).unwrap(), third.file_name().unwrap());

        // Other versions' programs put in over a week ago go when a new
        // one comes; those of this week stay. (A change time cannot be set
        // back: the clock is moved forward instead.)
        remove_old(&tools, &third, SystemTime::now());
        assert!(first.is_file() && second.is_file());
        let stray = tools.join("not-ours");
        fs::write(&stray, "kept").unwrap();
        let later = SystemTime::now() + KEEP_OTHERS + Duration::from_secs(3600);
        remove_old(&tools, &third, later);
        assert!(!first.exists() && !second.exists());
        assert!(third.is_file());
        assert!(stray.is_file());
        assert!(link.is_file());
        let _ = fs::remove_dir_all(&d);
    }
}
