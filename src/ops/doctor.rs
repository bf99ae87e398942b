//! `doctor`: one line per check, pass/warn/fail with a hint, telling the
//! truth about this machine: podman and its version, rootless or not,
//! cgroups and whether limits can be enforced, the network cages get, nft,
//! podman's default seccomp profile, and the configured image.

use serde::Serialize;

use super::Context;
pub use super::check::{Check, Status};
use crate::host::{Host, LimitsSupport, PASTA_SINCE};
use crate::settings::{NetworkChoice, UnenforcedLimits};

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
}

impl Report {
    pub fn failed(&self) -> bool {
        self.checks.iter().any(|c| c.status == Status::Fail)
    }
}

fn check(name: &'static str, status: Status, detail: String, hint: Option<&str>) -> Check {
    Check {
        name,
        status,
        detail,
        hint: hint.map(str::to_string),
    }
}

pub fn doctor(ctx: &Context) -> Report {
    let s = &ctx.settings;
    let mut checks = Vec::new();
    if !s.cages {
        checks.push(check(
            "cages",
            Status::Fail,
            format!("cages = false in {}", s.config_path.display()),
            Some("remove `cages = false` from the config to offer cages"),
        ));
        return Report { checks };
    }
    // Always asked afresh: the doctor is where a changed podman shows.
    let host = match ctx.host_fresh() {
        Ok(h) => h,
        Err(e) => {
            checks.push(check(
                "podman",
                Status::Fail,
                e.message,
                Some("install podman (Debian: apt install podman runc catatonit passt uidmap nftables)"),
            ));
            return Report { checks };
        }
    };
    checks.push(check(
        "podman",
        Status::Pass,
        format!(
            "{} at {} (runtime {})",
            host.version,
            host.podman.program().display(),
            host.runtime
        ),
        None,
    ));
    checks.push(root_check(host.rootless, super::euid(), s));
    checks.push(limits_check(host, s.unenforced_limits));
    checks.push(match host.limits_support() {
        LimitsSupport::Enforced => check("update", Status::Pass, update_behaviour(host), None),
        // `podman update` fails where limits are not enforced: `cage
        // limits` refuses there, and a start sets none again.
        other => check(
            "update",
            Status::Warn,
            format!(
                "podman {}: `cage limits` is refused here: {}",
                host.version,
                super::limits::unenforced_why(&other)
            ),
            Some("use cgroups v2 with the memory, cpu and pids controllers delegated"),
        ),
    });
    checks.push(network_check(host, s.network));
    checks.push(match (&host.nft, &host.nsenter) {
        (Some(nft), Some(ns)) => check(
            "nft",
            Status::Pass,
            format!(
                "{} and {} close the agent port ({}) in every cage",
                nft.display(),
                ns.display(),
                s.agent_port
            ),
            None,
        ),
        _ => check(
            "nft",
            Status::Fail,
            "nft or nsenter is missing: cages cannot close the agent port, so they will not start"
                .into(),
            Some("apt install nftables util-linux"),
        ),
    });
    checks.push(match &host.init {
        Ok(p) => check(
            "init",
            Status::Pass,
            format!(
                "{} (static) is every cage's first process, so nothing of a cage runs before \
                 its network rules",
                p.display()
            ),
            None,
        ),
        Err(why) => check(
            "init",
            Status::Fail,
            why.clone(),
            Some("apt install catatonit (Fedora: dnf install catatonit)"),
        ),
    });
    checks.push(match &host.seccomp_profile {
        Some(p) if p.exists() => check(
            "seccomp",
            Status::Pass,
            format!("podman's default profile is {}", p.display()),
            None,
        ),
        Some(p) => check(
            "seccomp",
            Status::Warn,
            format!(
                "podman names {} as its default profile, but it is not there",
                p.display()
            ),
            Some("reinstall podman's containers-common package"),
        ),
        None => check(
            "seccomp",
            Status::Warn,
            "podman reports no default seccomp profile".into(),
            Some("reinstall podman's containers-common package"),
        ),
    });
    // The shared folder of sessions on every mesh (README, "Options that widen a cage").
    let shared = crate::ops::make::shared_volume_name(&[]);
    checks.push(
        match (host.podman.volume(&shared), host.shared_path(&shared)) {
            (Ok(Some(_)), Some(p)) => check(
                "shared",
                Status::Pass,
                format!("the shared folder {shared} is at {}", p.display()),
                None,
            ),
            (Ok(None), Some(p)) => check(
                "shared",
                Status::Pass,
                format!(
                    "the shared folder {shared} is made with the first --shared cage, at {}",
                    p.display()
                ),
                None,
            ),
            (Ok(_), None) => check(
                "shared",
                Status::Warn,
                "podman reports no volume folder".into(),
                None,
            ),
            (Err(e), _) => check("shared", Status::Warn, e.message, None),
        },
    );
    // The same facts as `image status`: ours missing is a warning.
    checks.push(super::image::doctor_check(ctx, host));
    Report { checks }
}

/// Rootless, or root with `allow_root = true` (a warning of what it gives
/// away), or root without it: the cage commands refuse, and this says the
/// same.
fn root_check(rootless: bool, euid: u32, s: &crate::settings::Settings) -> Check {
    if rootless && euid != 0 {
        return check(
            "rootless",
            Status::Pass,
            "podman runs rootless".into(),
            None,
        );
    }
    if super::root_refusal(euid, s.allow_root, &s.config_path).is_some() {
        return Check {
            name: "rootless",
            status: Status::Fail,
            detail: format!(
                "cage commands refuse: {}",
                super::root_refused(&s.config_path)
            ),
            hint: Some("run shrooms-agent as your own user".into()),
        };
    }
    check(
        "rootless",
        Status::Warn,
        format!(
            "podman runs as root{}: root in a cage is root on the machine's files it is given",
            if s.allow_root {
                " (allow_root = true)"
            } else {
                ""
            }
        ),
        Some("run shrooms-agent as your own user"),
    )
}

fn limits_check(host: &Host, policy: UnenforcedLimits) -> Check {
    let v = if host.cgroup_v2 { "v2" } else { "v1" };
    match host.limits_support() {
        LimitsSupport::Enforced => check(
            "limits",
            Status::Pass,
            format!(
                "cgroups {v}{}: memory, CPU and process limits are enforced",
                if host.rootless {
                    ", controllers delegated"
                } else {
                    ", as root"
                }
            ),
            None,
        ),
        LimitsSupport::IgnoredRootlessV1 => match policy {
            UnenforcedLimits::Refuse => check(
                "limits",
                Status::Fail,
                "cgroups v1, rootless: podman ignores limits here, so `cage create` refuses".into(),
                Some(
                    "use cgroups v2, or set unenforced_limits = \"warn\" to make cages without limits",
                ),
            ),
            UnenforcedLimits::Warn => check(
                "limits",
                Status::Warn,
                "cgroups v1, rootless: limits are NOT enforced (unenforced_limits = \"warn\")"
                    .into(),
                Some("use cgroups v2 for enforced limits"),
            ),
        },
        LimitsSupport::MissingControllers(missing) => check(
            "limits",
            Status::Fail,
            format!(
                "cgroups v2, but {} not delegated to your user: podman will refuse to make cages",
                missing.join(", ")
            ),
            Some("delegate them (systemd: Delegate=memory cpu pids in user@.service)"),
        ),
    }
}

/// How `cage limits` works with this podman (README, "Limits, moving, history").
fn update_behaviour(host: &Host) -> String {
    if host.update_persists() {
        format!(
            "podman {}: `cage limits` uses podman update, which persists and works on a stopped cage",
            host.version
        )
    } else if host.update_has_pids() {
        format!(
            "podman {}: `cage limits` updates a running cage and sets the limits again after every start \
             (podman update does not persist before 5.1)",
            host.version
        )
    } else {
        format!(
            "podman {}: `cage limits` updates a running cage and sets the limits again after every start; \
             --pids needs podman 4.4 (update --pids-limit)",
            host.version
        )
    }
}

fn network_check(host: &Host, choice: NetworkChoice) -> Check {
    match host.network(choice) {
        Ok(n) => {
            let why = match (choice, n) {
                (NetworkChoice::Auto, crate::spec::Network::Pasta) => {
                    "pasta with the cage's own address fd5e:ca9e:1::2".to_string()
                }
                (NetworkChoice::Auto, _) => format!(
                    "{} (pasta needs rootless podman {PASTA_SINCE} or later and the passt package; this is {} podman {}{})",
                    n.name(),
                    if host.rootless { "rootless" } else { "rootful" },
                    host.version,
                    if host.pasta.is_some() {
                        ""
                    } else {
                        ", and pasta is missing"
                    }
                ),
                _ => format!("{} (set in the config)", n.name()),
            };
            check("network", Status::Pass, format!("cages get {why}"), None)
        }
        Err(e) => check("network", Status::Fail, e.message, None),
    }
}
