//! Talking to podman: one function per verb (design.md, habit 4, after
//! toolbox's `podman.go`), state read with `--format json` into typed
//! structs, and every call an explicit argument list through the runner.

pub mod argv;
pub mod envfile;
pub mod inspect;
pub mod runner;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use runner::{Captured, Process};

/// Calls that should answer quickly get this long before they are called hung.
const QUICK: Duration = Duration::from_secs(60);
/// `podman create` and `start` may set up storage and networks.
const SLOW: Duration = Duration::from_secs(300);

/// The podman program, ready to be called.
#[derive(Debug, Clone)]
pub struct Podman {
    program: PathBuf,
}

impl Podman {
    pub fn new(program: impl Into<PathBuf>) -> Podman {
        Podman {
            program: program.into(),
        }
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// A podman call labelled by its verb, for `podman <verb>: <reason>`.
    pub fn process(&self, args: &[String]) -> Process {
        let verb = args.first().map(String::as_str).unwrap_or("");
        Process::new(&self.program, format!("podman {verb}")).args(args.iter().cloned())
    }

    fn run(&self, args: &[String], timeout: Duration) -> Result<Captured> {
        self.process(args).timeout(timeout).run()
    }

    fn strs(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    /// `podman info --format json`, parsed.
    pub fn info(&self) -> Result<inspect::Info> {
        let out = self.run(&Self::strs(&["info", "--format", "json"]), QUICK)?;
        serde_json::from_str(&out.stdout)
            .map_err(|e| Error::failed(format!("podman info: unexpected output: {e}")))
    }

    pub fn create(&self, argv: &[String]) -> Result<()> {
        self.run(argv, SLOW).map(drop)
    }

    pub fn start(&self, container: &str) -> Result<()> {
        self.run(&argv::start(container), SLOW).map(drop)
    }

    pub fn stop(&self, container: &str) -> Result<()> {
        self.run(&argv::stop(container), SLOW).map(drop)
    }

    /// `podman rm -f`; a container that is already gone is not an error.
    pub fn rm_force(&self, container: &str) -> Result<()> {
        let out = self
            .process(&argv::rm_force(container))
            .timeout(SLOW)
            .capture()?;
        if out.success() {
            Ok(())
        } else {
            Err(Error::failed(format!(
                "podman rm: {}",
                out.last_stderr_line()
            )))
        }
    }

    /// The state of one container, or None when there is no such container.
    pub fn container(&self, container: &str) -> Result<Option<inspect::ContainerState>> {
        let out = self
            .process(&argv::inspect_container(container))
            .timeout(QUICK)
            .capture()?;
        if !out.success() {
            if out.stderr.contains("no such") {
                return Ok(None);
            }
            return Err(Error::failed(format!(
                "podman inspect: {}",
                out.last_stderr_line()
            )));
        }
        let list: Vec<inspect::ContainerInspect> = serde_json::from_str(&out.stdout)
            .map_err(|e| Error::failed(format!("podman inspect: unexpected output: {e}")))?;
        Ok(list.into_iter().next().map(|c| c.state))
    }

    /// Remove a folder inside the user namespace (`podman unshare rm -rf`),
    /// for files a rootless cage made under its other uids.
    pub fn unshare_rm(&self, path: &Path) -> Result<()> {
        let args = vec![
            "unshare".to_string(),
            "rm".to_string(),
            "-rf".to_string(),
            "--".to_string(),
            path.to_string_lossy().into_owned(),
        ];
        self.run(&args, SLOW).map(drop)
    }

    /// `podman update` of a container's limits.
    pub fn update(&self, argv: &[String]) -> Result<()> {
        self.run(argv, QUICK).map(drop)
    }

    /// The processes in a running container: `podman top NAME args` prints
    /// a header and one row per process (no JSON; 4.3 and 5.x alike).
    pub fn top_args(&self, container: &str) -> Result<Vec<String>> {
        let out = self.run(&argv::top_args(container), QUICK)?;
        Ok(out
            .stdout
            .lines()
            .skip(1)
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect())
    }

    /// A volume, or None when there is none of that name.
    pub fn volume(&self, name: &str) -> Result<Option<inspect::VolumeInspect>> {
        let out = self
            .process(&argv::volume_inspect(name))
            .timeout(QUICK)
            .capture()?;
        if !out.success() {
            if out.stderr.contains("no such volume") || out.stderr.contains("no volume with name") {
                return Ok(None);
            }
            return Err(Error::failed(format!(
                "podman volume: {}",
                out.last_stderr_line()
            )));
        }
        let list: Vec<inspect::VolumeInspect> = serde_json::from_str(&out.stdout)
            .map_err(|e| Error::failed(format!("podman volume inspect: unexpected output: {e}")))?;
        Ok(list.into_iter().next())
    }

    /// Make a local volume with a label.
    pub fn volume_create(&self, name: &str, label: &str) -> Result<()> {
        self.run(&argv::volume_create(name, label), QUICK).map(drop)
    }

    /// Every container carrying the session label.
    pub fn ps_cages(&self) -> Result<Vec<inspect::PsEntry>> {
        let out = self.run(&argv::ps_cages(), QUICK)?;
        let text = out.stdout.trim();
        if text.is_empty() || text == "null" {
            return Ok(Vec::new());
        }
        serde_json::from_str(text)
            .map_err(|e| Error::failed(format!("podman ps: unexpected output: {e}")))
    }

    /// An image's configuration, or None when it is not on this machine.
    pub fn image(&self, image: &str) -> Result<Option<inspect::ImageInspect>> {
        let out = self
            .process(&argv::image_inspect(image))
            .timeout(QUICK)
            .capture()?;
        if !out.success() {
            if out.stderr.contains("unknown")
                || out.stderr.contains("no such")
                || out.stderr.contains("not known")
            {
                return Ok(None);
            }
            // A name podman cannot even read is the name's fault.
            let line = out.last_stderr_line();
            let malformed = ["invalid reference format", "repository name must"]
                .iter()
                .any(|w| line.contains(w));
            let message = format!("podman image: {line}");
            return Err(if malformed {
                Error::bad_input(format!("{message}: {image:?} is not an image name"))
            } else {
                Error::failed(message)
            });
        }
        let list: Vec<inspect::ImageInspect> = serde_json::from_str(&out.stdout)
            .map_err(|e| Error::failed(format!("podman image inspect: unexpected output: {e}")))?;
        Ok(list.into_iter().next())
    }
}

impl crate::host::Host {
    /// Load an nft rule set into a running container's network namespace,
    /// from outside: `nsenter -t PID -n nft -f -` as root, and through
    /// `podman unshare` rootless, whose user namespace owns that network
    /// namespace (podman-on-these-machines.md, seen on 4.3 and 5.4).
    pub fn set_rules(&self, container: &str, rules: &str) -> Result<()> {
        let state = self
            .podman
            .container(container)?
            .ok_or_else(|| Error::failed(format!("the container {container} is gone")))?;
        if !state.running || state.pid <= 0 {
            return Err(Error::failed(format!(
                "the container {container} is not running, so its network cannot be closed"
            )));
        }
        let nft = self.nft.as_ref().ok_or_else(|| {
            Error::failed("nft is not installed (Debian: apt install nftables); it closes the agent port in every cage")
        })?;
        let nsenter = self.nsenter.as_ref().ok_or_else(|| {
            Error::failed("nsenter is not installed (Debian: apt install util-linux)")
        })?;
        let mut args: Vec<String> = Vec::new();
        if self.rootless {
            args.push("unshare".into());
            args.push(nsenter.to_string_lossy().into_owned());
        }
        args.extend([
            "-t".to_string(),
            state.pid.to_string(),
            "-n".to_string(),
            nft.to_string_lossy().into_owned(),
            "-f".to_string(),
            "-".to_string(),
        ]);
        let process = if self.rootless {
            Process::new(self.podman.program(), "nft (through podman unshare)").args(args)
        } else {
            Process::new(nsenter, "nft (through nsenter)").args(args)
        };
        process.stdin(rules).timeout(QUICK).run().map(drop)
    }
}
