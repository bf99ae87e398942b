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
    let err = Error::input(usage_of(&e, &args));
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

/// clap's error as data: what was wrong, its tips, and the usage, each
/// from the error's parts (its kind and its context), in clap's words, on
/// one line each. `args`: the command line after the program's name, for
/// the usage of a command whose own command is missing.
fn usage_of(e: &clap::Error, args: &[OsString]) -> error::InputProblem {
    let usage = match e.get(ContextKind::Usage) {
        Some(ContextValue::StyledStr(usage)) => Some(usage.to_string()),
        // clap answers a missing command with the help, whose usage is the
        // command's: the error carries none of its own.
        _ if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            Some(command_of(args).render_usage().to_string())
        }
        _ => None,
    };
    error::InputProblem::Usage {
        what: one_line(&what_was_wrong(e)),
        tips: tips(e),
        usage: usage
            .as_deref()
            .and_then(|u| u.lines().find_map(|l| l.strip_prefix("Usage: ")))
            .map(one_line),
    }
}

/// What was wrong, as clap says it for each kind of error (its
/// `RichFormatter`), from the error's context; clap's sentence for the
/// kind where the context lacks a part.
fn what_was_wrong(e: &clap::Error) -> String {
    use ContextKind as K;
    let text = |k| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let (arg, value) = (text(K::InvalidArg), text(K::InvalidValue));
    let said = match e.kind() {
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            Some("a command is missing: `--help` lists them".to_string())
        }
        ErrorKind::ArgumentConflict => conflict(e),
        ErrorKind::NoEquals => {
            arg.map(|a| format!("equal sign is needed when assigning values to '{a}'"))
        }
        ErrorKind::InvalidValue => match (arg, value) {
            (Some(a), Some("")) => Some(format!(
                "a value is required for '{a}' but none was supplied{}",
                listed(e, "possible values", K::ValidValue)
            )),
            (Some(a), Some(v)) => Some(format!(
                "invalid value '{v}' for '{a}'{}",
                listed(e, "possible values", K::ValidValue)
            )),
            _ => None,
        },
        ErrorKind::InvalidSubcommand => {
            text(K::InvalidSubcommand).map(|c| format!("unrecognized subcommand '{c}'"))
        }
        ErrorKind::MissingRequiredArgument => match e.get(K::InvalidArg) {
            Some(ContextValue::Strings(args)) => Some(format!(
                "the following required arguments were not provided: {}",
                args.join(" ")
            )),
            _ => None,
        },
        ErrorKind::MissingSubcommand => text(K::InvalidSubcommand).map(|c| {
            format!(
                "'{c}' requires a subcommand but one was not provided{}",
                listed(e, "subcommands", K::ValidSubcommand)
            )
        }),
        ErrorKind::TooManyValues => arg
            .zip(value)
            .map(|(a, v)| format!("unexpected value '{v}' for '{a}' found; no more were expected")),
        ErrorKind::TooFewValues | ErrorKind::WrongNumberOfValues => counted(e),
        ErrorKind::ValueValidation => arg.zip(value).map(|(a, v)| {
            let why = std::error::Error::source(e).map(|s| format!(": {s}"));
            format!("invalid value '{v}' for '{a}'{}", why.unwrap_or_default())
        }),
        ErrorKind::UnknownArgument => arg.map(|a| format!("unexpected argument '{a}' found")),
        _ => None,
    };
    said.or_else(|| e.kind().as_str().map(str::to_string))
        .or_else(|| std::error::Error::source(e).map(ToString::to_string))
        .unwrap_or_else(|| "unknown cause".to_string())
}

/// Too few values for an argument, or not as many as it takes.
fn counted(e: &clap::Error) -> Option<String> {
    let number = |k| match e.get(k) {
        Some(ContextValue::Number(n)) => Some(*n),
        _ => None,
    };
    let were = |n: isize| if n > 1 { "were" } else { "was" };
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(a)) => a,
        _ => return None,
    };
    let given = number(ContextKind::ActualNumValues)?;
    if e.kind() == ErrorKind::TooFewValues {
        let min = number(ContextKind::MinValues)?;
        return Some(format!(
            "{min} values required by '{arg}'; only {given} {} provided",
            were(given)
        ));
    }
    let want = number(ContextKind::ExpectedNumValues)?;
    Some(format!(
        "{want} values required for '{arg}' but {given} {} provided",
        were(given)
    ))
}

/// An argument given twice, or with one it cannot be used with.
fn conflict(e: &clap::Error) -> Option<String> {
    let mut prior = e.get(ContextKind::PriorArg);
    let mut out = match (
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::InvalidSubcommand),
    ) {
        (Some(ContextValue::String(arg)), _) if prior == e.get(ContextKind::InvalidArg) => {
            prior = None;
            format!("the argument '{arg}' cannot be used multiple times")
        }
        (Some(ContextValue::String(arg)), _) => format!("the argument '{arg}' cannot be used with"),
        (_, Some(ContextValue::String(sub))) => {
            format!("the subcommand '{sub}' cannot be used with")
        }
        _ => e.kind().as_str()?.to_string(),
    };
    match prior {
        Some(ContextValue::Strings(others)) => out.push_str(&format!(": {}", others.join(" "))),
        Some(ContextValue::String(other)) => out.push_str(&format!(" '{other}'")),
        Some(_) => out.push_str(" one or more of the other specified arguments"),
        None => {}
    }
    Some(out)
}

/// clap's list of what a value or a subcommand could have been (` [possible
/// values: a, b]`), each quoted as clap quotes it where it is empty or has
/// a space; nothing where the error lists none.
fn listed(e: &clap::Error, name: &str, kind: ContextKind) -> String {
    match e.get(kind) {
        Some(ContextValue::Strings(values)) if !values.is_empty() => {
            let values: Vec<String> = values
                .iter()
                .map(|v| {
                    if v.is_empty() || v.contains(char::is_whitespace) {
                        format!("{v:?}")
                    } else {
                        v.clone()
                    }
                })
                .collect();
            format!(" [{name}: {}]", values.join(", "))
        }
        _ => String::new(),
    }
}

/// The command the words name (`image`, `cage`), found as clap finds it:
/// the words that are not options, each a subcommand of the one before;
/// an option's value is passed over.
fn command_of(args: &[OsString]) -> clap::Command {
    let mut root = <crate::face::cli::Cli as clap::CommandFactory>::command();
    root.build();
    let mut cmd = &root;
    let mut words = args.iter().map(|a| a.to_string_lossy());
    while let Some(w) = words.next() {
        if w == "--" {
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            let takes_value = !long.contains('=')
                && cmd
                    .get_arguments()
                    .find(|a| a.get_long() == Some(long))
                    .is_some_and(|a| a.get_action().takes_values());
            if takes_value {
                words.next();
            }
            continue;
        }
        if let Some(short) = w.strip_prefix('-').filter(|s| s.chars().count() == 1) {
            let takes_value = cmd
                .get_arguments()
                .find(|a| a.get_short().map(String::from).as_deref() == Some(short))
                .is_some_and(|a| a.get_action().takes_values());
            if takes_value {
                words.next();
            }
            continue;
        }
        if w.starts_with('-') {
            continue;
        }
        match cmd.find_subcommand(w.as_ref()) {
            Some(sub) => cmd = sub,
            None => break,
        }
    }
    cmd.clone()
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

    fn words(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    /// The message for a command line clap refuses.
    fn message(args: &[&str]) -> String {
        Error::input(usage_of(&parse(args), &words(args))).message()
    }

    /// What was wrong, built from the error's parts, says what clap's own
    /// text says (its first paragraph, in one line), for each kind of
    /// error this command line can make.
    #[test]
    fn what_was_wrong_in_clap_words() {
        for args in [
            &["cage", "ls", "--nope"][..],
            &["cage", "create"],
            &["cage", "lss"],
            &["cage", "s"],
            &["completions", "nosh"],
            &["completions", ""],
            &["cage", "ls", "--quiet", "--all"],
            &["cage", "ls", "--all", "--all"],
            &["cage", "accept-caged", "s", "maybe"],
            &["cage", "create", "s", "--harness"],
            &["cage", "create", "s", "--dir"],
            &["cage", "create", "s", "--sealed-token", "t"],
            &["cage", "watch-turn", "--lock-fd", "x"],
            &["egress-listen", "--cage-pid", "1.5"],
            &["cage", "limits", "s", "--reset", "--memory", "1g"],
            &["image", "build-worker"],
            &["cage", "stop"],
            &["cage", "rm", "a", "b"],
            &["--json"],
            &["outbox", "--on", "x"],
        ] {
            let e = parse(args);
            says_as_clap(&e, args);
        }
    }

    /// What was wrong, in one line, is clap's own first paragraph.
    fn says_as_clap(e: &clap::Error, args: &[&str]) {
        let text = e.render().to_string();
        let first = text.split("\n\n").next().unwrap().trim();
        let clap_says = one_line(first.strip_prefix("error:").unwrap_or(first));
        assert_eq!(
            one_line(&what_was_wrong(e)),
            clap_says,
            "{args:?} ({:?})",
            e.kind()
        );
    }

    /// clap's usage errors in one line, as `--json` gives them.
    #[test]
    fn usage_errors_in_one_line() {
        let msg = message;
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
            message(&["image"]),
            "a command is missing: `--help` lists them; usage: shrooms-agent image [OPTIONS] <COMMAND>"
        );
        // The command is found past the options and their values.
        assert_eq!(
            message(&["--on", "cage", "--json", "image"]),
            "a command is missing: `--help` lists them; usage: shrooms-agent image [OPTIONS] <COMMAND>"
        );
        assert_eq!(
            message(&["--json", "cage"]),
            "a command is missing: `--help` lists them; usage: shrooms-agent cage [OPTIONS] <COMMAND>"
        );

        assert_eq!(parse(&["--json", "--help"]).kind(), ErrorKind::DisplayHelp);
    }

    /// The kinds this command line cannot make, from a command made for
    /// them: the same words as clap's own text too.
    #[test]
    fn what_was_wrong_for_the_other_kinds() {
        use clap::{Arg, Command};
        let cmd = Command::new("t")
            .arg(Arg::new("few").long("few").num_args(2..))
            .arg(Arg::new("three").long("three").num_args(3))
            .arg(Arg::new("eq").long("eq").require_equals(true))
            .arg(
                Arg::new("one")
                    .long("one")
                    .num_args(1)
                    .action(clap::ArgAction::Set),
            )
            .arg(
                Arg::new("n")
                    .long("n")
                    .value_parser(clap::value_parser!(u8)),
            );
        for args in [
            &["t", "--few", "a"][..],
            &["t", "--three", "a", "b"],
            &["t", "--eq", "x"],
            &["t", "--one=a", "--one=b"],
            &["t", "--n", "300"],
        ] {
            let e = cmd.clone().try_get_matches_from(args).unwrap_err();
            says_as_clap(&e, args);
        }
    }

    /// Each kind of tip, taken from the error's parts, in the words clap
    /// prints it in.
    #[test]
    fn tips_as_clap_prints_them() {
        let msg = message;
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
