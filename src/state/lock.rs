//! Lock files: an flock on a file in the state folder, taken by one
//! process at a time (a session's use, a record's change, an image's
//! build). The kernel lets go when the file is closed or its process ends,
//! even by a crash, so a lock is never held by a process that is gone.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Doing, Error, IoContext, Result};

/// Open (or make, 0600) a lock file.
pub fn open(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .ctx(|| Doing::Open(path.to_path_buf()))
}

/// Take `file`'s lock without waiting, exclusive (`File::try_lock`, an
/// flock(2) on Linux): false when another open file description holds it.
pub fn try_exclusive(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// The same, shared (`File::try_lock_shared`): false when someone holds it
/// exclusive.
pub fn try_shared(file: &File) -> std::io::Result<bool> {
    match file.try_lock_shared() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Check that `file`'s open file description holds its lock already (one
/// inherited from the process that took it): taking it again then cannot
/// block, and fails only where it was not held for us.
pub fn ours(file: &File) -> std::io::Result<()> {
    if try_exclusive(file)? {
        Ok(())
    } else {
        Err(std::io::Error::other("another process holds it"))
    }
}

/// Is `file` still the one at `path`? A lock file removed (with its
/// session) while a process waited for it, or tried it, guards nothing:
/// the next taker makes a new one, and takes that. So a lock taken is
/// kept only while it is still the file at its path.
fn still_at(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// How often a taker goes after a lock file that was removed or replaced
/// under it before it says so: each time a holder removed it.
const RETAKES: u32 = 100;

fn moved(path: &Path) -> Error {
    Error::state(path, crate::error::StateProblem::LockReplaced)
}

/// Take the lock at `path` if nobody holds it; None when someone does.
pub fn try_take(path: &Path) -> Result<Option<File>> {
    for _ in 0..RETAKES {
        let file = open(path)?;
        match try_exclusive(&file) {
            Ok(true) if still_at(&file, path) => return Ok(Some(file)),
            Ok(true) => continue,
            Ok(false) => return Ok(None),
            Err(e) => return Err(Error::act(Doing::Lock(path.to_path_buf()), &e)),
        }
    }
    Err(moved(path))
}

/// Does someone hold the lock at `path` (exclusive, as every holder of a
/// session's lock takes it)? Never makes the file: a lock file that is not
/// there is held by nobody. The file is opened read-only, which flock(2)
/// allows. The probe takes the lock shared for the instant of its try, so
/// that two probes (`cage ls`, `cage show`, serve's listing) never see each
/// other as holders; a taker that meets a probe tries again
/// ([`try_take_past_probes`]).
pub fn held(path: &Path) -> Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::act(Doing::Open(path.to_path_buf()), &e)),
    };
    try_shared(&file)
        .map(|free| !free)
        .map_err(|e| Error::act(Doing::Lock(path.to_path_buf()), &e))
}

/// How often, and how far apart, [`try_take_past_probes`] tries.
const TRIES: u32 = 10;
const APART: std::time::Duration = std::time::Duration::from_millis(2);

/// [`try_take`], for a lock that [`held`] probes: a probe holds it for the
/// instant of one flock(2) call, a holder for a command's length, so a
/// lock still held after a few tries over some 20 ms is a holder's. Without
/// this, a `cage exec` that met a `cage ls` at that instant would be
/// refused as busy.
pub fn try_take_past_probes(path: &Path) -> Result<Option<File>> {
    for _ in 0..RETAKES {
        let file = open(path)?;
        let mut taken = false;
        for attempt in 1..=TRIES {
            match try_exclusive(&file) {
                Ok(true) => {
                    taken = true;
                    break;
                }
                Ok(false) if attempt < TRIES => std::thread::sleep(APART),
                Ok(false) => return Ok(None),
                Err(e) => return Err(Error::act(Doing::Lock(path.to_path_buf()), &e)),
            }
        }
        if taken && still_at(&file, path) {
            return Ok(Some(file));
        }
    }
    Err(moved(path))
}

/// Take the lock at `path`, waiting for whoever holds it. A wait cut short
/// by a signal (EINTR, where the handler was installed without SA_RESTART)
/// is taken up again.
pub fn take(path: &Path) -> Result<File> {
    for _ in 0..RETAKES {
        let file = open(path)?;
        loop {
            match file.lock() {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::act(Doing::Lock(path.to_path_buf()), &e)),
            }
        }
        if still_at(&file, path) {
            return Ok(file);
        }
    }
    Err(moved(path))
}

/// Take the lock at `path`, waiting at most `within` for whoever holds
/// it; None when it is still held then.
pub fn take_within(path: &Path, within: std::time::Duration) -> Result<Option<File>> {
    let until = std::time::Instant::now() + within;
    loop {
        if let Some(file) = try_take(path)? {
            return Ok(Some(file));
        }
        if std::time::Instant::now() >= until {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("lock");
        assert!(!held(&path).unwrap());
        assert!(!path.exists(), "held() made the file");
        let first = try_take(&path).unwrap().expect("free");
        assert!(try_take(&path).unwrap().is_none());
        assert!(held(&path).unwrap());
        drop(first);
        let waited = take(&path).unwrap();
        assert!(try_take(&path).unwrap().is_none());
        drop(waited);
        std::fs::remove_file(&path).unwrap();
    }

    /// A probe is no holder: two probes at once see the lock free, and a
    /// taker that meets a probe gets the lock once the probe is done; a
    /// holder is still a holder.
    #[test]
    fn a_probe_makes_nobody_busy() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("lock");
        drop(open(&path).unwrap());
        // A probe in the middle of its try: the lock taken shared.
        let probe = File::open(&path).unwrap();
        assert!(try_shared(&probe).unwrap());
        assert!(
            !held(&path).unwrap(),
            "a probe saw another probe as a holder"
        );
        let done = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(5));
            drop(probe);
        });
        let taken = try_take_past_probes(&path).unwrap();
        assert!(taken.is_some(), "a probe made the taker busy");
        done.join().unwrap();
        assert!(held(&path).unwrap());
        assert!(try_take_past_probes(&path).unwrap().is_none());
        drop(taken);
        std::fs::remove_file(&path).unwrap();
    }

    /// A lock file removed while a taker waited for it guards nothing: the
    /// taker takes the file at the path now, made anew, not the removed one.
    #[test]
    fn a_lock_removed_under_a_waiter_is_taken_anew() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("lock");
        let first = try_take(&path).unwrap().expect("free");
        let p = path.clone();
        let waiter = std::thread::spawn(move || take(&p).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(50));
        // The holder removes the file it holds, then lets go.
        std::fs::remove_file(&path).unwrap();
        drop(first);
        let taken = waiter.join().unwrap();
        assert!(still_at(&taken, &path), "the waiter holds a removed file");
        assert!(try_take(&path).unwrap().is_none());
        assert!(
            take_within(&path, std::time::Duration::from_millis(30))
                .unwrap()
                .is_none()
        );
        drop(taken);
        assert!(
            take_within(&path, std::time::Duration::from_millis(30))
                .unwrap()
                .is_some()
        );
        std::fs::remove_file(&path).unwrap();
    }
}
