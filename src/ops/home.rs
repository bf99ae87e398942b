//! The cage's private harness home (`cages/<container>/home`, mounted at
//! `~/.claude` or pi's folder, or at `/root/.claude` in a sealed cage) is
//! the cage's to write, and other mounts land inside it: the harness's
//! read-only settings, this project's conversation folder, a program
//! folder that lives there. runc resolves a mount's destination at every
//! start, following links inside the container (runc's securejoin, see
//! opencontainers/runc `libcontainer/rootfs_linux.go`), so a cage that
//! replaced `projects/` of its home with a link to its project had the
//! conversation folder mounted into the project at the next start, and
//! runc made the folder for it there, on the machine. Before each start,
//! every folder on the way to such a destination is looked at on the
//! machine's side: a link (or anything that cannot be looked at) refuses
//! the start.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, HomeWay, NotStarted, Result, SessionProblem};
use crate::state::session::CageRecord;

/// One bind mount read back from a `podman create` argv: where from, where to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    pub src: PathBuf,
    pub dst: PathBuf,
}

/// The bind mounts of a `podman create` argv, as `podman::argv::mount`
/// wrote them: `--mount` values read as one CSV record each (podman
/// #13922), fields other than `type`, `src` and `dst` passed over.
pub fn bind_mounts(argv: &[String]) -> Vec<BindMount> {
    let mut out = Vec::new();
    let mut words = argv.iter();
    while let Some(w) = words.next() {
        if w == "--" {
            break;
        }
        if w != "--mount" {
            continue;
        }
        let Some(value) = words.next() else { break };
        let (mut kind, mut src, mut dst) = (None, None, None);
        for field in csv_fields(value) {
            match field.split_once('=') {
                Some(("type", v)) => kind = Some(v.to_string()),
                Some(("src" | "source", v)) => src = Some(PathBuf::from(v)),
                Some(("dst" | "destination" | "target", v)) => dst = Some(PathBuf::from(v)),
                _ => {}
            }
        }
        if let (Some("bind"), Some(src), Some(dst)) = (kind.as_deref(), src, dst) {
            out.push(BindMount { src, dst });
        }
    }
    out
}

/// The fields of one CSV record: a field in double quotes may hold commas,
/// and `""` in it is one quote.
fn csv_fields(s: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

/// Pure: the mounts of `argv` whose destination is inside the one whose
/// source is `private_home`, each as (its destination, the same path
/// relative to the home's destination).
pub fn inside_home(argv: &[String], private_home: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mounts = bind_mounts(argv);
    let Some(home_dst) = mounts
        .iter()
        .find(|m| m.src == private_home)
        .map(|m| m.dst.clone())
    else {
        return Vec::new();
    };
    mounts
        .iter()
        .filter(|m| m.src != private_home)
        .filter_map(|m| {
            let rel = m.dst.strip_prefix(&home_dst).ok()?;
            (!rel.as_os_str().is_empty()).then(|| (m.dst.clone(), rel.to_path_buf()))
        })
        .collect()
}

/// Refuse a start where a folder on the way to a mount destination inside
/// the private home, or the destination itself, is a link now (or cannot
/// be looked at: a folder the cage's root made for another of its users).
/// A part that is missing is fine: runc makes it, inside a home whose
/// folders up to there are real.
pub fn check(private_home: &Path, cage: &CageRecord, session: &str) -> Result<()> {
    let refuse = |found: &Path, what: HomeWay| {
        let why = NotStarted::HomeWay {
            home: private_home.to_path_buf(),
            harness_dir: cage.harness_dir.clone(),
            found: found.to_path_buf(),
            what,
        };
        Error::session(session, SessionProblem::NotStarted(why))
    };
    match std::fs::symlink_metadata(private_home) {
        Ok(m) if m.file_type().is_dir() => {}
        Ok(_) => {
            return Err(refuse(private_home, HomeWay::HomeNotAFolder));
        }
        // A home that is not there yet is made by podman as a folder.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            let cause = e.to_string();
            return Err(refuse(private_home, HomeWay::HomeUnseen { cause }));
        }
    }
    for (dst, rel) in inside_home(&cage.create_argv, private_home) {
        let mut here = private_home.to_path_buf();
        for part in rel.components() {
            let Component::Normal(part) = part else {
                return Err(refuse(&here, HomeWay::NotPlain { dst: dst.clone() }));
            };
            here.push(part);
            match std::fs::symlink_metadata(&here) {
                Ok(m) if m.file_type().is_symlink() => {
                    let to = std::fs::read_link(&here)
                        .map(|t| t.display().to_string())
                        .unwrap_or_else(|_| "?".into());
                    return Err(refuse(
                        &here,
                        HomeWay::Link {
                            to,
                            dst: dst.clone(),
                        },
                    ));
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) => {
                    let cause = e.to_string();
                    return Err(refuse(
                        &here,
                        HomeWay::Unseen {
                            cause,
                            dst: dst.clone(),
                        },
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cage::spec::Mount;

    fn argv(mounts: &[(&str, &str, bool)]) -> Vec<String> {
        let mut a: Vec<String> = vec!["create".into(), "--name".into(), "c".into()];
        for (src, dst, ro) in mounts {
            a.push("--mount".into());
            a.push(crate::host::podman::argv::mount(&Mount {
                src: src.into(),
                dst: dst.into(),
                read_only: *ro,
            }));
        }
        a.extend(["--".into(), "img".into(), "--mount".into(), "x".into()]);
        a
    }

    #[test]
    fn bind_mounts_read_back_as_written() {
        let a = argv(&[
            ("/p", "/p", false),
            ("/s/a,b \"q\"", "/h/.claude", false),
            ("/h/.claude/hooks", "/h/.claude/hooks", true),
        ]);
        assert_eq!(
            bind_mounts(&a),
            vec![
                BindMount {
                    src: "/p".into(),
                    dst: "/p".into()
                },
                BindMount {
                    src: "/s/a,b \"q\"".into(),
                    dst: "/h/.claude".into()
                },
                BindMount {
                    src: "/h/.claude/hooks".into(),
                    dst: "/h/.claude/hooks".into()
                },
            ]
        );
        // Options another version may add are passed over; volumes are not binds.
        let extra: Vec<String> = [
            "--mount",
            "type=bind,src=/a,dst=/b,ro=true,nosuid,nodev",
            "--mount",
            "type=volume,src=v,dst=/shared",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            bind_mounts(&extra),
            vec![BindMount {
                src: "/a".into(),
                dst: "/b".into()
            }]
        );
    }

    #[test]
    fn the_mounts_inside_the_private_home() {
        let a = argv(&[
            ("/home/u/src/web", "/home/u/src/web", false),
            ("/state/cages/c/home", "/home/u/.claude", false),
            (
                "/home/u/.claude/settings.json",
                "/home/u/.claude/settings.json",
                true,
            ),
            (
                "/home/u/.claude/projects/-home-u-src-web",
                "/home/u/.claude/projects/-home-u-src-web",
                false,
            ),
            ("/home/u/.claudex", "/home/u/.claudex", true),
            ("/usr/bin/claude", "/usr/bin/claude", true),
        ]);
        assert_eq!(
            inside_home(&a, Path::new("/state/cages/c/home")),
            vec![
                (
                    PathBuf::from("/home/u/.claude/settings.json"),
                    PathBuf::from("settings.json")
                ),
                (
                    PathBuf::from("/home/u/.claude/projects/-home-u-src-web"),
                    PathBuf::from("projects/-home-u-src-web")
                ),
            ]
        );
        assert!(inside_home(&a, Path::new("/elsewhere")).is_empty());
    }

    #[test]
    fn a_link_on_the_way_refuses_the_start() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().to_path_buf();
        let home = root.join("home");
        std::fs::create_dir_all(home.join("projects")).unwrap();
        let mut cage = crate::state::session::sample_cage("shrooms-s-abcdef");
        cage.harness_dir = "/h/.claude".into();
        cage.create_argv = argv(&[
            (home.to_str().unwrap(), "/h/.claude", false),
            ("/h/.claude/projects/-p", "/h/.claude/projects/-p", false),
            ("/h/.claude/hooks", "/h/.claude/hooks", true),
        ]);
        // Real folders, and parts still missing: fine.
        check(&home, &cage, "s").unwrap();
        std::fs::create_dir(home.join("projects/-p")).unwrap();
        check(&home, &cage, "s").unwrap();
        // The destination itself a link.
        std::fs::remove_dir(home.join("projects/-p")).unwrap();
        std::os::unix::fs::symlink("/p", home.join("projects/-p")).unwrap();
        let e = check(&home, &cage, "s").unwrap_err();
        assert!(
            e.message().contains("projects/-p is a link (to /p)"),
            "{}",
            e.message()
        );
        // A folder on the way a link.
        std::fs::remove_file(home.join("projects/-p")).unwrap();
        std::fs::rename(home.join("projects"), home.join("old")).unwrap();
        std::os::unix::fs::symlink("/p", home.join("projects")).unwrap();
        let e = check(&home, &cage, "s").unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::Failed);
        assert!(
            e.message().starts_with(&format!(
                "session s's cage was not started: {} is a link (to /p) on the way to \
                 /h/.claude/projects/-p",
                home.join("projects").display()
            )),
            "{}",
            e.message()
        );
        assert!(e.message().contains("cage move s"), "{}", e.message());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
