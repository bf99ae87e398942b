//! A command line clap could not take: printed as clap prints it, and with
//! `--json` also as every other error is, in one line.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::error::{self, Error};
use crate::face::output;

/// A command line clap could not take. `--help` and `--version` are
/// printed as clap prints them; an error too, on stderr, with its usage;
/// and when `--json` was asked for, stdout gets the error in the shape of
/// every other error (`{"error": ..., "exit_code": 2}`), so a caller that
/// reads JSON is never left with nothing.
pub fn error(e: clap::Error) -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let shown = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    if shown {
        e.exit();
    }
    let err = Error::bad_input(usage_message(&e));
    if passes_status(&args) {
        let _ = e.print();
        if json_asked(&args) {
            output::tool_error_json(&err);
        }
        return ExitCode::from(error::TOOL_FAILED);
    }
    if !json_asked(&args) {
        e.exit();
    }
    let _ = e.print();
    output::error_json(&err);
    ExitCode::from(err.kind.exit_code())
}

/// Is this `cage exec` or `cage run`, whose own failures exit 125? The
/// first two words that are not options.
fn passes_status(args: &[OsString]) -> bool {
    let words: Vec<&OsString> = args
        .iter()
        .take_while(|a| *a != "--")
        .filter(|a| !a.to_string_lossy().starts_with('-'))
        .take(2)
        .collect();
    matches!(words.as_slice(), [c, e] if *c == "cage" && (*e == "exec" || *e == "run"))
}

/// Is `--json` among the options (before any `--`)?
fn json_asked(args: &[OsString]) -> bool {
    args.iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--json")
}

/// Words of clap's, on one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// clap's error in one line: what was wrong, its tips, and the usage.
fn usage_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut out = if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        // clap prints the help here, not an error line.
        "a command is missing: `--help` lists them".to_string()
    } else {
        // clap gives its sentence for each kind of error only written out:
        // it is the first paragraph of what it prints.
        let first = text.split("\n\n").next().unwrap_or("").trim();
        one_line(first.strip_prefix("error:").unwrap_or(first))
    };
    for tip in tips(e) {
        out.push_str(&format!("; tip: {tip}"));
    }
    // Where the error is the help itself (a missing command), it has no
    // usage of its own: the help's is the one.
    let usage = match e.get(ContextKind::Usage) {
        Some(ContextValue::StyledStr(usage)) => usage.to_string(),
        _ => text,
    };
    if let Some(usage) = usage.lines().find_map(|l| l.strip_prefix("Usage: ")) {
        out.push_str(&format!("; usage: {}", one_line(usage)));
    }
    out
}

/// clap's tips, in the order and the words it prints them in: the similar
/// names it found, then its suggestions.
fn tips(e: &clap::Error) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, what) in [
        (ContextKind::SuggestedSubcommand, "subcommand"),
        (ContextKind::SuggestedArg, "argument"),
        (ContextKind::SuggestedValue, "value"),
    ] {
        let names = match e.get(kind) {
            Some(ContextValue::String(name)) => vec![name.as_str()],
            Some(ContextValue::Strings(names)) => names.iter().map(String::as_str).collect(),
            _ => continue,
        };
        let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        out.push(one_line(&match names.len() {
            1 => format!("a similar {what} exists: {}", quoted.join(", ")),
            _ => format!("some similar {what}s exist: {}", quoted.join(", ")),
        }));
    }
    if let Some(ContextValue::StyledStrs(suggested)) = e.get(ContextKind::Suggested) {
        out.extend(suggested.iter().map(|s| one_line(&s.to_string())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::face::cli::Cli;
    use clap::Parser;

    fn parse(args: &[&str]) -> clap::Error {
        let mut all = vec!["shrooms-agent"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).unwrap_err()
    }

    /// clap's usage errors in one line, as `--json` gives them.
    #[test]
    fn usage_errors_in_one_line() {
        let msg = |args: &[&str]| usage_message(&parse(args));
        assert_eq!(
            msg(&["cage", "ls", "--nope"]),
            "unexpected argument '--nope' found; usage: shrooms-agent cage ls [OPTIONS]"
        );
        assert_eq!(
            msg(&["cage", "create"]),
            "the following required arguments were not provided: <NAME>; \
             usage: shrooms-agent cage create <NAME>"
        );
        assert_eq!(
            msg(&["cage", "lss"]),
            "unrecognized subcommand 'lss'; tip: a similar subcommand exists: 'ls'; \
             usage: shrooms-agent cage [OPTIONS] <COMMAND>"
        );
        let missing = parse(&["image"]);
        assert_eq!(
            missing.kind(),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
        assert_eq!(
            usage_message(&missing),
            "a command is missing: `--help` lists them; usage: shrooms-agent image [OPTIONS] <COMMAND>"
        );
        assert_eq!(parse(&["--json", "--help"]).kind(), ErrorKind::DisplayHelp);
    }

    /// Each kind of tip, taken from the error's parts, in the words clap
    /// prints it in.
    #[test]
    fn tips_as_clap_prints_them() {
        let msg = |args: &[&str]| usage_message(&parse(args));
        assert_eq!(
            msg(&["cage", "s"]),
            "unrecognized subcommand 's'; tip: some similar subcommands exist: 'history', \
             'start', 'stop', 'show'; usage: shrooms-agent cage [OPTIONS] <COMMAND>"
        );
        assert_eq!(
            msg(&["cage", "ls", "--al"]),
            "unexpected argument '--al' found; tip: a similar argument exists: '--all'; \
             usage: shrooms-agent cage ls --all"
        );
        assert_eq!(
            msg(&["completions", "nosh"]),
            "invalid value 'nosh' for '<SHELL>' [possible values: bash, elvish, fish, \
             powershell, zsh]; tip: a similar value exists: 'zsh'"
        );
        assert_eq!(
            msg(&["cage", "rm", "-x"]),
            "unexpected argument '-x' found; tip: to pass '-x' as a value, use '-- -x'; \
             usage: shrooms-agent cage rm [OPTIONS] <NAME>"
        );
    }

    /// `cage exec` and `cage run` are told apart by their first two words
    /// that are not options; what follows `--` is the command's.
    #[test]
    fn exec_and_run_are_found_among_the_words() {
        let passes =
            |args: &[&str]| passes_status(&args.iter().map(OsString::from).collect::<Vec<_>>());
        assert!(passes(&["cage", "exec"]));
        assert!(passes(&["--json", "cage", "run", "s"]));
        assert!(passes(&[
            "cage", "--json", "exec", "--join", "s", "--", "true"
        ]));
        assert!(!passes(&["cage", "show", "exec"]));
        assert!(!passes(&["cage", "ls"]));
        assert!(!passes(&["--", "cage", "exec"]));
        assert!(!passes(&["image", "exec"]));
    }

    #[test]
    fn json_is_asked_for_before_a_double_dash_only() {
        let asked =
            |args: &[&str]| json_asked(&args.iter().map(OsString::from).collect::<Vec<_>>());
        assert!(asked(&["cage", "ls", "--json", "--nope"]));
        assert!(asked(&["--json", "cage"]));
        assert!(!asked(&["cage", "ls", "--nope"]));
        assert!(!asked(&["cage", "exec", "s", "--", "--json"]));
        assert!(!asked(&["cage", "ls", "--jsonx"]));
    }
}
