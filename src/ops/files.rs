//! Files between agents (docs/machines.md, "Files between machines"):
//! whom a session takes files from (`files allow`, `files deny`, `files
//! list`, kept in its record), and the receiving end of a drop, which
//! `serve` calls for `POST /v1/sessions/{name}/drop`.
//!
//! A drop is refused unless its sender is in the session's allow list, and
//! the refusal is remembered (the newest ten) so `files list` shows who
//! tried. The sender's machine is told by `serve` from where the request
//! came from, never from a header the sender chose. Accepted files go to
//! `uploads/<session>/drop/from-<machine>_<session>/<name>`: written as they
//! arrive under a hidden partial name, given their own name only when
//! whole, never over another file, and removed if the upload breaks off.
//! What one sending session and one sending machine may leave is bounded
//! ([`Bounds`]), the check and the reservation taken as one step.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Context;
use super::plan::Step;
use super::session_address::parse_sender;
use crate::error::{Error, IoContext, Result, Subject};
use crate::state::session;

pub use crate::state::session::MAX_FILE;
/// At most this much from one sender to one session, in all (1 GiB).
pub const MAX_SENDER: u64 = 1024 * 1024 * 1024;

#[derive(Debug, Clone, Serialize)]
pub struct FilesList {
    pub session: String,
    /// As in the session object: `allow`, and `refused` with its times
    /// in RFC 3339.
    #[serde(flatten)]
    pub files: super::session_object::Files,
}

/// `files allow SESSION MACHINE/SESSION` (or `MACHINE/*`).
pub fn allow(ctx: &Context, name: &str, sender: &str) -> Result<FilesList> {
    let (m, s) = parse_sender(sender, true)?;
    let entry = format!("{m}/{s}");
    let _change = ctx.store.change_lock(name)?;
    ctx.store.update(name, |r| {
        // Those it now takes are no longer shown as refused.
        let (m, s) = (m.as_str(), s.as_str());
        r.files.refused.retain(|x| {
            !x.from
                .split_once('/')
                .is_some_and(|(xm, xs)| xm == m && (s == "*" || xs == s))
        });
        if !r.files.allow.contains(&entry) {
            r.files.allow.push(entry);
        }
        Ok(FilesList {
            session: r.name.clone(),
            files: (&r.files).into(),
        })
    })
}

/// `files deny SESSION MACHINE/SESSION`: take a sender off the allow list.
pub fn deny(ctx: &Context, name: &str, sender: &str) -> Result<FilesList> {
    let (m, s) = parse_sender(sender, true)?;
    let entry = format!("{m}/{s}");
    let _change = ctx.store.change_lock(name)?;
    ctx.store.update(name, |r| {
        if !r.files.allow.contains(&entry) {
            return Err(Error::bad_input(format!(
                "session {} does not take files from {entry}: `shrooms-agent files list {}` shows whom it does",
                r.name, r.name
            )));
        }
        r.files.allow.retain(|a| *a != entry);
        Ok(FilesList {
            session: r.name.clone(),
            files: (&r.files).into(),
        })
    })
}

/// Whether a session takes caged senders, as `cage accept-caged` and the
/// API show and set it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AcceptCaged {
    pub session: String,
    pub accept_caged: bool,
}

/// `cage accept-caged SESSION on|off`: whether it takes tasks and files
/// from caged sessions (docs/cages.md, "The cage's socket"), kept in its record.
/// Each change of a session's settings is made under its change lock
/// (`Store::change_lock`): after a rename under way, never in between.
pub fn set_accept_caged(ctx: &Context, name: &str, on: bool) -> Result<AcceptCaged> {
    let _change = ctx.store.change_lock(name)?;
    ctx.store.update(name, |r| {
        r.accept_caged = Some(on);
        Ok(AcceptCaged {
            session: r.name.clone(),
            accept_caged: on,
        })
    })
}

/// What the apps change of a session at once (`POST
/// /v1/sessions/{name}/settings`, `PATCH /v1/sessions/{name}`): each left
/// out is left as it is.
#[derive(Debug, Default)]
pub struct SettingsChange {
    pub accept_caged: Option<bool>,
    /// The whole allow list, replacing the one kept.
    pub accept_files_from: Option<Vec<String>>,
    pub auto_approve: Option<bool>,
    pub starred: Option<bool>,
    /// A refused sender (`MACHINE/SESSION`) taken off the refused list
    /// without being allowed.
    pub ignore_file_request: Option<String>,
}

/// Change a session's settings in one step: every sender is checked first,
/// so a bad one changes nothing.
pub fn change_settings(ctx: &Context, name: &str, change: SettingsChange) -> Result<()> {
    let allow = match &change.accept_files_from {
        None => None,
        Some(list) => {
            let mut entries: Vec<String> = Vec::with_capacity(list.len());
            for sender in list {
                let (m, s) = parse_sender(sender, true).map_err(|e| {
                    e.context("accept_files_from")
                        .about(Subject::Field("accept_files_from"))
                })?;
                let entry = format!("{m}/{s}");
                if !entries.contains(&entry) {
                    entries.push(entry);
                }
            }
            Some(entries)
        }
    };
    let ignore = match &change.ignore_file_request {
        None => None,
        Some(sender) => {
            let (m, s) = parse_sender(sender, false).map_err(|e| {
                e.context("ignore_file_request")
                    .about(Subject::Field("ignore_file_request"))
            })?;
            Some(format!("{m}/{s}"))
        }
    };
    let _change = ctx.store.change_lock(name)?;
    ctx.store.update(name, |r| {
        if let Some(on) = change.accept_caged {
            r.accept_caged = Some(on);
        }
        if let Some(on) = change.auto_approve {
            r.auto_approve = on;
        }
        if let Some(on) = change.starred {
            r.starred = on;
        }
        if let Some(allow) = allow {
            // Those it now takes are no longer shown as refused.
            r.files.refused.retain(|x| {
                !x.from.split_once('/').is_some_and(|(xm, xs)| {
                    allow
                        .iter()
                        .any(|a| a.split_once('/') == Some((xm, xs)) || *a == format!("{xm}/*"))
                })
            });
            r.files.allow = allow;
        }
        if let Some(from) = &ignore {
            r.files.refused.retain(|x| x.from != *from);
        }
        Ok(())
    })
}

/// `files ignore SESSION MACHINE/SESSION`: dismiss a refused sender without
/// allowing it (its next drop is refused, and remembered, again).
pub fn ignore(ctx: &Context, name: &str, sender: &str) -> Result<FilesList> {
    change_settings(
        ctx,
        name,
        SettingsChange {
            ignore_file_request: Some(sender.to_string()),
            ..SettingsChange::default()
        },
    )?;
    list(ctx, name)
}

/// A file received, as `files received` and `GET /v1/sessions/{name}/drop`
/// list them.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ReceivedFile {
    /// The sender: `MACHINE/SESSION`.
    pub from: String,
    /// The file's name in its sender's folder.
    pub name: String,
    pub size: u64,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ReceivedList {
    pub session: String,
    /// By sender, then name.
    pub files: Vec<ReceivedFile>,
}

/// `files received SESSION`: what arrived, whole (files on their way, the
/// notes beside files, and the note of a drop whose file has no name yet
/// are not listed; a file a sender named `x.note` is, unless `x` is there).
pub fn received(ctx: &Context, name: &str) -> Result<ReceivedList> {
    let record = ctx.store.load(name)?;
    let drops = ctx.store.session_uploads(&record.name).join("drop");
    let mut files = Vec::new();
    let folders = match fs::read_dir(&drops) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(ReceivedList {
                session: record.name,
                files,
            });
        }
        Err(e) => return Err(Error::failed(format!("reading {}: {e}", drops.display()))),
    };
    for folder in folders.flatten() {
        let Some(from) = folder
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix("from-"))
            // Machine names have no `_`: the first one ends the machine's.
            .and_then(|n| n.split_once('_'))
            .map(|(m, s)| format!("{m}/{s}"))
        else {
            continue;
        };
        if !folder.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(entries) = fs::read_dir(folder.path()) else {
            continue;
        };
        let entries: Vec<_> = entries.flatten().collect();
        // The notes of drops whose file has no name yet, or never got one.
        // Read after the names: a note's hidden name goes only once its
        // file has its name, which the check below then sees.
        let unplaced = hidden_notes(&folder.path());
        for entry in entries {
            let Some(file) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Ok(meta) = entry.metadata() else { continue };
            if file.starts_with('.') || !meta.is_file() {
                continue;
            }
            if file
                .strip_suffix(".note")
                .is_some_and(|f| folder.path().join(f).is_file())
            {
                continue;
            }
            if unplaced.contains(&(meta.dev(), meta.ino())) {
                continue;
            }
            files.push(ReceivedFile {
                from: from.clone(),
                name: file,
                size: meta.len(),
            });
        }
    }
    files.sort_by(|a, b| (&a.from, &a.name).cmp(&(&b.from, &b.name)));
    Ok(ReceivedList {
        session: record.name,
        files,
    })
}

/// `files clear SESSION MACHINE/SESSION FILE`: delete one received file
/// (and its note). The file is named as `files received` lists it: a name
/// that is not one a drop can have (a path, `..`, a hidden name) is refused.
pub fn clear(ctx: &Context, name: &str, from: &str, file: &str) -> Result<ReceivedList> {
    let (m, s) = parse_sender(from, false)?;
    if file.is_empty() || safe_name(file) != file {
        return Err(Error::bad_input(format!(
            "{file:?} is not the name of a received file: give it as `shrooms-agent files              received {name}` lists it"
        )));
    }
    let record = ctx.store.load(name)?;
    let facts = clear_facts(ctx, &record.name, &m, &s, file);
    super::plan::execute(ctx, None, decide_clear(facts)?)?;
    received(ctx, name)
}

/// The steps `files clear` would run, in a few words, for the tests.
#[cfg(test)]
pub(super) fn planned_clear(
    ctx: &Context,
    name: &str,
    from: &str,
    file: &str,
) -> Result<Vec<String>> {
    let (m, s) = parse_sender(from, false)?;
    let facts = clear_facts(ctx, name, &m, &s, file);
    Ok(decide_clear(facts)?
        .iter()
        .map(super::plan::Step::describe)
        .collect())
}

fn clear_facts<'a>(
    ctx: &Context,
    session: &'a str,
    m: &str,
    s: &str,
    file: &'a str,
) -> ClearFacts<'a> {
    let folder = ctx
        .store
        .session_uploads(session)
        .join("drop")
        .join(format!("from-{m}_{s}"));
    let path = folder.join(file);
    let note = folder.join(format!("{file}.note"));
    let is_file = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    ClearFacts {
        session,
        from: format!("{m}/{s}"),
        file,
        there: is_file(&path),
        note: is_file(&note).then_some(note),
        path,
    }
}

/// What `files clear` decides from.
struct ClearFacts<'a> {
    session: &'a str,
    /// `MACHINE/SESSION`.
    from: String,
    file: &'a str,
    path: PathBuf,
    /// `path` is a regular file.
    there: bool,
    /// Its note, if it has one.
    note: Option<PathBuf>,
}

/// Pure: a refusal, or the steps of a `files clear`: the note goes first,
/// so that one left without its file is never listed as a file received
/// (a crash between the two leaves the file, and its clear can be asked
/// again).
fn decide_clear(f: ClearFacts) -> Result<Vec<Step<'static>>> {
    if !f.there {
        return Err(Error::not_found(format!(
            "session {} has no file {:?} from {}: `shrooms-agent files received {}` \
             lists what it has",
            f.session, f.file, f.from, f.session
        )));
    }
    Ok(f.note
        .into_iter()
        .chain([f.path])
        .map(|path| Step::RemoveFile {
            path,
            best_effort: false,
        })
        .collect())
}

/// `files list SESSION`.
pub fn list(ctx: &Context, name: &str) -> Result<FilesList> {
    let r = ctx.store.load(name)?;
    Ok(FilesList {
        session: r.name,
        files: (&r.files).into(),
    })
}

/// A drop, as `serve` was given it.
pub struct Drop<'a> {
    /// The receiving session.
    pub session: &'a str,
    /// The sender's machine, told from the peer's address; None when the
    /// address is no machine's of the config.
    pub from_machine: Result<String, String>,
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
struct Bounds {
    file: u64,
    sender: u64,
    machine: u64,
}

/// The bounds every drop is held to.
const BOUNDS: Bounds = Bounds {
    file: MAX_FILE,
    sender: MAX_SENDER,
    machine: MAX_MACHINE,
};

/// Receive a file: check the sender, then stream exactly `length` bytes of
/// `body` into a new file. A refusal is remembered in the session's record.
/// The checks are a pure decision (`decide_drop`); what is written, one
/// plan's steps run by `plan::execute`.
pub fn receive(ctx: &Context, d: &Drop, body: &mut dyn Read) -> Result<Received> {
    receive_within(ctx, d, body, &BOUNDS)
}

/// [`receive`], held to `bounds` (smaller in tests).
///
/// The file arrives under a hidden name of its own ([`PARTIAL`]), so that
/// the receiving session never takes half a file for a whole one, and a
/// serve killed halfway leaves nothing under the file's name; only when
/// all of it is written does it take its name ([`place`]).
fn receive_within(
    ctx: &Context,
    d: &Drop,
    body: &mut dyn Read,
    bounds: &Bounds,
) -> Result<Received> {
    let record = ctx.store.load(d.session)?;
    let steps = match decide_drop(d, &record, bounds, crate::state::when::now()) {
        Ok(take) => vec![Step::Receive(Box::new(Incoming {
            take,
            bounds: *bounds,
            body: std::cell::RefCell::new(body),
        }))],
        Err(refused) => match *refused {
            (error, None) => return Err(error),
            // A refusal is remembered in the session's record, then said.
            (error, Some(remember)) => {
                super::plan::execute(ctx, None, vec![remember])?;
                return Err(error);
            }
        },
    };
    super::plan::execute(ctx, None, steps)?
        .received
        .ok_or_else(|| Error::failed("a drop that stored nothing"))
}

/// A drop taken: from whom, under which name, with which note.
pub struct Take {
    session: String,
    machine: String,
    from_session: String,
    name: String,
    length: u64,
    note: Option<String>,
}

/// A drop on its way in, with its body (`plan::Step::Receive`).
pub struct Incoming<'a> {
    take: Take,
    bounds: Bounds,
    body: std::cell::RefCell<&'a mut dyn Read>,
}

#[cfg(test)]
impl Incoming<'_> {
    /// `MACHINE/SESSION -> SESSION`.
    pub fn words(&self) -> String {
        let t = &self.take;
        format!("{}/{} -> {}", t.machine, t.from_session, t.session)
    }
}

/// A drop's refusal, with the step that remembers it when it is one.
type Refused = Box<(Error, Option<Step<'static>>)>;

fn refusal(e: Error) -> Refused {
    Box::new((e, None))
}

/// Pure: a drop's refusal (with the step that remembers it in the
/// session's record, when it is a sender's refused), or what is taken.
fn decide_drop(
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
            let s = d.from_session.ok_or_else(|| {
                refusal(Error::bad_input(
                    "a drop names its sender's session in the header X-Shrooms-From-Session",
                ))
            })?;
            session::validate_name(s)
                .map_err(|e| refusal(e.context("the header X-Shrooms-From-Session")))?;
            s
        }
    };
    let machine = match &d.from_machine {
        Ok(m) => m.clone(),
        Err(why) => return Err(refusal(Error::forbidden(why.clone()))),
    };
    let from = format!("{machine}/{from_session}");
    let refused = |e: Error| Err(refusal(e));
    if d.name.is_empty() {
        return refused(Error::bad_input(
            "a drop names its file: add ?name=FILE to the address",
        ));
    }
    if d.caged.is_some() && !record.accepts_caged() {
        return refused(Error::forbidden(format!(
            "session {} takes nothing from caged sessions, and {from} is caged; \
             `shrooms-agent cage accept-caged {} on` lets caged senders in",
            d.session, d.session
        )));
    }
    if !record.files.allows(&machine, from_session) {
        let error = Error::forbidden(format!(
            "session {} takes no files from {from}; `shrooms-agent files allow {} {from}` lets them in",
            d.session, d.session
        ));
        let remember = Step::RememberRefused {
            session: d.session.to_string(),
            from,
            when: now,
        };
        return Err(Box::new((error, Some(remember))));
    }
    let note = d.note.filter(|n| !n.is_empty());
    if note.is_some_and(|n| n.len() > MAX_NOTE) {
        return refused(Error::bad_input(format!(
            "the note is over {MAX_NOTE} bytes: shorten it, or send it as a file"
        )));
    }
    if d.length > bounds.file {
        return refused(Error::too_large(format!(
            "the file is {} bytes, over the {} a session takes in one file",
            d.length,
            size_text(bounds.file)
        )));
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

/// Store a drop taken (`plan::Step::Receive`): its folders, room reserved
/// under the bounds, exactly its length streamed into a hidden file, then
/// its name. A failure keeps nothing (a file on its way whose writer died
/// is removed by the next drop into its folder).
pub(super) fn store(ctx: &Context, incoming: &Incoming) -> Result<Received> {
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
        return Err(match e {
            Copy::Read(e) => {
                Error::bad_input(format!("the upload broke off ({e}); nothing was kept"))
            }
            Copy::Write(e) => {
                Error::failed(format!("writing {}: {e}; nothing was kept", path.display()))
            }
        });
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
        .map_err(|e| Error::failed(format!("looking at {}: {e}", uploads.display())))?
    {
        for p in [&drops, &folder, &path].into_iter().chain(note.as_ref()) {
            std::os::unix::fs::lchown(p, Some(uid), Some(gid))
                .map_err(|e| Error::failed(format!("giving {} to the cage: {e}", p.display())))?;
        }
    }
    Ok(Received {
        path,
        size: d.length,
        note,
    })
}

/// 1 GiB, 100 MiB, or bytes.
fn size_text(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    match n {
        n if n >= 1024 * MIB && n % (1024 * MIB) == 0 => format!("{} GiB", n / 1024 / MIB),
        n if n >= MIB && n % MIB == 0 => format!("{} MiB", n / MIB),
        n => format!("{n} bytes"),
    }
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
    let entries = fs::read_dir(drops).ctx(|| format!("reading {}", drops.display()))?;
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
        return Err(Error::too_large(format!(
            "{}/{} has sent {sender_total} bytes to session {} already (counting what is on its \
             way); with this file that is over the {} one sender may leave",
            from.machine,
            from.session,
            from.receiver,
            size_text(bounds.sender)
        )));
    }
    if machine_total + length > bounds.machine {
        return Err(Error::too_large(format!(
            "the sessions of machine {} have sent {machine_total} bytes to session {} already \
             (counting what is on its way); with this file that is over the {} one machine may \
             leave",
            from.machine,
            from.receiver,
            size_text(bounds.machine)
        )));
    }
    let folder = drops.join(&own);
    let (path, file) = create_partial(&folder)?;
    // A partial file's lock says its upload is in flight (`clear_abandoned`).
    let reserved = crate::state::lock::ours(&file).and_then(|()| file.set_len(length));
    if let Err(e) = reserved {
        drop(file);
        let _ = fs::remove_file(&path);
        return Err(Error::failed(format!("making {}: {e}", path.display())));
    }
    Ok(Partial { path, file })
}

/// A new hidden file in `folder` for a drop on its way: O_EXCL, never
/// through a link, 0600.
fn create_partial(folder: &Path) -> Result<(PathBuf, File)> {
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
                    .ctx(|| format!("setting the mode of {}", path.display()))?;
                return Ok((path, f));
            }
            // Left by an earlier process of the same id.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::failed(format!("making {}: {e}", path.display()))),
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
fn remove_abandoned(folder: &Path) {
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
fn place(
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
                    return Err(Error::failed(format!(
                        "naming {}: {e}",
                        note_path.display()
                    )));
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
            Err(e) => return Err(Error::failed(format!("naming {}: {e}", path.display()))),
        }
        return Ok((path, hidden.map(|_| note_path)));
    }
    Err(Error::failed(format!(
        "{} holds 10,000 files named like {name:?} already",
        folder.display()
    )))
}

/// How the hidden name of a drop's note ends: `.incoming-<pid>-<n>.note`
/// beside its partial file `.incoming-<pid>-<n>.partial`.
const HIDDEN_NOTE: &str = ".note";

/// The hidden name of the note of the drop whose file is on its way as
/// `partial`.
fn hidden_note(partial: &Path) -> PathBuf {
    let name = partial.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let id = name.strip_suffix(PARTIAL).unwrap_or(name);
    partial.with_file_name(format!("{id}{HIDDEN_NOTE}"))
}

/// The inodes of the hidden notes in `folder`: a note with one of them is
/// a drop's whose file has not (or had not, when it died) its name yet.
fn hidden_notes(folder: &Path) -> Vec<(u64, u64)> {
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
fn write_note(path: &Path, text: &str) -> Result<()> {
    session::before_write().ctx(|| format!("making {}", path.display()))?;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .ctx(|| format!("making {}", path.display()))?;
    let written = f
        .set_permissions(fs::Permissions::from_mode(0o600))
        .and_then(|()| io::Write::write_all(&mut f, text.as_bytes()))
        .and_then(|()| f.sync_all());
    if let Err(e) = written {
        drop(f);
        let _ = fs::remove_file(path);
        return Err(Error::failed(format!("writing {}: {e}", path.display())));
    }
    session::after_write();
    Ok(())
}

/// Why a copy stopped: the sender's side (a failed or short read: bad
/// input, 400) or this machine's (a failed write, a full disk: 500).
#[derive(Debug)]
enum Copy {
    Read(io::Error),
    Write(io::Error),
}

/// Copy exactly `n` bytes; fewer (the sender stopped) is a read error.
/// Not `io::copy`, whose one error does not say which side failed.
fn copy_exactly(from: &mut dyn Read, to: &mut dyn io::Write, n: u64) -> Result<(), Copy> {
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
fn split_ext(name: &str) -> (&str, &str) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_names() {
        assert_eq!(safe_name("notes.txt"), "notes.txt");
        assert_eq!(safe_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_name("..."), "file");
        assert_eq!(safe_name(".bashrc"), "bashrc");
        assert_eq!(safe_name("a\\b\\..c"), "c");
        assert_eq!(safe_name("x\ny"), "x_y");
        assert_eq!(safe_name(""), "file");
        assert_eq!(safe_name("dir/"), "file");
        assert!(safe_name(&"é".repeat(300)).len() <= 200);
    }

    /// Spaces before the dots do not keep a name hidden, or `..`.
    #[test]
    fn safe_names_trim_before_stripping_dots() {
        assert_eq!(safe_name(" .."), "file");
        assert_eq!(safe_name(" .bashrc"), "bashrc");
        assert_eq!(safe_name(" . .bashrc"), "bashrc");
        assert_eq!(safe_name("\t..\u{a0}.profile "), "profile");
        assert_eq!(safe_name(" . "), "file");
        assert_eq!(safe_name("   "), "file");
        assert_eq!(safe_name("x/ .."), "file");
        assert_eq!(safe_name("\n.x"), "x");
        assert_eq!(safe_name("\u{1}.x"), "_.x");
        assert_eq!(safe_name(" notes .txt "), "notes .txt");
        assert_eq!(
            safe_name(&format!("{}.txt", "a".repeat(199))),
            "a".repeat(199) + "."
        );
        for name in [" ..", " .bashrc", "..", ".", " . . ", "\n.x", "./.."] {
            let safe = safe_name(name);
            assert!(!safe.starts_with('.'), "{name:?} -> {safe:?}");
            assert!(
                !safe.starts_with(char::is_whitespace),
                "{name:?} -> {safe:?}"
            );
            assert_ne!(safe, "..");
        }
    }

    /// Bidi controls and invisible format characters are dropped: with
    /// them, `\u{202E}gpj.exe` shows as `exe.jpg` in a listing.
    #[test]
    fn safe_names_drop_bidi_and_invisible_characters() {
        assert_eq!(safe_name("\u{202E}gpj.exe"), "gpj.exe");
        assert_eq!(safe_name("a\u{202A}b\u{202B}c\u{202C}d\u{202D}e"), "abcde");
        assert_eq!(safe_name("a\u{2066}b\u{2067}c\u{2068}d\u{2069}e"), "abcde");
        assert_eq!(
            safe_name("a\u{200B}b\u{200C}c\u{200D}d\u{200E}e\u{200F}f"),
            "abcdef"
        );
        assert_eq!(safe_name("\u{FEFF}notes\u{061C}.txt"), "notes.txt");
        // Dropped before the leading dots go: no hidden name through them.
        assert_eq!(safe_name("\u{200B}.bashrc"), "bashrc");
        assert_eq!(safe_name("\u{202E}\u{FEFF}"), "file");
        // Other letters stay.
        assert_eq!(safe_name("résumé ü.pdf"), "résumé ü.pdf");
    }

    /// A short body is the sender's; a failed write is this machine's.
    #[test]
    fn a_copy_says_which_side_failed() {
        let mut out = Vec::new();
        copy_exactly(&mut &b"hello"[..], &mut out, 5).unwrap();
        assert_eq!(out, b"hello");
        let e = copy_exactly(&mut &b"hel"[..], &mut Vec::new(), 5).unwrap_err();
        assert!(
            matches!(&e, Copy::Read(e) if e.to_string() == "3 of 5 bytes arrived"),
            "{e:?}"
        );
        let mut full = fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let e = copy_exactly(&mut &b"hello"[..], &mut full, 5).unwrap_err();
        assert!(
            matches!(&e, Copy::Write(e) if e.raw_os_error() == Some(libc::ENOSPC)),
            "{e:?}"
        );
    }

    #[test]
    fn extensions() {
        assert_eq!(split_ext("a.tar.gz"), ("a", ".tar.gz"));
        assert_eq!(split_ext("a.txt"), ("a", ".txt"));
        assert_eq!(split_ext("a"), ("a", ""));
        assert_eq!(split_ext(".tar.gz"), (".tar", ".gz"));
    }

    /// A folder of its own for a test.
    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("shrooms-files-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A whole file (in `partial`, with `text`) placed under `name`.
    fn placed(
        dir: &Path,
        name: &str,
        text: &str,
        note: Option<&str>,
    ) -> (PathBuf, Option<PathBuf>) {
        let (partial, mut f) = create_partial(dir).unwrap();
        io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        let out = place(&partial, dir, name, note).unwrap();
        assert!(!partial.exists(), "{partial:?}");
        out
    }

    #[test]
    fn never_over_another_file() {
        let dir = temp_dir("place");
        let (a, _) = placed(&dir, "r.tar.gz", "a", None);
        let (b, _) = placed(&dir, "r.tar.gz", "b", None);
        let (c, _) = placed(&dir, "r.tar.gz", "c", None);
        assert_eq!(a.file_name().unwrap(), "r.tar.gz");
        assert_eq!(b.file_name().unwrap(), "r-1.tar.gz");
        assert_eq!(c.file_name().unwrap(), "r-2.tar.gz");
        assert_eq!(fs::read_to_string(&a).unwrap(), "a");
        assert_eq!(fs::read_to_string(&c).unwrap(), "c");
        // A link at the name is not written through, nor replaced.
        std::os::unix::fs::symlink("/etc/hostname", dir.join("l")).unwrap();
        let (d, _) = placed(&dir, "l", "d", None);
        assert_eq!(d.file_name().unwrap(), "l-1");
        assert!(fs::symlink_metadata(dir.join("l")).unwrap().is_symlink());
        // Nothing hidden is left.
        let hidden: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(hidden.is_empty(), "{hidden:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// The note takes the name its file finally got; a name whose `.note`
    /// is a file already is passed over.
    #[test]
    fn a_note_goes_with_the_final_name() {
        let dir = temp_dir("notes");
        fs::write(dir.join("r.txt"), "earlier").unwrap();
        let (file, note) = placed(&dir, "r.txt", "new", Some("read me"));
        assert_eq!(file, dir.join("r-1.txt"));
        assert_eq!(note, Some(dir.join("r-1.txt.note")));
        assert_eq!(
            fs::read_to_string(dir.join("r-1.txt.note")).unwrap(),
            "read me"
        );
        assert_eq!(fs::read_to_string(dir.join("r.txt")).unwrap(), "earlier");
        fs::write(dir.join("s.txt.note"), "a file of that name").unwrap();
        let (file, note) = placed(&dir, "s.txt", "new", Some("mine"));
        assert_eq!(file, dir.join("s-1.txt"));
        assert_eq!(fs::read_to_string(note.unwrap()).unwrap(), "mine");
        assert_eq!(
            fs::read_to_string(dir.join("s.txt.note")).unwrap(),
            "a file of that name"
        );
        // Without a note, the name is free to take.
        let (file, note) = placed(&dir, "s.txt", "plain", None);
        assert_eq!((file, note), (dir.join("s.txt"), None));
        for f in ["r-1.txt", "r-1.txt.note", "s-1.txt.note"] {
            assert_eq!(mode_of(&dir.join(f)), 0o600, "{f}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    fn mode_of(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// A state folder with session `inbox`, which takes files from every
    /// session of machine alpha, and its context.
    fn inbox(name: &str) -> (Context, PathBuf) {
        let root = temp_dir(name);
        let settings = crate::settings::Settings::from_text(
            Some("machine_name = \"here\""),
            Path::new("/cfg/config.toml"),
            root.join("state"),
            root.clone(),
            &crate::settings::Env::new(),
        )
        .unwrap();
        let ctx = Context::new(settings, crate::settings::Env::new(), Vec::new());
        ctx.store.ensure().unwrap();
        ctx.store
            .save(&session::Record {
                version: session::RECORD_VERSION,
                name: "inbox".into(),
                dir: root.clone(),
                harness: crate::cage::harness::Harness::Claude,
                created: 1,
                cage: None,
                auto_approve: false,
                starred: false,
                files: session::FilesPolicy {
                    allow: vec!["alpha/*".into(), "beta/*".into()],
                    refused: Vec::new(),
                },
                tokens: Default::default(),
                accept_caged: None,
                last_image: None,
                after_turn: None,
            })
            .unwrap();
        (ctx, root)
    }

    fn drop_from<'a>(machine: &str, session: &'a str, name: &'a str, length: u64) -> Drop<'a> {
        Drop {
            session: "inbox",
            from_machine: Ok(machine.into()),
            from_session: Some(session),
            caged: None,
            name,
            length,
            note: None,
        }
    }

    const SMALL: Bounds = Bounds {
        file: 100,
        sender: 150,
        machine: 250,
    };

    /// Each session of a machine has its own bound, and all of them
    /// together the machine's: naming a new session does not make room.
    #[test]
    fn a_machine_is_bounded_whatever_sessions_it_names() {
        let (ctx, root) = inbox("machine-bound");
        let send = |machine: &str, session: &str, name: &str, n: usize| {
            let body = vec![b'x'; n];
            let d = drop_from(machine, session, name, n as u64);
            receive_within(&ctx, &d, &mut &body[..], &SMALL)
        };
        send("alpha", "a", "1", 100).unwrap();
        let e = send("alpha", "a", "2", 100).unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::TooLarge);
        assert!(
            e.message.contains("alpha/a has sent 100 bytes"),
            "{}",
            e.message
        );
        send("alpha", "a", "2", 50).unwrap();
        send("alpha", "b", "1", 100).unwrap();
        // alpha has 250 now: a third session name gets nothing more.
        let e = send("alpha", "c", "1", 1).unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::TooLarge);
        assert!(
            e.message.contains("machine alpha have sent 250 bytes")
                && e.message.contains("250 bytes one machine may leave"),
            "{}",
            e.message
        );
        // Another machine has its own.
        send("beta", "a", "1", 100).unwrap();
        fs::remove_dir_all(&root).unwrap();
    }

    /// A caged sender is named by its socket, whatever it says itself, and
    /// is taken only by a session that accepts caged senders.
    #[test]
    fn a_caged_drop_needs_accept_caged_and_is_the_caged_sessions() {
        let (ctx, root) = inbox("caged");
        let send = |caged: Option<&str>| {
            let mut d = drop_from("alpha", "boss", "f.txt", 2);
            d.caged = caged;
            receive_within(&ctx, &d, &mut &b"hi"[..], &SMALL)
        };
        // Uncaged, the inbox takes no caged senders by default.
        let e = send(Some("web")).unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::Forbidden);
        assert!(e.message.contains("accept-caged inbox on"), "{}", e.message);
        set_accept_caged(&ctx, "inbox", true).unwrap();
        let got = send(Some("web")).unwrap();
        assert!(
            got.path.ends_with("drop/from-alpha_web/f.txt"),
            "{}",
            got.path.display()
        );
        // Not caged: named as it says.
        let got = send(None).unwrap();
        assert!(got.path.ends_with("drop/from-alpha_boss/f.txt"));
        set_accept_caged(&ctx, "inbox", false).unwrap();
        assert!(send(Some("web")).is_err());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn allowing_a_sender_takes_it_off_the_refused_list() {
        let (ctx, root) = inbox("allow-refused");
        let d = drop_from("gamma", "x", "f", 1);
        assert!(receive_within(&ctx, &d, &mut &b"x"[..], &SMALL).is_err());
        let d = drop_from("gamma", "y", "f", 1);
        assert!(receive_within(&ctx, &d, &mut &b"x"[..], &SMALL).is_err());
        let d = drop_from("delta", "x", "f", 1);
        assert!(receive_within(&ctx, &d, &mut &b"x"[..], &SMALL).is_err());
        let froms = |l: &FilesList| -> Vec<String> {
            l.files.refused.iter().map(|r| r.from.clone()).collect()
        };
        assert_eq!(
            froms(&list(&ctx, "inbox").unwrap()),
            ["gamma/x", "gamma/y", "delta/x"]
        );
        assert_eq!(
            froms(&allow(&ctx, "inbox", "gamma/x").unwrap()),
            ["gamma/y", "delta/x"]
        );
        assert_eq!(
            froms(&allow(&ctx, "inbox", "gamma/*").unwrap()),
            ["delta/x"]
        );
        fs::remove_dir_all(&root).unwrap();
    }

    /// A body that waits, at its first read, until `others` other bodies
    /// have been read from too (or half a second).
    struct Meeting<'a> {
        bytes: &'a [u8],
        met: &'a std::sync::atomic::AtomicUsize,
        others: usize,
        first: bool,
    }

    impl Read for Meeting<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            use std::sync::atomic::Ordering;
            if self.first {
                self.first = false;
                self.met.fetch_add(1, Ordering::SeqCst);
                let end = std::time::Instant::now() + std::time::Duration::from_millis(500);
                while self.met.load(Ordering::SeqCst) <= self.others
                    && std::time::Instant::now() < end
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            self.bytes.read(out)
        }
    }

    /// Drops at once are counted with one another: of four uploads of 100
    /// bytes from four session names of one machine, each checked before
    /// any is written, only two fit in its 250.
    #[test]
    fn drops_at_once_cannot_all_fit_into_room_for_one() {
        let (ctx, root) = inbox("at-once");
        let met = std::sync::atomic::AtomicUsize::new(0);
        let body = vec![b'x'; 100];
        let names = ["s1", "s2", "s3", "s4"];
        let results: Vec<Result<Received>> = std::thread::scope(|scope| {
            let handles: Vec<_> = names
                .iter()
                .map(|s| {
                    // A context is not Sync: each drop has its own, as
                    // each request of serve does.
                    let settings = ctx.settings.clone();
                    let (met, body) = (&met, &body);
                    scope.spawn(move || {
                        let ctx =
                            &Context::shared(settings, Default::default(), Default::default());
                        let d = drop_from("alpha", s, "f", 100);
                        let mut reader = Meeting {
                            bytes: body,
                            met,
                            others: 3,
                            first: true,
                        };
                        receive_within(ctx, &d, &mut reader, &SMALL)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let taken = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(taken, 2, "{results:?}");
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(r.kind, crate::error::Kind::TooLarge, "{r:?}");
        }
        fs::remove_dir_all(&root).unwrap();
    }

    /// A partial file nobody holds (its writer died) is removed by the
    /// next drop from that machine; one that is held is not.
    #[test]
    fn abandoned_partials_are_cleared_held_ones_kept() {
        let (ctx, root) = inbox("abandoned");
        let folder = ctx.store.session_uploads("inbox").join("drop/from-alpha_a");
        fs::create_dir_all(&folder).unwrap();
        let dead = folder.join(".incoming-1-1.partial");
        fs::write(&dead, vec![0u8; 140]).unwrap();
        let (held, f) = create_partial(&folder).unwrap();
        assert!(crate::state::lock::try_exclusive(&f).unwrap());
        f.set_len(10).unwrap();
        // 140 abandoned would leave no room for 100 of the sender's 150.
        let body = [b'x'; 100];
        let d = drop_from("alpha", "a", "f", 100);
        let got = receive_within(&ctx, &d, &mut &body[..], &SMALL).unwrap();
        assert_eq!(got.path, folder.join("f"));
        assert!(!dead.exists());
        assert!(held.exists());
        drop(f);
        fs::remove_dir_all(&root).unwrap();
    }

    /// A drop that died after its note's name and before its file's leaves
    /// a note without its file: not listed, and removed by the next sweep
    /// of its folder, but not while its drop is under way (its partial file
    /// held). A dead drop that got both names keeps them; a file a sender
    /// named `t.note` is listed, and kept.
    #[test]
    fn the_note_of_a_dead_drop_is_not_listed_and_goes() {
        let (ctx, root) = inbox("dead-note");
        let folder = ctx.store.session_uploads("inbox").join("drop/from-alpha_a");
        fs::create_dir_all(&folder).unwrap();
        let (partial, f) = create_partial(&folder).unwrap();
        assert!(crate::state::lock::try_exclusive(&f).unwrap());
        let hidden = hidden_note(&partial);
        write_note(&hidden, "read me").unwrap();
        fs::hard_link(&hidden, folder.join("r.txt.note")).unwrap();
        let dead = folder.join(".incoming-1-1.partial");
        fs::write(&dead, "hello").unwrap();
        fs::hard_link(&dead, folder.join("s.txt")).unwrap();
        write_note(&hidden_note(&dead), "mine").unwrap();
        fs::hard_link(hidden_note(&dead), folder.join("s.txt.note")).unwrap();
        fs::write(folder.join("t.note"), "a file").unwrap();
        let names = || -> Vec<String> {
            let files = received(&ctx, "inbox").unwrap().files;
            files.into_iter().map(|f| f.name).collect()
        };
        assert_eq!(names(), ["s.txt", "t.note"]);
        remove_abandoned(&folder);
        for kept in [&hidden, &partial, &folder.join("r.txt.note")] {
            assert!(kept.exists(), "{kept:?}");
        }
        assert!(!dead.exists() && !hidden_note(&dead).exists());
        assert_eq!(
            fs::read_to_string(folder.join("s.txt.note")).unwrap(),
            "mine"
        );
        // Its writer gone, the note goes with its hidden names. (Another
        // test of this process that starts a program forks a child that
        // holds a copy of every descriptor until it executes the program:
        // for that moment the partial is still held, and the sweep keeps it;
        // the next sweep takes it.)
        drop(f);
        let left = || [&hidden, &partial, &folder.join("r.txt.note")].map(|p| p.exists());
        for _ in 0..50 {
            remove_abandoned(&folder);
            if left() == [false; 3] {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(left(), [false; 3], "hidden, partial, note still there");
        assert_eq!(names(), ["s.txt", "t.note"]);
        assert!(folder.join("s.txt.note").exists() && folder.join("t.note").exists());
        fs::remove_dir_all(&root).unwrap();
    }
}
