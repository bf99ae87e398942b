//! A file or folder of the tool's own refused or found wrong: the state
//! folder and what is kept in it (its id, its locks, a private folder made
//! there), and why.

use std::path::Path;

use super::Kind;

/// What is wrong with a file or folder of the tool's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateProblem {
    /// The state folder (`leaf`), or a folder above it, belongs to
    /// another user (`uid`; `me`: the user running the tool).
    OthersOwn { leaf: bool, uid: u32, me: u32 },
    /// ... or others can write to it (its permission bits).
    OthersWrite { leaf: bool, mode: u32 },
    /// The state folder's id is not one this program wrote (`label`: the
    /// label every container of the folder's carries it on).
    IdDamaged { label: &'static str },
    /// The state folder's id was there, then gone, while it was made.
    IdVanished,
    /// A lock file removed or replaced under every taker, again and again.
    LockReplaced,
    /// A path written to that has no folder above it.
    NoFolder,
    /// A folder of the tool's own that is a link or a file.
    NotAFolder,
    /// A folder of the tool's own that belongs to another user.
    NotYours { uid: u32 },
    /// The list of the folders sealed sessions worked in does not read
    /// (`cause`: as its parse said).
    UntrustedDamaged { cause: String },
    /// A folder that holds the 10,000 names a file named `name` may take.
    NoNameLeft { name: String },
}

/// What to do about a state folder others could change.
const OWN_STATE: &str = "use a state folder of your own (SHROOMS_AGENT_STATE_DIR), in folders \
                         only you (or root) own and can write";

impl StateProblem {
    pub(super) fn words(&self, path: &Path) -> String {
        let p = path.display();
        let what = |leaf: bool| {
            if leaf {
                "shrooms-agent's state folder"
            } else {
                "a folder above shrooms-agent's state folder"
            }
        };
        match self {
            StateProblem::OthersOwn { leaf, uid, me } => format!(
                "{p} is {}, and it belongs to uid {uid}, not to you (uid {me}): that user could \
                 swap the records, keys and profiles kept there; {OWN_STATE}",
                what(*leaf)
            ),
            StateProblem::OthersWrite { leaf, mode } => format!(
                "{p} is {}, and others can write to it (mode {:04o}): they could swap the \
                 records, keys and profiles kept there; `chmod go-w {p}`, or {OWN_STATE}",
                what(*leaf),
                mode & 0o7777
            ),
            StateProblem::IdDamaged { label } => format!(
                "{p} is damaged (not 32 lowercase hex digits); nothing was done. Put it back as \
                 it was: every container this state folder made carries it on its label {label}"
            ),
            StateProblem::IdVanished => "the state folder's state-id vanished".to_string(),
            StateProblem::LockReplaced => format!(
                "locking {p}: the file was removed or replaced again and again while it was taken"
            ),
            StateProblem::NoFolder => format!("{p} has no folder"),
            StateProblem::NotAFolder => format!(
                "{p} is a link or a file, not a folder; it must be a folder of its own: move it \
                 away and try again"
            ),
            StateProblem::NotYours { uid } => {
                format!("{p} belongs to uid {uid}, not to you; move it away and try again")
            }
            StateProblem::UntrustedDamaged { cause } => format!(
                "{p} is damaged ({cause}); it lists the folders sealed sessions worked in, and no \
                 cage is made until it reads: put it back as it was, or remove it if no folder a \
                 sealed session worked in is left"
            ),
            StateProblem::NoNameLeft { name } => {
                format!("{p} holds 10,000 files named like {name:?} already")
            }
        }
    }

    pub(super) fn kind(&self) -> Kind {
        match self {
            StateProblem::OthersOwn { .. }
            | StateProblem::OthersWrite { .. }
            | StateProblem::NotAFolder
            | StateProblem::NotYours { .. } => Kind::BadInput,
            StateProblem::IdDamaged { .. }
            | StateProblem::IdVanished
            | StateProblem::LockReplaced
            | StateProblem::NoFolder
            | StateProblem::NoNameLeft { .. }
            | StateProblem::UntrustedDamaged { .. } => Kind::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each problem in the words it had when it was made as a sentence
    /// where it was found, and the exit code it had.
    #[test]
    fn every_state_problem_is_worded_as_before() {
        assert_eq!(
            Error::state(
                Path::new("/s"),
                StateProblem::OthersOwn {
                    leaf: true,
                    uid: 1001,
                    me: 0
                }
            )
            .message(),
            "/s is shrooms-agent's state folder, and it belongs to uid 1001, not to you (uid 0): \
             that user could swap the records, keys and profiles kept there; use a state folder \
             of your own (SHROOMS_AGENT_STATE_DIR), in folders only you (or root) own and can \
             write"
        );
        let bad = |problem| Error::state(Path::new("/s"), problem).kind.exit_code();
        assert_eq!(
            bad(StateProblem::OthersWrite {
                leaf: true,
                mode: 0o777
            }),
            2
        );
        assert_eq!(bad(StateProblem::NotAFolder), 2);
        let p = Path::new("/s/state-id");
        let w = |problem| Error::state(p, problem).message();
        assert_eq!(
            w(StateProblem::IdDamaged { label: "x.state" }),
            "/s/state-id is damaged (not 32 lowercase hex digits); nothing was done. Put it back \
             as it was: every container this state folder made carries it on its label x.state"
        );
        assert_eq!(
            w(StateProblem::LockReplaced),
            "locking /s/state-id: the file was removed or replaced again and again while it was \
             taken"
        );
        assert_eq!(w(StateProblem::NoFolder), "/s/state-id has no folder");
        assert_eq!(
            w(StateProblem::NoNameLeft {
                name: "a.txt".into()
            }),
            "/s/state-id holds 10,000 files named like \"a.txt\" already"
        );
        assert_eq!(
            w(StateProblem::NotAFolder),
            "/s/state-id is a link or a file, not a folder; it must be a folder of its own: move \
             it away and try again"
        );
        assert_eq!(
            w(StateProblem::NotYours { uid: 7 }),
            "/s/state-id belongs to uid 7, not to you; move it away and try again"
        );
        assert_eq!(
            w(StateProblem::OthersWrite {
                leaf: false,
                mode: 0o40775
            }),
            "/s/state-id is a folder above shrooms-agent's state folder, and others can write to \
             it (mode 0775): they could swap the records, keys and profiles kept there; `chmod \
             go-w /s/state-id`, or use a state folder of your own (SHROOMS_AGENT_STATE_DIR), in \
             folders only you (or root) own and can write"
        );
        assert_eq!(
            w(StateProblem::UntrustedDamaged {
                cause: "EOF while parsing".into()
            }),
            "/s/state-id is damaged (EOF while parsing); it lists the folders sealed sessions \
             worked in, and no cage is made until it reads: put it back as it was, or remove it \
             if no folder a sealed session worked in is left"
        );
        let code = |problem| Error::state(p, problem).kind.exit_code();
        assert_eq!(code(StateProblem::NotYours { uid: 7 }), 2);
        assert_eq!(code(StateProblem::IdDamaged { label: "l" }), 1);
    }
}
