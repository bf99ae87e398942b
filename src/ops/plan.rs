//! Operations as plans: a decision returns a list of steps, and one
//! executor runs them in order. When a step fails, the executor takes back
//! the steps before it, newest first, down to the last step that cannot be
//! taken back (a container removed stays removed: what came before it is
//! kept, and the operation's intent finishes the rest).
//!
//! A crash takes nothing back. So an operation's first step writes its
//! intent (`session::Intent`) in the state folder, and its last removes it;
//! the next command that takes the session's lock, and `cage ls` and
//! `doctor`, find an intent left behind and finish or take back what it
//! names ([`repair`]), saying so in one line (`Context::note`).

use std::path::{Path, PathBuf};

use super::acts::cage_files::{self, FilesUndo, MakeFiles};
use super::{Context, acts};
use crate::error::{Doing, Error, Kind, RemovedBy, Result, Warning};
use crate::host::Host;
use crate::state::session::{self, HistoryEntry, Intent, MountSource, Record};

/// One thing an operation does, with what takes it back.
pub enum Step<'a> {
    /// Write the operation's intent (taken back: removed).
    Intent { session: String, intent: Intent },
    /// Keep `id`, drawn when the plan was made, as the state folder's
    /// identity, which has none yet (`Store::keep_state_id`). Of two
    /// processes making it at once, one wins and both use its id: the id
    /// kept is in `Ran::state_id`, and the steps that make the container
    /// and write its record put it on the container's label. Not taken
    /// back: it names the state folder for every later cage, and a
    /// process that won the race beside this one may use it already.
    StateId { id: String },
    /// The cage's folders and files on the machine: its private home,
    /// proxy folder, seccomp profile, settings copies, received files,
    /// outbox, the protected paths made empty (taken back: what it made).
    /// What to make is the decision's, owned by the step.
    CageFiles(Box<dyn MakeFiles>),
    /// `podman volume create` of the shared folder (never taken back: it is
    /// every session's given it).
    CreateVolume { name: String, label: String },
    /// `podman create` (taken back: `podman rm -f`, and its folders).
    CreateContainer {
        name: String,
        argv: Vec<String>,
        /// The image it is made from, looked at through an inspect kept
        /// from an earlier command (`image::facts_for_cage`).
        image: String,
    },
    /// Remember a folder untrusted after a sealed session, or forget it
    /// (`--unseal`). Not taken back: a folder is untrusted whatever
    /// becomes of the session.
    Untrusted {
        dir: PathBuf,
        session: String,
        remember: bool,
    },
    /// Write a new session's record; the cage's mount sources are looked
    /// at now, once its folders exist (taken back: the record removed).
    NewRecord(Box<Record>),
    /// Change a session's cage, folder and last image (taken back: as
    /// they were).
    ChangeRecord {
        session: String,
        cage: Option<Box<session::CageRecord>>,
        dir: PathBuf,
        last_image: Option<String>,
    },
    /// Append to the session's history (not taken back: it says what was
    /// done, and an undo leaves its own trace in nothing).
    History {
        session: String,
        entry: HistoryEntry,
    },
    /// `podman rm -f` and the cage's folders. Cannot be taken back. With
    /// `best_effort`, a failure is a warning, not the operation's: the
    /// intent is kept, and the next command on the session finishes it.
    RemoveContainer { name: String, best_effort: bool },
    /// Remove the session's record, history and lock file. Cannot be
    /// taken back.
    RemoveRecord { session: String },
    /// `podman start` (taken back: `podman stop`); `gone` is the error when
    /// it fails and the container is not there.
    Start { container: String, gone: Error },
    /// `podman update` of a started cage's limits (nothing to take back: a
    /// stop follows).
    Update {
        container: String,
        argv: Vec<String>,
    },
    /// Inspect the started cage and load its network rules; its first
    /// process's pid is kept in `Ran::pid`. `gone` and `old` are the errors
    /// when it is not there, or was not made with the machine's init.
    Rules {
        /// Whose cage: its egress log is kept under its name.
        session: String,
        cage: Box<session::CageRecord>,
        gone: Error,
        old: Error,
    },
    /// The operation is done: its intent removed. A failure is harmless
    /// (the next command finds the work done) and only warned of.
    Done { session: String },
    /// `podman stop`. Cannot be taken back. With `best_effort`, a failure
    /// is ignored (a cage refused anyway, stopped whatever its state).
    Stop {
        container: String,
        best_effort: bool,
    },
    /// The operation refuses, after what came before it (a cage of an
    /// earlier shrooms-agent, stopped first): always fails with this error.
    Refuse(Error),
    /// The copies of the user's settings files a cage mounts, written
    /// again before a start, filtered by today's allow-list; pi's
    /// models.json copy with none of the machine's providers until the
    /// turn's gateway listens (not taken back: the next start writes them
    /// again).
    SettingsCopies(Box<Record>),
    /// This program and the cages' init put in the state folder's
    /// `tools/`, which the cage mounts (not taken back: any cage may use
    /// them).
    Tools(PathBuf),
    /// The session's own git directory brought up to date with the user's
    /// repository before a start (`git::sync`; not taken back: the next
    /// start does it again). What fails is a warning: git in the cage then
    /// sees the refs of the last sync.
    GitSync {
        dir: PathBuf,
        own: PathBuf,
        base: PathBuf,
    },
    /// A dead turn ended (`acts::turn::end_dead_turn`): its cage stopped
    /// where it runs, its marker removed; what was stopped said as a
    /// warning. Cannot be taken back.
    EndDeadTurn { session: String, container: String },
    /// Our image, stale, built again in the background from this program's
    /// Containerfile (`image::start_rebuild`; not taken back: the build is
    /// for every later cage, and the cage is made from the old one
    /// meanwhile). What it says is kept in `Ran::rebuilt`.
    Rebuild {
        stage: crate::images::workbench::Stage,
        /// The image's name, as the warning says it.
        image: String,
    },
    /// Our image, missing, its build started in the background
    /// (`image::start_build`): a create or move refused for want of it.
    /// Always fails, with what that says (being built, or the last
    /// build's failure). Not taken back: the build is for every later cage.
    StartBuild {
        stage: crate::images::workbench::Stage,
    },
    /// A turn's marker (`Store::turn_marker`), made before its cage starts
    /// (taken back: removed, unless the cage could not be stopped).
    TurnMarker { session: String },
    /// A turn's watcher, which stops the cage if this process dies; kept
    /// in `Ran::watcher` (taken back: told whether the cage was stopped,
    /// and waited for).
    Watcher {
        session: String,
        container: String,
        /// The session's lock, which the watcher is given and holds with
        /// this process: another descriptor of the one the turn holds
        /// (`SessionLock::share`), so the lock is the same.
        lock: session::SessionLock,
    },
    /// A turn's model gateway, pi's copy of models.json pointed at it;
    /// kept in `Ran::gateway` (taken back: closed).
    Gateway {
        record: Box<Record>,
        /// pi's providers: their routes are the gateway's once it opens.
        pi: Option<std::cell::RefCell<crate::cage::pi_models::Plan>>,
    },
    /// A turn's cage socket; kept in `Ran::socket` (taken back: closed).
    Socket(Box<Record>),
    /// What a turn's process reads, pointed at its gateway: the env file
    /// `podman exec` is given (taken back: removed) and Claude Code's
    /// `.claude.json` in the cage's home (not taken back: the cage's own,
    /// and written again at every turn); kept in `Ran::env`.
    TurnEnv(Box<Record>),
    /// `podman update` of a cage's limits by `cage limits` (taken back:
    /// `podman update` with `back`, the limits it had).
    UpdateLimits {
        argv: Vec<String>,
        back: Vec<String>,
    },
    /// The record's limits, network policy and token budget, as `cage
    /// limits` sets them (taken back: as they were).
    SetLimits {
        session: String,
        /// The cage they are for: a session moved meanwhile (beside a turn,
        /// `cage limits` holds no lock) is refused as busy.
        container: String,
        /// The new limits and whether they are the session's own.
        limits: Option<(crate::settings::Limits, bool)>,
        net: Option<crate::net::netpolicy::NetPolicy>,
        budgets: acts::limits::Budgets,
    },
    /// The running cage's rules loaded again from its record as it will
    /// be (`cage limits --net`). A failure stops the cage: it never runs
    /// with rules other than its record's.
    NewRules {
        session: String,
        cage: Box<session::CageRecord>,
    },
    /// rename(2) of a file or folder to a name that is free, or (a folder)
    /// over an empty folder (taken back: renamed back).
    MoveFile { from: PathBuf, to: PathBuf },
    /// Remove a file, or a folder with all in it. Cannot be taken back.
    /// With `best_effort`, a failure is a warning, not the operation's.
    RemoveFile { path: PathBuf, best_effort: bool },
    /// Make a private folder (0700) (taken back, unless `keep` or it was
    /// there: removed with what was put in it).
    PrivateDir { path: PathBuf, keep: bool },
    /// Write a record under a name that has none; its cage's mount sources
    /// are looked at now (taken back: that record's file removed, and
    /// nothing else under the name, which may hold what a step before put
    /// there).
    WriteRecord(Box<Record>),
    /// Pack an outbox (or the folder `only` of it) into a new archive
    /// `to`, at most `max` bytes (`crate::cage::pack`); what was packed is kept
    /// in `Ran::packed`. Taken back by the `PrivateDir` it is made in.
    Pack {
        outbox: PathBuf,
        only: Option<PathBuf>,
        to: PathBuf,
        max: u64,
    },
    /// Hand the archive `path` to a session, here or on another machine
    /// (`acts::send::deliver`); where it was put is kept in `Ran::delivered`.
    /// Cannot be taken back.
    Deliver(Box<super::acts::send::Delivery>),
    /// Remember in a session's record that a sender was refused (not
    /// taken back: it was).
    RememberRefused {
        session: String,
        from: String,
        when: u64,
    },
    /// Store a drop (`acts::drop::store`): what is kept in `Ran::received`.
    /// Nothing to take back: it keeps nothing when it fails.
    ///
    /// The one step that borrows (hence `Step`'s lifetime): its body is
    /// the sender's stream (an HTTP body, a local archive), read as it is
    /// stored, at most the drop's length. Read into memory first, it
    /// would hold a whole file (up to the bounds' size) where a buffer is
    /// held now; so it stays a stream, lent by whoever reads it.
    Receive(Box<super::acts::drop::Incoming<'a>>),
    /// A start's mount sources and private home looked at, as they lead
    /// now, after the steps that make ours again: refused when one is gone
    /// or leads elsewhere than when the cage was made. Nothing to take
    /// back.
    CheckSources {
        session: String,
        cage: Box<session::CageRecord>,
    },
}

#[cfg(test)]
impl Step<'_> {
    /// The step in a few words, for the plans' tests.
    pub fn describe(&self) -> String {
        match self {
            Step::Intent { intent, .. } => format!("intent {}", intent_words(intent)),
            Step::StateId { id } => format!("state id {id}"),
            Step::CageFiles(p) => format!("cage files {}", p.container()),
            Step::CreateVolume { name, .. } => format!("create volume {name}"),
            Step::CreateContainer { name, .. } => format!("create container {name}"),
            Step::Untrusted { remember, .. } => {
                format!(
                    "{} untrusted",
                    if *remember { "remember" } else { "forget" }
                )
            }
            Step::NewRecord(r) => format!("new record {}", r.name),
            Step::ChangeRecord { cage, .. } => format!(
                "change record to {}",
                cage.as_ref().map_or("no cage", |c| c.container.as_str())
            ),
            Step::History { .. } => "history".to_string(),
            Step::RemoveContainer { name, best_effort } => format!(
                "remove container {name}{}",
                if *best_effort { " (best effort)" } else { "" }
            ),
            Step::RemoveRecord { session } => format!("remove record {session}"),
            Step::Start { container, .. } => format!("start {container}"),
            Step::Update { container, .. } => format!("update {container}"),
            Step::Rules { cage, .. } => format!("rules {}", cage.container),
            Step::Done { .. } => "done".to_string(),
            Step::Stop {
                container,
                best_effort,
            } => format!(
                "stop {container}{}",
                if *best_effort { " (best effort)" } else { "" }
            ),
            Step::Refuse(e) => format!("refuse: {}", e.message()),
            Step::SettingsCopies(r) => format!("settings copies {}", r.name),
            Step::Tools(_) => "tools".to_string(),
            Step::GitSync { own, .. } => format!("git sync {}", own.display()),
            Step::EndDeadTurn { container, .. } => format!("end dead turn {container}"),
            Step::Rebuild { image, .. } => format!("rebuild {image}"),
            Step::StartBuild { stage } => format!("start build {}", stage.name()),
            Step::TurnMarker { .. } => "turn marker".to_string(),
            Step::Watcher { .. } => "watcher".to_string(),
            Step::Gateway { .. } => "gateway".to_string(),
            Step::Socket(_) => "socket".to_string(),
            Step::TurnEnv(_) => "turn env".to_string(),
            Step::UpdateLimits { argv, .. } => {
                format!("update limits {}", argv.last().map_or("", String::as_str))
            }
            Step::SetLimits { session, .. } => format!("set limits {session}"),
            Step::NewRules { cage, .. } => format!("new rules {}", cage.container),
            Step::MoveFile { from, to } => format!("move {} -> {}", from.display(), to.display()),
            Step::RemoveFile { path, best_effort } => format!(
                "remove {}{}",
                path.display(),
                if *best_effort { " (best effort)" } else { "" }
            ),
            Step::PrivateDir { path, .. } => format!("make {}", path.display()),
            Step::WriteRecord(r) => format!("write record {}", r.name),
            Step::Pack { to, .. } => format!("pack {}", to.display()),
            Step::Deliver(d) => format!("deliver to {}", d.to()),
            Step::RememberRefused { session, from, .. } => {
                format!("remember {from} refused by {session}")
            }
            Step::Receive(i) => format!("receive {}", i.words()),
            Step::CheckSources { .. } => "check sources".to_string(),
        }
    }
}

#[cfg(test)]
fn intent_words(intent: &Intent) -> String {
    let or_none = |c: &Option<String>| c.clone().unwrap_or_else(|| "none".into());
    match intent {
        Intent::Create { container } => format!("create {container}"),
        Intent::Move { from, to } => format!("move {} -> {}", or_none(from), or_none(to)),
        Intent::Remove { container } => format!("remove {}", or_none(container)),
        Intent::Start { container } => format!("start {container}"),
        Intent::Rename {
            from, to, old, new, ..
        } => format!(
            "rename {from} -> {to} ({} -> {})",
            or_none(old),
            or_none(new)
        ),
    }
}

/// What takes a step back.
enum Undo {
    Intent(String),
    Stop(String),
    Files(FilesUndo),
    Container(String),
    Record(String),
    Restore(Box<Record>),
    /// The turn's marker, removed unless the cage was left running.
    Marker(PathBuf),
    /// `Ran::watcher`, told whether the cage was stopped.
    Watcher,
    /// `Ran::gateway`, closed.
    Gateway,
    /// `Ran::socket`, closed.
    Socket,
    /// The turn's env file, removed.
    EnvFile(PathBuf),
    /// `podman update` with the limits the cage had.
    Limits(Vec<String>),
    /// The record's limits, policy and budget as they were, and nothing
    /// else of it: a turn beside `cage limits` counts its tokens there.
    SetLimits {
        session: String,
        container: String,
        before: acts::limits::LimitsSet,
    },
    /// Rename back: (from, to) of the rename.
    MoveBack(PathBuf, PathBuf),
    /// A folder made, removed with what is in it.
    Dir(PathBuf),
    /// A record file written, removed.
    RecordFile(PathBuf),
}

/// What a plan run said besides success: warnings for the user.
#[derive(Default)]
pub struct Ran {
    pub warnings: Vec<Warning>,
    /// What `Step::Rebuild` said (the build started, or why not).
    pub rebuilt: Option<Warning>,
    /// The state folder's identity `Step::StateId` kept: the one it was
    /// given, or another process's that won.
    pub state_id: Option<String>,
    /// The started cage's first process (`Step::Rules`).
    pub pid: Option<i64>,
    /// A step left work for the next command: the intent is kept.
    keep_intent: bool,
    /// A turn's watcher, gateway and socket (`Step::Watcher`, `Gateway`,
    /// `Socket`), for the turn to hold.
    pub watcher: Option<crate::host::process::Watcher>,
    pub gateway: Option<crate::turn::gateway::Gateway>,
    pub socket: Option<crate::turn::cage_socket::Socket>,
    /// What `Step::TurnEnv` wrote.
    pub env: Option<acts::turn::TurnEnv>,
    /// Taking back a start could not stop the cage: what needs it stopped
    /// is left to the watcher (its marker kept).
    left_running: bool,
    /// What `Step::Pack` packed.
    pub packed: Option<crate::cage::pack::Packed>,
    /// Where `Step::Deliver` put the archive, and its size there.
    pub delivered: Option<(String, u64)>,
    /// What `Step::Receive` stored.
    pub received: Option<super::acts::drop::Received>,
}

/// Run a plan's steps in order; when one fails, take back the ones before
/// it, newest first, and return its error. `host` is None where there is
/// no podman (a cage taken out of a session while podman is gone).
pub fn execute(ctx: &Context, host: Option<&Host>, steps: Vec<Step>) -> Result<Ran> {
    let mut undo: Vec<Undo> = Vec::new();
    let mut ran = Ran::default();
    for step in &steps {
        if let Some(p) = progress_of(step) {
            ctx.progress(p);
        }
        match run(ctx, host, step, &mut ran) {
            Ok(Some(u)) => undo.push(u),
            Ok(None) => {}
            Err(e) => {
                for u in undo.iter().rev() {
                    take_back(ctx, host, u, &mut ran);
                }
                return Err(e);
            }
        }
        // Past a step that cannot be taken back, nothing before it is
        // either: the intent finishes the rest after a crash.
        if matches!(
            step,
            Step::RemoveContainer { .. }
                | Step::RemoveRecord { .. }
                | Step::RemoveFile { .. }
                | Step::Deliver(_)
                | Step::EndDeadTurn { .. }
        ) {
            undo.clear();
        }
    }
    Ok(ran)
}

/// Pure: what a face on a terminal is told as a step begins: the steps
/// that wait on podman for long.
fn progress_of(step: &Step) -> Option<super::Progress> {
    use super::Progress as P;
    Some(match step {
        Step::CreateContainer { name, image, .. } => P::Making {
            container: name.clone(),
            image: image.clone(),
        },
        Step::RemoveContainer { name, .. } => P::Removing {
            container: name.clone(),
        },
        Step::Stop { container, .. } => P::Stopping {
            container: container.clone(),
        },
        Step::Start { container, .. } => P::Starting {
            container: container.clone(),
        },
        _ => return None,
    })
}

fn podman(host: Option<&Host>) -> Result<&Host> {
    host.ok_or_else(Error::no_podman)
}

fn run(ctx: &Context, host: Option<&Host>, step: &Step, ran: &mut Ran) -> Result<Option<Undo>> {
    match step {
        Step::Intent { session, intent } => write_intent(ctx, session, intent),
        Step::StateId { id } => state_id(ctx, id, ran),
        Step::CageFiles(files) => cage_files(ctx, files.as_ref()),
        Step::CreateVolume { name, label } => none(podman(host)?.podman.volume_create(name, label)),
        Step::CreateContainer { name, argv, image } => create(ctx, host, name, argv, image, ran),
        Step::Untrusted {
            dir,
            session,
            remember,
        } => untrusted(ctx, dir, session, *remember),
        Step::NewRecord(record) => new_record(ctx, record, ran),
        Step::ChangeRecord {
            session,
            cage,
            dir,
            last_image,
        } => change_record(ctx, session, cage.as_deref(), dir, last_image, ran),
        Step::History { session, entry } => none(ctx.store.append_history(session, entry)),
        Step::RemoveContainer { name, best_effort } => remove(ctx, host, name, *best_effort, ran),
        Step::RemoveRecord { session } => none(ctx.store.remove(session)),
        Step::Start { container, gone } => start(host, container, gone),
        Step::Update { container, argv } => update(host, container, argv),
        Step::Rules {
            session,
            cage,
            gone,
            old,
        } => rules(ctx, host, session, cage, gone, old, ran),
        Step::Done { session } => done(ctx, session, ran),
        Step::Stop {
            container,
            best_effort,
        } => stop(host, container, *best_effort),
        Step::Refuse(e) => Err(e.clone()),
        Step::SettingsCopies(record) => none(super::write_settings_copies(ctx, record)),
        Step::Tools(exe) => tools(ctx, exe),
        Step::GitSync { dir, own, base } => git_sync(dir, own, base, ran),
        Step::EndDeadTurn { session, container } => dead_turn(ctx, host, session, container, ran),
        Step::Rebuild { stage, image } => rebuild(ctx, *stage, image, ran),
        Step::StartBuild { stage } => Err(super::image::start_build(ctx, *stage)),
        Step::TurnMarker { session } => turn_marker(ctx, session),
        Step::Watcher {
            session,
            container,
            lock,
        } => watcher(ctx, host, session, container, lock, ran),
        Step::Gateway { record, pi } => gateway(ctx, host, record, pi.as_ref(), ran),
        Step::Socket(record) => socket(ctx, record, ran),
        Step::TurnEnv(record) => turn_env(ctx, record, ran),
        Step::UpdateLimits { argv, back } => update_limits(host, argv, back),
        Step::SetLimits {
            session,
            container,
            limits,
            net,
            budgets,
        } => set_limits(ctx, session, container, limits, net, *budgets),
        Step::NewRules { session, cage } => new_rules(ctx, host, session, cage),
        Step::MoveFile { from, to } => move_file(from, to),
        Step::RemoveFile { path, best_effort } => remove_file(path, *best_effort, ran),
        Step::PrivateDir { path, keep } => private_dir(ctx, host, path, *keep, ran),
        Step::WriteRecord(record) => write_record(ctx, record, ran),
        Step::Pack {
            outbox,
            only,
            to,
            max,
        } => pack(outbox, only.as_deref(), to, *max, ran),
        Step::Deliver(delivery) => deliver(ctx, delivery, ran),
        Step::RememberRefused {
            session,
            from,
            when,
        } => none(acts::drop::remember_refused(ctx, session, from, *when)),
        Step::Receive(incoming) => receive(ctx, incoming, ran),
        Step::CheckSources { session, cage } => check_sources(ctx, session, cage),
    }
}

/// A step's act that leaves nothing to take back.
fn none(done: Result<()>) -> Result<Option<Undo>> {
    done.map(|()| None)
}

fn write_intent(ctx: &Context, session: &str, intent: &Intent) -> Result<Option<Undo>> {
    ctx.store.write_intent(session, intent)?;
    Ok(Some(Undo::Intent(session.to_string())))
}

fn state_id(ctx: &Context, id: &str, ran: &mut Ran) -> Result<Option<Undo>> {
    ran.state_id = Some(ctx.store.keep_state_id(id)?);
    Ok(None)
}

/// A `podman create` argv with the state folder's identity `Step::StateId`
/// kept on its label: the one drawn, unless another process kept its own
/// first.
fn labelled(argv: &[String], ran: &Ran) -> Vec<String> {
    match &ran.state_id {
        Some(id) => crate::host::podman::argv::relabel_state(argv, id),
        None => argv.to_vec(),
    }
}

/// A cage as its record keeps it: made with the state folder's identity
/// kept (`labelled`), and where its mount sources lead now (`measure`).
fn as_made(cage: &mut session::CageRecord, ran: &Ran) -> Result<()> {
    cage.create_argv = labelled(&cage.create_argv, ran);
    measure(cage)
}

fn update_limits(host: Option<&Host>, argv: &[String], back: &[String]) -> Result<Option<Undo>> {
    podman(host)?.podman.update(argv)?;
    Ok(Some(Undo::Limits(back.to_vec())))
}

fn new_rules(
    ctx: &Context,
    host: Option<&Host>,
    session: &str,
    cage: &session::CageRecord,
) -> Result<Option<Undo>> {
    none(acts::limits::load_new_rules(
        ctx,
        podman(host)?,
        session,
        cage,
    ))
}

fn move_file(from: &Path, to: &Path) -> Result<Option<Undo>> {
    rename(from, to, "to")?;
    Ok(Some(Undo::MoveBack(from.to_path_buf(), to.to_path_buf())))
}

fn deliver(ctx: &Context, delivery: &acts::send::Delivery, ran: &mut Ran) -> Result<Option<Undo>> {
    ran.delivered = Some(acts::send::deliver(ctx, delivery)?);
    Ok(None)
}

fn receive(ctx: &Context, incoming: &acts::drop::Incoming, ran: &mut Ran) -> Result<Option<Undo>> {
    ran.received = Some(acts::drop::store(ctx, incoming)?);
    Ok(None)
}

fn cage_files(ctx: &Context, plan: &dyn MakeFiles) -> Result<Option<Undo>> {
    let mut made = FilesUndo::default();
    match plan.make_files(ctx, &mut made) {
        Ok(()) => Ok(Some(Undo::Files(made))),
        Err(e) => {
            made.run();
            Err(e)
        }
    }
}

fn create(
    ctx: &Context,
    host: Option<&Host>,
    name: &str,
    argv: &[String],
    image: &str,
    ran: &mut Ran,
) -> Result<Option<Undo>> {
    // Taken back even if podman create fails late (a time-out after
    // the container was made); `rm -f --ignore` of nothing is
    // harmless.
    let podman = &podman(host)?.podman;
    if let Err(e) = podman.create(&labelled(argv, ran)) {
        take_back(ctx, host, &Undo::Container(name.to_string()), ran);
        // An image removed since its inspect was kept is told by
        // podman's exit status (`image exists`), never by its words.
        return Err(match podman.image_exists(image) {
            Ok(false) => Error::image(crate::error::ImageProblem::RemovedMeanwhile {
                image: image.to_string(),
            }),
            _ => e,
        });
    }
    Ok(Some(Undo::Container(name.to_string())))
}

fn untrusted(ctx: &Context, dir: &Path, session: &str, remember: bool) -> Result<Option<Undo>> {
    if remember {
        super::sealed::remember_untrusted(&ctx.store, dir, session)?;
    } else {
        super::sealed::forget_untrusted(&ctx.store, dir, Some(session))?;
    }
    Ok(None)
}

fn new_record(ctx: &Context, record: &Record, ran: &Ran) -> Result<Option<Undo>> {
    let mut record = record.clone();
    if let Some(cage) = &mut record.cage {
        as_made(cage, ran)?;
    }
    ctx.store.save(&record)?;
    Ok(Some(Undo::Record(record.name.clone())))
}

fn change_record(
    ctx: &Context,
    session: &str,
    cage: Option<&session::CageRecord>,
    dir: &Path,
    last_image: &Option<String>,
    ran: &Ran,
) -> Result<Option<Undo>> {
    let mut cage = cage.cloned();
    if let Some(c) = &mut cage {
        as_made(c, ran)?;
    }
    let before = ctx.store.update(session, |r| {
        let before = r.clone();
        r.cage = cage;
        r.dir = dir.to_path_buf();
        r.last_image = last_image.clone();
        Ok(before)
    })?;
    Ok(Some(Undo::Restore(Box::new(before))))
}

fn remove(
    ctx: &Context,
    host: Option<&Host>,
    name: &str,
    best_effort: bool,
    ran: &mut Ran,
) -> Result<Option<Undo>> {
    let removed = podman(host).and_then(|h| cage_files::remove_container(ctx, h, name));
    match removed {
        Ok(_) => {}
        // Without podman, left for `cage prune` once it is back: the
        // session must stay usable meanwhile.
        Err(e) if best_effort && e.kind == Kind::NoPodman => {
            ran.warnings.push(Warning::OldContainerLeft {
                container: name.to_string(),
                error: Box::new(e),
                later: RemovedBy::Prune,
            })
        }
        Err(e) if best_effort => {
            // The intent stays: the next command on the session
            // removes it.
            ran.keep_intent = true;
            ran.warnings.push(Warning::OldContainerLeft {
                container: name.to_string(),
                error: Box::new(e),
                later: RemovedBy::NextCommand,
            })
        }
        Err(e) => return Err(e),
    }
    Ok(None)
}

fn start(host: Option<&Host>, container: &str, gone: &Error) -> Result<Option<Undo>> {
    let h = podman(host)?;
    if let Err(e) = h.podman.start(container) {
        // Only on failure: is it gone, or did podman fail?
        return Err(match h.podman.container_exists(container) {
            Ok(false) => gone.clone(),
            _ => e,
        });
    }
    Ok(Some(Undo::Stop(container.to_string())))
}

fn update(host: Option<&Host>, container: &str, argv: &[String]) -> Result<Option<Undo>> {
    podman(host)?.podman.update(argv).map_err(|e| {
        e.context(Doing::LimitsAgain {
            container: container.to_string(),
        })
    })?;
    Ok(None)
}

fn rules(
    ctx: &Context,
    host: Option<&Host>,
    session: &str,
    cage: &session::CageRecord,
    gone: &Error,
    old: &Error,
    ran: &mut Ran,
) -> Result<Option<Undo>> {
    let h = podman(host)?;
    // The policy as the record has it now, under the change lock: a
    // `cage limits --net` beside (the turn before this start was
    // ending) is before these rules or after them, never between.
    let _change = ctx.store.change_lock(session)?;
    let mut cage = cage.clone();
    if let Some(now) = ctx
        .store
        .load(session)?
        .cage
        .filter(|c| c.container == cage.container)
    {
        cage.net = now.net;
    }
    let running = match super::started_from_pid_file(ctx, &cage) {
        Some(r) => r,
        None => super::running_of(h, &cage.container, gone, old)?,
    };
    let loaded = super::load_rules(ctx, h, session, &cage, &running);
    // Refused by the PID file's first look: podman says why, where
    // it can (a container made again behind the tool's back without
    // the machine's init is a cage of an earlier shrooms-agent).
    let loaded = match loaded {
        Err(e) if running.from_pid_file => match super::running_of(h, &cage.container, gone, old) {
            Err(why) => Err(why),
            Ok(_) => Err(e),
        },
        other => other,
    };
    loaded.map_err(|e| {
        e.context(Doing::RulesThenStopped {
            container: cage.container.clone(),
        })
    })?;
    ran.pid = Some(running.pid);
    Ok(None)
}

fn done(ctx: &Context, session: &str, ran: &mut Ran) -> Result<Option<Undo>> {
    if ran.keep_intent {
        return Ok(None);
    }
    if let Err(e) = ctx.store.remove_intent(session) {
        ran.warnings.push(Warning::IntentLeft(Box::new(e)));
    }
    Ok(None)
}

fn stop(host: Option<&Host>, container: &str, best_effort: bool) -> Result<Option<Undo>> {
    let stopped = podman(host).and_then(|h| h.podman.stop(container));
    if !best_effort {
        stopped?;
    }
    Ok(None)
}

fn tools(ctx: &Context, exe: &Path) -> Result<Option<Undo>> {
    crate::cage::tools::provide(&ctx.store.tools_dir(), exe)?;
    // A cage mounts its init again at every start: made again if
    // it went.
    crate::cage::tools::provide_init(&ctx.store.tools_dir())?;
    Ok(None)
}

fn git_sync(dir: &Path, own: &Path, base: &Path, ran: &mut Ran) -> Result<Option<Undo>> {
    match crate::cage::git::sync(dir, own, base) {
        Ok(synced) => ran.warnings.extend(synced.warnings),
        Err(e) => ran.warnings.push(Warning::GitNotSynced {
            own: own.to_path_buf(),
            error: Box::new(e),
        }),
    }
    Ok(None)
}

fn rebuild(
    ctx: &Context,
    stage: crate::images::workbench::Stage,
    image: &str,
    ran: &mut Ran,
) -> Result<Option<Undo>> {
    ran.rebuilt = Some(super::image::start_rebuild(ctx, stage, image));
    Ok(None)
}

fn dead_turn(
    ctx: &Context,
    host: Option<&Host>,
    session: &str,
    container: &str,
    ran: &mut Ran,
) -> Result<Option<Undo>> {
    let podman = &podman(host)?.podman;
    ran.warnings
        .extend(acts::turn::end_dead_turn(ctx, podman, session, container)?);
    Ok(None)
}

fn turn_marker(ctx: &Context, session: &str) -> Result<Option<Undo>> {
    let marker = ctx.store.turn_marker(session);
    session::write_atomic_unsynced(&marker, b"", 0o600)?;
    Ok(Some(Undo::Marker(marker)))
}

fn watcher(
    ctx: &Context,
    host: Option<&Host>,
    session: &str,
    container: &str,
    lock: &session::SessionLock,
    ran: &mut Ran,
) -> Result<Option<Undo>> {
    let podman = &podman(host)?.podman;
    ran.watcher = Some(acts::turn::start_watcher(
        ctx, podman, session, container, lock,
    )?);
    Ok(Some(Undo::Watcher))
}

fn gateway(
    ctx: &Context,
    host: Option<&Host>,
    record: &Record,
    pi: Option<&std::cell::RefCell<crate::cage::pi_models::Plan>>,
    ran: &mut Ran,
) -> Result<Option<Undo>> {
    let pid = ran
        .pid
        .ok_or_else(|| Error::unmet("the cage's rules were not loaded"))?;
    let gateway = acts::turn::open_gateway(ctx, podman(host)?, record, pid, pi)?;
    ran.gateway = Some(gateway);
    ran.warnings
        .extend(acts::turn::github_login_mounted(record, &ctx.settings.home));
    Ok(Some(Undo::Gateway))
}

fn socket(ctx: &Context, record: &Record, ran: &mut Ran) -> Result<Option<Undo>> {
    ran.socket = Some(acts::turn::open_socket(ctx, record)?);
    Ok(Some(Undo::Socket))
}

fn turn_env(ctx: &Context, record: &Record, ran: &mut Ran) -> Result<Option<Undo>> {
    let url = ran
        .gateway
        .as_ref()
        .map(|g| g.base_url())
        .ok_or_else(|| Error::unmet("the turn's gateway was not opened"))?;
    let env = acts::turn::write_env(ctx, record, &url)?;
    let undo = Undo::EnvFile(env.file.clone());
    ran.env = Some(env);
    Ok(Some(undo))
}

fn set_limits(
    ctx: &Context,
    session: &str,
    container: &str,
    limits: &Option<(crate::settings::Limits, bool)>,
    net: &Option<crate::net::netpolicy::NetPolicy>,
    budgets: acts::limits::Budgets,
) -> Result<Option<Undo>> {
    let before = acts::limits::set_limits(
        ctx,
        session,
        container,
        limits.clone(),
        net.clone(),
        budgets,
    )?;
    Ok(Some(Undo::SetLimits {
        session: session.to_string(),
        container: container.to_string(),
        before,
    }))
}

fn remove_file(path: &Path, best_effort: bool, ran: &mut Ran) -> Result<Option<Undo>> {
    let removed = if let Err(e) = session::before_write() {
        Err(Error::act(Doing::Remove(path.to_path_buf()), &e))
    } else if path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
        session::remove_dir_if_there(path)
    } else {
        session::remove_file_if_there(path)
    };
    match removed {
        Err(e) if best_effort => ran.warnings.push(Warning::NotRemoved(Box::new(e))),
        other => {
            other?;
            session::after_write();
        }
    }
    Ok(None)
}

fn private_dir(
    ctx: &Context,
    host: Option<&Host>,
    path: &Path,
    keep: bool,
    ran: &mut Ran,
) -> Result<Option<Undo>> {
    let made = match session::before_write().and_then(|()| std::fs::create_dir(path)) {
        Ok(()) => !keep,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(Error::act(Doing::Make(path.to_path_buf()), &e)),
    };
    // Checked (ours, 0700) whether made now or there.
    if let Err(e) = session::make_private_dir(path) {
        if made {
            take_back(ctx, host, &Undo::Dir(path.to_path_buf()), ran);
        }
        return Err(e);
    }
    session::after_write();
    Ok(made.then(|| Undo::Dir(path.to_path_buf())))
}

fn write_record(ctx: &Context, record: &Record, ran: &Ran) -> Result<Option<Undo>> {
    let mut record = record.clone();
    if let Some(cage) = &mut record.cage {
        as_made(cage, ran)?;
    }
    ctx.store.save(&record)?;
    Ok(Some(Undo::RecordFile(ctx.store.record_path(&record.name))))
}

fn pack(
    outbox: &Path,
    only: Option<&Path>,
    to: &Path,
    max: u64,
    ran: &mut Ran,
) -> Result<Option<Undo>> {
    ran.packed = Some(acts::send::pack_at_most(outbox, only, to, max)?);
    Ok(None)
}

fn check_sources(ctx: &Context, session: &str, cage: &session::CageRecord) -> Result<Option<Undo>> {
    super::check_mount_sources(&cage.mount_sources, session)?;
    super::home::check(&ctx.store.private_home(&cage.container), cage, session)?;
    Ok(None)
}

/// rename(2), its error saying which way.
fn rename(from: &Path, to: &Path, way: &'static str) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| {
        Error::act(
            Doing::Rename {
                from: from.into(),
                way,
                to: to.into(),
            },
            &e,
        )
    })
}

/// Where each of the cage's bind sources leads now that all exist: a start
/// checks they still lead there (see `CageRecord::mount_sources`).
fn measure(cage: &mut session::CageRecord) -> Result<()> {
    let paths: Vec<PathBuf> = cage.mount_sources.iter().map(|m| m.path.clone()).collect();
    cage.mount_sources = paths
        .iter()
        .map(|p| MountSource::now(p).map_err(|e| Error::act(Doing::LookAt(p.to_path_buf()), &e)))
        .collect::<Result<Vec<_>>>()?;
    Ok(())
}

fn take_back(ctx: &Context, host: Option<&Host>, undo: &Undo, ran: &mut Ran) {
    match undo {
        Undo::Intent(session) => {
            let _ = ctx.store.remove_intent(session);
        }
        Undo::Files(made) => made.run(),
        Undo::Stop(container) => {
            let stopped = host.is_some_and(|h| h.podman.stop(container).is_ok());
            ran.left_running |= !stopped;
        }
        Undo::Container(name) => {
            if let Some(h) = host {
                let _ = cage_files::remove_container(ctx, h, name);
            }
        }
        Undo::Record(session) => {
            // The record first: whatever else fails, no session is left
            // naming a container taken back.
            let _ = session::remove_file_if_there(&ctx.store.record_path(session));
            let _ = ctx.store.remove(session);
        }
        Undo::Restore(record) => {
            let _ = ctx.store.save(record);
        }
        Undo::Marker(path) => {
            if !ran.left_running {
                let _ = session::remove_file_if_there(path);
            }
        }
        Undo::Watcher => {
            if let Some(w) = ran.watcher.take() {
                w.finish(!ran.left_running);
            }
        }
        Undo::Gateway => ran.gateway = None,
        Undo::Socket => ran.socket = None,
        Undo::EnvFile(path) => {
            ran.env = None;
            let _ = session::remove_file_if_there(path);
        }
        Undo::Limits(back) => {
            if let Some(h) = host {
                let _ = h.podman.update(back);
            }
        }
        Undo::SetLimits {
            session,
            container,
            before,
        } => {
            let (limits, net, budgets) = before.clone();
            let _ = acts::limits::set_limits(ctx, session, container, limits, net, budgets);
        }
        Undo::MoveBack(from, to) => {
            let _ = std::fs::rename(to, from);
        }
        Undo::Dir(path) => {
            let _ = session::remove_dir_if_there(path);
        }
        Undo::RecordFile(path) => {
            let _ = session::remove_file_if_there(path);
        }
    }
}

/// Finish or take back what an operation on `name` left undone when it
/// died (its intent is still there), under the session's lock, which the
/// caller holds. Returns the line that says what was done, also kept in
/// the context's notes; None when there was nothing to repair.
pub fn repair(ctx: &Context, name: &str) -> Result<Option<String>> {
    let Some(intent) = ctx.store.intent(name)? else {
        return Ok(None);
    };
    let record = match ctx.store.load(name) {
        Ok(r) => Some(r),
        Err(e) if e.kind == Kind::NotFound => None,
        Err(e) => return Err(e),
    };
    let named = record
        .as_ref()
        .and_then(|r| r.cage.as_ref())
        .map(|c| c.container.clone());
    let said = match &intent {
        Intent::Create { container } if named.as_ref() == Some(container) => {
            format!("an interrupted `cage create` of session {name} had made it; nothing to do")
        }
        Intent::Create { container } => {
            let how = remove_or_leave(ctx, container)?;
            if record.is_none() {
                ctx.store.forget_lock(name);
            }
            format!(
                "an interrupted `cage create` of session {name} was taken back: its container \
                 {container} {how}"
            )
        }
        Intent::Move { from, to } => repair_move(ctx, name, from, to, &named)?,
        Intent::Remove { container } => {
            if let Some(c) = container {
                remove_or_leave(ctx, c)?;
            }
            ctx.store.remove(name)?;
            format!(
                "an interrupted `cage rm` of session {name} was finished: the session is removed"
            )
        }
        Intent::Start { container } => repair_start(ctx, name, container)?,
        Intent::Rename {
            from,
            to,
            old,
            new,
            moves,
        } => repair_rename(ctx, name, (from, to), (old, new), moves)?,
    };
    ctx.store.remove_intent(name)?;
    Ok(Some(said))
}

/// Remove a container an interrupted operation left. Without podman
/// (`cages = false`, or podman gone) it cannot be, and must not keep the
/// session from being used: it is left, of no session, for `cage prune`
/// once podman is back.
fn remove_or_leave(ctx: &Context, c: &str) -> Result<&'static str> {
    match ctx.host() {
        Ok(host) => cage_files::remove_container(ctx, host, c).map(|_| "removed"),
        Err(e) if e.kind == Kind::NoPodman => {
            Ok("left for `shrooms-agent cage prune` (no podman here)")
        }
        Err(e) => Err(e),
    }
}

/// [`repair`] of a `cage move`: finished when the record names the new
/// container (`named`), else taken back.
fn repair_move(
    ctx: &Context,
    name: &str,
    from: &Option<String>,
    to: &Option<String>,
    named: &Option<String>,
) -> Result<String> {
    if named == to {
        let mut how = String::new();
        if let Some(from) = from.as_ref().filter(|f| Some(*f) != to.as_ref()) {
            how = format!(": its old container {from} {}", remove_or_leave(ctx, from)?);
        }
        return Ok(format!(
            "an interrupted `cage move` of session {name} was finished{how}"
        ));
    }
    let mut how = String::new();
    if let Some(to) = to.as_ref().filter(|t| Some(*t) != named.as_ref()) {
        how = format!(": its new container {to} {}", remove_or_leave(ctx, to)?);
    }
    Ok(format!(
        "an interrupted `cage move` of session {name} was taken back{how}"
    ))
}

/// [`repair`] of a start: its rules may not be in, so the cage is stopped,
/// and started afresh by whatever starts it next.
fn repair_start(ctx: &Context, name: &str, container: &str) -> Result<String> {
    let how = match ctx.host() {
        Ok(host) => match host.podman.stop(container) {
            Ok(()) => "stopped",
            Err(_) if matches!(host.podman.container_exists(container), Ok(false)) => {
                "gone already"
            }
            Err(e) => return Err(e),
        },
        Err(e) if e.kind == Kind::NoPodman => "left (no podman here)",
        Err(e) => return Err(e),
    };
    Ok(format!(
        "an interrupted start of session {name}'s cage was taken back: its container \
         {container} {how}"
    ))
}

/// [`repair`] of a `cage rename` from `from` to `to` (the names), its old
/// and new containers, and the renames it made: finished when the new
/// name's record is there, else taken back.
fn repair_rename(
    ctx: &Context,
    name: &str,
    (from, to): (&String, &String),
    (old, new): (&Option<String>, &Option<String>),
    moves: &[(PathBuf, PathBuf)],
) -> Result<String> {
    // Both names' locks, as the rename held them: a command on the
    // other name waits for this repair.
    let other = if name == from { to } else { from };
    let _other = ctx.store.lock(other)?;
    let said = if ctx.store.record_path(to).exists() {
        ctx.store.remove(from)?;
        let how = match old {
            Some(c) => format!(": its old container {c} {}", remove_or_leave(ctx, c)?),
            None => String::new(),
        };
        format!("an interrupted `cage rename` of session {from} to {to} was finished{how}")
    } else {
        for (was, now) in moves.iter().rev() {
            if now.symlink_metadata().is_ok() && was.symlink_metadata().is_err() {
                rename(now, was, "back to")?;
            }
        }
        let how = match new {
            Some(c) => format!(": its new container {c} {}", remove_or_leave(ctx, c)?),
            None => String::new(),
        };
        format!("an interrupted `cage rename` of session {from} to {to} was taken back{how}")
    };
    ctx.store.remove_intent(other)?;
    ctx.store.forget_lock(other);
    Ok(said)
}

/// Repair every session whose intent is left and whose lock is free
/// (`cage ls`, `doctor`), and remove the temporary files of processes
/// that are gone. A session in use is left to its holder.
pub fn repair_all(ctx: &Context) -> Vec<String> {
    let mut said = Vec::new();
    for path in ctx.store.remove_dead_temporaries() {
        said.push(format!(
            "a temporary file of a command that died was removed: {}",
            path.display()
        ));
    }
    for name in ctx.store.intents() {
        let Ok(_lock) = ctx.store.lock(&name) else {
            continue;
        };
        match repair(ctx, &name) {
            Ok(Some(line)) => said.push(line),
            Ok(None) => {}
            Err(e) => said.push(format!(
                "an interrupted command on session {name} could not be repaired: {e}"
            )),
        }
        if !ctx.store.exists(&name) {
            ctx.store.forget_lock(&name);
        }
    }
    for line in &said {
        ctx.note(line.clone());
    }
    said
}

/// Take the session's lock, repair what a command that died left undone,
/// then read its record: what every command on an existing session starts
/// with.
pub fn lock_and_load(ctx: &Context, name: &str) -> Result<(session::SessionLock, Record)> {
    session::validate_name(name)?;
    if !ctx.store.intent_path(name).exists() {
        return ctx.store.lock_and_load(name);
    }
    // An intent, with or without a record (an rm that died after removing
    // it): repaired under the lock, then the record read.
    let lock = ctx.store.lock(name)?;
    if let Some(line) = repair(ctx, name)? {
        ctx.note(line);
    }
    match ctx.store.load(name) {
        Ok(record) => Ok((lock, record)),
        Err(e) => {
            ctx.store.forget_lock(name);
            Err(e)
        }
    }
}
