//! Facts about this machine and its podman, gathered once (design.md: "Facts
//! about the host ... are gathered once into a `Host` value and passed in").
//! The decisions made from them are pure functions, so tests can state any
//! host.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::podman::{Podman, inspect::Info};
use crate::settings::{NetworkChoice, Settings, find_program};
use crate::spec::Network;

/// The seed's words for a machine that offers no cages ("Requirements").
pub const NO_PODMAN: &str = "this machine has no podman to cage sessions with";
/// ... and for a caged session on such a machine.
pub const NO_PODMAN_FOR_SESSION: &str =
    "this session is caged, and this machine has no podman to cage it with";

/// A podman version, compared as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// Reads "4.3.1", "5.4.2", "4.4.0-rc1", "5.0.0-dev".
    pub fn parse(s: &str) -> Option<Version> {
        let mut parts = s.trim().split(['.', '-', '+', '~']);
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let patch = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        Some(Version(major, minor, patch))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// pasta as a network mode came with podman 4.4 (PR #16141).
pub const PASTA_SINCE: Version = Version(4, 4, 0);

/// `podman update` changes persist and apply to a stopped container from 5.1.
pub const UPDATE_PERSISTS_SINCE: Version = Version(5, 1, 0);

/// Whether podman will enforce a cage's limits here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitsSupport {
    Enforced,
    /// Rootless on cgroups v1: podman prints "Resource limits are not
    /// supported and ignored on cgroups V1 rootless systems" and runs anyway.
    IgnoredRootlessV1,
    /// Rootless on cgroups v2 without these controllers delegated: the
    /// runtime refuses to make the container.
    MissingControllers(Vec<String>),
}

/// The machine, as the operations need to know it.
#[derive(Debug, Clone)]
pub struct Host {
    pub podman: Podman,
    pub version: Version,
    pub rootless: bool,
    pub cgroup_v2: bool,
    pub controllers: Vec<String>,
    pub seccomp_profile: Option<PathBuf>,
    pub pasta: Option<PathBuf>,
    pub nft: Option<PathBuf>,
    pub nsenter: Option<PathBuf>,
    pub runtime: String,
    /// podman's volume folder (`store.volumePath`).
    pub volume_path: Option<PathBuf>,
    /// CPUs this machine has, the most a cage can be given.
    pub cpus: usize,
}

impl Host {
    /// Ask podman about itself. Fails with the seed's words when the machine
    /// offers no cages (no podman, or `cages = false`).
    pub fn detect(settings: &Settings) -> Result<Host> {
        let program = match (&settings.podman, settings.cages) {
            (Some(p), true) => p.clone(),
            _ => return Err(Error::no_podman(NO_PODMAN)),
        };
        if !is_executable(&program) {
            return Err(Error::no_podman(NO_PODMAN));
        }
        let podman = Podman::new(program);
        let info = podman.info()?;
        Ok(Self::from_info(podman, &info, settings))
    }

    fn from_info(podman: Podman, info: &Info, settings: &Settings) -> Host {
        let path = settings.path_var.as_deref();
        let non_empty = |s: &str| (!s.is_empty()).then(|| PathBuf::from(s));
        let pasta = info
            .host
            .pasta
            .as_ref()
            .and_then(|p| non_empty(&p.executable))
            .or_else(|| find_sbin("pasta", path));
        Host {
            version: Version::parse(&info.version.version).unwrap_or(Version(0, 0, 0)),
            rootless: info.host.security.rootless,
            cgroup_v2: info.host.cgroup_version == "v2",
            controllers: info.host.cgroup_controllers.clone().unwrap_or_default(),
            seccomp_profile: non_empty(&info.host.security.seccomp_profile_path),
            pasta,
            nft: find_sbin("nft", path),
            nsenter: find_sbin("nsenter", path),
            runtime: info
                .host
                .oci_runtime
                .as_ref()
                .map(|r| r.name.clone())
                .unwrap_or_default(),
            volume_path: non_empty(&info.store.volume_path),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            podman,
        }
    }

    /// Does `podman update` persist, and work on a stopped container? From
    /// 5.1 (podman-on-these-machines.md); before, limits are kept by the
    /// tool and applied again after every start.
    pub fn update_persists(&self) -> bool {
        self.version >= UPDATE_PERSISTS_SINCE
    }

    /// Where a volume's files are on the machine (seed, "The shared
    /// folder": podman's volume folder, then VOLUME/_data).
    pub fn shared_path(&self, volume: &str) -> Option<PathBuf> {
        self.volume_path
            .as_ref()
            .map(|v| v.join(volume).join("_data"))
    }

    /// `podman update --pids-limit` came with 4.4.
    pub fn update_has_pids(&self) -> bool {
        self.version >= PASTA_SINCE
    }

    /// Whether podman will enforce limits for cages here.
    pub fn limits_support(&self) -> LimitsSupport {
        limits_support(self.rootless, self.cgroup_v2, &self.controllers)
    }

    /// The network a new cage gets.
    pub fn network(&self, choice: NetworkChoice) -> Result<Network> {
        choose_network(choice, self.version, self.rootless, self.pasta.is_some())
    }
}

/// Pure: can limits be enforced, given what podman says?
pub fn limits_support(rootless: bool, cgroup_v2: bool, controllers: &[String]) -> LimitsSupport {
    if !rootless {
        return LimitsSupport::Enforced;
    }
    if !cgroup_v2 {
        return LimitsSupport::IgnoredRootlessV1;
    }
    let missing: Vec<String> = ["memory", "cpu", "pids"]
        .iter()
        .filter(|c| !controllers.iter().any(|have| have == *c))
        .map(|c| c.to_string())
        .collect();
    if missing.is_empty() {
        LimitsSupport::Enforced
    } else {
        LimitsSupport::MissingControllers(missing)
    }
}

/// Pure: which network a cage gets (issue 2, "Network"). `auto` is pasta
/// with the cage's own address where podman has it (4.4+), passt is
/// installed and podman is rootless; otherwise slirp4netns when rootless,
/// podman's bridge as root. podman refuses pasta as root ("pasta networking
/// is only supported for rootless mode", podman #17840, seen on 5.4.2).
pub fn choose_network(
    choice: NetworkChoice,
    version: Version,
    rootless: bool,
    pasta_installed: bool,
) -> Result<Network> {
    let pasta_ok = version >= PASTA_SINCE && pasta_installed && rootless;
    match choice {
        NetworkChoice::Auto if pasta_ok => Ok(Network::Pasta),
        NetworkChoice::Auto if rootless => Ok(Network::Slirp4netns),
        NetworkChoice::Auto => Ok(Network::Bridge),
        NetworkChoice::Pasta if pasta_ok => Ok(Network::Pasta),
        NetworkChoice::Pasta => Err(Error::bad_input(format!(
            "network = \"pasta\" needs rootless podman {PASTA_SINCE} or later and pasta (the passt \
             package); this machine has {} podman {version}{}: set network = \"auto\"",
            if rootless { "rootless" } else { "rootful" },
            if pasta_installed { "" } else { " and no pasta" }
        ))),
        NetworkChoice::Slirp4netns => Ok(Network::Slirp4netns),
        NetworkChoice::Bridge => Ok(Network::Bridge),
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A system program: on PATH, else in the sbin folders an ordinary user's
/// PATH often lacks (Debian puts nft in /usr/sbin).
fn find_sbin(name: &str, path: Option<&str>) -> Option<PathBuf> {
    find_program(name, path).or_else(|| {
        ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| is_executable(p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(Version::parse("4.3.1"), Some(Version(4, 3, 1)));
        assert_eq!(Version::parse("5.4.2"), Some(Version(5, 4, 2)));
        assert_eq!(Version::parse("4.4.0-rc1"), Some(Version(4, 4, 0)));
        assert_eq!(Version::parse("5"), Some(Version(5, 0, 0)));
        assert_eq!(Version::parse("x"), None);
        assert!(Version(4, 10, 0) > Version(4, 4, 0));
    }

    #[test]
    fn network_choice() {
        let v43 = Version(4, 3, 1);
        let v54 = Version(5, 4, 2);
        use NetworkChoice::*;
        assert_eq!(
            choose_network(Auto, v54, true, true).unwrap(),
            Network::Pasta
        );
        assert_eq!(
            choose_network(Auto, v54, false, true).unwrap(),
            Network::Bridge
        );
        assert_eq!(
            choose_network(Auto, v54, true, false).unwrap(),
            Network::Slirp4netns
        );
        assert_eq!(
            choose_network(Auto, v43, true, true).unwrap(),
            Network::Slirp4netns
        );
        assert_eq!(
            choose_network(Auto, v43, false, true).unwrap(),
            Network::Bridge
        );
        assert_eq!(
            choose_network(Bridge, v54, true, true).unwrap(),
            Network::Bridge
        );
        assert_eq!(
            choose_network(Slirp4netns, v54, false, true).unwrap(),
            Network::Slirp4netns
        );
        let e = choose_network(Pasta, v43, true, true).unwrap_err();
        assert!(e.message.contains("podman 4.4.0 or later"), "{}", e.message);
        assert!(choose_network(Pasta, v54, false, true).is_err());
        assert_eq!(
            choose_network(Pasta, v54, true, true).unwrap(),
            Network::Pasta
        );
    }

    #[test]
    fn limits() {
        assert_eq!(limits_support(false, false, &[]), LimitsSupport::Enforced);
        assert_eq!(
            limits_support(true, false, &[]),
            LimitsSupport::IgnoredRootlessV1
        );
        let all: Vec<String> = ["cpu", "memory", "pids", "io"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(limits_support(true, true, &all), LimitsSupport::Enforced);
        assert_eq!(
            limits_support(true, true, &all[..1]),
            LimitsSupport::MissingControllers(vec!["memory".into(), "pids".into()])
        );
    }
}
