//! What a person meets in a shell besides the commands: completion in
//! bash, zsh and fish, driven in each real shell with the scripts
//! `completions SHELL` prints; and the man pages, rendered by man(1).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

/// The subcommands of `cage` a Tab offers (and clap's own `help`).
const CAGE_WORDS: [&str; 16] = [
    "create",
    "start",
    "stop",
    "rm",
    "move",
    "limits",
    "history",
    "exec",
    "run",
    "ls",
    "show",
    "accept-caged",
    "bring",
    "prune",
    "rename",
    "help",
];

/// The environment the shells run in: the world's folders, and a PATH
/// with `shrooms-agent` on it (the scripts call it by name).
fn shell_env(w: &World) -> Vec<(String, String)> {
    let dir = w.dir("bin");
    let link = dir.join("shrooms-agent");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    vec![
        ("HOME".into(), w.home.to_string_lossy().into_owned()),
        (
            "SHROOMS_AGENT_CONFIG".into(),
            w.config.to_string_lossy().into_owned(),
        ),
        (
            "SHROOMS_AGENT_STATE_DIR".into(),
            w.state.to_string_lossy().into_owned(),
        ),
        (
            "PATH".into(),
            format!("{}:/usr/local/bin:/usr/bin:/bin", dir.display()),
        ),
        ("TERM".into(), "xterm".into()),
    ]
}

/// A folder with a file in it, as the working folder: the old scripts
/// offered the files of the working folder instead of subcommands.
fn cwd(w: &World) -> PathBuf {
    let d = w.dir("cwd");
    std::fs::write(d.join("a-file-here"), "").unwrap();
    d
}

fn shell(program: &str, env: &[(String, String)], cwd: &Path) -> Command {
    let mut c = Command::new(program);
    c.env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd);
    c
}

/// bash: the function the script registers for `shrooms-agent` (as
/// `complete -p` reports it), called as bash's programmable completion
/// calls it for `line` with the cursor at its end.
fn bash(env: &[(String, String)], cwd: &Path, line: &str) -> Vec<String> {
    let script = r#"
        source /usr/share/bash-completion/bash_completion
        source <(shrooms-agent completions bash)
        f=$(complete -p shrooms-agent | sed -E 's/.* -F ([^ ]+) .*/\1/')
        read -ra COMP_WORDS <<< "$LINE"
        [[ $LINE == *" " ]] && COMP_WORDS+=("")
        COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
        COMP_LINE=$LINE COMP_POINT=${#LINE} COMP_TYPE=9
        "$f" shrooms-agent "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf '%s\n' "${COMPREPLY[@]}"
    "#;
    let out = shell("bash", env, cwd)
        .args(["--norc", "--noprofile", "-c", script])
        .env("LINE", line)
        .output()
        .expect("bash (scripts/setup-host installs it)");
    assert!(out.status.success(), "{}", show_output(&out));
    words(&String::from_utf8_lossy(&out.stdout))
}

/// fish: its own completion engine, asked with `complete --do-complete`.
fn fish(env: &[(String, String)], cwd: &Path, line: &str) -> Vec<String> {
    let out = shell("fish", env, cwd)
        .args([
            "--no-config",
            "-c",
            "shrooms-agent completions fish | source; complete --do-complete \"$LINE\"",
        ])
        .env("LINE", line)
        .output()
        .expect("fish (scripts/setup-host installs it)");
    assert!(out.status.success(), "{}", show_output(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split('\t').next())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// zsh: an interactive zsh on a terminal of tmux's, with compinit and the
/// script loaded; `line` typed, then Tab; the words zsh lists under it.
fn zsh(env: &[(String, String)], cwd: &Path, line: &str) -> Vec<String> {
    let socket = cwd.join(format!("tmux-{}", line.len()));
    let tmux = || {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&socket);
        c
    };
    let mut argv = vec!["env".to_string(), "-i".into()];
    argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    argv.extend(["zsh".into(), "-f".into()]);
    let st = tmux()
        .args(["new-session", "-d", "-x", "200", "-y", "50", "-c"])
        .arg(cwd)
        .arg("--")
        .args(&argv)
        .status()
        .expect("tmux");
    assert!(st.success(), "tmux new-session");
    let screen = || {
        let out = tmux().args(["capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let wait = |what: &str, f: &dyn Fn(&str) -> bool| {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let s = screen();
            if f(&s) {
                return s;
            }
            assert!(Instant::now() < end, "zsh: no {what}:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let _ = tmux()
        .args([
            "send-keys",
            "autoload -U compinit && compinit -u && source <(shrooms-agent completions zsh) && echo LOA''DED",
            "Enter",
        ])
        .status();
    wait("LOADED", &|s| s.lines().any(|l| l == "LOADED"));
    let _ = tmux().args(["send-keys", line, "Tab"]).status();
    // The list is drawn below the line once the program answered.
    let s = wait("list of candidates", &|s| {
        s.lines()
            .skip_while(|l| !l.contains(line.trim_end()))
            .nth(1)
            .is_some_and(|l| !l.trim().is_empty())
    });
    let _ = tmux().arg("kill-server").status();
    let listed: String = s
        .lines()
        .skip_while(|l| !l.contains(line.trim_end()))
        .skip(1)
        .map(|l| {
            // `exec -- Run a command ...`: the candidate is before ` -- `.
            let l = l.split(" -- ").next().unwrap_or("");
            format!("{l}\n")
        })
        .collect();
    words(&listed)
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// `cage <Tab>` offers `cage`'s subcommands (not files, not the hidden
/// `watch-turn`), and `cage exec <Tab>` the sessions of the state folder,
/// in bash, zsh and fish.
#[test]
fn completion_offers_subcommands_and_sessions_in_bash_zsh_and_fish() {
    let w = World::new();
    let name = w.session("tab");
    let dir = w.dir("tab-project");
    w.create(&name, &dir, &[]);
    let env = shell_env(&w);
    let cwd = cwd(&w);
    let mut cage: Vec<String> = CAGE_WORDS.iter().map(|s| s.to_string()).collect();
    cage.extend(["--json".into(), "--help".into(), "--on".into()]);
    let cage = sorted(cage);
    type Complete = fn(&[(String, String)], &Path, &str) -> Vec<String>;
    for (sh, complete) in [("bash", bash as Complete), ("fish", fish), ("zsh", zsh)] {
        let got = sorted(complete(&env, &cwd, "shrooms-agent cage "));
        assert_eq!(got, cage, "{sh}: shrooms-agent cage <Tab>");
        let got = complete(&env, &cwd, "shrooms-agent cage exec ");
        assert!(
            got.contains(&name) && got.contains(&"--join".to_string()),
            "{sh}: shrooms-agent cage exec <Tab> offers {got:?}, not the session {name}"
        );
        assert!(
            !got.iter().any(|g| g.contains("a-file-here")),
            "{sh}: files offered: {got:?}"
        );
        let got = complete(&env, &cwd, "shrooms-agent image ");
        assert!(
            got.contains(&"status".to_string()) && !got.iter().any(|g| g == "build-worker"),
            "{sh}: shrooms-agent image <Tab> offers {got:?}"
        );
    }
    // A session name begun is finished.
    let begun = &name[..name.len() - 2];
    let got = bash(&env, &cwd, &format!("shrooms-agent cage show {begun}"));
    assert_eq!(got, vec![name.clone()]);
}

/// Each man page renders without a warning from man(1) and groff, and
/// every page a page names (SEE ALSO, SUBCOMMANDS) is there.
#[test]
fn man_pages_render_and_name_only_pages_that_exist() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    let pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".1"))
        .collect();
    assert!(pages.len() > 20, "{pages:?}");
    for page in &pages {
        let path = dir.join(page);
        let out = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(&path)
            .env("MANWIDTH", "80")
            .env("PAGER", "cat")
            .output()
            .expect("man (man-db; scripts/setup-host installs it)");
        assert!(out.status.success(), "{page}: {}", show_output(&out));
        assert!(
            out.stderr.is_empty(),
            "{page} renders with warnings:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rendered = String::from_utf8_lossy(&out.stdout);
        let text = std::fs::read_to_string(&path).unwrap();
        // Every page it names: `shrooms-agent-cage(1)`, `\fBshrooms-agent\fR(1)`.
        let plain = text
            .replace("\\-", "-")
            .replace("\\fB", "")
            .replace("\\fR", "");
        let named: Vec<&str> = plain
            .match_indices("(1)")
            .filter_map(|(i, _)| {
                let before = &plain[..i];
                let start = before
                    .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .map_or(0, |s| s + 1);
                let word = &before[start..];
                word.starts_with("shrooms-agent").then_some(word)
            })
            .collect();
        for n in named {
            assert!(
                dir.join(format!("{n}.1")).exists(),
                "{page} names {n}(1), which has no page"
            );
        }
        assert!(text.contains("SEE ALSO"), "{page} has no SEE ALSO");
        assert!(
            rendered.lines().count() > 5,
            "{page} renders as nothing:\n{rendered}"
        );
    }
    let top = std::fs::read_to_string(dir.join("shrooms-agent.1")).unwrap();
    for section in [
        "CONFIGURATION",
        "FILES",
        "ENVIRONMENT",
        "EXIT STATUS",
        "EXAMPLES",
    ] {
        assert!(top.contains(section), "the top page has no {section}");
    }
    // The top page's SEE ALSO names every other page.
    let see_also = top
        .split("SEE ALSO")
        .nth(1)
        .unwrap_or("")
        .replace("\\-", "-");
    for page in pages.iter().filter(|p| *p != "shrooms-agent.1") {
        let name = page.trim_end_matches(".1");
        assert!(
            see_also.contains(&format!("{name}\\fR(1)")),
            "the top page's SEE ALSO leaves out {name}"
        );
    }
}
