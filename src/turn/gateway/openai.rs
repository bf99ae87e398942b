//! OpenAI's APIs on the gateway, under the prefix `/openai` of its base
//! URL (docs/gateway.md, "OpenAI's APIs"): the Responses API and Chat
//! Completions pass, with the machine's OpenAI credential added
//! (`credentials::OpenAiSources`); anything else under the prefix is
//! refused as any other route is.
//!
//! With an API key, requests go to `[gateway] openai_url`. With Codex's
//! ChatGPT sign-in, the Responses API's requests go to the Codex route of
//! `[gateway] chatgpt_url`, as Codex itself sends them when signed in
//! that way; Chat Completions is not offered there. A sealed cage's only
//! login is Anthropic's sealed token: it is refused every OpenAI route.

use std::sync::Arc;

use hyper::StatusCode;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::credentials::{OpenAiCredential, OpenAiSources};
use super::usage::Api;

/// The prefix of OpenAI's routes on the gateway's base URL.
pub const PREFIX: &str = "/openai";

/// The routes that pass under [`PREFIX`], with the API of each.
pub const ROUTES: &[(&str, &str, Api)] = &[
    ("POST", "/v1/responses", Api::Responses),
    ("POST", "/v1/chat/completions", Api::ChatCompletions),
];

/// The path of the Responses API on the ChatGPT backend, where Codex sends
/// its requests when signed in with ChatGPT (Codex's own
/// codex-rs/core/src/model_provider_info.rs: the base URL
/// `https://chatgpt.com/backend-api/codex`, and the route `/responses`).
pub const CHATGPT_RESPONSES: &str = "/backend-api/codex/responses";

/// Headers of the cage's that choose whose account or project a request
/// spends: the machine's credential decides that, not the cage.
const IDENTITY_HEADERS: &[&str] = &[
    "chatgpt-account-id",
    "openai-organization",
    "openai-project",
];

/// What the gateway is told of OpenAI's routes.
#[derive(Debug, Clone)]
pub struct Config {
    /// `[gateway] openai_url`, without a trailing `/`.
    pub url: String,
    /// `[gateway] chatgpt_url`, without a trailing `/`.
    pub chatgpt_url: String,
    pub credentials: Credentials,
}

/// Where this turn's OpenAI credential comes from.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// The machine's sources.
    Machine(Arc<OpenAiSources>),
    /// None: every OpenAI request is refused with these words.
    Refused(&'static str),
}

/// What a sealed cage is told of OpenAI's routes.
pub const SEALED: &str = "this cage is sealed: its only login is Anthropic's sealed token, so \
    shrooms-agent's model gateway passes no request to OpenAI's APIs";
/// What a turn sent here from another machine is told of them.
pub const LENT: &str = "this turn was sent here from another machine, which lends only its \
    Anthropic key; for OpenAI's APIs to use this machine's own credential, set [gateway] \
    remote_turns = \"own\" in shrooms-agent's config on this machine";
/// What the harness is told when the machine has no OpenAI credential.
pub const NO_CREDENTIAL: &str = "shrooms-agent's model gateway has no OpenAI credential to add \
    to this request; the terminal of the turn (or serve's log) says why. It takes the first of: \
    [gateway] openai_key_file or openai_key_command in shrooms-agent's config, OPENAI_API_KEY in \
    the environment of `shrooms-agent cage run`, and Codex's login on the machine \
    (~/.codex/auth.json, or $CODEX_HOME/auth.json: log in with codex on the machine)";
/// What the harness is told of Chat Completions with a ChatGPT sign-in.
pub const NO_CHAT_WITH_CHATGPT: &str = "the machine's OpenAI credential is Codex's ChatGPT \
    sign-in, which serves only the Responses API: shrooms-agent's model gateway passes no Chat \
    Completions request with it; set [gateway] openai_key_file, openai_key_command or \
    OPENAI_API_KEY for an API key";

/// The rest of a path under [`PREFIX`] (starting with `/`, or empty), if
/// the path is under it.
pub fn under_prefix(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(PREFIX)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

/// The API of an OpenAI route that passes; None: refused.
pub fn route(method: &str, path: &str) -> Option<Api> {
    ROUTES
        .iter()
        .find(|(m, p, _)| *m == method && *p == path)
        .map(|(_, _, api)| *api)
}

/// Where a request with `credential` goes: the upstream's base URL and the
/// whole URL; or, for Chat Completions with a ChatGPT sign-in, None.
pub fn upstream(
    config: &Config,
    credential: &OpenAiCredential,
    api: Api,
    path: &str,
    query: &str,
) -> Option<(String, String)> {
    match credential {
        OpenAiCredential::ApiKey(_) => {
            Some((config.url.clone(), format!("{}{path}{query}", config.url)))
        }
        OpenAiCredential::ChatGpt { .. } if api == Api::Responses => Some((
            config.chatgpt_url.clone(),
            format!("{}{CHATGPT_RESPONSES}{query}", config.chatgpt_url),
        )),
        OpenAiCredential::ChatGpt { .. } => None,
    }
}

/// The request headers sent upstream: the cage's, less hop-by-hop,
/// credential and identity headers, with the machine's credential added.
pub fn upstream_headers(incoming: &HeaderMap, credential: &OpenAiCredential) -> HeaderMap {
    let mut out = super::passed_headers(incoming, IDENTITY_HEADERS);
    let (token, account) = match credential {
        OpenAiCredential::ApiKey(k) => (k, None),
        OpenAiCredential::ChatGpt {
            access_token,
            account_id,
        } => (access_token, account_id.as_ref()),
    };
    if let Ok(v) = HeaderValue::from_str(&format!("Bearer {token}")) {
        out.insert(header::AUTHORIZATION, super::sensitive(v));
    }
    if let Some(a) = account
        && let Ok(v) = HeaderValue::from_str(a)
    {
        out.insert(
            HeaderName::from_static("chatgpt-account-id"),
            super::sensitive(v),
        );
    }
    out
}

/// A request under [`PREFIX`], as asked.
pub struct Asked<'a> {
    pub method: &'a str,
    /// The whole path, as told when refused.
    pub full_path: &'a str,
    /// The path after the prefix.
    pub path: &'a str,
    /// `?` and the query, or empty.
    pub query: &'a str,
}

/// Where an OpenAI request goes, or the answer that refuses it: a route
/// not of [`ROUTES`], a turn without OpenAI credentials, a spent budget,
/// no credential on the machine, Chat Completions with a ChatGPT sign-in.
pub(super) async fn plan(
    state: &super::State,
    asked: &Asked<'_>,
    incoming: &HeaderMap,
) -> Result<super::Plan, super::NotNow> {
    let Some(api) = route(asked.method, asked.path) else {
        return Err(super::not_a_route(asked.method, asked.full_path).into());
    };
    let config = &state.config.openai;
    let sources = match &config.credentials {
        Credentials::Machine(m) => m.clone(),
        Credentials::Refused(words) => {
            return Err(super::api_error(StatusCode::FORBIDDEN, "permission_error", words).into());
        }
    };
    let permit = super::admitted(state, true).await?;
    let credential = match tokio::task::spawn_blocking(move || sources.resolve()).await {
        Ok(Ok(c)) => c,
        Ok(Err(why)) => return Err(super::no_credential(state, &why, NO_CREDENTIAL).into()),
        Err(e) => {
            return Err(super::api_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                &format!("shrooms-agent's model gateway: {e}"),
            )
            .into());
        }
    };
    let Some((base, url)) = upstream(config, &credential, api, asked.path, asked.query) else {
        return Err(super::api_error(
            StatusCode::FORBIDDEN,
            "permission_error",
            NO_CHAT_WITH_CHATGPT,
        )
        .into());
    };
    let subscription = matches!(credential, OpenAiCredential::ChatGpt { .. });
    if subscription {
        super::subscription_checked(state, "Codex's ChatGPT sign-in").await?;
    }
    Ok(super::Plan {
        api: Some(api),
        base,
        url,
        headers: upstream_headers(incoming, &credential),
        permit,
        subscription,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::gateway::tests::shown;

    fn config() -> Config {
        Config {
            url: "http://127.0.0.1:9/oa".into(),
            chatgpt_url: "http://127.0.0.1:8".into(),
            credentials: Credentials::Refused(SEALED),
        }
    }

    #[test]
    fn only_openais_model_routes_pass_under_the_prefix() {
        assert_eq!(under_prefix("/openai/v1/responses"), Some("/v1/responses"));
        assert_eq!(under_prefix("/openai"), Some(""));
        assert_eq!(under_prefix("/openaiv1/responses"), None);
        assert_eq!(under_prefix("/v1/responses"), None);
        assert_eq!(under_prefix("/pi/openai/v1/responses"), None);
        assert_eq!(route("POST", "/v1/responses"), Some(Api::Responses));
        assert_eq!(
            route("POST", "/v1/chat/completions"),
            Some(Api::ChatCompletions)
        );
        for (m, p) in [
            ("GET", "/v1/responses"),
            ("POST", "/v1/responses/"),
            ("POST", "/v1/responses/resp_1/cancel"),
            ("GET", "/v1/models"),
            ("POST", "/v1/files"),
            ("POST", "/v1/embeddings"),
            ("POST", "/v1/messages"),
            ("POST", "/v1/../v1/responses"),
            ("POST", ""),
            ("POST", "/"),
        ] {
            assert_eq!(route(m, p), None, "{m} {p}");
        }
        // The default route does not take OpenAI's paths either.
        assert!(!super::super::allowed("POST", "/v1/responses"));
    }

    #[test]
    fn where_an_openai_request_goes() {
        let c = config();
        let key = OpenAiCredential::ApiKey("sk-m".into());
        assert_eq!(
            upstream(&c, &key, Api::Responses, "/v1/responses", "?x=1"),
            Some((
                "http://127.0.0.1:9/oa".into(),
                "http://127.0.0.1:9/oa/v1/responses?x=1".into()
            ))
        );
        assert_eq!(
            upstream(&c, &key, Api::ChatCompletions, "/v1/chat/completions", ""),
            Some((
                "http://127.0.0.1:9/oa".into(),
                "http://127.0.0.1:9/oa/v1/chat/completions".into()
            ))
        );
        let signed_in = OpenAiCredential::ChatGpt {
            access_token: "at".into(),
            account_id: Some("acc".into()),
        };
        assert_eq!(
            upstream(&c, &signed_in, Api::Responses, "/v1/responses", ""),
            Some((
                "http://127.0.0.1:8".into(),
                "http://127.0.0.1:8/backend-api/codex/responses".into()
            ))
        );
        assert_eq!(
            upstream(
                &c,
                &signed_in,
                Api::ChatCompletions,
                "/v1/chat/completions",
                ""
            ),
            None
        );
    }

    #[test]
    fn the_cages_openai_credentials_go_and_the_machines_come() {
        let mut incoming = HeaderMap::new();
        for (n, v) in [
            ("host", "127.0.0.1:4000"),
            ("authorization", "Bearer sk-dummy"),
            ("chatgpt-account-id", "forged"),
            ("openai-organization", "org-forged"),
            ("openai-project", "proj-forged"),
            ("x-api-key", "forged"),
            ("content-type", "application/json"),
            ("accept-encoding", "zstd,gzip"),
            ("originator", "codex_cli_rs"),
            ("session_id", "s-1"),
            ("accept", "text/event-stream"),
        ] {
            incoming.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        let got = upstream_headers(&incoming, &OpenAiCredential::ApiKey("sk-machine".into()));
        assert_eq!(
            shown(&got),
            vec![
                "accept-encoding: identity",
                "accept: text/event-stream",
                "authorization: Bearer sk-machine",
                "content-type: application/json",
                "originator: codex_cli_rs",
                "session_id: s-1",
            ]
        );
        let got = upstream_headers(
            &incoming,
            &OpenAiCredential::ChatGpt {
                access_token: "at-machine".into(),
                account_id: Some("acc-machine".into()),
            },
        );
        assert_eq!(
            shown(&got),
            vec![
                "accept-encoding: identity",
                "accept: text/event-stream",
                "authorization: Bearer at-machine",
                "chatgpt-account-id: acc-machine",
                "content-type: application/json",
                "originator: codex_cli_rs",
                "session_id: s-1",
            ]
        );
    }
}
