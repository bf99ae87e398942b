//! The decisions of `cage create`, `start` (the part of `exec` before
//! the command), `move`, `rename`, `limits`, `rm`, `prune` and `ls`,
//! unit-tested with a recording fake podman (`podman::fake`) and a state
//! folder and home in a temporary folder: no root, no podman. Each test
//! asserts what the operation decided (its result or the kind of its
//! error) and the exact podman calls it made, compared as argument
//! vectors. The expected calls are all in `calls` below: when an operation
//! changes what it asks podman, that is the one place to update.

use std::path::PathBuf;

mod faults;

use super::Context;
use crate::error::{Kind, Warning};
use crate::host::podman::fake::{Answer, FakePodman};
use crate::host::{Host, Version};
use crate::settings::{Env, Settings};
use crate::state::session::{Record, sample_cage};

/// Warnings in their words, as the faces show them.
fn words(w: &[Warning]) -> Vec<String> {
    w.iter().map(ToString::to_string).collect()
}

/// The podman calls each operation makes today, one function per case.
mod calls {
    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    pub const OUR_IMAGE: &str = "localhost/shrooms-workbench:latest";

    pub fn image_inspect(image: &str) -> Vec<String> {
        v(&["image", "inspect", "--format", "json", "--", image])
    }

    pub fn image_exists(image: &str) -> Vec<String> {
        v(&["image", "exists", "--", image])
    }

    pub fn inspect_container(c: &str) -> Vec<String> {
        v(&[
            "inspect",
            "--type",
            "container",
            "--format",
            "json",
            "--",
            c,
        ])
    }

    pub fn ps() -> Vec<String> {
        v(&[
            "ps",
            "-a",
            "--filter",
            "label=xyz.vpavlin.shrooms.session",
            "--format",
            "json",
        ])
    }

    /// An ordinary cage: the image is looked at, then the container made
    /// (`create_argv`, golden-tested in `podman::argv`).
    pub fn create_ordinary(create_argv: &[String]) -> Vec<Vec<String>> {
        vec![image_inspect(OUR_IMAGE), create_argv.to_vec()]
    }

    /// An image named by the request that is not there: its inspect fails
    /// and `image exists` says it is absent.
    pub fn create_refused_no_image(image: &str) -> Vec<Vec<String>> {
        vec![image_inspect(image), image_exists(image)]
    }

    /// A shared volume that is not ours: the image and the volume are
    /// looked at before the refusal.
    pub fn create_refused_volume() -> Vec<Vec<String>> {
        vec![
            image_inspect(OUR_IMAGE),
            v(&[
                "volume",
                "inspect",
                "--format",
                "json",
                "--",
                "shrooms-shared",
            ]),
        ]
    }

    /// A pi session with an image not ours, the first time: the image is
    /// looked at, then asked whether it has pi (a container of it, run and
    /// removed), then the container made, unless it has none.
    pub fn create_pi_looked(
        image: &str,
        id: &str,
        create_argv: Option<&[String]>,
    ) -> Vec<Vec<String>> {
        let mut calls = vec![
            image_inspect(image),
            crate::host::podman::argv::look_for_pi(id),
        ];
        calls.extend(create_argv.map(<[String]>::to_vec));
        calls
    }

    /// ... and the next time: the answer is kept, nothing is run.
    pub fn create_pi_known(image: &str, create_argv: Option<&[String]>) -> Vec<Vec<String>> {
        let mut calls = vec![image_inspect(image)];
        calls.extend(create_argv.map(<[String]>::to_vec));
        calls
    }

    pub fn move_in(create_argv: &[String]) -> Vec<Vec<String>> {
        vec![image_inspect(OUR_IMAGE), create_argv.to_vec()]
    }

    /// Out of a stopped cage: is it running (no), then it goes.
    pub fn move_out_stopped(c: &str) -> Vec<Vec<String>> {
        vec![inspect_container(c), v(&["rm", "-f", "--ignore", "--", c])]
    }

    /// Out of a running idle cage: what runs in it is asked too.
    pub fn move_out_running(c: &str) -> Vec<Vec<String>> {
        vec![
            inspect_container(c),
            v(&["top", "--", c, "args"]),
            v(&["rm", "-f", "--ignore", "--", c]),
        ]
    }

    /// A rename of a stopped cage: is it running (no), the new container
    /// made from the old one's image, then the old one removed.
    pub fn rename_stopped(old: &str, create_argv: &[String]) -> Vec<Vec<String>> {
        vec![
            inspect_container(old),
            image_inspect("img"),
            create_argv.to_vec(),
            v(&["rm", "-f", "--ignore", "--", old]),
        ]
    }

    /// ... of a running idle one: what runs in it is asked, the new cage
    /// planned (a refusal then stops nothing), and it is stopped first.
    pub fn rename_running(old: &str, create_argv: &[String]) -> Vec<Vec<String>> {
        vec![
            inspect_container(old),
            v(&["top", "--", old, "args"]),
            image_inspect("img"),
            v(&["stop", "--", old]),
            create_argv.to_vec(),
            v(&["rm", "-f", "--ignore", "--", old]),
        ]
    }

    /// ... whose new container podman fails to make: the half-made one is
    /// taken back, and the old one is left.
    pub fn rename_failed(old: &str, new: &str, create_argv: &[String]) -> Vec<Vec<String>> {
        vec![
            inspect_container(old),
            image_inspect("img"),
            create_argv.to_vec(),
            v(&["rm", "-f", "--ignore", "--", new]),
            // Is the image still there? (A create's failure is told by
            // exit statuses, never by podman's words.)
            v(&["image", "exists", "--", "img"]),
        ]
    }

    /// podman 4.3: a running cage is updated now (no --pids-limit there).
    pub fn limits_running(c: &str) -> Vec<Vec<String>> {
        vec![
            inspect_container(c),
            v(&["update", "--memory", "1g", "--cpus", "2", "--", c]),
        ]
    }

    /// podman 4.3: a stopped cage is only looked at; its limits are set at
    /// its next start.
    pub fn limits_stopped(c: &str) -> Vec<Vec<String>> {
        vec![inspect_container(c)]
    }

    /// `cage limits NAME` without flags: one inspect, nothing changed.
    pub fn limits_shown(c: &str) -> Vec<Vec<String>> {
        vec![inspect_container(c)]
    }

    pub fn prune_dry_run() -> Vec<Vec<String>> {
        vec![ps()]
    }

    pub fn prune(leftover: &str) -> Vec<Vec<String>> {
        vec![ps(), v(&["rm", "-f", "--ignore", "--", leftover])]
    }

    /// One `podman ps`, whatever the number of cages.
    pub fn ls() -> Vec<Vec<String>> {
        vec![ps()]
    }

    pub const NSENTER: &str = "/usr/bin/nsenter";
    pub const NFT: &str = "/usr/sbin/nft";
    pub const STAT: &str = "/usr/bin/stat";
    pub const NETNS: &str = "/run/user/1000/netns/netns-0a1b";

    /// The rules, loaded from outside through `podman unshare` (rootless),
    /// then the check of where they went (`Host::set_rules`).
    pub fn rules(pid: i64) -> Vec<Vec<String>> {
        vec![
            v(&[
                "unshare",
                NSENTER,
                &format!("--net={NETNS}"),
                "--",
                NFT,
                "-f",
                "-",
            ]),
            v(&[
                "unshare",
                STAT,
                "-L",
                "-c",
                "%d %i",
                "--",
                NETNS,
                &format!("/proc/{pid}/ns/net"),
                &format!("/proc/{pid}/exe"),
                "/usr/libexec/podman/catatonit",
            ]),
        ]
    }

    /// Start a cage, stopped or running alike: `podman start` (a running
    /// container stays as it is), one inspect for its first process, the
    /// rules. The same opens `cage exec` and `cage run`, which then add the
    /// model gateway's listener (rootless: `podman unshare nsenter`), the
    /// `podman exec` and the `podman stop` at the end (pinned end to end,
    /// tests/it/calls.rs, as they need this program itself).
    pub fn start(c: &str) -> Vec<Vec<String>> {
        let mut calls = vec![v(&["start", "--", c]), inspect_container(c)];
        calls.extend(rules(42));
        calls
    }

    /// A cage of an earlier shrooms-agent (its record says so): stopped,
    /// whatever its state, and refused.
    pub fn start_refused_old(c: &str) -> Vec<Vec<String>> {
        vec![v(&["stop", "--", c])]
    }

    /// `cage rm`: the container goes, in one call.
    pub fn rm(c: &str) -> Vec<Vec<String>> {
        vec![v(&["rm", "-f", "--ignore", "--", c])]
    }
}

/// A machine in a temporary folder: a home with a project, a state folder,
/// and a Context whose host is rootless podman 4.3.1 on cgroups v2 with the
/// controllers delegated (limits enforced, network slirp4netns), its podman
/// a fake that answers as `podman` says.
struct World {
    root: PathBuf,
    project: PathBuf,
    fake: FakePodman,
    ctx: Context,
}

impl World {
    fn new(name: &str, podman: impl FnOnce(FakePodman) -> FakePodman) -> World {
        let root = tempfile::Builder::new()
            .prefix(&format!("shrooms-decisions-{name}-"))
            .tempdir()
            .unwrap()
            .keep();
        let root = std::fs::canonicalize(&root).unwrap();
        let home = root.join("home");
        let project = home.join("project");
        std::fs::create_dir_all(&project).unwrap();
        let env: Env = [
            ("HOME".to_string(), home.display().to_string()),
            // No harness program to be found.
            (
                "PATH".to_string(),
                root.join("no-programs").display().to_string(),
            ),
        ]
        .into();
        let settings = Settings::from_text(
            None,
            &root.join("config/config.toml"),
            root.join("state"),
            home,
            &env,
        )
        .unwrap();
        let fake = podman(FakePodman::new(&root));
        let host = Host {
            podman: fake.podman(),
            version: Version(4, 3, 1),
            rootless: true,
            cgroup_v2: true,
            controllers: ["cpu", "memory", "pids"].map(String::from).to_vec(),
            seccomp_profile: None,
            pasta: None,
            nft: None,
            nsenter: None,
            stat: None,
            runtime: "runc".into(),
            volume_path: None,
            images_file: None,
            cpus: 4,
        };
        let ctx = Context::new(settings, env, Vec::new()).with_host(host);
        World {
            root,
            project,
            fake,
            ctx,
        }
    }

    /// The same machine with a podman that answers otherwise (answers that
    /// depend on the world: its state folder's id, its records).
    fn podman(mut self, podman: impl FnOnce(FakePodman) -> FakePodman) -> World {
        let _ = std::fs::remove_dir_all(self.root.join("fake-podman"));
        self.fake = podman(FakePodman::new(&self.root));
        let mut host = self.ctx.host().unwrap().clone();
        host.podman = self.fake.podman();
        self.ctx = Context::shared(
            self.ctx.settings.clone(),
            self.ctx.env.clone(),
            self.ctx.self_paths.clone(),
        )
        .with_host(host);
        self
    }

    fn record(&self, name: &str, container: Option<&str>) -> Record {
        let record = Record {
            version: crate::state::session::RECORD_VERSION,
            name: name.into(),
            dir: self.project.clone(),
            harness: crate::cage::harness::Harness::Claude,
            created: 1,
            cage: container.map(sample_cage),
            auto_approve: false,
            starred: false,
            files: Default::default(),
            tokens: Default::default(),
            accept_caged: None,
            last_image: None,
            after_turn: None,
        };
        self.ctx.store.ensure().unwrap();
        self.ctx.store.save(&record).unwrap();
        record
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// podman's inspect of our image, current (its label is this build's hash).
fn our_image() -> String {
    serde_json::json!([{
        "Id": "0123abcd",
        "Config": {
            "Env": ["PATH=/usr/bin:/bin"],
            "Labels": {crate::images::workbench::LABEL: crate::images::workbench::embedded_hash()},
        },
    }])
    .to_string()
}

fn container_state(running: bool) -> String {
    serde_json::json!([{"State": {"Status": if running {"running"} else {"exited"},
        "Running": running, "Pid": if running {42} else {0}}}])
    .to_string()
}

fn ps_entry(container: &str, session: &str, state_id: Option<&str>) -> serde_json::Value {
    let mut labels = serde_json::json!({crate::cage::spec::SESSION_LABEL: session});
    if let Some(id) = state_id {
        labels[crate::cage::spec::STATE_LABEL] = id.into();
    }
    serde_json::json!({"Id": "id", "Names": [container], "Image": "img",
        "State": "exited", "Labels": labels})
}

fn create_request(w: &World, name: &str) -> super::create::CreateRequest {
    super::create::CreateRequest {
        name: name.into(),
        dir: w.project.clone(),
        harness: crate::cage::harness::Harness::Claude,
        choice: Default::default(),
        dry_run: false,
        auto_approve: false,
        dir_from_cwd: false,
    }
}

fn argv_of(created: &super::create::Created) -> Vec<String> {
    created.argv[1..].to_vec()
}

/// A Codex cage: its folder private with a copy of its config pointed
/// at no gateway yet, mounted read-only; no conversation folder of the
/// machine's; without a codex program, a warning that names it.
#[test]
fn create_of_a_codex_cage() {
    let w = World::new("create-codex", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(&["create"], Answer::out("c0ffee\n"))
    });
    let mut req = create_request(&w, "cx");
    req.harness = crate::cage::harness::Harness::Codex;
    let created = super::create::create(&w.ctx, &req).unwrap();
    assert_eq!(created.warnings, [Warning::NoProgram { program: "codex" }]);
    let codex = w.ctx.settings.codex_dir.clone();
    let copy = w
        .ctx
        .store
        .settings_copy_dir(&created.container)
        .join("config.toml");
    let argv = argv_of(&created).join(" ");
    assert!(
        argv.contains(&format!(
            "type=bind,src={},dst={},ro=true,nosuid,nodev",
            copy.display(),
            codex.join("config.toml").display()
        )),
        "{argv}"
    );
    assert!(!argv.contains("auth.json"), "{argv}");
    let text = std::fs::read_to_string(&copy).unwrap();
    assert!(text.contains("approval_policy = \"never\""), "{text}");
    assert!(!text.contains("model_provider"), "{text}");
}

#[test]
fn create_of_an_ordinary_cage() {
    let w = World::new("create", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(&["create"], Answer::out("c0ffee\n"))
    });
    let created = super::create::create(&w.ctx, &create_request(&w, "web")).unwrap();
    assert!(created.container.starts_with("shrooms-web-"));
    assert_eq!(created.network, "slirp4netns");
    assert_eq!(created.image, calls::OUR_IMAGE);
    assert_eq!(created.warnings, [Warning::NoProgram { program: "claude" }]);
    assert_eq!(
        created.warnings[0].to_string(),
        "no claude program found on PATH: `cage run` will need one \
         (set [harness] claude in the config and make the cage again)"
    );
    let argv = argv_of(&created);
    assert_eq!(argv[0], "create");
    assert_eq!(w.fake.calls(), calls::create_ordinary(&argv));
    let record = w.ctx.store.load("web").unwrap();
    assert_eq!(record.cage.unwrap().create_argv, argv);
}

#[test]
fn a_dry_run_decides_the_same_and_makes_nothing() {
    let w = World::new("dry", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(our_image()))
    });
    let req = super::create::CreateRequest {
        dry_run: true,
        ..create_request(&w, "web")
    };
    let created = super::create::create(&w.ctx, &req).unwrap();
    assert!(created.dry_run);
    assert_eq!(w.fake.calls(), [calls::image_inspect(calls::OUR_IMAGE)]);
    assert!(!w.ctx.settings.state_dir.exists(), "the state was touched");
}

#[test]
fn create_refused_for_a_missing_image_asks_only_about_the_image() {
    let w = World::new("noimage", |f| {
        f.on_prefix(
            &["image", "inspect"],
            Answer::fail(125, "Error: some words"),
        )
        .on_prefix(&["image", "exists"], Answer::fail(1, ""))
    });
    let mut req = create_request(&w, "web");
    req.choice.image = Some("localhost/absent:1".into());
    let e = super::create::create(&w.ctx, &req).unwrap_err();
    assert_eq!(e.kind, Kind::BadInput);
    assert_eq!(
        e.message(),
        "there is no image localhost/absent:1 on this machine for this session's cage"
    );
    assert_eq!(
        w.fake.calls(),
        calls::create_refused_no_image("localhost/absent:1")
    );
    assert!(!w.ctx.store.exists("web"));
    assert!(
        !w.ctx
            .store
            .record_path("web")
            .with_extension("lock")
            .exists(),
        "no lock file is left"
    );
}

/// podman's inspect of an image not ours.
fn their_image() -> String {
    serde_json::json!([{"Id": "feed5678", "Config": {"Env": ["PATH=/usr/bin:/bin"]}}]).to_string()
}

fn pi_request(w: &World, name: &str, dry_run: bool) -> super::create::CreateRequest {
    let mut req = create_request(w, name);
    req.harness = crate::cage::harness::Harness::Pi;
    req.choice.image = Some("localhost/theirs:1".into());
    req.dry_run = dry_run;
    req
}

#[test]
fn a_pi_session_with_an_image_without_pi_is_refused_and_asked_once() {
    let w = World::new("nopi", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(their_image()))
            .on_prefix(&["run"], Answer::out("pi-missing\n"))
    });
    // A dry run looks, says it would be refused, and keeps nothing.
    let dry = super::create::create(&w.ctx, &pi_request(&w, "notes", true)).unwrap();
    let refused = dry
        .refused
        .as_ref()
        .expect("the dry run says it would be refused");
    assert_eq!(refused.kind, Kind::BadInput);
    assert_eq!(
        w.fake.calls(),
        calls::create_pi_looked("localhost/theirs:1", "feed5678", None)
    );
    assert!(!w.ctx.settings.state_dir.exists(), "the state was touched");
    w.fake.clear();

    let e = super::create::create(&w.ctx, &pi_request(&w, "notes", false)).unwrap_err();
    assert_eq!(e.kind, Kind::BadInput);
    assert!(
        e.message().starts_with(
            "the image localhost/theirs:1 has no `pi` program on its PATH, and a pi session's \
             cage runs the image's pi: add pi to the image"
        ),
        "{}",
        e.message()
    );
    assert!(
        e.message().contains("localhost/shrooms-workbench:latest"),
        "{}",
        e.message()
    );
    assert!(
        e.words(crate::error::Face::Terminal)
            .contains("--image IMAGE"),
        "{}",
        e.words(crate::error::Face::Terminal)
    );
    assert_eq!(
        w.fake.calls(),
        calls::create_pi_looked("localhost/theirs:1", "feed5678", None)
    );
    assert!(!w.ctx.store.exists("notes"));
    w.fake.clear();
    // Asked once: the second create runs nothing.
    let e = super::create::create(&w.ctx, &pi_request(&w, "notes", false)).unwrap_err();
    assert_eq!(e.kind, Kind::BadInput);
    assert_eq!(
        w.fake.calls(),
        calls::create_pi_known("localhost/theirs:1", None)
    );
}

#[test]
fn a_pi_session_with_an_image_with_pi_is_made_and_asked_once() {
    let w = World::new("haspi", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(their_image()))
            .on_prefix(&["run"], Answer::out("pi-found\n"))
            .on_prefix(&["create"], Answer::out("c0ffee\n"))
    });
    let created = super::create::create(&w.ctx, &pi_request(&w, "notes", false)).unwrap();
    let argv = argv_of(&created);
    assert_eq!(
        w.fake.calls(),
        calls::create_pi_looked("localhost/theirs:1", "feed5678", Some(&argv))
    );
    assert!(created.warnings.is_empty(), "{:?}", created.warnings);
    w.fake.clear();
    let created = super::create::create(&w.ctx, &pi_request(&w, "notes2", false)).unwrap();
    let argv = argv_of(&created);
    assert_eq!(
        w.fake.calls(),
        calls::create_pi_known("localhost/theirs:1", Some(&argv))
    );
}

#[test]
fn a_pi_session_with_our_image_runs_nothing_to_know() {
    let w = World::new("ourpi", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(&["create"], Answer::out("c0ffee\n"))
    });
    let mut req = create_request(&w, "notes");
    req.harness = crate::cage::harness::Harness::Pi;
    let created = super::create::create(&w.ctx, &req).unwrap();
    assert_eq!(w.fake.calls(), calls::create_ordinary(&argv_of(&created)));
}

#[test]
fn a_failed_look_for_pi_is_a_warning_and_asked_again() {
    let w = World::new("lookfails", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(their_image()))
            .on_prefix(&["run"], Answer::fail(126, "Error: runc: it broke"))
            .on_prefix(&["create"], Answer::out("c0ffee\n"))
    });
    let created = super::create::create(&w.ctx, &pi_request(&w, "notes", false)).unwrap();
    assert_eq!(
        words(&created.warnings),
        [format!(
            "whether the image localhost/theirs:1 has a `pi` program could not be looked at \
             (Error: runc: it broke): `cage run` fails if it has none. Name your pi with \
             `pi = \"/path/to/pi\"` under `[harness]` in {} to use the machine's",
            crate::settings::config_file_words(&w.ctx.settings.config_path)
        )]
    );
    w.fake.clear();
    let created = super::create::create(&w.ctx, &pi_request(&w, "notes2", false)).unwrap();
    assert_eq!(
        w.fake.calls(),
        calls::create_pi_looked("localhost/theirs:1", "feed5678", Some(&argv_of(&created)))
    );
}

#[test]
fn create_refused_for_a_shared_volume_not_ours() {
    let w = World::new("volume", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(
                &["volume", "inspect"],
                Answer::out(r#"[{"Name":"shrooms-shared","Driver":"local","Labels":{}}]"#),
            )
    });
    let mut req = create_request(&w, "web");
    req.choice.shared = true;
    let e = super::create::create(&w.ctx, &req).unwrap_err();
    assert_eq!(e.kind, Kind::BadInput);
    assert!(e.message().contains("did not make it"), "{}", e.message());
    assert_eq!(w.fake.calls(), calls::create_refused_volume());
}

/// The decision alone: from facts stated in the test, no podman at all.
#[test]
fn the_decision_from_facts_refuses_an_untrusted_folder() {
    let w = World::new("decide", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(our_image()))
    });
    let host = w.ctx.host().unwrap();
    let choice = super::make::CageChoice::default();
    let mut facts = super::make::facts(
        &w.ctx,
        host,
        "web",
        &w.project,
        crate::cage::harness::Harness::Claude,
        &choice,
    )
    .unwrap();
    let plan = super::make::decide(&facts, &choice, &w.ctx.settings, false).unwrap();
    assert_eq!(plan.rebuild, None);
    facts.untrusted = Some(super::sealed::Untrusted {
        path: w.project.clone(),
        dev: 0,
        ino: 0,
        born_ns: None,
        session: "review".into(),
    });
    let e = super::make::decide(&facts, &choice, &w.ctx.settings, false)
        .err()
        .unwrap();
    assert_eq!(e.error.kind, Kind::BadInput);
    assert!(e.build.is_none());
    assert!(
        e.error
            .message()
            .contains("where sealed session review worked"),
        "{}",
        e.error.message()
    );
}

#[test]
fn move_into_a_cage() {
    let w = World::new("movein", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(&["create"], Answer::ok())
    });
    w.record("web", None);
    let moved = super::moves::move_session(
        &w.ctx,
        &super::moves::MoveRequest {
            name: "web".into(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(moved.from, None);
    let cage = w.ctx.store.load("web").unwrap().cage.unwrap();
    assert_eq!(moved.to.as_deref(), Some(cage.container.as_str()));
    assert!(
        moved.what.starts_with("moved into a cage"),
        "{}",
        moved.what
    );
    assert_eq!(w.fake.calls(), calls::move_in(&cage.create_argv));
}

/// A caged session moved without --image keeps the image its cage was
/// made from: the config's image is not looked at (nor built).
#[test]
fn move_without_image_keeps_the_sessions_image() {
    let c = "shrooms-web-0a1b2c";
    let w = World::new("movekeeps", |f| {
        f.on_prefix(&["inspect"], Answer::out(container_state(false)))
            .on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(&["create"], Answer::ok())
            .on_prefix(&["rm"], Answer::ok())
    });
    w.record("web", Some(c));
    let moved = super::moves::move_session(
        &w.ctx,
        &super::moves::MoveRequest {
            name: "web".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let cage = w.ctx.store.load("web").unwrap().cage.unwrap();
    assert_eq!(cage.image, "img");
    assert_eq!(moved.from.as_deref(), Some(c));
    assert_eq!(
        w.fake.calls(),
        vec![
            calls::inspect_container(c),
            calls::image_inspect("img"),
            cage.create_argv.clone(),
            vec!["rm", "-f", "--ignore", "--", c]
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>(),
        ]
    );
}

fn move_out(running: bool) {
    let c = "shrooms-web-0a1b2c";
    let w = World::new(&format!("moveout-{running}"), |f| {
        f.on(
            &[
                "inspect",
                "--type",
                "container",
                "--format",
                "json",
                "--",
                c,
            ],
            Answer::out(container_state(running)),
        )
        .on_prefix(&["top"], Answer::out("COMMAND\nsleep infinity\n"))
        .on_prefix(&["rm"], Answer::ok())
    });
    w.record("web", Some(c));
    let moved = super::moves::move_session(
        &w.ctx,
        &super::moves::MoveRequest {
            name: "web".into(),
            out: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        (moved.from.as_deref(), moved.to, moved.what.as_str()),
        (Some(c), None, "taken out of its cage")
    );
    assert!(moved.warnings.is_empty(), "{:?}", moved.warnings);
    assert!(w.ctx.store.load("web").unwrap().cage.is_none());
    let expected = if running {
        calls::move_out_running(c)
    } else {
        calls::move_out_stopped(c)
    };
    assert_eq!(w.fake.calls(), expected);
}

#[test]
fn move_out_of_a_stopped_cage() {
    move_out(false);
}

#[test]
fn move_out_of_a_running_idle_cage() {
    move_out(true);
}

#[test]
fn move_out_of_a_busy_cage_is_refused_and_removes_nothing() {
    let c = "shrooms-web-0a1b2c";
    let w = World::new("movebusy", |f| {
        f.on_prefix(&["inspect"], Answer::out(container_state(true)))
            .on_prefix(&["top"], Answer::out("COMMAND\nsleep infinity\nclaude\n"))
    });
    w.record("web", Some(c));
    let e = super::moves::move_session(
        &w.ctx,
        &super::moves::MoveRequest {
            name: "web".into(),
            out: true,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.kind, Kind::Busy);
    // What runs in the cage, as data (the first process left out).
    assert_eq!(e.running(), Some(&["claude".to_string()][..]));
    assert_eq!(w.fake.calls()[..], calls::move_out_running(c)[..2]);
    assert!(w.ctx.store.load("web").unwrap().cage.is_some());
}

fn limits(running: bool) -> (super::limits::LimitsChanged, Vec<Vec<String>>) {
    let c = "shrooms-web-0a1b2c";
    let w = World::new(&format!("limits-{running}"), |f| {
        f.on_prefix(&["inspect"], Answer::out(container_state(running)))
            .on_prefix(&["update"], Answer::ok())
    });
    w.record("web", Some(c));
    let changed = super::limits::limits(
        &w.ctx,
        &super::limits::LimitsRequest {
            name: "web".into(),
            asked: crate::settings::LimitsAsked::parse(Some("1g"), None, None).unwrap(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(changed.after.memory.as_str(), "1g");
    let cage = w.ctx.store.load("web").unwrap().cage.unwrap();
    assert_eq!((cage.limits.memory.as_str(), cage.own_limits), ("1g", true));
    (changed, w.fake.calls())
}

#[test]
fn limits_of_a_running_cage() {
    let (changed, made) = limits(true);
    assert_eq!(changed.applied, "now, and again at every start");
    assert_eq!(made, calls::limits_running("shrooms-web-0a1b2c"));
}

#[test]
fn limits_of_a_stopped_cage() {
    let (changed, made) = limits(false);
    assert_eq!(changed.applied, "at its next start");
    assert_eq!(made, calls::limits_stopped("shrooms-web-0a1b2c"));
}

#[test]
fn prune_removes_only_this_state_folders_leftovers() {
    let ours = "shrooms-gone-0a1b2c";
    let theirs = "shrooms-other-0a1b2d";
    let old = "shrooms-old-0a1b2e";
    let kept = "shrooms-web-0a1b2f";
    let w = World::new("prune", |f| f);
    let id = w.ctx.store.state_id().unwrap();
    let ps = serde_json::json!([
        ps_entry(ours, "gone", Some(&id)),
        ps_entry(theirs, "other", Some("another-state-folder-id")),
        ps_entry(old, "old", None),
        ps_entry(kept, "web", Some(&id)),
    ]);
    let w = w.podman(|f| {
        f.on_prefix(&["ps"], Answer::out(ps.to_string()))
            .on_prefix(&["rm"], Answer::ok())
    });
    w.record("web", Some(kept));
    let plan = super::prune::plan(&w.ctx).unwrap();
    assert_eq!(plan.containers, [ours]);
    assert_eq!(plan.made_by_another_state_folder[0].container, theirs);
    assert_eq!(plan.made_before_state_labels[0].container, old);
    assert_eq!(w.fake.calls(), calls::prune_dry_run());
    w.fake.clear();
    let done = super::prune::apply(&w.ctx, &plan).unwrap();
    assert_eq!(done.containers, [ours]);
    assert_eq!(w.fake.calls(), calls::prune(ours));
}

fn ls_of(n: usize) {
    let names: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    let container = |s: &str| format!("shrooms-{s}-0a1b2c");
    let ps: Vec<serde_json::Value> = names
        .iter()
        .map(|s| ps_entry(&container(s), s, None))
        .collect();
    let w = World::new(&format!("ls-{n}"), |f| {
        f.on_prefix(
            &["ps"],
            Answer::out(serde_json::Value::from(ps).to_string()),
        )
    });
    for s in &names {
        w.record(s, Some(&container(s)));
    }
    let listing = super::listing::ls(&w.ctx).unwrap();
    assert_eq!(listing.sessions.len(), n);
    assert!(
        listing
            .sessions
            .iter()
            .all(|r| r.cage.as_ref().is_some_and(|c| c.state == "exited"))
    );
    assert!(listing.leftovers.is_empty());
    assert_eq!(w.fake.calls(), calls::ls());
}

#[test]
fn ls_of_one_cage() {
    ls_of(1);
}

/// A look changes nothing: with a turn's marker left and nobody holding
/// the session (a turn killed with its watcher), `ls` and `show` stop no
/// cage and leave the marker; the faces' `tidy` before them stops it.
#[test]
fn looks_change_nothing_and_tidy_ends_a_dead_turn() {
    let container = "shrooms-dead-0a1b2c";
    let ps = serde_json::Value::from(vec![ps_entry(container, "dead", None)]).to_string();
    let w = World::new("looks", |f| {
        f.on_prefix(&["ps"], Answer::out(ps))
            .on_prefix(&["inspect"], Answer::out(container_state(true)))
            .on_prefix(&["stop"], Answer::out(""))
    });
    w.record("dead", Some(container));
    let marker = w.ctx.store.turn_marker("dead");
    std::fs::write(&marker, "").unwrap();
    let stops = |calls: &[Vec<String>]| calls.iter().filter(|c| c[0] == "stop").count();
    super::listing::ls(&w.ctx).unwrap();
    let _ = super::show::show(&w.ctx, "dead");
    assert_eq!(stops(&w.fake.calls()), 0, "{:?}", w.fake.calls());
    assert!(marker.exists());
    assert!(w.ctx.take_warnings().is_empty());
    super::tidy::everything(&w.ctx);
    assert_eq!(stops(&w.fake.calls()), 1, "{:?}", w.fake.calls());
    assert!(
        !marker.exists(),
        "{:?} {:?}",
        w.fake.calls(),
        w.ctx.take_warnings()
    );
    assert!(
        w.ctx.take_warnings()[0]
            .to_string()
            .starts_with(&format!("stopped {container}")),
        "tidy did not say it stopped the cage"
    );
}

#[test]
fn ls_of_a_hundred_cages_is_still_one_call() {
    ls_of(100);
}

/// Starting a build of our image is a step the plan names, decided from
/// the facts alone: never started by a check, never by a dry run.
#[test]
fn an_image_build_is_a_step_of_the_plan() {
    let w = World::new("build-step", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(our_image()))
    });
    let host = w.ctx.host().unwrap();
    let choice = super::make::CageChoice::default();
    let mut facts = super::make::facts(
        &w.ctx,
        host,
        "web",
        &w.project,
        crate::cage::harness::Harness::Claude,
        &choice,
    )
    .unwrap();
    let settings = &w.ctx.settings;
    let stage = crate::images::workbench::Stage::Workbench;
    // Stale: made from the old one, rebuilt in the background.
    facts.image.status.current = false;
    let plan = super::make::decide(&facts, &choice, settings, false).unwrap();
    // Its warning goes first, where the image is decided.
    assert_eq!(plan.rebuild, Some((stage, 0)), "{:?}", plan.warnings);
    // The plan's first step starts it; what it says goes in that place of
    // the warnings, here and where they follow others (a move's).
    let first = plan.steps().first().map(super::plan::Step::describe);
    assert_eq!(first, Some(format!("rebuild {}", facts.image.name)));
    let rebuilt = || Warning::Rebuilding {
        image: "rebuilt".into(),
    };
    let mut said = plan.warnings.clone();
    plan.say_rebuilt(Some(rebuilt()), &mut said);
    assert_eq!(said.first(), Some(&rebuilt()), "{said:?}");
    let mut moved = plan;
    let (before, after) = (Warning::CommitsGo, Warning::LimitsUnenforced);
    let mut said = vec![before.clone()];
    moved.warnings_put_at(said.len());
    said.extend(moved.warnings.iter().cloned());
    said.push(after.clone());
    moved.say_rebuilt(Some(rebuilt()), &mut said);
    assert_eq!(&said[..2], [before, rebuilt()], "{said:?}");
    assert_eq!(said.last(), Some(&after));
    let current = super::make::decide(
        &super::make::Facts {
            image: super::image::ImageFacts {
                status: crate::images::workbench::ImageStatus {
                    current: true,
                    ..facts.image.status.clone()
                },
                ..facts.image.clone()
            },
            ..facts.clone()
        },
        &choice,
        settings,
        false,
    )
    .unwrap();
    assert!(
        current
            .steps()
            .iter()
            .all(|s| !s.describe().starts_with("rebuild")),
        "a current image is not built again"
    );
    let dry = super::make::decide(&facts, &choice, settings, true).unwrap();
    assert_eq!(dry.rebuild, None);
    assert!(
        dry.warnings[0]
            .to_string()
            .contains("the real command builds it again")
    );
    // Missing, no build running: refused, with the build to start.
    facts.image.status.present = false;
    facts.image.inspect = None;
    let refused = super::make::decide(&facts, &choice, settings, false)
        .err()
        .unwrap();
    assert_eq!(
        (refused.error.kind, refused.build),
        (Kind::NotReady, Some(stage))
    );
    // Its plan starts the build, and fails with what that says.
    let steps = super::make::refusal_steps(refused);
    let described: Vec<_> = steps.iter().map(super::plan::Step::describe).collect();
    assert_eq!(described, ["start build workbench"]);
    // A dry run: the plan all the same, the refusal beside it, no build.
    let dry = super::make::decide(&facts, &choice, settings, true)
        .ok()
        .unwrap();
    assert_eq!(
        (dry.refused.map(|e| e.kind), dry.rebuild),
        (Some(Kind::NotReady), None)
    );
    // Missing while a build runs: wait, start nothing.
    facts.image.status.building = true;
    let refused = super::make::decide(&facts, &choice, settings, false)
        .err()
        .unwrap();
    assert_eq!((refused.error.kind, refused.build), (Kind::NotReady, None));
    let steps = super::make::refusal_steps(refused);
    let described: Vec<_> = steps.iter().map(super::plan::Step::describe).collect();
    assert!(described[0].starts_with("refuse: "), "{described:?}");
    assert_eq!(described.len(), 1);
    // Deciding asked podman nothing more than the facts did.
    assert_eq!(w.fake.calls(), [calls::image_inspect(calls::OUR_IMAGE)]);
}

/// podman's inspect of a running cage made with the machine's init.
fn running_cage(c: &str) -> String {
    let init = crate::host::podman::argv::init_path(c);
    serde_json::json!([{
        "State": {"Status": "running", "Running": true, "Pid": 42},
        "Path": init,
        "Mounts": [{"Type": "bind", "Source": "/usr/libexec/podman/catatonit",
            "Destination": init}],
        "NetworkSettings": {"SandboxKey": calls::NETNS},
    }])
    .to_string()
}

/// A world whose podman starts and inspects a cage, and whose rules load;
/// the session `web` in it, made with the machine's init (`old`: as an
/// earlier shrooms-agent made it).
fn startable(name: &str, old: bool) -> (World, String) {
    let c = "shrooms-web-0a1b2c";
    let w = World::new(name, |f| {
        f.on(&["start", "--", c], Answer::ok())
            .on(&["stop", "--", c], Answer::ok())
            .on_prefix(&["inspect"], Answer::out(running_cage(c)))
            .on_prefix(&["unshare", calls::NSENTER], Answer::ok())
            // The namespace loaded is the first process's; its program is
            // the init.
            .on_prefix(
                &["unshare", calls::STAT],
                Answer::out("4 4026532185\n4 4026532185\n65024 77\n65024 77\n"),
            )
    });
    let mut host = w.ctx.host().unwrap().clone();
    host.nsenter = Some(calls::NSENTER.into());
    host.nft = Some(calls::NFT.into());
    host.stat = Some(calls::STAT.into());
    let mut w = w;
    w.ctx = Context::shared(
        w.ctx.settings.clone(),
        w.ctx.env.clone(),
        w.ctx.self_paths.clone(),
    )
    .with_host(host);
    let mut record = w.record("web", Some(c));
    let cage = record.cage.as_mut().unwrap();
    cage.harness_dir = w.root.join("home/.claude");
    let mut argv: Vec<String> = [
        "create",
        "--memory",
        "4g",
        "--cpus",
        "2",
        "--pids-limit",
        "2048",
    ]
    .map(String::from)
    .to_vec();
    if !old {
        argv.extend([
            "--entrypoint".into(),
            crate::host::podman::argv::init_path(c),
        ]);
    }
    argv.push("img".into());
    cage.create_argv = argv;
    w.ctx.store.save(&record).unwrap();
    (w, c.to_string())
}

/// Stopped or running, starting a cage asks podman the same: `podman
/// start`, one inspect, the rules; no second inspect, no `podman info`.
#[test]
fn start_of_a_cage() {
    let (w, c) = startable("start", false);
    let started = super::start::start(&w.ctx, "web").unwrap();
    assert_eq!(started.container, c);
    assert_eq!(w.fake.calls(), calls::start(&c));
    // The settings copy was made for it (before the start).
    assert!(w.ctx.store.settings_copy_dir(&c).is_dir());
}

/// The record says the cage was made before its first process was the
/// machine's init: it is not started, and podman is asked nothing else.
#[test]
fn start_of_an_old_cage_is_refused_before_podman_starts_it() {
    let (w, c) = startable("start-old", true);
    let e = super::start::start(&w.ctx, "web").unwrap_err();
    assert!(
        e.message().contains("made by an earlier shrooms-agent"),
        "{}",
        e.message()
    );
    assert_eq!(w.fake.calls(), calls::start_refused_old(&c));
}

#[test]
fn rm_of_a_cage() {
    let c = "shrooms-web-0a1b2c";
    let w = World::new("rm", |f| f.on_prefix(&["rm"], Answer::ok()));
    w.record("web", Some(c));
    let removed = super::rm::rm(&w.ctx, "web").unwrap();
    assert_eq!(removed.container.as_deref(), Some(c));
    assert!(!w.ctx.store.exists("web"));
    assert_eq!(w.fake.calls(), calls::rm(c));
}

/// The face that asked is told of each slow step as it begins: the
/// container made, at create; removed, at rm.
#[test]
fn create_and_rm_tell_of_their_slow_steps() {
    use super::Progress as P;
    let w = World::new("progress", |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(&["create"], Answer::out("c0ffee\n"))
            .on_prefix(&["rm"], Answer::ok())
    });
    let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = told.clone();
    w.ctx
        .on_progress(Box::new(move |p| keep.lock().unwrap().push(p.clone())));
    let created = super::create::create(&w.ctx, &create_request(&w, "web")).unwrap();
    let c = created.container.clone();
    assert_eq!(
        *told.lock().unwrap(),
        [P::Making {
            container: c.clone(),
            image: calls::OUR_IMAGE.into()
        }]
    );
    told.lock().unwrap().clear();
    super::rm::rm(&w.ctx, "web").unwrap();
    assert_eq!(*told.lock().unwrap(), [P::Removing { container: c }]);
}

/// A container removed by hand: the start fails, podman says it is not
/// there, and the message offers `cage move`, which keeps the history.
#[test]
fn start_of_a_cage_removed_by_hand_offers_a_move() {
    let (w, c) = startable("start-gone", false);
    let w = w.podman(|f| {
        f.on_prefix(&["start"], Answer::fail(125, "no such container"))
            .on_prefix(&["container", "exists"], Answer::fail(1, ""))
    });
    let e = super::start::start(&w.ctx, "web").unwrap_err();
    assert_eq!(e.kind, Kind::Failed);
    assert!(
        e.message().contains("removed by hand?")
            && e.message().contains("`shrooms-agent cage move web`")
            && e.message().contains("keeps its history"),
        "{}",
        e.message()
    );
    assert_eq!(
        w.fake.calls(),
        vec![
            vec!["start".to_string(), "--".into(), c.clone()],
            vec![
                "container".to_string(),
                "exists".into(),
                "--".into(),
                c.clone()
            ],
        ]
    );
}

/// A project folder moved: the start refuses before asking podman anything
/// and names `cage move NAME --dir NEW`; that move points the session at
/// the new folder, checked as at create, and its new cage mounts it.
#[test]
fn a_moved_project_folder_is_named_and_move_dir_follows_it() {
    let (w, c) = startable("start-moved-dir", false);
    let new = w.root.join("home/renamed");
    std::fs::rename(&w.project, &new).unwrap();
    let e = super::start::start(&w.ctx, "web").unwrap_err();
    assert!(
        e.message().contains("is not there (moved or renamed?)")
            && e.message()
                .contains("`shrooms-agent cage move web --dir NEW`"),
        "{}",
        e.message()
    );
    assert_eq!(w.fake.calls(), Vec::<Vec<String>>::new());
    let w = w.podman(|f| {
        f.on_prefix(&["inspect"], Answer::out(container_state(false)))
            .on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(&["create"], Answer::ok())
            .on_prefix(&["rm"], Answer::ok())
    });
    // Not a folder: refused as create refuses it, nothing asked.
    let e = super::moves::move_session(
        &w.ctx,
        &super::moves::MoveRequest {
            name: "web".into(),
            dir: Some(w.root.join("home/nowhere")),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.kind, Kind::BadInput, "{}", e.message());
    assert!(w.fake.calls().is_empty());
    let moved = super::moves::move_session(
        &w.ctx,
        &super::moves::MoveRequest {
            name: "web".into(),
            dir: Some(new.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(moved.from.as_deref(), Some(c.as_str()));
    assert!(
        moved
            .what
            .ends_with(&format!("its folder is {} now", new.display()))
    );
    let record = w.ctx.store.load("web").unwrap();
    assert_eq!(record.dir, new);
    let argv = record.cage.unwrap().create_argv;
    assert!(
        argv.iter().any(|a| a.contains(&*new.to_string_lossy())),
        "{argv:?}"
    );
    assert_eq!(w.fake.calls().len(), 4);
}

/// `cage limits NAME` without flags shows the limits: the record's, and
/// what podman reports the container has, with one inspect.
#[test]
fn limits_without_flags_shows_configured_and_applied() {
    let c = "shrooms-web-0a1b2c";
    let w = World::new("limits-show", |f| {
        f.on_prefix(
            &["inspect"],
            Answer::out(
                serde_json::json!([{"State": {"Status": "running", "Running": true, "Pid": 42},
                    "HostConfig": {"Memory": 4294967296_i64, "NanoCpus": 0,
                        "CpuQuota": 200000, "CpuPeriod": 100000, "PidsLimit": 2048}}])
                .to_string(),
            ),
        )
    });
    w.record("web", Some(c));
    let shown = super::limits::show(&w.ctx, "web").unwrap();
    assert_eq!(
        shown.configured,
        crate::settings::Limits::of("4g", "2", 2048)
    );
    assert_eq!(
        shown.applied,
        Some(super::limits::Applied {
            memory_bytes: Some(4294967296),
            cpus: Some(2.0),
            pids: Some(2048),
        })
    );
    assert!(!shown.own);
    assert_eq!(w.fake.calls(), calls::limits_shown(c));
    let text = crate::face::output::limits_shown(&shown);
    assert!(
        text.contains("web: configured memory 4g, cpus 2, pids 2048 (the machine's")
            && text.contains("web: applied memory 4 GiB, cpus 2, pids 2048"),
        "{text}"
    );
}

/// A dry run where the real create would be refused (an image that is not
/// there): the argv all the same, the refusal beside it with its kind, the
/// same calls as the real command, nothing made.
#[test]
fn a_dry_run_shows_the_argv_of_a_create_that_would_be_refused() {
    let w = World::new("dry-refused", |f| {
        f.on_prefix(
            &["image", "inspect"],
            Answer::fail(125, "Error: some words"),
        )
        .on_prefix(&["image", "exists"], Answer::fail(1, ""))
    });
    let mut req = create_request(&w, "web");
    req.choice.image = Some("localhost/absent:1".into());
    req.dry_run = true;
    let created = super::create::create(&w.ctx, &req).unwrap();
    let e = created.refused.clone().unwrap();
    assert_eq!(e.kind, Kind::BadInput);
    assert_eq!(
        e.message(),
        "there is no image localhost/absent:1 on this machine for this session's cage"
    );
    assert_eq!(
        serde_json::to_value(&created).unwrap()["would_be_refused"],
        "there is no image localhost/absent:1 on this machine for this session's cage"
    );
    assert!(
        created.argv.iter().any(|a| a == "localhost/absent:1")
            && created.argv.iter().any(|a| a == "create"),
        "{:?}",
        created.argv
    );
    let text = crate::face::output::created(&created);
    assert!(
        text.starts_with(
            "# podman command line (nothing was changed; the real create would be refused: \
             there is no image localhost/absent:1"
        ),
        "{text}"
    );
    assert_eq!(
        w.fake.calls(),
        calls::create_refused_no_image("localhost/absent:1")
    );
    assert!(!w.ctx.settings.state_dir.exists(), "the state was touched");
}

fn rename_request(name: &str, to: &str) -> super::rename::RenameRequest {
    super::rename::RenameRequest {
        name: name.into(),
        to: to.into(),
        by: None,
    }
}

/// What a session keeps under its name, for the checks of a rename: a
/// history line and a received file.
fn with_history_and_a_file(w: &World, name: &str) -> PathBuf {
    w.ctx
        .store
        .append_history(
            name,
            &crate::state::session::HistoryEntry {
                when: 1,
                who: "me".into(),
                what: "created".into(),
            },
        )
        .unwrap();
    let file = w
        .ctx
        .store
        .session_uploads(name)
        .join("drop/from-alpha_a/a.txt");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "hello").unwrap();
    file
}

fn rename_of(running: bool) {
    let c = "shrooms-web-0a1b2c";
    let (w, before) = world_to_rename(running, c);
    let r = super::rename::rename(&w.ctx, &rename_request("web", "site")).unwrap();
    assert_eq!((r.session.as_str(), r.from.as_str()), ("site", "web"));
    assert_eq!(r.stopped, running);
    let after = w.ctx.store.load("site").unwrap();
    let cage = after.cage.clone().unwrap();
    assert!(
        crate::state::session::is_container_name_of(&cage.container, "site"),
        "{}",
        cage.container
    );
    assert_eq!(r.container.as_deref(), Some(cage.container.as_str()));
    assert_eq!(r.old_container.as_deref(), Some(c));
    // What the record kept follows it.
    assert!(after.starred);
    assert_eq!(after.tokens.budget, Some(5000));
    assert_eq!(after.created, before.created);
    assert_files_followed(&w, c, &cage.container);
    let history: Vec<String> = w
        .ctx
        .store
        .history("site")
        .unwrap()
        .into_iter()
        .map(|h| h.what)
        .collect();
    assert_eq!(history[0], "created");
    assert!(history[1].starts_with("renamed from web"), "{history:?}");
    // The new cage mounts the new name's folder.
    let uploads = w.ctx.store.session_uploads("site");
    assert!(
        cage.create_argv
            .iter()
            .any(|a| a.contains(&uploads.display().to_string())),
        "{:?}",
        cage.create_argv
    );
    let expected = if running {
        calls::rename_running(c, &cage.create_argv)
    } else {
        calls::rename_stopped(c, &cage.create_argv)
    };
    assert_eq!(w.fake.calls(), expected);
}

/// A world with the session `web` in the cage `c` (running or not), and
/// what a rename must carry to the new name: a star and a budget in its
/// record, its history and a received file, its cage's private home, its
/// egress log and the file rotated out of it. Returns its record.
fn world_to_rename(running: bool, c: &str) -> (World, Record) {
    let w = World::new(&format!("rename-{running}"), |f| {
        f.on_prefix(&["inspect"], Answer::out(container_state(running)))
            .on_prefix(&["top"], Answer::out("COMMAND\nsleep infinity\n"))
            .on_prefix(&["stop"], Answer::ok())
            .on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(&["create"], Answer::ok())
            .on_prefix(&["rm"], Answer::ok())
    });
    let mut before = w.record("web", Some(c));
    before.starred = true;
    before.tokens.budget = Some(5000);
    w.ctx.store.save(&before).unwrap();
    with_history_and_a_file(&w, "web");
    let home = w.ctx.store.private_home(c);
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("todo.json"), "[]").unwrap();
    let log = w.ctx.store.egress_path("web");
    std::fs::write(&log, "{\"allowed\": true}\n").unwrap();
    std::fs::write(crate::state::session::older(&log), "{\"allowed\": false}\n").unwrap();
    (w, before)
}

/// After a rename of `web` (cage `old`) to `site` (cage `new`): the old
/// name is gone, with its files, and the new one has them.
fn assert_files_followed(w: &World, old: &str, new: &str) {
    assert_eq!(w.ctx.store.load("web").unwrap_err().kind, Kind::NotFound);
    let uploads = w.ctx.store.session_uploads("site");
    assert_eq!(
        std::fs::read_to_string(uploads.join("drop/from-alpha_a/a.txt")).unwrap(),
        "hello"
    );
    assert!(!w.ctx.store.session_uploads("web").exists());
    // Its egress log, and the file rotated out of it.
    let log = w.ctx.store.egress_path("site");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "{\"allowed\": true}\n"
    );
    assert_eq!(
        std::fs::read_to_string(crate::state::session::older(&log)).unwrap(),
        "{\"allowed\": false}\n"
    );
    // The cage's private home is the new cage's; the old cage's folder is gone.
    let moved = w.ctx.store.private_home(new).join("todo.json");
    assert_eq!(std::fs::read_to_string(moved).unwrap(), "[]");
    assert!(!w.ctx.store.cage_dir(old).exists());
    let sessions = w
        .ctx
        .store
        .record_path("web")
        .parent()
        .unwrap()
        .to_path_buf();
    let mut left: Vec<String> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("web"))
        .collect();
    left.sort();
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn rename_of_a_stopped_cage() {
    rename_of(false);
}

#[test]
fn rename_of_a_running_idle_cage_stops_it_first() {
    rename_of(true);
}

/// podman fails to make the new container: every step before it is
/// undone, and the session works under its old name as it did.
#[test]
fn a_rename_that_fails_leaves_the_session_under_its_old_name() {
    let c = "shrooms-web-0a1b2c";
    let w = World::new("renamefails", |f| {
        f.on_prefix(&["inspect"], Answer::out(container_state(false)))
            .on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(
                &["create"],
                Answer::fail(125, "Error: no space left on device"),
            )
            .on_prefix(&["rm"], Answer::ok())
    });
    let before = w.record("web", Some(c));
    let file = with_history_and_a_file(&w, "web");
    let home = w.ctx.store.private_home(c);
    std::fs::create_dir_all(&home).unwrap();
    let e = super::rename::rename(&w.ctx, &rename_request("web", "site")).unwrap_err();
    assert!(e.message().contains("no space left"), "{}", e.message());
    assert_eq!(w.ctx.store.load("web").unwrap(), before);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello");
    assert_eq!(w.ctx.store.history("web").unwrap().len(), 1);
    assert_eq!(w.ctx.store.load("site").unwrap_err().kind, Kind::NotFound);
    assert!(!w.ctx.store.session_uploads("site").exists());
    assert!(!w.ctx.store.history_path("site").exists());
    assert!(home.is_dir());
    let sessions = w
        .ctx
        .store
        .record_path("web")
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(
        std::fs::read_dir(&sessions).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("site")),
        "a file of the new name is left"
    );
    // The new container's name is in the argv podman was given.
    let calls = w.fake.calls();
    let create = calls[2].clone();
    let new = create
        .iter()
        .find(|a| crate::state::session::is_container_name_of(a, "site"))
        .unwrap()
        .clone();
    assert_eq!(calls, calls::rename_failed(c, &new, &create));
    // The old name still works: it renames (or moves) as before.
    let w = w.podman(|f| {
        f.on_prefix(&["inspect"], Answer::out(container_state(false)))
            .on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(&["create"], Answer::ok())
            .on_prefix(&["rm"], Answer::ok())
    });
    super::rename::rename(&w.ctx, &rename_request("web", "site")).unwrap();
    assert!(w.ctx.store.load("site").is_ok());
}

#[test]
fn a_rename_to_a_taken_name_a_path_or_while_busy_is_refused_and_changes_nothing() {
    let c = "shrooms-web-0a1b2c";
    let w = World::new("renamerefused", |f| {
        f.on_prefix(&["inspect"], Answer::out(container_state(true)))
            .on_prefix(&["top"], Answer::out("COMMAND\nsleep infinity\nclaude\n"))
    });
    let before = w.record("web", Some(c));
    let other = w.record("other", None);
    for (to, kind, says) in [
        (
            "other",
            Kind::Exists,
            "there is a session \"other\" already",
        ),
        ("../x", Kind::BadInput, "is not a session name"),
        ("/", Kind::BadInput, "is not a session name"),
        ("a/b", Kind::BadInput, "is not a session name"),
        ("..", Kind::BadInput, "is not a session name"),
        ("web", Kind::BadInput, "named web already"),
    ] {
        let e = super::rename::rename(&w.ctx, &rename_request("web", to)).unwrap_err();
        assert_eq!(e.kind, kind, "{to}: {}", e.message());
        assert!(e.message().contains(says), "{to}: {}", e.message());
    }
    assert_eq!(w.fake.calls(), Vec::<Vec<String>>::new());
    let e = super::rename::rename(&w.ctx, &rename_request("nobody", "x")).unwrap_err();
    assert_eq!(e.kind, Kind::NotFound);
    // Busy: something else runs in its cage.
    let e = super::rename::rename(&w.ctx, &rename_request("web", "site")).unwrap_err();
    assert_eq!(e.kind, Kind::Busy, "{}", e.message());
    assert!(
        e.message().contains("rename it once it is idle"),
        "{}",
        e.message()
    );
    assert_eq!(w.fake.calls(), calls::move_out_running(c)[..2].to_vec());
    assert_eq!(w.ctx.store.load("web").unwrap(), before);
    assert_eq!(w.ctx.store.load("other").unwrap(), other);
    assert!(!w.ctx.store.exists("site"));
    assert!(
        !w.ctx
            .store
            .record_path("site")
            .with_extension("lock")
            .exists()
    );
}

/// A session out of a cage: no podman at all; its received files and its
/// outbox (a sealed session's, kept after it was taken out) follow. A new
/// name whose received files are there already (an earlier session's) is
/// refused first.
#[test]
fn rename_out_of_a_cage_asks_no_podman_and_moves_the_outbox() {
    let w = World::new("renameout", |f| f);
    w.record("web", None);
    let file = with_history_and_a_file(&w, "web");
    let outbox = super::sealed::outbox_dir(&w.ctx.settings.home, "web");
    std::fs::create_dir_all(&outbox).unwrap();
    std::fs::write(outbox.join("findings.md"), "found").unwrap();
    let earlier = w.ctx.store.session_uploads("site");
    std::fs::create_dir_all(&earlier).unwrap();
    let e = super::rename::rename(&w.ctx, &rename_request("web", "site")).unwrap_err();
    assert_eq!(e.kind, Kind::Exists, "{}", e.message());
    assert!(
        e.message().contains(&earlier.display().to_string()),
        "{}",
        e.message()
    );
    assert!(file.exists() && outbox.join("findings.md").exists());
    std::fs::remove_dir(&earlier).unwrap();
    let r = super::rename::rename(&w.ctx, &rename_request("web", "site")).unwrap();
    assert_eq!(
        (r.container, r.old_container, r.stopped),
        (None, None, false)
    );
    assert_eq!(r.what, "renamed from web");
    let moved = super::sealed::outbox_dir(&w.ctx.settings.home, "site");
    assert_eq!(
        std::fs::read_to_string(moved.join("findings.md")).unwrap(),
        "found"
    );
    assert!(!outbox.exists() && !file.exists());
    assert!(w.ctx.store.load("site").unwrap().cage.is_none());
    assert_eq!(w.fake.calls(), Vec::<Vec<String>>::new());
}

/// A build whose look for a cached step met an image removed meanwhile by
/// another podman (buildah's race) is run once more, and once only; a
/// build that failed otherwise is not run again.
#[test]
fn a_build_that_lost_the_cache_race_is_run_once_more() {
    let raced = "Error: checking if cached image exists from a previous build: getting top \
                 layer info: layer not known";
    for (stderr, runs) in [
        (raced, 2),
        ("Error: building at STEP \"RUN false\": exit 1", 1),
    ] {
        let w = World::new("build", |f| {
            f.on_prefix(&["build"], Answer::fail(125, stderr))
        });
        let host = w.ctx.host().unwrap();
        let argv = vec!["build".to_string(), "-f".into(), "-".into()];
        let mut said = Vec::new();
        let (ran, last) =
            super::image::run_build(host, &argv, "FROM scratch\n", "h", &mut None, &mut |l| {
                said.push(l.to_string())
            });
        assert_eq!(ran.ok(), Some(Some(125)), "{stderr}");
        assert_eq!(last, stderr);
        assert_eq!(w.fake.count(), runs, "{stderr}: {said:?}");
    }
}
