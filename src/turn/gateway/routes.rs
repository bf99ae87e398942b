//! The gateway's routing table beyond its default route: one path prefix
//! per pi provider (`/pi/NAME`), each forwarded to that provider's own base
//! URL with its own key, both taken from the machine's pi `models.json`
//! (`crate::cage::pi_models`). A request under no known prefix takes the default
//! route (`[gateway] anthropic_url`, the machine's credential); a `/pi/`
//! path naming no provider of the table is refused. Under a prefix, the
//! rest of the path must still be one of the model API's own routes
//! (`super::allowed`): the table widens where requests go, never what.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Credential;
use crate::host::process::Process;

/// The prefix of the providers' routes on the gateway's base URL.
pub const PI_PREFIX: &str = "/pi/";

/// How long a command's answer is used before it is run again (as the
/// gateway's own `[gateway] key_command`).
const COMMAND_TTL: Duration = super::credentials::KEY_COMMAND_TTL;
/// pi gives such a command 10 s (its resolve-config-value.ts).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// A value of pi's `models.json` (`apiKey`, a header), as pi resolves it
/// (pi's docs/models.md, "Value Resolution"), but on the machine: a name of
/// a variable set in the environment of the process holding the turn is
/// replaced by its value when the table is made; `!command` is run when a
/// request needs it.
#[derive(Debug)]
pub enum ConfigValue {
    Literal(String),
    /// The text after `!`, run as pi runs it: by `/bin/sh -c` (node's
    /// `execSync`), with no input, its trimmed output the value.
    Command {
        command: String,
        cache: Mutex<Option<(Instant, String)>>,
    },
}

impl PartialEq for ConfigValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ConfigValue::Literal(a), ConfigValue::Literal(b)) => a == b,
            (ConfigValue::Command { command: a, .. }, ConfigValue::Command { command: b, .. }) => {
                a == b
            }
            _ => false,
        }
    }
}

impl ConfigValue {
    /// `text` as pi reads it, with `env` the environment of the process
    /// holding the turn (pi: a variable's value when one of that name is
    /// set and not empty, else the text itself).
    pub fn from_pi(text: &str, env: &dyn Fn(&str) -> Option<String>) -> ConfigValue {
        match text.strip_prefix('!') {
            Some(command) => ConfigValue::Command {
                command: command.to_string(),
                cache: Mutex::new(None),
            },
            None => ConfigValue::Literal(
                env(text)
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| text.to_string()),
            ),
        }
    }

    /// The value now. `what` names it in errors.
    pub fn resolve(&self, what: &str) -> Result<String, String> {
        match self {
            ConfigValue::Literal(v) => Ok(v.clone()),
            ConfigValue::Command { command, cache } => {
                let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
                if let Some((at, v)) = cache.as_ref()
                    && at.elapsed() < COMMAND_TTL
                {
                    return Ok(v.clone());
                }
                // The user's own command from their models.json, run the
                // way pi on this machine would run it; nothing from the
                // cage reaches it (no input, the text is the machine's).
                let out = Process::new("/bin/sh", what)
                    .args(["-c".to_string(), command.clone()])
                    .timeout(COMMAND_TIMEOUT)
                    .run()
                    .map_err(|e| e.message())?;
                let v = out.stdout.trim().to_string();
                if v.is_empty() {
                    return Err(format!("{what}: the command printed nothing"));
                }
                *cache = Some((Instant::now(), v.clone()));
                Ok(v)
            }
        }
    }
}

/// Where a provider's requests go.
#[derive(Debug, PartialEq)]
pub struct Route {
    /// The provider's name in pi's `models.json`, its prefix `/pi/NAME`.
    pub name: String,
    /// Its base URL without a trailing `/`; None: `[gateway] anthropic_url`.
    pub upstream: Option<String>,
    /// Its key; None: the gateway's own credential (pi's built-in
    /// `anthropic` provider with no key of its own in the file).
    pub key: Option<ConfigValue>,
    /// Its `headers`, added on the way out (they may hold credentials too).
    pub headers: Vec<(String, ConfigValue)>,
    /// `authHeader: true`: the key goes as `Authorization: Bearer` too.
    pub bearer: bool,
}

impl Route {
    /// The credential to add for this provider (None: the gateway's own).
    pub fn credential(&self) -> Option<Result<Credential, String>> {
        let what = format!("pi's models.json, provider {}: apiKey", self.name);
        self.key.as_ref().map(|k| {
            k.resolve(&what)
                .and_then(|v| Credential::classify(&v).ok_or_else(|| format!("{what} is empty")))
        })
    }

    /// Its headers, resolved now.
    pub fn resolved_headers(&self) -> Result<Vec<(String, String)>, String> {
        self.headers
            .iter()
            .map(|(n, v)| {
                let what = format!("pi's models.json, provider {}: header {n}", self.name);
                v.resolve(&what).map(|v| (n.clone(), v))
            })
            .collect()
    }
}

/// The table.
#[derive(Debug, Default)]
pub struct Routes(pub Vec<Route>);

/// Which route a request path takes.
#[derive(Debug, PartialEq)]
pub enum Picked<'a> {
    /// No prefix: the default route, with the path as it is.
    Default,
    /// A provider's, with the rest of the path (starting with `/`).
    Provider(&'a Route, &'a str),
    /// Under `/pi/` but naming no provider of the table: refused.
    Unknown,
}

impl Routes {
    pub fn pick<'a>(&'a self, path: &'a str) -> Picked<'a> {
        let Some(rest) = path.strip_prefix(PI_PREFIX) else {
            return Picked::Default;
        };
        let (name, rest) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => return Picked::Unknown,
        };
        match self.0.iter().find(|r| r.name == name) {
            Some(r) => Picked::Provider(r, rest),
            None => Picked::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(name: &str) -> Route {
        Route {
            name: name.into(),
            upstream: Some("https://llm.example".into()),
            key: Some(ConfigValue::Literal("k".into())),
            headers: vec![],
            bearer: false,
        }
    }

    #[test]
    fn picking_a_route() {
        let t = Routes(vec![route("corp"), route("b")]);
        assert_eq!(t.pick("/v1/messages"), Picked::Default);
        assert_eq!(
            t.pick("/pi/corp/v1/messages"),
            Picked::Provider(&t.0[0], "/v1/messages")
        );
        assert_eq!(t.pick("/pi/b/x"), Picked::Provider(&t.0[1], "/x"));
        assert_eq!(t.pick("/pi/nope/v1/messages"), Picked::Unknown);
        assert_eq!(t.pick("/pi/corp"), Picked::Unknown);
        assert_eq!(t.pick("/pi/"), Picked::Unknown);
        assert_eq!(t.pick("/pi//v1/messages"), Picked::Unknown);
    }

    #[test]
    fn values_as_pi_reads_them() {
        let env = |n: &str| (n == "CORP_KEY").then(|| "sk-from-env".to_string());
        assert_eq!(
            ConfigValue::from_pi("CORP_KEY", &env),
            ConfigValue::Literal("sk-from-env".into())
        );
        assert_eq!(
            ConfigValue::from_pi("sk-literal", &env),
            ConfigValue::Literal("sk-literal".into())
        );
        let cmd = ConfigValue::from_pi("!echo sk-from-command", &env);
        assert_eq!(cmd.resolve("test").unwrap(), "sk-from-command");
        let empty = ConfigValue::from_pi("!true", &env);
        assert!(
            empty
                .resolve("test")
                .unwrap_err()
                .contains("printed nothing")
        );
    }
}
