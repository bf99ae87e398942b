//! GitHub through the gateway, for a cage given `--github`: the cage holds
//! no GitHub token, only a placeholder; the process holding the turn adds
//! the machine's on the way out (docs/gateway.md, "GitHub").
//!
//! - `gh`'s API calls: gh's `http_unix_socket` setting makes it send every
//!   request, plain HTTP/1.1 with `Host: api.github.com`, to a Unix socket
//!   (cli/go-gh, `pkg/api/http_client.go`). This process serves that
//!   socket in the cage's proxy folder; a request for GitHub's API host is
//!   forwarded to `[gateway] github_api_url` with `Authorization: token`;
//!   anything else is 403 and never leaves.
//! - git over HTTPS: the cage's git rewrites `https://github.com/` to the
//!   gateway's `/github.com/` (git-config(1), `url.<base>.insteadOf`); only
//!   git's smart-HTTP routes of a repository pass (gitprotocol-http(5)),
//!   forwarded to `[gateway] github_url` with the token as the password of
//!   `x-access-token`, as GitHub takes an installation token over HTTPS.
//! - The token: `GH_TOKEN`, then `GITHUB_TOKEN`, in the environment of the
//!   process holding the turn, else `gh auth token` run on the machine,
//!   its answer kept a few minutes. The cage's own credential headers
//!   never pass.
//!
//! A sealed cage never gets any of it: a sealed cage refuses `--github`
//! when it is made, and its turn opens no GitHub route whatever its record
//! says (`ops::turn_servers`).

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use crate::error::{Doing, Error, Result};
use crate::host::process::Process;

/// GitHub's API host, the one name the socket passes.
pub const API_HOST: &str = "api.github.com";
/// The gateway's path prefix for git over HTTPS to github.com.
pub const GIT_PREFIX: &str = "/github.com/";
/// How long `gh auth token`'s answer is used before it is run again.
pub const GH_TTL: Duration = Duration::from_secs(300);
/// How long `gh auth token` may take.
const GH_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections the socket serves at once, at most.
const MAX_CONNECTIONS: usize = 32;

/// Where the machine's GitHub token comes from, in this order.
#[derive(Debug, Default)]
pub struct Sources {
    pub env_gh_token: Option<String>,
    pub env_github_token: Option<String>,
    /// The machine's gh (found on PATH), run as `gh auth token`.
    pub gh: Option<PathBuf>,
    pub cache: Mutex<GhState>,
}

/// What `gh auth token` last did.
#[derive(Debug, Default)]
pub struct GhState {
    answer: Option<(Instant, String)>,
    failed: Option<(String, Instant, Duration)>,
}

impl Sources {
    /// The sources of the environment `env` (the turn's process's), with
    /// the machine's gh as its `PATH` finds it.
    pub fn of(env: &crate::settings::Env) -> Sources {
        Sources {
            env_gh_token: env.get("GH_TOKEN").cloned(),
            env_github_token: env.get("GITHUB_TOKEN").cloned(),
            gh: crate::settings::find_program("gh", env.get("PATH").map(String::as_str)),
            cache: Mutex::default(),
        }
    }

    /// The token to add now, or why there is none (the machine's words).
    pub fn resolve(&self) -> std::result::Result<String, String> {
        let set = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
        };
        if let Some(t) = set(&self.env_gh_token).or_else(|| set(&self.env_github_token)) {
            return Ok(t);
        }
        match &self.gh {
            Some(gh) => self.run_gh(gh),
            None => Err(
                "no GitHub token: GH_TOKEN and GITHUB_TOKEN are not set in the \
                 environment of `shrooms-agent cage run`, and there is no gh on its PATH to \
                 ask (`gh auth login` on this machine)"
                    .to_string(),
            ),
        }
    }

    /// `gh auth token`'s answer, kept for [`GH_TTL`]; after a failure,
    /// that failure again until its backing off ends (as the key command's:
    /// the cage's requests must not drive gh as fast as they come).
    fn run_gh(&self, gh: &Path) -> std::result::Result<String, String> {
        let mut state = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, t)) = &state.answer
            && at.elapsed() < GH_TTL
        {
            return Ok(t.clone());
        }
        if let Some((why, until, _)) = &state.failed
            && Instant::now() < *until
        {
            return Err(why.clone());
        }
        // Fixed arguments; nothing from the cage reaches it.
        let out = Process::new(gh, "gh auth token")
            .args(["auth", "token", "--hostname", "github.com"])
            .timeout(GH_TIMEOUT)
            .run();
        let token = match out {
            Ok(o) if !o.stdout.trim().is_empty() => Ok(o.stdout.trim().to_string()),
            Ok(_) => Err("`gh auth token` on this machine printed nothing".to_string()),
            Err(e) => Err(format!(
                "`gh auth token` on this machine: {} (`gh auth login` there, or set GH_TOKEN)",
                e.message()
            )),
        };
        match token {
            Ok(t) => {
                *state = GhState {
                    answer: Some((Instant::now(), t.clone())),
                    failed: None,
                };
                Ok(t)
            }
            Err(why) => {
                let backoff = super::credentials::next_backoff(state.failed.as_ref().map(|f| f.2));
                state.answer = None;
                state.failed = Some((why.clone(), Instant::now() + backoff, backoff));
                Err(why)
            }
        }
    }
}

/// What a turn's GitHub routes are told.
pub struct Config {
    /// GitHub's API, without a trailing `/` (`[gateway] github_api_url`).
    pub api_url: String,
    /// GitHub, without a trailing `/` (`[gateway] github_url`).
    pub web_url: String,
    pub sources: Arc<Sources>,
    /// Where gh's socket is made: in the cage's proxy folder.
    pub socket: PathBuf,
    /// The session, for messages.
    pub session: String,
}

/// A turn's GitHub routes: what both the socket and the gateway's git
/// route use.
pub struct GitHub {
    config: Config,
    client: std::sync::OnceLock<std::result::Result<reqwest::Client, String>>,
    /// The no-token notice is written to the terminal once per turn.
    told: AtomicBool,
}

/// gh's socket, served until dropped (the turn's end), then removed.
pub struct Served {
    path: PathBuf,
    server: Option<crate::turn::server::Background>,
}

impl Drop for Served {
    fn drop(&mut self) {
        drop(self.server.take());
        let _ = std::fs::remove_file(&self.path);
    }
}

impl GitHub {
    pub fn new(config: Config) -> Arc<GitHub> {
        Arc::new(GitHub {
            config,
            client: std::sync::OnceLock::new(),
            told: AtomicBool::new(false),
        })
    }

    /// Serve gh's socket (mode 0600, given to the cage's root as the
    /// cage's socket is) on a thread of its own until dropped.
    pub fn serve_socket(self: &Arc<GitHub>) -> Result<Served> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.config.socket.clone();
        let doing = Doing::ServeGitHubSocket(path.clone());
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::act(doing.clone(), &e)),
        }
        let listener = crate::turn::cage_socket::bind_short(&path)
            .map_err(|e| Error::act(doing.clone(), &e))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::act(doing.clone(), &e))?;
        crate::turn::cage_socket::give_to_the_cages_root(&path)
            .map_err(|e| Error::act(doing.clone(), &e))?;
        let me = self.clone();
        let service = hyper::service::service_fn(move |req| {
            let me = me.clone();
            async move { Ok::<_, Infallible>(me.api(req).await) }
        });
        let server = crate::turn::server::Background::serving(
            "shrooms-github",
            "the GitHub socket",
            move || crate::turn::server::Listener::unix(listener),
            super::LIMITS,
            Some(MAX_CONNECTIONS),
            service,
        )
        .map_err(|e| e.context(doing))?;
        Ok(Served {
            path,
            server: Some(server),
        })
    }

    /// A request on gh's socket: GitHub's API host's, forwarded with the
    /// token; any other, 403.
    pub async fn api(&self, req: Request<Incoming>) -> Response<reqwest::Body> {
        if !is_api_method(req.method()) || !is_api_request(req.headers(), req.uri()) {
            return refused(
                "shrooms-agent's GitHub socket passes only requests for api.github.com",
            );
        }
        if let Some(kind) = lasting_access(req.method(), req.uri().path()) {
            return refused(&format!(
                "shrooms-agent's GitHub socket refuses {} {}: it would change {kind}, \
                 access that would outlive the session; only GET and HEAD pass there \
                 (do it yourself, outside the cage)",
                req.method(),
                req.uri().path()
            ));
        }
        let url = format!(
            "{}{}",
            self.config.api_url,
            req.uri()
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/")
        );
        self.forward(req, url, Auth::Token).await
    }

    /// A request on the gateway's `/github.com/` route: one of git's
    /// smart-HTTP routes of a repository, forwarded to GitHub with the
    /// token; any other, 403.
    pub async fn git(&self, req: Request<Incoming>) -> Response<reqwest::Body> {
        let Some(path) = git_route(req.method().as_str(), req.uri().path(), req.uri().query())
        else {
            return refused(
                "shrooms-agent's gateway passes only git's smart-HTTP routes of a \
                 repository to github.com",
            );
        };
        let query = req
            .uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let url = format!("{}{path}{query}", self.config.web_url);
        self.forward(req, url, Auth::Basic).await
    }

    async fn forward(
        &self,
        req: Request<Incoming>,
        url: String,
        auth: Auth,
    ) -> Response<reqwest::Body> {
        let sources = self.config.sources.clone();
        let token = match tokio::task::spawn_blocking(move || sources.resolve()).await {
            Ok(Ok(t)) => t,
            Ok(Err(why)) => return self.no_token(&why),
            Err(e) => return self.no_token(&e.to_string()),
        };
        let mut headers = upstream_headers(req.headers(), &token, auth);
        let method = req.method().clone();
        let with_body = !matches!(method, Method::GET | Method::HEAD);
        if !with_body {
            headers.remove(header::CONTENT_LENGTH);
        }
        let client = match self.client() {
            Ok(c) => c,
            Err(e) => {
                return answer(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("shrooms-agent's gateway: its HTTP client: {e}"),
                );
            }
        };
        let mut upstream = client.request(method, &url).headers(headers);
        if with_body {
            upstream = upstream.body(reqwest::Body::wrap(req.into_body()));
        }
        match upstream.send().await {
            Ok(r) => super::passed_back(r),
            Err(e) => answer(StatusCode::BAD_GATEWAY, &super::unreachable(&url, e)),
        }
    }

    fn client(&self) -> std::result::Result<&reqwest::Client, &str> {
        let client = self.client.get_or_init(|| {
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(30))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| e.to_string())
        });
        client.as_ref().map_err(String::as_str)
    }

    /// No token: why on the terminal of the turn (once), fixed words to
    /// the cage.
    fn no_token(&self, why: &str) -> Response<reqwest::Body> {
        if !self.told.swap(true, Ordering::SeqCst) {
            eprintln!(
                "shrooms-agent: session {}: the gateway's GitHub routes: {why}",
                self.config.session
            );
        }
        answer(StatusCode::UNAUTHORIZED, NO_TOKEN)
    }
}

/// What the cage is told when the machine has no GitHub token.
pub const NO_TOKEN: &str = "shrooms-agent's gateway has no GitHub token to add to this request; \
    the terminal of the turn (or serve's log) says why. It takes GH_TOKEN, then GITHUB_TOKEN, in \
    the environment of `shrooms-agent cage run`, else `gh auth token` on the machine";

/// How the token is sent: as gh's API takes it, or as git's password.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: token T`.
    Token,
    /// `Authorization: Basic base64("x-access-token:" + T)`.
    Basic,
}

/// Pure: a method GitHub's API takes (REST and GraphQL); not `CONNECT`,
/// `TRACE` or one of no standard's: the socket is no tunnel.
pub fn is_api_method(m: &Method) -> bool {
    matches!(
        *m,
        Method::GET | Method::HEAD | Method::POST | Method::PATCH | Method::PUT | Method::DELETE
    )
}

/// Pure: what lasting access a request on gh's socket would make or
/// change, or None when it passes. Every method but `GET` and `HEAD` is
/// refused on the API's endpoints that make credentials or grant access
/// that outlive the session (GitHub's REST API reference,
/// <https://docs.github.com/en/rest>): keys, collaborators and
/// invitations, webhooks, Actions runners, secrets and variables,
/// codespaces, memberships and teams, apps and their installations, OAuth
/// authorizations, a repository's transfer, the account's emails. The path
/// is read as GitHub could: percent-decoded, in any case, with empty, `.`
/// and `..` segments resolved; `/repositories/ID` and `/organizations/ID`
/// stand for `/repos/OWNER/REPO` and `/orgs/ORG`.
pub fn lasting_access(method: &Method, path: &str) -> Option<&'static str> {
    if matches!(*method, Method::GET | Method::HEAD) {
        return None;
    }
    let decoded = percent_decode(path).to_lowercase();
    let mut segs: Vec<&str> = Vec::new();
    for seg in decoded.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    let at = |i: usize| segs.get(i).copied().unwrap_or("");
    match at(0) {
        "repos" => repo_access(&segs[3.min(segs.len())..]),
        "repositories" => repo_access(&segs[2.min(segs.len())..]),
        "orgs" => org_access(&segs[2.min(segs.len())..]),
        "organizations" => org_access(&segs[2.min(segs.len())..]),
        "user" => user_access(&segs[1..]),
        "enterprises" | "admin" => Some("an enterprise's or the server's administration"),
        "teams" => Some("a team's members or repositories"),
        "authorizations" | "applications" => Some("OAuth authorizations (tokens)"),
        "app" | "app-manifests" | "installation" => Some("a GitHub App or its tokens"),
        _ => None,
    }
}

/// Pure: [`lasting_access`] under `/repos/OWNER/REPO/`.
fn repo_access(rest: &[&str]) -> Option<&'static str> {
    let at = |i: usize| rest.get(i).copied().unwrap_or("");
    match at(0) {
        "keys" => Some("the repository's deploy keys"),
        "collaborators" | "invitations" => Some("who can use the repository (collaborators)"),
        "hooks" => Some("the repository's webhooks"),
        "transfer" => Some("who owns the repository (a transfer)"),
        "codespaces" => Some("codespaces (machines that hold a token)"),
        "actions" if matches!(at(1), "runners" | "runner-groups") => {
            Some("Actions runners (registration tokens)")
        }
        "actions" | "dependabot" if matches!(at(1), "secrets" | "variables") => {
            Some("secrets or variables")
        }
        "actions" if matches!(at(1), "permissions" | "oidc") => {
            Some("what Actions workflows are allowed")
        }
        "environments" if rest.iter().any(|s| matches!(*s, "secrets" | "variables")) => {
            Some("secrets or variables")
        }
        _ => None,
    }
}

/// Pure: [`lasting_access`] under `/orgs/ORG/`.
fn org_access(rest: &[&str]) -> Option<&'static str> {
    match rest.first().copied().unwrap_or("") {
        "hooks" => Some("the organization's webhooks"),
        "actions" | "dependabot" | "codespaces" => {
            Some("the organization's runners, secrets, variables or codespaces")
        }
        "memberships"
        | "members"
        | "invitations"
        | "outside_collaborators"
        | "teams"
        | "security-managers"
        | "organization-roles" => Some("the organization's members"),
        "personal-access-tokens"
        | "personal-access-token-requests"
        | "installations"
        | "credential-authorizations" => Some("the organization's tokens or apps"),
        _ => None,
    }
}

/// Pure: [`lasting_access`] under `/user/`.
fn user_access(rest: &[&str]) -> Option<&'static str> {
    match rest.first().copied().unwrap_or("") {
        "keys" | "gpg_keys" | "ssh_signing_keys" => Some("the account's SSH or GPG keys"),
        "emails" => Some("the account's email addresses"),
        "codespaces" => Some("codespaces (machines that hold a token)"),
        "installations" => Some("what GitHub Apps may reach"),
        "repository_invitations" | "memberships" => Some("the account's memberships"),
        _ => None,
    }
}

/// Pure: `%XX` decoded (as bytes, then read as UTF-8 lossily); anything
/// else as it is.
fn percent_decode(path: &str) -> String {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).and_then(|c| hex(*c)),
                b.get(i + 2).and_then(|c| hex(*c)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Pure: is this request on gh's socket for GitHub's API host? Its `Host`
/// (or its URI's authority) must name `api.github.com`, on no port or 443.
pub fn is_api_request(headers: &HeaderMap, uri: &hyper::Uri) -> bool {
    let host = uri.authority().map(|a| a.as_str().to_string()).or_else(|| {
        headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_string)
    });
    let Some(host) = host else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    let name = host
        .strip_suffix(":443")
        .unwrap_or(&host)
        .trim_end_matches('.');
    name == API_HOST
}

/// Pure: the path sent to GitHub for a request on the gateway's git route,
/// or None when it is not one of git's smart-HTTP routes of a repository
/// (gitprotocol-http(5)): `GET /<owner>/<repo>[.git]/info/refs` with
/// `service=git-upload-pack` or `git-receive-pack` as its whole query, or
/// `POST` to `git-upload-pack` or `git-receive-pack` beside it.
pub fn git_route(method: &str, path: &str, query: Option<&str>) -> Option<String> {
    let rest = path.strip_prefix(GIT_PREFIX)?;
    let mut parts = rest.splitn(3, '/');
    let (owner, repo, tail) = (parts.next()?, parts.next()?, parts.next()?);
    if !is_name(owner) || !is_name(repo) {
        return None;
    }
    let passes = matches!(
        (method, tail, query),
        (
            "GET",
            "info/refs",
            Some("service=git-upload-pack" | "service=git-receive-pack")
        ) | ("POST", "git-upload-pack" | "git-receive-pack", None)
    );
    passes.then(|| format!("/{owner}/{repo}/{tail}"))
}

/// An owner's or a repository's name as GitHub allows them: letters,
/// digits, `-`, `_` and `.`, not `.` or `..`, nothing percent-encoded.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Pure: the request headers sent to GitHub: the cage's, less hop-by-hop
/// and credential headers, with the machine's token added as `auth` says.
/// The body's encoding passes as it is, both ways: nothing here reads it.
pub fn upstream_headers(incoming: &HeaderMap, token: &str, auth: Auth) -> HeaderMap {
    let mut out = super::cage_headers(incoming, &[]);
    let value = match auth {
        Auth::Token => format!("token {token}"),
        Auth::Basic => format!(
            "Basic {}",
            base64(format!("x-access-token:{token}").as_bytes())
        ),
    };
    if let Ok(mut v) = HeaderValue::from_str(&value) {
        v.set_sensitive(true);
        out.insert(header::AUTHORIZATION, v);
    }
    out
}

/// Pure: standard base64 with padding (RFC 4648, section 4).
pub fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An answer in GitHub's API's error shape (`{"message": ...}`), which gh
/// shows.
fn answer(status: StatusCode, message: &str) -> Response<reqwest::Body> {
    let body = serde_json::json!({ "message": message }).to_string();
    let mut r = Response::new(reqwest::Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn refused(message: &str) -> Response<reqwest::Body> {
    answer(StatusCode::FORBIDDEN, message)
}

/// The gh configuration a `--github` cage reads (`GH_CONFIG_DIR`): every
/// request of gh's to the socket at `socket` (its path in the cage).
pub fn gh_config(socket: &str) -> String {
    format!(
        "# Written by shrooms-agent at each turn: gh's requests go to the gateway,\n\
         # which adds the machine's GitHub token. There is no token here.\n\
         http_unix_socket: {socket}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::gateway::tests::{headers, shown};

    #[test]
    fn only_githubs_api_host_passes_the_socket() {
        let uri: hyper::Uri = "/user".parse().unwrap();
        for host in [
            "api.github.com",
            "API.GitHub.com",
            "api.github.com:443",
            "api.github.com.",
        ] {
            assert!(is_api_request(&headers(&[("host", host)]), &uri), "{host}");
        }
        for host in [
            "github.com",
            "api.github.com:80",
            "api.github.com.evil.example",
            "evil.example",
            "uploads.github.com",
            "127.0.0.1",
            "",
        ] {
            assert!(!is_api_request(&headers(&[("host", host)]), &uri), "{host}");
        }
        assert!(!is_api_request(&HeaderMap::new(), &uri));
        for m in ["GET", "HEAD", "POST", "PATCH", "PUT", "DELETE"] {
            assert!(is_api_method(&m.parse().unwrap()), "{m}");
        }
        for m in ["CONNECT", "TRACE", "OPTIONS", "PROPFIND"] {
            assert!(!is_api_method(&m.parse().unwrap()), "{m}");
        }
        // An absolute URI's authority wins over its Host header.
        let abs: hyper::Uri = "http://evil.example/user".parse().unwrap();
        assert!(!is_api_request(
            &headers(&[("host", "api.github.com")]),
            &abs
        ));
    }

    /// Endpoints that would make access outliving the session are
    /// refused to every method but GET and HEAD, however the path is
    /// written; the rest of the API passes.
    #[test]
    fn endpoints_of_lasting_access_are_refused() {
        for (m, p) in [
            ("POST", "/user/keys"),
            ("POST", "/user/gpg_keys"),
            ("POST", "/user/ssh_signing_keys"),
            ("DELETE", "/user/keys/1"),
            ("POST", "/user/emails"),
            ("POST", "/user/codespaces"),
            ("PATCH", "/user/repository_invitations/7"),
            ("PATCH", "/user/memberships/orgs/o"),
            ("PUT", "/user/installations/1/repositories/2"),
            ("POST", "/repos/o/r/keys"),
            ("PUT", "/repos/o/r/collaborators/u"),
            ("PATCH", "/repos/o/r/invitations/3"),
            ("POST", "/repos/o/r/hooks"),
            ("PATCH", "/repos/o/r/hooks/1/config"),
            ("POST", "/repos/o/r/transfer"),
            ("POST", "/repos/o/r/codespaces"),
            ("POST", "/repos/o/r/actions/runners/registration-token"),
            ("POST", "/repos/o/r/actions/runners/remove-token"),
            ("POST", "/repos/o/r/actions/runners/generate-jitconfig"),
            ("PUT", "/repos/o/r/actions/secrets/S"),
            ("POST", "/repos/o/r/actions/variables"),
            ("PUT", "/repos/o/r/dependabot/secrets/S"),
            ("PUT", "/repos/o/r/environments/prod/secrets/S"),
            ("PUT", "/repos/o/r/actions/permissions/workflow"),
            ("PUT", "/repositories/42/environments/prod/secrets/S"),
            ("POST", "/repositories/42/keys"),
            ("POST", "/orgs/o/hooks"),
            ("POST", "/orgs/o/actions/runners/registration-token"),
            ("PUT", "/orgs/o/actions/secrets/S"),
            ("PUT", "/orgs/o/dependabot/secrets/S"),
            ("PUT", "/orgs/o/codespaces/secrets/S"),
            ("PUT", "/orgs/o/memberships/u"),
            ("POST", "/orgs/o/invitations"),
            ("PUT", "/orgs/o/teams/t/repos/o/r"),
            ("POST", "/organizations/9/hooks"),
            ("PUT", "/teams/5/memberships/u"),
            ("POST", "/authorizations"),
            ("POST", "/applications/c/token"),
            ("POST", "/app/installations/1/access_tokens"),
            ("POST", "/app-manifests/code/conversions"),
            ("POST", "/enterprises/e/actions/runners/registration-token"),
            // However it is written.
            ("POST", "/USER/Keys"),
            ("POST", "/user/%6beys"),
            ("POST", "//user//keys/"),
            ("POST", "/user/./keys"),
            ("POST", "/repos/o/r/contents/../keys"),
            ("POST", "/repos/o/r/issues/../../r/hooks"),
        ] {
            assert!(
                lasting_access(&m.parse().unwrap(), p).is_some(),
                "{m} {p} passed"
            );
        }
        for (m, p) in [
            ("GET", "/user/keys"),
            ("HEAD", "/repos/o/r/keys"),
            ("GET", "/repos/o/r/actions/secrets/public-key"),
            ("GET", "/orgs/o/members"),
            ("GET", "/user"),
            ("POST", "/graphql"),
            ("POST", "/repos/o/r/pulls"),
            ("POST", "/repos/o/r/issues/1/comments"),
            ("PATCH", "/repos/o/r/pulls/2"),
            ("PUT", "/repos/o/r/pulls/2/merge"),
            ("PUT", "/repos/o/r/contents/secrets/keys.txt"),
            ("PUT", "/repos/o/r/contents/hooks/x"),
            ("POST", "/repos/o/r/actions/workflows/ci.yml/dispatches"),
            ("POST", "/repos/o/r/actions/runs/1/rerun"),
            ("POST", "/user/repos"),
            ("POST", "/gists"),
            ("POST", "/repos/o/r/forks"),
        ] {
            assert_eq!(lasting_access(&m.parse().unwrap(), p), None, "{m} {p}");
        }
    }

    #[test]
    fn only_gits_smart_http_routes_pass() {
        let up = Some("service=git-upload-pack");
        let rp = Some("service=git-receive-pack");
        for (m, p, q, to) in [
            ("GET", "/github.com/o/r/info/refs", up, "/o/r/info/refs"),
            (
                "GET",
                "/github.com/o/r.git/info/refs",
                rp,
                "/o/r.git/info/refs",
            ),
            (
                "POST",
                "/github.com/o-1/r_2.x/git-upload-pack",
                None,
                "/o-1/r_2.x/git-upload-pack",
            ),
            (
                "POST",
                "/github.com/o/r.git/git-receive-pack",
                None,
                "/o/r.git/git-receive-pack",
            ),
        ] {
            assert_eq!(git_route(m, p, q).as_deref(), Some(to), "{m} {p}");
        }
        for (m, p, q) in [
            ("GET", "/github.com/o/r/info/refs", None),
            ("GET", "/github.com/o/r/info/refs", Some("service=other")),
            (
                "GET",
                "/github.com/o/r/info/refs",
                Some("service=git-upload-pack&x=1"),
            ),
            ("POST", "/github.com/o/r/info/refs", up),
            ("GET", "/github.com/o/r/git-upload-pack", None),
            ("POST", "/github.com/o/r/git-upload-pack", Some("x=1")),
            ("POST", "/github.com/o/r/git-upload-pack/x", None),
            ("POST", "/github.com/../r/git-upload-pack", None),
            ("POST", "/github.com/o/../git-upload-pack", None),
            ("POST", "/github.com/o/%2e%2e/git-upload-pack", None),
            ("POST", "/github.com//r/git-upload-pack", None),
            ("GET", "/github.com/o/r/archive/main.zip", None),
            ("GET", "/github.com/login/oauth/access_token", None),
            ("POST", "/github.com/o/r/objects/info/packs", None),
            ("GET", "/github.com/o/r/HEAD", None),
            ("POST", "/v1/messages", None),
            ("POST", "/api.github.com/o/r/git-upload-pack", None),
        ] {
            assert_eq!(git_route(m, p, q), None, "{m} {p} {q:?}");
        }
    }

    #[test]
    fn the_cages_credentials_go_and_the_machines_token_comes() {
        let incoming = headers(&[
            ("host", "api.github.com"),
            ("authorization", "token placeholder"),
            ("proxy-authorization", "Basic Zm9v"),
            ("cookie", "a=b"),
            ("x-github-otp", "1"),
            ("x-auth-token", "forged"),
            ("private-token", "forged"),
            ("connection", "keep-alive, x-drop-me"),
            ("x-drop-me", "1"),
            ("accept", "application/vnd.github+json"),
            ("accept-encoding", "gzip"),
            ("git-protocol", "version=2"),
            ("content-type", "application/json"),
            ("user-agent", "GitHub CLI 2.23.0"),
        ]);
        assert_eq!(
            shown(&upstream_headers(&incoming, "gho_machine", Auth::Token)),
            vec![
                "accept-encoding: gzip",
                "accept: application/vnd.github+json",
                "authorization: token gho_machine",
                "content-type: application/json",
                "git-protocol: version=2",
                "user-agent: GitHub CLI 2.23.0",
                "x-github-otp: 1",
            ]
        );
        let got = upstream_headers(&incoming, "gho_machine", Auth::Basic);
        // base64("x-access-token:gho_machine")
        assert_eq!(
            got["authorization"],
            "Basic eC1hY2Nlc3MtdG9rZW46Z2hvX21hY2hpbmU="
        );
        assert!(got["authorization"].is_sensitive());
    }

    #[test]
    fn base64_as_rfc_4648_says() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded, "{plain}");
        }
    }

    /// GH_TOKEN first, then GITHUB_TOKEN, then the machine's gh, whose
    /// answer is kept; a blank value is no value.
    #[test]
    fn the_tokens_order() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = tempfile::tempdir().unwrap();
        let count = scratch.path().join("count");
        let gh = scratch.path().join("gh");
        std::fs::write(
            &gh,
            format!(
                "#!/bin/sh\n[ \"$*\" = \"auth token --hostname github.com\" ] || exit 3\n\
                 echo x >> {}\necho gho_from_gh\n",
                count.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sources = |a: Option<&str>, b: Option<&str>, gh: Option<&Path>| Sources {
            env_gh_token: a.map(str::to_string),
            env_github_token: b.map(str::to_string),
            gh: gh.map(Path::to_path_buf),
            cache: Mutex::default(),
        };
        let both = sources(Some("gh_env"), Some("github_env"), Some(&gh));
        assert_eq!(both.resolve().unwrap(), "gh_env");
        let second = sources(Some(" "), Some("github_env"), Some(&gh));
        assert_eq!(second.resolve().unwrap(), "github_env");
        let from_gh = sources(None, Some(""), Some(&gh));
        assert_eq!(from_gh.resolve().unwrap(), "gho_from_gh");
        assert_eq!(from_gh.resolve().unwrap(), "gho_from_gh");
        // Run once: its answer is kept.
        assert_eq!(std::fs::read_to_string(&count).unwrap(), "x\n");
        let none = sources(None, None, None);
        assert!(none.resolve().unwrap_err().contains("GH_TOKEN"));
        let failing = sources(None, None, Some(Path::new("/bin/false")));
        let why = failing.resolve().unwrap_err();
        assert!(why.contains("gh auth token"), "{why}");
        assert_eq!(failing.resolve().unwrap_err(), why);
    }

    #[test]
    fn the_gh_config_names_the_socket_and_no_token() {
        let c = gh_config("/run/shrooms-agent/github.sock");
        assert!(
            c.contains("\nhttp_unix_socket: /run/shrooms-agent/github.sock\n"),
            "{c}"
        );
        assert!(!c.contains("oauth_token"));
    }
}
