//! The command line, as clap types and nothing else. Parsing decides
//! nothing; `main.rs` hands these values to the operations.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::ArgValueCandidates;

#[derive(Debug, Parser)]
#[command(
    name = "shrooms-agent",
    version,
    about = "Run AI coding sessions (Claude Code, pi) in rootless podman cages",
    long_about = "Run AI coding sessions (Claude Code, pi) in rootless podman cages.\n\n\
        One container per session: inside, the agent is root and can install what it \
        needs; outside, it is your user and nothing more, and of your home directory \
        it sees only its project and a private copy of its harness's settings.",
    after_help = "Exit codes: 0 done, 1 failed, 2 bad input, 3 busy, 4 not ready yet (an image being built); \
        `cage exec` and `cage run`: the command's own, or 125 (shrooms-agent failed or refused), 126, 127.\n\
        Config: $SHROOMS_AGENT_CONFIG, else $XDG_CONFIG_HOME/shrooms-agent/config.toml, \
        else ~/.config/shrooms-agent/config.toml.\n\
        State: $SHROOMS_AGENT_STATE_DIR, else $XDG_DATA_HOME/shrooms-agent, \
        else ~/.local/share/shrooms-agent."
)]
pub struct Cli {
    /// Print the result as JSON instead of text
    #[arg(long, global = true)]
    pub json: bool,

    /// Run this cage command on another machine, with shrooms-agent there,
    /// over ssh: a name of the config's [ssh], or an ssh destination
    /// ([user@]host, an alias of ~/.ssh/config). Paths (--dir) are that
    /// machine's; a turn's key is lent from this one (docs/machines.md, "On another machine")
    #[arg(long, global = true, value_name = "MACHINE")]
    pub on: Option<String>,

    /// Sent by the machine that ran `--on`: its name for this one, which
    /// errors here are prefixed with
    #[arg(long, global = true, hide = true, value_name = "NAME")]
    pub remote: Option<String>,

    /// Sent by the machine that ran `--on` for a turn: the socket its ssh
    /// forwards here, to its key lender and the turn's line
    #[arg(long, global = true, hide = true, value_name = "SOCKET")]
    pub laptop: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

/// The sessions of this state folder, for shell completion (`cage exec
/// <Tab>`): the names of the records that read, from the state folder the
/// environment names. No podman call and no config file: a Tab must answer
/// at once and change nothing; where the folder cannot be told or read,
/// nothing is offered.
fn session_names() -> Vec<clap_complete::CompletionCandidate> {
    let env = crate::settings::environment();
    let Some(home) = env
        .get("HOME")
        .filter(|h| h.starts_with('/'))
        .map(PathBuf::from)
    else {
        return Vec::new();
    };
    let Ok((_, state)) = crate::settings::paths(&env, &home) else {
        return Vec::new();
    };
    match crate::state::session::Store::new(state).list_readable() {
        Ok((records, _)) => records
            .into_iter()
            .map(|r| clap_complete::CompletionCandidate::new(r.name))
            .collect(),
        Err(_) => Vec::new(),
    }
}

// Each command's arguments are built only when that command is used (here
// and in the enums below): every start is a third of a millisecond shorter
// than with all of them built to parse one.
#[derive(Debug, PartialEq, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Make, run, inspect and remove caged sessions
    #[command(subcommand)]
    Cage(CageCommand),
    /// Check this machine: podman, rootless, cgroups, network, nft, seccomp, image
    Doctor,
    /// Build our images (workbench, desktop) and show how they stand
    #[command(subcommand)]
    Image(ImageCommand),
    /// Read what a sealed session left in its outbox, or send it to a session
    #[command(subcommand)]
    Outbox(OutboxCommand),
    /// Whom a session takes files from (MACHINE/SESSION), and who was refused
    #[command(subcommand)]
    Files(FilesCommand),
    /// Serve the same operations over HTTP, for the apps and other machines
    #[command(
        after_help = "Routes: GET / (a status page for a browser: HTML; its forms set a caged \
        session's token budget, POST /limits/NAME), \
        GET /v1/harnesses, GET|POST /v1/sessions, GET|DELETE /v1/sessions/NAME, \
        POST /v1/sessions/NAME/cage, /cage/limits, /outbox/send, /drop, POST /v1/images/build, \
        GET /v1/openapi.json (the whole description). One log line per request on stderr. \
        SIGTERM or Ctrl-C: stops accepting, finishes what is in flight, exits 0."
    )]
    Serve(ServeArgs),
    /// Print this program's version and the protocol its ends speak over ssh (`--on`)
    Version,
    /// Print a shell completion script to standard output (commands, options and session names)
    #[command(
        after_help = "The script asks shrooms-agent (on PATH) for the candidates at each Tab, \
        through the variable SHROOMS_AGENT_COMPLETE; session names come from the state folder, \
        without podman.\n\
        bash: mkdir -p ~/.local/share/bash-completion/completions && \
        shrooms-agent completions bash > ~/.local/share/bash-completion/completions/shrooms-agent\n\
        zsh:  mkdir -p ~/.zfunc && shrooms-agent completions zsh > ~/.zfunc/_shrooms-agent \
        (a folder on $fpath)\n\
        fish: mkdir -p ~/.config/fish/completions && \
        shrooms-agent completions fish > ~/.config/fish/completions/shrooms-agent.fish"
    )]
    Completions {
        /// The shell to complete for
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to standard output, or write every page to a folder
    Man {
        /// Write every page (one per command) into this folder instead
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Serve the shrooms tools (list_agents, ask_agent, task_status,
    /// task_update, task_ack, send_file) as an MCP server on standard input
    /// and output, for a harness inside a cage
    #[command(
        after_help = "Run inside a cage: `cage run` hands it to Claude Code (--mcp-config). Each tool \
        goes through the cage's socket ($SHROOMS_AGENT_PROXY, /run/shrooms-agent/proxy.sock), served \
        by the process holding the turn; outside a cage, or with no turn running, the tools answer \
        with an error that says so."
    )]
    Mcp {
        /// Offer only task_update, the one tool a sealed cage's socket lets through
        #[arg(long)]
        sealed: bool,
    },
    /// Make the model gateway's listener in a cage's network namespace and
    /// hand it over (run by `cage run` / `cage exec`, not for use by hand)
    #[command(name = "gateway-listen", hide = true)]
    GatewayListen {
        /// The Unix socket to send the listener to
        #[arg(long, value_name = "PATH")]
        to: PathBuf,
    },
    /// Write a cage's egress log from inside its network namespace (started
    /// with the cage's rules, not for use by hand)
    #[command(name = "egress-listen", hide = true)]
    EgressListen {
        /// The log file of allowed connections
        #[arg(long, value_name = "PATH")]
        log: PathBuf,
        /// The log file of refusals
        #[arg(long, value_name = "PATH")]
        refused_log: PathBuf,
        /// The file that says the listener runs (its pid and namespace)
        #[arg(long, value_name = "PATH")]
        pid_file: PathBuf,
        /// The session, for each line
        #[arg(long)]
        session: String,
        /// The cage's first process: the listener ends when it is gone
        #[arg(long)]
        cage_pid: i64,
    },
}

#[derive(Debug, PartialEq, Subcommand)]
#[command(defer = true)]
pub enum CageCommand {
    /// Record a session and make its container (made, not started)
    Create(CreateArgs),
    /// Start a session's container and close the agent port inside it
    Start(NameArg),
    /// Stop a session's container, and everything running in it
    Stop(StopArgs),
    /// Remove a session: its container, env file, private folders, history and record
    Rm(NameArg),
    /// Move a session into a fresh cage with new options, or out of its cage
    #[command(
        after_help = "Only while the session is idle: while an exec or run holds it, or a process \
        other than its first process (shrooms-agent's init) runs in its cage, it exits 3. The old container is deleted, \
        and everything that was installed in it. Without --image the new cage has the image the old one had. \
        A project folder moved or renamed: --dir NEW points the session at its new place."
    )]
    Move(MoveArgs),
    /// Give a session another name: its record, history, received files and settings follow
    #[command(
        after_help = "Only while the session is idle (exit 3 otherwise); a name another session has         is refused (exit 2). A caged session gets a new container under the new name, made as         `cage move` makes one (the same image, options and limits): its mounts name the session.         The old container is deleted, and everything that was installed in it; a running cage is         stopped first and the new one left stopped (the next exec or run starts it). If a step         fails, the steps before it are undone: the session keeps its old name."
    )]
    Rename(RenameArgs),
    /// Set a session's memory, CPUs and process limits, running or not, and its token budget
    #[command(
        after_help = "Without flags: shows the limits, as configured (the session's own or the \
        machine's) and as podman reports the container has them, and the token budget and what \
        was spent."
    )]
    Limits(LimitsArgs),
    /// What happened to a session: creation, moves, limits, each turn's tokens (when, who, what)
    #[command(
        after_help = "--net shows the egress log instead: each connection the session's cage opened \
        or was refused (time, destination address and port, protocol, allowed or refused and by which \
        rule, and the name asked for where the packet is a DNS question), oldest first. It is written \
        outside the cage (sessions/NAME.egress.jsonl in the state folder for what was let through, \
        sessions/NAME.egress-refused.jsonl for refusals), each kept to 1 MiB plus the 1 MiB before it \
        (NAME.egress.1.jsonl, NAME.egress-refused.1.jsonl), so refusals never push an allowed \
        connection out. A cage whose log cannot be written has no network until it can be."
    )]
    History(HistoryArgs),
    /// Whether a session takes tasks and files from caged sessions ("caged tasks")
    #[command(
        name = "accept-caged",
        after_help = "By default a session in a cage takes them and one outside a cage does not. \
        A caged sender is named by its cage's socket, so it cannot pass for another session; \
        files from it are still taken only from the senders `files allow` names."
    )]
    AcceptCaged {
        /// The session
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: String,
        /// on: take them; off: refuse them
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// Run a command in a session's cage (a shell when none is given); the cage stops when it ends
    #[command(
        after_help = "The cage is started if it is stopped, and stopped when CMD ends: what CMD left running ends with it.\n\
        It is stopped too if this process is ended: on SIGHUP (the terminal closing), SIGTERM, SIGINT or SIGQUIT, \
        the terminal's modes are put back and the exit status is 128 + the signal; after SIGKILL, a watcher stops it.\n\
        Without CMD: a shell, bash if the cage's image has it, else sh. CMD needs no `--` \
        (`cage exec NAME sh -c 'ls -l'`); options of exec go before NAME or before CMD.\n\
        With --join: CMD runs beside the turn that holds the cage (to watch what the agent does), \
        without taking the turn; the cage is never started or stopped, and a cage that is not running is refused (125).\n\
        Exit status: CMD's own. 125: shrooms-agent failed or refused (--json and stderr say which kind: busy while \
        another exec or run holds the session, bad_input, not_found, ...); 126: CMD could not be run; 127: CMD was not found."
    )]
    Exec {
        /// Run beside the turn that holds the running cage: neither start nor stop it, nor take the turn
        #[arg(long)]
        join: bool,
        /// The session
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: String,
        /// The command and its arguments (default: a shell)
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        cmd: Vec<OsString>,
    },
    /// Run the session's harness (claude or pi) in its cage
    #[command(
        after_help = "On a session taken out of its cage (`cage move NAME --out`), `cage run` refuses \
        unless given --uncaged: the harness would run on this machine as you, outside any cage. \
        `cage move NAME` puts the session back in a cage.\n\
        Without NAME: the session whose project folder is the current folder; none there, or \
        several, is refused with their names.\n\
        Exit status: the harness's own. 125: shrooms-agent failed or refused (--json and stderr say which kind); \
        126: the harness could not be run; 127: it was not found."
    )]
    Run {
        /// The session (default: the one whose project is the current folder)
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: Option<String>,
        /// Run the harness on this machine, outside any cage, when the session is not in one
        #[arg(long)]
        uncaged: bool,
        /// Arguments for the harness, after `--`
        #[arg(last = true, value_name = "ARGS")]
        args: Vec<OsString>,
    },
    /// List the caged sessions, and containers left over without one
    Ls {
        /// Print the sessions' names only, one a line (with --json: an array of them)
        #[arg(long, short = 'q')]
        quiet: bool,
        /// The sessions of this machine and of every machine of the config's
        /// [ssh], with a MACHINE column; a machine that cannot be asked is
        /// named with why, and the others are still listed (exit 1)
        #[arg(long, conflicts_with = "quiet")]
        all: bool,
    },
    /// Show a session: its record, its container's state and the argv it was made with
    Show(NameArg),
    /// Bring a session's commits into your repository now (as after each turn), as cage/NAME/BRANCH
    #[command(
        after_help = "Each branch the session moved comes into your repository as cage/NAME/BRANCH, \
        its objects checked one by one; no git runs in the session's git directory (docs/security.md, \"Git in a cage\"). \
        Only while the session is idle (exit 3 otherwise).\n\
        --ff: then fast-forward your checked-out branch to cage/NAME/<that branch>. Refused, changing nothing \
        (exit 1), where it is not a fast-forward, where your index has staged changes, or where your work tree \
        is not already the session's commit (a file would change under you); never done unless asked."
    )]
    Bring {
        /// The session
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: String,
        /// Fast-forward your checked-out branch to the session's commit of the same branch
        #[arg(long)]
        ff: bool,
    },
    /// Remove leftovers this state folder made: containers with no session here, and their
    /// files. Containers another state folder made, or made before containers carried the
    /// state folder's label, are listed and kept. Asks first on a terminal; without one it
    /// removes nothing unless given --yes (exit 2)
    Prune {
        /// Say what would be removed, and remove nothing (writes nothing at all)
        #[arg(long)]
        dry_run: bool,
        /// Remove without asking
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Stop a cage if the process holding its turn dies (started by `cage
    /// exec` and `cage run`, not for use by hand)
    #[command(hide = true)]
    WatchTurn {
        #[arg(long, value_name = "NAME")]
        session: String,
        #[arg(long, value_name = "CONTAINER")]
        container: String,
        #[arg(long, value_name = "PROGRAM")]
        podman: PathBuf,
        /// The session's lock, held for this process
        #[arg(long, value_name = "FD")]
        lock_fd: i32,
        /// The pipe whose end means the holder is gone
        #[arg(long, value_name = "FD")]
        pipe_fd: i32,
        /// The pipe to say "ready" on
        #[arg(long, value_name = "FD")]
        ready_fd: i32,
    },
}

#[derive(Debug, PartialEq, Args)]
pub struct NameArg {
    /// The session
    #[arg(add = ArgValueCandidates::new(session_names))]
    pub name: String,
}

#[derive(Debug, PartialEq, Args)]
pub struct HistoryArgs {
    /// The session
    #[arg(add = ArgValueCandidates::new(session_names))]
    pub name: String,
    /// Show the egress log: the connections its cage opened or was refused
    #[arg(long)]
    pub net: bool,
}

#[derive(Debug, PartialEq, Args)]
pub struct StopArgs {
    /// The session
    #[arg(required_unless_present = "all", conflicts_with = "all", add = ArgValueCandidates::new(session_names))]
    pub name: Option<String>,
    /// Stop every cage of this user; a busy one is passed over and named at
    /// the end (exit 3)
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, PartialEq, Args)]
pub struct MoveArgs {
    /// The session
    #[arg(add = ArgValueCandidates::new(session_names))]
    pub name: String,
    /// Take the session out of its cage: its harness runs on the machine again
    #[arg(long, conflicts_with_all = ["image", "github", "nix", "shared", "meshes", "sealed", "writable"])]
    pub out: bool,
    /// Who moved it, for the history (default: the user running this); one
    /// line of at most 200 characters
    #[arg(long, value_name = "WHO")]
    pub by: Option<String>,
    /// Take a sealed session out of its seal (refused without it: its folder
    /// is untrusted after a sealed session)
    #[arg(long)]
    pub unseal: bool,
    /// The project folder's new place, for a folder moved or renamed: the
    /// session works there from now on (checked as `cage create --dir` is)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub cage: CageArgs,
}

#[derive(Debug, PartialEq, Args)]
pub struct RenameArgs {
    /// The session
    #[arg(add = ArgValueCandidates::new(session_names))]
    pub name: String,
    /// Its new name: 1 to 63 of A-Z a-z 0-9 _ . -, not starting with - or .
    pub new: String,
    /// Who renamed it, for the history (default: the user running this); one
    /// line of at most 200 characters
    #[arg(long, value_name = "WHO")]
    pub by: Option<String>,
}

#[derive(Debug, PartialEq, Args)]
pub struct LimitsArgs {
    /// The session
    #[arg(add = ArgValueCandidates::new(session_names))]
    pub name: String,
    /// Memory, as podman reads it: 512m, 1.5g, 1gb, 16G; a number alone is
    /// bytes (at least 6m, podman's minimum)
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    /// CPUs: a number from 0.01 up to the machine's
    #[arg(long, value_name = "N")]
    pub cpus: Option<String>,
    /// Processes: a positive whole number
    #[arg(long, value_name = "N")]
    pub pids: Option<String>,
    /// Token budget: once the session's turns have spent N tokens (input,
    /// output and cache together), the model gateway holds its model
    /// requests until it is raised (at most the config's `[budget] wait`,
    /// then refuses them); `none` removes it. N is a whole number, or with
    /// k (thousands) or M (millions): 500k, 5M, 1.5M. One at or below what
    /// was spent is taken, with a warning that the next turn waits. Works
    /// on any machine, running or not, and beside a running turn
    #[arg(long, value_name = "N|none")]
    pub tokens: Option<String>,
    /// Dollar budget: once the session's turns have spent this many dollars
    /// at list prices (docs/gateway.md, "Budgets"), the model gateway
    /// refuses its model requests; `none` removes it. An amount with at
    /// most cents: 5, 2.50. Refused for a session whose model requests go
    /// upstream on a subscription sign-in, which has no price per token
    #[arg(long, value_name = "AMOUNT|none")]
    pub usd: Option<String>,
    /// Back to the machine's limits and budgets (the config's, `[budget]`:
    /// none unless it says)
    #[arg(long, conflicts_with_all = ["memory", "cpus", "pids", "tokens", "usd", "net"])]
    pub reset: bool,
    /// A new network policy (`open`, `internet`, `allow:NAME,HOST:PORT,...`;
    /// docs/network.md, "Network policy"): the rules of a running cage are replaced
    /// at once, without making it again, and the policy is kept for every
    /// later start
    #[arg(long, value_name = "POLICY")]
    pub net: Option<String>,
    /// Who changed them, for the history (default: the user running this);
    /// one line of at most 200 characters
    #[arg(long, value_name = "WHO")]
    pub by: Option<String>,
}

#[derive(Debug, PartialEq, Args)]
pub struct CreateArgs {
    /// The session's name: 1 to 63 of A-Z a-z 0-9 _ . - (not starting with `-` or `.`)
    pub name: String,
    /// The project folder, of your own; mounted read-write at its own path
    /// (default: the current folder, refused where --dir would be: the home
    /// folder, a system or shared folder; as root: a folder root owns,
    /// outside other users' homes and the system's trees)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The harness the session runs. pi runs the image's pi (unless [harness] pi names the
    /// machine's): an image without one is refused (asked once per image, and kept). Claude
    /// Code, Codex CLI and opencode run the machine's program
    #[arg(long, value_enum, default_value_t = HarnessArg::Claude)]
    pub harness: HarnessArg,
    /// Print the podman argv and the env file (secrets redacted), and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Give an ordinary cage to a folder a sealed session worked in (refused
    /// without it: the folder is untrusted after a sealed session)
    #[arg(long, conflicts_with = "sealed")]
    pub unseal: bool,
    #[command(flatten)]
    pub cage: CageArgs,
}

// How a cage is made: its image and the options that widen or seal it
// (flattened into `cage create` and `cage move`; a doc comment here would
// become their about once their arguments are deferred).
#[derive(Debug, PartialEq, Args, Default)]
pub struct CageArgs {
    /// The image (default: the config's `image`, else <images_repo>:latest,
    /// localhost/shrooms-workbench:latest unless the config says otherwise;
    /// for `cage move`, the image its cage has now, or had when it was
    /// taken out of it)
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Use GitHub as you with no token inside: gh and git over HTTPS to github.com
    /// go through the turn's gateway, which adds the machine's GitHub token
    /// (GH_TOKEN, GITHUB_TOKEN, else `gh auth token`); ssh remotes do not work
    #[arg(long)]
    pub github: bool,
    /// Give it the machine's nix: the store, your profile, your nix settings
    #[arg(long)]
    pub nix: bool,
    /// Mount the shared folder at /shared, which every caged session given it sees
    #[arg(long)]
    pub shared: bool,
    /// A mesh the session is limited to (repeat for more): the shared folder is
    /// then the one of that set of meshes; only with --shared
    #[arg(long = "mesh", value_name = "LABEL")]
    pub meshes: Vec<String>,
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
    /// DANGEROUS: leave this protected path of the project writable (repeat for
    /// more), such as .git/hooks or .vscode; what the cage leaves there runs on
    /// this machine, outside any cage (docs/security.md, "Protected paths")
    #[arg(long, value_name = "PATH")]
    pub writable: Vec<String>,
    /// The network policy (docs/network.md, "Network policy"): `open` (everything),
    /// `internet` (no LAN, private, link-local or the machine's own ranges;
    /// DNS to the machine's resolvers only), or `allow:NAME,HOST:PORT,...`
    /// (those only, over TCP; a bare name is ports 80 and 443; names
    /// resolved by this machine and pinned in the cage's /etc/hosts; no DNS).
    /// Default: the config's `net`, else internet; for `cage move`, the
    /// policy its cage has
    #[arg(long, value_name = "POLICY")]
    pub net: Option<String>,
}

#[derive(Debug, PartialEq, Subcommand)]
#[command(defer = true)]
pub enum OutboxCommand {
    /// Pack a sealed session's outbox into a .tar.gz: regular files only,
    /// links never followed, with a README-UNTRUSTED.txt listing what was left out
    Pack {
        /// The sealed session
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: String,
        /// The archive to write: a new file outside the outbox (an existing
        /// regular file only with --force; never a device, a FIFO, a folder or a link)
        #[arg(short = 'o', long = "output", value_name = "FILE.tar.gz")]
        output: PathBuf,
        /// Replace FILE if it is there and a regular file
        #[arg(long)]
        force: bool,
        /// Pack only this folder of the outbox (a relative path)
        #[arg(long, value_name = "FOLDER")]
        only: Option<PathBuf>,
    },
    /// Pack a sealed session's outbox and send it to a session on a machine
    /// (the config's [machines], or this one): it arrives in that session's
    /// uploads, if that session takes files from this one
    Send(SendArgs),
}

#[derive(Debug, PartialEq, Args)]
pub struct SendArgs {
    /// The sealed session
    #[arg(add = ArgValueCandidates::new(session_names))]
    pub name: String,
    /// Where to: MACHINE/SESSION
    #[arg(value_name = "MACHINE/SESSION")]
    pub to: String,
    /// Send only this folder of the outbox (a relative path)
    #[arg(long, value_name = "FOLDER")]
    pub only: Option<PathBuf>,
}

#[derive(Debug, PartialEq, Subcommand)]
#[command(defer = true)]
pub enum FilesCommand {
    /// Take files from a sender: MACHINE/SESSION, or MACHINE/* for all of its sessions
    Allow {
        /// The receiving session
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: String,
        #[arg(value_name = "MACHINE/SESSION")]
        from: String,
    },
    /// Take no more files from a sender
    Deny {
        /// The receiving session
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: String,
        #[arg(value_name = "MACHINE/SESSION")]
        from: String,
    },
    /// Show whom a session takes files from, and the last ten refused
    List {
        /// The session
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: String,
    },
    /// Dismiss a refused sender without taking files from it (its next drop is
    /// refused, and shown, again)
    Ignore {
        /// The receiving session
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: String,
        #[arg(value_name = "MACHINE/SESSION")]
        from: String,
    },
    /// List the files a session received: sender, name and size
    Received {
        /// The session
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: String,
    },
    /// Delete one received file (and its note), named as `files received` lists it
    Clear {
        /// The receiving session
        #[arg(add = ArgValueCandidates::new(session_names))]
        name: String,
        /// Its sender
        #[arg(value_name = "MACHINE/SESSION")]
        from: String,
        /// The file's name
        file: String,
    },
}

#[derive(Debug, PartialEq, Args)]
pub struct ServeArgs {
    /// The address to listen on (default: 127.0.0.1 and the config's agent_port, 7387);
    /// localhost:PORT is 127.0.0.1:PORT, other names are refused.
    /// An address other than loopback is refused without --token-file, and on a port
    /// other than agent_port (the one port every cage is closed to)
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// A file holding a token: every request must then carry
    /// `Authorization: Bearer <token>`
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HarnessArg {
    Claude,
    Pi,
    Codex,
    Opencode,
}

#[derive(Debug, PartialEq, Subcommand)]
#[command(defer = true)]
pub enum ImageCommand {
    /// Build an image of ours from the Containerfile compiled in (or --containerfile),
    /// labelled with its hash; in the background unless --wait
    #[command(
        after_help = "Images: workbench is <images_repo>:latest, desktop is <images_repo>:desktop \
        (images_repo defaults to localhost/shrooms-workbench).\n\
        An image whose label is the Containerfile's hash already is not built again. \
        One build at a time per image: another `image build --wait` waits for it, follows its log and reports its result.\n\
        --wait on a terminal shows one line, rewritten in place: the step (3/9), its name and the time so far, \
        then whether it was built (and how long it took) or the failure with the build's last lines and its log. \
        Without a terminal, podman's STEP lines as they come (with --json on a terminal, all of podman's lines)."
    )]
    Build(ImageBuildArgs),
    /// Show the machine's image and ours: present, current, being built, the last build's error
    Status,
    /// Build in the background, for `image build` and `cage create` (not for use by hand)
    #[command(hide = true)]
    BuildWorker {
        /// STAGE:FD: an image and the descriptor of its build lock, held for it
        #[arg(long = "job", required = true, value_name = "STAGE:FD")]
        jobs: Vec<String>,
    },
}

#[derive(Debug, PartialEq, Args)]
pub struct ImageBuildArgs {
    /// Which image
    #[arg(value_enum, default_value_t = ImageWhich::Workbench)]
    pub which: ImageWhich,
    /// Build in the foreground, show its progress, and return its result
    #[arg(long)]
    pub wait: bool,
    /// Build from this Containerfile instead of the one compiled in (its stages
    /// must be named workbench and desktop); the label carries its hash
    #[arg(long, value_name = "FILE")]
    pub containerfile: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImageWhich {
    Workbench,
    Desktop,
    All,
}
