//! Tests of the command line that need no container: names, folders,
//! config errors, generated files.

use crate::common::*;

#[test]
fn completions_and_man_page_are_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (args, file) in [
        (
            vec!["completions", "bash"],
            "completions/shrooms-agent.bash",
        ),
        (vec!["completions", "zsh"], "completions/_shrooms-agent"),
        (
            vec!["completions", "fish"],
            "completions/shrooms-agent.fish",
        ),
        (vec!["man"], "man/shrooms-agent.1"),
    ] {
        let out = std::process::Command::new(bin())
            .args(&args)
            .output()
            .unwrap();
        assert!(out.status.success());
        let committed = std::fs::read(root.join(file)).unwrap_or_default();
        assert!(
            committed == out.stdout,
            "{file} is stale: run scripts/generate-docs and commit the result"
        );
        // The internal worker is hidden from --help; completions and the man
        // page must not offer it either.
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("build-worker"), "{file} offers build-worker");
        if args[0] == "completions" {
            assert!(text.contains("status"), "{file} lost `image status`");
        }
    }
}

/// A config whose memory or CPUs podman cannot use is refused when the
/// settings load (exit 2), saying the minimum and the key and the file:
/// a cage made with it would not start.
#[test]
fn config_limits_under_podmans_minimum_are_refused() {
    let w = World::new();
    for (extra, key, says) in [
        ("memory = \"1b\"", "memory", "minimum of 6m"),
        (
            "memory = \"16\"",
            "memory",
            "a number without a unit is bytes",
        ),
        ("cpus = 0.0001", "cpus", "minimum of 0.01"),
    ] {
        w.write_config(extra);
        let r = w.run(&["cage", "ls"]).code_is(2);
        let err = r.stderr();
        assert!(
            err.contains(&format!("config file {}: key `{key}`", w.config.display()))
                && err.contains(says)
                && (err.contains("like \"512m\"") || err.contains("like \"0.5\"")),
            "{}",
            r.explain()
        );
    }
}
