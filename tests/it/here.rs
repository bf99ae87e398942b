//! Start where you stand: `cage create NAME` without `--dir` takes the
//! current folder (refused where `--dir` would be, saying how to give
//! another), and `cage run` without a name runs the one session whose
//! project is the current folder.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use crate::common::*;

/// Run the binary in `cwd`, as `World::run` does elsewhere.
fn run_in(w: &World, cwd: &Path, args: &[&str]) -> Run {
    let mut c = w.command(args);
    c.current_dir(cwd).stdin(Stdio::null());
    Run {
        what: format!("(in {}) shrooms-agent {}", cwd.display(), args.join(" ")),
        out: c.output().expect("run shrooms-agent"),
    }
}

fn create_and_run_here(w: World) {
    // A claude that says where it runs and with what.
    let program = w.file(
        "bin/fakeclaude",
        "#!/bin/sh\necho \"fake claude in $(pwd): $*\"\n",
    );
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
    w.write_config(&format!("[harness]\nclaude = \"{}\"", program.display()));
    let project = fs::canonicalize(w.dir("here-project")).unwrap();

    // Made in the current folder.
    let name = w.session("here");
    run_in(&w, &project, &["cage", "create", &name]).ok();
    assert_eq!(
        w.record(&name)["dir"],
        project.to_string_lossy().as_ref(),
        "{}",
        w.record(&name)
    );
    // Run from it without a name: that session.
    let r = run_in(&w, &project, &["cage", "run", "--", "--hello"]).ok();
    assert!(
        r.stdout()
            .contains(&format!("fake claude in {}: ", project.display()))
            && r.stdout().trim_end().ends_with("--hello"),
        "{}",
        r.explain()
    );

    // A folder below it is not its project: refused, naming what to do.
    let below = w.dir("here-project/src");
    let r = run_in(&w, &below, &["cage", "run"]).code_is(125);
    assert!(r.stderr().contains("no session has"), "{}", r.explain());
    assert!(r.stderr().contains("cage ls"), "{}", r.explain());
    assert!(!r.stdout().contains("fake claude"), "{}", r.explain());

    // Two sessions of the folder: refused, naming both.
    let second = w.session("here2");
    w.create(&second, &project, &[]);
    let r = run_in(&w, &project, &["cage", "run"]).code_is(125);
    for n in [&name, &second] {
        assert!(r.stderr().contains(n.as_str()), "{}", r.explain());
    }
    assert!(!r.stdout().contains("fake claude"), "{}", r.explain());

    // The home folder and a shared folder are refused as with --dir, and
    // the message says how to give another; nothing is made.
    for (cwd, why) in [
        (w.home.clone(), "your home directory"),
        ("/tmp".into(), "every user of this machine shares"),
    ] {
        let refused = w.session("herebad");
        let r = run_in(&w, &cwd, &["cage", "create", &refused]).code_is(2);
        let err = r.stderr();
        assert!(err.contains(why), "{}", r.explain());
        assert!(
            err.contains("pass --dir") && err.contains("or cd to it"),
            "{}",
            r.explain()
        );
        assert!(!w.record_path(&refused).exists(), "{}", r.explain());
        assert!(w.containers_of(&refused).is_empty());
    }
}

#[test]
fn create_and_run_where_you_stand() {
    create_and_run_here(World::new());
}

#[test]
fn create_and_run_where_you_stand_rootless() {
    create_and_run_here(World::rootless());
}
