//! What an operation did with less than was asked, or left for later,
//! without failing: a cage made without something, a file not removed, a
//! turn's cage stopped by a look. Kept as data while the operation runs
//! (an error it met whole, with what it was doing), and worded by each face
//! at the edge: a `warning:` line on the terminal, a string of a JSON body.

use std::path::PathBuf;

use super::{Cause, Error};

/// One warning, with what it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// A variable of the machine's environment kept out of the cage's
    /// (`why`: which rule keeps it out).
    EnvLeftOut { name: String, why: String },
    /// A cage of a harness that runs the machine's program (Claude Code,
    /// Codex CLI, opencode) made where no such program was found.
    NoProgram { program: &'static str },
    /// Whether a pi session's image has pi could not be looked at
    /// (`config`: the config file to name the machine's pi in).
    PiUnlooked {
        image: String,
        why: Unlooked,
        config: String,
    },
    /// A path made writable with `--writable` (`path`: where it is;
    /// `why`: what on the machine reads it).
    Writable {
        given: String,
        path: PathBuf,
        why: &'static str,
    },
    /// Limits podman will not enforce (rootless on cgroups v1), as the
    /// config allows.
    LimitsUnenforced,
    /// A dry run's image, older than this program's Containerfile.
    StaleOnDryRun { image: String },
    /// Our image, stale, being built again; the cage made from the old one.
    Rebuilding { image: String },
    /// ... whose new build did not start.
    RebuildNotStarted { image: String, error: Box<Error> },
    /// A provider of pi's models.json left out of the cage's copy.
    PiProviderLeftOut { provider: String, why: String },
    /// The headers of a pi provider's models left out of the copy.
    PiModelHeadersLeftOut { provider: String },
    /// The user's git index not read into the session's git directory.
    GitIndexUnread { git_dir: PathBuf, cause: Cause },
    /// The session's git directory not brought up to date before a start.
    GitNotSynced { own: PathBuf, error: Box<Error> },
    /// A branch of the session's brought into the user's repository, said
    /// before its git directory goes.
    Brought {
        branch: String,
        into: String,
        commit: String,
        objects: usize,
    },
    /// ... or not brought in, and why (as the bringing machine said it).
    NotBrought {
        branch: String,
        why: super::NotBrought,
    },
    /// The commits not brought in go with the cage's git directory.
    CommitsGo,
    /// Nothing of the session's commits brought in after a turn.
    NothingBrought(Box<Error>),
    /// A file a tool on this machine runs or loads later, `change`d by the
    /// cage (`created`, `changed`, `removed`) at `path` in the project.
    LaterFile {
        change: String,
        path: String,
        why: String,
    },
    /// An old container not removed; `later`: what removes it.
    OldContainerLeft {
        container: String,
        error: Box<Error>,
        later: RemovedBy,
    },
    /// An operation's intent not removed once it was done.
    IntentLeft(Box<Error>),
    /// A file or folder not removed, where that does not fail the
    /// operation.
    NotRemoved(Box<Error>),
    /// A dead turn's cage, stopped by a later command.
    DeadTurnStopped { session: String, container: String },
    /// ... which could not be stopped.
    DeadTurnNotStopped { session: String, error: Box<Error> },
    /// Claude Code's run without the shrooms tools, and why.
    NoTools(NoTools),
    /// A `--github` cage made before GitHub's token stayed outside: it
    /// still mounts the machine's gh login folder, `gh`.
    GitHubLoginMounted { session: String, gh: PathBuf },
    /// A session at or past the token budget just set.
    BudgetSpent {
        session: String,
        spent: u64,
        budget: u64,
        /// Its next model request waits for a raise (else it is refused
        /// at once: the config's `[budget] wait` is 0).
        held: bool,
    },
    /// A session at or past the dollar budget just set: the dollars spent
    /// and the budget, as people read them (`$0.0132`, `$0.01`).
    UsdBudgetSpent(UsdSpent),
}

/// A session at or past the dollar budget just set: the dollars spent and
/// the budget, as people read them (`$0.0132`, `$0.01`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsdSpent {
    pub session: String,
    pub spent: String,
    pub budget: String,
    /// Its next model request waits for a raise (else it is refused at
    /// once: the config's `[budget] wait` is 0).
    pub held: bool,
}

impl UsdSpent {
    fn words(&self) -> String {
        let UsdSpent {
            session,
            spent,
            budget,
            held,
        } = self;
        let next = if *held {
            "will wait until it is raised"
        } else {
            "will be refused"
        };
        format!(
            "session {session} has already spent {spent}, at or past this dollar budget of \
             {budget}: its next model request {next}; raise it with `shrooms-agent \
             cage limits {session} --usd AMOUNT`, or remove it with --usd none"
        )
    }
}

/// What removes an old container left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovedBy {
    /// `cage prune`, once podman is back.
    Prune,
    /// The next command on the session (its intent is kept).
    NextCommand,
}

/// Why a look into an image for pi said nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unlooked {
    /// The last line podman or the runtime wrote.
    Said(String),
    /// Nothing written; podman ended with this status (None: a signal).
    Ended(Option<i32>),
    /// podman could not be run.
    Failed(Box<Error>),
}

/// Why a Claude Code run is not given the shrooms tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoTools {
    /// This program does not know its own path.
    NoOwnPath,
    /// The tools could not be put in the state folder.
    NotProvided(Box<Error>),
    /// The cage was made before `tools/`, with this program mounted at a
    /// path it has moved from.
    Moved { exe: PathBuf, session: String },
}

impl std::fmt::Display for Unlooked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unlooked::Said(line) => f.write_str(line),
            Unlooked::Ended(Some(c)) => write!(f, "podman run ended with status {c}"),
            Unlooked::Ended(None) => f.write_str("podman run ended with a signal"),
            Unlooked::Failed(e) => f.write_str(&e.message()),
        }
    }
}

impl std::fmt::Display for NoTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoTools::NoOwnPath => f.write_str("this program does not know its own path"),
            NoTools::NotProvided(e) => f.write_str(&e.message()),
            NoTools::Moved { exe, session } => write!(
                f,
                "this shrooms-agent program ({}) was not mounted when the cage was made (it has \
                 moved since); `shrooms-agent cage move {session}` makes the cage again, and the \
                 program it then gets stays where moving this one does not matter",
                exe.display()
            ),
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.words())
    }
}

/// A JSON body carries a warning as its words.
impl serde::Serialize for Warning {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.words())
    }
}

impl Warning {
    /// The warning's words, the same on every face.
    pub fn words(&self) -> String {
        match self {
            Warning::EnvLeftOut { name, why } => {
                format!("{name} is left out of the cage's environment: {why}")
            }
            Warning::NoProgram { program } => format!(
                "no {program} program found on PATH: `cage run` will need one (set [harness] \
                 {program} in the config and make the cage again)"
            ),
            Warning::PiUnlooked { image, why, config } => pi_unlooked(image, why, config),
            Warning::Writable { given, path, why } => writable(given, path, why),
            Warning::LimitsUnenforced => "the cage's limits are not enforced: podman is \
                                          rootless on cgroups v1 (unenforced_limits = \"warn\")"
                .to_string(),
            Warning::StaleOnDryRun { image } => format!(
                "the image {image} is older than this shrooms-agent's Containerfile: the real \
                 command builds it again in the background and uses the old one meanwhile"
            ),
            Warning::Rebuilding { image } => format!(
                "the image {image} is older than this shrooms-agent's Containerfile: it is \
                 being built again in the background, and this cage is made from the old one"
            ),
            Warning::RebuildNotStarted { image, error } => format!(
                "the image {image} is older than this shrooms-agent's Containerfile, and its \
                 new build could not start: {}",
                error.message()
            ),
            Warning::PiProviderLeftOut { provider, why } => format!(
                "pi's models.json: provider {provider} is left out of the cage's copy: {why}"
            ),
            Warning::PiModelHeadersLeftOut { provider } => format!(
                "pi's models.json: provider {provider}: the headers of its models are left out \
                 of the cage's copy and not sent (only the provider's own headers are)"
            ),
            Warning::GitIndexUnread { git_dir, cause } => format!(
                "the index of {} could not be read ({}): git in the cage sees every file as \
                 changed until `git reset`",
                git_dir.display(),
                cause.said
            ),
            Warning::GitNotSynced { own, error } => git_not_synced(own, error),
            Warning::Brought {
                branch,
                into,
                commit,
                objects,
            } => brought(branch, into, commit, *objects),
            Warning::NotBrought { branch, why } => {
                format!("did not bring in the session's branch {branch}: {why}")
            }
            Warning::NothingBrought(e) => nothing_brought(e),
            Warning::LaterFile { change, path, why } => later_file(change, path, why),
            Warning::CommitsGo => {
                "the session's commits that did not come in go with its cage's git directory"
                    .to_string()
            }
            Warning::OldContainerLeft {
                container,
                error,
                later,
            } => old_container_left(container, error, *later),
            Warning::IntentLeft(e) => format!("{} (the next command removes it)", e.message()),
            Warning::NotRemoved(e) => e.message(),
            Warning::DeadTurnStopped { session, container } => format!(
                "stopped {container}: the turn on session {session} ended without stopping it \
                 (its process and its watcher were killed)"
            ),
            Warning::DeadTurnNotStopped { session, error } => dead_turn_not_stopped(session, error),
            Warning::NoTools(why) => format!("the shrooms tools are not given to this run: {why}"),
            Warning::BudgetSpent {
                session,
                spent,
                budget,
                held,
            } => budget_spent(session, *spent, *budget, *held),
            Warning::UsdBudgetSpent(s) => s.words(),
            Warning::GitHubLoginMounted { session, gh } => github_login_mounted(session, gh),
        }
    }
}

fn github_login_mounted(session: &str, gh: &std::path::Path) -> String {
    format!(
        "session {session}'s cage was made with --github before the gateway added GitHub's \
         token outside: it still mounts your GitHub login, {}; `shrooms-agent cage move \
         {session} --github` makes it again without",
        gh.display()
    )
}

fn pi_unlooked(image: &str, why: &Unlooked, config: &str) -> String {
    format!(
        "whether the image {image} has a `pi` program could not be looked at ({why}): `cage \
         run` fails if it has none. Name your pi with `pi = \"/path/to/pi\"` under `[harness]` \
         in {config} to use the machine's"
    )
}

fn writable(given: &str, path: &std::path::Path, why: &str) -> String {
    format!(
        "--writable {given}: the cage can change {} ({why}), and what it leaves there runs on \
         this machine, outside any cage, the next time git, your editor or your harness reads it",
        path.display()
    )
}

fn brought(branch: &str, into: &str, commit: &str, objects: usize) -> String {
    format!(
        "brought in the session's branch {branch} as {} ({}, {objects} new objects)",
        into.trim_start_matches("refs/heads/"),
        commit.chars().take(12).collect::<String>(),
    )
}

fn nothing_brought(e: &Error) -> String {
    format!(
        "the session's commits were not brought into your repository: {}",
        e.message()
    )
}

fn dead_turn_not_stopped(session: &str, error: &Error) -> String {
    format!(
        "session {session}'s turn ended without stopping its cage, which could not be stopped: {}",
        error.message()
    )
}

fn later_file(change: &str, path: &str, why: &str) -> String {
    format!(
        "the cage {change} {path}, which a tool on this machine runs or loads later ({why}): read \
         it before you enter, open or commit in the folder"
    )
}

fn git_not_synced(own: &std::path::Path, error: &Error) -> String {
    format!(
        "the session's git directory ({}) was not brought up to date with your repository, so \
         git in the cage sees it as the last turn left it: {}",
        own.display(),
        error.message()
    )
}

fn old_container_left(container: &str, error: &Error, later: RemovedBy) -> String {
    format!(
        "the old container {container} could not be removed ({}); {}",
        error.message(),
        match later {
            RemovedBy::Prune => "`shrooms-agent cage prune` removes it later",
            RemovedBy::NextCommand => "the next command on the session removes it",
        }
    )
}

fn budget_spent(session: &str, spent: u64, budget: u64, held: bool) -> String {
    let next = if held {
        "will wait until it is raised"
    } else {
        "will be refused"
    };
    format!(
        "session {session} has already spent {spent} tokens, at or past this budget of {budget}: \
         its next model request {next}; raise it with `shrooms-agent cage limits {session} \
         --tokens N`, or remove it with --tokens none"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each warning in the words it had when it was made as a sentence
    /// where it was found.
    #[test]
    fn every_warning_is_worded_as_before() {
        let gone = Error::act(
            "removing /s/x",
            &std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        let cases = [
            (
                Warning::OldContainerLeft {
                    container: "shrooms-a".into(),
                    error: Box::new(gone.clone()),
                    later: RemovedBy::Prune,
                },
                "the old container shrooms-a could not be removed (removing /s/x: permission \
                 denied); `shrooms-agent cage prune` removes it later",
            ),
            (
                Warning::OldContainerLeft {
                    container: "shrooms-a".into(),
                    error: Box::new(gone.clone()),
                    later: RemovedBy::NextCommand,
                },
                "the old container shrooms-a could not be removed (removing /s/x: permission \
                 denied); the next command on the session removes it",
            ),
            (
                Warning::IntentLeft(Box::new(gone.clone())),
                "removing /s/x: permission denied (the next command removes it)",
            ),
            (
                Warning::Brought {
                    branch: "main".into(),
                    into: "refs/heads/cage/web/main".into(),
                    commit: "0123456789abcdef".into(),
                    objects: 3,
                },
                "brought in the session's branch main as cage/web/main (0123456789ab, 3 new \
                 objects)",
            ),
            (
                Warning::PiUnlooked {
                    image: "img".into(),
                    why: Unlooked::Ended(Some(125)),
                    config: "~/.config/x.toml".into(),
                },
                "whether the image img has a `pi` program could not be looked at (podman run \
                 ended with status 125): `cage run` fails if it has none. Name your pi with `pi \
                 = \"/path/to/pi\"` under `[harness]` in ~/.config/x.toml to use the machine's",
            ),
            (
                Warning::NoTools(NoTools::NoOwnPath),
                "the shrooms tools are not given to this run: this program does not know its \
                 own path",
            ),
            (
                Warning::GitHubLoginMounted {
                    session: "web".into(),
                    gh: "/home/u/.config/gh".into(),
                },
                "session web's cage was made with --github before the gateway added GitHub's \
                 token outside: it still mounts your GitHub login, /home/u/.config/gh; \
                 `shrooms-agent cage move web --github` makes it again without",
            ),
            (
                Warning::BudgetSpent {
                    session: "web".into(),
                    spent: 10,
                    budget: 5,
                    held: true,
                },
                "session web has already spent 10 tokens, at or past this budget of 5: its next \
                 model request will wait until it is raised; raise it with `shrooms-agent cage limits web \
                 --tokens N`, or remove it with --tokens none",
            ),
            (
                Warning::UsdBudgetSpent(UsdSpent {
                    session: "web".into(),
                    spent: "$0.0132".into(),
                    budget: "$0.01".into(),
                    held: false,
                }),
                "session web has already spent $0.0132, at or past this dollar budget of $0.01: \
                 its next model request will be refused; raise it with `shrooms-agent cage limits \
                 web --usd AMOUNT`, or remove it with --usd none",
            ),
            (
                Warning::Writable {
                    given: ".git".into(),
                    path: "/p/.git".into(),
                    why: "git runs its hooks",
                },
                "--writable .git: the cage can change /p/.git (git runs its hooks), and what it \
                 leaves there runs on this machine, outside any cage, the next time git, your \
                 editor or your harness reads it",
            ),
            (
                Warning::GitNotSynced {
                    own: "/s/git".into(),
                    error: Box::new(gone.clone()),
                },
                "the session's git directory (/s/git) was not brought up to date with your \
                 repository, so git in the cage sees it as the last turn left it: removing /s/x: \
                 permission denied",
            ),
            (
                Warning::NoTools(NoTools::Moved {
                    exe: "/old/sa".into(),
                    session: "web".into(),
                }),
                "the shrooms tools are not given to this run: this shrooms-agent program \
                 (/old/sa) was not mounted when the cage was made (it has moved since); \
                 `shrooms-agent cage move web` makes the cage again, and the program it then \
                 gets stays where moving this one does not matter",
            ),
            (
                Warning::LaterFile {
                    change: "created".into(),
                    path: ".envrc".into(),
                    why: "direnv loads it".into(),
                },
                "the cage created .envrc, which a tool on this machine runs or loads later \
                 (direnv loads it): read it before you enter, open or commit in the folder",
            ),
            (
                Warning::NothingBrought(Box::new(gone.clone())),
                "the session's commits were not brought into your repository: removing /s/x: \
                 permission denied",
            ),
            (
                Warning::DeadTurnNotStopped {
                    session: "web".into(),
                    error: Box::new(gone.clone()),
                },
                "session web's turn ended without stopping its cage, which could not be \
                 stopped: removing /s/x: permission denied",
            ),
        ];
        for (w, said) in cases {
            assert_eq!(w.to_string(), said);
            assert_eq!(
                serde_json::to_value(&w).unwrap(),
                serde_json::Value::String(said.into())
            );
        }
    }
}
