//! A command line clap could not take: printed as clap prints it, and with
//! `--json` also as every other error is, in one line.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::error::ErrorKind;

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
    let err = Error::bad_input(usage_message(e.kind(), &e.render().to_string()));
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

/// clap's error text in one line: what was wrong, its tips, and the usage.
fn usage_message(kind: ErrorKind, text: &str) -> String {
    let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let what = if kind == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        // clap prints the help here, not an error line.
        "a command is missing: `--help` lists them".to_string()
    } else {
        let first = text.split("\n\n").next().unwrap_or("").trim();
        one_line(first.strip_prefix("error:").unwrap_or(first))
    };
    let mut out = what;
    for tip in text.lines().filter_map(|l| l.trim().strip_prefix("tip:")) {
        out.push_str(&format!("; tip: {}", one_line(tip)));
    }
    if let Some(usage) = text.lines().find_map(|l| l.strip_prefix("Usage: ")) {
        out.push_str(&format!("; usage: {}", one_line(usage)));
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
        let msg = |args: &[&str]| {
            let e = parse(args);
            usage_message(e.kind(), &e.render().to_string())
        };
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
        assert_eq!(
            usage_message(
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand,
                "About\n\nUsage: shrooms-agent image [OPTIONS] <COMMAND>\n\nCommands: ..."
            ),
            "a command is missing: `--help` lists them; usage: shrooms-agent image [OPTIONS] <COMMAND>"
        );
        assert_eq!(parse(&["--json", "--help"]).kind(), ErrorKind::DisplayHelp);
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
