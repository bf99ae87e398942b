//! The command line, as clap types and nothing else (design.md: "cli.rs (clap
//! types only)"). Parsing decides nothing; `main.rs` hands these values to the
//! operations.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "shrooms-agent",
    version,
    about = "Run AI coding sessions (Claude Code, pi) in rootless podman cages",
    long_about = "Run AI coding sessions (Claude Code, pi) in rootless podman cages.\n\n\
        One container per session: inside, the agent is root and can install what it \
        needs; outside, it is your user and nothing more, and of your home directory \
        it sees only its project and a private copy of its harness's settings.",
    after_help = "Exit codes: 0 done, 1 failed, 2 bad input, 3 busy, 4 not ready yet (an image being built).\n\
        Config: $SHROOMS_AGENT_CONFIG, else ~/.config/shrooms-agent/config.toml.\n\
        State: $SHROOMS_AGENT_STATE_DIR, else ~/.local/share/shrooms-agent."
)]
pub struct Cli {
    /// Print the result as JSON instead of text
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Make, run, inspect and remove caged sessions
    #[command(subcommand)]
    Cage(CageCommand),
    /// Check this machine: podman, rootless, cgroups, network, nft, seccomp, image
    Doctor,
    /// Read what a sealed session left in its outbox
    #[command(subcommand)]
    Outbox(OutboxCommand),
    /// Print a shell completion script to standard output
    Completions {
        /// The shell to complete for
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to standard output
    Man,
}

#[derive(Debug, Subcommand)]
pub enum CageCommand {
    /// Record a session and make its container (made, not started)
    Create(CreateArgs),
    /// Start a session's container and close the agent port inside it
    Start(NameArg),
    /// Stop a session's container, and everything running in it
    Stop(NameArg),
    /// Remove a session: its container, env file, private folders and record
    Rm(NameArg),
    /// Run a command in a session's cage; the cage stops when it ends
    #[command(
        after_help = "The cage is started if it is stopped, and stopped when CMD ends: what CMD left running ends with it.\n\
        The exit status is CMD's. While one exec or run holds a session, another exits 3."
    )]
    Exec {
        /// The session
        name: String,
        /// The command and its arguments, after `--`
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<OsString>,
    },
    /// Run the session's harness (claude or pi) in its cage
    Run {
        /// The session
        name: String,
        /// Arguments for the harness, after `--`
        #[arg(last = true, value_name = "ARGS")]
        args: Vec<OsString>,
    },
    /// List the caged sessions, and containers left over without one
    Ls,
    /// Show a session: its record, its container's state and the argv it was made with
    Show(NameArg),
    /// Remove leftover containers (labelled, with no session) and env files with no session
    Prune {
        /// Say what would be removed, and remove nothing
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Args)]
pub struct NameArg {
    /// The session
    pub name: String,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The session's name: 1 to 63 of A-Z a-z 0-9 _ . - , not starting with - or .
    pub name: String,
    /// The project folder; mounted read-write at its own path
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The harness the session runs
    #[arg(long, value_enum, default_value_t = HarnessArg::Claude)]
    pub harness: HarnessArg,
    /// The image (default: the config's `image`, else localhost/shrooms-workbench:latest)
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Print the podman argv and the env file (secrets redacted), and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Seal it, for code nobody vouches for: the internet and nothing local,
    /// its own login, no user namespaces, results only through its outbox
    #[arg(long)]
    pub sealed: bool,
    /// The machine's sealed token (default: the config's `sealed_token`, else
    /// sealed-claude-token in the state folder)
    #[arg(long, value_name = "FILE", requires = "sealed")]
    pub sealed_token: Option<PathBuf>,
    /// Bring this Claude Code conversation of the project into the sealed
    /// cage: its transcript and the folder beside it are copied in, no other
    #[arg(long, value_name = "ID", requires = "sealed")]
    pub conversation: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum OutboxCommand {
    /// Pack a sealed session's outbox into a .tar.gz: regular files only,
    /// links never followed, with a README-UNTRUSTED.txt listing what was left out
    Pack {
        /// The sealed session
        name: String,
        /// The archive to write
        #[arg(short = 'o', long = "output", value_name = "FILE.tar.gz")]
        output: PathBuf,
        /// Pack only this folder of the outbox (a relative path)
        #[arg(long, value_name = "FOLDER")]
        only: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HarnessArg {
    Claude,
    Pi,
}
