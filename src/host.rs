//! Facts about this machine and its podman, gathered once into a
//! `Host` value and passed in.
//! The decisions made from them are pure functions, so tests can state any
//! host. This room holds what the tool does on the machine itself: podman
//! (its argv, a pure function of a CageSpec, and its calls), the one place
//! a process starts, the uids a rootful cage runs as, and the bounded reads
//! of what a cage or another machine controls.

pub mod bounded;
pub mod facts_cache;
pub mod loopback;
pub mod podman;
pub mod process;
pub mod userns;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cage::spec::Network;
use crate::error::{Error, Result};
use crate::host::podman::{Podman, inspect::Info};
use crate::settings::{Env, NetworkChoice, Settings, find_program};

/// What `podman info` says that the tool uses, as kept in the state
/// folder between commands (`facts_cache`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PodmanFacts {
    pub version: String,
    pub rootless: bool,
    pub cgroup_v2: bool,
    pub controllers: Vec<String>,
    pub seccomp_profile: Option<PathBuf>,
    /// pasta as podman reports it (4.6 and later).
    pub pasta: Option<PathBuf>,
    pub runtime: String,
    pub volume_path: Option<PathBuf>,
    /// The image store's list of images (containers-storage's
    /// `GRAPHROOT/DRIVER-images/images.json`), rewritten whole, into a new
    /// file, at each change of the images: its stamp says that an inspect
    /// kept since still holds. None when podman did not say (and in facts
    /// kept by an older version).
    #[serde(default)]
    pub images_file: Option<PathBuf>,
}

impl PodmanFacts {
    /// Pure: the facts in `podman info`'s answer.
    pub fn from_info(info: &Info) -> PodmanFacts {
        let non_empty = |s: &str| (!s.is_empty()).then(|| PathBuf::from(s));
        PodmanFacts {
            version: info.version.version.clone(),
            rootless: info.host.security.rootless,
            cgroup_v2: info.host.cgroup_version == "v2",
            controllers: info.host.cgroup_controllers.clone().unwrap_or_default(),
            seccomp_profile: non_empty(&info.host.security.seccomp_profile_path),
            pasta: info
                .host
                .pasta
                .as_ref()
                .and_then(|p| non_empty(&p.executable)),
            runtime: info
                .host
                .oci_runtime
                .as_ref()
                .map(|r| r.name.clone())
                .unwrap_or_default(),
            volume_path: non_empty(&info.store.volume_path),
            images_file: (!info.store.graph_root.is_empty()
                && !info.store.graph_driver_name.is_empty())
            .then(|| {
                PathBuf::from(&info.store.graph_root)
                    .join(format!("{}-images", info.store.graph_driver_name))
                    .join("images.json")
            }),
        }
    }
}

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
    pub stat: Option<PathBuf>,
    pub runtime: String,
    /// podman's volume folder (`store.volumePath`).
    pub volume_path: Option<PathBuf>,
    /// See [`PodmanFacts::images_file`].
    pub images_file: Option<PathBuf>,
    /// CPUs this machine has, the most a cage can be given.
    pub cpus: usize,
}

impl Host {
    /// Ask podman about itself. Fails with `NO_PODMAN` when the machine
    /// offers no cages (no podman, or `cages = false`).
    pub fn detect(settings: &Settings, env: &Env) -> Result<Host> {
        let program = match (&settings.podman, settings.cages) {
            (Some(p), true) => p.clone(),
            _ => return Err(Error::no_podman()),
        };
        if !is_executable(&program) {
            return Err(Error::no_podman());
        }
        let podman = Podman::new(program);
        let facts = facts_cache::facts(&podman, settings, env)?;
        Ok(Self::from_facts(podman, &facts, settings))
    }

    /// The same, asking podman afresh whatever the state folder keeps
    /// (`doctor`); what it says is kept for the next command.
    pub fn detect_fresh(settings: &Settings, env: &Env) -> Result<Host> {
        let program = match (&settings.podman, settings.cages) {
            (Some(p), true) => p.clone(),
            _ => return Err(Error::no_podman()),
        };
        if !is_executable(&program) {
            return Err(Error::no_podman());
        }
        let podman = Podman::new(program);
        let facts = facts_cache::fresh(&podman, settings, env)?;
        Ok(Self::from_facts(podman, &facts, settings))
    }

    fn from_facts(podman: Podman, facts: &PodmanFacts, settings: &Settings) -> Host {
        let path = settings.path_var.as_deref();
        let pasta = facts.pasta.clone().or_else(|| find_sbin("pasta", path));
        Host {
            version: Version::parse(&facts.version).unwrap_or(Version(0, 0, 0)),
            rootless: facts.rootless,
            cgroup_v2: facts.cgroup_v2,
            controllers: facts.controllers.clone(),
            seccomp_profile: facts.seccomp_profile.clone(),
            pasta,
            nft: find_sbin("nft", path),
            nsenter: find_sbin("nsenter", path),
            stat: find_sbin("stat", path),
            runtime: facts.runtime.clone(),
            volume_path: facts.volume_path.clone(),
            images_file: facts.images_file.clone(),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            podman,
        }
    }

    /// Does `podman update` persist, and work on a stopped container? From
    /// 5.1 (docs/cages.md, "Limits, moving, history"); before, limits are kept by the
    /// tool and applied again after every start.
    pub fn update_persists(&self) -> bool {
        self.version >= UPDATE_PERSISTS_SINCE
    }

    /// Where a volume's files are on the machine (podman's
    /// volume folder, then VOLUME/_data).
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

/// The containers.conf files podman reads, in order, the later winning
/// (containers.conf(5)): `$CONTAINERS_CONF` alone when set; else the
/// system's, its `.d` folder, and rootless the user's and its `.d` folder.
pub fn containers_conf_files(env: &Env, home: &Path, rootless: bool) -> Vec<PathBuf> {
    let var = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut files = Vec::new();
    let with_d = |files: &mut Vec<PathBuf>, f: PathBuf| {
        let d = PathBuf::from(format!("{}.d", f.display()));
        files.push(f);
        let mut more: Vec<PathBuf> = std::fs::read_dir(&d)
            .map(|r| {
                r.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                    .collect()
            })
            .unwrap_or_default();
        more.sort();
        files.extend(more);
    };
    if let Some(c) = var("CONTAINERS_CONF") {
        files.push(c);
    } else {
        files.push("/usr/share/containers/containers.conf".into());
        with_d(&mut files, "/etc/containers/containers.conf".into());
        if rootless {
            let config = var("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config"));
            with_d(&mut files, config.join("containers/containers.conf"));
        }
    }
    files.extend(var("CONTAINERS_CONF_OVERRIDE"));
    files
}

/// Pure: does an ELF file name a program interpreter (`PT_INTERP`), that
/// is, is it dynamically linked? None when it is no ELF file this reads.
/// (The tests check that a cage's init is static.)
#[cfg(test)]
pub fn elf_needs_interpreter(b: &[u8]) -> Option<bool> {
    if b.get(..4)? != b"\x7fELF" {
        return None;
    }
    let wide = match b.get(4)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let little = match b.get(5)? {
        1 => true,
        2 => false,
        _ => return None,
    };
    let num = |at: usize, len: usize| -> Option<u64> {
        let s = b.get(at..at.checked_add(len)?)?;
        let mut v: u64 = 0;
        for i in 0..len {
            let byte = if little { s[len - 1 - i] } else { s[i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    };
    let (phoff, phentsize, phnum) = if wide {
        (num(0x20, 8)?, num(0x36, 2)?, num(0x38, 2)?)
    } else {
        (num(0x1c, 4)?, num(0x2a, 2)?, num(0x2c, 2)?)
    };
    const PT_INTERP: u64 = 3;
    for i in 0..phnum {
        let at = usize::try_from(phoff.checked_add(i.checked_mul(phentsize)?)?).ok()?;
        if num(at, 4)? == PT_INTERP {
            return Some(true);
        }
    }
    Some(false)
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

/// Does podman enforce a cage's limits on this machine?
pub fn enforces_limits(host: &Host) -> bool {
    host.limits_support() == LimitsSupport::Enforced
}

/// Why podman cannot change a cage's limits on this machine.
pub fn unenforced_why(support: &LimitsSupport) -> String {
    match support {
        LimitsSupport::MissingControllers(missing) => format!(
            "the cgroup controllers {} are not delegated to your user",
            missing.join(", ")
        ),
        _ => "podman is rootless on cgroups v1, where \"Resource limits are not supported and \
              ignored\" and `podman update` fails"
            .to_string(),
    }
}

/// Pure: which network a cage gets (docs/cages.md, "Network"). `auto` is pasta
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
        NetworkChoice::Pasta => Err(Error::make(crate::error::MakeProblem::NoPasta {
            since: PASTA_SINCE.to_string(),
            version: version.to_string(),
            rootless,
            pasta_installed,
        })),
        NetworkChoice::Slirp4netns => Ok(Network::Slirp4netns),
        NetworkChoice::Bridge => Ok(Network::Bridge),
    }
}

pub fn is_executable(p: &Path) -> bool {
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
        assert!(
            e.message().contains("podman 4.4.0 or later"),
            "{}",
            e.message()
        );
        assert!(choose_network(Pasta, v54, false, true).is_err());
        assert_eq!(
            choose_network(Pasta, v54, true, true).unwrap(),
            Network::Pasta
        );
    }

    #[test]
    fn containers_conf_files_as_podman_reads_them() {
        let env: Env = [("CONTAINERS_CONF".to_string(), "/t/c.conf".to_string())].into();
        assert_eq!(
            containers_conf_files(&env, Path::new("/nonexistent-home"), true),
            vec![PathBuf::from("/t/c.conf")]
        );
        let env: Env = [("XDG_CONFIG_HOME".to_string(), "/nonexistent-x".to_string())].into();
        let files = containers_conf_files(&env, Path::new("/nonexistent-home"), true);
        assert_eq!(files[0], Path::new("/usr/share/containers/containers.conf"));
        assert!(files.contains(&PathBuf::from("/nonexistent-x/containers/containers.conf")));
        let root = containers_conf_files(&env, Path::new("/nonexistent-home"), false);
        assert!(!root.iter().any(|p| p.starts_with("/nonexistent-x")));
    }

    /// ELF headers written out by hand: 64-bit little-endian and 32-bit
    /// big-endian, with and without a PT_INTERP program header.
    #[test]
    fn static_and_dynamic_programs() {
        fn elf64(types: &[u32]) -> Vec<u8> {
            let mut b = vec![0u8; 64];
            b[..4].copy_from_slice(b"\x7fELF");
            b[4] = 2;
            b[5] = 1;
            b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
            b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
            b[0x38..0x3a].copy_from_slice(&(types.len() as u16).to_le_bytes());
            for t in types {
                let mut ph = vec![0u8; 56];
                ph[..4].copy_from_slice(&t.to_le_bytes());
                b.extend(ph);
            }
            b
        }
        fn elf32be(types: &[u32]) -> Vec<u8> {
            let mut b = vec![0u8; 52];
            b[..4].copy_from_slice(b"\x7fELF");
            b[4] = 1;
            b[5] = 2;
            b[0x1c..0x20].copy_from_slice(&52u32.to_be_bytes());
            b[0x2a..0x2c].copy_from_slice(&32u16.to_be_bytes());
            b[0x2c..0x2e].copy_from_slice(&(types.len() as u16).to_be_bytes());
            for t in types {
                let mut ph = vec![0u8; 32];
                ph[..4].copy_from_slice(&t.to_be_bytes());
                b.extend(ph);
            }
            b
        }
        const LOAD: u32 = 1;
        const INTERP: u32 = 3;
        assert_eq!(elf_needs_interpreter(&elf64(&[LOAD, LOAD])), Some(false));
        assert_eq!(
            elf_needs_interpreter(&elf64(&[6, INTERP, LOAD])),
            Some(true)
        );
        assert_eq!(elf_needs_interpreter(&elf32be(&[LOAD])), Some(false));
        assert_eq!(elf_needs_interpreter(&elf32be(&[INTERP])), Some(true));
        assert_eq!(elf_needs_interpreter(b"#!/bin/sh\n"), None);
        // Program headers past the end: not read as "static".
        let mut cut = elf64(&[LOAD, INTERP]);
        cut.truncate(64 + 56 + 2);
        assert_eq!(elf_needs_interpreter(&cut), None);
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
