//! End-to-end tests of our images, as root, against real podman.
//! No registry is reachable here, so the images are built with
//! `--containerfile` from small Containerfiles `FROM` the test busybox image,
//! with the same stage names as the embedded one. Each test tags its images
//! in a repository of its own (`images_repo`), since root's podman is shared
//! by every test, and removes them when it ends.

use std::cell::RefCell;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

const BEING_BUILT: &str =
    "the image for this session's cage is being built (a few minutes, the first time)";

/// The terminal's words for an image being built: the seed's sentence,
/// then what to look at meanwhile (`image status`, the build's log) on a
/// line of its own.
fn being_built(r: &Run, log: &std::path::Path) -> bool {
    r.stderr().contains(&format!(
        "shrooms-agent: error: {BEING_BUILT}; send again then\n`shrooms-agent image status` \
         shows how it goes, its log {}\n",
        log.display()
    ))
}

static N: AtomicUsize = AtomicUsize::new(0);

fn unique() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

fn sha256(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A rootful world whose images go to a repository of its own, removed at
/// the end with everything its builds left: a build still running is
/// killed, buildah's working containers of a killed build are removed.
struct Images {
    w: World,
    repo: String,
    /// More images to remove (old ones a cage kept, test-made ones).
    extra: RefCell<Vec<String>>,
    /// Prefixes of buildah working-container names to remove.
    working: RefCell<Vec<String>>,
}

impl Images {
    fn new() -> Images {
        let w = World::new();
        let repo = format!("localhost/shrooms-it-{}", unique());
        w.write_config(&format!("images_repo = \"{repo}\""));
        Images {
            w,
            repo,
            extra: RefCell::new(Vec::new()),
            working: RefCell::new(Vec::new()),
        }
    }

    fn name(&self, stage: &str) -> String {
        match stage {
            "workbench" => format!("{}:latest", self.repo),
            "desktop" => format!("{}:desktop", self.repo),
            other => panic!("no stage {other}"),
        }
    }

    /// A Containerfile of our two stages that builds offline; `run` is the
    /// workbench's RUN line. The repository's name in it keeps its layers
    /// out of every other test's build cache.
    fn containerfile(&self, rel: &str, run: &str) -> (PathBuf, String) {
        let text = format!(
            "FROM {IMAGE} AS workbench\n\
             RUN echo {repo} > /repo\n\
             {run}\n\
             FROM workbench AS desktop\n\
             ENV APPIMAGE_EXTRACT_AND_RUN=1\n",
            repo = self.repo
        );
        (self.w.file(rel, &text), text)
    }

    fn build(&self, args: &[&str]) -> Run {
        let mut all = vec!["image", "build"];
        all.extend_from_slice(args);
        self.w.run(&all)
    }

    fn status(&self) -> Value {
        self.w.run(&["image", "status", "--json"]).ok().json()
    }

    /// `image status --json`'s entry for one of ours.
    fn entry(&self, stage: &str) -> Value {
        let name = self.name(stage);
        let all = self.status();
        all["images"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no {name} in image status: {all:#}"))
            .clone()
    }

    fn record(&self, stage: &str) -> Value {
        let p = self.w.state.join("images").join(format!("{stage}.json"));
        fs::read_to_string(&p)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    }

    /// Wait until `image status` says no build of it runs.
    fn wait_built(&self, stage: &str, timeout: Duration) -> Value {
        let end = Instant::now() + timeout;
        loop {
            let e = self.entry(stage);
            if e["building"] == false {
                return e;
            }
            assert!(
                Instant::now() < end,
                "still building after {timeout:?}: {e:#}"
            );
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn inspect(&self, image: &str, format: &str) -> Option<String> {
        let out = self
            .w
            .podman(&["image", "inspect", "--format", format, image]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn label(&self, image: &str) -> Option<String> {
        self.inspect(
            image,
            "{{index .Config.Labels \"xyz.vpavlin.shrooms.containerfile\"}}",
        )
    }

    fn id(&self, image: &str) -> Option<String> {
        self.inspect(image, "{{.Id}}")
    }

    fn project(&self, rel: &str) -> String {
        fs::canonicalize(self.w.dir(rel))
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Images {
    fn drop(&mut self) {
        // A build that still runs (a background one started by `cage
        // create` fails here within a second: no registry) is waited for a
        // little, then killed with its process group.
        for stage in ["workbench", "desktop"] {
            let end = Instant::now() + Duration::from_secs(20);
            while Instant::now() < end {
                let r = self.w.run(&["image", "status", "--json"]);
                let building = r.code() == 0
                    && r.json()["images"]
                        .as_array()
                        .is_some_and(|l| l.iter().any(|e| e["building"] == true));
                if !building {
                    break;
                }
                thread::sleep(Duration::from_millis(200));
            }
            if let Some(pid) = self.record(stage)["pid"].as_i64() {
                // SAFETY: kill(2); the worker leads its own process group.
                unsafe {
                    libc::kill(-(pid as i32), libc::SIGKILL);
                }
            }
        }
        let out = self
            .w
            .podman(&["ps", "-a", "--external", "--format", "{{.ID}} {{.Names}}"]);
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut parts = line.split_whitespace();
            let (Some(id), Some(name)) = (parts.next(), parts.next()) else {
                continue;
            };
            if self.working.borrow().iter().any(|p| name.starts_with(p)) {
                let _ = self.w.podman(&["rm", "-f", id]);
            }
        }
        let mut images = vec![self.name("desktop"), self.name("workbench")];
        images.extend(self.extra.borrow().iter().cloned());
        for i in images {
            let _ = self.w.podman(&["rmi", "-f", &i]);
        }
    }
}

/// The last error line of a run, for messages.
fn error_line(r: &Run) -> String {
    r.stderr()
        .lines()
        .rev()
        .find(|l| l.starts_with("shrooms-agent: error: "))
        .unwrap_or("")
        .trim_start_matches("shrooms-agent: error: ")
        .to_string()
}

/// A build with --containerfile tags the image with
/// the file's hash; the same file again builds nothing; a changed file
/// builds again, while a cage made from the old image keeps it and runs.
#[test]
fn a_build_is_labelled_with_its_hash_and_repeated_only_for_a_changed_file() {
    let im = Images::new();
    let latest = im.name("workbench");
    let (cf, text) = im.containerfile("cf1", "RUN echo first > /marker");
    let cf = cf.to_string_lossy().into_owned();

    let r = im.build(&["--wait", "--containerfile", &cf]).ok();
    assert!(
        r.stdout().starts_with(&format!("built {latest} ")),
        "{}",
        r.explain()
    );
    // Not a terminal: one line per step, not podman's every line.
    assert!(r.stderr().contains("STEP 2/"), "{}", r.explain());
    assert!(!r.stderr().contains("COMMIT"), "{}", r.explain());
    assert_eq!(im.label(&latest), Some(sha256(&text)));
    let first = im.id(&latest).expect("the image is there");

    // The same file: nothing is built, in the foreground or the background.
    for args in [
        &["--wait", "--containerfile", &cf][..],
        &["--containerfile", &cf][..],
    ] {
        let mut a = args.to_vec();
        a.push("--json");
        let r = im.build(&a).ok();
        assert_eq!(
            r.json()["images"][0]["outcome"],
            "current",
            "{}",
            r.explain()
        );
        assert_eq!(im.id(&latest).as_deref(), Some(first.as_str()));
    }
    let r = im.build(&["--containerfile", &cf]).ok();
    assert!(
        r.stdout().contains("is current") && r.stdout().contains("nothing to build"),
        "{}",
        r.explain()
    );
    let e = im.entry("workbench");
    assert_eq!(
        (&e["present"], &e["current"], &e["building"]),
        (&Value::Bool(true), &Value::Bool(true), &Value::Bool(false)),
        "{e:#}"
    );

    // A cage from it.
    let old_cage = im.w.session("old");
    let dir = im.project("p-old");
    im.w.create(&old_cage, Path::new(&dir), &["--image", &latest]);
    assert_eq!(im.w.sh(&old_cage, "cat /marker").ok().stdout(), "first\n");

    // A changed file builds again.
    let (cf2, text2) = im.containerfile("cf2", "RUN echo second > /marker");
    let r = im
        .build(&["--wait", "--containerfile", &cf2.to_string_lossy()])
        .ok();
    assert!(r.stdout().starts_with("built "), "{}", r.explain());
    assert_eq!(im.label(&latest), Some(sha256(&text2)));
    let second = im.id(&latest).unwrap();
    assert_ne!(second, first);
    // The old image stays while its cage uses it; removed at the end.
    im.extra.borrow_mut().push(first.clone());

    // The old cage still runs, on the old image.
    assert_eq!(im.w.sh(&old_cage, "cat /marker").ok().stdout(), "first\n");
    let container = im.w.container(&old_cage);
    let out = im.w.podman(&[
        "inspect",
        "--type",
        "container",
        "--format",
        "{{.Image}}",
        &container,
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), first);
    // A new cage gets the new one.
    let new_cage = im.w.session("new");
    let dir = im.project("p-new");
    im.w.create(&new_cage, Path::new(&dir), &["--image", &latest]);
    assert_eq!(im.w.sh(&new_cage, "cat /marker").ok().stdout(), "second\n");
}

/// A TCP listener that counts the connections it is given.
fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind((HOST_ADDR, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    thread::spawn(move || {
        for s in l.incoming() {
            if s.is_ok() {
                c.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (port, count)
}

/// Two `image build --wait` at once run one build (its
/// RUN step reaches the host once), and both report its result.
#[test]
fn two_waiting_builds_run_one_build_and_both_succeed() {
    let im = Images::new();
    let (port, count) = counting_listener();
    let (cf, text) = im.containerfile(
        "cf",
        &format!("RUN nc -w 2 {HOST_ADDR} {port} </dev/null || true; sleep 3"),
    );
    let cf = cf.to_string_lossy().into_owned();
    let args = ["image", "build", "--wait", "--containerfile", &cf];
    let a = im.w.spawn_env(&args, &[]);
    let b = im.w.spawn_env(&args, &[]);
    let a = finish("image build --wait (a)", a).ok();
    let b = finish("image build --wait (b)", b).ok();

    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "the build ran more or less than once:\n{}\n{}",
        a.explain(),
        b.explain()
    );
    let built: Vec<&Run> = [&a, &b]
        .into_iter()
        .filter(|r| r.stdout().starts_with("built "))
        .collect();
    assert_eq!(built.len(), 1, "{}\n{}", a.explain(), b.explain());
    let other = if built[0].stdout() == a.stdout() {
        &b
    } else {
        &a
    };
    assert!(
        other
            .stdout()
            .contains("was built by another shrooms-agent while this one waited"),
        "{}",
        other.explain()
    );
    assert!(
        other
            .stderr()
            .contains("is being built by another shrooms-agent; waiting"),
        "{}",
        other.explain()
    );
    assert_eq!(im.label(&im.name("workbench")), Some(sha256(&text)));
}

/// One of our images missing makes `cage create` start
/// its build and fail with `BEING_BUILT`'s words, exit 4, and no container.
#[test]
fn our_missing_image_starts_a_build_and_is_refused_with_exit_4() {
    let im = Images::new();
    let name = im.w.session("missing");
    let dir = im.project("p");
    let latest = im.name("workbench");
    // A dry run says so too, and starts nothing.
    let r =
        im.w.run(&[
            "cage",
            "create",
            &name,
            "--dir",
            &dir,
            "--image",
            &latest,
            "--dry-run",
        ])
        .code_is(4);
    assert!(
        being_built(&r, &im.w.state.join("images/workbench.log")),
        "{}",
        r.explain()
    );
    assert!(
        !im.w.state.join("images/workbench.json").exists(),
        "a dry run started a build"
    );
    let r =
        im.w.run(&["cage", "create", &name, "--dir", &dir, "--image", &latest])
            .code_is(4);
    assert!(
        being_built(&r, &im.w.state.join("images/workbench.log")),
        "{}",
        r.explain()
    );
    assert!(im.w.containers_of(&name).is_empty());
    assert!(!im.w.record_path(&name).exists());
    // A build of it was started: it runs, or it has run (the embedded
    // Containerfile cannot be built here, with no registry: it fails).
    let rec = im.record("workbench");
    assert!(
        rec["building_since"].is_u64() || rec["error"].is_string(),
        "{rec:#}"
    );
    let e = im.wait_built("workbench", Duration::from_secs(60));
    assert!(
        e["present"] == true || e["error"].is_string(),
        "no build ran: {e:#}"
    );
    // The machine's config image is never built: only ours.
    assert_eq!(
        im.w.run(&["image", "status", "--json"]).ok().json()["images"][0]["name"],
        IMAGE
    );
}

/// A failed build of ours is reported by every `cage create` that would
/// start the same build again, with its line and log (exit 1), and none is
/// started: the same inputs would fail the same way. Another mirror (the
/// base's key) is another input: then a create starts a build (exit 4) and
/// says the last one failed; and `image build`, asked for, always builds.
#[test]
fn a_failed_build_is_reported_until_its_inputs_change() {
    let im = Images::new();
    // The world's config names a mirror on a closed loopback port: the
    // workbench's base cannot be made, and the build fails in seconds.
    let r = im.build(&["--wait"]).code_is(1);
    let line = error_line(&r);
    assert!(
        line.starts_with("building the workbench image: mmdebstrap ended with status ")
            && line.contains("127.0.0.1:9"),
        "{}",
        r.explain()
    );
    let log = im.w.state.join("images/workbench.log");
    let logged = fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("STEP 1/2: base: mmdebstrap bookworm from http://127.0.0.1:9/debian")
            && logged.contains("E: Failed to fetch"),
        "{logged}"
    );
    let failed_at = im.record("workbench")["failed_at"].clone();
    assert!(failed_at.is_u64(), "{:#}", im.record("workbench"));
    let e = im.entry("workbench");
    assert_eq!(e["present"], false, "{e:#}");
    let error = e["error"].as_str().expect("the error is set").to_string();
    assert!(line.ends_with(&error), "{line} / {error}");

    let name = im.w.session("failed");
    let dir = im.project("p");
    let latest = im.name("workbench");
    let create = ["cage", "create", &name, "--dir", &dir, "--image", &latest];
    for _ in 0..2 {
        let r = im.w.run(&create).code_is(1);
        // The next steps follow: the log, a build that shows how, another image.
        let said = error_line(&r);
        assert!(
            said.starts_with(&format!(
                "{line}. Its log: {}. `shrooms-agent image build --wait` builds it again",
                log.display()
            )) && said.contains("--image IMAGE, or the `image` key in "),
            "{}",
            r.explain()
        );
        assert!(im.w.containers_of(&name).is_empty());
        assert!(!im.w.record_path(&name).exists());
        // Nothing was started again: the record is the failed build's.
        let rec = im.record("workbench");
        assert_eq!(rec["failed_at"], failed_at, "{rec:#}");
        assert!(rec["building_since"].is_null(), "{rec:#}");
    }

    // Another mirror: the inputs changed, so a create builds again, and
    // says the last build failed and how not to wait for this one.
    im.w.write_config(&format!(
        "images_repo = \"{}\"\nbase_mirror = \"http://127.0.0.1:9/other\"",
        im.repo
    ));
    let r = im.w.run(&create).code_is(4);
    let said = error_line(&r);
    assert_eq!(
        said,
        format!(
            "the last build failed ({line}); {BEING_BUILT} (`shrooms-agent image status` shows \
             how it goes, its log {}); run it again then, or make the cage from another image \
             now: --image IMAGE, or the `image` key in {}",
            log.display(),
            said.rsplit_once("`image` key in ").unwrap().1
        ),
        "{}",
        r.explain()
    );
    assert!(im.w.containers_of(&name).is_empty());
    let e = im.wait_built("workbench", Duration::from_secs(60));
    assert!(
        e["error"]
            .as_str()
            .is_some_and(|l| l.contains("127.0.0.1:9")),
        "{e:#}"
    );
    // `image build` is the user asking: it builds from the same inputs,
    // and on a terminal its progress line shows the base's steps.
    let before = im.record("workbench")["failed_at"].clone();
    std::thread::sleep(Duration::from_millis(1100));
    let r = im.w.run_on_terminal(&["image", "build", "--wait"], "");
    let shown = r.stdout();
    assert!(
        shown.contains("1/2 base: running apt-get update")
            && shown.contains("failed to build ")
            && shown.contains("E: Failed to fetch"),
        "{}",
        r.explain()
    );
    assert_ne!(im.record("workbench")["failed_at"], before);
}

/// The real default workbench, as the machine makes it with no registry:
/// a Debian base from the machine's own apt mirror (mmdebstrap, `podman
/// import`, tagged by its key, labelled with its packages), and the
/// embedded Containerfile on top (Node 22 and pi from npm). Built as the
/// test user in its own storage; scripts/test-workbench builds it once
/// before the tests (and keeps it between runs), so here `image build
/// --wait` finds it current, or builds it when run alone.
#[test]
fn the_default_workbench_is_made_from_apt_alone() {
    let w = World::rootless();
    // The machine's mirror (no `base_mirror`), our default repository.
    fs::write(&w.config, "unenforced_limits = \"warn\"\n").unwrap();
    w.chown_all();
    let image = "localhost/shrooms-workbench:latest";
    let r = w.run(&["image", "build", "--wait", "--json"]).ok();
    let outcome = r.json()["images"][0]["outcome"].clone();
    assert!(
        outcome == "built" || outcome == "current",
        "{}",
        r.explain()
    );
    let podman = |args: &[&str]| {
        let out = w.podman(args);
        assert!(out.status.success(), "podman {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // Its base: the image of ours whose first layer is the workbench's.
    let first = |name: &str| {
        podman(&[
            "image",
            "inspect",
            "--format",
            "{{index .RootFS.Layers 0}}",
            name,
        ])
    };
    let wb_first = first(image);
    let bases = podman(&[
        "images",
        "--filter",
        "reference=localhost/shrooms-workbench-base",
        "--format",
        "{{.Repository}}:{{.Tag}}",
    ]);
    let base = bases
        .lines()
        .find(|b| first(b) == wb_first)
        .unwrap_or_else(|| panic!("no base under the workbench among {bases:?}"))
        .to_string();
    let label = |name: &str, key: &str| {
        podman(&[
            "image",
            "inspect",
            "--format",
            &format!("{{{{index .Config.Labels \"{key}\"}}}}"),
            name,
        ])
    };
    assert_eq!(
        base.rsplit_once(':').unwrap().1,
        label(&base, "xyz.vpavlin.shrooms.base"),
        "a base is tagged by its key"
    );
    let manifest = label(&base, "xyz.vpavlin.shrooms.manifest");
    for pkg in [
        "git=",
        "curl=",
        "build-essential=",
        "python3-venv=",
        "ripgrep=",
        "jq=",
        "gh=",
        "nodejs=",
    ] {
        assert!(
            manifest.split(' ').any(|p| p.starts_with(pkg)),
            "{pkg} not in the manifest: {manifest}"
        );
    }
    // Asked again: nothing to build, no other base made.
    let again = w.run(&["image", "build", "--wait", "--json"]).ok();
    assert_eq!(
        again.json()["images"][0]["outcome"],
        "current",
        "{}",
        again.explain()
    );
    assert_eq!(
        podman(&[
            "images",
            "--filter",
            "reference=localhost/shrooms-workbench-base",
            "-q"
        ])
        .lines()
        .count(),
        bases.lines().count()
    );
    // A cage of it has what docs/images.md says the workbench has.
    let name = w.session("workbench");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &[]);
    let r = w
        .sh(
            &name,
            "node --version; npm --version >/dev/null && echo npm-ok; pi --version >/dev/null && \
             echo pi-ok; gh --version | head -1; git --version; python3 -m venv /tmp/v && \
             echo venv-ok; rg --version | head -1; jq --version; cc --version | head -1",
        )
        .ok();
    let out = r.stdout();
    for want in [
        "v22.",
        "npm-ok",
        "pi-ok",
        "gh version",
        "git version",
        "venv-ok",
        "ripgrep",
        "jq-",
        "cc (Debian",
    ] {
        assert!(out.contains(want), "{want}: {}", r.explain());
    }
}

/// An image that is not ours is never built or pulled:
/// missing, `cage create` fails with the message it always had.
#[test]
fn a_missing_image_not_ours_is_refused_and_never_built() {
    let im = Images::new();
    let name = im.w.session("foreign");
    let dir = im.project("p");
    let image = format!("localhost/shrooms-it-nope-{}:1", unique());
    let r =
        im.w.run(&["cage", "create", &name, "--dir", &dir, "--image", &image])
            .code_is(2);
    assert_eq!(
        error_line(&r),
        format!("there is no image {image} on this machine for this session's cage"),
        "{}",
        r.explain()
    );
    assert!(im.w.containers_of(&name).is_empty());
    assert!(!im.w.record_path(&name).exists());
    assert!(im.id(&image).is_none());
    let records: Vec<_> = fs::read_dir(im.w.state.join("images"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(records.is_empty(), "a build was started: {records:?}");
}

/// An image's inspect is kept in the state folder between commands while
/// podman's list of images stays the same file: removed, the image is
/// refused with the message it always had. And when it goes between that
/// look and `podman create` (made to happen here: the kept inspect and
/// podman's facts are pointed at a file of the test's own, which does not
/// change), podman create's failure is told apart by `podman image exists`
/// and refused with the same words, nothing left behind.
#[test]
fn an_image_removed_after_its_inspect_was_kept_is_refused_as_missing() {
    use std::os::unix::fs::MetadataExt;
    let im = Images::new();
    let image = format!("localhost/shrooms-it-kept-{}:1", unique());
    im.extra.borrow_mut().push(image.clone());
    let tagged = im.w.podman(&["tag", IMAGE, &image]);
    assert!(tagged.status.success(), "{}", show_output(&tagged));
    let dir = im.project("p");
    let a = im.w.session("kept-a");
    im.w.run(&["cage", "create", &a, "--dir", &dir, "--image", &image])
        .ok();
    let kept: Vec<PathBuf> = fs::read_dir(im.w.state.join("images"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("inspect-")
        })
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let untagged = im.w.podman(&["rmi", &image]);
    assert!(untagged.status.success(), "{}", show_output(&untagged));
    let missing = format!("there is no image {image} on this machine for this session's cage");
    let b = im.w.session("kept-b");
    let r =
        im.w.run(&["cage", "create", &b, "--dir", &dir, "--image", &image])
            .code_is(2);
    assert_eq!(error_line(&r), missing, "{}", r.explain());

    // The race, made certain.
    let still = im.w.root.join("images-that-do-not-change.json");
    fs::write(&still, "[]").unwrap();
    let m = fs::metadata(&still).unwrap();
    let seen = serde_json::json!([
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ]);
    let facts_file = im.w.state.join("podman-facts.json");
    let mut facts: Value = serde_json::from_slice(&fs::read(&facts_file).unwrap()).unwrap();
    facts["facts"]["images_file"] = serde_json::json!(still);
    fs::write(&facts_file, serde_json::to_vec(&facts).unwrap()).unwrap();
    let mut k: Value = serde_json::from_slice(&fs::read(&kept[0]).unwrap()).unwrap();
    k["store"] = serde_json::json!({"path": still, "seen": seen});
    fs::write(&kept[0], serde_json::to_vec(&k).unwrap()).unwrap();
    im.w.chown_all();
    let c = im.w.session("kept-c");
    let r =
        im.w.run(&["cage", "create", &c, "--dir", &dir, "--image", &image])
            .code_is(1);
    assert_eq!(
        error_line(&r),
        format!("{missing} (it was removed while the cage was being made)"),
        "{}",
        r.explain()
    );
    assert!(im.w.containers_of(&c).is_empty());
    assert!(!im.w.record_path(&c).exists());
}

/// An image needs no program of its own to be a cage: the first process
/// is the tool's own init, never `sleep` from the image's PATH (which
/// an image without one used to be refused for). An image of one text file
/// makes a cage that starts and runs.
#[test]
fn an_image_without_sleep_makes_a_cage() {
    let im = Images::new();
    let image = format!("localhost/shrooms-it-nosleep-{}:1", unique());
    let ctx = im.w.dir("nosleep");
    fs::write(ctx.join("hello.txt"), "hello\n").unwrap();
    fs::write(
        ctx.join("Containerfile"),
        "FROM scratch\nCOPY hello.txt /hello.txt\n",
    )
    .unwrap();
    im.extra.borrow_mut().push(image.clone());
    let out =
        im.w.podman(&["build", "-q", "-t", &image, &ctx.to_string_lossy()]);
    assert!(out.status.success(), "{}", show_output(&out));

    let name = im.w.session("nosleep");
    let dir = im.project("p");
    im.w.run(&["cage", "create", &name, "--dir", &dir, "--image", &image])
        .ok();
    im.w.run(&["cage", "start", &name]).ok();
    let container = im.w.container(&name);
    assert_eq!(im.w.container_state(&container).as_deref(), Some("running"));
    let top = im.w.podman(&["top", &container, "pid", "args"]);
    let text = String::from_utf8_lossy(&top.stdout);
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["1", &format!("/.shrooms-init-{container}")]),
        "{}",
        show_output(&top)
    );
    im.w.run(&["cage", "stop", &name]).ok();
}

/// `image status --json` while a build runs, after it,
/// and after a failed one; `doctor` says the same.
#[test]
fn image_status_during_and_after_builds_and_doctor_agrees() {
    let im = Images::new();
    // The machine's image is the workbench of this world's repository
    // (`write_config` names the test image: written here instead).
    fs::write(
        &im.w.config,
        format!(
            "images_repo = \"{}\"\nagent_port = {}\nallow_root = true\n",
            im.repo, im.w.agent_port
        ),
    )
    .unwrap();
    let doctor_image = |w: &World| {
        let r = w.run(&["doctor"]);
        r.stdout()
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("image"))
            .unwrap_or_else(|| panic!("no image line:\n{}", r.explain()))
            .to_string()
    };
    let e = im.entry("workbench");
    assert_eq!(e["machine"], true, "{e:#}");
    assert_eq!(
        (&e["present"], &e["building"]),
        (&Value::Bool(false), &Value::Bool(false))
    );
    let d = doctor_image(&im.w);
    assert!(
        d.starts_with("warn") && d.contains("will be built on first use"),
        "{d}"
    );

    // Long enough to outlast the status and doctor calls below on a busy
    // machine (each asks podman several things): the second build must
    // still find this one running.
    let (cf, text) = im.containerfile("slow", "RUN sleep 10");
    let r = im
        .build(&["--containerfile", &cf.to_string_lossy(), "--json"])
        .ok();
    assert_eq!(
        r.json()["images"][0]["outcome"],
        "started",
        "{}",
        r.explain()
    );
    let e = im.entry("workbench");
    assert_eq!(e["building"], true, "{e:#}");
    // RFC 3339 with an offset.
    let since = e["building_since"].as_str().unwrap_or_default();
    assert!(chrono::DateTime::parse_from_rfc3339(since).is_ok(), "{e:#}");
    assert_eq!(e["present"], false, "{e:#}");
    assert!(e["error"].is_null(), "{e:#}");
    assert!(doctor_image(&im.w).contains("is being built"));
    // A second `image build` meanwhile starts nothing.
    let r = im
        .build(&["--containerfile", &cf.to_string_lossy(), "--json"])
        .ok();
    assert_eq!(
        r.json()["images"][0]["outcome"],
        "building",
        "{}",
        r.explain()
    );

    let e = im.wait_built("workbench", Duration::from_secs(60));
    assert_eq!(
        (&e["present"], &e["current"], &e["building"]),
        (&Value::Bool(true), &Value::Bool(true), &Value::Bool(false)),
        "{e:#}"
    );
    assert!(e["error"].is_null(), "{e:#}");
    assert_eq!(e["label"].as_str(), Some(sha256(&text).as_str()));
    let d = doctor_image(&im.w);
    assert!(d.starts_with("pass") && d.contains("current"), "{d}");

    // A failed build: its error, and the image that was there stays.
    let (bad, _) = im.containerfile("bad", "RUN echo broken >&2; false");
    im.build(&["--containerfile", &bad.to_string_lossy()]).ok();
    let e = im.wait_built("workbench", Duration::from_secs(60));
    let error = e["error"].as_str().unwrap_or_else(|| panic!("{e:#}"));
    assert!(error.contains("false"), "{e:#}");
    assert_eq!(e["present"], true, "{e:#}");
    let log = fs::read_to_string(im.w.state.join("images/workbench.log")).unwrap();
    assert!(log.contains("broken"), "{log}");
}

/// Has a process ended (gone, or a zombie nobody reaped yet)?
fn ended(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// A build whose process is killed midway is not
/// reported as building by the next call, and its podman went with it;
/// the background worker and a `--wait` build alike.
#[test]
fn a_killed_build_is_not_reported_as_building() {
    let im = Images::new();
    // A base of this test's own name, so that buildah's working container
    // left by a killed build is known by name ("<base>-working-container").
    let base_repo = format!("{}-base", im.repo);
    let base = format!("{base_repo}:latest");
    let out = im.w.podman(&["tag", IMAGE, &base]);
    assert!(out.status.success(), "{}", show_output(&out));
    im.extra.borrow_mut().push(base.clone());
    im.working.borrow_mut().push(format!(
        "{}-working-container",
        base_repo.rsplit('/').next().unwrap()
    ));
    let latest = im.name("workbench");
    let text = format!(
        "FROM {base} AS workbench\nRUN echo {} && sleep 4\n",
        im.repo
    );
    let cf = im.w.file("slow", &text).to_string_lossy().into_owned();
    let podman_builds = || {
        cmdlines_containing(&latest)
            .into_iter()
            .filter(|(_, c)| c.contains(" build "))
            .count()
    };

    // In the background: kill the worker.
    im.build(&["--containerfile", &cf]).ok();
    assert_eq!(im.entry("workbench")["building"], true);
    let mut pid = 0;
    wait_until(
        "the worker records its pid",
        Duration::from_secs(10),
        || {
            pid = im.record("workbench")["pid"].as_u64().unwrap_or(0) as u32;
            pid != 0 && podman_builds() > 0
        },
    );
    // SAFETY: kill(2) of the worker alone (not its group): podman must end
    // because its parent did.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    wait_until("the worker ends", Duration::from_secs(10), || ended(pid));
    let e = im.entry("workbench");
    assert_eq!(e["building"], false, "{e:#}");
    assert!(e["building_since"].is_null(), "{e:#}");
    wait_until(
        "podman build ends with its parent",
        Duration::from_secs(15),
        || podman_builds() == 0,
    );
    assert!(im.id(&latest).is_none());

    // In the foreground: kill `image build --wait`.
    let mut child =
        im.w.spawn_env(&["image", "build", "--wait", "--containerfile", &cf], &[]);
    let child_pid = child.id();
    wait_until("the --wait build runs", Duration::from_secs(10), || {
        im.record("workbench")["pid"].as_u64() == Some(child_pid as u64) && podman_builds() > 0
    });
    assert_eq!(im.entry("workbench")["building"], true);
    child.kill().unwrap();
    child.wait().unwrap();
    let e = im.entry("workbench");
    assert_eq!(e["building"], false, "{e:#}");
    wait_until(
        "podman build ends with its parent",
        Duration::from_secs(15),
        || podman_builds() == 0,
    );

    // And the next build is not held up by either.
    let r = im.build(&["--wait", "--containerfile", &cf]).ok();
    assert!(r.stdout().starts_with("built "), "{}", r.explain());
}

/// The desktop image, built from a local Containerfile
/// with the same stage names, gives a cage APPIMAGE_EXTRACT_AND_RUN=1.
#[test]
fn a_desktop_cage_runs_appimages_extracted() {
    let im = Images::new();
    let (cf, text) = im.containerfile("cf", "RUN echo desk > /marker");
    let r = im
        .build(&[
            "desktop",
            "--wait",
            "--containerfile",
            &cf.to_string_lossy(),
        ])
        .ok();
    let desktop = im.name("desktop");
    assert!(
        r.stdout().starts_with(&format!("built {desktop} ")),
        "{}",
        r.explain()
    );
    assert_eq!(im.label(&desktop), Some(sha256(&text)));
    let e = im.entry("desktop");
    assert_eq!(
        (&e["present"], &e["current"]),
        (&Value::Bool(true), &Value::Bool(true))
    );

    let name = im.w.session("desk");
    let dir = im.project("p");
    im.w.create(&name, Path::new(&dir), &["--image", &desktop]);
    assert_eq!(
        im.w.sh(&name, "echo $APPIMAGE_EXTRACT_AND_RUN; cat /marker")
            .ok()
            .stdout(),
        "1\ndesk\n"
    );
}

/// An image of ours whose label is not the hash it should
/// carry is stale: `cage create` starts its build again in the background
/// and makes the cage from the old one meanwhile ("The old image serves
/// until the new one is ready").
#[test]
fn a_stale_image_serves_while_it_is_built_again() {
    let im = Images::new();
    let latest = im.name("workbench");
    // Ours by name, without the label: stale.
    let out = im.w.podman(&["tag", IMAGE, &latest]);
    assert!(out.status.success(), "{}", show_output(&out));
    let e = im.entry("workbench");
    assert_eq!(
        (&e["present"], &e["current"]),
        (&Value::Bool(true), &Value::Bool(false)),
        "{e:#}"
    );

    let name = im.w.session("stale");
    let dir = im.project("p");
    let r = im.w.create(&name, Path::new(&dir), &["--image", &latest]);
    assert!(
        r.stderr().contains(&format!(
            "the image {latest} is older than this shrooms-agent's Containerfile: it is being \
             built again in the background, and this cage is made from the old one"
        )),
        "{}",
        r.explain()
    );
    assert_eq!(im.w.sh(&name, "echo served").ok().stdout(), "served\n");
    let container = im.w.container(&name);
    let out = im.w.podman(&[
        "inspect",
        "--type",
        "container",
        "--format",
        "{{.Image}}",
        &container,
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        im.id(IMAGE).unwrap()
    );
    // The rebuild ran from the embedded Containerfile (which cannot be
    // built here: no registry), and the old image is still there.
    let rec = im.record("workbench");
    assert!(
        rec["building_since"].is_u64() || rec["error"].is_string(),
        "{rec:#}"
    );
    let e = im.wait_built("workbench", Duration::from_secs(60));
    assert_eq!(e["present"], true, "{e:#}");
    assert_eq!(
        e["wanted"].as_str().map(str::len),
        Some(64),
        "compared with the embedded file's hash: {e:#}"
    );
}

/// The machine's image, ours and stale, is built again when serve starts,
/// as the seed's agent does at its start, not only at the next create; a
/// current one is left alone.
#[test]
fn serve_starts_the_rebuild_of_a_stale_image_of_ours() {
    let im = Images::new();
    let latest = im.name("workbench");
    // Ours by name, without the label: stale; and the machine's image.
    let out = im.w.podman(&["tag", IMAGE, &latest]);
    assert!(out.status.success(), "{}", show_output(&out));
    let config = std::fs::read_to_string(&im.w.config).unwrap().replace(
        &format!("image = \"{IMAGE}\""),
        &format!("image = \"{latest}\""),
    );
    std::fs::write(&im.w.config, config).unwrap();
    let serve = im.w.serve(&[], &[]);
    let said = format!(
        "the image {latest} is older than this shrooms-agent's Containerfile: it is being built \
         again in the background"
    );
    let end = Instant::now() + Duration::from_secs(30);
    while !serve.log_text().contains(&said) {
        assert!(
            Instant::now() < end,
            "serve did not start the rebuild:\n{}",
            serve.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // It ran (from the embedded Containerfile, which fails here: the
    // world's mirror is a closed port), and the old image is still there.
    let e = im.wait_built("workbench", Duration::from_secs(60));
    assert_eq!(e["present"], true, "{e:#}");
    assert!(im.record("workbench")["error"].is_string(), "{e:#}");
    drop(serve);
    // The same inputs would fail the same way: the next serve starts no
    // build, and leaves the failure for the next create to report.
    let before = im.record("workbench");
    let serve = im.w.serve(&[], &[]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !serve.log_text().contains("built again"),
        "{}",
        serve.log_text()
    );
    assert_eq!(im.record("workbench"), before);
}

/// `image build --wait --containerfile FILE` on a terminal ([`on_terminal`]).
fn build_on_terminal(w: &World, containerfile: &Path) -> Run {
    on_terminal(
        w,
        &[
            "image",
            "build",
            "--wait",
            "--containerfile",
            &containerfile.to_string_lossy(),
        ],
    )
}

/// Run the binary with its stderr on a terminal of its own (a pty opened
/// here, 100 columns wide) and its stdout on a pipe: the Run's stderr is
/// what was written to the terminal.
fn on_terminal(w: &World, args: &[&str]) -> Run {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    use std::io::Read;
    use std::process::Stdio;
    let master =
        openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("a pty");
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    rustix::termios::tcsetwinsize(
        &master,
        rustix::termios::Winsize {
            ws_row: 24,
            ws_col: 100,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )
    .unwrap();
    let slave = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .expect("the pty's terminal");
    let mut c = w.command(args);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave));
    let child = c.spawn().expect("run shrooms-agent");
    // The terminal is the child's alone now: reading ends (EIO) when the
    // child and what it started have closed it.
    drop(c);
    let reader = thread::spawn(move || {
        let mut master = fs::File::from(master);
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    let out = child.wait_with_output().expect("wait for shrooms-agent");
    let terminal = reader.join().unwrap();
    Run {
        what: format!("(stderr on a terminal) shrooms-agent {}", args.join(" ")),
        out: std::process::Output {
            status: out.status,
            stdout: out.stdout,
            stderr: terminal,
        },
    }
}

/// The number of steps the progress line counts to, read off its first
/// step. Podman 4 runs the Containerfile's FROM, two RUNs and its LABEL (4
/// steps); podman 5's buildah adds the `--label` of the command line as a
/// LABEL step of its own at the end (5).
fn step_count(lines: &[&str], tty: &str) -> usize {
    let m = lines
        .iter()
        .find_map(|l| l.strip_prefix("1/")?.split_once(' ')?.0.parse().ok())
        .unwrap_or_else(|| panic!("no line for step 1/M:\n{tty:?}"));
    assert!(m == 4 || m == 5, "{m} steps:\n{tty:?}");
    m
}

/// `image build --wait` on a terminal shows one line
/// rewritten in place (`\r` and erase-in-line) with the step as `N/M`, its
/// name and the time so far, then a line that stays: built and how long,
/// or failed with the build's last lines and its log. Without a terminal,
/// podman's STEP lines as they come, and nothing rewritten.
#[test]
fn a_build_on_a_terminal_shows_one_progress_line() {
    let im = Images::new();
    let name = im.name("workbench");
    // FROM, RUN echo, this RUN, and the LABEL appended (see step_count), one of
    // which lasts long enough for the line to be drawn again with the time.
    let (cf, _) = im.containerfile("cf-tty", "RUN sleep 2");
    let r = build_on_terminal(&im.w, &cf).ok();
    let tty = r.stderr();
    let steps: Vec<&str> = tty.split("\r\x1b[K").collect();
    let m = step_count(&steps, &tty);
    for (n, what) in [
        (1, "FROM localhost/shrooms-test-busybox"),
        (2, "RUN echo"),
        (3, "RUN sleep 2"),
        (m, "LABEL "),
    ] {
        let step = format!("{n}/{m} {what}");
        assert!(
            steps.iter().any(|s| s.starts_with(&step)),
            "no line for step {step}:\n{tty:?}"
        );
    }
    // The line drawn again during the 2 s step, with the time so far.
    let sleep = format!("3/{m} RUN sleep 2  ");
    let timed = |s: &&str| s.starts_with(&sleep) && s.ends_with(" s");
    assert!(
        steps.iter().filter(|s| timed(s)).count() >= 2,
        "the sleep step was not drawn again with its time:\n{tty:?}"
    );
    let last = steps.last().unwrap();
    assert!(
        last.starts_with(&format!("built {name} in ")) && last.ends_with(" s\r\n"),
        "the line that stays: {last:?}\n{tty:?}"
    );
    // Rewritten in place: the only line ends are the last line's.
    assert_eq!(tty.matches('\n').count(), 1, "{tty:?}");
    assert!(
        !tty.contains("STEP "),
        "podman's own lines are not shown: {tty:?}"
    );
    // No line is wider than the terminal.
    for s in &steps {
        assert!(s.trim_end().chars().count() < 100, "{s:?}");
    }
    assert!(
        r.stdout().contains(&format!("built {name}")),
        "{}",
        r.explain()
    );

    // Failed: the last lines and the log, after the progress line.
    let (bad, _) = im.containerfile("cf-tty-bad", "RUN echo broken-on-purpose >&2; false");
    let r = build_on_terminal(&im.w, &bad).code_is(1);
    let tty = r.stderr();
    let log = im.w.state.join("images/workbench.log");
    let last = tty.rsplit("\r\x1b[K").next().unwrap();
    assert!(
        last.starts_with(&format!("failed to build {name} after "))
            && last.contains(&format!(
                " s, at 3/{m} RUN echo broken-on-purpose >&2; false; its last lines:\r\n"
            )),
        "{tty:?}"
    );
    assert!(last.contains("\r\n  broken-on-purpose\r\n"), "{tty:?}");
    assert!(
        last.contains(&format!("its log: {}\r\n", log.display())),
        "{tty:?}"
    );
    assert!(
        last.contains("shrooms-agent: error: building the workbench image: broken-on-purpose"),
        "the error follows: {tty:?}"
    );

    // Without a terminal: podman's STEP lines, nothing rewritten.
    let (cf2, _) = im.containerfile("cf-pipe", "RUN sleep 1");
    let r = im
        .build(&["--wait", "--containerfile", &cf2.to_string_lossy()])
        .ok();
    let err = r.stderr();
    assert!(!err.contains('\r'), "{err:?}");
    for n in 1..=m {
        assert!(
            err.lines()
                .any(|l| l.starts_with(&format!("STEP {n}/{m}: "))),
            "no STEP {n}/{m} line: {err:?}"
        );
    }
    assert!(!err.contains("built "), "{err:?}");
}

/// A `--wait` on a terminal that waits for a build running in the
/// background (started by `image build` without `--wait`, as `cage
/// create` starts one) follows that build's log: it says it waits, then
/// shows the steps as the build writes them, then the line that stays.
#[test]
fn a_build_waited_for_on_a_terminal_shows_its_steps_from_its_log() {
    let im = Images::new();
    let name = im.name("workbench");
    let (cf, _) = im.containerfile("cf-bg", "RUN sleep 3");
    let cf = cf.to_string_lossy().into_owned();
    let r = im.build(&["--containerfile", &cf]).ok();
    assert!(r.stdout().contains("in the background"), "{}", r.explain());
    let r = build_on_terminal(&im.w, Path::new(&cf)).ok();
    let tty = r.stderr();
    let lines: Vec<&str> = tty.split("\r\x1b[K").collect();
    assert!(
        lines.iter().any(|l| l.starts_with(&format!(
            "waiting for another shrooms-agent's build of {name}  "
        ))),
        "{tty:?}"
    );
    let m = step_count(&lines, &tty);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("3/{m} RUN sleep 3  "))),
        "the step from the background build's log: {tty:?}"
    );
    let last = lines.last().unwrap();
    assert!(last.starts_with(&format!("built {name} in ")), "{tty:?}");
    assert!(
        r.stdout().contains("was built by another shrooms-agent"),
        "{}",
        r.explain()
    );
}
