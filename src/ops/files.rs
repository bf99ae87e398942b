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
//! (`acts::drop::Bounds`), the check and the reservation taken as one step.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Context;
#[cfg(test)]
pub use super::acts::drop::MAX_NOTE;
use super::acts::drop::{BOUNDS, Bounds, Incoming, decide_drop, hidden_notes};
pub use super::acts::drop::{Drop, Received, safe_name};
use super::plan::Step;
use super::session_address::parse_sender;
use crate::error::{Doing, Error, Result, SessionProblem, Subject};

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
            return Err(Error::session(
                &r.name,
                SessionProblem::FilesNotFrom { sender: entry },
            ));
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
        Err(e) => return Err(Error::act(Doing::Read(drops.to_path_buf()), &e)),
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
        let file = file.to_string();
        return Err(Error::session(
            name,
            SessionProblem::NotAReceivedName { file },
        ));
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
        return Err(Error::session(
            f.session,
            SessionProblem::NoReceivedFile {
                file: f.file.to_string(),
                sender: f.from,
            },
        ));
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

/// Receive a file: check the sender, then stream exactly `length` bytes of
/// `body` into a new file. A refusal is remembered in the session's record.
/// The checks are a pure decision (`decide_drop`); what is written, one
/// plan's steps run by `plan::execute`.
pub fn receive(ctx: &Context, d: &Drop, body: &mut dyn Read) -> Result<Received> {
    receive_within(ctx, d, body, &BOUNDS)
}

/// [`receive`], held to `bounds` (smaller in tests).
///
/// The file arrives under a hidden name of its own (`acts::drop`), so that
/// the receiving session never takes half a file for a whole one, and a
/// serve killed halfway leaves nothing under the file's name; only when
/// all of it is written does it take its name (`acts::drop::place`).
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
            (error, Some(r)) => {
                let remember = Step::RememberRefused {
                    session: r.session,
                    from: r.from,
                    when: r.when,
                };
                super::plan::execute(ctx, None, vec![remember])?;
                return Err(error);
            }
        },
    };
    super::plan::execute(ctx, None, steps)?
        .received
        .ok_or_else(|| Error::unmet("a drop that stored nothing"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::acts::drop::{
        Copy, copy_exactly, create_partial, hidden_note, place, remove_abandoned, split_ext,
        write_note,
    };
    use crate::state::session;
    use std::os::unix::fs::PermissionsExt;

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
        tempfile::Builder::new()
            .prefix(&format!("shrooms-files-test-{name}-"))
            .tempdir()
            .unwrap()
            .keep()
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
            e.message().contains("alpha/a has sent 100 bytes"),
            "{}",
            e.message()
        );
        send("alpha", "a", "2", 50).unwrap();
        send("alpha", "b", "1", 100).unwrap();
        // alpha has 250 now: a third session name gets nothing more.
        let e = send("alpha", "c", "1", 1).unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::TooLarge);
        assert!(
            e.message().contains("machine alpha have sent 250 bytes")
                && e.message().contains("250 bytes one machine may leave"),
            "{}",
            e.message()
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
        assert!(
            e.message().contains("accept-caged inbox on"),
            "{}",
            e.message()
        );
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
