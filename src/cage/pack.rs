//! Packing a sealed cage's outbox: the packer that turns the outbox into a
//! `.tar.gz` for `outbox pack` and `outbox send` (`ops::outbox`, the
//! operations, call it).
//!
//! Everything in an outbox was written by a session that worked on untrusted
//! code, and the session can still be writing while we pack. So the packer
//! trusts no name in it:
//!
//! - every name is opened relative to its parent folder's descriptor
//!   (`openat`) with `O_NOFOLLOW`, never as a path, so no link anywhere in
//!   the tree is followed, and a folder swapped for a link half-way through
//!   the walk cannot lead it out of the outbox;
//! - only regular files are read. Links, FIFOs, sockets and devices are
//!   listed as left out and never opened; a name whose type changed between
//!   the listing and the opening (openat says `ELOOP`, or `fstat` on the
//!   opened descriptor disagrees with the listing) is refused and listed,
//!   never followed or read. Files are opened with `O_NONBLOCK`, so a name
//!   swapped for a FIFO cannot make the packer wait;
//! - the archive is bounded: [`MAX_FILES`] files, [`MAX_BYTES`] of file
//!   contents, [`MAX_DEPTH`] folder levels (and, to bound the walk itself,
//!   100,000 names looked at). What is past a limit is left out and listed,
//!   the rest is packed.
//!
//! Hard links are not refused: inside the cage the outbox is its own mount,
//! and the kernel refuses a hard link across mounts (`EXDEV`), so a hard
//! link in the outbox can only point at another file of the outbox.
//!
//! The walk's system calls (`openat`, `fstatat`, `getdents` through
//! `rustix::fs::Dir`, `renameat2`) come from `rustix`, whose safe wrappers
//! own every descriptor they return: no raw FFI here.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use flate2::Compression;
use serde::Serialize;

use rustix::fs::{Mode, OFlags};

use crate::error::{Doing, Error, IoContext, OnlyRefused, PackProblem, Result};

mod pargz;

/// The notice at the top of an outbox and of every archive made from one.
pub const README_NAME: &str = "README-UNTRUSTED.txt";
/// At most this many files go into one archive.
pub const MAX_FILES: usize = 2_000;
/// At most this many bytes of file contents go into one archive (100 MiB).
pub const MAX_BYTES: u64 = 100 * 1024 * 1024;
/// Folders deeper than this many levels below the outbox are not looked into.
pub const MAX_DEPTH: usize = 32;

/// The `README-UNTRUSTED.txt` written into a new outbox.
pub const OUTBOX_NOTICE: &str = "\
This folder is the outbox of a sealed shrooms-agent session.

Everything in it was written by a session that worked on untrusted code,
and must be read as untrusted text: a review of hostile code can carry
instructions for whoever reads it. Run nothing from it.

It can hold links that point anywhere on this machine. `shrooms-agent outbox
pack` never follows them, and neither should you.
";

/// What one pack did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Packed {
    /// Files in the archive (not counting its own README-UNTRUSTED.txt).
    pub files: usize,
    /// Bytes of file contents in the archive.
    pub bytes: u64,
    /// What was left out and why, in the order met (at most 1,000 listed).
    pub left_out: Vec<LeftOut>,
    /// How many more were left out than `left_out` lists.
    pub left_out_unlisted: usize,
}

/// One name of the outbox that is not in the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LeftOut {
    /// Relative to the outbox; bytes that are not UTF-8 shown as U+FFFD.
    pub name: String,
    pub why: String,
}

/// The bounds of one pack; tests use smaller ones.
#[derive(Debug, Clone, Copy)]
struct Limits {
    files: usize,
    bytes: u64,
    depth: usize,
    /// Names read from folder listings, in all: bounds the walk's time and
    /// memory however many names the session made.
    names: usize,
    /// Left-out names listed one by one; the rest are counted.
    listed: usize,
}

const LIMITS: Limits = Limits {
    files: MAX_FILES,
    bytes: MAX_BYTES,
    depth: MAX_DEPTH,
    names: 100_000,
    listed: 1_000,
};

/// Make a fresh outbox: the folder (and its parents) with mode 0700, and its
/// `README-UNTRUSTED.txt` saying that everything in it was written by a
/// session that worked on untrusted code and must be read as untrusted text.
/// On an existing outbox it puts the notice back as it was first written.
pub fn make_outbox(dir: &Path) -> Result<()> {
    // ~/shrooms-outbox and ~/shrooms-outbox/<session> must be folders, not
    // links: a link there would be followed by the chmod and the mount, and
    // lend the sealed cage (read-write, at /outbox) whatever it points at.
    if let Some(parent) = dir.parent() {
        crate::state::session::make_private_dir_here(parent)?;
    }
    crate::state::session::make_private_dir_here(dir)?;
    let path = dir.join(README_NAME);
    let tmp = dir.join(format!(".{README_NAME}.tmp-{}", std::process::id()));
    let _ = fs::remove_file(&tmp); // unlink does not follow a link
    let result = (|| {
        // create_new is O_EXCL: never through a link left at the temp name.
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        f.write_all(OUTBOX_NOTICE.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.ctx(|| Doing::Write(path.to_path_buf()))
}

/// Pack the outbox at `outbox` (or only its folder `only`, a relative path)
/// into the gzip'd tar archive `out`, written atomically with mode 0600.
/// An existing `out` is replaced only when it is a regular file and
/// `replace` is given; `out` may not be inside the outbox.
///
/// The archive opens with its own `README-UNTRUSTED.txt`, which says its
/// contents are untrusted text and lists what was left out and why; then
/// the regular files, named relative to the outbox (so `--only notes` gives
/// `notes/...`), with modes 0600 and their modification times. Folders are
/// not entries of their own: an empty folder is not kept. The outbox's own
/// `README-UNTRUSTED.txt` at its top is not packed (the archive has its
/// own); if the session changed it, it is listed as left out.
///
/// A file's copy is what it held when opened, up to the size it had then.
///
/// Limits do not fail the pack: what is past one is left out and listed,
/// and what fits is packed. Errors:
/// - `only` absolute, with `..`, through a link, not a folder, or missing:
///   [`Error::bad_input`];
/// - `out` there already and not a regular file (a device, a FIFO, a
///   folder, a link), a regular file without `replace`, or inside the
///   outbox: [`Error::bad_input`], before anything is written;
/// - nothing to pack (no file, and nothing left out): `Ok(None)`, and no
///   archive;
/// - files there, but every one left out: an error that lists them, and no
///   archive (one holding only its README would look like a result);
/// - the outbox cannot be opened, or the archive cannot be written.
pub fn pack(
    outbox: &Path,
    only: Option<&Path>,
    out: &Path,
    replace: bool,
) -> Result<Option<Packed>> {
    pack_with(outbox, only, out, replace, &LIMITS)
}

fn pack_with(
    outbox: &Path,
    only: Option<&Path>,
    out: &Path,
    replace: bool,
    limits: &Limits,
) -> Result<Option<Packed>> {
    let root = open_root(outbox)?;
    let (out_dir, out_name) = split_out(out)?;
    check_target(outbox, &out_dir, out, replace)?;
    let (start, rel, level) = match only {
        None => (root, PathBuf::new(), 0),
        Some(only) => descend(root, only, limits)?,
    };
    let staging = staging_file(&out_dir)?;
    let mut walk = Walk::new(*limits, staging);
    walk.folder_contents(&start, &rel, level, only.is_none())?;
    drop(start);

    if walk.files == 0 {
        if walk.left_out.is_empty() {
            return Ok(None);
        }
        let summary = walk.summary(5);
        return Err(Error::pack(PackProblem::AllLeftOut { summary }));
    }
    let readme = walk.readme(only);
    write_archive(&out_dir, &out_name, out, &readme, &mut walk, replace).map_err(|e| {
        if e.kind() == io::ErrorKind::AlreadyExists {
            exists(out)
        } else {
            Error::act(Doing::Write(out.to_path_buf()), &e)
        }
    })?;
    Ok(Some(Packed {
        files: walk.files,
        bytes: walk.bytes,
        left_out: walk.left_out,
        left_out_unlisted: walk.unlisted,
    }))
}

/// The outbox folder itself, not through a link.
fn open_root(outbox: &Path) -> Result<File> {
    open_dir(outbox).map_err(|e| Error::act(Doing::OpenOutbox(outbox.to_path_buf()), &e))
}

/// A folder, opened to walk by descriptor ([`open_at`], [`list`]); ELOOP
/// if its last name is a link. Also the sealed conversation copy's walk.
pub(crate) fn open_dir(path: &Path) -> io::Result<File> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// A refused folder of the outbox (`--only`, a body's `"only"`), named as
/// each face names it.
fn bad_only(shown: impl std::fmt::Display, why: OnlyRefused) -> Error {
    Error::pack(PackProblem::Only {
        only: shown.to_string(),
        why,
    })
}

/// Walk from the outbox down to `only`, one folder at a time, never through
/// a link. Returns the folder, its path relative to the outbox and its level.
fn descend(root: File, only: &Path, limits: &Limits) -> Result<(File, PathBuf, usize)> {
    let shown = only.display();
    // No file name holds a NUL byte: the kernel would refuse the path as
    // invalid, which is the caller's mistake, not the machine's failure.
    if only.as_os_str().as_bytes().contains(&0) {
        return Err(bad_only(
            format!("{:?}", only.as_os_str()),
            OnlyRefused::NulByte,
        ));
    }
    let mut names: Vec<&OsStr> = Vec::new();
    for c in only.components() {
        match c {
            Component::Normal(n) => names.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(bad_only(shown, OnlyRefused::Parent));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(bad_only(shown, OnlyRefused::Absolute));
            }
        }
    }
    if names.is_empty() {
        return Err(bad_only(shown, OnlyRefused::NoFolder));
    }
    if names.len() > limits.depth {
        let depth = limits.depth;
        return Err(bad_only(shown, OnlyRefused::TooDeep { depth }));
    }
    let mut dir = root;
    let mut rel = PathBuf::new();
    for name in &names {
        rel.push(name);
        dir = match open_at(&dir, name, OFlags::DIRECTORY) {
            Ok(d) => d,
            Err(e) => {
                let what = match lstat_at(&dir, name) {
                    Ok(Type::Link) => "is a link, and links are not followed".to_string(),
                    Ok(t) if t != Type::Dir => format!("is {}, not a folder", t.what()),
                    // A name longer than a file name may be is in no folder.
                    Err(e)
                        if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENAMETOOLONG)) =>
                    {
                        "is not in the outbox".to_string()
                    }
                    _ => {
                        return Err(Error::act(Doing::OpenInOutbox(rel.to_path_buf()), &e));
                    }
                };
                let rel = rel.clone();
                return Err(bad_only(shown, OnlyRefused::At { rel, is: what }));
            }
        };
    }
    Ok((dir, rel, names.len()))
}

/// Where the archive may go: a new name, or a regular file when `replace`
/// is given (`-o /dev/full` replaced the device with the archive); never a
/// folder inside the outbox, where the sealed cage writes and could change
/// the archive, and where the next pack would take it in.
fn check_target(outbox: &Path, out_dir: &Path, out: &Path, replace: bool) -> Result<()> {
    match fs::symlink_metadata(out) {
        Ok(m) => {
            let t = Type::from_file_type(m.file_type());
            if t != Type::File {
                return Err(Error::pack(PackProblem::TargetNotAFile {
                    out: out.to_path_buf(),
                    what: t.what(),
                }));
            }
            if !replace {
                return Err(exists(out));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(Error::act(Doing::LookAt(out.to_path_buf()), &e));
        }
    }
    let dir = fs::canonicalize(out_dir).map_err(|e| {
        Error::pack(PackProblem::TargetFolder {
            dir: out_dir.to_path_buf(),
            out: out.to_path_buf(),
            cause: crate::error::Cause::of(&e),
        })
    })?;
    if let Ok(outbox) = fs::canonicalize(outbox)
        && dir.starts_with(&outbox)
    {
        return Err(Error::pack(PackProblem::TargetInOutbox {
            out: out.to_path_buf(),
            outbox,
        }));
    }
    Ok(())
}

/// An archive that is there already, without `--force`.
fn exists(out: &Path) -> Error {
    Error::pack(PackProblem::TargetExists {
        out: out.to_path_buf(),
    })
}

/// Rename without replacing what is at `to` (`renameat2`'s
/// RENAME_NOREPLACE, else a hard link where a file system lacks it): a
/// file that appeared there since `check_target` is `AlreadyExists`.
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            fs::hard_link(from, to)?;
            fs::remove_file(from)
        }
        Err(e) => Err(e.into()),
    }
}

/// The archive's folder and file name.
fn split_out(out: &Path) -> Result<(PathBuf, OsString)> {
    let name = out.file_name().ok_or_else(|| {
        Error::pack(PackProblem::TargetNoName {
            out: out.to_path_buf(),
        })
    })?;
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name.to_os_string()))
}

/// An unnamed file in the archive's folder that holds the packed contents
/// one after another until the archive is written: the README listing what
/// was left out comes first in the archive, and is known only at the end of
/// the walk. Unlinked at once, so nothing is left behind, and the walk never
/// meets it.
fn staging_file(dir: &Path) -> Result<File> {
    let path = dir.join(format!(
        ".shrooms-outbox-staging-{}-{}",
        std::process::id(),
        nanos()
    ));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .ctx(|| Doing::MakeStagingIn(dir.to_path_buf()))?;
    fs::remove_file(&path).ctx(|| Doing::Remove(path.to_path_buf()))?;
    Ok(f)
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// A file packed so far: its name in the archive, its length in the staging
/// file, its modification time.
struct Staged {
    path: PathBuf,
    len: u64,
    mtime: u64,
}

/// The kind of a name, from a folder listing or from `fstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Type {
    File,
    Dir,
    Link,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Other,
}

impl Type {
    /// From a listing or a `stat` mode; None where the file system did not
    /// say (`DT_UNKNOWN`).
    fn from_rustix(t: rustix::fs::FileType) -> Option<Type> {
        use rustix::fs::FileType as T;
        Some(match t {
            T::RegularFile => Type::File,
            T::Directory => Type::Dir,
            T::Symlink => Type::Link,
            T::Fifo => Type::Fifo,
            T::Socket => Type::Socket,
            T::CharacterDevice => Type::CharDevice,
            T::BlockDevice => Type::BlockDevice,
            T::Unknown => return None,
        })
    }

    fn from_file_type(t: fs::FileType) -> Type {
        if t.is_file() {
            Type::File
        } else if t.is_dir() {
            Type::Dir
        } else if t.is_symlink() {
            Type::Link
        } else if t.is_fifo() {
            Type::Fifo
        } else if t.is_socket() {
            Type::Socket
        } else if t.is_char_device() {
            Type::CharDevice
        } else if t.is_block_device() {
            Type::BlockDevice
        } else {
            Type::Other
        }
    }

    fn from_mode(mode: u32) -> Type {
        Type::from_rustix(rustix::fs::FileType::from_raw_mode(mode)).unwrap_or(Type::Other)
    }

    fn what(self) -> &'static str {
        match self {
            Type::File => "a file",
            Type::Dir => "a folder",
            Type::Link => "a link",
            Type::Fifo => "a FIFO",
            Type::Socket => "a socket",
            Type::CharDevice => "a character device",
            Type::BlockDevice => "a block device",
            Type::Other => "not a regular file",
        }
    }
}

/// `openat(dir, name, O_NOFOLLOW | O_CLOEXEC | O_RDONLY | flags)`.
pub(crate) fn open_at(dir: &File, name: &OsStr, flags: OFlags) -> io::Result<File> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | flags,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// The type of `name` in `dir`, without following it and without opening it.
fn lstat_at(dir: &File, name: &OsStr) -> io::Result<Type> {
    let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(Type::from_mode(st.st_mode))
}

/// A name in a folder listing, and its type if the listing gave one.
pub(crate) type Listed = (OsString, Option<Type>);

/// The names in the folder `dir` (without `.` and `..`), with their types
/// as the listing gives them (None: the file system did not say), at most
/// `budget` of them. The bool says whether the listing was cut short.
pub(crate) fn list(dir: &File, budget: usize) -> io::Result<(Vec<Listed>, bool)> {
    // `Dir::read_from` reads through a descriptor of its own (reopened from
    // `dir`'s), so `dir` stays ours for openat and its offset is untouched.
    let mut stream = rustix::fs::Dir::read_from(dir)?;
    let mut out = Vec::new();
    for entry in &mut stream {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if out.len() >= budget {
            return Ok((out, true));
        }
        out.push((
            OsString::from_vec(name.to_vec()),
            Type::from_rustix(entry.file_type()),
        ));
    }
    Ok((out, false))
}

/// One pack's walk: what was packed into the staging file, and what was
/// left out.
struct Walk {
    limits: Limits,
    staging: File,
    staged_len: u64,
    entries: Vec<Staged>,
    files: usize,
    bytes: u64,
    names: usize,
    left_out: Vec<LeftOut>,
    unlisted: usize,
}

impl Walk {
    fn new(limits: Limits, staging: File) -> Walk {
        Walk {
            limits,
            staging,
            staged_len: 0,
            entries: Vec::new(),
            files: 0,
            bytes: 0,
            names: 0,
            left_out: Vec::new(),
            unlisted: 0,
        }
    }

    fn leave(&mut self, path: &Path, why: impl Into<String>) {
        if self.left_out.len() < self.limits.listed {
            let name = if path.as_os_str().is_empty() {
                ".".to_string()
            } else {
                path.to_string_lossy().into_owned()
            };
            self.left_out.push(LeftOut {
                name,
                why: why.into(),
            });
        } else {
            self.unlisted += 1;
        }
    }

    /// Pack what is in the folder `dir` (at `rel`, `level` folders below the
    /// outbox). Errors only when the staging file cannot be written.
    fn folder_contents(&mut self, dir: &File, rel: &Path, level: usize, top: bool) -> Result<()> {
        let budget = self.limits.names.saturating_sub(self.names);
        let (mut names, cut) = match list(dir, budget) {
            Ok(l) => l,
            Err(e) => {
                self.leave(rel, format!("a folder that could not be listed: {e}"));
                return Ok(());
            }
        };
        self.names += names.len();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, listed) in names {
            self.entry(dir, rel, &name, listed, level, top)?;
        }
        if cut {
            self.leave(
                rel,
                format!(
                    "a folder not looked at in full: past the limit of {} names looked at",
                    thousands(self.limits.names as u64)
                ),
            );
        }
        Ok(())
    }

    /// One name of a folder listing; `listed` is the type the listing gave.
    fn entry(
        &mut self,
        dir: &File,
        rel: &Path,
        name: &OsStr,
        listed: Option<Type>,
        level: usize,
        top: bool,
    ) -> Result<()> {
        let path = rel.join(name);
        let ty = match listed {
            Some(t) => t,
            None => match lstat_at(dir, name) {
                Ok(t) => t,
                Err(e) => {
                    self.leave(&path, format!("could not be looked at: {e}"));
                    return Ok(());
                }
            },
        };
        if top && name == README_NAME && ty == Type::File {
            self.own_notice(dir, &path);
            return Ok(());
        }
        match ty {
            Type::Dir => self.folder(dir, &path, name, level + 1),
            Type::File => self.file(dir, &path, name),
            Type::Link => {
                self.leave(&path, "a link: links are never followed");
                Ok(())
            }
            other => {
                self.leave(
                    &path,
                    format!("{}: only regular files are packed", other.what()),
                );
                Ok(())
            }
        }
    }

    fn folder(&mut self, dir: &File, path: &Path, name: &OsStr, level: usize) -> Result<()> {
        if level > self.limits.depth {
            self.leave(
                path,
                format!(
                    "a folder deeper than {} levels: not looked into",
                    self.limits.depth
                ),
            );
            return Ok(());
        }
        if self.files >= self.limits.files {
            self.leave(
                path,
                format!(
                    "a folder not looked into: past the limit of {} files",
                    thousands(self.limits.files as u64)
                ),
            );
            return Ok(());
        }
        match open_at(dir, name, OFlags::DIRECTORY) {
            Ok(sub) => self.folder_contents(&sub, path, level, false),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                self.leave(
                    path,
                    "changed during the walk, no longer a folder (perhaps a link): not followed",
                );
                Ok(())
            }
            Err(e) => {
                self.leave(path, format!("a folder that could not be opened: {e}"));
                Ok(())
            }
        }
    }

    /// Open a name the listing called a regular file; on refusal, say why.
    fn open_file(&mut self, dir: &File, path: &Path, name: &OsStr) -> Option<(File, fs::Metadata)> {
        // O_NONBLOCK: a name swapped for a FIFO opens at once instead of
        // waiting for a writer; O_NOCTTY: never a controlling terminal.
        let f = match open_at(dir, name, OFlags::NONBLOCK | OFlags::NOCTTY) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                self.leave(path, "changed to a link during the walk: not followed");
                return None;
            }
            Err(e) => {
                self.leave(path, format!("could not be opened: {e}"));
                return None;
            }
        };
        let meta = match f.metadata() {
            Ok(m) => m,
            Err(e) => {
                self.leave(path, format!("could not be looked at: {e}"));
                return None;
            }
        };
        let ty = Type::from_file_type(meta.file_type());
        if ty != Type::File {
            self.leave(
                path,
                format!("changed during the walk, now {}: not read", ty.what()),
            );
            return None;
        }
        Some((f, meta))
    }

    fn file(&mut self, dir: &File, path: &Path, name: &OsStr) -> Result<()> {
        if self.files >= self.limits.files {
            self.leave(
                path,
                format!(
                    "past the limit of {} files: not read",
                    thousands(self.limits.files as u64)
                ),
            );
            return Ok(());
        }
        let Some((f, meta)) = self.open_file(dir, path, name) else {
            return Ok(());
        };
        let size = meta.len();
        if self.bytes.saturating_add(size) > self.limits.bytes {
            self.leave(
                path,
                format!(
                    "{} bytes, past the limit of {} for the whole archive: not read",
                    thousands(size),
                    size_text(self.limits.bytes)
                ),
            );
            return Ok(());
        }
        let start = self.staged_len;
        let len = match self.copy(f, size) {
            Ok(n) => n,
            Err(Fault::Read(e)) => {
                self.staging
                    .set_len(start)
                    .and_then(|_| self.staging.seek(SeekFrom::Start(start)).map(|_| ()))
                    .ctx(|| "rewinding the staging file".into())?;
                self.staged_len = start;
                self.leave(path, format!("could not be read: {e}"));
                return Ok(());
            }
            Err(Fault::Write(e)) => {
                return Err(Error::act("writing the staging file", &e));
            }
        };
        self.staged_len += len;
        self.bytes += len;
        self.files += 1;
        self.entries.push(Staged {
            path: path.to_path_buf(),
            len,
            mtime: meta.mtime().max(0) as u64,
        });
        Ok(())
    }

    /// Copy at most `size` bytes of `f` to the staging file; the count copied.
    fn copy(&mut self, f: File, size: u64) -> std::result::Result<u64, Fault> {
        let mut from = f.take(size);
        let mut buf = vec![0u8; 256 * 1024];
        let mut n = 0u64;
        loop {
            let got = match from.read(&mut buf) {
                Ok(0) => return Ok(n),
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Fault::Read(e)),
            };
            self.staging.write_all(&buf[..got]).map_err(Fault::Write)?;
            n += got as u64;
        }
    }

    /// The outbox's own notice at its top: not packed, since the archive has
    /// its own; listed if the session changed it.
    fn own_notice(&mut self, dir: &File, path: &Path) {
        let Some((f, meta)) = self.open_file(dir, path, OsStr::new(README_NAME)) else {
            return;
        };
        let want = OUTBOX_NOTICE.as_bytes();
        let mut got = Vec::new();
        let same = meta.len() == want.len() as u64
            && f.take(want.len() as u64 + 1).read_to_end(&mut got).is_ok()
            && got == want;
        if !same {
            self.leave(
                path,
                "the outbox's notice, changed in the outbox: not packed (the archive has its own)",
            );
        }
    }

    /// The first `n` left out, for an error message.
    fn summary(&self, n: usize) -> String {
        let mut parts: Vec<String> = self
            .left_out
            .iter()
            .take(n)
            .map(|l| format!("{:?} ({})", l.name, l.why))
            .collect();
        let more = self.left_out.len().saturating_sub(n) + self.unlisted;
        if more > 0 {
            parts.push(format!("and {more} more"));
        }
        parts.join("; ")
    }

    /// The archive's README-UNTRUSTED.txt.
    fn readme(&self, only: Option<&Path>) -> String {
        let mut s = String::from(
            "Everything in this archive was written by a session that worked on\n\
             untrusted code, and must be read as untrusted text: it can carry\n\
             instructions meant for whoever reads it. Run nothing from it.\n\n",
        );
        let from = match only {
            Some(o) => format!("the folder {:?} of its outbox", o.to_string_lossy()),
            None => "its outbox".to_string(),
        };
        s.push_str(&format!(
            "Packed by shrooms-agent from {from}: {}, {}.\n\
             Only regular files were packed, and no link was followed.\n\n",
            crate::state::when::count(self.files as u64, "file", "files"),
            crate::state::when::count(self.bytes, "byte", "bytes")
        ));
        if self.left_out.is_empty() {
            s.push_str("Nothing was left out.\n");
            return s;
        }
        s.push_str("Left out, and why (names as written by the session, quoted):\n");
        for l in &self.left_out {
            s.push_str(&readme_line(l));
            s.push('\n');
        }
        if self.unlisted > 0 {
            s.push_str(&format!("and {} more, not listed.\n", self.unlisted));
        }
        s
    }
}

/// How one left-out name appears in the archive's README. Quoted and
/// escaped, so a name cannot add lines of its own to the notice.
fn readme_line(l: &LeftOut) -> String {
    format!("- {:?}: {}", l.name, l.why)
}

enum Fault {
    Read(io::Error),
    Write(io::Error),
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", thousands(bytes / MIB))
    } else {
        format!("{} bytes", thousands(bytes))
    }
}

fn header(size: u64, mtime: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(size);
    h.set_mode(0o600);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(mtime);
    h
}

/// Write the archive to a temporary file beside `out` (0600, made anew, not
/// through a link), then rename it to `out`: over a regular file there only
/// with `replace`, else never over anything.
fn write_archive(
    dir: &Path,
    name: &OsStr,
    out: &Path,
    readme: &str,
    walk: &mut Walk,
    replace: bool,
) -> io::Result<()> {
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}-{}", std::process::id(), nanos()));
    let tmp = dir.join(tmp_name);
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    let result = (|| {
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
        // gzip on every core this process may use (pargz): one ordinary
        // gzip stream, as `gzip -d` and `tar xzf` read.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let gz = pargz::ParGz::new(
            BufWriter::new(&file),
            threads,
            pargz::BLOCK,
            Compression::default(),
        )?;
        let mut b = tar::Builder::new(gz);
        let now = (nanos() / 1_000_000_000) as u64;
        b.append_data(
            &mut header(readme.len() as u64, now),
            README_NAME,
            readme.as_bytes(),
        )?;
        walk.staging.seek(SeekFrom::Start(0))?;
        for e in &walk.entries {
            // The staging file is ours and holds exactly `len` bytes here.
            let data = (&mut walk.staging).take(e.len);
            b.append_data(&mut header(e.len, e.mtime), &e.path, data)?;
        }
        let gz = b.into_inner()?;
        let buf = gz.finish()?;
        buf.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        if replace {
            // Still a regular file, or gone, as check_target saw it.
            match fs::symlink_metadata(out) {
                Ok(m) if !m.file_type().is_file() => {
                    return Err(io::Error::other(format!(
                        "{} became {} meanwhile; it was left as it is",
                        out.display(),
                        Type::from_file_type(m.file_type()).what()
                    )));
                }
                _ => fs::rename(&tmp, out)?,
            }
        } else {
            rename_noreplace(&tmp, out)?;
        }
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;
    use std::os::unix::fs::symlink;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A folder of the test's own, removed when dropped (remove_dir_all does
    /// not follow links).
    struct Temp(PathBuf);

    impl Temp {
        fn new(tag: &str) -> Temp {
            Temp(
                tempfile::Builder::new()
                    .prefix(&format!("shrooms-outbox-test-{tag}-"))
                    .tempdir()
                    .unwrap()
                    .keep(),
            )
        }
        fn outbox(&self) -> PathBuf {
            let o = self.0.join("outbox");
            make_outbox(&o).unwrap();
            o
        }
        fn out(&self) -> PathBuf {
            self.0.join("out.tar.gz")
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn write(p: &Path, text: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// The archive read back: its decompressed bytes, and (name, contents).
    fn read_back(archive: &Path) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(File::open(archive).unwrap())
            .read_to_end(&mut raw)
            .unwrap();
        let mut entries = Vec::new();
        let mut a = tar::Archive::new(&raw[..]);
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            assert_eq!(e.header().entry_type(), tar::EntryType::Regular);
            assert_eq!(e.header().mode().unwrap(), 0o600);
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            entries.push((name, data));
        }
        (raw, entries)
    }

    /// The archive's README, which must come first and list every left out.
    fn readme_of(entries: &[(String, Vec<u8>)], packed: &Packed) -> String {
        assert_eq!(entries[0].0, README_NAME);
        let readme = String::from_utf8(entries[0].1.clone()).unwrap();
        assert!(readme.contains("written by a session that worked on\nuntrusted code"));
        assert!(readme.contains("untrusted text"));
        for l in &packed.left_out {
            assert!(
                readme.lines().any(|line| line == readme_line(l)),
                "{l:?} not listed in:\n{readme}"
            );
        }
        readme
    }

    fn why_of<'a>(packed: &'a Packed, name: &str) -> &'a str {
        &packed
            .left_out
            .iter()
            .find(|l| l.name == name)
            .unwrap_or_else(|| panic!("{name} not left out: {packed:?}"))
            .why
    }

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }

    fn no_temp_files_left(t: &Temp) {
        let names: Vec<_> = fs::read_dir(&t.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            names.iter().all(|n| !n.to_string_lossy().starts_with('.')),
            "{names:?}"
        );
    }

    #[test]
    fn a_normal_pack_comes_out_intact() {
        let t = Temp::new("normal");
        let o = t.outbox();
        write(&o.join("review.md"), "# Review\nall fine\n");
        write(&o.join("notes/a.txt"), "a");
        write(&o.join("notes/deeper/b.bin"), "\0\u{1}binary");
        write(&o.join("notes/empty.txt"), "");
        fs::create_dir(o.join("empty-folder")).unwrap();
        let packed = pack(&o, None, &t.out(), false).unwrap().expect("packed");
        assert_eq!(packed.files, 4);
        assert_eq!(packed.bytes, 18 + 1 + 8);
        assert!(packed.left_out.is_empty(), "{packed:?}");

        let mode = fs::metadata(t.out()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        no_temp_files_left(&t);

        let (_, entries) = read_back(&t.out());
        let readme = readme_of(&entries, &packed);
        assert!(readme.contains("Nothing was left out."), "{readme}");
        let files: Vec<(&str, &[u8])> = entries[1..]
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_slice()))
            .collect();
        assert_eq!(
            files,
            vec![
                ("notes/a.txt", &b"a"[..]),
                ("notes/deeper/b.bin", &b"\0\x01binary"[..]),
                ("notes/empty.txt", &b""[..]),
                ("review.md", &b"# Review\nall fine\n"[..]),
            ]
        );
    }

    #[test]
    fn make_outbox_is_private_with_its_notice() {
        let t = Temp::new("make");
        let o = t.outbox();
        assert_eq!(
            fs::metadata(&o).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let notice = fs::read_to_string(o.join(README_NAME)).unwrap();
        assert!(notice.contains("written by a session that worked on untrusted code"));
        assert!(notice.contains("must be read as untrusted text"));
        // Again on the same folder: the notice is put back.
        fs::write(o.join(README_NAME), "changed").unwrap();
        make_outbox(&o).unwrap();
        assert_eq!(fs::read_to_string(o.join(README_NAME)).unwrap(), notice);
        assert_eq!(fs::read_dir(&o).unwrap().count(), 1);
    }

    #[test]
    fn an_empty_outbox_has_nothing_new() {
        let t = Temp::new("empty");
        let o = t.outbox();
        fs::create_dir_all(o.join("a/b")).unwrap();
        assert!(pack(&o, None, &t.out(), false).unwrap().is_none());
        assert!(!t.out().exists());
        no_temp_files_left(&t);
        assert!(
            pack(&o, Some(Path::new("a")), &t.out(), false)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_changed_notice_is_listed_not_packed() {
        let t = Temp::new("notice");
        let o = t.outbox();
        fs::write(o.join(README_NAME), "Nothing was left out. Trust me.").unwrap();
        write(&o.join("r.md"), "r");
        let packed = pack(&o, None, &t.out(), false).unwrap().expect("packed");
        assert_eq!(packed.files, 1);
        assert!(why_of(&packed, README_NAME).contains("changed"));
        let (raw, entries) = read_back(&t.out());
        readme_of(&entries, &packed);
        assert!(!contains(&raw, b"Trust me"));
    }

    #[test]
    fn a_link_to_a_secret_outside_is_listed_and_never_read() {
        let t = Temp::new("link-file");
        let o = t.outbox();
        let secret = t.0.join("secret.txt");
        fs::write(&secret, "SECRET-d41d8cd98f00b204").unwrap();
        symlink(&secret, o.join("innocent.txt")).unwrap();
        write(&o.join("sub/inner-link.txt"), "x");
        fs::remove_file(o.join("sub/inner-link.txt")).unwrap();
        symlink(&secret, o.join("sub/inner-link.txt")).unwrap();
        write(&o.join("result.md"), "ok");
        let packed = pack(&o, None, &t.out(), false).unwrap().expect("packed");
        assert_eq!(packed.files, 1);
        assert!(why_of(&packed, "innocent.txt").contains("a link"));
        assert!(why_of(&packed, "sub/inner-link.txt").contains("a link"));
        let (raw, entries) = read_back(&t.out());
        readme_of(&entries, &packed);
        assert!(!contains(&raw, b"SECRET-d41d8cd98f00b204"));
    }

    #[test]
    fn a_link_to_a_folder_is_listed_and_not_walked() {
        let t = Temp::new("link-dir");
        let o = t.outbox();
        let outside = t.0.join("outside");
        write(&outside.join("key"), "SECRET-FOLDER-CONTENT");
        symlink(&outside, o.join("docs")).unwrap();
        write(&o.join("result.md"), "ok");
        let packed = pack(&o, None, &t.out(), false).unwrap().expect("packed");
        assert_eq!(packed.files, 1);
        assert!(why_of(&packed, "docs").contains("a link"));
        let (raw, entries) = read_back(&t.out());
        readme_of(&entries, &packed);
        assert!(!contains(&raw, b"SECRET-FOLDER-CONTENT"));
    }

    fn mkfifo(p: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            p,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }

    /// The archive is written as a new file, or over a regular file with
    /// `replace`; never over a FIFO, a folder or a link (`-o /dev/full`
    /// replaced the device), and what is there is left as it was.
    #[test]
    fn the_archive_goes_to_a_new_file_or_over_a_regular_one_with_replace() {
        let t = Temp::new("target");
        let o = t.outbox();
        write(&o.join("r.md"), "r");
        fs::write(t.out(), "mine").unwrap();
        let e = pack(&o, None, &t.out(), false).unwrap_err();
        assert_eq!(e.kind, Kind::BadInput);
        assert_eq!(
            e.message(),
            format!(
                "{} exists; pass --force to replace it, or give another FILE",
                t.out().display()
            )
        );
        assert_eq!(fs::read(t.out()).unwrap(), b"mine");
        pack(&o, None, &t.out(), true).unwrap().expect("packed");
        let (_, entries) = read_back(&t.out());
        assert!(entries.iter().any(|(n, _)| n == "r.md"), "{entries:?}");

        let fifo = t.0.join("fifo");
        mkfifo(&fifo);
        let dir = t.0.join("dir");
        fs::create_dir(&dir).unwrap();
        let target = t.0.join("target");
        fs::write(&target, "t").unwrap();
        let link = t.0.join("link");
        symlink(&target, &link).unwrap();
        let dangling = t.0.join("dangling");
        symlink(t.0.join("nothing"), &dangling).unwrap();
        for (p, what) in [
            (&fifo, "a FIFO"),
            (&dir, "a folder"),
            (&link, "a link"),
            (&dangling, "a link"),
        ] {
            for replace in [false, true] {
                let (o2, p2) = (o.clone(), p.clone());
                let e = within_time(move || pack(&o2, None, &p2, replace)).unwrap_err();
                assert_eq!(e.kind, Kind::BadInput);
                assert_eq!(
                    e.message(),
                    format!(
                        "{} is {what}, not a regular file: the archive is written as a new file, \
                         or over a regular file with --force; give another FILE",
                        p.display()
                    )
                );
            }
        }
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        assert_eq!(fs::read_link(&link).unwrap(), target);
        assert_eq!(fs::read(&target).unwrap(), b"t");
        assert!(!t.0.join("nothing").exists());
        // Nothing was left behind beside them (no temporary archive).
        let mut names: Vec<String> = fs::read_dir(&t.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "dangling",
                "dir",
                "fifo",
                "link",
                "out.tar.gz",
                "outbox",
                "target"
            ]
        );
    }

    /// Never into the outbox being packed, however the path gets there.
    #[test]
    fn the_archive_never_goes_into_the_outbox() {
        let t = Temp::new("inside");
        let o = t.outbox();
        write(&o.join("sub/r.md"), "r");
        let to_outbox = t.0.join("to-outbox");
        symlink(&o, &to_outbox).unwrap();
        let canonical = fs::canonicalize(&o).unwrap();
        for out in [
            o.join("a.tar.gz"),
            o.join("sub/b.tar.gz"),
            o.join("sub/../c.tar.gz"),
            to_outbox.join("d.tar.gz"),
        ] {
            for replace in [false, true] {
                let e = pack(&o, None, &out, replace).unwrap_err();
                assert_eq!(e.kind, Kind::BadInput);
                assert_eq!(
                    e.message(),
                    format!(
                        "{} is inside the outbox being packed ({}): the sealed cage writes there \
                         and could change the archive; give a FILE outside it",
                        out.display(),
                        canonical.display()
                    )
                );
            }
        }
        let mut names: Vec<String> = fs::read_dir(&o)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [README_NAME, "sub"]);
        // A folder beside it whose name starts the same is outside.
        let beside = t.0.join("outbox2");
        fs::create_dir(&beside).unwrap();
        pack(&o, None, &beside.join("e.tar.gz"), false)
            .unwrap()
            .expect("packed");
    }

    /// What appears at the name between the check and the rename is not
    /// replaced.
    #[test]
    fn rename_noreplace_keeps_what_is_there() {
        let t = Temp::new("noreplace");
        let (a, b) = (t.0.join("a"), t.0.join("b"));
        fs::write(&a, "new").unwrap();
        fs::write(&b, "there").unwrap();
        let e = rename_noreplace(&a, &b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&b).unwrap(), b"there");
        fs::remove_file(&b).unwrap();
        rename_noreplace(&a, &b).unwrap();
        assert_eq!(fs::read(&b).unwrap(), b"new");
        assert!(!a.exists());
    }

    /// Run `f` on another thread; fail (rather than hang) after 20 s.
    fn within_time<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the packer hung")
    }

    #[test]
    fn a_fifo_is_listed_and_does_not_hang() {
        let t = Temp::new("fifo");
        let o = t.outbox();
        mkfifo(&o.join("pipe"));
        write(&o.join("result.md"), "ok");
        let (o2, out) = (o.clone(), t.out());
        let packed = within_time(move || pack(&o2, None, &out, false))
            .unwrap()
            .expect("packed");
        assert_eq!(packed.files, 1);
        assert!(why_of(&packed, "pipe").contains("a FIFO"));
        let (_, entries) = read_back(&t.out());
        readme_of(&entries, &packed);
    }

    #[test]
    fn a_name_swapped_during_the_walk_is_refused() {
        // The listing said "file" or "folder"; by the time it is opened the
        // name is a link, or a FIFO: refused, never followed or read.
        let t = Temp::new("swap");
        let o = t.outbox();
        let secret = t.0.join("secret");
        write(&secret.join("s.txt"), "SWAPPED-SECRET");
        symlink(secret.join("s.txt"), o.join("was-a-file")).unwrap();
        symlink(&secret, o.join("was-a-folder")).unwrap();
        mkfifo(&o.join("was-a-file-too"));
        let staging = staging_file(&t.0).unwrap();
        let dir = open_root(&o).unwrap();
        let mut walk = Walk::new(LIMITS, staging);
        let rel = Path::new("");
        let run = |walk: &mut Walk, name: &str, ty| {
            walk.entry(&dir, rel, OsStr::new(name), Some(ty), 0, true)
                .unwrap()
        };
        run(&mut walk, "was-a-file", Type::File);
        run(&mut walk, "was-a-folder", Type::Dir);
        run(&mut walk, "was-a-file-too", Type::File);
        assert_eq!(walk.files, 0);
        assert_eq!(walk.staged_len, 0);
        let packed = Packed {
            files: 0,
            bytes: 0,
            left_out: walk.left_out.clone(),
            left_out_unlisted: 0,
        };
        assert!(why_of(&packed, "was-a-file").contains("changed to a link"));
        assert!(why_of(&packed, "was-a-folder").contains("changed during the walk"));
        assert!(why_of(&packed, "was-a-file-too").contains("now a FIFO"));
    }

    #[test]
    fn past_2000_files_the_rest_is_listed() {
        let t = Temp::new("files");
        let o = t.outbox();
        for i in 0..=2000 {
            fs::write(o.join(format!("f{i:04}")), i.to_string()).unwrap();
        }
        let packed = pack(&o, None, &t.out(), false).unwrap().expect("packed");
        assert_eq!(packed.files, 2000);
        assert_eq!(packed.left_out.len(), 1);
        assert_eq!(
            why_of(&packed, "f2000"),
            "past the limit of 2,000 files: not read"
        );
        let (_, entries) = read_back(&t.out());
        assert_eq!(entries.len(), 2001); // the README and 2,000 files
        readme_of(&entries, &packed);
        assert_eq!(entries[2000], ("f1999".to_string(), b"1999".to_vec()));
    }

    #[test]
    fn a_file_of_101_mib_is_listed_and_not_read() {
        let t = Temp::new("bytes");
        let o = t.outbox();
        // Sparse: 101 MiB to the file system, no disk used; refused on its
        // size before a byte is read.
        File::create(o.join("big.bin"))
            .unwrap()
            .set_len(101 * 1024 * 1024)
            .unwrap();
        write(&o.join("small.txt"), "small");
        let packed = pack(&o, None, &t.out(), false).unwrap().expect("packed");
        assert_eq!(packed.files, 1);
        assert_eq!(
            why_of(&packed, "big.bin"),
            "105,906,176 bytes, past the limit of 100 MiB for the whole archive: not read"
        );
        let (_, entries) = read_back(&t.out());
        readme_of(&entries, &packed);
        assert_eq!(entries[1], ("small.txt".to_string(), b"small".to_vec()));
    }

    #[test]
    fn the_byte_limit_is_for_the_whole_archive() {
        // Small limits so that the test reads little: what fits is packed,
        // a file that would go past the total is left out.
        let t = Temp::new("total");
        let o = t.outbox();
        write(&o.join("a"), "123456");
        write(&o.join("b"), "1234567");
        write(&o.join("c"), "1234");
        let limits = Limits {
            bytes: 10,
            ..LIMITS
        };
        let packed = pack_with(&o, None, &t.out(), false, &limits)
            .unwrap()
            .expect("packed");
        assert_eq!((packed.files, packed.bytes), (2, 10));
        assert!(why_of(&packed, "b").contains("past the limit of 10 bytes"));
        let (_, entries) = read_back(&t.out());
        readme_of(&entries, &packed);
    }

    #[test]
    fn past_32_levels_nothing_is_read() {
        let t = Temp::new("depth");
        let o = t.outbox();
        let mut level32 = o.clone();
        for i in 1..=32 {
            level32.push(format!("d{i:02}"));
        }
        write(&level32.join("ok.txt"), "at level 32");
        write(&level32.join("d33/deep.txt"), "DEEP-SECRET");
        let packed = pack(&o, None, &t.out(), false).unwrap().expect("packed");
        assert_eq!(packed.files, 1);
        let d33 = level32.join("d33");
        let d33 = d33.strip_prefix(&o).unwrap().to_string_lossy();
        assert_eq!(
            why_of(&packed, &d33),
            "a folder deeper than 32 levels: not looked into"
        );
        let (raw, entries) = read_back(&t.out());
        readme_of(&entries, &packed);
        assert!(entries[1].0.ends_with("d32/ok.txt"));
        assert!(!contains(&raw, b"DEEP-SECRET"));
    }

    #[test]
    fn only_packs_one_folder() {
        let t = Temp::new("only");
        let o = t.outbox();
        write(&o.join("a/x.txt"), "x");
        write(&o.join("a/b/y.txt"), "y");
        write(&o.join("other.txt"), "OTHER");
        let packed = pack(&o, Some(Path::new("./a/")), &t.out(), false)
            .unwrap()
            .expect("packed");
        assert_eq!(packed.files, 2);
        let (raw, entries) = read_back(&t.out());
        readme_of(&entries, &packed);
        let names: Vec<&str> = entries[1..].iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a/b/y.txt", "a/x.txt"]);
        assert!(!contains(&raw, b"OTHER"));
    }

    #[test]
    fn only_refuses_dotdot_absolute_and_links() {
        let t = Temp::new("only-bad");
        let o = t.outbox();
        let outside = t.0.join("x");
        write(&outside.join("s.txt"), "OUTSIDE");
        write(&o.join("real/inside.txt"), "in");
        symlink(&outside, o.join("lnk")).unwrap();
        symlink(&outside, o.join("real/lnk")).unwrap();
        write(&o.join("file.txt"), "f");
        let long = "n".repeat(300);
        let cases = [
            ("../x", "`..` is not allowed"),
            ("real/../../x", "`..` is not allowed"),
            ("/etc", "not an absolute path"),
            (".", "names no folder"),
            ("lnk", "lnk is a link"),
            ("lnk/sub", "lnk is a link"),
            ("real/lnk", "real/lnk is a link"),
            ("file.txt", "is a file, not a folder"),
            ("missing", "missing is not in the outbox"),
            // Found by the fuzz target `outbox_path`: both were a failure
            // of the machine's (exit 1, a 500 over HTTP), not bad input.
            ("real\0/etc", "a NUL byte"),
            (long.as_str(), "is not in the outbox"),
        ];
        for (only, says) in cases {
            let e = pack(&o, Some(Path::new(only)), &t.out(), false).unwrap_err();
            assert_eq!(e.kind, Kind::BadInput, "{only}: {e}");
            assert!(e.message().contains(says), "{only}: {e}");
            assert!(!t.out().exists());
        }
        no_temp_files_left(&t);
    }

    #[test]
    fn everything_left_out_is_an_error_that_lists_it() {
        let t = Temp::new("all-out");
        let o = t.outbox();
        symlink("/etc/passwd", o.join("passwd")).unwrap();
        let e = pack(&o, None, &t.out(), false).unwrap_err();
        assert!(e.message().starts_with("nothing could be packed"), "{e}");
        assert!(e.message().contains("\"passwd\" (a link"), "{e}");
        assert!(!t.out().exists());
    }

    #[test]
    fn names_cannot_forge_readme_lines() {
        let t = Temp::new("names");
        let o = t.outbox();
        symlink("/etc/passwd", o.join("x\nNothing was left out.")).unwrap();
        write(&o.join("r"), "r");
        let packed = pack(&o, None, &t.out(), false).unwrap().expect("packed");
        let (_, entries) = read_back(&t.out());
        let readme = readme_of(&entries, &packed);
        assert!(
            !readme.lines().any(|l| l == "Nothing was left out."),
            "{readme}"
        );
    }

    #[test]
    fn the_left_out_list_and_the_walk_are_bounded() {
        let t = Temp::new("bounded");
        let o = t.outbox();
        write(&o.join("a-result"), "r");
        fs::create_dir(o.join("sub")).unwrap();
        for i in 0..10 {
            symlink("/etc/passwd", o.join(format!("sub/l{i}"))).unwrap();
        }
        let limits = Limits {
            names: 8,
            listed: 3,
            ..LIMITS
        };
        let packed = pack_with(&o, None, &t.out(), false, &limits)
            .unwrap()
            .expect("packed");
        // 8 names looked at: the 3 at the top, then 5 of the 10 links; the
        // 5 links and the folder cut short are left out, 3 of them listed.
        assert_eq!(packed.files, 1);
        assert_eq!(packed.left_out.len(), 3);
        assert_eq!(packed.left_out_unlisted, 3);
        let (_, entries) = read_back(&t.out());
        let readme = readme_of(&entries, &packed);
        assert!(readme.contains("and 3 more, not listed."), "{readme}");
    }

    /// The archive of a tree larger than a few gzip blocks (so made on
    /// several threads) is ordinary gzip: the system's `tar xzf` unpacks
    /// it to the same files, and the link in the tree is still not
    /// followed.
    #[test]
    fn system_tar_unpacks_a_large_archive() {
        let t = Temp::new("systar");
        let o = t.outbox();
        let mut want: Vec<(String, Vec<u8>)> = Vec::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..40 {
            let len = if i % 10 == 0 { 700_000 } else { 1 + i * 997 };
            let mut data = Vec::with_capacity(len + 8);
            while data.len() < len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x.is_multiple_of(3) {
                    data.extend_from_slice(b"text text ");
                } else {
                    data.extend_from_slice(&x.to_be_bytes());
                }
            }
            data.truncate(len);
            let name = format!("d{}/f{i:02}.bin", i % 4);
            fs::create_dir_all(o.join(format!("d{}", i % 4))).unwrap();
            fs::write(o.join(&name), &data).unwrap();
            want.push((name, data));
        }
        let secret = t.0.join("secret.txt");
        fs::write(&secret, "LINKED-SECRET").unwrap();
        symlink(&secret, o.join("d0/link")).unwrap();
        let packed = pack(&o, None, &t.out(), false).unwrap().expect("packed");
        assert_eq!(packed.files, 40);
        assert!(packed.bytes > 3 * pargz::BLOCK as u64, "{}", packed.bytes);
        let into = t.0.join("unpacked");
        fs::create_dir(&into).unwrap();
        let tar = std::process::Command::new("tar")
            .arg("xzf")
            .arg(t.out())
            .arg("-C")
            .arg(&into)
            .output()
            .expect("run tar");
        assert!(
            tar.status.success(),
            "tar xzf: {}",
            String::from_utf8_lossy(&tar.stderr)
        );
        let mut got: Vec<(String, Vec<u8>)> = Vec::new();
        for d in 0..4 {
            for e in fs::read_dir(into.join(format!("d{d}"))).unwrap() {
                let e = e.unwrap();
                let name = format!("d{d}/{}", e.file_name().to_string_lossy());
                got.push((name, fs::read(e.path()).unwrap()));
            }
        }
        got.sort();
        want.sort();
        assert!(got == want, "tar xzf gave other files");
        assert!(into.join(README_NAME).is_file());
        let (raw, _) = read_back(&t.out());
        assert!(!contains(&raw, b"LINKED-SECRET"));
    }

    #[test]
    fn thousands_and_sizes() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(2000), "2,000");
        assert_eq!(thousands(105_906_176), "105,906,176");
        assert_eq!(size_text(MAX_BYTES), "100 MiB");
        assert_eq!(size_text(10), "10 bytes");
    }
}
