//! A git directory found wrong while its refs were read or written: a
//! session's own (what its cage could write) or the user's, and why.

use std::path::Path;

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
    }
}
