//! Lock files: an flock on a file in the state folder, taken by one
//! process at a time (a session's use, a record's change, an image's
//! build). The kernel lets go when the file is closed or its process ends,
//! even by a crash, so a lock is never held by a process that is gone.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use crate::error::{Error, IoContext, Result};

/// Open (or make, 0600) a lock file.
pub fn open(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .ctx(|| format!("opening {}", path.display()))
}

/// flock(2), tried again when a signal interrupts a wait.
pub fn flock(file: &File, how: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: flock on a file descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), how) } == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Take the lock at `path` if nobody holds it; None when someone does.
pub fn try_take(path: &Path) -> Result<Option<File>> {
    let file = open(path)?;
    match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => Ok(Some(file)),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(None),
        Err(e) => Err(Error::failed(format!("locking {}: {e}", path.display()))),
    }
}

/// Does someone hold the lock at `path`? Never makes the file: a lock file
/// that is not there is held by nobody. The file is opened read-only,
/// which flock(2) allows.
pub fn held(path: &Path) -> Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::failed(format!("opening {}: {e}", path.display()))),
    };
    match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(true),
        Err(e) => Err(Error::failed(format!("locking {}: {e}", path.display()))),
    }
}

/// Take the lock at `path`, waiting for whoever holds it.
pub fn take(path: &Path) -> Result<File> {
    let file = open(path)?;
    flock(&file, libc::LOCK_EX)
        .map_err(|e| Error::failed(format!("locking {}: {e}", path.display())))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time() {
        let path = std::env::temp_dir().join(format!("shrooms-lock-test-{}", std::process::id()));
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
}
