//! Updating shrooms-agent under existing cages: the program moves (a
//! reinstall elsewhere, `cargo install` after a build from a checkout, the
//! Debian package after either) and is replaced by a new build, and a cage
//! made before, running all along, still gets the shrooms tools at its next
//! turn, and starts again once stopped, without `cage move`. The cage runs
//! the copy the program keeps in the state folder's `tools/`, never the
//! program at the path it had when the cage was made.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::*;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A copy of the binary under test at `rel` in the world, as an install
/// puts one there (a file of its own: its own inode and times).
fn install(w: &World, rel: &str) -> PathBuf {
    let at = w.root.join(rel);
    fs::create_dir_all(at.parent().unwrap()).unwrap();
    fs::copy(bin(), &at).unwrap();
    fs::set_permissions(&at, fs::Permissions::from_mode(0o755)).unwrap();
    w.chown_all();
    at
}

fn run_with(w: &World, program: &Path, args: &[&str]) -> Run {
    let mut c = w.command_of(program, args, &[]);
    c.stdin(std::process::Stdio::null());
    Run {
        what: format!("{} {}", program.display(), args.join(" ")),
        out: output_of(&mut c),
    }
}

/// What the fake harness printed: the program it was given as the shrooms
/// tools, and what that program said to `--version` in the cage.
fn tools_of(r: &Run) -> (String, String) {
    let out = r.stdout();
    let line = |tag: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(tag))
            .unwrap_or_else(|| panic!("no {tag:?} line:\n{}", r.explain()))
            .to_string()
    };
    (line("tools: "), line("version: "))
}

fn keeps_its_tools(w: World) {
    let (_, image) = real_claude();
    // A harness that runs, in the cage, the program `cage run` hands it as
    // its MCP server; when the project holds `hold`, only once the test
    // has made `go` there (the update happens while it waits).
    let claude = w.file(
        "harness/claude",
        "#!/bin/sh\n\
         for a in \"$@\"; do\n\
           case $a in --mcp-config=*)\n\
             cmd=$(printf '%s' \"$a\" | sed 's/.*\"command\":\"\\([^\"]*\\)\".*/\\1/');;\n\
           esac\n\
         done\n\
         i=0\n\
         while [ -e hold ] && [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n\
         echo \"tools: $cmd\"\n\
         echo \"version: $(\"$cmd\" --version 2>&1)\"\n",
    );
    fs::set_permissions(&claude, fs::Permissions::from_mode(0o755)).unwrap();
    w.write_config(&format!("[harness]\nclaude = \"{}\"", claude.display()));
    let want_version = format!("shrooms-agent {}", env!("CARGO_PKG_VERSION"));

    let first = install(&w, "opt-a/shrooms-agent");
    let name = w.session("update");
    let project = w.dir(&format!("projects/{name}"));
    run_with(
        &w,
        &first,
        &[
            "cage",
            "create",
            &name,
            "--dir",
            &s(&project),
            "--image",
            &image,
        ],
    )
    .ok();
    let container = w.container(&name);

    // A turn of the first program; while it runs, the program moves (its
    // folder goes) and a new build takes its place.
    fs::write(project.join("hold"), "").unwrap();
    w.chown_all();
    let mut c = w.command_of(&first, &["cage", "run", &name], &[]);
    c.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let turn = c.spawn().unwrap();
    wait_until(
        "the turn's cage runs",
        std::time::Duration::from_secs(60),
        || w.container_state(&container).as_deref() == Some("running"),
    );
    let moved = w.root.join("opt-b/shrooms-agent");
    fs::create_dir_all(moved.parent().unwrap()).unwrap();
    fs::rename(&first, &moved).unwrap();
    fs::remove_dir(first.parent().unwrap()).unwrap();
    fs::remove_file(&moved).unwrap();
    let replaced = install(&w, "opt-b/shrooms-agent");
    fs::write(project.join("go"), "").unwrap();
    let r = finish("cage run (the first program)", turn).ok();
    let (tools, version) = tools_of(&r);
    assert_eq!(version, want_version, "{}", r.explain());
    let tools_dir = s(&w.state.join("tools"));
    assert!(
        tools.starts_with(&format!("{tools_dir}/shrooms-agent-")),
        "{}",
        r.explain()
    );
    fs::remove_file(project.join("hold")).unwrap();

    // The next turn, of the new program: the cage made by the first one,
    // not made again, starts (nothing it mounts was where the first
    // program was) and gets the new program, under a name of its own.
    let r = run_with(&w, &replaced, &["cage", "run", &name]).ok();
    let (new_tools, version) = tools_of(&r);
    assert_eq!(version, want_version, "{}", r.explain());
    assert!(
        new_tools.starts_with(&format!("{tools_dir}/shrooms-agent-")) && new_tools != tools,
        "{}",
        r.explain()
    );
    assert!(!r.stderr().contains("not given"), "{}", r.explain());
    assert_eq!(w.container(&name), container, "the cage was made again");
    // The link for what is configured by hand leads to it.
    let link = w.state.join("tools/shrooms-agent");
    assert_eq!(
        fs::canonicalize(&link).unwrap(),
        Path::new(&new_tools),
        "{}",
        r.explain()
    );
}

#[test]
fn a_cage_keeps_its_tools_when_the_program_moves_and_is_replaced() {
    keeps_its_tools(World::new());
}

#[test]
fn a_cage_keeps_its_tools_when_the_program_moves_and_is_replaced_rootless() {
    keeps_its_tools(World::rootless());
}
