//! A git directory found wrong while its refs were read or written: a
//! session's own (what its cage could write) or the user's, and why.

use std::path::{Path, PathBuf};

use super::{Error, Face};

/// What is wrong at a path of a git directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitProblem {
    /// A link where git never makes one: the cage made it.
    CageLink,
    /// Neither a file nor a folder where git makes only those.
    CageOdd,
    /// Not a file, or a file over `max` bytes.
    NotSmallFile { max: u64 },
    /// A folder with more than `max` refs.
    TooManyRefs { max: usize },
    /// A repository without a HEAD.
    NoHead,
}

/// Why `cage bring --ff` did not fast-forward the user's checked-out
/// branch (`into`: the session's branch as it was brought in, without
/// `refs/heads/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FastForwardProblem {
    /// No git program on this machine.
    NoGit,
    /// The project is no git repository.
    NotARepository { dir: PathBuf },
    /// The user's repository has no HEAD.
    NoHead,
    /// The user's HEAD is detached.
    Detached,
    /// The user's HEAD names `name`, which is no branch.
    NotABranch { name: String },
    /// The session has no `branch` brought in.
    NotBrought { branch: String, into: String },
    /// The user's `branch` has commits the session's has not.
    NotAFastForward { branch: String, into: String },
    /// The user's index has staged changes on `branch`.
    Staged { branch: String },
    /// The work tree is not the session's commit.
    TreeDiffers { into: String },
    /// `path` is in the work tree and not in the session's commit.
    Untracked { path: String },
    /// git's `what` failed, saying `said` last.
    GitFailed { what: String, said: String },
    /// What was looked at or run failed, as this error says.
    Failed(Box<Error>),
}

impl FastForwardProblem {
    pub(super) fn words(&self, face: Face) -> String {
        match self {
            FastForwardProblem::NoGit => "there is no git program on this machine".to_string(),
            FastForwardProblem::NotARepository { dir } => {
                format!("{} is no git repository", dir.display())
            }
            FastForwardProblem::NoHead => "your repository has no HEAD".to_string(),
            FastForwardProblem::Detached => {
                "your HEAD is detached: check out the branch to fast-forward".to_string()
            }
            FastForwardProblem::NotABranch { name } => {
                format!("your HEAD names {name}, not a branch")
            }
            FastForwardProblem::NotBrought { branch, into } => format!(
                "the session has no branch {branch} brought in ({into} is not in your repository)"
            ),
            FastForwardProblem::NotAFastForward { branch, into } => format!(
                "not a fast-forward: your {branch} has commits that {into} has not; merge it \
                 yourself (git merge {into})"
            ),
            FastForwardProblem::Staged { branch } => {
                format!("your index has staged changes on {branch}: commit or unstage them")
            }
            FastForwardProblem::TreeDiffers { into } => format!(
                "your work tree is not {into}'s commit (files differ from it, or are missing): a \
                 fast-forward would change them under you"
            ),
            FastForwardProblem::Untracked { path } => format!(
                "{path} is in your work tree but not in the session's commit: a fast-forward \
                 would leave it untracked"
            ),
            FastForwardProblem::GitFailed { what, said } => format!("{what}: {said}"),
            FastForwardProblem::Failed(e) => e.said(face),
        }
    }
}

impl GitProblem {
    pub(super) fn words(&self, path: &Path) -> String {
        let p = path.display();
        let by_cage = |what: &str| {
            format!("{p} {what}; git never makes one in its own folder, so the cage did")
        };
        match self {
            GitProblem::CageLink => by_cage("is a link"),
            GitProblem::CageOdd => by_cage("is neither a file nor a folder"),
            GitProblem::NotSmallFile { max } => {
                format!("{p} is not a file of at most {max} bytes")
            }
            GitProblem::TooManyRefs { max } => format!("{p} holds more than {max} refs"),
            GitProblem::NoHead => format!("{p} has no HEAD"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each problem in the words it had when it was made as a sentence
    /// where it was found; each a failure (exit 1).
    #[test]
    fn every_git_problem_is_worded_as_before() {
        let p = Path::new("/g/refs/heads/x");
        let w = |problem| Error::git(p, problem).message();
        assert_eq!(
            w(GitProblem::CageLink),
            "/g/refs/heads/x is a link; git never makes one in its own folder, so the cage did"
        );
        assert_eq!(
            w(GitProblem::CageOdd),
            "/g/refs/heads/x is neither a file nor a folder; git never makes one in its own \
             folder, so the cage did"
        );
        assert_eq!(
            w(GitProblem::NotSmallFile { max: 4096 }),
            "/g/refs/heads/x is not a file of at most 4096 bytes"
        );
        assert_eq!(
            w(GitProblem::TooManyRefs { max: 10 }),
            "/g/refs/heads/x holds more than 10 refs"
        );
        assert_eq!(w(GitProblem::NoHead), "/g/refs/heads/x has no HEAD");
        assert_eq!(Error::git(p, GitProblem::NoHead).kind.exit_code(), 1);
        let ff = |why| {
            Error::session(
                "web",
                crate::error::SessionProblem::NotFastForwarded { why },
            )
            .message()
        };
        assert_eq!(
            ff(FastForwardProblem::NotAFastForward {
                branch: "main".into(),
                into: "cage/web/main".into()
            }),
            "your branch was not fast-forwarded to session web's: not a fast-forward: your main \
             has commits that cage/web/main has not; merge it yourself (git merge cage/web/main)"
        );
        assert_eq!(
            ff(FastForwardProblem::TreeDiffers {
                into: "cage/web/main".into()
            }),
            "your branch was not fast-forwarded to session web's: your work tree is not \
             cage/web/main's commit (files differ from it, or are missing): a fast-forward would \
             change them under you"
        );
        assert_eq!(
            ff(FastForwardProblem::Failed(Box::new(Error::git(
                p,
                GitProblem::NoHead
            )))),
            "your branch was not fast-forwarded to session web's: /g/refs/heads/x has no HEAD"
        );
        assert_eq!(
            ff(FastForwardProblem::NotBrought {
                branch: "b".into(),
                into: "cage/web/b".into()
            }),
            "your branch was not fast-forwarded to session web's: the session has no branch b \
             brought in (cage/web/b is not in your repository)"
        );
    }
}
