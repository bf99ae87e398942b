//! What was being done when an act failed ([`super::What::Act`]): the
//! act and what it was done to, kept as data until a face words it.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// An act that failed, and its subject: a path, an address, a name. The
/// words (`reading /etc/x`) are made only when the error is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Doing {
    /// An act with no subject to name, said as it is
    /// (`"starting serve's threads"`).
    Fixed(&'static str),
    /// A path alone: what the act was done to says it all (a file that
    /// does not read, within a step that names the act).
    At(PathBuf),
    Read(PathBuf),
    Write(PathBuf),
    Open(PathBuf),
    /// The outbox folder of a sealed cage.
    OpenOutbox(PathBuf),
    /// A path inside the outbox, as the outbox names it.
    OpenInOutbox(PathBuf),
    /// A folder opened so that a link in its place is refused.
    OpenFolder(PathBuf),
    LookAt(PathBuf),
    Make(PathBuf),
    MakeLink(PathBuf),
    /// A staging file made in this folder.
    MakeStagingIn(PathBuf),
    /// An empty protected path, made so that the cage cannot make it.
    MakeProtected(PathBuf),
    Remove(PathBuf),
    Lock(PathBuf),
    /// A file given its name, once it is whole.
    Name(PathBuf),
    SetModeOf(PathBuf),
    CopyTo(PathBuf),
    /// A received file given to the cage's user.
    GiveToCage(PathBuf),
    /// The folder a cage's init is put in.
    PutInitIn(PathBuf),
    /// The folder the program its cages run is put in.
    PutProgramIn(PathBuf),
    /// An act on the copy of shrooms-agent the cages run.
    InTools(Box<Doing>),
    /// rename(2), and which way (`to`, `back to`).
    Rename {
        from: PathBuf,
        way: &'static str,
        to: PathBuf,
    },
    /// A Unix socket listened on.
    ListenOn(PathBuf),
    /// An address listened on.
    ListenAt(SocketAddr),
    /// Another machine's serve, at this address.
    SendTo(String),
    /// A pack of a session's git that does not read.
    PackUnread(PathBuf),
    /// The lock of an image build, held by a file that is not ours.
    BuildLockNotOurs(PathBuf),
    /// A session's history with a line that does not read.
    HistoryDamaged(PathBuf),
    /// A session's lock that this process was to hold, and does not.
    LockNotHeld {
        session: String,
    },
    /// The allow-list's names written into a container's hosts file.
    PinHosts {
        container: String,
        file: PathBuf,
    },
    /// The socket back to the machine a turn came from.
    LineBack(PathBuf),
    /// A Containerfile given for a build.
    Containerfile(PathBuf),
    /// The program a harness runs.
    HarnessProgram(PathBuf),
    /// The machine's sealed token.
    SealedToken(PathBuf),
    /// A signal serve stops on.
    HandleSignal(i32),
    /// A signal a turn passes on.
    CatchSignal(i32),
    /// The NFLOG group the egress gate logs to.
    BindNflogGroup(u16),
    /// Something started by its name (a server's thread).
    Start(String),
    /// A program started.
    StartProgram(PathBuf),
    /// The socket a cage reaches its turn by.
    ServeCageSocket(PathBuf),
    /// The socket a `--github` cage's gh reaches GitHub's API by.
    ServeGitHubSocket(PathBuf),
    /// A program that did not start.
    CouldNotStart(PathBuf),
    /// A program's run, by its label (`podman start`).
    Run(String),
    /// The seccomp profile of a cage, which does not read.
    SeccompProfile(PathBuf),
    /// A session's network rules looked at beside its turn.
    RulesUnchecked {
        session: String,
    },
    /// The token file of another machine.
    TokenFileOf {
        machine: String,
    },
    /// A cage's egress log, kept as its cage goes.
    EgressLogNotKept {
        container: String,
    },
    /// A started cage's limits set again; it was stopped again.
    LimitsAgain {
        container: String,
    },
    /// A started cage's network rules set; it was stopped again.
    RulesThenStopped {
        container: String,
    },
    /// A running cage's new network rules set (`cage limits --net`), and
    /// whether the cage could then be stopped.
    NewRules {
        container: String,
        stopped: bool,
    },
    /// A command on another machine, by its name.
    OnMachine(String),
    /// An act within a larger one (`egress-listen: reading ...`).
    Within {
        outer: Box<Doing>,
        inner: Box<Doing>,
    },
}

impl Doing {
    /// `inner`, done as part of `outer`.
    pub fn within(outer: impl Into<Doing>, inner: impl Into<Doing>) -> Doing {
        Doing::Within {
            outer: Box::new(outer.into()),
            inner: Box::new(inner.into()),
        }
    }

    /// The words around a path, for the acts whose subject is one path:
    /// before it and after it.
    fn around_path(&self) -> Option<(&'static str, &Path, &'static str)> {
        let (before, p, after) = match self {
            Doing::At(p) => ("", p, ""),
            Doing::Read(p) => ("reading ", p, ""),
            Doing::Write(p) => ("writing ", p, ""),
            Doing::Open(p) => ("opening ", p, ""),
            Doing::OpenOutbox(p) => ("opening the outbox ", p, ""),
            Doing::OpenInOutbox(p) => ("opening ", p, " in the outbox"),
            Doing::OpenFolder(p) => ("opening ", p, " (a folder, no link)"),
            Doing::LookAt(p) => ("looking at ", p, ""),
            Doing::Make(p) => ("making ", p, ""),
            Doing::MakeLink(p) => ("making the link ", p, ""),
            Doing::MakeStagingIn(p) => ("making a staging file in ", p, ""),
            Doing::MakeProtected(p) => (
                "making ",
                p,
                " (a protected path, empty, so that the cage cannot make it)",
            ),
            Doing::Remove(p) => ("removing ", p, ""),
            Doing::Lock(p) => ("locking ", p, ""),
            Doing::Name(p) => ("naming ", p, ""),
            Doing::SetModeOf(p) => ("setting the mode of ", p, ""),
            Doing::CopyTo(p) => ("copying to ", p, ""),
            Doing::GiveToCage(p) => ("giving ", p, " to the cage"),
            Doing::PutInitIn(p) => ("putting a cage's init in ", p, ""),
            Doing::PutProgramIn(p) => ("putting the program in ", p, ""),
            Doing::ListenOn(p) => ("listening on ", p, ""),
            Doing::PackUnread(p) => ("the session's pack ", p, " does not read"),
            Doing::BuildLockNotOurs(p) => ("the build lock ", p, " is not ours"),
            Doing::HistoryDamaged(p) => ("the history ", p, " is damaged"),
            Doing::LineBack(p) => ("the line to the machine this turn came from (", p, ")"),
            Doing::Containerfile(p) => ("the Containerfile ", p, ""),
            Doing::HarnessProgram(p) => ("the harness program ", p, ""),
            Doing::SealedToken(p) => ("the sealed token ", p, ""),
            Doing::StartProgram(p) => ("starting ", p, ""),
            Doing::ServeCageSocket(p) => ("serving the cage's socket at ", p, ""),
            Doing::ServeGitHubSocket(p) => ("serving the cage's GitHub socket at ", p, ""),
            Doing::CouldNotStart(p) => ("could not start ", p, ""),
            Doing::SeccompProfile(p) => ("the seccomp profile ", p, ""),
            // Listed, not left to a wildcard, so that a new act is put on
            // one side or the other.
            Doing::Fixed(_)
            | Doing::InTools(_)
            | Doing::Rename { .. }
            | Doing::ListenAt(_)
            | Doing::SendTo(_)
            | Doing::LockNotHeld { .. }
            | Doing::PinHosts { .. }
            | Doing::HandleSignal(_)
            | Doing::CatchSignal(_)
            | Doing::BindNflogGroup(_)
            | Doing::Start(_)
            | Doing::Run(_)
            | Doing::RulesUnchecked { .. }
            | Doing::TokenFileOf { .. }
            | Doing::EgressLogNotKept { .. }
            | Doing::LimitsAgain { .. }
            | Doing::RulesThenStopped { .. }
            | Doing::NewRules { .. }
            | Doing::OnMachine(_)
            | Doing::Within { .. } => return None,
        };
        Some((before, p, after))
    }
}

impl fmt::Display for Doing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((before, p, after)) = self.around_path() {
            return write!(f, "{before}{}{after}", p.display());
        }
        match self {
            Doing::Fixed(s) => f.write_str(s),
            Doing::InTools(d) => write!(f, "{d} (the copy of shrooms-agent its cages run)"),
            Doing::Rename { from, way, to } => {
                write!(f, "renaming {} {way} {}", from.display(), to.display())
            }
            Doing::ListenAt(addr) => write!(f, "listening on {addr}"),
            Doing::SendTo(url) => write!(f, "sending to {url}"),
            Doing::LockNotHeld { session } => write!(
                f,
                "the lock of session {session} was not held for this process"
            ),
            Doing::PinHosts { container, file } => write!(
                f,
                "pinning the allow-list's names in {container}'s hosts file {}",
                file.display()
            ),
            Doing::HandleSignal(n) => write!(f, "handling signal {n}"),
            Doing::CatchSignal(n) => write!(f, "catching signal {n}"),
            Doing::BindNflogGroup(n) => write!(f, "binding NFLOG group {n}"),
            Doing::Start(name) => write!(f, "starting {name}"),
            Doing::Run(label) => f.write_str(label),
            Doing::Within { outer, inner } => write!(f, "{outer}: {inner}"),
            Doing::OnMachine(name) => write!(f, "on {name}"),
            // The acts on a cage; the acts with one path are worded above
            // (`around_path` names every act).
            _ => self.of_a_cage(f),
        }
    }
}

impl Doing {
    /// The words of the acts on a cage that failed, said with what became
    /// of it.
    fn of_a_cage(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Doing::RulesUnchecked { session } => write!(
                f,
                "session {session}: the cage's network rules could not be checked, so nothing \
                 was run beside its turn (the cage was left as it is)"
            ),
            Doing::TokenFileOf { machine } => write!(f, "the token file of machine {machine}"),
            Doing::EgressLogNotKept { container } => {
                write!(f, "the egress log of {container} could not be kept")
            }
            Doing::LimitsAgain { container } => write!(
                f,
                "setting the session's limits again in {container} failed, so it was stopped \
                 again"
            ),
            Doing::RulesThenStopped { container } => write!(
                f,
                "setting the network rules in {container} failed, so it was stopped again"
            ),
            Doing::NewRules { container, stopped } => write!(
                f,
                "setting the new network rules in {container} failed, so {}; the session keeps \
                 its policy as it was",
                if *stopped {
                    "it was stopped"
                } else {
                    "stopping it was tried, and failed too"
                }
            ),
            // The other acts, worded by `fmt` and `around_path`: a golden
            // test gives each act's words.
            _ => Ok(()),
        }
    }
}

/// What followed an error, said after it (`...; the cage was stopped
/// again`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    /// A fixed sentence.
    Fixed(&'static str),
    /// CNI still holds a container's address (`addr`) from its last run
    /// (a lease under `leases`): it could not be given back (`cause`), or
    /// it was and podman refused the start again (None).
    CniLease {
        container: String,
        addr: std::net::IpAddr,
        leases: PathBuf,
        cause: Option<super::Cause>,
    },
}

impl From<&'static str> for After {
    fn from(s: &'static str) -> Self {
        After::Fixed(s)
    }
}

impl fmt::Display for After {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            After::Fixed(s) => f.write_str(s),
            After::CniLease {
                container,
                addr,
                leases,
                cause,
            } => {
                match cause {
                    Some(cause) => write!(
                        f,
                        "CNI still holds {container}'s address {addr} from its last run, and \
                         the lease could not be given back: {}",
                        cause.said
                    )?,
                    None => write!(
                        f,
                        "CNI held {container}'s address {addr} from its last run; its lease was \
                         given back, and podman refused the start again"
                    )?,
                }
                write!(
                    f,
                    "; if it goes on, remove the lease as root (the file {addr} in a network's \
                     folder under {}) or give podman the netavark network backend \
                     (`network_backend = \"netavark\"` in containers.conf, which needs `podman \
                     system reset`)",
                    leases.display()
                )
            }
        }
    }
}

/// A fixed phrase, as the sites that have no subject say it.
impl From<&'static str> for Doing {
    fn from(s: &'static str) -> Self {
        Doing::Fixed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of every act, as the errors gave them when they were
    /// made as sentences: the same verb, path and spacing.
    #[test]
    fn each_act_has_its_words() {
        let p = || PathBuf::from("/s/my web/x");
        let cases: Vec<(Doing, &str)> = vec![
            (
                "starting serve's threads".into(),
                "starting serve's threads",
            ),
            (Doing::At(p()), "/s/my web/x"),
            (Doing::Read(p()), "reading /s/my web/x"),
            (Doing::Write(p()), "writing /s/my web/x"),
            (Doing::Open(p()), "opening /s/my web/x"),
            (Doing::OpenOutbox(p()), "opening the outbox /s/my web/x"),
            (
                Doing::OpenInOutbox("a/b".into()),
                "opening a/b in the outbox",
            ),
            (
                Doing::OpenFolder(p()),
                "opening /s/my web/x (a folder, no link)",
            ),
            (Doing::LookAt(p()), "looking at /s/my web/x"),
            (Doing::Make(p()), "making /s/my web/x"),
            (Doing::MakeLink(p()), "making the link /s/my web/x"),
            (
                Doing::MakeStagingIn(p()),
                "making a staging file in /s/my web/x",
            ),
            (
                Doing::MakeProtected(p()),
                "making /s/my web/x (a protected path, empty, so that the cage cannot make it)",
            ),
            (Doing::Remove(p()), "removing /s/my web/x"),
            (Doing::Lock(p()), "locking /s/my web/x"),
            (Doing::Name(p()), "naming /s/my web/x"),
            (Doing::SetModeOf(p()), "setting the mode of /s/my web/x"),
            (Doing::CopyTo(p()), "copying to /s/my web/x"),
            (Doing::GiveToCage(p()), "giving /s/my web/x to the cage"),
            (
                Doing::PutInitIn(p()),
                "putting a cage's init in /s/my web/x",
            ),
            (
                Doing::PutProgramIn(p()),
                "putting the program in /s/my web/x",
            ),
            (
                Doing::InTools(Box::new(Doing::Make(p()))),
                "making /s/my web/x (the copy of shrooms-agent its cages run)",
            ),
            (
                Doing::Rename {
                    from: "/a".into(),
                    way: "back to",
                    to: "/b".into(),
                },
                "renaming /a back to /b",
            ),
            (Doing::ListenOn(p()), "listening on /s/my web/x"),
            (
                Doing::ListenAt("127.0.0.1:7387".parse().unwrap()),
                "listening on 127.0.0.1:7387",
            ),
            (
                Doing::SendTo("http://b:7387".into()),
                "sending to http://b:7387",
            ),
            (
                Doing::PackUnread(p()),
                "the session's pack /s/my web/x does not read",
            ),
            (
                Doing::BuildLockNotOurs(p()),
                "the build lock /s/my web/x is not ours",
            ),
            (
                Doing::HistoryDamaged(p()),
                "the history /s/my web/x is damaged",
            ),
            (
                Doing::LockNotHeld {
                    session: "web".into(),
                },
                "the lock of session web was not held for this process",
            ),
            (
                Doing::PinHosts {
                    container: "c1".into(),
                    file: p(),
                },
                "pinning the allow-list's names in c1's hosts file /s/my web/x",
            ),
            (
                Doing::LineBack(p()),
                "the line to the machine this turn came from (/s/my web/x)",
            ),
            (Doing::Containerfile(p()), "the Containerfile /s/my web/x"),
            (
                Doing::HarnessProgram(p()),
                "the harness program /s/my web/x",
            ),
            (Doing::SealedToken(p()), "the sealed token /s/my web/x"),
            (Doing::HandleSignal(15), "handling signal 15"),
            (Doing::CatchSignal(1), "catching signal 1"),
            (Doing::BindNflogGroup(7), "binding NFLOG group 7"),
            (
                Doing::Start("the model gateway".into()),
                "starting the model gateway",
            ),
            (Doing::StartProgram(p()), "starting /s/my web/x"),
            (
                Doing::ServeCageSocket(p()),
                "serving the cage's socket at /s/my web/x",
            ),
            (
                Doing::ServeGitHubSocket(p()),
                "serving the cage's GitHub socket at /s/my web/x",
            ),
            (Doing::CouldNotStart(p()), "could not start /s/my web/x"),
            (Doing::Run("podman start".into()), "podman start"),
            (
                Doing::within("egress-listen", Doing::At(p())),
                "egress-listen: /s/my web/x",
            ),
            (
                Doing::within(Doing::Run("podman start".into()), "reading its output"),
                "podman start: reading its output",
            ),
            (
                Doing::SeccompProfile(p()),
                "the seccomp profile /s/my web/x",
            ),
            (
                Doing::RulesUnchecked {
                    session: "web".into(),
                },
                "session web: the cage's network rules could not be checked, so nothing was run \
                 beside its turn (the cage was left as it is)",
            ),
            (
                Doing::TokenFileOf {
                    machine: "laptop".into(),
                },
                "the token file of machine laptop",
            ),
            (
                Doing::EgressLogNotKept {
                    container: "shrooms-web-1".into(),
                },
                "the egress log of shrooms-web-1 could not be kept",
            ),
            (
                Doing::LimitsAgain {
                    container: "c".into(),
                },
                "setting the session's limits again in c failed, so it was stopped again",
            ),
            (
                Doing::RulesThenStopped {
                    container: "c".into(),
                },
                "setting the network rules in c failed, so it was stopped again",
            ),
            (
                Doing::NewRules {
                    container: "c".into(),
                    stopped: true,
                },
                "setting the new network rules in c failed, so it was stopped; the session keeps \
                 its policy as it was",
            ),
            (
                Doing::NewRules {
                    container: "c".into(),
                    stopped: false,
                },
                "setting the new network rules in c failed, so stopping it was tried, and failed \
                 too; the session keeps its policy as it was",
            ),
            (Doing::OnMachine("laptop".into()), "on laptop"),
        ];
        for (doing, words) in cases {
            assert_eq!(doing.to_string(), words, "{doing:?}");
        }
    }

    /// What followed an error, in the words it had as a sentence.
    #[test]
    fn what_followed_has_its_words() {
        let lease = |cause| After::CniLease {
            container: "c".into(),
            addr: "10.88.0.5".parse().unwrap(),
            leases: "/var/lib/cni/networks".into(),
            cause,
        };
        let way = "; if it goes on, remove the lease as root (the file 10.88.0.5 in a network's \
                   folder under /var/lib/cni/networks) or give podman the netavark network \
                   backend (`network_backend = \"netavark\"` in containers.conf, which needs \
                   `podman system reset`)";
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(
            lease(Some(super::super::Cause::of(&denied))).to_string(),
            format!(
                "CNI still holds c's address 10.88.0.5 from its last run, and the lease could \
                 not be given back: permission denied{way}"
            )
        );
        assert_eq!(
            lease(None).to_string(),
            format!(
                "CNI held c's address 10.88.0.5 from its last run; its lease was given back, and \
                 podman refused the start again{way}"
            )
        );
        assert_eq!(
            After::from("the cage was stopped again").to_string(),
            "the cage was stopped again"
        );
    }

    /// A path that is not UTF-8 is shown as `Path::display` shows it, as
    /// the sentences did.
    #[test]
    fn a_path_is_displayed() {
        use std::os::unix::ffi::OsStrExt;
        let p = PathBuf::from(std::ffi::OsStr::from_bytes(b"/s/\xffx"));
        assert_eq!(
            Doing::Read(p.clone()).to_string(),
            format!("reading {}", p.display())
        );
    }
}
