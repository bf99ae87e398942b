//! The two servers a turn's process holds for its cage, the model gateway
//! and the cage's socket, given their configuration here from the
//! operations' context: they take plain values and know nothing of `ops`.

use std::sync::Arc;

use super::{Context, cage_of};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::state::session::Record;
use crate::turn::cage_socket::{self, Socket};
use crate::turn::gateway::{self, Credentials, Gateway, github, listen, openai, routes, usage};

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
    let github = github_routes(ctx, record)?;
    gateway::open(
        &enter,
        &socket,
        gateway::Config {
            upstream: ctx.settings.gateway.anthropic_url.clone(),
            credentials,
            session: record.name.clone(),
            routes,
            ledger: Arc::new(
                usage::Ledger::new(
                    ctx.store.clone(),
                    &record.name,
                    &ctx.settings.user,
                    record.tokens.used,
                )
                .with_daily_budget(&ctx.settings.config_path)
                .priced(ctx.settings.prices.clone(), &record.tokens),
            ),
            openai: openai::Config {
                url: ctx.settings.gateway.openai_url.clone(),
                chatgpt_url: ctx.settings.gateway.chatgpt_url.clone(),
                credentials: openai_credentials,
            },
            github,
            budget_wait: ctx.settings.budget.wait,
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
            Some(socket) if is_lent_turn(ctx) => Credentials::Lent {
                socket: socket.clone(),
            },
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

/// Is this a turn sent here from another machine (`--on`) that uses the
/// key it lends, not this machine's own sources?
fn is_lent_turn(ctx: &Context) -> bool {
    ctx.settings.laptop_socket.is_some()
        && ctx.settings.gateway.remote_turns == crate::settings::RemoteTurns::Lent
}

/// GitHub's routes for a turn (docs/gateway.md, "GitHub"): only for a
/// session given `--github`, never for a sealed cage whatever its record
/// says, and never for a turn sent here from another machine (`--on`)
/// unless this machine's config says `[gateway] remote_turns = "own"`:
/// that machine lends only its Anthropic key, and this machine's GitHub
/// token is not its to use. gh's configuration is written in the cage's proxy folder, which
/// the cage has read-only (`GH_CONFIG_DIR`): it names the socket, and no
/// token. The token itself is looked for at each request.
fn github_routes(ctx: &Context, record: &Record) -> Result<Option<github::Config>> {
    let cage = cage_of(record)?;
    if !cage.options.github || cage.sealed.is_some() || is_lent_turn(ctx) {
        return Ok(None);
    }
    let proxy = ctx.store.proxy_dir(&cage.container);
    crate::state::session::make_private_dir(&proxy)?;
    let gh = proxy.join("gh");
    let doing = || crate::error::Doing::Make(gh.clone());
    match std::fs::create_dir(&gh) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::act(doing(), &e)),
    }
    // Read by the cage's root, who may not be its owner (a rootful cage):
    // nothing in it is secret.
    std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(|e| Error::act(doing(), &e))?;
    let text = github::gh_config(crate::cage::spec::GITHUB_SOCKET_IN_CAGE);
    crate::state::session::write_atomic_unsynced(&gh.join("config.yml"), text.as_bytes(), 0o644)?;
    Ok(Some(github::Config {
        api_url: ctx.settings.gateway.github_api_url.clone(),
        web_url: ctx.settings.gateway.github_url.clone(),
        sources: Arc::new(github::Sources::of(&ctx.env)),
        socket: proxy.join("github.sock"),
        session: record.name.clone(),
    }))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// GitHub's routes go to a session given `--github` alone, and never
    /// to a sealed cage, whatever its record says; gh's configuration names
    /// the socket, and no token.
    #[test]
    fn github_routes_only_with_github_and_never_sealed() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path();
        let env: crate::settings::Env = [
            ("HOME".to_string(), root.join("home").display().to_string()),
            ("PATH".to_string(), root.join("none").display().to_string()),
            ("GH_TOKEN".to_string(), "gho_machine".to_string()),
        ]
        .into();
        let settings = crate::settings::Settings::from_text(
            None,
            &root.join("config.toml"),
            root.join("state"),
            root.join("home"),
            &env,
        )
        .unwrap();
        let ctx = Context::new(settings, env, Vec::new());
        let mut record = crate::state::session::sample_record("web");
        let mut cage = crate::state::session::sample_cage("shrooms-web-1");
        record.cage = Some(cage.clone());
        assert!(github_routes(&ctx, &record).unwrap().is_none());
        cage.options.github = true;
        record.cage = Some(cage.clone());
        let routes = github_routes(&ctx, &record).unwrap().unwrap();
        assert_eq!(routes.api_url, "https://api.github.com");
        assert_eq!(routes.web_url, "https://github.com");
        assert_eq!(routes.sources.resolve().unwrap(), "gho_machine");
        let proxy = ctx.store.proxy_dir("shrooms-web-1");
        assert_eq!(routes.socket, proxy.join("github.sock"));
        let config = std::fs::read_to_string(proxy.join("gh/config.yml")).unwrap();
        assert!(config.contains("http_unix_socket: /run/shrooms-agent/github.sock\n"));
        assert!(!config.contains("gho_machine"));
        cage.sealed = Some(crate::state::session::SealedRecord {
            token_file: "/t".into(),
            outbox: "/o".into(),
            rules: String::new(),
            seccomp_file: "/s".into(),
            seccomp: String::new(),
            dns: Vec::new(),
        });
        record.cage = Some(cage);
        assert!(github_routes(&ctx, &record).unwrap().is_none());
    }

    /// A turn sent here from another machine (`--on`) is lent only that
    /// machine's Anthropic key: it gets no GitHub route, so never this
    /// machine's GitHub token, unless this machine says
    /// `[gateway] remote_turns = "own"`.
    #[test]
    fn a_lent_turn_gets_no_github_route_unless_remote_turns_is_own() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path();
        let env: crate::settings::Env = [
            ("HOME".to_string(), root.join("home").display().to_string()),
            ("PATH".to_string(), root.join("none").display().to_string()),
            ("GH_TOKEN".to_string(), "gho_machine".to_string()),
        ]
        .into();
        let context = |own: bool| {
            let mut settings = crate::settings::Settings::from_text(
                None,
                &root.join("config.toml"),
                root.join("state"),
                root.join("home"),
                &env,
            )
            .unwrap();
            settings.laptop_socket = Some(root.join("lent.sock"));
            if own {
                settings.gateway.remote_turns = crate::settings::RemoteTurns::Own;
            }
            Context::new(settings, env.clone(), Vec::new())
        };
        let mut record = crate::state::session::sample_record("web");
        let mut cage = crate::state::session::sample_cage("shrooms-web-1");
        cage.options.github = true;
        record.cage = Some(cage);
        let lent = context(false);
        assert!(matches!(
            credentials(&lent, None).0,
            Credentials::Lent { .. }
        ));
        assert!(github_routes(&lent, &record).unwrap().is_none());
        assert!(!lent.store.proxy_dir("shrooms-web-1").join("gh").exists());
        let own = context(true);
        assert!(matches!(credentials(&own, None).0, Credentials::Machine(_)));
        let routes = github_routes(&own, &record).unwrap().unwrap();
        assert_eq!(routes.sources.resolve().unwrap(), "gho_machine");
    }
}
