//! The uids a rootful cage runs as. With rootful podman, a cage gets a user
//! namespace of its own (`--userns=auto`, `podman::argv::userns`): podman
//! takes a range no other container has from the subordinate ranges of the
//! user `containers` in /etc/subuid and /etc/subgid (podman-run(1),
//! `--userns=auto`; subuid(5)). Root in the cage is the first uid of its
//! range on the machine. Those ranges are therefore the only owners besides
//! root that root's cage folders (a project a cage has run in, its outbox)
//! may have.

use std::path::Path;

use crate::error::ShortRanges;

/// The user whose subordinate ranges podman's `--userns=auto` takes from
/// when it runs as root.
pub const AUTO_USER: &str = "containers";

pub const SUBUID: &str = "/etc/subuid";
pub const SUBGID: &str = "/etc/subgid";

/// Pure: the ranges (first, count) a subuid(5)/subgid(5) text gives `user`.
pub fn ranges(text: &str, user: &str) -> Vec<(u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.trim().split(':');
            let (name, first, count) = (f.next()?, f.next()?, f.next()?);
            if name != user || f.next().is_some() {
                return None;
            }
            Some((first.parse().ok()?, count.parse().ok()?))
        })
        .filter(|&(_, count)| count > 0)
        .collect()
}

/// Pure: why a rootful cage cannot get a user namespace of its own from
/// these files' texts (None: missing), if it cannot.
pub fn auto_refusal(subuid: Option<&str>, subgid: Option<&str>) -> Option<ShortRanges> {
    let size = u64::from(crate::host::podman::argv::USERNS_SIZE);
    let short: Vec<&'static str> = [(SUBUID, subuid), (SUBGID, subgid)]
        .into_iter()
        .filter(|(_, text)| {
            !text.is_some_and(|t| ranges(t, AUTO_USER).iter().any(|&(_, n)| n >= size))
        })
        .map(|(file, _)| file)
        .collect();
    if short.is_empty() {
        return None;
    }
    Some(ShortRanges {
        files: short,
        user: AUTO_USER,
        size,
    })
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Why podman could not give a rootful cage a user namespace of its own
/// on this machine, if it could not.
pub fn auto_ranges_refusal() -> Option<ShortRanges> {
    auto_refusal(read(SUBUID).as_deref(), read(SUBGID).as_deref())
}

/// The uid ranges root's cages run as (empty where there are none).
pub fn cage_uids() -> Vec<(u64, u64)> {
    read(SUBUID)
        .map(|t| ranges(&t, AUTO_USER))
        .unwrap_or_default()
}

/// Pure: is `uid` one of these ranges'?
pub fn in_ranges(uid: u32, ranges: &[(u64, u64)]) -> bool {
    let uid = u64::from(uid);
    ranges
        .iter()
        .any(|&(first, count)| uid >= first && uid - first < count)
}

/// Is a folder owned by `uid` one the running user may take as its own:
/// theirs, or, as root, a cage's of theirs (a project a rootful cage ran
/// in belongs to the cage's root, `argv::userns`).
pub fn owned_by_me_or_my_cages(uid: u32, me: u32) -> bool {
    uid == me || (me == 0 && in_ranges(uid, &cage_uids()))
}

/// The effective user id of this process.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// As root: the uid and gid of a cage's of root's that `dir` was given to
/// (podman gives a rootful cage its folders at each start, `U=true`), if
/// it was. A file root writes there for the cage (its socket, its
/// `.claude.json`) goes to the same owner, or root in the cage, no one to
/// root's files, could not use it.
pub fn cage_owner_of(dir: &Path) -> std::io::Result<Option<(u32, u32)>> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir)?;
    let me = euid();
    Ok(
        (me == 0 && meta.uid() != 0 && in_ranges(meta.uid(), &cage_uids()))
            .then(|| (meta.uid(), meta.gid())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_of_a_user() {
        let text = "shrooms-test:100000:65536\ncontainers:2147483647:2147483648\n\
                    containers:bad:1\n# comment\ncontainers:5:0\ncontainers:1:2:3\n";
        assert_eq!(ranges(text, "containers"), [(2147483647, 2147483648)]);
        assert_eq!(ranges(text, "shrooms-test"), [(100000, 65536)]);
        assert!(ranges(text, "nobody").is_empty());
    }

    #[test]
    fn auto_needs_a_big_enough_range_in_both_files() {
        let good = "containers:2147483647:2147483648\n";
        assert_eq!(auto_refusal(Some(good), Some(good)), None);
        let why = auto_refusal(Some("u:100000:65536\n"), Some(good)).unwrap();
        assert_eq!(why.files, [SUBUID]);
        assert_eq!((why.user, why.size), ("containers", 65536));
        let why = auto_refusal(None, Some("containers:1:100\n")).unwrap();
        assert_eq!(why.files, [SUBUID, SUBGID]);
        assert!(
            why.to_string().contains("/etc/subuid and /etc/subgid have"),
            "{why}"
        );
    }

    #[test]
    fn in_a_range() {
        let r = [(2147483647, 2147483648)];
        assert!(in_ranges(2147483647, &r));
        assert!(in_ranges(u32::MAX - 1, &r));
        assert!(!in_ranges(0, &r));
        assert!(!in_ranges(1000, &r));
        assert!(!in_ranges(2147483646, &r));
    }
}
