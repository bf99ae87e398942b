//! Files the tool writes for a cage at each start: the copies of the
//! user's settings files that the cage is given instead of the files
//! themselves (Claude Code's `settings.json` and `settings.local.json`,
//! pi's `settings.json` and `mcp.json`), and the few keys of a Claude Code
//! cage's own `.claude.json` that let a fresh cage go straight to the
//! prompt.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::cage::harness::Harness;
use crate::cage::secret_names::{is_credential_name, without_userinfo};
use crate::error::{Doing, Error, Result};

/// The settings files of Claude Code's folder that a cage gets as a copy
/// (filtered, see `settings_copy`) rather than as they are.
pub const CLAUDE_COPIED: &[&str] = &["settings.json", "settings.local.json"];

/// The same for pi's agent folder: its settings, and the MCP servers of
/// pi's MCP extensions (`mcp.json`: `mcpServers`, each with its `env`,
/// `headers`, `bearerToken`, `oauth.clientSecret`, a `url`), which hold
/// tokens. (Its `models.json` is copied too, pointed at the model gateway:
/// `pi_models`.)
pub const PI_COPIED: &[&str] = &["settings.json", "mcp.json"];

/// The settings files of a harness that a cage gets as a copy.
pub fn copied(harness: Harness) -> &'static [&'static str] {
    match harness {
        Harness::Claude => CLAUDE_COPIED,
        Harness::Pi => PI_COPIED,
        // Theirs are copied pointed at the gateway, by `codex_config` and
        // `opencode_config`.
        Harness::Codex | Harness::Opencode => &[],
    }
}

/// Keys of Claude Code's settings that run a command to fetch a credential,
/// or carry one: never copied into a cage. From Anthropic's settings
/// reference (code.claude.com/docs/en/settings, "Available settings"):
/// `apiKeyHelper` (prints the key sent as `X-Api-Key`/`Authorization`),
/// `awsCredentialExport` (prints AWS credentials for Bedrock),
/// `awsAuthRefresh` (refreshes the `.aws` login), `gcpAuthRefresh` (the
/// same for Vertex AI), `otelHeadersHelper` (prints the telemetry
/// exporter's headers, an auth header among them).
pub const CREDENTIAL_KEYS: &[&str] = &[
    "apiKeyHelper",
    "awsCredentialExport",
    "awsAuthRefresh",
    "gcpAuthRefresh",
    "otelHeadersHelper",
];

/// Where Claude Code remembers that the bypass-permissions warning was
/// accepted: its user settings (seen with Claude Code 2.1: accepting the
/// warning writes this key to `$CLAUDE_CONFIG_DIR/settings.json`). The
/// cage's copy of that file is read-only, so the copy carries it.
pub const SKIP_BYPASS_PROMPT: &str = "skipDangerousModePermissionPrompt";

/// The largest settings file or `.claude.json` read.
const MAX_READ: u64 = 16 << 20;

/// What the copy keeps of an `env` block's entry: its value as the cage's
/// environment would take it (`spec::admit`), or None.
pub type EnvRule<'a> = &'a dyn Fn(&str, &str) -> Option<String>;

/// A string that is a URL and nothing else: `scheme://`, no white space.
fn is_url(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once("://") else {
        return false;
    };
    scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
        && !s.contains(char::is_whitespace)
}

/// A command's arguments without the values of its credential flags
/// (`--api-key VALUE`, `--token=VALUE`): the value is emptied.
fn scrub_args(args: &mut [Value]) {
    blank_credential_flags(args.iter_mut().map(|a| match a {
        Value::String(text) => Some(text),
        _ => None,
    }));
}

/// The same for the arguments of any file format: each a string (None:
/// an argument that is not one).
pub fn blank_credential_flags<'a>(args: impl Iterator<Item = Option<&'a mut String>>) {
    let mut blank_next = false;
    for a in args {
        let Some(text) = a else {
            blank_next = false;
            continue;
        };
        if std::mem::take(&mut blank_next) {
            text.clear();
            continue;
        }
        let Some(flag) = text.strip_prefix('-') else {
            continue;
        };
        match flag.split_once('=') {
            Some((name, _)) if is_credential_name(name) => {
                *text = format!("-{name}=");
            }
            Some(_) => {}
            None => blank_next = is_credential_name(flag),
        }
    }
}

/// Take the credentials out of a settings value, at every depth: a key
/// whose name says it holds one (`secret_names`) goes with its value;
/// `headers` go whole (what an MCP server is sent is how it is logged in
/// to); an `env` block keeps what the cage's environment would
/// (`env_rule`); a URL loses its user information; `args` lose the values
/// of their credential flags.
pub fn scrub(value: &mut Value, env_rule: EnvRule<'_>) {
    match value {
        Value::Object(obj) => {
            obj.retain(|k, _| !is_credential_name(k) && k != "headers");
            for (k, v) in obj.iter_mut() {
                match (k.as_str(), v) {
                    ("env", Value::Object(env)) => {
                        let kept: Map<String, Value> = std::mem::take(env)
                            .into_iter()
                            .filter_map(|(name, v)| {
                                let text = match &v {
                                    Value::String(t) => t.clone(),
                                    other => other.to_string(),
                                };
                                let admitted = env_rule(&name, &text)?;
                                let v = if admitted == text {
                                    v
                                } else {
                                    Value::String(admitted)
                                };
                                Some((name, v))
                            })
                            .collect();
                        *env = kept;
                    }
                    // opencode gives an MCP server's command and its
                    // arguments as one array (opencode.ai/docs/mcp-servers).
                    ("args" | "command", Value::Array(args)) => {
                        scrub_args(args);
                        args.iter_mut().for_each(|a| scrub(a, env_rule));
                    }
                    (_, v) => scrub(v, env_rule),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| scrub(v, env_rule)),
        Value::String(s) if is_url(s) => *s = without_userinfo(s),
        _ => {}
    }
}

/// A settings file's text as a JSON object (None: there is none, an
/// empty object); Err: why it is not one.
pub fn json_object(text: Option<&str>) -> std::result::Result<Map<String, Value>, String> {
    match text.map(serde_json::from_str::<Value>) {
        None => Ok(Map::new()),
        Some(Ok(Value::Object(o))) => Ok(o),
        Some(Ok(_)) => Err("it is not a JSON object".into()),
        Some(Err(e)) => Err(format!("it is not valid JSON ({e})")),
    }
}

/// Pure: the cage's copy of one settings file `name` of `harness`. `text`
/// is the user's file (None: there is none); `env_rule` says what of an
/// `env` block may reach the cage (the environment's own allow-list, with
/// its value rules). The credential keys go, and whatever `scrub` takes
/// out; Claude Code's user settings file also remembers the bypass warning
/// as accepted: in a cage, the cage is the sandbox that warning asks for.
pub fn settings_copy(
    text: Option<&str>,
    harness: Harness,
    name: &str,
    env_rule: EnvRule<'_>,
) -> std::result::Result<String, String> {
    let mut obj = json_object(text)?;
    for k in CREDENTIAL_KEYS {
        obj.remove(*k);
    }
    // An `env` that is not an object is not the harness's, and goes.
    if obj.get("env").is_some_and(|e| !e.is_object()) {
        obj.remove("env");
    }
    let mut value = Value::Object(obj);
    scrub(&mut value, env_rule);
    if harness == Harness::Claude
        && name == "settings.json"
        && let Value::Object(obj) = &mut value
    {
        obj.insert(SKIP_BYPASS_PROMPT.into(), Value::Bool(true));
    }
    let mut out =
        serde_json::to_string_pretty(&value).map_err(|e| format!("cannot write it again ({e})"))?;
    out.push('\n');
    Ok(out)
}

/// Write the cage's copies of the user's settings files of `harness` (from
/// `harness_dir` on the machine) into `copy_dir`, a 0700 folder of the
/// state folder, each 0600 and replaced whole. Called before each start: a
/// bind-mounted file is the one there when the cage starts (runc mounts it
/// by inode), so a copy written then is the one the cage sees until it
/// stops.
pub fn write_settings_copies(
    harness: Harness,
    harness_dir: &Path,
    copy_dir: &Path,
    env_rule: EnvRule<'_>,
) -> Result<()> {
    crate::state::session::make_private_dir(copy_dir)?;
    for name in copied(harness) {
        let user = harness_dir.join(name);
        let text = read_settings_file(&user)?;
        let copy = settings_copy(text.as_deref(), harness, name, env_rule).map_err(|why| {
            Error::make(crate::error::MakeProblem::CopyUnreadable {
                path: user.clone(),
                why,
                copy: crate::error::CopyOf::Claude,
            })
        })?;
        let path = copy_dir.join(name);
        // Made again at every start, and the same most times: written only
        // when it changed (a start need not wait for the disk then).
        if std::fs::read(&path).is_ok_and(|had| had == copy.as_bytes()) {
            continue;
        }
        // Made again at each start: not flushed to disk.
        crate::state::session::write_atomic_unsynced(&path, copy.as_bytes(), 0o600)?;
    }
    Ok(())
}

/// A user's settings file, up to [`MAX_READ`]; None: there is none.
pub fn read_settings_file(user: &Path) -> Result<Option<String>> {
    match std::fs::File::open(user) {
        Ok(f) => {
            let mut s = String::new();
            f.take(MAX_READ)
                .read_to_string(&mut s)
                .map_err(|e| Error::act(Doing::Read(user.to_path_buf()), &e))?;
            Ok(Some(s))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::act(Doing::Read(user.to_path_buf()), &e)),
    }
}

/// Make the cage's link folder (`spec::HarnessLink`): 0755, since a cage's
/// root in a user namespace of its own is nobody to the machine and reads
/// it as anyone does, holding one link to the harness's program. Made with
/// the cage, in its folder of the state folder (taken back with it); the
/// cage has it read-only, and a link whose target is gone is only a
/// command not found.
pub fn write_harness_link(link: &crate::cage::spec::HarnessLink) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&link.dir)
        .map_err(|e| Error::act(Doing::Make(link.dir.clone()), &e))?;
    std::fs::set_permissions(&link.dir, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| Error::act(Doing::SetModeOf(link.dir.clone()), &e))?;
    let at = link.dir.join(&link.name);
    match std::fs::remove_file(&at) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Error::act(Doing::Remove(at), &e));
        }
        _ => {}
    }
    std::os::unix::fs::symlink(&link.target, &at).map_err(|e| Error::act(Doing::MakeLink(at), &e))
}

/// Pure: the cage's `.claude.json` with what a first interactive start
/// needs, everything else as it was. None: nothing to change, or the file
/// is not a JSON object (the cage's own business: left alone).
/// - `hasCompletedOnboarding`: else onboarding runs, and tries the internet;
/// - the project's `hasTrustDialogAccepted`: else the folder-trust dialog;
/// - the last 20 characters of the key the cage is given, among
///   `customApiKeyResponses.approved`: else Claude Code asks whether to
///   use the key in its environment (as it records the answer).
pub fn seeded_claude_json(
    text: Option<&str>,
    project: &str,
    api_key: Option<&str>,
) -> Option<String> {
    let mut obj = match text {
        None => Map::new(),
        Some(t) if t.trim().is_empty() => Map::new(),
        Some(t) => match serde_json::from_str::<Value>(t) {
            Ok(Value::Object(o)) => o,
            _ => return None,
        },
    };
    let before = obj.clone();
    obj.insert("hasCompletedOnboarding".into(), Value::Bool(true));
    let projects = obj
        .entry("projects")
        .or_insert_with(|| Value::Object(Map::new()));
    if !projects.is_object() {
        *projects = Value::Object(Map::new());
    }
    let entry = projects
        .as_object_mut()?
        .entry(project)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry
        .as_object_mut()?
        .insert("hasTrustDialogAccepted".into(), Value::Bool(true));
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        let tail: String = {
            let chars: Vec<char> = key.chars().collect();
            chars[chars.len().saturating_sub(20)..].iter().collect()
        };
        let responses = obj
            .entry("customApiKeyResponses")
            .or_insert_with(|| Value::Object(Map::new()));
        if !responses.is_object() {
            *responses = Value::Object(Map::new());
        }
        let responses = responses.as_object_mut()?;
        let approved = responses
            .entry("approved")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !approved.is_array() {
            *approved = Value::Array(Vec::new());
        }
        let list = approved.as_array_mut()?;
        if !list.iter().any(|v| v.as_str() == Some(tail.as_str())) {
            list.push(Value::String(tail));
        }
        responses
            .entry("rejected")
            .or_insert_with(|| Value::Array(Vec::new()));
    }
    if obj == before {
        return None;
    }
    let mut out = serde_json::to_string_pretty(&Value::Object(obj)).ok()?;
    out.push('\n');
    Some(out)
}

/// Seed `.claude.json` in the cage's private config folder `home` (see
/// `seeded_claude_json`). The cage can write that folder, so nothing there
/// is followed: a link, a pipe or a folder in the file's place is left
/// alone, and the new file is made under a fresh name (`O_EXCL`, no link
/// followed) and renamed over the old one.
pub fn seed_claude_json(home: &Path, project: &Path, api_key: Option<&str>) -> Result<()> {
    if !home.is_dir() {
        // Not made yet: podman makes it at the start, and the next run seeds it.
        return Ok(());
    }
    let path = home.join(".claude.json");
    let text = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => {
            let meta = f
                .metadata()
                .map_err(|e| Error::act(Doing::LookAt(path.to_path_buf()), &e))?;
            if !meta.file_type().is_file() || meta.len() > MAX_READ {
                return Ok(());
            }
            let mut s = String::new();
            if f.take(MAX_READ).read_to_string(&mut s).is_err() {
                return Ok(());
            }
            Some(s)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        // A link (ELOOP) or anything else odd: the cage's own, left alone.
        Err(_) => return Ok(()),
    };
    let Some(new) = seeded_claude_json(text.as_deref(), &project.to_string_lossy(), api_key) else {
        return Ok(());
    };
    write_new_file_over(&path, new.as_bytes())
        .map_err(|e| Error::act(Doing::Write(path.to_path_buf()), &e))
}

/// Write `bytes` to a file of a fresh name beside `path`, then rename it
/// over `path`, in a folder someone else can write.
fn write_new_file_over(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut attempt = 0u32;
    let (tmp, mut f): (PathBuf, std::fs::File) = loop {
        let tmp = dir.join(format!(
            ".{name}.shrooms-{}-{stamp}-{attempt}",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        // As root, the folder is a rootful cage's: the file is its too.
        if let Some((uid, gid)) = crate::host::userns::cage_owner_of(dir)? {
            std::os::unix::fs::fchown(&f, Some(uid), Some(gid))?;
        }
        // Seeded again at each turn: not flushed to disk.
        f.write_all(bytes)?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(name: &str, value: &str) -> Option<String> {
        (name == "ANTHROPIC_MODEL" || name == "HTTPS_PROXY")
            .then(|| crate::cage::secret_names::without_userinfo(value))
    }

    fn claude(text: Option<&str>, name: &str) -> std::result::Result<String, String> {
        settings_copy(text, Harness::Claude, name, &allow)
    }

    #[test]
    fn the_copy_drops_credentials_and_unlisted_env() {
        let user = r#"{
            "apiKeyHelper": "/bin/key.sh",
            "awsCredentialExport": "x", "awsAuthRefresh": "y",
            "gcpAuthRefresh": "z", "otelHeadersHelper": "w",
            "env": {"ANTHROPIC_API_KEY": "sk-secret", "ANTHROPIC_MODEL": "opus",
                    "ANTHROPIC_BASE_URL": "https://elsewhere",
                    "HTTPS_PROXY": "http://u:pw@proxy:3128"},
            "model": "sonnet",
            "permissions": {"allow": ["Bash(ls)", "WebFetch(domain:user@host)"]}
        }"#;
        let got: Value =
            serde_json::from_str(&claude(Some(user), "settings.json").unwrap()).unwrap();
        let want: Value = serde_json::from_str(
            r#"{"env": {"ANTHROPIC_MODEL": "opus", "HTTPS_PROXY": "http://proxy:3128"},
                "model": "sonnet",
                "permissions": {"allow": ["Bash(ls)", "WebFetch(domain:user@host)"]},
                "skipDangerousModePermissionPrompt": true}"#,
        )
        .unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn the_copy_of_nothing_and_of_the_local_file() {
        assert_eq!(
            claude(None, "settings.json").unwrap(),
            "{\n  \"skipDangerousModePermissionPrompt\": true\n}\n"
        );
        assert_eq!(claude(None, "settings.local.json").unwrap(), "{}\n");
        assert_eq!(
            claude(Some(r#"{"env": "FOO=1"}"#), "settings.local.json").unwrap(),
            "{}\n"
        );
        assert!(claude(Some("{nope"), "settings.json").is_err());
        assert!(claude(Some("[]"), "settings.json").is_err());
        assert_eq!(
            settings_copy(None, Harness::Pi, "settings.json", &allow).unwrap(),
            "{}\n"
        );
    }

    /// pi's mcp.json (the shape pi's MCP extensions read): every place a
    /// server's token can stand is emptied, the rest is as it was.
    #[test]
    fn pis_mcp_servers_lose_their_tokens() {
        let user = r#"{
          "settings": {"toolPrefix": "server", "idleTimeout": 10},
          "mcpServers": {
            "github": {
              "command": "npx",
              "args": ["-y", "server-github", "--token", "ghp_tok1", "--api-key=sk-tok2",
                       "--verbose"],
              "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_tok3", "ANTHROPIC_MODEL": "m",
                      "LOG_LEVEL": "debug"},
              "lifecycle": "lazy"
            },
            "remote": {
              "url": "https://bob:tok4@mcp.example.org/mcp",
              "headers": {"Authorization": "Bearer tok5", "X-Team": "tok6"},
              "auth": "bearer",
              "bearerToken": "tok7",
              "oauth": {"clientId": "id", "clientSecret": "tok8"}
            }
          }
        }"#;
        let got = settings_copy(Some(user), Harness::Pi, "mcp.json", &allow).unwrap();
        for n in 1..=8 {
            assert!(!got.contains(&format!("tok{n}")), "tok{n} in {got}");
        }
        let got: Value = serde_json::from_str(&got).unwrap();
        let want: Value = serde_json::from_str(
            r#"{
              "settings": {"toolPrefix": "server", "idleTimeout": 10},
              "mcpServers": {
                "github": {
                  "command": "npx",
                  "args": ["-y", "server-github", "--token", "", "--api-key=", "--verbose"],
                  "env": {"ANTHROPIC_MODEL": "m"},
                  "lifecycle": "lazy"
                },
                "remote": {"url": "https://mcp.example.org/mcp"}
              }
            }"#,
        )
        .unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn seeding_adds_only_its_keys() {
        let before = r#"{"numStartups": 3, "projects": {"/p": {"allowedTools": ["x"]},
                         "/q": {"hasTrustDialogAccepted": false}},
                         "customApiKeyResponses": {"approved": ["a"], "rejected": ["b"]}}"#;
        let got: Value = serde_json::from_str(
            &seeded_claude_json(
                Some(before),
                "/p",
                Some("shrooms-gateway-adds-the-real-key"),
            )
            .unwrap(),
        )
        .unwrap();
        let want: Value = serde_json::from_str(
            r#"{"numStartups": 3, "hasCompletedOnboarding": true,
                "projects": {"/p": {"allowedTools": ["x"], "hasTrustDialogAccepted": true},
                             "/q": {"hasTrustDialogAccepted": false}},
                "customApiKeyResponses": {"approved": ["a", "ay-adds-the-real-key"],
                                          "rejected": ["b"]}}"#,
        )
        .unwrap();
        assert_eq!(got, want);
        // Once seeded, nothing to change; a file that is not JSON is left alone.
        let again = seeded_claude_json(
            Some(&got.to_string()),
            "/p",
            Some("shrooms-gateway-adds-the-real-key"),
        );
        assert_eq!(again, None);
        assert_eq!(seeded_claude_json(Some("{oops"), "/p", None), None);
        let fresh: Value =
            serde_json::from_str(&seeded_claude_json(None, "/p", None).unwrap()).unwrap();
        assert_eq!(
            fresh,
            serde_json::json!({"hasCompletedOnboarding": true,
                               "projects": {"/p": {"hasTrustDialogAccepted": true}}})
        );
    }

    #[test]
    fn seeding_follows_no_link() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let target = dir.join("elsewhere");
        std::fs::write(&target, "{}").unwrap();
        std::os::unix::fs::symlink(&target, dir.join(".claude.json")).unwrap();
        seed_claude_json(&dir, Path::new("/p"), None).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}");
        assert!(
            std::fs::symlink_metadata(dir.join(".claude.json"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        std::fs::remove_file(dir.join(".claude.json")).unwrap();
        seed_claude_json(&dir, Path::new("/p"), None).unwrap();
        let meta = std::fs::metadata(dir.join(".claude.json")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
