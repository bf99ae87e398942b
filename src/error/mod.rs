//! The one error type operations return, and the exit codes it maps to.
//!
//! Exit codes are part of the interface (docs/configuration.md, "Exit codes"): scripts and
//! cron jobs branch on them, and `serve` maps the same kinds to HTTP statuses.
//! Both come from the kind alone: no decision reads an error's message,
//! which is for people and may change with its wording.

use std::fmt;

mod bring;
mod choice;
mod doing;
mod folder;
mod git;
mod image;
mod input;
mod limits;
mod listen;
mod make;
mod pack;
mod protect;
mod remote;
mod rules;
mod state;
mod token;
mod turn;
mod warning;
pub use bring::{EntryProblem, NotBrought};
pub use choice::{ChoiceProblem, ConversationProblem};
pub use doing::{After, Doing};
pub use folder::{FolderProblem, Mounted, NotOwn, RootNotOwn};
pub use git::{FastForwardProblem, GitProblem};
pub use image::ImageProblem;
pub use input::{ByProblem, CwdFor, InputProblem};
pub use limits::LimitsProblem;
pub use listen::ListenProblem;
pub use make::{CopyOf, LoopbackOpening, MakeProblem, ShortRanges, VolumeProblem};
pub use pack::{OnlyRefused, PackProblem};
pub use protect::ProtectProblem;
pub use remote::RemoteProblem;
pub use rules::{EgressProblem, FirstProblem, RulesProblem};
pub use state::StateProblem;
pub use token::TokenProblem;
pub use turn::{TurnProblem, WatcherSilent};
pub use warning::{NoTools, RemovedBy, Unlooked, UsdSpent, Warning};

/// What went wrong, as far as a caller needs to know to react.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Something failed on the machine (podman, the file system).
    Failed,
    /// The input was wrong; nothing was changed.
    BadInput,
    /// No such session: bad input on the command line, 404 over HTTP.
    NotFound,
    /// Another command holds the session.
    Busy,
    /// The name is taken already (a session of that name exists): bad
    /// input on the command line, 409 Conflict over HTTP (RFC 9110, 15.5.10:
    /// the request conflicts with the resource's current state).
    Exists,
    /// Not ready yet (an image being built); try again later.
    NotReady,
    /// Not allowed: a session that takes no files from this sender.
    Forbidden,
    /// Too large: an upload or an archive over its bound.
    TooLarge,
    /// This machine offers no cages: no podman, or `cages = false`. Like an
    /// image being built, a state of the machine rather than a failure of
    /// the request.
    NoPodman,
    /// podman ran and failed; its exit status and stderr are kept in the
    /// error ([`Error::exited`]).
    PodmanFailed,
}

impl Kind {
    /// The process exit code of this kind (documented in docs/configuration.md and the man page).
    pub fn exit_code(self) -> u8 {
        match self {
            Kind::Failed | Kind::Forbidden | Kind::NoPodman | Kind::PodmanFailed => 1,
            Kind::BadInput | Kind::NotFound | Kind::TooLarge | Kind::Exists => 2,
            Kind::Busy => 3,
            Kind::NotReady => 4,
        }
    }

    /// The kind's name, as `--json` gives it (`"kind"`) and as `cage exec`
    /// and `cage run` say it on stderr, where every failure of their own
    /// exits [`TOOL_FAILED`].
    pub fn name(self) -> &'static str {
        match self {
            Kind::Failed => "failed",
            Kind::BadInput => "bad_input",
            Kind::NotFound => "not_found",
            Kind::Busy => "busy",
            Kind::Exists => "exists",
            Kind::NotReady => "not_ready",
            Kind::Forbidden => "forbidden",
            Kind::TooLarge => "too_large",
            Kind::NoPodman => "no_podman",
            Kind::PodmanFailed => "podman_failed",
        }
    }

    /// The HTTP status `serve` answers this kind with (docs/serve.md, "HTTP API"). "No podman" is a machine that cannot serve the request now,
    /// not a failure of it: 503, like an image being built.
    pub fn http_status(self) -> u16 {
        match self {
            Kind::BadInput => 400,
            Kind::Forbidden => 403,
            Kind::NotFound => 404,
            Kind::Busy | Kind::Exists => 409,
            Kind::TooLarge => 413,
            Kind::NotReady | Kind::NoPodman => 503,
            Kind::Failed | Kind::PodmanFailed => 500,
        }
    }
}

/// The exit code of `cage exec` and `cage run` when shrooms-agent itself
/// failed or refused, whatever the kind. Those two pass the command's own
/// status through, so their own failures take the codes podman run, docker
/// run and env(1) keep for themselves (podman-run(1) and env(1), "Exit
/// status"): 125 here; 126 (the command could not be run) and 127 (not
/// found) are podman exec's own, passed through with the rest.
pub const TOOL_FAILED: u8 = 125;

/// How a process that ran ended: the call (its program and verb, and the
/// name it acted on: `podman start shrooms-web-1a2b`, never a secret), its
/// exit status (None: ended by a signal) and all it wrote to stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exited {
    pub call: String,
    pub status: Option<i32>,
    pub stderr: String,
}

/// How long a client is told to wait (`Retry-After`, seconds) when a
/// request cannot be served yet: an image being built, or no podman.
pub const RETRY_AFTER_SECS: u32 = 30;

/// What the one who asked can do next, beyond what the message says; each
/// face words it its own way ([`Error::words`]), since a person at a
/// terminal runs a command again and an HTTP client sends a request again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// The same request, unchanged, will do later (an image being built),
    /// and what to look at meanwhile: a line of its own for a
    /// person at the terminal; an HTTP client gets none of it (it names
    /// the machine's paths).
    AgainWithHint { hint: String },
    /// Another image would do (our image's build failed): the request's
    /// own (`--image`, a body's `"image"`) or the config's `image` key, in
    /// the config file these words name.
    OtherImage { config: String },
    /// Both: the same request later, or another image now (our image is
    /// being built again after a build that failed, and may fail again);
    /// what to look at meanwhile for a person at the terminal only, as
    /// with `AgainWithHint`.
    AgainOrOtherImage { config: String, hint: String },
}

/// Who an error is worded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// The CLI: a person, or a script, at a terminal.
    Terminal,
    /// serve's HTTP API.
    Http,
}

impl Face {
    /// A field of a request, named as this face's users give it: the
    /// option on the command line (`--memory`), the body's field over HTTP
    /// (`field "memory"`).
    pub fn field(self, name: &str) -> String {
        match self {
            Face::Terminal => flag_of(name),
            Face::Http => format!("field {name:?}"),
        }
    }

    /// An option of the command line that no HTTP request can give (a
    /// decision left to the owner at the machine, as `--unseal` is):
    /// as it is on the terminal, and said to be the command line's over
    /// HTTP.
    pub fn machine_option(self, flag: &str) -> String {
        match self {
            Face::Terminal => flag.to_string(),
            Face::Http => format!("`{flag}` (on the command line, at the machine)"),
        }
    }
}

/// The command line's option for a field of a request (the JSON bodies'
/// name, which is the config's key where there is one): the one place the
/// two are told apart.
pub fn flag_of(field: &str) -> String {
    match field {
        "meshes" => "--mesh".to_string(),
        f => format!("--{}", f.replace('_', "-")),
    }
}

/// What an error is about, as data: each face renders it its own way (the
/// CLI's `--json`, the HTTP error body), and decides nothing from words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A value given for this field of a request was refused (its name as
    /// the JSON bodies and the config give it; [`flag_of`] for the CLI's).
    Field(&'static str),
    /// Where serde refused an HTTP request's JSON body: the field's path
    /// as the body writes it (`cage.memory`; an unknown field's name as
    /// sent). The command line has no such field: only HTTP renders it.
    BodyField(String),
}

/// What holds a session's lock, as its holder wrote it in the lock file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Holder {
    /// `exec` (a `cage exec`), `turn` (a harness's turn: `cage run`),
    /// `create`, `move`, `rename`, `start`, `stop`, `rm`, `prune`; `a
    /// command` when it did not say.
    pub what: String,
    /// Since when, RFC 3339 with the local offset (Unix seconds kept).
    #[serde(serialize_with = "rfc3339")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub since: Option<u64>,
    /// Its process, when it said.
    pub pid: Option<u32>,
}

fn rfc3339<S: serde::Serializer>(secs: &Option<u64>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match secs {
        Some(t) => s.serialize_str(&crate::state::when::rfc3339(*t)),
        None => s.serialize_none(),
    }
}

/// A podman call that ran and failed, as JSON gives it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct PodmanCall {
    /// Its verb and the name it acted on: `podman start shrooms-web-1a2b`.
    pub call: String,
    /// Its exit status (podman's own: 125; the contained command's
    /// otherwise, podman-run(1), "Exit Status"); null when a signal ended it.
    pub status: Option<i32>,
}

impl PodmanCall {
    /// The call as an HTTP client is shown it: with no path of the
    /// machine. A word that is an absolute path (the folder under the
    /// state folder `podman unshare rm` removes) is left out, and so is
    /// all after it, since a path may hold spaces: `podman unshare rm`.
    /// Names of containers, volumes and images never start with `/`; the
    /// command line keeps the whole call, for the machine's owner.
    pub fn without_paths(self) -> PodmanCall {
        let call = self
            .call
            .split(' ')
            .take_while(|w| !w.starts_with('/'))
            .collect::<Vec<_>>()
            .join(" ");
        PodmanCall { call, ..self }
    }
}

/// What went wrong, as data: each face words it ([`Error::words`]) when it
/// gives the error, not where the error is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// A sentence the same on both faces, made where the error was found.
    Said(String),
    /// Words that differ by face (they name fields of a request, or an
    /// option only the command line has), asked of each face once when
    /// the error is made ([`Error::worded`]).
    Worded { terminal: String, http: String },
    /// A value refused for a field of a request (its name as the JSON
    /// bodies and the config give it; [`flag_of`] for the CLI's): why, in
    /// words that name no option.
    Field { field: &'static str, why: String },
    /// An act that failed (a file read or written, a call of the
    /// system, a parse of what a program said): what was being done, with
    /// which path, and the error of what was called.
    Act { doing: Doing, cause: Cause },
    /// A session named by the request, and what stands in the way.
    Session {
        session: String,
        problem: SessionProblem,
    },
    /// A value of the config file refused (`key`: the key it was given
    /// for, where one is to blame; none for a file that does not read as
    /// a whole), and why.
    Config {
        file: std::path::PathBuf,
        key: Option<String>,
        why: String,
    },
    /// A build of one of our images failed (`log`: its log, where the
    /// error names the ways on).
    BuildFailed {
        failure: BuildFailure,
        log: Option<std::path::PathBuf>,
    },
    /// The image for the session's cage is being built; `last`: the build
    /// before it failed so.
    BeingBuilt { last: Option<BuildFailure> },
    /// Another machine's serve did not take what was sent to it: its
    /// address, the HTTP status it answered (`reason`: the status's
    /// reason phrase) and what its body said, if it said.
    Answered {
        machine: String,
        url: String,
        status: u16,
        reason: &'static str,
        said: Option<String>,
    },
    /// A program the tool needs is not on this machine: its name, the
    /// Debian package that has it, and what it is needed for, where the
    /// words say it.
    NotInstalled {
        program: &'static str,
        package: &'static str,
        needed_for: Option<&'static str>,
    },
    /// A file sent to session `session` (`POST .../files`) refused.
    Drop {
        session: String,
        refused: DropRefused,
    },
    /// This machine offers no cages (no podman, or `cages = false`);
    /// `caged`: for a command on a session that is caged already.
    NoPodman { caged: bool },
    /// An HTTP request's body refused before it was read: `what` it is (`a
    /// body`, `a file`), and why.
    Body {
        what: &'static str,
        problem: BodyProblem,
    },
    /// A container that is not running, so what was asked of it (`so`,
    /// in words) cannot be done.
    NotRunning { container: String, so: &'static str },
    /// Something the program relies on did not hold (a step of a plan
    /// that left nothing where the next needs it): a fault of the program,
    /// named by these words.
    Unmet(&'static str),
    /// A program that gave no answer `within` its time, and was killed.
    NoAnswer {
        label: String,
        within: std::time::Duration,
    },
    /// A program that printed more than `max` bytes, more than is ever
    /// read of it.
    SaidTooMuch { label: String, max: usize },
    /// A program that ran and failed (`label`: its name and verb, as the
    /// words give it: `podman start`), and how it ended.
    Ran { label: String, exited: Exited },
    /// A project folder refused for a cage (`dir`, links resolved), and
    /// why.
    Folder {
        dir: std::path::PathBuf,
        problem: FolderProblem,
    },
    /// The options chosen for a new cage refused (together, or against
    /// the machine).
    Choice(ChoiceProblem),
    /// The conversation a sealed cage was given (`id`) refused.
    Conversation {
        id: String,
        problem: ConversationProblem,
    },
    /// A cage's limits refused, or the machine for them.
    Limits(LimitsProblem),
    /// An outbox pack refused.
    Pack(PackProblem),
    /// A cage refused over the project's protected paths.
    Protect(ProtectProblem),
    /// `serve --listen` refused at this address.
    Listen {
        addr: std::net::SocketAddr,
        problem: ListenProblem,
    },
    /// A command for another machine (`--on MACHINE`) refused, or the
    /// tool there not reached.
    Remote {
        machine: String,
        problem: RemoteProblem,
    },
    /// A token file refused.
    Token {
        file: std::path::PathBuf,
        problem: TokenProblem,
    },
    /// A file or folder of the tool's own (`path`) refused or found wrong.
    State {
        path: std::path::PathBuf,
        problem: StateProblem,
    },
    /// A git directory found wrong at `path` while its refs were read or
    /// written.
    Git {
        path: std::path::PathBuf,
        problem: GitProblem,
    },
    /// A word, path, name or variable refused before it was used.
    Input(InputProblem),
    /// The network rules of cage `container` not loaded where its
    /// processes run.
    Rules {
        container: String,
        problem: RulesProblem,
    },
    /// A cage's egress log's listener not started.
    Egress(EgressProblem),
    /// An image for a cage missing, or one of ours not built.
    Image(ImageProblem),
    /// A new cage refused for what the machine, its image or its path
    /// gives it.
    Make(MakeProblem),
    /// `cage stop --all` left cages running: the sessions another
    /// command holds (`busy`), and those whose record does not read
    /// (`damaged`).
    NotStopped {
        busy: Vec<String>,
        damaged: Vec<String>,
    },
    /// What a turn's process starts beside its cage, not started.
    Turn(TurnProblem),
    /// The home directory cannot be told ($HOME unset, and none known).
    NoHome,
    /// The system gave no random bytes (getrandom(2)).
    NoRandom,
}

/// How a build of one of our images failed: its stage (`workbench`,
/// `desktop`) and the line that says why, as the build's record keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildFailure {
    pub stage: &'static str,
    pub line: String,
}

impl fmt::Display for BuildFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "building the {} image: {}", self.stage, self.line)
    }
}

/// The words for a request made while the image is built (docs/images.md,
/// "Images"); the faces add what to do then ([`Error::words`]).
pub const BEING_BUILT: &str =
    "the image for this session's cage is being built (a few minutes, the first time)";

/// The words of [`What::NoPodman`], the same on both faces (the apps show
/// them; docs/configuration.md, "Configuration").
pub const NO_PODMAN: &str = "this machine has no podman to cage sessions with";
/// ... and for a caged session on such a machine.
pub const NO_PODMAN_FOR_SESSION: &str =
    "this session is caged, and this machine has no podman to cage it with";

/// What stands in the way of a session's use ([`What::Session`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionProblem {
    /// There is none of that name.
    Missing,
    /// There is one of that name already (the name is taken).
    Exists,
    /// Moved to another cage while its limits were being set.
    MovedMeanwhile,
    /// A rename's new name would put one of the session's folders at
    /// `to`, where a folder is already (left by an earlier session `new`).
    FolderThere { to: std::path::PathBuf, new: String },
    /// Another command is making it, and holds it.
    BeingMade(Holder),
    /// Another command holds it.
    Held(Holder),
    /// What runs in its cage besides its first process (each process's
    /// command line, as `podman top` gives it) keeps `verb` (`move`,
    /// `rename`) from it.
    Running { running: Vec<String>, verb: String },
    /// Its project folder is not where its record says (moved or renamed?).
    ProjectGone { dir: std::path::PathBuf },
    /// Its container is gone (removed by hand?).
    ContainerGone { container: String },
    /// Its container was made by an earlier shrooms-agent, whose first
    /// process is the image's `sleep`.
    OldCage { container: String },
    /// Its cage was not started, and `cage move` makes it again.
    NotStarted(NotStarted),
    /// The name is not one a session can have.
    NotAName,
    /// It is in no cage; `then`: what follows of it, in words (`, so it
    /// cannot be taken out of one`), or nothing.
    NotCaged { then: &'static str },
    /// It is in a cage, and what was asked is for a session in none.
    Caged,
    /// It is not sealed, and only a sealed cage has an outbox.
    NotSealed,
    /// Its record (at `file`) does not read, or says what no record of
    /// ours says (`why`).
    RecordDamaged {
        file: std::path::PathBuf,
        why: String,
    },
    /// What a command on it left undone (its intent, at `file`) does not
    /// read.
    IntentDamaged {
        file: std::path::PathBuf,
        why: String,
    },
    /// Another command changes its record, for longer than `secs`
    /// seconds.
    BeingChanged { secs: u64 },
    /// Out of its cage, and `cage run` not told to run it so.
    UncagedRun,
    /// In its cage, and `cage run` told to run it out of one.
    CagedRunUncaged,
    /// `cage bring --ff` did not fast-forward the user's branch (`why`,
    /// as the fast-forward said).
    NotFastForwarded { why: FastForwardProblem },
    /// No harness program was found for it when its cage was made.
    NoHarnessProgram,
    /// `--join` where its cage is not running.
    NothingToJoin,
    /// Its cage runs, but without the env file a turn writes.
    EnvFileMissing { env_file: std::path::PathBuf },
    /// Sealed, and asked out of its seal without `--unseal`.
    SealedOut,
    /// Renamed to the name it has.
    NamedAlready,
    /// Out of its cage, and this machine has no `program` (its harness)
    /// to run it with.
    NoProgramHere { program: &'static str },
    /// `cage run --join`, which only `cage exec` has.
    RunJoined,
    /// A watcher given descriptor `fd` for its lock, which no lock can be
    /// (a standard stream).
    NotALockFd { fd: i32 },
    /// A watcher not given its lock as descriptor `fd`.
    LockNotPassed { fd: i32 },
    /// A watcher given as descriptor `fd` another file than its lock
    /// (`lock`).
    NotItsLock { fd: i32, lock: std::path::PathBuf },
    /// Files from `sender` are not let in (`files deny`).
    FilesNotFrom { sender: String },
    /// `file` is no name a received file can have.
    NotAReceivedName { file: String },
    /// It has no received file `file` from `sender`.
    NoReceivedFile { file: String, sender: String },
    /// Its cage shares the user's git directory (`--writable .git`): no
    /// commits of its own to bring in.
    NoOwnGit,
}

/// Why a session's cage was not started ([`SessionProblem::NotStarted`]):
/// it was made in a way that a start would no longer keep safe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotStarted {
    /// Made by an earlier shrooms-agent: its first process is the image's
    /// `sleep` ([`SessionProblem::OldCage`]); `sealed`: it is moved as one.
    OldCage { container: String, sealed: bool },
    /// Made by an earlier shrooms-agent, with a mount a cage no longer gets
    /// (`what`: the mount in words).
    MountsWrong { what: String },
    /// Made before a cage had a git directory of its own: the project's
    /// `.git` is writable in it.
    WithoutOwnGit,
    /// Its project has submodules (these paths) it was made without.
    SubmodulesAdded { paths: Vec<std::path::PathBuf> },
    /// A folder it mounts is not what it was when the cage was made
    /// (`why`, in words of the mount).
    SourceChanged { why: String },
    /// Its private home (`home`, the harness's folder `harness_dir` in
    /// it) has at `found` what a start must not mount through.
    HomeWay {
        home: std::path::PathBuf,
        harness_dir: std::path::PathBuf,
        found: std::path::PathBuf,
        what: HomeWay,
    },
}

/// What is on the way to a mount in a cage's private home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HomeWay {
    /// The home is no folder.
    HomeNotAFolder,
    /// The home cannot be looked at (`cause`).
    HomeUnseen { cause: String },
    /// A mount's destination `dst` that is not a plain path.
    NotPlain { dst: std::path::PathBuf },
    /// A link (to `to`) on the way to `dst`.
    Link { to: String, dst: std::path::PathBuf },
    /// What cannot be looked at (`cause`) on the way to `dst`.
    Unseen {
        cause: String,
        dst: std::path::PathBuf,
    },
}

/// Pure: the words of [`NotStarted::HomeWay`] after "was not started: ".
fn home_way_words(
    session: &str,
    home: &std::path::Path,
    harness_dir: &std::path::Path,
    found: &std::path::Path,
    what: &HomeWay,
) -> String {
    let f = found.display();
    let what = match what {
        HomeWay::HomeNotAFolder => format!("{f} is not a folder"),
        HomeWay::HomeUnseen { cause } => format!("{f} cannot be looked at ({cause})"),
        HomeWay::NotPlain { dst } => {
            format!(
                "the mount destination {} is not a plain path",
                dst.display()
            )
        }
        HomeWay::Link { to, dst } => {
            format!("{f} is a link (to {to}) on the way to {}", dst.display())
        }
        HomeWay::Unseen { cause, dst } => format!(
            "{f} cannot be looked at ({cause}) on the way to {}",
            dst.display()
        ),
    };
    format!(
        "{what}. The cage can write its private home ({}, its {} inside), and a start would \
         mount through this wherever it leads. Look at it, remove it (`rm {f}`; rootless, \
         `podman unshare rm` where it belongs to another user of the cage), then start again; \
         or `shrooms-agent cage move {session}` gives the session a fresh cage",
        home.display(),
        harness_dir.display()
    )
}

impl NotStarted {
    fn words(&self, session: &str) -> String {
        let again = "(with the options it had: `cage show` lists them) makes its cage again";
        let why = match self {
            NotStarted::OldCage { container, sealed } => format!(
                "{}. `shrooms-agent cage move {session}{}` {again}, with the project and \
                 conversations as they are; what was installed in the old container goes with \
                 it",
                old_cage(container),
                if *sealed { " --sealed" } else { "" }
            ),
            NotStarted::MountsWrong { what } => format!(
                "it was made by an earlier shrooms-agent and mounts {what}. `shrooms-agent cage \
                 move {session}` {again} without it"
            ),
            NotStarted::WithoutOwnGit => format!(
                "it was made by an earlier shrooms-agent, and its project's .git is writable in \
                 it (what a cage writes there, git on this machine runs). `shrooms-agent cage \
                 move {session}` {again}, with a git directory of its own"
            ),
            NotStarted::SubmodulesAdded { paths } => {
                let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                format!(
                    "its project has submodules it was made without ({}); in it, their .git \
                     would be the cage's to write, and git on this machine obeys what is there. \
                     `shrooms-agent cage move {session}` {again} with them read-only",
                    shown.join(", ")
                )
            }
            NotStarted::SourceChanged { why } => format!(
                "{why} (a folder replaced by a link?). Look at it; then `shrooms-agent cage move \
                 {session}` makes its cage again"
            ),
            NotStarted::HomeWay {
                home,
                harness_dir,
                found,
                what,
            } => home_way_words(session, home, harness_dir, found, what),
        };
        format!("session {session}'s cage was not started: {why}")
    }
}

/// Why an HTTP request's body was refused ([`What::Body`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyProblem {
    /// It came chunked, without a length.
    Chunked,
    /// It came without a length.
    NoLength,
    /// Its `len` bytes are over the `max` it may have.
    TooLarge { len: u64, max: u64 },
}

/// Why a file sent to a session was refused ([`What::Drop`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropRefused {
    /// The request names no sending session.
    NoSender,
    /// The request names no file.
    NoName,
    /// The session takes nothing from caged sessions, and `from`
    /// (`MACHINE/SESSION`) is one.
    Caged { from: String },
    /// The session takes no files from `from`.
    NotAllowed { from: String },
    /// The note is over `max` bytes.
    NoteTooLong { max: usize },
    /// The file's `length` is over the `bound` of one file.
    FileTooLarge { length: u64, bound: u64 },
    /// `from` has `sent` bytes there already; with this file, over its
    /// `bound`.
    SenderOver { from: String, sent: u64, bound: u64 },
    /// The sessions of `machine` have `sent` bytes there already; with
    /// this file, over its `bound`.
    MachineOver {
        machine: String,
        sent: u64,
        bound: u64,
    },
    /// The address it came from (`ip`) is no machine's in `[machines]`.
    NoMachineAt { ip: std::net::IpAddr },
    /// ... or several machines' (`machines`: their names).
    MachinesAt {
        ip: std::net::IpAddr,
        machines: Vec<String>,
    },
    /// The upload broke off before its length arrived (`cause`: how).
    BrokeOff { cause: String },
    /// The file could not be written at `path`.
    NotWritten {
        path: std::path::PathBuf,
        cause: String,
    },
}

impl DropRefused {
    fn kind(&self) -> Kind {
        match self {
            DropRefused::NoSender | DropRefused::NoName | DropRefused::NoteTooLong { .. } => {
                Kind::BadInput
            }
            DropRefused::Caged { .. }
            | DropRefused::NotAllowed { .. }
            | DropRefused::NoMachineAt { .. }
            | DropRefused::MachinesAt { .. } => Kind::Forbidden,
            DropRefused::BrokeOff { .. } => Kind::BadInput,
            DropRefused::NotWritten { .. } => Kind::Failed,
            DropRefused::FileTooLarge { .. }
            | DropRefused::SenderOver { .. }
            | DropRefused::MachineOver { .. } => Kind::TooLarge,
        }
    }

    fn words(&self, session: &str) -> String {
        match self {
            DropRefused::NoSender => {
                "a drop names its sender's session in the header X-Shrooms-From-Session".into()
            }
            DropRefused::NoName => "a drop names its file: add ?name=FILE to the address".into(),
            DropRefused::Caged { from } => format!(
                "session {session} takes nothing from caged sessions, and {from} is caged; \
                 `shrooms-agent cage accept-caged {session} on` lets caged senders in"
            ),
            DropRefused::NotAllowed { from } => format!(
                "session {session} takes no files from {from}; `shrooms-agent files allow \
                 {session} {from}` lets them in"
            ),
            DropRefused::NoteTooLong { max } => {
                format!("the note is over {max} bytes: shorten it, or send it as a file")
            }
            DropRefused::FileTooLarge { length, bound } => format!(
                "the file is {length} bytes, over the {} a session takes in one file",
                size_text(*bound)
            ),
            DropRefused::SenderOver { from, sent, bound } => format!(
                "{from} has sent {sent} bytes to session {session} already (counting what is on \
                 its way); with this file that is over the {} one sender may leave",
                size_text(*bound)
            ),
            DropRefused::MachineOver {
                machine,
                sent,
                bound,
            } => format!(
                "the sessions of machine {machine} have sent {sent} bytes to session {session} \
                 already (counting what is on its way); with this file that is over the {} one \
                 machine may leave",
                size_text(*bound)
            ),
            DropRefused::NoMachineAt { ip } => format!(
                "{ip} is the address of no machine in this machine's [machines]: files are taken \
                 only from machines it names"
            ),
            DropRefused::MachinesAt { ip, machines } => format!(
                "{ip} is the address of several machines in [machines] ({}): it cannot tell \
                 which one sent this",
                machines.join(", ")
            ),
            DropRefused::BrokeOff { cause } => {
                format!("the upload broke off ({cause}); nothing was kept")
            }
            DropRefused::NotWritten { path, cause } => {
                format!("writing {}: {cause}; nothing was kept", path.display())
            }
        }
    }
}

/// Pure: the words of [`What::NotStopped`]: the damaged records first.
fn not_stopped_words(busy: &[String], damaged: &[String]) -> String {
    let them = |n: &[String]| if n.len() == 1 { "it" } else { "them" };
    let busy = (!busy.is_empty()).then(|| {
        format!(
            "not stopped, busy: {} (another shrooms-agent command, an exec or run, is using {}); \
             stop {} when it ends",
            busy.join(", "),
            if busy.len() == 1 { "it" } else { "each" },
            them(busy),
        )
    });
    let damaged = (!damaged.is_empty()).then(|| {
        format!(
            "not stopped, the record does not read: {} (`shrooms-agent cage ls` says why); mend \
             the file or move it away, then stop {} again",
            damaged.join(", "),
            them(damaged),
        )
    });
    [damaged, busy]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
}

/// A bound in bytes, in the largest unit it is a whole number of.
fn size_text(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    match n {
        n if n >= 1024 * MIB && n % (1024 * MIB) == 0 => format!("{} GiB", n / 1024 / MIB),
        n if n >= MIB && n % MIB == 0 => format!("{} MiB", n / MIB),
        n => format!("{n} bytes"),
    }
}

/// The words for a cage whose first process is a program of its image.
fn old_cage(container: &str) -> String {
    format!(
        "the container {container} was made by an earlier shrooms-agent: its first process is \
         `sleep` from the image, which the cage can replace, so it could run before the network \
         rules are in place"
    )
}

/// What a dead turn's watcher says in the lock file while it stops the
/// cage (`ops::exec::watch`): the holder's `what` then.
pub const STOPPING: &str = "stopping";

/// The words of a session another command holds.
fn held(session: &str, holder: &Holder) -> String {
    let pid = holder.pid.map(|p| format!(", pid {p}")).unwrap_or_default();
    let what = match holder.what.as_str() {
        "exec" | "turn" | "a command" => "an exec or run".to_string(),
        STOPPING => "a dead turn's watcher, stopping its cage".to_string(),
        w => format!("`cage {w}`"),
    };
    format!(
        "session {session} is busy: another shrooms-agent command ({what}{pid}) is using it; try \
         again when it ends"
    )
}

impl SessionProblem {
    fn words(&self, session: &str, face: Face) -> String {
        match self {
            SessionProblem::Missing => {
                format!("there is no session {session:?}; `shrooms-agent cage ls` lists them")
            }
            SessionProblem::Exists => format!(
                "there is a session {session:?} already; pick another name, or `shrooms-agent \
                 cage rm {session}` first"
            ),
            SessionProblem::BeingMade(_) => format!(
                "session {session} is being created by another shrooms-agent command; when that \
                 ends, use it, or pick another name"
            ),
            SessionProblem::Held(holder) => held(session, holder),
            SessionProblem::Running { running, verb } => format!(
                "session {session} is busy: {} runs in its cage; {verb} it once it is idle",
                running.join(", ")
            ),
            SessionProblem::ProjectGone { dir } => format!(
                "session {session}'s project folder {} is not there (moved or renamed?); \
                 `shrooms-agent cage move {session} --dir NEW` points the session at its new \
                 folder and keeps its history",
                dir.display()
            ),
            SessionProblem::ContainerGone { container } => format!(
                "the container {container} of session {session} is gone (removed by hand?); \
                 `shrooms-agent cage move {session}` gives it a new cage and keeps its history \
                 and conversations (`cage show {session}` lists the options it had)"
            ),
            SessionProblem::OldCage { container } => old_cage(container),
            SessionProblem::NotCaged { then } => {
                format!("session {session} is not in a cage{then}")
            }
            SessionProblem::Caged => format!("session {session} is in a cage"),
            SessionProblem::NotSealed => {
                format!("session {session} is not sealed: only a sealed cage has an outbox")
            }
            SessionProblem::NotAName => format!(
                "{session:?} is not a session name: use 1 to 63 of A-Z a-z 0-9 _ . -, not \
                 starting with - or ."
            ),
            SessionProblem::RecordDamaged { file, why } => format!(
                "the record {} is damaged: {why}; nothing was done. Put it back as it was, or \
                 remove the file (`rm {}`); `shrooms-agent cage prune` then removes the \
                 container left without a session",
                file.display(),
                file.display()
            ),
            SessionProblem::IntentDamaged { file, why } => format!(
                "the intent {} is damaged: {why}; look at the session's container (`podman ps \
                 -a`), then remove the file",
                file.display()
            ),
            SessionProblem::BeingChanged { secs } => format!(
                "session {session} is being changed by another shrooms-agent command (cage \
                 limits, a setting, a rename, or its rules being loaded) for more than {secs} s; \
                 try again when it ends"
            ),
            SessionProblem::NotStarted(why) => why.words(session),
            SessionProblem::UncagedRun
            | SessionProblem::CagedRunUncaged
            | SessionProblem::NoHarnessProgram
            | SessionProblem::NothingToJoin
            | SessionProblem::EnvFileMissing { .. }
            | SessionProblem::SealedOut
            | SessionProblem::NoOwnGit
            | SessionProblem::NotALockFd { .. }
            | SessionProblem::NoProgramHere { .. }
            | SessionProblem::RunJoined
            | SessionProblem::LockNotPassed { .. }
            | SessionProblem::NotItsLock { .. } => self.turn_words(session, face),
            SessionProblem::NamedAlready
            | SessionProblem::NotFastForwarded { .. }
            | SessionProblem::MovedMeanwhile
            | SessionProblem::FolderThere { .. }
            | SessionProblem::FilesNotFrom { .. }
            | SessionProblem::NotAReceivedName { .. }
            | SessionProblem::NoReceivedFile { .. } => self.asked_words(session, face),
        }
    }

    /// The words of a turn or a command on its cage refused.
    fn turn_words(&self, session: &str, face: Face) -> String {
        match self {
            SessionProblem::CagedRunUncaged => format!(
                "session {session} is in a cage, and `cage run` runs its harness there; leave out \
                 --uncaged"
            ),
            SessionProblem::UncagedRun => format!(
                "session {session} is not in a cage: `cage run` would run its harness on this \
                 machine, as you, outside any cage; pass --uncaged to do that, or put the \
                 session back in a cage with `shrooms-agent cage move {session}`"
            ),
            SessionProblem::NoHarnessProgram => format!(
                "session {session} has no claude program: none was found when its cage was made; \
                 set [harness] claude in the config, then make the session again"
            ),
            SessionProblem::NothingToJoin => format!(
                "session {session}'s cage is not running, so there is no turn to join: --join \
                 runs a command beside a running turn and never starts the cage. Start a turn \
                 with `shrooms-agent cage exec {session}` or `cage run {session}`, or leave out \
                 --join"
            ),
            SessionProblem::SealedOut => format!(
                "session {session} is sealed, and its folder is untrusted after a sealed session: \
                 what the code under review left there (a git hook, a Makefile, an .envrc) would \
                 run as you outside the seal; read it, then delete it or clone again. To take the \
                 session out of its seal all the same, pass {}",
                face.machine_option("--unseal")
            ),
            SessionProblem::NoProgramHere { program } => format!(
                "there is no {program} program on this machine: install it, or set [harness] \
                 {program} in the config"
            ),
            SessionProblem::RunJoined => "`cage run` has no --join".to_string(),
            SessionProblem::NotALockFd { fd } => {
                format!("descriptor {fd} cannot be a session lock")
            }
            SessionProblem::LockNotPassed { fd } => {
                format!("the lock of session {session} was not passed on as descriptor {fd}")
            }
            SessionProblem::NotItsLock { fd, lock } => format!(
                "descriptor {fd} is not the lock of session {session} ({})",
                lock.display()
            ),
            SessionProblem::NoOwnGit => format!(
                "session {session}'s cage has no git directory of its own (made with --writable \
                 .git): its commits are in your repository already"
            ),
            SessionProblem::EnvFileMissing { env_file } => format!(
                "session {session}'s cage runs, but its env file {} is missing: start a turn with \
                 `shrooms-agent cage exec {session}`, then join it",
                env_file.display()
            ),
            // Worded by `words`.
            _ => String::new(),
        }
    }

    /// The words of a request about its name or files refused.
    fn asked_words(&self, session: &str, face: Face) -> String {
        match self {
            SessionProblem::MovedMeanwhile => {
                format!("session {session} was moved meanwhile; set its limits again")
            }
            SessionProblem::NotFastForwarded { why } => format!(
                "your branch was not fast-forwarded to session {session}'s: {}",
                why.words(face)
            ),
            SessionProblem::FolderThere { to, new } => format!(
                "{} is there already (left by an earlier session {new}?), and session \
                 {session}'s own would go there: move it away, or pick another name",
                to.display()
            ),
            SessionProblem::NamedAlready => format!("session {session} is named {session} already"),
            SessionProblem::FilesNotFrom { sender } => format!(
                "session {session} does not take files from {sender}: `shrooms-agent files list \
                 {session}` shows whom it does"
            ),
            SessionProblem::NotAReceivedName { file } => format!(
                "{file:?} is not the name of a received file: give it as `shrooms-agent files \
                 received {session}` lists it"
            ),
            SessionProblem::NoReceivedFile { file, sender } => format!(
                "session {session} has no file {file:?} from {sender}: `shrooms-agent files \
                 received {session}` lists what it has"
            ),
            // Worded by `words`.
            _ => String::new(),
        }
    }

    /// The kind of error it is.
    fn kind(&self) -> Kind {
        match self {
            SessionProblem::Missing => Kind::NotFound,
            SessionProblem::Exists | SessionProblem::FolderThere { .. } => Kind::Exists,
            SessionProblem::NotAName
            | SessionProblem::NotCaged { .. }
            | SessionProblem::Caged
            | SessionProblem::NotSealed
            | SessionProblem::UncagedRun
            | SessionProblem::CagedRunUncaged
            | SessionProblem::NothingToJoin
            | SessionProblem::SealedOut
            | SessionProblem::NamedAlready
            | SessionProblem::FilesNotFrom { .. }
            | SessionProblem::NotAReceivedName { .. }
            | SessionProblem::NoOwnGit
            | SessionProblem::RunJoined
            | SessionProblem::NotALockFd { .. } => Kind::BadInput,
            SessionProblem::NoReceivedFile { .. } => Kind::NotFound,
            SessionProblem::BeingMade(_)
            | SessionProblem::Held(_)
            | SessionProblem::Running { .. }
            | SessionProblem::BeingChanged { .. }
            | SessionProblem::MovedMeanwhile => Kind::Busy,
            SessionProblem::ProjectGone { .. }
            | SessionProblem::ContainerGone { .. }
            | SessionProblem::OldCage { .. }
            | SessionProblem::NotStarted(_)
            | SessionProblem::RecordDamaged { .. }
            | SessionProblem::IntentDamaged { .. }
            | SessionProblem::NoHarnessProgram
            | SessionProblem::EnvFileMissing { .. }
            | SessionProblem::LockNotPassed { .. }
            | SessionProblem::NoProgramHere { .. }
            | SessionProblem::NotFastForwarded { .. }
            | SessionProblem::NotItsLock { .. } => Kind::Failed,
        }
    }
}

/// The error of what a failed act called, kept as the system's kind of
/// error where the system said it, and its own words (`No such file or
/// directory (os error 2)`, `expected value at line 1 column 1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub io: Option<std::io::ErrorKind>,
    pub said: String,
}

impl Cause {
    /// The cause an error of what was called gives.
    pub fn of(e: &(dyn std::error::Error + 'static)) -> Self {
        let io = e
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                e.downcast_ref::<rustix::io::Errno>()
                    .map(|n| std::io::Error::from(*n).kind())
            });
        Cause {
            io,
            said: e.to_string(),
        }
    }
}

impl What {
    /// The words of what went wrong, for `face`.
    fn words(&self, face: Face) -> String {
        match self {
            What::Said(s) => s.clone(),
            What::Worded { terminal, http } => match face {
                Face::Terminal => terminal.clone(),
                Face::Http => http.clone(),
            },
            What::Field { field, why } => format!("{}: {why}", face.field(field)),
            What::Session { session, problem } => problem.words(session, face),
            What::Folder { dir, problem } => problem.words(dir, face),
            What::Choice(problem) => problem.words(face),
            What::Conversation { id, problem } => problem.words(id),
            What::Limits(problem) => problem.words(face),
            What::Pack(problem) => problem.words(face),
            What::Protect(problem) => problem.words(face),
            What::Listen { addr, problem } => problem.words(addr),
            What::Remote { machine, problem } => problem.words(machine),
            What::Token { file, problem } => problem.words(file),
            What::State { path, problem } => problem.words(path),
            What::Git { path, problem } => problem.words(path),
            What::Input(problem) => problem.words(),
            What::Rules { container, problem } => problem.words(container),
            What::Egress(problem) => problem.words(),
            What::Image(problem) => problem.words(face),
            What::Make(problem) => problem.words(),
            What::NotStopped { busy, damaged } => not_stopped_words(busy, damaged),
            What::Turn(problem) => problem.words(),
            What::NoHome => "cannot tell the home directory: set HOME".to_string(),
            What::NoRandom => "getrandom failed".to_string(),
            What::Config {
                file,
                key: Some(key),
                why,
            } => format!("config file {}: key `{key}`: {why}", file.display()),
            What::Config {
                file,
                key: None,
                why,
            } => format!("config file {}: {why}", file.display()),
            What::BuildFailed { failure, log } => build_failed(failure, log.as_deref()),
            What::BeingBuilt { last: None } => BEING_BUILT.to_string(),
            What::BeingBuilt {
                last: Some(failure),
            } => format!("the last build failed ({failure}); {BEING_BUILT}"),
            What::Answered {
                machine,
                url,
                status,
                reason,
                said,
            } => answered(machine, url, *status, reason, said.as_deref()),
            What::NotInstalled {
                program,
                package,
                needed_for,
            } => {
                let why = needed_for.map(|w| format!("; {w}")).unwrap_or_default();
                format!("{program} is not installed (Debian: apt install {package}){why}")
            }
            What::Drop { session, refused } => refused.words(session),
            What::Body { what, problem } => problem.words(what),
            What::NotRunning { container, so } => {
                format!("the container {container} is not running, so {so}")
            }
            What::Unmet(what) => what.to_string(),
            What::NoAnswer { label, within } => format!("{label}: no answer within {within:?}"),
            What::SaidTooMuch { label, max } => {
                format!("{label}: it printed more than {max} bytes, more than is ever read of it")
            }
            What::NoPodman { caged: false } => NO_PODMAN.to_string(),
            What::NoPodman { caged: true } => NO_PODMAN_FOR_SESSION.to_string(),
            What::Act { doing, cause } => format!("{doing}: {}", cause.said),
            What::Ran { label, exited } => exited.words(label),
        }
    }
}

/// A build of ours that failed, and, where its log is named, the ways on.
fn build_failed(failure: &BuildFailure, log: Option<&std::path::Path>) -> String {
    match log {
        None => failure.to_string(),
        Some(log) => format!(
            "{failure}. Its log: {}. `shrooms-agent image build --wait` builds it again and \
             shows how (`image status` says how the last one went)",
            log.display()
        ),
    }
}

/// Another machine's answer to a send, in words that say it is that
/// machine's ([`What::Answered`]).
fn answered(machine: &str, url: &str, status: u16, reason: &str, said: Option<&str>) -> String {
    let said = said.unwrap_or("(no reason given)");
    let answered = format!("machine {machine} ({url}) answered {status} {reason}");
    match status {
        404 => format!("{answered}: {said} (on {machine}; check the session's name there)"),
        401 => format!(
            "{answered}: its serve wants a token that this machine did not send: {said}; give \
             [machines] {machine} a token_file holding the first line of that serve's \
             --token-file"
        ),
        403 => format!("{url} did not take it: {said}"),
        _ => format!("{answered}: {said}"),
    }
}

impl BodyProblem {
    fn words(&self, what: &str) -> String {
        match self {
            BodyProblem::Chunked => {
                format!("{what} needs Content-Length (a chunked body is not taken)")
            }
            BodyProblem::NoLength => format!("{what} needs Content-Length"),
            BodyProblem::TooLarge { len, max } => format!(
                "the body is {len} bytes; a JSON body may be at most {max} ({})",
                size_text(*max)
            ),
        }
    }
}

impl Exited {
    /// How the program named `label` ended: its last word on stderr says
    /// most, for podman ("Error: ..."); the whole stderr is kept for
    /// `--json` and the logs.
    fn words(&self, label: &str) -> String {
        match self
            .stderr
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
        {
            Some(line) => format!("{label}: {line}"),
            None => match self.status {
                Some(c) => format!("{label}: exited with status {c}"),
                None => format!("{label}: exited with a signal"),
            },
        }
    }
}

/// What was said around an error as it went up: what was being done
/// (`moving web: ...`), or what followed (`...; the cage was stopped
/// again`), in the order it was added.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Around {
    Doing(Doing),
    Then(After),
    /// A sentence after the words, for the terminal only (a way out that
    /// names the command line's options).
    OnTerminal(&'static str),
}

/// An error of an operation: its kind (the exit code, the HTTP status), what
/// went wrong as data, and what was said around it on the way up; each face
/// words it at the edge ([`Error::words`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: Kind,
    what: Box<What>,
    around: Vec<Around>,
    /// What to do next, worded by the face ([`Error::words`]).
    pub next: Option<Next>,
    /// What the error is about, as data ([`Subject`]).
    pub subject: Option<Box<Subject>>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` that went wrong as `what` says.
    pub fn of(kind: Kind, what: What) -> Self {
        Error {
            kind,
            what: Box::new(what),
            around: Vec::new(),
            next: None,
            subject: None,
        }
    }

    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self::of(kind, What::Said(message.into()))
    }

    /// An act that failed ([`What::Act`]): `doing` names the act and its
    /// path (`Doing::Read`: `reading /etc/x`), `cause` is the error of
    /// what it called.
    pub fn act(doing: impl Into<Doing>, cause: &(dyn std::error::Error + 'static)) -> Self {
        Self::of(
            Kind::Failed,
            What::Act {
                doing: doing.into(),
                cause: Cause::of(cause),
            },
        )
    }

    /// A session that cannot be used as asked: the kind is the problem's
    /// (no such session, the name taken, held by another command).
    pub fn session(session: impl Into<String>, problem: SessionProblem) -> Self {
        Self::of(
            problem.kind(),
            What::Session {
                session: session.into(),
                problem,
            },
        )
    }

    /// A project folder refused for a cage (bad input).
    pub fn folder(dir: &std::path::Path, problem: FolderProblem) -> Self {
        Self::of(
            Kind::BadInput,
            What::Folder {
                dir: dir.to_path_buf(),
                problem,
            },
        )
    }

    /// The options chosen for a new cage refused (bad input).
    pub fn choice(problem: ChoiceProblem) -> Self {
        Self::of(Kind::BadInput, What::Choice(problem))
    }

    /// A cage's limits refused (bad input), or the machine for them
    /// (failed).
    pub fn limits(problem: LimitsProblem) -> Self {
        Self::of(problem.kind(), What::Limits(problem))
    }

    /// An outbox pack refused (bad input; too large for an archive over
    /// what a machine takes), or an outbox with nothing to pack (failed).
    pub fn pack(problem: PackProblem) -> Self {
        Self::of(problem.kind(), What::Pack(problem))
    }

    /// A command for machine `machine` refused (bad input), or the tool
    /// there not reached (failed).
    pub fn remote(machine: &str, problem: RemoteProblem) -> Self {
        Self::of(
            problem.kind(),
            What::Remote {
                machine: machine.to_string(),
                problem,
            },
        )
    }

    /// `serve --listen` refused at `addr` (bad input).
    pub fn listen(addr: std::net::SocketAddr, problem: ListenProblem) -> Self {
        Self::of(Kind::BadInput, What::Listen { addr, problem })
    }

    /// A cage refused over the project's protected paths (bad input).
    pub fn protect(problem: ProtectProblem) -> Self {
        Self::of(Kind::BadInput, What::Protect(problem))
    }

    /// A token file refused (bad input).
    pub fn token(file: &std::path::Path, problem: TokenProblem) -> Self {
        Self::of(
            Kind::BadInput,
            What::Token {
                file: file.to_path_buf(),
                problem,
            },
        )
    }

    /// A file or folder of the tool's own refused (bad input) or found
    /// wrong (failed).
    pub fn state(path: &std::path::Path, problem: StateProblem) -> Self {
        Self::of(
            problem.kind(),
            What::State {
                path: path.to_path_buf(),
                problem,
            },
        )
    }

    /// A git directory found wrong (failed).
    pub fn git(path: &std::path::Path, problem: GitProblem) -> Self {
        Self::of(
            Kind::Failed,
            What::Git {
                path: path.to_path_buf(),
                problem,
            },
        )
    }

    /// A word, path, name or variable refused (bad input).
    pub fn input(problem: InputProblem) -> Self {
        Self::of(Kind::BadInput, What::Input(problem))
    }

    /// The network rules of a cage not loaded (failed).
    pub fn rules(container: &str, problem: RulesProblem) -> Self {
        Self::of(
            Kind::Failed,
            What::Rules {
                container: container.to_string(),
                problem,
            },
        )
    }

    /// A cage's egress log's listener not started (failed).
    pub fn egress(problem: EgressProblem) -> Self {
        Self::of(Kind::Failed, What::Egress(problem))
    }

    /// An image missing or not built (bad input where the request named
    /// it, else failed).
    pub fn image(problem: ImageProblem) -> Self {
        Self::of(problem.kind(), What::Image(problem))
    }

    /// A new cage refused (bad input), or its making failed (failed).
    pub fn make(problem: MakeProblem) -> Self {
        Self::of(problem.kind(), What::Make(problem))
    }

    /// `cage stop --all` left cages running: failed where a record does
    /// not read, else busy.
    pub fn not_stopped(busy: Vec<String>, damaged: Vec<String>) -> Self {
        let kind = if damaged.is_empty() {
            Kind::Busy
        } else {
            Kind::Failed
        };
        Self::of(kind, What::NotStopped { busy, damaged })
    }

    /// What a turn's process starts beside its cage, not started (failed).
    pub fn turn(problem: TurnProblem) -> Self {
        Self::of(Kind::Failed, What::Turn(problem))
    }

    /// The home directory cannot be told (failed).
    pub fn no_home() -> Self {
        Self::of(Kind::Failed, What::NoHome)
    }

    /// No random bytes from the system (failed).
    pub fn no_random() -> Self {
        Self::of(Kind::Failed, What::NoRandom)
    }

    /// The conversation a sealed cage was given refused (bad input).
    pub fn conversation(id: &str, problem: ConversationProblem) -> Self {
        Self::of(
            Kind::BadInput,
            What::Conversation {
                id: id.to_string(),
                problem,
            },
        )
    }

    /// What went wrong.
    pub fn what(&self) -> &What {
        &self.what
    }

    /// An error whose words differ by face (they name fields of a request,
    /// or an option only the command line has): `words` is asked once for
    /// each face.
    pub fn worded(kind: Kind, words: impl Fn(Face) -> String) -> Self {
        let terminal = words(Face::Terminal);
        let http = words(Face::Http);
        let what = if http == terminal {
            What::Said(terminal)
        } else {
            What::Worded { terminal, http }
        };
        Self::of(kind, what)
    }

    /// A value refused for a field of a request: `--memory: WHY` on the
    /// terminal, `field "memory": WHY` over HTTP, the field kept as data.
    pub fn bad_field(field: &'static str, why: impl fmt::Display) -> Self {
        Self::of(
            Kind::BadInput,
            What::Field {
                field,
                why: why.to_string(),
            },
        )
    }

    /// The words of the error for the terminal, with what was said around
    /// it, without what to do next: what a record or a log keeps of it.
    pub fn message(&self) -> String {
        self.said(Face::Terminal)
    }

    /// What went wrong and what was said around it, as `face` words them.
    fn said(&self, face: Face) -> String {
        self.around
            .iter()
            .fold(self.what.words(face), |words, around| match around {
                Around::Doing(what) => format!("{what}: {words}"),
                Around::Then(after) => format!("{words}; {after}"),
                Around::OnTerminal(sentence) => match face {
                    Face::Terminal => format!("{}. {sentence}", words.trim_end_matches('.')),
                    Face::Http => words,
                },
            })
    }

    /// What the error is about.
    pub fn about(self, subject: Subject) -> Self {
        Error {
            subject: Some(Box::new(subject)),
            ..self
        }
    }

    /// The field whose value was refused, if that is what it is about: a
    /// refused value's ([`What::Field`]), or the field words that name
    /// several were said to be about ([`Subject::Field`]).
    pub fn field(&self) -> Option<&'static str> {
        match (&*self.what, self.subject.as_deref()) {
            (What::Field { field, .. }, _) | (_, Some(Subject::Field(field))) => Some(field),
            (What::Choice(problem), _) => problem.field(),
            (What::Limits(problem), _) => problem.field(),
            (What::Pack(problem), _) => problem.field(),
            (What::Folder { problem, .. }, _) => problem.field(),
            _ => None,
        }
    }

    /// What holds the session, for a busy one that said.
    pub fn holder(&self) -> Option<&Holder> {
        match &*self.what {
            What::Session {
                problem: SessionProblem::Held(h) | SessionProblem::BeingMade(h),
                ..
            } => Some(h),
            _ => None,
        }
    }

    /// The field of an HTTP request's body the error is about: a refused
    /// value's ([`Error::field`]), or where serde refused the body
    /// ([`Subject::BodyField`]).
    pub fn body_field(&self) -> Option<&str> {
        match self.subject.as_deref() {
            Some(Subject::BodyField(f)) => Some(f),
            _ => self.field(),
        }
    }

    /// What runs in the cage of a session refused as busy for it.
    pub fn running(&self) -> Option<&[String]> {
        match &*self.what {
            What::Session {
                problem: SessionProblem::Running { running, .. },
                ..
            } => Some(running),
            _ => None,
        }
    }

    /// The podman call that failed ([`Kind::PodmanFailed`]).
    pub fn podman(&self) -> Option<PodmanCall> {
        let x = self.exited()?;
        (self.kind == Kind::PodmanFailed).then(|| PodmanCall {
            call: x.call.clone(),
            status: x.status,
        })
    }
    /// How the process ended, for one that ran and failed.
    pub fn exited(&self) -> Option<&Exited> {
        match &*self.what {
            What::Ran { exited, .. } => Some(exited),
            _ => None,
        }
    }

    /// A process that ran and failed (`kind`: [`Kind::PodmanFailed`] for
    /// podman), named in the words by its `label` (`podman start`), and by
    /// its call as data ([`Exited`]).
    pub fn ran(kind: Kind, label: impl Into<String>, exited: Exited) -> Self {
        Self::of(
            kind,
            What::Ran {
                label: label.into(),
                exited,
            },
        )
    }
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(Kind::Failed, message)
    }
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(Kind::BadInput, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Kind::NotFound, message)
    }
    pub fn busy(message: impl Into<String>) -> Self {
        Self::new(Kind::Busy, message)
    }
    /// An act on what the request named (a file given by its path) that
    /// failed ([`What::Act`]): bad input, as the path was the asker's.
    pub fn act_on_input(
        doing: impl Into<Doing>,
        cause: &(dyn std::error::Error + 'static),
    ) -> Self {
        Error {
            kind: Kind::BadInput,
            ..Self::act(doing, cause)
        }
    }

    /// A build of one of our images that failed ([`What::BuildFailed`]).
    pub fn build_failed(failure: BuildFailure, log: Option<&std::path::Path>) -> Self {
        Self::of(
            Kind::Failed,
            What::BuildFailed {
                failure,
                log: log.map(std::path::Path::to_path_buf),
            },
        )
    }

    /// The image for the session's cage is being built: not ready yet.
    pub fn being_built(last: Option<BuildFailure>) -> Self {
        Self::of(Kind::NotReady, What::BeingBuilt { last })
    }

    /// Another machine's serve answered `status` to what was sent to it
    /// ([`What::Answered`]). Its kind is the status's, but for 404 and 401:
    /// those are the other machine's, and a failure here (as `NotFound` or
    /// `Forbidden` they would read as "no such session" of this machine, or
    /// as this machine refusing its caller).
    pub fn answered(
        machine: &str,
        url: &str,
        status: u16,
        reason: &'static str,
        said: Option<&str>,
    ) -> Self {
        let kind = match status {
            403 => Kind::Forbidden,
            409 => Kind::Busy,
            413 => Kind::TooLarge,
            503 => Kind::NotReady,
            400 => Kind::BadInput,
            _ => Kind::Failed,
        };
        Self::of(
            kind,
            What::Answered {
                machine: machine.to_string(),
                url: url.to_string(),
                status,
                reason,
                said: said.map(str::to_string),
            },
        )
    }

    /// A program the tool needs is not installed ([`What::NotInstalled`]).
    pub fn not_installed(
        program: &'static str,
        package: &'static str,
        needed_for: Option<&'static str>,
    ) -> Self {
        Self::of(
            Kind::Failed,
            What::NotInstalled {
                program,
                package,
                needed_for,
            },
        )
    }

    /// A file sent to `session` refused ([`What::Drop`]); the kind is the
    /// refusal's (bad input, forbidden, too large).
    pub fn drop_refused(session: &str, refused: DropRefused) -> Self {
        Self::of(
            refused.kind(),
            What::Drop {
                session: session.to_string(),
                refused,
            },
        )
    }

    /// An HTTP request's body refused before it was read ([`What::Body`]).
    pub fn body(what: &'static str, problem: BodyProblem) -> Self {
        let kind = match problem {
            BodyProblem::TooLarge { .. } => Kind::TooLarge,
            BodyProblem::Chunked | BodyProblem::NoLength => Kind::BadInput,
        };
        Self::of(kind, What::Body { what, problem })
    }

    /// What the program relies on did not hold ([`What::Unmet`]).
    pub fn unmet(what: &'static str) -> Self {
        Self::of(Kind::Failed, What::Unmet(what))
    }

    /// A container not running, so that `so` cannot be done.
    pub fn not_running(container: &str, so: &'static str) -> Self {
        Self::of(
            Kind::Failed,
            What::NotRunning {
                container: container.to_string(),
                so,
            },
        )
    }

    /// A value of the config file `file` refused: for its `key`, or the
    /// file as a whole. Bad input: nothing was done.
    pub fn config(file: &std::path::Path, key: Option<&str>, why: impl fmt::Display) -> Self {
        Self::of(
            Kind::BadInput,
            What::Config {
                file: file.to_path_buf(),
                key: key.map(str::to_string),
                why: why.to_string(),
            },
        )
    }

    /// A machine that offers no cages (no podman): the words the apps show.
    pub fn no_podman() -> Self {
        Self::of(Kind::NoPodman, What::NoPodman { caged: false })
    }

    /// The same, for a command on a session that is caged already.
    pub fn no_podman_for_session() -> Self {
        Self::of(Kind::NoPodman, What::NoPodman { caged: true })
    }
    /// The HTTP status `serve` answers this error with: its kind's.
    pub fn http_status(&self) -> u16 {
        self.kind.http_status()
    }

    /// Seconds for `Retry-After`, for the errors answered with 503.
    pub fn retry_after(&self) -> Option<u32> {
        (self.http_status() == 503).then_some(RETRY_AFTER_SECS)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(Kind::Forbidden, message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(Kind::TooLarge, message)
    }

    /// What to do next, worded by each face.
    pub fn next(self, next: Next) -> Self {
        Error {
            next: Some(next),
            ..self
        }
    }

    /// The message as `face` gives it: with what to do next in its words.
    pub fn words(&self, face: Face) -> String {
        // Each face names the same steps its own way: a person runs the
        // command again and passes a flag, a client sends again and sets a
        // field of its body.
        let again = match face {
            Face::Terminal => "run it again then",
            Face::Http => "send again then",
        };
        let other_image = |config: &str| match face {
            Face::Terminal => format!("--image IMAGE, or the `image` key in {config}"),
            Face::Http => format!("the request's \"image\", or the `image` key in {config}"),
        };
        let message = self.said(face);
        match &self.next {
            None => message,
            // The seed's sentence on both faces, word for word; the
            // terminal's hint after it, on a line of its own.
            Some(Next::AgainWithHint { hint }) => match face {
                Face::Terminal => format!("{}; send again then\n{hint}", message),
                Face::Http => format!("{}; send again then", message),
            },
            Some(Next::OtherImage { config }) => format!(
                "{}; or make the cage from another image: {}",
                message,
                other_image(config)
            ),
            Some(Next::AgainOrOtherImage { config, hint }) => {
                let hint = match face {
                    Face::Terminal => format!(" ({hint})"),
                    Face::Http => String::new(),
                };
                format!(
                    "{}{hint}; {again}, or make the cage from another image now: {}",
                    message,
                    other_image(config)
                )
            }
        }
    }

    /// Prefix the message with what was being done, keeping the kind.
    pub fn context(mut self, what: impl Into<Doing>) -> Self {
        self.around.push(Around::Doing(what.into()));
        self
    }

    /// A sentence after the words, on the terminal only (`... . Without
    /// --dir, ...`): the end of the words before it is a full stop.
    pub fn then_on_terminal(mut self, sentence: &'static str) -> Self {
        self.around.push(Around::OnTerminal(sentence));
        self
    }

    /// What followed, added after the message (`...; the cage was stopped
    /// again`), the kind, the process's exit and the next step kept.
    pub fn then(mut self, after: impl Into<After>) -> Self {
        self.around.push(Around::Then(after.into()));
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for Error {}

/// An error as JSON gives it where it is a value of a result (a dry run's
/// refusal, a damaged record): its words for the terminal, as `--json`
/// gives every error.
impl serde::Serialize for Error {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.message())
    }
}

/// Attach "what we were doing with which path" to an I/O error.
pub trait IoContext<T> {
    fn ctx(self, what: impl FnOnce() -> Doing) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, what: impl FnOnce() -> Doing) -> Result<T> {
        self.map_err(|e| Error::act(what(), &e))
    }
}

/// Errors with a subject, which each face's tests render.
#[cfg(test)]
pub mod samples {
    use super::*;

    /// A session held by a `cage exec` of pid 7.
    pub fn busy_by_exec() -> Error {
        Error::session(
            "s",
            SessionProblem::Held(Holder {
                what: "exec".into(),
                since: None,
                pid: Some(7),
            }),
        )
    }

    /// `podman start c1` that exited 125.
    pub fn podman_start_failed() -> Error {
        Error::ran(
            Kind::PodmanFailed,
            "podman start",
            Exited {
                call: "podman start c1".into(),
                status: Some(125),
                stderr: "Error: x\n".into(),
            },
        )
    }

    /// A move refused for a shell and claude running in the cage.
    pub fn busy_in_its_cage() -> Error {
        Error::session(
            "s",
            SessionProblem::Running {
                running: vec!["bash".to_string(), "claude --resume".to_string()],
                verb: "move".into(),
            },
        )
    }

    /// `podman unshare rm` of a folder under the state folder, that
    /// exited 1: the call names a path of the machine.
    pub fn podman_unshare_rm_failed() -> Error {
        Error::ran(
            Kind::PodmanFailed,
            "podman unshare",
            Exited {
                call: "podman unshare rm /home/u/.local/state/shrooms-agent/sessions/my web/copies"
                    .into(),
                status: Some(1),
                stderr: "rm: cannot remove: Permission denied\n".into(),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_documented_ones() {
        assert_eq!(Kind::Failed.exit_code(), 1);
        assert_eq!(Kind::BadInput.exit_code(), 2);
        assert_eq!(Kind::NotFound.exit_code(), 2);
        assert_eq!(Kind::Busy.exit_code(), 3);
        assert_eq!(Kind::NotReady.exit_code(), 4);
        let e = Error::new(Kind::NotReady, "being built").next(Next::AgainWithHint {
            hint: "its log /var/x.log".into(),
        });
        assert_eq!(
            e.clone().context("x").words(Face::Http),
            "x: being built; send again then"
        );
        assert_eq!(e.words(Face::Http), "being built; send again then");
        assert_eq!(
            e.words(Face::Terminal),
            "being built; send again then\nits log /var/x.log"
        );
        assert_eq!(Error::failed("f").words(Face::Http), "f");
        let e = Error::failed("failed").next(Next::OtherImage {
            config: "/c.toml".into(),
        });
        assert_eq!(
            e.words(Face::Terminal),
            "failed; or make the cage from another image: --image IMAGE, or the `image` key \
             in /c.toml"
        );
        assert!(!e.words(Face::Http).contains("--image"));
        let e = Error::new(Kind::NotReady, "building").next(Next::AgainOrOtherImage {
            config: "/c.toml".into(),
            hint: "its log /var/x.log".into(),
        });
        assert_eq!(
            e.words(Face::Terminal),
            "building (its log /var/x.log); run it again then, or make the cage from another \
             image now: --image IMAGE, or the `image` key in /c.toml"
        );
        assert_eq!(
            e.words(Face::Http),
            "building; send again then, or make the cage from another image now: the \
             request's \"image\", or the `image` key in /c.toml"
        );
        assert_eq!(Kind::Forbidden.exit_code(), 1);
        assert_eq!(Kind::TooLarge.exit_code(), 2);
        assert_eq!(Kind::NoPodman.exit_code(), 1);
        assert_eq!(Kind::PodmanFailed.exit_code(), 1);
        assert_eq!(Kind::Exists.exit_code(), 2);
        assert_eq!(Kind::Exists.name(), "exists");
    }

    #[test]
    fn http_statuses() {
        let status = |e: Error| (e.http_status(), e.retry_after());
        assert_eq!(status(Error::bad_input("x")), (400, None));
        assert_eq!(status(Error::forbidden("x")), (403, None));
        assert_eq!(status(Error::not_found("x")), (404, None));
        assert_eq!(status(Error::busy("x")), (409, None));
        assert_eq!(status(Error::new(Kind::Exists, "x")), (409, None));
        assert_eq!(status(Error::too_large("x")), (413, None));
        assert_eq!(
            status(Error::new(Kind::NotReady, "x")),
            (503, Some(RETRY_AFTER_SECS))
        );
        assert_eq!(status(Error::failed("x")), (500, None));
        assert_eq!(
            status(Error::ran(
                Kind::PodmanFailed,
                "podman x",
                Exited {
                    call: "podman x".into(),
                    status: Some(125),
                    stderr: "Error: x".into()
                }
            )),
            (500, None)
        );
        assert_eq!(status(Error::no_podman()), (503, Some(RETRY_AFTER_SECS)));
        assert_eq!(
            status(Error::no_podman_for_session().context("moving s")),
            (503, Some(RETRY_AFTER_SECS))
        );
    }

    /// The exit code and the status come from the kind, never the words:
    /// an error that only says "no podman" is what its kind says it is, and
    /// a "no podman" in other words is still one.
    #[test]
    fn the_kind_alone_decides() {
        for kind in [
            Kind::Failed,
            Kind::BadInput,
            Kind::NotFound,
            Kind::Busy,
            Kind::NotReady,
            Kind::Forbidden,
            Kind::TooLarge,
            Kind::NoPodman,
            Kind::PodmanFailed,
        ] {
            for message in [
                "",
                NO_PODMAN,
                NO_PODMAN_FOR_SESSION,
                "podman inspect: Error: no such container x",
                "session x: nothing in its outbox",
            ] {
                let e = Error::new(kind, message).context("moving s");
                assert_eq!(e.kind.exit_code(), kind.exit_code(), "{kind:?} {message:?}");
                assert_eq!(e.http_status(), kind.http_status(), "{kind:?} {message:?}");
            }
        }
        let e = Error::failed(NO_PODMAN);
        assert_eq!(
            (e.kind.exit_code(), e.http_status(), e.retry_after()),
            (1, 500, None)
        );
        let e = Error::bad_input(NO_PODMAN_FOR_SESSION);
        assert_eq!((e.kind.exit_code(), e.http_status()), (2, 400));
        let e = Error::no_podman();
        assert_eq!(e.message(), NO_PODMAN);
        assert_eq!(
            (e.kind.exit_code(), e.http_status(), e.retry_after()),
            (1, 503, Some(RETRY_AFTER_SECS))
        );
    }

    #[test]
    fn then_keeps_the_kind() {
        let e = Error::busy("held").then("the cage was stopped again");
        assert_eq!(e.kind, Kind::Busy);
        assert_eq!(e.message(), "held; the cage was stopped again");
    }

    #[test]
    fn context_keeps_the_kind() {
        let e = Error::busy("held").context("session x");
        assert_eq!(e.kind, Kind::Busy);
        assert_eq!(e.message(), "session x: held");
        let e = Error::ran(
            Kind::PodmanFailed,
            "podman rm",
            Exited {
                call: String::new(),
                status: Some(2),
                stderr: "Error: no\n".into(),
            },
        )
        .context("removing x");
        assert_eq!(e.message(), "removing x: podman rm: Error: no");
        assert_eq!(e.kind, Kind::PodmanFailed);
        assert_eq!(
            e.exited(),
            Some(&Exited {
                call: String::new(),
                status: Some(2),
                stderr: "Error: no\n".into()
            })
        );
    }

    /// A refused field: the option on the terminal, the body's field over
    /// HTTP, the field itself kept as data through context and what
    /// followed.
    #[test]
    fn a_field_is_worded_by_each_face() {
        let e = Error::bad_field("memory", "\"12x\" is not a size");
        assert_eq!(e.kind, Kind::BadInput);
        assert_eq!(e.field(), Some("memory"));
        assert_eq!(e.words(Face::Terminal), "--memory: \"12x\" is not a size");
        assert_eq!(
            e.words(Face::Http),
            "field \"memory\": \"12x\" is not a size"
        );
        let e = e.context("session web").then("nothing was changed");
        assert_eq!((e.kind, e.field()), (Kind::BadInput, Some("memory")));
        assert_eq!(
            e.words(Face::Terminal),
            "session web: --memory: \"12x\" is not a size; nothing was changed"
        );
        assert_eq!(
            e.words(Face::Http),
            "session web: field \"memory\": \"12x\" is not a size; nothing was changed"
        );
        assert_eq!(e.to_string(), e.words(Face::Terminal));
        // Words that name several fields, and an option only the command
        // line has.
        let e = Error::worded(Kind::BadInput, |f| {
            format!(
                "{} does nothing without {}: add it, or leave out {}; or {}",
                f.field("meshes"),
                f.field("shared"),
                f.field("meshes"),
                f.machine_option("--unseal")
            )
        })
        .about(Subject::Field("meshes"));
        assert_eq!(
            e.words(Face::Terminal),
            "--mesh does nothing without --shared: add it, or leave out --mesh; or --unseal"
        );
        assert_eq!(
            e.words(Face::Http),
            "field \"meshes\" does nothing without field \"shared\": add it, or leave out \
             field \"meshes\"; or `--unseal` (on the command line, at the machine)"
        );
        // Words the same on both faces keep none apart.
        assert_eq!(
            Error::worded(Kind::Failed, |_| "x".into()).what(),
            &What::Said("x".into())
        );
        assert_eq!(flag_of("auto_approve"), "--auto-approve");
        assert_eq!(flag_of("meshes"), "--mesh");
        assert_eq!(flag_of("tokens"), "--tokens");
    }

    /// A busy session's holder and a failed podman call are data, as JSON
    /// gives them.
    #[test]
    fn holders_and_podman_calls_are_data() {
        let e = Error::session(
            "web",
            SessionProblem::Held(Holder {
                what: "exec".into(),
                since: None,
                pid: Some(42),
            }),
        );
        assert_eq!(e.kind, Kind::Busy);
        assert_eq!(
            e.message(),
            "session web is busy: another shrooms-agent command (an exec or run, pid 42) is \
             using it; try again when it ends"
        );
        assert_eq!(
            serde_json::to_value(e.holder().unwrap()).unwrap(),
            serde_json::json!({"what": "exec", "since": null, "pid": 42})
        );
        assert_eq!(e.podman(), None);
        let x = Exited {
            call: "podman start c1".into(),
            status: Some(125),
            stderr: "Error: x\n".into(),
        };
        let e = Error::ran(Kind::PodmanFailed, "podman start", x.clone());
        assert_eq!(e.message(), "podman start: Error: x");
        assert_eq!(
            serde_json::to_value(e.podman().unwrap()).unwrap(),
            serde_json::json!({"call": "podman start c1", "status": 125})
        );
        // Another program's failure is not podman's.
        assert_eq!(Error::ran(Kind::Failed, "nft", x).podman(), None);
    }

    /// HTTP's view of a podman call has no path of the machine, even one
    /// with spaces; names (an image's with its registry) are kept.
    #[test]
    fn a_podman_call_for_http_has_no_path() {
        let http = |call: &str| {
            PodmanCall {
                call: call.into(),
                status: Some(1),
            }
            .without_paths()
        };
        assert_eq!(
            http("podman unshare rm /home/u/.local/state/shrooms-agent/sessions/a b/copies"),
            PodmanCall {
                call: "podman unshare rm".into(),
                status: Some(1)
            }
        );
        for kept in [
            "podman start shrooms-web-1a2b",
            "podman image rm localhost/shrooms-agent:workbench",
            "podman build",
        ] {
            assert_eq!(http(kept).call, kept);
        }
        let e = samples::podman_unshare_rm_failed().context("removing web");
        assert_eq!(
            e.podman().unwrap().without_paths().call,
            "podman unshare rm"
        );
        assert!(e.podman().unwrap().call.contains("/home/u/"));
    }

    /// The words of each subject, golden: as the sites that made them as
    /// sentences said them.
    #[test]
    fn every_subject_is_worded_as_before() {
        let d = |r| Error::drop_refused("web", r);
        let ip: std::net::IpAddr = "10.0.0.9".parse().unwrap();
        assert_eq!(
            d(DropRefused::NoMachineAt { ip }).message(),
            "10.0.0.9 is the address of no machine in this machine's [machines]: files are taken \
             only from machines it names"
        );
        assert_eq!(
            d(DropRefused::MachinesAt {
                ip,
                machines: vec!["a".into(), "b".into()]
            })
            .message(),
            "10.0.0.9 is the address of several machines in [machines] (a, b): it cannot tell \
             which one sent this"
        );
        assert_eq!(d(DropRefused::NoMachineAt { ip }).kind, Kind::Forbidden);
        let broke = d(DropRefused::BrokeOff {
            cause: "12 of 20 bytes arrived".into(),
        });
        assert_eq!(
            broke.message(),
            "the upload broke off (12 of 20 bytes arrived); nothing was kept"
        );
        assert_eq!(broke.kind, Kind::BadInput);
        let unwritten = d(DropRefused::NotWritten {
            path: "/s/f".into(),
            cause: "No space left on device (os error 28)".into(),
        });
        assert_eq!(
            unwritten.message(),
            "writing /s/f: No space left on device (os error 28); nothing was kept"
        );
        assert_eq!(unwritten.kind, Kind::Failed);
        use std::path::PathBuf;
        let s = |p| Error::session("web", p).message();
        assert_eq!(
            s(SessionProblem::FolderThere {
                to: PathBuf::from("/s/received/new"),
                new: "new".into()
            }),
            "/s/received/new is there already (left by an earlier session new?), and session \
             web's own would go there: move it away, or pick another name"
        );
        assert_eq!(
            Error::session(
                "web",
                SessionProblem::FolderThere {
                    to: PathBuf::from("/x"),
                    new: "n".into()
                }
            )
            .kind,
            Kind::Exists
        );
        assert_eq!(
            s(SessionProblem::CagedRunUncaged),
            "session web is in a cage, and `cage run` runs its harness there; leave out --uncaged"
        );
        assert_eq!(
            s(SessionProblem::NotFastForwarded {
                why: FastForwardProblem::Detached
            }),
            "your branch was not fast-forwarded to session web's: your HEAD is detached: check \
             out the branch to fast-forward"
        );
        assert_eq!(
            s(SessionProblem::MovedMeanwhile),
            "session web was moved meanwhile; set its limits again"
        );
        assert_eq!(
            s(SessionProblem::ContainerGone {
                container: "c1".into()
            }),
            "the container c1 of session web is gone (removed by hand?); `shrooms-agent cage \
             move web` gives it a new cage and keeps its history and conversations (`cage show \
             web` lists the options it had)"
        );
        assert_eq!(
            s(SessionProblem::ProjectGone {
                dir: PathBuf::from("/p/web")
            }),
            "session web's project folder /p/web is not there (moved or renamed?); \
             `shrooms-agent cage move web --dir NEW` points the session at its new folder and \
             keeps its history"
        );
        assert_eq!(
            s(SessionProblem::EnvFileMissing {
                env_file: PathBuf::from("/s/c.env")
            }),
            "session web's cage runs, but its env file /s/c.env is missing: start a turn with \
             `shrooms-agent cage exec web`, then join it"
        );
        assert_eq!(
            s(SessionProblem::NotAReceivedName { file: "a/b".into() }),
            "\"a/b\" is not the name of a received file: give it as `shrooms-agent files \
             received web` lists it"
        );
        assert_eq!(
            s(SessionProblem::NoReceivedFile {
                file: "x.txt".into(),
                sender: "m/s".into()
            }),
            "session web has no file \"x.txt\" from m/s: `shrooms-agent files received web` \
             lists what it has"
        );
        let e = Error::session("web", SessionProblem::SealedOut);
        assert!(e.message().ends_with("pass --unseal"), "{}", e.message());
        assert!(
            e.words(Face::Http)
                .ends_with("pass `--unseal` (on the command line, at the machine)")
        );
        assert_eq!(
            s(SessionProblem::NamedAlready),
            "session web is named web already"
        );
        assert_eq!(
            s(SessionProblem::NotStarted(NotStarted::SourceChanged {
                why: "/p/x is a link now".into()
            })),
            "session web's cage was not started: /p/x is a link now (a folder replaced by a \
             link?). Look at it; then `shrooms-agent cage move web` makes its cage again"
        );
        assert_eq!(
            s(SessionProblem::NotItsLock {
                fd: 5,
                lock: PathBuf::from("/s/web.lock")
            }),
            "descriptor 5 is not the lock of session web (/s/web.lock)"
        );
        assert_eq!(
            s(SessionProblem::NoProgramHere { program: "pi" }),
            "there is no pi program on this machine: install it, or set [harness] pi in the config"
        );
        assert_eq!(s(SessionProblem::RunJoined), "`cage run` has no --join");
        assert_eq!(
            s(SessionProblem::NotALockFd { fd: 1 }),
            "descriptor 1 cannot be a session lock"
        );
        // Every problem has words of its own, and a kind of error.
        let every = [
            SessionProblem::Missing,
            SessionProblem::Exists,
            SessionProblem::NotAName,
            SessionProblem::Caged,
            SessionProblem::NotSealed,
            SessionProblem::NotCaged { then: "" },
            SessionProblem::BeingChanged { secs: 1 },
            SessionProblem::UncagedRun,
            SessionProblem::NoHarnessProgram,
            SessionProblem::NothingToJoin,
            SessionProblem::EnvFileMissing {
                env_file: PathBuf::from("/e"),
            },
            SessionProblem::SealedOut,
            SessionProblem::NoOwnGit,
            SessionProblem::NamedAlready,
            SessionProblem::FilesNotFrom {
                sender: "m/s".into(),
            },
            SessionProblem::NotAReceivedName { file: "f".into() },
            SessionProblem::LockNotPassed { fd: 4 },
            SessionProblem::NoReceivedFile {
                file: "f".into(),
                sender: "m/s".into(),
            },
        ];
        for p in every {
            let words = s(p.clone());
            assert!(
                words.len() > 20 && words.contains("web"),
                "{p:?}: {words:?}"
            );
        }
        assert_eq!(
            s(SessionProblem::UncagedRun),
            "session web is not in a cage: `cage run` would run its harness on this machine, as \
             you, outside any cage; pass --uncaged to do that, or put the session back in a cage \
             with `shrooms-agent cage move web`"
        );
        assert_eq!(
            Error::session("web", SessionProblem::NothingToJoin)
                .kind
                .exit_code(),
            2
        );
        assert_eq!(
            s(SessionProblem::NotStarted(NotStarted::OldCage {
                container: "c1".into(),
                sealed: true
            })),
            "session web's cage was not started: the container c1 was made by an earlier \
             shrooms-agent: its first process is `sleep` from the image, which the cage can \
             replace, so it could run before the network rules are in place. `shrooms-agent cage \
             move web --sealed` (with the options it had: `cage show` lists them) makes its cage \
             again, with the project and conversations as they are; what was installed in the \
             old container goes with it"
        );
        assert_eq!(
            s(SessionProblem::NotStarted(NotStarted::MountsWrong {
                what: "x".into()
            })),
            "session web's cage was not started: it was made by an earlier shrooms-agent and \
             mounts x. `shrooms-agent cage move web` (with the options it had: `cage show` lists \
             them) makes its cage again without it"
        );
        assert_eq!(
            s(SessionProblem::NotStarted(NotStarted::WithoutOwnGit)),
            "session web's cage was not started: it was made by an earlier shrooms-agent, and \
             its project's .git is writable in it (what a cage writes there, git on this machine \
             runs). `shrooms-agent cage move web` (with the options it had: `cage show` lists \
             them) makes its cage again, with a git directory of its own"
        );
        assert_eq!(
            s(SessionProblem::NotStarted(NotStarted::SubmodulesAdded {
                paths: vec![PathBuf::from("/p/a"), PathBuf::from("/p/b")]
            })),
            "session web's cage was not started: its project has submodules it was made without \
             (/p/a, /p/b); in it, their .git would be the cage's to write, and git on this \
             machine obeys what is there. `shrooms-agent cage move web` (with the options it had: \
             `cage show` lists them) makes its cage again with them read-only"
        );
        assert_eq!(
            s(SessionProblem::IntentDamaged {
                file: PathBuf::from("/s/web.intent"),
                why: "EOF".into()
            }),
            "the intent /s/web.intent is damaged: EOF; look at the session's container (`podman \
             ps -a`), then remove the file"
        );
        assert_eq!(
            s(SessionProblem::BeingChanged { secs: 30 }),
            "session web is being changed by another shrooms-agent command (cage limits, a \
             setting, a rename, or its rules being loaded) for more than 30 s; try again when it \
             ends"
        );
        assert_eq!(
            s(SessionProblem::NotCaged {
                then: ", so it cannot be taken out of one"
            }),
            "session web is not in a cage, so it cannot be taken out of one"
        );
        assert_eq!(
            s(SessionProblem::NotSealed),
            "session web is not sealed: only a sealed cage has an outbox"
        );
        assert_eq!(
            Error::session("web", SessionProblem::NotCaged { then: "" }).kind,
            Kind::BadInput
        );
        assert_eq!(
            Error::not_running("c1", "its network cannot be closed").message(),
            "the container c1 is not running, so its network cannot be closed"
        );
        let d = |r| Error::drop_refused("web", r);
        assert_eq!(
            d(DropRefused::Caged { from: "m/a".into() }).message(),
            "session web takes nothing from caged sessions, and m/a is caged; `shrooms-agent \
             cage accept-caged web on` lets caged senders in"
        );
        assert_eq!(
            d(DropRefused::NotAllowed { from: "m/a".into() }).message(),
            "session web takes no files from m/a; `shrooms-agent files allow web m/a` lets them in"
        );
        let e = d(DropRefused::SenderOver {
            from: "m/a".into(),
            sent: 5,
            bound: 1024 * 1024 * 1024,
        });
        assert_eq!(
            (e.kind, e.message()),
            (
                Kind::TooLarge,
                "m/a has sent 5 bytes to session web already (counting what is on its way); with \
                 this file that is over the 1 GiB one sender may leave"
                    .to_string()
            )
        );
        assert_eq!(
            d(DropRefused::NoName).message(),
            "a drop names its file: add ?name=FILE to the address"
        );
        assert_eq!(d(DropRefused::NoName).kind, Kind::BadInput);
        assert_eq!(
            d(DropRefused::NotAllowed { from: "m/a".into() }).kind,
            Kind::Forbidden
        );
        let e = Error::body(
            "a body",
            BodyProblem::TooLarge {
                len: 2_000_000,
                max: 1024 * 1024,
            },
        );
        assert_eq!(
            (e.kind, e.message()),
            (
                Kind::TooLarge,
                "the body is 2000000 bytes; a JSON body may be at most 1048576 (1 MiB)".to_string()
            )
        );
        assert_eq!(
            Error::body("a file", BodyProblem::Chunked).message(),
            "a file needs Content-Length (a chunked body is not taken)"
        );
        assert_eq!(
            Error::build_failed(
                BuildFailure {
                    stage: "workbench",
                    line: "Error: x".into()
                },
                Some(std::path::Path::new("/l/workbench.log"))
            )
            .message(),
            "building the workbench image: Error: x. Its log: /l/workbench.log. `shrooms-agent \
             image build --wait` builds it again and shows how (`image status` says how the last \
             one went)"
        );
        assert_eq!(
            Error::config(std::path::Path::new("/c.toml"), Some("memory"), "no").message(),
            "config file /c.toml: key `memory`: no"
        );
    }

    /// A program not installed: its name, package and use are data, the
    /// words made from them.
    #[test]
    fn a_program_not_installed_is_data() {
        let e = Error::not_installed("nft", "nftables", Some("it closes the agent port"));
        assert_eq!(
            e.message(),
            "nft is not installed (Debian: apt install nftables); it closes the agent port"
        );
        assert_eq!(
            Error::not_installed("stat", "coreutils", None).message(),
            "stat is not installed (Debian: apt install coreutils)"
        );
        assert_eq!(
            e.what(),
            &What::NotInstalled {
                program: "nft",
                package: "nftables",
                needed_for: Some("it closes the agent port")
            }
        );
    }

    /// What runs in a cage is kept as data through context.
    #[test]
    fn what_runs_in_a_cage_is_data() {
        let e = samples::busy_in_its_cage().context("moving s");
        assert_eq!(e.kind, Kind::Busy);
        assert_eq!(
            e.running(),
            Some(&["bash".to_string(), "claude --resume".to_string()][..])
        );
        assert_eq!((e.holder(), e.field(), e.body_field()), (None, None, None));
        let e =
            Error::bad_input("the body: unknown field `x`").about(Subject::BodyField("x".into()));
        assert_eq!((e.field(), e.body_field()), (None, Some("x")));
        assert_eq!(
            Error::bad_field("memory", "no").body_field(),
            Some("memory")
        );
    }
}
