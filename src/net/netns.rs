//! A running cage's network namespace, from outside: its rules loaded into
//! the namespace podman made for it, then checked to be the one its
//! processes run in. The rule text is `rules`' (pure); this is the loading.

use std::path::Path;

use crate::error::{Doing, Error, FirstProblem, Result, RulesProblem};
use crate::host::Host;
use crate::host::podman::QUICK;
use crate::host::podman::inspect::ContainerInspect;
use crate::host::process::Process;
pub use crate::net::egress::FileId;

/// A started cage as its rules need it: its first process, and where its
/// network namespace and init are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    /// The first process (the machine's init, or `runc init` for the
    /// moment before it runs it).
    pub pid: i64,
    /// The namespace file podman reports (`NetworkSettings.SandboxKey`);
    /// None: the first process's.
    pub netns: Option<String>,
    /// The machine's init the cage was made with: its bind mount's source.
    pub init: String,
    /// podman's hosts file for the cage (`HostsPath`), where an allow-list's
    /// names are pinned; known from an inspect only.
    pub hosts_path: Option<String>,
    /// The PID was read from the file podman writes at each start, not
    /// from an inspect: it is checked before the rules go in.
    pub from_pid_file: bool,
}

impl Running {
    /// From an inspect: None when it is not running, or was not made with
    /// the machine's init (a cage of an earlier shrooms-agent).
    pub fn of(c: &ContainerInspect) -> Option<Running> {
        if !c.state.running || c.state.pid <= 0 {
            return None;
        }
        Some(Running {
            pid: c.state.pid,
            netns: Some(c.network.sandbox_key.clone()).filter(|k| !k.is_empty()),
            init: c.init_source()?.to_string(),
            hosts_path: Some(c.hosts_path.clone()).filter(|h| !h.is_empty()),
            from_pid_file: false,
        })
    }
}

impl Host {
    /// Load an nft rule set into the network namespace podman made for a
    /// running container, from outside, and check that it is the one the
    /// container's processes are in. Returns the namespace's device and
    /// inode, checked to be the first process's.
    ///
    /// The namespace is the one podman reports (`NetworkSettings.SandboxKey`),
    /// where the network it set up is, whatever namespace a process of the
    /// cage has moved itself into; `podman exec` joins the namespaces of the
    /// container's first process (runc 1.1, seen on podman 4.3), so the two
    /// must be one, which is checked after loading. Where podman reports
    /// none, the first process's namespace: it is the machine's catatonit
    /// (checked too), which never changes namespace. Root uses `nsenter --net=PATH nft -f -`; rootless
    /// goes through `podman unshare`, whose user namespace owns the cage's
    /// network namespace and whose mount namespace alone holds the path
    /// (seen on podman 4.3 and 5.4).
    ///
    /// `c` is podman's inspect of the container since it was started: no
    /// second inspect is made here.
    pub fn set_rules(&self, container: &str, c: &Running, rules: &str) -> Result<FileId> {
        let init = c.init.as_str();
        let nft = self.nft.as_ref().ok_or_else(|| {
            Error::not_installed(
                "nft",
                "nftables",
                Some("it closes the agent port in every cage"),
            )
        })?;
        let nsenter = self
            .nsenter
            .as_ref()
            .ok_or_else(|| Error::not_installed("nsenter", "util-linux", None))?;
        let stat = self
            .stat
            .as_ref()
            .ok_or_else(|| Error::not_installed("stat", "coreutils", None))?;
        let pid = c.pid;
        let netns = match &c.netns {
            None => format!("/proc/{pid}/ns/net"),
            Some(key) => key.clone(),
        };
        // A PID read from podman's file rather than from an inspect: held
        // by a pidfd from here to the last look, so that every look at
        // /proc/PID below is at this one process; and, as root, never the
        // machine's own namespace.
        let held = if c.from_pid_file {
            Some(hold_first_process(container, pid, self.rootless)?)
        } else {
            None
        };
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let load = vec![
            format!("--net={netns}"),
            "--".into(),
            s(nft),
            "-f".into(),
            "-".into(),
        ];
        self.outside(nsenter, load, "nft")
            .stdin(rules)
            .timeout(QUICK)
            .run()?;
        let first = self.first_process(stat, container, &netns, pid, init)?;
        if let Some(fd) = &held
            && !still_running(fd)
        {
            return Err(Error::rules(container, RulesProblem::FirstEnded));
        }
        check_first_process(&first)
            .map(|()| first.loaded)
            .map_err(|problem| Error::rules(container, problem))
    }

    /// What the rules went into (`netns`), the namespace and program of the
    /// first process, and the init it was made with: device and inode, all
    /// seen from where the rules were loaded.
    fn first_process(
        &self,
        stat: &Path,
        container: &str,
        netns: &str,
        pid: i64,
        init: &str,
    ) -> Result<FirstProcess> {
        let look = vec![
            "-L".into(),
            "-c".into(),
            "%d %i".into(),
            "--".into(),
            netns.to_string(),
            format!("/proc/{pid}/ns/net"),
            format!("/proc/{pid}/exe"),
            init.to_string(),
        ];
        // `podman start` can return while the first process is still the
        // runtime's own `runc init`, before it executes the init (runc
        // start only signals it: runc(8), "start"); so a first process that
        // is not yet the init is looked at again for a short while. An
        // init never executes anything else, so waiting lets nothing in:
        // a first process that is some other program stays refused.
        let deadline = std::time::Instant::now() + FIRST_EXEC;
        loop {
            let first = self.file_ids(stat, container, &look)?;
            if first.exe == first.init || std::time::Instant::now() >= deadline {
                return Ok(first);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// The device and inode of each path `look` names after its `--`
    /// (links followed), seen from where the rules are loaded. Rootless,
    /// that is stat(1) through `podman unshare`; as root it is this
    /// process's own view, which a stat(1) of its own would share: no
    /// process is started for it, on the way to a cage's first command.
    fn file_ids(&self, stat: &Path, container: &str, look: &[String]) -> Result<FirstProcess> {
        let (ids, said): (Vec<Option<FileId>>, String) = if self.rootless {
            let out = self
                .outside(stat, look.to_vec(), "stat")
                .timeout(QUICK)
                .run()?;
            (out.stdout.lines().map(FileId::parse).collect(), out.stdout)
        } else {
            let paths = look.iter().skip_while(|a| *a != "--").skip(1);
            let ids = paths
                .map(|p| {
                    std::fs::metadata(p)
                        .map(|m| Some(FileId::of(&m)))
                        .map_err(|e| Error::act(Doing::LookAt(p.into()), &e))
                })
                .collect::<Result<_>>()?;
            (ids, String::new())
        };
        match ids.as_slice() {
            [Some(loaded), Some(net), Some(exe), Some(init)] => Ok(FirstProcess {
                loaded: *loaded,
                net: *net,
                exe: *exe,
                init: *init,
            }),
            _ => Err(Error::rules(
                container,
                RulesProblem::StatSaid { stdout: said },
            )),
        }
    }

    /// The egress log's listener (`egress::SUBCOMMAND`) for a running cage
    /// whose first process is `pid`: this program, run in that process's
    /// network namespace the way the rules are loaded. Returns the program
    /// and arguments to start it with (pure but for what the host has).
    pub fn egress_listener_argv(
        &self,
        pid: i64,
        self_exe: &Path,
        listen: &[String],
    ) -> Result<(std::path::PathBuf, Vec<String>)> {
        let nsenter = self
            .nsenter
            .as_ref()
            .ok_or_else(|| Error::not_installed("nsenter", "util-linux", None))?;
        Ok(listener_argv(
            nsenter,
            self.rootless.then(|| self.podman.program()),
            pid,
            self_exe,
            listen,
        ))
    }

    /// A program run in the cage's namespaces from outside: as root
    /// directly, rootless through `podman unshare`.
    fn outside(&self, program: &Path, args: Vec<String>, what: &str) -> Process {
        if self.rootless {
            let mut all = vec![
                "unshare".to_string(),
                program.to_string_lossy().into_owned(),
            ];
            all.extend(args);
            Process::new(
                self.podman.program(),
                format!("{what} (through podman unshare)"),
            )
            .args(all)
        } else {
            Process::new(program, what.to_string()).args(args)
        }
    }
}

/// `egress_listener_argv`'s command line (pure).
pub fn listener_argv(
    nsenter: &Path,
    rootless_podman: Option<&Path>,
    pid: i64,
    self_exe: &Path,
    listen: &[String],
) -> (std::path::PathBuf, Vec<String>) {
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let mut args = Vec::new();
    let program = match rootless_podman {
        Some(podman) => {
            args.extend(["unshare".to_string(), s(nsenter)]);
            podman.to_path_buf()
        }
        None => nsenter.to_path_buf(),
    };
    args.extend([
        "-t".to_string(),
        pid.to_string(),
        "-n".to_string(),
        "--".to_string(),
        s(self_exe),
        crate::net::egress::SUBCOMMAND.to_string(),
    ]);
    args.extend(listen.iter().cloned());
    (program, args)
}

/// The network namespace a process is in, looked at from here (root: any
/// process's; rootless, a process in podman's user namespace needs
/// `podman unshare`, which `set_rules` goes through).
pub fn namespace_of(pid: i64) -> Option<FileId> {
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| FileId::of(&m))
}

/// A pidfd of a cage's first process, known by its PID alone: as long as
/// it is running, /proc/PID is that process. As root, a process in the
/// machine's own network namespace is refused before anything is loaded
/// (rootless, the namespace is entered through podman's user namespace,
/// which cannot change the machine's).
fn hold_first_process(container: &str, pid: i64, rootless: bool) -> Result<rustix::fd::OwnedFd> {
    let gone = |problem| Error::rules(container, RulesProblem::First { pid, problem });
    let p = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| gone(FirstProblem::NoProcess))?;
    let fd = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).map_err(|e| {
        gone(FirstProblem::NotHeld {
            cause: e.to_string(),
        })
    })?;
    if !rootless {
        match (namespace_of(std::process::id().into()), namespace_of(pid)) {
            (Some(ours), Some(its)) if ours != its => {}
            (Some(_), Some(_)) => return Err(gone(FirstProblem::MachineNamespace)),
            _ => return Err(gone(FirstProblem::NoNamespace)),
        }
    }
    Ok(fd)
}

/// Is the process a pidfd holds still running? (It becomes readable when
/// the process ends: pidfd_open(2).)
fn still_running(fd: &rustix::fd::OwnedFd) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&now)) {
        Ok(0) => true,
        Ok(_) => !fds[0].revents().contains(PollFlags::IN),
        Err(_) => false,
    }
}

/// How long a just-started container's first process may take to become
/// the init it was made with.
const FIRST_EXEC: std::time::Duration = std::time::Duration::from_secs(3);

/// What the check after loading the rules looks at.
#[derive(Debug, Clone, Copy)]
pub struct FirstProcess {
    /// The network namespace the rules were loaded into.
    pub loaded: FileId,
    /// The network namespace of the container's first process.
    pub net: FileId,
    /// The program the first process runs.
    pub exe: FileId,
    /// The machine's init the container was made with (its bind mount's source).
    pub init: FileId,
}

/// Pure: do the rules hold for what the cage runs? The first process must
/// be the machine's init (a bind mount keeps the file's device and inode),
/// which starts nothing and never changes namespace, so its namespace is
/// the one the runtime gave the container; and the rules must be in it.
pub fn check_first_process(f: &FirstProcess) -> std::result::Result<(), RulesProblem> {
    if f.exe != f.init {
        return Err(RulesProblem::FirstNotInit);
    }
    if f.loaded != f.net {
        return Err(RulesProblem::NamespaceNotFirst);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_egress_listener_enters_the_namespace_as_the_rules_do() {
        let listen = ["--session".to_string(), "s1".to_string()];
        let inside = [
            "-t",
            "42",
            "-n",
            "--",
            "/x/sa",
            "egress-listen",
            "--session",
            "s1",
        ];
        let nsenter = Path::new("/usr/bin/nsenter");
        let podman = Path::new("/usr/bin/podman");
        let (p, a) = listener_argv(nsenter, None, 42, Path::new("/x/sa"), &listen);
        assert_eq!(
            (p.as_path(), &a[..]),
            (nsenter, &inside.map(String::from)[..])
        );
        let (p, a) = listener_argv(nsenter, Some(podman), 42, Path::new("/x/sa"), &listen);
        assert_eq!(p, podman);
        assert_eq!(a[..2], ["unshare", "/usr/bin/nsenter"]);
        assert_eq!(a[2..], inside);
    }

    #[test]
    fn stat_lines() {
        assert_eq!(
            FileId::parse("4 4026532185"),
            Some(FileId {
                dev: 4,
                ino: 4026532185
            })
        );
        assert_eq!(FileId::parse("4"), None);
        assert_eq!(FileId::parse("4 x"), None);
        assert_eq!(FileId::parse("4 5 6"), None);
        assert_eq!(FileId::parse(""), None);
    }

    #[test]
    fn the_rules_hold_only_in_the_first_processs_namespace_under_the_machines_init() {
        let id = |dev, ino| FileId { dev, ino };
        let good = FirstProcess {
            loaded: id(4, 4026532185),
            net: id(4, 4026532185),
            exe: id(65024, 10199068),
            init: id(65024, 10199068),
        };
        assert_eq!(check_first_process(&good), Ok(()));
        // Rules loaded into another namespace than the first process's.
        let moved = FirstProcess {
            net: id(4, 4026532262),
            ..good
        };
        let e = check_first_process(&moved).unwrap_err();
        assert_eq!(e, RulesProblem::NamespaceNotFirst);
        // The same inode on another device is another namespace.
        let other_dev = FirstProcess {
            loaded: id(5, 4026532185),
            ..good
        };
        assert!(check_first_process(&other_dev).is_err());
        // A first process that is not the init: its namespace proves nothing.
        let not_init = FirstProcess {
            exe: id(65024, 77),
            ..good
        };
        let e = check_first_process(&not_init).unwrap_err();
        assert_eq!(e, RulesProblem::FirstNotInit);
        let neither = FirstProcess {
            exe: id(65024, 77),
            net: id(4, 1),
            ..good
        };
        assert!(check_first_process(&neither).is_err());
    }
}
