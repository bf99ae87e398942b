//! The two servers a turn's process holds for its cage, the model gateway
//! and the cage's socket, given their configuration here from the
//! operations' context: they take plain values and know nothing of `ops`.

use std::sync::Arc;

use super::{Context, cage_of};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::state::session::Record;
use crate::turn::cage_socket::{self, Socket};
use crate::turn::gateway::{self, Credentials, Gateway, listen, openai, routes, usage};

/// Open a session's gateway for one turn: a listener on its running cage's
/// loopback, served by this process until the returned value is dropped.
/// `pid` is the cage's first process, as podman said when the cage was
/// started and its rules loaded (`ensure_running`): podman is not asked
/// again.
pub fn open_gateway(
    ctx: &Context,
    host: &Host,
    record: &Record,
    pid: i64,
    routes: routes::Routes,
) -> Result<Gateway> {
    let cage = cage_of(record)?;
    if pid <= 0 {
        return Err(Error::not_running(
            &cage.container,
            "its model gateway cannot be opened",
        ));
    }
    let nsenter = host
        .nsenter
        .as_ref()
        .ok_or_else(|| Error::not_installed("nsenter", "util-linux", None))?;
    // nsenter runs this very program, whatever became of its path since
    // it started (an update may have replaced it): its copy in `tools/`
    // (`crate::cage::tools`), a file of the user's that `podman unshare` reaches
    // too (its user namespace may not open this process's /proc/PID/exe).
    let self_exe = match ctx.self_paths.first() {
        Some(file) => crate::cage::tools::provide(&ctx.store.tools_dir(), file)?,
        None => std::env::current_exe()
            .map_err(|e| Error::act("finding this program to open the model gateway", &e))?,
    };
    let enter = listen::Enter {
        pid,
        nsenter,
        rootless_podman: host.rootless.then(|| host.podman.program()),
        self_exe: &self_exe,
    };
    // Short, in a folder only we can reach (a Unix socket's path is at
    // most 107 bytes), one per process: one turn per process.
    let socket = ctx
        .store
        .cages_dir()
        .join(format!("gw{}.sock", std::process::id()));
    let (credentials, openai_credentials) = credentials(ctx, cage.sealed.as_ref());
    gateway::open(
        &enter,
        &socket,
        gateway::Config {
            upstream: ctx.settings.gateway.anthropic_url.clone(),
            credentials,
            session: record.name.clone(),
            routes,
            ledger: Arc::new(usage::Ledger::new(
                ctx.store.clone(),
                &record.name,
                &ctx.settings.user,
                record.tokens.used,
            )),
            openai: openai::Config {
                url: ctx.settings.gateway.openai_url.clone(),
                chatgpt_url: ctx.settings.gateway.chatgpt_url.clone(),
                credentials: openai_credentials,
            },
        },
    )
}

/// The credentials a turn's gateway adds: the Messages API's, and OpenAI's.
fn credentials(
    ctx: &Context,
    sealed: Option<&crate::state::session::SealedRecord>,
) -> (Credentials, openai::Credentials) {
    let credentials = match sealed {
        Some(s) => Credentials::Sealed {
            token_file: s.token_file.clone(),
        },
        // A turn sent here from another machine (`--on`) uses the key it
        // lends for the turn, unless this machine's config says to use its own.
        None => match &ctx.settings.laptop_socket {
            Some(socket)
                if ctx.settings.gateway.remote_turns == crate::settings::RemoteTurns::Lent =>
            {
                Credentials::Lent {
                    socket: socket.clone(),
                }
            }
            _ => Credentials::Machine(Arc::new(gateway::machine_sources(&ctx.settings, &ctx.env))),
        },
    };
    // A sealed cage's only login is Anthropic's; a turn sent here from
    // another machine is lent only that machine's Anthropic key.
    let openai_credentials = match &credentials {
        Credentials::Sealed { .. } => openai::Credentials::Refused(openai::SEALED),
        Credentials::Lent { .. } => openai::Credentials::Refused(openai::LENT),
        Credentials::Machine(_) => {
            openai::Credentials::Machine(Arc::new(gateway::openai_sources(&ctx.settings, &ctx.env)))
        }
    };
    (credentials, openai_credentials)
}

/// Serve a session's socket in its cage's proxy folder for one turn.
pub fn open_socket(ctx: &Context, record: &Record) -> Result<Socket> {
    let cage = cage_of(record)?;
    let dir = ctx.store.proxy_dir(&cage.container);
    crate::state::session::make_private_dir(&dir)?;
    cage_socket::start(
        &dir.join("proxy.sock"),
        cage_socket::Config {
            session: record.name.clone(),
            sealed: cage.sealed.is_some(),
            machine: ctx.settings.machine_name.clone(),
            agents: cage_socket::agents(&ctx.settings),
        },
    )
}
