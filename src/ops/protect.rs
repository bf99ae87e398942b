//! Protected paths (docs/security.md, "Protected paths"): the files of a project that
//! the machine runs or obeys later, outside any cage, are mounted read-only
//! over the project in every cage. A cage that could write `.git/hooks` or
//! `core.fsmonitor` in `.git/config` would have the user's next `git
//! commit` or `git status` (a shell prompt runs one at each `cd`) run what
//! it planted, as the user, on the machine.
//!
//! What a mount cannot do is stop a rename: a folder that holds a mount
//! point can still be renamed, and a new one made in its place. So every
//! folder between the project and a protected path (`.git` for
//! `.git/hooks`) is mounted read-write over itself, which makes it a mount
//! point the cage can neither rename nor remove (rename(2), EBUSY).
//!
//! Links are never followed: a protected path, or a folder on its way, that
//! is a link refuses the cage (runc follows a bind source's links, so the
//! mount would lend the cage whatever the link leads to).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::cage::git::normal;

use crate::cage::spec::Mount;
use crate::error::{Doing, Error, ProtectProblem, Result};

/// What is made when a protected path is missing at the cage's creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfMissing {
    /// Nothing: what the cage could make there is asked about before it
    /// runs (`direnv allow`, Claude Code's question for a new MCP server)
    /// or is read only through a protected file.
    Leave,
    /// An empty folder, mounted read-only, so the cage cannot make one.
    Folder,
    /// An empty file, mounted read-only (git reads an empty config as
    /// nothing).
    File,
}

/// One protected path of a project, relative to it, and why.
pub struct Entry {
    pub path: &'static str,
    pub if_missing: IfMissing,
    pub why: &'static str,
}

/// The protected paths of every project (docs/security.md, "Protected paths").
/// Instructions to a model (`CLAUDE.md`, `AGENTS.md`) are not among them:
/// the harness reads them as it reads the code, and asks before it runs
/// a tool; a file here runs, or is obeyed, without anyone asking.
pub const PROTECTED: &[Entry] = &[
    Entry {
        path: ".git",
        // Never the user's in a cage: the session's own git directory is
        // mounted there (`git::mounts`). Made empty where missing, so that
        // the cage cannot make one the machine's git would obey; a `git
        // init` of the user's fills it later, and the next start takes it.
        if_missing: IfMissing::Folder,
        why: "the repository: git on the machine obeys its config, hooks, commondir, \
              includes and worktree folders",
    },
    Entry {
        path: ".husky",
        if_missing: IfMissing::Leave,
        why: "husky's hooks, run by git",
    },
    Entry {
        path: ".pre-commit-config.yaml",
        if_missing: IfMissing::Leave,
        why: "what pre-commit's git hook runs",
    },
    Entry {
        path: "lefthook.yml",
        if_missing: IfMissing::Leave,
        why: "what lefthook's git hooks run",
    },
    Entry {
        path: ".lefthook.yml",
        if_missing: IfMissing::Leave,
        why: "what lefthook's git hooks run",
    },
    Entry {
        path: "lefthook.yaml",
        if_missing: IfMissing::Leave,
        why: "what lefthook's git hooks run",
    },
    Entry {
        path: ".lefthook.yaml",
        if_missing: IfMissing::Leave,
        why: "what lefthook's git hooks run",
    },
    Entry {
        path: "lefthook-local.yml",
        if_missing: IfMissing::Leave,
        why: "merged into lefthook's config, what its git hooks run",
    },
    Entry {
        path: ".lefthook-local.yml",
        if_missing: IfMissing::Leave,
        why: "merged into lefthook's config, what its git hooks run",
    },
    Entry {
        path: ".direnv",
        if_missing: IfMissing::Leave,
        why: "direnv's own folder (layouts, the environments .envrc builds), loaded when you \
              enter the folder",
    },
    Entry {
        path: ".idea",
        if_missing: IfMissing::Leave,
        why: "JetBrains IDEs' project settings: run configurations, tasks, tools",
    },
    Entry {
        path: ".zed",
        if_missing: IfMissing::Leave,
        why: "Zed's project settings: tasks, language servers' commands",
    },
    Entry {
        path: ".helix",
        if_missing: IfMissing::Leave,
        why: "Helix's project settings: language servers' commands",
    },
    Entry {
        path: ".devcontainer",
        if_missing: IfMissing::Leave,
        why: "dev containers: initializeCommand runs on the machine",
    },
    Entry {
        path: ".envrc",
        if_missing: IfMissing::Leave,
        why: "what direnv runs when you enter the folder",
    },
    Entry {
        path: ".vscode",
        if_missing: IfMissing::Folder,
        why: "VS Code's tasks and settings, some run when the folder opens",
    },
    Entry {
        path: ".claude",
        if_missing: IfMissing::Folder,
        why: "Claude Code's project settings (hooks, allowed commands) and the scripts they run",
    },
    Entry {
        path: ".mcp.json",
        if_missing: IfMissing::Leave,
        why: "the MCP servers Claude Code starts for the project",
    },
    Entry {
        path: ".pi",
        if_missing: IfMissing::Folder,
        why: "pi's project settings, packages and extensions, which pi runs",
    },
    // Codex CLI reads a project's `.codex/config.toml` (its MCP servers'
    // commands, `notify`) once the project is trusted, and its rules in
    // `.codex/rules` (https://developers.openai.com/codex/config-basic,
    // https://github.com/openai/codex/issues/10389).
    Entry {
        path: ".codex",
        if_missing: IfMissing::Folder,
        why: "Codex CLI's project settings (MCP servers' commands, notify) and rules",
    },
    // opencode loads every file of `.opencode/plugins/` at its start
    // (https://opencode.ai/docs/plugins/), and takes agents, commands,
    // tools and settings from the same folder.
    Entry {
        path: ".opencode",
        if_missing: IfMissing::Folder,
        why: "opencode's project folder: plugins (code opencode runs at its start), agents, \
              commands, tools",
    },
    // A project's `opencode.json` or `opencode.jsonc` may name a local MCP
    // server, a command opencode starts without asking
    // (https://opencode.ai/docs/config/, https://opencode.ai/docs/mcp-servers/).
    // Read-only where the project has one; where it has none, nothing is
    // made (a file would stand in every project's `git status`), and one a
    // turn makes is said after the turn (`later`, a protected path the
    // cage could write).
    Entry {
        path: "opencode.json",
        if_missing: IfMissing::Leave,
        why: "opencode's project settings: the MCP servers (commands) opencode starts",
    },
    Entry {
        path: "opencode.jsonc",
        if_missing: IfMissing::Leave,
        why: "opencode's project settings: the MCP servers (commands) opencode starts",
    },
];

/// What a path is, looked at without following a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Missing,
    Folder,
    File,
    Link(PathBuf),
    /// A fifo, a socket, a device: nothing a project's settings are.
    Other,
}

impl Kind {
    fn of(path: &Path) -> Kind {
        match std::fs::symlink_metadata(path) {
            Err(_) => Kind::Missing,
            Ok(m) if m.file_type().is_symlink() => {
                Kind::Link(std::fs::read_link(path).unwrap_or_default())
            }
            Ok(m) if m.is_dir() => Kind::Folder,
            Ok(m) if m.is_file() => Kind::File,
            Ok(_) => Kind::Other,
        }
    }
}

/// What the disk says about a project's protected paths, read with the
/// facts; `decide` reads nothing.
#[derive(Debug, Clone, Default)]
pub struct ProtectFacts {
    /// Every protected path and every folder on its way, relative to the
    /// project, and what it is.
    pub kinds: BTreeMap<PathBuf, Kind>,
    /// `.git` as a file (a linked worktree, a submodule): where its
    /// `gitdir:` line leads, made absolute (None: no such line).
    pub gitdir: Option<PathBuf>,
    /// Paths git's config names that git reads or runs for this project,
    /// relative to it, and what a missing one becomes: `core.hooksPath`
    /// (from the repository's config and the machine's) and the files the
    /// repository's config includes.
    pub named: Vec<(PathBuf, IfMissing, String)>,
    /// Where the project's repository is, if it has one (`git::locate`).
    pub located: Option<crate::cage::git::Located>,
    /// Its `modules/` (the submodules' repositories) is a folder.
    pub modules: bool,
}

/// Gather the facts for a project (`dir`, canonical). `global_configs`:
/// git's config files outside the repository (`~/.gitconfig`,
/// `$XDG_CONFIG_HOME/git/config`, `/etc/gitconfig`), which may name a
/// hooks folder relative to every work tree.
pub fn facts(dir: &Path, home: &Path, global_configs: &[PathBuf]) -> ProtectFacts {
    let mut f = ProtectFacts::default();
    let git = Kind::of(&dir.join(".git"));
    if git == Kind::File {
        f.gitdir = read_small(&dir.join(".git")).and_then(|text| {
            let line = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?;
            Some(normal(&dir.join(line.trim())))
        });
    }
    f.located = crate::cage::git::locate(dir);
    // The config files git on the machine reads for this project: the
    // repository's own (and a linked worktree's), the machine's, and every
    // file they include, and those include, as git follows them (up to its
    // own depth of 10, git-config(1) "Includes"): an include of an include
    // in the project is as much git's config as the first.
    let mut queue: Vec<(PathBuf, usize)> = Vec::new();
    if let Some(l) = &f.located {
        queue.push((l.common_dir.join("config"), 0));
        queue.push((l.git_dir.join("config.worktree"), 0));
    }
    queue.extend(global_configs.iter().map(|p| (p.clone(), 0)));
    let mut read = BTreeSet::new();
    while let Some((file, depth)) = queue.pop() {
        if depth > 10 || !read.insert(file.clone()) {
            continue;
        }
        let Some(text) = read_small(&file) else {
            continue;
        };
        let base = file.parent().unwrap_or(Path::new("/")).to_path_buf();
        for (key, value) in crate::cage::git::config_values(&text) {
            if key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path")) {
                let at = expand(&value, home, &base);
                if let Ok(rel) = at.strip_prefix(dir) {
                    f.named.push((
                        rel.to_path_buf(),
                        IfMissing::File,
                        format!(
                            "a git config include ({key} = {value}, in {})",
                            file.display()
                        ),
                    ));
                }
                queue.push((at, depth + 1));
            } else if key == "core.hookspath" {
                let at = expand(&value, home, dir);
                if let Ok(rel) = at.strip_prefix(dir)
                    && !rel.as_os_str().is_empty()
                {
                    f.named.push((
                        rel.to_path_buf(),
                        IfMissing::Folder,
                        format!("git's hooks (core.hooksPath = {value})"),
                    ));
                }
            }
        }
    }
    if let Some(l) = &f.located {
        f.modules = Kind::of(&l.common_dir.join("modules")) == Kind::Folder;
        f.named.extend(submodule_paths(dir, &l.git_dir));
    }
    let mut once = BTreeSet::new();
    f.named.retain(|(p, _, _)| once.insert(p.clone()));
    let candidates = PROTECTED
        .iter()
        .map(|e| PathBuf::from(e.path))
        .chain(f.named.iter().map(|(p, _, _)| p.clone()));
    for rel in candidates {
        let mut at = PathBuf::new();
        for c in rel.components() {
            at.push(c);
            f.kinds
                .entry(at.clone())
                .or_insert_with(|| Kind::of(&dir.join(&at)));
        }
    }
    f
}

/// The paths that protect a project's submodules now (`submodule_paths`).
pub fn submodule_paths_now(dir: &Path) -> Vec<PathBuf> {
    crate::cage::git::locate(dir)
        .map(|l| submodule_paths(dir, &l.git_dir))
        .unwrap_or_default()
        .into_iter()
        .map(|(p, _, _)| p)
        .collect()
}

/// The submodules the machine's `git status` looks into, from the
/// repository's index (`git_dir`'s) and, within each one checked out,
/// from its own (a submodule's submodules): each one recorded there (a
/// gitlink) whose `.git` is in the project (a file naming its repository,
/// or the repository itself) is read-only there, as that `.git`; one whose
/// `.git` is not there (never cloned, or taken out with `submodule
/// deinit`) is read-only as a whole folder, made empty where missing: git
/// looks into it as soon as a `.git` appears there, and would obey one
/// the cage made. Paths relative to `dir`.
fn submodule_paths(dir: &Path, git_dir: &Path) -> Vec<(PathBuf, IfMissing, String)> {
    let mut out = Vec::new();
    let mut queue = vec![(PathBuf::new(), git_dir.to_path_buf(), 0usize)];
    while let Some((at, git_dir, depth)) = queue.pop() {
        for link in crate::cage::git::gitlinks(&git_dir.join("index")) {
            if out.len() >= 10_000 {
                return out;
            }
            let rel = at.join(&link);
            let dot_git = rel.join(".git");
            match Kind::of(&dir.join(&dot_git)) {
                Kind::Missing => out.push((
                    rel,
                    IfMissing::Folder,
                    "a submodule git has not checked out here: git on the machine looks into \
                     it, and obeys the repository a .git there names, once one is there"
                        .into(),
                )),
                kind => {
                    out.push((
                        dot_git,
                        IfMissing::Leave,
                        "a submodule's .git, which is or names the repository git on the \
                         machine reads when it looks into the submodule"
                            .into(),
                    ));
                    let inner = match kind {
                        Kind::Folder => Some(dir.join(&rel).join(".git")),
                        Kind::File => crate::cage::git::locate(&dir.join(&rel)).map(|l| l.git_dir),
                        _ => None,
                    };
                    if let Some(inner) = inner
                        && depth < 8
                    {
                        queue.push((rel, inner, depth + 1));
                    }
                }
            }
        }
    }
    out
}

/// A file of a few KiB at most, as text (a config, a `.git` file); None
/// past 1 MiB. Read through one open file within the bound: the cage
/// writes the project, and a file that grows between a look at its size
/// and its reading is read no further.
fn read_small(p: &Path) -> Option<String> {
    let head = crate::host::bounded::read_file(p, 1 << 20).ok()?;
    (!head.cut)
        .then(|| String::from_utf8(head.bytes).ok())
        .flatten()
}

/// A path as git's config means it: `~/` is the home, a relative one is
/// relative to `base`; `.` and `..` taken out by name, no link followed.
fn expand(value: &str, home: &Path, base: &Path) -> PathBuf {
    let p = match value.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None => base.join(value),
    };
    normal(&p)
}

/// The mounts that protect a project, and what must be made first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protection {
    /// In order: folders on the way first (read-write over themselves),
    /// then what they hold.
    pub mounts: Vec<Mount>,
    /// Missing protected paths to make, empty, before the cage is made:
    /// (path, what is made there: `Folder` or `File`).
    pub make: Vec<(PathBuf, IfMissing)>,
}

/// Why a protected path is protected, for what `--writable` says.
pub fn why(path: &str) -> &'static str {
    PROTECTED
        .iter()
        .find(|e| e.path == path)
        .map_or("a path git's config names", |e| e.why)
}

/// The names `--writable` takes for this project.
fn names(f: &ProtectFacts) -> Vec<String> {
    PROTECTED
        .iter()
        .map(|e| e.path.to_string())
        .chain(f.named.iter().map(|(p, _, _)| p.display().to_string()))
        .collect()
}

/// Pure: the protection of a project (`dir`, canonical) from its facts,
/// leaving out what `writable` names (`--writable`), or why the cage is
/// refused.
pub fn decide(dir: &Path, f: &ProtectFacts, writable: &[String]) -> Result<Protection> {
    let open = decide_open(f, writable)?;
    let git = kind(f, Path::new(".git"));
    if let (Kind::File, Some(gitdir)) = (&git, &f.gitdir)
        && gitdir.starts_with(dir)
        && !open.iter().any(|o| o == Path::new(".git"))
    {
        return Err(Error::protect(ProtectProblem::GitFileInside {
            dir: dir.to_path_buf(),
            gitdir: gitdir.clone(),
        }));
    }
    let candidates = PROTECTED
        .iter()
        .map(|e| (PathBuf::from(e.path), e.if_missing))
        .chain(f.named.iter().map(|(p, m, _)| (p.clone(), *m)));
    // Each path: read-only (true) or a folder on the way (false).
    let mut chosen: BTreeMap<PathBuf, bool> = BTreeMap::new();
    let mut make = Vec::new();
    for (rel, if_missing) in candidates {
        if open.iter().any(|o| rel.starts_with(o)) {
            continue;
        }
        // Inside something read-only already, or beside a `.git` that is
        // not a folder (a file's repository is elsewhere, outside the
        // cage).
        if chosen.iter().any(|(p, ro)| *ro && rel.starts_with(p)) {
            continue;
        }
        let Some(on_the_way) = decide_way(dir, f, &rel, if_missing, &mut make)? else {
            continue;
        };
        for p in on_the_way {
            chosen.entry(p).or_insert(false);
        }
        // The session's own git directory goes there (`git::mounts`):
        // checked for links and made when missing, as the others, but not
        // mounted from the project.
        if rel == Path::new(".git") {
            continue;
        }
        chosen.insert(rel, true);
    }
    Ok(protection_of(dir, chosen, make))
}

/// What a protected path is on disk (missing where it was not looked at).
fn kind(f: &ProtectFacts, rel: &Path) -> Kind {
    f.kinds.get(rel).cloned().unwrap_or(Kind::Missing)
}

/// Pure: the paths `--writable` leaves writable, each one this project's
/// protected path; or why one is refused.
fn decide_open(f: &ProtectFacts, writable: &[String]) -> Result<Vec<PathBuf>> {
    let known = names(f);
    let mut open = Vec::new();
    for w in writable {
        let w = w.trim_start_matches("./").trim_end_matches('/');
        if !known.iter().any(|k| k == w) {
            return Err(Error::protect(ProtectProblem::NotProtected {
                asked: w.to_string(),
                known,
            }));
        }
        open.push(PathBuf::from(w));
    }
    Ok(open)
}

/// Pure: the folders on the way to a protected path (`rel`), the missing
/// ones to make added to `make`; None where the path is left alone (missing
/// and left so, or past a file); or why the cage is refused (a link or
/// something else on the way).
fn decide_way(
    dir: &Path,
    f: &ProtectFacts,
    rel: &Path,
    if_missing: IfMissing,
    make: &mut Vec<(PathBuf, IfMissing)>,
) -> Result<Option<Vec<PathBuf>>> {
    let refuse = |rel: &Path, is: String| {
        Error::protect(ProtectProblem::NotReal {
            dir: dir.to_path_buf(),
            rel: rel.to_path_buf(),
            is,
        })
    };
    let mut on_the_way = Vec::new();
    let mut at = PathBuf::new();
    let parts: Vec<_> = rel.components().collect();
    for (i, c) in parts.iter().enumerate() {
        at.push(c);
        let last = i + 1 == parts.len();
        match kind(f, &at) {
            Kind::Link(to) => {
                return Err(refuse(&at, format!("a link to {}", to.display())));
            }
            Kind::Other => {
                return Err(refuse(&at, "neither a file nor a folder".into()));
            }
            // A folder on the way is missing: made, where what it
            // would hold is made when missing (a hooks folder that
            // core.hooksPath names); else the cage could make it.
            Kind::Missing if !last => match if_missing {
                IfMissing::Leave => return Ok(None),
                _ => make.push((dir.join(&at), IfMissing::Folder)),
            },
            Kind::Missing => match if_missing {
                IfMissing::Leave => return Ok(None),
                made => make.push((dir.join(&at), made)),
            },
            Kind::File if !last => return Ok(None),
            Kind::File | Kind::Folder => {}
        }
        if !last {
            on_the_way.push(at.clone());
        }
    }
    Ok(Some(on_the_way))
}

/// Pure: the mounts of the paths chosen (read-only or on the way), in
/// order, and what to make; what a read-only one holds needs neither.
fn protection_of(
    dir: &Path,
    mut chosen: BTreeMap<PathBuf, bool>,
    mut make: Vec<(PathBuf, IfMissing)>,
) -> Protection {
    let ro_paths: BTreeSet<PathBuf> = chosen
        .iter()
        .filter(|(_, ro)| **ro)
        .map(|(p, _)| p.clone())
        .collect();
    chosen.retain(|p, _| !ro_paths.iter().any(|r| p != r && p.starts_with(r)));
    let mut ordered: Vec<(PathBuf, bool)> = chosen.into_iter().collect();
    ordered.sort_by_key(|(p, _)| (p.components().count(), p.clone()));
    let mounts = ordered
        .into_iter()
        .map(|(rel, ro)| Mount {
            src: dir.join(&rel),
            dst: dir.join(&rel),
            read_only: ro,
        })
        .collect();
    make.retain(|(p, _)| {
        !ro_paths
            .iter()
            .any(|r| p != &dir.join(r) && p.starts_with(dir.join(r)))
    });
    Protection { mounts, make }
}

/// Make the missing protected paths, empty (folders first, as listed).
/// Returns what was made, for an undo.
pub fn make_missing(make: &[(PathBuf, IfMissing)]) -> Result<Vec<PathBuf>> {
    let mut made = Vec::new();
    for (p, what) in make {
        let r = match what {
            IfMissing::Folder => std::fs::create_dir(p),
            _ => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .map(|_| ()),
        };
        match r {
            Ok(()) => made.push(p.clone()),
            Err(e) => {
                take_back(&made);
                return Err(Error::act(Doing::MakeProtected(p.to_path_buf()), &e));
            }
        }
    }
    Ok(made)
}

/// Remove what `make_missing` made, if still empty, last first.
pub fn take_back(made: &[PathBuf]) {
    for p in made.iter().rev() {
        let _ = std::fs::remove_dir(p).or_else(|_| {
            if std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() == 0) {
                std::fs::remove_file(p)
            } else {
                Ok(())
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts_of(kinds: &[(&str, Kind)]) -> ProtectFacts {
        ProtectFacts {
            kinds: kinds
                .iter()
                .map(|(p, k)| (PathBuf::from(p), k.clone()))
                .collect(),
            ..ProtectFacts::default()
        }
    }

    fn shown(p: &Protection) -> Vec<String> {
        p.mounts
            .iter()
            .map(|m| {
                assert_eq!(m.src, m.dst);
                format!(
                    "{} {}",
                    m.src.display(),
                    if m.read_only { "ro" } else { "rw" }
                )
            })
            .collect()
    }

    const DIR: &str = "/home/u/src/web";

    #[test]
    fn a_repository_and_its_neighbours() {
        let f = facts_of(&[
            (".git", Kind::Folder),
            (".git/hooks", Kind::Folder),
            (".git/config", Kind::File),
            (".git/config.worktree", Kind::Missing),
            (".git/modules", Kind::Folder),
            (".envrc", Kind::File),
            (".claude", Kind::Folder),
            (".vscode", Kind::Missing),
            (".pi", Kind::Missing),
            (".mcp.json", Kind::File),
        ]);
        let p = decide(Path::new(DIR), &f, &[]).unwrap();
        // `.git` is the session's own in the cage (`git::mounts`): none
        // of the user's is mounted from here.
        assert_eq!(
            shown(&p),
            vec![
                "/home/u/src/web/.claude ro",
                "/home/u/src/web/.codex ro",
                "/home/u/src/web/.envrc ro",
                "/home/u/src/web/.mcp.json ro",
                "/home/u/src/web/.opencode ro",
                "/home/u/src/web/.pi ro",
                "/home/u/src/web/.vscode ro",
            ]
        );
        assert_eq!(
            p.make,
            vec![
                ("/home/u/src/web/.vscode".into(), IfMissing::Folder),
                ("/home/u/src/web/.pi".into(), IfMissing::Folder),
                ("/home/u/src/web/.codex".into(), IfMissing::Folder),
                ("/home/u/src/web/.opencode".into(), IfMissing::Folder),
            ]
        );
    }

    #[test]
    fn no_repository_gets_an_empty_git() {
        let f = facts_of(&[(".git", Kind::Missing)]);
        let p = decide(Path::new(DIR), &f, &[]).unwrap();
        let s = shown(&p);
        // The session's own git directory is mounted there (`git::mounts`).
        assert!(!s.iter().any(|m| m.contains(".git")), "{s:?}");
        // nothing is made inside it: it stays empty, not a repository
        assert!(!s.iter().any(|m| m.contains(".git/")), "{s:?}");
        assert!(
            p.make
                .contains(&("/home/u/src/web/.git".into(), IfMissing::Folder))
        );
        let git = Path::new(DIR).join(".git");
        assert!(!p.make.iter().any(|(m, _)| *m != git && m.starts_with(&git)));
    }

    #[test]
    fn a_git_file_is_read_only_and_its_repository_outside_is_not_ours() {
        let mut f = facts_of(&[(".git", Kind::File)]);
        f.gitdir = Some("/home/u/src/main/.git/worktrees/web".into());
        let p = decide(Path::new(DIR), &f, &[]).unwrap();
        let s = shown(&p);
        assert!(!s.iter().any(|m| m.contains(".git")), "{s:?}");
        // one whose repository is inside the project is refused
        f.gitdir = Some("/home/u/src/web/repo.git".into());
        let e = decide(Path::new(DIR), &f, &[]).unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::BadInput);
        assert!(
            e.message().contains("inside the project"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn a_link_is_refused_never_followed() {
        for (at, kinds) in [
            (".git", vec![(".git", Kind::Link("/home/u/.ssh".into()))]),
            (
                ".claude",
                vec![(".claude", Kind::Link("../elsewhere".into()))],
            ),
        ] {
            let f = facts_of(
                &kinds
                    .iter()
                    .map(|(p, k)| (*p, k.clone()))
                    .collect::<Vec<_>>(),
            );
            let e = decide(Path::new(DIR), &f, &[]).unwrap_err();
            assert!(
                e.message().starts_with(&format!("{DIR}/{at} is a link to")),
                "{}",
                e.message()
            );
            assert!(
                e.message().contains(&format!("--writable {at}")),
                "{}",
                e.message()
            );
            // No HTTP request leaves a path writable: the option is the
            // command line's.
            assert!(
                e.words(crate::error::Face::Http)
                    .contains("`--writable` (on the command line, at the machine)"),
                "{e:?}"
            );
            // named writable, it is left alone (and nothing else is followed)
            let p = decide(Path::new(DIR), &f, &[at.to_string()]).unwrap();
            assert!(
                !shown(&p)
                    .iter()
                    .any(|m| m.starts_with(&format!("{DIR}/{at} ")))
            );
        }
    }

    #[test]
    fn writable_names_only_protected_paths() {
        let f = facts_of(&[
            (".git", Kind::Folder),
            (".git/hooks", Kind::Folder),
            (".git/config", Kind::File),
        ]);
        let p = decide(Path::new(DIR), &f, &["./.vscode/".into()]).unwrap();
        assert_eq!(
            shown(&p),
            vec![
                "/home/u/src/web/.claude ro",
                "/home/u/src/web/.codex ro",
                "/home/u/src/web/.opencode ro",
                "/home/u/src/web/.pi ro",
            ]
        );
        // git's own files are no protected paths any more: the cage never
        // has the user's `.git`.
        let e = decide(Path::new(DIR), &f, &[".git/hooks".into()]).unwrap_err();
        assert!(
            e.message().contains("not a protected path"),
            "{}",
            e.message()
        );
        // the whole repository
        let p = decide(Path::new(DIR), &f, &[".git".into()]).unwrap();
        assert!(!shown(&p).iter().any(|m| m.contains(".git")));
        let e = decide(Path::new(DIR), &f, &["src".into()]).unwrap_err();
        assert!(
            e.message()
                .starts_with("--writable src: not a protected path of this project"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn hooks_path_and_includes_in_the_project_are_protected_with_their_folders() {
        let mut f = facts_of(&[
            (".git", Kind::Folder),
            (".git/config", Kind::File),
            (".git/hooks", Kind::Folder),
            ("tools", Kind::Folder),
            ("tools/hooks", Kind::Missing),
            ("tools/git.conf", Kind::File),
        ]);
        f.named = vec![
            ("tools/hooks".into(), IfMissing::Folder, "hooks".into()),
            ("tools/git.conf".into(), IfMissing::File, "include".into()),
        ];
        let p = decide(Path::new(DIR), &f, &[]).unwrap();
        let s = shown(&p);
        for want in [
            "/home/u/src/web/tools rw",
            "/home/u/src/web/tools/hooks ro",
            "/home/u/src/web/tools/git.conf ro",
        ] {
            assert!(s.contains(&want.to_string()), "{want}: {s:?}");
        }
        // a folder on the way comes before what it holds
        let tools = s.iter().position(|m| m.ends_with("tools rw")).unwrap();
        let hooks = s
            .iter()
            .position(|m| m.ends_with("tools/hooks ro"))
            .unwrap();
        assert!(tools < hooks);
        assert!(
            p.make
                .contains(&("/home/u/src/web/tools/hooks".into(), IfMissing::Folder))
        );
        // a hooks path inside a protected folder needs nothing more
        f.named = vec![(".husky/_".into(), IfMissing::Folder, "hooks".into())];
        f.kinds.insert(".husky".into(), Kind::Folder);
        f.kinds.insert(".husky/_".into(), Kind::Folder);
        let s = shown(&decide(Path::new(DIR), &f, &[]).unwrap());
        assert!(
            s.contains(&"/home/u/src/web/.husky ro".to_string()),
            "{s:?}"
        );
        assert!(!s.iter().any(|m| m.contains(".husky/_")), "{s:?}");
    }

    #[test]
    fn a_missing_hooks_folder_is_made_with_the_folders_on_its_way() {
        let mut f = facts_of(&[
            (".git", Kind::Folder),
            (".git/config", Kind::File),
            (".git/hooks", Kind::Folder),
            ("ci", Kind::Missing),
            ("ci/hooks", Kind::Missing),
        ]);
        f.named = vec![("ci/hooks".into(), IfMissing::Folder, "hooks".into())];
        let p = decide(Path::new(DIR), &f, &[]).unwrap();
        let s = shown(&p);
        assert!(s.contains(&"/home/u/src/web/ci rw".to_string()), "{s:?}");
        assert!(
            s.contains(&"/home/u/src/web/ci/hooks ro".to_string()),
            "{s:?}"
        );
        let ci = p.make.iter().position(|(m, _)| m.ends_with("ci")).unwrap();
        let hooks = p
            .make
            .iter()
            .position(|(m, _)| m.ends_with("ci/hooks"))
            .unwrap();
        assert!(ci < hooks, "{:?}", p.make);
        // a file on the way: nothing git could read there
        f.kinds.insert("ci".into(), Kind::File);
        let s = shown(&decide(Path::new(DIR), &f, &[]).unwrap());
        assert!(!s.iter().any(|m| m.contains("/ci")), "{s:?}");
    }

    #[test]
    fn git_config_values() {
        let text = "[core]\n\trepositoryformatversion = 0\n\thooksPath = \"tools/hooks\" # ours\n\
                    [include]\n\tpath = ../tools/git.conf\n\
                    [includeIf \"gitdir:~/src/\"]\n\tpath = x.conf\n\
                    [Core] HooksPath = .husky/_\n\tbare\n";
        let v = crate::cage::git::config_values(text);
        for (key, value) in [
            ("core.hookspath", "tools/hooks"),
            ("core.hookspath", ".husky/_"),
            ("include.path", "../tools/git.conf"),
            ("includeif.gitdir:~/src/.path", "x.conf"),
            ("core.bare", "true"),
        ] {
            assert!(v.contains(&(key.into(), value.into())), "{key}: {v:?}");
        }
    }

    #[test]
    fn facts_from_a_real_folder() {
        let scratch = tempfile::tempdir().unwrap();
        let t = scratch.path().to_path_buf();
        let dir = std::fs::canonicalize(&t).unwrap();
        std::fs::create_dir_all(dir.join(".git/hooks")).unwrap();
        std::fs::write(
            dir.join(".git/config"),
            "[core]\n\thooksPath = githooks\n[include]\n\tpath = ../shared.conf\n",
        )
        .unwrap();
        std::fs::write(dir.join("global"), "[core]\nhooksPath = ~/elsewhere\n").unwrap();
        std::os::unix::fs::symlink("/etc", dir.join(".envrc")).unwrap();
        let f = facts(&dir, Path::new("/home/u"), &[dir.join("global")]);
        assert_eq!(f.kinds[Path::new(".git")], Kind::Folder);
        assert_eq!(f.kinds[Path::new(".envrc")], Kind::Link("/etc".into()));
        assert_eq!(f.kinds[Path::new("githooks")], Kind::Missing);
        let named: Vec<&Path> = f.named.iter().map(|(p, _, _)| p.as_path()).collect();
        assert_eq!(named, vec![Path::new("githooks"), Path::new("shared.conf")]);
        std::fs::remove_dir_all(&t).unwrap();
    }
}
