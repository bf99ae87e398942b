//! Refs and files of a git directory, read and written by hand where the
//! format is a line of text (git-repository-layout(5), gitrevisions(7)):
//! loose refs, `packed-refs`, HEAD. The session's git directory is the
//! cage's: `hostile` reads there follow no link, bound every size and
//! count, and keep only names git-check-ref-format(1) allows; writes
//! there go through no link either (a cage could leave one where this
//! program writes next, to have it write elsewhere).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Doing, Error, GitProblem, Result};

/// Ref names to object ids (lower-case hex).
pub type RefMap = BTreeMap<String, String>;

/// A HEAD: the branch it names, or the commit it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    Symbolic(String),
    Detached(String),
}

impl Head {
    /// The commit it leads to in `refs` (None: an unborn branch).
    pub fn commit(&self, refs: &RefMap) -> Option<String> {
        match self {
            Head::Symbolic(name) => refs.get(name).cloned(),
            Head::Detached(id) => Some(id.clone()),
        }
    }

    pub fn file_text(&self) -> String {
        match self {
            Head::Symbolic(name) => format!("ref: {name}\n"),
            Head::Detached(id) => format!("{id}\n"),
        }
    }

    fn parse(text: &str) -> Option<Head> {
        let t = text.trim_end_matches('\n');
        if let Some(name) = t.strip_prefix("ref: ") {
            return valid_name(name).then(|| Head::Symbolic(name.to_string()));
        }
        is_id(t).then(|| Head::Detached(t.to_string()))
    }
}

/// The most refs read from one git directory.
const MAX_REFS: usize = 200_000;
/// The largest loose ref file read, and `packed-refs`.
const MAX_LOOSE: u64 = 4096;
const MAX_PACKED: u64 = 256 << 20;
/// How deep a ref's folders go.
const MAX_DEPTH: usize = 64;

/// A SHA-1 object id as git writes it.
pub fn is_id(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A ref name git accepts (git-check-ref-format(1)), under `refs/`.
pub fn valid_name(name: &str) -> bool {
    name.starts_with("refs/")
        && name.len() < 1024
        && !name.ends_with('/')
        && !name.ends_with('.')
        && !name.contains("..")
        && !name.contains("@{")
        && !name.contains("//")
        && name.bytes().all(|b| {
            b > 0x20 && b != 0x7f && !matches!(b, b'~' | b'^' | b':' | b'?' | b'*' | b'[' | b'\\')
        })
        && name
            .split('/')
            .all(|c| !c.is_empty() && !c.starts_with('.') && !c.ends_with(".lock"))
}

/// A file's text, not followed if a link (`hostile`: a link is refused),
/// at most `max` bytes; None when missing.
fn read_file(p: &Path, max: u64, hostile: bool) -> Result<Option<String>> {
    let m = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::act(Doing::Read(p.to_path_buf()), &e)),
    };
    if m.file_type().is_symlink() {
        return if hostile {
            Err(Error::git(p, GitProblem::CageLink))
        } else {
            Ok(None)
        };
    }
    if !m.is_file() || m.len() > max {
        return Err(Error::git(p, GitProblem::NotSmallFile { max }));
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(p)
        .map_err(|e| Error::act(Doing::Read(p.to_path_buf()), &e))?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(&mut f, max + 1), &mut bytes)
        .map_err(|e| Error::act(Doing::Read(p.to_path_buf()), &e))?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// A git directory's HEAD (None: none there, or not one git wrote).
pub fn read_head(git_dir: &Path, hostile: bool) -> Result<Option<Head>> {
    Ok(read_file(&git_dir.join("HEAD"), MAX_LOOSE, hostile)?.and_then(|t| Head::parse(&t)))
}

/// Every ref of a git directory (its common one) that names an object:
/// loose ones under `refs/` over those in `packed-refs`. Symbolic refs
/// other than HEAD (`refs/remotes/origin/HEAD`) are left out.
pub fn read_refs(dir: &Path, hostile: bool) -> Result<RefMap> {
    let mut out = RefMap::new();
    if let Some(text) = read_file(&dir.join("packed-refs"), MAX_PACKED, hostile)? {
        for line in text.lines() {
            if line.starts_with(['#', '^']) {
                continue;
            }
            if let Some((id, name)) = line.split_once(' ')
                && is_id(id)
                && valid_name(name)
            {
                out.insert(name.to_string(), id.to_string());
            }
            if out.len() > MAX_REFS {
                return Err(too_many(dir));
            }
        }
    }
    let mut stack = vec![(PathBuf::from("refs"), 0usize)];
    let mut seen = 0usize;
    while let Some((rel, depth)) = stack.pop() {
        let at = dir.join(&rel);
        let entries = match std::fs::read_dir(&at) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::act(Doing::Read(at.to_path_buf()), &e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::act(Doing::Read(at.to_path_buf()), &e))?;
            seen += 1;
            if seen > MAX_REFS {
                return Err(too_many(dir));
            }
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let child = rel.join(&name);
            let t = entry
                .file_type()
                .map_err(|e| Error::act(Doing::Read(at.to_path_buf()), &e))?;
            if t.is_symlink() {
                if hostile {
                    return Err(Error::git(&dir.join(&child), GitProblem::CageLink));
                }
            } else if t.is_dir() {
                if depth < MAX_DEPTH {
                    stack.push((child, depth + 1));
                }
            } else if t.is_file() {
                let Some(text) = read_file(&dir.join(&child), MAX_LOOSE, hostile)? else {
                    continue;
                };
                let id = text.trim_end_matches('\n');
                let name = child.to_string_lossy().into_owned();
                if is_id(id) && valid_name(&name) {
                    out.insert(name, id.to_string());
                }
            }
        }
    }
    Ok(out)
}

fn too_many(dir: &Path) -> Error {
    Error::git(dir, GitProblem::TooManyRefs { max: MAX_REFS })
}

/// Refuse a link, or anything but a file or a folder, anywhere in the
/// session's git directory, before this program reads or writes there.
pub fn check_no_links(root: &Path) -> Result<()> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(at) = stack.pop() {
        let entries = match std::fs::read_dir(&at) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::act(Doing::Read(at.to_path_buf()), &e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::act(Doing::Read(at.to_path_buf()), &e))?;
            let t = entry
                .file_type()
                .map_err(|e| Error::act(Doing::Read(at.to_path_buf()), &e))?;
            if t.is_dir() {
                stack.push(entry.path());
            } else if t.is_symlink() {
                return Err(Error::git(&entry.path(), GitProblem::CageLink));
            } else if !t.is_file() {
                return Err(Error::git(&entry.path(), GitProblem::CageOdd));
            }
        }
    }
    Ok(())
}

/// The folder `rel` under `root`, opened one name at a time without
/// following a link (each made, as a real folder, where missing): what the
/// cage renames or replaces by a link meanwhile is refused, never
/// followed out of its folder.
fn open_dirs(root: &Path, rel: &Path) -> Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fail = |at: &Path, e: std::io::Error| Error::act(Doing::OpenFolder(at.to_path_buf()), &e);
    let mut dir = std::fs::File::from(
        rustix::fs::open(root, flags, Mode::empty()).map_err(|e| fail(root, e.into()))?,
    );
    let owner = owner_of(&dir);
    let mut at = root.to_path_buf();
    for c in rel.components() {
        at.push(c);
        let name = c.as_os_str();
        let opened = match rustix::fs::openat(&dir, name, flags, Mode::empty()) {
            Err(rustix::io::Errno::NOENT) => {
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(fail(&at, e.into())),
                }
                let opened = rustix::fs::openat(&dir, name, flags, Mode::empty());
                if let Ok(fd) = &opened {
                    give(fd, owner);
                }
                opened
            }
            other => other,
        };
        dir = std::fs::File::from(opened.map_err(|e| fail(&at, e.into()))?);
    }
    Ok(dir)
}

/// Who owns a folder: what this program makes in the session's git
/// directory is given to them. As root, for a rootful cage, that is the
/// cage's own uid (podman gave it the folder at its first start, and does
/// not look inside again once the folder is the cage's): a ref folder made
/// by root would be one the cage's git cannot write.
fn owner_of(dir: &std::fs::File) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    dir.metadata().ok().map(|m| (m.uid(), m.gid()))
}

fn give(fd: impl std::os::fd::AsFd, owner: Option<(u32, u32)>) {
    if let Some((u, g)) = owner {
        // Where this program is not root the owner is its own already, or
        // cannot be given (a subordinate uid of a rootless cage): the cage
        // then has what git made there itself.
        let _ = rustix::fs::fchown(
            fd,
            Some(rustix::fs::Uid::from_raw(u)),
            Some(rustix::fs::Gid::from_raw(g)),
        );
    }
}

/// Make `rel`'s folders under `root`, each a real folder.
pub fn make_dirs(root: &Path, rel: &Path) -> Result<()> {
    open_dirs(root, rel).map(drop)
}

/// Write `root/rel` whole, by a new file renamed over it, both in its
/// folder opened without following a link (`open_dirs`); the temporary
/// file made anew (O_EXCL, O_NOFOLLOW). A link in its place is replaced,
/// never written through.
pub fn write_in(root: &Path, rel: &Path, bytes: &[u8]) -> Result<()> {
    use rustix::fs::{Mode, OFlags};
    let parent = rel.parent().unwrap_or(Path::new(""));
    let dir = open_dirs(root, parent)?;
    let target = root.join(rel);
    let name = rel.file_name().unwrap_or_default();
    let tmp = format!(".{}.shrooms-{}", name.to_string_lossy(), std::process::id());
    let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), rustix::fs::AtFlags::empty());
    let fail = |e: std::io::Error| Error::act(Doing::Write(target.to_path_buf()), &e);
    let fd = rustix::fs::openat(
        &dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|e| fail(e.into()))?;
    give(&fd, owner_of(&dir));
    let mut f = std::fs::File::from(fd);
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| rustix::fs::renameat(&dir, tmp.as_str(), &dir, name).map_err(Into::into));
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), rustix::fs::AtFlags::empty());
        return Err(fail(e));
    }
    Ok(())
}

/// Remove `root/rel` if it is there (a link is removed, never followed).
pub fn remove_in(root: &Path, rel: &Path) -> Result<()> {
    let dir = open_dirs(root, rel.parent().unwrap_or(Path::new("")))?;
    match rustix::fs::unlinkat(
        &dir,
        rel.file_name().unwrap_or_default(),
        rustix::fs::AtFlags::empty(),
    ) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(Error::act(Doing::Remove(root.join(rel)), &e)),
    }
}

/// Remove the folder `name` in `dir` and what it holds, each name opened
/// or removed relative to its folder, no link followed.
fn remove_tree_at(
    dir: &std::fs::File,
    name: &std::ffi::OsStr,
    depth: usize,
) -> std::io::Result<()> {
    use rustix::fs::AtFlags;
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let sub = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(f) => std::fs::File::from(f),
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other("folders too deep"));
    }
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(&sub)? {
        let n = entry?.file_name().to_bytes().to_vec();
        if n != b"." && n != b".." && names.len() < MAX_REFS {
            names.push(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(n));
        }
    }
    for n in names {
        match rustix::fs::unlinkat(&sub, n.as_os_str(), AtFlags::empty()) {
            Ok(()) => {}
            Err(rustix::io::Errno::ISDIR) | Err(rustix::io::Errno::PERM) => {
                remove_tree_at(&sub, &n, depth + 1)?
            }
            Err(e) => return Err(e.into()),
        }
    }
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
    Ok(())
}

/// The session's refs written: the followed ones (`refs/heads/`,
/// `refs/tags/`, `refs/remotes/`) all in `packed-refs`, their loose files
/// removed; the others (`refs/stash`, notes) as the session had them.
pub fn write_refs(own: &Path, followed: &RefMap, others: &RefMap) -> Result<()> {
    let refs_dir = open_dirs(own, Path::new("refs"))?;
    for ns in ["heads", "tags", "remotes"] {
        remove_tree_at(&refs_dir, std::ffi::OsStr::new(ns), 0)
            .map_err(|e| Error::act(Doing::Remove(own.join("refs").join(ns)), &e))?;
    }
    make_dirs(own, Path::new("refs/heads"))?;
    make_dirs(own, Path::new("refs/tags"))?;
    let mut text = String::from("# pack-refs with: sorted \n");
    let mut all: Vec<(&String, &String)> = followed.iter().chain(others.iter()).collect();
    all.sort();
    for (name, id) in all {
        // A loose one of the others stays loose, and wins over this line.
        text.push_str(&format!("{id} {name}\n"));
    }
    write_in(own, Path::new("packed-refs"), text.as_bytes())
}

/// The user's refs as the last sync saw them (outside the cage's reach).
pub fn read_base(base: &Path) -> Result<Option<(Head, RefMap)>> {
    let Some(text) = read_file(base, MAX_PACKED, false)? else {
        return Ok(None);
    };
    let mut lines = text.lines();
    let Some(head) = lines.next().and_then(Head::parse) else {
        return Ok(None);
    };
    let refs = lines
        .filter_map(|l| l.split_once(' '))
        .filter(|(id, name)| is_id(id) && valid_name(name))
        .map(|(id, name)| (name.to_string(), id.to_string()))
        .collect();
    Ok(Some((head, refs)))
}

pub fn write_base(base: &Path, head: &Head, refs: &RefMap) -> Result<()> {
    let mut text = head.file_text();
    for (name, id) in refs {
        text.push_str(&format!("{id} {name}\n"));
    }
    let (Some(folder), Some(name)) = (base.parent(), base.file_name()) else {
        return Err(Error::state(base, crate::error::StateProblem::NoFolder));
    };
    write_in(folder, Path::new(name), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_names_as_git_takes_them() {
        for ok in ["refs/heads/main", "refs/heads/feat/x-1", "refs/tags/v1.0"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in [
            "HEAD",
            "refs/heads/../x",
            "refs/heads/.hidden",
            "refs/heads/x.lock",
            "refs/heads/a b",
            "refs/heads/a\nb",
            "refs/heads/x@{1}",
            "refs/heads/",
            "refs/heads//x",
            "refs/heads/x:y",
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_git_directory_read_and_written_without_following_a_link() {
        let scratch = tempfile::tempdir().unwrap();
        let t = scratch.path().to_path_buf();
        std::fs::create_dir_all(t.join("refs/heads/feat")).unwrap();
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        std::fs::write(t.join("refs/heads/feat/x"), format!("{a}\n")).unwrap();
        std::fs::write(
            t.join("packed-refs"),
            format!("# pack-refs with: peeled\n{b} refs/heads/main\n^{a}\n{b} refs/heads/feat/x\n{b} refs/heads/bad..name\n"),
        )
        .unwrap();
        std::fs::write(t.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let r = read_refs(&t, true).unwrap();
        assert_eq!(r.get("refs/heads/feat/x"), Some(&a));
        assert_eq!(r.get("refs/heads/main"), Some(&b));
        assert_eq!(r.len(), 2);
        assert_eq!(
            read_head(&t, true).unwrap(),
            Some(Head::Symbolic("refs/heads/main".into()))
        );
        // A link planted where the next write goes is replaced, never
        // written through.
        let outside = t.join("outside");
        std::fs::write(&outside, "mine").unwrap();
        std::os::unix::fs::symlink(&outside, t.join("index")).unwrap();
        assert!(check_no_links(&t).is_err());
        write_in(&t, Path::new("index"), b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine");
        assert_eq!(std::fs::read_to_string(t.join("index")).unwrap(), "new");
        // A link in the refs is refused when hostile.
        std::os::unix::fs::symlink(&outside, t.join("refs/heads/evil")).unwrap();
        assert!(read_refs(&t, true).is_err());
        assert!(read_refs(&t, false).is_ok());
        // A folder on the way that is a link is refused.
        std::os::unix::fs::symlink("/", t.join("objects")).unwrap();
        assert!(write_in(&t, Path::new("objects/info/alternates"), b"x").is_err());
        std::fs::remove_dir_all(&t).unwrap();
    }
}
