//! Every setting, resolved once: command line > environment > config file >
//! defaults (after uv's `settings.rs`). Nothing else in the
//! program reads the config file or the process environment for settings.

pub mod budget;
pub mod prices;
pub mod ssh_table;
pub mod token;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The invoking process's environment, captured once in `main` and passed
/// down, so pure functions and tests never touch the real process
/// environment (tests that change it race).
pub type Env = BTreeMap<String, String>;

/// The model gateway's upstream when the config names none (`[gateway]
/// anthropic_url`).
pub const DEFAULT_UPSTREAM: &str = "https://api.anthropic.com";
/// OpenAI's API, where the gateway sends what comes under `/openai` when
/// the config names no other (`[gateway] openai_url`).
pub const DEFAULT_OPENAI_URL: &str = "https://api.openai.com";
/// Where Codex's ChatGPT sign-in sends its model requests (`[gateway]
/// chatgpt_url`).
pub const DEFAULT_CHATGPT_URL: &str = "https://chatgpt.com";
/// Where the gateway sends a `--github` cage's GitHub API calls when the
/// config names no other place (`[gateway] github_api_url`).
pub const DEFAULT_GITHUB_API: &str = "https://api.github.com";
/// Where it sends that cage's git over HTTPS (`[gateway] github_url`).
pub const DEFAULT_GITHUB: &str = "https://github.com";

pub const DEFAULT_MEMORY: &str = "4g";
const DEFAULT_MEMORY_BYTES: u64 = 4 << 30;
pub const DEFAULT_CPUS: &str = "2";
pub const DEFAULT_PIDS: u64 = 2048;
pub const DEFAULT_AGENT_PORT: u16 = 7387;
/// Public resolvers a sealed cage is given (docs/sealed.md, "Sealed cages").
pub const DEFAULT_SEALED_DNS: [&str; 2] = ["1.1.1.1", "9.9.9.9"];

/// The config file as written: every key optional, unknown keys refused.
/// Each value is read into its own type, which checks it as it is read, so a
/// bad value is refused with its key named (`parse_config`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    podman: Option<PathBuf>,
    image: Option<ImageName>,
    memory: Option<Memory>,
    cpus: Option<Cpus>,
    pids: Option<Pids>,
    agent_port: Option<Port>,
    network: Option<NetworkChoice>,
    net: Option<crate::net::netpolicy::NetPolicy>,
    cages: Option<bool>,
    harness: Option<HarnessPrograms>,
    pass_env: Option<Vec<PassEnvName>>,
    pass_secrets: Option<Vec<PassEnvName>>,
    unenforced_limits: Option<UnenforcedLimits>,
    sealed_token: Option<PathBuf>,
    sealed_dns: Option<SealedDns>,
    images_repo: Option<ImagesRepo>,
    base_mirror: Option<BaseMirror>,
    machine_name: Option<MachineName>,
    machines: Option<BTreeMap<MachineName, MachineEntry>>,
    ssh: Option<BTreeMap<MachineName, crate::settings::ssh_table::SshEntry>>,
    gateway: Option<GatewayTable>,
    budget: Option<budget::BudgetTable>,
    prices: Option<BTreeMap<prices::ModelPrefix, prices::PriceEntry>>,
    allow_root: Option<bool>,
}

/// `[gateway]`: where the model gateway sends a cage's model requests, and
/// the machine's credential it adds (docs/gateway.md, "Model gateway").
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GatewayTable {
    anthropic_url: Option<String>,
    key_file: Option<PathBuf>,
    key_command: Option<Vec<String>>,
    openai_url: Option<String>,
    chatgpt_url: Option<String>,
    openai_key_file: Option<PathBuf>,
    openai_key_command: Option<Vec<String>>,
    remote_turns: Option<RemoteTurns>,
    github_api_url: Option<String>,
    github_url: Option<String>,
}

/// `[gateway] remote_turns`: whose key a turn run here from another
/// machine (`--on`) uses: the one that machine lends for the turn, or this
/// machine's own sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteTurns {
    #[default]
    Lent,
    Own,
}

/// The model gateway's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySettings {
    /// The model API's base URL, without a trailing `/`.
    pub anthropic_url: String,
    pub key_file: Option<PathBuf>,
    /// A program and its arguments (no shell), run on the machine.
    pub key_command: Option<Vec<String>>,
    /// OpenAI's API's base URL, without a trailing `/`.
    pub openai_url: String,
    /// The base URL of the ChatGPT backend Codex's ChatGPT sign-in uses,
    /// without a trailing `/`.
    pub chatgpt_url: String,
    pub openai_key_file: Option<PathBuf>,
    pub openai_key_command: Option<Vec<String>>,
    /// Whose key a turn started here over ssh uses (`remote_turns`).
    pub remote_turns: RemoteTurns,
    /// GitHub's API, for a `--github` cage's `gh`, without a trailing `/`.
    pub github_api_url: String,
    /// GitHub itself, for that cage's git over HTTPS, without a trailing `/`.
    pub github_url: String,
}

/// A `[machines]` entry: `name = "http://host:port"`, or a table with the
/// address and the file holding that machine's `serve` token. Read by hand
/// rather than as an untagged enum, which would drop the reason a URL is
/// refused for "did not match any variant".
#[derive(Debug)]
struct MachineEntry(Machine);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MachineTable {
    url: String,
    token_file: Option<PathBuf>,
}

impl<'de> Deserialize<'de> for MachineEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = MachineEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"http://host:port\" or { url = \"http://host:port\", token_file = \"/path\" }")
            }
            fn visit_str<E: serde::de::Error>(
                self,
                url: &str,
            ) -> std::result::Result<MachineEntry, E> {
                parse_machine_url(url, None)
                    .map(MachineEntry)
                    .map_err(E::custom)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<MachineEntry, A::Error> {
                let t =
                    MachineTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                parse_machine_url(&t.url, t.token_file)
                    .map(MachineEntry)
                    .map_err(serde::de::Error::custom)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// Another machine's `serve`, as `outbox send` reaches it and as a drop
/// from it is recognised (docs/machines.md, "Files between machines").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// `http://host:port`, as written (without a trailing `/`).
    pub url: String,
    /// The host part: a name, an IPv4 address, or an IPv6 one without brackets.
    pub host: String,
    pub port: u16,
    /// Its `serve --token-file` token, sent as `Authorization: Bearer`.
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HarnessPrograms {
    claude: Option<PathBuf>,
    pi: Option<PathBuf>,
    codex: Option<PathBuf>,
    opencode: Option<PathBuf>,
}

/// `cpus = 2` and `cpus = "2"` both read naturally; take either.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum NumberOrString {
    Int(i64),
    Float(f64),
    Str(String),
}

/// Which network a cage asks for (docs/cages.md, "Network").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum NetworkChoice {
    Auto,
    Pasta,
    Slirp4netns,
    Bridge,
}

impl FromStr for NetworkChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(NetworkChoice::Auto),
            "pasta" => Ok(NetworkChoice::Pasta),
            "slirp4netns" => Ok(NetworkChoice::Slirp4netns),
            "bridge" => Ok(NetworkChoice::Bridge),
            other => Err(format!(
                "{other:?} is not one of \"auto\", \"pasta\", \"slirp4netns\", \"bridge\""
            )),
        }
    }
}

/// What to do where podman would silently ignore the limits (docs/cages.md, "Limits, moving, history").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum UnenforcedLimits {
    Refuse,
    Warn,
}

impl FromStr for UnenforcedLimits {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "refuse" => Ok(UnenforcedLimits::Refuse),
            "warn" => Ok(UnenforcedLimits::Warn),
            other => Err(format!("{other:?} is not one of \"refuse\", \"warn\"")),
        }
    }
}

/// `TryFrom<String>` (what serde's `try_from` needs) and `TryFrom<&str>`
/// for a type that parses with `FromStr`: the config file, the command line
/// and serve's request bodies all read a value through the same parser.
macro_rules! parsed_from_text {
    ($($t:ty),*) => {$(
        impl TryFrom<String> for $t {
            type Error = String;
            fn try_from(s: String) -> std::result::Result<Self, String> {
                s.parse()
            }
        }
        impl TryFrom<&str> for $t {
            type Error = String;
            fn try_from(s: &str) -> std::result::Result<Self, String> {
                s.parse()
            }
        }
    )*};
}

parsed_from_text!(
    NetworkChoice,
    UnenforcedLimits,
    Memory,
    Cpus,
    Pids,
    Port,
    MachineName,
    PassEnvName,
    ImageName,
    ImagesRepo
);

/// A memory limit in podman's notation, kept as written (lower-cased) since
/// podman reads it again, with the bytes it means.
///
/// podman reads `--memory` with `RAMInBytes` of github.com/docker/go-units:
/// a decimal number, then an optional unit k, m, g (also t, p) of powers of
/// 1024, then an optional `b` (or `ib`), in any case; a number alone is
/// bytes; the bytes are the number times the unit, cut to a whole number.
/// This takes the part of that a person writes: `2147483648`, `10240k`,
/// `512m`, `1.5g`, `1gb`, `16GiB`, and refuses the rest: `1e9` (podman 4.3
/// refuses it, later go-units take it), a space (`1 g`), `t` and `p`.
/// podman 4.3.1 here makes 1610612736 of `1.5g`, 6606028 of `6.3m` and
/// 6291456 of `6144KiB`, as the tests below expect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Memory {
    text: String,
    bytes: u64,
}

impl Memory {
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The bytes podman makes of it.
    #[allow(dead_code)] // read by the tests, kept beside the text it means
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl FromStr for Memory {
    type Err = String;
    fn from_str(m: &str) -> std::result::Result<Self, String> {
        let s = m.trim().to_ascii_lowercase();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        let unit_bytes: Option<u64> = match unit {
            "" | "b" => Some(1),
            "k" | "kb" | "kib" => Some(1 << 10),
            "m" | "mb" | "mib" => Some(1 << 20),
            "g" | "gb" | "gib" => Some(1 << 30),
            _ => None,
        };
        let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
        let number_ok = match number.split_once('.') {
            Some((whole, part)) => digits(whole) && digits(part),
            None => digits(number),
        };
        let value = number.parse::<f64>().ok().filter(|n| number_ok && *n > 0.0);
        let (Some(n), Some(unit_bytes)) = (value, unit_bytes) else {
            return Err(format!(
                "{m:?} is not a size: use a positive number with b, k, m or g (kb, mb, gb \
                 alike), like \"512m\", \"1.5g\" or \"16g\""
            ));
        };
        // As podman counts: the number times the unit, cut to whole bytes.
        let bytes = (n * unit_bytes as f64).trunc();
        if bytes < MIN_MEMORY_BYTES as f64 {
            return Err(format!(
                "{m:?} is less than podman's minimum of 6m (6 MiB) for a container{}: \
                 give at least 6m, with a unit, like \"512m\" or \"16g\"",
                if unit.is_empty() {
                    ", and a number without a unit is bytes"
                } else {
                    ""
                }
            ));
        }
        if bytes >= i64::MAX as f64 {
            return Err(format!(
                "{m:?} is more memory than podman can take: give it in m or g, like \"16g\""
            ));
        }
        Ok(Memory {
            text: s,
            bytes: bytes as u64,
        })
    }
}

impl From<Memory> for String {
    fn from(m: Memory) -> String {
        m.text
    }
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// CPUs: a positive number, whole or decimal ("2", "1.5"), at least 0.01,
/// kept as written since podman reads it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "NumberOrString", into = "String")]
pub struct Cpus(String);

impl Cpus {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn value(&self) -> f64 {
        self.0.parse().unwrap_or(f64::MAX)
    }
}

impl FromStr for Cpus {
    type Err = String;
    fn from_str(c: &str) -> std::result::Result<Self, String> {
        let s = c.trim();
        let plain = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        match s.parse::<f64>() {
            Ok(n) if plain && n >= MIN_CPUS && n.is_finite() => Ok(Cpus(s.to_string())),
            Ok(n) if plain && n > 0.0 => Err(format!(
                "{c:?} is less than podman's minimum of {MIN_CPUS} CPUs: give at least {MIN_CPUS}, \
                 like \"0.5\" or \"2\""
            )),
            _ => Err(format!(
                "{c:?} is not a number of CPUs: use a positive number, like \"2\" or \"1.5\""
            )),
        }
    }
}

impl TryFrom<NumberOrString> for Cpus {
    type Error = String;
    fn try_from(v: NumberOrString) -> std::result::Result<Self, String> {
        match v {
            NumberOrString::Int(n) => n.to_string().parse(),
            NumberOrString::Float(f) => f.to_string().parse(),
            NumberOrString::Str(s) => s.parse(),
        }
    }
}

impl From<Cpus> for String {
    fn from(c: Cpus) -> String {
        c.0
    }
}

impl std::fmt::Display for Cpus {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A process limit: a positive whole number (a number in the config and
/// in the session's record, as before).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "i64", into = "u64")]
pub struct Pids(u64);

impl Pids {
    pub fn get(self) -> u64 {
        self.0
    }
}

impl FromStr for Pids {
    type Err = String;
    fn from_str(p: &str) -> std::result::Result<Self, String> {
        p.trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .map(Pids)
            .ok_or_else(|| format!("{p:?} is not a positive whole number"))
    }
}

impl TryFrom<i64> for Pids {
    type Error = String;
    fn try_from(p: i64) -> std::result::Result<Self, String> {
        u64::try_from(p)
            .ok()
            .filter(|n| *n > 0)
            .map(Pids)
            .ok_or_else(|| format!("{p} is not a positive whole number"))
    }
}

impl From<Pids> for u64 {
    fn from(p: Pids) -> u64 {
        p.0
    }
}

impl std::fmt::Display for Pids {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A TCP port, 1 to 65535 (`agent_port`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "i64")]
pub struct Port(u16);

impl Port {
    pub fn get(self) -> u16 {
        self.0
    }
}

impl FromStr for Port {
    type Err = String;
    fn from_str(p: &str) -> std::result::Result<Self, String> {
        match p.trim().parse::<i64>() {
            Ok(n) => Port::try_from(n),
            Err(_) => Err(format!("{p:?} is not a port (1 to 65535)")),
        }
    }
}

impl TryFrom<i64> for Port {
    type Error = String;
    fn try_from(p: i64) -> std::result::Result<Self, String> {
        u16::try_from(p)
            .ok()
            .filter(|n| *n > 0)
            .map(Port)
            .ok_or_else(|| format!("{p} is not a port (1 to 65535)"))
    }
}

/// `serve --listen`: an address and a port, or `localhost` and a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen(pub SocketAddr);

impl FromStr for Listen {
    type Err = String;
    fn from_str(l: &str) -> std::result::Result<Self, String> {
        if let Ok(a) = l.parse() {
            return Ok(Listen(a));
        }
        // `localhost` is loopback by definition (RFC 6761, 6.3), so it is
        // taken as 127.0.0.1 without asking a resolver, whose answer
        // (/etc/hosts, DNS) could name another address. Any other name is
        // refused: what it resolves to is not for serve to trust.
        match l.rsplit_once(':') {
            Some((host, port)) if host.eq_ignore_ascii_case("localhost") => {
                let port: u16 = port
                    .parse()
                    .map_err(|_| format!("--listen {l:?}: {port:?} is not a port (0 to 65535)"))?;
                Ok(Listen(SocketAddr::from(([127, 0, 0, 1], port))))
            }
            Some((host, _)) if host.parse::<std::net::IpAddr>().is_err() && !host.is_empty() => {
                Err(format!(
                    "--listen {l:?}: serve listens on an address, or on localhost (127.0.0.1); \
                     a name like {host:?} could resolve to any address: give the address, \
                     like 127.0.0.1:{port} or [::1]:{port}",
                    port = l.rsplit_once(':').map_or("7387", |(_, p)| p)
                ))
            }
            _ => Err(format!(
                "--listen {l:?}: give an address and a port, like 127.0.0.1:7387, [::1]:7387 \
                 or localhost:7387"
            )),
        }
    }
}

/// A machine's name (`machine_name`, the keys of `[machines]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct MachineName(String);

impl FromStr for MachineName {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        validate_machine_name(s).map(|()| MachineName(s.to_string()))
    }
}

/// A name that may be listed in `pass_env`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
struct PassEnvName(String);

impl FromStr for PassEnvName {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        validate_pass_env_name(s).map(|()| PassEnvName(s.to_string()))
    }
}

/// `image`: any image podman can name, but not an empty one.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
struct ImageName(String);

impl FromStr for ImageName {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.trim().is_empty() {
            return Err("is empty".into());
        }
        Ok(ImageName(s.to_string()))
    }
}

/// `images_repo`: where our images are tagged.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
struct ImagesRepo(String);

impl FromStr for ImagesRepo {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        crate::images::workbench::validate_repo(s).map(|()| ImagesRepo(s.to_string()))
    }
}

/// `base_mirror`: the Debian mirror the workbench's base is made from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
struct BaseMirror(String);

impl TryFrom<String> for BaseMirror {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        let ok = ["http://", "https://", "file:/", "mirror+", "copy:/"]
            .iter()
            .any(|p| s.starts_with(p))
            && !s.chars().any(|c| c.is_whitespace() || c.is_control());
        if ok {
            Ok(BaseMirror(s))
        } else {
            Err(format!(
                "{s:?} is not a mirror's URL: give one as apt's sources name it, like \
                 \"http://<mirror>/debian\" (no spaces)"
            ))
        }
    }
}

/// `sealed_dns`: one IP address or more.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Vec<String>")]
struct SealedDns(Vec<String>);

impl TryFrom<Vec<String>> for SealedDns {
    type Error = String;
    fn try_from(list: Vec<String>) -> std::result::Result<Self, String> {
        if list.is_empty() {
            return Err("is empty: a sealed cage needs at least one public resolver".into());
        }
        for a in &list {
            if a.parse::<std::net::IpAddr>().is_err() {
                return Err(format!("{a:?} is not an IP address"));
            }
        }
        Ok(SealedDns(list))
    }
}

/// A cage's resource limits, in podman's own notation. In a session's
/// record as three plain values (`"4g"`, `"2"`, `2048`), as always.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Limits {
    #[schema(value_type = String, example = "4g")]
    pub memory: Memory,
    #[schema(value_type = String, example = "2")]
    pub cpus: Cpus,
    #[schema(value_type = u64, example = 2048)]
    pub pids: Pids,
}

impl Limits {
    /// The limits a cage gets when the config says none.
    pub fn defaults() -> Limits {
        Limits {
            memory: Memory {
                text: DEFAULT_MEMORY.to_string(),
                bytes: DEFAULT_MEMORY_BYTES,
            },
            cpus: Cpus(DEFAULT_CPUS.to_string()),
            pids: Pids(DEFAULT_PIDS),
        }
    }

    /// Limits written out, for tests.
    #[cfg(test)]
    pub fn of(memory: &str, cpus: &str, pids: u64) -> Limits {
        Limits {
            memory: memory.parse().unwrap(),
            cpus: cpus.parse().unwrap(),
            pids: Pids(pids),
        }
    }

    /// These limits with what was asked for put in.
    pub fn with(&self, asked: &LimitsAsked) -> Limits {
        Limits {
            memory: asked.memory.clone().unwrap_or_else(|| self.memory.clone()),
            cpus: asked.cpus.clone().unwrap_or_else(|| self.cpus.clone()),
            pids: asked.pids.unwrap_or(self.pids),
        }
    }
}

/// Limits asked for on the command line (`cage limits --memory ...`) or in
/// a request's body, each checked as the config's are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitsAsked {
    pub memory: Option<Memory>,
    pub cpus: Option<Cpus>,
    pub pids: Option<Pids>,
}

impl LimitsAsked {
    /// Read the three values as written, naming the field of one refused.
    pub fn parse(
        memory: Option<&str>,
        cpus: Option<&str>,
        pids: Option<&str>,
    ) -> Result<LimitsAsked> {
        fn one<T: FromStr<Err = String>>(
            field: &'static str,
            v: Option<&str>,
        ) -> Result<Option<T>> {
            v.map(|v| v.parse().map_err(|why| Error::bad_field(field, why)))
                .transpose()
        }
        Ok(LimitsAsked {
            memory: one("memory", memory)?,
            cpus: one("cpus", cpus)?,
            pids: one("pids", pids)?,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.memory.is_none() && self.cpus.is_none() && self.pids.is_none()
    }
}

/// What the command line says over the config, as written; read with the
/// config, in `Settings::resolve`.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `cage limits --memory/--cpus/--pids`
    pub memory: Option<String>,
    pub cpus: Option<String>,
    pub pids: Option<String>,
    /// `serve --listen`
    pub listen: Option<String>,
    /// `--laptop`, sent with a turn by the machine that ran `--on`
    pub laptop_socket: Option<PathBuf>,
}

/// Everything the operations need to know about how they were asked to run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config_path: PathBuf,
    pub state_dir: PathBuf,
    pub home: PathBuf,
    /// The podman program as configured, or found on PATH; None when absent.
    pub podman: Option<PathBuf>,
    /// `podman` was set in the config (then it must be there and run).
    pub podman_configured: bool,
    pub image: String,
    pub limits: Limits,
    pub agent_port: u16,
    pub network: NetworkChoice,
    /// The network policy of a new ordinary cage (`net`; docs/network.md, "Network
    /// policy"): `internet` unless the config says otherwise.
    pub net: crate::net::netpolicy::NetPolicy,
    /// `cages = false`: this machine offers no cages.
    pub cages: bool,
    pub claude: Option<PathBuf>,
    pub pi: Option<PathBuf>,
    pub codex: Option<PathBuf>,
    pub opencode: Option<PathBuf>,
    /// Every name passed into cages: `pass_env`'s and `pass_secrets`'s.
    pub pass_env: Vec<String>,
    /// The names of `pass_secrets`: these pass as they are, even a proxy
    /// URL's password (`spec::admit`).
    pub pass_secrets: Vec<String>,
    pub unenforced_limits: UnenforcedLimits,
    /// The PATH used to find programs (podman, claude, nft), from `env`.
    pub path_var: Option<String>,
    /// The machine's sealed token file, if the config names one.
    pub sealed_token: Option<PathBuf>,
    /// The resolvers of a sealed cage.
    pub sealed_dns: Vec<String>,
    /// Where our images are tagged: `<repo>:latest`, `<repo>:desktop` (docs/images.md, "Images").
    pub images_repo: String,
    /// The Debian mirror of the workbench's base (`base_mirror`); None:
    /// the one this machine's apt sources name.
    pub base_mirror: Option<String>,
    /// The machine's nix (`/nix`; `$SHROOMS_AGENT_NIX_ROOT` for tests).
    pub nix_root: PathBuf,
    /// Who runs the tool, for the history (`--by` overrides).
    pub user: String,
    /// This machine's name among the machines (`machine_name`; default the host name).
    pub machine_name: String,
    /// The other machines' `serve`s, by name (`[machines]`).
    pub machines: BTreeMap<String, Machine>,
    /// The machines `--on` reaches over ssh, by name (`[ssh]`).
    pub ssh: BTreeMap<String, crate::settings::ssh_table::SshMachine>,
    /// `[gateway]`.
    pub gateway: GatewaySettings,
    /// `[budget]`.
    pub budget: budget::BudgetSettings,
    /// The price table: the built-in one with `[prices]` over it.
    pub prices: prices::Prices,
    /// `allow_root = true`: cage commands run as root, with rootful podman,
    /// whose cages' root is root on the files they are given.
    pub allow_root: bool,
    /// The limits asked for on the command line (`cage limits`).
    pub asked_limits: LimitsAsked,
    /// Where `serve` listens: `--listen`, else 127.0.0.1 and `agent_port`.
    pub listen: SocketAddr,
    /// A turn sent here from another machine (`--on`): the socket its ssh
    /// forwards here, to its key lender and the turn's line (`--laptop`).
    pub laptop_socket: Option<PathBuf>,
    /// The user's runtime folder (`$XDG_RUNTIME_DIR`, when absolute): its
    /// sockets are never a project folder, and serve's Unix socket is in it.
    pub runtime_dir: Option<PathBuf>,
    /// A hosts-format file read before the machine's resolver for the
    /// names of an allow-list (`$SHROOMS_AGENT_HOSTS_FILE`, when absolute;
    /// docs/network.md, "Network policy").
    pub hosts_file: Option<PathBuf>,
    /// Claude Code's folder on the machine: `$CLAUDE_CONFIG_DIR` (absolute),
    /// else ~/.claude. The cage's copy is made from it and the gateway
    /// reads the machine's login from it: one answer for both.
    pub claude_dir: PathBuf,
    /// pi's folder on the machine: `$PI_CODING_AGENT_DIR` (absolute), else
    /// ~/.pi/agent.
    pub pi_dir: PathBuf,
    /// Codex CLI's folder on the machine: `$CODEX_HOME` (absolute), else
    /// ~/.codex. The cage's copy of its config is made from it, and the
    /// gateway reads the machine's Codex login from it.
    pub codex_dir: PathBuf,
    /// opencode's config folder on the machine: `$XDG_CONFIG_HOME/opencode`
    /// (absolute), else ~/.config/opencode.
    pub opencode_dir: PathBuf,
    /// opencode's data folder on the machine, where its login is:
    /// `$XDG_DATA_HOME/opencode` (absolute), else ~/.local/share/opencode.
    pub opencode_data_dir: PathBuf,
    /// Colour on a terminal: unless `NO_COLOR` is set and not empty
    /// (no-color.org).
    pub colour: bool,
}

/// The user's choices of names: `pass_env` (which holds the names of
/// `pass_secrets` too) and `pass_secrets`.
#[derive(Debug, Clone, Copy)]
pub struct Chosen<'a> {
    pub pass_env: &'a [String],
    pub pass_secrets: &'a [String],
}

impl Settings {
    /// The names the user chose to pass into cages (`spec::admit`).
    pub fn chosen(&self) -> Chosen<'_> {
        Chosen {
            pass_env: &self.pass_env,
            pass_secrets: &self.pass_secrets,
        }
    }

    /// Resolve the settings from the environment, the config file it names
    /// and the command line's overrides.
    pub fn load(env: &Env, overrides: &Overrides) -> Result<Settings> {
        let home = home_dir(env)?;
        let (config_path, state_dir) = paths(env, &home)?;
        let text = match std::fs::read_to_string(&config_path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(Error::config(
                    &config_path,
                    None,
                    format!("cannot read it: {e}"),
                ));
            }
        };
        let settings = Self::resolve(
            text.as_deref(),
            &config_path,
            state_dir,
            home,
            env,
            overrides,
        )?;
        if settings.podman_configured
            && let Some(p) = &settings.podman
        {
            check_program(p).map_err(|why| Error::config(&config_path, Some("podman"), why))?;
        }
        Ok(settings)
    }

    /// For `doctor`: the settings, or, when the config file is bad, the
    /// defaults with the config's error beside them, so that a bad config
    /// is one failing check and the other checks still run. Without a
    /// home or with a bad path in the environment there is nothing to fall
    /// back on: that is the error.
    pub fn load_or_defaults(env: &Env, overrides: &Overrides) -> Result<(Settings, Option<Error>)> {
        match Self::load(env, overrides) {
            Ok(s) => Ok((s, None)),
            Err(e) => {
                let home = home_dir(env)?;
                let (config_path, state_dir) = paths(env, &home)?;
                let defaults = Self::resolve(
                    None,
                    &config_path,
                    state_dir,
                    home,
                    env,
                    &Overrides::default(),
                )
                .map_err(|_| e.clone())?;
                Ok((defaults, Some(e)))
            }
        }
    }

    /// `resolve` without overrides (the tests' way in).
    #[cfg(test)]
    pub fn from_text(
        text: Option<&str>,
        config_path: &Path,
        state_dir: PathBuf,
        home: PathBuf,
        env: &Env,
    ) -> Result<Settings> {
        Self::resolve(
            text,
            config_path,
            state_dir,
            home,
            env,
            &Overrides::default(),
        )
    }

    /// The pure part of `load`: the text of the config file (if any), the
    /// environment and the command line's overrides to settings. Every
    /// value is checked here, once: the config's as it is parsed, the
    /// command line's with the same parsers.
    pub fn resolve(
        text: Option<&str>,
        config_path: &Path,
        state_dir: PathBuf,
        home: PathBuf,
        env: &Env,
        overrides: &Overrides,
    ) -> Result<Settings> {
        let file = match text {
            Some(t) => parse_config(t, config_path)?,
            None => ConfigFile::default(),
        };
        let path_var = env.get("PATH").cloned();
        let agent_port = file.agent_port.map_or(DEFAULT_AGENT_PORT, Port::get);
        let (images_repo, image) = images(file.images_repo, file.image);
        let (pass_env, pass_secrets) = passed_names(file.pass_env, file.pass_secrets)
            .map_err(|why| bad_key(config_path, "pass_env", why))?;
        let sealed_dns = match file.sealed_dns {
            Some(SealedDns(list)) => list,
            None => DEFAULT_SEALED_DNS.iter().map(|s| s.to_string()).collect(),
        };
        let gateway = gateway_settings(
            file.gateway.unwrap_or_default(),
            path_var.as_deref(),
            config_path,
        )?;
        let harness = file.harness.unwrap_or_default();
        let podman_configured = file.podman.is_some();
        let podman = podman_program(file.podman.as_deref(), path_var.as_deref(), config_path)?;
        let (asked_limits, listen) = command_line(overrides, agent_port)?;

        Ok(Settings {
            config_path: config_path.to_path_buf(),
            state_dir,
            podman,
            podman_configured,
            image,
            limits: configured_limits(file.memory, file.cpus, file.pids),
            agent_port,
            network: file.network.unwrap_or(NetworkChoice::Auto),
            net: file
                .net
                .unwrap_or(crate::net::netpolicy::NetPolicy::Internet),
            cages: file.cages.unwrap_or(true),
            claude: harness.claude,
            pi: harness.pi,
            codex: harness.codex,
            opencode: harness.opencode,
            pass_env,
            pass_secrets,
            unenforced_limits: file.unenforced_limits.unwrap_or(UnenforcedLimits::Refuse),
            path_var,
            gateway,
            budget: file.budget.unwrap_or_default().settings(),
            prices: prices::Prices::with(prices::overrides(file.prices.unwrap_or_default())),
            sealed_token: file.sealed_token,
            sealed_dns,
            images_repo,
            base_mirror: file.base_mirror.map(|BaseMirror(m)| m),
            nix_root: nix_root(env),
            user: user_name(env),
            machine_name: file.machine_name.map_or_else(host_name, |MachineName(n)| n),
            machines: by_name(file.machines, |MachineEntry(m)| m),
            ssh: by_name(file.ssh, |crate::settings::ssh_table::SshEntry(m)| m),
            allow_root: file.allow_root.unwrap_or(false),
            asked_limits,
            listen,
            laptop_socket: overrides.laptop_socket.clone(),
            runtime_dir: absolute_var(env, "XDG_RUNTIME_DIR"),
            hosts_file: absolute_var(env, crate::net::netpolicy::HOSTS_ENV),
            claude_dir: var_or_home(env, "CLAUDE_CONFIG_DIR", &home, ".claude"),
            pi_dir: var_or_home(env, "PI_CODING_AGENT_DIR", &home, ".pi/agent"),
            codex_dir: var_or_home(env, "CODEX_HOME", &home, ".codex"),
            opencode_dir: var_or_home(env, "XDG_CONFIG_HOME", &home, ".config").join("opencode"),
            opencode_data_dir: var_or_home(env, "XDG_DATA_HOME", &home, ".local/share")
                .join("opencode"),
            colour: env.get("NO_COLOR").is_none_or(|v| v.is_empty()),
            home,
        })
    }
}

/// A folder named by a variable when it is absolute, else `rel` in `home`.
fn var_or_home(env: &Env, var: &str, home: &Path, rel: &str) -> PathBuf {
    absolute_var(env, var).unwrap_or_else(|| home.join(rel))
}

/// A refusal of a config file's value, by its key.
fn bad_key(config_path: &Path, key: &str, why: String) -> Error {
    Error::config(config_path, Some(key), why)
}

/// Where our images are tagged (`images_repo`) and a new cage's image
/// (`image`): the config's, else the default repository and its workbench.
fn images(repo: Option<ImagesRepo>, image: Option<ImageName>) -> (String, String) {
    let repo = match repo {
        Some(ImagesRepo(r)) => r,
        None => crate::images::workbench::DEFAULT_REPO.to_string(),
    };
    let image = match image {
        Some(ImageName(i)) => i,
        // The workbench (docs/images.md, "Images"), wherever it is tagged.
        None => {
            crate::images::workbench::image_name(&repo, crate::images::workbench::Stage::Workbench)
        }
    };
    (repo, image)
}

/// The podman program: the config's, which must be there and run, else
/// the one found on PATH (None when there is none).
fn podman_program(
    configured: Option<&Path>,
    path_var: Option<&str>,
    config_path: &Path,
) -> Result<Option<PathBuf>> {
    match configured {
        Some(p) => configured_program(p, path_var)
            .map(Some)
            .map_err(|why| bad_key(config_path, "podman", why)),
        None => Ok(find_program("podman", path_var)),
    }
}

/// A cage's limits: the config's, each the default where it says none.
fn configured_limits(memory: Option<Memory>, cpus: Option<Cpus>, pids: Option<Pids>) -> Limits {
    let defaults = Limits::defaults();
    Limits {
        memory: memory.unwrap_or(defaults.memory),
        cpus: cpus.unwrap_or(defaults.cpus),
        pids: pids.unwrap_or(defaults.pids),
    }
}

/// The names passed into cages (`pass_env`, which takes `pass_secrets`'s
/// too) and the secrets among them, or why `pass_env` is refused.
fn passed_names(
    pass_env: Option<Vec<PassEnvName>>,
    pass_secrets: Option<Vec<PassEnvName>>,
) -> std::result::Result<(Vec<String>, Vec<String>), String> {
    let mut names: Vec<String> = Vec::new();
    for PassEnvName(name) in pass_env.unwrap_or_default() {
        if crate::cage::secret_names::is_credential_variable(&name) {
            return Err(format!(
                "{name} looks like a credential: in a cage, the code it runs can read \
                 it and send it anywhere. The model's key needs no passing (the model \
                 gateway adds it outside the cage); if the cage truly needs {name}, \
                 list it under pass_secrets instead"
            ));
        }
        names.push(name);
    }
    // Named on purpose, danger and all (docs/configuration.md, "Configuration").
    let mut secrets: Vec<String> = Vec::new();
    for PassEnvName(name) in pass_secrets.unwrap_or_default() {
        if !names.contains(&name) {
            names.push(name.clone());
        }
        if !secrets.contains(&name) {
            secrets.push(name);
        }
    }
    Ok((names, secrets))
}

/// `[gateway]`, each value checked: the upstream's URL, the key file's
/// path, the key command's program.
fn gateway_settings(
    g: GatewayTable,
    path_var: Option<&str>,
    config_path: &Path,
) -> Result<GatewaySettings> {
    let bad = |key: &str, why: String| bad_key(config_path, key, why);
    let url = |u: Option<String>, key: &str, default: &str| match u {
        Some(u) => validate_upstream(&u).map_err(|why| bad(key, why)),
        None => Ok(default.to_string()),
    };
    let file = |f: Option<PathBuf>, key: &str| match f {
        Some(f) if !f.is_absolute() => {
            Err(bad(key, format!("{} is not an absolute path", f.display())))
        }
        f => Ok(f),
    };
    let command = |c: Option<Vec<String>>, key: &str| match c {
        None => Ok(None),
        Some(c) => key_command(c, path_var)
            .map(Some)
            .map_err(|why| bad(key, why)),
    };
    let upstream = |u: Option<String>, key: &str, default: &str| match u {
        Some(u) => validate_upstream(&u).map_err(|why| bad(key, why)),
        None => Ok(default.to_string()),
    };
    let github_api_url = upstream(
        g.github_api_url,
        "gateway.github_api_url",
        DEFAULT_GITHUB_API,
    )?;
    let github_url = upstream(g.github_url, "gateway.github_url", DEFAULT_GITHUB)?;
    Ok(GatewaySettings {
        anthropic_url: url(g.anthropic_url, "gateway.anthropic_url", DEFAULT_UPSTREAM)?,
        key_file: file(g.key_file, "gateway.key_file")?,
        key_command: command(g.key_command, "gateway.key_command")?,
        openai_url: url(g.openai_url, "gateway.openai_url", DEFAULT_OPENAI_URL)?,
        chatgpt_url: url(g.chatgpt_url, "gateway.chatgpt_url", DEFAULT_CHATGPT_URL)?,
        openai_key_file: file(g.openai_key_file, "gateway.openai_key_file")?,
        openai_key_command: command(g.openai_key_command, "gateway.openai_key_command")?,
        remote_turns: g.remote_turns.unwrap_or_default(),
        github_api_url,
        github_url,
    })
}

/// What the command line asks over the config: the limits (`cage
/// limits`), each checked as the config's are, and where serve listens
/// (`--listen`, else 127.0.0.1 and `agent_port`).
fn command_line(overrides: &Overrides, agent_port: u16) -> Result<(LimitsAsked, SocketAddr)> {
    let asked_limits = LimitsAsked::parse(
        overrides.memory.as_deref(),
        overrides.cpus.as_deref(),
        overrides.pids.as_deref(),
    )?;
    let listen = match &overrides.listen {
        Some(l) => l.parse::<Listen>().map_err(Error::bad_input)?.0,
        None => SocketAddr::from(([127, 0, 0, 1], agent_port)),
    };
    Ok((asked_limits, listen))
}

/// A table of named entries (`[machines]`, `[ssh]`) by their names.
fn by_name<E, T>(table: Option<BTreeMap<MachineName, E>>, of: fn(E) -> T) -> BTreeMap<String, T> {
    table
        .unwrap_or_default()
        .into_iter()
        .map(|(MachineName(name), e)| (name, of(e)))
        .collect()
}

/// The machine's nix: `$SHROOMS_AGENT_NIX_ROOT` when absolute (for
/// tests), else `/nix`.
fn nix_root(env: &Env) -> PathBuf {
    env.get("SHROOMS_AGENT_NIX_ROOT")
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/nix"))
}

/// Who runs the tool, for the history: `$USER`, `$LOGNAME`, else the uid.
fn user_name(env: &Env) -> String {
    env.get("USER")
        .or_else(|| env.get("LOGNAME"))
        .cloned()
        .unwrap_or_else(|| format!("uid {}", rustix::process::getuid().as_raw()))
}

/// Parse the config file's text. A value its type refuses is told by its
/// key (and, within `[machines]`, the entry's name), as `key `memory`: why`;
/// anything else (bad TOML, an unknown key) as the TOML parser says it,
/// with the line.
fn parse_config<T: serde::de::DeserializeOwned>(text: &str, config_path: &Path) -> Result<T> {
    let whole = |e: &toml::de::Error| Error::config(config_path, None, e.to_string().trim_end());
    let de = toml::Deserializer::parse(text).map_err(|e| whole(&e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let mut keys = e.path().iter().filter_map(|s| match s {
            serde_path_to_error::Segment::Map { key } => Some(key.as_str()),
            _ => None,
        });
        match keys.next() {
            Some(key) => {
                let within: Vec<&str> = keys.collect();
                let within = if within.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", within.join("."))
                };
                Error::config(
                    config_path,
                    Some(key),
                    format!("{within}{}", e.inner().message().trim_end()),
                )
            }
            None => whole(e.inner()),
        }
    })
}

/// The config file's `[budget]` alone, read again from `config_path` (the
/// model gateway reads it at each model request: the config may change
/// while a turn runs). The rest of the file is not looked at, beyond its
/// being TOML; a config file that is not there has no budgets.
pub fn budget_of(config_path: &Path) -> Result<budget::BudgetSettings> {
    /// The file, its other keys let be.
    #[derive(Deserialize)]
    struct Only {
        budget: Option<budget::BudgetTable>,
    }
    let text = match std::fs::read_to_string(config_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(Error::config(
                config_path,
                None,
                format!("cannot read it: {e}"),
            ));
        }
    };
    let only: Only = parse_config(&text, config_path)?;
    Ok(only.budget.unwrap_or_default().settings())
}

/// The process's environment, read once (names and values that are
/// UTF-8): every other module is handed what it needs from here.
pub fn environment() -> Env {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// A folder a variable names, when it is an absolute path (a relative one
/// would be read from wherever the command runs).
fn absolute_var(env: &Env, name: &str) -> Option<PathBuf> {
    env.get(name)
        .filter(|d| d.starts_with('/'))
        .map(PathBuf::from)
}

/// The home directory: $HOME, else the system's record of the user.
/// The config file as a hint names it: its path, and when it does not
/// exist, how to make it (a TOML file of `key = value` lines; its folder
/// made first).
pub fn config_file_words(path: &Path) -> String {
    if path.exists() {
        path.display().to_string()
    } else {
        format!(
            "{} (not there yet: make it, a TOML file of `key = value` lines, with `mkdir -p {}` \
             and your editor)",
            path.display(),
            path.parent().unwrap_or(Path::new("/")).display()
        )
    }
}

fn home_dir(env: &Env) -> Result<PathBuf> {
    if let Some(h) = env.get("HOME").filter(|h| h.starts_with('/')) {
        return Ok(PathBuf::from(h));
    }
    directories::BaseDirs::new()
        .map(|b| b.home_dir().to_path_buf())
        .ok_or_else(Error::no_home)
}

/// The config file and the state folder, from the environment (pure):
/// `$SHROOMS_AGENT_CONFIG`, else `$XDG_CONFIG_HOME/shrooms-agent/config.toml`,
/// else under the home; `$SHROOMS_AGENT_STATE_DIR`, else
/// `$XDG_DATA_HOME/shrooms-agent`, else under the home. A variable that
/// decides a path must give an absolute one: a relative path would name
/// another folder from every working folder (and `serve` under systemd
/// runs from `/`), so it is refused, by name, rather than used or passed over.
pub fn paths(env: &Env, home: &Path) -> Result<(PathBuf, PathBuf)> {
    let config = match var(env, "SHROOMS_AGENT_CONFIG")? {
        Some(p) => p,
        None => xdg(env, "XDG_CONFIG_HOME", home, ".config")?.join("shrooms-agent/config.toml"),
    };
    let state = match var(env, "SHROOMS_AGENT_STATE_DIR")? {
        Some(p) => p,
        None => xdg(env, "XDG_DATA_HOME", home, ".local/share")?.join("shrooms-agent"),
    };
    Ok((config, state))
}

/// A path variable: None when unset or empty; refused when relative.
fn var(env: &Env, name: &str) -> Result<Option<PathBuf>> {
    match env.get(name) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) if v.starts_with('/') => Ok(Some(PathBuf::from(v))),
        Some(v) => Err(Error::input(crate::error::InputProblem::RelativeVariable {
            name: name.to_string(),
            value: v.to_string(),
        })),
    }
}

/// An XDG base folder: the variable when it is set, else the default under home.
fn xdg(env: &Env, name: &str, home: &Path, default: &str) -> Result<PathBuf> {
    Ok(var(env, name)?.unwrap_or_else(|| home.join(default)))
}

/// What to write instead of a `podman` key that cannot be used.
const PODMAN_HOW: &str = "give the podman program's absolute path (`command -v podman` prints \
                          it), or remove the key to use the podman on PATH";

/// A program the config names: an absolute path, or a bare name looked up
/// on PATH. Empty, relative with a folder, or a name not on PATH: refused,
/// with what to write instead.
fn configured_program(p: &Path, path_var: Option<&str>) -> Result<PathBuf, String> {
    let text = p.to_string_lossy();
    if text.trim().is_empty() {
        return Err(format!("is empty: {PODMAN_HOW}"));
    }
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    if p.components().count() > 1 {
        return Err(format!("{text:?} is a relative path: {PODMAN_HOW}"));
    }
    find_program(&text, path_var)
        .ok_or_else(|| format!("there is no {text:?} on PATH: {PODMAN_HOW}"))
}

/// A configured program must be there, a file, and executable: a podman
/// that cannot run is the config's fault, not the machine's lack of one.
pub fn check_program(p: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;

    match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("{} does not exist: {PODMAN_HOW}", p.display()))
        }
        Err(e) => Err(format!("{}: {e}: {PODMAN_HOW}", p.display())),
        Ok(m) if !m.is_file() => Err(format!("{} is not a file: {PODMAN_HOW}", p.display())),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => {
            Err(format!("{} is not executable: {PODMAN_HOW}", p.display()))
        }
        Ok(_) => Ok(()),
    }
}

/// `[gateway] key_command` as it is run: its program an absolute path, a
/// name looked up on PATH as a shell would (no process is started by a
/// bare name: the one place that starts them, `process.rs`, runs them
/// from `/`). A name not on PATH is kept as it is, and the gateway says so
/// when it would run it; a relative path is refused.
fn key_command(
    mut c: Vec<String>,
    path_var: Option<&str>,
) -> std::result::Result<Vec<String>, String> {
    let Some(program) = c.first().filter(|p| !p.trim().is_empty()) else {
        return Err(
            "is empty: give the program and its arguments, e.g. [\"pass\", \"show\", \"anthropic\"]"
                .into(),
        );
    };
    if program.contains('/') {
        if !Path::new(program).is_absolute() {
            return Err(format!(
                "{program:?} is a relative path: give an absolute path, or a name on PATH"
            ));
        }
    } else if let Some(found) = find_program(program, path_var) {
        c[0] = found.to_string_lossy().into_owned();
    }
    Ok(c)
}

/// Look a program up on the given PATH, in its absolute folders only. An
/// empty or relative entry (`.`, a trailing `:`) names the current folder,
/// which is often a cage's project: a program a cage put there must never
/// be what the machine runs (its git, gh, podman, a key command). A name
/// with a `/` is not looked up at all.
pub fn find_program(name: &str, path_var: Option<&str>) -> Option<PathBuf> {
    if name.contains('/') {
        return None;
    }
    let absolute =
        std::env::join_paths(std::env::split_paths(path_var?).filter(|p| p.is_absolute())).ok()?;
    which::which_in(name, Some(absolute), "/").ok()
}

/// The least memory podman gives a container: it refuses less ("Minimum
/// memory limit allowed is 6MB", podman's `linuxMinMemory`, 6 MiB), so a
/// cage made or updated with less would fail to start.
pub const MIN_MEMORY_BYTES: u64 = 6 * 1024 * 1024;

/// The fewest CPUs podman can give: a CPU quota under 1 ms in its 100 ms
/// period, which the kernel refuses (cpu.cfs_quota_us >= 1000).
pub const MIN_CPUS: f64 = 0.01;

/// A machine's name: what a session name may be (it goes into folder names,
/// `from-<machine>_<session>`), without `_`, which separates the two there.
pub fn validate_machine_name(name: &str) -> Result<(), String> {
    let ok = (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && !name.starts_with(['-', '.']);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a machine name: use 1 to 63 of A-Z a-z 0-9 . -, not starting with - or ."
        ))
    }
}

/// The model API's base URL: http or https, a host, no query; returned
/// without a trailing `/` (request paths are appended to it).
fn validate_upstream(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("{url:?} does not start with https:// or http://"))?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || url.contains(['?', '#', ' ', '\n']) || host.contains('@') {
        return Err(format!(
            "{url:?} is not a base URL like https://api.anthropic.com (a host, no query, no user)"
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// `http://host:port` (a trailing `/` is let go; the port defaults to 7387).
/// Only plain HTTP: `serve` speaks nothing else; a mesh carries it.
pub fn parse_machine_url(url: &str, token_file: Option<PathBuf>) -> Result<Machine, String> {
    let why = || {
        format!("{url:?} is not an address of a machine's serve: write it as \"http://host:port\"")
    };
    let rest = url.strip_prefix("http://").ok_or_else(why)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
        return Err(why());
    }
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(why)?;
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(why());
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(why)?),
        };
        (h.to_string(), port)
    } else {
        match rest.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (rest.to_string(), None),
        }
    };
    let host_ok = !host.is_empty()
        && (host.contains(':')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')));
    if !host_ok {
        return Err(why());
    }
    let port = match port {
        None => DEFAULT_AGENT_PORT,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(why)?,
    };
    // The URL requests go to is written from the host and port shown,
    // never as given: without a port, "http://host" would be port 80 to
    // an HTTP client while every listing says 7387, and the machine's
    // token would go to whatever listens on 80.
    let url = if host.contains(':') {
        format!("http://[{host}]:{port}")
    } else {
        format!("http://{host}:{port}")
    };
    Ok(Machine {
        url,
        host,
        port,
        token_file,
    })
}

/// The host name (uname's node name, which gethostname(2) reads), up to
/// its first dot, or "localhost".
fn host_name() -> String {
    let name = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let short = name.split('.').next().unwrap_or("").to_string();
    if validate_machine_name(&short).is_ok() {
        short
    } else {
        "localhost".into()
    }
}

/// A name that may be listed in `pass_env`.
fn validate_pass_env_name(name: &str) -> Result<(), String> {
    if !crate::cage::envfile::valid_name(name) {
        return Err(format!(
            "{name:?} is not a variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    // GitHub's variables never reach a cage: `--github` adds the
    // machine's token outside it, at the gateway.
    if name.starts_with("GH_") || name.starts_with("GITHUB_") {
        return Err(format!(
            "{name}: GitHub's variables (GH_*, GITHUB_*) never reach a cage, not through \
             pass_env either: --github adds the machine's GitHub token outside the cage; remove it"
        ));
    }
    Ok(())
}

/// A key of the config file, as the man page's CONFIGURATION lists it.
pub struct ConfigKey {
    /// `memory`, or `gateway.key_file` for a key of a table.
    pub key: &'static str,
    pub default: String,
    pub meaning: &'static str,
}

/// How a key's default is shown: in words, or made from the constant the
/// settings are resolved with.
enum Shown {
    Words(&'static str),
    Made(fn() -> String),
}

/// Every key the config file takes: its name, its default, what it means.
const KEYS: &[(&str, Shown, &str)] = {
    use crate::images::workbench;
    use Shown::{Made, Words};
    &[
        (
            "podman",
            Words("podman found on PATH"),
            "the podman program: an absolute path, or a name on PATH",
        ),
        (
            "image",
            Made(|| workbench::image_name(workbench::DEFAULT_REPO, workbench::Stage::Workbench)),
            "the image of a new cage (--image overrides); <images_repo>:latest",
        ),
        (
            "images_repo",
            Made(|| format!("\"{}\"", workbench::DEFAULT_REPO)),
            "where our images are tagged: :latest (workbench), :desktop",
        ),
        (
            "base_mirror",
            Words("the mirror of this machine's apt sources"),
            "the Debian mirror the workbench's base is made from (mmdebstrap)",
        ),
        (
            "memory",
            Made(|| format!("\"{DEFAULT_MEMORY}\"")),
            "a cage's memory, as podman's --memory reads it; at least 6m",
        ),
        (
            "cpus",
            Made(|| format!("\"{DEFAULT_CPUS}\"")),
            "a cage's CPUs, a number from 0.01",
        ),
        (
            "pids",
            Made(|| DEFAULT_PIDS.to_string()),
            "a cage's process limit",
        ),
        (
            "agent_port",
            Made(|| DEFAULT_AGENT_PORT.to_string()),
            "the port closed inside every cage, and serve's port",
        ),
        (
            "network",
            Words("\"auto\""),
            "\"auto\", \"pasta\", \"slirp4netns\" or \"bridge\"",
        ),
        (
            "cages",
            Words("true"),
            "false: this machine offers no cages",
        ),
        (
            "harness.claude",
            Words("claude found on PATH"),
            "the Claude Code program",
        ),
        ("harness.pi", Words("the image's pi"), "the pi program"),
        (
            "harness.codex",
            Words("codex found on PATH"),
            "the Codex CLI program (npm's launcher is followed to its native program)",
        ),
        (
            "harness.opencode",
            Words("opencode found on PATH"),
            "the opencode program",
        ),
        (
            "pass_env",
            Words("[]"),
            "more variable names to pass into cages (a name that looks like a credential is refused: see pass_secrets)",
        ),
        (
            "pass_secrets",
            Words("[]"),
            "credentials to pass into cages all the same; dangerous: the code in the cage can read them and send them anywhere",
        ),
        (
            "net",
            Words("\"internet\""),
            "a new cage's network policy: \"open\", \"internet\" or \"allow:NAME,HOST:PORT,...\" (--net overrides)",
        ),
        (
            "unenforced_limits",
            Words("\"refuse\""),
            "\"warn\": make cages where podman would ignore the limits",
        ),
        (
            "sealed_token",
            Words("sealed-claude-token in the state folder"),
            "the machine's sealed token (--sealed-token overrides)",
        ),
        (
            "sealed_dns",
            Made(|| format!("{DEFAULT_SEALED_DNS:?}")),
            "a sealed cage's resolvers (IP addresses)",
        ),
        (
            "machine_name",
            Words("the host name, up to its first dot"),
            "this machine's name for outbox send and the files it receives",
        ),
        (
            "machines",
            Words("none"),
            "other machines' serve: name = \"http://host:port\", or name = { url = \"http://host:port\", token_file = \"FILE\" }",
        ),
        (
            "ssh",
            Words("none"),
            "machines `--on NAME` reaches over ssh: name = \"user@host\", or name = { destination = \"user@host\", program = \"shrooms-agent\", ssh_config = \"FILE\" }",
        ),
        (
            "gateway.remote_turns",
            Words("\"lent\""),
            "a turn started here from another machine (--on): \"lent\" uses the key that machine lends (and gets no OpenAI or GitHub route), \"own\" this machine's sources",
        ),
        (
            "gateway.anthropic_url",
            Made(|| format!("\"{DEFAULT_UPSTREAM}\"")),
            "where the model gateway sends a cage's model requests",
        ),
        (
            "gateway.github_api_url",
            Made(|| format!("\"{DEFAULT_GITHUB_API}\"")),
            "where the gateway sends a --github cage's GitHub API calls (gh), with the machine's GitHub token",
        ),
        (
            "gateway.github_url",
            Made(|| format!("\"{DEFAULT_GITHUB}\"")),
            "where the gateway sends a --github cage's git over HTTPS to github.com, with the machine's GitHub token",
        ),
        (
            "gateway.key_file",
            Words("none"),
            "a file with the key the gateway adds (absolute path; first source)",
        ),
        (
            "gateway.key_command",
            Words("none"),
            "a program and its arguments printing that key (second source)",
        ),
        (
            "gateway.openai_url",
            Made(|| format!("\"{DEFAULT_OPENAI_URL}\"")),
            "where the model gateway sends a cage's OpenAI requests (under /openai)",
        ),
        (
            "gateway.chatgpt_url",
            Made(|| format!("\"{DEFAULT_CHATGPT_URL}\"")),
            "where OpenAI requests go with Codex's ChatGPT sign-in (not tested against OpenAI)",
        ),
        (
            "gateway.openai_key_file",
            Words("none"),
            "a file with the OpenAI key the gateway adds (absolute path; first source)",
        ),
        (
            "gateway.openai_key_command",
            Words("none"),
            "a program and its arguments printing that OpenAI key (second source)",
        ),
        (
            "budget.wait",
            Words("\"1h\""),
            "how long a model request held at a budget waits for it to be raised: 0 (refused at once), or seconds, minutes or hours (\"90s\", \"30m\", \"2h\"), at most 24h",
        ),
        (
            "budget.daily_tokens",
            Words("none"),
            "the tokens all sessions may spend in a day, together, as cage limits --tokens takes them (2000000, \"500k\", \"2M\")",
        ),
        (
            "budget.daily_usd",
            Words("none"),
            "the dollars all sessions may spend in a day, together, at list prices (5, 2.50)",
        ),
        (
            "budget.tokens",
            Words("none"),
            "the token budget a new session gets, and cage limits --reset sets back",
        ),
        (
            "budget.usd",
            Words("none"),
            "the dollar budget a new session gets, and cage limits --reset sets back (5, 2.50)",
        ),
        (
            "prices",
            Words("the built-in list prices"),
            "[prices.\"MODEL\"] input, output, cache_write, cache_read ($ per 1M tokens)",
        ),
        (
            "allow_root",
            Words("false"),
            "true: cage commands and serve run as root, with rootful podman",
        ),
    ]
};

/// Every key the config file takes, with its default, from the same
/// constants the settings are resolved with; a unit test checks the list
/// against the keys `ConfigFile` accepts.
pub fn config_keys() -> Vec<ConfigKey> {
    KEYS.iter()
        .map(|(key, default, meaning)| ConfigKey {
            key,
            default: match default {
                Shown::Words(w) => w.to_string(),
                Shown::Made(made) => made(),
            },
            meaning,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// A program in the current folder (a cage's project, when a command
    /// runs there) is never found by an empty or relative PATH entry: one
    /// that leads from the current folder to a program is passed over.
    #[test]
    fn programs_are_found_in_absolute_folders_only() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = tempfile::tempdir().unwrap();
        let bin = scratch.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let p = bin.join("gh");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        // `bin` named from the current folder (and from /, the same way).
        let up = std::env::current_dir().unwrap().components().count() - 1;
        let relative = format!(
            "{}{}",
            "../".repeat(up),
            bin.display().to_string().trim_start_matches('/')
        );
        let found = |path: &str| find_program("gh", Some(path));
        assert_eq!(found(&relative), None, "{relative}");
        assert_eq!(found(&format!(".::{relative}")), None);
        assert_eq!(found(&format!("{relative}:{}", bin.display())), Some(p));
        assert_eq!(find_program("./gh", Some("/usr/bin")), None);
    }

    /// The field names a struct's Deserialize asks for: what the config
    /// file accepts, read from the types themselves.
    fn fields_of<T: serde::de::DeserializeOwned>() -> Vec<&'static str> {
        struct Ask(std::cell::RefCell<Vec<&'static str>>);
        impl<'de> serde::Deserializer<'de> for &Ask {
            type Error = serde::de::value::Error;
            fn deserialize_any<V: serde::de::Visitor<'de>>(
                self,
                _: V,
            ) -> std::result::Result<V::Value, Self::Error> {
                Err(serde::de::Error::custom("only a struct"))
            }
            fn deserialize_struct<V: serde::de::Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> std::result::Result<V::Value, Self::Error> {
                self.0.borrow_mut().extend_from_slice(fields);
                Err(serde::de::Error::custom("asked"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
                bytes byte_buf option unit unit_struct newtype_struct seq tuple
                tuple_struct map enum identifier ignored_any
            }
        }
        let ask = Ask(Default::default());
        let _ = T::deserialize(&ask);
        ask.0.into_inner()
    }

    /// The man page lists every key the config file takes, and no other.
    #[test]
    fn the_documented_keys_are_the_config_files() {
        let mut accepted: Vec<String> = Vec::new();
        for f in fields_of::<ConfigFile>() {
            match f {
                "gateway" => accepted.extend(
                    fields_of::<GatewayTable>()
                        .iter()
                        .map(|g| format!("gateway.{g}")),
                ),
                "harness" => accepted.extend(
                    fields_of::<HarnessPrograms>()
                        .iter()
                        .map(|h| format!("harness.{h}")),
                ),
                "budget" => accepted.extend(
                    fields_of::<budget::BudgetTable>()
                        .iter()
                        .map(|b| format!("budget.{b}")),
                ),
                f => accepted.push(f.to_string()),
            }
        }
        assert!(accepted.len() > 20, "{accepted:?}");
        let mut documented: Vec<String> = config_keys().iter().map(|k| k.key.to_string()).collect();
        accepted.sort();
        documented.sort();
        assert_eq!(documented, accepted);
        assert!(
            config_keys()
                .iter()
                .all(|k| !k.default.is_empty() && !k.meaning.is_empty())
        );
    }

    use super::*;

    /// A memory value as it is kept, or why it is refused.
    fn memory(m: &str) -> Result<String, String> {
        m.parse::<Memory>().map(|m| m.to_string())
    }

    fn cpus(c: &str) -> Result<String, String> {
        c.parse::<Cpus>().map(|c| c.to_string())
    }

    fn load(text: &str) -> Result<Settings> {
        let env = Env::new();
        Settings::from_text(
            Some(text),
            Path::new("/cfg/config.toml"),
            PathBuf::from("/state"),
            PathBuf::from("/home/u"),
            &env,
        )
    }

    #[test]
    fn credentials_pass_only_as_pass_secrets() {
        let s =
            load("pass_env = [\"MY_VAR\"]\npass_secrets = [\"FOO_API_KEY\", \"MY_VAR\"]").unwrap();
        assert_eq!(s.pass_env, vec!["MY_VAR".to_string(), "FOO_API_KEY".into()]);
        let e = load("pass_env = [\"FOO_API_KEY\"]").unwrap_err();
        assert!(e.message().contains("pass_secrets"), "{}", e.message());
        // The names the rule matches (`secret_names`) are refused anywhere
        // in a name, not only at its end.
        for secret in [
            "AWS_SECRET_ACCESS_KEY",
            "PGPASSWORD",
            "OPENAI_KEY",
            "STRIPE_SECRET_KEY",
            "DATABASE_URL",
        ] {
            let e = load(&format!("pass_env = [\"{secret}\"]")).unwrap_err();
            assert!(e.message().contains(secret), "{}", e.message());
            assert!(e.message().contains("pass_secrets"), "{}", e.message());
            assert!(load(&format!("pass_secrets = [\"{secret}\"]")).is_ok());
        }
    }

    #[test]
    fn the_gateway_table() {
        let s = load("").unwrap();
        assert_eq!(s.gateway.anthropic_url, "https://api.anthropic.com");
        assert_eq!((s.gateway.key_file, s.gateway.key_command), (None, None));
        assert_eq!(s.gateway.github_api_url, "https://api.github.com");
        assert_eq!(s.gateway.github_url, "https://github.com");
        let s = load(
            "[gateway]\ngithub_api_url = \"http://127.0.0.1:9/api/\"\ngithub_url = \"http://127.0.0.1:9\"\n",
        )
        .unwrap();
        assert_eq!(s.gateway.github_api_url, "http://127.0.0.1:9/api");
        assert_eq!(s.gateway.github_url, "http://127.0.0.1:9");
        let s = load(
            "[gateway]\nanthropic_url = \"http://127.0.0.1:9/llm/\"\nkey_file = \"/k\"\nkey_command = [\"pass\", \"show\", \"a\"]\n",
        )
        .unwrap();
        assert_eq!(s.gateway.anthropic_url, "http://127.0.0.1:9/llm");
        assert_eq!(s.gateway.key_file, Some(PathBuf::from("/k")));
        assert_eq!(s.gateway.key_command.unwrap().len(), 3);
        assert_eq!(s.gateway.openai_url, "https://api.openai.com");
        assert_eq!(s.gateway.chatgpt_url, "https://chatgpt.com");
        let s = load(
            "[gateway]\nopenai_url = \"http://127.0.0.1:9/oa/\"\nchatgpt_url = \"http://127.0.0.1:8\"\nopenai_key_file = \"/o\"\nopenai_key_command = [\"/bin/echo\", \"k\"]\n",
        )
        .unwrap();
        assert_eq!(s.gateway.openai_url, "http://127.0.0.1:9/oa");
        assert_eq!(s.gateway.chatgpt_url, "http://127.0.0.1:8");
        assert_eq!(s.gateway.openai_key_file, Some(PathBuf::from("/o")));
        assert_eq!(s.gateway.openai_key_command.unwrap().len(), 2);
        assert_eq!((s.gateway.key_file, s.gateway.key_command), (None, None));
        // A name is looked up on PATH, as a shell would; a name not there
        // is kept, for the gateway to say so.
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let pass = dir.join("pass");
        std::fs::write(&pass, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&pass, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let path = format!("/nonexistent:{}", dir.display());
        assert_eq!(
            key_command(vec!["pass".into(), "show".into()], Some(&path)),
            Ok(vec![pass.to_string_lossy().into_owned(), "show".into()])
        );
        assert_eq!(
            key_command(vec!["nosuch-program".into()], Some(&path)),
            Ok(vec!["nosuch-program".into()])
        );
        assert_eq!(
            key_command(vec!["/opt/x".into(), "a".into()], Some(&path)),
            Ok(vec!["/opt/x".into(), "a".into()])
        );
        assert!(key_command(vec!["bin/pass".into()], Some(&path)).is_err());
        assert!(key_command(vec![" ".into()], Some(&path)).is_err());
        let _ = std::fs::remove_dir_all(&dir);
        for bad in [
            "[gateway]\nanthropic_url = \"ftp://x\"",
            "[gateway]\nanthropic_url = \"https://\"",
            "[gateway]\nanthropic_url = \"https://u@x\"",
            "[gateway]\ngithub_api_url = \"https://u:p@x\"",
            "[gateway]\ngithub_url = \"git://github.com\"",
            "[gateway]\nkey_file = \"rel/k\"",
            "[gateway]\nkey_command = []",
            "[gateway]\nkey_command = [\"./pass\"]",
            "[gateway]\nkey = \"sk\"",
            "[gateway]\nopenai_url = \"ftp://x\"",
            "[gateway]\nchatgpt_url = \"https://u@x\"",
            "[gateway]\nopenai_key_file = \"rel/k\"",
            "[gateway]\nopenai_key_command = []",
        ] {
            let e = load(bad).unwrap_err();
            assert!(
                e.message().contains("gateway") || e.message().contains("unknown field `key`"),
                "{bad}: {}",
                e.message()
            );
        }
    }

    #[test]
    fn defaults_when_the_file_is_empty() {
        let s = load("").unwrap();
        assert_eq!(s.image, "localhost/shrooms-workbench:latest");
        assert_eq!(s.limits, Limits::of("4g", "2", 2048));
        assert_eq!(s.agent_port, 7387);
        assert_eq!(s.network, NetworkChoice::Auto);
        assert!(s.cages);
        assert!(s.pass_env.is_empty());
        assert_eq!(s.unenforced_limits, UnenforcedLimits::Refuse);
        assert_eq!(s.sealed_dns, vec!["1.1.1.1", "9.9.9.9"]);
        assert_eq!(s.sealed_token, None);
        assert!(!s.allow_root);
    }

    #[test]
    fn every_key_is_read() {
        let s = load(
            r#"
podman = "/opt/podman"
image = "localhost/mine:1"
memory = "512M"
cpus = 1.5
pids = 100
agent_port = 9000
network = "slirp4netns"
cages = false
pass_env = ["MY_VAR"]
unenforced_limits = "warn"
sealed_token = "/secret/token"
sealed_dns = ["8.8.8.8", "2001:4860:4860::8888"]
allow_root = true
[harness]
claude = "/opt/claude"
pi = "/opt/pi"
"#,
        )
        .unwrap();
        assert_eq!(s.podman, Some(PathBuf::from("/opt/podman")));
        assert_eq!(s.image, "localhost/mine:1");
        assert_eq!(s.limits, Limits::of("512m", "1.5", 100));
        assert_eq!(s.agent_port, 9000);
        assert_eq!(s.network, NetworkChoice::Slirp4netns);
        assert!(!s.cages);
        assert_eq!(s.pass_env, vec!["MY_VAR".to_string()]);
        assert_eq!(s.unenforced_limits, UnenforcedLimits::Warn);
        assert_eq!(s.claude, Some(PathBuf::from("/opt/claude")));
        assert_eq!(s.pi, Some(PathBuf::from("/opt/pi")));
        assert_eq!(s.sealed_token, Some(PathBuf::from("/secret/token")));
        assert_eq!(s.sealed_dns, vec!["8.8.8.8", "2001:4860:4860::8888"]);
        assert!(s.allow_root);
    }

    #[test]
    fn images_repo_names_the_workbench_unless_image_is_set() {
        let s = load("").unwrap();
        assert_eq!(s.images_repo, "localhost/shrooms-workbench");
        let s = load("images_repo = \"localhost/mine\"").unwrap();
        assert_eq!(s.images_repo, "localhost/mine");
        assert_eq!(s.image, "localhost/mine:latest");
        let s = load("images_repo = \"localhost/mine\"\nimage = \"x:1\"").unwrap();
        assert_eq!(s.image, "x:1");
    }

    #[test]
    fn an_unknown_key_names_the_key_and_the_file() {
        let e = load("imagee = \"x\"\n").unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::BadInput);
        assert!(e.message().contains("/cfg/config.toml"), "{}", e.message());
        assert!(e.message().contains("imagee"), "{}", e.message());
    }

    #[test]
    fn bad_values_name_the_key_and_the_file() {
        for (text, key) in [
            ("memory = \"4x\"", "memory"),
            ("memory = \"0m\"", "memory"),
            ("cpus = \"-1\"", "cpus"),
            ("cpus = 0", "cpus"),
            ("pids = 0", "pids"),
            ("agent_port = 70000", "agent_port"),
            ("network = \"host\"", "network"),
            ("unenforced_limits = \"ignore\"", "unenforced_limits"),
            ("pass_env = [\"1BAD\"]", "pass_env"),
            ("pass_env = [\"GH_TOKEN\"]", "pass_env"),
            ("pass_env = [\"FOO_API_KEY\"]", "pass_env"),
            ("pass_env = [\"ANTHROPIC_AUTH_TOKEN\"]", "pass_env"),
            ("pass_env = [\"DB_PASSWORD\"]", "pass_env"),
            ("pass_env = [\"AWS_SECRET\"]", "pass_env"),
            ("pass_secrets = [\"GH_TOKEN\"]", "pass_secrets"),
            ("image = \" \"", "image"),
            ("sealed_dns = []", "sealed_dns"),
            ("images_repo = \"localhost/wb:latest\"", "images_repo"),
            ("images_repo = \"\"", "images_repo"),
            ("sealed_dns = [\"one.one\"]", "sealed_dns"),
        ] {
            let e = load(text).unwrap_err();
            assert!(
                e.message().contains(&format!("key `{key}`"))
                    && e.message().contains("/cfg/config.toml"),
                "{text}: {}",
                e.message()
            );
        }
    }

    /// A configured podman that is empty, relative, missing or cannot run
    /// is the config's error (exit 2, the key and the file), not "no podman".
    #[test]
    fn a_configured_podman_must_be_there_and_run() {
        let how = "give the podman program's absolute path (`command -v podman` prints it), \
                   or remove the key to use the podman on PATH";
        for (text, why) in [
            ("podman = \"\"", "is empty".to_string()),
            ("podman = \" \"", "is empty".to_string()),
            (
                "podman = \"bin/podman\"",
                "\"bin/podman\" is a relative path".to_string(),
            ),
        ] {
            assert_eq!(
                load(text).unwrap_err().message(),
                format!("config file /cfg/config.toml: key `podman`: {why}: {how}"),
                "{text}"
            );
        }
        let mut env = Env::new();
        env.insert("PATH".into(), "/nonexistent-bin".into());
        let e = Settings::from_text(
            Some("podman = \"podman\""),
            Path::new("/cfg/config.toml"),
            PathBuf::from("/state"),
            PathBuf::from("/home/u"),
            &env,
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            format!(
                "config file /cfg/config.toml: key `podman`: there is no \"podman\" on PATH: {how}"
            )
        );

        let scratch = tempfile::tempdir().unwrap();

        let dir = scratch.path().to_path_buf();
        let plain = dir.join("plain");
        std::fs::write(&plain, "").unwrap();
        let config = dir.join("config.toml");
        for (podman, why) in [
            (
                "/nonexistent/podman".to_string(),
                "/nonexistent/podman does not exist".to_string(),
            ),
            (
                dir.display().to_string(),
                format!("{} is not a file", dir.display()),
            ),
            (
                plain.display().to_string(),
                format!("{} is not executable", plain.display()),
            ),
        ] {
            std::fs::write(&config, format!("podman = \"{podman}\"\n")).unwrap();
            let mut env = Env::new();
            env.insert("HOME".into(), "/nonexistent-home-for-test".into());
            env.insert("SHROOMS_AGENT_CONFIG".into(), config.display().to_string());
            let e = Settings::load(&env, &Overrides::default()).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput);
            assert_eq!(
                e.message(),
                format!(
                    "config file {}: key `podman`: {why}: {how}",
                    config.display()
                )
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_wrongly_typed_value_is_refused() {
        let e = load("cages = \"yes\"").unwrap_err();
        assert!(e.message().contains("cages"), "{}", e.message());
    }

    #[test]
    fn machines_and_this_machines_name() {
        let s = load(
            r#"
machine_name = "alpha"
[machines]
beta = "http://127.0.0.1:7400"
gamma = "http://gamma.mesh/"
delta = { url = "http://[fd00::1]:9000", token_file = "/t/delta" }
"#,
        )
        .unwrap();
        assert_eq!(s.machine_name, "alpha");
        assert_eq!(
            s.machines["beta"],
            Machine {
                url: "http://127.0.0.1:7400".into(),
                host: "127.0.0.1".into(),
                port: 7400,
                token_file: None
            }
        );
        // Without a port: 7387, shown and used alike.
        assert_eq!(s.machines["gamma"].url, "http://gamma.mesh:7387");
        assert_eq!(s.machines["gamma"].port, 7387);
        assert_eq!(
            parse_machine_url("http://[fd00::1]/", None).unwrap().url,
            "http://[fd00::1]:7387"
        );
        assert_eq!(
            parse_machine_url("http://127.0.0.2", None).unwrap().url,
            "http://127.0.0.2:7387"
        );
        assert_eq!(s.machines["delta"].host, "fd00::1");
        assert_eq!(s.machines["delta"].port, 9000);
        assert_eq!(
            s.machines["delta"].token_file,
            Some(PathBuf::from("/t/delta"))
        );
        // The default name is the host's.
        let s = load("").unwrap();
        assert!(validate_machine_name(&s.machine_name).is_ok());
        assert!(s.machines.is_empty());
    }

    #[test]
    fn bad_machines_name_the_key() {
        for (text, key) in [
            ("machine_name = \"a_b\"", "machine_name"),
            ("machine_name = \"\"", "machine_name"),
            ("[machines]\nbeta = \"https://b:1\"", "machines"),
            ("[machines]\nbeta = \"http://b:1/path\"", "machines"),
            ("[machines]\nbeta = \"http://b:0\"", "machines"),
            ("[machines]\nbeta = \"http://b:x\"", "machines"),
            ("[machines]\nbeta = \"http://user@b:1\"", "machines"),
            ("[machines]\nbeta = \"http://[nope]:1\"", "machines"),
            ("[machines]\n\"b/c\" = \"http://b:1\"", "machines"),
        ] {
            let e = load(text).unwrap_err();
            assert!(
                e.message().contains(&format!("key `{key}`")),
                "{text}: {}",
                e.message()
            );
        }
        let e = load("[machines]\nbeta = { url = \"http://b:1\", token = \"x\" }").unwrap_err();
        assert!(
            e.message()
                .contains("key `machines`: beta.token: unknown field `token`"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn memory_and_cpus_rules() {
        assert_eq!(memory("16g").unwrap(), "16g");
        assert_eq!(memory("6m").unwrap(), "6m");
        assert_eq!(memory("6144K").unwrap(), "6144k");
        assert_eq!(memory("6291456").unwrap(), "6291456");
        assert_eq!(memory("6291456b").unwrap(), "6291456b");
        assert!(memory("g").is_err());
        assert_eq!(cpus("8").unwrap(), "8");
        assert_eq!(cpus("0.01").unwrap(), "0.01");
        assert_eq!(cpus("0.5").unwrap(), "0.5");
        assert!(cpus("1e3").is_err());
        assert!(cpus("nan").is_err());
    }

    /// What podman's `--memory` takes (`RAMInBytes` of docker/go-units:
    /// units of 1024, any case, an optional `b` or `ib`, a decimal number
    /// cut to whole bytes), with the bytes podman makes of it, and the text
    /// kept for podman (lower-cased).
    #[test]
    fn memory_is_read_as_podman_reads_it() {
        for (text, kept, bytes) in [
            ("2097152000", "2097152000", 2_097_152_000),
            ("6291456", "6291456", 6 << 20),
            ("6291456b", "6291456b", 6 << 20),
            ("6291456B", "6291456b", 6 << 20),
            ("10240k", "10240k", 10 << 20),
            ("6144K", "6144k", 6 << 20),
            ("6144kb", "6144kb", 6 << 20),
            ("6144KiB", "6144kib", 6 << 20),
            ("512m", "512m", 512 << 20),
            ("512M", "512m", 512 << 20),
            ("512mb", "512mb", 512 << 20),
            ("512MiB", "512mib", 512 << 20),
            ("6m", "6m", 6 << 20),
            ("1g", "1g", 1 << 30),
            ("1gb", "1gb", 1 << 30),
            ("1GB", "1gb", 1 << 30),
            ("1gib", "1gib", 1 << 30),
            ("1.5g", "1.5g", 3 << 29),
            ("1.5G", "1.5g", 3 << 29),
            ("0.5g", "0.5g", 1 << 29),
            ("16g", "16g", 16 << 30),
            (" 4g ", "4g", 4 << 30),
            // cut to whole bytes, as podman does: 1.3 MiB is 1363148.8 bytes
            ("6.3m", "6.3m", 6_606_028),
            ("6.0000001m", "6.0000001m", 6_291_456),
        ] {
            let m: Memory = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!((m.as_str(), m.bytes()), (kept, bytes), "{text}");
        }
        // What podman refuses, or reads otherwise than a person means.
        for text in [
            "", " ", "g", "m", "b", "-1g", "+1g", "0", "0g", "0.0m", "1.g", ".5g", "1..5g",
            "1.2.3g", "1e3", "1e9b", "1 g", "1gbb", "1bb", "1ib", "1i", "1x", "12x", "1t", "1p",
            "0x10", "inf", "nan", "1_000m", "１g",
        ] {
            let e = memory(text).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "{text:?} is not a size: use a positive number with b, k, m or g (kb, mb, \
                     gb alike), like \"512m\", \"1.5g\" or \"16g\""
                ),
                "{text}"
            );
        }
        // Under podman's minimum, counted in bytes as podman counts them.
        for text in [
            "6291455",
            "6291455b",
            "6143k",
            "5.99m",
            "0.005g",
            "0.0000001m",
        ] {
            assert!(
                memory(text)
                    .unwrap_err()
                    .contains("less than podman's minimum of 6m"),
                "{text}"
            );
        }
        assert!(
            memory("8589934592g")
                .unwrap_err()
                .contains("more memory than podman can take")
        );
        assert_eq!(
            memory("8589934591g").unwrap(),
            "8589934591g",
            "just under podman's int64"
        );
    }

    /// A session's record keeps its limits as three plain values, as every
    /// earlier version wrote them, and reads them back the same.
    #[test]
    fn limits_in_a_record_are_plain_values() {
        let old = r#"{"memory":"6144k","cpus":"0.5","pids":2048}"#;
        let l: Limits = serde_json::from_str(old).unwrap();
        assert_eq!(l, Limits::of("6144k", "0.5", 2048));
        assert_eq!(serde_json::to_string(&l).unwrap(), old);
        assert_eq!(
            serde_json::to_string(&Limits::defaults()).unwrap(),
            r#"{"memory":"4g","cpus":"2","pids":2048}"#
        );
        assert_eq!(Limits::defaults(), Limits::of("4g", "2", 2048));
        assert_eq!(Limits::defaults().memory.bytes(), 4 << 30);
        // A record a hand spoiled is refused rather than handed to podman.
        for bad in [
            r#"{"memory":"1b","cpus":"2","pids":1}"#,
            r#"{"memory":"4g","cpus":"x","pids":1}"#,
            r#"{"memory":"4g","cpus":"2","pids":0}"#,
        ] {
            assert!(serde_json::from_str::<Limits>(bad).is_err(), "{bad}");
        }
    }

    /// The command line's values are read with the config, by the same
    /// parsers, and refused naming the flag.
    #[test]
    fn overrides_are_resolved_with_the_config() {
        let resolve = |text: &str, o: &Overrides| {
            Settings::resolve(
                Some(text),
                Path::new("/cfg/config.toml"),
                PathBuf::from("/state"),
                PathBuf::from("/home/u"),
                &Env::new(),
                o,
            )
        };
        let s = resolve("agent_port = 7400", &Overrides::default()).unwrap();
        assert_eq!(s.listen, "127.0.0.1:7400".parse().unwrap());
        assert_eq!(s.asked_limits, LimitsAsked::default());
        assert_eq!(s.laptop_socket, None);
        let o = Overrides {
            memory: Some("1.5G".into()),
            cpus: Some("0.5".into()),
            pids: Some("99".into()),
            listen: Some("[::1]:9000".into()),
            laptop_socket: Some("/run/user/1/shrooms-lent-0a.sock".into()),
        };
        let s = resolve("", &o).unwrap();
        assert_eq!(s.listen, "[::1]:9000".parse().unwrap());
        assert_eq!(
            s.laptop_socket.as_deref(),
            Some(Path::new("/run/user/1/shrooms-lent-0a.sock"))
        );
        assert_eq!(
            "localhost:7387".parse::<Listen>().unwrap().0,
            "127.0.0.1:7387".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            "LOCALHOST:9".parse::<Listen>().unwrap().0,
            "127.0.0.1:9".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            "example.test:7387".parse::<Listen>().unwrap_err(),
            "--listen \"example.test:7387\": serve listens on an address, or on localhost \
             (127.0.0.1); a name like \"example.test\" could resolve to any address: give the \
             address, like 127.0.0.1:7387 or [::1]:7387"
        );
        assert!("localhost:x".parse::<Listen>().is_err());
        assert!("localhost.example.test:7387".parse::<Listen>().is_err());
        assert_eq!(
            Limits::defaults().with(&s.asked_limits),
            Limits::of("1.5g", "0.5", 99)
        );
        for (o, says) in [
            (
                Overrides {
                    memory: Some("12x".into()),
                    ..Overrides::default()
                },
                "--memory: \"12x\" is not a size",
            ),
            (
                Overrides {
                    memory: Some("16".into()),
                    ..Overrides::default()
                },
                "--memory: \"16\" is less than podman's minimum of 6m (6 MiB) for a \
                 container, and a number without a unit is bytes",
            ),
            (
                Overrides {
                    cpus: Some("0".into()),
                    ..Overrides::default()
                },
                "--cpus: \"0\" is not a number of CPUs",
            ),
            (
                Overrides {
                    pids: Some("-3".into()),
                    ..Overrides::default()
                },
                "--pids: \"-3\" is not a positive whole number",
            ),
            (
                Overrides {
                    listen: Some("7387".into()),
                    ..Overrides::default()
                },
                "--listen \"7387\": give an address and a port, like 127.0.0.1:7387, [::1]:7387 \
                 or localhost:7387",
            ),
        ] {
            let e = resolve("", &o).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput);
            assert!(e.message().starts_with(says), "{says}: {}", e.message());
        }
        // A bad config is told first, as before.
        let o = Overrides {
            memory: Some("12x".into()),
            ..Overrides::default()
        };
        assert!(
            resolve("pids = 0", &o)
                .unwrap_err()
                .message()
                .contains("key `pids`")
        );
    }

    /// Each value is refused as it is parsed, with today's words after the
    /// key and the file.
    #[test]
    fn bad_values_are_told_in_full() {
        for (text, message) in [
            ("pids = 0", "key `pids`: 0 is not a positive whole number"),
            ("pids = -1", "key `pids`: -1 is not a positive whole number"),
            (
                "agent_port = 0",
                "key `agent_port`: 0 is not a port (1 to 65535)",
            ),
            (
                "network = \"host\"",
                "key `network`: \"host\" is not one of \"auto\", \"pasta\", \"slirp4netns\", \"bridge\"",
            ),
            (
                "unenforced_limits = \"ignore\"",
                "key `unenforced_limits`: \"ignore\" is not one of \"refuse\", \"warn\"",
            ),
            ("image = \"\"", "key `image`: is empty"),
            (
                "sealed_dns = [\"one.one\"]",
                "key `sealed_dns`: \"one.one\" is not an IP address",
            ),
            (
                "[machines]\nbeta = \"https://b:1\"",
                "key `machines`: beta: \"https://b:1\" is not an address of a machine's serve: \
                 write it as \"http://host:port\"",
            ),
            (
                "[machines]\nbeta = { url = \"http://b:0\" }",
                "key `machines`: beta: \"http://b:0\" is not an address",
            ),
            (
                "[machines]\n\"b_c\" = \"http://b:1\"",
                "key `machines`: b_c: \"b_c\" is not a machine name",
            ),
            (
                "cages = \"yes\"",
                "key `cages`: invalid type: string \"yes\"",
            ),
            (
                "[harness]\nclaud = \"/x\"",
                "key `harness`: claud: unknown field `claud`",
            ),
        ] {
            let e = load(text).unwrap_err();
            assert!(
                e.message()
                    .starts_with(&format!("config file /cfg/config.toml: {message}")),
                "{text}: {}",
                e.message()
            );
        }
    }

    /// `[budget] daily_tokens`: a number of tokens as `cage limits --tokens`
    /// takes it, a TOML number or a string; a bad one is refused naming the
    /// key, in those words. Read alone from the file (`budget_of`), the
    /// same, the rest of the file let be.
    #[test]
    fn the_daily_budget_is_read_and_checked() {
        assert_eq!(load("").unwrap().budget.daily_tokens, None);
        for (text, n) in [
            ("2000000", Some(2_000_000)),
            ("\"2M\"", Some(2_000_000)),
            ("\"1.5k\"", Some(1_500)),
            ("\"none\"", None),
        ] {
            let s = load(&format!("[budget]\ndaily_tokens = {text}")).unwrap();
            assert_eq!(s.budget.daily_tokens, n, "{text}");
        }
        for (text, why) in [
            (
                "0",
                "0 would refuse every model request; give a positive whole number of tokens, \
                 or none for no budget",
            ),
            (
                "-5",
                "\"-5\" is not a number of tokens; give a positive whole number (like 2000000, \
                 500k or 2M: k for thousands, M for millions), or none for no budget",
            ),
            (
                "2.0",
                "\"2.0\" is not a number of tokens; give a positive whole number (like 2000000, \
                 500k or 2M: k for thousands, M for millions), or none for no budget",
            ),
            (
                "\"2m\"",
                "\"2m\" is not a number of tokens; give a positive whole number (like 2000000, \
                 500k or 2M: k for thousands, M for millions), or none for no budget",
            ),
        ] {
            let e = load(&format!("[budget]\ndaily_tokens = {text}")).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput);
            assert_eq!(
                e.message(),
                format!("config file /cfg/config.toml: key `budget`: daily_tokens: {why}"),
                "{text}"
            );
        }
        let e = load("[budget]\ndaily = 5").unwrap_err();
        assert!(
            e.message().starts_with(
                "config file /cfg/config.toml: key `budget`: daily: unknown field `daily`"
            ),
            "{}",
            e.message()
        );

        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("config.toml");
        assert_eq!(budget_of(&path).unwrap(), budget::BudgetSettings::default());
        // Other keys, even ones `load` would refuse, are not looked at.
        std::fs::write(&path, "pids = 0\n[budget]\ndaily_tokens = \"5k\"\n").unwrap();
        assert_eq!(budget_of(&path).unwrap().daily_tokens, Some(5_000));
        std::fs::write(&path, "[budget]\ndaily_tokens = \"lots\"\n").unwrap();
        let e = budget_of(&path).unwrap_err();
        assert_eq!(
            e.message(),
            format!(
                "config file {}: key `budget`: daily_tokens: \"lots\" is not a number of tokens; \
                 give a positive whole number (like 2000000, 500k or 2M: k for thousands, M for \
                 millions), or none for no budget",
                path.display()
            )
        );
    }

    /// Limits podman cannot use are refused, saying the minimum and giving
    /// an example with a unit (podman would refuse them at the cage's start).
    #[test]
    fn limits_under_podmans_minimum_are_refused() {
        for m in ["1b", "16", "1k", "6291455", "6143k", "5m"] {
            assert_eq!(
                memory(m).unwrap_err(),
                format!(
                    "{m:?} is less than podman's minimum of 6m (6 MiB) for a container{}: \
                     give at least 6m, with a unit, like \"512m\" or \"16g\"",
                    if m.ends_with(|c: char| c.is_ascii_digit()) {
                        ", and a number without a unit is bytes"
                    } else {
                        ""
                    }
                ),
            );
        }
        assert_eq!(
            memory("99999999999999g").unwrap_err(),
            "\"99999999999999g\" is more memory than podman can take: give it in m or g, like \"16g\""
        );
        for c in ["0.0001", "0.009", "0.00999"] {
            assert_eq!(
                cpus(c).unwrap_err(),
                format!(
                    "{c:?} is less than podman's minimum of 0.01 CPUs: give at least 0.01, \
                     like \"0.5\" or \"2\""
                ),
            );
        }
        for (text, says) in [
            ("memory = \"1b\"", "minimum of 6m"),
            ("memory = \"16\"", "minimum of 6m"),
            ("cpus = 0.0001", "minimum of 0.01"),
            ("cpus = \"0.001\"", "minimum of 0.01"),
        ] {
            let e = load(text).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput);
            assert!(
                e.message()
                    .starts_with("config file /cfg/config.toml: key `")
                    && e.message().contains(says),
                "{text}: {}",
                e.message()
            );
        }
    }

    #[test]
    fn config_and_state_paths_follow_the_environment() {
        let mut env = Env::new();
        env.insert("HOME".into(), "/nonexistent-home-for-test".into());
        let s = Settings::load(&env, &Overrides::default()).unwrap();
        assert_eq!(
            s.config_path,
            PathBuf::from("/nonexistent-home-for-test/.config/shrooms-agent/config.toml")
        );
        assert_eq!(
            s.state_dir,
            PathBuf::from("/nonexistent-home-for-test/.local/share/shrooms-agent")
        );
        env.insert("SHROOMS_AGENT_CONFIG".into(), "/nonexistent/c.toml".into());
        env.insert(
            "SHROOMS_AGENT_STATE_DIR".into(),
            "/nonexistent/state".into(),
        );
        let s = Settings::load(&env, &Overrides::default()).unwrap();
        assert_eq!(s.config_path, PathBuf::from("/nonexistent/c.toml"));
        assert_eq!(s.state_dir, PathBuf::from("/nonexistent/state"));
    }

    #[test]
    fn xdg_folders_are_honoured() {
        let env: Env = [
            ("XDG_CONFIG_HOME", "/x/config"),
            ("XDG_DATA_HOME", "/x/data"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (config, state) = paths(&env, Path::new("/home/u")).unwrap();
        assert_eq!(config, Path::new("/x/config/shrooms-agent/config.toml"));
        assert_eq!(state, Path::new("/x/data/shrooms-agent"));
        let (config, state) = paths(&Env::new(), Path::new("/home/u")).unwrap();
        assert_eq!(
            config,
            Path::new("/home/u/.config/shrooms-agent/config.toml")
        );
        assert_eq!(state, Path::new("/home/u/.local/share/shrooms-agent"));
    }

    /// A relative path in a variable that decides where the config or the
    /// state is: refused by the variable's name, not used as it is.
    #[test]
    fn a_relative_path_variable_is_refused_by_name() {
        for var in [
            "SHROOMS_AGENT_STATE_DIR",
            "SHROOMS_AGENT_CONFIG",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
        ] {
            let mut env = Env::new();
            env.insert(var.into(), "rel/dir".into());
            let e = paths(&env, Path::new("/home/u")).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput);
            assert_eq!(
                e.message(),
                format!(
                    "{var} is \"rel/dir\", a relative path: it would name another folder from \
                     every working folder; set it to an absolute path (starting with /), or unset it"
                )
            );
            env.insert("HOME".into(), "/nonexistent-home-for-test".into());
            assert!(
                Settings::load(&env, &Overrides::default()).is_err(),
                "{var}"
            );
        }
        // An XDG folder that decides nothing is not looked at.
        let env: Env = [
            ("SHROOMS_AGENT_CONFIG", "/c.toml"),
            ("SHROOMS_AGENT_STATE_DIR", "/s"),
            ("XDG_CONFIG_HOME", "rel"),
            ("XDG_DATA_HOME", "."),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert!(paths(&env, Path::new("/home/u")).is_ok());
    }

    /// The environment is read here alone, once: every other module is
    /// handed what it needs. Outside their tests, no other source file
    /// reads a variable itself, nor looks up again one of the facts
    /// resolved here by its name.
    #[test]
    fn no_other_module_reads_the_environment() {
        let reads = [
            "env::var(",
            "env::var_os(",
            "env::vars(",
            "env::vars_os(",
            "\"XDG_RUNTIME_DIR\")",
            "\"CLAUDE_CONFIG_DIR\")",
            "\"PI_CODING_AGENT_DIR\")",
            "\"NO_COLOR\")",
        ];
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![src.clone()];
        let mut found = Vec::new();
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if p.extension().is_none_or(|e| e != "rs") || p.ends_with("src/settings.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
            for (i, line) in code.lines().enumerate() {
                if reads.iter().any(|r| line.contains(r)) {
                    found.push(format!("{}:{}: {}", p.display(), i + 1, line.trim()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "read outside settings:\n{}",
            found.join("\n")
        );
    }
}
