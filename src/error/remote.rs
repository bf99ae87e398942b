//! `--on MACHINE` refused, or the other machine's tool not reached: a
//! command that cannot go there, a machine that is none of `[ssh]`, ssh
//! failing, and another version of the tool there.

use std::path::PathBuf;

use super::{Cause, Kind};

/// What stands in the way of a command on machine `machine`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteProblem {
    /// `cage create --on` without `--dir`.
    CreateWithoutDir,
    /// `cage run --on` without a session's name.
    RunWithoutName,
    /// A command that runs on its own machine only.
    OwnMachineOnly,
    /// A command other than a `cage` command.
    CageOnly,
    /// `--on` could not be told apart from the command's own words.
    NotApart,
    /// No ssh program here.
    NoSsh,
    /// The machine is none of `[ssh]` in `config`, nor a destination
    /// (`why`, as its parse said).
    NotAMachine { config: PathBuf, why: String },
    /// ssh itself failed (exit 255) reaching `destination`.
    SshFailed { destination: String },
    /// The tool (`program`) is not found there; ssh's last line.
    NotFound { program: String, said: String },
    /// The tool there did not say its version: how it ended (`exit`:
    /// its status, none for a signal) and its last line.
    NoVersion { exit: Option<i32>, said: String },
    /// The tool there answered `version --json` with something else.
    VersionUnread { cause: Cause },
    /// The tool there is `version`, of another protocol than this one's
    /// (`ours`).
    OtherProtocol {
        version: String,
        protocol: u32,
        ours: u32,
    },
    /// Its `cage ls` failed, saying this.
    ListingFailed { said: String },
    /// Asking for its listing failed (the thread that asked died).
    ListingLost,
    /// No machine of that name to send to: this one is `here`, and the
    /// config's `[machines]` names `known`.
    NoSuchMachine { here: String, known: Vec<String> },
    /// Its serve took a drop (at `url`) and answered what does not read
    /// as the drop's record (`cause`: as its parse said).
    DropAnswerUnread { url: String, cause: String },
}

/// Pure: how to put this version on machine `machine`.
fn update_hint(machine: &str) -> String {
    format!(
        "install this version ({}) there too: in a checkout of it on {machine}, `cargo install \
         --locked --path .`, or the same Debian package (README, \"Install, update, uninstall\")",
        env!("CARGO_PKG_VERSION")
    )
}

impl RemoteProblem {
    pub(super) fn kind(&self) -> Kind {
        match self {
            RemoteProblem::CreateWithoutDir
            | RemoteProblem::RunWithoutName
            | RemoteProblem::OwnMachineOnly
            | RemoteProblem::CageOnly
            | RemoteProblem::NotApart
            | RemoteProblem::NotAMachine { .. }
            | RemoteProblem::NoSuchMachine { .. } => Kind::BadInput,
            _ => Kind::Failed,
        }
    }

    pub(super) fn words(&self, m: &str) -> String {
        match self {
            RemoteProblem::CreateWithoutDir => format!(
                "cage create --on {m}: give the project folder with --dir, a path on {m} (this \
                 machine's current folder is not there)"
            ),
            RemoteProblem::RunWithoutName => format!(
                "cage run --on {m}: give the session's name (this machine's current folder says \
                 nothing of {m}'s sessions)"
            ),
            RemoteProblem::OwnMachineOnly => format!(
                "--on {m}: this command runs on its own machine only (ssh there and run it)"
            ),
            RemoteProblem::CageOnly => format!(
                "--on {m} runs cage commands only (cage create, run, exec, ls, show, stop, rm, \
                 limits, move, history, ...)"
            ),
            RemoteProblem::NotApart => "--on MACHINE could not be told apart from the command's \
                                        words: put it first (shrooms-agent --on MACHINE cage ...)"
                .to_string(),
            RemoteProblem::NoSsh => "ssh is not installed here, and --on needs it (Debian: apt \
                                     install openssh-client)"
                .to_string(),
            RemoteProblem::DropAnswerUnread { url, cause } => {
                format!("{url} answered the drop with something else ({cause})")
            }
            RemoteProblem::NoSuchMachine { here, known } => format!(
                "there is no machine {m:?}: this one is {here}, and the config's [machines] names \
                 {}; add it there as {m} = \"http://host:port\"",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
            RemoteProblem::NotAMachine { config, why } => format!(
                "--on {m}: not a machine of [ssh] in {}, and {why}",
                config.display()
            ),
            RemoteProblem::NoVersion { .. }
            | RemoteProblem::VersionUnread { .. }
            | RemoteProblem::OtherProtocol { .. } => self.version_words(m),
            RemoteProblem::SshFailed { destination: d } => format!(
                "ssh to {m} ({d}) failed (exit 255, ssh's own failure: its message is above): \
                 check that `ssh -o BatchMode=yes {d} true` logs in without asking anything (a \
                 key in ssh-agent or ~/.ssh, the host key known)"
            ),
            RemoteProblem::NotFound { program, said } => format!(
                "{program} is not found on {m} ({said}): install shrooms-agent there, on the PATH \
                 of a non-interactive ssh login, or name it with program = in [ssh]"
            ),
            RemoteProblem::ListingFailed { said } => format!("its `cage ls` failed: {said}"),
            RemoteProblem::ListingLost => "its listing failed".to_string(),
        }
    }

    /// The words of the tool on the other machine, of another version.
    fn version_words(&self, m: &str) -> String {
        match self {
            RemoteProblem::NoVersion { exit, said } => format!(
                "shrooms-agent on {m} did not say its version ({}, {said}): it is older than this \
                 one or not shrooms-agent; {}",
                exit.map_or("ended by a signal".to_string(), |c| format!("exit {c}")),
                update_hint(m)
            ),
            RemoteProblem::VersionUnread { cause } => format!(
                "shrooms-agent on {m} answered `version --json` with something else ({}); {}",
                cause.said,
                update_hint(m)
            ),
            RemoteProblem::OtherProtocol {
                version,
                protocol,
                ours,
            } => format!(
                "shrooms-agent on {m} is version {version} (protocol {protocol}); this one is {} \
                 (protocol {}): they cannot work together; {}",
                env!("CARGO_PKG_VERSION"),
                ours,
                update_hint(m)
            ),
            // Worded by `words`.
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each refusal in the words it had when it was made as a sentence
    /// where it was found, and every one worded.
    #[test]
    fn every_remote_refusal_is_worded_as_before() {
        assert_eq!(
            Error::remote(
                "far",
                RemoteProblem::DropAnswerUnread {
                    url: "http://far:1/v1".into(),
                    cause: "expected value".into()
                }
            )
            .message(),
            "http://far:1/v1 answered the drop with something else (expected value)"
        );
        assert_eq!(
            Error::remote(
                "far",
                RemoteProblem::DropAnswerUnread {
                    url: "u".into(),
                    cause: "c".into()
                }
            )
            .kind
            .exit_code(),
            1
        );
        assert_eq!(
            Error::remote(
                "far",
                RemoteProblem::NoSuchMachine {
                    here: "here".into(),
                    known: vec![]
                }
            )
            .message(),
            "there is no machine \"far\": this one is here, and the config's [machines] names \
             none; add it there as far = \"http://host:port\""
        );
        let w = |p| Error::remote("beta", p).message();
        assert_eq!(
            w(RemoteProblem::SshFailed {
                destination: "u@b".into()
            }),
            "ssh to beta (u@b) failed (exit 255, ssh's own failure: its message is above): check \
             that `ssh -o BatchMode=yes u@b true` logs in without asking anything (a key in \
             ssh-agent or ~/.ssh, the host key known)"
        );
        assert_eq!(
            w(RemoteProblem::OwnMachineOnly),
            "--on beta: this command runs on its own machine only (ssh there and run it)"
        );
        assert!(
            w(RemoteProblem::NoVersion {
                exit: None,
                said: "x".into()
            })
            .starts_with("shrooms-agent on beta did not say its version (ended by a signal, x): ")
        );
        let every = [
            RemoteProblem::CreateWithoutDir,
            RemoteProblem::RunWithoutName,
            RemoteProblem::CageOnly,
            RemoteProblem::NotApart,
            RemoteProblem::NoSsh,
            RemoteProblem::NotAMachine {
                config: PathBuf::from("/c"),
                why: "no".into(),
            },
            RemoteProblem::NotFound {
                program: "p".into(),
                said: "s".into(),
            },
            RemoteProblem::VersionUnread {
                cause: Cause {
                    io: None,
                    said: "eof".into(),
                },
            },
            RemoteProblem::OtherProtocol {
                version: "0.2".into(),
                protocol: 2,
                ours: 1,
            },
            RemoteProblem::ListingFailed { said: "s".into() },
            RemoteProblem::ListingLost,
        ];
        for p in every {
            let kind = p.kind();
            let e = Error::remote("beta", p.clone());
            assert!(e.message().len() > 15, "{p:?}");
            assert_eq!(e.kind, kind);
        }
        assert_eq!(
            Error::remote("beta", RemoteProblem::NotApart)
                .kind
                .exit_code(),
            2
        );
    }
}
