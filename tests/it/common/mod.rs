//! Test support for the end-to-end tests: each test gets its own folder,
//! home, state, config and agent port, so tests run in parallel without
//! clashing; every container a test's sessions made is removed when the
//! test ends, passed or failed. On failure an assertion prints the command,
//! its stdout and stderr (ripgrep's tests/util.rs habit).
//!
//! These tests need real podman. A missing podman is a failure, not a skip:
//! `scripts/test` installs it and prepares the machine.

#![allow(dead_code)]

use std::cell::RefCell;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

/// The test image, built here from a static busybox (no registry is
/// reachable): a shell, nc, unshare and `sleep`.
pub const IMAGE: &str = "localhost/shrooms-test-busybox:latest";

/// An address on the host's loopback that stands in for "the internet"
/// (scripts/setup-host adds it); containers reach it over every network.
pub const HOST_ADDR: &str = "203.0.113.7";

/// A private address on the host's loopback that stands in for "the LAN"
/// (scripts/setup-host adds it too).
pub const LAN_ADDR: &str = "10.199.77.1";

/// LAN_ADDR written as an IPv4-compatible IPv6 address (::/96, deprecated
/// by RFC 4291), on the host's loopback too (scripts/setup-host): only a
/// rootless cage has an IPv6 route to send it by.
pub const COMPAT_ADDR: &str = "::10.199.77.1";

/// An address of the host on a network of its own whose prefix is not a
/// private one (198.51.100.1/24 on the veth shr-lan0, made by
/// scripts/setup-host): "local" only because it is the machine's own.
pub const LINK_ADDR: &str = "198.51.100.1";
/// An address of a network this machine reaches by a route of its own,
/// with no interface address in it (scripts/setup-host: 192.88.99.0/24 out
/// of shr-lan0 in the main table, local in the local table, so the host
/// answers there).
pub const ROUTED_ADDR: &str = "192.88.99.1";
/// An address of a network this machine reaches by a route in a routing
/// table of its own, as a VPN's (scripts/setup-host: 203.0.113.128/25 out
/// of shr-lan0 in table 51820, which no rule consults, and local in the
/// local table, so the host answers there).
pub const TABLE_ADDR: &str = "203.0.113.129";

/// The binary under test: cargo's build, or the one `SHROOMS_AGENT_TEST_BIN`
/// names (the podman-5 lane runs the suite against the release build).
pub fn bin() -> PathBuf {
    match std::env::var_os("SHROOMS_AGENT_TEST_BIN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_shrooms-agent")),
    }
}

pub fn podman_program() -> &'static str {
    static P: OnceLock<String> = OnceLock::new();
    P.get_or_init(|| {
        for p in ["/usr/bin/podman", "/usr/local/bin/podman"] {
            if Path::new(p).exists() {
                return p.to_string();
            }
        }
        panic!(
            "podman is not installed: run scripts/test, which installs it and prepares the machine"
        )
    })
}

fn containers_conf() -> String {
    std::env::var("CONTAINERS_CONF").unwrap_or_else(|_| {
        panic!("CONTAINERS_CONF is not set: run the tests through scripts/test (it writes the test run's containers.conf)")
    })
}

/// The unprivileged user for rootless tests (made by scripts/setup-host).
pub struct TestUser {
    pub name: String,
    pub uid: u32,
    pub home: PathBuf,
}

pub fn test_user() -> &'static TestUser {
    static U: OnceLock<TestUser> = OnceLock::new();
    U.get_or_init(|| {
        let name = std::env::var("SHROOMS_TEST_USER").unwrap_or_else(|_| "shrooms-test".into());
        let out = Command::new("id").args(["-u", &name]).output().expect("id");
        assert!(
            out.status.success(),
            "the test user {name} does not exist: run scripts/test (scripts/setup-host makes it)"
        );
        let uid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let run = PathBuf::from(format!("/run/user/{uid}"));
        assert!(
            run.exists(),
            "{} is missing: run scripts/setup-host",
            run.display()
        );
        TestUser {
            home: PathBuf::from(format!("/home/{name}")),
            name,
            uid,
        }
    })
}

/// Run podman as root, or as the test user, with the test containers.conf.
pub fn podman(user: Option<&TestUser>, args: &[&str]) -> Output {
    as_user(user, podman_program(), args, &[])
}

/// curl's status code for a request, run as `user` (None: root).
pub fn curl_status(user: Option<&TestUser>, args: &[&str]) -> String {
    let mut all = vec![
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "20",
    ];
    all.extend_from_slice(args);
    let header;
    if user.is_none()
        && !args
            .iter()
            .any(|a| a.to_ascii_lowercase().starts_with("authorization:"))
        && let Some(t) = args.iter().find_map(|a| port_of(a)).and_then(owner_token)
    {
        header = format!("Authorization: Bearer {t}");
        all.extend_from_slice(&["-H", &header]);
    }
    let out = as_user(user, "curl", &all, &[]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run a program as root or as the test user, with a small clean environment.
pub fn as_user(
    user: Option<&TestUser>,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut c = command_as(user, program, args, env);
    c.stdin(Stdio::null());
    c.output().expect("run")
}

pub fn command_as(
    user: Option<&TestUser>,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let conf = containers_conf();
    let base_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    let mut c = match user {
        None => {
            let mut c = Command::new(program);
            c.env_clear();
            c.env("PATH", base_path).env("HOME", "/root");
            c
        }
        Some(u) => {
            // runuser -u keeps our environment unless told; `env -i` makes
            // it the user's own small one.
            let mut c = Command::new("runuser");
            c.env_clear();
            // With the environment cleared, the program is looked up in the
            // child's PATH; without one that is only /bin:/usr/bin, and
            // runuser lives in /usr/sbin.
            c.env("PATH", base_path);
            c.args(["-u", &u.name, "--", "env", "-i"]);
            c.arg(format!("PATH={base_path}"));
            c.arg(format!("HOME={}", u.home.display()));
            c.arg(format!("XDG_RUNTIME_DIR=/run/user/{}", u.uid));
            c.arg(format!("USER={}", u.name));
            c.arg(format!("CONTAINERS_CONF={conf}"));
            for (k, v) in env {
                c.arg(format!("{k}={v}"));
            }
            c.arg(program);
            c.args(args);
            c.current_dir("/tmp");
            return c;
        }
    };
    c.env("CONTAINERS_CONF", conf);
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(args);
    c.current_dir("/tmp");
    c
}

/// Make sure the test image exists for root or the test user (built once
/// per test process, in under two seconds).
pub fn ensure_image(user: Option<&TestUser>) {
    static ROOT: OnceLock<()> = OnceLock::new();
    static USER: OnceLock<()> = OnceLock::new();
    let cell = if user.is_some() { &USER } else { &ROOT };
    cell.get_or_init(|| build_test_image(user, &[]));
}

/// Build the test image in a podman storage (the default one, or the one
/// `env` names), unless it is there.
pub fn build_test_image(user: Option<&TestUser>, env: &[(&str, String)]) {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let podman = |args: &[&str]| as_user(user, podman_program(), args, &env);
    {
        if podman(&["image", "exists", IMAGE]).status.success() {
            return;
        }
        let ctx = std::env::temp_dir().join(format!(
            "shrooms-it-image-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        fs::create_dir_all(&ctx).unwrap();
        fs::set_permissions(&ctx, fs::Permissions::from_mode(0o755)).unwrap();
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("busybox-static is not installed: run scripts/test");
        fs::copy(busybox, ctx.join("busybox")).unwrap();
        fs::set_permissions(ctx.join("busybox"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(
            ctx.join("Containerfile"),
            "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nCMD [\"sleep\", \"infinity\"]\n",
        )
        .unwrap();
        let c = ctx.to_string_lossy().into_owned();
        let out = podman(&["build", "-q", "-t", IMAGE, &c]);
        assert!(
            out.status.success(),
            "building the test image failed:\n{}",
            show_output(&out)
        );
        let _ = fs::remove_dir_all(&ctx);
    }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// `chown -R uid:uid top`, links not followed, sound beside the processes
/// of the world's sessions: what goes away during the walk (a killed turn's
/// files, a listener's pid file, a socket) is passed over, where `chown
/// -R` would fail the whole walk. Any other failure fails the test, with
/// the path.
pub fn chown_tree(top: &Path, uid: u32) {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let mut todo = vec![top.to_path_buf()];
    while let Some(p) = todo.pop() {
        match std::os::unix::fs::lchown(&p, Some(uid), Some(uid)) {
            Ok(()) => {}
            Err(e) if gone(&e) => continue,
            Err(e) => panic!("chown {}: {e}", p.display()),
        }
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => continue,
            Err(e) if gone(&e) => continue,
            Err(e) => panic!("stat {}: {e}", p.display()),
        }
        let entries = match fs::read_dir(&p) {
            Ok(d) => d,
            Err(e) if gone(&e) => continue,
            Err(e) => panic!("reading {}: {e}", p.display()),
        };
        for entry in entries {
            match entry {
                Ok(entry) => todo.push(entry.path()),
                Err(e) if gone(&e) => {}
                Err(e) => panic!("reading {}: {e}", p.display()),
            }
        }
    }
}

/// A test's own world: folder, home, state, config, agent port.
pub struct World {
    pub root: PathBuf,
    pub home: PathBuf,
    pub state: PathBuf,
    pub config: PathBuf,
    pub agent_port: u16,
    pub user: Option<&'static TestUser>,
    sessions: RefCell<Vec<String>>,
    extra_env: RefCell<Vec<(String, String)>>,
    /// A podman storage of the world's own (`World::alone`): the
    /// CONTAINERS_STORAGE_CONF every podman call of the world gets.
    storage_conf: Option<PathBuf>,
    /// podman calls the world's Drop makes once its containers are gone
    /// (`World::podman_on_drop`), last registered first.
    on_drop: RefCell<Vec<Vec<String>>>,
    /// The storage is another world's (`World::beside`): that world
    /// empties and removes it, not this one.
    borrowed_storage: bool,
    /// A rootless podman runtime folder of the world's own
    /// (`World::rootless_alone`): its podman's own pause process and
    /// namespaces.
    runtime_dir: Option<PathBuf>,
}

impl World {
    /// As root (CI runs as root), with podman's bridge network.
    pub fn new() -> World {
        Self::make(None)
    }

    /// As root, with a podman storage of its own, so that `cage ls` and
    /// `cage prune` see this world's containers only: in root's shared
    /// storage, every other test's cage (and any left by earlier runs on
    /// this machine) would be a leftover to them.
    pub fn alone() -> World {
        let mut w = Self::make(None);
        let storage = w.root.join("storage");
        let conf = w.root.join("storage.conf");
        fs::write(
            &conf,
            format!(
                "[storage]\ndriver = \"overlay\"\ngraphroot = \"{}/graph\"\nrunroot = \"{}/run\"\n",
                storage.display(),
                storage.display()
            ),
        )
        .unwrap();
        w.set_env("CONTAINERS_STORAGE_CONF", &conf.to_string_lossy());
        w.storage_conf = Some(conf);
        build_test_image(None, w.podman_env().as_slice());
        w
    }

    /// Another world of the same user on the same podman storage, with a
    /// home, config and state folder of its own: what a second state
    /// folder of one user (a shell and a systemd unit with different
    /// `SHROOMS_AGENT_STATE_DIR`) sees. Drop it before `self`.
    pub fn beside(&self) -> World {
        let mut w = Self::make(self.user);
        for (k, v) in self.extra_env.borrow().iter() {
            if k == "CONTAINERS_STORAGE_CONF" || k == "XDG_DATA_HOME" {
                w.set_env(k, v);
            }
        }
        w.storage_conf = self.storage_conf.clone();
        w.borrowed_storage = true;
        w
    }

    /// The environment of this world's podman calls.
    fn podman_env(&self) -> Vec<(&str, String)> {
        let mut env: Vec<(&str, String)> = self
            .storage_conf
            .iter()
            .map(|c| ("CONTAINERS_STORAGE_CONF", c.to_string_lossy().into_owned()))
            .collect();
        if let Some(r) = &self.runtime_dir {
            env.push(("XDG_RUNTIME_DIR", r.to_string_lossy().into_owned()));
            let data = self.root.join("data");
            env.push(("XDG_DATA_HOME", data.to_string_lossy().into_owned()));
        }
        env
    }

    /// As the test user, with a podman storage and runtime folder of its
    /// own: its rootless podman makes its own pause process, with its own
    /// mount namespace, at its first call, so it sees the mounts the test
    /// made before (the machine's mounts are private: the user's usual
    /// podman, running since earlier, sees none made after it started).
    /// Its image is built by `build_own_image`, after those mounts.
    pub fn rootless_alone() -> World {
        let u = test_user();
        let mut w = Self::make(Some(u));
        // Rootless podman keeps its storage under $XDG_DATA_HOME and its
        // run folder and pause process's pid under $XDG_RUNTIME_DIR (it
        // takes no graphroot from a storage.conf).
        let (run, data) = (w.root.join("run"), w.root.join("data"));
        fs::create_dir_all(&run).unwrap();
        fs::create_dir_all(&data).unwrap();
        fs::set_permissions(&run, fs::Permissions::from_mode(0o700)).unwrap();
        w.set_env("XDG_RUNTIME_DIR", &run.to_string_lossy());
        w.set_env("XDG_DATA_HOME", &data.to_string_lossy());
        w.runtime_dir = Some(run);
        w.chown_all();
        w
    }

    /// The test image in the world's own storage (`World::alone`,
    /// `World::rootless_alone`).
    pub fn build_own_image(&self) {
        build_test_image(self.user, self.podman_env().as_slice());
    }

    /// As the unprivileged test user, with rootless podman. Limits cannot
    /// be enforced rootless on cgroups v1, so its config says so.
    pub fn rootless() -> World {
        let u = test_user();
        let w = Self::make(Some(u));
        // Rootless podman keeps its images and containers under
        // $XDG_DATA_HOME, else $HOME/.local/share; the world's HOME is its
        // own, so point the binary's podman at the user's real storage (the
        // one `World::podman` and the cleanup see).
        let data = u.home.join(".local/share");
        w.set_env("XDG_DATA_HOME", &data.to_string_lossy());
        w
    }

    fn make(user: Option<&'static TestUser>) -> World {
        podman_program();
        ensure_image(user);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let root = std::env::temp_dir().join(format!("shrooms-it-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let home = root.join("home");
        let state = root.join("state");
        fs::create_dir_all(&home).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        let w = World {
            config: root.join("config.toml"),
            agent_port: free_port(),
            root,
            home,
            state,
            user,
            sessions: RefCell::new(Vec::new()),
            extra_env: RefCell::new(Vec::new()),
            storage_conf: None,
            on_drop: RefCell::new(Vec::new()),
            borrowed_storage: false,
            runtime_dir: None,
        };
        w.write_config("");
        w.chown_all();
        w
    }

    /// Write the config: the test image, this test's agent port, and `extra`.
    pub fn write_config(&self, extra: &str) {
        let mut text = format!("image = \"{IMAGE}\"\nagent_port = {}\n", self.agent_port);
        if self.user.is_some() {
            text.push_str("unenforced_limits = \"warn\"\n");
        } else {
            // The tests run as root, with rootful podman: an opt-in.
            text.push_str("allow_root = true\n");
        }
        // No test makes the workbench's base from a real mirror by chance (a
        // build of our embedded file, started by a create): this one is a
        // closed port on loopback, so such a build fails in seconds.
        if !extra.contains("base_mirror") {
            text.push_str("base_mirror = \"http://127.0.0.1:9/debian\"\n");
        }
        text.push_str(extra);
        text.push('\n');
        fs::write(&self.config, text).unwrap();
        self.chown_all();
    }

    /// A folder in this world (made, owned by the world's user).
    pub fn dir(&self, rel: &str) -> PathBuf {
        let p = self.root.join(rel);
        fs::create_dir_all(&p).unwrap();
        self.chown_all();
        p
    }

    /// The row of `cage ls --json` for a session, if it lists it.
    pub fn ls_row(&self, session: &str) -> Option<serde_json::Value> {
        let ls = self.run(&["cage", "ls", "--json"]).ok().json();
        ls["sessions"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == session)
            .cloned()
    }

    /// A folder in the world's home (made with its parents).
    pub fn dir_in_home(&self, rel: &str) -> PathBuf {
        let p = self.home.join(rel);
        fs::create_dir_all(&p).unwrap();
        self.chown_all();
        p
    }

    /// Write a file in this world.
    pub fn file(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        self.chown_all();
        p
    }

    /// Give everything under root to the test user (rootless worlds).
    pub fn chown_all(&self) {
        if let Some(u) = self.user {
            chown_tree(&self.root, u.uid);
        }
    }

    /// A unique session name with this base, remembered for cleanup.
    pub fn session(&self, base: &str) -> String {
        let name = format!(
            "{base}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        self.sessions.borrow_mut().push(name.clone());
        name
    }

    /// Set an extra environment variable for every later command.
    pub fn set_env(&self, k: &str, v: &str) {
        self.extra_env.borrow_mut().push((k.into(), v.into()));
    }

    /// The binary as a Command, as this world's user, with this world's
    /// HOME, config and state.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_env(args, &[])
    }

    pub fn command_env(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        self.command_of(&bin(), args, env)
    }

    /// Another shrooms-agent program (a copy of the binary, installed
    /// elsewhere) as a Command, as `command_env` makes it.
    pub fn command_of(&self, program: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
        let home = self.home.to_string_lossy().into_owned();
        let config = self.config.to_string_lossy().into_owned();
        let state = self.state.to_string_lossy().into_owned();
        let extra = self.extra_env.borrow();
        let mut all: Vec<(&str, &str)> = vec![
            ("HOME", &home),
            ("SHROOMS_AGENT_CONFIG", &config),
            ("SHROOMS_AGENT_STATE_DIR", &state),
        ];
        for (k, v) in extra.iter() {
            all.push((k, v));
        }
        all.extend_from_slice(env);
        let mut c = command_as(self.user, &program.to_string_lossy(), args, &all);
        if self.user.is_none() {
            c.env("HOME", &home);
        }
        c
    }

    /// Run the binary and return its output (stdin closed).
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[])
    }

    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut c = self.command_env(args, env);
        c.stdin(Stdio::null());
        let out = c.output().expect("run shrooms-agent");
        Run {
            what: format!("shrooms-agent {}", args.join(" ")),
            out,
        }
    }

    /// Run the binary on a terminal of its own (a pty that util-linux's
    /// `script` opens), with `input` typed into it.
    pub fn run_on_terminal(&self, args: &[&str], input: &str) -> Run {
        let mut line = shell_word(&bin().to_string_lossy());
        for a in args {
            line.push(' ');
            line.push_str(&shell_word(a));
        }
        let mut c = self.command_env(args, &[]);
        // The same environment and user, with `script` as the program.
        let program = c.get_program().to_string_lossy().into_owned();
        let mut all: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        if self.user.is_some() {
            // runuser -u USER -- env -i K=V... BIN ARGS: BIN goes, script comes.
            let at = all.len() - args.len() - 1;
            all.truncate(at);
            all.extend(["script".into(), "-qec".into(), line, "/dev/null".into()]);
            c = Command::new(program);
            c.env_clear()
                .env(
                    "PATH",
                    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                )
                .args(&all)
                .current_dir("/tmp");
        } else {
            let envs: Vec<(std::ffi::OsString, std::ffi::OsString)> = c
                .get_envs()
                .filter_map(|(k, v)| Some((k.to_os_string(), v?.to_os_string())))
                .collect();
            c = Command::new("script");
            c.env_clear()
                .envs(envs)
                .args(["-qec", &line, "/dev/null"])
                .current_dir("/tmp");
        }
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn script");
        {
            let mut stdin = child.stdin.take().unwrap();
            // The pty keeps what is typed early until the program reads.
            let _ = stdin.write_all(input.as_bytes());
        }
        Run {
            what: format!("(on a terminal) shrooms-agent {}", args.join(" ")),
            out: child.wait_with_output().expect("wait for script"),
        }
    }

    /// `cage create NAME --dir DIR` that must succeed.
    pub fn create(&self, name: &str, dir: &Path, extra: &[&str]) -> Run {
        let d = dir.to_string_lossy().into_owned();
        let mut args = vec!["cage", "create", name, "--dir", &d];
        args.extend_from_slice(extra);
        self.run(&args).ok()
    }

    /// `cage exec NAME -- sh -c SCRIPT`.
    pub fn sh(&self, name: &str, script: &str) -> Run {
        self.run(&["cage", "exec", name, "--", "sh", "-c", script])
    }

    /// The same, with more variables in the command's environment.
    pub fn sh_env(&self, name: &str, script: &str, env: &[(&str, &str)]) -> Run {
        self.run_env(&["cage", "exec", name, "--", "sh", "-c", script], env)
    }

    /// podman as this world's user.
    pub fn podman(&self, args: &[&str]) -> Output {
        let env = self.podman_env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        as_user(self.user, podman_program(), args, &env)
    }

    /// Have the world's Drop run this podman call (as the world's user),
    /// after it removed the world's containers: for what a test makes
    /// besides sessions (a volume, an image), so that a failing test leaves
    /// nothing that fails the next run. Drop runs on a panic too. Register
    /// before making the thing; a call about something not there is
    /// harmless.
    pub fn podman_on_drop(&self, args: &[&str]) {
        self.on_drop
            .borrow_mut()
            .push(args.iter().map(|a| a.to_string()).collect());
    }

    /// The containers labelled with a session name.
    pub fn containers_of(&self, session: &str) -> Vec<String> {
        let label = format!("label=xyz.vpavlin.shrooms.session={session}");
        let out = self.podman(&["ps", "-a", "--filter", &label, "--format", "{{.Names}}"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .filter(|l| !l.is_empty())
            .collect()
    }

    /// The session record, as JSON.
    pub fn record(&self, session: &str) -> serde_json::Value {
        let text = fs::read_to_string(self.state.join("sessions").join(format!("{session}.json")))
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// The copy of the binary this world's cages run as their tools (the
    /// state folder's `tools/`), when there is exactly one.
    pub fn tools_program(&self) -> PathBuf {
        let found: Vec<PathBuf> = fs::read_dir(self.state.join("tools"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("shrooms-agent-"))
            })
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        found[0].clone()
    }

    pub fn container(&self, session: &str) -> String {
        self.record(session)["cage"]["container"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for s in self.sessions.borrow().iter() {
            for c in self.containers_of(s) {
                let _ = self.podman(&["rm", "-f", "-t", "0", &c]);
            }
        }
        for args in self.on_drop.borrow().iter().rev() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let _ = self.podman(&args);
        }
        if (self.storage_conf.is_some() || self.runtime_dir.is_some()) && !self.borrowed_storage {
            // The world's own storage: everything in it goes, then its
            // overlay mount, so that the folder can be removed.
            let _ = self.podman(&["rm", "-a", "-f", "-t", "0"]);
            let _ = self.podman(&["rmi", "-a", "-f"]);
            let graph = self.root.join("storage/graph/overlay");
            let _ = Command::new("umount").arg("-l").arg(&graph).status();
        }
        // Its own rootless podman's pause process, which this world
        // started: its namespaces go with it.
        if let Some(run) = &self.runtime_dir {
            let pid = fs::read_to_string(run.join("libpod/tmp/pause.pid"))
                .ok()
                .and_then(|t| t.trim().parse::<i32>().ok());
            if let Some(pid) = pid.filter(|p| *p > 1) {
                // SAFETY: kill(2) on the pid its own pause.pid names.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// A word for `sh -c`, in single quotes.
pub fn shell_word(w: &str) -> String {
    format!("'{}'", w.replace('\'', "'\\''"))
}

/// A finished command, with helpers that explain themselves on failure.
pub struct Run {
    pub what: String,
    pub out: Output,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    /// Require exit 0.
    pub fn ok(self) -> Run {
        self.code_is(0)
    }
    pub fn code_is(self, code: i32) -> Run {
        assert_eq!(self.code(), code, "{}", self.explain());
        self
    }
    pub fn explain(&self) -> String {
        format!(
            "command: {}\nexit: {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.what,
            self.out.status.code(),
            self.stdout(),
            self.stderr()
        )
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout())
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.explain()))
    }
}

pub fn show_output(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A port nobody listens on right now, for a test to listen on later:
/// below the kernel's ephemeral ports (`ip_local_port_range`, ip(7)) and
/// handed out once per test process, so that meanwhile no other test's
/// listener on port 0 or outgoing connection is given it (one taken from
/// the ephemeral range could be).
pub fn free_port() -> u16 {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let ephemeral = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<usize>().ok())
        .unwrap_or(32768);
    let span = 8000.min(ephemeral.saturating_sub(1024));
    assert!(
        span > 0,
        "the ephemeral ports start at {ephemeral}: no room below them"
    );
    let first = ephemeral - span;
    let start = std::process::id() as usize % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let port = (first + (start + n) % span) as u16;
        if TcpListener::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port below the ephemeral ports ({ephemeral})");
}

/// A TCP listener on every address of the host, answering "hello" to each
/// connection until the test ends.
pub struct Listener {
    pub port: u16,
}

impl Listener {
    pub fn on(port: u16) -> Listener {
        let l = TcpListener::bind(("0.0.0.0", port)).unwrap_or_else(|e| panic!("bind {port}: {e}"));
        thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                let _ = s.write_all(b"hello\n");
            }
        });
        Listener { port }
    }
    pub fn any() -> Listener {
        Self::on(free_port())
    }
}

/// Does a TCP connection from the host itself succeed?
pub fn host_connects(addr: &str, port: u16) -> bool {
    match TcpStream::connect_timeout(
        &format!("{addr}:{port}").parse().unwrap(),
        Duration::from_secs(2),
    ) {
        Ok(mut s) => {
            let mut buf = [0u8; 6];
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            s.read(&mut buf).is_ok()
        }
        Err(_) => false,
    }
}

/// The shell snippet that tries a TCP connection from inside a container
/// (busybox nc has no -z: connect with stdin closed; exit 0 = connected).
pub fn nc_probe(addr: &str, port: u16) -> String {
    format!(
        "nc -w 3 {addr} {port} </dev/null >/dev/null 2>&1 && echo CONNECTED-{port} || echo REFUSED-{port}"
    )
}

// ---- helpers for the rootful cage tests (tests/it/cage.rs) ----

/// Processes whose command line contains `needle`: (pid, command line with
/// NULs shown as spaces). Reads every /proc/*/cmdline; processes that end
/// while being read are skipped.
pub fn cmdlines_containing(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(bytes) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes).replace('\0', " ");
        if text.contains(needle) {
            found.push((pid, text));
        }
    }
    found
}

/// How many processes' command lines could be read (to show a scan saw something).
pub fn cmdline_count() -> usize {
    fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|s| s.parse::<u32>().is_ok())
                })
                .filter(|e| fs::read(e.path().join("cmdline")).is_ok_and(|b| !b.is_empty()))
                .count()
        })
        .unwrap_or(0)
}

/// Wait until a path exists (true) or the time is up (false).
pub fn wait_for_path(p: &Path, timeout: Duration) -> bool {
    let end = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < end {
        if p.exists() {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
    }
    p.exists()
}

/// The permission bits of a path (without following a final link).
pub fn mode_of(p: &Path) -> u32 {
    fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Every container of this podman carrying the session label: (container
/// name, the label's value, state).
pub fn labelled_containers(user: Option<&TestUser>) -> Vec<(String, String, String)> {
    let out = podman(
        user,
        &[
            "ps",
            "-a",
            "--filter",
            "label=xyz.vpavlin.shrooms.session",
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "podman ps: {}", show_output(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let list: Vec<serde_json::Value> = if text.trim().is_empty() || text.trim() == "null" {
        Vec::new()
    } else {
        serde_json::from_str(&text).unwrap()
    };
    list.iter()
        .map(|c| {
            (
                c["Names"][0].as_str().unwrap_or("").to_string(),
                c["Labels"]["xyz.vpavlin.shrooms.session"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                c["State"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

impl World {
    /// podman's state of a container ("created", "running", "exited"), or
    /// None when there is no such container.
    pub fn container_state(&self, container: &str) -> Option<String> {
        let out = self.podman(&[
            "inspect",
            "--type",
            "container",
            "--format",
            "{{.State.Status}}",
            container,
        ]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Does the container exist?
    pub fn container_exists(&self, container: &str) -> bool {
        self.podman(&["container", "exists", container])
            .status
            .success()
    }

    /// The record file of a session.
    pub fn record_path(&self, session: &str) -> PathBuf {
        self.state.join("sessions").join(format!("{session}.json"))
    }

    /// The session records in this world's state (file names without `.json`).
    pub fn record_names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.state.join("sessions"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()?
                            .strip_suffix(".json")
                            .map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Start the binary with stdout and stderr piped, for a command that
    /// must run while the test looks at something.
    pub fn spawn_env(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
        let mut c = self.command_env(args, env);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().expect("spawn shrooms-agent")
    }
}

impl World {
    /// The binary as a Command of its own, as this world's user but not
    /// through `runuser` (rootless: uid and gid set in the child), with the
    /// world's environment: the child is the shrooms-agent process itself,
    /// for tests that signal it or give it a terminal of theirs.
    pub fn direct_command(&self, args: &[&str]) -> Command {
        use std::os::unix::process::CommandExt;
        let Some(u) = self.user else {
            return self.command(args);
        };
        let mut c = Command::new(bin());
        c.env_clear();
        c.env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("XDG_RUNTIME_DIR", format!("/run/user/{}", u.uid))
        .env("USER", &u.name)
        .env("CONTAINERS_CONF", containers_conf())
        .env("HOME", &self.home)
        .env("SHROOMS_AGENT_CONFIG", &self.config)
        .env("SHROOMS_AGENT_STATE_DIR", &self.state);
        for (k, v) in self.extra_env.borrow().iter() {
            c.env(k, v);
        }
        // chown_all gives the world to uid:uid; the test user's group is its own.
        c.uid(u.uid).gid(u.uid).args(args).current_dir("/tmp");
        c
    }
}

/// Wait for a spawned command and return it as a `Run`.
pub fn finish(what: &str, child: std::process::Child) -> Run {
    Run {
        what: what.to_string(),
        out: child.wait_with_output().expect("wait"),
    }
}

/// A `cage exec` that holds its session until the test lets it go: its
/// command says it started (a file in `dir`, the project) and then waits
/// for a release file, at most two minutes. A fixed `sleep` in its place
/// holds the session for as long as the machine happens to be quick.
pub struct Holding {
    child: Option<std::process::Child>,
    release: PathBuf,
}

/// The first words of a holding exec's command, as `ps -o args` shows
/// them in the cage.
pub const HOLDING_ARGS: &str = "sh -c touch ";

impl World {
    /// Start a `cage exec` of `name` that holds it (see [`Holding`]), and
    /// wait until its command runs.
    pub fn hold(&self, name: &str, dir: &Path) -> Holding {
        // The project is mounted at its canonical path.
        let dir = fs::canonicalize(dir).unwrap();
        let (started, release) = (dir.join("holding-started"), dir.join("holding-release"));
        let _ = fs::remove_file(&started);
        let _ = fs::remove_file(&release);
        let script = format!(
            "touch {}; i=0; while [ ! -e {} ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; \
             echo HELD-DONE",
            started.display(),
            release.display()
        );
        let mut child = self.spawn_env(&["cage", "exec", name, "--", "sh", "-c", &script], &[]);
        let end = std::time::Instant::now() + Duration::from_secs(60);
        while !started.exists() {
            if child.try_wait().unwrap().is_some() || std::time::Instant::now() > end {
                let _ = fs::write(&release, "");
                let run = finish("the holding cage exec", child);
                panic!("the holding exec did not start:\n{}", run.explain());
            }
            thread::sleep(Duration::from_millis(50));
        }
        Holding {
            child: Some(child),
            release,
        }
    }
}

impl Holding {
    /// Let the exec end, and wait for it.
    pub fn release(mut self) -> Run {
        let _ = fs::write(&self.release, "");
        finish("the holding cage exec", self.child.take().unwrap())
    }
}

impl Drop for Holding {
    /// A test that fails while holding lets go too (its exec would hold
    /// the session for two minutes more).
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = fs::write(&self.release, "");
            let _ = child.wait();
        }
    }
}

/// Wait until `f` holds, or fail saying `what`.
/// The machine's uptime in seconds: the clock a cage's lines can carry
/// too (/proc/uptime is not per container).
pub fn uptime() -> f64 {
    fs::read_to_string("/proc/uptime")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Run `c` to its end, as `Command::output`, past the moments when the
/// program cannot be started because a file of it was just written:
/// execve(2) fails with ETXTBSY while any process holds it open for
/// writing, and a child that another test's thread forked while this one
/// wrote the file holds the descriptor until its own exec (the window is
/// short; Go's os/exec meets the same race, golang/go#22315).
pub fn output_of(c: &mut std::process::Command) -> std::process::Output {
    let mut tries = 0;
    loop {
        match c.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r.unwrap(),
        }
    }
}

pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + timeout;
    while !f() {
        assert!(
            std::time::Instant::now() < end,
            "{what}: not within {timeout:?}"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// Is this run the podman-5 lane (scripts/test-podman5)?
pub fn podman5_lane() -> bool {
    std::env::var_os("SHROOMS_PODMAN5_LANE").is_some()
}

/// The network a rootless cage gets here: pasta where podman has it (the
/// podman-5 lane), slirp4netns on Debian 12's podman 4.3.
pub fn rootless_network() -> &'static str {
    if podman5_lane() {
        "pasta"
    } else {
        "slirp4netns"
    }
}

// ---- `serve` (tests/it/serve.rs) ----

/// A running `shrooms-agent serve` of a world, on a free loopback port; its
/// log (stderr) in a file of the world. Stopped with SIGTERM when dropped
/// (drop it before its world).
pub struct Serve {
    pub port: u16,
    pub url: String,
    pub log: PathBuf,
    /// The token it was given (root's serves: see [`World::serve`]).
    pub token: Option<String>,
    /// Its `--token-file`, when the harness made it.
    pub token_file: Option<PathBuf>,
    child: Option<std::process::Child>,
}

/// The tokens of root's serves the harness started, by port: root's serve
/// answers TCP only with its token, and root's requests in these tests
/// (`http`, `raw`, `curl_status` as root) are its owner's, so they carry it
/// unless they bring an Authorization of their own.
static SERVE_TOKENS: std::sync::Mutex<Vec<(u16, String)>> = std::sync::Mutex::new(Vec::new());

/// The token root's requests to `port` carry, if the harness gave that
/// serve one.
pub fn owner_token(port: u16) -> Option<String> {
    let t = SERVE_TOKENS.lock().unwrap_or_else(|e| e.into_inner());
    t.iter()
        .rev()
        .find(|(p, _)| *p == port)
        .map(|(_, t)| t.clone())
}

/// The port of an `http://host:port/...` URL.
fn port_of(url: &str) -> Option<u16> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split('/').next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

impl World {
    /// Start `serve --listen 127.0.0.1:<free port>` with `args` and `env`,
    /// and wait until it accepts connections. Root's serve answers TCP
    /// only with a token: unless `args` name a `--token-file`, a root
    /// world's serve gets one, which root's requests of this harness carry
    /// ([`owner_token`]); [`World::serve_without_token`] gives none.
    pub fn serve(&self, args: &[&str], env: &[(&str, &str)]) -> Serve {
        self.serve_at(free_port(), args, env)
    }

    /// This machine's serve on the agent port, as the cages' sockets reach
    /// it: root's has a token, which the config gives its own machine's
    /// `[machines]` entry (the socket sends it). `extra` is the rest of the
    /// config; the machine is named `name`.
    pub fn serve_for_cages(&self, name: &str, extra: &str) -> Serve {
        let port = self.agent_port;
        if self.user.is_some() {
            self.write_config(&format!("machine_name = \"{name}\"\n{extra}"));
            return self.serve_at(port, &[], &[]);
        }
        let t = format!("owner-{}-{port}", std::process::id());
        let f = self.file(&format!("serve-token-{port}"), &format!("{t}\n"));
        fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
        self.write_config(&format!(
            "machine_name = \"{name}\"\n{extra}\n[machines]\n{name} = {{ url = \"http://127.0.0.1:{port}\", token_file = \"{}\" }}\n",
            f.display()
        ));
        let file = f.to_string_lossy().into_owned();
        let mut s = self.serve_at(port, &["--token-file", &file], &[]);
        SERVE_TOKENS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((port, t.clone()));
        s.token = Some(t);
        s.token_file = Some(f);
        s
    }

    /// `serve` as started with no token at all, root's too.
    pub fn serve_without_token(&self, args: &[&str], env: &[(&str, &str)]) -> Serve {
        self.start_serve("127.0.0.1", free_port(), args, env, false)
    }

    /// The same, on a port chosen before (one another world's config names).
    pub fn serve_at(&self, port: u16, args: &[&str], env: &[(&str, &str)]) -> Serve {
        self.serve_listening("127.0.0.1", port, args, env)
    }

    /// The same, listening on `host` (`0.0.0.0`, say: then it needs a
    /// `--token-file` in `args`); its `url` is still loopback's.
    pub fn serve_listening(
        &self,
        host: &str,
        port: u16,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Serve {
        self.start_serve(host, port, args, env, true)
    }

    fn start_serve(
        &self,
        host: &str,
        port: u16,
        args: &[&str],
        env: &[(&str, &str)],
        token_for_root: bool,
    ) -> Serve {
        let listen = format!("{host}:{port}");
        let mut all = vec!["serve", "--listen", &listen];
        all.extend_from_slice(args);
        let (mut token, mut token_file) = (None, None);
        let file_arg;
        if token_for_root && self.user.is_none() && !args.contains(&"--token-file") {
            let t = format!("owner-{}-{port}", std::process::id());
            let f = self.file(&format!("serve-token-{port}"), &format!("{t}\n"));
            fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
            file_arg = f.to_string_lossy().into_owned();
            all.extend_from_slice(&["--token-file", &file_arg]);
            SERVE_TOKENS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((port, t.clone()));
            token = Some(t);
            token_file = Some(f);
        }
        let log = self.root.join(format!("serve-{port}.log"));
        let out = fs::File::create(&log).unwrap();
        let mut c = self.command_env(&all, env);
        c.stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        let child = c.spawn().expect("spawn shrooms-agent serve");
        let mut s = Serve {
            port,
            url: format!("http://127.0.0.1:{port}"),
            log,
            token,
            token_file,
            child: Some(child),
        };
        let end = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return s;
            }
            if let Some(status) = s.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("serve ended with {status}:\n{}", s.log_text());
            }
            assert!(
                std::time::Instant::now() < end,
                "serve did not listen within 30 s:\n{}",
                s.log_text()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Serve {
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("serve was stopped").id()
    }

    /// Is it still running?
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// SIGTERM, and its exit status (within `timeout`, else SIGKILL and a panic).
    pub fn stop(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("serve was stopped already");
        // SAFETY: kill(2) on the pid of a child we have not reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let end = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if std::time::Instant::now() >= end {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "serve did not end within {timeout:?} of SIGTERM:\n{}",
                    self.log_text()
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: as in `stop`.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            for _ in 0..300 {
                if child.try_wait().ok().flatten().is_some() {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An HTTP answer, for assertions that explain themselves.
#[derive(Debug)]
pub struct Reply {
    pub what: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:#?}"))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// Require this status.
    pub fn is(self, status: u16) -> Reply {
        assert_eq!(self.status, status, "{self:#?}");
        self
    }
    /// The `error` of an error body.
    pub fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error in {self:#?}"))
            .to_string()
    }
}

/// A request with a real HTTP client (ureq); any status is an answer.
pub fn http(method: &str, url: &str, body: Option<&str>, headers: &[(&str, &str)]) -> Reply {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into();
    let mut req = ureq::http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        && let Some(t) = port_of(url).and_then(owner_token)
    {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let result = match body {
        Some(b) => agent.run(req.body(b.to_string()).unwrap()),
        None => agent.run(req.body(()).unwrap()),
    };
    let mut resp = result.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_string()
        .unwrap_or_default();
    Reply {
        what: format!("{method} {url}"),
        status,
        headers,
        body,
    }
}

pub fn get(url: &str) -> Reply {
    http("GET", url, None, &[])
}

pub fn post(url: &str, body: &str) -> Reply {
    http("POST", url, Some(body), &[])
}

/// Send raw bytes on a fresh connection and read the answer until it closes.
pub fn raw(port: u16, bytes: &[u8], timeout: Duration) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    let _ = s.write_all(&with_owner_token(port, bytes));
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The Authorization header line root's raw requests to `port` carry
/// (empty when that serve has no harness-made token).
pub fn owner_auth(port: u16) -> String {
    owner_token(port).map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"))
}

/// A proxy on a loopback port of its own that puts the owner's token of
/// `port`'s serve into every request on its way there: for a browser,
/// which has no way to send it. Its port.
pub fn owner_proxy(port: u16) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mine = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for client in l.incoming().flatten() {
            thread::spawn(move || {
                let mut client = client;
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match client.read(&mut b) {
                        Ok(1) => head.push(b[0]),
                        _ => return,
                    }
                }
                let Ok(mut serve) = TcpStream::connect(("127.0.0.1", port)) else {
                    return;
                };
                if serve.write_all(&with_owner_token(port, &head)).is_err() {
                    return;
                }
                let (mut c2, mut s2) = (client.try_clone().unwrap(), serve.try_clone().unwrap());
                thread::spawn(move || {
                    let _ = std::io::copy(&mut c2, &mut s2);
                });
                let _ = std::io::copy(&mut serve, &mut client);
            });
        }
    });
    mine
}

/// A raw request with the owner's token of that port's serve put after
/// its request line, unless it has an Authorization already.
pub fn with_owner_token(port: u16, bytes: &[u8]) -> Vec<u8> {
    let has = String::from_utf8_lossy(bytes)
        .to_ascii_lowercase()
        .contains("\r\nauthorization:");
    match (
        owner_token(port),
        bytes.windows(2).position(|w| w == b"\r\n"),
    ) {
        (Some(t), Some(at)) if !has => {
            let mut out = bytes[..at + 2].to_vec();
            out.extend_from_slice(format!("Authorization: Bearer {t}\r\n").as_bytes());
            out.extend_from_slice(&bytes[at + 2..]);
            out
        }
        _ => bytes.to_vec(),
    }
}

/// Claude Code's folder name for a project, written out again here from its
/// rule (every character but an ASCII letter or digit becomes `-`), so the
/// tests do not just repeat the code under test.
pub fn claude_folder(dir: &Path) -> String {
    dir.to_str()
        .unwrap()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Read what a server writes on a connection until it closes it (or the
/// timeout passes, or it resets the connection).
pub fn read_until_closed(s: &TcpStream, timeout: Duration) -> String {
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut out = Vec::new();
    let mut r = s;
    let _ = r.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Claude Code from npm and the Debian image it runs in, as
/// scripts/test-harnesses prepared them (scripts/test exports where). The
/// podman-5 lane leaves the tests that use them out by name
/// (scripts/test-podman5): they are about the harness, not podman.
pub fn real_claude() -> (String, String) {
    let get = |n: &str| {
        std::env::var(n).unwrap_or_else(|_| {
            panic!("{n} is not set: run the tests through scripts/test (scripts/test-harnesses)")
        })
    };
    (get("SHROOMS_TEST_CLAUDE"), get("SHROOMS_TEST_DEBIAN_IMAGE"))
}

/// The real Codex CLI from npm (its launcher, `bin/codex`, as a user's
/// PATH has it) and the Debian image, which scripts/test-harnesses
/// prepared.
pub fn real_codex() -> (String, String) {
    let get = |n: &str| {
        std::env::var(n).unwrap_or_else(|_| {
            panic!("{n} is not set: run the tests through scripts/test (scripts/test-harnesses)")
        })
    };
    (get("SHROOMS_TEST_CODEX"), get("SHROOMS_TEST_DEBIAN_IMAGE"))
}

/// The real opencode from npm (`bin/opencode`, its native program) and
/// the Debian image, which scripts/test-harnesses prepared.
pub fn real_opencode() -> (String, String) {
    let get = |n: &str| {
        std::env::var(n).unwrap_or_else(|_| {
            panic!("{n} is not set: run the tests through scripts/test (scripts/test-harnesses)")
        })
    };
    (
        get("SHROOMS_TEST_OPENCODE"),
        get("SHROOMS_TEST_DEBIAN_IMAGE"),
    )
}

/// The Debian image with the real pi from npm in it (and a node it runs
/// on), which scripts/test-harnesses prepared: a caged pi runs the image's.
pub fn real_pi_image() -> String {
    std::env::var("SHROOMS_TEST_PI_IMAGE").unwrap_or_else(|_| {
        panic!("SHROOMS_TEST_PI_IMAGE is not set: run the tests through scripts/test (scripts/test-harnesses)")
    })
}
