//! The man pages: one per command, rendered by clap_mangen from the command
//! definition, so a page says what `--help` says. The top page adds what no
//! single command holds: CONFIGURATION (every key and its default, from
//! `settings::config_keys`), FILES, ENVIRONMENT, EXIT STATUS and EXAMPLES;
//! every page ends with SEE ALSO, naming only pages made here.

use clap::CommandFactory;
use roff::{Roff, bold, italic, roman};

use crate::error::{Error, Result};
use crate::face::cli::Cli;

/// A man page: its file name (`shrooms-agent-cage-exec.1`) and its roff.
pub struct Page {
    pub file: String,
    pub text: Vec<u8>,
}

/// The line roff's writer puts before every rendering: kept once, at the top.
const PREAMBLE: &str = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";

/// Every page: the top one first, then one per visible subcommand, at any
/// depth (hidden ones, for the program's own use, have none).
pub fn pages() -> Result<Vec<Page>> {
    let mut top = Cli::command().disable_help_subcommand(true);
    top.build();
    let mut commands = Vec::new();
    collect(&top, &mut commands);
    let names: Vec<String> = commands.iter().map(page_name).collect();
    let mut out = vec![Page {
        file: format!("{}.1", page_name(&top)),
        text: top_page(&top, &names)?,
    }];
    for cmd in &commands {
        out.push(Page {
            file: format!("{}.1", page_name(cmd)),
            text: sub_page(cmd)?,
        });
    }
    Ok(out)
}

/// The page of the top command alone (`shrooms-agent man`).
pub fn top() -> Result<Vec<u8>> {
    Ok(pages()?.remove(0).text)
}

fn collect(cmd: &clap::Command, out: &mut Vec<clap::Command>) {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        out.push(sub.clone());
        collect(sub, out);
    }
}

/// `shrooms-agent-cage-exec`: clap's display name once built.
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

fn rendered(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Result<String> {
    let mut buf = Vec::new();
    f(&mut buf).map_err(|e| Error::act("rendering a man page", &e))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    Ok(text.strip_prefix(PREAMBLE).unwrap_or(&text).to_string())
}

fn roff_text(r: &Roff) -> String {
    let text = r.render();
    text.strip_prefix(PREAMBLE).unwrap_or(&text).to_string()
}

fn sub_page(cmd: &clap::Command) -> Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut text = PREAMBLE.to_string();
    text.push_str(&rendered(|w| man.render(w))?);
    let mut r = Roff::new();
    r.control("SH", ["SEE ALSO"]);
    // The command above this one, and the top page with the configuration,
    // the exit status and the files.
    let name = page_name(cmd);
    // The display name is the parent's with `-` and this command's own name
    // after it; a command's name may hold a hyphen itself (accept-caged).
    let parent = name
        .strip_suffix(cmd.get_name())
        .and_then(|p| p.strip_suffix('-'))
        .filter(|p| !p.is_empty())
        .unwrap_or("shrooms-agent");
    let mut seen = vec![parent.to_string()];
    if parent != "shrooms-agent" {
        seen.push("shrooms-agent".into());
    }
    see_also(&mut r, &seen);
    text.push_str(&roff_text(&r));
    Ok(text.into_bytes())
}

fn see_also(r: &mut Roff, names: &[String]) {
    let mut inlines = Vec::new();
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            inlines.push(roman(", "));
        }
        inlines.push(bold(n.clone()));
        inlines.push(roman("(1)"));
    }
    r.text(inlines);
}

fn top_page(top: &clap::Command, names: &[String]) -> Result<Vec<u8>> {
    let man = clap_mangen::Man::new(top.clone());
    let mut text = PREAMBLE.to_string();
    text.push_str(&rendered(|w| man.render_title(w))?);
    text.push_str(&rendered(|w| man.render_name_section(w))?);
    text.push_str(&rendered(|w| man.render_synopsis_section(w))?);
    text.push_str(&rendered(|w| man.render_description_section(w))?);
    text.push_str(&rendered(|w| man.render_options_section(w))?);
    text.push_str(&rendered(|w| man.render_subcommands_section(w))?);
    let mut r = Roff::new();
    configuration(&mut r);
    files(&mut r);
    environment(&mut r);
    exit_status(&mut r);
    examples(&mut r);
    r.control("SH", ["SEE ALSO"]);
    let mut all = names.to_vec();
    all.sort();
    see_also(&mut r, &all);
    text.push_str(&roff_text(&r));
    text.push_str(&rendered(|w| man.render_version_section(w))?);
    Ok(text.into_bytes())
}

fn para(r: &mut Roff, text: &str) {
    r.control("PP", []);
    r.text([roman(text)]);
}

fn item(r: &mut Roff, term: Vec<roff::Inline>, text: &str) {
    r.control("TP", []);
    r.text(term);
    r.text([roman(text)]);
}

fn configuration(r: &mut Roff) {
    r.control("SH", ["CONFIGURATION"]);
    r.text([roman(
        "TOML, at $SHROOMS_AGENT_CONFIG, else $XDG_CONFIG_HOME/shrooms-agent/config.toml, \
         else ~/.config/shrooms-agent/config.toml (each an absolute path). Every key is \
         optional; an unknown key or a bad value is an error (exit 2) that names the key and \
         the file. A key written a.b is the key b of the table [a].",
    )]);
    for k in crate::settings::config_keys() {
        item(
            r,
            vec![
                bold(k.key),
                roman(" (default: "),
                italic(k.default),
                roman(")"),
            ],
            k.meaning,
        );
    }
}

fn files(r: &mut Roff) {
    r.control("SH", ["FILES"]);
    let state = "$SHROOMS_AGENT_STATE_DIR, else $XDG_DATA_HOME/shrooms-agent, else \
                 ~/.local/share/shrooms-agent";
    item(
        r,
        vec![italic("~/.config/shrooms-agent/config.toml")],
        "The config file (see CONFIGURATION).",
    );
    item(
        r,
        vec![italic("~/.local/share/shrooms-agent/")],
        &format!("The state folder ({state}; mode 0700): what follows is in it."),
    );
    for (path, what) in [
        ("sessions/NAME.json", "a session's record"),
        (
            "sessions/NAME.lock",
            "the lock a command holds while it uses the session (the turn of `cage exec` and `cage run`)",
        ),
        (
            "sessions/NAME.history.jsonl",
            "its history (`cage history`)",
        ),
        (
            "cages/CONTAINER.env",
            "the cage's environment, written at each exec (mode 0600)",
        ),
        (
            "cages/CONTAINER/",
            "the cage's private harness home, settings copies and turn.log",
        ),
        ("uploads/", "files sent to sessions"),
        (
            "images/",
            "image builds: their locks, last results and logs",
        ),
        (
            "sealed-claude-token",
            "the machine's sealed token, unless the config names another",
        ),
        (
            "state-id",
            "this state folder's identity, on the label of every container it makes",
        ),
        (
            "podman-facts.json",
            "what podman said of itself, kept until podman or its configuration changes",
        ),
    ] {
        item(r, vec![italic(path)], what);
    }
    item(
        r,
        vec![italic("~/shrooms-outbox/SESSION/")],
        "A sealed session's outbox.",
    );
}

fn environment(r: &mut Roff) {
    r.control("SH", ["ENVIRONMENT"]);
    for (name, what) in [
        (
            "SHROOMS_AGENT_CONFIG",
            "The config file (an absolute path).",
        ),
        (
            "SHROOMS_AGENT_STATE_DIR",
            "The state folder (an absolute path).",
        ),
        (
            "XDG_CONFIG_HOME, XDG_DATA_HOME",
            "Where the config file and the state folder are when the two above are unset.",
        ),
        (
            "XDG_RUNTIME_DIR",
            "Where serve makes its Unix socket (shrooms-agent/serve-PORT.sock).",
        ),
        (
            "HOME",
            "The home directory: the default folders, and the harness settings a cage is given a copy of.",
        ),
        (
            "PATH",
            "Where podman and the harness programs are found, unless the config names them.",
        ),
        (
            "SHROOMS_AGENT_NIX_ROOT",
            "The nix store's root that --nix mounts (default /nix).",
        ),
        (
            "SHROOMS_AGENT_COMPLETE",
            "Set by the shell completion scripts (`completions SHELL`) when they ask the program \
             for candidates; not for use by hand.",
        ),
    ] {
        item(r, vec![bold(name)], what);
    }
}

fn exit_status(r: &mut Roff) {
    r.control("SH", ["EXIT STATUS"]);
    for (code, what) in [
        ("0", "Done (for cage exec and cage run, see below)."),
        ("1", "Failed: podman, the file system, the machine."),
        (
            "2",
            "Bad input: a bad name, folder, flag or config, a session name that is \
             taken, or a pi session's image without pi; nothing was changed.",
        ),
        ("3", "Busy: another command holds the session."),
        (
            "4",
            "Not ready yet: an image is being built; run it again in a few minutes.",
        ),
    ] {
        item(r, vec![bold(code)], what);
    }
    para(
        r,
        "cage exec and cage run exit with the status of the command they ran (128 + N when \
         signal N ended it), so their own failures take codes of their own, as podman run, \
         docker run and env(1) do:",
    );
    for (code, what) in [
        (
            "125",
            "shrooms-agent failed or refused: busy, bad input, no such session, a cage not \
             running for --join, podman failing; stderr and --json (\"kind\") say which.",
        ),
        ("126", "The command was found but could not be run."),
        ("127", "The command was not found in the cage."),
    ] {
        item(r, vec![bold(code)], what);
    }
}

fn examples(r: &mut Roff) {
    r.control("SH", ["EXAMPLES"]);
    for (cmd, what) in [
        (
            "shrooms-agent cage create webapp --dir ~/src/webapp",
            "Record a session for a project and make its cage.",
        ),
        (
            "shrooms-agent cage run webapp",
            "Run its harness (Claude Code) in the cage; the cage stops when it ends.",
        ),
        ("shrooms-agent cage exec webapp", "A shell in the cage."),
        (
            "shrooms-agent cage exec webapp sh -c 'git status; ls'",
            "A command in the cage; no -- is needed.",
        ),
        (
            "shrooms-agent cage exec --join webapp top",
            "Watch a running turn from a second terminal, without taking it.",
        ),
        ("shrooms-agent cage ls", "The sessions and their cages."),
        (
            "mkdir -p ~/.local/share/bash-completion/completions && shrooms-agent completions bash > ~/.local/share/bash-completion/completions/shrooms-agent",
            "Complete commands and session names in bash.",
        ),
    ] {
        r.control("TP", []);
        r.text([bold(cmd)]);
        r.text([roman(what)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command visible in --help has its page, and the top page lists
    /// each in SEE ALSO.
    #[test]
    fn a_page_per_command() {
        let pages = pages().unwrap();
        let files: Vec<&str> = pages.iter().map(|p| p.file.as_str()).collect();
        for f in [
            "shrooms-agent.1",
            "shrooms-agent-cage.1",
            "shrooms-agent-cage-exec.1",
            "shrooms-agent-image-status.1",
            "shrooms-agent-completions.1",
        ] {
            assert!(files.contains(&f), "{f} missing from {files:?}");
        }
        for hidden in [
            "watch-turn",
            "build-worker",
            "gateway-listen",
            "egress-listen",
            "help",
        ] {
            assert!(!files.iter().any(|f| f.contains(hidden)), "{files:?}");
        }
        let top = String::from_utf8(pages[0].text.clone()).unwrap();
        for section in [
            "CONFIGURATION",
            "FILES",
            "ENVIRONMENT",
            "EXIT STATUS",
            "EXAMPLES",
            "SEE ALSO",
        ] {
            assert!(
                top.contains(&format!(".SH \"{section}\""))
                    || top.contains(&format!(".SH {section}\n")),
                "{section}"
            );
        }
        assert_eq!(top.matches(".ds Aq").count(), 2, "one preamble");
        assert!(top.contains("sealed_dns"));
    }
}
