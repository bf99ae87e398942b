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

/// One damaged record does not hide the others from `cage ls`: it is listed
/// apart, with what is wrong and what to do; `cage show` of it says the
/// same (exit 1).
#[test]
fn a_damaged_record_is_listed_apart() {
    let w = World::new();
    w.write_config("cages = false");
    let good = w.session("good");
    let broken = w.session("broken");
    let sessions = w.state.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let dir = w.dir("good");
    let record = serde_json::json!({
        "version": 1, "name": good, "dir": dir, "harness": "claude",
        "created": 1, "cage": null
    });
    std::fs::write(sessions.join(format!("{good}.json")), record.to_string()).unwrap();
    std::fs::write(
        sessions.join(format!("{broken}.json")),
        "{\"version\": 1, \"na",
    )
    .unwrap();
    let listed = w.run(&["cage", "ls", "--json"]).ok().json();
    let names: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["session"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec![good.as_str()], "{listed:#}");
    assert_eq!(
        listed["damaged"][0]["session"],
        broken.as_str(),
        "{listed:#}"
    );
    let why = listed["damaged"][0]["error"].as_str().unwrap();
    assert!(why.contains("damaged") && why.contains("mend it"), "{why}");
    let text = w.run(&["cage", "ls"]).ok();
    assert!(
        text.stdout().contains("damaged records"),
        "{}",
        text.explain()
    );
    let r = w.run(&["cage", "show", &broken]).code_is(1);
    assert!(r.stderr().contains("mend it"), "{}", r.explain());
}
