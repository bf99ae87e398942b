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

/// A hint that names a config key: the config file's path with it, and
/// how to make the file when it is not there.
fn key_hint(s: &crate::settings::Settings, text: &str) -> String {
    format!(
        "{text} in {}",
        crate::settings::config_file_words(&s.config_path)
    )
}

/// `config`: the config file was read and every key in it is good. When
/// it is bad, the other checks run with the defaults (`bad_config`).
fn config_check(s: &crate::settings::Settings, bad_config: Option<&crate::error::Error>) -> Check {
    match bad_config {
        Some(e) => Check {
            name: "config",
            status: Status::Fail,
            detail: format!("{} (the checks below use the defaults)", e.message()),
            hint: Some(format!(
                "fix it in {}; docs/configuration.md, \"Configuration\", lists every key",
                s.config_path.display()
            )),
        },
        None if s.config_path.exists() => check(
            "config",
            Status::Pass,
            format!("{} is read", s.config_path.display()),
            None,
        ),
        None => check(
            "config",
            Status::Pass,
            format!(
                "no config file at {}: the defaults",
                s.config_path.display()
            ),
            None,
        ),
    }
}

/// `claude` and `pi`: the harness programs a session runs. Claude Code is
/// the machine's own, mounted into a cage; pi in a cage is the image's
/// unless the config names one, so only a configured pi is looked for.
fn harness_checks(s: &crate::settings::Settings) -> Vec<Check> {
    let mut out = Vec::new();
    for (name, configured) in [("claude", &s.claude), ("pi", &s.pi)] {
        let key = format!("`{name} = \"/path/to/{name}\"` under `[harness]`");
        out.push(match configured {
            Some(p) => match crate::settings::check_program(p) {
                Ok(()) => Check {
                    name: if name == "claude" { "claude" } else { "pi" },
                    status: Status::Pass,
                    detail: format!("{} (set in the config)", p.display()),
                    hint: None,
                },
                Err(why) => Check {
                    name: if name == "claude" { "claude" } else { "pi" },
                    status: Status::Fail,
                    detail: format!("the config's `harness.{name}`: {why}"),
                    hint: Some(key_hint(s, &format!("fix {key}"))),
                },
            },
            None => match (
                name,
                crate::settings::find_program(name, s.path_var.as_deref()),
            ) {
                ("claude", Some(p)) => check("claude", Status::Pass, p.display().to_string(), None),
                ("claude", None) => Check {
                    name: "claude",
                    status: Status::Warn,
                    detail: "claude is not on PATH: `--harness claude` sessions have no \
                             program to run"
                        .into(),
                    hint: Some(key_hint(s, &format!("install Claude Code, or set {key}"))),
                },
                (_, found) => check(
                    "pi",
                    Status::Pass,
                    match found {
                        Some(p) => format!(
                            "a caged pi session runs the image's pi (uncaged: {})",
                            p.display()
                        ),
                        None => "a caged pi session runs the image's pi (none on PATH for \
                                 uncaged sessions)"
                            .into(),
                    },
                    None,
                ),
            },
        });
    }
    out.push(program_check(s, "codex", "Codex CLI", &s.codex));
    out.push(program_check(s, "opencode", "opencode", &s.opencode));
    out
}

/// `codex` and `opencode`: the machine's program, configured or on PATH,
/// as a cage would mount it (Codex's npm launcher followed to its native
/// program, `ops::codex_mount`). Missing is a warning: only the sessions
/// of that harness need it.
fn program_check(
    s: &crate::settings::Settings,
    name: &'static str,
    title: &str,
    configured: &Option<std::path::PathBuf>,
) -> Check {
    let key = format!("`{name} = \"/path/to/{name}\"` under `[harness]`");
    let found = configured
        .clone()
        .or_else(|| crate::settings::find_program(name, s.path_var.as_deref()));
    let Some(program) = found else {
        return check(
            name,
            Status::Warn,
            format!("{name} is not on PATH: `--harness {name}` sessions have no program to run"),
            Some(&key_hint(s, &format!("install {title}, or set {key}"))),
        );
    };
    let mounted = match name {
        "codex" => crate::ops::codex_mount(&program, &s.home),
        _ => crate::ops::program_mount(&program, name, &s.home),
    };
    match mounted {
        Ok((resolved, _)) => check(name, Status::Pass, resolved.display().to_string(), None),
        Err(e) => check(
            name,
            Status::Fail,
            e.message(),
            Some(&key_hint(s, &format!("fix {key}"))),
        ),
    }
}

/// `doctor` when the config file is bad: that is its first check, failed,
/// and the others run with the defaults (`ctx`'s settings).
pub fn doctor_with(ctx: &Context, bad_config: Option<&crate::error::Error>) -> Report {
    let s = &ctx.settings;
    let mut checks = vec![config_check(s, bad_config)];
    checks.extend(harness_checks(s));
    if !s.cages {
        checks.push(cages_off_check(s));
        return Report { checks };
    }
    // Always asked afresh: the doctor is where a changed podman shows.
    let host = match ctx.host_fresh() {
        Ok(h) => h,
        Err(e) => {
            checks.push(check(
                "podman",
                Status::Fail,
                e.message(),
                Some("install podman (Debian: apt install podman runc catatonit passt uidmap nftables)"),
            ));
            return Report { checks };
        }
    };
    checks.push(podman_check(host));
    checks.push(root_check(host.rootless, super::euid(), s));
    checks.push(interrupted_check(ctx));
    checks.push(limits_check(host, s));
    checks.push(update_check(host));
    checks.push(network_check(host, s.network, &ctx.env, &s.home));
    checks.push(nft_check(host, s));
    checks.push(init_check(ctx));
    checks.push(seccomp_check(host));
    checks.push(shared_check(host));
    // The same facts as `image status`: ours missing is a warning.
    checks.push(super::image::doctor_check(ctx, host));
    Report { checks }
}

/// `cages`: `cages = false` in the config, and then no other check of
/// podman runs.
fn cages_off_check(s: &crate::settings::Settings) -> Check {
    Check {
        name: "cages",
        status: Status::Fail,
        detail: format!("cages = false in {}", s.config_path.display()),
        hint: Some(format!(
            "remove `cages = false` from {} to offer cages",
            s.config_path.display()
        )),
    }
}

/// `podman`: found, with its version, where it is and its runtime.
fn podman_check(host: &Host) -> Check {
    check(
        "podman",
        Status::Pass,
        format!(
            "{} at {} (runtime {})",
            host.version,
            host.podman.program().display(),
            host.runtime
        ),
        None,
    )
}

/// `interrupted`: commands that died halfway, finished or taken back now,
/// and said.
fn interrupted_check(ctx: &Context) -> Check {
    let repaired = super::plan::repair_all(ctx);
    if repaired.is_empty() {
        check(
            "interrupted",
            Status::Pass,
            "no command left its work half done".to_string(),
            None,
        )
    } else {
        check("interrupted", Status::Warn, repaired.join("; "), None)
    }
}

/// `update`: how `podman update` behaves here, where limits are enforced.
fn update_check(host: &Host) -> Check {
    match host.limits_support() {
        LimitsSupport::Enforced => check("update", Status::Pass, update_behaviour(host), None),
        // `podman update` fails where limits are not enforced: `cage
        // limits` refuses there, and a start sets none again.
        other => check(
            "update",
            Status::Warn,
            format!(
                "podman {}: `cage limits` is refused here: {}",
                host.version,
                crate::host::unenforced_why(&other)
            ),
            Some("use cgroups v2 with the memory, cpu and pids controllers delegated"),
        ),
    }
}

/// `nft`: the programs that close the agent port in every cage.
fn nft_check(host: &Host, s: &crate::settings::Settings) -> Check {
    match (&host.nft, &host.nsenter) {
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
    }
}

/// `init`: built with the program, never missing: said for what it is.
fn init_check(ctx: &Context) -> Check {
    check(
        "init",
        Status::Pass,
        format!(
            "every new cage's first process is shrooms-agent's own init ({}, static, not \
             dumpable): nothing of a cage runs before its network rules, and no process of it \
             can trace its first one",
            crate::cage::tools::init_path(&ctx.store.tools_dir()).display()
        ),
        None,
    )
}

/// `seccomp`: podman's default profile, which every cage's own is derived
/// from.
fn seccomp_check(host: &Host) -> Check {
    match &host.seccomp_profile {
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
    }
}

/// `shared`: the shared folder of sessions on every mesh (docs/cages.md,
/// "Options that widen a cage").
fn shared_check(host: &Host) -> Check {
    let shared = crate::ops::make::shared_volume_name(&[]);
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
        (Err(e), _) => check("shared", Status::Warn, e.message(), None),
    }
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
                super::root_refused(&s.config_path).message()
            ),
            hint: Some("run shrooms-agent as your own user".into()),
        };
    }
    if let Some(why) = crate::host::userns::auto_ranges_refusal() {
        return check(
            "rootless",
            Status::Fail,
            format!("cage create refuses: {why}"),
            Some("add the `containers` ranges to /etc/subuid and /etc/subgid"),
        );
    }
    check(
        "rootless",
        Status::Warn,
        format!(
            "podman runs as root{}: each cage runs in a user namespace of its own, and its \
             project is chowned to the cage's uid at each start",
            if s.allow_root {
                " (allow_root = true)"
            } else {
                ""
            }
        ),
        Some("run shrooms-agent as your own user"),
    )
}

fn limits_check(host: &Host, s: &crate::settings::Settings) -> Check {
    let policy = s.unenforced_limits;
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
            UnenforcedLimits::Refuse => Check {
                name: "limits",
                status: Status::Fail,
                detail:
                    "cgroups v1, rootless: podman ignores limits here, so `cage create` refuses"
                        .into(),
                hint: Some(key_hint(
                    s,
                    "use cgroups v2, or, to make cages without limits, set \
                     unenforced_limits = \"warn\"",
                )),
            },
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

/// How `cage limits` works with this podman (docs/cages.md, "Limits, moving, history").
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

fn network_check(
    host: &Host,
    choice: NetworkChoice,
    env: &crate::settings::Env,
    home: &std::path::Path,
) -> Check {
    match host.network(choice) {
        Ok(n) => {
            if let Some(why) = crate::host::loopback::opening_here(n, env, host.rootless, home) {
                return Check {
                    name: "network",
                    status: Status::Fail,
                    detail: format!("{why}; `cage create` refuses"),
                    hint: Some(
                        "remove that option from podman's configuration, or set network = \
                         \"slirp4netns\" in the config"
                            .into(),
                    ),
                };
            }
            let why = match (choice, n) {
                (NetworkChoice::Auto, crate::cage::spec::Network::Pasta) => {
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
        Err(e) => check("network", Status::Fail, e.message(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Env, Settings};

    fn settings(root: &std::path::Path, config: Option<&str>, path: &str) -> Settings {
        let env: Env = [
            ("HOME".to_string(), root.join("home").display().to_string()),
            ("PATH".to_string(), path.to_string()),
        ]
        .into();
        Settings::from_text(
            config,
            &root.join("config/config.toml"),
            root.join("state"),
            root.join("home"),
            &env,
        )
        .unwrap()
    }

    /// A bad config is the `config` check, failed, naming the file; a
    /// missing one passes (the defaults).
    #[test]
    fn a_bad_config_is_one_failing_check() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().to_path_buf();
        let s = settings(&root, None, "/nonexistent");
        let bad = crate::error::Error::bad_input("config file /x: key `image`: wrong");
        let c = config_check(&s, Some(&bad));
        assert_eq!(c.status, Status::Fail);
        assert!(c.detail.starts_with("config file /x: key `image`: wrong"));
        assert!(
            c.hint
                .unwrap()
                .contains(&s.config_path.display().to_string())
        );
        let c = config_check(&s, None);
        assert_eq!(c.status, Status::Pass);
        assert!(c.detail.contains("no config file at"), "{}", c.detail);
    }

    /// A hint naming a key names the config file, and how to make it when
    /// it is not there.
    #[test]
    fn key_hints_name_the_config_file_and_how_to_make_it() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().to_path_buf();
        let s = settings(&root, None, "/nonexistent");
        let h = key_hint(&s, "set unenforced_limits = \"warn\"");
        assert_eq!(
            h,
            format!(
                "set unenforced_limits = \"warn\" in {} (not there yet: make it, a TOML file of \
                 `key = value` lines, with `mkdir -p {}` and your editor)",
                s.config_path.display(),
                root.join("config").display()
            )
        );
    }

    /// The harness programs: claude looked for on PATH (missing: a warning
    /// with how to name it), a configured one checked.
    #[test]
    fn the_harness_programs_are_checked() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().to_path_buf();
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let s = settings(&root, None, &bin.display().to_string());
        let checks = harness_checks(&s);
        assert_eq!(
            checks
                .iter()
                .map(|c| (c.name, c.status))
                .collect::<Vec<_>>(),
            [
                ("claude", Status::Warn),
                ("pi", Status::Pass),
                ("codex", Status::Warn),
                ("opencode", Status::Warn)
            ]
        );
        assert!(checks[0].hint.as_ref().unwrap().contains("config.toml"));
        use std::os::unix::fs::PermissionsExt;
        let claude = bin.join("claude");
        std::fs::write(&claude, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = settings(
            &root,
            Some("[harness]\npi = \"/nonexistent/pi\""),
            &bin.display().to_string(),
        );
        let checks = harness_checks(&s);
        assert_eq!(
            (checks[0].status, checks[0].detail.as_str()),
            (Status::Pass, claude.to_str().unwrap())
        );
        assert_eq!(checks[1].status, Status::Fail, "{}", checks[1].detail);
        // npm's launcher is followed to the native program beside it, and
        // a launcher without one fails.
        let package = root.join("lib/node_modules/@openai/codex");
        let launcher = package.join("bin/codex.js");
        std::fs::create_dir_all(launcher.parent().unwrap()).unwrap();
        std::fs::write(&launcher, "#!/usr/bin/env node\n").unwrap();
        std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&launcher, bin.join("codex")).unwrap();
        let checks = harness_checks(&settings(&root, None, &bin.display().to_string()));
        assert_eq!(checks[2].status, Status::Fail, "{}", checks[2].detail);
        assert!(
            checks[2].detail.contains("npm launcher"),
            "{}",
            checks[2].detail
        );
        let target = match std::env::consts::ARCH {
            "aarch64" => "codex-linux-arm64/vendor/aarch64-unknown-linux-musl",
            _ => "codex-linux-x64/vendor/x86_64-unknown-linux-musl",
        };
        let native = package
            .join("node_modules/@openai")
            .join(target)
            .join("bin/codex");
        std::fs::create_dir_all(native.parent().unwrap()).unwrap();
        std::fs::write(&native, "").unwrap();
        let checks = harness_checks(&settings(&root, None, &bin.display().to_string()));
        let native = std::fs::canonicalize(&native).unwrap();
        assert_eq!(
            (checks[2].status, checks[2].detail.as_str()),
            (Status::Pass, native.to_str().unwrap())
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
