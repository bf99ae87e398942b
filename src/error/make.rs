//! A new cage refused for what this machine, its image, its project's path
//! or its shared volume gives it, and why.

use std::path::PathBuf;

use super::Kind;

/// What stands in the way of a new cage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MakeProblem {
    /// Rootful, and no subordinate ranges for a user namespace of its own
    /// (`userns::auto_refusal`).
    NoAutoRanges(ShortRanges),
    /// podman's configuration opens the host's loopback to a cage
    /// (`loopback::opening`).
    LoopbackOpen(LoopbackOpening),
    /// A pi session's image without pi (`workbench`: our image that has
    /// it; `config`: the config file to name a pi of this machine in).
    NoPi {
        image: String,
        workbench: String,
        config: String,
    },
    /// A mount source whose end was not looked at with the facts: a fault
    /// of the program.
    SourceNotLooked { src: PathBuf },
    /// The shared volume is not one this program made.
    SharedVolume { volume: String, why: VolumeProblem },
    /// The project's path, too long to name its conversation folder.
    ConversationPathLong,
    /// ... too long for Claude Code's conversation folder.
    ClaudePathLong { dir: PathBuf },
    /// No default seccomp profile of podman's (`looked`: where).
    NoSeccompDefault { looked: String },
    /// A seccomp profile without its list of system calls.
    NotSeccomp,
    /// A harness's settings file (`path`) a cage's copy cannot be made
    /// of (`why`, as its reading said).
    CopyUnreadable {
        path: PathBuf,
        why: String,
        copy: CopyOf,
    },
    /// Codex's npm launcher, without the native program it runs beside it.
    NoCodexNative { launcher: PathBuf },
    /// `network = "pasta"` on a machine that has not what it needs.
    NoPasta {
        since: String,
        version: String,
        rootless: bool,
        pasta_installed: bool,
    },
}

/// Which of the machine's files (`/etc/subuid`, `/etc/subgid`) give the
/// user podman takes a rootful cage's ids from no range of `size` ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortRanges {
    pub files: Vec<&'static str>,
    pub user: &'static str,
    pub size: u64,
}

impl std::fmt::Display for ShortRanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ShortRanges { files, user, size } = self;
        write!(
            f,
            "a cage made as root runs in a user namespace of its own, so that root in it is no \
             one on this machine, and podman takes its uids and gids from the subordinate ranges \
             of the user `{user}`; {} {} no such range of at least {size}: add the line \
             `{user}:2147483647:2147483648` to {} (podman-run(1), --userns=auto), then try again",
            files.join(" and "),
            if files.len() == 1 { "has" } else { "have" },
            files.join(" and ")
        )
    }
}

/// The option of podman's configuration (`file`) that opens the host's
/// loopback to every container on pasta (`option`, with its value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopbackOpening {
    pub file: PathBuf,
    pub option: String,
}

impl std::fmt::Display for LoopbackOpening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "podman's configuration {} sets pasta_options {}, which lets every container on \
             pasta reach this machine's loopback (where serve and other local services listen)",
            self.file.display(),
            self.option
        )
    }
}

/// What a cage's copy of a harness's settings file is made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyOf {
    /// Claude Code's settings, without keys that fetch or hold credentials.
    Claude,
    /// pi's models.json, pointed at the model gateway.
    Pi,
    /// Codex CLI's config.toml, without credentials and pointed at the
    /// model gateway.
    Codex,
    /// opencode's opencode.json, the same.
    Opencode,
}

impl CopyOf {
    /// What the copy is made for, as said after "a copy of it".
    fn words(self) -> &'static str {
        match self {
            CopyOf::Claude => "without keys that fetch or hold credentials",
            CopyOf::Pi => "that points pi at the model gateway",
            CopyOf::Codex => "that points Codex at the model gateway, without credentials",
            CopyOf::Opencode => "that points opencode at the model gateway, without credentials",
        }
    }
}

/// Why a volume cannot be the shared folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeProblem {
    Driver { driver: String },
    BindTo { device: String },
    Options { options: String },
    NotOurs { label: &'static str },
}

impl VolumeProblem {
    fn words(&self) -> String {
        match self {
            VolumeProblem::Driver { driver } => {
                format!("its driver is {driver:?}, not podman's local one")
            }
            VolumeProblem::BindTo { device } => {
                format!("it is a bind to {device:?}, a folder of the machine")
            }
            VolumeProblem::Options { options } => format!("it has options {options}"),
            VolumeProblem::NotOurs { label } => {
                format!("shrooms-agent did not make it (it lacks the label {label})")
            }
        }
    }
}

impl MakeProblem {
    pub(super) fn words(&self) -> String {
        match self {
            MakeProblem::NoAutoRanges(why) => why.to_string(),
            MakeProblem::LoopbackOpen(why) => format!(
                "{why}: a cage there could drive any agent on this machine; remove that option, \
                 or set network = \"slirp4netns\" in the config (its cages close the host's \
                 loopback themselves)"
            ),
            MakeProblem::NoPi {
                image,
                workbench,
                config,
            } => format!(
                "the image {image} has no `pi` program on its PATH, and a pi session's cage runs \
                 the image's pi: add pi to the image (`RUN npm install -g \
                 @mariozechner/pi-coding-agent` in its Containerfile, with a Node.js of 20.6 or \
                 newer), name a pi of this machine with `pi = \"/path/to/pi\"` under `[harness]` \
                 in {config}, or use shrooms-agent's workbench image ({workbench}), which has pi"
            ),
            MakeProblem::SourceNotLooked { src } => format!(
                "where {} leads was not looked at before the cage was decided",
                src.display()
            ),
            MakeProblem::SharedVolume { volume, why } => format!(
                "the volume {volume} cannot be the shared folder: {}; it is left as it is: remove \
                 it (podman volume rm {volume}) if it is not needed",
                why.words()
            ),
            MakeProblem::ConversationPathLong => {
                "the project's path is too long to name its conversation folder".to_string()
            }
            MakeProblem::NoSeccompDefault { looked } => format!(
                "podman's default seccomp profile is not on this machine (looked at {looked}); a \
                 sealed cage is derived from it: reinstall podman's containers-common package"
            ),
            MakeProblem::NotSeccomp => {
                "not a seccomp profile: it has no \"syscalls\" list".to_string()
            }
            MakeProblem::CopyUnreadable { path, why, copy } => format!(
                "{}: {why}. A cage gets a copy of it {}, and it cannot be read to make one: fix \
                 it, then try again",
                path.display(),
                copy.words()
            ),
            MakeProblem::NoCodexNative { launcher } => format!(
                "{} is Codex's npm launcher, and the native program it runs \
                 (node_modules/@openai/codex-linux-*/vendor/*/bin/codex) is not beside it: \
                 install Codex again (npm install -g @openai/codex), or name its native program \
                 in the config's [harness] codex",
                launcher.display()
            ),
            MakeProblem::NoPasta {
                since,
                version,
                rootless,
                pasta_installed,
            } => format!(
                "network = \"pasta\" needs rootless podman {since} or later and pasta (the passt \
                 package); this machine has {} podman {version}{}: set network = \"auto\"",
                if *rootless { "rootless" } else { "rootful" },
                if *pasta_installed {
                    ""
                } else {
                    " and no pasta"
                }
            ),
            MakeProblem::ClaudePathLong { dir } => format!(
                "the project folder's path is too long for Claude Code's conversation folder \
                 (over 200 characters once named), whose name cannot be known from outside: use \
                 a shorter path for {}",
                dir.display()
            ),
        }
    }

    pub(super) fn kind(&self) -> Kind {
        match self {
            MakeProblem::LoopbackOpen { .. }
            | MakeProblem::SourceNotLooked { .. }
            | MakeProblem::NoSeccompDefault { .. }
            | MakeProblem::NotSeccomp => Kind::Failed,
            _ => Kind::BadInput,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each refusal in the words and exit code it had when it was made as a
    /// sentence where it was found.
    #[test]
    fn every_make_refusal_is_worded_as_before() {
        let w = |p| Error::make(p).message();
        assert_eq!(
            w(MakeProblem::SharedVolume {
                volume: "v".into(),
                why: VolumeProblem::NotOurs { label: "x.shared" }
            }),
            "the volume v cannot be the shared folder: shrooms-agent did not make it (it lacks \
             the label x.shared); it is left as it is: remove it (podman volume rm v) if it is \
             not needed"
        );
        assert_eq!(
            w(MakeProblem::SharedVolume {
                volume: "v".into(),
                why: VolumeProblem::BindTo {
                    device: "/home".into()
                }
            }),
            "the volume v cannot be the shared folder: it is a bind to \"/home\", a folder of the \
             machine; it is left as it is: remove it (podman volume rm v) if it is not needed"
        );
        assert_eq!(
            w(MakeProblem::NoPi {
                image: "i".into(),
                workbench: "w".into(),
                config: "/c.toml".into()
            }),
            "the image i has no `pi` program on its PATH, and a pi session's cage runs the \
             image's pi: add pi to the image (`RUN npm install -g @mariozechner/pi-coding-agent` \
             in its Containerfile, with a Node.js of 20.6 or newer), name a pi of this machine \
             with `pi = \"/path/to/pi\"` under `[harness]` in /c.toml, or use shrooms-agent's \
             workbench image (w), which has pi"
        );
        assert_eq!(
            w(MakeProblem::LoopbackOpen(opening())),
            "podman's configuration /etc/containers/containers.conf sets pasta_options \
             --map-gw, which lets every container on pasta reach this machine's loopback (where \
             serve and other local services listen): a cage there could drive any agent on this \
             machine; remove that option, or set network = \"slirp4netns\" in the config (its \
             cages close the host's loopback themselves)"
        );
        assert_eq!(
            w(MakeProblem::NoAutoRanges(ShortRanges {
                files: vec!["/etc/subuid"],
                user: "containers",
                size: 65536
            })),
            "a cage made as root runs in a user namespace of its own, so that root in it is no \
             one on this machine, and podman takes its uids and gids from the subordinate ranges \
             of the user `containers`; /etc/subuid has no such range of at least 65536: add the \
             line `containers:2147483647:2147483648` to /etc/subuid (podman-run(1), \
             --userns=auto), then try again"
        );
        assert_eq!(
            w(MakeProblem::CopyUnreadable {
                path: PathBuf::from("/h/.claude/settings.json"),
                why: "not JSON".into(),
                copy: CopyOf::Claude
            }),
            "/h/.claude/settings.json: not JSON. A cage gets a copy of it without keys that \
             fetch or hold credentials, and it cannot be read to make one: fix it, then try again"
        );
        assert_eq!(
            w(MakeProblem::CopyUnreadable {
                path: PathBuf::from("/m.json"),
                why: "x".into(),
                copy: CopyOf::Pi
            }),
            "/m.json: x. A cage gets a copy of it that points pi at the model gateway, and it \
             cannot be read to make one: fix it, then try again"
        );
        assert_eq!(
            w(MakeProblem::NoPasta {
                since: "5.0.0".into(),
                version: "4.3.1".into(),
                rootless: false,
                pasta_installed: false
            }),
            "network = \"pasta\" needs rootless podman 5.0.0 or later and pasta (the passt \
             package); this machine has rootful podman 4.3.1 and no pasta: set network = \"auto\""
        );
        assert_eq!(
            w(MakeProblem::NotSeccomp),
            "not a seccomp profile: it has no \"syscalls\" list"
        );
        assert_eq!(
            w(MakeProblem::ClaudePathLong {
                dir: PathBuf::from("/p")
            }),
            "the project folder's path is too long for Claude Code's conversation folder (over \
             200 characters once named), whose name cannot be known from outside: use a shorter \
             path for /p"
        );
        assert_eq!(
            w(MakeProblem::SharedVolume {
                volume: "v".into(),
                why: VolumeProblem::Driver {
                    driver: "nfs".into()
                }
            }),
            "the volume v cannot be the shared folder: its driver is \"nfs\", not podman's local \
             one; it is left as it is: remove it (podman volume rm v) if it is not needed"
        );
        let code = |p| Error::make(p).kind.exit_code();
        assert_eq!(code(MakeProblem::NotSeccomp), 1);
        assert_eq!(code(MakeProblem::LoopbackOpen(opening())), 1);
        assert_eq!(code(MakeProblem::ConversationPathLong), 2);
        let short = ShortRanges {
            files: vec!["/etc/subuid", "/etc/subgid"],
            user: "containers",
            size: 65536,
        };
        assert_eq!(code(MakeProblem::NoAutoRanges(short)), 2);
    }

    fn opening() -> LoopbackOpening {
        LoopbackOpening {
            file: "/etc/containers/containers.conf".into(),
            option: "--map-gw".into(),
        }
    }
}
