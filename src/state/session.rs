//! Sessions on disk: names, the record kept for each, the store that reads
//! and writes records atomically, and the lock a command holds on a session
//! so that two processes (two CLI calls, or a CLI call and `serve`) never
//! interleave on one.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cage::harness::Harness;
use crate::cage::spec::Network;
use crate::error::{Doing, Error, Holder, IoContext, Result, SessionProblem, StateProblem};
use crate::settings::Limits;
use crate::settings::prices::Usd;

/// The record format's version, so a later tool can read an older record.
pub const RECORD_VERSION: u32 = 1;

/// Check a session name: 1 to 63 characters
/// of A-Z a-z 0-9 _ . - , not starting with - or . , so it is safe in a
/// container name, a file name and a label.
pub fn validate_name(name: &str) -> Result<()> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    let ok = (1..=63).contains(&name.len()) && ok_chars && !name.starts_with(['-', '.']);
    if ok {
        Ok(())
    } else {
        Err(Error::session(name, SessionProblem::NotAName))
    }
}

/// A record is read only as the tool wrote it: its name is its file's, and
/// its container's name is one the tool makes, `shrooms-<session>-<6 hex>`.
/// Names in a record go to podman (`podman rm -f ... NAME`): a record
/// edited to `"container": "--all"` must never reach it.
fn check_record(file_name: &str, record: &Record) -> Result<(), String> {
    if record.name != file_name {
        return Err(format!(
            "its name is {:?}, not {file_name:?} as its file's name says",
            record.name
        ));
    }
    if let Some(cage) = &record.cage
        && !is_container_name_of(&cage.container, file_name)
    {
        return Err(format!(
            "its container {:?} is not a name shrooms-agent makes for this session \
             (shrooms-{file_name}-<6 hex>)",
            cage.container
        ));
    }
    Ok(())
}

/// Is `container` `shrooms-<session>-<6 lowercase hex>`, as the tool names
/// a session's container (docs/configuration.md, "Where things live")?
pub fn is_container_name_of(container: &str, session: &str) -> bool {
    container
        .strip_prefix("shrooms-")
        .and_then(|rest| rest.strip_prefix(session))
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hex| {
            hex.len() == 6
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// What the tool remembers of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Record {
    pub version: u32,
    pub name: String,
    /// The project folder, canonical and absolute.
    #[schema(value_type = String)]
    pub dir: PathBuf,
    pub harness: Harness,
    /// Unix seconds.
    pub created: u64,
    /// The session's cage; None once taken out of it.
    pub cage: Option<CageRecord>,
    /// Kept for the apps, which show and set it; the tool itself does not
    /// read it.
    #[serde(default)]
    pub auto_approve: bool,
    /// Starred in the apps; the tool itself does not read it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub starred: bool,
    /// Whom it takes files from, and who tried and was refused.
    #[serde(default)]
    pub files: FilesPolicy,
    /// Does it take tasks and files from caged sessions ("caged tasks")?
    /// Unset: yes for a session in a cage, no for the others
    /// ([`Record::accepts_caged`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_caged: Option<bool>,
    /// The model tokens its turns spent, and its token budget.
    #[serde(default)]
    pub tokens: Tokens,
    /// Out of a cage: the image of the cage it was taken out of, which
    /// `cage move NAME` puts it back into (not the config's, which may be
    /// another image, or one that must be built first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_image: Option<String>,
    /// What its last turn left for the machine, when it left something:
    /// the agent's commits brought in (or refused), and the files other
    /// tools run later that it created or changed (docs/security.md, "Git in a
    /// cage", "What the machine runs later").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_turn: Option<AfterTurn>,
}

/// What a turn left for the machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AfterTurn {
    /// Unix seconds, when the turn ended.
    pub when: u64,
    /// The session's branches brought into the user's repository, and
    /// those refused, with why.
    #[serde(default)]
    pub git: crate::cage::git::bring::Report,
    /// The files other tools run later that the turn created, changed or
    /// removed.
    #[serde(default)]
    pub files: Vec<NamedFile>,
}

/// A file a tool on the machine runs or loads later, created, changed or
/// removed in a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NamedFile {
    /// Relative to the project.
    pub path: String,
    /// `created`, `changed` or `removed`.
    pub change: String,
    pub why: String,
}

/// A session's model tokens (docs/gateway.md, "Model gateway"): what its turns spent
/// as the model API reported it, counted by the gateway, and the budget
/// past which the gateway refuses its model requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Tokens {
    /// No model request is forwarded once `used` reaches it (all four
    /// counts together); null: no budget (`cage limits NAME --tokens N`).
    #[serde(default)]
    pub budget: Option<u64>,
    /// Summed over every turn.
    #[serde(default)]
    pub used: Usage,
    /// The last turn that reached the model, summed over its responses.
    #[serde(default)]
    pub last_turn: Option<TurnUsage>,
    /// No model request is forwarded once the dollars spent reach it;
    /// null: no budget (`cage limits NAME --usd AMOUNT`).
    #[serde(default)]
    pub usd_budget: Option<Usd>,
    /// What the turns spent on a per-token key, by the model the API
    /// answered as, with its price in dollars then (docs/gateway.md,
    /// "Budgets"). Tokens counted before models were kept are in `used`
    /// alone.
    #[serde(default)]
    pub by_model: BTreeMap<String, ModelSpend>,
    /// What the turns spent on a subscription sign-in (Claude Code's
    /// login, Codex's ChatGPT sign-in), by model: tokens only, as a
    /// subscription has no price per token.
    #[serde(default)]
    pub subscription: BTreeMap<String, Usage>,
}

/// The model named where an answer did not say which model it was.
pub const NOT_REPORTED: &str = "(model not reported)";

/// One model's tokens on a per-token key, and what they cost at the
/// prices of the time; `usd` is null when some of them had no price.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ModelSpend {
    #[serde(flatten)]
    pub usage: Usage,
    #[serde(default)]
    pub usd: Option<Usd>,
}

/// One answer's tokens, the model it was of, whether it went upstream on
/// a subscription sign-in, and its price (None: the model has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub usage: Usage,
    pub model: String,
    pub subscription: bool,
    pub usd: Option<Usd>,
    /// What the day's spend counts for it: `usd`, or for a model without a
    /// price the price table's highest prices (`Prices::ceiling`), so a
    /// model nobody priced neither stops the day nor goes uncounted; None
    /// on a subscription sign-in.
    pub day_usd: Option<Usd>,
}

/// What a session or a turn spent, in dollars: the sum of its priced
/// models', the models that had no price (then the dollars are not
/// known), and the tokens spent on a subscription sign-in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Spend {
    /// Null when some model had no price (`unpriced`).
    pub usd: Option<Usd>,
    /// The models that had no price.
    pub unpriced: Vec<String>,
    /// Tokens spent on a subscription sign-in, which has no price per token.
    pub subscription_tokens: u64,
}

/// Add an answer to the per-model sums.
pub fn charge(
    by_model: &mut BTreeMap<String, ModelSpend>,
    subscription: &mut BTreeMap<String, Usage>,
    c: &Charge,
) {
    if c.subscription {
        subscription
            .entry(c.model.clone())
            .or_default()
            .add(&c.usage);
        return;
    }
    let m = by_model.entry(c.model.clone()).or_insert(ModelSpend {
        usage: Usage::default(),
        usd: Some(Usd::default()),
    });
    m.usage.add(&c.usage);
    m.usd = m.usd.zip(c.usd).map(|(a, b)| a.add(b));
}

/// Pure: what the per-model sums come to.
pub fn spend_of(
    by_model: &BTreeMap<String, ModelSpend>,
    subscription: &BTreeMap<String, Usage>,
) -> Spend {
    let unpriced: Vec<String> = by_model
        .iter()
        .filter(|(_, m)| m.usd.is_none())
        .map(|(k, _)| k.clone())
        .collect();
    let priced = by_model
        .values()
        .filter_map(|m| m.usd)
        .fold(Usd::default(), Usd::add);
    Spend {
        usd: unpriced.is_empty().then_some(priced),
        unpriced,
        subscription_tokens: subscription.values().map(Usage::total).sum(),
    }
}

impl Spend {
    /// As a line says it: `$0.0123`; `dollars unknown: no price for M`;
    /// with the tokens on a subscription after it.
    pub fn words(&self) -> String {
        let dollars = match &self.usd {
            Some(u) => u.spend(),
            None => format!("dollars unknown: no price for {}", self.unpriced.join(", ")),
        };
        if self.subscription_tokens == 0 {
            return dollars;
        }
        format!(
            "{dollars}, and {} on a subscription sign-in (no price per token)",
            crate::state::when::count(self.subscription_tokens, "token", "tokens")
        )
    }
}

impl Tokens {
    /// What the session spent, in dollars.
    pub fn spend(&self) -> Spend {
        spend_of(&self.by_model, &self.subscription)
    }
}

/// Token counts, named as the model API names them in a response's `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// How many model responses these are the sum of.
    #[serde(default)]
    pub responses: u64,
}

impl Usage {
    /// What counts against a budget: all four counts. The model read the
    /// cached tokens too, and a budget that left some out would let a
    /// session spend past it.
    pub fn total(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
    }

    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(other.cache_creation_input_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(other.cache_read_input_tokens);
        self.responses = self.responses.saturating_add(other.responses);
    }

    /// One line: `in 12, out 7, cache write 0, cache read 0 (19 tokens, 1 response)`.
    pub fn describe(&self) -> String {
        format!(
            "in {}, out {}, cache write {}, cache read {} ({}, {})",
            self.input_tokens,
            self.output_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
            crate::state::when::count(self.total(), "token", "tokens"),
            crate::state::when::count(self.responses, "response", "responses"),
        )
    }
}

/// One turn's tokens, and when it started (Unix seconds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TurnUsage {
    pub started: u64,
    #[serde(flatten)]
    pub usage: Usage,
    /// As [`Tokens::by_model`], for the turn.
    #[serde(default)]
    pub by_model: BTreeMap<String, ModelSpend>,
    /// As [`Tokens::subscription`], for the turn.
    #[serde(default)]
    pub subscription: BTreeMap<String, Usage>,
}

impl TurnUsage {
    /// What the turn spent, in dollars.
    pub fn spend(&self) -> Spend {
        spend_of(&self.by_model, &self.subscription)
    }
}

impl Record {
    /// Whether it takes tasks and files from caged sessions: as set, else
    /// by default when it is in a cage itself.
    pub fn accepts_caged(&self) -> bool {
        self.accept_caged.unwrap_or(self.cage.is_some())
    }
}

/// Whom a session takes files from (`files allow`), and the last refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FilesPolicy {
    /// `MACHINE/SESSION` or `MACHINE/*`.
    #[serde(default)]
    pub allow: Vec<String>,
    /// The refused senders, oldest first, at most [`REFUSED_KEPT`].
    #[serde(default)]
    pub refused: Vec<Refused>,
}

/// At most this many refused senders are remembered, the newest.
pub const REFUSED_KEPT: usize = 10;

/// One refused drop: when (Unix seconds) and from whom (`MACHINE/SESSION`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Refused {
    pub when: u64,
    pub from: String,
}

impl FilesPolicy {
    /// Does it take files from `machine`/`session`?
    pub fn allows(&self, machine: &str, session: &str) -> bool {
        let exact = format!("{machine}/{session}");
        let any = format!("{machine}/*");
        self.allow.iter().any(|a| *a == exact || *a == any)
    }

    /// Remember a refusal, keeping the newest [`REFUSED_KEPT`].
    pub fn remember_refused(&mut self, when: u64, from: String) {
        self.refused.push(Refused { when, from });
        let extra = self.refused.len().saturating_sub(REFUSED_KEPT);
        self.refused.drain(..extra);
    }
}

/// A session's cage, fixed when its container is made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CageRecord {
    /// `shrooms-<session>-<6 hex>`, chosen once.
    pub container: String,
    pub image: String,
    pub network: Network,
    pub limits: Limits,
    /// The image's own PATH, for the env file.
    pub image_path: String,
    /// The harness's data folder at the machine's path (the mount target).
    #[schema(value_type = String)]
    pub harness_dir: PathBuf,
    /// The harness program to run inside for `cage run`, if known.
    #[schema(value_type = Option<String>)]
    pub program: Option<PathBuf>,
    /// The cage has a link folder that puts the program on its PATH
    /// (`spec::HARNESS_BIN_IN_CAGE`); false for a cage made before there
    /// was one, or given no program.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub linked: bool,
    /// The `podman create` argv the container was made with.
    pub create_argv: Vec<String>,
    /// Set for a sealed cage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<SealedRecord>,
    /// The options that widen it.
    #[serde(default)]
    pub options: crate::cage::spec::Options,
    /// Each bind mount's source as it was when the cage was made. runc
    /// follows links when it mounts, at every start, so a start checks that
    /// no folder on the way has become a link (a cage could have put one in
    /// place of a folder another cage mounts). Empty for cages made before
    /// this was recorded: those are not checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_sources: Vec<MountSource>,
    /// `limits` are the session's own (`cage limits`), not the config's:
    /// a move into a new cage keeps them.
    #[serde(default)]
    pub own_limits: bool,
    /// Its network policy (docs/network.md, "Network policy"): `open`, `internet`
    /// or `allow:...`. A record without one is `open`, as its cage was made.
    #[serde(default)]
    #[schema(value_type = String)]
    pub net: crate::net::netpolicy::NetPolicy,
    /// Its own git directory (docs/security.md, "Git in a cage"). None: a cage made
    /// before git in a cage had one (not started: `cage move` makes it
    /// again), or one whose `.git` was left writable (`--writable .git`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<crate::cage::git::GitRecord>,
}

/// A record that does not read, and why.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Damaged {
    /// The session's name, as its record file's name says it.
    pub name: String,
    /// Why it does not read: its load's error, kept whole, given as its
    /// words.
    #[schema(value_type = String)]
    pub error: Error,
}

/// A cage record for unit tests: one place to add a field to.
#[cfg(test)]
pub fn sample_cage(container: &str) -> CageRecord {
    CageRecord {
        container: container.into(),
        image: "img".into(),
        network: crate::cage::spec::Network::Bridge,
        limits: crate::settings::Limits::of("4g", "2", 2048),
        image_path: "/bin".into(),
        harness_dir: "/h/.claude".into(),
        program: None,
        linked: false,
        create_argv: vec![],
        sealed: None,
        options: Default::default(),
        mount_sources: Vec::new(),
        own_limits: false,
        net: Default::default(),
        git: Some(crate::cage::git::GitRecord {
            layout: crate::cage::git::Layout::Folder,
            own: PathBuf::from("/nonexistent/shrooms-test-git").join(container),
        }),
    }
}

/// A record for unit tests.
#[cfg(test)]
pub fn sample_record(name: &str) -> Record {
    Record {
        version: RECORD_VERSION,
        name: name.into(),
        dir: "/p".into(),
        harness: Harness::Claude,
        created: 1,
        cage: None,
        auto_approve: false,
        starred: false,
        files: FilesPolicy::default(),
        tokens: Tokens::default(),
        accept_caged: None,
        last_image: None,
        after_turn: None,
    }
}

/// A bind mount's source as given to podman, where it led, and which of
/// the folders on its way were links then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MountSource {
    #[schema(value_type = String)]
    pub path: PathBuf,
    #[schema(value_type = String)]
    pub led_to: PathBuf,
    /// `path` and its parents that were links when the cage was made. A
    /// start refuses a source where another has become a link; a link that
    /// was there may lead elsewhere now (an upgrade: a nix profile, a
    /// home-manager or stow link). None in records made before this was
    /// kept: then `led_to` must still hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<String>>)]
    pub links: Option<Vec<PathBuf>>,
}

impl MountSource {
    /// Record a source as it is now.
    pub fn now(path: &Path) -> std::io::Result<MountSource> {
        let led_to = fs::canonicalize(path)?;
        Ok(MountSource {
            path: path.to_path_buf(),
            led_to,
            links: Some(links_on_the_way(path)),
        })
    }

    /// Why a start must not mount this source now, if it must not.
    pub fn changed(&self) -> Option<String> {
        // Gone (a protected path's empty folder removed by hand): podman
        // would fail on it with an error of its own.
        if fs::symlink_metadata(&self.path).is_err() {
            return Some(format!(
                "{} is gone since the cage was made",
                self.path.display()
            ));
        }
        match &self.links {
            Some(links) => links_on_the_way(&self.path)
                .into_iter()
                .find(|p| !links.contains(p))
                .map(|p| {
                    format!(
                        "{} is a link now, and was a folder when the cage was made",
                        p.display()
                    )
                }),
            None => match fs::canonicalize(&self.path) {
                Ok(p) if p == self.led_to => None,
                Ok(p) => Some(format!(
                    "{} leads to {}, not to {} as when the cage was made",
                    self.path.display(),
                    p.display(),
                    self.led_to.display()
                )),
                Err(e) => Some(format!("{} cannot be followed ({e})", self.path.display())),
            },
        }
    }
}

/// `path` and each folder above it that is a link.
fn links_on_the_way(path: &Path) -> Vec<PathBuf> {
    path.ancestors()
        .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()))
        .map(Path::to_path_buf)
        .collect()
}

/// One line of a session's history (`cage history`): when, who, what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// Unix seconds.
    pub when: u64,
    pub who: String,
    pub what: String,
}

/// The longest `--by` taken, in characters.
pub const MAX_WHO: usize = 200;

/// Check who a history entry names (`--by WHO`): one line of at most
/// [`MAX_WHO`] characters, not empty. `cage history` prints an entry a line,
/// so a line break in it would make a second, false entry.
pub fn validate_who(who: &str) -> Result<()> {
    use crate::error::{ByProblem, InputProblem};
    let problem = if who.trim().is_empty() {
        ByProblem::Empty
    } else if who.chars().any(char::is_control) {
        ByProblem::Control
    } else if who.chars().count() > MAX_WHO {
        ByProblem::TooLong { max: MAX_WHO }
    } else {
        return Ok(());
    };
    Err(Error::input(InputProblem::By {
        who: who.to_string(),
        problem,
    }))
}

/// What a sealed cage was made with, so that a later version can tell an
/// old cage from a current one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SealedRecord {
    /// The machine's sealed token, read at every exec.
    #[schema(value_type = String)]
    pub token_file: PathBuf,
    /// `~/shrooms-outbox/<session>` on the machine.
    #[schema(value_type = String)]
    pub outbox: PathBuf,
    /// The nft table and the version of its rules.
    pub rules: String,
    /// The seccomp profile file and a short hash of its text.
    #[schema(value_type = String)]
    pub seccomp_file: PathBuf,
    pub seccomp: String,
    pub dns: Vec<String>,
}

/// A file a session takes (a drop, a received file) or sends, at most
/// (100 MiB).
pub const MAX_FILE: u64 = 100 * 1024 * 1024;

/// The state folder and what lives in it.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    pub fn new(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }
    /// What the day's turns spent, all sessions together (`state::spend`).
    pub fn spend_dir(&self) -> PathBuf {
        self.root.join("spend")
    }
    pub fn record_path(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}.json"))
    }
    fn lock_path(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}.lock"))
    }
    /// The record's own lock. Named with `@`, which no session's name has:
    /// `<name>.record.lock` was session `<name>.record`'s session lock too,
    /// so the two shared a lock, and `cage rm <name>` deleted the other's.
    fn record_lock_path(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}@record.lock"))
    }
    /// The lock of a change of the session's record and of what its cage
    /// is given from it (`Store::change_lock`).
    fn change_lock_path(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}@change.lock"))
    }
    /// An operation's intent: written before its first step that a crash
    /// would leave half done, removed once it is done (`ops::plan`).
    /// Named with `@`, which no session's name has.
    pub fn intent_path(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}@intent"))
    }

    /// Write a session's intent, atomically (a crash leaves the old one or
    /// the new one, never half of one).
    pub fn write_intent(&self, name: &str, intent: &Intent) -> Result<()> {
        validate_name(name)?;
        make_private_dir(&self.sessions_dir())?;
        let mut text =
            serde_json::to_string(intent).map_err(|e| Error::act("writing the intent", &e))?;
        text.push('\n');
        // A start's intent names a running cage, which a machine that
        // went down does not have; a create's names a container that, if
        // the machine went down before the record was written, is a
        // leftover `cage ls` lists and `cage prune` removes (it carries the
        // state folder's label) whether its intent reached the disk or not.
        match intent {
            Intent::Start { .. } | Intent::Create { .. } => {
                write_atomic_unsynced(&self.intent_path(name), text.as_bytes(), 0o600)
            }
            _ => write_atomic(&self.intent_path(name), text.as_bytes(), 0o600),
        }
    }

    /// A session's intent, if an operation on it did not finish. One that
    /// does not read is an error: what it named cannot be known.
    pub fn intent(&self, name: &str) -> Result<Option<Intent>> {
        let path = self.intent_path(name);
        match fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str(&t).map(Some).map_err(|e| {
                Error::session(
                    name,
                    SessionProblem::IntentDamaged {
                        file: path.clone(),
                        why: e.to_string(),
                    },
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::act(Doing::Read(path.to_path_buf()), &e)),
        }
    }

    pub fn remove_intent(&self, name: &str) -> Result<()> {
        remove_file_if_there(&self.intent_path(name))
    }

    /// The sessions with an intent left (an operation that did not finish,
    /// or one running now).
    pub fn intents(&self) -> Vec<String> {
        let Ok(entries) = fs::read_dir(self.sessions_dir()) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.strip_suffix("@intent")?.to_string();
                validate_name(&name).is_ok().then_some(name)
            })
            .collect();
        names.sort();
        names
    }

    /// Remove the temporary files `write_atomic` left in the sessions'
    /// folder when its process died between making one and renaming it:
    /// each names its process, and one whose process is gone is nobody's.
    pub fn remove_dead_temporaries(&self) -> Vec<PathBuf> {
        let Ok(entries) = fs::read_dir(self.sessions_dir()) else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        for e in entries.flatten() {
            let file = e.file_name();
            let Some(pid) = file
                .to_str()
                .filter(|f| f.starts_with('.'))
                .and_then(|f| f.rsplit_once(".tmp-"))
                .and_then(|(_, pid)| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !process_exists(pid) && fs::remove_file(e.path()).is_ok() {
                removed.push(e.path());
            }
        }
        // And the folders of sends (`outbox send`) whose process died
        // between packing and removing them.
        for e in fs::read_dir(self.tmp_dir()).into_iter().flatten().flatten() {
            let Some(pid) = e
                .file_name()
                .to_str()
                .and_then(|f| f.strip_prefix(SEND_TMP))
                .and_then(|f| f.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !process_exists(pid) && remove_dir_if_there(&e.path()).is_ok() {
                removed.push(e.path());
            }
        }
        removed
    }

    /// `tmp/`: the folders of sends on their way (`ops::outbox`), each
    /// `send-<pid>-<n>`.
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// The folders sealed sessions worked in (`ops::sealed::Untrusted`).
    pub fn untrusted_folders(&self) -> PathBuf {
        self.root.join("untrusted-folders.json")
    }
    pub fn cages_dir(&self) -> PathBuf {
        self.root.join("cages")
    }
    /// `cages/<container>.env`: the cage's environment, 0600, so no value
    /// stands on podman's command line.
    pub fn env_file(&self, container: &str) -> PathBuf {
        self.cages_dir().join(format!("{container}.env"))
    }
    /// `cages/<container>/`: the cage's private harness home and proxy folder.
    pub fn cage_dir(&self, container: &str) -> PathBuf {
        self.cages_dir().join(container)
    }
    /// `cages/<container>/pid`: where podman writes the cage's first
    /// process's PID at each start (`podman create --pidfile`), outside
    /// everything the cage has mounted.
    pub fn pid_file(&self, container: &str) -> PathBuf {
        self.cage_dir(container).join("pid")
    }
    pub fn private_home(&self, container: &str) -> PathBuf {
        self.cage_dir(container).join("home")
    }
    /// `cages/<container>/settings/`: the copies of the user's Claude Code
    /// settings the cage is given (`cage_files`).
    pub fn settings_copy_dir(&self, container: &str) -> PathBuf {
        self.cage_dir(container).join("settings")
    }
    /// `cages/<container>/bin/`: the cage's link folder, a link to the
    /// harness's program that its PATH finds (`spec::HarnessLink`).
    pub fn link_dir(&self, container: &str) -> PathBuf {
        self.cage_dir(container).join("bin")
    }
    pub fn proxy_dir(&self, container: &str) -> PathBuf {
        self.cage_dir(container).join("proxy")
    }
    /// `cages/<container>/git/`: the session's own git directory, which
    /// the cage writes (`crate::cage::git`).
    pub fn own_git(&self, container: &str) -> PathBuf {
        self.cage_dir(container).join("git")
    }
    /// `cages/<container>/git-base`: the user's refs as the last sync saw
    /// them, out of the cage's reach.
    pub fn git_base(&self, container: &str) -> PathBuf {
        self.cage_dir(container).join("git-base")
    }
    /// `cages/<container>/gitfile`: the `.git` file a cage gets over a
    /// project's `.git` file.
    pub fn gitfile(&self, container: &str) -> PathBuf {
        self.cage_dir(container).join("gitfile")
    }
    pub fn uploads_dir(&self) -> PathBuf {
        self.root.join("uploads")
    }
    /// `tools/`: the copies of this program that cages run (`crate::cage::tools`),
    /// read-only in every cage made since it was kept here.
    pub fn tools_dir(&self) -> PathBuf {
        self.root.join("tools")
    }
    /// `uploads/<session>`: what a cage sees of the uploads (its own only).
    pub fn session_uploads(&self, session: &str) -> PathBuf {
        self.uploads_dir().join(session)
    }
    /// The seccomp profile a sealed cage is made with.
    pub fn seccomp_file(&self, container: &str) -> PathBuf {
        self.cage_dir(container).join("seccomp.json")
    }
    /// The machine's sealed token, unless the config or a flag names another.
    pub fn default_sealed_token(&self) -> PathBuf {
        self.root.join("sealed-claude-token")
    }

    /// `state-id`: this state folder's identity, on the label of every
    /// container it makes (`spec::STATE_LABEL`).
    pub fn state_id_path(&self) -> PathBuf {
        self.root.join("state-id")
    }

    /// This state folder's identity, if it has one yet. Reads only: `cage
    /// prune --dry-run` writes nothing, and a folder without one has made
    /// no container since containers carry it.
    pub fn state_id_if_any(&self) -> Result<Option<String>> {
        let path = self.state_id_path();
        match fs::read_to_string(&path) {
            Ok(text) => {
                let id = text.trim().to_string();
                if is_state_id(&id) {
                    Ok(Some(id))
                } else {
                    let label = crate::cage::spec::STATE_LABEL;
                    Err(Error::state(&path, StateProblem::IdDamaged { label }))
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::act(Doing::Read(path.to_path_buf()), &e)),
        }
    }

    /// This state folder's identity, made once: 128 random bits. Two
    /// processes making it at once agree on one (`keep_state_id`). The
    /// tests' worlds are given one so; a cage's plan keeps its own drawn
    /// id as a step (`Step::StateId`).
    #[cfg(test)]
    pub fn state_id(&self) -> Result<String> {
        if let Some(id) = self.state_id_if_any()? {
            return Ok(id);
        }
        self.keep_state_id(&draw_state_id()?)
    }

    /// Keep `id` as this state folder's identity if it has none yet, and
    /// return the one it has then: `id`, or the one another process kept
    /// first (link(2) does not replace a file that is there, so of two
    /// processes making it at once one wins, and both use its id).
    pub fn keep_state_id(&self, id: &str) -> Result<String> {
        if let Some(id) = self.state_id_if_any()? {
            return Ok(id);
        }
        make_private_dir(&self.root)?;
        // A name of this call's own: two threads of one process (serve
        // making two first cages at once) would otherwise write and link
        // each other's file, and one would keep an id it did not link.
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self
            .root
            .join(format!(".state-id.tmp-{}-{call}", std::process::id()));
        write_atomic(&tmp, format!("{id}\n").as_bytes(), 0o600)?;
        let linked = fs::hard_link(&tmp, self.state_id_path());
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(id.to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self
                .state_id_if_any()?
                .ok_or_else(|| Error::state(&self.state_id_path(), StateProblem::IdVanished)),
            Err(e) => Err(Error::act(Doing::Write(self.state_id_path()), &e)),
        }
    }

    /// Make the state folder and its parts, 0700: they hold env files and
    /// records no other user may read.
    pub fn ensure(&self) -> Result<()> {
        for d in [
            self.root.clone(),
            self.sessions_dir(),
            self.cages_dir(),
            self.uploads_dir(),
        ] {
            make_private_dir(&d)?;
        }
        Ok(())
    }

    pub fn exists(&self, name: &str) -> bool {
        self.record_path(name).exists()
    }

    /// Read a session's record; a missing one is `NotFound`.
    pub fn load(&self, name: &str) -> Result<Record> {
        validate_name(name)?;
        let path = self.record_path(name);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::session(name, SessionProblem::Missing));
            }
            Err(e) => return Err(Error::act(Doing::Read(path.to_path_buf()), &e)),
        };
        let damaged = |why: String| {
            Error::session(
                name,
                SessionProblem::RecordDamaged {
                    file: path.clone(),
                    why,
                },
            )
        };
        let record: Record = serde_json::from_str(&text).map_err(|e| damaged(e.to_string()))?;
        check_record(name, &record).map_err(damaged)?;
        Ok(record)
    }

    pub fn save(&self, record: &Record) -> Result<()> {
        let mut text = serde_json::to_string_pretty(record)
            .map_err(|e| Error::act("writing the record", &e))?;
        text.push('\n');
        write_atomic(&self.record_path(&record.name), text.as_bytes(), 0o600)
    }

    /// Remove a session's record, history and lock file.
    /// The record goes last but the intent and lock: until then the
    /// session is there, to be removed again.
    pub fn remove(&self, name: &str) -> Result<()> {
        remove_file_if_there(&self.history_path(name))?;
        for log in self.egress_logs(name) {
            remove_file_if_there(&log)?;
        }
        remove_file_if_there(&self.egress_pid_path(name))?;
        remove_file_if_there(&self.egress_err_path(name))?;
        remove_file_if_there(&self.turn_marker(name))?;
        remove_file_if_there(&self.waiting_marker(name))?;
        remove_file_if_there(&self.change_lock_path(name))?;
        {
            // Under the record's lock: a change of the record under way
            // (`update`, which saves what it read) finishes first, and one
            // that waited finds no record. Without it, a change saved
            // after this brought the session back, naming a container
            // removed with it.
            let record_lock = self.record_lock_path(name);
            let _held = crate::state::lock::take(&record_lock)?;
            remove_file_if_there(&self.record_path(name))?;
            remove_file_if_there(&record_lock)?;
        }
        remove_file_if_there(&self.intent_path(name))?;
        remove_file_if_there(&self.lock_path(name))
    }

    /// `sessions/<name>.egress.jsonl`: the session's egress log
    /// (`crate::net::egress`), rotated to `<name>.egress.1.jsonl`.
    pub fn egress_path(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}.egress.jsonl"))
    }
    /// `sessions/<name>.egress-refused.jsonl`: the refusals of the
    /// session's egress log, kept apart from its allowed connections,
    /// rotated to `<name>.egress-refused.1.jsonl`.
    pub fn egress_refused_path(&self, name: &str) -> PathBuf {
        self.sessions_dir()
            .join(format!("{name}.egress-refused.jsonl"))
    }
    /// Every file of a session's egress log: allowed and refused, each
    /// current and rotated.
    pub fn egress_logs(&self, name: &str) -> [PathBuf; 4] {
        let (a, r) = (self.egress_path(name), self.egress_refused_path(name));
        [older(&a), a, older(&r), r]
    }
    /// What a rename carries to the session's new name of its egress log:
    /// its files, allowed and refused, and its listener's errors.
    pub fn egress_files(&self, name: &str) -> Vec<PathBuf> {
        let mut files = self.egress_logs(name).to_vec();
        files.push(self.egress_err_path(name));
        files
    }
    /// The egress log listener's pid file, and its errors' log.
    pub fn egress_pid_path(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}.egress.pid"))
    }
    pub fn egress_err_path(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}.egress.err"))
    }

    pub fn history_path(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}.history.jsonl"))
    }

    /// Append a line to a session's history (called under its lock).
    pub fn append_history(&self, name: &str, entry: &HistoryEntry) -> Result<()> {
        let path = self.history_path(name);
        let mut line =
            serde_json::to_string(entry).map_err(|e| Error::act("writing the history", &e))?;
        line.push('\n');
        before_write().ctx(|| Doing::Open(path.to_path_buf()))?;
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .ctx(|| Doing::Open(path.to_path_buf()))?;
        // Not flushed to disk: the history tells what happened, and the
        // record it follows is flushed; a line lost to a machine that went
        // down at that moment is not worth a flush at every command.
        f.write_all(line.as_bytes())
            .ctx(|| Doing::Write(path.to_path_buf()))?;
        after_write();
        Ok(())
    }

    /// A session's history, oldest first.
    pub fn history(&self, name: &str) -> Result<Vec<HistoryEntry>> {
        let path = self.history_path(name);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::act(Doing::Read(path.to_path_buf()), &e)),
        };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l)
                    .map_err(|e| Error::act(Doing::HistoryDamaged(path.to_path_buf()), &e))
            })
            .collect()
    }

    /// Every session's record, sorted by name; a damaged one is an error
    /// (`cage prune` must not take its container for a leftover).
    pub fn list(&self) -> Result<Vec<Record>> {
        let (records, damaged) = self.list_readable()?;
        match damaged.into_iter().next() {
            Some(d) => Err(d.error),
            None => Ok(records),
        }
    }

    /// The records that read, sorted by name, and those that do not: what
    /// `cage ls` shows, so that one damaged record does not hide the rest.
    pub fn list_readable(&self) -> Result<(Vec<Record>, Vec<Damaged>)> {
        let dir = self.sessions_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Vec::new(), Vec::new()));
            }
            Err(e) => return Err(Error::act(Doing::Read(dir.to_path_buf()), &e)),
        };
        let mut out = Vec::new();
        let mut damaged = Vec::new();
        for entry in entries {
            let entry = entry.ctx(|| Doing::Read(dir.to_path_buf()))?;
            let file = entry.file_name();
            let Some(name) = file
                .to_str()
                .filter(|f| !f.ends_with(".history.jsonl"))
                .and_then(|f| f.strip_suffix(".json"))
            else {
                continue;
            };
            if validate_name(name).is_ok() {
                match self.load(name) {
                    Ok(r) => out.push(r),
                    Err(e) if e.kind == crate::error::Kind::NotFound => {}
                    Err(error) => damaged.push(Damaged {
                        name: name.to_string(),
                        error,
                    }),
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        damaged.sort_by(|a: &Damaged, b: &Damaged| a.name.cmp(&b.name));
        Ok((out, damaged))
    }

    /// Why a session that is not there cannot be used: its load's error
    /// (a name that is not one, no such session).
    fn missing(&self, name: &str) -> Error {
        self.load(name)
            .err()
            .unwrap_or_else(|| Error::session(name, SessionProblem::Missing))
    }

    /// Change a session's record: load it, change it, save it, under a
    /// short lock of its own (waited for), so that two writers (a `cage
    /// limits` beside a `cage move`) never lose each other's change.
    pub fn update<T>(
        &self,
        name: &str,
        change: impl FnOnce(&mut Record) -> Result<T>,
    ) -> Result<T> {
        validate_name(name)?;
        if !self.exists(name) {
            // No such session: say so, without a lock file for the name.
            return Err(self.missing(name));
        }
        let record_lock = self.record_lock_path(name);
        let _held = crate::state::lock::take(&record_lock)?;
        let mut record = match self.load(name) {
            Ok(r) => r,
            Err(e) => {
                // Removed while this waited: no lock file is left for a
                // name that has no session.
                if e.kind == crate::error::Kind::NotFound {
                    let _ = remove_file_if_there(&record_lock);
                }
                return Err(e);
            }
        };
        let out = change(&mut record)?;
        self.save(&record)?;
        Ok(out)
    }

    /// Take the lock of a change of the session: held by every command that
    /// changes its record (`cage limits`, `accept-caged`, the settings,
    /// `rename`) from the reading of the record to the end of the change,
    /// and by every load of its cage's rules from the record (a start,
    /// `exec --join`), so that changes at once are made one after another,
    /// each from the record the one before left, and the rules a cage
    /// runs with are its record's last. Waited for, at most
    /// [`CHANGE_WAIT`]; then `Busy`. Beside the session's lock, it is
    /// taken after it.
    pub fn change_lock(&self, name: &str) -> Result<ChangeLock> {
        validate_name(name)?;
        if !self.exists(name) {
            return Err(self.missing(name));
        }
        let path = self.change_lock_path(name);
        let Some(file) = crate::state::lock::take_within(&path, CHANGE_WAIT)? else {
            return Err(Error::session(
                name,
                SessionProblem::BeingChanged {
                    secs: CHANGE_WAIT.as_secs(),
                },
            ));
        };
        if !self.exists(name) {
            // Removed or renamed while this waited.
            let _ = remove_file_if_there(&path);
            return Err(self.missing(name));
        }
        Ok(ChangeLock { _file: file })
    }

    /// Take the session's lock, then read its record: what a command does
    /// is decided on the record as it is under the lock, never on one read
    /// before another command changed it. A lock file made for a name that
    /// has no session is removed again.
    pub fn lock_and_load(&self, name: &str) -> Result<(SessionLock, Record)> {
        validate_name(name)?;
        if !self.exists(name) {
            // Say so without leaving a lock file behind for the name.
            return Err(self.missing(name));
        }
        let lock = self.lock(name)?;
        match self.load(name) {
            Ok(r) => Ok((lock, r)),
            Err(e) => {
                if e.kind == crate::error::Kind::NotFound {
                    let _ = remove_file_if_there(&self.lock_path(name));
                }
                Err(e)
            }
        }
    }

    /// Remove the lock file of a session that was not made (its create
    /// failed), called while holding the lock: nothing of it is left.
    pub fn forget_lock(&self, name: &str) {
        if !self.exists(name) {
            let _ = remove_file_if_there(&self.lock_path(name));
        }
    }

    /// Is the session's lock held by a command now? Looks without making a
    /// lock file (`cage prune --dry-run` writes nothing): no file, no holder.
    pub fn lock_held(&self, name: &str) -> Result<bool> {
        validate_name(name)?;
        crate::state::lock::held(&self.lock_path(name))
    }

    /// What holds the session now, and since when (`cage ls`'s BUSY): None
    /// when nobody does. A holder that wrote nothing of itself (one that
    /// ended its work quickly) is "a command".
    pub fn busy(&self, name: &str) -> Result<Option<Busy>> {
        if !self.lock_held(name)? {
            return Ok(None);
        }
        let text = fs::read_to_string(self.lock_path(name)).unwrap_or_default();
        let mut busy = Busy::parse(&text);
        busy.waiting = self.waiting(name);
        Ok(Some(busy))
    }

    /// The file a turn's gateway writes while it holds a model request at
    /// a budget. Named with `@`, as the record's lock, so no session's
    /// file is it.
    pub fn waiting_marker(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}@budget"))
    }

    /// What the session's turn waits on, as its gateway wrote it; read by
    /// `busy` alone, so a marker left by a turn that died is not shown
    /// once nobody holds the session.
    fn waiting(&self, name: &str) -> Option<Waiting> {
        let text = fs::read(self.waiting_marker(name)).ok()?;
        let mut w: Waiting = serde_json::from_slice(&text).ok()?;
        w.since_rfc3339 = crate::state::when::rfc3339(w.since);
        Some(w)
    }

    /// Say that the session's turn waits on a budget (replaced whole, so a
    /// reader never finds half of it).
    pub fn set_waiting(&self, name: &str, waiting: &Waiting) -> Result<()> {
        validate_name(name)?;
        let bytes = serde_json::to_vec(waiting)
            .map_err(|e| crate::error::Error::act("writing a session's waiting marker", &e))?;
        write_atomic_unsynced(&self.waiting_marker(name), &bytes, 0o600)
    }

    /// The turn waits no more.
    pub fn clear_waiting(&self, name: &str) {
        if validate_name(name).is_ok() {
            let _ = remove_file_if_there(&self.waiting_marker(name));
        }
    }

    /// What holds the session's lock, as the lock file says (`WHAT
    /// SECONDS PID`): for the error of a command refused as busy.
    fn holder(&self, name: &str) -> Holder {
        let text = fs::read_to_string(self.lock_path(name)).unwrap_or_default();
        let busy = Busy::parse(&text);
        Holder {
            what: busy.what,
            since: busy.since,
            pid: text.split_whitespace().nth(2).and_then(|p| p.parse().ok()),
        }
    }

    /// The turn marker: made (under the session's lock) before a turn's
    /// cage starts, removed once the turn or its watcher stopped the cage.
    /// Named with `@`, as the record's lock, so no session's file is it.
    pub fn turn_marker(&self, name: &str) -> PathBuf {
        self.sessions_dir().join(format!("{name}@turn"))
    }

    /// The sessions that have a turn's marker now (live turns, dead ones).
    pub fn turn_markers(&self) -> Vec<String> {
        let Ok(entries) = fs::read_dir(self.sessions_dir()) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.strip_suffix("@turn")?.to_string();
                validate_name(&name).is_ok().then_some(name)
            })
            .collect()
    }

    /// A turn whose holders all died: its marker is there and nobody holds
    /// the session's lock (the turn's process and its watcher both hold it
    /// while the turn runs, and the kernel lets go when both are gone).
    /// Then the session's lock, taken, for the caller to stop the cage and
    /// remove the marker; None otherwise (no marker, or the lock is held).
    /// A cage started by `cage start` has no marker.
    pub fn dead_turn(&self, name: &str) -> Result<Option<SessionLock>> {
        validate_name(name)?;
        let marker = self.turn_marker(name);
        if !marker.exists() {
            return Ok(None);
        }
        match crate::state::lock::try_take_past_probes(&self.lock_path(name))? {
            // Looked at again under the lock: a turn that ended cleanly
            // in between removed it.
            Some(file) if marker.exists() => {
                let lock = SessionLock { _file: file };
                lock.note("stop");
                Ok(Some(lock))
            }
            _ => Ok(None),
        }
    }

    /// Take the session's lock, or fail with `Busy`: at once for a live
    /// holder (a command that would wait behind a long `exec` is better
    /// told so); after a dead turn's watcher has stopped its cage, or a
    /// moment for a holder that is gone.
    pub fn lock(&self, name: &str) -> Result<SessionLock> {
        validate_name(name)?;
        make_private_dir(&self.sessions_dir())?;
        let mut taken = crate::state::lock::try_take_past_probes(&self.lock_path(name))?;
        // A dead turn's watcher stopping its cage holds the lock for as long
        // as `podman stop` takes (and a second or so after the cage shows
        // as stopped): waited for, as the session is not in use. So is,
        // for a moment, a holder that is gone while its lock is still
        // held: a turn killed, whose watcher has yet to say STOPPING.
        let started = std::time::Instant::now();
        let waits = |holder: &Holder| {
            holder.what == STOPPING
                || (started.elapsed() < GONE_WAIT && holder.pid.is_some_and(|p| !process_exists(p)))
        };
        while taken.is_none()
            && started.elapsed() < STOP_WAIT
            && self.lock_held(name)?
            && waits(&self.holder(name))
        {
            std::thread::sleep(std::time::Duration::from_millis(100));
            taken = crate::state::lock::try_take_past_probes(&self.lock_path(name))?;
        }
        if taken.is_none() {
            // Let go of between the last try and the look at its holder.
            taken = crate::state::lock::try_take_past_probes(&self.lock_path(name))?;
        }
        match taken {
            Some(file) => {
                // What the last holder wrote of itself is not this one's.
                let _ = file.set_len(0);
                Ok(SessionLock { _file: file })
            }
            // A session without a record whose lock is held is being
            // made (`cage create` holds the lock while it makes the cage).
            None if !self.exists(name) => Err(Error::session(
                name,
                SessionProblem::BeingMade(self.holder(name)),
            )),
            None => Err(Error::session(
                name,
                SessionProblem::Held(self.holder(name)),
            )),
        }
    }

    /// The session's lock as a process that holds it passed it on, open, as
    /// descriptor `fd` (the watcher of a turn, `ops::exec::watch`). Made
    /// close-on-exec again at once, so that nothing the watcher starts
    /// (podman, and the pause process rootless podman may leave behind)
    /// keeps the session busy; refused unless it is this session's lock
    /// file and held through this very open file description.
    pub fn inherited_lock(&self, name: &str, fd: std::os::fd::RawFd) -> Result<SessionLock> {
        use std::os::unix::fs::MetadataExt;
        validate_name(name)?;
        if fd < 3 {
            return Err(Error::session(name, SessionProblem::NotALockFd { fd }));
        }
        let Some(file) = crate::host::process::inherited_fd(fd).map(File::from) else {
            return Err(Error::session(name, SessionProblem::LockNotPassed { fd }));
        };
        let path = self.lock_path(name);
        let same = match (file.metadata(), fs::metadata(&path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if !same {
            return Err(Error::session(
                name,
                SessionProblem::NotItsLock { fd, lock: path },
            ));
        }
        // Held by this open file description already: this cannot block,
        // and fails only if it was not held for us.
        crate::state::lock::ours(&file).map_err(|e| {
            Error::act(
                Doing::LockNotHeld {
                    session: name.to_string(),
                },
                &e,
            )
        })?;
        Ok(SessionLock { _file: file })
    }
}

/// What an operation set out to do, kept in the state folder until it is
/// done, so that the next command on the session can finish it or take it
/// back after a crash (`ops::plan::repair`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Intent {
    /// `cage create`: the container it makes. Done once the record names
    /// it; otherwise taken back.
    Create { container: String },
    /// `cage move`: the container it leaves and the one it makes. Done
    /// once the record names `to` (then `from` is removed); otherwise `to`
    /// is taken back.
    Move {
        from: Option<String>,
        to: Option<String>,
    },
    /// `cage rm`: once podman may have removed the container, the rest is
    /// removed too.
    Remove { container: Option<String> },
    /// A start (`cage start`, or a turn's): from `podman start` until the
    /// cage's rules are loaded it may run without them. Taken back: the
    /// cage is stopped.
    Start { container: String },
    /// `cage rename`: kept under both names. Done once a record is under
    /// `to` (then `from`'s record and the `old` container go); otherwise
    /// what `moves` renamed is renamed back, newest first, and `new` is
    /// taken back.
    Rename {
        from: String,
        to: String,
        old: Option<String>,
        new: Option<String>,
        moves: Vec<(PathBuf, PathBuf)>,
    },
}

/// How the folder of one send starts in `Store::tmp_dir`: `send-<pid>-<n>`,
/// so that one left by a process that died is known as such.
pub const SEND_TMP: &str = "send-";

pub use crate::error::STOPPING;

/// How long a command waits for such a watcher: its `podman stop` (10 s
/// before podman kills, podman-stop(1)) and two tries more.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(40);

/// How long a command waits for a lock whose noted holder is gone to be
/// noted STOPPING by the watcher holding it (a moment: the watcher wakes
/// when the holder's end closes its pipe).
const GONE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Does process `pid` exist (its folder in /proc, proc(5))? What names a
/// process that is gone (a temporary file, a send's folder, a lock's
/// holder) is nobody's.
fn process_exists(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// A new state folder identity, drawn: 128 random bits, in hex. Nothing is
/// written (`Store::keep_state_id` keeps it).
pub fn draw_state_id() -> Result<String> {
    let mut bytes = [0u8; 16];
    let n = rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty());
    if n.ok() != Some(bytes.len()) {
        return Err(Error::no_random());
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A state folder's identity as `Store::state_id` makes it.
pub fn is_state_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// How long a change of a session waits for the one before it: a `cage
/// limits` beside a turn updates the cage and loads its rules (its egress
/// log's listener may take 15 s to start).
const CHANGE_WAIT: std::time::Duration = std::time::Duration::from_secs(90);

/// Held while a command changes a session's record or loads its cage's
/// rules from it (`Store::change_lock`); released on drop.
#[derive(Debug)]
pub struct ChangeLock {
    _file: File,
}

/// Held while a command changes or uses a session; released on drop (the
/// kernel releases a flock when its process ends, even by a crash). flock
/// belongs to the open file description, so a child given the descriptor
/// (`fd`) holds it too, for as long as either has it open.
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
}

/// What holds a session's lock, as its holder wrote it in the lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Busy {
    /// `turn` (a `cage run` or `cage exec`), `create`, `move`, `rename`,
    /// `start`, `stop`, `rm`, `prune`; `a command` when the holder did not
    /// say.
    pub what: String,
    /// Since when, in Unix seconds (None when the holder did not say).
    #[serde(skip)]
    pub since: Option<u64>,
    /// The same, RFC 3339 with the local offset.
    #[serde(rename = "since")]
    #[schema(format = DateTime)]
    pub since_rfc3339: Option<String>,
    /// A turn whose model request the gateway holds at a budget: since
    /// when, and why (docs/gateway.md, "Budgets").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
}

/// A turn waiting on a budget, as its gateway wrote it in the session's
/// `@budget` file: while the turn holds the session's lock, no longer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Waiting {
    /// Since when, in Unix seconds.
    #[serde(rename = "since_secs")]
    #[schema(ignore)]
    pub since: u64,
    /// The same, RFC 3339 with the local offset (not read back).
    #[serde(rename = "since", default, skip_deserializing)]
    #[schema(format = DateTime)]
    pub since_rfc3339: String,
    /// Which budget: `session` (the session's own, in tokens or dollars)
    /// or `daily` (the machine's of the day).
    pub budget: String,
    /// The words the gateway's refusal would say: what was spent, of
    /// what budget, and how to raise it.
    pub why: String,
}

impl Busy {
    /// The lock file's text: `WHAT SECONDS`.
    fn parse(text: &str) -> Busy {
        let mut words = text.split_whitespace();
        let what = words
            .next()
            .filter(|w| w.chars().all(|c| c.is_ascii_lowercase()) && w.len() <= 16)
            .unwrap_or("a command")
            .to_string();
        let since = words.next().and_then(|s| s.parse::<u64>().ok());
        Busy {
            what,
            since,
            since_rfc3339: since.map(crate::state::when::rfc3339),
            waiting: None,
        }
    }
}

impl SessionLock {
    /// Say in the lock file what holds it, since when and which process,
    /// for `cage ls` (its BUSY) and a command refused as busy: the lock is
    /// this process's, so only it writes there.
    pub fn note(&self, what: &str) {
        self.write_note(&format!(
            "{what} {} {}\n",
            crate::state::when::now(),
            std::process::id()
        ));
    }

    /// Written over the old note, then cut to its length: a reader never
    /// finds the file empty in between (emptied first, a holder read in
    /// that moment was "a command", not who it is). The first line is
    /// what a reader parses.
    fn write_note(&self, line: &str) {
        use std::os::unix::fs::FileExt;
        if self._file.write_all_at(line.as_bytes(), 0).is_ok() {
            let _ = self._file.set_len(line.len() as u64);
        }
    }

    /// The same lock through another descriptor (dup(2)): flock(2) locks
    /// are the open file's, so it is held while either is open, and a
    /// process given either holds it too.
    pub fn share(&self) -> Result<SessionLock> {
        let file = self
            ._file
            .try_clone()
            .map_err(|e| Error::act("sharing the session's lock", &e))?;
        Ok(SessionLock { _file: file })
    }

    /// Its descriptor, to pass on to a process that must hold it too.
    pub fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self._file.as_raw_fd()
    }
}

/// Why a state folder must not be used, if it must not (pure). `chain`:
/// the folder (when it exists) and each existing folder above it, nearest
/// first, canonical, each with its owner and mode; `leaf`: whether the
/// first is the state folder itself. The state folder must be the user's
/// and writable by no one else; a folder above it the user's or root's,
/// and writable by no one else unless its sticky bit is set (`/tmp`): there
/// another user can neither rename nor remove what is not theirs
/// (chmod(2), "S_ISVTX"), so a folder of the user's own below it keeps its
/// content. ssh's StrictModes refuses such a folder; here it is accepted,
/// as a temporary state folder under /tmp is a common, safe layout.
pub fn state_dir_refusal(chain: &[(PathBuf, u32, u32)], leaf: bool, me: u32) -> Option<Error> {
    for (i, (path, uid, mode)) in chain.iter().enumerate() {
        let leaf = leaf && i == 0;
        if *uid != me && (leaf || *uid != 0) {
            let problem = StateProblem::OthersOwn {
                leaf,
                uid: *uid,
                me,
            };
            return Some(Error::state(path, problem));
        }
        let sticky = mode & 0o1000 != 0;
        if mode & 0o022 != 0 && (leaf || !sticky) {
            let problem = StateProblem::OthersWrite { leaf, mode: *mode };
            return Some(Error::state(path, problem));
        }
    }
    None
}

/// Refuse a state folder another user could change (`state_dir_refusal`),
/// before anything in it is read or written (exit 2).
pub fn check_state_dir(state: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = crate::host::userns::euid();
    // The nearest existing folder, as it really is (links followed).
    let (existing, leaf) = match state
        .ancestors()
        .find_map(|a| fs::canonicalize(a).ok().map(|c| (c, a == state)))
    {
        Some(found) => found,
        None => return Ok(()),
    };
    let chain: Vec<(PathBuf, u32, u32)> = existing
        .ancestors()
        .filter_map(|a| {
            let m = fs::metadata(a).ok()?;
            Some((a.to_path_buf(), m.uid(), m.mode()))
        })
        .collect();
    match state_dir_refusal(&chain, leaf, me) {
        Some(refused) => Err(refused),
        None => Ok(()),
    }
}

/// Make a folder (and its parents) with mode 0700, and make sure an
/// existing one is 0700 too.
pub fn make_private_dir(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .ctx(|| Doing::Make(dir.to_path_buf()))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .ctx(|| Doing::SetModeOf(dir.to_path_buf()))
}

/// Make a folder whose parent exists, mode 0700, or take the one there if
/// it is a real folder of this user's: never a link, which `mkdir -p` and
/// chmod would follow. Used where a link could have been left by someone
/// else (the outboxes).
pub fn make_private_dir_here(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::act(Doing::Make(dir.to_path_buf()), &e)),
    }
    let meta = fs::symlink_metadata(dir).ctx(|| Doing::LookAt(dir.to_path_buf()))?;
    if !meta.file_type().is_dir() {
        return Err(Error::state(dir, StateProblem::NotAFolder));
    }
    let me = rustix::process::getuid().as_raw();
    // As root, a cage's own folder (an outbox a rootful cage wrote to)
    // belongs to the cage's root: `userns`.
    if !crate::host::userns::owned_by_me_or_my_cages(meta.uid(), me) {
        return Err(Error::state(
            dir,
            StateProblem::NotYours { uid: meta.uid() },
        ));
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .ctx(|| Doing::SetModeOf(dir.to_path_buf()))
}

/// Before a write in the state folder that is not [`write_atomic`] (a
/// drop's file, its name and note, a send's folders and archive, a file
/// removed): the tests' fault hook (`process::crash`) counts it and may
/// fail it. Nothing outside the tests.
pub fn before_write() -> std::io::Result<()> {
    #[cfg(test)]
    crate::host::process::crash::before_write()?;
    Ok(())
}

/// Once such a write is done: in the tests, the tool may die here.
pub fn after_write() {
    #[cfg(test)]
    crate::host::process::crash::after_write();
}

/// Write a file atomically: a temporary file in the same folder with the
/// given mode, fsync, rename over the target, fsync the folder.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    write_replacing(path, bytes, mode, true)
}

/// `write_atomic` without the flushes to disk: for what matters only while
/// the machine runs (a turn's marker, a start's intent: no cage is left
/// running by a machine that went down), which a process dying at any
/// point still leaves whole, old or new.
pub fn write_atomic_unsynced(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    write_replacing(path, bytes, mode, false)
}

/// `write_atomic`'s or `write_atomic_unsynced`'s work, with or without
/// the flushes (`sync`).
fn write_replacing(path: &Path, bytes: &[u8], mode: u32, sync: bool) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::state(path, StateProblem::NoFolder))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        before_write()?;
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(mode)
            .open(&tmp)?;
        // The mode given to open is masked by the umask; set it exactly.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        if sync {
            f.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if sync {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    if result.is_ok() {
        after_write();
    }
    result.ctx(|| Doing::Write(path.to_path_buf()))
}

pub fn remove_file_if_there(p: &Path) -> Result<()> {
    match fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::act(Doing::Remove(p.to_path_buf()), &e)),
    }
}

pub fn remove_dir_if_there(p: &Path) -> Result<()> {
    match fs::remove_dir_all(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::act(Doing::Remove(p.to_path_buf()), &e)),
    }
}

/// The rotated copy of a log file: `x.egress.jsonl` → `x.egress.1.jsonl`.
pub fn older(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = name.unwrap_or_default();
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    path.with_file_name(format!("{stem}.1.jsonl"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_source_gone_or_made_a_link_is_changed() {
        let scratch = tempfile::tempdir().unwrap();
        let d = scratch.path().to_path_buf();
        fs::create_dir_all(d.join("p/.vscode")).unwrap();
        let s = MountSource::now(&d.join("p/.vscode")).unwrap();
        assert_eq!(s.changed(), None);
        fs::remove_dir(d.join("p/.vscode")).unwrap();
        assert!(
            s.changed()
                .unwrap()
                .ends_with(".vscode is gone since the cage was made")
        );
        std::os::unix::fs::symlink("/etc", d.join("p/.vscode")).unwrap();
        assert!(s.changed().unwrap().contains("is a link now"));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn names() {
        for ok in ["a", "web", "Web_1.2-x", &"a".repeat(63)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            ".a",
            "a b",
            "a/b",
            "a:b",
            "é",
            "a\n",
            &"a".repeat(64),
        ] {
            let e = validate_name(bad).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput, "{bad:?}");
        }
    }

    #[test]
    fn changing_a_session_that_is_not_there_is_not_found_and_leaves_nothing() {
        let (store, dir) = temp_store();
        // No state folder yet, then one with no such session.
        for _ in 0..2 {
            let e = store.update("nosuch", |_| Ok(())).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::NotFound, "{}", e.message());
            assert!(!store.record_lock_path("nosuch").exists());
            std::fs::create_dir_all(store.sessions_dir()).unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn temp_store() -> (Store, PathBuf) {
        let dir = tempfile::Builder::new()
            .prefix("shrooms-store-test-")
            .tempdir()
            .unwrap()
            .keep()
            .join("state");
        (Store::new(&dir), dir)
    }

    fn record(name: &str) -> Record {
        sample_record(name)
    }

    /// Two threads of one process keeping the first id at once agree on
    /// one: each gets the id the file holds (serve makes two first cages
    /// at once on threads of its own).
    #[test]
    fn two_threads_keeping_the_first_id_agree_on_one() {
        for _ in 0..200 {
            let (store, dir) = temp_store();
            let store = std::sync::Arc::new(store);
            let kept: Vec<String> = ["a", "b"]
                .map(|c| {
                    let store = store.clone();
                    std::thread::spawn(move || store.keep_state_id(&c.repeat(32)).unwrap())
                })
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect();
            let file = store.state_id_if_any().unwrap().unwrap();
            assert_eq!(kept, [file.clone(), file], "{kept:?}");
            let _ = std::fs::remove_dir_all(dir.parent().unwrap());
        }
    }

    #[test]
    fn save_load_list_remove() {
        let (store, dir) = temp_store();
        store.ensure().unwrap();
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        store.save(&record("b")).unwrap();
        store.save(&record("a")).unwrap();
        let mode = fs::metadata(store.record_path("a"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(store.load("a").unwrap(), record("a"));
        let names: Vec<String> = store.list().unwrap().into_iter().map(|r| r.name).collect();
        assert_eq!(names, vec!["a", "b"]);
        store.remove("a").unwrap();
        assert_eq!(
            store.load("a").unwrap_err().kind,
            crate::error::Kind::NotFound
        );
        fs::remove_dir_all(dir).unwrap();
    }

    /// A turn's marker means a dead turn only once nobody holds the lock:
    /// no marker (a cage `cage start` started), or a live holder, is none.
    #[test]
    fn a_dead_turn_is_a_marker_with_a_free_lock() {
        let (store, dir) = temp_store();
        store.ensure().unwrap();
        store.save(&record("a")).unwrap();
        let held = store.lock("a").unwrap();
        assert!(store.dead_turn("a").unwrap().is_none(), "no marker");
        write_atomic(&store.turn_marker("a"), b"", 0o600).unwrap();
        assert!(store.dead_turn("a").unwrap().is_none(), "a live turn");
        assert_eq!(store.turn_markers(), vec!["a".to_string()]);
        drop(held);
        let taken = store.dead_turn("a").unwrap().expect("a dead turn");
        assert!(store.lock_held("a").unwrap(), "its lock is taken");
        drop(taken);
        store.remove("a").unwrap();
        assert!(!store.turn_marker("a").exists(), "rm leaves the marker");
        fs::remove_dir_all(dir).unwrap();
    }

    /// A holder killed while the lock it passed on is still held (a turn's
    /// watcher, about to say it is stopping the cage): the next command
    /// waits for it rather than calling the session busy. A live holder
    /// is refused at once, as ever.
    #[test]
    fn a_gone_holder_is_waited_for_a_moment() {
        let (store, dir) = temp_store();
        store.ensure().unwrap();
        store.save(&record("a")).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        assert!(!process_exists(gone));
        // The watcher's hold: the lock, through its own open file.
        let watcher = store.lock("a").unwrap();
        watcher.write_note(&format!("exec 1700000000 {}\n", std::process::id()));
        let e = store.lock("a").unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::Busy, "{e:?}");
        watcher.write_note(&format!("exec 1700000000 {gone}\n"));
        let t0 = std::time::Instant::now();
        let watching = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(500));
            watcher.note(STOPPING);
            std::thread::sleep(std::time::Duration::from_millis(500));
            drop(watcher);
        });
        let taken = store.lock("a").expect("waited for the watcher");
        assert!(t0.elapsed() >= std::time::Duration::from_millis(900));
        watching.join().unwrap();
        drop(taken);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn who_is_one_plain_line() {
        for ok in [
            "alice",
            "Alice Smith <a@b.c>",
            "jan over HTTP from [::1]:5",
            "é",
            &"x".repeat(200),
        ] {
            assert!(validate_who(ok).is_ok(), "{ok:?}");
        }
        let e = |w: &str| validate_who(w).unwrap_err();
        assert_eq!(e("").kind, crate::error::Kind::BadInput);
        assert_eq!(
            e("").message(),
            "--by \"\" is empty: say who, like --by alice, or leave --by out for your user name"
        );
        assert!(e("  ").message().contains("is empty"));
        assert_eq!(
            e("a\nb").message(),
            "--by \"a\\nb\" holds a control character (a line break, a tab, an escape): \
             `cage history` prints an entry a line; give who on one line, in plain characters"
        );
        for bad in ["a\tb", "a\rb", "\u{1b}[31mred", "a\u{7f}"] {
            assert!(e(bad).message().contains("control character"), "{bad:?}");
        }
        assert_eq!(
            e(&"é".repeat(201)).message(),
            format!(
                "--by {:?}... is 201 characters long; give at most 200",
                "é".repeat(40)
            )
        );
    }

    #[test]
    fn container_names_the_tool_makes() {
        assert!(is_container_name_of("shrooms-web-0a9f3c", "web"));
        assert!(is_container_name_of("shrooms-a-b-123456", "a-b"));
        for bad in [
            "--all",
            "shrooms-web-0A9F3C",
            "shrooms-web-0a9f3",
            "shrooms-web-0a9f3c1",
            "shrooms-other-0a9f3c",
            "shrooms-web0a9f3c",
            "web-0a9f3c",
            "shrooms-web-0a9f3g",
        ] {
            assert!(!is_container_name_of(bad, "web"), "{bad}");
        }
    }

    /// A record whose name is not its file's, or whose container is not a
    /// name the tool makes, is damaged: refused with the file and what to do.
    #[test]
    fn a_record_edited_by_hand_is_refused_as_damaged() {
        let (store, dir) = temp_store();
        store.ensure().unwrap();
        let mut r = record("a");
        r.cage = Some(sample_cage("--all"));
        store.save(&r).unwrap();
        let e = store.load("a").unwrap_err();
        let file = store.record_path("a").display().to_string();
        assert_eq!(e.kind, crate::error::Kind::Failed);
        assert!(
            e.message().starts_with(&format!(
                "the record {file} is damaged: its container \"--all\" is not a name"
            )),
            "{}",
            e.message()
        );
        assert!(
            e.message().contains(&format!("`rm {file}`")),
            "{}",
            e.message()
        );
        assert!(store.lock_and_load("a").is_err());
        assert!(store.list().is_err());
        // its own name is fine, in another file's place it is not
        r.cage.as_mut().unwrap().container = "shrooms-a-00ff00".into();
        store.save(&r).unwrap();
        assert_eq!(store.load("a").unwrap(), r);
        fs::copy(store.record_path("a"), store.record_path("b")).unwrap();
        let e = store.load("b").unwrap_err();
        assert!(
            e.message()
                .contains("is damaged: its name is \"a\", not \"b\" as its file's name says"),
            "{}",
            e.message()
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn files_policy_allows_and_remembers_the_newest_refusals() {
        let mut p = FilesPolicy {
            allow: vec!["alpha/review".into(), "beta/*".into()],
            ..FilesPolicy::default()
        };
        assert!(p.allows("alpha", "review"));
        assert!(!p.allows("alpha", "other"));
        assert!(p.allows("beta", "anything"));
        assert!(!p.allows("gamma", "review"));
        for i in 0..15 {
            p.remember_refused(i, format!("gamma/s{i}"));
        }
        assert_eq!(p.refused.len(), REFUSED_KEPT);
        assert_eq!(p.refused[0].from, "gamma/s5");
        assert_eq!(p.refused[9].from, "gamma/s14");
    }

    #[test]
    fn an_older_record_without_the_new_fields_reads() {
        let text =
            r#"{"version":1,"name":"a","dir":"/p","harness":"claude","created":1,"cage":null}"#;
        let r: Record = serde_json::from_str(text).unwrap();
        assert!(!r.auto_approve);
        assert_eq!(r.files, FilesPolicy::default());
        assert_eq!(r.tokens, Tokens::default());
        assert_eq!(r.tokens.budget, None);
        assert_eq!(r.tokens.usd_budget, None);
        assert!(r.tokens.by_model.is_empty());
        assert_eq!(r.tokens.spend().usd, Some(Usd::default()));
        assert_eq!(r.accept_caged, None);
        // A last turn kept before models were: its counts, no models.
        let text = r#"{"budget":5,"used":{"input_tokens":3},"last_turn":{"started":2,"input_tokens":3,"responses":1}}"#;
        let t: Tokens = serde_json::from_str(text).unwrap();
        assert_eq!(t.last_turn.unwrap().usage.input_tokens, 3);
        assert!(!r.accepts_caged());
    }

    #[test]
    fn the_holder_of_a_lock_is_told() {
        let (store, dir) = temp_store();
        assert_eq!(store.busy("s").unwrap(), None);
        let lock = store.lock("s").unwrap();
        assert_eq!(store.busy("s").unwrap().unwrap().what, "a command");
        lock.note("turn");
        let b = store.busy("s").unwrap().unwrap();
        assert_eq!(b.what, "turn");
        assert!(b.since.unwrap() + 5 >= crate::state::when::now());
        drop(lock);
        assert_eq!(store.busy("s").unwrap(), None);
        // A new holder that says nothing is not taken for the last one.
        let _lock = store.lock("s").unwrap();
        assert_eq!(store.busy("s").unwrap().unwrap().what, "a command");
        assert!(Busy::parse("create 1796061909\n").since_rfc3339.is_some());
        assert_eq!(Busy::parse("x; rm -rf 12").what, "a command");
        drop(_lock);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_second_lock_is_busy_until_the_first_is_dropped() {
        let (store, dir) = temp_store();
        let first = store.lock("s").unwrap();
        assert_eq!(store.lock("s").unwrap_err().kind, crate::error::Kind::Busy);
        // What holds it is told as data, its process too.
        store.save(&record("s")).unwrap();
        first.note("move");
        let e = store.lock("s").unwrap_err();
        let holder = e.holder().expect("a holder");
        assert_eq!(holder.what, "move");
        assert!(holder.since.is_some(), "{holder:?}");
        assert_eq!(holder.pid, Some(std::process::id()));
        assert!(
            e.message().contains("(`cage move`, pid "),
            "{}",
            e.message()
        );
        assert!(store.lock("other").is_ok());
        drop(first);
        assert!(store.lock("s").is_ok());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn no_session_shares_a_lock_file_with_another_sessions_record() {
        let (store, dir) = temp_store();
        let names = ["a", "a.record", "a.json", "a.history", "a.lock"];
        let mut files: Vec<PathBuf> = names
            .iter()
            .flat_map(|n| {
                [
                    store.record_path(n),
                    store.lock_path(n),
                    store.record_lock_path(n),
                    store.history_path(n),
                ]
            })
            .collect();
        let all = files.len();
        files.sort();
        files.dedup();
        assert_eq!(files.len(), all, "two sessions share a file: {files:?}");
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn a_state_folder_only_its_user_can_change() {
        let c = |v: &[(&str, u32, u32)]| -> Vec<(PathBuf, u32, u32)> {
            v.iter()
                .map(|(p, u, m)| (PathBuf::from(p), *u, *m))
                .collect()
        };
        let dir = 0o40000;
        // The user's, under their home, under root's /home.
        let home = c(&[
            ("/home/u/.local/share/shrooms-agent", 1001, dir | 0o700),
            ("/home/u/.local/share", 1001, dir | 0o755),
            ("/home/u", 1001, dir | 0o700),
            ("/home", 0, dir | 0o755),
            ("/", 0, dir | 0o755),
        ]);
        assert!(state_dir_refusal(&home, true, 1001).is_none());
        // Root using it: another user's folder.
        let why = state_dir_refusal(&home, true, 0).unwrap().message();
        assert!(
            why.starts_with("/home/u/.local/share/shrooms-agent is shrooms-agent's state folder, and it belongs to uid 1001, not to you (uid 0)"),
            "{why}"
        );
        // Not made yet: a parent of another user's.
        let why = state_dir_refusal(&home[1..], false, 0).unwrap().message();
        assert!(
            why.contains("/home/u/.local/share is a folder above"),
            "{why}"
        );
        // Under sticky /tmp: accepted; a group-writable folder is not.
        let tmp = c(&[
            ("/tmp/s/state", 0, dir | 0o700),
            ("/tmp/s", 0, dir | 0o755),
            ("/tmp", 0, dir | 0o1777),
            ("/", 0, dir | 0o755),
        ]);
        assert!(state_dir_refusal(&tmp, true, 0).is_none());
        let mut open = tmp.clone();
        open[1].2 = dir | 0o775;
        let why = state_dir_refusal(&open, true, 0).unwrap().message();
        assert!(why.contains("/tmp/s is a folder above"), "{why}");
        assert!(
            why.contains("(mode 0775)") && why.contains("chmod go-w /tmp/s"),
            "{why}"
        );
        // The state folder itself: never writable by others, sticky or not.
        let mut leaf = tmp.clone();
        leaf[0].2 = dir | 0o1777;
        assert!(state_dir_refusal(&leaf, true, 0).is_some());
        // A world-writable folder above without the sticky bit.
        let mut bare = tmp;
        bare[2].2 = dir | 0o777;
        assert!(
            state_dir_refusal(&bare, true, 0)
                .unwrap()
                .message()
                .contains("/tmp is a folder above")
        );
    }
}
