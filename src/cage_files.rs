//! Files the tool writes for a Claude Code cage at each start: the copy of
//! the user's settings that the cage is given instead of the file itself,
//! and the few keys of the cage's own `.claude.json` that let a fresh cage
//! go straight to the prompt.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The settings files of Claude Code's folder that a cage gets as a copy
/// (filtered, see `settings_copy`) rather than as they are.
pub const CLAUDE_COPIED: &[&str] = &["settings.json", "settings.local.json"];

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

/// Pure: the cage's copy of one settings file. `text` is the user's file
/// (None: there is none); `passes` says which names of its `env` block may
/// reach the cage (the environment's own allow-list). The credential keys
/// go; the user settings file (`main`) also remembers the bypass warning as
/// accepted: in a cage, the cage is the sandbox that warning asks for.
pub fn settings_copy(
    text: Option<&str>,
    main: bool,
    passes: &dyn Fn(&str) -> bool,
) -> std::result::Result<String, String> {
    let mut obj = match text.map(serde_json::from_str::<Value>) {
        None => Map::new(),
        Some(Ok(Value::Object(o))) => o,
        Some(Ok(_)) => return Err("it is not a JSON object".into()),
        Some(Err(e)) => return Err(format!("it is not valid JSON ({e})")),
    };
    for k in CREDENTIAL_KEYS {
        obj.remove(*k);
    }
    // An `env` that is not an object is not Claude Code's, and goes.
    if let Some(Value::Object(env)) = obj.remove("env") {
        let kept: Map<String, Value> = env.into_iter().filter(|(k, _)| passes(k)).collect();
        obj.insert("env".into(), Value::Object(kept));
    }
    if main {
        obj.insert(SKIP_BYPASS_PROMPT.into(), Value::Bool(true));
    }
    let mut out = serde_json::to_string_pretty(&Value::Object(obj))
        .map_err(|e| format!("cannot write it again ({e})"))?;
    out.push('\n');
    Ok(out)
}

/// Write the cage's copies of the user's settings files (from `harness_dir`
/// on the machine) into `copy_dir`, a 0700 folder of the state folder, each
/// 0600 and replaced whole. Called before each start: a bind-mounted file
/// is the one there when the cage starts (runc mounts it by inode), so a
/// copy written then is the one the cage sees until it stops.
pub fn write_settings_copies(
    harness_dir: &Path,
    copy_dir: &Path,
    passes: &dyn Fn(&str) -> bool,
) -> Result<()> {
    crate::session::make_private_dir(copy_dir)?;
    for name in CLAUDE_COPIED {
        let user = harness_dir.join(name);
        let text = match std::fs::File::open(&user) {
            Ok(f) => {
                let mut s = String::new();
                f.take(MAX_READ)
                    .read_to_string(&mut s)
                    .map_err(|e| Error::failed(format!("reading {}: {e}", user.display())))?;
                Some(s)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(Error::failed(format!("reading {}: {e}", user.display())));
            }
        };
        let copy =
            settings_copy(text.as_deref(), *name == "settings.json", passes).map_err(|why| {
                Error::bad_input(format!(
                    "{}: {why}. A cage gets a copy of it without keys that fetch or hold \
                     credentials, and it cannot be read to make one: fix it, then try again",
                    user.display()
                ))
            })?;
        crate::session::write_atomic(&copy_dir.join(name), copy.as_bytes(), 0o600)?;
    }
    Ok(())
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
                .map_err(|e| Error::failed(format!("looking at {}: {e}", path.display())))?;
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
        .map_err(|e| Error::failed(format!("writing {}: {e}", path.display())))
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
        if let Some((uid, gid)) = crate::userns::cage_owner_of(dir)? {
            std::os::unix::fs::fchown(&f, Some(uid), Some(gid))?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
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

    fn allow(name: &str) -> bool {
        name == "ANTHROPIC_MODEL"
    }

    #[test]
    fn the_copy_drops_credentials_and_unlisted_env() {
        let user = r#"{
            "apiKeyHelper": "/bin/key.sh",
            "awsCredentialExport": "x", "awsAuthRefresh": "y",
            "gcpAuthRefresh": "z", "otelHeadersHelper": "w",
            "env": {"ANTHROPIC_API_KEY": "sk-secret", "ANTHROPIC_MODEL": "opus",
                    "ANTHROPIC_BASE_URL": "https://elsewhere"},
            "model": "sonnet",
            "permissions": {"allow": ["Bash(ls)"]}
        }"#;
        let got: Value =
            serde_json::from_str(&settings_copy(Some(user), true, &allow).unwrap()).unwrap();
        let want: Value = serde_json::from_str(
            r#"{"env": {"ANTHROPIC_MODEL": "opus"}, "model": "sonnet",
                "permissions": {"allow": ["Bash(ls)"]},
                "skipDangerousModePermissionPrompt": true}"#,
        )
        .unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn the_copy_of_nothing_and_of_the_local_file() {
        assert_eq!(
            settings_copy(None, true, &allow).unwrap(),
            "{\n  \"skipDangerousModePermissionPrompt\": true\n}\n"
        );
        assert_eq!(settings_copy(None, false, &allow).unwrap(), "{}\n");
        assert_eq!(
            settings_copy(Some(r#"{"env": "FOO=1"}"#), false, &allow).unwrap(),
            "{}\n"
        );
        assert!(settings_copy(Some("{nope"), true, &allow).is_err());
        assert!(settings_copy(Some("[]"), true, &allow).is_err());
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
        let dir = std::env::temp_dir().join(format!("shrooms-seed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
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
