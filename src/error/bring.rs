//! Why a branch of a session's was not brought into the user's repository
//! (`cage::git::bring`): its objects checked one by one and found wrong,
//! or the user's git not naming it. A report crosses machines as JSON,
//! where the reason is its words; a reason read from another machine's
//! report is those words, kept as they came.

use super::{Cause, Error};

/// Why one branch was not brought in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotBrought {
    /// No git program on this machine to name it.
    NoGit,
    /// Reading its objects panicked in the pack reader (a damaged pack).
    DamagedPack,
    /// Its tip is no object id.
    BadTip(Cause),
    /// More than `max` objects new to the user's repository.
    TooMany { max: usize },
    /// An object over `max` bytes.
    TooLarge { id: String, max: u64 },
    /// An object in neither repository.
    Missing { id: String },
    /// An object a pack's index names, not in the pack.
    NotInPack { id: String },
    /// An object of another kind than the one naming it says.
    WrongKind {
        id: String,
        kind: String,
        want: String,
    },
    /// An object whose bytes do not hash to its name (`hashed`).
    NotItsHash { id: String, hashed: String },
    /// An object that does not parse as its kind.
    NotParsed {
        id: String,
        kind: String,
        cause: Cause,
    },
    /// A tree entry git's own checks refuse.
    Entry { tree: String, problem: EntryProblem },
    /// An object written as another id than its own.
    WrittenAs { id: String, written: String },
    /// The session's objects did not read, or the user's did not take one:
    /// what the object store said.
    Store(Cause),
    /// `git update-ref` could not be run.
    GitNotRun(Box<Error>),
    /// ... or refused the ref `into`, saying `said`.
    RefRefused { into: String, said: String },
    /// Nothing could be brought in: the error of the whole bringing-in.
    Failed(Box<Error>),
    /// Another machine's reason, in its words.
    Said(String),
}

/// What is wrong with a tree entry's name (git's fsck: `hasDot`,
/// `hasDotgit`, `fullPathname`); `name`: as it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryProblem {
    /// Empty, `.`, `..`, or with a `/` or a NUL.
    BadName { name: String },
    /// A name a checkout would take for git's own folder.
    GitFolder { name: String },
    /// A `.gitmodules` that is a link.
    GitmodulesLink,
}

impl std::fmt::Display for NotBrought {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotBrought::NoGit => {
                f.write_str("there is no git program on this machine to name it in your repository")
            }
            NotBrought::DamagedPack => f.write_str("reading its objects failed (a damaged pack)"),
            NotBrought::BadTip(cause) | NotBrought::Store(cause) => f.write_str(&cause.said),
            NotBrought::TooMany { max } => write!(f, "it has over {max} new objects"),
            NotBrought::TooLarge { id, max } => write!(f, "its object {id} is over {max} bytes"),
            NotBrought::Missing { id } => write!(
                f,
                "its object {id} is in neither the session's repository nor yours"
            ),
            NotBrought::NotInPack { id } => {
                write!(f, "its object {id} is named by a pack index but not there")
            }
            NotBrought::WrongKind { id, kind, want } => {
                write!(f, "its object {id} is a {kind} where a {want} is named")
            }
            NotBrought::NotItsHash { id, hashed } => {
                write!(f, "its object {id} does not hash to its name ({hashed})")
            }
            NotBrought::NotParsed { id, kind, cause } => {
                write!(f, "its {kind} {id} does not parse: {}", cause.said)
            }
            NotBrought::Entry { tree, problem } => write!(f, "its tree {tree} {problem}"),
            NotBrought::WrittenAs { id, written } => {
                write!(f, "its object {id} was written as {written}")
            }
            NotBrought::GitNotRun(e) | NotBrought::Failed(e) => f.write_str(&e.message()),
            NotBrought::RefRefused { into, said } => write!(f, "git update-ref {into}: {said}"),
            NotBrought::Said(words) => f.write_str(words),
        }
    }
}

impl std::fmt::Display for EntryProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntryProblem::BadName { name } => write!(f, "has an entry named {name:?}"),
            EntryProblem::GitFolder { name } => write!(
                f,
                "has an entry named {name:?}, which a checkout would take for git's own folder"
            ),
            EntryProblem::GitmodulesLink => f.write_str("has a .gitmodules that is a link"),
        }
    }
}

/// In a report's JSON, the reason is its words.
impl serde::Serialize for NotBrought {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// ... and read back from another machine's, those words.
impl<'de> serde::Deserialize<'de> for NotBrought {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(d).map(NotBrought::Said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each reason in the words it had when it was made as a sentence
    /// where it was found, and so in a report's JSON; read back as those
    /// words.
    #[test]
    fn every_reason_is_worded_as_before() {
        let id = || "ab12".to_string();
        let cases = [
            (
                NotBrought::NoGit,
                "there is no git program on this machine to name it in your repository",
            ),
            (
                NotBrought::WrongKind {
                    id: id(),
                    kind: "blob".into(),
                    want: "tree".into(),
                },
                "its object ab12 is a blob where a tree is named",
            ),
            (
                NotBrought::Entry {
                    tree: id(),
                    problem: EntryProblem::GitFolder {
                        name: ".GIT ".into(),
                    },
                },
                "its tree ab12 has an entry named \".GIT \", which a checkout would take for \
                 git's own folder",
            ),
            (
                NotBrought::RefRefused {
                    into: "refs/heads/cage/web/main".into(),
                    said: "fatal: locked".into(),
                },
                "git update-ref refs/heads/cage/web/main: fatal: locked",
            ),
            (
                NotBrought::TooLarge { id: id(), max: 9 },
                "its object ab12 is over 9 bytes",
            ),
        ];
        for (why, said) in cases {
            assert_eq!(why.to_string(), said);
            let json = serde_json::to_string(&why).unwrap();
            assert_eq!(json, serde_json::to_string(said).unwrap());
            let back: NotBrought = serde_json::from_str(&json).unwrap();
            assert_eq!(back, NotBrought::Said(said.to_string()));
        }
    }
}
