//! The CageSpec: everything a cage is made of, as a typed value built from
//! the session's record, the settings and facts gathered beforehand. Building
//! it does no I/O; `podman::argv` turns it into a command line.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cage::harness::Harness;
use crate::error::{Error, Result};
use crate::settings::{Env, Limits};

/// The label every cage carries, with the session's name as its value, for
/// `podman ps --filter` (docs/cages.md, "Using it").
/// The dummy key a cage's harness is given: the gateway replaces it, so it
/// opens nothing anywhere.
pub const DUMMY_KEY: &str = "shrooms-gateway-adds-the-real-key";

pub const SESSION_LABEL: &str = "xyz.vpavlin.shrooms.session";

/// The label that says which state folder made a cage: the folder's
/// `state-id`. `cage prune` removes only containers of its own state
/// folder: the same user's podman serves every state folder of theirs (a
/// shell and a systemd unit can name different ones).
pub const STATE_LABEL: &str = "xyz.vpavlin.shrooms.state";

/// Where the cage's socket to its own agent is mounted (docs/cages.md, "What a
/// cage is given").
pub const PROXY_DIR_IN_CAGE: &str = "/run/shrooms-agent";
pub const PROXY_SOCKET_IN_CAGE: &str = "/run/shrooms-agent/proxy.sock";
/// A `--github` cage's gh configuration and the socket it names, in the
/// proxy folder too (docs/gateway.md, "GitHub"): read-only inside, made by
/// the turn's process.
pub const GH_CONFIG_IN_CAGE: &str = "/run/shrooms-agent/gh";
pub const GITHUB_SOCKET_IN_CAGE: &str = "/run/shrooms-agent/github.sock";
/// The GitHub token a `--github` cage's gh is given: gh refuses to make a
/// request without one, and the gateway replaces it, so it opens nothing.
pub const GITHUB_PLACEHOLDER: &str = "shrooms-gateway-adds-the-github-token";

/// Where a cage's link folder is mounted, read-only, and put last on its
/// PATH (docs/cages.md, "What a cage is given"): a link named for the
/// harness's command (`Harness::command`) to the program the cage runs,
/// so that `claude` typed in `cage exec`'s shell runs what `cage run`
/// does. Outside the home: nothing of it is written into the cage's home.
pub const HARNESS_BIN_IN_CAGE: &str = "/run/shrooms-agent-bin";

/// The label a sealed cage carries (docs/sealed.md, "Sealed cages").
pub const SEALED_LABEL: &str = "xyz.vpavlin.shrooms.sealed";

/// A sealed cage's home, config folder and outbox inside (docs/sealed.md, "Sealed cages").
pub const SEALED_HOME: &str = "/root";
pub const SEALED_CONFIG_DIR: &str = "/root/.claude";
pub const OUTBOX_IN_CAGE: &str = "/outbox";

/// Where the shared folder appears inside (docs/cages.md, "Options that widen a cage").
pub const SHARED_IN_CAGE: &str = "/shared";
/// The label of the volumes the tool makes for the shared folder.
pub const SHARED_LABEL: &str = "xyz.vpavlin.shrooms.shared";

/// The options that widen a cage (docs/cages.md, "Options that widen a cage"),
/// fixed when its container is made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Options {
    /// GitHub through the gateway: gh's API calls and git over HTTPS to
    /// github.com, the machine's token added outside the cage.
    #[serde(default)]
    pub github: bool,
    /// The machine's nix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nix: Option<NixOption>,
    /// The shared folder's volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<String>,
    /// The meshes the session is limited to (none: every mesh).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meshes: Vec<String>,
    /// Protected paths left writable (`--writable`, docs/security.md, "Protected
    /// paths"), relative to the project.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NixOption {
    /// A multi-user nix (its daemon does the builds) or a single-user one.
    pub multi_user: bool,
    /// The profile's bin folders, put in front of the image's PATH.
    pub path: Vec<String>,
}

/// What the options need from the machine, found beforehand.
#[derive(Debug, Clone, Default)]
pub struct FoundOptions {
    pub nix: Option<FoundNix>,
    /// The shared folder's volume, checked or made.
    pub shared_volume: Option<String>,
}

#[derive(Debug, Clone)]
pub struct FoundNix {
    /// The machine's /nix (a test's fake tree elsewhere).
    pub root: PathBuf,
    pub multi_user: bool,
    /// ~/.local/state/nix and ~/.config/nix, where they exist.
    pub state_dir: Option<PathBuf>,
    pub config_dir: Option<PathBuf>,
}

/// The cage's own address and gateway on pasta (docs/cages.md, "Network").
pub const PASTA_ADDRESS: &str = "fd5e:ca9e:1::2";
pub const PASTA_GATEWAY: &str = "fd5e:ca9e:1::1";

/// The network a cage was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// pasta with the cage's own address (podman 4.4+, passt installed).
    Pasta,
    /// slirp4netns: rootless podman before pasta.
    Slirp4netns,
    /// podman's default bridge, when podman runs as root.
    Bridge,
}

impl Network {
    /// The DNS forwarder this network gives a cage: slirp4netns's
    /// 10.0.2.3, and 169.254.1.1, podman's address for pasta's DNS
    /// forwarding; none on the bridge.
    pub fn dns_forwarder(self) -> Option<&'static str> {
        match self {
            Network::Slirp4netns => Some("10.0.2.3"),
            Network::Pasta => Some("169.254.1.1"),
            Network::Bridge => None,
        }
    }

    /// The address this network keeps for the machine's loopback, which
    /// a cage never reaches: slirp4netns's 10.0.2.2, closed by
    /// `allow_host_loopback=false` (slirp4netns(1), `--disable-host-loopback`;
    /// `podman::argv::network`). pasta's gateway is the machine's only
    /// with `--map-gw`, which a cage is refused (`host::loopback`); the
    /// bridge has none.
    pub fn host_loopback(self) -> Option<&'static str> {
        match self {
            Network::Slirp4netns => Some("10.0.2.2"),
            Network::Pasta | Network::Bridge => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Network::Pasta => "pasta",
            Network::Slirp4netns => "slirp4netns",
            Network::Bridge => "bridge",
        }
    }
}

/// One bind mount, at `dst` inside the cage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub src: PathBuf,
    pub dst: PathBuf,
    pub read_only: bool,
}

impl Mount {
    fn same(path: &Path, read_only: bool) -> Mount {
        Mount {
            src: path.to_path_buf(),
            dst: path.to_path_buf(),
            read_only,
        }
    }
}

/// A cage, fully decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CageSpec {
    pub session: String,
    pub container: String,
    pub image: String,
    pub network: Network,
    pub limits: Limits,
    pub mounts: Vec<Mount>,
    pub workdir: PathBuf,
    /// Set for a sealed cage.
    pub sealed: Option<SealedSpec>,
    /// Named volumes: (volume, path inside).
    pub volumes: Vec<(String, PathBuf)>,
    /// The machine's catatonit, the cage's first process.
    pub init: PathBuf,
    /// Where podman writes the first process's PID at each start
    /// (`--pidfile`): a start reads it there rather than ask podman.
    pub pid_file: Option<PathBuf>,
    /// The cage's seccomp profile (`--security-opt seccomp=`), derived
    /// from podman's default (`seccomp.rs`); None: podman's own.
    pub seccomp_profile: Option<PathBuf>,
    /// The cage runs in a user namespace of its own (`--userns=auto`):
    /// rootful podman, where root in the cage would otherwise be root on
    /// the machine (docs/configuration.md, "As root").
    pub own_userns: bool,
    /// The mount sources that are the cage's own (its project, its folders
    /// in the state folder, its outbox): with a user namespace of its own,
    /// podman gives them to the cage's root at each start (`U`), since
    /// root in the cage is then nobody to the machine's root-owned files.
    pub own: Vec<PathBuf>,
}

/// A cage's link folder: in the state folder, holding one link, `name`,
/// to `target`, the harness's program at its path inside the cage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessLink {
    pub dir: PathBuf,
    pub name: String,
    pub target: PathBuf,
}

/// What a sealed cage adds to the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedSpec {
    /// Public resolvers (`--dns`).
    pub dns: Vec<String>,
}

/// Facts found on disk by the operation before the spec is built, so that
/// building it needs no I/O. Only what exists is listed: podman would make a
/// missing bind source as a root-owned folder.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// The harness's data folder, at the machine's own path (~/.claude).
    pub harness_dir: PathBuf,
    /// The entries of its read-only list that exist on the machine.
    pub harness_read_only: Vec<PathBuf>,
    /// The copies of its settings files, in the state folder, each with its
    /// place in the data folder (`cage_files`): mounted read-only.
    pub settings_copies: Vec<(PathBuf, PathBuf)>,
    /// This project's conversation folder on the machine (made if missing);
    /// None for a harness that keeps no folder of a project's own (Codex:
    /// its conversations stay in the cage's private copy).
    pub conversation_dir: Option<PathBuf>,
    /// The cage's private copy of the harness's data folder (in the state dir).
    pub private_home: PathBuf,
    /// The cage's proxy folder (in the state dir).
    pub proxy_dir: PathBuf,
    /// `uploads/<session>` in the state dir: its own received files, and
    /// no other session's.
    pub uploads_dir: PathBuf,
    /// Folders of programs let in read-only (the claude program's folder).
    pub program_dirs: Vec<PathBuf>,
    /// The link folder that puts the harness's program on PATH; None when
    /// the cage is given no program (a pi image runs its own).
    pub harness_link: Option<HarnessLink>,
    /// `tools/` in the state folder, where this program puts the copy of
    /// itself that the cage runs (`crate::cage::tools`); None when this program
    /// does not know its own path.
    pub tools_dir: Option<PathBuf>,
    /// The project's protected paths (`ops::protect`), over the project.
    pub protected: Vec<Mount>,
    /// `cages/<container>/pid` in the state folder (`Store::pid_file`).
    pub pid_file: PathBuf,
}

/// What a cage is made for: a session's fixed choices.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub session: &'a str,
    pub container: &'a str,
    pub image: &'a str,
    pub dir: &'a Path,
    pub network: Network,
    pub limits: &'a Limits,
    /// The machine's catatonit (`Host::init`).
    pub init: &'a Path,
    /// Where podman is to write the first process's PID (`CageSpec::pid_file`).
    pub pid_file: Option<&'a Path>,
}

/// What every cage gets first: its project read-write with its protected
/// paths over it (docs/security.md, "Protected paths"), its uploads, the folder of the
/// shrooms-agent program and its proxy folder read-only.
fn common_mounts(
    dir: &Path,
    protected: &[Mount],
    uploads: &Path,
    tools: Option<&Path>,
    proxy: &Path,
) -> Vec<Mount> {
    let mut mounts = vec![Mount::same(dir, false)];
    mounts.extend(protected.iter().cloned());
    mounts.push(Mount::same(uploads, true));
    if let Some(t) = tools {
        mounts.push(Mount::same(t, true));
    }
    mounts.push(Mount {
        src: proxy.to_path_buf(),
        dst: PathBuf::from(PROXY_DIR_IN_CAGE),
        read_only: true,
    });
    mounts
}

/// Build the spec of an ordinary cage (docs/cages.md, "What a cage is
/// given"): every path at the machine's own path.
pub fn build(req: &Request<'_>, found: &Found, options: &FoundOptions) -> Result<CageSpec> {
    let mut mounts = common_mounts(
        req.dir,
        &found.protected,
        &found.uploads_dir,
        found.tools_dir.as_deref(),
        &found.proxy_dir,
    );
    // The private home first, then what is let in over it: read-only what the
    // harness runs or obeys, read-write this project's conversations.
    mounts.push(Mount {
        src: found.private_home.clone(),
        dst: found.harness_dir.clone(),
        read_only: false,
    });
    for (copy, at) in &found.settings_copies {
        mounts.push(Mount {
            src: copy.clone(),
            dst: at.clone(),
            read_only: true,
        });
    }
    for p in &found.harness_read_only {
        mounts.push(Mount::same(p, true));
    }
    if let Some(d) = &found.conversation_dir {
        mounts.push(Mount::same(d, false));
    }
    for p in &found.program_dirs {
        mounts.push(Mount::same(p, true));
    }
    mounts.extend(link_mount(found.harness_link.as_ref()));
    if let Some(nix) = &options.nix {
        // A multi-user nix's store is the daemon's: read-only, and builds go
        // through its socket. A single-user nix has no daemon, so the cage
        // writes /nix itself (docs/cages.md, "Options that widen a cage").
        mounts.push(Mount {
            src: nix.root.clone(),
            dst: PathBuf::from("/nix"),
            read_only: nix.multi_user,
        });
        if nix.multi_user {
            mounts.push(Mount {
                src: nix.root.join("var/nix/daemon-socket"),
                dst: PathBuf::from("/nix/var/nix/daemon-socket"),
                read_only: false,
            });
        }
        if let Some(d) = &nix.state_dir {
            mounts.push(Mount::same(d, false));
        }
        if let Some(d) = &nix.config_dir {
            mounts.push(Mount::same(d, true));
        }
    }
    let volumes = options
        .shared_volume
        .iter()
        .map(|v| (v.clone(), PathBuf::from(SHARED_IN_CAGE)))
        .collect();
    let own = [
        req.dir,
        &found.uploads_dir,
        &found.proxy_dir,
        &found.private_home,
    ]
    .into_iter()
    .map(Path::to_path_buf)
    .chain(found.settings_copies.iter().map(|(copy, _)| copy.clone()))
    .chain(found.conversation_dir.clone())
    .collect();
    finish(req, mounts, None, volumes, own)
}

/// The link folder, read-only. Not among the cage's own sources: the
/// cage's root need not own it to read a link.
fn link_mount(link: Option<&HarnessLink>) -> Option<Mount> {
    link.map(|l| Mount {
        src: l.dir.clone(),
        dst: PathBuf::from(HARNESS_BIN_IN_CAGE),
        read_only: true,
    })
}

/// A cage's PATH: the image's (or what replaces it), then the link
/// folder where the cage has one. Last, so that a program of the image's
/// own of that name comes first, as it would without the cage.
fn with_link_folder(path: String, linked: bool) -> String {
    if linked {
        format!("{path}:{HARNESS_BIN_IN_CAGE}")
    } else {
        path
    }
}

fn finish(
    req: &Request<'_>,
    mounts: Vec<Mount>,
    sealed: Option<SealedSpec>,
    volumes: Vec<(String, PathBuf)>,
    own: Vec<PathBuf>,
) -> Result<CageSpec> {
    for m in &mounts {
        for p in [&m.src, &m.dst] {
            check_mount_path(p)?;
        }
    }
    Ok(CageSpec {
        session: req.session.to_string(),
        container: req.container.to_string(),
        image: req.image.to_string(),
        network: req.network,
        limits: req.limits.clone(),
        mounts,
        workdir: req.dir.to_path_buf(),
        sealed,
        volumes,
        init: req.init.to_path_buf(),
        pid_file: req.pid_file.map(Path::to_path_buf),
        seccomp_profile: None,
        own_userns: false,
        own,
    })
}

/// What a sealed cage is made of, found on disk beforehand.
#[derive(Debug, Clone, Default)]
pub struct FoundSealed {
    /// `uploads/<session>`: only its own.
    pub session_uploads: PathBuf,
    /// Its own config folder, mounted at /root/.claude.
    pub private_config: PathBuf,
    /// `~/shrooms-outbox/<session>`, mounted at /outbox.
    pub outbox: PathBuf,
    pub proxy_dir: PathBuf,
    pub program_dirs: Vec<PathBuf>,
    pub harness_link: Option<HarnessLink>,
    pub tools_dir: Option<PathBuf>,
    /// The project's protected paths (`ops::protect`), over the project.
    pub protected: Vec<Mount>,
}

/// Build the spec of a sealed cage (docs/sealed.md, "Sealed cages"): its project, its
/// own uploads, its own login's config folder, its outbox, the programs;
/// nothing of the user's home.
pub fn build_sealed(
    req: &Request<'_>,
    found: &FoundSealed,
    sealed: SealedSpec,
) -> Result<CageSpec> {
    let mut mounts = common_mounts(
        req.dir,
        &found.protected,
        &found.session_uploads,
        found.tools_dir.as_deref(),
        &found.proxy_dir,
    );
    mounts.push(Mount {
        src: found.private_config.clone(),
        dst: PathBuf::from(SEALED_CONFIG_DIR),
        read_only: false,
    });
    mounts.push(Mount {
        src: found.outbox.clone(),
        dst: PathBuf::from(OUTBOX_IN_CAGE),
        read_only: false,
    });
    for p in &found.program_dirs {
        mounts.push(Mount::same(p, true));
    }
    mounts.extend(link_mount(found.harness_link.as_ref()));
    let own = [
        req.dir,
        &found.session_uploads,
        &found.proxy_dir,
        &found.private_config,
        &found.outbox,
    ]
    .into_iter()
    .map(Path::to_path_buf)
    .collect();
    finish(req, mounts, Some(sealed), Vec::new(), own)
}

/// The variable a Codex cage's provider reads its key from
/// (`codex_config`): the cage's is a dummy, which the gateway replaces.
pub const CODEX_KEY_VARIABLE: &str = "OPENAI_API_KEY";

/// The environment of a sealed cage (docs/sealed.md, "Sealed cages"): fixed values,
/// nothing from the invoking environment, not even pass_env. Its login
/// stays outside: the model gateway (`gateway`, its base URL) adds it on
/// the way out, and the cage gets a dummy key.
pub fn sealed_env_plan(
    session: &str,
    image_path: &str,
    linked: bool,
    gateway: Option<&str>,
) -> EnvPlan {
    let path = with_link_folder(image_path.to_string(), linked);
    let gateway_vars = gateway
        .map(|url| {
            [
                ("ANTHROPIC_API_KEY", DUMMY_KEY),
                ("ANTHROPIC_BASE_URL", url),
            ]
        })
        .into_iter()
        .flatten();
    let mut vars: Vec<(String, String)> = [
        ("CLAUDE_CONFIG_DIR", SEALED_CONFIG_DIR),
        ("HOME", SEALED_HOME),
        ("IS_SANDBOX", "1"),
        ("LANG", "C.UTF-8"),
        ("PATH", &path),
        ("SHROOMS_AGENT_PROXY", PROXY_SOCKET_IN_CAGE),
        ("SHROOMS_AGENT_SESSION", session),
        ("SHROOMS_OUTBOX", OUTBOX_IN_CAGE),
    ]
    .into_iter()
    .chain(gateway_vars)
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect();
    let mut plan = EnvPlan::default();
    vars.sort();
    for (name, value) in vars {
        match crate::cage::envfile::unwritable(&name, &value) {
            None => plan.vars.push((name, value)),
            Some(why) => plan.left_out.push((name, why.to_string())),
        }
    }
    plan
}

/// A path podman's `--mount` can carry: absolute, UTF-8, one line.
fn check_mount_path(p: &Path) -> Result<()> {
    use crate::error::InputProblem;
    let s = p.to_str().ok_or_else(|| {
        Error::input(InputProblem::PathNotUtf8 {
            path: p.to_path_buf(),
        })
    })?;
    if !s.starts_with('/') || s.contains(['\n', '\r', '\0']) {
        return Err(Error::input(InputProblem::PathNotMountable {
            path: s.to_string(),
        }));
    }
    Ok(())
}

/// Names passed from the invoking environment whatever the harness (docs/cages.md,
/// "Environment"), as they are: the time zone and the proxy exceptions.
const PASSED_NAMES: &[&str] = &["TZ", "NO_PROXY", "no_proxy"];

/// The proxy variables, passed (as every value but a chosen secret's)
/// without the user information of their URL.
const PROXY_NAMES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// The locale categories: POSIX's (locale(7), "LC_ALL" to "LC_TIME") and
/// glibc's own. Only these `LC_*` names pass: others (`LC_TERMINAL`, or any
/// name an ssh client sends along as `LC_*`) are not the locale's.
const LOCALE_CATEGORIES: &[&str] = &[
    "LC_ALL",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_ADDRESS",
    "LC_IDENTIFICATION",
    "LC_MEASUREMENT",
    "LC_NAME",
    "LC_PAPER",
    "LC_TELEPHONE",
];

/// The longest locale name passed (`sr_RS.UTF-8@latin` is 17).
const MAX_LOCALE: usize = 64;

/// A locale name (`C`, `POSIX`, `en_US.UTF-8`, `sr_RS@latin`): letters,
/// digits and `_.@-`, at most `MAX_LOCALE` long.
fn is_locale_name(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= MAX_LOCALE
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'@' | b'-'))
}

/// What a cage gets of one variable of the invoking environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// Not on the allow-list: it does not pass, and nothing is said.
    Not,
    /// It passes, with this value.
    As(String),
    /// On the allow-list, but its value is refused, for this reason.
    Refused(&'static str),
}

impl Admit {
    /// The value it passes with, if it passes.
    pub fn passed(self) -> Option<String> {
        match self {
            Admit::As(v) => Some(v),
            Admit::Not | Admit::Refused(_) => None,
        }
    }
}

pub use crate::settings::Chosen;

/// The allow-list of an ordinary cage's environment, and what its values
/// may carry: a name from outside reaches the cage only if this says so.
/// The `env` blocks of the copies of a harness's settings files a cage is
/// given (`cage_files`) pass by the same rule.
/// - a name under `pass_secrets` passes as it is, chosen danger and all;
/// - `LANG` and the locale categories pass only with a locale name, and
///   `LANGUAGE` with a `:` list of them;
/// - the proxy variables, `TZ`, `NO_PROXY`, the harness's own settings
///   and the names under `pass_env`
///   pass without the user information of any URL in them
///   (`secret_names::without_userinfo`): a password in a URL is a
///   credential, whatever the variable's name.
pub fn admit(name: &str, value: &str, harness: Harness, chosen: Chosen<'_>) -> Admit {
    let listed = |list: &[String]| list.iter().any(|p| p == name);
    if listed(chosen.pass_secrets) {
        Admit::As(value.to_string())
    } else if name == "LANG" || LOCALE_CATEGORIES.contains(&name) {
        if is_locale_name(value) {
            Admit::As(value.to_string())
        } else {
            Admit::Refused("its value is not a locale name (letters, digits and _.@-)")
        }
    } else if name == "LANGUAGE" {
        if value.len() <= 4 * MAX_LOCALE && value.split(':').all(is_locale_name) {
            Admit::As(value.to_string())
        } else {
            Admit::Refused("its value is not a list of locale names")
        }
    } else if PASSED_NAMES.contains(&name)
        || PROXY_NAMES.contains(&name)
        || harness.settings_env().contains(&name)
        || listed(chosen.pass_env)
    {
        Admit::As(crate::cage::secret_names::without_userinfo(value))
    } else {
        Admit::Not
    }
}

/// The variables of a `--github` cage (docs/gateway.md, "GitHub"): gh
/// reads its configuration from the proxy folder, which sends its requests
/// to the GitHub socket, with a placeholder token; git's URLs of
/// github.com go to the turn's gateway (`gateway`, its base URL), by
/// git's configuration given in the environment (git-config(1),
/// `GIT_CONFIG_COUNT`), so nothing is written in the cage's home. No
/// token of the machine's is among them.
pub fn github_env(gateway: Option<&str>) -> Vec<(String, String)> {
    let mut vars = vec![
        ("GH_CONFIG_DIR".to_string(), GH_CONFIG_IN_CAGE.to_string()),
        ("GH_TOKEN".to_string(), GITHUB_PLACEHOLDER.to_string()),
    ];
    if let Some(url) = gateway {
        vars.extend([
            ("GIT_CONFIG_COUNT".to_string(), "1".to_string()),
            (
                "GIT_CONFIG_KEY_0".to_string(),
                format!("url.{url}/github.com/.insteadOf"),
            ),
            (
                "GIT_CONFIG_VALUE_0".to_string(),
                "https://github.com/".to_string(),
            ),
        ]);
    }
    vars
}

/// What goes into a cage's env file, and what was left out and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPlan {
    /// Sorted by name.
    pub vars: Vec<(String, String)>,
    /// (name, why) of variables that were asked for but cannot be written.
    pub left_out: Vec<(String, String)>,
}

/// The facts the env file is made from.
#[derive(Debug, Clone)]
pub struct EnvRequest<'a> {
    pub session: &'a str,
    pub harness: Harness,
    pub home: &'a Path,
    pub harness_dir: &'a Path,
    /// The image's own PATH.
    pub image_path: &'a str,
    /// The cage has a link folder (`HARNESS_BIN_IN_CAGE`).
    pub linked: bool,
    pub chosen: Chosen<'a>,
    pub options: &'a Options,
    /// The model gateway's base URL for this turn (none when only shown).
    pub gateway: Option<&'a str>,
}

/// The environment of an ordinary cage: fixed values, and of the invoking
/// environment only what is named. Nothing else passes, whatever its name.
pub fn env_plan(req: &EnvRequest<'_>, invoking: &Env) -> EnvPlan {
    let mut chosen = std::collections::BTreeMap::<String, String>::new();
    let mut refused = Vec::new();
    for (name, value) in invoking {
        match admit(name, value, req.harness, req.chosen) {
            Admit::Not => {}
            Admit::As(v) => {
                chosen.insert(name.clone(), v);
            }
            Admit::Refused(why) => refused.push((name.clone(), why.to_string())),
        }
    }
    // Fixed values win over anything of the same name from outside.
    let home = req.home.to_string_lossy().into_owned();
    chosen.insert("HOME".into(), home);
    let path = match &req.options.nix {
        Some(nix) if !nix.path.is_empty() => format!("{}:{}", nix.path.join(":"), req.image_path),
        _ => req.image_path.to_string(),
    };
    chosen.insert("PATH".into(), with_link_folder(path, req.linked));
    if req.options.nix.as_ref().is_some_and(|n| n.multi_user) {
        chosen.insert("NIX_REMOTE".into(), "daemon".into());
    }
    if req.options.shared.is_some() {
        chosen.insert("SHROOMS_SHARED".into(), SHARED_IN_CAGE.into());
    }
    // Claude Code skips permissions as root only in a sandbox, which it
    // detects by IS_SANDBOX=1.
    chosen.insert("IS_SANDBOX".into(), "1".into());
    chosen.insert("SHROOMS_AGENT_SESSION".into(), req.session.to_string());
    chosen.insert("SHROOMS_AGENT_PROXY".into(), PROXY_SOCKET_IN_CAGE.into());
    // The harness reaches its model through the gateway, with a dummy key
    // the gateway replaces by the machine's (docs/gateway.md, "Model gateway").
    if let Some(url) = req.gateway {
        chosen.insert("ANTHROPIC_BASE_URL".into(), url.to_string());
        chosen.insert("ANTHROPIC_API_KEY".into(), DUMMY_KEY.to_string());
    }
    if req.options.github {
        chosen.extend(github_env(req.gateway));
    }
    chosen.extend(harness_env(req));
    let mut plan = EnvPlan::default();
    for (name, value) in chosen {
        match crate::cage::envfile::unwritable(&name, &value) {
            None => plan.vars.push((name, value)),
            Some(why) => plan.left_out.push((name, why.to_string())),
        }
    }
    // A refused value is left out, unless a fixed value of that name is in.
    for (name, why) in refused {
        if !plan.vars.iter().any(|(n, _)| *n == name) {
            plan.left_out.push((name, why));
        }
    }
    plan.left_out.sort();
    plan
}

/// The harness's own variables: where its folder is, and for Codex and
/// opencode the dummy OpenAI key of their providers (`codex_config`,
/// `opencode_config`), replaced outside by the gateway. opencode is also
/// told not to read the project's settings (`OPENCODE_DISABLE_PROJECT_CONFIG`,
/// opencode.ai/docs/config): the project's `.opencode`, `opencode.json`
/// and `opencode.jsonc` are protected paths, read-only in the cage, and
/// opencode stops at its start where it cannot write its `.gitignore`
/// and `package.json` into a project's `.opencode`.
fn harness_env(req: &EnvRequest<'_>) -> Vec<(String, String)> {
    let dir = req.harness_dir.to_string_lossy().into_owned();
    let dummy = req
        .gateway
        .map(|_| (CODEX_KEY_VARIABLE.to_string(), DUMMY_KEY.to_string()));
    let folder = match req.harness {
        // Its settings file goes inside ~/.claude, since nothing beside it
        // is mounted.
        Harness::Claude => return vec![("CLAUDE_CONFIG_DIR".into(), dir)],
        Harness::Pi => return vec![("PI_CODING_AGENT_DIR".into(), dir)],
        Harness::Codex => ("CODEX_HOME".to_string(), dir),
        // Its own config file by name, wherever the machine's
        // XDG_CONFIG_HOME put its folder (opencode.ai/docs/config).
        Harness::Opencode => (
            "OPENCODE_CONFIG".to_string(),
            format!("{dir}/opencode.json"),
        ),
    };
    let no_project = (req.harness == Harness::Opencode).then(|| {
        (
            "OPENCODE_DISABLE_PROJECT_CONFIG".to_string(),
            "1".to_string(),
        )
    });
    std::iter::once(folder)
        .chain(dummy)
        .chain(no_project)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show_mount(m: &Mount) -> String {
        format!(
            "{} -> {} {}",
            m.src.display(),
            m.dst.display(),
            if m.read_only { "ro" } else { "rw" }
        )
    }

    fn show_mounts(mounts: &[Mount]) -> Vec<String> {
        mounts.iter().map(show_mount).collect()
    }

    fn found() -> Found {
        Found {
            harness_dir: "/home/u/.claude".into(),
            harness_read_only: vec!["/home/u/.claude/hooks".into()],
            settings_copies: vec![(
                "/state/cages/shrooms-web-abc123/settings/settings.json".into(),
                "/home/u/.claude/settings.json".into(),
            )],
            conversation_dir: Some("/home/u/.claude/projects/-home-u-src-web".into()),
            private_home: "/state/cages/shrooms-web-abc123/home".into(),
            proxy_dir: "/state/cages/shrooms-web-abc123/proxy".into(),
            uploads_dir: "/state/uploads/web".into(),
            program_dirs: vec!["/home/u/.local/share/claude/versions".into()],
            harness_link: Some(HarnessLink {
                dir: "/state/cages/shrooms-web-abc123/bin".into(),
                name: "claude".into(),
                target: "/home/u/.local/share/claude/versions/2.1.0".into(),
            }),
            tools_dir: Some("/state/tools".into()),
            protected: protected("/home/u/src/web"),
            pid_file: "/state/cages/shrooms-web-abc123/pid".into(),
        }
    }

    fn protected(dir: &str) -> Vec<Mount> {
        [(".git", false), (".git/hooks", true)]
            .iter()
            .map(|(p, ro)| Mount {
                src: format!("{dir}/{p}").into(),
                dst: format!("{dir}/{p}").into(),
                read_only: *ro,
            })
            .collect()
    }

    fn limits() -> Limits {
        Limits::of("4g", "2", 2048)
    }

    #[test]
    fn mounts_in_order_and_nothing_else_of_home() {
        let l = limits();
        let req = Request {
            session: "web",
            container: "shrooms-web-abc123",
            image: "img",
            dir: Path::new("/home/u/src/web"),
            network: Network::Bridge,
            limits: &l,
            init: Path::new("/usr/libexec/podman/catatonit"),
            pid_file: None,
        };
        let spec = build(&req, &found(), &FoundOptions::default()).unwrap();
        let got = show_mounts(&spec.mounts);
        assert_eq!(
            got,
            vec![
                "/home/u/src/web -> /home/u/src/web rw",
                "/home/u/src/web/.git -> /home/u/src/web/.git rw",
                "/home/u/src/web/.git/hooks -> /home/u/src/web/.git/hooks ro",
                "/state/uploads/web -> /state/uploads/web ro",
                "/state/tools -> /state/tools ro",
                "/state/cages/shrooms-web-abc123/proxy -> /run/shrooms-agent ro",
                "/state/cages/shrooms-web-abc123/home -> /home/u/.claude rw",
                "/state/cages/shrooms-web-abc123/settings/settings.json -> /home/u/.claude/settings.json ro",
                "/home/u/.claude/hooks -> /home/u/.claude/hooks ro",
                "/home/u/.claude/projects/-home-u-src-web -> /home/u/.claude/projects/-home-u-src-web rw",
                "/home/u/.local/share/claude/versions -> /home/u/.local/share/claude/versions ro",
                "/state/cages/shrooms-web-abc123/bin -> /run/shrooms-agent-bin ro",
            ]
        );
        // Given to the cage's root when it has a user namespace of its own:
        // never the machine's programs or the user's own harness files.
        assert_eq!(
            spec.own,
            [
                "/home/u/src/web",
                "/state/uploads/web",
                "/state/cages/shrooms-web-abc123/proxy",
                "/state/cages/shrooms-web-abc123/home",
                "/state/cages/shrooms-web-abc123/settings/settings.json",
                "/home/u/.claude/projects/-home-u-src-web",
            ]
            .map(PathBuf::from)
        );
        for m in &spec.mounts {
            let s = m.src.to_string_lossy();
            assert!(!s.contains(".ssh") && !s.ends_with("history.jsonl"), "{s}");
            if s.starts_with("/home/u/") && !s.starts_with("/home/u/src/web") {
                assert!(
                    m.read_only || s.starts_with("/home/u/.claude/projects/-home-u-src-web"),
                    "{s} is writable"
                );
            }
        }
    }

    #[test]
    fn sealed_mounts_have_nothing_of_home() {
        let l = limits();
        let req = Request {
            session: "rev",
            container: "shrooms-rev-abc123",
            image: "img",
            dir: Path::new("/home/u/review/pr"),
            network: Network::Bridge,
            limits: &l,
            init: Path::new("/usr/libexec/podman/catatonit"),
            pid_file: None,
        };
        let found = FoundSealed {
            session_uploads: "/state/uploads/rev".into(),
            private_config: "/state/cages/shrooms-rev-abc123/home".into(),
            outbox: "/home/u/shrooms-outbox/rev".into(),
            proxy_dir: "/state/cages/shrooms-rev-abc123/proxy".into(),
            program_dirs: vec!["/opt/claude".into()],
            harness_link: Some(HarnessLink {
                dir: "/state/cages/shrooms-rev-abc123/bin".into(),
                name: "claude".into(),
                target: "/opt/claude/claude".into(),
            }),
            tools_dir: Some("/state/tools".into()),
            protected: protected("/home/u/review/pr"),
        };
        let sealed = SealedSpec {
            dns: vec!["1.1.1.1".into()],
        };
        let spec = build_sealed(&req, &found, sealed.clone()).unwrap();
        let got = show_mounts(&spec.mounts);
        assert_eq!(
            got,
            vec![
                "/home/u/review/pr -> /home/u/review/pr rw",
                "/home/u/review/pr/.git -> /home/u/review/pr/.git rw",
                "/home/u/review/pr/.git/hooks -> /home/u/review/pr/.git/hooks ro",
                "/state/uploads/rev -> /state/uploads/rev ro",
                "/state/tools -> /state/tools ro",
                "/state/cages/shrooms-rev-abc123/proxy -> /run/shrooms-agent ro",
                "/state/cages/shrooms-rev-abc123/home -> /root/.claude rw",
                "/home/u/shrooms-outbox/rev -> /outbox rw",
                "/opt/claude -> /opt/claude ro",
                "/state/cages/shrooms-rev-abc123/bin -> /run/shrooms-agent-bin ro",
            ]
        );
        assert_eq!(spec.sealed, Some(sealed));
        // Given to the cage's root when it has a user namespace of its own:
        // what it writes and its own folders, nothing of the machine's.
        assert_eq!(
            spec.own,
            [
                "/home/u/review/pr",
                "/state/uploads/rev",
                "/state/cages/shrooms-rev-abc123/proxy",
                "/state/cages/shrooms-rev-abc123/home",
                "/home/u/shrooms-outbox/rev",
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn golden_sealed_env() {
        let plan = sealed_env_plan("rev", "/usr/bin:/bin", true, Some("http://127.0.0.1:41000"));
        let got: Vec<String> = plan.vars.iter().map(|(n, v)| format!("{n}={v}")).collect();
        assert_eq!(
            got,
            vec![
                "ANTHROPIC_API_KEY=shrooms-gateway-adds-the-real-key",
                "ANTHROPIC_BASE_URL=http://127.0.0.1:41000",
                "CLAUDE_CONFIG_DIR=/root/.claude",
                "HOME=/root",
                "IS_SANDBOX=1",
                "LANG=C.UTF-8",
                "PATH=/usr/bin:/bin:/run/shrooms-agent-bin",
                "SHROOMS_AGENT_PROXY=/run/shrooms-agent/proxy.sock",
                "SHROOMS_AGENT_SESSION=rev",
                "SHROOMS_OUTBOX=/outbox",
            ]
        );
    }

    #[test]
    fn a_multiline_path_is_refused() {
        let l = limits();
        let req = Request {
            session: "web",
            container: "c",
            image: "img",
            dir: Path::new("/home/u/a\nb"),
            network: Network::Bridge,
            limits: &l,
            init: Path::new("/usr/libexec/podman/catatonit"),
            pid_file: None,
        };
        let e = build(&req, &found(), &FoundOptions::default()).unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::BadInput);
    }

    static NO_OPTIONS: Options = Options {
        github: false,
        nix: None,
        shared: None,
        meshes: Vec::new(),
        writable: Vec::new(),
    };

    fn env_req(harness: Harness, pass: &[String]) -> EnvRequest<'_> {
        EnvRequest {
            session: "web",
            harness,
            home: Path::new("/home/u"),
            harness_dir: match harness {
                Harness::Claude => Path::new("/home/u/.claude"),
                Harness::Pi => Path::new("/home/u/.pi/agent"),
                Harness::Codex => Path::new("/home/u/.codex"),
                Harness::Opencode => Path::new("/home/u/.config/opencode"),
            },
            image_path: "/usr/local/bin:/usr/bin:/bin",
            // Claude Code's program is the machine's, linked; a pi image's
            // is its own, on its PATH already.
            linked: harness == Harness::Claude,
            chosen: Chosen {
                pass_env: pass,
                pass_secrets: &[],
            },
            options: &NO_OPTIONS,
            gateway: None,
        }
    }

    /// No GitHub variable of the machine's reaches a cage, with `--github`
    /// or without: a `--github` cage gets gh's configuration in the proxy
    /// folder, a placeholder token and git's rewrite of github.com to the
    /// turn's gateway, and nothing else of GitHub's.
    #[test]
    fn no_github_token_reaches_a_cage() {
        let github = |plan: &EnvPlan| -> Vec<String> {
            plan.vars
                .iter()
                .filter(|(n, _)| n.starts_with("GH_") || n.starts_with("GIT"))
                .map(|(n, v)| format!("{n}={v}"))
                .collect()
        };
        let without = env_plan(&env_req(Harness::Claude, &[]), &invoking());
        assert_eq!(github(&without), Vec::<String>::new());
        let options = Options {
            github: true,
            ..Options::default()
        };
        let mut req = env_req(Harness::Claude, &[]);
        req.options = &options;
        req.gateway = Some("http://127.0.0.1:41000");
        let with = env_plan(&req, &invoking());
        assert_eq!(
            github(&with),
            vec![
                "GH_CONFIG_DIR=/run/shrooms-agent/gh",
                "GH_TOKEN=shrooms-gateway-adds-the-github-token",
                "GIT_CONFIG_COUNT=1",
                "GIT_CONFIG_KEY_0=url.http://127.0.0.1:41000/github.com/.insteadOf",
                "GIT_CONFIG_VALUE_0=https://github.com/",
            ]
        );
        // The machine's values are nowhere, whatever their name.
        for (name, value) in &with.vars {
            assert!(value != "gh" && value != "gh2", "{name}={value}");
        }
        // Shown only (no gateway): gh's, without git's rewrite.
        req.gateway = None;
        let shown = env_plan(&req, &invoking());
        assert_eq!(github(&shown).len(), 2, "{:?}", github(&shown));
    }

    #[test]
    fn golden_nix_and_shared_env() {
        let options = Options {
            nix: Some(NixOption {
                multi_user: true,
                path: vec![
                    "/home/u/.local/state/nix/profiles/profile/bin".into(),
                    "/nix/var/nix/profiles/default/bin".into(),
                ],
            }),
            shared: Some("shrooms-shared".into()),
            ..Options::default()
        };
        let mut req = env_req(Harness::Claude, &[]);
        req.options = &options;
        let plan = env_plan(&req, &invoking());
        let get = |n: &str| {
            plan.vars
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            get("PATH").unwrap(),
            "/home/u/.local/state/nix/profiles/profile/bin:/nix/var/nix/profiles/default/bin:\
             /usr/local/bin:/usr/bin:/bin:/run/shrooms-agent-bin"
        );
        assert_eq!(get("NIX_REMOTE").unwrap(), "daemon");
        assert_eq!(get("SHROOMS_SHARED").unwrap(), "/shared");
        let single = Options {
            nix: Some(NixOption {
                multi_user: false,
                path: vec![],
            }),
            ..Options::default()
        };
        req.options = &single;
        let plan = env_plan(&req, &invoking());
        assert!(!plan.vars.iter().any(|(n, _)| n == "NIX_REMOTE"));
    }

    #[test]
    fn golden_option_mounts() {
        let l = limits();
        let req = Request {
            session: "web",
            container: "c",
            image: "img",
            dir: Path::new("/home/u/src/web"),
            network: Network::Bridge,
            limits: &l,
            init: Path::new("/usr/libexec/podman/catatonit"),
            pid_file: None,
        };
        let opts = FoundOptions {
            nix: Some(FoundNix {
                root: "/nix".into(),
                multi_user: true,
                state_dir: Some("/home/u/.local/state/nix".into()),
                config_dir: Some("/home/u/.config/nix".into()),
            }),
            shared_volume: Some("shrooms-shared".into()),
        };
        let spec = build(&req, &found(), &opts).unwrap();
        let tail: Vec<String> = spec.mounts[spec.mounts.len() - 4..]
            .iter()
            .map(show_mount)
            .collect();
        assert_eq!(
            tail,
            vec![
                "/nix -> /nix ro",
                "/nix/var/nix/daemon-socket -> /nix/var/nix/daemon-socket rw",
                "/home/u/.local/state/nix -> /home/u/.local/state/nix rw",
                "/home/u/.config/nix -> /home/u/.config/nix ro",
            ]
        );
        assert_eq!(
            spec.volumes,
            vec![("shrooms-shared".to_string(), PathBuf::from("/shared"))]
        );
        // single-user: the store is written by the cage, no daemon socket
        let single = FoundOptions {
            nix: Some(FoundNix {
                root: "/nix".into(),
                multi_user: false,
                state_dir: None,
                config_dir: None,
            }),
            ..FoundOptions::default()
        };
        let spec = build(&req, &found(), &single).unwrap();
        let last = spec.mounts.last().unwrap();
        assert_eq!(
            (last.dst.to_str().unwrap(), last.read_only),
            ("/nix", false)
        );
    }

    fn invoking() -> Env {
        [
            ("PATH", "/home/u/bin:/usr/bin"),
            ("HOME", "/elsewhere"),
            ("USER", "u"),
            ("DISPLAY", ":0"),
            ("SSH_AUTH_SOCK", "/run/ssh"),
            ("FOO_API_KEY", "sk-secret"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("CLAUDE_CODE_OAUTH_TOKEN", "oauth"),
            ("GH_TOKEN", "gh"),
            ("GITHUB_TOKEN", "gh2"),
            ("TZ", "Europe/Prague"),
            ("LANG", "cs_CZ.UTF-8"),
            ("LC_TIME", "C"),
            ("https_proxy", "http://proxy:3128"),
            ("ANTHROPIC_MODEL", "opus"),
            ("MAX_THINKING_TOKENS", "1000"),
            ("MY_CHOICE", "yes"),
            ("MULTI", "a\nb"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
    }

    #[test]
    fn golden_claude_env() {
        let pass = vec!["MY_CHOICE".to_string(), "MULTI".to_string()];
        let mut req = env_req(Harness::Claude, &pass);
        req.gateway = Some("http://127.0.0.1:41000");
        let plan = env_plan(&req, &invoking());
        let got: Vec<String> = plan.vars.iter().map(|(n, v)| format!("{n}={v}")).collect();
        assert_eq!(
            got,
            vec![
                "ANTHROPIC_API_KEY=shrooms-gateway-adds-the-real-key",
                "ANTHROPIC_BASE_URL=http://127.0.0.1:41000",
                "ANTHROPIC_MODEL=opus",
                "CLAUDE_CONFIG_DIR=/home/u/.claude",
                "HOME=/home/u",
                "IS_SANDBOX=1",
                "LANG=cs_CZ.UTF-8",
                "LC_TIME=C",
                "MAX_THINKING_TOKENS=1000",
                "MY_CHOICE=yes",
                "PATH=/usr/local/bin:/usr/bin:/bin:/run/shrooms-agent-bin",
                "SHROOMS_AGENT_PROXY=/run/shrooms-agent/proxy.sock",
                "SHROOMS_AGENT_SESSION=web",
                "TZ=Europe/Prague",
                "https_proxy=http://proxy:3128",
            ]
        );
        assert_eq!(
            plan.left_out,
            vec![(
                "MULTI".to_string(),
                "its value has a line break, which podman's env file cannot carry".to_string()
            )]
        );
    }

    /// The link folder is on PATH, last, only where the cage has one (a
    /// pi image's own pi is on its own PATH already).
    #[test]
    fn golden_link_folder_on_path() {
        let path = |harness, linked| {
            let mut req = env_req(harness, &[]);
            req.linked = linked;
            let plan = env_plan(&req, &invoking());
            plan.vars.into_iter().find(|(n, _)| n == "PATH").unwrap().1
        };
        assert_eq!(
            path(Harness::Claude, true),
            "/usr/local/bin:/usr/bin:/bin:/run/shrooms-agent-bin"
        );
        assert_eq!(path(Harness::Claude, false), "/usr/local/bin:/usr/bin:/bin");
        assert_eq!(path(Harness::Pi, false), "/usr/local/bin:/usr/bin:/bin");
        let sealed = sealed_env_plan("rev", "/bin", false, None);
        assert!(sealed.vars.contains(&("PATH".into(), "/bin".into())));
        // A cage given no program has no link folder mounted.
        let mut f = found();
        f.harness_link = None;
        let l = limits();
        let req = Request {
            session: "web",
            container: "shrooms-web-abc123",
            image: "img",
            dir: Path::new("/home/u/src/web"),
            network: Network::Bridge,
            limits: &l,
            init: Path::new("/usr/libexec/podman/catatonit"),
            pid_file: None,
        };
        let spec = build(&req, &f, &FoundOptions::default()).unwrap();
        assert!(
            !spec
                .mounts
                .iter()
                .any(|m| m.dst == Path::new(HARNESS_BIN_IN_CAGE)),
            "{:?}",
            spec.mounts
        );
    }

    #[test]
    fn golden_pi_env_has_no_claude_settings() {
        let plan = env_plan(&env_req(Harness::Pi, &[]), &invoking());
        let names: Vec<&str> = plan.vars.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "HOME",
                "IS_SANDBOX",
                "LANG",
                "LC_TIME",
                "PATH",
                "PI_CODING_AGENT_DIR",
                "SHROOMS_AGENT_PROXY",
                "SHROOMS_AGENT_SESSION",
                "TZ",
                "https_proxy",
            ]
        );
    }

    /// A Codex cage: its folder by CODEX_HOME, and with a gateway the
    /// dummy key its provider reads, never the invoking environment's
    /// OpenAI key.
    #[test]
    fn golden_codex_env() {
        let mut invoking = invoking();
        invoking.insert("OPENAI_API_KEY".into(), "sk-machine".into());
        let mut req = env_req(Harness::Codex, &[]);
        req.gateway = Some("http://127.0.0.1:41000");
        let plan = env_plan(&req, &invoking);
        let vars: Vec<String> = plan
            .vars
            .iter()
            .filter(|(n, _)| n.contains("CODEX") || n.contains("OPENAI") || n.contains("ANTHROPIC"))
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        assert_eq!(
            vars,
            [
                "ANTHROPIC_API_KEY=shrooms-gateway-adds-the-real-key",
                "ANTHROPIC_BASE_URL=http://127.0.0.1:41000",
                "CODEX_HOME=/home/u/.codex",
                "OPENAI_API_KEY=shrooms-gateway-adds-the-real-key",
            ]
        );
        let plan = env_plan(&env_req(Harness::Codex, &[]), &invoking);
        assert!(!plan.vars.iter().any(|(n, _)| n == "OPENAI_API_KEY"));
    }

    #[test]
    fn no_secret_passes_unless_chosen() {
        let plan = env_plan(&env_req(Harness::Claude, &[]), &invoking());
        for (name, value) in &plan.vars {
            assert!(
                !name.ends_with("_TOKEN")
                    && !name.ends_with("_API_KEY")
                    && !name.starts_with("GH_")
                    && !name.starts_with("GITHUB_")
                    && !["USER", "DISPLAY", "SSH_AUTH_SOCK"].contains(&name.as_str()),
                "{name} passed"
            );
            assert!(!value.contains("sk-"), "{name}={value}");
        }
    }

    /// The env policy, golden: what passes of credential-bearing values
    /// that pass by design, and with which value.
    #[test]
    fn golden_env_policy_of_proxies_and_locales() {
        let invoking: Env = [
            ("HTTP_PROXY", "http://alice:s3cret@proxy.lan:3128"),
            ("https_proxy", "http://tok@proxy.lan:3128/"),
            ("ALL_PROXY", "alice:s3cret@proxy.lan:1080"),
            ("all_proxy", "socks5h://proxy.lan:1080"),
            ("NO_PROXY", "localhost,.lan"),
            ("LANG", "cs_CZ.UTF-8"),
            ("LANGUAGE", "cs_CZ:en"),
            ("LC_ALL", "C.UTF-8"),
            ("LC_TIME", "sr_RS@latin"),
            ("LC_CTYPE", "x; curl evil"),
            ("LC_PAPER", &"a".repeat(MAX_LOCALE + 1)),
            ("LC_MY_TOKEN", "sent-by-ssh"),
            ("LC_TERMINAL", "iTerm2"),
            ("TZ", "Europe/Prague"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let plan = env_plan(&env_req(Harness::Pi, &[]), &invoking);
        let got: Vec<String> = plan
            .vars
            .iter()
            .filter(|(n, _)| !n.starts_with("SHROOMS_") && !n.starts_with("PI_"))
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        assert_eq!(
            got,
            vec![
                "ALL_PROXY=proxy.lan:1080",
                "HOME=/home/u",
                "HTTP_PROXY=http://proxy.lan:3128",
                "IS_SANDBOX=1",
                "LANG=cs_CZ.UTF-8",
                "LANGUAGE=cs_CZ:en",
                "LC_ALL=C.UTF-8",
                "LC_TIME=sr_RS@latin",
                "NO_PROXY=localhost,.lan",
                "PATH=/usr/local/bin:/usr/bin:/bin",
                "TZ=Europe/Prague",
                "all_proxy=socks5h://proxy.lan:1080",
                "https_proxy=http://proxy.lan:3128/",
            ]
        );
        let why = "its value is not a locale name (letters, digits and _.@-)".to_string();
        assert_eq!(
            plan.left_out,
            vec![
                ("LC_CTYPE".to_string(), why.clone()),
                ("LC_PAPER".to_string(), why),
            ]
        );
        // Under pass_secrets, a proxy passes whole; under pass_env, still
        // without its password; a name of pass_env passes without the user
        // information of every URL in it, and as it is otherwise.
        let secrets = vec!["HTTP_PROXY".to_string(), "ADMIN_URL".to_string()];
        let listed = vec![
            "https_proxy".to_string(),
            "LC_TERMINAL".to_string(),
            "PIP_INDEX_URL".to_string(),
            "PIP_EXTRA_INDEX_URL".to_string(),
            "JAVA_OPTS".to_string(),
            "GIT_REMOTE".to_string(),
        ];
        let mut invoking = invoking;
        for (n, v) in [
            ("PIP_INDEX_URL", "https://bob:secret@pypi.example/simple"),
            (
                "PIP_EXTRA_INDEX_URL",
                "https://a:b@one.example/simple https://tok@two.example/simple",
            ),
            (
                "JAVA_OPTS",
                "-Dhttps.proxy=\"https://u:p@proxy:8443\" -Xmx1g",
            ),
            ("GIT_REMOTE", "git@host.example:org/repo.git"),
            ("ADMIN_URL", "https://root:hunter2@admin.example/"),
        ] {
            invoking.insert(n.to_string(), v.to_string());
        }
        let mut req = env_req(Harness::Pi, &listed);
        req.chosen.pass_secrets = &secrets;
        let plan = env_plan(&req, &invoking);
        let value = |name: &str| {
            plan.vars
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(
            value("HTTP_PROXY"),
            Some("http://alice:s3cret@proxy.lan:3128")
        );
        assert_eq!(value("https_proxy"), Some("http://proxy.lan:3128/"));
        assert_eq!(value("LC_TERMINAL"), Some("iTerm2"));
        assert_eq!(value("PIP_INDEX_URL"), Some("https://pypi.example/simple"));
        assert_eq!(
            value("PIP_EXTRA_INDEX_URL"),
            Some("https://one.example/simple https://two.example/simple")
        );
        assert_eq!(
            value("JAVA_OPTS"),
            Some("-Dhttps.proxy=\"https://proxy:8443\" -Xmx1g")
        );
        assert_eq!(value("GIT_REMOTE"), Some("git@host.example:org/repo.git"));
        assert_eq!(
            value("ADMIN_URL"),
            Some("https://root:hunter2@admin.example/")
        );
        assert_eq!(value("LC_MY_TOKEN"), None);
    }
}
