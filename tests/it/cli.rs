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
