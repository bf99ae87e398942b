//! Whether podman's own configuration lets a cage reach this machine's
//! loopback through its network helper, where serve and any other local
//! service listen believing only this machine's programs can reach them.
//!
//! - slirp4netns: `allow_host_loopback=true` in containers.conf's
//!   `[engine] network_cmd_options` makes 10.0.2.2 the host's 127.0.0.1
//!   (containers.conf(5), slirp4netns(1)). A cage's own
//!   `--network slirp4netns:allow_host_loopback=false` comes after those
//!   options and wins (podman/argv.rs), so it is not refused here.
//! - pasta: `[network] pasta_options` (containers.conf(5), podman 4.4 and
//!   later) are put before a container's own; `--map-gw` makes the
//!   gateway the host's loopback, `--map-host-loopback ADDR` makes ADDR
//!   it (pasta(1)), and `-T`/`--tcp-ns` or `-U`/`--udp-ns` with ports
//!   forward the container's own loopback ports to the host's (podman
//!   passes `-T none -U none` only when the options name neither). A
//!   cage cannot take these back, so a cage on pasta is refused.
//!
//! The files are those podman reads, in its order
//! ([`super::containers_conf_files`]); a later file's key replaces an
//! earlier one's.

use std::path::{Path, PathBuf};

use crate::cage::spec::Network;
use crate::error::LoopbackOpening;
use crate::settings::Env;

/// What opens the host's loopback to a cage on `network`, given the files'
/// texts in podman's order: the setting and its file; None when nothing does.
pub fn opening(network: Network, files: &[(PathBuf, String)]) -> Option<LoopbackOpening> {
    if network != Network::Pasta {
        return None;
    }
    let mut last: Option<(&PathBuf, Vec<String>)> = None;
    for (path, text) in files {
        let Ok(table) = text.parse::<toml::Table>() else {
            continue;
        };
        if let Some(opts) = table
            .get("network")
            .and_then(|n| n.get("pasta_options"))
            .and_then(|o| o.as_array())
        {
            let words = opts
                .iter()
                .filter_map(|o| o.as_str())
                .flat_map(|o| o.split([' ', '=']).map(str::to_string).collect::<Vec<_>>())
                .filter(|w| !w.is_empty())
                .collect();
            last = Some((path, words));
        }
    }
    let (path, words) = last?;
    let why = |option: &str| {
        Some(LoopbackOpening {
            file: path.clone(),
            option: option.to_string(),
        })
    };
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).map(String::as_str);
        match w.as_str() {
            "--map-gw" => return why("--map-gw"),
            "--map-host-loopback" => return why("--map-host-loopback"),
            "-T" | "--tcp-ns" | "-U" | "--udp-ns" if next != Some("none") => {
                return why(&format!("{w} {}", next.unwrap_or("")));
            }
            _ => {}
        }
    }
    None
}

/// The same, reading the files this machine's podman reads.
pub fn opening_here(
    network: Network,
    env: &Env,
    rootless: bool,
    home: &Path,
) -> Option<LoopbackOpening> {
    if network != Network::Pasta {
        return None;
    }
    opening(network, &read(env, rootless, home))
}

/// The containers.conf files podman reads, with their text, in its order.
pub fn read(env: &Env, rootless: bool, home: &Path) -> Vec<(PathBuf, String)> {
    super::containers_conf_files(env, home, rootless)
        .into_iter()
        .filter_map(|f| std::fs::read_to_string(&f).ok().map(|t| (f, t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(texts: &[&str]) -> Vec<(PathBuf, String)> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| (PathBuf::from(format!("/c/{i}.conf")), t.to_string()))
            .collect()
    }

    #[test]
    fn pasta_options_that_reach_the_hosts_loopback_are_found() {
        for opts in [
            r#"["--map-gw"]"#,
            r#"["-a", "10.0.0.2", "--map-gw"]"#,
            r#"["--map-host-loopback", "169.254.1.2"]"#,
            r#"["--map-host-loopback=169.254.1.2"]"#,
            r#"["-T", "7387"]"#,
            r#"["-T 7387"]"#,
            r#"["--tcp-ns", "auto"]"#,
            r#"["-U", "53"]"#,
        ] {
            let f = files(&[&format!("[network]\npasta_options = {opts}\n")]);
            let why = opening(Network::Pasta, &f).unwrap_or_else(|| panic!("{opts}"));
            assert_eq!(why.file, PathBuf::from("/c/0.conf"), "{why}");
            // slirp4netns and the bridge do not read pasta's options.
            assert_eq!(opening(Network::Slirp4netns, &f), None);
            assert_eq!(opening(Network::Bridge, &f), None);
        }
        for opts in [
            r#"[]"#,
            r#"["--no-map-gw"]"#,
            r#"["-T", "none", "-U", "none"]"#,
            r#"["--mtu", "1500"]"#,
        ] {
            let f = files(&[&format!("[network]\npasta_options = {opts}\n")]);
            assert_eq!(opening(Network::Pasta, &f), None, "{opts}");
        }
    }

    #[test]
    fn the_last_file_that_sets_the_key_decides() {
        let open = "[network]\npasta_options = [\"--map-gw\"]\n";
        let closed = "[network]\npasta_options = []\n";
        let other = "[engine]\nruntime = \"runc\"\n";
        assert!(opening(Network::Pasta, &files(&[closed, open, other])).is_some());
        assert_eq!(
            opening(Network::Pasta, &files(&[open, closed, other])),
            None
        );
        assert_eq!(
            opening(Network::Pasta, &files(&[other, "not toml ["])),
            None
        );
    }
}
