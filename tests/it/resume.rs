//! After an interactive `cage run` of the real Claude Code, the last word on
//! the screen is the way back into the conversation in its cage, not
//! Claude Code's own `claude --resume ID`, which would run it on the
//! machine, outside the cage and its gateway.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::*;
use crate::gateway::{MACHINE_KEY, Mock, PI_QUIET, QUIET, world_for, write_pi_models};
use crate::nokey::{Screen, reaches_the_prompt};

/// The id in `... --resume ID` (the first word after it).
fn id_after<'a>(text: &'a str, words: &str) -> Option<&'a str> {
    let at = text.rfind(words)? + words.len();
    text[at..].split_whitespace().next()
}

/// Type a prompt, wait for the mock's answer, leave with `quit`, and wait
/// for `cage run` to end: the screen then.
fn say_hi_then_leave(screen: &Screen, quit: &str) -> String {
    screen.type_line("say hi");
    wait_until(
        "the mock's answer on the screen",
        Duration::from_secs(60),
        || screen.text().contains("hello from the mock"),
    );
    screen.type_line(quit);
    wait_until("cage run to end", Duration::from_secs(60), || screen.dead());
    let text = screen.text();
    eprintln!("the screen at the end:\n{text}");
    text
}

fn the_way_back_stays_in_the_cage(w: World) {
    let (claude, image) = real_claude();
    let mock = Mock::start();
    world_for(&w, &mock, &format!("[harness]\nclaude = \"{claude}\"\n"));
    let name = w.session("resume");
    let project = std::fs::canonicalize(w.dir(&format!("projects/{name}"))).unwrap();
    w.create(&name, &project, &["--image", &image]);
    let mut env = QUIET.to_vec();
    env.push(("ANTHROPIC_API_KEY", MACHINE_KEY));
    let args = ["cage", "run", &name, "--", "--dangerously-skip-permissions"];
    let socket = w.dir("tmux").join("sock");
    let screen = Screen::start(socket, &w.command_env(&args, &env));
    reaches_the_prompt(&screen, "the turn");
    let text = say_hi_then_leave(&screen, "/exit");
    // Claude Code's own line, then ours with the same conversation.
    let theirs = id_after(&text, "claude --resume ")
        .unwrap_or_else(|| panic!("no resume line of Claude Code's:\n{text}"));
    let ours_words = format!("shrooms-agent cage run {name} -- --resume ");
    let ours =
        id_after(&text, &ours_words).unwrap_or_else(|| panic!("no resume line of ours:\n{text}"));
    assert_eq!(ours, theirs, "{text}");
    assert!(
        text.rfind(&ours_words) > text.rfind("claude --resume "),
        "ours is not the last:\n{text}"
    );
    // The last line with anything on it is ours (tmux adds its own note of
    // the pane's end: "Pane is dead").
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.contains("Pane is dead"))
        .unwrap_or_default();
    assert!(last.contains(&ours_words), "{last:?}\n{text}");
    // It is the transcript this turn wrote, in the project's folder.
    let transcript: PathBuf = w
        .home
        .join(".claude/projects")
        .join(claude_folder(&project))
        .join(format!("{ours}.jsonl"));
    assert!(
        std::fs::read_to_string(&transcript).is_ok_and(|t| t.contains("say hi")),
        "{} is not this turn's transcript",
        transcript.display()
    );
}

#[test]
fn interactive_run_ends_with_the_way_back_in_the_cage() {
    the_way_back_stays_in_the_cage(World::new());
}

#[test]
fn interactive_run_ends_with_the_way_back_in_the_cage_rootless() {
    the_way_back_stays_in_the_cage(World::rootless());
}

/// pi's equivalent: after an interactive pi in its cage, the way back is
/// `-- --session ID`, the id of the session file the turn wrote.
#[test]
fn interactive_pi_ends_with_the_way_back_in_the_cage() {
    let w = World::new();
    let image = real_pi_image();
    let mock = Mock::start();
    world_for(&w, &mock, "");
    let models = serde_json::json!({"providers": {"corp": {
        "baseUrl": format!("{}/corp", mock.url()),
        "api": "anthropic-messages",
        "apiKey": MACHINE_KEY,
        "models": [{"id": "corp-mock", "name": "Corp mock", "reasoning": false}]
    }}});
    let agent = write_pi_models(&w, &models);
    let name = w.session("resumepi");
    let project = std::fs::canonicalize(w.dir(&format!("projects/{name}"))).unwrap();
    w.create(&name, &project, &["--harness", "pi", "--image", &image]);
    let args = [
        "cage",
        "run",
        &name,
        "--",
        "--provider",
        "corp",
        "--model",
        "corp-mock",
    ];
    let socket = w.dir("tmux").join("sock");
    let screen = Screen::start(socket, &w.command_env(&args, PI_QUIET));
    wait_until("pi's screen", Duration::from_secs(60), || {
        screen.text().contains("corp-mock")
    });
    let text = say_hi_then_leave(&screen, "/quit");
    let ours_words = format!("shrooms-agent cage run {name} -- --session ");
    let id =
        id_after(&text, &ours_words).unwrap_or_else(|| panic!("no resume line of ours:\n{text}"));
    let folder = agent.join("sessions").join(format!(
        "--{}--",
        project
            .to_str()
            .unwrap()
            .trim_start_matches('/')
            .replace('/', "-")
    ));
    let written: Vec<String> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        written.iter().any(|f| f.ends_with(&format!("_{id}.jsonl"))),
        "{id} is not a session file of {}: {written:?}",
        folder.display()
    );
}
