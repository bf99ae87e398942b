//! `cage limits` (with flags) and `POST /v1/sessions/{name}/cage/limits`:
//! a session's own limits, its token budget, its network policy.

use serde::Deserialize;
use utoipa::ToSchema;

use super::{Loose, OnSession};
use crate::error::{Error, Result};
use crate::face::cli::LimitsArgs;
use crate::net::netpolicy::NetPolicy;
use crate::ops::limits::{LimitsRequest, parse_tokens, parse_usd};
use crate::settings::LimitsAsked;

/// The flags, with the limits they ask for as the settings read them
/// (with the config, by the same rules: `Overrides`).
impl TryFrom<(LimitsArgs, LimitsAsked)> for LimitsRequest {
    type Error = Error;

    fn try_from((a, asked): (LimitsArgs, LimitsAsked)) -> Result<LimitsRequest> {
        Ok(LimitsRequest {
            name: a.name,
            asked,
            reset: a.reset,
            tokens: a.tokens.as_deref().map(parse_tokens).transpose()?,
            usd: a.usd.as_deref().map(parse_usd).transpose()?,
            net: a.net.as_deref().map(NetPolicy::parse).transpose()?,
            by: a.by,
        })
    }
}

/// At least one of them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsBody {
    /// podman's units: 512m, 16g; at least 6m (podman's minimum); a number alone is bytes.
    pub memory: Option<Loose>,
    /// From 0.01 up to the machine's.
    pub cpus: Option<Loose>,
    pub pids: Option<Loose>,
    /// The token budget, enforced by the model gateway: a positive whole
    /// number, or a string with `k` (thousands) or `M` (millions) after it
    /// (`"5k"`, `"1.5M"`); `"none"` or null removes it.
    #[serde(default, deserialize_with = "super::present")]
    #[schema(nullable)]
    pub tokens: Option<Option<Loose>>,
    /// The dollar budget, enforced by the model gateway at list prices: an
    /// amount with at most cents (`5`, `2.5`, `"2.50"`); `"none"` or null
    /// removes it. Refused for a session whose model requests go upstream
    /// on a subscription sign-in.
    #[serde(default, deserialize_with = "super::present")]
    #[schema(nullable)]
    pub usd: Option<Option<Loose>>,
    /// A new network policy, as `--net`: "open", "internet" or
    /// "allow:NAME,HOST:PORT,..."; a running cage's rules change at once.
    pub net: Option<String>,
}

impl TryFrom<OnSession<LimitsBody>> for LimitsRequest {
    type Error = Error;

    fn try_from(sent: OnSession<LimitsBody>) -> Result<LimitsRequest> {
        let body = sent.body;
        Ok(LimitsRequest {
            name: sent.name,
            asked: LimitsAsked::parse(
                body.memory.map(Loose::text).as_deref(),
                body.cpus.map(Loose::text).as_deref(),
                body.pids.map(Loose::text).as_deref(),
            )?,
            reset: false,
            tokens: body
                .tokens
                .map(|t| t.map_or(Ok(None), |t| parse_tokens(&t.text())))
                .transpose()?,
            usd: body
                .usd
                .map(|u| u.map_or(Ok(None), |u| parse_usd(&u.text())))
                .transpose()?,
            net: body.net.as_deref().map(NetPolicy::parse).transpose()?,
            by: Some(sent.by),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::prices::Usd;

    #[test]
    fn limits_take_strings_and_numbers() {
        let l: LimitsBody =
            serde_json::from_str(r#"{"memory": "16g", "cpus": 1.5, "pids": 100}"#).unwrap();
        assert_eq!(l.memory.unwrap().text(), "16g");
        assert_eq!(l.cpus.unwrap().text(), "1.5");
        assert_eq!(l.pids.unwrap().text(), "100");
        assert!(serde_json::from_str::<LimitsBody>(r#"{"cpus": true}"#).is_err());
        let tokens = |t: &str| {
            serde_json::from_str::<LimitsBody>(t)
                .unwrap()
                .tokens
                .map(|t| t.map(Loose::text))
        };
        assert_eq!(tokens(r#"{"tokens": 5000}"#), Some(Some("5000".into())));
        assert_eq!(tokens(r#"{"tokens": "none"}"#), Some(Some("none".into())));
        assert_eq!(tokens(r#"{"tokens": null}"#), Some(None));
        assert_eq!(tokens(r#"{"memory": "1g"}"#), None);
    }

    /// The flags and a body asking for the same change make the same
    /// request.
    #[test]
    fn the_flags_and_the_body_make_one_request() {
        use clap::Parser;
        let cli = crate::face::cli::Cli::try_parse_from([
            "shrooms-agent",
            "cage",
            "limits",
            "s",
            "--tokens",
            "5k",
            "--usd",
            "2.50",
            "--net",
            "open",
            "--by",
            "u",
        ])
        .unwrap();
        let crate::face::cli::Command::Cage(crate::face::cli::CageCommand::Limits(a)) = cli.command
        else {
            panic!("not limits");
        };
        let from_flags = LimitsRequest::try_from((a, LimitsAsked::default())).unwrap();
        let from_body = LimitsRequest::try_from(OnSession {
            name: "s".to_string(),
            body: serde_json::from_str(r#"{"tokens": "5k", "usd": 2.5, "net": "open"}"#).unwrap(),
            by: "u".to_string(),
        })
        .unwrap();
        for r in [&from_flags, &from_body] {
            assert_eq!(r.name, "s");
            assert_eq!(r.tokens, Some(Some(5000)));
            assert_eq!(r.usd, Some(Some(Usd::cents(250))));
            assert_eq!(r.net, Some(NetPolicy::parse("open").unwrap()));
            assert_eq!(r.by.as_deref(), Some("u"));
            assert!(!r.reset);
        }
        let e = LimitsRequest::try_from(OnSession {
            name: "s".to_string(),
            body: serde_json::from_str(r#"{"tokens": "lots"}"#).unwrap(),
            by: "u".to_string(),
        })
        .unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::BadInput);
        for bad in [r#"{"usd": 0}"#, r#"{"usd": 1.234}"#, r#"{"usd": "lots"}"#] {
            let e = LimitsRequest::try_from(OnSession {
                name: "s".to_string(),
                body: serde_json::from_str(bad).unwrap(),
                by: "u".to_string(),
            })
            .unwrap_err();
            assert_eq!(e.field(), Some("usd"), "{bad}");
        }
        let none = LimitsRequest::try_from(OnSession {
            name: "s".to_string(),
            body: serde_json::from_str(r#"{"usd": null}"#).unwrap(),
            by: "u".to_string(),
        })
        .unwrap();
        assert_eq!(none.usd, Some(None));
    }
}
