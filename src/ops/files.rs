//! Files between agents (issue 6, point 4; seed, "Files between agents"):
//! whom a session takes files from (`files allow`, `files deny`, `files
//! list`, kept in its record), and the receiving end of a drop, which
//! `serve` calls for `POST /v1/sessions/{name}/drop`.
//!
//! A drop is refused unless its sender is in the session's allow list, and
//! the refusal is remembered (the newest ten) so `files list` shows who
//! tried. The sender's machine is told by `serve` from where the request
//! came from, never from a header the sender chose. Accepted files go to
//! `uploads/<session>/drop/from-<machine>_<session>/<name>`, written as they
//! arrive, never over another file, and removed if the upload breaks off.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Context;
use crate::error::{Error, IoContext, Result};
use crate::session::{self, FilesPolicy};
use crate::settings::validate_machine_name;

/// At most this much in one file (100 MiB).
pub const MAX_FILE: u64 = 100 * 1024 * 1024;
/// At most this much from one sender to one session, in all (1 GiB).
pub const MAX_SENDER: u64 = 1024 * 1024 * 1024;

/// A sender: `MACHINE/SESSION`, or `MACHINE/*` for every session of it.
fn parse_sender(text: &str, wildcard: bool) -> Result<(String, String)> {
    let bad = || {
        Error::bad_input(format!(
            "{text:?} is not a sender: write it as MACHINE/SESSION{}",
            if wildcard { " or MACHINE/*" } else { "" }
        ))
    };
    let (machine, s) = text.split_once('/').ok_or_else(bad)?;
    validate_machine_name(machine).map_err(Error::bad_input)?;
    if !(wildcard && s == "*") {
        session::validate_name(s)?;
    }
    Ok((machine.to_string(), s.to_string()))
}

/// Parse `MACHINE/SESSION` (no wildcard): where `outbox send` sends to.
pub fn parse_target(text: &str) -> Result<(String, String)> {
    parse_sender(text, false)
}

#[derive(Debug, Clone, Serialize)]
pub struct FilesList {
    pub session: String,
    #[serde(flatten)]
    pub files: FilesPolicy,
}

/// `files allow SESSION MACHINE/SESSION` (or `MACHINE/*`).
pub fn allow(ctx: &Context, name: &str, sender: &str) -> Result<FilesList> {
    let (m, s) = parse_sender(sender, true)?;
    let entry = format!("{m}/{s}");
    ctx.store.update(name, |r| {
        if !r.files.allow.contains(&entry) {
            r.files.allow.push(entry);
        }
        Ok(FilesList {
            session: r.name.clone(),
            files: r.files.clone(),
        })
    })
}

/// `files deny SESSION MACHINE/SESSION`: take a sender off the allow list.
pub fn deny(ctx: &Context, name: &str, sender: &str) -> Result<FilesList> {
    let (m, s) = parse_sender(sender, true)?;
    let entry = format!("{m}/{s}");
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
            files: r.files.clone(),
        })
    })
}

/// `files list SESSION`.
pub fn list(ctx: &Context, name: &str) -> Result<FilesList> {
    let r = ctx.store.load(name)?;
    Ok(FilesList {
        session: r.name,
        files: r.files,
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
    /// The `name` the sender gave.
    pub name: &'a str,
    /// The body's length (Content-Length).
    pub length: u64,
    /// The sender's `note`, kept beside the file when there is one.
    pub note: Option<&'a str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Received {
    pub path: PathBuf,
    pub size: u64,
    /// `<path>.note`: the sender's note, when the drop carried one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<PathBuf>,
}

/// At most this much in a drop's note (4 KiB).
pub const MAX_NOTE: usize = 4096;

/// Receive a file: check the sender, then stream exactly `length` bytes of
/// `body` into a new file. A refusal is remembered in the session's record.
pub fn receive(ctx: &Context, d: &Drop, body: &mut dyn Read) -> Result<Received> {
    let record = ctx.store.load(d.session)?;
    let from_session = d.from_session.ok_or_else(|| {
        Error::bad_input("a drop names its sender's session in the header X-Shrooms-From-Session")
    })?;
    session::validate_name(from_session)
        .map_err(|e| e.context("the header X-Shrooms-From-Session"))?;
    let machine = match &d.from_machine {
        Ok(m) => m.clone(),
        Err(why) => return Err(Error::forbidden(why.clone())),
    };
    if d.name.is_empty() {
        return Err(Error::bad_input(
            "a drop names its file: add ?name=FILE to the address",
        ));
    }
    if !record.files.allows(&machine, from_session) {
        let from = format!("{machine}/{from_session}");
        let when = super::create::now();
        let remembered = from.clone();
        ctx.store.update(d.session, move |r| {
            r.files.remember_refused(when, remembered);
            Ok(())
        })?;
        return Err(Error::forbidden(format!(
            "session {} takes no files from {from}; `shrooms-agent files allow {} {from}` lets them in",
            d.session, d.session
        )));
    }
    let note = d.note.filter(|n| !n.is_empty());
    if note.is_some_and(|n| n.len() > MAX_NOTE) {
        return Err(Error::bad_input(format!(
            "the note is over {MAX_NOTE} bytes: shorten it, or send it as a file"
        )));
    }
    if d.length > MAX_FILE {
        return Err(Error::too_large(format!(
            "the file is {} bytes, over the {} MiB a session takes in one file",
            d.length,
            MAX_FILE / 1024 / 1024
        )));
    }
    let folder = ctx
        .store
        .session_uploads(d.session)
        .join("drop")
        .join(format!("from-{machine}_{from_session}"));
    let already = folder_size(&folder);
    if already + d.length > MAX_SENDER {
        return Err(Error::too_large(format!(
            "{machine}/{from_session} has sent {already} bytes to session {} already; with this \
             file that is over the {} GiB a sender may leave",
            d.session,
            MAX_SENDER / 1024 / 1024 / 1024
        )));
    }
    ctx.store.ensure()?;
    for dir in [
        ctx.store.session_uploads(d.session),
        ctx.store.session_uploads(d.session).join("drop"),
        folder.clone(),
    ] {
        session::make_private_dir(&dir)?;
    }
    let safe = safe_name(d.name);
    let (path, mut file) = create_new(&folder, &safe)?;
    if let Err(e) = copy_exactly(body, &mut file, d.length) {
        drop(file);
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
    if let Err(e) = file.sync_all() {
        drop(file);
        let _ = fs::remove_file(&path);
        return Err(Error::failed(format!("writing {}: {e}", path.display())));
    }
    let note = match note {
        None => None,
        Some(text) => match write_note(&path, text) {
            Ok(note) => Some(note),
            Err(e) => {
                // All or nothing: a file whose note was lost is not kept.
                let _ = fs::remove_file(&path);
                return Err(e);
            }
        },
    };
    Ok(Received {
        path,
        size: d.length,
        note,
    })
}

/// Keep a drop's note beside its file, as `<file>.note` (0600). The file's
/// own name was new, so a note of that name can only exist if a sender
/// named a file `x.note` before; then the note is not written over it.
fn write_note(file: &Path, text: &str) -> Result<PathBuf> {
    let mut name = file.as_os_str().to_owned();
    name.push(".note");
    let path = PathBuf::from(name);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .ctx(|| format!("making {}", path.display()))?;
    let written = io::Write::write_all(&mut f, text.as_bytes()).and_then(|()| f.sync_all());
    if let Err(e) = written {
        drop(f);
        let _ = fs::remove_file(&path);
        return Err(Error::failed(format!("writing {}: {e}", path.display())));
    }
    Ok(path)
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

/// `name`, else `name-1.ext`, `name-2.ext`...: made with O_EXCL, never
/// through a link, never over a file that is there.
fn create_new(folder: &Path, name: &str) -> Result<(PathBuf, File)> {
    let (stem, ext) = split_ext(name);
    for i in 0..10_000u32 {
        let candidate = if i == 0 {
            name.to_string()
        } else {
            format!("{stem}-{i}{ext}")
        };
        let path = folder.join(&candidate);
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
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::failed(format!("making {}: {e}", path.display()))),
        }
    }
    Err(Error::failed(format!(
        "{} holds 10,000 files named like {name:?} already",
        folder.display()
    )))
}

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

    #[test]
    fn never_over_another_file() {
        let dir = std::env::temp_dir().join(format!("shrooms-files-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let (a, _) = create_new(&dir, "r.tar.gz").unwrap();
        let (b, _) = create_new(&dir, "r.tar.gz").unwrap();
        let (c, _) = create_new(&dir, "r.tar.gz").unwrap();
        assert_eq!(a.file_name().unwrap(), "r.tar.gz");
        assert_eq!(b.file_name().unwrap(), "r-1.tar.gz");
        assert_eq!(c.file_name().unwrap(), "r-2.tar.gz");
        // A link at the name is not written through.
        std::os::unix::fs::symlink("/etc/hostname", dir.join("l")).unwrap();
        let (d, _) = create_new(&dir, "l").unwrap();
        assert_eq!(d.file_name().unwrap(), "l-1");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn senders() {
        assert_eq!(
            parse_sender("alpha/review", true).unwrap(),
            ("alpha".into(), "review".into())
        );
        assert_eq!(parse_sender("alpha/*", true).unwrap().1, "*");
        assert!(parse_target("alpha/*").is_err());
        assert!(parse_sender("alpha", true).is_err());
        assert!(parse_sender("al_pha/x", true).is_err());
        assert!(parse_sender("alpha/x/y", true).is_err());
    }
}
