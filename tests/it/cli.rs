//! Tests of the command line that need no container: names, folders,
//! config errors, generated files.

use crate::common::*;

#[test]
fn completions_and_man_pages_are_current() {
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
    }
    // Every page, and no page of a command that is gone; none of the
    // internal commands, hidden from --help, has one.
    // A folder that is not there yet: `man --dir` makes it.
    let fresh = std::env::temp_dir()
        .join(format!("shrooms-it-man-{}", std::process::id()))
        .join("man1");
    let out = std::process::Command::new(bin())
        .args(["man", "--dir"])
        .arg(&fresh)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show_output(&out));
    let list = |d: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".1"))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        list(&fresh),
        list(&root.join("man")),
        "man/ is stale: run scripts/generate-docs and commit the result"
    );
    for page in list(&fresh) {
        let made = std::fs::read(fresh.join(&page)).unwrap();
        let committed = std::fs::read(root.join("man").join(&page)).unwrap();
        assert!(
            made == committed,
            "man/{page} is stale: run scripts/generate-docs and commit the result"
        );
        let text = String::from_utf8_lossy(&made);
        for hidden in ["build-worker", "gateway-listen", "watch-turn"] {
            assert!(!text.contains(hidden), "man/{page} offers {hidden}");
        }
    }
    let _ = std::fs::remove_dir_all(fresh.parent().unwrap());
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
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec![good.as_str()], "{listed:#}");
    assert_eq!(listed["damaged"][0]["name"], broken.as_str(), "{listed:#}");
    let why = listed["damaged"][0]["error"].as_str().unwrap();
    assert!(
        why.contains("damaged") && why.contains("Put it back"),
        "{why}"
    );
    let text = w.run(&["cage", "ls"]).ok();
    assert!(
        text.stdout().contains("damaged records"),
        "{}",
        text.explain()
    );
    let r = w.run(&["cage", "show", &broken]).code_is(1);
    assert!(r.stderr().contains("Put it back"), "{}", r.explain());
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

/// A relative SHROOMS_AGENT_STATE_DIR, SHROOMS_AGENT_CONFIG, XDG_CONFIG_HOME
/// or XDG_DATA_HOME is refused by name (exit 2), and nothing is made where
/// it points, from where the command runs.
#[test]
fn relative_path_variables_are_refused_by_name() {
    let w = World::new();
    let cwd = w.dir("cwd");
    let no_config = w.root.join("none.toml").to_string_lossy().into_owned();
    let abs_state = w.state.to_string_lossy().into_owned();
    for (var, others) in [
        ("SHROOMS_AGENT_STATE_DIR", vec![]),
        ("SHROOMS_AGENT_CONFIG", vec![]),
        // The XDG folders decide only where the tool's own variables are unset.
        ("XDG_CONFIG_HOME", vec![("SHROOMS_AGENT_CONFIG", "")]),
        ("XDG_DATA_HOME", vec![("SHROOMS_AGENT_STATE_DIR", "")]),
    ] {
        let mut env: Vec<(&str, &str)> = vec![
            ("SHROOMS_AGENT_CONFIG", &no_config),
            ("SHROOMS_AGENT_STATE_DIR", &abs_state),
        ];
        env.extend(others);
        env.push((var, "rel"));
        for args in [vec!["cage", "ls"], vec!["doctor"]] {
            let mut c = w.command_env(&args, &env);
            c.current_dir(&cwd).stdin(std::process::Stdio::null());
            let r = Run {
                what: format!("{var}=rel shrooms-agent {}", args.join(" ")),
                out: c.output().unwrap(),
            }
            .code_is(2);
            assert!(
                r.stderr()
                    .contains(&format!("{var} is \"rel\", a relative path"))
                    && r.stderr().contains("set it to an absolute path"),
                "{}",
                r.explain()
            );
        }
    }
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);
}

/// A `podman` the config names that is empty, missing or cannot run is the
/// config's error (exit 2, naming the key and the file, nothing made), not
/// "this machine has no podman"; for `doctor` it is one failing check.
#[test]
fn a_configured_podman_that_cannot_run_is_a_config_error() {
    let w = World::new();
    let plain = w.file("not-a-program", "");
    let project = w.dir("p");
    for (value, why) in [
        (String::new(), "is empty".to_string()),
        (
            "/nonexistent/podman".to_string(),
            "/nonexistent/podman does not exist".to_string(),
        ),
        (
            plain.display().to_string(),
            format!("{} is not executable", plain.display()),
        ),
    ] {
        w.write_config(&format!("podman = \"{value}\""));
        let name = w.session("badpodman");
        let said = format!(
            "config file {}: key `podman`: {why}: give the podman program's absolute path",
            w.config.display()
        );
        let r = w
            .run(&["cage", "create", &name, "--dir", project.to_str().unwrap()])
            .code_is(2);
        assert!(r.stderr().contains(&said), "{}", r.explain());
        assert!(!r.stderr().contains("has no podman"), "{}", r.explain());
        assert!(!w.record_path(&name).exists());
        // doctor: the bad config is one failing check, and the others
        // still run (with the defaults: podman found on PATH).
        let r = w.run(&["doctor"]).code_is(1);
        let out = r.stdout();
        assert!(
            out.lines()
                .any(|l| l.starts_with("FAIL  config    ") && l.contains(&said)),
            "{}",
            r.explain()
        );
        assert!(
            out.lines().any(|l| l.starts_with("pass  podman    ")),
            "{}",
            r.explain()
        );
    }
}

/// `cage create` starts no throwaway container of the image (it used to
/// run `sleep 0` in one, to check the image had `sleep`): with a podman
/// whose every `run` fails, a create still succeeds.
#[test]
fn create_runs_no_container_of_the_image() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let fake = w.file(
        "bin/podman",
        &format!(
            "#!/bin/sh\n\
             if [ \"$1\" = run ]; then\n\
               echo 'Error: a podman run at create' >&2\n\
               exit 126\n\
             fi\n\
             exec '{}' \"$@\"\n",
            podman_program()
        ),
    );
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.write_config(&format!("podman = \"{}\"", fake.display()));
    let name = w.session("norun");
    let d = w.dir("norun");
    w.run(&["cage", "create", &name, "--dir", d.to_str().unwrap()])
        .ok();
    assert_eq!(w.containers_of(&name).len(), 1);
}

/// `--mesh` only chooses the shared folder's set: without `--shared`, or
/// with `--sealed`, it is refused (exit 2) and nothing is made.
#[test]
fn mesh_without_the_shared_folder_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let token = w.file("token", "t\n");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let d = w.dir("p");
    let dir = d.to_str().unwrap();
    let tok = token.to_str().unwrap();
    for (extra, says) in [
        (vec!["--mesh", "home"], "does nothing without --shared"),
        (
            vec!["--mesh", "home", "--dry-run"],
            "does nothing without --shared",
        ),
        (
            vec!["--mesh", "home", "--sealed", "--sealed-token", tok],
            "a sealed cage has no shared folder",
        ),
    ] {
        let name = w.session("mesh");
        let mut args = vec!["cage", "create", name.as_str(), "--dir", dir];
        args.extend(extra);
        let r = w.run(&args).code_is(2);
        assert!(
            r.stderr().contains(&format!(
                "--mesh only chooses the shared folder's set of meshes, and {says}"
            )),
            "{}",
            r.explain()
        );
        assert!(!w.record_path(&name).exists());
        assert!(w.containers_of(&name).is_empty());
    }
}

/// With `--json`, a usage error (an unknown flag, a missing argument, an
/// unknown command) still prints the error object every other error gives
/// on stdout, `{"error", "exit_code": 2}`, and clap's text on stderr; exit
/// 2. Without `--json`, stdout stays empty; `--help` is help, exit 0.
#[test]
fn usage_errors_with_json_print_json() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin())
            .args(args)
            .env("HOME", "/nonexistent-home")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        Run {
            what: format!("shrooms-agent {}", args.join(" ")),
            out,
        }
    };
    for (args, says) in [
        (
            vec!["cage", "ls", "--json", "--nope"],
            "unexpected argument '--nope' found",
        ),
        (
            vec!["--json", "cage", "create"],
            "the following required arguments were not provided: <NAME>",
        ),
        (
            vec!["cage", "lss", "--json"],
            "unrecognized subcommand 'lss'",
        ),
        (
            vec!["cage", "--json"],
            "'shrooms-agent cage' requires a subcommand",
        ),
        // clap shows the help here, not an error line.
        (vec!["--json", "cage"], "a command is missing"),
    ] {
        let r = run(&args).code_is(2);
        let j = r.json();
        assert_eq!(j["exit_code"], 2, "{}", r.explain());
        let error = j["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with(says) && error.contains("; usage: shrooms-agent"),
            "{}",
            r.explain()
        );
        assert!(r.stderr().contains("Usage: "), "{}", r.explain());
    }
    let r = run(&["cage", "ls", "--nope"]).code_is(2);
    assert!(r.stdout().is_empty(), "{}", r.explain());
    assert!(r.stderr().contains("'--nope'"), "{}", r.explain());
    // After `--` it is the command's, not ours.
    let r = run(&["cage", "exec", "--nope", "s", "--", "--json"]).code_is(125);
    assert!(r.stdout().is_empty(), "{}", r.explain());
    let r = run(&["--json", "--help"]).ok();
    assert!(
        r.stdout().contains("Usage: shrooms-agent"),
        "{}",
        r.explain()
    );
}
