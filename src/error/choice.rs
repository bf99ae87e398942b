//! The options of a new cage refused together, or against the machine:
//! what a sealed cage is not given, `meshes` without a shared folder, a
//! login or a nix that is not there. Each is about a field of the request,
//! which each face names its own way.

use std::path::PathBuf;

use super::Face;

/// What is wrong with the options chosen for a cage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChoiceProblem {
    /// A sealed cage given a network policy (`net`) of its own.
    SealedNet { net: String },
    /// A sealed cage given an option that widens a cage (`github`, `nix`,
    /// `shared`).
    SealedWidened { field: &'static str },
    /// A sealed cage for a harness other than Claude Code.
    SealedHarness,
    /// `meshes` without a shared folder (`sealed`: a sealed cage, which
    /// has none).
    MeshesAlone { sealed: bool },
    /// `nix` on a machine with no nix store at `store`.
    NoNix { store: PathBuf },
    /// A body's `conversation` for a cage that is not sealed (said as
    /// before, of no field).
    ConversationUnsealed,
}

impl ChoiceProblem {
    /// The field of the request it is about.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            ChoiceProblem::SealedNet { .. } => Some("net"),
            ChoiceProblem::SealedWidened { field } => Some(field),
            ChoiceProblem::SealedHarness => None,
            ChoiceProblem::MeshesAlone { .. } => Some("meshes"),
            ChoiceProblem::NoNix { .. } => Some("nix"),
            ChoiceProblem::ConversationUnsealed => None,
        }
    }

    pub(super) fn words(&self, f: Face) -> String {
        match self {
            ChoiceProblem::ConversationUnsealed => {
                "field \"conversation\" is for a sealed cage: add \"sealed\": true".to_string()
            }
            ChoiceProblem::SealedNet { net } => format!(
                "{} {net}: a sealed cage has its own rules (the internet and nothing local, DNS \
                 to its resolvers only); leave out {} or {}",
                f.field("net"),
                f.field("net"),
                f.field("sealed")
            ),
            ChoiceProblem::SealedWidened { field } => format!(
                "{} widens a cage, and a sealed cage is not widened: leave out {} or {}",
                f.field(field),
                f.field(field),
                f.field("sealed")
            ),
            ChoiceProblem::SealedHarness => "a sealed cage runs Claude Code only: pi would need \
                                             your model keys, and a sealed cage gets none of them"
                .to_string(),
            ChoiceProblem::MeshesAlone { sealed: true } => {
                let mesh = f.field("meshes");
                format!(
                    "{mesh} only chooses the shared folder's set of meshes, and a sealed cage has \
                     no shared folder: leave out {mesh}"
                )
            }
            ChoiceProblem::MeshesAlone { sealed: false } => {
                let (mesh, shared) = (f.field("meshes"), f.field("shared"));
                format!(
                    "{mesh} only chooses the shared folder's set of meshes, and does nothing \
                     without {shared}: add {shared}, or leave out {mesh}"
                )
            }
            ChoiceProblem::NoNix { store } => format!(
                "{} gives a cage this machine's nix, and it has none: {} is not there",
                f.field("nix"),
                store.display()
            ),
        }
    }
}

/// What is wrong with the conversation a sealed cage was given
/// (`--conversation ID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConversationProblem {
    /// The id is no conversation id.
    NotAnId,
    /// The project has no conversation of that id: its transcript is not
    /// there.
    Missing { transcript: PathBuf },
    /// Its transcript is not a regular file (a link).
    NotAFile { transcript: PathBuf },
}

impl ConversationProblem {
    pub(super) fn words(&self, id: &str) -> String {
        match self {
            ConversationProblem::NotAnId => {
                format!("{id:?} is not a conversation id (letters, digits, - and _)")
            }
            ConversationProblem::Missing { transcript } => format!(
                "there is no conversation {id:?} of this project: {} is missing",
                transcript.display()
            ),
            ConversationProblem::NotAFile { transcript } => format!(
                "{} is not a regular file, so it is not copied",
                transcript.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each refusal in the words it had when it was made as a sentence
    /// where it was found, its field named by each face, and the field it
    /// is about kept as data where it was.
    #[test]
    fn every_choice_refusal_is_worded_as_before() {
        let e = Error::choice(ChoiceProblem::SealedWidened { field: "nix" });
        assert_eq!(
            e.message(),
            "--nix widens a cage, and a sealed cage is not widened: leave out --nix or --sealed"
        );
        assert_eq!(
            e.words(Face::Http),
            "field \"nix\" widens a cage, and a sealed cage is not widened: leave out field \"nix\" \
             or field \"sealed\""
        );
        assert_eq!(e.field(), Some("nix"));
        let e = Error::choice(ChoiceProblem::MeshesAlone { sealed: false });
        assert_eq!(
            e.message(),
            "--mesh only chooses the shared folder's set of meshes, and does nothing without \
             --shared: add --shared, or leave out --mesh"
        );
        assert_eq!(e.field(), Some("meshes"));
        let e = Error::choice(ChoiceProblem::SealedHarness);
        assert_eq!(e.field(), None);
        assert_eq!(e.kind.exit_code(), 2);
        let e = Error::conversation(
            "abc",
            ConversationProblem::Missing {
                transcript: PathBuf::from("/c/abc.jsonl"),
            },
        );
        assert_eq!(
            e.message(),
            "there is no conversation \"abc\" of this project: /c/abc.jsonl is missing"
        );
        assert_eq!(e.field(), None);
    }
}
