//! A Codex CLI cage's copy of the user's `config.toml`: the user's
//! settings without what holds or fetches a credential, and pointed at the
//! cage's model gateway, so that Codex in the cage talks to the gateway
//! with a dummy key and the machine's key is added outside
//! (docs/gateway.md, "Model gateway"). Keys and tables from Codex's
//! configuration reference (developers.openai.com/codex/config-reference).
//!
//! Like pi's `models.json` copy (`pi_models`), it is written before each
//! start without a gateway (Codex's own default provider, which has no key
//! in the cage), then in place by each turn once its gateway listens.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use toml::{Table, Value};

use crate::cage::secret_names::{is_credential_name, without_userinfo};
use crate::error::{Doing, Error, Result};

/// The copied file, in Codex's folder.
pub const COPIED: &str = "config.toml";

/// Codex's own login (an API key, or ChatGPT's tokens): never in a cage.
/// The gateway reads it on the machine.
pub const LOGIN: &str = "auth.json";

/// The provider the copy adds and chooses: a custom one, since Codex's
/// built-in ids cannot be redefined and its built-in OpenAI provider tries
/// WebSocket upgrades first (codex-rs `model-provider-info`).
pub const PROVIDER: &str = "shrooms-gateway";

/// The variable Codex reads the provider's key from: the cage gets a
/// dummy, which the gateway replaces.
pub use crate::cage::spec::CODEX_KEY_VARIABLE as KEY_VARIABLE;

/// The gateway's path prefix of OpenAI's API (`turn::gateway`).
pub const GATEWAY_PATH: &str = "/openai/v1";

/// Top-level keys that choose or define where Codex sends its requests, or
/// hold a credential: the copy's own provider replaces them.
const DROPPED_TOP: &[&str] = &[
    "model_provider",
    "model_providers",
    "openai_base_url",
    "chatgpt_base_url",
    "cli_auth_credentials_store",
    "forced_login_method",
    "forced_chatgpt_workspace_id",
    "experimental_bearer_token",
];

/// Keys dropped wherever they are: values sent as headers or set in a
/// program's environment (an MCP server's `env`, `http_headers`,
/// `env_http_headers`; `shell_environment_policy.set`), which may hold
/// tokens.
const DROPPED_ANYWHERE: &[&str] = &[
    "env",
    "http_headers",
    "env_http_headers",
    "headers",
    "set",
    "experimental_bearer_token",
];

/// Pure: the cage's copy of the user's `config.toml` (`text`; None: there
/// is none), for the project `project`, pointed at the gateway's
/// `base_url` (None: not yet, before a start). The credentials go, Codex
/// asks no approvals and uses no sandbox of its own (the cage is the
/// sandbox; its bubblewrap needs user namespaces a cage does not give),
/// and the project is trusted. Err: why the file cannot be read as TOML.
pub fn copy_text(
    text: Option<&str>,
    base_url: Option<&str>,
    project: &Path,
) -> std::result::Result<String, String> {
    let mut table = match text {
        None => Table::new(),
        Some(t) => t
            .parse::<Table>()
            .map_err(|e| format!("it is not valid TOML ({})", e.message()))?,
    };
    for k in DROPPED_TOP {
        table.remove(*k);
    }
    scrub(&mut table);
    if let Some(Value::Table(profiles)) = table.get_mut("profiles") {
        for (_, p) in profiles.iter_mut() {
            if let Value::Table(p) = p {
                for k in DROPPED_TOP {
                    p.remove(*k);
                }
            }
        }
    }
    put(&mut table, "approval_policy", "never");
    put(&mut table, "sandbox_mode", "danger-full-access");
    trust(&mut table, project);
    if let Some(url) = base_url {
        put(&mut table, "model_provider", PROVIDER);
        let mut provider = Table::new();
        put(&mut provider, "name", "shrooms-agent's model gateway");
        put(&mut provider, "base_url", &format!("{url}{GATEWAY_PATH}"));
        put(&mut provider, "env_key", KEY_VARIABLE);
        put(&mut provider, "wire_api", "responses");
        let mut providers = Table::new();
        providers.insert(PROVIDER.into(), Value::Table(provider));
        table.insert("model_providers".into(), Value::Table(providers));
    }
    toml::to_string(&table).map_err(|e| format!("cannot write it again ({e})"))
}

fn put(table: &mut Table, key: &str, value: &str) {
    table.insert(key.into(), Value::String(value.into()));
}

/// The project's `[projects."<dir>"] trust_level = "trusted"`, the others'
/// entries kept: else Codex asks whether to trust the folder.
fn trust(table: &mut Table, project: &Path) {
    let projects = table
        .entry("projects")
        .or_insert_with(|| Value::Table(Table::new()));
    if !projects.is_table() {
        *projects = Value::Table(Table::new());
    }
    if let Value::Table(projects) = projects {
        let mut entry = Table::new();
        put(&mut entry, "trust_level", "trusted");
        projects.insert(project.to_string_lossy().into_owned(), Value::Table(entry));
    }
}

/// Every credential out of a table, at any depth: the keys that carry
/// values sent as headers or set in an environment, any key whose name
/// says it holds a credential (`secret_names`), and a URL's user and
/// password.
fn scrub(table: &mut Table) {
    table.retain(|k, _| !DROPPED_ANYWHERE.contains(&k) && !is_credential_name(k));
    for (k, v) in table.iter_mut() {
        // An MCP server's `args` and the `notify` command's words lose the
        // values of their credential flags, as Claude Code's copy's do.
        if matches!(k.as_str(), "args" | "notify")
            && let Value::Array(words) = v
        {
            crate::cage::cage_files::blank_credential_flags(words.iter_mut().map(|w| match w {
                Value::String(s) => Some(s),
                _ => None,
            }));
        }
        scrub_value(v);
    }
}

fn scrub_value(v: &mut Value) {
    match v {
        Value::Table(t) => scrub(t),
        Value::Array(a) => a.iter_mut().for_each(scrub_value),
        Value::String(s) => *s = without_userinfo(s),
        _ => {}
    }
}

/// Write the copy into the file the cage has mounted: in place (a
/// bind-mounted file is the inode mounted at the start), 0600, in the
/// state folder, where the cage cannot reach; the folder made when it is
/// missing (before the first start).
pub fn write_in_place(copy_dir: &Path, text: &str) -> Result<()> {
    write_file_in_place(&copy_dir.join(COPIED), text)
}

/// Write `path` in place, 0600, its folder made (0700) when it is missing:
/// a copy a cage has mounted.
pub fn write_file_in_place(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        crate::state::session::make_private_dir(dir)?;
    }
    let fail = |e: std::io::Error| Error::act(Doing::Write(path.to_path_buf()), &e);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(fail)?;
    // Written again at each start and turn: not flushed to disk.
    f.write_all(text.as_bytes()).map_err(fail)
}

/// The copy made from the machine's `config.toml` in `codex_dir` now, and
/// written where the cage has it mounted.
pub fn write_copy(
    codex_dir: &Path,
    copy_dir: &Path,
    base_url: Option<&str>,
    project: &Path,
) -> Result<()> {
    let user = codex_dir.join(COPIED);
    let text = crate::cage::cage_files::read_settings_file(&user)?;
    let copy = copy_text(text.as_deref(), base_url, project).map_err(|why| {
        Error::make(crate::error::MakeProblem::CopyUnreadable {
            path: user.clone(),
            why,
            copy: crate::error::CopyOf::Codex,
        })
    })?;
    write_in_place(copy_dir, &copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = r#"
model = "gpt-5.1-codex"
model_provider = "azure"
openai_base_url = "https://proxy.example/v1"
experimental_bearer_token = "sk-top"

[model_providers.azure]
name = "Azure"
base_url = "https://me:pw@azure.example/openai"
env_key = "AZURE_OPENAI_API_KEY"
experimental_bearer_token = "sk-azure"
http_headers = { "X-Key" = "sk-header" }

notify = ["notify-send", "--token", "sk-notify"]

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-server", "--url", "https://u:sk-url@docs.example", "--api-key=sk-arg"]
env = { DOCS_TOKEN = "sk-mcp" }
bearer_token_env_var = "DOCS_TOKEN"

[shell_environment_policy]
inherit = "core"
set = { GITHUB_TOKEN = "ghp_shell" }

[profiles.work]
model = "o3"
model_provider = "azure"

[projects."/home/u/other"]
trust_level = "untrusted"
"#;

    #[test]
    fn the_copy_keeps_no_credential_and_points_at_the_gateway() {
        let out = copy_text(
            Some(USER),
            Some("http://127.0.0.1:41000"),
            Path::new("/home/u/src/web"),
        )
        .unwrap();
        for secret in [
            "sk-top",
            "sk-azure",
            "sk-header",
            "sk-mcp",
            "sk-url",
            "ghp_shell",
            "sk-notify",
            "sk-arg",
            "pw@",
            "azure.example",
            "proxy.example",
        ] {
            assert!(!out.contains(secret), "{secret} in:\n{out}");
        }
        let t: Table = out.parse().unwrap();
        assert_eq!(t["model"].as_str(), Some("gpt-5.1-codex"));
        assert_eq!(t["model_provider"].as_str(), Some(PROVIDER));
        assert_eq!(t["approval_policy"].as_str(), Some("never"));
        assert_eq!(t["sandbox_mode"].as_str(), Some("danger-full-access"));
        let p = &t["model_providers"][PROVIDER];
        assert_eq!(
            p["base_url"].as_str(),
            Some("http://127.0.0.1:41000/openai/v1")
        );
        assert_eq!(p["env_key"].as_str(), Some("OPENAI_API_KEY"));
        assert_eq!(p["wire_api"].as_str(), Some("responses"));
        assert_eq!(t["model_providers"].as_table().unwrap().len(), 1);
        // The MCP server itself stays, its credentials do not; a profile
        // cannot choose another provider.
        assert_eq!(t["mcp_servers"]["docs"]["command"].as_str(), Some("npx"));
        assert!(t["profiles"]["work"].get("model_provider").is_none());
        assert_eq!(t["profiles"]["work"]["model"].as_str(), Some("o3"));
        assert_eq!(
            t["projects"]["/home/u/src/web"]["trust_level"].as_str(),
            Some("trusted")
        );
        assert_eq!(
            t["projects"]["/home/u/other"]["trust_level"].as_str(),
            Some("untrusted")
        );
    }

    #[test]
    fn before_a_turn_the_copy_names_no_provider() {
        let out = copy_text(Some(USER), None, Path::new("/p")).unwrap();
        let t: Table = out.parse().unwrap();
        assert!(t.get("model_provider").is_none());
        assert!(t.get("model_providers").is_none());
        let none = copy_text(None, None, Path::new("/p")).unwrap();
        assert_eq!(
            none,
            "approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n\
             [projects.\"/p\"]\ntrust_level = \"trusted\"\n"
        );
    }

    #[test]
    fn a_file_that_is_not_toml_is_refused_with_why() {
        let e = copy_text(Some("model = "), None, Path::new("/p")).unwrap_err();
        assert!(e.starts_with("it is not valid TOML"), "{e}");
    }
}
