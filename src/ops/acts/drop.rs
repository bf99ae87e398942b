//! The receiving end of a drop, on the file system: the decision on a
//! drop (`decide_drop`), then its file stored (`store`, `Step::Receive`)
//! or its sender remembered as refused (`Step::RememberRefused`). Files
//! arrive under `uploads/<session>/drop/from-<machine>_<session>/<name>`:
//! written as they arrive under a hidden partial name, given their own name
//! only when whole, never over another file, and removed if the upload
//! breaks off. What one sending session and one sending machine may leave
//! is bounded ([`Bounds`]), the check and the reservation taken as one
//! step. `files::receive` (`serve`'s drop route) runs it as a plan; an
//! archive `outbox send` hands to a session of this machine is received
//! here within its own step ([`receive_now`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Doing, DropRefused, Error, IoContext, Result};
use crate::ops::Context;
use crate::state::session::{self, MAX_FILE};

/// At most this much from one sender to one session, in all (1 GiB).
pub const MAX_SENDER: u64 = 1024 * 1024 * 1024;

/// A drop, as `serve` was given it.
pub struct Drop<'a> {
    /// The receiving session.
    pub session: &'a str,
    /// The sender's machine, told from the peer's address; None when the
    /// address is no machine's of the config.
    pub from_machine: Result<String, DropRefused>,
    /// `X-Shrooms-From-Session`.
    pub from_session: Option<&'a str>,
    /// `X-Shrooms-Caged`: the caged session it comes from, through its
    /// cage's socket. It is the sender, whatever `from_session` says, and
    /// only a session that accepts caged senders takes it.
    pub caged: Option<&'a str>,
    /// The `name` the sender gave.
    pub name: &'a str,
    /// The body's length (Content-Length).
    pub length: u64,
    /// The sender's `note`, kept beside the file when there is one.
    pub note: Option<&'a str>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Received {
    #[schema(value_type = String)]
    pub path: PathBuf,
    pub size: u64,
    /// `<path>.note`: the sender's note, when the drop carried one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub note: Option<PathBuf>,
}

/// At most this much in a drop's note (4 KiB).
pub const MAX_NOTE: usize = 4096;

/// What a session takes: at most this much in one file, from one sending
/// session, and from all the sessions of one machine.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub file: u64,
    pub sender: u64,
    pub machine: u64,
}

/// The bounds every drop is held to.
pub const BOUNDS: Bounds = Bounds {
    file: MAX_FILE,
    sender: MAX_SENDER,
    machine: MAX_MACHINE,
};

/// A drop taken: from whom, under which name, with which note.
pub struct Take {
    session: String,
    machine: String,
    from_session: String,
    name: String,
    length: u64,
    note: Option<String>,
}

/// A drop on its way in, with its body (`Step::Receive`).
pub struct Incoming<'a> {
    pub take: Take,
    pub bounds: Bounds,
    pub body: std::cell::RefCell<&'a mut dyn Read>,
}

#[cfg(test)]
impl Incoming<'_> {
    /// `MACHINE/SESSION -> SESSION`.
    pub fn words(&self) -> String {
        let t = &self.take;
        format!("{}/{} -> {}", t.machine, t.from_session, t.session)
    }
}

/// A drop's refusal, with the sender to remember as refused when it is
/// one.
pub type Refused = Box<(Error, Option<Refusal>)>;

/// A sender refused, to be remembered in the receiving session's record
/// (`Step::RememberRefused`).
pub struct Refusal {
    pub session: String,
    pub from: String,
    pub when: u64,
}

fn refusal(e: Error) -> Refused {
    Box::new((e, None))
}

/// Pure: a drop's refusal (with the step that remembers it in the
/// session's record, when it is a sender's refused), or what is taken.
pub fn decide_drop(
    d: &Drop,
    record: &session::Record,
    bounds: &Bounds,
    now: u64,
) -> std::result::Result<Take, Refused> {
    let from_session = match d.caged {
        Some(caged) => {
            session::validate_name(caged)
                .map_err(|e| refusal(e.context("the header X-Shrooms-Caged")))?;
            caged
        }
        None => {
            let s = d
                .from_session
                .ok_or_else(|| refusal(Error::drop_refused(d.session, DropRefused::NoSender)))?;
            session::validate_name(s)
                .map_err(|e| refusal(e.context("the header X-Shrooms-From-Session")))?;
            s
        }
    };
    let machine = match &d.from_machine {
        Ok(m) => m.clone(),
        Err(why) => return Err(refusal(Error::drop_refused(d.session, why.clone()))),
    };
    let from = format!("{machine}/{from_session}");
    let refused = |e: Error| Err(refusal(e));
    if d.name.is_empty() {
        return refused(Error::drop_refused(d.session, DropRefused::NoName));
    }
    if d.caged.is_some() && !record.accepts_caged() {
        return refused(Error::drop_refused(d.session, DropRefused::Caged { from }));
    }
    if !record.files.allows(&machine, from_session) {
        let error = Error::drop_refused(d.session, DropRefused::NotAllowed { from: from.clone() });
        let remember = Refusal {
            session: d.session.to_string(),
            from,
            when: now,
        };
        return Err(Box::new((error, Some(remember))));
    }
    let note = d.note.filter(|n| !n.is_empty());
    if note.is_some_and(|n| n.len() > MAX_NOTE) {
        return refused(Error::drop_refused(
            d.session,
            DropRefused::NoteTooLong { max: MAX_NOTE },
        ));
    }
    if d.length > bounds.file {
        return refused(Error::drop_refused(
            d.session,
            DropRefused::FileTooLarge {
                length: d.length,
                bound: bounds.file,
            },
        ));
    }
    Ok(Take {
        session: d.session.to_string(),
        machine,
        from_session: from_session.to_string(),
        name: d.name.to_string(),
        length: d.length,
        note: note.map(str::to_string),
    })
}

/// Store a drop taken (`Step::Receive`): its folders, room reserved
/// under the bounds, exactly its length streamed into a hidden file, then
/// its name. A failure keeps nothing (a file on its way whose writer died
/// is removed by the next drop into its folder).
pub fn store(ctx: &Context, incoming: &Incoming) -> Result<Received> {
    let d = &incoming.take;
    let (machine, from_session, bounds) = (&d.machine, &d.from_session, &incoming.bounds);
    let body = &mut **incoming.body.borrow_mut();
    let note = d.note.as_deref();
    let uploads = ctx.store.session_uploads(&d.session);
    let drops = uploads.join("drop");
    let folder = drops.join(format!("from-{machine}_{from_session}"));
    ctx.store.ensure()?;
    for dir in [&uploads, &drops, &folder] {
        session::make_private_dir(dir)?;
    }
    let sender = Sender {
        machine,
        session: from_session,
        receiver: &d.session,
    };
    let mut partial = reserve(&drops, &sender, d.length, bounds)?;
    let path = partial.path.clone();
    let written = session::before_write()
        .map_err(Copy::Write)
        .and_then(|()| copy_exactly(body, &mut partial.file, d.length))
        .and_then(|()| partial.file.sync_all().map_err(Copy::Write));
    if let Err(e) = written {
        drop(partial);
        let _ = fs::remove_file(&path);
        let why = match e {
            Copy::Read(e) => DropRefused::BrokeOff {
                cause: e.to_string(),
            },
            Copy::Write(e) => DropRefused::NotWritten {
                path,
                cause: e.to_string(),
            },
        };
        return Err(Error::drop_refused(&d.session, why));
    }
    session::after_write();
    // Under the lock again, so that a drop counting meanwhile never sees
    // this file twice (under both names, between the link and the unlink).
    let placed = {
        let _held = crate::state::lock::take(&drops.join(LOCK))?;
        place(&path, &folder, &safe_name(&d.name), note)
    };
    drop(partial);
    if placed.is_err() {
        let _ = fs::remove_file(&path);
    }
    let (path, note) = placed?;
    // As root, a rootful cage was given its folder at its start (it is no
    // one to root's files): what arrives meanwhile is given to it too.
    if let Some((uid, gid)) = crate::host::userns::cage_owner_of(&uploads)
        .map_err(|e| Error::act(Doing::LookAt(uploads.to_path_buf()), &e))?
    {
        for p in [&drops, &folder, &path].into_iter().chain(note.as_ref()) {
            std::os::unix::fs::lchown(p, Some(uid), Some(gid))
                .map_err(|e| Error::act(Doing::GiveToCage(p.to_path_buf()), &e))?;
        }
    }
    Ok(Received {
        path,
        size: d.length,
        note,
    })
}

/// At most this much from the sessions of one machine to one session, in
/// all (2 GiB): with `MACHINE/*` allowed, the sender names its session
/// itself, and a bound per session alone would be none.
pub const MAX_MACHINE: u64 = 2 * 1024 * 1024 * 1024;

/// The lock file in a session's `drop/` folder, held while drops into it
/// are counted and reserved, and while one takes its name: short.
const LOCK: &str = ".lock";

/// How the name of a file on its way ends. It starts with `.incoming-`:
/// hidden, and no name [`safe_name`] gives, so the receiving session never
/// mistakes it for a file that arrived.
const PARTIAL: &str = ".partial";

/// Who a drop is from, and to whom.
struct Sender<'a> {
    machine: &'a str,
    session: &'a str,
    receiver: &'a str,
}

/// A file on its way, under its hidden name, flocked while it is written:
/// a `.partial` file nobody holds was left by a writer that died.
struct Partial {
    path: PathBuf,
    file: File,
}

/// Check the bounds and reserve room for `length` bytes, in one step under
/// the `drop/` folder's lock, so that two drops at once cannot both fit
/// into the room there is for one. What a sender's machine has there is
/// every file in its `from-<machine>_*` folders, and every file on its way
/// counted at its full length: a partial file is made that long at once
/// (sparse), so the folders' sizes count the drops in flight too. Partial
/// files whose writer died are removed first.
fn reserve(drops: &Path, from: &Sender, length: u64, bounds: &Bounds) -> Result<Partial> {
    let _held = crate::state::lock::take(&drops.join(LOCK))?;
    let own = format!("from-{}_{}", from.machine, from.session);
    // Machine names have no `_` (validate_machine_name), so this prefix
    // is that machine's folders only.
    let prefix = format!("from-{}_", from.machine);
    let (mut machine_total, mut sender_total) = (0u64, 0u64);
    let entries = fs::read_dir(drops).ctx(|| Doing::Read(drops.to_path_buf()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| n.starts_with(&prefix)) else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        remove_abandoned(&entry.path());
        let size = folder_size(&entry.path());
        machine_total += size;
        if name == own {
            sender_total = size;
        }
    }
    if sender_total + length > bounds.sender {
        return Err(Error::drop_refused(
            from.receiver,
            DropRefused::SenderOver {
                from: format!("{}/{}", from.machine, from.session),
                sent: sender_total,
                bound: bounds.sender,
            },
        ));
    }
    if machine_total + length > bounds.machine {
        return Err(Error::drop_refused(
            from.receiver,
            DropRefused::MachineOver {
                machine: from.machine.to_string(),
                sent: machine_total,
                bound: bounds.machine,
            },
        ));
    }
    let folder = drops.join(&own);
    let (path, file) = create_partial(&folder)?;
    // A partial file's lock says its upload is in flight (`clear_abandoned`).
    let reserved = crate::state::lock::ours(&file).and_then(|()| file.set_len(length));
    if let Err(e) = reserved {
        drop(file);
        let _ = fs::remove_file(&path);
        return Err(Error::act(Doing::Make(path.to_path_buf()), &e));
    }
    Ok(Partial { path, file })
}

/// A new hidden file in `folder` for a drop on its way: O_EXCL, never
/// through a link, 0600.
pub(in crate::ops) fn create_partial(folder: &Path) -> Result<(PathBuf, File)> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    loop {
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path = folder.join(format!(".incoming-{}-{n}{PARTIAL}", std::process::id()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => {
                f.set_permissions(fs::Permissions::from_mode(0o600))
                    .ctx(|| Doing::SetModeOf(path.to_path_buf()))?;
                return Ok((path, f));
            }
            // Left by an earlier process of the same id.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::act(Doing::Make(path.to_path_buf()), &e)),
        }
    }
}

/// Remove the partial files in `folder` that no writer holds: their
/// writer died (a serve killed halfway) and they would count against the
/// sender's bound for ever. Called under the `drop/` lock, under which
/// every partial file is made and locked, so none is taken for abandoned
/// between its making and its locking.
///
/// And the notes of drops that died before their file had its name
/// ([`place`]): a hidden note whose partial file no writer holds (gone, or
/// free) is its dead drop's, and so is a note linked to it (the same
/// inode) whose file is not there; both go. Sound against a drop under
/// way beside: a drop's hidden note is made, linked and removed while it
/// holds the `drop/` lock this sweep holds too, and while it holds its
/// partial file's lock (taken at its making, let go only after the hidden
/// note is gone); and a note is never linked beside a file not its own.
pub(in crate::ops) fn remove_abandoned(folder: &Path) {
    let Ok(entries) = fs::read_dir(folder) else {
        return;
    };
    let mut notes = Vec::new();
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !name.starts_with(".incoming-") || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if let Some(id) = name.strip_suffix(HIDDEN_NOTE) {
            notes.push((entry.path(), folder.join(format!("{id}{PARTIAL}"))));
        } else if name.ends_with(PARTIAL) && !held_by_writer(&entry.path()) {
            let _ = fs::remove_file(entry.path());
        }
    }
    for (hidden, partial) in notes {
        if held_by_writer(&partial) {
            continue;
        }
        // The hidden name goes only once every orphan linked to it has
        // gone: it is what marks them (a note left without it would be
        // listed as a file named `x.note`); a failure here leaves both for
        // the next sweep.
        let Ok(h) = fs::symlink_metadata(&hidden) else {
            continue;
        };
        let mut kept = false;
        if h.nlink() > 1 {
            for entry in fs::read_dir(folder).into_iter().flatten().flatten() {
                let path = entry.path();
                let orphan = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".note"))
                    .is_some_and(|file| {
                        !file.starts_with('.') && fs::symlink_metadata(folder.join(file)).is_err()
                    })
                    && fs::symlink_metadata(&path)
                        .is_ok_and(|m| (m.dev(), m.ino()) == (h.dev(), h.ino()));
                if orphan
                    && let Err(e) = fs::remove_file(&path)
                    && e.kind() != io::ErrorKind::NotFound
                {
                    kept = true;
                }
            }
        }
        if !kept {
            let _ = fs::remove_file(&hidden);
        }
    }
}

/// Whether a live writer holds the partial file at `path`: false when it
/// is not there, or its lock is free. What cannot be opened or tried is
/// taken as held: it is left alone. (Not `lock::held`: this opens with
/// O_NOFOLLOW, so that a link planted under a partial's name is never
/// followed, to a FIFO or elsewhere.)
fn held_by_writer(path: &Path) -> bool {
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => !crate::state::lock::try_exclusive(&f).unwrap_or(false),
        Err(e) => e.kind() != io::ErrorKind::NotFound,
    }
}

/// Give a whole file its name in `folder`: `name`, else `name-1.ext`,
/// `name-2.ext`..., with its note as `<that name>.note`. link(2) makes the
/// names, and fails on one that exists (a link there included), so nothing
/// is ever written over; then the hidden names go. A name whose `.note` is
/// taken (a sender named a file so) is passed over when there is a note.
///
/// All or nothing under a crash at any write: the note is written first
/// under a hidden name of the drop's own ([`hidden_note`]), linked to its
/// final name, and only then is the file linked to its. A drop that dies
/// before the file's link leaves a note without its file, never a file
/// without its note: that note shares its inode with the hidden one, so
/// `files received` does not list it ([`received`]), and the next drop
/// into the folder removes both ([`remove_abandoned`]). Called under the
/// `drop/` lock, with the partial file's lock held.
pub(in crate::ops) fn place(
    partial: &Path,
    folder: &Path,
    name: &str,
    note: Option<&str>,
) -> Result<(PathBuf, Option<PathBuf>)> {
    let hidden = match note {
        None => None,
        Some(text) => {
            let hidden = hidden_note(partial);
            write_note(&hidden, text)?;
            Some(hidden)
        }
    };
    let placed = place_linked(partial, folder, name, hidden.as_deref());
    // The hidden note's name goes before the partial's: while it is there
    // its partial is (and is held while its writer lives), which the sweep
    // goes by.
    if let Some(hidden) = &hidden {
        let_go(hidden);
    }
    let (path, note) = placed?;
    // The partial name goes; the file stays under its own.
    let_go(partial);
    let _ = File::open(folder).and_then(|d| d.sync_all());
    Ok((path, note))
}

/// Remove a hidden name a drop is done with (a write the fault tests
/// count). A name left (a failure here) is removed by the next drop's
/// sweep ([`remove_abandoned`]): nobody holds it.
fn let_go(name: &Path) {
    if session::before_write().is_ok() {
        let _ = fs::remove_file(name);
        session::after_write();
    }
}

/// [`place`]'s names: the note's (a link to `hidden`, when there is a
/// note), then the file's. A failure takes back the note's.
fn place_linked(
    partial: &Path,
    folder: &Path,
    name: &str,
    hidden: Option<&Path>,
) -> Result<(PathBuf, Option<PathBuf>)> {
    let link =
        |from: &Path, to: &Path| session::before_write().and_then(|()| fs::hard_link(from, to));
    let (stem, ext) = split_ext(name);
    for i in 0..10_000u32 {
        let candidate = if i == 0 {
            name.to_string()
        } else {
            format!("{stem}-{i}{ext}")
        };
        let path = folder.join(&candidate);
        let note_path = folder.join(format!("{candidate}.note"));
        // Under the `drop/` lock no drop makes either name meanwhile: a
        // note is never linked beside a file that is not its own.
        let taken = |p: &Path| fs::symlink_metadata(p).is_ok();
        if taken(&path) || (hidden.is_some() && taken(&note_path)) {
            continue;
        }
        if let Some(hidden) = hidden {
            match link(hidden, &note_path) {
                Ok(()) => session::after_write(),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(Error::act(Doing::Name(note_path.to_path_buf()), &e));
                }
            }
        }
        let linked = link(partial, &path);
        if linked.is_err() && hidden.is_some() {
            // All or nothing: no note is kept without its file.
            let _ = fs::remove_file(&note_path);
        }
        match linked {
            Ok(()) => session::after_write(),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::act(Doing::Name(path.to_path_buf()), &e)),
        }
        return Ok((path, hidden.map(|_| note_path)));
    }
    Err(Error::state(
        folder,
        crate::error::StateProblem::NoNameLeft {
            name: name.to_string(),
        },
    ))
}

/// How the hidden name of a drop's note ends: `.incoming-<pid>-<n>.note`
/// beside its partial file `.incoming-<pid>-<n>.partial`.
const HIDDEN_NOTE: &str = ".note";

/// The hidden name of the note of the drop whose file is on its way as
/// `partial`.
pub(in crate::ops) fn hidden_note(partial: &Path) -> PathBuf {
    let name = partial.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let id = name.strip_suffix(PARTIAL).unwrap_or(name);
    partial.with_file_name(format!("{id}{HIDDEN_NOTE}"))
}

/// The inodes of the hidden notes in `folder`: a note with one of them is
/// a drop's whose file has not (or had not, when it died) its name yet.
pub fn hidden_notes(folder: &Path) -> Vec<(u64, u64)> {
    let Ok(entries) = fs::read_dir(folder) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(".incoming-") && n.ends_with(HIDDEN_NOTE))
        })
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// Keep a drop's note as `path` (0600), never over a file there.
pub(in crate::ops) fn write_note(path: &Path, text: &str) -> Result<()> {
    session::before_write().ctx(|| Doing::Make(path.to_path_buf()))?;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .ctx(|| Doing::Make(path.to_path_buf()))?;
    let written = f
        .set_permissions(fs::Permissions::from_mode(0o600))
        .and_then(|()| io::Write::write_all(&mut f, text.as_bytes()))
        .and_then(|()| f.sync_all());
    if let Err(e) = written {
        drop(f);
        let _ = fs::remove_file(path);
        return Err(Error::act(Doing::Write(path.to_path_buf()), &e));
    }
    session::after_write();
    Ok(())
}

/// Why a copy stopped: the sender's side (a failed or short read: bad
/// input, 400) or this machine's (a failed write, a full disk: 500).
#[derive(Debug)]
pub(in crate::ops) enum Copy {
    Read(io::Error),
    Write(io::Error),
}

/// Copy exactly `n` bytes; fewer (the sender stopped) is a read error.
/// Not `io::copy`, whose one error does not say which side failed.
pub(in crate::ops) fn copy_exactly(
    from: &mut dyn Read,
    to: &mut dyn io::Write,
    n: u64,
) -> Result<(), Copy> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let got = match from.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(Copy::Read(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{} of {n} bytes arrived", n - left),
                )));
            }
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Copy::Read(e)),
        };
        to.write_all(&buf[..got]).map_err(Copy::Write)?;
        left -= got as u64;
    }
    Ok(())
}

/// Bytes of the regular files directly in a sender's folder.
fn folder_size(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// A name made safe for one file in one folder: the last part after any
/// `/` or `\`, without bidi controls or invisible format characters
/// ([`invisible`]), no control characters, no leading dots or spaces
/// (trimmed first, then the dots stripped, until neither is left: ` ..`
/// and ` .bashrc` are no hidden names), no trailing spaces, at most 200
/// bytes; [`FALLBACK_NAME`] when nothing is left.
pub fn safe_name(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or("");
    let visible: String = last.chars().filter(|c| !invisible(*c)).collect();
    let mut out: String = visible
        .trim_start_matches(|c: char| c == '.' || c.is_whitespace())
        .trim_end()
        .chars()
        .map(|c| if c.is_control() { '_' } else { c })
        .collect();
    while out.len() > 200 {
        out.pop();
    }
    let out = out.trim_end();
    if out.is_empty() {
        FALLBACK_NAME.into()
    } else {
        out.to_string()
    }
}

/// Characters that change how a name shows without showing themselves:
/// the bidi embeddings, overrides and isolates (U+202A-U+202E,
/// U+2066-U+2069), the Arabic letter mark (U+061C), the zero-width space,
/// joiners and direction marks (U+200B-U+200F) and the byte-order mark
/// (U+FEFF). With U+202E, `\u{202E}gpj.exe` is listed as `exe.jpg`: the
/// receiving session, or whoever looks, would open a program as a picture.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200B}'..='\u{200F}'
        | '\u{061C}'
        | '\u{FEFF}')
}

/// The name of a file whose given name leaves nothing once made safe.
pub const FALLBACK_NAME: &str = "file";

/// `a.tar.gz` -> (`a`, `.tar.gz`); `a.txt` -> (`a`, `.txt`); `a` -> (`a`, ``).
pub(in crate::ops) fn split_ext(name: &str) -> (&str, &str) {
    for double in [".tar.gz", ".tar.xz", ".tar.bz2", ".tar.zst"] {
        if let Some(stem) = name.strip_suffix(double)
            && !stem.is_empty()
        {
            return (stem, &name[stem.len()..]);
        }
    }
    match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (name, ""),
    }
}

/// Remember in a session's record that a sender was refused
/// (`Step::RememberRefused`).
pub fn remember_refused(ctx: &Context, session: &str, from: &str, when: u64) -> Result<()> {
    let from = from.to_string();
    ctx.store.update(session, move |r| {
        r.files.remember_refused(when, from);
        Ok(())
    })
}

/// Receive a drop within the step that hands it over (an archive `outbox
/// send` gives a session of this machine): the same decision and the same
/// acts as `files::receive`'s plan, whose one step (store it, or remember
/// its sender refused) has nothing to take back.
pub fn receive_now(ctx: &Context, d: &Drop, body: &mut dyn Read) -> Result<Received> {
    let record = ctx.store.load(d.session)?;
    match decide_drop(d, &record, &BOUNDS, crate::state::when::now()) {
        Ok(take) => store(
            ctx,
            &Incoming {
                take,
                bounds: BOUNDS,
                body: std::cell::RefCell::new(body),
            },
        ),
        Err(refused) => {
            let (error, remember) = *refused;
            if let Some(r) = remember {
                remember_refused(ctx, &r.session, &r.from, r.when)?;
            }
            Err(error)
        }
    }
}
