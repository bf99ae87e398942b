//! An outbox pack refused: the folder asked for (`--only`, a body's
//! `"only"`), the archive's file (`-o FILE`), or an outbox whose every
//! file was left out.

use std::path::PathBuf;

use super::{Cause, Face, Kind};

/// What is wrong with a pack of an outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackProblem {
    /// The folder asked for (`only`, as given) refused, and why.
    Only { only: String, why: OnlyRefused },
    /// The archive's file is there and is not a regular file (`what` it
    /// is).
    TargetNotAFile { out: PathBuf, what: &'static str },
    /// The archive's file is there, and `--force` was not given.
    TargetExists { out: PathBuf },
    /// The archive's folder cannot be used.
    TargetFolder {
        dir: PathBuf,
        out: PathBuf,
        cause: Cause,
    },
    /// The archive would be written inside the outbox.
    TargetInOutbox { out: PathBuf, outbox: PathBuf },
    /// The archive's path names no file.
    TargetNoName { out: PathBuf },
    /// Everything in the outbox was left out (`summary`: what, in short).
    AllLeftOut { summary: String },
    /// Nothing in the outbox (`sending`: for a send, where the asker
    /// chose to send it).
    Empty { sending: bool },
    /// The archive is `size` bytes, over the `max` a machine takes.
    OverMachine { size: u64, max: u64 },
}

/// Why the folder asked for is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnlyRefused {
    /// Its path holds a NUL byte.
    NulByte,
    /// It climbs out with `..`.
    Parent,
    /// It is absolute.
    Absolute,
    /// It names the outbox itself.
    NoFolder,
    /// It is deeper than `depth` levels.
    TooDeep { depth: usize },
    /// The name at `rel` is what `is` says (a link, a file, not there).
    At { rel: PathBuf, is: String },
}

impl PackProblem {
    /// The field of the request it is about.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            PackProblem::Only { .. } => Some("only"),
            _ => None,
        }
    }

    pub(super) fn kind(&self) -> Kind {
        match self {
            PackProblem::AllLeftOut { .. } | PackProblem::Empty { sending: false } => Kind::Failed,
            PackProblem::OverMachine { .. } => Kind::TooLarge,
            _ => Kind::BadInput,
        }
    }

    pub(super) fn words(&self, f: Face) -> String {
        match self {
            PackProblem::Only { only, why } => why.words(only, f),
            PackProblem::TargetNotAFile { out, what } => format!(
                "{} is {what}, not a regular file: the archive is written as a new file, or over \
                 a regular file with --force; give another FILE",
                out.display()
            ),
            PackProblem::TargetExists { out } => format!(
                "{} exists; pass --force to replace it, or give another FILE",
                out.display()
            ),
            PackProblem::TargetFolder { dir, out, cause } => format!(
                "the folder {} of {} cannot be used: {}; give a FILE in an existing folder",
                dir.display(),
                out.display(),
                cause.said
            ),
            PackProblem::TargetInOutbox { out, outbox } => format!(
                "{} is inside the outbox being packed ({}): the sealed cage writes there and \
                 could change the archive; give a FILE outside it",
                out.display(),
                outbox.display()
            ),
            PackProblem::TargetNoName { out } => format!("{} is not a file name", out.display()),
            PackProblem::AllLeftOut { summary } => format!(
                "nothing could be packed from its outbox: everything in it was left out: {summary}"
            ),
            PackProblem::Empty { .. } => "nothing in its outbox".to_string(),
            PackProblem::OverMachine { size, max } => format!(
                "the archive is {} MiB, over the {} MiB a machine takes in one file; send a part \
                 of the outbox with {}",
                size.div_ceil(1024 * 1024),
                max / 1024 / 1024,
                match f {
                    Face::Terminal => "--only FOLDER".to_string(),
                    Face::Http => f.field("only"),
                }
            ),
        }
    }
}

impl OnlyRefused {
    fn words(&self, shown: &str, f: Face) -> String {
        let only = f.field("only");
        let why = match self {
            OnlyRefused::NulByte => {
                "a path with a NUL byte names no folder of the outbox".to_string()
            }
            OnlyRefused::Parent => {
                "`..` is not allowed; give a folder inside the outbox, relative to it".to_string()
            }
            OnlyRefused::Absolute => {
                "give a folder of the outbox as a path relative to it, not an absolute path"
                    .to_string()
            }
            OnlyRefused::NoFolder => {
                format!("names no folder of the outbox; leave {only} out to pack all of it")
            }
            OnlyRefused::TooDeep { depth } => format!("deeper than {depth} folder levels"),
            OnlyRefused::At { rel, is } => format!("{} {is}", rel.display()),
        };
        format!("{only} {shown}: {why}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each refusal in the words it had when it was made as a sentence
    /// where it was found, with its field and kind.
    #[test]
    fn every_pack_refusal_is_worded_as_before() {
        let only = |why| {
            Error::pack(PackProblem::Only {
                only: "a/b".into(),
                why,
            })
        };
        let e = only(OnlyRefused::NoFolder);
        assert_eq!(
            e.message(),
            "--only a/b: names no folder of the outbox; leave --only out to pack all of it"
        );
        assert_eq!((e.field(), e.kind.exit_code()), (Some("only"), 2));
        assert_eq!(
            only(OnlyRefused::At {
                rel: PathBuf::from("a"),
                is: "is a link, and links are not followed".into()
            })
            .words(Face::Http),
            "field \"only\" a/b: a is a link, and links are not followed"
        );
        let e = Error::pack(PackProblem::AllLeftOut {
            summary: "x (a link)".into(),
        });
        assert_eq!(
            e.message(),
            "nothing could be packed from its outbox: everything in it was left out: x (a link)"
        );
        assert_eq!((e.field(), e.kind.exit_code()), (None, 1));
        let e = Error::pack(PackProblem::OverMachine {
            size: 3 << 20,
            max: 2 << 20,
        });
        assert_eq!(
            e.message(),
            "the archive is 3 MiB, over the 2 MiB a machine takes in one file; send a part of \
             the outbox with --only FOLDER"
        );
        assert!(e.words(Face::Http).ends_with("with field \"only\""));
        assert_eq!((e.field(), e.kind), (None, Kind::TooLarge));
        let empty = |sending| Error::pack(PackProblem::Empty { sending }).kind;
        assert_eq!((empty(true), empty(false)), (Kind::BadInput, Kind::Failed));
        assert_eq!(
            Error::pack(PackProblem::TargetExists {
                out: PathBuf::from("/o.tgz")
            })
            .message(),
            "/o.tgz exists; pass --force to replace it, or give another FILE"
        );
    }
}
