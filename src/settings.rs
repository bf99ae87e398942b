//! Every setting, resolved once: command line > environment > config file >
//! defaults (design.md, habit 3; uv's `settings.rs`). Nothing else in the
//! program reads the config file or the process environment for settings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};

/// The invoking process's environment, captured once in `main` and passed
/// down, so pure functions and tests never touch the real process
/// environment (design.md, "Pitfalls": tests that change it race).
pub type Env = BTreeMap<String, String>;

pub const DEFAULT_MEMORY: &str = "4g";
pub const DEFAULT_CPUS: &str = "2";
pub const DEFAULT_PIDS: u64 = 2048;
pub const DEFAULT_AGENT_PORT: u16 = 7387;
/// Public resolvers a sealed cage is given (seed, "Sealed cages").
pub const DEFAULT_SEALED_DNS: [&str; 2] = ["1.1.1.1", "9.9.9.9"];

/// The config file as written: every key optional, unknown keys refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    podman: Option<PathBuf>,
    image: Option<String>,
    memory: Option<String>,
    cpus: Option<NumberOrString>,
    pids: Option<i64>,
    agent_port: Option<i64>,
    network: Option<String>,
    cages: Option<bool>,
    harness: Option<HarnessPrograms>,
    pass_env: Option<Vec<String>>,
    pass_secrets: Option<Vec<String>>,
    unenforced_limits: Option<String>,
    sealed_token: Option<PathBuf>,
    sealed_dns: Option<Vec<String>>,
    images_repo: Option<String>,
    machine_name: Option<String>,
    machines: Option<BTreeMap<String, MachineEntry>>,
    allow_root: Option<bool>,
}

/// A `[machines]` entry: `name = "http://host:port"`, or a table with the
/// address and the file holding that machine's `serve` token.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum MachineEntry {
    Url(String),
    Table(MachineTable),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MachineTable {
    url: String,
    token_file: Option<PathBuf>,
}

/// Another machine's `serve`, as `outbox send` reaches it and as a drop
/// from it is recognised (issue 6, points 3 and 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// `http://host:port`, as written (without a trailing `/`).
    pub url: String,
    /// The host part: a name, an IPv4 address, or an IPv6 one without brackets.
    pub host: String,
    pub port: u16,
    /// Its `serve --token-file` token, sent as `Authorization: Bearer`.
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HarnessPrograms {
    claude: Option<PathBuf>,
    pi: Option<PathBuf>,
}

/// `cpus = 2` and `cpus = "2"` both read naturally; take either.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum NumberOrString {
    Int(i64),
    Float(f64),
    Str(String),
}

/// Which network a cage asks for (issue 2, "Network").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkChoice {
    Auto,
    Pasta,
    Slirp4netns,
    Bridge,
}

/// What to do where podman would silently ignore the limits (issue 2, 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnenforcedLimits {
    Refuse,
    Warn,
}

/// A cage's resource limits, in podman's own notation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    pub memory: String,
    pub cpus: String,
    pub pids: u64,
}

/// Everything the operations need to know about how they were asked to run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config_path: PathBuf,
    pub state_dir: PathBuf,
    pub home: PathBuf,
    /// The podman program as configured, or found on PATH; None when absent.
    pub podman: Option<PathBuf>,
    /// `podman` was set in the config (then it must be there and run).
    pub podman_configured: bool,
    pub image: String,
    pub limits: Limits,
    pub agent_port: u16,
    pub network: NetworkChoice,
    /// `cages = false`: this machine offers no cages.
    pub cages: bool,
    pub claude: Option<PathBuf>,
    pub pi: Option<PathBuf>,
    pub pass_env: Vec<String>,
    pub unenforced_limits: UnenforcedLimits,
    /// The PATH used to find programs (podman, claude, nft), from `env`.
    pub path_var: Option<String>,
    /// The machine's sealed token file, if the config names one.
    pub sealed_token: Option<PathBuf>,
    /// The resolvers of a sealed cage.
    pub sealed_dns: Vec<String>,
    /// Where our images are tagged: `<repo>:latest`, `<repo>:desktop` (issue 4).
    pub images_repo: String,
    /// The machine's nix (`/nix`; `$SHROOMS_AGENT_NIX_ROOT` for tests).
    pub nix_root: PathBuf,
    /// Who runs the tool, for the history (`--by` overrides).
    pub user: String,
    /// This machine's name among the machines (`machine_name`; default the host name).
    pub machine_name: String,
    /// The other machines' `serve`s, by name (`[machines]`).
    pub machines: BTreeMap<String, Machine>,
    /// `allow_root = true`: cage commands run as root, with rootful podman,
    /// whose cages' root is root on the files they are given.
    pub allow_root: bool,
}

impl Settings {
    /// Resolve the settings from the environment and the config file it names.
    pub fn load(env: &Env) -> Result<Settings> {
        let home = home_dir(env)?;
        let (config_path, state_dir) = paths(env, &home)?;
        let text = match std::fs::read_to_string(&config_path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(Error::bad_input(format!(
                    "config file {}: cannot read it: {e}",
                    config_path.display()
                )));
            }
        };
        let settings = Self::from_text(text.as_deref(), &config_path, state_dir, home, env)?;
        if settings.podman_configured
            && let Some(p) = &settings.podman
        {
            check_program(p).map_err(|why| {
                Error::bad_input(format!(
                    "config file {}: key `podman`: {why}",
                    config_path.display()
                ))
            })?;
        }
        Ok(settings)
    }

    /// The pure part of `load`: text of the config file (if any) to settings.
    pub fn from_text(
        text: Option<&str>,
        config_path: &Path,
        state_dir: PathBuf,
        home: PathBuf,
        env: &Env,
    ) -> Result<Settings> {
        let file: ConfigFile = match text {
            Some(t) => toml::from_str(t).map_err(|e| {
                Error::bad_input(format!(
                    "config file {}: {}",
                    config_path.display(),
                    e.to_string().trim_end()
                ))
            })?,
            None => ConfigFile::default(),
        };
        let bad = |key: &str, why: String| {
            Error::bad_input(format!(
                "config file {}: key `{key}`: {why}",
                config_path.display()
            ))
        };
        let path_var = env.get("PATH").cloned();

        let memory = match file.memory {
            Some(m) => validate_memory(&m).map_err(|why| bad("memory", why))?,
            None => DEFAULT_MEMORY.to_string(),
        };
        let cpus = match file.cpus {
            Some(NumberOrString::Int(n)) => validate_cpus(&n.to_string()),
            Some(NumberOrString::Float(f)) => validate_cpus(&f.to_string()),
            Some(NumberOrString::Str(s)) => validate_cpus(&s),
            None => Ok(DEFAULT_CPUS.to_string()),
        }
        .map_err(|why| bad("cpus", why))?;
        let pids = match file.pids {
            Some(p) if p > 0 => p as u64,
            Some(p) => return Err(bad("pids", format!("{p} is not a positive whole number"))),
            None => DEFAULT_PIDS,
        };
        let agent_port = match file.agent_port {
            Some(p) if (1..=65535).contains(&p) => p as u16,
            Some(p) => return Err(bad("agent_port", format!("{p} is not a port (1 to 65535)"))),
            None => DEFAULT_AGENT_PORT,
        };
        let network = match file.network.as_deref() {
            None | Some("auto") => NetworkChoice::Auto,
            Some("pasta") => NetworkChoice::Pasta,
            Some("slirp4netns") => NetworkChoice::Slirp4netns,
            Some("bridge") => NetworkChoice::Bridge,
            Some(other) => {
                return Err(bad(
                    "network",
                    format!(
                        "{other:?} is not one of \"auto\", \"pasta\", \"slirp4netns\", \"bridge\""
                    ),
                ));
            }
        };
        let unenforced_limits = match file.unenforced_limits.as_deref() {
            None | Some("refuse") => UnenforcedLimits::Refuse,
            Some("warn") => UnenforcedLimits::Warn,
            Some(other) => {
                return Err(bad(
                    "unenforced_limits",
                    format!("{other:?} is not one of \"refuse\", \"warn\""),
                ));
            }
        };
        let images_repo = match file.images_repo {
            Some(r) => {
                crate::images::validate_repo(&r).map_err(|why| bad("images_repo", why))?;
                r
            }
            None => crate::images::DEFAULT_REPO.to_string(),
        };
        let image = match file.image {
            Some(i) if i.trim().is_empty() => return Err(bad("image", "is empty".into())),
            Some(i) => i,
            // The workbench (seed, "Choosing an image"), wherever it is tagged.
            None => crate::images::image_name(&images_repo, crate::images::Stage::Workbench),
        };
        let mut pass_env = file.pass_env.unwrap_or_default();
        for name in &pass_env {
            validate_pass_env_name(name).map_err(|why| bad("pass_env", why))?;
            if looks_like_a_credential(name) {
                return Err(bad(
                    "pass_env",
                    format!(
                        "{name} looks like a credential: in a cage, the code it runs can read                          it and send it anywhere. The model's key needs no passing (the model                          gateway adds it outside the cage); if the cage truly needs {name},                          list it under pass_secrets instead"
                    ),
                ));
            }
        }
        // Named on purpose, danger and all (README, "Configuration").
        for name in file.pass_secrets.unwrap_or_default() {
            validate_pass_env_name(&name).map_err(|why| bad("pass_secrets", why))?;
            if !pass_env.contains(&name) {
                pass_env.push(name);
            }
        }
        let sealed_dns = match file.sealed_dns {
            Some(list) if list.is_empty() => {
                return Err(bad(
                    "sealed_dns",
                    "is empty: a sealed cage needs at least one public resolver".into(),
                ));
            }
            Some(list) => {
                for a in &list {
                    if a.parse::<std::net::IpAddr>().is_err() {
                        return Err(bad("sealed_dns", format!("{a:?} is not an IP address")));
                    }
                }
                list
            }
            None => DEFAULT_SEALED_DNS.iter().map(|s| s.to_string()).collect(),
        };
        let machine_name = match file.machine_name {
            Some(n) => {
                validate_machine_name(&n).map_err(|why| bad("machine_name", why))?;
                n
            }
            None => host_name(),
        };
        let mut machines = BTreeMap::new();
        for (name, entry) in file.machines.unwrap_or_default() {
            validate_machine_name(&name).map_err(|why| bad("machines", why))?;
            let (url, token_file) = match entry {
                MachineEntry::Url(u) => (u, None),
                MachineEntry::Table(t) => (t.url, t.token_file),
            };
            let machine = parse_machine_url(&url, token_file)
                .map_err(|why| bad("machines", format!("{name}: {why}")))?;
            machines.insert(name, machine);
        }
        let harness = file.harness.unwrap_or_default();
        let podman_configured = file.podman.is_some();
        let podman = match file.podman {
            Some(p) => Some(
                configured_program(&p, path_var.as_deref()).map_err(|why| bad("podman", why))?,
            ),
            None => find_program("podman", path_var.as_deref()),
        };

        Ok(Settings {
            config_path: config_path.to_path_buf(),
            state_dir,
            home,
            podman,
            podman_configured,
            image,
            limits: Limits { memory, cpus, pids },
            agent_port,
            network,
            cages: file.cages.unwrap_or(true),
            claude: harness.claude,
            pi: harness.pi,
            pass_env,
            unenforced_limits,
            path_var,
            sealed_token: file.sealed_token,
            sealed_dns,
            images_repo,
            nix_root: env
                .get("SHROOMS_AGENT_NIX_ROOT")
                .filter(|p| p.starts_with('/'))
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/nix")),
            user: env
                .get("USER")
                .or_else(|| env.get("LOGNAME"))
                .cloned()
                .unwrap_or_else(|| {
                    // SAFETY: getuid cannot fail.
                    format!("uid {}", unsafe { libc::getuid() })
                }),
            machine_name,
            machines,
            allow_root: file.allow_root.unwrap_or(false),
        })
    }
}

/// The home directory: $HOME, else the system's record of the user.
fn home_dir(env: &Env) -> Result<PathBuf> {
    if let Some(h) = env.get("HOME").filter(|h| h.starts_with('/')) {
        return Ok(PathBuf::from(h));
    }
    directories::BaseDirs::new()
        .map(|b| b.home_dir().to_path_buf())
        .ok_or_else(|| Error::failed("cannot tell the home directory: set HOME"))
}

/// The config file and the state folder, from the environment (pure):
/// `$SHROOMS_AGENT_CONFIG`, else `$XDG_CONFIG_HOME/shrooms-agent/config.toml`,
/// else under the home; `$SHROOMS_AGENT_STATE_DIR`, else
/// `$XDG_DATA_HOME/shrooms-agent`, else under the home. A variable that
/// decides a path must give an absolute one: a relative path would name
/// another folder from every working folder (and `serve` under systemd
/// runs from `/`), so it is refused, by name, rather than used or passed over.
pub fn paths(env: &Env, home: &Path) -> Result<(PathBuf, PathBuf)> {
    let config = match var(env, "SHROOMS_AGENT_CONFIG")? {
        Some(p) => p,
        None => xdg(env, "XDG_CONFIG_HOME", home, ".config")?.join("shrooms-agent/config.toml"),
    };
    let state = match var(env, "SHROOMS_AGENT_STATE_DIR")? {
        Some(p) => p,
        None => xdg(env, "XDG_DATA_HOME", home, ".local/share")?.join("shrooms-agent"),
    };
    Ok((config, state))
}

/// A path variable: None when unset or empty; refused when relative.
fn var(env: &Env, name: &str) -> Result<Option<PathBuf>> {
    match env.get(name) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) if v.starts_with('/') => Ok(Some(PathBuf::from(v))),
        Some(v) => Err(Error::bad_input(format!(
            "{name} is {v:?}, a relative path: it would name another folder from every \
             working folder; set it to an absolute path (starting with /), or unset it"
        ))),
    }
}

/// An XDG base folder: the variable when it is set, else the default under home.
fn xdg(env: &Env, name: &str, home: &Path, default: &str) -> Result<PathBuf> {
    Ok(var(env, name)?.unwrap_or_else(|| home.join(default)))
}

/// What to write instead of a `podman` key that cannot be used.
const PODMAN_HOW: &str = "give the podman program's absolute path (`command -v podman` prints \
                          it), or remove the key to use the podman on PATH";

/// A program the config names: an absolute path, or a bare name looked up
/// on PATH. Empty, relative with a folder, or a name not on PATH: refused,
/// with what to write instead.
fn configured_program(p: &Path, path_var: Option<&str>) -> Result<PathBuf, String> {
    let text = p.to_string_lossy();
    if text.trim().is_empty() {
        return Err(format!("is empty: {PODMAN_HOW}"));
    }
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    if p.components().count() > 1 {
        return Err(format!("{text:?} is a relative path: {PODMAN_HOW}"));
    }
    find_program(&text, path_var)
        .ok_or_else(|| format!("there is no {text:?} on PATH: {PODMAN_HOW}"))
}

/// A configured program must be there, a file, and executable: a podman
/// that cannot run is the config's fault, not the machine's lack of one.
fn check_program(p: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;

    match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("{} does not exist: {PODMAN_HOW}", p.display()))
        }
        Err(e) => Err(format!("{}: {e}: {PODMAN_HOW}", p.display())),
        Ok(m) if !m.is_file() => Err(format!("{} is not a file: {PODMAN_HOW}", p.display())),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => {
            Err(format!("{} is not executable: {PODMAN_HOW}", p.display()))
        }
        Ok(_) => Ok(()),
    }
}

/// Look a program up on the given PATH.
pub fn find_program(name: &str, path_var: Option<&str>) -> Option<PathBuf> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    which::which_in(name, path_var, cwd).ok()
}

/// The least memory podman gives a container: it refuses less ("Minimum
/// memory limit allowed is 6MB", podman's `linuxMinMemory`, 6 MiB), so a
/// cage made or updated with less would fail to start.
pub const MIN_MEMORY_BYTES: u64 = 6 * 1024 * 1024;

/// The fewest CPUs podman can give: a CPU quota under 1 ms in its 100 ms
/// period, which the kernel refuses (cpu.cfs_quota_us >= 1000).
pub const MIN_CPUS: f64 = 0.01;

/// Memory in podman's units: a positive whole number with b, k, m or g (a
/// number alone is bytes, as podman reads it), at least podman's minimum.
pub fn validate_memory(m: &str) -> Result<String, String> {
    let s = m.trim().to_ascii_lowercase();
    let digits = s.trim_end_matches(['b', 'k', 'm', 'g']);
    let unit_len = s.len() - digits.len();
    let number =
        (unit_len <= 1 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse::<u64>().ok())
            .flatten()
            .filter(|n| *n > 0);
    let Some(n) = number else {
        return Err(format!(
            "{m:?} is not a size: use a positive whole number with b, k, m or g, like \"512m\" or \"16g\""
        ));
    };
    let unit: u64 = match s.as_bytes()[s.len() - 1] {
        b'k' => 1 << 10,
        b'm' => 1 << 20,
        b'g' => 1 << 30,
        _ => 1,
    };
    match n.checked_mul(unit) {
        Some(bytes) if bytes < MIN_MEMORY_BYTES => Err(format!(
            "{m:?} is less than podman's minimum of 6m (6 MiB) for a container{}: \
             give at least 6m, with a unit, like \"512m\" or \"16g\"",
            if unit_len == 0 {
                ", and a number without a unit is bytes"
            } else {
                ""
            }
        )),
        Some(bytes) if bytes <= i64::MAX as u64 => Ok(s),
        _ => Err(format!(
            "{m:?} is more memory than podman can take: give it in m or g, like \"16g\""
        )),
    }
}

/// CPUs: a positive number, whole or decimal ("2", "1.5"), at least 0.01.
pub fn validate_cpus(c: &str) -> Result<String, String> {
    let s = c.trim();
    let plain = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    match s.parse::<f64>() {
        Ok(n) if plain && n >= MIN_CPUS && n.is_finite() => Ok(s.to_string()),
        Ok(n) if plain && n > 0.0 => Err(format!(
            "{c:?} is less than podman's minimum of {MIN_CPUS} CPUs: give at least {MIN_CPUS}, \
             like \"0.5\" or \"2\""
        )),
        _ => Err(format!(
            "{c:?} is not a number of CPUs: use a positive number, like \"2\" or \"1.5\""
        )),
    }
}

/// A machine's name: what a session name may be (it goes into folder names,
/// `from-<machine>_<session>`), without `_`, which separates the two there.
pub fn validate_machine_name(name: &str) -> Result<(), String> {
    let ok = (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && !name.starts_with(['-', '.']);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a machine name: use 1 to 63 of A-Z a-z 0-9 . -, not starting with - or ."
        ))
    }
}

/// `http://host:port` (a trailing `/` is let go; the port defaults to 7387).
/// Only plain HTTP: `serve` speaks nothing else; a mesh carries it.
pub fn parse_machine_url(url: &str, token_file: Option<PathBuf>) -> Result<Machine, String> {
    let why = || {
        format!("{url:?} is not an address of a machine's serve: write it as \"http://host:port\"")
    };
    let rest = url.strip_prefix("http://").ok_or_else(why)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
        return Err(why());
    }
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(why)?;
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(why());
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(why)?),
        };
        (h.to_string(), port)
    } else {
        match rest.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (rest.to_string(), None),
        }
    };
    let host_ok = !host.is_empty()
        && (host.contains(':')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')));
    if !host_ok {
        return Err(why());
    }
    let port = match port {
        None => DEFAULT_AGENT_PORT,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(why)?,
    };
    Ok(Machine {
        url: url.trim_end_matches('/').to_string(),
        host,
        port,
        token_file,
    })
}

/// The host name (gethostname), up to its first dot, or "localhost".
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if r == 0 {
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    let short = name.split('.').next().unwrap_or("").to_string();
    if validate_machine_name(&short).is_ok() {
        short
    } else {
        "localhost".into()
    }
}

/// Does a variable's name say it holds a credential (`*_API_KEY`,
/// `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, and the like)?
pub fn looks_like_a_credential(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["API_KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD"]
        .iter()
        .any(|w| n == *w || n.ends_with(&format!("_{w}")))
}

/// A name that may be listed in `pass_env`.
fn validate_pass_env_name(name: &str) -> Result<(), String> {
    if !crate::podman::envfile::valid_name(name) {
        return Err(format!(
            "{name:?} is not a variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    // Seed, "use the keys in its environment": GitHub's variables reach only
    // a cage given the GitHub login, never through pass_env.
    if name.starts_with("GH_") || name.starts_with("GITHUB_") {
        return Err(format!(
            "{name}: GitHub's variables (GH_*, GITHUB_*) reach only a cage given the GitHub login, \
             not through pass_env; remove it"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Settings> {
        let env = Env::new();
        Settings::from_text(
            Some(text),
            Path::new("/cfg/config.toml"),
            PathBuf::from("/state"),
            PathBuf::from("/home/u"),
            &env,
        )
    }

    #[test]
    fn defaults_when_the_file_is_empty() {
        let s = load("").unwrap();
        assert_eq!(s.image, "localhost/shrooms-workbench:latest");
        assert_eq!(
            s.limits,
            Limits {
                memory: "4g".into(),
                cpus: "2".into(),
                pids: 2048
            }
        );
        assert_eq!(s.agent_port, 7387);
        assert_eq!(s.network, NetworkChoice::Auto);
        assert!(s.cages);
        assert!(s.pass_env.is_empty());
        assert_eq!(s.unenforced_limits, UnenforcedLimits::Refuse);
        assert_eq!(s.sealed_dns, vec!["1.1.1.1", "9.9.9.9"]);
        assert_eq!(s.sealed_token, None);
        assert!(!s.allow_root);
    }

    #[test]
    fn every_key_is_read() {
        let s = load(
            r#"
podman = "/opt/podman"
image = "localhost/mine:1"
memory = "512M"
cpus = 1.5
pids = 100
agent_port = 9000
network = "slirp4netns"
cages = false
pass_env = ["MY_VAR"]
unenforced_limits = "warn"
sealed_token = "/secret/token"
sealed_dns = ["8.8.8.8", "2001:4860:4860::8888"]
allow_root = true
[harness]
claude = "/opt/claude"
pi = "/opt/pi"
"#,
        )
        .unwrap();
        assert_eq!(s.podman, Some(PathBuf::from("/opt/podman")));
        assert_eq!(s.image, "localhost/mine:1");
        assert_eq!(s.limits.memory, "512m");
        assert_eq!(s.limits.cpus, "1.5");
        assert_eq!(s.limits.pids, 100);
        assert_eq!(s.agent_port, 9000);
        assert_eq!(s.network, NetworkChoice::Slirp4netns);
        assert!(!s.cages);
        assert_eq!(s.pass_env, vec!["MY_VAR".to_string()]);
        assert_eq!(s.unenforced_limits, UnenforcedLimits::Warn);
        assert_eq!(s.claude, Some(PathBuf::from("/opt/claude")));
        assert_eq!(s.pi, Some(PathBuf::from("/opt/pi")));
        assert_eq!(s.sealed_token, Some(PathBuf::from("/secret/token")));
        assert_eq!(s.sealed_dns, vec!["8.8.8.8", "2001:4860:4860::8888"]);
        assert!(s.allow_root);
    }

    #[test]
    fn images_repo_names_the_workbench_unless_image_is_set() {
        let s = load("").unwrap();
        assert_eq!(s.images_repo, "localhost/shrooms-workbench");
        let s = load("images_repo = \"localhost/mine\"").unwrap();
        assert_eq!(s.images_repo, "localhost/mine");
        assert_eq!(s.image, "localhost/mine:latest");
        let s = load("images_repo = \"localhost/mine\"\nimage = \"x:1\"").unwrap();
        assert_eq!(s.image, "x:1");
    }

    #[test]
    fn an_unknown_key_names_the_key_and_the_file() {
        let e = load("imagee = \"x\"\n").unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::BadInput);
        assert!(e.message.contains("/cfg/config.toml"), "{}", e.message);
        assert!(e.message.contains("imagee"), "{}", e.message);
    }

    #[test]
    fn bad_values_name_the_key_and_the_file() {
        for (text, key) in [
            ("memory = \"4x\"", "memory"),
            ("memory = \"0m\"", "memory"),
            ("cpus = \"-1\"", "cpus"),
            ("cpus = 0", "cpus"),
            ("pids = 0", "pids"),
            ("agent_port = 70000", "agent_port"),
            ("network = \"host\"", "network"),
            ("unenforced_limits = \"ignore\"", "unenforced_limits"),
            ("pass_env = [\"1BAD\"]", "pass_env"),
            ("pass_env = [\"GH_TOKEN\"]", "pass_env"),
            ("pass_env = [\"FOO_API_KEY\"]", "pass_env"),
            ("pass_env = [\"ANTHROPIC_AUTH_TOKEN\"]", "pass_env"),
            ("pass_env = [\"DB_PASSWORD\"]", "pass_env"),
            ("pass_env = [\"AWS_SECRET\"]", "pass_env"),
            ("pass_secrets = [\"GH_TOKEN\"]", "pass_secrets"),
            ("image = \" \"", "image"),
            ("sealed_dns = []", "sealed_dns"),
            ("images_repo = \"localhost/wb:latest\"", "images_repo"),
            ("images_repo = \"\"", "images_repo"),
            ("sealed_dns = [\"one.one\"]", "sealed_dns"),
        ] {
            let e = load(text).unwrap_err();
            assert!(
                e.message.contains(&format!("key `{key}`"))
                    && e.message.contains("/cfg/config.toml"),
                "{text}: {}",
                e.message
            );
        }
    }

    /// A configured podman that is empty, relative, missing or cannot run
    /// is the config's error (exit 2, the key and the file), not "no podman".
    #[test]
    fn a_configured_podman_must_be_there_and_run() {
        let how = "give the podman program's absolute path (`command -v podman` prints it), \
                   or remove the key to use the podman on PATH";
        for (text, why) in [
            ("podman = \"\"", "is empty".to_string()),
            ("podman = \" \"", "is empty".to_string()),
            (
                "podman = \"bin/podman\"",
                "\"bin/podman\" is a relative path".to_string(),
            ),
        ] {
            assert_eq!(
                load(text).unwrap_err().message,
                format!("config file /cfg/config.toml: key `podman`: {why}: {how}"),
                "{text}"
            );
        }
        let mut env = Env::new();
        env.insert("PATH".into(), "/nonexistent-bin".into());
        let e = Settings::from_text(
            Some("podman = \"podman\""),
            Path::new("/cfg/config.toml"),
            PathBuf::from("/state"),
            PathBuf::from("/home/u"),
            &env,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            format!(
                "config file /cfg/config.toml: key `podman`: there is no \"podman\" on PATH: {how}"
            )
        );

        let dir = std::env::temp_dir().join(format!("shrooms-podman-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plain = dir.join("plain");
        std::fs::write(&plain, "").unwrap();
        let config = dir.join("config.toml");
        for (podman, why) in [
            (
                "/nonexistent/podman".to_string(),
                "/nonexistent/podman does not exist".to_string(),
            ),
            (
                dir.display().to_string(),
                format!("{} is not a file", dir.display()),
            ),
            (
                plain.display().to_string(),
                format!("{} is not executable", plain.display()),
            ),
        ] {
            std::fs::write(&config, format!("podman = \"{podman}\"\n")).unwrap();
            let mut env = Env::new();
            env.insert("HOME".into(), "/nonexistent-home-for-test".into());
            env.insert("SHROOMS_AGENT_CONFIG".into(), config.display().to_string());
            let e = Settings::load(&env).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput);
            assert_eq!(
                e.message,
                format!(
                    "config file {}: key `podman`: {why}: {how}",
                    config.display()
                )
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_wrongly_typed_value_is_refused() {
        let e = load("cages = \"yes\"").unwrap_err();
        assert!(e.message.contains("cages"), "{}", e.message);
    }

    #[test]
    fn machines_and_this_machines_name() {
        let s = load(
            r#"
machine_name = "alpha"
[machines]
beta = "http://127.0.0.1:7400"
gamma = "http://gamma.mesh/"
delta = { url = "http://[fd00::1]:9000", token_file = "/t/delta" }
"#,
        )
        .unwrap();
        assert_eq!(s.machine_name, "alpha");
        assert_eq!(
            s.machines["beta"],
            Machine {
                url: "http://127.0.0.1:7400".into(),
                host: "127.0.0.1".into(),
                port: 7400,
                token_file: None
            }
        );
        assert_eq!(s.machines["gamma"].url, "http://gamma.mesh");
        assert_eq!(s.machines["gamma"].port, 7387);
        assert_eq!(s.machines["delta"].host, "fd00::1");
        assert_eq!(s.machines["delta"].port, 9000);
        assert_eq!(
            s.machines["delta"].token_file,
            Some(PathBuf::from("/t/delta"))
        );
        // The default name is the host's.
        let s = load("").unwrap();
        assert!(validate_machine_name(&s.machine_name).is_ok());
        assert!(s.machines.is_empty());
    }

    #[test]
    fn bad_machines_name_the_key() {
        for (text, key) in [
            ("machine_name = \"a_b\"", "machine_name"),
            ("machine_name = \"\"", "machine_name"),
            ("[machines]\nbeta = \"https://b:1\"", "machines"),
            ("[machines]\nbeta = \"http://b:1/path\"", "machines"),
            ("[machines]\nbeta = \"http://b:0\"", "machines"),
            ("[machines]\nbeta = \"http://b:x\"", "machines"),
            ("[machines]\nbeta = \"http://user@b:1\"", "machines"),
            ("[machines]\nbeta = \"http://[nope]:1\"", "machines"),
            ("[machines]\n\"b/c\" = \"http://b:1\"", "machines"),
        ] {
            let e = load(text).unwrap_err();
            assert!(
                e.message.contains(&format!("key `{key}`")),
                "{text}: {}",
                e.message
            );
        }
        let e = load("[machines]\nbeta = { url = \"http://b:1\", token = \"x\" }").unwrap_err();
        assert!(e.message.contains("beta = "), "{}", e.message);
    }

    #[test]
    fn memory_and_cpus_rules() {
        assert_eq!(validate_memory("16g").unwrap(), "16g");
        assert_eq!(validate_memory("6m").unwrap(), "6m");
        assert_eq!(validate_memory("6144K").unwrap(), "6144k");
        assert_eq!(validate_memory("6291456").unwrap(), "6291456");
        assert_eq!(validate_memory("6291456b").unwrap(), "6291456b");
        assert!(validate_memory("1.5g").is_err());
        assert!(validate_memory("g").is_err());
        assert!(validate_memory("12gb").is_err());
        assert_eq!(validate_cpus("8").unwrap(), "8");
        assert_eq!(validate_cpus("0.01").unwrap(), "0.01");
        assert_eq!(validate_cpus("0.5").unwrap(), "0.5");
        assert!(validate_cpus("1e3").is_err());
        assert!(validate_cpus("nan").is_err());
    }

    /// Limits podman cannot use are refused, saying the minimum and giving
    /// an example with a unit (podman would refuse them at the cage's start).
    #[test]
    fn limits_under_podmans_minimum_are_refused() {
        for m in ["1b", "16", "1k", "6291455", "6143k", "5m"] {
            assert_eq!(
                validate_memory(m).unwrap_err(),
                format!(
                    "{m:?} is less than podman's minimum of 6m (6 MiB) for a container{}: \
                     give at least 6m, with a unit, like \"512m\" or \"16g\"",
                    if m.ends_with(|c: char| c.is_ascii_digit()) {
                        ", and a number without a unit is bytes"
                    } else {
                        ""
                    }
                ),
            );
        }
        assert_eq!(
            validate_memory("99999999999999g").unwrap_err(),
            "\"99999999999999g\" is more memory than podman can take: give it in m or g, like \"16g\""
        );
        for c in ["0.0001", "0.009", "0.00999"] {
            assert_eq!(
                validate_cpus(c).unwrap_err(),
                format!(
                    "{c:?} is less than podman's minimum of 0.01 CPUs: give at least 0.01, \
                     like \"0.5\" or \"2\""
                ),
            );
        }
        for (text, says) in [
            ("memory = \"1b\"", "minimum of 6m"),
            ("memory = \"16\"", "minimum of 6m"),
            ("cpus = 0.0001", "minimum of 0.01"),
            ("cpus = \"0.001\"", "minimum of 0.01"),
        ] {
            let e = load(text).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput);
            assert!(
                e.message.starts_with("config file /cfg/config.toml: key `")
                    && e.message.contains(says),
                "{text}: {}",
                e.message
            );
        }
    }

    #[test]
    fn config_and_state_paths_follow_the_environment() {
        let mut env = Env::new();
        env.insert("HOME".into(), "/nonexistent-home-for-test".into());
        let s = Settings::load(&env).unwrap();
        assert_eq!(
            s.config_path,
            PathBuf::from("/nonexistent-home-for-test/.config/shrooms-agent/config.toml")
        );
        assert_eq!(
            s.state_dir,
            PathBuf::from("/nonexistent-home-for-test/.local/share/shrooms-agent")
        );
        env.insert("SHROOMS_AGENT_CONFIG".into(), "/nonexistent/c.toml".into());
        env.insert(
            "SHROOMS_AGENT_STATE_DIR".into(),
            "/nonexistent/state".into(),
        );
        let s = Settings::load(&env).unwrap();
        assert_eq!(s.config_path, PathBuf::from("/nonexistent/c.toml"));
        assert_eq!(s.state_dir, PathBuf::from("/nonexistent/state"));
    }

    #[test]
    fn xdg_folders_are_honoured() {
        let env: Env = [
            ("XDG_CONFIG_HOME", "/x/config"),
            ("XDG_DATA_HOME", "/x/data"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (config, state) = paths(&env, Path::new("/home/u")).unwrap();
        assert_eq!(config, Path::new("/x/config/shrooms-agent/config.toml"));
        assert_eq!(state, Path::new("/x/data/shrooms-agent"));
        let (config, state) = paths(&Env::new(), Path::new("/home/u")).unwrap();
        assert_eq!(
            config,
            Path::new("/home/u/.config/shrooms-agent/config.toml")
        );
        assert_eq!(state, Path::new("/home/u/.local/share/shrooms-agent"));
    }

    /// A relative path in a variable that decides where the config or the
    /// state is: refused by the variable's name, not used as it is.
    #[test]
    fn a_relative_path_variable_is_refused_by_name() {
        for var in [
            "SHROOMS_AGENT_STATE_DIR",
            "SHROOMS_AGENT_CONFIG",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
        ] {
            let mut env = Env::new();
            env.insert(var.into(), "rel/dir".into());
            let e = paths(&env, Path::new("/home/u")).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput);
            assert_eq!(
                e.message,
                format!(
                    "{var} is \"rel/dir\", a relative path: it would name another folder from \
                     every working folder; set it to an absolute path (starting with /), or unset it"
                )
            );
            env.insert("HOME".into(), "/nonexistent-home-for-test".into());
            assert!(Settings::load(&env).is_err(), "{var}");
        }
        // An XDG folder that decides nothing is not looked at.
        let env: Env = [
            ("SHROOMS_AGENT_CONFIG", "/c.toml"),
            ("SHROOMS_AGENT_STATE_DIR", "/s"),
            ("XDG_CONFIG_HOME", "rel"),
            ("XDG_DATA_HOME", "."),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert!(paths(&env, Path::new("/home/u")).is_ok());
    }
}
