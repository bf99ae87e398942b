//! An opencode cage's copy of the user's `opencode.json`: the user's
//! settings without what holds a credential, with its Anthropic and OpenAI
//! providers pointed at the cage's model gateway with a dummy key, so that
//! the machine's key is added outside (docs/gateway.md, "Model gateway").
//! Keys from opencode's configuration reference (opencode.ai/docs/config,
//! /docs/providers, /docs/mcp-servers, /docs/permissions).
//!
//! Written before each start without a gateway, then in place by each
//! turn once its gateway listens, as Codex's copy is (`codex_config`).

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The copied file, in opencode's config folder.
pub const COPIED: &str = "opencode.json";

/// opencode's login (`auth.json`, in its data folder, ~/.local/share/opencode):
/// never in a cage; the cage's data folder is its own.
pub const LOGIN: &str = "auth.json";

/// Keys dropped wherever they are: what a local MCP server is started
/// with in its environment (`environment`) and what a remote one is sent
/// (`headers`, `oauth`), which log them in.
const DROPPED_ANYWHERE: &[&str] = &["environment", "headers", "oauth"];

/// Pure: the cage's copy of the user's `opencode.json` (`text`; None:
/// there is none), pointed at the gateway's `base_url` (None: not yet,
/// before a start). The credentials go (any key whose name says it holds
/// one, `apiKey` among them; the keys of `DROPPED_ANYWHERE`; a URL's user
/// and password); the `anthropic` provider sends to the gateway's
/// Messages routes and `openai` to its OpenAI ones, each with the dummy
/// key `dummy`; every tool is allowed without asking (the cage is the
/// sandbox) and it does not update itself (its program is read-only).
/// Err: why the file cannot be read.
pub fn copy_text(
    text: Option<&str>,
    base_url: Option<&str>,
    dummy: &str,
) -> std::result::Result<String, String> {
    let mut obj = crate::cage::cage_files::json_object(text)?;
    for k in DROPPED_ANYWHERE {
        obj.remove(*k);
    }
    let mut value = Value::Object(obj);
    drop_anywhere(&mut value);
    crate::cage::cage_files::scrub(&mut value, &|_, _| None);
    let Value::Object(mut obj) = value else {
        return Err("it is not a JSON object".into());
    };
    obj.insert("permission".into(), Value::String("allow".into()));
    obj.insert("autoupdate".into(), Value::Bool(false));
    if let Some(url) = base_url {
        let providers = obj
            .entry("provider")
            .or_insert_with(|| Value::Object(Map::new()));
        if !providers.is_object() {
            *providers = Value::Object(Map::new());
        }
        for (id, path) in [("anthropic", "/v1"), ("openai", "/openai/v1")] {
            let p = &mut providers[id];
            if !p.is_object() {
                *p = Value::Object(Map::new());
            }
            if !p["options"].is_object() {
                p["options"] = Value::Object(Map::new());
            }
            p["options"]["baseURL"] = Value::String(format!("{url}{path}"));
            p["options"]["apiKey"] = Value::String(dummy.to_string());
        }
    }
    let mut out =
        serde_json::to_string_pretty(&obj).map_err(|e| format!("cannot write it again ({e})"))?;
    out.push('\n');
    Ok(out)
}

fn drop_anywhere(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.retain(|k, _| !DROPPED_ANYWHERE.contains(&k.as_str()));
            o.values_mut().for_each(drop_anywhere);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_anywhere),
        _ => {}
    }
}

/// The copy made from the machine's `opencode.json` in `config_dir` now,
/// and written in place where the cage has it mounted.
pub fn write_copy(
    config_dir: &Path,
    copy_dir: &Path,
    base_url: Option<&str>,
    dummy: &str,
) -> Result<()> {
    let user = config_dir.join(COPIED);
    let text = crate::cage::cage_files::read_settings_file(&user)?;
    let copy = copy_text(text.as_deref(), base_url, dummy).map_err(|why| {
        Error::make(crate::error::MakeProblem::CopyUnreadable {
            path: user.clone(),
            why,
            copy: crate::error::CopyOf::Opencode,
        })
    })?;
    crate::cage::codex_config::write_file_in_place(&copy_dir.join(COPIED), &copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = r#"{
      "$schema": "https://opencode.ai/config.json",
      "model": "anthropic/claude-sonnet-4-5",
      "provider": {
        "anthropic": { "options": { "apiKey": "sk-ant-user", "baseURL": "https://elsewhere" } },
        "local": { "options": { "baseURL": "http://me:pw@127.0.0.1:11434/v1", "apiKey": "{env:LOCAL_KEY}" } }
      },
      "mcp": {
        "db": { "type": "local", "command": ["db-mcp", "--token", "sk-flag"], "environment": { "DB_PASSWORD": "sk-env" } },
        "docs": { "type": "remote", "url": "https://docs.example/mcp", "headers": { "Authorization": "Bearer sk-head" } }
      },
      "permission": { "bash": "ask" }
    }"#;

    #[test]
    fn the_copy_keeps_no_credential_and_points_at_the_gateway() {
        let out = copy_text(Some(USER), Some("http://127.0.0.1:41000"), "DUMMY").unwrap();
        for secret in [
            "sk-ant-user",
            "sk-env",
            "sk-head",
            "pw@",
            "elsewhere",
            "LOCAL_KEY",
        ] {
            assert!(!out.contains(secret), "{secret} in:\n{out}");
        }
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["model"], "anthropic/claude-sonnet-4-5");
        assert_eq!(
            v["provider"]["anthropic"]["options"]["baseURL"],
            "http://127.0.0.1:41000/v1"
        );
        assert_eq!(v["provider"]["anthropic"]["options"]["apiKey"], "DUMMY");
        assert_eq!(
            v["provider"]["openai"]["options"]["baseURL"],
            "http://127.0.0.1:41000/openai/v1"
        );
        assert_eq!(v["provider"]["openai"]["options"]["apiKey"], "DUMMY");
        assert_eq!(
            v["provider"]["local"]["options"]["baseURL"],
            "http://127.0.0.1:11434/v1"
        );
        assert_eq!(v["mcp"]["docs"]["url"], "https://docs.example/mcp");
        assert_eq!(v["permission"], "allow");
        assert_eq!(v["autoupdate"], false);
    }

    #[test]
    fn before_a_turn_the_copy_names_no_gateway() {
        let out = copy_text(None, None, "DUMMY").unwrap();
        assert_eq!(
            out,
            "{\n  \"autoupdate\": false,\n  \"permission\": \"allow\"\n}\n"
        );
        let e = copy_text(Some("{ // a comment\n}"), None, "DUMMY").unwrap_err();
        assert!(e.starts_with("it is not valid JSON"), "{e}");
    }
}
