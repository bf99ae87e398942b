//! The operations: one file per verb. Each loads what it needs, takes the
//! session's lock, decides, acts, and returns a typed result or a typed
//! error. None of them prints: the CLI (`main.rs`) and `serve` (HTTP) are
//! the faces that show results.
//!
//! What two verbs share sits in a file of its own that imports no verb (`session_object.rs`, the session as the
//! faces give it; `listing.rs`, the sessions listed; `idle.rs`,
//! `before_git_goes.rs`, `dead_turn.rs`, `session_address.rs`, `tidy.rs`), or in the
//! room it belongs to (`state::when::now`, `host::enforces_limits`).

pub mod acts;
pub mod before_git_goes;
pub mod bring;
pub mod check;
pub mod create;
pub mod dead_turn;
#[cfg(test)]
mod decisions;
pub mod doctor;
pub mod exec;
pub mod files;
pub mod history;
pub mod home;
pub mod idle;
pub mod image;
pub mod later;
pub mod limits;
pub mod listing;
pub mod make;
pub mod moves;
pub mod outbox;
pub mod plan;
pub mod project;
pub mod protect;
pub mod prune;
pub mod rename;
pub mod resume;
pub mod rm;
pub mod sealed;
pub mod session_address;
pub mod session_object;
pub mod show;
pub mod start;
pub mod stop;
pub mod tidy;
mod turn_servers;

use std::cell::OnceCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{
    Doing, EgressProblem, Error, Kind, NotStarted, Result, RulesProblem, SessionProblem,
};
use crate::host::Host;
use crate::net::rules;
use crate::settings::{Env, Settings};
use crate::state::session::{CageRecord, Record, Store};

/// What every operation runs with: the settings, the invoking environment,
/// the store, and the host's facts, asked of podman at most once.
/// The settings, environment and program paths are shared (`Arc`): serve
/// makes a context per request from one copy, by reference.
pub struct Context {
    pub settings: Arc<Settings>,
    pub env: Arc<Env>,
    pub store: Store,
    host: OnceCell<Host>,
    /// The shrooms-agent program, and the link it was called by, if any.
    pub self_paths: Arc<Vec<PathBuf>>,
    /// What the operation did besides its work, one line each (a command
    /// that died, repaired: `plan::repair`), for the face to show.
    notes: std::cell::RefCell<Vec<String>>,
    /// Warnings of what the operation did on its way, one line each (a
    /// killed turn's cage stopped: `dead_turn`), for the face to show at
    /// once, before the result or the error. Kept here rather than in the
    /// result so that an operation that fails after it still has them said.
    warnings: std::cell::RefCell<Vec<crate::error::Warning>>,
    /// Told of each slow step as it begins (`Progress`), where the face
    /// asked to be: a terminal waiting on `podman create` with nothing
    /// said looks hung.
    progress: std::cell::RefCell<Option<ProgressHook>>,
}

/// What the face does with a step's progress.
pub type ProgressHook = Box<dyn Fn(&Progress) + Send>;

/// A step of an operation that can take a while, about to begin: making
/// or removing a container copies or deletes its image's files (seconds to
/// half a minute rootless, where podman keeps images in `vfs`); stopping
/// one waits for its processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    Making { container: String, image: String },
    Removing { container: String },
    Stopping { container: String },
    Starting { container: String },
}

impl Context {
    pub fn new(settings: Settings, env: Env, self_paths: Vec<PathBuf>) -> Context {
        Context::shared(Arc::new(settings), Arc::new(env), Arc::new(self_paths))
    }

    /// The same from shared parts: nothing is copied.
    pub fn shared(
        settings: Arc<Settings>,
        env: Arc<Env>,
        self_paths: Arc<Vec<PathBuf>>,
    ) -> Context {
        let store = Store::new(&settings.state_dir);
        Context {
            settings,
            env,
            store,
            host: OnceCell::new(),
            self_paths,
            notes: Default::default(),
            warnings: Default::default(),
            progress: Default::default(),
        }
    }

    /// Be told of each slow step as it begins (operations never print:
    /// the face says it).
    pub fn on_progress(&self, hook: ProgressHook) {
        *self.progress.borrow_mut() = Some(hook);
    }

    /// Tell the face, if it asked, that a slow step begins.
    pub fn progress(&self, p: Progress) {
        if let Some(hook) = &*self.progress.borrow() {
            hook(&p);
        }
    }

    /// Keep a line for the face to show (operations never print).
    pub fn note(&self, line: String) {
        self.notes.borrow_mut().push(line);
    }

    /// The lines kept so far, taken.
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.borrow_mut())
    }

    /// Keep a warning for the face to show (operations never print).
    pub fn warn(&self, warning: crate::error::Warning) {
        self.warnings.borrow_mut().push(warning);
    }

    /// The warnings kept so far, taken.
    pub fn take_warnings(&self) -> Vec<crate::error::Warning> {
        std::mem::take(&mut *self.warnings.borrow_mut())
    }

    /// The same, with the host's facts known already (`serve` keeps them
    /// from its last look, so a request does not ask podman about itself).
    pub fn with_host(self, host: Host) -> Context {
        let _ = self.host.set(host);
        self
    }

    /// The host's facts if known already, never asking podman (serve's
    /// listing, which makes no podman call).
    pub fn host_known(&self) -> Option<&Host> {
        self.host.get()
    }

    /// The host's facts; fails with `NO_PODMAN` where there are no cages.
    pub fn host(&self) -> Result<&Host> {
        if let Some(h) = self.host.get() {
            return Ok(h);
        }
        let h = Host::detect(&self.settings, &self.env)?;
        Ok(self.host.get_or_init(|| h))
    }

    /// The host's facts asked of podman now, whatever the state folder
    /// keeps (`doctor`); kept for the rest of this context.
    pub fn host_fresh(&self) -> Result<&Host> {
        if let Some(h) = self.host.get() {
            return Ok(h);
        }
        let h = Host::detect_fresh(&self.settings, &self.env)?;
        Ok(self.host.get_or_init(|| h))
    }

    /// The podman program the settings name, when cages are on and it is
    /// there: what a call that needs no fact of podman's can start with,
    /// before the host's facts are gathered.
    pub fn podman_program(&self) -> Option<crate::host::podman::Podman> {
        match (&self.settings.podman, self.settings.cages) {
            (Some(p), true) if crate::host::is_executable(p) => {
                Some(crate::host::podman::Podman::new(p.clone()))
            }
            _ => None,
        }
    }

    /// The same, for a command on a session that is already caged.
    pub fn host_for_session(&self) -> Result<&Host> {
        self.host().map_err(|e| {
            if e.kind == Kind::NoPodman {
                Error::no_podman_for_session()
            } else {
                e
            }
        })
    }
}

/// Why cage commands refuse to run as root without `allow_root = true`.
/// The design is rootless: with podman run as root, podman itself and what
/// it starts to make a cage run as root, and although each cage runs in a
/// user namespace of its own (root in it is an unprivileged uid outside,
/// `podman::argv::userns`), its project and folders are given to that uid
/// at each start.
pub fn root_refused(config: &Path) -> Error {
    Error::input(crate::error::InputProblem::AsRoot {
        config: config.to_path_buf(),
    })
}

/// The refusal for a user id and the config's `allow_root`: bad input
/// (exit 2), as how the tool is run must change, and nothing was done.
pub fn root_refusal(euid: u32, allow_root: bool, config: &Path) -> Option<Error> {
    (euid == 0 && !allow_root).then(|| root_refused(config))
}

/// Refuse a command that uses podman for cages when the tool runs as root
/// and the config does not allow it; checked before anything is done.
pub fn refuse_root(settings: &Settings) -> Result<()> {
    match root_refusal(euid(), settings.allow_root, &settings.config_path) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

pub use crate::host::userns::euid;

/// A session's cage, or a clear error when it has none.
pub fn cage_of(record: &Record) -> Result<&CageRecord> {
    record
        .cage
        .as_ref()
        .ok_or_else(|| Error::session(&record.name, SessionProblem::NotCaged { then: "" }))
}

/// Start the cage if it is not running, then close the agent port inside
/// it. The network namespace is new at every start, so the rule is set
/// every time; if it cannot be set, the cage is stopped again and the
/// command fails: a cage never runs with the port open.
///
/// Nothing of the cage's own runs before that: its first process is the
/// machine's catatonit, which starts nothing, so the first program of the
/// cage's is the one the caller then runs with `podman exec`. A container
/// made before that (its first process `sleep` from the image, which the
/// cage could replace) is not started, and a running one is stopped.
///
/// The facts first ([`start_facts`]), then the decision ([`decide_start`]),
/// then the plan, run by `plan::execute`. Returns the first process's PID,
/// for the model gateway's listener (`gateway::open`), so that it need not
/// ask.
pub fn ensure_running(ctx: &Context, host: &Host, record: &Record) -> Result<i64> {
    let facts = start_facts(ctx, record)?;
    let steps = decide_start(&facts, host)?;
    let ran = plan::execute(ctx, Some(host), steps)?;
    ran.pid
        .ok_or_else(|| Error::unmet("the cage's rules were not loaded"))
}

/// What a start decides on, read before anything is done; a check that
/// does not pass is kept as its refusal, for the decision to give.
pub struct StartFacts<'a> {
    pub record: &'a Record,
    pub cage: &'a CageRecord,
    /// Made with the machine's init as its first process (its create argv).
    pub with_init: bool,
    /// What a cage of an earlier shrooms-agent mounts that it must not.
    pub mounts_wrong: Option<String>,
    pub dir_there: bool,
    /// This program, for a cage that mounts `tools/`.
    pub tools: Option<PathBuf>,
    /// Where the user's refs of the last git sync are kept.
    pub git_base: PathBuf,
    /// The project's submodules that the cage does not have read-only:
    /// added after it was made (`protect::submodule_paths`).
    pub unprotected: Vec<PathBuf>,
}

/// Read what a start decides on (no refusal but a record without a cage).
pub fn start_facts<'a>(ctx: &Context, record: &'a Record) -> Result<StartFacts<'a>> {
    let cage = cage_of(record)?;
    Ok(StartFacts {
        record,
        cage,
        with_init: made_with_init(&cage.container, &cage.create_argv),
        mounts_wrong: mounts_what_it_must_not(
            record.harness,
            &cage.harness_dir,
            &ctx.store.uploads_dir(),
            &cage.create_argv,
        ),
        dir_there: record.dir.is_dir(),
        tools: ctx
            .self_paths
            .first()
            .filter(|_| mounts_tools(ctx, &cage.create_argv))
            .cloned(),
        git_base: ctx.store.git_base(&cage.container),
        unprotected: match &cage.git {
            Some(_) if record.dir.is_dir() => {
                protect::submodule_paths_now(&record.dir)
                    .into_iter()
                    .filter(|p| !read_only_in(&record.dir.join(p), &record.dir, &cage.create_argv))
                    // One the user left writable (`--writable lib/.git`) is theirs.
                    .filter(|p| {
                        !cage.options.writable.iter().any(|w| {
                            p.starts_with(w.trim_start_matches("./").trim_end_matches('/'))
                        })
                    })
                    .collect()
            }
            _ => Vec::new(),
        },
    })
}

/// Pure: is `path`, or a folder holding it below `stop`, mounted read-only
/// in a cage made with `create_argv`.
fn read_only_in(path: &Path, stop: &Path, create_argv: &[String]) -> bool {
    path.ancestors().take_while(|a| *a != stop).any(|a| {
        let probe = crate::host::podman::argv::mount(&crate::cage::spec::Mount {
            src: PathBuf::from("/probe"),
            dst: a.to_path_buf(),
            read_only: true,
        });
        let Some(dst) = probe
            .strip_prefix("type=bind,src=/probe,")
            .and_then(|r| r.split_once(",ro=true,"))
            .map(|(d, _)| format!(",{d},ro=true,"))
        else {
            return false;
        };
        create_argv
            .iter()
            .any(|arg| arg.starts_with("type=bind,") && arg.contains(&dst))
    })
}

/// Pure: why a start is refused for its git: a cage made before git in a
/// cage had a git directory of its own, or one whose project has a
/// submodule added since.
fn git_refusal(f: &StartFacts) -> Option<Error> {
    let name = &f.record.name;
    let not_started = |why| Error::session(name, SessionProblem::NotStarted(why));
    if f.cage.git.is_none() && !git_left_writable(&f.cage.options) {
        return Some(not_started(NotStarted::WithoutOwnGit));
    }
    (!f.unprotected.is_empty()).then(|| {
        not_started(NotStarted::SubmodulesAdded {
            paths: f.unprotected.clone(),
        })
    })
}

/// Whether a cage was made with its project's `.git` writable
/// (`--writable .git`, docs/security.md "Protected paths"): it has no git directory
/// of its own, by the user's choice.
pub fn git_left_writable(options: &crate::cage::spec::Options) -> bool {
    options
        .writable
        .iter()
        .any(|w| w.trim_start_matches("./").trim_end_matches('/') == ".git")
}

/// Pure: a start's refusal, or its plan. A cage of an earlier
/// shrooms-agent is stopped (it may run, started behind the tool's back),
/// then refused. Otherwise: the intent (from `podman start` until the
/// rules are in, a crash leaves a cage without them: the next command
/// stops it), the settings copies, this program in `tools/`, the folder
/// untrusted for as long as it is sealed (whatever was forgotten
/// meanwhile), then [`start_steps`].
pub fn decide_start<'a>(f: &StartFacts<'a>, host: &Host) -> Result<Vec<plan::Step<'a>>> {
    let (record, cage) = (f.record, f.cage);
    let name = &record.name;
    let not_started = |why| Error::session(name, SessionProblem::NotStarted(why));
    let old = not_started(NotStarted::OldCage {
        container: cage.container.clone(),
        sealed: cage.sealed.is_some(),
    });
    let refused = |error| {
        Ok(vec![
            plan::Step::Stop {
                container: cage.container.clone(),
                best_effort: true,
            },
            plan::Step::Refuse(error),
        ])
    };
    if !f.with_init {
        return refused(old);
    }
    if let Some(what) = &f.mounts_wrong {
        return refused(not_started(NotStarted::MountsWrong { what: what.clone() }));
    }
    if let Some(e) = git_refusal(f) {
        return refused(e);
    }
    if !f.dir_there {
        return Err(Error::session(
            name,
            SessionProblem::ProjectGone {
                dir: record.dir.clone(),
            },
        ));
    }
    let mut steps = vec![plan::Step::Intent {
        session: name.clone(),
        intent: crate::state::session::Intent::Start {
            container: cage.container.clone(),
        },
    }];
    if cage.sealed.is_none() {
        steps.push(plan::Step::SettingsCopies(Box::new(record.clone())));
    }
    if let Some(exe) = &f.tools {
        steps.push(plan::Step::Tools(exe.clone()));
    }
    steps.extend(cage.git.as_ref().map(|git| plan::Step::GitSync {
        dir: record.dir.clone(),
        own: git.own.clone(),
        base: f.git_base.clone(),
    }));
    if cage.sealed.is_some() {
        steps.push(plan::Step::Untrusted {
            dir: record.dir.clone(),
            session: name.clone(),
            remember: true,
        });
    }
    // Looked at once the copies and tools/ are made again: a source of
    // ours that went is made again, not refused.
    steps.push(plan::Step::CheckSources {
        session: name.clone(),
        cage: Box::new(cage.clone()),
    });
    let gone = Error::session(
        name,
        SessionProblem::ContainerGone {
            container: cage.container.clone(),
        },
    );
    steps.extend(start_steps(host, name, cage, gone, old));
    steps.push(plan::Step::Done {
        session: name.clone(),
    });
    Ok(steps)
}

/// The copies of the user's settings files, made again before each
/// start: runc mounts the file there at start, so the cage sees today's
/// settings, filtered by today's allow-list. (Written when the cage runs
/// already too: what it mounted stays as it was.) pi's models.json copy:
/// the turn writes it once its gateway listens; until then, none of the
/// machine's providers. Written in place, never renamed: a running cage
/// has this very file mounted.
pub fn write_settings_copies(ctx: &Context, record: &Record) -> Result<()> {
    let cage = cage_of(record)?;
    let dir = ctx.store.settings_copy_dir(&cage.container);
    if record.harness == crate::cage::harness::Harness::Pi {
        crate::state::session::make_private_dir(&dir)?;
        crate::cage::pi_models::write_in_place(&dir, "{}\n")?;
    }
    if gateway_copy_name(record.harness).is_some() {
        // Without a gateway: the turn writes it again with its own.
        return write_gateway_copy(record.harness, &cage.harness_dir, &dir, None, &record.dir);
    }
    let (harness, chosen) = (record.harness, ctx.settings.chosen());
    crate::cage::cage_files::write_settings_copies(harness, &cage.harness_dir, &dir, &|n, v| {
        crate::cage::spec::admit(n, v, harness, chosen).passed()
    })
}

/// Pure: the steps of a start (after its checks): `podman start` (which
/// leaves a running container as it is, podman-start(1)), the session's
/// own limits again where podman does not keep them, one inspect and the
/// rules. A step that fails stops the cage again: a cage never runs with
/// the agent port open.
pub fn start_steps<'a>(
    host: &Host,
    session: &str,
    cage: &CageRecord,
    gone: Error,
    old: Error,
) -> Vec<plan::Step<'a>> {
    let mut steps = vec![plan::Step::Start {
        container: cage.container.clone(),
        gone: gone.clone(),
    }];
    // Before podman 5.1 `podman update` does not persist: a start brings
    // back the limits the container was made with, so the session's own
    // are set again (seen on podman 4.3.1); on a cage that ran already
    // they are the same again. Not where podman ignores limits (rootless
    // on cgroups v1): `podman update` fails there, and would leave the
    // session unable to start.
    if !host.update_persists()
        && host.limits_support() == crate::host::LimitsSupport::Enforced
        && limits_in_argv(&cage.create_argv).as_ref() != Some(&cage.limits)
    {
        steps.push(plan::Step::Update {
            container: cage.container.clone(),
            argv: crate::host::podman::argv::update(
                &cage.container,
                &cage.limits,
                host.update_has_pids(),
            ),
        });
    }
    steps.push(plan::Step::Rules {
        session: session.to_string(),
        cage: Box::new(cage.clone()),
        gone,
        old,
    });
    steps
}

/// Load a running cage's network rules into its namespace (again: the load
/// replaces the table whole) and check, as `Host::set_rules` does, that the
/// namespace is the one its processes run in and its first process the
/// machine's catatonit. Stops nothing: the caller decides.
pub fn load_rules(
    ctx: &Context,
    host: &Host,
    session: &str,
    cage: &CageRecord,
    running: &crate::net::netns::Running,
) -> Result<()> {
    let (rule_set, pinned) = cage_rules(ctx, cage)?;
    // The names first: once the rules are in, the cage has no DNS. With
    // none to pin, an earlier policy's are taken out if the file can be
    // written; if not (the cage may have made it unwritable), they do no
    // harm: what the rules let through is all that counts.
    if cage.sealed.is_none() {
        let pinned_now = pin_names(&cage.container, running, &pinned);
        if !pinned.is_empty() {
            pinned_now?;
        }
    }
    let listener = egress_listener(ctx, host, session, running.pid)?;
    let keep = |netns| keep_listener(&cage.container, listener.as_ref(), netns);
    // As root, the listener is started beside the rules' loading, for the
    // namespace its first process is in (which the loading checks to be
    // the one the rules went into); rootless, that namespace is known
    // once the rules are in (`podman unshare` looks at it).
    let its = (!host.rootless)
        .then(|| crate::net::netns::namespace_of(running.pid))
        .flatten();
    let Some(its) = its else {
        let netns = host.set_rules(&cage.container, running, &rule_set)?;
        return keep(netns);
    };
    let (loaded, kept) = std::thread::scope(|s| {
        let kept = s.spawn(|| keep(its));
        let loaded = host.set_rules(&cage.container, running, &rule_set);
        (loaded, kept.join())
    });
    let loaded = loaded?;
    kept.unwrap_or_else(|_| Err(Error::egress(EgressProblem::CouldNotStart)))?;
    if loaded != its {
        return Err(Error::rules(
            &cage.container,
            RulesProblem::ListenerElsewhere,
        ));
    }
    Ok(())
}

/// The cage's rules as one nftables text, and the names of its allow-list
/// to pin in its hosts file (none for a sealed cage).
fn cage_rules(ctx: &Context, cage: &CageRecord) -> Result<(String, crate::net::netpolicy::Pinned)> {
    // Every cage's first table: the egress log's gate, closed until the
    // listener (started by `load_rules`) opens it.
    let gate = rules::egress_gate();
    Ok(match &cage.sealed {
        // The machine's own networks, read now: interfaces change.
        Some(s) => {
            let (v4, v6) = crate::net::netif::local_prefixes()?;
            (
                gate + &rules::sealed(ctx.settings.agent_port, &s.dns, &v4, &v6),
                Vec::new(),
            )
        }
        None => {
            let (policy, pinned) = policy_rules(
                ctx,
                &cage.container,
                &cage.net,
                cage.network,
                ctx.settings.hosts_file.as_deref(),
            )?;
            let open = matches!(policy, rules::PolicyRules::Open);
            let mut text = gate;
            text.push_str(&rules::agent_port(
                ctx.settings.agent_port,
                open,
                cage.network.host_loopback(),
            ));
            text.push_str(&rules::policy(&policy));
            (text, pinned)
        }
    })
}

/// Keep the cage's egress log listener (when it has one) running for the
/// network namespace `netns`.
fn keep_listener(
    container: &str,
    listener: Option<&Listener>,
    netns: crate::net::netns::FileId,
) -> Result<()> {
    listener.map_or(Ok(()), |(program, args, pid_file, err)| {
        crate::net::egress::ensure_listener(program, args, pid_file, err, netns).map_err(|e| {
            e.context(Doing::EgressLogNotKept {
                container: container.to_string(),
            })
        })
    })
}

/// Does a start of this cage need podman's inspect, or does the PID file
/// podman writes at each start (`podman create --pidfile`) tell it all?
/// An allow-list's names are pinned in podman's hosts file, which only an
/// inspect names (podman writes that file again at each start, so a cage
/// without an allow-list has none of them to take out); a cage made
/// before the PID file has none.
pub fn started_from_pid_file(
    ctx: &Context,
    cage: &CageRecord,
) -> Option<crate::net::netns::Running> {
    let pins =
        cage.sealed.is_none() && matches!(cage.net, crate::net::netpolicy::NetPolicy::Allow(_));
    if pins {
        return None;
    }
    let file = pid_file_in(&cage.create_argv)?;
    // Ours, where this state folder puts it: not a path a record could
    // have been given to read any file by.
    if file != ctx.store.pid_file(&cage.container) {
        return None;
    }
    let pid = std::fs::read_to_string(&file)
        .ok()?
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|p| *p > 0)?;
    Some(crate::net::netns::Running {
        pid,
        netns: None,
        init: init_source_in(&cage.container, &cage.create_argv)?,
        hosts_path: None,
        from_pid_file: true,
    })
}

/// A started cage as podman's inspect tells it: `gone` when there is no
/// such container, `old` when it was not made with the machine's init.
pub fn running_of(
    host: &Host,
    container: &str,
    gone: &Error,
    old: &Error,
) -> Result<crate::net::netns::Running> {
    let inspected = host
        .podman
        .inspect(container)?
        .ok_or_else(|| gone.clone())?;
    if inspected.init_source().is_none() {
        return Err(old.clone());
    }
    crate::net::netns::Running::of(&inspected)
        .ok_or_else(|| Error::not_running(container, "its network cannot be closed"))
}

/// Pure: the file a cage's create argv tells podman to write its PID to.
pub fn pid_file_in(create_argv: &[String]) -> Option<PathBuf> {
    create_argv
        .windows(2)
        .find(|w| w[0] == "--pidfile")
        .map(|w| PathBuf::from(&w[1]))
}

/// Pure: the source of a cage's init mount in its create argv (the
/// machine's catatonit it was made with).
pub fn init_source_in(container: &str, create_argv: &[String]) -> Option<String> {
    let dst = format!("dst={}", crate::host::podman::argv::init_path(container));
    create_argv
        .windows(2)
        .filter(|w| w[0] == "--mount")
        .map(|w| w[1].split(',').collect::<Vec<_>>())
        .find(|fields| fields.contains(&dst.as_str()))?
        .iter()
        .find_map(|f| f.strip_prefix("src="))
        .map(str::to_string)
}

/// How to start the cage's egress log listener (`crate::net::egress`): its
/// program and arguments, its pid file and its error log, for
/// `egress::ensure_listener`, which starts it unless it runs for the
/// namespace already and waits until it listens: a cage whose connections
/// cannot be logged does not run (the callers stop it). None in the unit
/// tests, whose worlds run no program of ours.
type Listener = (PathBuf, Vec<String>, PathBuf, PathBuf);
fn egress_listener(
    ctx: &Context,
    host: &Host,
    session: &str,
    pid: i64,
) -> Result<Option<Listener>> {
    // The unit tests' worlds run no program of ours (their podman is a
    // recording fake): the listener is the end-to-end tests' (tests/it/egress.rs).
    #[cfg(test)]
    if ctx.self_paths.is_empty() {
        return Ok(None);
    }
    let file = ctx
        .self_paths
        .first()
        .ok_or_else(|| Error::egress(EgressProblem::NoOwnPath))?;
    // This very program, whatever became of its path since it started (an
    // update may have moved or replaced it): its copy in `tools/`, which
    // `podman unshare` reaches too, as the model gateway's listener does.
    let exe = &crate::cage::tools::provide(&ctx.store.tools_dir(), file)?;
    let (log, refused, pid_file, err) = (
        ctx.store.egress_path(session),
        ctx.store.egress_refused_path(session),
        ctx.store.egress_pid_path(session),
        ctx.store.egress_err_path(session),
    );
    let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let listen = vec![
        "--log".to_string(),
        s(&log),
        "--refused-log".into(),
        s(&refused),
        "--pid-file".into(),
        s(&pid_file),
        "--session".into(),
        session.to_string(),
        "--cage-pid".into(),
        pid.to_string(),
    ];
    let (program, args) = host.egress_listener_argv(pid, exe, &listen)?;
    Ok(Some((program, args, pid_file, err)))
}

/// A policy as the rules need it, read now (the machine's resolvers and
/// networks, the allow-list's names: interfaces and answers change), and
/// the names to pin in the cage's hosts file.
fn policy_rules(
    ctx: &Context,
    container: &str,
    net: &crate::net::netpolicy::NetPolicy,
    network: crate::cage::spec::Network,
    hosts_file: Option<&Path>,
) -> Result<(rules::PolicyRules, crate::net::netpolicy::Pinned)> {
    use crate::net::netpolicy::NetPolicy;
    Ok(match net {
        NetPolicy::Open => (rules::PolicyRules::Open, Vec::new()),
        NetPolicy::Internet => {
            let (local_v4, local_v6) = crate::net::netif::local_prefixes()?;
            let conf = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
            let rules = rules::PolicyRules::Internet {
                resolvers: crate::net::netpolicy::internet_resolvers(
                    &conf,
                    network.dns_forwarder(),
                ),
                local_v4,
                local_v6,
            };
            (rules, Vec::new())
        }
        // A name that no longer resolves is reachable by no address: the
        // policy fails closed.
        // A name's local answer (DNS rebinding) is left out, and said.
        NetPolicy::Allow(entries) => {
            let (v4, v6) = if entries.iter().any(crate::net::netpolicy::Entry::is_name) {
                crate::net::netif::local_prefixes()?
            } else {
                Default::default()
            };
            let r = crate::net::netpolicy::resolve(entries, hosts_file, &v4, &v6);
            for l in &r.local {
                ctx.note(format!(
                    "{container}'s allow-list: {l}, which a name never opens: that address is \
                     left out (write the address itself in the policy to allow it)"
                ));
            }
            (rules::PolicyRules::Allow(r.targets), r.names)
        }
    })
}

/// The most of a cage's hosts file read when its names are pinned: podman
/// writes a few lines, and a cage that wrote more than this gets its first
/// lines back (1 MiB).
pub const MAX_HOSTS_FILE: u64 = 1 << 20;

/// Write the policy's names into the cage's hosts file (podman's, in its
/// storage: the cage sees it at /etc/hosts), in place of the ones pinned
/// before; the rest of the file is left as podman wrote it. Written in
/// place, never renamed: the running cage has this very file mounted. What
/// the cage writes there itself changes only what its programs ask for,
/// never what the rules let through.
fn pin_names(
    container: &str,
    running: &crate::net::netns::Running,
    names: &[(String, Vec<std::net::IpAddr>)],
) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let Some(hosts) = &running.hosts_path else {
        if names.is_empty() {
            return Ok(());
        }
        return Err(Error::rules(container, RulesProblem::NoHostsFile));
    };
    let path = Path::new(hosts);
    let fail = |e: std::io::Error| {
        Error::act(
            Doing::PinHosts {
                container: container.to_string(),
                file: path.into(),
            },
            &e,
        )
    };
    // The cage writes this file: read within a bound, and one past it cut
    // to its first lines (what the cage wrote beyond them is dropped).
    let head = crate::host::bounded::read_file(path, MAX_HOSTS_FILE).map_err(fail)?;
    let now = String::from_utf8_lossy(head.whole_lines());
    let new = crate::net::netpolicy::pin_hosts(&now, names);
    if new == now && !head.cut {
        return Ok(());
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(fail)?;
    f.write_all(new.as_bytes()).map_err(fail)
}

/// Pure: does the container's create argv bind-mount this very path?
fn mounts_path(path: &Path, create_argv: &[String]) -> bool {
    let probe = crate::host::podman::argv::mount(&crate::cage::spec::Mount {
        src: path.to_path_buf(),
        dst: PathBuf::from("/"),
        read_only: true,
    });
    let Some(src) = probe.split(',').find(|f| f.starts_with("src=")) else {
        return false;
    };
    create_argv
        .iter()
        .any(|a| a.starts_with("type=bind,") && a.split(',').any(|f| f == src))
}

/// Pure: what a cage made by an earlier shrooms-agent mounts that a cage
/// is no longer given, said for the user; None for a cage of today. Such
/// a cage is not started: pi's `models.json`, `settings.json` or
/// `mcp.json` as they are (they hold keys; a cage gets copies without
/// them), or the whole `uploads/` folder (every session's received files;
/// a cage gets its own).
pub fn mounts_what_it_must_not(
    harness: crate::cage::harness::Harness,
    harness_dir: &Path,
    uploads_dir: &Path,
    create_argv: &[String],
) -> Option<String> {
    if harness == crate::cage::harness::Harness::Pi {
        let files = crate::cage::cage_files::PI_COPIED
            .iter()
            .chain([&crate::cage::pi_models::COPIED]);
        for f in files {
            if mounts_path(&harness_dir.join(f), create_argv) {
                return Some(format!("your pi {f} as it is, keys included"));
            }
        }
    }
    if let Some(copied) = gateway_copy_name(harness) {
        for f in [copied, crate::cage::codex_config::LOGIN] {
            if mounts_path(&harness_dir.join(f), create_argv) {
                return Some(format!(
                    "your {} {f} as it is, keys included",
                    harness.name()
                ));
            }
        }
    }
    mounts_path(uploads_dir, create_argv)
        .then(|| "every session's received files (the whole uploads folder)".to_string())
}

/// Pure: was the container made with the machine's init as its first
/// process, by its create argv (`podman::argv::init`)? A cage made by an
/// earlier shrooms-agent ran `sleep` from the image instead.
pub fn made_with_init(container: &str, create_argv: &[String]) -> bool {
    let init = crate::host::podman::argv::init_path(container);
    create_argv
        .windows(2)
        .any(|w| w[0] == "--entrypoint" && w[1] == init)
}

/// Whether a cage was made with the state folder's `tools/` (every cage
/// made since the program's copy is kept there): cages made before mount
/// the program at the path it had then.
pub fn mounts_tools(ctx: &Context, create_argv: &[String]) -> bool {
    let dir = ctx.store.tools_dir();
    let mount = crate::host::podman::argv::mount(&crate::cage::spec::Mount {
        src: dir.clone(),
        dst: dir,
        read_only: true,
    });
    create_argv.contains(&mount)
}

/// Refuse to start a cage where a folder on the way to one of its bind
/// mounts has become a link since it was made (`MountSource::changed`):
/// runc follows links at every start, so a folder replaced by a link (by a
/// cage that can write its parent) would lend the cage the link's target.
pub fn check_mount_sources(
    sources: &[crate::state::session::MountSource],
    session: &str,
) -> Result<()> {
    for s in sources {
        if let Some(why) = s.changed() {
            return Err(Error::session(
                session,
                SessionProblem::NotStarted(NotStarted::SourceChanged { why }),
            ));
        }
    }
    Ok(())
}

/// The limits a `podman create` argv made a container with (None when one
/// is missing or is not what this version would have given).
pub fn limits_in_argv(argv: &[String]) -> Option<crate::settings::Limits> {
    let value = |flag: &str| {
        argv.iter()
            .position(|a| a == flag)
            .and_then(|i| argv.get(i + 1))
            .cloned()
    };
    Some(crate::settings::Limits {
        memory: value("--memory")?.parse().ok()?,
        cpus: value("--cpus")?.parse().ok()?,
        pids: value("--pids-limit")?.parse().ok()?,
    })
}

/// The program to run and what to mount for a harness program found on the
/// machine, symlinks resolved. Its folder is mounted only where the folder
/// is the harness's own (its name, or its parent's, names the harness:
/// Claude Code's `~/.local/share/claude/versions`, npm's
/// `node_modules/@anthropic-ai/claude-code`), since a program may need the
/// files beside it; anywhere else (`~/bin`, `/usr/bin`, the home itself) the
/// program alone, so nothing else of that folder reaches the cage.
pub fn program_mount(program: &Path, harness: &str, home: &Path) -> Result<(PathBuf, PathBuf)> {
    let resolved = std::fs::canonicalize(program)
        .map_err(|e| Error::act_on_input(Doing::HarnessProgram(program.to_path_buf()), &e))?;
    let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    let parent = resolved.parent().unwrap_or(Path::new("/")).to_path_buf();
    Ok((
        resolved.clone(),
        mount_for(&resolved, &parent, harness, &home),
    ))
}

/// The settings file of `harness` that a cage gets as a copy pointed at
/// its model gateway, written at each start and each turn (Codex's
/// `config.toml`, opencode's `opencode.json`); None for the others (pi's
/// models.json has a plan of its own, `pi_models`).
pub fn gateway_copy_name(harness: crate::cage::harness::Harness) -> Option<&'static str> {
    use crate::cage::harness::Harness;
    match harness {
        Harness::Codex => Some(crate::cage::codex_config::COPIED),
        Harness::Opencode => Some(crate::cage::opencode_config::COPIED),
        Harness::Claude | Harness::Pi => None,
    }
}

/// Write that copy of `harness`'s (from its folder `harness_dir` on the
/// machine) into `copy_dir`, pointed at the gateway `base_url` (None:
/// before a start, at none), for the project `project`.
pub fn write_gateway_copy(
    harness: crate::cage::harness::Harness,
    harness_dir: &Path,
    copy_dir: &Path,
    base_url: Option<&str>,
    project: &Path,
) -> Result<()> {
    use crate::cage::harness::Harness;
    match harness {
        Harness::Codex => {
            crate::cage::codex_config::write_copy(harness_dir, copy_dir, base_url, project)
        }
        Harness::Opencode => crate::cage::opencode_config::write_copy(
            harness_dir,
            copy_dir,
            base_url,
            crate::cage::spec::DUMMY_KEY,
        ),
        Harness::Claude | Harness::Pi => Ok(()),
    }
}

/// Codex CLI's program and what to mount for it. npm's `codex` is a
/// node script (`@openai/codex/bin/codex.js`) that runs a native program of
/// a package for the platform, `vendor/<target>/bin/codex`, which reads
/// its helpers beside it (`codex-package.json`, `codex-path/rg`); the cage
/// runs that program and needs no node. So the launcher is followed to it
/// and its `vendor/<target>` folder is mounted. A native program given
/// directly (a release's, or `[harness] codex`) is mounted as
/// `program_mount` mounts any other, its package's folder with it.
pub fn codex_mount(program: &Path, home: &Path) -> Result<(PathBuf, PathBuf)> {
    let resolved = std::fs::canonicalize(program)
        .map_err(|e| Error::act_on_input(Doing::HarnessProgram(program.to_path_buf()), &e))?;
    let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    // Never the home or a folder holding it, whatever a file in it says.
    let not_home = |d: &Path| !home.starts_with(d);
    if resolved.extension().is_some_and(|x| x == "js") {
        let found = codex_vendor_dirs(&resolved)
            .into_iter()
            .find(|d| not_home(d) && d.join("bin/codex").is_file())
            .ok_or_else(|| {
                Error::make(crate::error::MakeProblem::NoCodexNative {
                    launcher: resolved.clone(),
                })
            })?;
        return Ok((found.join("bin/codex"), found));
    }
    let (resolved, mount) = program_mount(&resolved, "codex", &home)?;
    let package = resolved
        .parent()
        .and_then(Path::parent)
        .filter(|d| not_home(d) && d.join("codex-package.json").is_file());
    Ok(match package {
        Some(d) => (resolved.clone(), d.to_path_buf()),
        None => (resolved, mount),
    })
}

/// Pure: where npm puts the native program's folder for a launcher at
/// `<package>/bin/codex.js`, in the order its launcher looks: the platform
/// package nested in the package's node_modules, or beside it (hoisted),
/// then the package's own `vendor`.
fn codex_vendor_dirs(launcher: &Path) -> Vec<PathBuf> {
    let (target, platform) = match std::env::consts::ARCH {
        "aarch64" => ("aarch64-unknown-linux-musl", "codex-linux-arm64"),
        _ => ("x86_64-unknown-linux-musl", "codex-linux-x64"),
    };
    let Some(package) = launcher.parent().and_then(Path::parent) else {
        return Vec::new();
    };
    let mut dirs = vec![package.join("node_modules/@openai").join(platform)];
    if let Some(scope) = package.parent() {
        dirs.push(scope.join(platform));
    }
    dirs.into_iter()
        .map(|p| p.join("vendor"))
        .chain(std::iter::once(package.join("vendor")))
        .map(|v| v.join(target))
        .collect()
}

/// Pure: the file or its folder, as `program_mount` says. A folder is the
/// harness's own when a word of its name is the harness's name
/// (`claude-code`, `pi-coding-agent`; not `pihome` or `philip`), and never
/// when it is the home or above it: a user named `pi` or `claude` must not
/// lend a cage the home, or `~/bin` beside a program there.
fn mount_for(program: &Path, parent: &Path, harness: &str, home: &Path) -> PathBuf {
    let names_harness = |p: &Path| {
        !home.starts_with(p)
            && p.file_name().is_some_and(|n| {
                n.to_string_lossy()
                    .to_lowercase()
                    .split(|c: char| !c.is_ascii_alphanumeric())
                    .any(|word| word == harness)
            })
    };
    let own = names_harness(parent) || parent.parent().is_some_and(names_harness);
    if own {
        parent.to_path_buf()
    } else {
        program.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    /// A native codex is mounted with its package's folder (what its
    /// `codex-package.json` names beside it), but never the home: a stray
    /// `~/codex-package.json` beside `~/bin/codex` lends the cage the
    /// program alone.
    #[test]
    fn codex_mounts_its_package_but_never_the_home() {
        let scratch = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(scratch.path()).unwrap();
        let put = |p: &Path| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        };
        let package = home.join("tools/codex-x86_64");
        put(&package.join("bin/codex"));
        put(&package.join("codex-package.json"));
        let (program, mount) = codex_mount(&package.join("bin/codex"), &home).unwrap();
        assert_eq!(
            (program, mount),
            (package.join("bin/codex"), package.clone())
        );
        put(&home.join("bin/codex"));
        put(&home.join("codex-package.json"));
        let (program, mount) = codex_mount(&home.join("bin/codex"), &home).unwrap();
        assert_eq!(program, home.join("bin/codex"));
        assert_eq!(mount, home.join("bin/codex"));
    }

    use super::*;

    /// What a start reads instead of an inspect, from the argv a cage was
    /// made with: the file podman writes the PID to, and the init's source.
    #[test]
    fn the_pid_file_and_the_init_are_read_from_the_create_argv() {
        let c = "shrooms-web-abc123";
        let mut spec = crate::cage::spec::CageSpec {
            session: "web".into(),
            container: c.into(),
            image: "localhost/shrooms-workbench:latest".into(),
            network: crate::cage::spec::Network::Bridge,
            limits: crate::settings::Limits::of("4g", "2", 2048),
            mounts: Vec::new(),
            workdir: "/home/u/src/web".into(),
            sealed: None,
            volumes: Vec::new(),
            init: "/usr/libexec/podman/catatonit".into(),
            pid_file: Some("/s/cages/shrooms-web-abc123/pid".into()),
            seccomp_profile: None,
            own_userns: false,
            own: Vec::new(),
        };
        let argv = crate::host::podman::argv::create(&spec);
        assert_eq!(
            pid_file_in(&argv),
            Some(PathBuf::from("/s/cages/shrooms-web-abc123/pid"))
        );
        assert_eq!(
            init_source_in(c, &argv).as_deref(),
            Some("/usr/libexec/podman/catatonit")
        );
        // Another container's init mount is not this one's.
        assert_eq!(init_source_in("shrooms-other-1", &argv), None);
        spec.pid_file = None;
        assert_eq!(pid_file_in(&crate::host::podman::argv::create(&spec)), None);
    }

    #[test]
    fn read_only_in_a_cage_by_itself_or_a_folder_holding_it() {
        let mount = |p: &str, read_only: bool| {
            crate::host::podman::argv::mount(&crate::cage::spec::Mount {
                src: PathBuf::from(p),
                dst: PathBuf::from(p),
                read_only,
            })
        };
        let argv = vec![
            "--mount".to_string(),
            mount("/p", false),
            mount("/p/lib/.git", true),
            mount("/p/vendor", true),
            mount("/p/rw", false),
            mount("/p/a,b", true),
        ];
        let ro = |p: &str| read_only_in(Path::new(p), Path::new("/p"), &argv);
        assert!(ro("/p/lib/.git"));
        assert!(ro("/p/vendor"));
        assert!(ro("/p/vendor/deep/.git"));
        assert!(ro("/p/a,b/.git"));
        assert!(!ro("/p/lib"));
        assert!(!ro("/p/rw/.git"));
        assert!(!ro("/p/other/.git"));
        // The project itself is no protection of what it holds.
        let all = vec![mount("/p", true)];
        assert!(!read_only_in(Path::new("/p/x"), Path::new("/p"), &all));
    }

    #[test]
    fn a_cage_mounting_what_it_must_not_is_told_apart() {
        use crate::cage::harness::Harness;
        let pi = Path::new("/home/u/.pi/agent");
        let uploads = Path::new("/home/u/.local/state/shrooms-agent/uploads");
        let argv = |src: &str, dst: &str| {
            vec![
                "create".to_string(),
                "--mount".to_string(),
                format!("type=bind,src={src},dst={dst},ro=true,nosuid,nodev"),
            ]
        };
        let check = |h, argv: &[String]| mounts_what_it_must_not(h, pi, uploads, argv);
        // As an earlier shrooms-agent made it: the machine's files themselves.
        for f in ["models.json", "settings.json", "mcp.json"] {
            let at = format!("/home/u/.pi/agent/{f}");
            let said = check(Harness::Pi, &argv(&at, &at)).unwrap();
            assert!(said.contains(f), "{said}");
        }
        let whole = uploads.to_str().unwrap();
        let said = check(Harness::Claude, &argv(whole, whole)).unwrap();
        assert!(said.contains("uploads"), "{said}");
        // Today's: the copy from the state folder, at the same place; its
        // own uploads.
        assert_eq!(
            check(
                Harness::Pi,
                &argv(
                    "/home/u/.local/state/shrooms-agent/cages/c/settings/models.json",
                    "/home/u/.pi/agent/models.json"
                )
            ),
            None
        );
        let own = format!("{whole}/web");
        assert_eq!(check(Harness::Pi, &argv(&own, &own)), None);
        // A neighbour whose name starts the same is not it.
        let bak = "/home/u/.pi/agent/models.json.bak";
        assert_eq!(check(Harness::Pi, &argv(bak, bak)), None);
    }

    #[test]
    fn root_is_refused_unless_allowed() {
        let cfg = Path::new("/home/u/.config/shrooms-agent/config.toml");
        let e = root_refusal(0, false, cfg).unwrap();
        assert_eq!(e.kind, crate::error::Kind::BadInput);
        for words in [
            "runs as root",
            "chowned to the cage's own uid",
            "as your own user",
            "allow_root = true in /home/u/.config/shrooms-agent/config.toml",
        ] {
            assert!(e.message().contains(words), "{words}: {}", e.message());
        }
        assert!(root_refusal(0, true, cfg).is_none());
        assert!(root_refusal(1000, false, cfg).is_none());
    }

    #[test]
    fn the_programs_folder_only_where_it_is_the_harnesss_own() {
        let m = |p: &str| {
            let p = Path::new(p);
            mount_for(p, p.parent().unwrap(), "claude", Path::new("/home/u"))
        };
        assert_eq!(
            m("/home/u/.local/share/claude/versions/2.1.0"),
            Path::new("/home/u/.local/share/claude/versions")
        );
        assert_eq!(
            m("/usr/local/lib/node_modules/@anthropic-ai/claude-code/cli.js"),
            Path::new("/usr/local/lib/node_modules/@anthropic-ai/claude-code")
        );
        assert_eq!(m("/home/u/claude"), Path::new("/home/u/claude"));
        assert_eq!(m("/home/u/bin/claude"), Path::new("/home/u/bin/claude"));
        assert_eq!(m("/usr/bin/claude"), Path::new("/usr/bin/claude"));
        // The home is never the program's folder, nor a word inside a name.
        let at = |p: &str, harness: &str, home: &str| {
            let p = Path::new(p);
            mount_for(p, p.parent().unwrap(), harness, Path::new(home))
        };
        assert_eq!(
            at("/home/pi/pi", "pi", "/home/pi"),
            Path::new("/home/pi/pi")
        );
        assert_eq!(
            at("/home/claude/bin/claude", "claude", "/home/claude"),
            Path::new("/home/claude/bin/claude")
        );
        assert_eq!(
            at("/srv/pihome/pi", "pi", "/srv/pihome"),
            Path::new("/srv/pihome/pi")
        );
        assert_eq!(
            at("/opt/philip/tools/pi", "pi", "/home/u"),
            Path::new("/opt/philip/tools/pi")
        );
        assert_eq!(
            at(
                "/usr/lib/node_modules/@mariozechner/pi-coding-agent/dist/cli.js",
                "pi",
                "/home/u"
            ),
            Path::new("/usr/lib/node_modules/@mariozechner/pi-coding-agent/dist")
        );
    }

    #[test]
    fn limits_in_an_argv() {
        let argv: Vec<String> = [
            "create",
            "--memory",
            "1g",
            "--cpus",
            "2",
            "--pids-limit",
            "9",
            "img",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            limits_in_argv(&argv),
            Some(crate::settings::Limits::of("1g", "2", 9))
        );
        assert_eq!(limits_in_argv(&argv[..3]), None);
    }
}
