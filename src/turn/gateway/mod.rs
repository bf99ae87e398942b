//! The model gateway: while a turn runs, the process holding it answers the
//! harness's model requests on the cage's own loopback and forwards them to
//! the model API with the machine's credential, so no key is ever inside a
//! cage (docs/gateway.md, "Model gateway").
//!
//! - Only the model API's own routes pass (`ROUTES`), and OpenAI's model
//!   routes under `/openai` (`openai`); anything else is answered 403 here
//!   and never leaves the machine.
//! - Every credential header the cage sent is removed, and the machine's
//!   added (`Credentials`): the cage holds only a dummy key.
//! - Bodies stream both ways: each server-sent event is passed on as it
//!   comes, the request body is not held whole, and a harness that goes away
//!   drops the upstream request with it.
//! - Each model response's token counts are read on the way and kept in
//!   the session's record; past its token budget, model requests are
//!   refused (`usage`).
//!
//! It writes its notices on stderr itself (the terminal of the turn): it is
//! a face like `serve`, started by `cage run` / `cage exec`.

pub mod credentials;
pub mod github;
mod hold;
pub mod listen;
pub mod openai;
pub mod routes;
pub mod usage;

use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

pub use credentials::{Credential, Credentials};

use crate::error::{Error, Result};

/// The routes that pass, as Claude Code 2.1 and pi use the Messages API
/// (seen with a recording upstream: `HEAD /api/hello` before each turn, then
/// the messages route, with `?beta=true` from Claude Code).
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/messages"),
    ("POST", "/v1/messages/count_tokens"),
    ("HEAD", "/api/hello"),
    ("GET", "/api/hello"),
];

/// Is this request one of the model API's own?
pub fn allowed(method: &str, path: &str) -> bool {
    ROUTES.iter().any(|(m, p)| *m == method && *p == path)
}

/// Where a request goes: its route (a pi provider's, or None for the
/// default) and the path sent upstream; None: refused. A pi provider's
/// prefix picks its upstream and key, and the rest of the path must still
/// be a model route; an unknown prefix passes nothing.
pub fn passes<'a>(
    routes: &'a routes::Routes,
    method: &str,
    full_path: &'a str,
) -> Option<(Option<&'a routes::Route>, String)> {
    let (route, path) = match routes.pick(full_path) {
        routes::Picked::Default => (None, full_path),
        routes::Picked::Provider(r, rest) => (Some(r), rest),
        routes::Picked::Unknown => return None,
    };
    allowed(method, path).then(|| (route, path.to_string()))
}

/// Hop-by-hop headers (RFC 9110, section 7.6.1), which a proxy never passes on.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// Does this request header carry (or look like it carries) a credential?
/// Those from the cage never pass: the cage must not choose the identity
/// the model API sees, nor learn anything by sending its own.
pub fn is_credential_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "authorization" | "proxy-authorization" | "x-api-key" | "api-key" | "cookie"
    ) || [
        "key",
        "token",
        "auth",
        "secret",
        "password",
        "credential",
        "cookie",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// The beta flag the Messages API requires with an OAuth token (Claude Code
/// sends it when it uses one).
pub const OAUTH_BETA: &str = "oauth-2025-04-20";

/// The cage's request headers less hop-by-hop and credential headers, and
/// those `also_not` names (in lower case): what may go upstream to any API
/// (the model APIs' `passed_headers`, GitHub's).
pub fn cage_headers(incoming: &HeaderMap, also_not: &[&str]) -> HeaderMap {
    let named_by_connection: Vec<String> = incoming
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::new();
    for (name, value) in incoming {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n)
            || named_by_connection.iter().any(|c| c == n)
            || also_not.contains(&n)
            || is_credential_header(n)
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// The cage's request headers that may go upstream to a model API
/// (`cage_headers`), with `Accept-Encoding: identity`.
pub fn passed_headers(incoming: &HeaderMap, also_not: &[&str]) -> HeaderMap {
    let also_not: Vec<&str> = also_not
        .iter()
        .copied()
        .chain(["accept-encoding"])
        .collect();
    let mut out = cage_headers(incoming, &also_not);
    // The answer is read for its token counts on the way (`usage`): it
    // must come in a form the gateway reads, whatever the harness would
    // take. A compressed answer would pass by uncounted.
    out.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    out
}

/// The request headers sent upstream to the Messages API: the cage's
/// (`passed_headers`), with the machine's credential added.
pub fn upstream_headers(incoming: &HeaderMap, credential: &Credential) -> HeaderMap {
    let mut out = passed_headers(incoming, &["anthropic-beta"]);
    // The beta flags pass, but the OAuth one only with an OAuth token.
    let mut betas: Vec<String> = incoming
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && !s.starts_with("oauth-"))
        .collect();
    match credential {
        Credential::ApiKey(k) => {
            if let Ok(v) = HeaderValue::from_str(k) {
                out.insert(HeaderName::from_static("x-api-key"), sensitive(v));
            }
        }
        Credential::OAuth(t) => {
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {t}")) {
                out.insert(header::AUTHORIZATION, sensitive(v));
            }
            betas.push(OAUTH_BETA.to_string());
        }
    }
    if !betas.is_empty()
        && let Ok(v) = HeaderValue::from_str(&betas.join(","))
    {
        out.insert(HeaderName::from_static("anthropic-beta"), v);
    }
    out
}

fn sensitive(mut v: HeaderValue) -> HeaderValue {
    v.set_sensitive(true);
    v
}

/// An error in the Messages API's own shape, which the harnesses show.
pub fn api_error(status: StatusCode, kind: &str, message: &str) -> Response<reqwest::Body> {
    let body = serde_json::json!({
        "type": "error",
        "error": {"type": kind, "message": message},
    })
    .to_string();
    let mut r = Response::new(reqwest::Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// What the gateway is told.
pub struct Config {
    /// The model API's base URL, without a trailing `/`.
    pub upstream: String,
    pub credentials: Credentials,
    /// The session, for messages.
    pub session: String,
    /// pi's providers, each under a prefix of its own (`routes`).
    pub routes: routes::Routes,
    /// What the turn spent, and the session's budget.
    pub ledger: Arc<usage::Ledger>,
    /// OpenAI's routes, under `/openai`.
    pub openai: openai::Config,
    /// GitHub's routes, for a session given `--github` alone (`github`).
    pub github: Option<github::Config>,
    /// How long a model request held at a budget waits (`[budget] wait`).
    pub budget_wait: std::time::Duration,
}

struct State {
    config: Config,
    github: Option<Arc<github::GitHub>>,
    /// Made at the turn's first request upstream, not while the cage
    /// starts (its TLS configuration takes milliseconds to build).
    client: std::sync::OnceLock<std::result::Result<reqwest::Client, String>>,
    /// The no-credential notice is written to the terminal once per turn.
    told: AtomicBool,
}

/// A running gateway: serving until dropped (the turn's end).
pub struct Gateway {
    pub port: u16,
    server: Option<crate::turn::server::Background>,
    ledger: Arc<usage::Ledger>,
    /// gh's socket, with `--github`.
    github: Option<github::Served>,
}

/// How the gateway reads a connection: kept alive, as the harnesses'
/// clients keep theirs.
pub const LIMITS: crate::turn::server::Limits = crate::turn::server::Limits {
    head: std::time::Duration::from_secs(10),
    max_head: 64 * 1024,
    keep_alive: true,
};

impl Gateway {
    /// Serve on `listener` (made in the cage by `listen::listener_in`) on a
    /// thread of its own until dropped.
    pub fn start(listener: TcpListener, mut config: Config) -> Result<Gateway> {
        let port = listener
            .local_addr()
            .map_err(|e| Error::act("starting the model gateway", &e))?
            .port();
        let ledger = config.ledger.clone();
        let github = config.github.take().map(github::GitHub::new);
        let served = github.as_ref().map(|g| g.serve_socket()).transpose()?;
        let state = Arc::new(State {
            config,
            github,
            client: std::sync::OnceLock::new(),
            told: AtomicBool::new(false),
        });
        let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
        // Requests still in flight end with the turn.
        let server = crate::turn::server::Background::serving(
            "shrooms-gateway",
            "the model gateway",
            move || crate::turn::server::Listener::tcp(listener),
            LIMITS,
            None,
            service,
        )?;
        Ok(Gateway {
            port,
            server: Some(server),
            ledger,
            github: served,
        })
    }

    /// The base URL the harness is given.
    pub fn base_url(&self) -> String {
        base_url(self.port)
    }
}

/// Open a session's gateway for one turn: a listener on its running cage's
/// loopback (entered as `enter` says; `handover` is the path of the socket
/// the listener is handed over on, in a folder only we can reach), served
/// by this process with `config` until the returned value is dropped.
pub fn open(
    enter: &listen::Enter<'_>,
    handover: &std::path::Path,
    config: Config,
) -> Result<Gateway> {
    let listener = listen::listener_in(enter, handover)?;
    Gateway::start(listener, config)
}

/// This machine's sources of a key for an ordinary cage (also what it
/// lends to a turn it runs on another machine, `crate::face::remote`).
pub fn machine_sources(
    settings: &crate::settings::Settings,
    env: &crate::settings::Env,
) -> credentials::MachineSources {
    let login_dir = &settings.claude_dir;
    credentials::MachineSources {
        key_file: settings.gateway.key_file.clone(),
        key_command: settings.gateway.key_command.clone(),
        env_api_key: env.get("ANTHROPIC_API_KEY").cloned(),
        env_oauth_token: env.get("CLAUDE_CODE_OAUTH_TOKEN").cloned(),
        claude_credentials: login_dir.join(".credentials.json"),
        config_path: settings.config_path.clone(),
        cache: Default::default(),
    }
}

/// This machine's sources of an OpenAI credential for an ordinary cage.
pub fn openai_sources(
    settings: &crate::settings::Settings,
    env: &crate::settings::Env,
) -> credentials::OpenAiSources {
    credentials::OpenAiSources {
        key_file: settings.gateway.openai_key_file.clone(),
        key_command: settings.gateway.openai_key_command.clone(),
        env_api_key: env.get("OPENAI_API_KEY").cloned(),
        codex_auth: settings.codex_dir.join("auth.json"),
        config_path: settings.config_path.clone(),
        cache: Default::default(),
    }
}

pub fn base_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

impl Drop for Gateway {
    fn drop(&mut self) {
        drop(self.server.take());
        drop(self.github.take());
        // Every response has been counted: the turn's line.
        self.ledger.finish();
    }
}

/// Where a request that passes goes, and how.
struct Plan {
    /// Which API's tokens its answer spends (None: it spends none).
    api: Option<usage::Api>,
    /// The upstream's base URL, as told when it cannot be reached.
    base: String,
    /// The whole URL, with the path and query.
    url: String,
    headers: HeaderMap,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    /// It goes upstream on a subscription sign-in (no price per token).
    subscription: bool,
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> std::result::Result<Response<reqwest::Body>, Infallible> {
    // git over HTTPS to github.com, for a session given `--github` alone;
    // for any other, the path is no model route, and refused as one.
    if let Some(github) = &state.github
        && req.uri().path().starts_with(github::GIT_PREFIX)
    {
        return Ok(github.git(req).await);
    }
    model(state, req).await
}

/// A request for the model API: passed with the machine's credential,
/// held at a budget (`hold`), or refused.
async fn model(
    state: Arc<State>,
    req: Request<Incoming>,
) -> std::result::Result<Response<reqwest::Body>, Infallible> {
    let (parts, body) = req.into_parts();
    Ok(match plan_for(&state, &parts).await {
        Ok(p) => forward(&state, parts.method, body, p).await,
        Err(NotNow::Answer(answer)) => answer,
        Err(NotNow::AtBudget(at)) => hold::held(state, parts, body, at).await,
    })
}

/// Why a request is not sent upstream now.
enum NotNow {
    /// This answer goes back in its place.
    Answer(Response<reqwest::Body>),
    /// A budget is reached.
    AtBudget(usage::AtBudget),
}

impl From<Response<reqwest::Body>> for NotNow {
    fn from(answer: Response<reqwest::Body>) -> NotNow {
        NotNow::Answer(answer)
    }
}

/// Where a request goes (the Messages API, a pi provider's, OpenAI's),
/// or why it does not go now. Asked again, the same request, while it is
/// held at a budget: the budget and the credential are as they are then.
async fn plan_for(
    state: &State,
    parts: &hyper::http::request::Parts,
) -> std::result::Result<Plan, NotNow> {
    let method = parts.method.as_str();
    let full_path = parts.uri.path();
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    match openai::under_prefix(full_path) {
        Some(rest) => {
            let asked = openai::Asked {
                method,
                full_path,
                path: rest,
                query: &query,
            };
            openai::plan(state, &asked, &parts.headers).await
        }
        None => plan(state, method, full_path, &query, &parts.headers).await,
    }
}

/// The answer that refuses a request on a route that does not pass.
fn not_a_route(method: &str, path: &str) -> Response<reqwest::Body> {
    api_error(
        StatusCode::FORBIDDEN,
        "permission_error",
        &format!(
            "shrooms-agent's model gateway passes only the model API's own routes; \
             {method} {path} is not one of them"
        ),
    )
}

/// Where a request off the `/openai` prefix goes (the Messages API, or a
/// pi provider's), or the answer that refuses it.
async fn plan(
    state: &State,
    method: &str,
    full_path: &str,
    query: &str,
    incoming: &HeaderMap,
) -> std::result::Result<Plan, NotNow> {
    let Some((route, path)) = passes(&state.config.routes, method, full_path) else {
        return Err(not_a_route(method, full_path).into());
    };
    let spends = usage::spends(method, &path);
    let permit = admitted(state, spends).await?;
    let (credential, extra_headers) = credential_for(state, route).await?;
    let base = route
        .and_then(|r| r.upstream.as_deref())
        .unwrap_or(&state.config.upstream)
        .to_string();
    let mut headers = upstream_headers(incoming, &credential);
    if let Some(r) = route {
        add_route_headers(&mut headers, r, &credential, &extra_headers);
    }
    let subscription = spends && matches!(credential, Credential::OAuth(_));
    if subscription {
        subscription_checked(state, "a Claude login (an OAuth token)").await?;
    }
    Ok(Plan {
        api: spends.then_some(usage::Api::Messages),
        url: format!("{base}{path}{query}"),
        base,
        headers,
        permit,
        subscription,
    })
}

/// Send a request as planned, and its answer back, metered: its body as it
/// comes from the harness, or as a held request kept it.
async fn forward<B>(state: &State, method: Method, body: B, plan: Plan) -> Response<reqwest::Body>
where
    B: hyper::body::Body<Data = hyper::body::Bytes> + Send + Sync + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Plan {
        api,
        base,
        url,
        mut headers,
        permit,
        subscription,
    } = plan;
    // The model routes that take a body are POSTs; a body sent with HEAD
    // or GET is not passed on, nor its length.
    let with_body = method == Method::POST;
    if !with_body {
        headers.remove(header::CONTENT_LENGTH);
    }
    let client = match client(state) {
        Ok(c) => c,
        Err(e) => {
            return api_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                &format!("shrooms-agent's model gateway: its HTTP client: {e}"),
            );
        }
    };
    // An OpenAI request's body is counted on its way: its answer may not
    // say what its input was (`usage::SseMeter::usage`).
    let sent = api
        .filter(|a| *a != usage::Api::Messages)
        .map(|_| Arc::new(std::sync::atomic::AtomicU64::new(0)));
    let mut upstream = client.request(method, &url).headers(headers);
    if with_body {
        upstream = upstream.body(match &sent {
            Some(s) => reqwest::Body::wrap(usage::Counted::new(body, s.clone())),
            None => reqwest::Body::wrap(body),
        });
    }
    match upstream.send().await {
        Ok(r) => usage::metered(
            &state.config.ledger,
            api,
            sent,
            passed_back(r),
            permit,
            subscription,
        ),
        Err(e) => api_error(StatusCode::BAD_GATEWAY, "api_error", &unreachable(&base, e)),
    }
}

/// A request that spends tokens (`spends`) let through by the turn's
/// ledger, with the permit it then holds (while there is a budget), held
/// at a budget, or the answer that refuses it; any other request passes
/// as it is.
async fn admitted(
    state: &State,
    spends: bool,
) -> std::result::Result<Option<tokio::sync::OwnedSemaphorePermit>, NotNow> {
    if !spends {
        return Ok(None);
    }
    match state.config.ledger.admit().await {
        usage::Admitted::Pass(p) => Ok(p),
        usage::Admitted::AtBudget(at) => Err(NotNow::AtBudget(at)),
        usage::Admitted::Refused(why) => Err(refused(state, &why).into()),
    }
}

/// The answer that refuses a model request (`why`), said on the terminal
/// once per turn.
fn refused(state: &State, why: &str) -> Response<reqwest::Body> {
    if state.config.ledger.refused() {
        eprintln!("shrooms-agent: {why}");
    }
    usage::refused_response(why)
}

/// A model request that would go upstream on a subscription sign-in
/// (`what`): refused when the session has a dollar budget, which such a
/// sign-in's spend cannot be counted against (it has no price per token).
async fn subscription_checked(
    state: &State,
    what: &'static str,
) -> std::result::Result<(), Response<reqwest::Body>> {
    let ledger = state.config.ledger.clone();
    let why = tokio::task::spawn_blocking(move || ledger.subscription_refusal(what))
        .await
        .unwrap_or_else(|e| Some(format!("shrooms-agent's model gateway: {e}")));
    match why {
        None => Ok(()),
        Some(why) => Err(refused(state, &why)),
    }
}

/// The credential a request goes upstream with, and the headers its
/// provider's route adds (none on the model API's own routes); or the
/// answer that says why there is none.
async fn credential_for(
    state: &State,
    route: Option<&routes::Route>,
) -> std::result::Result<(Credential, Vec<(String, String)>), Response<reqwest::Body>> {
    let credentials = state.config.credentials.clone();
    // A provider's own key and headers come from the machine's models.json
    // (resolved on the machine, a command run here), else the gateway's own.
    let resolve_route = |r: &routes::Route| (r.credential(), r.resolved_headers());
    let (route_key, route_headers) = match route {
        Some(r) => {
            let (k, h) = tokio::task::block_in_place(|| resolve_route(r));
            (k, Some(h))
        }
        None => (None, None),
    };
    let extra_headers = match route_headers {
        None => Vec::new(),
        Some(Ok(h)) => h,
        Some(Err(why)) => return Err(no_credential(state, &why, NO_PROVIDER_CREDENTIAL)),
    };
    let resolved = match route_key {
        Some(k) => Ok(k),
        None => tokio::task::spawn_blocking(move || credentials.resolve()).await,
    };
    let credential = match resolved {
        Ok(Ok(c)) => c,
        Ok(Err(why)) => {
            let words = match (route, &state.config.credentials) {
                (Some(_), _) => NO_PROVIDER_CREDENTIAL,
                (None, Credentials::Sealed { .. }) => NO_SEALED_CREDENTIAL,
                (None, Credentials::Machine(_) | Credentials::Lent { .. }) => NO_CREDENTIAL,
            };
            return Err(no_credential(state, &why, words));
        }
        Err(e) => {
            return Err(api_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                &format!("shrooms-agent's model gateway: {e}"),
            ));
        }
    };
    Ok((credential, extra_headers))
}

/// The turn's HTTP client, made at its first request upstream; or why it
/// could not be made.
fn client(state: &State) -> std::result::Result<&reqwest::Client, &str> {
    let client = state.client.get_or_init(|| {
        reqwest::Client::builder()
            // A model's answer can take long; only connecting is bounded.
            .connect_timeout(std::time::Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())
    });
    client.as_ref().map_err(String::as_str)
}

/// An upstream's answer as the cage gets it: without the hop-by-hop
/// headers, and without cookies.
fn passed_back(r: reqwest::Response) -> Response<reqwest::Body> {
    let mut out: Response<reqwest::Body> = r.into();
    let h = out.headers_mut();
    for n in HOP_BY_HOP {
        h.remove(*n);
    }
    h.remove(header::SET_COOKIE);
    out
}

/// Why an upstream could not be reached, in words the cage may read: the
/// URL as its origin alone (scheme, host and port: no user or password,
/// no path or query, where a key may be written), and nothing of it in
/// the error's own words either.
pub fn unreachable(url: &str, e: reqwest::Error) -> String {
    format!(
        "shrooms-agent's model gateway could not reach {}: {}",
        shown_url(url),
        scrub(url, &error_chain(&e.without_url()))
    )
}

/// A URL as it may be shown to a cage: its origin alone.
pub fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) if u.has_host() => u.origin().ascii_serialization(),
        _ => "the configured URL".to_string(),
    }
}

/// `text` with the user, password, path and query of `url` blanked
/// wherever they appear (an error's words may repeat them).
pub fn scrub(url: &str, text: &str) -> String {
    let Ok(u) = reqwest::Url::parse(url) else {
        return text.replace(url, "the configured URL");
    };
    let mut out = text.to_string();
    let secrets = [
        Some(u.username().to_string()),
        u.password().map(str::to_string),
        Some(u.path().to_string()).filter(|p| p.len() > 1),
        u.query().map(str::to_string),
    ];
    for s in secrets.into_iter().flatten().filter(|s| !s.is_empty()) {
        out = out.replace(&s, "***");
        let decoded = percent_encoding::percent_decode_str(&s).decode_utf8_lossy();
        if !decoded.is_empty() {
            out = out.replace(decoded.as_ref(), "***");
        }
    }
    out
}

/// What the harness is told when the machine's credential could not be
/// had. Fixed words: why it could not (a key command's output, a file's
/// path) is the machine's, told on the terminal of the turn (serve's log
/// for a turn serve holds), never in the cage.
pub const NO_CREDENTIAL: &str = "shrooms-agent's model gateway has no credential to add to \
    this request; the terminal of the turn (or serve's log) says why. It takes the first of: \
    [gateway] key_file or key_command in shrooms-agent's config, ANTHROPIC_API_KEY or \
    CLAUDE_CODE_OAUTH_TOKEN in the environment of `shrooms-agent cage run`, and the machine's \
    Claude Code login (~/.claude/.credentials.json: log in with claude on the machine)";
/// The same for a sealed cage, whose own token is the only one.
pub const NO_SEALED_CREDENTIAL: &str = "shrooms-agent's model gateway could not read this \
    sealed cage's token; the terminal of the turn (or serve's log) says why";
/// The same for a pi provider's key or headers.
pub const NO_PROVIDER_CREDENTIAL: &str = "shrooms-agent's model gateway could not resolve this \
    provider's key or headers from the machine's pi models.json; the terminal of the turn (or \
    serve's log) says why";

/// The answer when no credential could be had: `why` on the terminal (once
/// a turn), the fixed `words` to the harness in a 401 marked
/// `x-should-retry: false`. Without that header Claude Code 2.1 takes a 401
/// for a key being renewed and retries it for about three minutes before it
/// shows the message; the header is the Messages API's own way of saying that
/// a retry will not help, which the Anthropic SDKs and Claude Code obey, so
/// the turn ends at once with these words on the screen.
fn no_credential(state: &State, why: &str, words: &str) -> Response<reqwest::Body> {
    if !state.told.swap(true, Ordering::SeqCst) {
        let said = if why.starts_with("shrooms-agent") {
            why.to_string()
        } else {
            format!("shrooms-agent's model gateway: {why}")
        };
        eprintln!("shrooms-agent: session {}: {said}", state.config.session);
    }
    do_not_retry(words)
}

/// A 401 with `words` that the harness is told not to try again.
fn do_not_retry(words: &str) -> Response<reqwest::Body> {
    let mut r = api_error(StatusCode::UNAUTHORIZED, "authentication_error", words);
    r.headers_mut().insert(
        HeaderName::from_static("x-should-retry"),
        HeaderValue::from_static("false"),
    );
    r
}

/// A pi provider's own headers (resolved on the machine), and its key as
/// `Authorization: Bearer` too when its `authHeader` asks for that.
fn add_route_headers(
    headers: &mut HeaderMap,
    route: &routes::Route,
    credential: &Credential,
    extra: &[(String, String)],
) {
    for (n, v) in extra {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(n.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            headers.insert(n, sensitive(v));
        }
    }
    if route.bearer
        && let Credential::ApiKey(k) = credential
        && let Ok(v) = HeaderValue::from_str(&format!("Bearer {k}"))
    {
        headers.insert(header::AUTHORIZATION, sensitive(v));
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_model_routes_pass() {
        assert!(allowed("POST", "/v1/messages"));
        assert!(allowed("POST", "/v1/messages/count_tokens"));
        assert!(allowed("HEAD", "/api/hello"));
        for (m, p) in [
            ("GET", "/v1/messages"),
            ("POST", "/v1/messages/"),
            ("POST", "/v1/messages/../files"),
            ("POST", "/v1/files"),
            ("GET", "/v1/models"),
            ("CONNECT", "/v1/messages"),
            ("POST", "/api/oauth/profile"),
            ("GET", "/"),
        ] {
            assert!(!allowed(m, p), "{m} {p}");
        }
    }

    /// Headers from pairs, for the gateway's modules' tests.
    pub(super) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    /// Headers as sorted `name: value` lines.
    pub(super) fn shown(h: &HeaderMap) -> Vec<String> {
        let mut v: Vec<String> = h
            .iter()
            .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_cages_credentials_go_and_the_machines_come() {
        let incoming = headers(&[
            ("host", "127.0.0.1:4000"),
            ("x-api-key", "forged"),
            ("authorization", "Bearer forged"),
            ("proxy-authorization", "Basic Zm9v"),
            ("cookie", "a=b"),
            ("x-auth-token", "forged"),
            ("anthropic-session-key", "forged"),
            ("content-type", "application/json"),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", "claude-code-20250219,oauth-2025-04-20"),
            ("connection", "keep-alive, x-drop-me"),
            ("x-drop-me", "1"),
            ("transfer-encoding", "chunked"),
            ("user-agent", "claude-cli/2.1"),
            ("accept-encoding", "gzip, br"),
        ]);
        let got = upstream_headers(&incoming, &Credential::ApiKey("sk-machine".into()));
        assert_eq!(
            shown(&got),
            vec![
                "accept-encoding: identity",
                "anthropic-beta: claude-code-20250219",
                "anthropic-version: 2023-06-01",
                "content-type: application/json",
                "user-agent: claude-cli/2.1",
                "x-api-key: sk-machine",
            ]
        );
        let got = upstream_headers(&incoming, &Credential::OAuth("oat-machine".into()));
        assert_eq!(
            shown(&got),
            vec![
                "accept-encoding: identity",
                "anthropic-beta: claude-code-20250219,oauth-2025-04-20",
                "anthropic-version: 2023-06-01",
                "authorization: Bearer oat-machine",
                "content-type: application/json",
                "user-agent: claude-cli/2.1",
            ]
        );
    }

    #[test]
    fn an_upstream_url_is_shown_without_its_secrets() {
        for (url, shown) in [
            (
                "https://user:s3cret-pass@llm.corp.example:8443/v1/key/abc?k=q1",
                "https://llm.corp.example:8443",
            ),
            ("http://127.0.0.1:9/corp", "http://127.0.0.1:9"),
            ("http://[::1]:9", "http://[::1]:9"),
            ("not a url with s3cret-pass", "the configured URL"),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
        }
        let url = "http://user:s3cret%2Dpass@127.0.0.1:9/key/abc";
        let said = scrub(
            url,
            "for url (http://user:s3cret%2Dpass@127.0.0.1:9/key/abc): s3cret-pass user",
        );
        assert!(!said.contains("s3cret"), "{said}");
        assert!(!said.contains("/key/abc"), "{said}");
        assert!(!said.contains("user"), "{said}");
    }

    /// The gateway holds the server shell's head deadline: a connection
    /// that sends half a head, or half of a second one after a whole one,
    /// is closed within [`LIMITS`]' head deadline, unanswered.
    #[test]
    fn the_gateway_cuts_off_a_head_that_does_not_come() {
        use std::io::{Read, Write};
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let store = crate::state::session::Store::new(&dir);
        store.ensure().unwrap();
        let r = crate::state::session::sample_record("u");
        store.save(&r).unwrap();
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let gateway = Gateway::start(
            listener,
            Config {
                upstream: "http://127.0.0.1:9".into(),
                credentials: Credentials::Sealed {
                    token_file: dir.join("no-token"),
                },
                session: "u".into(),
                routes: Default::default(),
                ledger: Arc::new(usage::Ledger::new(store, "u", "alice", r.tokens.used)),
                budget_wait: std::time::Duration::ZERO,
                openai: openai::Config {
                    url: "http://127.0.0.1:9".into(),
                    chatgpt_url: "http://127.0.0.1:9".into(),
                    credentials: openai::Credentials::Refused(openai::SEALED),
                },
                github: None,
            },
        )
        .unwrap();
        let cut_off = |sent: &[u8]| {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", gateway.port)).unwrap();
            c.set_read_timeout(Some(LIMITS.head * 3)).unwrap();
            let t = std::time::Instant::now();
            c.write_all(sent).unwrap();
            let mut got = Vec::new();
            let _ = c.read_to_end(&mut got);
            (t.elapsed(), String::from_utf8_lossy(&got).into_owned())
        };
        let half = b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n";
        let whole_then_half = b"GET /v1/files HTTP/1.1\r\nHost: x\r\n\r\nPOST /v1/mess";
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| cut_off(half));
            let b = s.spawn(|| cut_off(whole_then_half));
            (a.join().unwrap(), b.join().unwrap())
        });
        let around = |d: std::time::Duration| {
            d >= LIMITS.head - std::time::Duration::from_secs(1)
                && d < LIMITS.head + std::time::Duration::from_secs(3)
        };
        assert!(around(a.0), "{:?}", a.0);
        assert_eq!(a.1, "");
        assert!(around(b.0), "{:?}", b.0);
        assert!(b.1.starts_with("HTTP/1.1 403"), "{}", b.1);
        assert_eq!(b.1.matches("HTTP/1.1").count(), 1, "{}", b.1);
        drop(gateway);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A sealed cage's gateway refuses every OpenAI route, saying why, and
    /// a path under `/openai` that is not one of OpenAI's model routes is
    /// refused as any other route is; neither is sent anywhere.
    #[test]
    fn a_sealed_cage_gets_no_openai_route() {
        use std::io::{Read, Write};
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let store = crate::state::session::Store::new(&dir);
        store.ensure().unwrap();
        let r = crate::state::session::sample_record("u");
        store.save(&r).unwrap();
        // Were anything sent upstream, it would reach this listener.
        let upstream = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        upstream.set_nonblocking(true).unwrap();
        let up = format!("http://127.0.0.1:{}", upstream.local_addr().unwrap().port());
        let gateway = Gateway::start(
            TcpListener::bind(("127.0.0.1", 0)).unwrap(),
            Config {
                upstream: up.clone(),
                credentials: Credentials::Sealed {
                    token_file: dir.join("no-token"),
                },
                session: "u".into(),
                routes: Default::default(),
                ledger: Arc::new(usage::Ledger::new(store, "u", "alice", r.tokens.used)),
                budget_wait: std::time::Duration::ZERO,
                openai: openai::Config {
                    url: up.clone(),
                    chatgpt_url: up,
                    credentials: openai::Credentials::Refused(openai::SEALED),
                },
                github: None,
            },
        )
        .unwrap();
        let ask = |target: &str| {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", gateway.port)).unwrap();
            write!(
                c,
                "POST {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
                 Content-Length: 2\r\n\r\n{{}}"
            )
            .unwrap();
            let mut got = String::new();
            c.read_to_string(&mut got).unwrap();
            got
        };
        for target in ["/openai/v1/responses", "/openai/v1/chat/completions"] {
            let got = ask(target);
            assert!(got.starts_with("HTTP/1.1 403"), "{got}");
            assert!(got.contains("this cage is sealed"), "{got}");
        }
        let got = ask("/openai/v1/files");
        assert!(got.starts_with("HTTP/1.1 403"), "{got}");
        assert!(got.contains("is not one of them"), "{got}");
        assert!(upstream.accept().is_err(), "something was sent upstream");
        drop(gateway);
    }

    #[test]
    fn an_error_in_the_apis_shape() {
        let r = api_error(StatusCode::UNAUTHORIZED, "authentication_error", "set X");
        assert_eq!(r.status(), 401);
        assert_eq!(r.headers()["content-type"], "application/json");
        assert!(r.headers().get("x-should-retry").is_none());
        // No credential: the harness is told at once not to try again.
        let r = do_not_retry("set X");
        assert_eq!(r.status(), 401);
        assert_eq!(r.headers()["x-should-retry"], "false");
    }
}
