//! Where the gateway's credential comes from: the machine's, never the
//! cage's. An ordinary cage takes the first source that has one, in this
//! order: `[gateway] key_file`, `[gateway] key_command`, `ANTHROPIC_API_KEY`
//! then `CLAUDE_CODE_OAUTH_TOKEN` in the environment of the process holding
//! the turn, and the machine's own Claude Code login
//! (`~/.claude/.credentials.json`, read at every request, so that the
//! machine's claude keeps it fresh). A sealed cage uses its sealed token
//! file alone.
//!
//! OpenAI's routes have sources of their own (`OpenAiSources`); a sealed
//! cage has none.

use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::host::process::Process;

/// How long a key command's answer is used before it is run again.
pub const KEY_COMMAND_TTL: Duration = Duration::from_secs(300);
/// How long a key command may take.
const KEY_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// After a key command fails, it is not run again for this long, then for
/// twice as long after each failure that follows, up to
/// [`KEY_COMMAND_MAX_BACKOFF`]: the cage's requests, which come as fast as
/// it likes, must not drive a password manager behind it. A success ends
/// the backing off.
pub const KEY_COMMAND_BACKOFF: Duration = Duration::from_secs(10);
pub const KEY_COMMAND_MAX_BACKOFF: Duration = Duration::from_secs(300);

/// A credential, as the Messages API takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// Sent as `x-api-key`.
    ApiKey(String),
    /// An OAuth access token (Claude Code's login, `claude setup-token`):
    /// sent as `Authorization: Bearer`, with the OAuth beta flag.
    OAuth(String),
}

impl Credential {
    /// A key or token as written in a file or printed by a command: OAuth
    /// tokens are told by their `sk-ant-oat` prefix.
    pub fn classify(text: &str) -> Option<Credential> {
        let t = text.trim();
        if t.is_empty() {
            None
        } else if t.starts_with("sk-ant-oat") {
            Some(Credential::OAuth(t.to_string()))
        } else {
            Some(Credential::ApiKey(t.to_string()))
        }
    }
}

/// The machine's sources for an ordinary cage.
#[derive(Debug, Default)]
pub struct MachineSources {
    pub key_file: Option<PathBuf>,
    pub key_command: Option<Vec<String>>,
    pub env_api_key: Option<String>,
    pub env_oauth_token: Option<String>,
    /// Claude Code's login file on the machine.
    pub claude_credentials: PathBuf,
    /// Shown in the no-credential message.
    pub config_path: PathBuf,
    pub cache: Mutex<KeyCommandState>,
}

/// What the key command last did: its answer and when, or its failure,
/// and until when it is not run again.
#[derive(Debug, Default)]
pub struct KeyCommandState {
    answer: Option<(Instant, String)>,
    failed: Option<Failed>,
}

#[derive(Debug)]
struct Failed {
    why: String,
    until: Instant,
    backoff: Duration,
}

/// Pure: how long to back off after a failure, given the last backing off
/// (None: the command had not failed since its last success).
pub fn next_backoff(last: Option<Duration>) -> Duration {
    match last {
        None => KEY_COMMAND_BACKOFF,
        Some(d) => (d * 2).min(KEY_COMMAND_MAX_BACKOFF),
    }
}

#[derive(Debug, Clone)]
pub enum Credentials {
    Machine(Arc<MachineSources>),
    /// A sealed cage's own login: its token file, read at every request.
    Sealed {
        token_file: PathBuf,
    },
    /// A turn sent here from another machine: that machine's key, asked
    /// for at each request over the socket its ssh connection forwards
    /// (`lent_key`), kept nowhere here.
    Lent {
        socket: PathBuf,
    },
}

impl Credentials {
    /// The credential to add now, or the words that say what to set.
    pub fn resolve(&self) -> Result<Credential, String> {
        match self {
            Credentials::Sealed { token_file } => {
                let token = crate::settings::token::read_sealed(token_file).map_err(|e| {
                    format!(
                        "shrooms-agent's model gateway has no sealed token: {}",
                        e.message()
                    )
                })?;
                Credential::classify(&token)
                    .ok_or_else(|| format!("the sealed token {} is empty", token_file.display()))
            }
            Credentials::Machine(m) => m.resolve(),
            Credentials::Lent { socket } => lent_key(socket),
        }
    }
}

impl MachineSources {
    pub fn resolve(&self) -> Result<Credential, String> {
        if let Some(f) = &self.key_file {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("[gateway] key_file {}: {e}", f.display()))?;
            return Credential::classify(&text)
                .ok_or_else(|| format!("[gateway] key_file {} is empty", f.display()));
        }
        if let Some(cmd) = &self.key_command {
            return self.run_key_command(cmd);
        }
        if let Some(k) = self.env_api_key.as_deref().and_then(Credential::classify) {
            return Ok(match k {
                Credential::OAuth(t) | Credential::ApiKey(t) => Credential::ApiKey(t),
            });
        }
        if let Some(t) = self.env_oauth_token.as_deref().map(str::trim)
            && !t.is_empty()
        {
            return Ok(Credential::OAuth(t.to_string()));
        }
        match read_claude_login(&self.claude_credentials)? {
            Some(t) => Ok(Credential::OAuth(t)),
            None => Err(format!(
                "shrooms-agent's model gateway has no credential to add (it looked at [gateway] \
                 key_file and key_command in {}, ANTHROPIC_API_KEY and CLAUDE_CODE_OAUTH_TOKEN in \
                 the environment of `shrooms-agent cage run`, and the machine's Claude Code \
                 login, {}, which is missing): set one of them, or log in with claude on this \
                 machine, and run the turn again",
                self.config_path.display(),
                self.claude_credentials.display()
            )),
        }
    }

    /// What the gateway would add, when it is a subscription sign-in (a
    /// Claude login), as far as can be known without running the key
    /// command: a key file that holds an OAuth token,
    /// `CLAUDE_CODE_OAUTH_TOKEN`, or the machine's Claude Code login, when
    /// no source before it gives a key.
    pub fn subscription(&self) -> Option<String> {
        if let Some(f) = &self.key_file {
            let text = std::fs::read_to_string(f).ok()?;
            return matches!(Credential::classify(&text), Some(Credential::OAuth(_)))
                .then(|| format!("[gateway] key_file {}, a Claude login", f.display()));
        }
        let key = self
            .env_api_key
            .as_deref()
            .is_some_and(|k| !k.trim().is_empty());
        if self.key_command.is_some() || key {
            return None;
        }
        if self
            .env_oauth_token
            .as_deref()
            .is_some_and(|t| !t.trim().is_empty())
        {
            return Some("CLAUDE_CODE_OAUTH_TOKEN, a Claude login".to_string());
        }
        matches!(read_claude_login(&self.claude_credentials), Ok(Some(_))).then(|| {
            format!(
                "the machine's Claude Code login, {}",
                self.claude_credentials.display()
            )
        })
    }

    fn run_key_command(&self, cmd: &[String]) -> Result<Credential, String> {
        let text = run_key_command(&self.cache, cmd, "[gateway] key_command")?;
        Credential::classify(&text).ok_or_else(|| "[gateway] key_command printed nothing".into())
    }
}

/// A key command's answer (`what` names it): kept for [`KEY_COMMAND_TTL`];
/// after a failure, that failure again, without running it, until its
/// backing off ends. Requests at once wait for one run (the lock is held
/// through it).
fn run_key_command(
    cache: &Mutex<KeyCommandState>,
    cmd: &[String],
    what: &str,
) -> Result<String, String> {
    let mut state = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((at, c)) = state.answer.as_ref()
        && at.elapsed() < KEY_COMMAND_TTL
    {
        return Ok(c.clone());
    }
    let now = Instant::now();
    if let Some(f) = state.failed.as_ref()
        && now < f.until
    {
        return Err(format!(
            "{} (it failed, and is not run again for {} s)",
            f.why,
            f.until.duration_since(now).as_secs().max(1)
        ));
    }
    match run_once(cmd, what) {
        Ok(c) => {
            *state = KeyCommandState {
                answer: Some((Instant::now(), c.clone())),
                failed: None,
            };
            Ok(c)
        }
        Err(why) => {
            let backoff = next_backoff(state.failed.as_ref().map(|f| f.backoff));
            state.answer = None;
            state.failed = Some(Failed {
                why: why.clone(),
                until: Instant::now() + backoff,
                backoff,
            });
            Err(format!("{why} (not run again for {} s)", backoff.as_secs()))
        }
    }
}

/// Run a key command once: what it printed, trimmed, or why there is none.
fn run_once(cmd: &[String], what: &str) -> Result<String, String> {
    let (program, args) = cmd
        .split_first()
        .ok_or_else(|| format!("{what} is empty"))?;
    // The settings looked a name up on PATH; one still a name was not there.
    if !Path::new(program).is_absolute() {
        return Err(format!(
            "{what}: {program} is not on the PATH of this command; give its absolute path"
        ));
    }
    // Nothing from the cage reaches it: no stdin, fixed arguments.
    let out = Process::new(program, what)
        .args(args.iter().cloned())
        .timeout(KEY_COMMAND_TIMEOUT)
        .run()
        .map_err(|e| e.message())?;
    let key = out.stdout.trim();
    if key.is_empty() {
        return Err(format!("{what} printed nothing"));
    }
    Ok(key.to_string())
}

/// The access token of Claude Code's login file, if there is one; an error
/// when it has expired (the machine's claude renews it when it runs).
pub fn read_claude_login(path: &std::path::Path) -> Result<Option<String>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "the machine's Claude Code login {}: {e}",
                path.display()
            ));
        }
    };
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("the machine's Claude Code login {}: {e}", path.display()))?;
    let oauth = &v["claudeAiOauth"];
    let Some(token) = oauth["accessToken"].as_str().filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if let Some(expires_ms) = oauth["expiresAt"].as_u64() {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        if expires_ms <= now_ms {
            return Err(format!(
                "the machine's Claude Code login ({}) has expired: run claude on this machine \
                 once to renew it, or set [gateway] key_file",
                path.display()
            ));
        }
    }
    Ok(Some(token.to_string()))
}

/// A credential for OpenAI's APIs, the machine's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenAiCredential {
    /// An API key: sent as `Authorization: Bearer` to `[gateway] openai_url`.
    ApiKey(String),
    /// Codex's ChatGPT sign-in: its access token, sent as `Authorization:
    /// Bearer` to `[gateway] chatgpt_url`'s Codex route, with the account's
    /// id as `ChatGPT-Account-ID` when the login names one.
    ChatGpt {
        access_token: String,
        account_id: Option<String>,
    },
}

/// The machine's sources of an OpenAI credential, taken in this order:
/// `[gateway] openai_key_file`, `[gateway] openai_key_command`,
/// `OPENAI_API_KEY` in the environment of the process holding the turn, and
/// Codex's own login on the machine (`$CODEX_HOME/auth.json`: its API key,
/// else its ChatGPT sign-in's tokens), read at every request so that the
/// machine's codex keeps it fresh; the gateway never renews it.
#[derive(Debug, Default)]
pub struct OpenAiSources {
    pub key_file: Option<PathBuf>,
    pub key_command: Option<Vec<String>>,
    pub env_api_key: Option<String>,
    /// Codex's login file on the machine.
    pub codex_auth: PathBuf,
    /// Shown in the no-credential message.
    pub config_path: PathBuf,
    pub cache: Mutex<KeyCommandState>,
}

impl OpenAiSources {
    /// The credential to add now, or the words that say what to set.
    pub fn resolve(&self) -> Result<OpenAiCredential, String> {
        if let Some(f) = &self.key_file {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("[gateway] openai_key_file {}: {e}", f.display()))?;
            let key = text.trim();
            if key.is_empty() {
                return Err(format!(
                    "[gateway] openai_key_file {} is empty",
                    f.display()
                ));
            }
            return Ok(OpenAiCredential::ApiKey(key.to_string()));
        }
        if let Some(cmd) = &self.key_command {
            return run_key_command(&self.cache, cmd, "[gateway] openai_key_command")
                .map(OpenAiCredential::ApiKey);
        }
        if let Some(k) = self.env_api_key.as_deref().map(str::trim)
            && !k.is_empty()
        {
            return Ok(OpenAiCredential::ApiKey(k.to_string()));
        }
        match read_codex_login(&self.codex_auth)? {
            Some(c) => Ok(c),
            None => Err(format!(
                "shrooms-agent's model gateway has no OpenAI credential to add (it looked at \
                 [gateway] openai_key_file and openai_key_command in {}, OPENAI_API_KEY in the \
                 environment of `shrooms-agent cage run`, and Codex's login on the machine, {}, \
                 which has neither a key nor a sign-in): set one of them, or log in with codex \
                 on this machine, and run the turn again",
                self.config_path.display(),
                self.codex_auth.display()
            )),
        }
    }
}

impl OpenAiSources {
    /// What the gateway would add, when it is a subscription sign-in:
    /// Codex's ChatGPT sign-in, when no source before it gives a key.
    pub fn subscription(&self) -> Option<String> {
        let key = self
            .env_api_key
            .as_deref()
            .is_some_and(|k| !k.trim().is_empty());
        if self.key_file.is_some() || self.key_command.is_some() || key {
            return None;
        }
        matches!(
            read_codex_login(&self.codex_auth),
            Ok(Some(OpenAiCredential::ChatGpt { .. }))
        )
        .then(|| {
            format!(
                "Codex's ChatGPT sign-in on the machine, {}",
                self.codex_auth.display()
            )
        })
    }
}

/// Codex's login file (`auth.json`): its `OPENAI_API_KEY` if set, else its
/// ChatGPT sign-in's `tokens` (`access_token`, `account_id`); None when the
/// file is missing or holds neither.
pub fn read_codex_login(path: &Path) -> Result<Option<OpenAiCredential>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "Codex's login on the machine {}: {e}",
                path.display()
            ));
        }
    };
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("Codex's login on the machine {}: {e}", path.display()))?;
    let text_of = |v: &serde_json::Value| {
        v.as_str()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
    };
    if let Some(k) = text_of(&v["OPENAI_API_KEY"]) {
        return Ok(Some(OpenAiCredential::ApiKey(k)));
    }
    let tokens = &v["tokens"];
    Ok(
        text_of(&tokens["access_token"]).map(|access_token| OpenAiCredential::ChatGpt {
            access_token,
            account_id: text_of(&tokens["account_id"]),
        }),
    )
}

/// The longest answer read from the machine that lends the key: a key
/// or token, or why there is none, on one line.
const MAX_LENT_LINE: usize = 64 * 1024;

/// How long a key may take to come from the other machine.
const KEY_TIMEOUT: Duration = Duration::from_secs(30);

/// The key the other machine lends, asked for now (at each model request:
/// it is kept in no file and no variable here).
pub fn lent_key(socket: &Path) -> std::result::Result<Credential, String> {
    let why = |e: std::io::Error| {
        format!(
            "the key lent by the machine this turn came from ({}): {e}",
            socket.display()
        )
    };
    let mut s = UnixStream::connect(socket).map_err(why)?;
    s.set_read_timeout(Some(KEY_TIMEOUT)).map_err(why)?;
    s.write_all(b"key\n").map_err(why)?;
    let line = crate::host::bounded::read_line(&mut BufReader::new(&s), MAX_LENT_LINE)
        .map_err(why)?
        .unwrap_or_default();
    parse_lent(&String::from_utf8_lossy(&line))
}

/// Pure: the lender's answer, one line: `api KEY`, `oauth TOKEN` or
/// `error WHY`.
pub fn parse_lent(line: &str) -> std::result::Result<Credential, String> {
    match line.split_once(' ') {
        Some(("api", k)) if !k.is_empty() => Ok(Credential::ApiKey(k.to_string())),
        Some(("oauth", t)) if !t.is_empty() => Ok(Credential::OAuth(t.to_string())),
        Some(("error", why)) => Err(format!(
            "the machine this turn came from has no key to lend: {why}"
        )),
        _ => Err(format!(
            "the machine this turn came from answered {line:?} when asked for its key"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        tempfile::Builder::new()
            .prefix(&format!("shrooms-cred-{name}-"))
            .tempdir()
            .unwrap()
            .keep()
    }

    #[test]
    fn the_first_source_that_has_one() {
        let d = tmp("order");
        let login = d.join(".credentials.json");
        std::fs::write(
            &login,
            r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-login","expiresAt":99999999999999}}"#,
        )
        .unwrap();
        let file = d.join("key");
        std::fs::write(&file, "sk-ant-api03-file\n").unwrap();
        let mut m = MachineSources {
            key_file: Some(file),
            env_api_key: Some("sk-ant-api03-env".into()),
            env_oauth_token: Some("sk-ant-oat01-env".into()),
            claude_credentials: login,
            ..MachineSources::default()
        };
        assert_eq!(
            m.resolve(),
            Ok(Credential::ApiKey("sk-ant-api03-file".into()))
        );
        m.key_file = None;
        m.key_command = Some(vec!["/bin/echo".into(), "sk-ant-oat01-cmd".into()]);
        assert_eq!(
            m.resolve(),
            Ok(Credential::OAuth("sk-ant-oat01-cmd".into()))
        );
        m.key_command = None;
        assert_eq!(
            m.resolve(),
            Ok(Credential::ApiKey("sk-ant-api03-env".into()))
        );
        m.env_api_key = None;
        assert_eq!(
            m.resolve(),
            Ok(Credential::OAuth("sk-ant-oat01-env".into()))
        );
        m.env_oauth_token = None;
        assert_eq!(
            m.resolve(),
            Ok(Credential::OAuth("sk-ant-oat01-login".into()))
        );
        std::fs::write(
            &m.claude_credentials,
            r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-old","expiresAt":1000}}"#,
        )
        .unwrap();
        assert!(m.resolve().unwrap_err().contains("has expired"));
        std::fs::remove_file(&m.claude_credentials).unwrap();
        let e = m.resolve().unwrap_err();
        assert!(
            e.contains("[gateway] key_file") && e.contains("ANTHROPIC_API_KEY"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_key_commands_answer_is_kept_for_a_while() {
        let d = tmp("cmd");
        let counter = d.join("n");
        let script = format!("echo x >> {0}; wc -l < {0}", counter.display());
        let m = MachineSources {
            key_command: Some(vec!["/bin/sh".into(), "-c".into(), script]),
            ..MachineSources::default()
        };
        assert_eq!(m.resolve(), Ok(Credential::ApiKey("1".into())));
        assert_eq!(m.resolve(), Ok(Credential::ApiKey("1".into())));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A failing key command runs once, however often it is asked while
    /// it is backed off; each asking gets its failure.
    #[test]
    fn a_failing_key_command_is_backed_off() {
        let d = tmp("fail");
        let counter = d.join("n");
        let script = format!(
            "echo x >> {}; echo vault-locked >&2; exit 1",
            counter.display()
        );
        let m = MachineSources {
            key_command: Some(vec!["/bin/sh".into(), "-c".into(), script]),
            ..MachineSources::default()
        };
        for _ in 0..20 {
            let e = m.resolve().unwrap_err();
            assert!(
                e.contains("vault-locked") && e.contains("not run again"),
                "{e}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(&counter).unwrap().lines().count(),
            1
        );
        let _ = std::fs::remove_dir_all(&d);
        // A name not on PATH is said to be so.
        let m = MachineSources {
            key_command: Some(vec!["pass".into(), "show".into()]),
            ..MachineSources::default()
        };
        assert!(m.resolve().unwrap_err().contains("pass is not on the PATH"));
    }

    #[test]
    fn the_first_openai_source_that_has_one() {
        let d = tmp("openai");
        let auth = d.join("auth.json");
        std::fs::write(
            &auth,
            r#"{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":"i","access_token":"at-login","refresh_token":"r","account_id":"acc-1"}}"#,
        )
        .unwrap();
        let file = d.join("key");
        std::fs::write(&file, "sk-file\n").unwrap();
        let mut m = OpenAiSources {
            key_file: Some(file.clone()),
            key_command: Some(vec!["/bin/echo".into(), "sk-cmd".into()]),
            env_api_key: Some("sk-env".into()),
            codex_auth: auth.clone(),
            ..OpenAiSources::default()
        };
        let key = |k: &str| Ok(OpenAiCredential::ApiKey(k.into()));
        assert_eq!(m.resolve(), key("sk-file"));
        m.key_file = None;
        assert_eq!(m.resolve(), key("sk-cmd"));
        m.key_command = None;
        assert_eq!(m.resolve(), key("sk-env"));
        m.env_api_key = Some(" ".into());
        assert_eq!(
            m.resolve(),
            Ok(OpenAiCredential::ChatGpt {
                access_token: "at-login".into(),
                account_id: Some("acc-1".into()),
            })
        );
        // A key in Codex's login comes before its sign-in.
        std::fs::write(
            &auth,
            r#"{"auth_mode":"apikey","OPENAI_API_KEY":"sk-codex","tokens":{"access_token":"at"}}"#,
        )
        .unwrap();
        assert_eq!(m.resolve(), key("sk-codex"));
        std::fs::write(
            &auth,
            r#"{"auth_mode":"chatgpt","tokens":{"access_token":""}}"#,
        )
        .unwrap();
        let e = m.resolve().unwrap_err();
        assert!(
            e.contains("openai_key_file") && e.contains("OPENAI_API_KEY") && e.contains("codex"),
            "{e}"
        );
        std::fs::remove_file(&auth).unwrap();
        assert!(m.resolve().unwrap_err().contains("openai_key_command"));
        std::fs::write(&auth, "{not json").unwrap();
        assert!(m.resolve().unwrap_err().contains("Codex's login"));
        std::fs::write(&file, "\n").unwrap();
        m.key_file = Some(file);
        assert!(m.resolve().unwrap_err().contains("is empty"));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Which machine credential is a subscription sign-in, as `cage
    /// limits --usd` asks: a key before it wins; a key file is read.
    #[test]
    fn a_subscription_sign_in_is_told() {
        let dir = tmp("subscription");
        let login = dir.join("login.json");
        std::fs::write(
            &login,
            r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x","expiresAt":9999999999999}}"#,
        )
        .unwrap();
        let oauth_file = dir.join("oauth-key");
        std::fs::write(&oauth_file, "sk-ant-oat01-y\n").unwrap();
        let key_file = dir.join("api-key");
        std::fs::write(&key_file, "sk-ant-api03-z\n").unwrap();
        let sources =
            |f: Option<&PathBuf>, key: Option<&str>, oauth: Option<&str>| MachineSources {
                key_file: f.cloned(),
                env_api_key: key.map(str::to_string),
                env_oauth_token: oauth.map(str::to_string),
                claude_credentials: login.clone(),
                ..MachineSources::default()
            };
        let told = |s: MachineSources| s.subscription();
        assert!(
            told(sources(None, None, None))
                .unwrap()
                .contains("Claude Code login")
        );
        assert!(
            told(sources(None, None, Some("t")))
                .unwrap()
                .contains("CLAUDE_CODE_OAUTH_TOKEN")
        );
        assert_eq!(told(sources(None, Some("sk-ant-api03-k"), Some("t"))), None);
        assert_eq!(told(sources(Some(&key_file), None, None)), None);
        assert!(
            told(sources(Some(&oauth_file), None, None))
                .unwrap()
                .contains("key_file")
        );
        let with_key_command = MachineSources {
            key_command: Some(vec!["pass".into()]),
            ..sources(None, None, None)
        };
        assert_eq!(told(with_key_command), None);
        let none = MachineSources {
            claude_credentials: dir.join("missing.json"),
            ..MachineSources::default()
        };
        assert_eq!(told(none), None);

        let auth = dir.join("auth.json");
        let openai = |key: Option<&str>| OpenAiSources {
            env_api_key: key.map(str::to_string),
            codex_auth: auth.clone(),
            ..OpenAiSources::default()
        };
        std::fs::write(&auth, r#"{"tokens":{"access_token":"at"}}"#).unwrap();
        assert!(
            openai(None)
                .subscription()
                .unwrap()
                .contains("ChatGPT sign-in")
        );
        assert_eq!(openai(Some("sk-proj-k")).subscription(), None);
        std::fs::write(
            &auth,
            r#"{"OPENAI_API_KEY":"sk-k","tokens":{"access_token":"at"}}"#,
        )
        .unwrap();
        assert_eq!(openai(None).subscription(), None);
    }

    #[test]
    fn backing_off_doubles_up_to_five_minutes() {
        let mut d = None;
        let mut seen = Vec::new();
        for _ in 0..8 {
            let next = next_backoff(d);
            seen.push(next.as_secs());
            d = Some(next);
        }
        assert_eq!(seen, [10, 20, 40, 80, 160, 300, 300, 300]);
    }
}
