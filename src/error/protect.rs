//! A cage refused over the project's protected paths (docs/security.md,
//! "Protected paths"): a `.git` file naming a repository inside the
//! project, `--writable` naming no protected path, and a protected path
//! that is no real file or folder.

use std::path::PathBuf;

use super::Face;

/// What is wrong with the project's protected paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtectProblem {
    /// The project's `.git` is a file naming `gitdir`, inside it.
    GitFileInside { dir: PathBuf, gitdir: PathBuf },
    /// `--writable asked` names none of the project's protected paths
    /// (`known`).
    NotProtected { asked: String, known: Vec<String> },
    /// The protected path `rel` of project `dir` is what `is` says (a
    /// link, or on the way past one), not a real file or folder.
    NotReal {
        dir: PathBuf,
        rel: PathBuf,
        is: String,
    },
}

impl ProtectProblem {
    pub(super) fn words(&self, f: Face) -> String {
        match self {
            ProtectProblem::GitFileInside { dir, gitdir } => format!(
                "{}/.git is a file that names the repository {}, inside the project; \
                 shrooms-agent protects the hooks and config of a `.git` folder only: give the \
                 cage the repository's own folder, or pass {} .git (dangerous: git on the \
                 machine runs the hooks a cage leaves there)",
                dir.display(),
                gitdir.display(),
                f.machine_option("--writable")
            ),
            ProtectProblem::NotProtected { asked, known } => format!(
                "--writable {asked}: not a protected path of this project; it takes one of {}",
                known.join(", ")
            ),
            ProtectProblem::NotReal { dir, rel, is } => format!(
                "{} is {is}; a cage gets it read-only, and shrooms-agent mounts only a real file \
                 or folder there, never where a link leads: replace it with what it holds, or \
                 pass {} {} to leave it writable (dangerous: the machine runs what a cage leaves \
                 there)",
                dir.join(rel).display(),
                f.machine_option("--writable"),
                rel.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each refusal in the words it had when it was made as a sentence
    /// where it was found.
    #[test]
    fn every_protected_path_refusal_is_worded_as_before() {
        let e = Error::protect(ProtectProblem::NotReal {
            dir: PathBuf::from("/p"),
            rel: PathBuf::from(".envrc"),
            is: "a link".into(),
        });
        assert_eq!(
            e.message(),
            "/p/.envrc is a link; a cage gets it read-only, and shrooms-agent mounts only a real \
             file or folder there, never where a link leads: replace it with what it holds, or \
             pass --writable .envrc to leave it writable (dangerous: the machine runs what a \
             cage leaves there)"
        );
        assert_eq!(e.kind.exit_code(), 2);
        assert!(
            Error::protect(ProtectProblem::GitFileInside {
                dir: PathBuf::from("/p"),
                gitdir: PathBuf::from("/p/r")
            })
            .words(Face::Http)
            .contains("or pass `--writable` (on the command line, at the machine) .git")
        );
        assert_eq!(
            Error::protect(ProtectProblem::NotProtected {
                asked: "x".into(),
                known: vec![".git".into(), ".envrc".into()]
            })
            .message(),
            "--writable x: not a protected path of this project; it takes one of .git, .envrc"
        );
    }
}
