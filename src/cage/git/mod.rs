//! The session's own git directory (docs/security.md, "Git in a cage"). The user's
//! git directory is never writable in a cage: git there reads its config,
//! hooks, `commondir`, includes and worktree folders, and runs what they
//! name on the machine, and no list of protected names inside it closes
//! that. So git in the cage works on a git directory of the session's own,
//! in the state folder, which the cage sees where it expects `.git`:
//!
//! - over `<project>/.git` itself where that is a folder (or none yet);
//! - where a `.git` file names the repository (a linked worktree, a
//!   submodule), at [`OWN_GIT_IN_CAGE`], named by a read-only `.git` file of
//!   ours mounted over the project's.
//!
//! The user's git directory (its common one) is mounted read-only at
//! [`REPO_IN_CAGE`], and the session's `objects/info/alternates` names its
//! objects there: no copy, and no variable in the cage's environment (a
//! `GIT_DIR` would send every git command there, a clone elsewhere or a
//! nested repository too). Before each start, with the cage stopped, the
//! session's refs, HEAD and index are brought up to date with the user's
//! ([`sync`]); after each turn the agent's commits are brought into the
//! user's repository under names of the session's own ([`bring`]).
//!
//! The session's folder is the cage's to write: what this program writes
//! there it writes without following a link, and what it reads there it
//! reads as hostile (no link followed, sizes bounded, names checked).

pub mod bring;
mod refs;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cage::spec::Mount;
use crate::error::{Error, Result};

pub use refs::{Head, RefMap};

/// Where the user's git directory (the common one, with the objects) is
/// mounted read-only in every cage. Its own name right under `/`, as the
/// cage's init is: a link the cage plants there sends the mount elsewhere
/// in the cage alone, which leaves git in the cage without the user's
/// objects and nothing else.
pub const REPO_IN_CAGE: &str = "/.shrooms-repo";

/// Where the session's own git directory is mounted when the project's
/// `.git` is a file: our `.git` file over it names this.
pub const OWN_GIT_IN_CAGE: &str = "/.shrooms-git";

/// The text of the `.git` file a cage gets over a project's `.git` file.
pub fn gitfile_text() -> String {
    format!("gitdir: {OWN_GIT_IN_CAGE}\n")
}

/// How a project's repository is laid out on the machine, as git finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// `.git` is a folder (or was missing, and was made an empty one).
    Folder,
    /// `.git` is a file naming the repository outside the project.
    File,
}

/// The session's git directory as its cage was made with it (in the
/// cage's record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GitRecord {
    pub layout: Layout,
    /// The session's own git directory, in the state folder.
    #[schema(value_type = String)]
    pub own: PathBuf,
}

/// Where a project's repository is, read on the machine: the folder with
/// its HEAD and index, and the common one with its objects, refs and
/// config (the same but for a linked worktree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub layout: Layout,
    pub git_dir: PathBuf,
    pub common_dir: PathBuf,
}

/// Read where the repository of a project (`dir`, canonical) is. None: no
/// `.git` there, or one that is neither a file nor a folder (a link is
/// refused by the protected paths). A `.git` file's `gitdir:` line is made
/// absolute; a `commondir` file in the git directory names the common one
/// (git-repository-layout(5)).
pub fn locate(dir: &Path) -> Option<Located> {
    let git = dir.join(".git");
    let meta = std::fs::symlink_metadata(&git).ok()?;
    let (layout, git_dir) = if meta.is_dir() {
        (Layout::Folder, git)
    } else if meta.is_file() {
        let text = read_small(&git, 4096)?;
        let line = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?;
        (Layout::File, normal(&dir.join(line.trim())))
    } else {
        return None;
    };
    let common_dir = read_small(&git_dir.join("commondir"), 4096)
        .map(|t| normal(&git_dir.join(t.trim())))
        .unwrap_or_else(|| git_dir.clone());
    Some(Located {
        layout,
        git_dir,
        common_dir,
    })
}

/// A repository is there: its git directory has a HEAD (an empty `.git`
/// folder made for a project without one has none).
pub fn is_repository(l: &Located) -> bool {
    std::fs::symlink_metadata(l.git_dir.join("HEAD")).is_ok_and(|m| m.is_file())
}

/// The paths of the submodules an index records (its gitlinks),
/// relative to its work tree; none where it does not read. The user's own
/// index, read with gitoxide's parser (every version, a split index),
/// bounded; a path that is not plainly relative is left out.
pub fn gitlinks(index: &Path) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let options = gix_index::decode::Options {
        thread_limit: Some(1),
        alloc_limit_bytes: Some(256 << 20),
        ..Default::default()
    };
    let Ok(file) = gix_index::File::at(index, gix_hash::Kind::Sha1, false, options) else {
        return Vec::new();
    };
    file.entries()
        .iter()
        .filter(|e| e.mode.is_submodule())
        .map(|e| PathBuf::from(std::ffi::OsStr::from_bytes(e.path(&file))))
        .filter(|p| {
            p.components().next().is_some()
                && p.components().all(|c| matches!(c, Component::Normal(_)))
        })
        .collect()
}

/// Pure: the mounts that give a cage its own git directory (`own`) and the
/// user's read-only, for a project (`dir`) whose `.git` is laid out so;
/// `gitfile` is our `.git` file for the `File` layout; `modules`: the
/// user's `.git/modules` is a folder (a `Folder` layout's submodules, whose
/// `.git` files name `../.git/modules/NAME`: read-only there too).
pub fn mounts(
    dir: &Path,
    layout: &Layout,
    common_dir: &Path,
    own: &Path,
    gitfile: &Path,
    modules: bool,
) -> Vec<Mount> {
    let repo = Mount {
        src: common_dir.to_path_buf(),
        dst: PathBuf::from(REPO_IN_CAGE),
        read_only: true,
    };
    match layout {
        Layout::Folder => {
            let mut m = vec![
                Mount {
                    src: own.to_path_buf(),
                    dst: dir.join(".git"),
                    read_only: false,
                },
                repo,
            ];
            if modules {
                m.push(Mount {
                    src: common_dir.join("modules"),
                    dst: dir.join(".git/modules"),
                    read_only: true,
                });
            }
            m
        }
        Layout::File => vec![
            Mount {
                src: gitfile.to_path_buf(),
                dst: dir.join(".git"),
                read_only: true,
            },
            Mount {
                src: own.to_path_buf(),
                dst: PathBuf::from(OWN_GIT_IN_CAGE),
                read_only: false,
            },
            repo,
        ],
    }
}

/// `section.key` (lower case; a subsection kept as written between them)
/// and value of each setting of a git config file's text (git-config(1),
/// "Syntax"): enough to find `core.hooksPath` and the includes.
pub fn config_values(text: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut line = line.trim();
        if line.starts_with('[') {
            let Some(end) = line.find(']') else { continue };
            let head = &line[1..end];
            section = match head.split_once(char::is_whitespace) {
                Some((name, sub)) => {
                    let sub = sub.trim().trim_matches('"');
                    format!("{}.{sub}", name.to_ascii_lowercase())
                }
                None => head.to_ascii_lowercase(),
            };
            line = line[end + 1..].trim();
        }
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), unquote(v.trim())),
            None => (line, "true".to_string()),
        };
        out.push((format!("{section}.{}", key.to_ascii_lowercase()), value));
    }
    out
}

/// A config value: quotes taken out, `\"` and `\\` read, a comment after it dropped.
fn unquote(v: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(match n {
                        'n' => '\n',
                        't' => '\t',
                        other => other,
                    });
                }
            }
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    out.trim_end().to_string()
}

/// A file of at most `max` bytes, as text, not followed if a link.
fn read_small(p: &Path, max: u64) -> Option<String> {
    let m = std::fs::symlink_metadata(p).ok()?;
    if !m.is_file() || m.len() > max {
        return None;
    }
    std::fs::read_to_string(p).ok()
}

/// `.` and `..` taken out by name, no link followed.
pub fn normal(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The keys of the user's repository config that the session's own starts
/// with: the repository's format, how its work tree is read, its remotes
/// and what its branches track, its identity. Nothing that runs a program:
/// that would run in the cage only, but the session's git is the cage's to
/// configure, not ours to hand the user's commands to.
fn kept_key(key: &str) -> bool {
    let section = key.split('.').next().unwrap_or_default();
    let last = key.rsplit('.').next().unwrap_or_default();
    match section {
        "core" => matches!(
            key,
            "core.repositoryformatversion"
                | "core.filemode"
                | "core.ignorecase"
                | "core.symlinks"
                | "core.precomposeunicode"
                | "core.autocrlf"
                | "core.eol"
                | "core.safecrlf"
        ),
        "extensions" => matches!(key, "extensions.objectformat"),
        "remote" => matches!(last, "url" | "pushurl" | "fetch"),
        "branch" => matches!(last, "remote" | "merge" | "rebase"),
        "user" => matches!(key, "user.name" | "user.email"),
        _ => false,
    }
}

/// Pure: the session's config from the user's repository config's values
/// ([`config_values`] of its text): the kept keys, written back as
/// git-config(1) says, each subsection quoted.
pub fn own_config(values: &[(String, String)]) -> String {
    let mut sections: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut have_format = false;
    for (key, value) in values {
        if !kept_key(key) || value.contains(['\n', '\0']) {
            continue;
        }
        have_format |= key == "core.repositoryformatversion";
        let (head, name) = key.rsplit_once('.').unwrap_or((key, ""));
        sections
            .entry(head.to_string())
            .or_default()
            .push((name.to_string(), value.clone()));
    }
    let mut out = String::new();
    if !have_format {
        out.push_str("[core]\n\trepositoryformatversion = 0\n");
    }
    out.push_str("[core]\n\tbare = false\n");
    for (head, keys) in sections {
        match head.split_once('.') {
            Some((section, sub)) => {
                out.push_str(&format!("[{section} \"{}\"]\n", config_escape(sub)))
            }
            None => out.push_str(&format!("[{head}]\n")),
        }
        for (name, value) in keys {
            out.push_str(&format!("\t{name} = \"{}\"\n", config_escape(&value)));
        }
    }
    out
}

/// A value or subsection name for inside a git config file's double
/// quotes, git-config(1) "Syntax": `\\` and `\"` escaped. Not shell
/// quoting: git reads no `$` or `'` there.
fn config_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// What the sync decided, for the session's git directory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncPlan {
    /// The session's HEAD, when it changes.
    pub head: Option<Head>,
    /// The session's refs under the names the sync keeps (`refs/heads/`,
    /// `refs/tags/`, `refs/remotes/`), whole.
    pub refs: RefMap,
    /// The user's index is copied: the session's HEAD now names another
    /// commit, and its index would describe the old one.
    pub copy_index: bool,
}

/// The namespaces of refs the session's follow the user's in.
pub fn followed(name: &str) -> bool {
    ["refs/heads/", "refs/tags/", "refs/remotes/"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Pure: the session's HEAD and followed refs after a sync. A ref the
/// session has not moved since the last sync (it still has the value the
/// user's had then, `base`) follows the user's: moved, made or deleted as
/// the user's was. One the session moved, made or deleted keeps the
/// session's. The same for HEAD; the index follows when HEAD, followed,
/// names another commit than before (the session's index then describes a
/// commit it no longer has out), or at the first sync.
pub fn decide_sync(
    user: (&Head, &RefMap),
    session: (Option<&Head>, &RefMap),
    base: Option<(&Head, &RefMap)>,
) -> SyncPlan {
    let (u_head, u_refs) = user;
    let (s_head, s_refs) = session;
    let empty = RefMap::new();
    let b_refs = base.map_or(&empty, |(_, r)| r);
    let mut names: Vec<&String> = u_refs
        .keys()
        .chain(s_refs.keys())
        .chain(b_refs.keys())
        .collect();
    names.sort();
    names.dedup();
    let mut refs = RefMap::new();
    for name in names.into_iter().filter(|n| followed(n)) {
        let (u, s, b) = (u_refs.get(name), s_refs.get(name), b_refs.get(name));
        let value = if base.is_none() {
            // The first sync: the session's own (a repository it made
            // before the user had one) wins where it has one.
            s.or(u)
        } else if s == b {
            u
        } else {
            s
        };
        if let Some(v) = value {
            refs.insert(name.clone(), v.clone());
        }
    }
    let head_follows = match (base, s_head) {
        (None, None) => true,
        // A repository the session made before the user had one keeps its
        // HEAD, unless that names no commit yet.
        (None, Some(s)) => s.commit(s_refs).is_none(),
        (Some((b, _)), Some(s)) => s == b,
        (Some(_), None) => true,
    };
    let before = s_head.and_then(|h| h.commit(s_refs));
    let (head, after) = if head_follows {
        (Some(u_head.clone()), u_head.commit(&refs))
    } else {
        (None, s_head.and_then(|h| h.commit(&refs)))
    };
    let copy_index = head_follows && (base.is_none() || before != after);
    SyncPlan {
        head,
        refs,
        copy_index,
    }
}

/// What a sync did, said on the turn's terminal when it did something the
/// user may want to know.
#[derive(Debug, Default)]
pub struct Synced {
    pub warnings: Vec<crate::error::Warning>,
}

/// Bring the session's git directory (`own`) up to date with the user's
/// repository, before a start, with the cage stopped: its layout, its
/// config (when it has none), the alternates file naming the user's
/// objects in the cage, its refs, HEAD and index as [`decide_sync`] says;
/// `base` (outside the cage's reach) keeps the user's refs as this sync
/// saw them, for the next. Nothing is done where the project has no
/// repository yet.
pub fn sync(dir: &Path, own: &Path, base: &Path) -> Result<Synced> {
    let mut synced = Synced::default();
    let Some(user) = locate(dir).filter(is_repository) else {
        return Ok(synced);
    };
    refs::check_no_links(own)?;
    let u_head = refs::read_head(&user.git_dir, false)?
        .ok_or_else(|| Error::git(&user.git_dir, crate::error::GitProblem::NoHead))?;
    let u_refs = refs::read_refs(&user.common_dir, false)?;
    let s_head = refs::read_head(own, true)?;
    let s_all = refs::read_refs(own, true)?;
    let s_refs: RefMap = s_all
        .iter()
        .filter(|(n, _)| followed(n))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    let base_read = refs::read_base(base)?;
    let plan = decide_sync(
        (&u_head, &u_refs),
        (s_head.as_ref(), &s_refs),
        base_read.as_ref().map(|(h, r)| (h, r)),
    );
    for sub in ["objects/info", "refs/heads", "refs/tags", "info"] {
        refs::make_dirs(own, Path::new(sub))?;
    }
    if std::fs::symlink_metadata(own.join("config")).is_err() {
        let text = read_small(&user.common_dir.join("config"), 1 << 20).unwrap_or_default();
        let values = config_values(&text);
        refs::write_in(own, Path::new("config"), own_config(&values).as_bytes())?;
    }
    refs::write_in(
        own,
        Path::new("objects/info/alternates"),
        format!("{REPO_IN_CAGE}/objects\n").as_bytes(),
    )?;
    // What git in the cage reads beside the refs: the user's ignores, and
    // a shallow clone's boundary (without it, git looks for parents the
    // user's repository never had).
    for (from, to) in [
        (user.common_dir.join("info/exclude"), "info/exclude"),
        (user.common_dir.join("shallow"), "shallow"),
    ] {
        if let Some(text) = read_small(&from, 16 << 20) {
            refs::write_in(own, Path::new(to), text.as_bytes())?;
        }
    }
    let unfollowed: RefMap = s_all.into_iter().filter(|(n, _)| !followed(n)).collect();
    refs::write_refs(own, &plan.refs, &unfollowed)?;
    if let Some(h) = &plan.head {
        refs::write_in(own, Path::new("HEAD"), h.file_text().as_bytes())?;
    }
    if plan.copy_index {
        match std::fs::read(user.git_dir.join("index")) {
            Ok(bytes) => refs::write_in(own, Path::new("index"), &bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                refs::remove_in(own, Path::new("index"))?;
            }
            Err(e) => synced.warnings.push(crate::error::Warning::GitIndexUnread {
                git_dir: user.git_dir.clone(),
                cause: crate::error::Cause::of(&e),
            }),
        }
    }
    refs::write_base(base, &u_head, &u_refs)?;
    Ok(synced)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(pairs: &[(&str, &str)]) -> RefMap {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.repeat(40 / v.len())))
            .collect()
    }

    fn main() -> Head {
        Head::Symbolic("refs/heads/main".into())
    }

    #[test]
    fn a_ref_the_session_never_moved_follows_the_users() {
        let base = refs(&[("refs/heads/main", "a"), ("refs/heads/old", "b")]);
        let user = refs(&[("refs/heads/main", "c"), ("refs/heads/new", "d")]);
        // The session moved topic and left main and old as they were.
        let session = refs(&[
            ("refs/heads/main", "a"),
            ("refs/heads/old", "b"),
            ("refs/heads/topic", "e"),
        ]);
        let p = decide_sync(
            (&main(), &user),
            (Some(&main()), &session),
            Some((&main(), &base)),
        );
        assert_eq!(
            p.refs,
            refs(&[
                ("refs/heads/main", "c"),
                ("refs/heads/new", "d"),
                ("refs/heads/topic", "e"),
            ])
        );
        assert_eq!(p.head, Some(main()));
        // HEAD names another commit now: the index follows.
        assert!(p.copy_index);
    }

    #[test]
    fn a_ref_the_session_moved_keeps_the_sessions() {
        let base = refs(&[("refs/heads/main", "a")]);
        let user = refs(&[("refs/heads/main", "c")]);
        let session = refs(&[("refs/heads/main", "f")]);
        let p = decide_sync(
            (&main(), &user),
            (Some(&main()), &session),
            Some((&main(), &base)),
        );
        assert_eq!(p.refs, refs(&[("refs/heads/main", "f")]));
        // HEAD still names the session's commit: its index stays.
        assert!(!p.copy_index);
        // On another branch of its own, HEAD stays there.
        let topic = Head::Symbolic("refs/heads/topic".into());
        let p = decide_sync(
            (&main(), &user),
            (Some(&topic), &session),
            Some((&main(), &base)),
        );
        assert_eq!(p.head, None);
        // Nothing moved anywhere: nothing to copy.
        let p = decide_sync(
            (&main(), &base),
            (Some(&main()), &base),
            Some((&main(), &base)),
        );
        assert!(!p.copy_index);
        assert_eq!(p.refs, base);
    }

    #[test]
    fn the_first_sync_takes_the_users_and_keeps_a_repository_of_the_sessions() {
        let user = refs(&[("refs/heads/main", "a"), ("refs/tags/v1", "b")]);
        let p = decide_sync((&main(), &user), (None, &RefMap::new()), None);
        assert_eq!(p.refs, user);
        assert_eq!(p.head, Some(main()));
        assert!(p.copy_index);
        // A repository the session made itself before the user had one.
        let own = refs(&[("refs/heads/main", "e")]);
        let p = decide_sync((&main(), &user), (Some(&main()), &own), None);
        assert_eq!(
            p.refs,
            refs(&[("refs/heads/main", "e"), ("refs/tags/v1", "b")])
        );
        assert_eq!(p.head, None);
        assert!(!p.copy_index);
        // One it made with no commit yet follows the user's HEAD.
        let master = Head::Symbolic("refs/heads/master".into());
        let p = decide_sync((&main(), &user), (Some(&master), &RefMap::new()), None);
        assert_eq!(p.head, Some(main()));
        assert!(p.copy_index);
    }

    #[test]
    fn the_mounts_of_each_layout() {
        let show = |m: &[Mount]| {
            m.iter()
                .map(|m| {
                    format!(
                        "{} -> {} {}",
                        m.src.display(),
                        m.dst.display(),
                        if m.read_only { "ro" } else { "rw" }
                    )
                })
                .collect::<Vec<_>>()
        };
        let dir = Path::new("/home/u/web");
        let own = Path::new("/state/cages/c/git");
        let gitfile = Path::new("/state/cages/c/gitfile");
        assert_eq!(
            show(&mounts(
                dir,
                &Layout::Folder,
                &dir.join(".git"),
                own,
                gitfile,
                true
            )),
            [
                "/state/cages/c/git -> /home/u/web/.git rw",
                "/home/u/web/.git -> /.shrooms-repo ro",
                "/home/u/web/.git/modules -> /home/u/web/.git/modules ro",
            ]
        );
        assert_eq!(
            show(&mounts(
                dir,
                &Layout::File,
                Path::new("/home/u/main/.git"),
                own,
                gitfile,
                false
            )),
            [
                "/state/cages/c/gitfile -> /home/u/web/.git ro",
                "/state/cages/c/git -> /.shrooms-git rw",
                "/home/u/main/.git -> /.shrooms-repo ro",
            ]
        );
        assert_eq!(gitfile_text(), "gitdir: /.shrooms-git\n");
    }

    #[test]
    fn the_sessions_config_keeps_nothing_that_runs() {
        let values: Vec<(String, String)> = [
            ("core.repositoryformatversion", "0"),
            ("core.filemode", "true"),
            ("core.fsmonitor", "touch /tmp/x"),
            ("core.hookspath", "hooks"),
            ("core.sshcommand", "evil"),
            ("remote.origin.url", "/srv/origin.git"),
            ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
            ("remote.origin.uploadpack", "evil"),
            ("branch.main.remote", "origin"),
            ("alias.st", "!evil"),
            ("include.path", "x"),
            ("credential.helper", "evil"),
            ("user.name", "U \"Q\""),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = own_config(&values);
        assert!(!c.contains("evil") && !c.contains("fsmonitor"), "{c}");
        assert!(!c.contains("hooks") && !c.contains("include"), "{c}");
        for want in [
            "[remote \"origin\"]\n\turl = \"/srv/origin.git\"\n",
            "\tfetch = \"+refs/heads/*:refs/remotes/origin/*\"\n",
            "[branch \"main\"]\n\tremote = \"origin\"\n",
            "[user]\n\tname = \"U \\\"Q\\\"\"\n",
            "[core]\n\tbare = false\n",
        ] {
            assert!(c.contains(want), "{want}\n{c}");
        }
    }
}
