//! pi's `models.json` in a cage: a copy made from the machine's at each
//! turn, in which every provider whose API the model gateway speaks points
//! at the gateway (`/pi/NAME` on its base URL) with a dummy key, and the
//! gateway's routing table (`gateway::routes`) that sends those requests
//! on to the provider's real base URL with its real key. Providers of an
//! API the gateway does not speak are left out, with a warning. pi's
//! built-in `anthropic` provider, where the file does not name it, is
//! pointed at the gateway's default route (the machine's credential).
//!
//! The file's format is pi's (docs/models.md of pi-coding-agent):
//! `providers.NAME` with `baseUrl`, `api`, `apiKey`, `headers`,
//! `authHeader`, `models` (each with its own `api` and `headers`) and
//! `modelOverrides`.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Doing, Error, Result, Warning};
use crate::turn::gateway::routes::{ConfigValue, PI_PREFIX, Route, Routes};

/// The file of pi's folder the cage gets as a copy.
pub const COPIED: &str = "models.json";

/// The one API of pi's the gateway speaks.
pub const SPOKEN_API: &str = "anthropic-messages";

/// pi's built-in provider of that API.
const BUILT_IN_ANTHROPIC: &str = "anthropic";

/// The largest models.json read.
const MAX_READ: u64 = 16 << 20;

/// What a models.json gives: the cage's copy, waiting for the gateway's
/// base URL, the routing table, and what was left out.
#[derive(Debug)]
pub struct Plan {
    copy: Map<String, Value>,
    /// Providers whose `baseUrl` is the gateway's base URL plus this.
    pointed: Vec<(String, String)>,
    pub routes: Routes,
    pub warnings: Vec<Warning>,
}

/// Pure: plan the cage's copy of the machine's models.json (`text`; None:
/// there is none). `env` reads the environment of the process holding the
/// turn (for an `apiKey` naming a variable).
pub fn plan(
    text: Option<&str>,
    dummy_key: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> std::result::Result<Plan, String> {
    let mut copy = match text.map(serde_json::from_str::<Value>) {
        None => Map::new(),
        Some(Ok(Value::Object(o))) => o,
        Some(Ok(_)) => return Err("it is not a JSON object".into()),
        Some(Err(e)) => return Err(format!("it is not valid JSON ({e})")),
    };
    let providers = match copy.remove("providers") {
        None => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err("its \"providers\" is not an object".into()),
    };
    let mut kept = Map::new();
    let mut pointed = Vec::new();
    let mut routes = Vec::new();
    let mut warnings = Vec::new();
    for (name, provider) in providers {
        match provider_route(&name, provider, dummy_key, env) {
            Ok((p, route, notes)) => {
                warnings.extend(notes);
                pointed.push((name.clone(), format!("{PI_PREFIX}{name}")));
                routes.push(route);
                kept.insert(name, Value::Object(p));
            }
            Err(why) => warnings.push(Warning::PiProviderLeftOut {
                provider: name,
                why,
            }),
        }
    }
    // pi's built-in provider reaches the Messages API through the
    // gateway's default route: pi reads no base URL from the environment
    // for it, so the copy names the gateway as its baseUrl.
    if !kept.contains_key(BUILT_IN_ANTHROPIC) {
        let mut p = Map::new();
        p.insert("apiKey".into(), Value::String(dummy_key.into()));
        kept.insert(BUILT_IN_ANTHROPIC.into(), Value::Object(p));
        pointed.push((BUILT_IN_ANTHROPIC.into(), String::new()));
    }
    copy.insert("providers".into(), Value::Object(kept));
    Ok(Plan {
        copy,
        pointed,
        routes: Routes(routes),
        warnings,
    })
}

/// One provider's copy, its route, and notes about it.
type Provided = (Map<String, Value>, Route, Vec<Warning>);

/// One provider's copy, its route, and notes; or why it is left out.
fn provider_route(
    name: &str,
    provider: Value,
    dummy_key: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> std::result::Result<Provided, String> {
    let Value::Object(mut p) = provider else {
        return Err("it is not an object".into());
    };
    check_name(name)?;
    let built_in = name == BUILT_IN_ANTHROPIC;
    check_apis(&p, built_in)?;
    let mut notes = Vec::new();
    if drop_model_headers(&mut p) {
        notes.push(Warning::PiModelHeadersLeftOut {
            provider: name.to_string(),
        });
    }
    let upstream = match p.get("baseUrl") {
        Some(Value::String(u)) if u.starts_with("https://") || u.starts_with("http://") => {
            Some(u.trim_end_matches('/').to_string())
        }
        Some(Value::String(u)) => {
            return Err(format!("its baseUrl {u} is not an http:// or https:// URL"));
        }
        None if built_in => None,
        None => return Err("it has no baseUrl".into()),
        Some(_) => return Err("its \"baseUrl\" is not a string".into()),
    };
    let key = match p.get("apiKey") {
        Some(Value::String(k)) => Some(ConfigValue::from_pi(k, env)),
        None if built_in => None,
        None => return Err("it has no apiKey".into()),
        Some(_) => return Err("its \"apiKey\" is not a string".into()),
    };
    let headers = match p.remove("headers") {
        None => Vec::new(),
        Some(Value::Object(h)) => h
            .into_iter()
            .map(|(n, v)| match v {
                Value::String(v) => Ok((n, ConfigValue::from_pi(&v, env))),
                _ => Err(format!("its header {n} is not a string")),
            })
            .collect::<std::result::Result<_, _>>()?,
        Some(_) => return Err("its \"headers\" is not an object".into()),
    };
    let bearer = p.get("authHeader").and_then(Value::as_bool) == Some(true);
    p.insert("apiKey".into(), Value::String(dummy_key.into()));
    Ok((
        p,
        Route {
            name: name.to_string(),
            upstream,
            key,
            headers,
            bearer,
        },
        notes,
    ))
}

/// A provider's name is a path segment of the gateway's: letters, digits,
/// `-`, `_` and `.`, and not `.` or `..`.
fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || name == "."
        || name == ".."
    {
        return Err("its name has characters other than letters, digits, '-', '_' and '.'".into());
    }
    Ok(())
}

/// The provider speaks the gateway's API, and so does each of its models
/// that names one (the built-in provider may name none).
fn check_apis(p: &Map<String, Value>, built_in: bool) -> std::result::Result<(), String> {
    let api = match p.get("api") {
        Some(Value::String(a)) => Some(a.as_str()),
        None => None,
        Some(_) => return Err("its \"api\" is not a string".into()),
    };
    match api {
        Some(SPOKEN_API) => {}
        None if built_in => {}
        Some(other) => {
            return Err(format!(
                "its API is {other}, and the gateway speaks only {SPOKEN_API}"
            ));
        }
        None => {
            return Err(format!(
                "it names no \"api\", and the gateway speaks only {SPOKEN_API}"
            ));
        }
    }
    if let Some(Value::Array(models)) = p.get("models") {
        for m in models.iter() {
            if let Some(a) = m.get("api").and_then(Value::as_str)
                && a != SPOKEN_API
            {
                return Err(format!(
                    "its model {} uses the API {a}, and the gateway speaks only {SPOKEN_API}",
                    m.get("id").and_then(Value::as_str).unwrap_or("?")
                ));
            }
        }
    }
    Ok(())
}

/// Take the models' own headers out of the copy: they could hold
/// credentials and are not passed. Whether there were any.
fn drop_model_headers(p: &mut Map<String, Value>) -> bool {
    let mut dropped = false;
    for list in ["models", "modelOverrides"] {
        let entries: Vec<&mut Value> = match p.get_mut(list) {
            Some(Value::Array(a)) => a.iter_mut().collect(),
            Some(Value::Object(o)) => o.values_mut().collect(),
            _ => Vec::new(),
        };
        for m in entries {
            if let Value::Object(m) = m {
                dropped |= m.remove("headers").is_some();
            }
        }
    }
    dropped
}

impl Plan {
    /// The copy's text, its providers pointed at `base_url` (the gateway's).
    pub fn copy_text(&self, base_url: &str) -> String {
        let mut copy = self.copy.clone();
        if let Some(Value::Object(providers)) = copy.get_mut("providers") {
            for (name, suffix) in &self.pointed {
                if let Some(Value::Object(p)) = providers.get_mut(name) {
                    p.insert(
                        "baseUrl".into(),
                        Value::String(format!("{base_url}{suffix}")),
                    );
                }
            }
        }
        let mut out =
            serde_json::to_string_pretty(&Value::Object(copy)).unwrap_or_else(|_| "{}".into());
        out.push('\n');
        out
    }
}

/// Read the machine's models.json from pi's folder and plan the copy.
pub fn plan_from(
    harness_dir: &Path,
    dummy_key: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plan> {
    let path = harness_dir.join(COPIED);
    let text = match std::fs::File::open(&path) {
        Ok(f) => {
            let mut s = String::new();
            f.take(MAX_READ)
                .read_to_string(&mut s)
                .map_err(|e| Error::act(Doing::Read(path.to_path_buf()), &e))?;
            Some(s)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::act(Doing::Read(path.to_path_buf()), &e)),
    };
    plan(text.as_deref(), dummy_key, env).map_err(|why| {
        Error::make(crate::error::MakeProblem::CopyUnreadable {
            path: path.to_path_buf(),
            why,
            copy: crate::error::CopyOf::Pi,
        })
    })
}

/// The copy before a start, for the mount to have a file: no provider
/// (the turn writes the real one once its gateway listens).
pub fn write_placeholder(copy_dir: &Path) -> Result<()> {
    crate::state::session::make_private_dir(copy_dir)?;
    crate::state::session::write_atomic_unsynced(&copy_dir.join(COPIED), b"{}\n", 0o600)
}

/// Write the copy into the file the running cage has mounted: in place
/// (same inode; a bind-mounted file is the inode mounted at the start),
/// in the state folder, where the cage cannot reach.
pub fn write_in_place(copy_dir: &Path, text: &str) -> Result<()> {
    let path = copy_dir.join(COPIED);
    let fail = |e: std::io::Error| Error::act(Doing::Write(path.to_path_buf()), &e);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(fail)?;
    // Written again at each turn: not flushed to disk.
    f.write_all(text.as_bytes()).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[Warning]) -> Vec<String> {
        w.iter().map(ToString::to_string).collect()
    }

    const DUMMY: &str = "shrooms-gateway-adds-the-real-key";

    fn env(name: &str) -> Option<String> {
        (name == "CORP_KEY").then(|| "sk-ant-api03-corp-from-env".to_string())
    }

    #[test]
    fn the_copy_points_at_the_gateway_golden() {
        let machine = r#"{
          "providers": {
            "corp": {
              "baseUrl": "https://llm.corp.example/anthropic/",
              "api": "anthropic-messages",
              "apiKey": "CORP_KEY",
              "authHeader": true,
              "headers": {"x-portkey-api-key": "!pass show portkey"},
              "models": [{"id": "corp-opus", "headers": {"x-secret": "s"}}]
            },
            "local": {
              "baseUrl": "http://localhost:11434/v1",
              "api": "openai-completions",
              "apiKey": "ollama",
              "models": [{"id": "llama"}]
            },
            "openai": {"baseUrl": "https://proxy.example/v1"},
            "bad name": {"baseUrl": "https://x", "api": "anthropic-messages", "apiKey": "k"},
            "mixed": {"baseUrl": "https://m", "api": "anthropic-messages", "apiKey": "k",
                      "models": [{"id": "a"}, {"id": "b", "api": "openai-responses"}]}
          },
          "somethingElse": 1
        }"#;
        let plan = plan(Some(machine), DUMMY, &env).unwrap();
        let got: Value = serde_json::from_str(&plan.copy_text("http://127.0.0.1:41000")).unwrap();
        let want: Value = serde_json::from_str(
            r#"{
              "providers": {
                "corp": {
                  "baseUrl": "http://127.0.0.1:41000/pi/corp",
                  "api": "anthropic-messages",
                  "apiKey": "shrooms-gateway-adds-the-real-key",
                  "authHeader": true,
                  "models": [{"id": "corp-opus"}]
                },
                "anthropic": {
                  "baseUrl": "http://127.0.0.1:41000",
                  "apiKey": "shrooms-gateway-adds-the-real-key"
                }
              },
              "somethingElse": 1
            }"#,
        )
        .unwrap();
        assert_eq!(got, want);
        assert_eq!(
            plan.routes.0,
            vec![Route {
                name: "corp".into(),
                upstream: Some("https://llm.corp.example/anthropic".into()),
                key: Some(ConfigValue::Literal("sk-ant-api03-corp-from-env".into())),
                headers: vec![(
                    "x-portkey-api-key".into(),
                    ConfigValue::from_pi("!pass show portkey", &env)
                )],
                bearer: true,
            }]
        );
        assert_eq!(
            words(&plan.warnings),
            vec![
                "pi's models.json: provider bad name is left out of the cage's copy: its name \
                 has characters other than letters, digits, '-', '_' and '.'",
                "pi's models.json: provider corp: the headers of its models are left out of \
                 the cage's copy and not sent (only the provider's own headers are)",
                "pi's models.json: provider local is left out of the cage's copy: its API is \
                 openai-completions, and the gateway speaks only anthropic-messages",
                "pi's models.json: provider mixed is left out of the cage's copy: its model b \
                 uses the API openai-responses, and the gateway speaks only anthropic-messages",
                "pi's models.json: provider openai is left out of the cage's copy: it names \
                 no \"api\", and the gateway speaks only anthropic-messages",
            ]
        );
    }

    #[test]
    fn the_built_in_provider() {
        // No file: pi's built-in anthropic through the default route.
        let p = plan(None, DUMMY, &env).unwrap();
        assert_eq!(
            p.copy_text("http://127.0.0.1:4"),
            "{\n  \"providers\": {\n    \"anthropic\": {\n      \"apiKey\": \
             \"shrooms-gateway-adds-the-real-key\",\n      \"baseUrl\": \
             \"http://127.0.0.1:4\"\n    }\n  }\n}\n"
        );
        assert!(p.routes.0.is_empty() && p.warnings.is_empty());
        // Named with a key of its own and no baseUrl: its own route to
        // the configured upstream, with that key.
        let p = plan(
            Some(r#"{"providers": {"anthropic": {"apiKey": "sk-ant-api03-x"}}}"#),
            DUMMY,
            &env,
        )
        .unwrap();
        let got: Value = serde_json::from_str(&p.copy_text("http://g")).unwrap();
        assert_eq!(
            got,
            serde_json::json!({"providers": {"anthropic": {
                "baseUrl": "http://g/pi/anthropic", "apiKey": DUMMY}}})
        );
        assert_eq!(p.routes.0[0].upstream, None);
        assert_eq!(
            p.routes.0[0].key,
            Some(ConfigValue::Literal("sk-ant-api03-x".into()))
        );
        // Named without a key: the gateway's own credential.
        let p = plan(
            Some(r#"{"providers": {"anthropic": {"baseUrl": "https://proxy.example"}}}"#),
            DUMMY,
            &env,
        )
        .unwrap();
        assert_eq!(
            p.routes.0[0].upstream.as_deref(),
            Some("https://proxy.example")
        );
        assert_eq!(p.routes.0[0].key, None);
    }

    #[test]
    fn a_file_that_is_not_pis() {
        assert!(plan(Some("{nope"), DUMMY, &env).is_err());
        assert!(plan(Some("[]"), DUMMY, &env).is_err());
        assert!(plan(Some(r#"{"providers": []}"#), DUMMY, &env).is_err());
        let p = plan(
            Some(r#"{"providers": {"x": {"api": "anthropic-messages", "apiKey": "k"}}}"#),
            DUMMY,
            &env,
        )
        .unwrap();
        assert_eq!(
            words(&p.warnings),
            ["pi's models.json: provider x is left out of the cage's copy: it has no baseUrl"]
        );
        let p = plan(
            Some(
                r#"{"providers": {"x": {"api": "anthropic-messages", "apiKey": "k",
                    "baseUrl": "file:///etc/passwd"}}}"#,
            ),
            DUMMY,
            &env,
        )
        .unwrap();
        assert!(
            p.warnings[0]
                .to_string()
                .contains("not an http:// or https:// URL")
        );
    }
}
