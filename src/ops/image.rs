//! Our images (docs/images.md, "Images"): `image build`, `image
//! status`, the background build worker, and what `cage create` and
//! `doctor` ask about an image. The pure parts (names, hash, argv, the
//! record, the decisions) are in `crate::images::workbench`.
//!
//! One build at a time per image, across processes: the process that builds
//! holds an flock on `<state>/images/<stage>.lock` for the whole build.
//! Whether a build runs is asked of that lock, never of a file, so a build
//! whose process died is not reported as building: the kernel released its
//! lock. A background build is a detached `shrooms-agent image
//! build-worker`, handed the lock already taken, so that the build is
//! reported as running from the moment `image build` returns.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::Context;
use super::check::{Check, Status as CheckStatus};
use crate::error::{Doing, Error, ImageProblem, Result, Unlooked, Warning};
use crate::host::Host;
use crate::host::facts_cache::Stamp;
use crate::host::podman::inspect::ImageInspect;
use crate::host::process as runner;
use crate::images::workbench::{self, BuildRecord, ForCage, ImageStatus, Present, Stage};
use crate::state::lock;
use crate::state::session::{make_private_dir, write_atomic};
use crate::state::when::now;

/// `<state>/images/`: per stage a lock, a record, a log, and the text of
/// the Containerfile a background build reads; and the empty build context.
struct Dir(PathBuf);

impl Dir {
    fn of(ctx: &Context) -> Dir {
        Dir(ctx.settings.state_dir.join("images"))
    }
    fn ensure(&self) -> Result<()> {
        if let Some(state) = self.0.parent() {
            make_private_dir(state)?;
        }
        make_private_dir(&self.0)?;
        make_private_dir(&self.context())
    }
    fn lock(&self, s: Stage) -> PathBuf {
        self.0.join(format!("{}.lock", s.name()))
    }
    fn record(&self, s: Stage) -> PathBuf {
        self.0.join(format!("{}.json", s.name()))
    }
    fn log(&self, s: Stage) -> PathBuf {
        self.0.join(format!("{}.log", s.name()))
    }
    fn text(&self, s: Stage) -> PathBuf {
        self.0.join(format!("{}.Containerfile", s.name()))
    }
    /// The build context: an empty folder (nothing is COPYed in).
    fn context(&self) -> PathBuf {
        self.0.join("context")
    }
    /// The base's tarball while it is made and imported.
    fn base_tar(&self) -> PathBuf {
        self.0.join("base.tar")
    }
    /// An image's inspect kept ([`inspect_kept`]), by a hash of its name.
    fn kept_inspect(&self, image: &str) -> PathBuf {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(image.as_bytes());
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        self.0.join(format!("inspect-{hex}.json"))
    }
    /// Where a background worker's own stdout and stderr go.
    fn worker_log(&self) -> PathBuf {
        self.0.join("worker.log")
    }
}

/// An image's build lock, held.
struct BuildLock {
    file: File,
}

impl BuildLock {
    /// Take it if nobody holds it; None when a build runs.
    fn try_take(path: &Path) -> Result<Option<BuildLock>> {
        Ok(lock::try_take(path)?.map(|file| BuildLock { file }))
    }

    /// The lock a spawning process took and passed on as descriptor `fd`.
    /// Made close-on-exec again at once, so that podman and what it starts
    /// never hold it (an orphaned RUN step would keep a dead build
    /// "running").
    fn inherited(fd: RawFd, path: &Path) -> Result<BuildLock> {
        let Some(file) = runner::inherited_fd(fd).map(File::from) else {
            return Err(Error::image(ImageProblem::LockNotPassed { fd }));
        };
        let same = match (file.metadata(), fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if !same {
            return Err(Error::image(ImageProblem::NotTheLock {
                fd,
                path: path.to_path_buf(),
            }));
        }
        // Our open file description holds it already: this cannot block,
        // and fails only if it was not held for us.
        lock::ours(&file)
            .map_err(|e| Error::act(Doing::BuildLockNotOurs(path.to_path_buf()), &e))?;
        Ok(BuildLock { file })
    }

    fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// Does a build of this image run now? Asked of the lock: taken and let go
/// at once when free. Taken shared, so that two processes asking at once
/// (`image status` beside `serve`) do not see each other as a build.
fn building(path: &Path) -> Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::act(Doing::Open(path.to_path_buf()), &e)),
    };
    // Let go when `file` is closed.
    lock::try_shared(&file)
        .map(|free| !free)
        .map_err(|e| Error::act(Doing::Lock(path.to_path_buf()), &e))
}

fn read_record(path: &Path) -> BuildRecord {
    // A damaged record is read as none: it only informs, the lock and the
    // image decide.
    fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Written only by the holder of the image's lock.
fn write_record(path: &Path, record: &BuildRecord) -> Result<()> {
    let mut text = serde_json::to_string_pretty(record)
        .map_err(|e| Error::act(Doing::Write(path.to_path_buf()), &e))?;
    text.push('\n');
    write_atomic(path, text.as_bytes(), 0o600)
}

fn present_of(inspect: &ImageInspect) -> Present {
    Present {
        id: inspect.id.clone(),
        label: inspect
            .config
            .labels
            .as_ref()
            .and_then(|l| l.get(workbench::LABEL))
            .cloned(),
    }
}

/// What podman, the lock and the record say of one image.
struct Observed {
    status: ImageStatus,
    record: BuildRecord,
    inspect: Option<ImageInspect>,
}

/// An image's inspect as an earlier command kept it in the state folder.
#[derive(Debug, serde::Deserialize, Serialize)]
struct Kept {
    name: String,
    /// podman's list of images when the inspect was asked.
    store: Stamp,
    inspect: ImageInspect,
}

/// An image's inspect (None: not on this machine), kept in the state
/// folder for the next commands while podman's list of images is the same
/// file as when it was asked ([`crate::host::PodmanFacts::images_file`]:
/// containers-storage writes it anew at each change of an image, its
/// name, tag or removal, so a new inode, size or time says that the
/// images changed). Where podman names no such file, or it is not there,
/// podman is asked each time. An image that is not there is not kept in
/// the state folder, only in the process ([`ABSENT`]).
fn inspect_kept(host: &Host, dir: &Dir, name: &str) -> Result<Option<ImageInspect>> {
    let store = host
        .images_file
        .as_deref()
        .map(Stamp::of)
        .filter(|s| s.seen.is_some());
    if let Some(store) = &store
        && absent().iter().any(|(n, seen)| n == name && seen == store)
    {
        return Ok(None);
    }
    let file = dir.kept_inspect(name);
    let read_kept = || {
        let store = store.as_ref()?;
        let kept = fs::read(&file)
            .ok()
            .and_then(|t| serde_json::from_slice::<Kept>(&t).ok())?;
        (kept.name == name && &kept.store == store).then_some(kept.inspect)
    };
    if let Some(inspect) = read_kept() {
        return Ok(Some(inspect));
    }
    // Commands started together (a script making many cages at once, in a
    // new state folder or after the images changed) would each start a
    // podman of their own to ask the same: one asks, under a lock in the
    // state folder (beside podman's facts' own; `images/` is made only to
    // keep an answer), and the others, waiting on it, read its answer.
    // Without the lock (no state folder yet), each asks.
    let _held = store
        .as_ref()
        .and_then(|_| dir.0.parent())
        .and_then(|state| crate::state::lock::open(&state.join(INSPECT_LOCK)).ok())
        .filter(|f| f.lock().is_ok());
    if _held.is_some()
        && let Some(inspect) = read_kept()
    {
        return Ok(Some(inspect));
    }
    // The stamp is taken before podman is asked: a change of the images
    // in between makes the kept answer's stamp differ next time.
    let inspect = host.podman.image(name)?;
    if let Some(store) = &store {
        let mut absent = absent();
        absent.retain(|(n, _)| n != name);
        if inspect.is_none() {
            absent.push((name.to_string(), store.clone()));
        }
    }
    if let (Some(store), Some(i)) = (store, &inspect) {
        let kept = Kept {
            name: name.to_string(),
            store,
            inspect: i.clone(),
        };
        // Only a saving: a folder that cannot be written asks podman again.
        if let Ok(text) = serde_json::to_vec(&kept) {
            let _ = dir
                .ensure()
                .and_then(|()| write_atomic(&file, &text, 0o600));
        }
    }
    Ok(inspect)
}

/// Held while an image's inspect is asked of podman ([`inspect_kept`]).
const INSPECT_LOCK: &str = "image-inspect.lock";

/// The images this process was told are not there, with podman's list of
/// images as it was then: while that file is the same, they are still not
/// there. For serve, which looks at the machine's image and ours every few
/// seconds for as long as it runs (`serve::state`): without this, four
/// podman calls every three seconds when our images were never built.
static ABSENT: std::sync::Mutex<Vec<(String, Stamp)>> = std::sync::Mutex::new(Vec::new());

fn absent() -> std::sync::MutexGuard<'static, Vec<(String, Stamp)>> {
    ABSENT.lock().unwrap_or_else(|e| e.into_inner())
}

fn observe(
    host: &Host,
    dir: &Dir,
    name: &str,
    machine: bool,
    stage: Option<Stage>,
) -> Result<Observed> {
    let inspect = inspect_kept(host, dir, name)?;
    let present = inspect.as_ref().map(present_of);
    let (is_building, record) = match stage {
        Some(s) => (building(&dir.lock(s))?, read_record(&dir.record(s))),
        None => (false, BuildRecord::default()),
    };
    let status = workbench::derive(
        name,
        machine,
        stage,
        present.as_ref(),
        is_building,
        &record,
        &workbench::embedded_hash(),
    );
    Ok(Observed {
        status,
        record,
        inspect,
    })
}

// ---- image status ----------------------------------------------------------

#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    pub images: Vec<ImageStatus>,
}

/// The machine's image (the config's `image`) and our two. The machine's
/// image is listed once: when it is one of ours, that entry says so.
pub fn status(ctx: &Context) -> Result<StatusReport> {
    let host = ctx.host()?;
    let dir = Dir::of(ctx);
    let repo = &ctx.settings.images_repo;
    let machine = &ctx.settings.image;
    let machine_stage = workbench::stage_of(repo, machine);
    let mut list = Vec::new();
    if machine_stage.is_none() {
        list.push(observe(host, &dir, machine, true, None)?.status);
    }
    for s in Stage::ALL {
        let name = workbench::image_name(repo, s);
        list.push(observe(host, &dir, &name, machine_stage == Some(s), Some(s))?.status);
    }
    Ok(StatusReport { images: list })
}

/// `doctor`'s image line, from the same facts as `image status`: a missing
/// image of ours is built on first use, so it is a warning; a missing image
/// of the owner's is a failure, since nothing here will make it.
pub fn doctor_check(ctx: &Context, host: &Host) -> Check {
    let repo = &ctx.settings.images_repo;
    let image = &ctx.settings.image;
    let stage = workbench::stage_of(repo, image);
    let name = match stage {
        Some(s) => workbench::image_name(repo, s),
        None => image.clone(),
    };
    let check = |status, detail: String, hint: Option<&str>| Check {
        name: "image",
        status,
        detail,
        hint: hint.map(str::to_string),
    };
    let build_hint = Some("or now: shrooms-agent image build --wait");
    match observe(host, &Dir::of(ctx), &name, true, stage) {
        Err(e) => check(CheckStatus::Fail, e.message(), None),
        Ok(o) => {
            let s = o.status;
            match (stage, s.present) {
                (None, true) => check(CheckStatus::Pass, format!("{name} is here"), None),
                (None, false) => check(
                    CheckStatus::Fail,
                    format!("there is no image {name} on this machine"),
                    Some(
                        "build or pull it (podman build -t / podman pull), or set `image` in the config",
                    ),
                ),
                (Some(_), true) if s.current => check(
                    CheckStatus::Pass,
                    format!("{name} is here and current"),
                    None,
                ),
                (Some(_), true) if s.building => check(
                    CheckStatus::Warn,
                    format!("{name} is being built again; the old one serves until it is ready"),
                    None,
                ),
                (Some(_), true) => check(
                    CheckStatus::Warn,
                    format!(
                        "{name} is older than this shrooms-agent's Containerfile: it is built again \
                         at the next `cage create`, and the old one serves until then"
                    ),
                    build_hint,
                ),
                (Some(_), false) if s.building => {
                    check(CheckStatus::Warn, format!("{name} is being built"), None)
                }
                (Some(st), false) => match &s.error {
                    Some(line) => check(
                        CheckStatus::Fail,
                        format!("{name} is missing: {}", workbench::failure(st, line)),
                        Some("`shrooms-agent image build --wait` builds it again and shows how"),
                    ),
                    None => check(
                        CheckStatus::Warn,
                        format!("{name} is not built yet: it will be built on first use"),
                        build_hint,
                    ),
                },
            }
        }
    }
}

// ---- cage create -------------------------------------------------------------

/// Being built: the seed's sentence, with "send again then" (each face
/// words that), and for the terminal alone, on a line of its own, what to
/// look at meanwhile (`image status`, the build's log).
fn not_ready(log: Option<&Path>) -> Error {
    Error::being_built(None).next(crate::error::Next::AgainWithHint {
        hint: being_built_hint(log),
    })
}

/// What to look at while an image is built.
fn being_built_hint(log: Option<&Path>) -> String {
    let log = match log {
        Some(p) => format!(", its log {}", p.display()),
        None => String::new(),
    };
    format!("`shrooms-agent image status` shows how it goes{log}")
}

/// A build of ours failed: its line, then the next steps: its log, a
/// build in the foreground that shows it, or another image (worded by
/// the face: `--image` or a body's `"image"`, or the config's `image` key,
/// in the config file named by its path).
pub fn failure_with_next_steps(ctx: &Context, stage: Stage, line: &str) -> Error {
    Error::build_failed(
        workbench::failure(stage, line),
        Some(&Dir::of(ctx).log(stage)),
    )
    .next(crate::error::Next::OtherImage {
        config: crate::settings::config_file_words(&ctx.settings.config_path),
    })
}

/// What the machine says of the image a cage would be made from: podman's
/// inspect, and for ours its build lock and record. Gathered by
/// `make::facts`; [`decide_for_cage`] decides from it.
#[derive(Debug, Clone)]
pub struct ImageFacts {
    /// The image asked for (the config's or the request's).
    pub image: String,
    /// The name it is looked up by (ours: the stage's name).
    pub name: String,
    pub stage: Option<Stage>,
    pub status: ImageStatus,
    pub record: BuildRecord,
    pub inspect: Option<ImageInspect>,
    /// Its build's log, for ours.
    pub log: Option<PathBuf>,
    /// The key of the base a build of ours would be made on here (None:
    /// no mirror is known, and a build would fail saying so).
    pub base_key: Option<String>,
}

/// Look at the image a cage would be made from. Starts nothing.
pub fn facts_for_cage(ctx: &Context, host: &Host, image: &str) -> Result<ImageFacts> {
    let repo = &ctx.settings.images_repo;
    let stage = workbench::stage_of(repo, image);
    let name = match stage {
        Some(s) => workbench::image_name(repo, s),
        None => image.to_string(),
    };
    let o = observe(host, &Dir::of(ctx), &name, false, stage)?;
    Ok(ImageFacts {
        image: image.to_string(),
        name,
        stage,
        status: o.status,
        record: o.record,
        inspect: o.inspect,
        log: stage.map(|s| Dir::of(ctx).log(s)),
        base_key: BaseSpec::of(ctx).key(workbench::CONTAINERFILE),
    })
}

/// An image decided for a cage: the one to make it from, and whether a
/// build of ours is to be started again (stale) as a step of the plan.
#[derive(Debug, Clone)]
pub struct ImageChoice {
    pub inspect: ImageInspect,
    pub rebuild: Option<Stage>,
}

/// No image yet: the refusal, and the build to start first, if any (the
/// refusal's plan starts it, `Step::StartBuild`, and fails with what
/// [`start_build`] says).
#[derive(Debug, Clone)]
pub struct NoImage {
    pub error: Error,
    pub build: Option<Stage>,
}

/// Pure: the image a cage is made from (asked by `make::decide` for `cage
/// create` and `cage move`), or the reason it cannot be yet. Ours,
/// missing: a build is to start in the background and this fails with
/// `BEING_BUILT` (exit 4); after a failed build, it fails once with
/// that build's last line, and the next call builds again. Ours, stale:
/// rebuilt in the background, the old one used meanwhile. Not ours: never
/// built or pulled. No program of its own is needed: a cage's first process
/// is the machine's catatonit.
///
/// A `--dry-run` changes nothing: it starts no build and marks no failure
/// as reported; it says what the real command would meet.
pub fn decide_for_cage(
    f: &ImageFacts,
    named: bool,
    dry_run: bool,
    warnings: &mut Vec<Warning>,
) -> std::result::Result<ImageChoice, NoImage> {
    let refused = |error: Error| NoImage { error, build: None };
    let name = &f.name;
    let not_ready = || not_ready(f.log.as_deref());
    let decision = workbench::for_cage(
        &f.status,
        &f.record,
        &workbench::embedded_hash(),
        f.base_key.as_deref(),
    );
    match (decision, f.stage, f.inspect.clone()) {
        (ForCage::Use, _, Some(inspect)) => Ok(ImageChoice {
            inspect,
            rebuild: None,
        }),
        (ForCage::UseAndRebuild, Some(_), Some(inspect)) if dry_run => {
            warnings.push(Warning::StaleOnDryRun {
                image: name.clone(),
            });
            Ok(ImageChoice {
                inspect,
                rebuild: None,
            })
        }
        (ForCage::Report(_) | ForCage::Build, Some(_), _) if dry_run => Err(refused(not_ready())),
        (ForCage::UseAndRebuild, Some(s), Some(inspect)) => Ok(ImageChoice {
            inspect,
            rebuild: Some(s),
        }),
        (ForCage::Wait, _, _) => Err(refused(not_ready())),
        (ForCage::Report(_) | ForCage::Build, Some(s), _) => Err(NoImage {
            error: not_ready(),
            build: Some(s),
        }),
        // Named by the request (--image, a body's "image"), it is bad
        // input; the config's own image missing is the machine's failure.
        _ => Err(refused(Error::image(ImageProblem::Missing {
            image: f.image.clone(),
            named,
        }))),
    }
}

/// A step of a plan: our image is missing, so its build starts in the
/// background. Returns what the command reports: "being built" (exit 4),
/// or the last build's failure when it failed with the inputs a build
/// would have now: then nothing starts (the same inputs fail the same
/// way), until they change or `image build` is asked for.
pub fn start_build(ctx: &Context, stage: Stage) -> Error {
    let dir = Dir::of(ctx);
    let started = (|| {
        dir.ensure()?;
        let Some(lock) = BuildLock::try_take(&dir.lock(stage))? else {
            return Ok(not_ready(Some(&dir.log(stage))));
        };
        // Under the lock, the record cannot change: read it again.
        let record = read_record(&dir.record(stage));
        let base = BaseSpec::of(ctx).key(workbench::CONTAINERFILE);
        if let Some(line) = record.failed_with(&workbench::embedded_hash(), base.as_deref()) {
            return Ok(failure_with_next_steps(ctx, stage, line));
        }
        start_background(&dir, vec![(stage, lock)], workbench::CONTAINERFILE, false)?;
        let building = not_ready(Some(&dir.log(stage)));
        // Built again after a failure that was reported: what failed may
        // fail again (no registry, no mirror), so say so and name the way
        // out that does not wait for it, instead of only "run it again".
        Ok(match record.error {
            Some(line) => Error::being_built(Some(workbench::failure(stage, &line))).next(
                crate::error::Next::AgainOrOtherImage {
                    config: crate::settings::config_file_words(&ctx.settings.config_path),
                    hint: being_built_hint(Some(&dir.log(stage))),
                },
            ),
            None => building,
        })
    })();
    started.unwrap_or_else(|e| e)
}

/// A step of a plan: our image is stale, so it is built again in the
/// background and the cage made from the old one. Returns the warning.
pub fn start_rebuild(ctx: &Context, stage: Stage, name: &str) -> Warning {
    let image = name.to_string();
    match rebuild_in_background(&Dir::of(ctx), stage) {
        Ok(()) => Warning::Rebuilding { image },
        Err(e) => Warning::RebuildNotStarted {
            image,
            error: Box::new(e),
        },
    }
}

/// The machine's image, when it is ours and older than this program's
/// Containerfile, built again in the background, as the seed's agent does
/// at its start (serve calls this once as it starts): the old image serves
/// until the new one is ready. Returns what it did, when it started one.
/// A missing image, or a rebuild that already failed with the same inputs
/// (the same would fail again), is left to the next `cage create`, which
/// reports it.
pub fn rebuild_if_stale(ctx: &Context, host: &Host) -> Result<Option<String>> {
    let f = facts_for_cage(ctx, host, &ctx.settings.image)?;
    let hash = workbench::embedded_hash();
    let decision = workbench::for_cage(&f.status, &f.record, &hash, f.base_key.as_deref());
    let failed_before = f.record.failed_with(&hash, f.base_key.as_deref()).is_some();
    let (ForCage::UseAndRebuild, Some(stage), Some(_), false) =
        (decision, f.stage, f.inspect, failed_before)
    else {
        return Ok(None);
    };
    rebuild_in_background(&Dir::of(ctx), stage)?;
    Ok(Some(format!(
        "the image {} is older than this shrooms-agent's Containerfile: it is being built \
         again in the background, and the old one serves until it is ready",
        f.name
    )))
}

/// A stale image of ours: build it again from the embedded Containerfile,
/// unless a build runs already.
fn rebuild_in_background(dir: &Dir, stage: Stage) -> Result<()> {
    dir.ensure()?;
    if let Some(lock) = BuildLock::try_take(&dir.lock(stage))? {
        start_background(dir, vec![(stage, lock)], workbench::CONTAINERFILE, false)?;
    }
    Ok(())
}

// ---- pi in a cage's image ------------------------------------------------------

/// Whether a cage's image has a `pi` on its PATH (a pi session runs the
/// image's pi unless the config names one of the machine's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pi {
    Has,
    Lacks,
    /// The look itself failed (podman, the runtime): why.
    Unknown(Unlooked),
}

/// What was learnt of pi in an image, and whether a container was run to
/// learn it (then `keep_pi` keeps the answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PiLook {
    pub image_id: String,
    pub pi: Pi,
    pub looked: bool,
}

/// Pure: an image built from this binary's embedded Containerfile (ours,
/// or one built FROM ours, which inherits the label) has pi: the
/// Containerfile installs it. Nothing is run to know that. An image of
/// ours built from an owner's `--containerfile` carries another hash and
/// is looked into like any other.
pub fn pi_known(inspect: &ImageInspect) -> bool {
    present_of(inspect).label.as_deref() == Some(workbench::embedded_hash().as_str())
}

/// Pure: the answer of a finished look ([`crate::host::podman::argv::look_for_pi`]).
/// No `sh` in the image (exit status 127, "the contained command cannot be
/// found" in podman-run(1)'s EXIT STATUS, and nothing printed) is taken as
/// no pi: pi is a node script started through `#!/usr/bin/env node`, and an
/// image without even a shell is not one pi is installed in. The status
/// tells it, not the runtime's words, which differ between runc and crun.
/// Any other failure is podman's (125) or the runtime's (126), and says
/// nothing of the image.
pub fn pi_of(out: &runner::Captured) -> Pi {
    use crate::host::podman::argv::{PI_FOUND, PI_MISSING};
    let said = out.stdout.lines().map(str::trim).find(|l| !l.is_empty());
    match (out.code, said) {
        (Some(0), Some(PI_FOUND)) => Pi::Has,
        (Some(0), Some(PI_MISSING)) => Pi::Lacks,
        (Some(127), None) => Pi::Lacks,
        _ => Pi::Unknown(match out.last_stderr_line() {
            "" => Unlooked::Ended(out.code),
            line => Unlooked::Said(line.to_string()),
        }),
    }
}

/// `<state>/images/pi.json`: the answers so far, by image ID. An ID names
/// an image's content, so an answer never goes stale. Two creates that
/// write it at once may lose one's answer: that image is asked again.
fn pi_file(ctx: &Context) -> PathBuf {
    Dir::of(ctx).0.join("pi.json")
}

fn read_pi_answers(path: &Path) -> std::collections::BTreeMap<String, bool> {
    // A damaged file is read as none: the images are asked again.
    fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Does this image have pi? Known from its label, or from the answer kept
/// for its ID, or else asked of the image once (a container of it, run and
/// removed: about a third of a second). Writes nothing: [`keep_pi`] does.
pub fn pi_in_image(ctx: &Context, host: &Host, inspect: &ImageInspect) -> PiLook {
    let look = |pi, looked| PiLook {
        image_id: inspect.id.clone(),
        pi,
        looked,
    };
    if pi_known(inspect) {
        return look(Pi::Has, false);
    }
    if let Some(&has) = read_pi_answers(&pi_file(ctx)).get(&inspect.id) {
        return look(if has { Pi::Has } else { Pi::Lacks }, false);
    }
    let argv = crate::host::podman::argv::look_for_pi(&inspect.id);
    let pi = match host
        .podman
        .process(&argv)
        .timeout(Duration::from_secs(120))
        .capture()
    {
        Ok(out) => pi_of(&out),
        Err(e) => Pi::Unknown(Unlooked::Failed(Box::new(e))),
    };
    look(pi, true)
}

/// Keep what a look learnt, so that the next create with this image runs
/// nothing. A look that failed is not kept: it is asked again.
pub fn keep_pi(ctx: &Context, look: &PiLook) -> Result<()> {
    let has = match (&look.pi, look.looked) {
        (Pi::Has, true) => true,
        (Pi::Lacks, true) => false,
        _ => return Ok(()),
    };
    let dir = Dir::of(ctx);
    dir.ensure()?;
    let path = pi_file(ctx);
    let mut answers = read_pi_answers(&path);
    answers.insert(look.image_id.clone(), has);
    let mut text = serde_json::to_string_pretty(&answers)
        .map_err(|e| Error::act(Doing::Write(path.to_path_buf()), &e))?;
    text.push('\n');
    write_atomic(&path, text.as_bytes(), 0o600)
}

// ---- image build -------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct BuildRequest {
    pub stages: Vec<Stage>,
    /// Build in the foreground and return its result.
    pub wait: bool,
    /// Instead of the embedded Containerfile.
    pub containerfile: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Built now, by this command.
    Built,
    /// Its label is this Containerfile's hash already: nothing was done.
    Current,
    /// A background build was started.
    Started,
    /// A build ran already (without --wait: nothing more was done).
    Building,
    /// Another process built it while this one waited (--wait).
    BuiltByAnother,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BuildResult {
    pub stage: Stage,
    pub name: String,
    /// The hash of the Containerfile asked for.
    pub hash: String,
    pub outcome: Outcome,
    /// Where the build's output goes.
    #[schema(value_type = String)]
    pub log: PathBuf,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BuildReport {
    pub images: Vec<BuildResult>,
}

/// What a foreground build shows as it goes.
pub enum Event<'a> {
    /// Another process builds this image; this one waits for it, and
    /// follows that build's log (its lines come as `Line`s).
    Waiting(&'a str),
    /// This process starts building this image.
    Building { name: &'a str },
    /// A line of podman's output.
    Line(&'a str),
    /// The build ended (this one's, or the one waited for): the image is
    /// built, or it failed (the command's error says how).
    Ended {
        name: &'a str,
        log: &'a Path,
        built: bool,
    },
}

pub fn build(
    ctx: &Context,
    req: &BuildRequest,
    on_event: &mut dyn FnMut(Event),
) -> Result<BuildReport> {
    let host = ctx.host()?;
    let (text, custom) = match &req.containerfile {
        Some(p) => {
            let t = fs::read_to_string(p)
                .map_err(|e| Error::act_on_input(Doing::Containerfile(p.to_path_buf()), &e))?;
            (t, true)
        }
        None => (workbench::CONTAINERFILE.to_string(), false),
    };
    let hash = workbench::input_hash(&text);
    let spec = BaseSpec::of(ctx);
    let dir = Dir::of(ctx);
    dir.ensure()?;
    let repo = &ctx.settings.images_repo;
    let result = |s: Stage, outcome| BuildResult {
        stage: s,
        name: workbench::image_name(repo, s),
        hash: hash.clone(),
        outcome,
        log: dir.log(s),
    };
    let mut out = Vec::new();
    if req.wait {
        for &s in &req.stages {
            let name = workbench::image_name(repo, s);
            let outcome = build_waiting(host, &dir, s, &name, &text, custom, &spec, on_event)?;
            out.push(result(s, outcome));
        }
        return Ok(BuildReport { images: out });
    }
    let mut jobs = Vec::new();
    for &s in &req.stages {
        let name = workbench::image_name(repo, s);
        match BuildLock::try_take(&dir.lock(s))? {
            None => out.push(result(s, Outcome::Building)),
            Some(lock) => {
                if is_current(host, &name, &hash)? {
                    note_current(&dir, s, &hash, custom)?;
                    out.push(result(s, Outcome::Current));
                } else {
                    out.push(result(s, Outcome::Started));
                    jobs.push((s, lock));
                }
            }
        }
    }
    if !jobs.is_empty() {
        start_background(&dir, jobs, &text, custom)?;
    }
    Ok(BuildReport { images: out })
}

fn is_current(host: &Host, name: &str, hash: &str) -> Result<bool> {
    Ok(host
        .podman
        .image(name)?
        .is_some_and(|i| present_of(&i).label.as_deref() == Some(hash)))
}

/// The image carries this hash: record it as built from it (under the lock),
/// so that `image status` compares with the right Containerfile.
fn note_current(dir: &Dir, s: Stage, hash: &str, custom: bool) -> Result<()> {
    let mut record = read_record(&dir.record(s));
    if record.built_hash.as_deref() != Some(hash) || record.built_custom != custom {
        record.built_hash = Some(hash.to_string());
        record.built_custom = custom;
        write_record(&dir.record(s), &record)?;
    }
    Ok(())
}

/// `image build --wait` of one image: build it here, or wait for the build
/// that runs and take its result.
#[allow(clippy::too_many_arguments)]
fn build_waiting(
    host: &Host,
    dir: &Dir,
    s: Stage,
    name: &str,
    text: &str,
    custom: bool,
    spec: &BaseSpec,
    on_event: &mut dyn FnMut(Event),
) -> Result<Outcome> {
    let hash = workbench::input_hash(text);
    let log = dir.log(s);
    let (_lock, waited_since) = match BuildLock::try_take(&dir.lock(s))? {
        Some(l) => (l, None),
        None => {
            on_event(Event::Waiting(name));
            let since = now();
            (wait_following(dir, s, on_event)?, Some(since))
        }
    };
    if is_current(host, name, &hash)? {
        note_current(dir, s, &hash, custom)?;
        return Ok(match waited_since {
            Some(_) => {
                on_event(Event::Ended {
                    name,
                    log: &log,
                    built: true,
                });
                Outcome::BuiltByAnother
            }
            None => Outcome::Current,
        });
    }
    if let Some(since) = waited_since {
        // The build waited for was of this same file and failed: that is
        // this command's result too.
        let record = read_record(&dir.record(s));
        if let (Some(line), Some(h), Some(at)) =
            (&record.error, &record.error_hash, record.failed_at)
            && *h == hash
            && at >= since
        {
            on_event(Event::Ended {
                name,
                log: &log,
                built: false,
            });
            return Err(Error::build_failed(workbench::failure(s, line), None));
        }
    }
    on_event(Event::Building { name });
    let built = build_now(host, dir, s, name, text, custom, spec, &mut |l| {
        on_event(Event::Line(l))
    });
    on_event(Event::Ended {
        name,
        log: &log,
        built: built.is_ok(),
    });
    built?;
    Ok(Outcome::Built)
}

/// Wait for the build another process runs, and pass on its log's lines as
/// they are written, so that a build waited for shows how it goes as one
/// run here would. The lock is asked every quarter second.
fn wait_following(dir: &Dir, s: Stage, on_event: &mut dyn FnMut(Event)) -> Result<BuildLock> {
    let mut follow = Follow::default();
    loop {
        follow.read(&dir.log(s), &mut |l| on_event(Event::Line(l)));
        if let Some(lock) = BuildLock::try_take(&dir.lock(s))? {
            // What the build wrote last, before it let go.
            follow.read(&dir.log(s), &mut |l| on_event(Event::Line(l)));
            return Ok(lock);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Where a log is read up to, and the line begun after it.
#[derive(Default)]
struct Follow {
    offset: u64,
    partial: Vec<u8>,
}

impl Follow {
    /// Pass on the whole lines written since the last read. A log that
    /// became shorter was begun again (a build starts by emptying it): read
    /// from its start.
    fn read(&mut self, path: &Path, on_line: &mut dyn FnMut(&str)) {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = File::open(path) else {
            return;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            self.offset = 0;
            self.partial.clear();
        }
        let mut new = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut new).is_err() {
            return;
        }
        self.offset += new.len() as u64;
        self.partial.extend_from_slice(&new);
        while let Some(at) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=at).collect();
            on_line(String::from_utf8_lossy(&line[..at]).trim_end_matches('\r'));
        }
    }
}

/// Build one image here and now; the caller holds its lock. The record
/// says so while it runs and keeps the result; podman's output goes to
/// `<stage>.log` and to `on_line`. podman dies with this process, so that a
/// build whose process was killed does not go on unseen.
#[allow(clippy::too_many_arguments)]
fn build_now(
    host: &Host,
    dir: &Dir,
    s: Stage,
    name: &str,
    text: &str,
    custom: bool,
    spec: &BaseSpec,
    on_line: &mut dyn FnMut(&str),
) -> Result<()> {
    let hash = workbench::input_hash(text);
    let record_path = dir.record(s);
    let mut record = read_record(&record_path);
    record.start(&hash, custom, now());
    record.pid = Some(std::process::id());
    write_record(&record_path, &record)?;

    let old = host.podman.image(name).ok().flatten().map(|i| i.id);
    let mut log = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(dir.log(s))
        .ok();
    let base_key = spec.key(text);
    let base = if workbench::uses_base(text) {
        let made = ensure_base(host, dir, spec, &mut |line| {
            log_line(&mut log, line);
            on_line(line);
        });
        match made {
            Ok(base) => Some(base),
            Err(e) => {
                let mut record = read_record(&record_path);
                record.failed(&hash, base_key.as_deref(), &e.message(), now());
                write_record(&record_path, &record)?;
                return Err(Error::build_failed(
                    workbench::failure(s, &e.message()),
                    None,
                ));
            }
        }
    } else {
        None
    };
    let local_ca = workbench::declares_arg(text, workbench::LOCAL_CA_ARG)
        .then(machine_local_cas)
        .flatten();
    let argv = workbench::build_argv(
        s,
        name,
        &hash,
        &dir.context(),
        base.as_deref(),
        local_ca.as_deref(),
    );
    let (ran, last) = run_build(host, &argv, text, &hash, &mut log, on_line);
    let mut record = read_record(&record_path);
    let made = match ran {
        Ok(Some(0)) => host.podman.image(name).map(|i| i.map(|i| present_of(&i))),
        _ => Ok(None),
    };
    match build_result(name, &hash, ran, made, last) {
        Ok(new) => {
            record.succeeded(&hash, custom, now());
            write_record(&record_path, &record)?;
            remove_replaced(host, old, new);
            Ok(())
        }
        Err(why) => {
            record.failed(&hash, base_key.as_deref(), &why, now());
            write_record(&record_path, &record)?;
            Err(Error::build_failed(workbench::failure(s, &why), None))
        }
    }
}

/// A line of a build's output into its log, when the log could be opened.
fn log_line(log: &mut Option<File>, line: &str) {
    if let Some(f) = log.as_mut() {
        let _ = writeln!(f, "{line}");
    }
}

/// Run `podman build` (`argv`) on the Containerfile `text`, labelled with
/// its `hash`, its lines to the log and to `on_line`. Returns how it ended
/// and the line that best says why, should it have failed. A build whose
/// look for a cached step met an image another podman was removing
/// (`workbench::lost_a_cache_race`) is run once more: nothing in it was
/// wrong, and the second look finds the images as they are then.
pub(super) fn run_build(
    host: &Host,
    argv: &[String],
    text: &str,
    hash: &str,
    log: &mut Option<File>,
    on_line: &mut dyn FnMut(&str),
) -> (Result<Option<i32>>, String) {
    let (ran, last) = run_build_once(host, argv, text, hash, log, on_line);
    if matches!(ran, Ok(Some(0))) || !workbench::lost_a_cache_race(&last) {
        return (ran, last);
    }
    let again = "shrooms-agent: podman's look for a cached step met an image removed \
                 meanwhile: building once more";
    log_line(log, again);
    on_line(again);
    run_build_once(host, argv, text, hash, log, on_line)
}

fn run_build_once(
    host: &Host,
    argv: &[String],
    text: &str,
    hash: &str,
    log: &mut Option<File>,
    on_line: &mut dyn FnMut(&str),
) -> (Result<Option<i32>>, String) {
    let mut last = String::new();
    let mut cause = String::new();
    let ran = host
        .podman
        .process(argv)
        .stdin(workbench::labelled(text, hash))
        .die_with_parent()
        .stream(&mut |line| {
            log_line(log, line);
            if !line.trim().is_empty() {
                last = line.trim().to_string();
                if workbench::may_be_the_cause(&last) {
                    cause = last.clone();
                }
            }
            on_line(line);
        });
    (ran, workbench::failure_line(&cause, &last))
}

/// Pure: what a build of `name` came to, from how podman build ended
/// (`ran`), the image it left (`made`) and its last telling line (`last`):
/// the new image's id when it carries the build's `hash`, else why not.
fn build_result(
    name: &str,
    hash: &str,
    ran: Result<Option<i32>>,
    made: Result<Option<Present>>,
    last: String,
) -> std::result::Result<String, String> {
    let why = match (ran, made) {
        (Ok(Some(0)), Ok(Some(new))) if new.label.as_deref() == Some(hash) => return Ok(new.id),
        (Ok(Some(0)), Ok(Some(new))) => format!(
            "podman build tagged {name} with the label {}={}, not {hash}",
            workbench::LABEL,
            new.label.as_deref().unwrap_or("(none)")
        ),
        (Ok(Some(0)), Ok(None)) => format!("podman build succeeded, but there is no {name}"),
        (Ok(Some(0)), Err(e)) => e.message(),
        (Ok(code), _) if last.is_empty() => format!(
            "podman build ended with {}",
            code.map(|c| format!("status {c}"))
                .unwrap_or_else(|| "a signal".into())
        ),
        (Ok(_), _) => last,
        (Err(e), _) => e.message(),
    };
    Err(why)
}

/// The old image lost its tag to the new one: remove it unless a
/// container still uses it (then podman refuses, and it stays for that
/// container: "Containers already made keep the image they were made
/// from").
fn remove_replaced(host: &Host, old: Option<String>, new: String) {
    if let Some(old) = old
        && old != new
    {
        let args = crate::host::podman::argv::image_rm(&old);
        let _ = host
            .podman
            .process(&args)
            .timeout(Duration::from_secs(60))
            .capture();
    }
}

/// What the base of our images is made from on this machine: where our
/// images are tagged, and the mirror (or why none is known).
pub struct BaseSpec {
    repo: String,
    mirror: std::result::Result<String, String>,
    path_var: Option<String>,
}

impl BaseSpec {
    pub fn of(ctx: &Context) -> BaseSpec {
        BaseSpec {
            repo: ctx.settings.images_repo.clone(),
            mirror: match &ctx.settings.base_mirror {
                Some(m) => Ok(m.clone()),
                None => machine_mirror(),
            },
            path_var: ctx.settings.path_var.clone(),
        }
    }

    /// The base's key, for a Containerfile built on it and a known mirror.
    pub fn key(&self, text: &str) -> Option<String> {
        match (&self.mirror, workbench::uses_base(text)) {
            (Ok(m), true) => Some(workbench::base_key(m)),
            _ => None,
        }
    }
}

/// The mirror of this machine's own Debian release, from its apt sources.
fn machine_mirror() -> std::result::Result<String, String> {
    let os = fs::read_to_string("/etc/os-release").unwrap_or_default();
    let codename = os
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|c| c.trim().trim_matches('"').to_string())
        .unwrap_or_default();
    let read_all = |ext: &str| -> Vec<String> {
        let mut paths: Vec<PathBuf> = fs::read_dir("/etc/apt/sources.list.d")
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == ext))
                    .collect()
            })
            .unwrap_or_default();
        paths.sort();
        paths
            .iter()
            .filter_map(|p| fs::read_to_string(p).ok())
            .collect()
    };
    let mut one_line: Vec<String> = fs::read_to_string("/etc/apt/sources.list")
        .ok()
        .into_iter()
        .collect();
    one_line.extend(read_all("list"));
    let found = if codename.is_empty() {
        None
    } else {
        workbench::apt_mirror(&codename, &read_all("sources"), &one_line)
    };
    found.ok_or_else(|| {
        format!(
            "no Debian mirror for this machine's release ({}) in its apt sources \
             (/etc/apt/sources.list.d/*.sources, /etc/apt/sources.list): the workbench's base \
             is made from one; name it with `base_mirror` in the config, or make the cage \
             from another image (the config's `image`)",
            if codename.is_empty() {
                "none named in /etc/os-release"
            } else {
                codename.as_str()
            }
        )
    })
}

/// The certificate authorities this machine adds to its own trust: the
/// PEM files in Debian's folder for them (`/usr/local/share/ca-certificates`,
/// one level of subfolders; update-ca-certificates(8)), in name order,
/// one after another. None when there are none. Public certificates, not
/// secrets: they may go on a command line.
fn machine_local_cas() -> Option<String> {
    let root = Path::new("/usr/local/share/ca-certificates");
    let mut files = Vec::new();
    for entry in fs::read_dir(root).ok()?.flatten() {
        let p = entry.path();
        if p.is_dir() {
            if let Ok(sub) = fs::read_dir(&p) {
                files.extend(sub.flatten().map(|e| e.path()));
            }
        } else {
            files.push(p);
        }
    }
    files.retain(|p| p.extension().is_some_and(|x| x == "crt"));
    files.sort();
    let mut pem = String::new();
    for f in files {
        if let Ok(text) = fs::read_to_string(&f)
            && text.contains("-----BEGIN CERTIFICATE-----")
        {
            pem.push_str(text.trim());
            pem.push('\n');
        }
    }
    // A command line's argument is at most 128 KiB (MAX_ARG_STRLEN).
    (!pem.is_empty() && pem.len() < 100_000).then(|| pem.trim_end().to_string())
}

/// The Debian base our workbench is built `FROM`: made with mmdebstrap
/// from the mirror, imported with `podman import` and tagged by its key,
/// unless an image of that name is here already. Its lines (mmdebstrap's,
/// and a `STEP` line for each of its own steps, which the progress line
/// shows) go to `emit`. Returns its name.
fn ensure_base(
    host: &Host,
    dir: &Dir,
    spec: &BaseSpec,
    emit: &mut dyn FnMut(&str),
) -> Result<String> {
    let mirror = spec.mirror.clone().map_err(Error::failed)?;
    let key = workbench::base_key(&mirror);
    let name = workbench::base_name(&spec.repo, &key);
    if host.podman.image(&name)?.is_some() {
        emit(&format!("the base {name} is here already"));
        return Ok(name);
    }
    let program = crate::settings::find_program("mmdebstrap", spec.path_var.as_deref())
        .ok_or_else(|| Error::image(ImageProblem::NoMmdebstrap))?;
    let tar = dir.base_tar();
    let _ = fs::remove_file(&tar);
    emit(&format!(
        "STEP 1/2: base: mmdebstrap {} from {mirror} (several minutes)",
        workbench::BASE_SUITE
    ));
    let cleanup = |e: Error| {
        let _ = fs::remove_file(&tar);
        e
    };
    run_mmdebstrap(&program, &mirror, &tar, emit).map_err(cleanup)?;
    let manifest = base_manifest(spec, &tar).map_err(cleanup)?;
    emit(&format!("STEP 2/2: base: podman import {name}"));
    let imported = host
        .podman
        .process(&workbench::import_argv(&tar, &name, &key, &manifest))
        .timeout(Duration::from_secs(900))
        .run();
    let _ = fs::remove_file(&tar);
    imported?;
    Ok(name)
}

/// Make the base's tarball (`tar`) with mmdebstrap (`program`) from
/// `mirror`, its lines to `emit` (what it is doing also as a `STEP` line).
/// A failure says why in mmdebstrap's own words.
fn run_mmdebstrap(
    program: &Path,
    mirror: &str,
    tar: &Path,
    emit: &mut dyn FnMut(&str),
) -> Result<()> {
    let root = super::euid() == 0;
    let argv = workbench::mmdebstrap_argv(mirror, tar, root);
    // Its first error names the cause (apt's "Failed to fetch ..."); the
    // last ones only say that it stopped.
    let mut cause = String::new();
    let mut last = String::new();
    let ran = runner::Process::new(program, "mmdebstrap")
        .args(argv)
        .env("SOURCE_DATE_EPOCH", &workbench::BASE_EPOCH.to_string())
        .die_with_parent()
        .stream(&mut |line| {
            emit(line);
            if let Some(what) = line.strip_prefix("I: ") {
                emit(&format!("STEP 1/2: base: {what}"));
            } else if !line.trim().is_empty() {
                last = line.trim().to_string();
                if cause.is_empty() && last.starts_with("E: ") {
                    cause = last.clone();
                }
            }
        });
    match ran? {
        Some(0) => Ok(()),
        status => Err(Error::image(ImageProblem::MmdebstrapFailed {
            status,
            said: if cause.is_empty() { last } else { cause },
        })),
    }
}

/// The base's packages, as dpkg's status file in its tarball (`tar`)
/// lists them.
fn base_manifest(spec: &BaseSpec, tar: &Path) -> Result<String> {
    let tar_program =
        crate::settings::find_program("tar", spec.path_var.as_deref()).unwrap_or("tar".into());
    let status = runner::Process::new(&tar_program, "tar")
        .args([
            "-xOf".to_string(),
            tar.to_string_lossy().into_owned(),
            "./var/lib/dpkg/status".into(),
        ])
        .timeout(Duration::from_secs(300))
        .run()?;
    Ok(workbench::manifest(&status.stdout))
}

/// Start a detached worker that builds these images, handing it their
/// locks (taken by the caller), and return once it runs: from then on the
/// builds are reported as running. Only the worker writes the records
/// after this.
fn start_background(
    dir: &Dir,
    jobs: Vec<(Stage, BuildLock)>,
    text: &str,
    custom: bool,
) -> Result<u32> {
    let hash = workbench::input_hash(text);
    for (s, _) in &jobs {
        write_atomic(&dir.text(*s), text.as_bytes(), 0o600)?;
        let mut record = read_record(&dir.record(*s));
        record.start(&hash, custom, now());
        write_record(&dir.record(*s), &record)?;
    }
    // The running program, whatever became of its path (`crate::cage::tools`).
    let program = Path::new(crate::cage::tools::THIS_PROGRAM);
    let mut args = vec!["image".to_string(), "build-worker".into()];
    for (s, lock) in &jobs {
        args.push("--job".into());
        args.push(format!("{}:{}", s.name(), lock.fd()));
    }
    let fds: Vec<RawFd> = jobs.iter().map(|(_, l)| l.fd()).collect();
    let started = runner::spawn_detached(program, &args, &dir.worker_log(), &fds);
    match started {
        Ok(pid) => Ok(pid),
        Err(e) => {
            // Nobody else has the locks yet: the records are still ours.
            for (s, _) in &jobs {
                let mut record = read_record(&dir.record(*s));
                record.failed(&hash, None, &e.message(), now());
                write_record(&dir.record(*s), &record)?;
            }
            Err(e)
        }
    }
}

/// `STAGE:FD`, as `start_background` passes a job to the worker.
pub fn parse_job(job: &str) -> Result<(Stage, RawFd)> {
    let bad = || {
        Error::image(ImageProblem::NotAJob {
            job: job.to_string(),
        })
    };
    let (s, fd) = job.split_once(':').ok_or_else(bad)?;
    let stage = Stage::parse(s).ok_or_else(bad)?;
    let fd: RawFd = fd.parse().map_err(|_| bad())?;
    if fd < 3 {
        return Err(bad());
    }
    Ok((stage, fd))
}

/// The hidden `image build-worker`: build each image whose lock it was
/// handed, in order, from the text `start_background` left for it.
pub fn worker(ctx: &Context, jobs: &[String]) -> Result<()> {
    let dir = Dir::of(ctx);
    let mut locks = Vec::new();
    // Every lock first: each is made close-on-exec before podman starts.
    for job in jobs {
        let (s, fd) = parse_job(job)?;
        locks.push((s, BuildLock::inherited(fd, &dir.lock(s))?));
    }
    let repo = &ctx.settings.images_repo;
    let spec = BaseSpec::of(ctx);
    let mut errors = Vec::new();
    for (s, lock) in locks {
        let record = read_record(&dir.record(s));
        let prepared = ctx.host().and_then(|host| {
            fs::read_to_string(dir.text(s))
                .map(|text| (host, text))
                .map_err(|e| Error::act(Doing::Read(dir.text(s)), &e))
        });
        let built = match prepared {
            Ok((host, text)) => {
                let name = workbench::image_name(repo, s);
                build_now(
                    host,
                    &dir,
                    s,
                    &name,
                    &text,
                    record.building_custom,
                    &spec,
                    &mut |_| {},
                )
            }
            // No build ran: the record says why, or the next `cage create`
            // would only start another worker that fails the same way.
            Err(e) => {
                let mut record = record;
                let hash = record.building_hash.clone().unwrap_or_default();
                record.failed(&hash, None, &e.message(), now());
                write_record(&dir.record(s), &record).and(Err(e))
            }
        };
        drop(lock);
        if let Err(e) = built {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::image(ImageProblem::Builds(errors)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;

    /// The "being built" refusal is the seed's sentence, word for word,
    /// on both faces; over HTTP nothing more (no path of the machine), at
    /// the terminal what to look at meanwhile on a line of its own.
    #[test]
    fn being_built_is_the_seeds_sentence() {
        use crate::error::Face;
        let seed = "the image for this session's cage is being built (a few minutes, the first \
                    time); send again then";
        let e = not_ready(Some(Path::new("/home/u/.local/state/images/workbench.log")));
        assert_eq!(e.kind, Kind::NotReady);
        assert_eq!(e.words(Face::Http), seed);
        assert_eq!(
            e.words(Face::Terminal),
            format!(
                "{seed}\n`shrooms-agent image status` shows how it goes, its log \
                 /home/u/.local/state/images/workbench.log"
            )
        );
    }

    #[test]
    fn what_a_look_for_pi_says() {
        let out = |code, stdout: &str, stderr: &str| runner::Captured {
            code,
            stdout: stdout.into(),
            stderr: stderr.into(),
        };
        assert_eq!(pi_of(&out(Some(0), "pi-found\n", "")), Pi::Has);
        assert_eq!(pi_of(&out(Some(0), "pi-missing\n", "")), Pi::Lacks);
        // No sh in the image: podman 4.3's words.
        assert_eq!(
            pi_of(&out(
                Some(127),
                "",
                "Error: runc: runc create failed: unable to start container process: exec: \
                 \"sh\": executable file not found in $PATH: OCI runtime attempted to invoke a \
                 command that was not found\n"
            )),
            Pi::Lacks
        );
        // crun's words for it, and none at all: the status alone tells.
        for stderr in [
            "Error: crun: executable file `sh` not found in $PATH: No such file or directory: \
             OCI runtime attempted to invoke a command that was not found\n",
            "",
        ] {
            assert_eq!(pi_of(&out(Some(127), "", stderr)), Pi::Lacks, "{stderr}");
        }
        // The runtime failed: nothing is known of the image.
        let rlimit = "Error: runc: runc create failed: unable to start container process: \
                      error during container init: error setting rlimits for ready process: \
                      error setting rlimit type 7: operation not permitted: OCI permission denied";
        assert_eq!(
            pi_of(&out(Some(126), "", rlimit)),
            Pi::Unknown(Unlooked::Said(rlimit.into()))
        );
        let unknown = pi_of(&out(Some(125), "", ""));
        assert_eq!(unknown, Pi::Unknown(Unlooked::Ended(Some(125))));
        let Pi::Unknown(why) = unknown else {
            unreachable!()
        };
        assert_eq!(why.to_string(), "podman run ended with status 125");
        // An image whose sh prints something else first is not believed.
        assert!(matches!(
            pi_of(&out(Some(0), "hello\npi-found\n", "")),
            Pi::Unknown(_)
        ));
    }

    #[test]
    fn jobs() {
        assert_eq!(parse_job("workbench:3").unwrap(), (Stage::Workbench, 3));
        assert_eq!(parse_job("desktop:17").unwrap(), (Stage::Desktop, 17));
        for bad in ["workbench", "x:3", "desktop:1", "desktop:-4", "desktop:"] {
            assert!(parse_job(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_lock_tells_whether_a_build_runs() {
        let scratch = tempfile::tempdir().unwrap();
        let d = scratch.path().to_path_buf();
        let p = d.join("workbench.lock");
        assert!(!building(&p).unwrap(), "no lock file: nothing runs");
        let held = BuildLock::try_take(&p).unwrap().expect("free");
        assert!(building(&p).unwrap());
        assert!(BuildLock::try_take(&p).unwrap().is_none());
        drop(held);
        assert!(!building(&p).unwrap(), "released when its holder lets go");
        // One asking does not look like a build to another.
        let asking = File::open(&p).unwrap();
        assert!(lock::try_shared(&asking).unwrap());
        assert!(!building(&p).unwrap());
        drop(asking);
        assert!(BuildLock::try_take(&p).unwrap().is_some());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_log_is_followed_as_it_grows_and_when_begun_again() {
        let scratch = tempfile::tempdir().unwrap();
        let d = scratch.path().to_path_buf();
        let p = d.join("workbench.log");
        let mut f = Follow::default();
        let mut seen = Vec::new();
        f.read(&p, &mut |l| seen.push(l.to_string()));
        assert!(seen.is_empty(), "no log yet");
        fs::write(&p, "STEP 1/2: FROM a\nhal").unwrap();
        f.read(&p, &mut |l| seen.push(l.to_string()));
        assert_eq!(seen, ["STEP 1/2: FROM a"], "a line begun waits for its end");
        let mut file = OpenOptions::new().append(true).open(&p).unwrap();
        file.write_all(b"f\nSTEP 2/2: RUN b\n").unwrap();
        f.read(&p, &mut |l| seen.push(l.to_string()));
        assert_eq!(seen, ["STEP 1/2: FROM a", "half", "STEP 2/2: RUN b"]);
        // A new build empties the log and writes it again.
        fs::write(&p, "STEP 1/3: FROM c\n").unwrap();
        seen.clear();
        f.read(&p, &mut |l| seen.push(l.to_string()));
        assert_eq!(seen, ["STEP 1/3: FROM c"]);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn records_survive_damage() {
        let scratch = tempfile::tempdir().unwrap();
        let d = scratch.path().to_path_buf();
        let p = d.join("workbench.json");
        assert_eq!(read_record(&p), BuildRecord::default());
        let mut r = BuildRecord::default();
        r.failed("h", None, "Error: x", 3);
        write_record(&p, &r).unwrap();
        assert_eq!(read_record(&p), r);
        fs::write(&p, "{not json").unwrap();
        assert_eq!(read_record(&p), BuildRecord::default());
        let _ = fs::remove_dir_all(&d);
    }
}
