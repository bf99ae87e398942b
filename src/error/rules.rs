//! A cage's network rules not loaded where its processes run, or its
//! egress log's listener not started beside them, and why. Each a failure
//! (exit 1): the cage is stopped again, never left running without them.

/// What went wrong with the rules of a cage's network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RulesProblem {
    /// The first process ended while the rules were loaded.
    FirstEnded,
    /// The first process is not the machine's init the cage was made with.
    FirstNotInit,
    /// The namespace podman reports is not the first process's.
    NamespaceNotFirst,
    /// stat(1) of the namespace said what cannot be read.
    StatSaid { stdout: String },
    /// The first process, at the PID podman wrote, cannot be held or
    /// looked at.
    First { pid: i64, problem: FirstProblem },
    /// podman named no hosts file, so the allow-list's names cannot be
    /// pinned.
    NoHostsFile,
    /// The egress log's listener listens in another namespace than the
    /// rules went into.
    ListenerElsewhere,
}

/// Why a cage's first process cannot be held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirstProblem {
    NoProcess,
    NotHeld { cause: String },
    MachineNamespace,
    NoNamespace,
}

/// What went wrong with a cage's egress log's listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressProblem {
    /// It did not say it listens in time (`last`: the last line it wrote
    /// to its error log).
    NotStarted { last: Option<String> },
    /// Its start panicked.
    CouldNotStart,
    /// This program's own path, which it runs, is not known.
    NoOwnPath,
    /// The listener itself (its `subcommand`) found no namespace of its
    /// own.
    NoNamespace { subcommand: &'static str },
    /// ... or is not in the cage's (`pid`: its first process).
    NotInCage { subcommand: &'static str, pid: i64 },
}

impl RulesProblem {
    pub(super) fn words(&self, container: &str) -> String {
        let not_loaded = |why: &str| {
            format!(
                "the network rules of {container} were not loaded where its processes run: {why}"
            )
        };
        match self {
            RulesProblem::FirstEnded => format!(
                "the first process of {container} ended while its network rules were loaded"
            ),
            RulesProblem::FirstNotInit => not_loaded(
                "its first process is not the machine's init it was made with (catatonit; \
                 upgraded while the cage ran?)",
            ),
            RulesProblem::NamespaceNotFirst => not_loaded(
                "the network namespace podman reports for it is not the one its first process \
                 is in",
            ),
            RulesProblem::StatSaid { stdout } => {
                format!("stat of {container}'s network namespace: unexpected output {stdout:?}")
            }
            RulesProblem::First { pid, problem } => {
                let why = match problem {
                    FirstProblem::NoProcess => "is no process".to_string(),
                    FirstProblem::NotHeld { cause } => format!("cannot be held: {cause}"),
                    FirstProblem::MachineNamespace => {
                        "runs in the machine's network namespace".to_string()
                    }
                    FirstProblem::NoNamespace => "has no network namespace to look at".to_string(),
                };
                format!("the first process of {container} (PID {pid}, as podman wrote it) {why}")
            }
            RulesProblem::NoHostsFile => format!(
                "podman names no hosts file for {container}, so the names of its allow-list \
                 cannot be pinned"
            ),
            RulesProblem::ListenerElsewhere => format!(
                "the egress log of {container} listens in another network namespace than its \
                 rules went into"
            ),
        }
    }
}

impl EgressProblem {
    pub(super) fn words(&self) -> String {
        match self {
            EgressProblem::NotStarted { last } => format!(
                "the egress log's listener did not start{}",
                last.as_ref().map(|l| format!(": {l}")).unwrap_or_default()
            ),
            EgressProblem::CouldNotStart => {
                "the egress log's listener could not be started".to_string()
            }
            EgressProblem::NoOwnPath => {
                "the egress log needs this program's own path, which is not known".to_string()
            }
            EgressProblem::NoNamespace { subcommand } => {
                format!("{subcommand}: no network namespace")
            }
            EgressProblem::NotInCage { subcommand, pid } => {
                format!("{subcommand}: not in the network namespace of process {pid}")
            }
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
    fn every_rules_problem_is_worded_as_before() {
        assert_eq!(
            Error::rules("c1", RulesProblem::NamespaceNotFirst).message(),
            "the network rules of c1 were not loaded where its processes run: the network \
             namespace podman reports for it is not the one its first process is in"
        );
        assert_eq!(
            Error::rules("c1", RulesProblem::FirstEnded).message(),
            "the first process of c1 ended while its network rules were loaded"
        );
        assert_eq!(
            Error::rules("c1", RulesProblem::NoHostsFile).message(),
            "podman names no hosts file for c1, so the names of its allow-list cannot be pinned"
        );
        assert_eq!(
            Error::rules(
                "c1",
                RulesProblem::First {
                    pid: 3,
                    problem: FirstProblem::MachineNamespace
                }
            )
            .message(),
            "the first process of c1 (PID 3, as podman wrote it) runs in the machine's network \
             namespace"
        );
        let w = |p| Error::rules("c1", p).message();
        assert_eq!(
            w(RulesProblem::FirstNotInit),
            "the network rules of c1 were not loaded where its processes run: its first process \
             is not the machine's init it was made with (catatonit; upgraded while the cage ran?)"
        );
        assert_eq!(
            w(RulesProblem::StatSaid {
                stdout: "x\n".into()
            }),
            "stat of c1's network namespace: unexpected output \"x\\n\""
        );
        assert_eq!(
            w(RulesProblem::First {
                pid: 7,
                problem: FirstProblem::NotHeld {
                    cause: "No such process (os error 3)".into()
                }
            }),
            "the first process of c1 (PID 7, as podman wrote it) cannot be held: No such process \
             (os error 3)"
        );
        assert_eq!(
            w(RulesProblem::ListenerElsewhere),
            "the egress log of c1 listens in another network namespace than its rules went into"
        );
        assert_eq!(
            Error::egress(EgressProblem::NotStarted {
                last: Some("no NFLOG".into())
            })
            .message(),
            "the egress log's listener did not start: no NFLOG"
        );
        assert_eq!(
            Error::egress(EgressProblem::NotInCage {
                subcommand: "egress-listen",
                pid: 9
            })
            .message(),
            "egress-listen: not in the network namespace of process 9"
        );
        assert_eq!(
            Error::rules("c1", RulesProblem::NoHostsFile)
                .kind
                .exit_code(),
            1
        );
        assert_eq!(Error::egress(EgressProblem::NoOwnPath).kind.exit_code(), 1);
    }
}
