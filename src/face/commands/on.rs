//! `--on MACHINE`: the same cage command, run by shrooms-agent on that
//! machine over ssh (`remote`); its exit status passes through.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

use crate::error::{Error, RemoteProblem, Result};
use crate::face::cli::{CageCommand, Cli, Command};
use crate::face::remote;
use crate::settings::{Env, Settings};

/// What is sent: the command line's words without `--on`, and how it runs
/// there.
pub struct Sent {
    words: Vec<String>,
    kind: remote::Kind,
}

/// The command line to send to `machine`, or why this command cannot go
/// there; decided before anything is read.
pub fn sent(cli: &Cli, machine: &str) -> Result<Sent> {
    let raw: Vec<OsString> = std::env::args_os().collect();
    let words = super::strings(words_without_on(&raw, cli, machine)?)?;
    let kind = match &cli.command {
        Command::Cage(CageCommand::Create(a)) if a.dir.is_none() => {
            return Err(Error::remote(machine, RemoteProblem::CreateWithoutDir));
        }
        Command::Cage(CageCommand::Run { name: None, .. }) => {
            return Err(Error::remote(machine, RemoteProblem::RunWithoutName));
        }
        Command::Cage(CageCommand::WatchTurn { .. } | CageCommand::Prune { .. }) => {
            return Err(Error::remote(machine, RemoteProblem::OwnMachineOnly));
        }
        Command::Cage(CageCommand::Run { .. } | CageCommand::Exec { .. }) => {
            let tty = std::io::stdin().is_terminal();
            remote::Kind::Turn { tty }
        }
        Command::Cage(_) => remote::Kind::Plain,
        _ => {
            return Err(Error::remote(machine, RemoteProblem::CageOnly));
        }
    };
    Ok(Sent { words, kind })
}

/// Runs what was sent on `machine`, as the settings name it.
pub fn run(settings: &Settings, env: &Env, machine: &str, sent: Sent) -> Result<ExitCode> {
    let target = remote::target(settings, machine)?;
    let code = remote::run(settings, env, &target, sent.words, sent.kind)?;
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// The command line without `--on MACHINE`: the one occurrence whose removal
/// leaves the same command, so a `--on` among a command's own words
/// (`cage exec NAME grep --on x`) stays there.
fn words_without_on(raw: &[OsString], cli: &Cli, machine: &str) -> Result<Vec<OsString>> {
    for i in 1..raw.len() {
        let w = raw[i].to_string_lossy();
        let take = if w == "--on" {
            2
        } else if w.starts_with("--on=") {
            1
        } else {
            continue;
        };
        let mut rest: Vec<OsString> = raw[..i].to_vec();
        rest.extend(raw.iter().skip(i + take).cloned());
        if let Ok(c) = Cli::try_parse_from(&rest)
            && c.on.is_none()
            && c.json == cli.json
            && c.command == cli.command
        {
            return Ok(rest.into_iter().skip(1).collect());
        }
    }
    Err(Error::remote(machine, RemoteProblem::NotApart))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--on MACHINE` is taken out where it is an option, and left where
    /// it is a word of the command run in the cage.
    #[test]
    fn on_is_taken_out_of_the_words_sent() {
        let sent = |args: &[&str]| -> Vec<String> {
            let raw: Vec<OsString> = std::iter::once("shrooms-agent")
                .chain(args.iter().copied())
                .map(OsString::from)
                .collect();
            let cli = Cli::try_parse_from(&raw).unwrap();
            assert!(cli.on.is_some());
            words_without_on(&raw, &cli, "m")
                .unwrap()
                .into_iter()
                .map(|w| w.into_string().unwrap())
                .collect()
        };
        assert_eq!(
            sent(&["--on", "far", "cage", "exec", "n", "grep", "--on", "x"]),
            ["cage", "exec", "n", "grep", "--on", "x"]
        );
        assert_eq!(
            sent(&["cage", "--on=far", "ls", "--json"]),
            ["cage", "ls", "--json"]
        );
        assert_eq!(
            sent(&["cage", "exec", "--on", "far", "n", "--", "--on", "y"]),
            ["cage", "exec", "n", "--", "--on", "y"]
        );
    }
}
