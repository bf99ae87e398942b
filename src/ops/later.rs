//! What other tools on the machine run later (docs/security.md, "What the machine
//! runs later"): files in a project that a tool runs or loads without
//! being asked, when you enter the folder, open it or commit. Those an
//! agent has no reason to write are read-only in every cage (`protect`'s
//! list); these the agent may well write, so each one a turn created,
//! changed or removed is named after the turn: on its terminal, in `cage
//! show`, on the status page and in `cage history`. Makefiles, scripts and
//! package scripts, which you run on purpose, are not named.

use std::collections::BTreeMap;
use std::path::Path;

/// A pattern of names at the top of a project (`*` at one end at most),
/// and why the machine runs or loads what matches.
pub struct Watched {
    pub pattern: &'static str,
    pub why: &'static str,
}

/// The named ones (docs/security.md, "What the machine runs later").
pub const NAMED: &[Watched] = &[
    Watched {
        pattern: ".env",
        why: "loaded by direnv's dotenv and by tools that read .env; a variable such as \
              NODE_OPTIONS or LD_PRELOAD runs code",
    },
    Watched {
        pattern: ".env.*",
        why: "loaded by direnv's dotenv_if_exists and by tools that read .env files",
    },
    Watched {
        pattern: ".envrc.*",
        why: "sourced by an allowed .envrc (source_env_if_exists .envrc.local), run by direnv \
              without asking again",
    },
    Watched {
        pattern: "*.code-workspace",
        why: "a VS Code workspace: its tasks and settings run when it is opened",
    },
    Watched {
        pattern: "flake.nix",
        why: "evaluated by direnv's use flake when you enter the folder",
    },
    Watched {
        pattern: "shell.nix",
        why: "evaluated by direnv's use nix when you enter the folder",
    },
    Watched {
        pattern: "mise.toml",
        why: "mise's tasks, hooks and environment, run when you enter the folder",
    },
    Watched {
        pattern: ".mise.toml",
        why: "mise's tasks, hooks and environment, run when you enter the folder",
    },
];

fn matches(pattern: &str, name: &str) -> bool {
    if let Some(suffix) = pattern.strip_prefix('*') {
        name.ends_with(suffix) && name.len() > suffix.len()
    } else if let Some(prefix) = pattern.strip_suffix('*') {
        name.starts_with(prefix) && name.len() > prefix.len()
    } else {
        name == pattern
    }
}

/// Why a top-level name is watched (the named list, or a protected path
/// the cage could write: one it lacked when the cage was made), if it is.
fn why_watched(
    name: &str,
    writable_protected: &[&'static crate::ops::protect::Entry],
) -> Option<&'static str> {
    NAMED
        .iter()
        .find(|w| matches(w.pattern, name))
        .map(|w| w.why)
        .or_else(|| {
            writable_protected
                .iter()
                .find(|e| e.path == name)
                .map(|e| e.why)
        })
}

pub use crate::state::session::NamedFile;

/// The watched files of a project as they were at one moment: each file's
/// length and content hash (a link's target), by path.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    files: BTreeMap<String, (String, &'static str)>,
}

/// How many files one snapshot looks at, and the most bytes it hashes of one.
const MAX_FILES: usize = 5_000;
const MAX_HASHED: u64 = 64 << 20;

/// Look at the watched files of a project (`dir`): the top-level names the
/// list names, and the protected paths the cage was not given read-only
/// (`mounted`: the create argv's read-only sources), whole folders of them.
pub fn snapshot(dir: &Path, create_argv: &[String]) -> Snapshot {
    let writable: Vec<&'static crate::ops::protect::Entry> = crate::ops::protect::PROTECTED
        .iter()
        .filter(|e| e.path != ".git" && !e.path.contains('/'))
        .filter(|e| !mounted_read_only(&dir.join(e.path), create_argv))
        .collect();
    let mut s = Snapshot::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return s;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    for name in names {
        if let Some(why) = why_watched(&name, &writable) {
            s.look(dir, Path::new(&name), why, 0);
        }
    }
    s
}

fn mounted_read_only(path: &Path, create_argv: &[String]) -> bool {
    let want = format!("src={},", path.display());
    create_argv
        .iter()
        .any(|a| a.starts_with("type=bind,") && a.contains(&want) && a.contains(",ro=true"))
}

impl Snapshot {
    fn look(&mut self, dir: &Path, rel: &Path, why: &'static str, depth: usize) {
        if self.files.len() >= MAX_FILES {
            return;
        }
        let at = dir.join(rel);
        let Ok(m) = std::fs::symlink_metadata(&at) else {
            return;
        };
        let key = rel.to_string_lossy().into_owned();
        if m.file_type().is_symlink() {
            let to = std::fs::read_link(&at).unwrap_or_default();
            self.files
                .insert(key, (format!("link {}", to.display()), why));
        } else if m.is_dir() {
            if depth >= 8 {
                return;
            }
            let Ok(entries) = std::fs::read_dir(&at) else {
                return;
            };
            let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
            names.sort();
            for n in names {
                self.look(dir, &rel.join(n), why, depth + 1);
            }
        } else if m.is_file() {
            self.files.insert(key, (fingerprint(&at, m.len()), why));
        }
    }

    /// What changed from `self` (before a turn) to `after`.
    pub fn changes(&self, after: &Snapshot) -> Vec<NamedFile> {
        let mut out = Vec::new();
        for (path, (print, why)) in &after.files {
            let change = match self.files.get(path) {
                None => "created",
                Some((before, _)) if before != print => "changed",
                Some(_) => continue,
            };
            out.push(NamedFile {
                path: path.clone(),
                change: change.into(),
                why: (*why).into(),
            });
        }
        for (path, (_, why)) in &self.files {
            if !after.files.contains_key(path) {
                out.push(NamedFile {
                    path: path.clone(),
                    change: "removed".into(),
                    why: (*why).into(),
                });
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }
}

/// A file's length and the SHA-256 of its first `MAX_HASHED` bytes.
fn fingerprint(p: &Path, len: u64) -> String {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let Ok(f) = std::fs::File::open(p) else {
        return format!("{len} unreadable");
    };
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut r = f.take(MAX_HASHED);
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let digest = h.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{len} {hex}")
}

/// One line per named file, for the turn's terminal and the history.
pub fn said(files: &[NamedFile]) -> Vec<crate::error::Warning> {
    files
        .iter()
        .map(|f| crate::error::Warning::LaterFile {
            change: f.change.clone(),
            path: f.path.clone(),
            why: f.why.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_at_the_top_of_a_project() {
        let none: Vec<&'static crate::ops::protect::Entry> = Vec::new();
        for (name, watched) in [
            (".env", true),
            (".env.local", true),
            (".envrc.local", true),
            ("web.code-workspace", true),
            (".code-workspace", false),
            ("flake.nix", true),
            ("Makefile", false),
            ("package.json", false),
            (".environment", false),
        ] {
            assert_eq!(why_watched(name, &none).is_some(), watched, "{name}");
        }
        let idea: Vec<&'static crate::ops::protect::Entry> = crate::ops::protect::PROTECTED
            .iter()
            .filter(|e| e.path == ".idea")
            .collect();
        assert!(why_watched(".idea", &idea).is_some());
        assert!(why_watched(".idea", &none).is_none());
    }

    #[test]
    fn what_a_turn_created_changed_and_removed() {
        let scratch = tempfile::tempdir().unwrap();
        let t = scratch.path().to_path_buf();
        std::fs::create_dir_all(t.join(".idea")).unwrap();
        std::fs::write(t.join(".env"), "A=1\n").unwrap();
        std::fs::write(t.join(".env.old"), "B=1\n").unwrap();
        std::fs::write(t.join("Makefile"), "all:\n").unwrap();
        // .idea mounted read-only: not looked at.
        let argv = vec![format!(
            "type=bind,src={},dst={},ro=true,nosuid,nodev",
            t.join(".idea").display(),
            t.join(".idea").display()
        )];
        let before = snapshot(&t, &argv);
        std::fs::write(t.join(".env"), "A=2\n").unwrap();
        std::fs::remove_file(t.join(".env.old")).unwrap();
        std::fs::write(t.join(".envrc.local"), "touch /tmp/x\n").unwrap();
        std::fs::write(t.join("Makefile"), "all:\n\ttouch /tmp/x\n").unwrap();
        std::fs::write(t.join(".idea/workspace.xml"), "x").unwrap();
        std::fs::create_dir_all(t.join(".zed")).unwrap();
        std::fs::write(t.join(".zed/tasks.json"), "[]").unwrap();
        let after = snapshot(&t, &argv);
        let got: Vec<(String, String)> = before
            .changes(&after)
            .into_iter()
            .map(|f| (f.path, f.change))
            .collect();
        assert_eq!(
            got,
            [
                (".env", "changed"),
                (".env.old", "removed"),
                (".envrc.local", "created"),
                (".zed/tasks.json", "created"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        std::fs::remove_dir_all(&t).unwrap();
    }
}
