//! A CNI address lease left behind by a container's own last run.
//!
//! On podman 4 with CNI (Debian 12's default network backend), a rootful
//! container's address on the bridge is a lease of CNI's `host-local`
//! plugin: a file named by the address in `/var/lib/cni/networks/NETWORK/`,
//! holding the container's ID. The lease is given back when podman tears
//! the container's network down; when that teardown goes wrong
//! (containers/podman#18753, #9465 and #11558; containers in a user
//! namespace of their own meet it most, and rootful cages have one) the
//! file stays, and the container's next start is refused by the plugin:
//! `failed to allocate for range 0: 10.88.0.7 has been allocated to ID,
//! duplicate allocation is not allowed` (containernetworking/plugins,
//! `host-local`'s allocator: a container may hold one address of a range).
//!
//! Such a lease can belong to no one else: it names the very container
//! podman was starting, which is not running (its start was just refused).
//! So it is given back here, under the plugin's own lock, and the start
//! is made once more. Nothing else is touched: another container's lease,
//! or a lease whose file says something else, stays.

use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Where `host-local` keeps its leases unless a network's configuration
/// names another `dataDir` (containernetworking/plugins, host-local's
/// README).
pub const LEASES: &str = "/var/lib/cni/networks";

/// Pure: the address and the container of a refused start's duplicate
/// lease, from podman's error: `unable to start container "ID": plugin
/// type="bridge" failed (add): ... failed to allocate for range 0: ADDR has
/// been allocated to ID, duplicate allocation is not allowed`. Only when
/// the lease's holder is the container whose start was refused (podman
/// names it first); None for every other failure.
pub fn own_duplicate(stderr: &str) -> Option<(IpAddr, String)> {
    const TAIL: &str = ", duplicate allocation is not allowed";
    const HELD: &str = " has been allocated to ";
    let started = stderr
        .split("unable to start container \"")
        .nth(1)?
        .split('"')
        .next()?;
    let end = stderr.find(TAIL)?;
    let before = &stderr[..end];
    let at = before.rfind(HELD)?;
    let holder = &before[at + HELD.len()..];
    let addr = before[..at].rsplit(' ').next()?.parse::<IpAddr>().ok()?;
    (is_container_id(started) && holder == started).then(|| (addr, holder.to_string()))
}

/// A container ID as podman makes them: 64 lowercase hex digits.
fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Pure: does a lease file's text name this container? The file holds the
/// ID on its first line (the interface follows on the next, in newer
/// plugins; lines end in `\r\n`).
pub fn names(text: &str, id: &str) -> bool {
    text.lines().next().map(str::trim_end) == Some(id)
}

/// Give back the lease of `addr` held by container `id`, in whichever of
/// the networks under `root` has it, under that network's lock (the one
/// `host-local` takes, its folder's `lock` file). The leases it removed
/// (none when the plugin's own cleanup already gave it back).
pub fn release(root: &Path, addr: IpAddr, id: &str) -> std::io::Result<Vec<PathBuf>> {
    let mut released = Vec::new();
    let networks = match std::fs::read_dir(root) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(released),
        Err(e) => return Err(e),
    };
    for network in networks {
        let dir = network?.path();
        let lease = dir.join(addr.to_string());
        if !lease.is_file() {
            continue;
        }
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join("lock"))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
        // Read again under the lock: it may have been given back and taken
        // by another container meanwhile.
        let mut text = String::new();
        match std::fs::File::open(&lease) {
            Ok(f) => {
                f.take(4096).read_to_string(&mut text)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
        if names(&text, id) {
            std::fs::remove_file(&lease)?;
            released.push(lease);
        }
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "83ee6418fe3156823894f4a74dee5f78829035eaf69310919824399262aa786f";

    /// podman 4.3.1's words, as seen here with a lease left for the
    /// container being started.
    fn refused(started: &str, holder: &str) -> String {
        format!(
            "time=\"2026-12-05T00:28:02Z\" level=warning msg=\"Failed to load cached network \
             config: network podman not found in CNI cache, falling back to loading network \
             podman from disk\"\nError: unable to start container \"{started}\": plugin \
             type=\"bridge\" failed (add): cni plugin bridge failed: failed to allocate for \
             range 0: 10.88.250.250 has been allocated to {holder}, duplicate allocation is \
             not allowed\n"
        )
    }

    #[test]
    fn a_duplicate_lease_of_the_started_container_is_found() {
        assert_eq!(
            own_duplicate(&refused(ID, ID)),
            Some(("10.88.250.250".parse().unwrap(), ID.to_string()))
        );
    }

    #[test]
    fn no_other_failure_is_taken_for_one() {
        let other = ID.replace('8', "9");
        // Another container's lease: not ours to give back.
        assert_eq!(own_duplicate(&refused(ID, &other)), None);
        // Not an ID.
        assert_eq!(own_duplicate(&refused("web", "web")), None);
        assert_eq!(
            own_duplicate("Error: unable to start container \"x\": no such image"),
            None
        );
        assert_eq!(
            own_duplicate(
                "Error: failed to allocate for range 0: requested IP address 10.88.0.101 is not \
                 available in range set 10.88.0.1-10.88.255.254"
            ),
            None
        );
        assert_eq!(own_duplicate(""), None);
    }

    #[test]
    fn a_lease_names_its_holder_on_its_first_line() {
        assert!(names(&format!("{ID}\r\neth0"), ID));
        assert!(names(ID, ID));
        assert!(!names(&format!("x{ID}\r\neth0"), ID));
        assert!(!names("", ID));
    }

    #[test]
    fn only_the_holders_lease_is_given_back() {
        let root = tempdir();
        let net = root.join("podman");
        std::fs::create_dir_all(&net).unwrap();
        std::fs::write(net.join("lock"), "").unwrap();
        let other = ID.replace('8', "9");
        std::fs::write(net.join("10.88.0.7"), format!("{ID}\r\neth0")).unwrap();
        std::fs::write(net.join("10.88.0.8"), format!("{other}\r\neth0")).unwrap();
        // The address of someone else's lease: kept.
        assert!(
            release(&root, "10.88.0.8".parse().unwrap(), ID)
                .unwrap()
                .is_empty()
        );
        assert!(net.join("10.88.0.8").exists());
        let gone = release(&root, "10.88.0.7".parse().unwrap(), ID).unwrap();
        assert_eq!(gone, vec![net.join("10.88.0.7")]);
        assert!(!net.join("10.88.0.7").exists());
        // Given back already: nothing to do.
        assert!(
            release(&root, "10.88.0.7".parse().unwrap(), ID)
                .unwrap()
                .is_empty()
        );
        // No CNI at all.
        assert!(
            release(&root.join("none"), "10.88.0.7".parse().unwrap(), ID)
                .unwrap()
                .is_empty()
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn tempdir() -> PathBuf {
        tempfile::tempdir().unwrap().keep()
    }
}
