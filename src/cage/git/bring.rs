//! The agent's commits brought into the user's repository (docs/security.md, "Git in
//! a cage"), after a turn, with the cage stopped. Nothing of the session's
//! git directory runs or is obeyed: no git runs there (upload-pack would
//! read its config, and local clones of crafted repositories have run
//! code), its config is not read, its alternates are not followed (its
//! loose objects and each of its packs are opened one by one), no
//! submodule it names is followed. Each object taken is read there,
//! hashed and compared with its id, parsed as its kind says, and bounded
//! in size and count; only then is it written into the user's objects.
//! The branch goes in under a name of the session's own,
//! `refs/heads/cage/<session>/<branch>`, by the machine's git in the
//! user's repository (which the cage can no longer write), hooks off: the
//! user's checked-out branch and index are never moved.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use gix_hash::ObjectId;
use gix_object::Kind;
use serde::{Deserialize, Serialize};

use super::refs::{self, RefMap};
use crate::error::{
    Cause, Doing, EntryProblem, Error, FastForwardProblem as Ff, NotBrought, Result, Warning,
};

/// The most objects brought in after one turn, and the largest one.
const MAX_OBJECTS: usize = 1_000_000;
const MAX_OBJECT: u64 = 512 << 20;

/// A branch of the session's brought in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Brought {
    /// The session's branch (`main`).
    pub branch: String,
    /// Where it is in the user's repository (`refs/heads/cage/web/main`).
    pub into: String,
    /// The commit it names.
    pub commit: String,
    /// The objects that were new to the user's repository.
    pub objects: usize,
}

/// A branch of the session's that was not brought in, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Refused {
    pub branch: String,
    #[schema(value_type = String)]
    pub why: NotBrought,
}

/// What one bringing-in did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Report {
    #[serde(default)]
    pub brought: Vec<Brought>,
    #[serde(default)]
    pub refused: Vec<Refused>,
}

impl Report {
    pub fn is_empty(&self) -> bool {
        self.brought.is_empty() && self.refused.is_empty()
    }

    /// One line each, for the turn's terminal and the history.
    pub fn lines(&self) -> Vec<String> {
        self.said().iter().map(ToString::to_string).collect()
    }

    /// What was brought in and what was not, one warning each (said
    /// before a session's git directory goes).
    pub fn said(&self) -> Vec<Warning> {
        let brought = self.brought.iter().map(|b| Warning::Brought {
            branch: b.branch.clone(),
            into: b.into.clone(),
            commit: b.commit.clone(),
            objects: b.objects,
        });
        let refused = self.refused.iter().map(|r| Warning::NotBrought {
            branch: r.branch.clone(),
            why: r.why.clone(),
        });
        brought.chain(refused).collect()
    }
}

/// The name a session's branch gets in the user's repository.
pub fn into_name(session: &str, branch: &str) -> String {
    format!("refs/heads/cage/{session}/{branch}")
}

/// Pure: which of the session's branches to bring in: those it moved since
/// the last sync (`base`, the user's refs then) to a commit the user has
/// under neither that branch's name nor the session's name for it.
pub fn to_bring(
    session: &str,
    own: &RefMap,
    base: &RefMap,
    user: &RefMap,
) -> Vec<(String, String)> {
    own.iter()
        .filter_map(|(name, id)| Some((name.strip_prefix("refs/heads/")?, name, id)))
        .filter(|(branch, name, id)| {
            base.get(*name) != Some(id)
                && user.get(*name) != Some(id)
                && user.get(&into_name(session, branch)) != Some(id)
        })
        .map(|(branch, _, id)| (branch.to_string(), id.clone()))
        .collect()
}

/// Bring the session's new commits into the user's repository of the
/// project `dir`. `own`: the session's git directory; `base`: the user's
/// refs as the last sync saw them; `git`: the machine's git program.
pub fn bring(
    session: &str,
    dir: &Path,
    own: &Path,
    base: &Path,
    git: Option<&Path>,
) -> Result<Report> {
    let mut report = Report::default();
    let Some(user) = super::locate(dir).filter(super::is_repository) else {
        return Ok(report);
    };
    if std::fs::symlink_metadata(own.join("HEAD")).is_err() {
        return Ok(report);
    }
    refs::check_no_links(own)?;
    let own_refs = refs::read_refs(own, true)?;
    let base_refs = refs::read_base(base)?.map(|(_, r)| r).unwrap_or_default();
    let user_refs = refs::read_refs(&user.common_dir, false)?;
    let wanted = to_bring(session, &own_refs, &base_refs, &user_refs);
    if wanted.is_empty() {
        return Ok(report);
    }
    let Some(git) = git else {
        for (branch, _) in wanted {
            report.refused.push(Refused {
                branch,
                why: NotBrought::NoGit,
            });
        }
        return Ok(report);
    };
    let session_store = SessionStore::open(&own.join("objects"))?;
    let user_objects = user.common_dir.join("objects");
    let user_store = gix_odb::at(&user_objects, gix_hash::Kind::Sha1)
        .map_err(|e| Error::act(Doing::Open(user_objects.to_path_buf()), &e))?;
    let writer = gix_odb::loose::Store::at(&user_objects, gix_hash::Kind::Sha1);
    for (branch, id) in wanted {
        let into = into_name(session, &branch);
        let copied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            copy_objects(&id, &session_store, &user_store, &writer)
        }))
        .unwrap_or(Err(NotBrought::DamagedPack));
        let outcome = copied.and_then(|objects| {
            update_ref(
                git,
                &user.git_dir,
                &into,
                &id,
                user_refs.get(&into),
                session,
                &branch,
            )
            .map(|()| objects)
        });
        match outcome {
            Ok(objects) => report.brought.push(Brought {
                branch,
                into,
                commit: id,
                objects,
            }),
            Err(why) => report.refused.push(Refused { branch, why }),
        }
    }
    Ok(report)
}

/// The session's objects: its loose ones and each of its packs, opened one
/// by one (no alternates file followed).
struct SessionStore {
    loose: gix_odb::loose::Store,
    packs: Vec<gix_pack::Bundle>,
}

impl SessionStore {
    fn open(objects: &Path) -> Result<SessionStore> {
        let loose = gix_odb::loose::Store::at_opts(
            objects,
            gix_hash::Kind::Sha1,
            gix_odb::loose::Options {
                alloc_limit_bytes: Some(MAX_OBJECT as usize),
                ..Default::default()
            },
        );
        let mut packs = Vec::new();
        let pack_dir = objects.join("pack");
        if let Ok(entries) = std::fs::read_dir(&pack_dir) {
            for e in entries.flatten() {
                let p: PathBuf = e.path();
                if p.extension().is_some_and(|x| x == "idx") && p.with_extension("pack").is_file() {
                    match gix_pack::Bundle::at(&p, gix_hash::Kind::Sha1) {
                        Ok(b) => packs.push(b),
                        Err(e) => {
                            return Err(Error::act(Doing::PackUnread(p.to_path_buf()), &e));
                        }
                    }
                }
            }
        }
        Ok(SessionStore { loose, packs })
    }

    /// An object's kind and bytes, its size checked before it is read whole.
    fn read(&self, id: &ObjectId) -> std::result::Result<Option<(Kind, Vec<u8>)>, NotBrought> {
        let mut buf = Vec::new();
        if let Some((size, _)) = self.loose.try_header(id).map_err(store)? {
            if size > MAX_OBJECT {
                return Err(too_large(id));
            }
            if let Some(d) = self.loose.try_find(id, &mut buf).map_err(store)? {
                let kind = d.kind;
                return Ok(Some((kind, d.data.to_vec())));
            }
        }
        let mut inflate = gix_zlib::Inflate::default();
        for b in &self.packs {
            let Some(at) = b.index.lookup(id) else {
                continue;
            };
            let ofs = b.index.pack_offset_at_index(at);
            let entry = b.pack.entry(ofs).map_err(store)?;
            let header = b
                .pack
                .decode_header(entry, &mut inflate, &|_| Ok(None))
                .map_err(store)?;
            if header.object_size > MAX_OBJECT {
                return Err(too_large(id));
            }
            let (d, _) = b
                .find(id, &mut buf, &mut inflate, &mut gix_pack::cache::Never)
                .map_err(store)?
                .ok_or_else(|| NotBrought::NotInPack { id: id.to_string() })?;
            let kind = d.kind;
            return Ok(Some((kind, d.data.to_vec())));
        }
        Ok(None)
    }
}

/// Copy what the user's repository lacks of the commit `tip` and what it
/// leads to, each object checked; the number copied, or why not.
fn copy_objects(
    tip: &str,
    session: &SessionStore,
    user: &gix_odb::Handle,
    writer: &gix_odb::loose::Store,
) -> std::result::Result<usize, NotBrought> {
    use gix_object::{Exists, Write};
    let tip = ObjectId::from_hex(tip.as_bytes()).map_err(|e| NotBrought::BadTip(Cause::of(&e)))?;
    let mut stack = vec![(tip, Kind::Commit)];
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut copied = 0usize;
    while let Some((id, want)) = stack.pop() {
        if !seen.insert(id) || user.exists(&id) {
            continue;
        }
        if seen.len() > MAX_OBJECTS {
            return Err(NotBrought::TooMany { max: MAX_OBJECTS });
        }
        let (kind, data) = read_checked(session, id, want)?;
        let parsed =
            gix_object::ObjectRef::from_bytes(&data, kind, gix_hash::Kind::Sha1).map_err(|e| {
                NotBrought::NotParsed {
                    id: id.to_string(),
                    kind: kind.to_string(),
                    cause: Cause::of(&e),
                }
            })?;
        match parsed {
            gix_object::ObjectRef::Commit(c) => {
                stack.push((c.tree(), Kind::Tree));
                stack.extend(c.parents().map(|p| (p, Kind::Commit)));
            }
            gix_object::ObjectRef::Tree(t) => {
                for e in &t.entries {
                    check_entry_name(e.filename.as_ref(), e.mode.is_link()).map_err(|problem| {
                        NotBrought::Entry {
                            tree: id.to_string(),
                            problem,
                        }
                    })?;
                    // A submodule's commit is not ours to follow.
                    if e.mode.is_commit() {
                        continue;
                    }
                    let k = if e.mode.is_tree() {
                        Kind::Tree
                    } else {
                        Kind::Blob
                    };
                    stack.push((e.oid.to_owned(), k));
                }
            }
            gix_object::ObjectRef::Tag(t) => stack.push((t.target(), t.target_kind)),
            gix_object::ObjectRef::Blob(_) => {}
        }
        let written = writer.write_buf(kind, &data).map_err(store)?;
        if written != id {
            return Err(NotBrought::WrittenAs {
                id: id.to_string(),
                written: written.to_string(),
            });
        }
        copied += 1;
    }
    Ok(copied)
}

/// The session's object `id`, read, of the kind `want` that names it, and
/// hashing to its name.
fn read_checked(
    session: &SessionStore,
    id: ObjectId,
    want: Kind,
) -> std::result::Result<(Kind, Vec<u8>), NotBrought> {
    let (kind, data) = session
        .read(&id)?
        .ok_or_else(|| NotBrought::Missing { id: id.to_string() })?;
    if kind != want {
        return Err(NotBrought::WrongKind {
            id: id.to_string(),
            kind: kind.to_string(),
            want: want.to_string(),
        });
    }
    let hashed = gix_object::compute_hash(gix_hash::Kind::Sha1, kind, &data).map_err(store)?;
    if hashed != id {
        return Err(NotBrought::NotItsHash {
            id: id.to_string(),
            hashed: hashed.to_string(),
        });
    }
    Ok((kind, data))
}

/// A tree entry's name as git's own checks take it (fsck's `hasDot`,
/// `hasDotgit`, `fullPathname`): a checkout of it must not write a `.git`,
/// leave the folder, or follow a `.gitmodules` link.
fn check_entry_name(name: &[u8], link: bool) -> std::result::Result<(), EntryProblem> {
    let shown = || String::from_utf8_lossy(name).into_owned();
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(EntryProblem::BadName { name: shown() });
    }
    let lower = name.to_ascii_lowercase();
    let trimmed: Vec<u8> = lower
        .iter()
        .copied()
        .rev()
        .skip_while(|b| *b == b' ' || *b == b'.')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if trimmed == b".git" || trimmed == b"git~1" {
        return Err(EntryProblem::GitFolder { name: shown() });
    }
    if link && trimmed == b".gitmodules" {
        return Err(EntryProblem::GitmodulesLink);
    }
    Ok(())
}

/// Name the commit in the user's repository, by the machine's git there
/// (its refs may be packed, or in a reftable): `update-ref` with the old
/// value it must have (none: it must not exist), no hook run.
fn update_ref(
    git: &Path,
    git_dir: &Path,
    into: &str,
    id: &str,
    old: Option<&String>,
    session: &str,
    branch: &str,
) -> std::result::Result<(), NotBrought> {
    let zero = "0".repeat(40);
    let old = old.map_or(zero.as_str(), String::as_str);
    let message = format!("shrooms-agent: session {session}'s branch {branch}");
    let gd = git_dir.to_string_lossy().into_owned();
    let out = crate::host::process::Process::new(git, "git update-ref")
        .args([
            "--git-dir",
            gd.as_str(),
            // The repository is named here; as root, a rootful cage's
            // project belongs to the cage's uid.
            "-c",
            "safe.directory=*",
            "-c",
            "core.hooksPath=/dev/null",
            "update-ref",
            "-m",
            message.as_str(),
            into,
            id,
            old,
        ])
        .timeout(std::time::Duration::from_secs(60))
        .capture()
        .map_err(|e| NotBrought::GitNotRun(Box::new(e)))?;
    if out.success() {
        Ok(())
    } else {
        Err(NotBrought::RefRefused {
            into: into.to_string(),
            said: out.last_stderr_line().to_string(),
        })
    }
}

/// What the object store said when it failed.
fn store(e: impl std::error::Error + 'static) -> NotBrought {
    NotBrought::Store(Cause::of(&e))
}

fn too_large(id: &ObjectId) -> NotBrought {
    NotBrought::TooLarge {
        id: id.to_string(),
        max: MAX_OBJECT,
    }
}

/// What `--ff` did to the user's checked-out branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FastForward {
    /// The user's branch (`main`).
    pub branch: String,
    /// The commit it named before, if it named one.
    pub from: Option<String>,
    /// The commit it names now (the session's).
    pub to: String,
}

/// The machine's git in the user's repository (`git_dir`, its work tree
/// `dir`), hooks off; `index`: another index file to use.
fn user_git(
    git: &Path,
    git_dir: &Path,
    dir: &Path,
    index: Option<&Path>,
) -> crate::host::process::Process {
    let mut p = crate::host::process::Process::new(git, "git")
        .args([
            "--git-dir".to_string(),
            git_dir.to_string_lossy().into_owned(),
            "--work-tree".into(),
            dir.to_string_lossy().into_owned(),
            // As root, a rootful cage's project belongs to the cage's uid.
            "-c".into(),
            "safe.directory=*".into(),
            "-c".into(),
            "core.hooksPath=/dev/null".into(),
        ])
        .cwd(dir)
        .timeout(std::time::Duration::from_secs(120));
    if let Some(i) = index {
        p = p.env("GIT_INDEX_FILE", &i.to_string_lossy());
    }
    p
}

/// Run it; its stdout, or why not (`what` failed).
fn ran(p: crate::host::process::Process, what: &str) -> std::result::Result<String, Ff> {
    let out = p.capture().map_err(failed)?;
    if out.success() {
        Ok(out.stdout.clone())
    } else {
        Err(Ff::GitFailed {
            what: what.to_string(),
            said: out.last_stderr_line().to_string(),
        })
    }
}

/// An error of what a fast-forward looked at or ran, kept whole.
fn failed(e: Error) -> Ff {
    Ff::Failed(Box::new(e))
}

/// Pure: the name a brought-in branch is shown by.
fn shown(into: &str) -> String {
    into.trim_start_matches("refs/heads/").to_string()
}

/// Fast-forward the user's checked-out branch to the session's commit of
/// the same branch, brought in as `cage/<session>/<branch>` (docs/security.md, "Git
/// in a cage"), when the user asks (`cage bring --ff`). Refused, changing
/// nothing, where it is not a fast-forward, where the user's index holds
/// staged changes, or where the work tree is not already the session's
/// commit (the tree is shared: the agent's edits are there; a file this
/// would have to write or take away is the user's). The branch is moved
/// with the old value it must have, and the index read from the new
/// commit: no file of the work tree is written.
pub fn fast_forward(
    session: &str,
    dir: &Path,
    git: Option<&Path>,
) -> std::result::Result<FastForward, Ff> {
    let git = git.ok_or(Ff::NoGit)?;
    let user = super::locate(dir)
        .filter(super::is_repository)
        .ok_or_else(|| Ff::NotARepository {
            dir: dir.to_path_buf(),
        })?;
    let (name, branch) = checked_out_branch(&user.git_dir)?;
    let refs = refs::read_refs(&user.common_dir, false).map_err(failed)?;
    let into = into_name(session, &branch);
    let to = refs.get(&into).cloned().ok_or_else(|| Ff::NotBrought {
        branch: branch.clone(),
        into: shown(&into),
    })?;
    let from = refs.get(&name).cloned();
    if from.as_deref() == Some(to.as_str()) {
        return Ok(FastForward { branch, from, to });
    }
    let gd = &user.git_dir;
    if let Some(f) = &from {
        ran(
            user_git(git, gd, dir, None).args(["merge-base", "--is-ancestor", f, &to]),
            "is-ancestor",
        )
        .map_err(|_| Ff::NotAFastForward {
            branch: branch.clone(),
            into: shown(&into),
        })?;
        ran(
            user_git(git, gd, dir, None).args(["diff-index", "--cached", "--quiet", f]),
            "diff-index",
        )
        .map_err(|_| Ff::Staged {
            branch: branch.clone(),
        })?;
    }
    // The work tree against the session's commit, in an index of our own
    // beside the user's.
    let tmp = gd.join(format!("shrooms-ff-index-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let checked = work_tree_is_the_commit(git, gd, dir, &tmp, &into, from.as_deref(), &to);
    let _ = std::fs::remove_file(&tmp);
    checked?;
    let zero = "0".repeat(40);
    let message = format!("shrooms-agent: fast-forward to session {session}'s {branch}");
    ran(
        user_git(git, gd, dir, None).args([
            "update-ref",
            "-m",
            message.as_str(),
            name.as_str(),
            to.as_str(),
            from.as_deref().unwrap_or(zero.as_str()),
        ]),
        "git update-ref",
    )?;
    ran(
        user_git(git, gd, dir, None).args(["read-tree", &to]),
        "git read-tree",
    )?;
    let _ = ran(
        user_git(git, gd, dir, None).args(["update-index", "-q", "--refresh"]),
        "update-index",
    );
    Ok(FastForward { branch, from, to })
}

/// The user's checked-out branch: its ref (`refs/heads/main`) and its name
/// (`main`); refused where HEAD is detached or names no branch.
fn checked_out_branch(git_dir: &Path) -> std::result::Result<(String, String), Ff> {
    let head = refs::read_head(git_dir, false)
        .map_err(failed)?
        .ok_or(Ff::NoHead)?;
    let super::Head::Symbolic(name) = head else {
        return Err(Ff::Detached);
    };
    let branch = name
        .strip_prefix("refs/heads/")
        .ok_or_else(|| Ff::NotABranch { name: name.clone() })?
        .to_string();
    Ok((name, branch))
}

/// Whether the work tree is already the session's commit `to` (brought in
/// as `into`), read through the index file `tmp`: no file differs from it
/// or is missing, and none that `from` has and `to` has not is still
/// there.
fn work_tree_is_the_commit(
    git: &Path,
    gd: &Path,
    dir: &Path,
    tmp: &Path,
    into: &str,
    from: Option<&str>,
    to: &str,
) -> std::result::Result<(), Ff> {
    ran(
        user_git(git, gd, dir, Some(tmp)).args(["read-tree", to]),
        "read-tree",
    )?;
    let _ = ran(
        user_git(git, gd, dir, Some(tmp)).args(["update-index", "-q", "--refresh"]),
        "update-index",
    );
    ran(
        user_git(git, gd, dir, Some(tmp)).args(["diff-files", "--quiet"]),
        "diff-files",
    )
    .map_err(|_| Ff::TreeDiffers { into: shown(into) })?;
    if let Some(f) = from {
        let gone = ran(
            user_git(git, gd, dir, None).args([
                "diff",
                "--name-only",
                "-z",
                "--no-renames",
                "--diff-filter=D",
                f,
                to,
            ]),
            "diff",
        )?;
        if let Some(p) = gone
            .split('\0')
            .find(|p| !p.is_empty() && std::fs::symlink_metadata(dir.join(p)).is_ok())
        {
            return Err(Ff::Untracked {
                path: p.to_string(),
            });
        }
    }
    Ok(())
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

    #[test]
    fn only_what_the_session_moved_and_the_user_lacks() {
        let own = refs(&[
            ("refs/heads/main", "a"),
            ("refs/heads/topic", "b"),
            ("refs/heads/same", "c"),
            ("refs/heads/done", "d"),
            ("refs/tags/v1", "e"),
        ]);
        let base = refs(&[("refs/heads/main", "a"), ("refs/heads/same", "0")]);
        let user = refs(&[
            ("refs/heads/main", "f"),
            ("refs/heads/same", "c"),
            ("refs/heads/cage/web/done", "d"),
        ]);
        assert_eq!(
            to_bring("web", &own, &base, &user),
            vec![("topic".to_string(), "b".repeat(40))]
        );
        assert_eq!(into_name("web", "feat/x"), "refs/heads/cage/web/feat/x");
    }

    #[test]
    fn tree_entries_git_would_refuse() {
        for bad in [
            &b".git"[..],
            b".GIT",
            b".git. ",
            b"git~1",
            b"..",
            b"a/b",
            b"",
        ] {
            assert!(check_entry_name(bad, false).is_err(), "{bad:?}");
        }
        assert!(check_entry_name(b".gitmodules", true).is_err());
        for ok in [&b".gitmodules"[..], b".github", b"src", b".gitignore"] {
            assert!(check_entry_name(ok, false).is_ok(), "{ok:?}");
        }
    }
}
