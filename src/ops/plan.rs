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

use super::Context;
use super::make::{self, CagePlan};
use crate::error::{Error, Kind, Result};
use crate::host::Host;
use crate::state::session::{self, HistoryEntry, Intent, MountSource, Record};

/// One thing an operation does, with what takes it back.
pub enum Step<'a> {
    /// Write the operation's intent (taken back: removed).
    Intent { session: String, intent: Intent },
    /// The cage's folders and files on the machine: its private home,
    /// proxy folder, seccomp profile, settings copies, received files,
    /// outbox, the protected paths made empty (taken back: what it made).
    CageFiles(&'a CagePlan),
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
        cage: &'a session::CageRecord,
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
    SettingsCopies(&'a Record),
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
    /// A turn's marker (`Store::turn_marker`), made before its cage starts
    /// (taken back: removed, unless the cage could not be stopped).
    TurnMarker { session: String },
    /// A turn's watcher, which stops the cage if this process dies; kept
    /// in `Ran::watcher` (taken back: told whether the cage was stopped,
    /// and waited for).
    Watcher {
        session: String,
        container: String,
        lock: &'a session::SessionLock,
    },
    /// A turn's model gateway, pi's copy of models.json pointed at it;
    /// kept in `Ran::gateway` (taken back: closed).
    Gateway {
        record: &'a Record,
        pi: Option<&'a std::cell::RefCell<crate::cage::pi_models::Plan>>,
    },
    /// A turn's cage socket; kept in `Ran::socket` (taken back: closed).
    Socket(&'a Record),
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
        tokens: Option<u64>,
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
    /// (`outbox::deliver`); where it was put is kept in `Ran::delivered`.
    /// Cannot be taken back.
    Deliver(Box<super::outbox::Delivery>),
    /// Remember in a session's record that a sender was refused (not
    /// taken back: it was).
    RememberRefused {
        session: String,
        from: String,
        when: u64,
    },
    /// Store a drop (`files::store`): what is kept in `Ran::received`.
    /// Nothing to take back: it keeps nothing when it fails.
    Receive(Box<super::files::Incoming<'a>>),
    /// A start's mount sources and private home looked at, as they lead
    /// now, after the steps that make ours again: refused when one is gone
    /// or leads elsewhere than when the cage was made. Nothing to take
    /// back.
    CheckSources {
        session: String,
        cage: &'a session::CageRecord,
    },
}

#[cfg(test)]
impl Step<'_> {
    /// The step in a few words, for the plans' tests.
    pub fn describe(&self) -> String {
        match self {
            Step::Intent { intent, .. } => format!("intent {}", intent_words(intent)),
            Step::CageFiles(p) => format!("cage files {}", p.container),
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
            Step::Refuse(e) => format!("refuse: {}", e.message),
            Step::SettingsCopies(r) => format!("settings copies {}", r.name),
            Step::Tools(_) => "tools".to_string(),
            Step::GitSync { own, .. } => format!("git sync {}", own.display()),
            Step::TurnMarker { .. } => "turn marker".to_string(),
            Step::Watcher { .. } => "watcher".to_string(),
            Step::Gateway { .. } => "gateway".to_string(),
            Step::Socket(_) => "socket".to_string(),
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
    Files(make::FilesUndo),
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
    /// `podman update` with the limits the cage had.
    Limits(Vec<String>),
    /// The record's limits, policy and budget as they were, and nothing
    /// else of it: a turn beside `cage limits` counts its tokens there.
    SetLimits {
        session: String,
        container: String,
        before: LimitsSet,
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
    pub warnings: Vec<String>,
    /// The started cage's first process (`Step::Rules`).
    pub pid: Option<i64>,
    /// A step left work for the next command: the intent is kept.
    keep_intent: bool,
    /// A turn's watcher, gateway and socket (`Step::Watcher`, `Gateway`,
    /// `Socket`), for the turn to hold.
    pub watcher: Option<crate::host::process::Watcher>,
    pub gateway: Option<crate::turn::gateway::Gateway>,
    pub socket: Option<crate::turn::cage_socket::Socket>,
    /// Taking back a start could not stop the cage: what needs it stopped
    /// is left to the watcher (its marker kept).
    left_running: bool,
    /// What `Step::Pack` packed.
    pub packed: Option<crate::cage::pack::Packed>,
    /// Where `Step::Deliver` put the archive, and its size there.
    pub delivered: Option<(String, u64)>,
    /// What `Step::Receive` stored.
    pub received: Option<super::files::Received>,
}

/// Run a plan's steps in order; when one fails, take back the ones before
/// it, newest first, and return its error. `host` is None where there is
/// no podman (a cage taken out of a session while podman is gone).
pub fn execute(ctx: &Context, host: Option<&Host>, steps: Vec<Step>) -> Result<Ran> {
    let mut undo: Vec<Undo> = Vec::new();
    let mut ran = Ran::default();
    for step in &steps {
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
        ) {
            undo.clear();
        }
    }
    Ok(ran)
}

fn podman(host: Option<&Host>) -> Result<&Host> {
    host.ok_or_else(|| Error::no_podman(crate::host::NO_PODMAN))
}

fn run(ctx: &Context, host: Option<&Host>, step: &Step, ran: &mut Ran) -> Result<Option<Undo>> {
    Ok(match step {
        Step::Intent { session, intent } => {
            ctx.store.write_intent(session, intent)?;
            Some(Undo::Intent(session.clone()))
        }
        Step::CageFiles(plan) => {
            let mut made = make::FilesUndo::default();
            match plan.make_files(ctx, &mut made) {
                Ok(()) => Some(Undo::Files(made)),
                Err(e) => {
                    made.run();
                    return Err(e);
                }
            }
        }
        Step::CreateVolume { name, label } => {
            podman(host)?.podman.volume_create(name, label)?;
            None
        }
        Step::CreateContainer { name, argv, image } => {
            // Taken back even if podman create fails late (a time-out after
            // the container was made); `rm -f --ignore` of nothing is
            // harmless.
            let podman = &podman(host)?.podman;
            if let Err(e) = podman.create(argv) {
                take_back(ctx, host, &Undo::Container(name.clone()), ran);
                // An image removed since its inspect was kept is told by
                // podman's exit status (`image exists`), never by its words.
                return Err(match podman.image_exists(image) {
                    Ok(false) => Error::failed(format!(
                        "there is no image {image} on this machine for this session's cage (it \
                         was removed while the cage was being made)"
                    )),
                    _ => e,
                });
            }
            Some(Undo::Container(name.clone()))
        }
        Step::Untrusted {
            dir,
            session,
            remember,
        } => {
            if *remember {
                super::sealed::remember_untrusted(&ctx.store, dir, session)?;
            } else {
                super::sealed::forget_untrusted(&ctx.store, dir, Some(session))?;
            }
            None
        }
        Step::NewRecord(record) => {
            let mut record = record.as_ref().clone();
            if let Some(cage) = &mut record.cage {
                measure(cage)?;
            }
            ctx.store.save(&record)?;
            Some(Undo::Record(record.name.clone()))
        }
        Step::ChangeRecord {
            session,
            cage,
            dir,
            last_image,
        } => {
            let mut cage = cage.as_deref().cloned();
            if let Some(c) = &mut cage {
                measure(c)?;
            }
            let before = ctx.store.update(session, |r| {
                let before = r.clone();
                r.cage = cage;
                r.dir = dir.clone();
                r.last_image = last_image.clone();
                Ok(before)
            })?;
            Some(Undo::Restore(Box::new(before)))
        }
        Step::History { session, entry } => {
            ctx.store.append_history(session, entry)?;
            None
        }
        Step::RemoveContainer { name, best_effort } => {
            let removed = podman(host).and_then(|h| make::remove_container(ctx, h, name));
            match removed {
                Ok(_) => {}
                // Without podman, left for `cage prune` once it is back: the
                // session must stay usable meanwhile.
                Err(e) if *best_effort && e.kind == Kind::NoPodman => ran.warnings.push(format!(
                    "the old container {name} could not be removed ({e}); \
                         `shrooms-agent cage prune` removes it later"
                )),
                Err(e) if *best_effort => {
                    // The intent stays: the next command on the session
                    // removes it.
                    ran.keep_intent = true;
                    ran.warnings.push(format!(
                        "the old container {name} could not be removed ({e}); the next \
                         command on the session removes it"
                    ))
                }
                Err(e) => return Err(e),
            }
            None
        }
        Step::RemoveRecord { session } => {
            ctx.store.remove(session)?;
            None
        }
        Step::Start { container, gone } => {
            let h = podman(host)?;
            if let Err(e) = h.podman.start(container) {
                // Only on failure: is it gone, or did podman fail?
                return Err(match h.podman.container_exists(container) {
                    Ok(false) => gone.clone(),
                    _ => e,
                });
            }
            Some(Undo::Stop(container.clone()))
        }
        Step::Update { container, argv } => {
            podman(host)?.podman.update(argv).map_err(|e| {
                e.context(format!(
                    "setting the session's limits again in {container} failed, so it was \
                     stopped again"
                ))
            })?;
            None
        }
        Step::Rules {
            session,
            cage,
            gone,
            old,
        } => {
            let h = podman(host)?;
            // The policy as the record has it now, under the change lock: a
            // `cage limits --net` beside (the turn before this start was
            // ending) is before these rules or after them, never between.
            let _change = ctx.store.change_lock(session)?;
            let mut cage = (*cage).clone();
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
                Err(e) if running.from_pid_file => {
                    match super::running_of(h, &cage.container, gone, old) {
                        Err(why) => Err(why),
                        Ok(_) => Err(e),
                    }
                }
                other => other,
            };
            loaded.map_err(|e| {
                e.context(format!(
                    "setting the network rules in {} failed, so it was stopped again",
                    cage.container
                ))
            })?;
            ran.pid = Some(running.pid);
            None
        }
        Step::Done { .. } if ran.keep_intent => None,
        Step::Done { session } => {
            if let Err(e) = ctx.store.remove_intent(session) {
                ran.warnings
                    .push(format!("{e} (the next command removes it)"));
            }
            None
        }
        Step::Stop {
            container,
            best_effort,
        } => {
            let stopped = podman(host).and_then(|h| h.podman.stop(container));
            if !best_effort {
                stopped?;
            }
            None
        }
        Step::Refuse(e) => return Err(e.clone()),
        Step::SettingsCopies(record) => {
            super::write_settings_copies(ctx, record)?;
            None
        }
        Step::Tools(exe) => {
            crate::cage::tools::provide(&ctx.store.tools_dir(), exe)?;
            // A cage mounts its init again at every start: made again if
            // it went.
            crate::cage::tools::provide_init(&ctx.store.tools_dir())?;
            None
        }
        Step::GitSync { dir, own, base } => {
            match crate::cage::git::sync(dir, own, base) {
                Ok(synced) => ran.warnings.extend(synced.warnings),
                Err(e) => ran.warnings.push(format!(
                    "the session's git directory ({}) was not brought up to date with your \
                     repository, so git in the cage sees it as the last turn left it: {}",
                    own.display(),
                    e.message
                )),
            }
            None
        }
        Step::TurnMarker { session } => {
            let marker = ctx.store.turn_marker(session);
            session::write_atomic_unsynced(&marker, b"", 0o600)?;
            Some(Undo::Marker(marker))
        }
        Step::Watcher {
            session,
            container,
            lock,
        } => {
            let podman = &podman(host)?.podman;
            ran.watcher = Some(super::exec::start_watcher(
                ctx, podman, session, container, lock,
            )?);
            Some(Undo::Watcher)
        }
        Step::Gateway { record, pi } => {
            let pid = ran
                .pid
                .ok_or_else(|| Error::failed("the cage's rules were not loaded"))?;
            let gateway = super::exec::open_gateway(ctx, podman(host)?, record, pid, *pi)?;
            ran.gateway = Some(gateway);
            Some(Undo::Gateway)
        }
        Step::Socket(record) => {
            let socket = super::turn_servers::open_socket(ctx, record)
                .map_err(super::exec::stopped_again)?;
            ran.socket = Some(socket);
            Some(Undo::Socket)
        }
        Step::UpdateLimits { argv, back } => {
            podman(host)?.podman.update(argv)?;
            Some(Undo::Limits(back.clone()))
        }
        Step::SetLimits {
            session,
            container,
            limits,
            net,
            tokens,
        } => {
            let before = set_limits(
                ctx,
                session,
                container,
                limits.clone(),
                net.clone(),
                *tokens,
            )?;
            Some(Undo::SetLimits {
                session: session.clone(),
                container: container.clone(),
                before,
            })
        }
        Step::NewRules { session, cage } => {
            super::limits::load_new_rules(ctx, podman(host)?, session, cage)?;
            None
        }
        Step::MoveFile { from, to } => {
            rename(from, to, "to")?;
            Some(Undo::MoveBack(from.clone(), to.clone()))
        }
        Step::RemoveFile { path, best_effort } => {
            let removed = if let Err(e) = session::before_write() {
                Err(Error::failed(format!("removing {}: {e}", path.display())))
            } else if path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                session::remove_dir_if_there(path)
            } else {
                session::remove_file_if_there(path)
            };
            match removed {
                Err(e) if *best_effort => ran.warnings.push(e.message),
                other => {
                    other?;
                    session::after_write();
                }
            }
            None
        }
        Step::PrivateDir { path, keep } => {
            let made = match session::before_write().and_then(|()| std::fs::create_dir(path)) {
                Ok(()) => !keep,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
                Err(e) => return Err(Error::failed(format!("making {}: {e}", path.display()))),
            };
            // Checked (ours, 0700) whether made now or there.
            if let Err(e) = session::make_private_dir(path) {
                if made {
                    take_back(ctx, host, &Undo::Dir(path.clone()), ran);
                }
                return Err(e);
            }
            session::after_write();
            made.then(|| Undo::Dir(path.clone()))
        }
        Step::WriteRecord(record) => {
            let mut record = record.as_ref().clone();
            if let Some(cage) = &mut record.cage {
                measure(cage)?;
            }
            ctx.store.save(&record)?;
            Some(Undo::RecordFile(ctx.store.record_path(&record.name)))
        }
        Step::Pack {
            outbox,
            only,
            to,
            max,
        } => {
            ran.packed = Some(super::outbox::pack_at_most(
                outbox,
                only.as_deref(),
                to,
                *max,
            )?);
            None
        }
        Step::Deliver(delivery) => {
            ran.delivered = Some(super::outbox::deliver(ctx, delivery)?);
            None
        }
        Step::RememberRefused {
            session,
            from,
            when,
        } => {
            let (when, from) = (*when, from.clone());
            ctx.store.update(session, move |r| {
                r.files.remember_refused(when, from);
                Ok(())
            })?;
            None
        }
        Step::Receive(incoming) => {
            ran.received = Some(super::files::store(ctx, incoming)?);
            None
        }
        Step::CheckSources { session, cage } => {
            super::check_mount_sources(&cage.mount_sources, session)?;
            super::home::check(&ctx.store.private_home(&cage.container), cage, session)?;
            None
        }
    })
}

/// What `Step::SetLimits` sets: the cage's limits and whether they are
/// the session's own, its network policy, the token budget.
type LimitsSet = (
    Option<(crate::settings::Limits, bool)>,
    Option<crate::net::netpolicy::NetPolicy>,
    Option<u64>,
);

/// Set a session's limits, policy and budget in its record, for its cage
/// `container` (refused as busy when it was moved meanwhile); what they
/// were.
fn set_limits(
    ctx: &Context,
    session: &str,
    container: &str,
    limits: Option<(crate::settings::Limits, bool)>,
    net: Option<crate::net::netpolicy::NetPolicy>,
    tokens: Option<u64>,
) -> Result<LimitsSet> {
    ctx.store.update(session, |r| {
        let budget = r.tokens.budget;
        let c = match r.cage.as_mut() {
            Some(c) if c.container == container => c,
            _ => {
                return Err(Error::busy(format!(
                    "session {} was moved meanwhile; set its limits again",
                    r.name
                )));
            }
        };
        let before = (
            limits.as_ref().map(|_| (c.limits.clone(), c.own_limits)),
            net.as_ref().map(|_| c.net.clone()),
            budget,
        );
        if let Some((l, own)) = limits {
            c.limits = l;
            c.own_limits = own;
        }
        if let Some(n) = net {
            c.net = n;
        }
        r.tokens.budget = tokens;
        Ok(before)
    })
}

/// rename(2), its error saying which way.
fn rename(from: &Path, to: &Path, way: &str) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| {
        Error::failed(format!(
            "renaming {} {way} {}: {e}",
            from.display(),
            to.display()
        ))
    })
}

/// Where each of the cage's bind sources leads now that all exist: a start
/// checks they still lead there (see `CageRecord::mount_sources`).
fn measure(cage: &mut session::CageRecord) -> Result<()> {
    let paths: Vec<PathBuf> = cage.mount_sources.iter().map(|m| m.path.clone()).collect();
    cage.mount_sources = paths
        .iter()
        .map(|p| {
            MountSource::now(p)
                .map_err(|e| Error::failed(format!("looking at {}: {e}", p.display())))
        })
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
                let _ = make::remove_container(ctx, h, name);
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
            let (limits, net, tokens) = before.clone();
            let _ = set_limits(ctx, session, container, limits, net, tokens);
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
    // Without podman (`cages = false`, or podman gone) a container cannot
    // be removed, and must not keep the session from being used: it is
    // left, of no session, for `cage prune` once podman is back.
    let remove = |c: &str| -> Result<&'static str> {
        match ctx.host() {
            Ok(host) => make::remove_container(ctx, host, c).map(|_| "removed"),
            Err(e) if e.kind == Kind::NoPodman => {
                Ok("left for `shrooms-agent cage prune` (no podman here)")
            }
            Err(e) => Err(e),
        }
    };
    let said = match &intent {
        Intent::Create { container } if named.as_ref() == Some(container) => {
            format!("an interrupted `cage create` of session {name} had made it; nothing to do")
        }
        Intent::Create { container } => {
            let how = remove(container)?;
            if record.is_none() {
                ctx.store.forget_lock(name);
            }
            format!(
                "an interrupted `cage create` of session {name} was taken back: its container \
                 {container} {how}"
            )
        }
        Intent::Move { from, to } if named == *to => {
            let mut how = String::new();
            if let Some(from) = from.as_ref().filter(|f| Some(*f) != to.as_ref()) {
                how = format!(": its old container {from} {}", remove(from)?);
            }
            format!("an interrupted `cage move` of session {name} was finished{how}")
        }
        Intent::Move { to, .. } => {
            let mut how = String::new();
            if let Some(to) = to.as_ref().filter(|t| Some(*t) != named.as_ref()) {
                how = format!(": its new container {to} {}", remove(to)?);
            }
            format!("an interrupted `cage move` of session {name} was taken back{how}")
        }
        Intent::Remove { container } => {
            if let Some(c) = container {
                remove(c)?;
            }
            ctx.store.remove(name)?;
            format!(
                "an interrupted `cage rm` of session {name} was finished: the session is removed"
            )
        }
        Intent::Start { container } => {
            // Its rules may not be in: stopped, and started afresh by
            // whatever starts it next.
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
            format!(
                "an interrupted start of session {name}'s cage was taken back: its container \
                 {container} {how}"
            )
        }
        Intent::Rename {
            from,
            to,
            old,
            new,
            moves,
        } => {
            // Both names' locks, as the rename held them: a command on the
            // other name waits for this repair.
            let other = if name == from { to } else { from };
            let _other = ctx.store.lock(other)?;
            let said = if ctx.store.record_path(to).exists() {
                ctx.store.remove(from)?;
                let how = match old {
                    Some(c) => format!(": its old container {c} {}", remove(c)?),
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
                    Some(c) => format!(": its new container {c} {}", remove(c)?),
                    None => String::new(),
                };
                format!(
                    "an interrupted `cage rename` of session {from} to {to} was taken back{how}"
                )
            };
            ctx.store.remove_intent(other)?;
            ctx.store.forget_lock(other);
            said
        }
    };
    ctx.store.remove_intent(name)?;
    Ok(Some(said))
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
