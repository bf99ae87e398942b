//! A cage's limits refused: nothing asked of `cage limits`, a policy for a
//! sealed cage, a process limit podman cannot change, and a machine where
//! podman would not enforce them.

use super::{Face, Kind};

/// What is wrong with the limits asked for, or with the machine for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitsProblem {
    /// `cage limits` given nothing to change.
    NothingAsked,
    /// A policy other than `internet` (`net`) for sealed session
    /// `session`.
    SealedNet { net: String, session: String },
    /// A process limit changed where podman (`version`) is older than
    /// `since`, which `podman update --pids-limit` needs.
    PidsNeedPodman { since: String, version: String },
    /// `cage limits` where podman does not enforce them (`why`, in
    /// words of the machine).
    NotEnforced { why: String },
    /// A new cage where podman, rootless on cgroups v1, ignores limits.
    RootlessCgroupsV1,
    /// A new cage where these cgroup controllers are not delegated.
    MissingControllers { missing: Vec<String> },
    /// A dollar budget for a session whose model requests go upstream on
    /// a subscription sign-in (`what`), which has no price per token.
    UsdOnSubscription { session: String, what: String },
}

impl LimitsProblem {
    /// The field of the request it is about.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            LimitsProblem::SealedNet { .. } => Some("net"),
            LimitsProblem::PidsNeedPodman { .. } => Some("pids"),
            LimitsProblem::UsdOnSubscription { .. } => Some("usd"),
            _ => None,
        }
    }

    pub(super) fn kind(&self) -> Kind {
        match self {
            LimitsProblem::NothingAsked
            | LimitsProblem::SealedNet { .. }
            | LimitsProblem::PidsNeedPodman { .. }
            | LimitsProblem::UsdOnSubscription { .. } => Kind::BadInput,
            LimitsProblem::NotEnforced { .. }
            | LimitsProblem::RootlessCgroupsV1
            | LimitsProblem::MissingControllers { .. } => Kind::Failed,
        }
    }

    pub(super) fn words(&self, f: Face) -> String {
        match self {
            LimitsProblem::NothingAsked => match f {
                Face::Terminal => "say what to change: --memory, --cpus, --pids, --tokens, --usd, \
                                   --net, \
                                   or --reset for the machine's limits"
                    .to_string(),
                Face::Http => "say what to change: \"memory\", \"cpus\", \"pids\", \"tokens\", \
                               \"usd\" or \
                               \"net\""
                    .to_string(),
            },
            LimitsProblem::UsdOnSubscription { session, what } => format!(
                "{}: session {session}'s model requests go upstream on {what}, a subscription \
                 sign-in, which has no price per token, so a dollar budget cannot be kept; give \
                 the gateway an API key ([gateway] key_file, key_command or ANTHROPIC_API_KEY; \
                 for Codex, openai_key_file, openai_key_command or OPENAI_API_KEY), or set a \
                 token budget ({}) instead",
                f.field("usd"),
                f.field("tokens")
            ),
            LimitsProblem::SealedNet { net, session } => format!(
                "{} {net}: session {session} is sealed, and a sealed cage has its own rules (the \
                 internet and nothing local); leave out {}",
                f.field("net"),
                f.field("net")
            ),
            LimitsProblem::PidsNeedPodman { since, version } => format!(
                "changing a cage's process limit needs podman {since} or later (`podman update \
                 --pids-limit`); this machine has podman {version}: change {} and {} only, or \
                 move the session into a new cage",
                f.field("memory"),
                f.field("cpus")
            ),
            LimitsProblem::NotEnforced { why } => format!(
                "cage limits changes nothing on this machine: {why}, so this session's cage runs \
                 without limits (unenforced_limits = \"warn\"); nothing was changed. Use a \
                 machine with cgroups v2 and the memory, cpu and pids controllers delegated to \
                 your user for limits"
            ),
            LimitsProblem::RootlessCgroupsV1 => "podman cannot enforce a cage's limits here: it \
                                                 is rootless on cgroups v1, where \"Resource \
                                                 limits are not supported and ignored\"; use a \
                                                 machine with cgroups v2, or set \
                                                 unenforced_limits = \"warn\" in the config to \
                                                 make cages without limits"
                .to_string(),
            LimitsProblem::MissingControllers { missing } => format!(
                "podman cannot apply a cage's limits: the cgroup controllers {} are not \
                 delegated to your user (see the README, \"Requirements\")",
                missing.join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each refusal in the words it had when it was made as a sentence
    /// where it was found, with its kind and field.
    #[test]
    fn every_limits_refusal_is_worded_as_before() {
        let e = Error::limits(LimitsProblem::PidsNeedPodman {
            since: "4.4.0".into(),
            version: "4.3.1".into(),
        });
        assert_eq!(
            e.message(),
            "changing a cage's process limit needs podman 4.4.0 or later (`podman update \
             --pids-limit`); this machine has podman 4.3.1: change --memory and --cpus only, or \
             move the session into a new cage"
        );
        assert_eq!((e.field(), e.kind.exit_code()), (Some("pids"), 2));
        let e = Error::limits(LimitsProblem::RootlessCgroupsV1);
        assert_eq!(
            e.message(),
            "podman cannot enforce a cage's limits here: it is rootless on cgroups v1, where \
             \"Resource limits are not supported and ignored\"; use a machine with cgroups v2, \
             or set unenforced_limits = \"warn\" in the config to make cages without limits"
        );
        assert_eq!((e.field(), e.kind.exit_code()), (None, 1));
        let e = Error::limits(LimitsProblem::NothingAsked);
        assert_eq!(
            e.words(Face::Http),
            "say what to change: \"memory\", \"cpus\", \"pids\", \"tokens\", \"usd\" or \"net\""
        );
        let e = Error::limits(LimitsProblem::UsdOnSubscription {
            session: "web".into(),
            what: "CLAUDE_CODE_OAUTH_TOKEN, a Claude login".into(),
        });
        assert_eq!(
            e.message(),
            "--usd: session web's model requests go upstream on CLAUDE_CODE_OAUTH_TOKEN, a \
             Claude login, a subscription sign-in, which has no price per token, so a dollar \
             budget cannot be kept; give the gateway an API key ([gateway] key_file, key_command \
             or ANTHROPIC_API_KEY; for Codex, openai_key_file, openai_key_command or \
             OPENAI_API_KEY), or set a token budget (--tokens) instead"
        );
        assert_eq!((e.field(), e.kind.exit_code()), (Some("usd"), 2));
        assert_eq!(
            Error::limits(LimitsProblem::MissingControllers {
                missing: vec!["cpu".into(), "pids".into()]
            })
            .message(),
            "podman cannot apply a cage's limits: the cgroup controllers cpu, pids are not \
             delegated to your user (see the README, \"Requirements\")"
        );
    }
}
