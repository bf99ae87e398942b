//! The way back into a conversation, in its cage. When an interactive
//! Claude Code ends, its last line is `Resume this session with: claude
//! --resume ID`: typed on the machine, that runs Claude Code outside the
//! cage, with the machine's key, outside the gateway and its budget. So
//! after an interactive `cage run` the tool says the same in its own words,
//! `shrooms-agent cage run NAME -- --resume ID`, last on the screen.
//!
//! The ID is the name of the transcript the turn wrote: the newest one of
//! the project's conversation folder (where the cage's harness keeps them,
//! seen from the machine) changed since the turn began. Claude Code names
//! its transcripts `<session id>.jsonl` and takes that id with `--resume`;
//! pi names them `<time>_<session id>.jsonl` and takes the id with
//! `--session` (its `--help`). Where the id cannot be known, `--continue`
//! (both harnesses' word for the project's last conversation). Codex keeps
//! its conversations in the cage's own folder and goes back to this
//! folder's last one with `resume --last` (`codex resume --help`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::cage::harness::Harness;
use crate::state::session::{CageRecord, Record, Store};

/// A turn's watch on its project's transcripts.
#[derive(Debug, Clone)]
pub struct Watch {
    session: String,
    harness: Harness,
    /// Where the transcripts are, on this machine; None where the
    /// harness's name for the folder cannot be known.
    folder: Option<PathBuf>,
    since: SystemTime,
}

/// Does `cage run` with these arguments start the harness's interactive
/// screen (not one answer printed with `-p`)?
pub fn interactive(args: &[String]) -> bool {
    !args
        .iter()
        .any(|a| a == "-p" || a == "--print" || a.starts_with("--print=") || a == "--mode")
}

/// Where a cage's harness keeps this project's transcripts, seen from the
/// machine: an ordinary cage's are the machine's own folder (mounted at
/// its own path); a sealed cage's are in its private config folder.
pub fn transcript_folder(store: &Store, record: &Record, cage: &CageRecord) -> Option<PathBuf> {
    match &cage.sealed {
        Some(_) => crate::cage::harness::claude_project_folder(&record.dir)
            .map(|f| store.private_home(&cage.container).join("projects").join(f)),
        None => record
            .harness
            .conversation_dir(&cage.harness_dir, &record.dir),
    }
}

impl Watch {
    /// Begin watching, before the turn starts.
    pub fn begin(store: &Store, record: &Record, cage: &CageRecord) -> Watch {
        Watch {
            session: record.name.clone(),
            harness: record.harness,
            folder: transcript_folder(store, record, cage),
            since: SystemTime::now(),
        }
    }

    /// The line to print once the turn has ended, if there is a
    /// conversation to go back to.
    pub fn line(&self) -> Option<String> {
        let newest = match &self.folder {
            Some(f) => Some(newest_changed(f, self.since)?),
            None => None,
        };
        Some(line(&self.session, self.harness, newest.as_deref()))
    }
}

/// Pure: the words that go back into the conversation whose transcript is
/// `transcript` (None: not known).
pub fn line(session: &str, harness: Harness, transcript: Option<&Path>) -> String {
    let id = transcript.and_then(|t| session_id(harness, t));
    let how = match (harness, id) {
        (Harness::Claude, Some(id)) => format!("--resume {id}"),
        (Harness::Pi, Some(id)) => format!("--session {id}"),
        // Codex's conversations stay in the cage's own folder, found by
        // its own `resume --last` (the newest of this folder's).
        (Harness::Codex, _) => "resume --last".to_string(),
        // opencode's word for the last conversation too (`opencode --help`).
        (Harness::Opencode, _) | (_, None) => "--continue".to_string(),
    };
    format!("Resume this session in its cage with: shrooms-agent cage run {session} -- {how}")
}

/// Pure: the session id a harness takes back, from its transcript's name;
/// None unless it is a UUID (so nothing else is ever printed as a command).
fn session_id(harness: Harness, transcript: &Path) -> Option<String> {
    let stem = transcript.file_stem()?.to_str()?;
    let id = match harness {
        Harness::Claude => stem,
        Harness::Pi => stem.rsplit_once('_')?.1,
        Harness::Codex | Harness::Opencode => return None,
    };
    let uuid = id.len() == 36
        && id.char_indices().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    uuid.then(|| id.to_string())
}

/// The newest `*.jsonl` in `folder` changed since `since` (less a second,
/// for file systems whose times are coarse).
fn newest_changed(folder: &Path, since: SystemTime) -> Option<PathBuf> {
    let from = since.checked_sub(Duration::from_secs(1)).unwrap_or(since);
    std::fs::read_dir(folder)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            let t = m.modified().ok()?;
            (m.is_file() && t >= from).then(|| (t, e.path()))
        })
        .max()
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    /// Codex's conversations are the cage's own: back to the folder's
    /// last with its own words, whatever the transcript.
    #[test]
    fn codex_goes_back_with_resume_last() {
        assert_eq!(
            line("web", Harness::Codex, None),
            "Resume this session in its cage with: shrooms-agent cage run web -- resume --last"
        );
    }

    use super::*;

    const ID: &str = "0f8e2b9a-4c1d-4e7f-9a3b-5d6c7e8f9a0b";

    #[test]
    fn the_line_names_the_session_and_its_conversation() {
        let claude = PathBuf::from(format!("/h/.claude/projects/-p/{ID}.jsonl"));
        assert_eq!(
            line("web", Harness::Claude, Some(&claude)),
            format!(
                "Resume this session in its cage with: shrooms-agent cage run web -- --resume {ID}"
            )
        );
        let pi = PathBuf::from(format!("/h/s/--p--/2026-12-01T10-00-00-000Z_{ID}.jsonl"));
        assert!(line("web", Harness::Pi, Some(&pi)).ends_with(&format!("-- --session {ID}")));
        // Not a UUID, or not known: the project's last conversation.
        for t in [
            Some(Path::new("/x/notes.jsonl")),
            Some(Path::new("/x/a;b.jsonl")),
            None,
        ] {
            assert!(
                line("web", Harness::Claude, t).ends_with("-- --continue"),
                "{t:?}"
            );
        }
    }

    /// An ordinary cage's transcripts are the machine's own folder for the
    /// project; a sealed cage's, its private config folder's.
    #[test]
    fn where_the_transcripts_are() {
        let store = Store::new("/state");
        let mut r = crate::state::session::sample_record("web");
        r.dir = "/home/u/src/web.app".into();
        let mut c = crate::state::session::sample_cage("shrooms-web-0a1b2c");
        assert_eq!(
            transcript_folder(&store, &r, &c),
            Some(PathBuf::from("/h/.claude/projects/-home-u-src-web-app"))
        );
        c.sealed = Some(crate::state::session::SealedRecord {
            token_file: "/t".into(),
            outbox: "/o".into(),
            rules: String::new(),
            seccomp_file: "/s".into(),
            seccomp: String::new(),
            dns: Vec::new(),
        });
        assert_eq!(
            transcript_folder(&store, &r, &c),
            Some(
                store
                    .private_home("shrooms-web-0a1b2c")
                    .join("projects/-home-u-src-web-app")
            )
        );
        r.harness = Harness::Pi;
        c.sealed = None;
        c.harness_dir = "/h/.pi/agent".into();
        assert_eq!(
            transcript_folder(&store, &r, &c),
            Some(PathBuf::from(
                "/h/.pi/agent/sessions/--home-u-src-web.app--"
            ))
        );
    }

    #[test]
    fn only_interactive_runs() {
        let a = |w: &[&str]| interactive(&w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(a(&[]));
        assert!(a(&["--resume", ID]));
        assert!(a(&["--dangerously-skip-permissions"]));
        assert!(!a(&["-p", "hi"]));
        assert!(!a(&["--print", "hi"]));
        assert!(!a(&["--mode", "rpc"]));
    }

    #[test]
    fn the_newest_transcript_changed_during_the_turn() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let old = dir.join("old.jsonl");
        std::fs::write(&old, "{}").unwrap();
        let long_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        let since = SystemTime::now();
        assert_eq!(newest_changed(&dir, since), None);
        let new = dir.join(format!("{ID}.jsonl"));
        std::fs::write(&new, "{}").unwrap();
        std::fs::write(dir.join("other.txt"), "").unwrap();
        assert_eq!(newest_changed(&dir, since), Some(new));
        assert_eq!(newest_changed(&dir.join("none"), since), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
