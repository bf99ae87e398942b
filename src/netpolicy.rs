//! A cage's network policy (README, "Network policy"): what it may reach,
//! kept in its record, enforced by the nftables rules loaded into its
//! network namespace from outside (`rules::policy`). The names of an
//! allow-list are resolved here, on the machine, at every load of the
//! rules; the cage gets the answers pinned in its hosts file and no DNS.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, ToSocketAddrs};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The ports a bare name of an allow-list opens: HTTP and HTTPS.
pub const WEB_PORTS: [u16; 2] = [80, 443];

/// At most this many entries in an allow-list: each is a lookup at every
/// start of the cage.
pub const MAX_ENTRIES: usize = 64;

/// A file in `/etc/hosts` format read before the machine's resolver, for
/// names the machine's resolver does not know (the tests name stand-in
/// addresses of this machine with it).
pub const HOSTS_ENV: &str = "SHROOMS_AGENT_HOSTS_FILE";

/// What a cage may reach over the network.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum NetPolicy {
    /// Everything: a cage as it was before policies (the default of a
    /// record that has none, so an older cage stays as it was made).
    #[default]
    Open,
    /// Everything but the LAN, private, link-local, CGNAT and the
    /// machine's own ranges, and DNS only to the machine's resolvers.
    Internet,
    /// Only these names and addresses, each on its ports; no DNS.
    Allow(Vec<Entry>),
}

/// One entry of an allow-list: a name or an address, and a port (none:
/// [`WEB_PORTS`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub host: String,
    pub port: Option<u16>,
}

impl Entry {
    pub fn ports(&self) -> Vec<u16> {
        match self.port {
            Some(p) => vec![p],
            None => WEB_PORTS.to_vec(),
        }
    }
    /// A name, not an address: pinned in the cage's hosts file.
    pub fn is_name(&self) -> bool {
        self.host.parse::<IpAddr>().is_err()
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(p) => write!(f, "{host}:{p}"),
            None => write!(f, "{host}"),
        }
    }
}

impl fmt::Display for NetPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetPolicy::Open => write!(f, "open"),
            NetPolicy::Internet => write!(f, "internet"),
            NetPolicy::Allow(list) => {
                let words: Vec<String> = list.iter().map(Entry::to_string).collect();
                write!(f, "allow:{}", words.join(","))
            }
        }
    }
}

impl From<NetPolicy> for String {
    fn from(p: NetPolicy) -> String {
        p.to_string()
    }
}

impl TryFrom<String> for NetPolicy {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        NetPolicy::read(&s)
    }
}

/// How to write a policy, for refusals.
pub const SYNTAX: &str = "give open, internet, or allow: followed by names and addresses with \
                          or without a port, separated by commas \
                          (allow:example.org,api.example.com:8443,203.0.113.7:22,[2001:db8::1]:443)";

impl NetPolicy {
    /// Read a policy as `--net`, a body's `net` and the config's `net`
    /// give it: a refusal names the field `net`.
    pub fn parse(text: &str) -> Result<NetPolicy> {
        NetPolicy::read(text).map_err(|why| Error::bad_field("net", why))
    }

    /// Read a policy, or say why not (in words that name no field: the
    /// config's reader names its key itself).
    fn read(text: &str) -> std::result::Result<NetPolicy, String> {
        let t = text.trim();
        match t {
            "open" => return Ok(NetPolicy::Open),
            "internet" => return Ok(NetPolicy::Internet),
            _ => {}
        }
        let Some(list) = t.strip_prefix("allow:") else {
            return Err(format!("{t:?} is not a network policy; {SYNTAX}"));
        };
        let mut entries = BTreeSet::new();
        for word in list.split(',').map(str::trim) {
            if word.is_empty() {
                continue;
            }
            entries.insert(parse_entry(word)?);
        }
        if entries.is_empty() {
            return Err(format!("allow: names nothing; {SYNTAX}"));
        }
        if entries.len() > MAX_ENTRIES {
            return Err(format!(
                "{} entries, more than {MAX_ENTRIES}; name fewer",
                entries.len()
            ));
        }
        Ok(NetPolicy::Allow(entries.into_iter().collect()))
    }

    /// Its kind in one word: open, internet or allow.
    pub fn kind(&self) -> &'static str {
        match self {
            NetPolicy::Open => "open",
            NetPolicy::Internet => "internet",
            NetPolicy::Allow(_) => "allow",
        }
    }
}

fn parse_entry(word: &str) -> std::result::Result<Entry, String> {
    let bad = |why: &str| format!("{word:?} in the allow-list {why}; {SYNTAX}");
    let (host, port) = if let Some(rest) = word.strip_prefix('[') {
        let (addr, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("opens a [ it does not close"))?;
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad("is not an IPv6 address in brackets"));
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| bad("has text after ]"))?),
        };
        (addr.to_string(), port)
    } else if word.parse::<std::net::Ipv6Addr>().is_ok() {
        (word.to_string(), None)
    } else {
        match word.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (word.to_string(), None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(bad("has a port that is not a number from 1 to 65535")),
        },
    };
    let host = host.to_ascii_lowercase();
    if host.parse::<IpAddr>().is_err() && !is_host_name(&host) {
        return Err(bad("is neither an address nor a host name"));
    }
    Ok(Entry { host, port })
}

/// Pure: letters, digits, `-` and `_` in labels of 1 to 63, dots between,
/// at most 253 in all, not all digits (that would be an address).
fn is_host_name(h: &str) -> bool {
    let h = h.strip_suffix('.').unwrap_or(h);
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        && !h.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// An allow-list as the rules need it: each address with its ports, and
/// the names with their addresses, for the cage's hosts file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// (address, port), sorted, without repeats.
    pub targets: Vec<(IpAddr, u16)>,
    /// (name, its addresses) for each name that resolved.
    pub names: Vec<(String, Vec<IpAddr>)>,
    /// The names that did not resolve: reachable by no address.
    pub unresolved: Vec<String>,
}

/// Resolve an allow-list on the machine: addresses as they are, names
/// through [`HOSTS_ENV`]'s file if there is one, then the machine's
/// resolver (getaddrinfo(3): /etc/hosts, then DNS, as nsswitch.conf(5)
/// says).
pub fn resolve(entries: &[Entry], hosts_file: Option<&std::path::Path>) -> Resolved {
    let extra = hosts_file
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    resolve_with(entries, &|name| {
        let pinned = hosts_lookup(&extra, name);
        if !pinned.is_empty() {
            return pinned;
        }
        let mut found: Vec<IpAddr> = (name, 0)
            .to_socket_addrs()
            .map(|a| a.map(|s| s.ip()).collect())
            .unwrap_or_default();
        found.sort();
        found.dedup();
        found
    })
}

/// Pure: [`resolve`] with its lookup given.
pub fn resolve_with(entries: &[Entry], lookup: &dyn Fn(&str) -> Vec<IpAddr>) -> Resolved {
    let mut targets = BTreeSet::new();
    let mut names: Vec<(String, Vec<IpAddr>)> = Vec::new();
    let mut unresolved = Vec::new();
    for e in entries {
        let addrs = match e.host.parse::<IpAddr>() {
            Ok(a) => vec![a],
            Err(_) => match names.iter().find(|(n, _)| *n == e.host) {
                Some((_, a)) => a.clone(),
                None => {
                    let a = lookup(&e.host);
                    if a.is_empty() {
                        if !unresolved.contains(&e.host) {
                            unresolved.push(e.host.clone());
                        }
                        continue;
                    }
                    names.push((e.host.clone(), a.clone()));
                    a
                }
            },
        };
        for a in addrs {
            // An IPv4-mapped answer goes out as the IPv4 address it is.
            let a = match a {
                IpAddr::V6(v6) => v6
                    .to_ipv4_mapped()
                    .map(IpAddr::V4)
                    .unwrap_or(IpAddr::V6(v6)),
                v4 => v4,
            };
            for p in e.ports() {
                targets.insert((a, p));
            }
        }
    }
    Resolved {
        targets: targets.into_iter().collect(),
        names,
        unresolved,
    }
}

/// Pure: the addresses `/etc/hosts`-format text gives a name.
pub fn hosts_lookup(text: &str, name: &str) -> Vec<IpAddr> {
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(addr) = words.next().and_then(|a| a.parse::<IpAddr>().ok()) else {
            continue;
        };
        if words.any(|w| w.eq_ignore_ascii_case(name)) && !found.contains(&addr) {
            found.push(addr);
        }
    }
    found
}

/// Refuse a policy that cannot be enforced now: an allow-list name the
/// machine cannot resolve would be reachable by nothing, which is not what
/// was asked.
pub fn check_enforceable(policy: &NetPolicy, hosts_file: Option<&std::path::Path>) -> Result<()> {
    let NetPolicy::Allow(entries) = policy else {
        return Ok(());
    };
    let r = resolve(entries, hosts_file);
    if !r.unresolved.is_empty() {
        return Err(Error::bad_field(
            "net",
            format!(
                "this machine cannot resolve {} of the allow-list, so the cage could reach {} \
                 by no address; check the spelling, or give the address itself \
                 (allow:203.0.113.7:443)",
                r.unresolved.join(", "),
                if r.unresolved.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            ),
        ));
    }
    Ok(())
}

/// The lines that mark the names the tool pins in a cage's hosts file.
pub const PIN_BEGIN: &str = "# shrooms-agent network policy: names pinned by the tool";
pub const PIN_END: &str = "# end of the names pinned by shrooms-agent";

/// Pure: a cage's hosts file with the pinned names of its policy in place
/// of any earlier ones (none for `open` and `internet`).
pub fn pin_hosts(current: &str, names: &[(String, Vec<IpAddr>)]) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in current.lines() {
        if line == PIN_BEGIN {
            inside = true;
            continue;
        }
        if inside {
            if line == PIN_END {
                inside = false;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if !names.is_empty() {
        out.push_str(PIN_BEGIN);
        out.push('\n');
        for (name, addrs) in names {
            for a in addrs {
                out.push_str(&format!("{a}\t{name}\n"));
            }
        }
        out.push_str(PIN_END);
        out.push('\n');
    }
    out
}

/// Pure: the resolvers a cage under `internet` may ask: the machine's own
/// (its resolv.conf, loopback ones left out: a cage cannot reach those),
/// and the forwarder its network gives it (`spec::Network::dns_forwarder`).
/// Read from the machine, never from the cage, whose resolv.conf it can
/// write.
pub fn internet_resolvers(resolv_conf: &str, forwarder: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in resolv_conf.lines() {
        let mut w = line.split_whitespace();
        if w.next() != Some("nameserver") {
            continue;
        }
        let Some(addr) = w.next().and_then(|a| a.parse::<IpAddr>().ok()) else {
            continue;
        };
        if addr.is_loopback() {
            continue;
        }
        let a = addr.to_string();
        if !out.contains(&a) {
            out.push(a);
        }
    }
    if let Some(f) = forwarder
        && !out.iter().any(|a| a == f)
    {
        out.push(f.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(host: &str, port: Option<u16>) -> Entry {
        Entry {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn policies_read_and_write_back() {
        assert_eq!(NetPolicy::parse("open").unwrap(), NetPolicy::Open);
        assert_eq!(NetPolicy::parse(" internet ").unwrap(), NetPolicy::Internet);
        let p = NetPolicy::parse(
            "allow:Example.org, api.example.com:8443,203.0.113.7:22,[2001:db8::1]:443,2001:db8::2",
        )
        .unwrap();
        assert_eq!(
            p,
            NetPolicy::Allow(vec![
                e("2001:db8::1", Some(443)),
                e("2001:db8::2", None),
                e("203.0.113.7", Some(22)),
                e("api.example.com", Some(8443)),
                e("example.org", None),
            ])
        );
        let text = p.to_string();
        assert_eq!(
            text,
            "allow:[2001:db8::1]:443,[2001:db8::2],203.0.113.7:22,api.example.com:8443,example.org"
        );
        assert_eq!(NetPolicy::parse(&text).unwrap(), p);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<NetPolicy>(&json).unwrap(), p);
        for bad in [
            "",
            "closed",
            "allow:",
            "allow:,",
            "allow:a.org:0",
            "allow:a.org:65536",
            "allow:a.org:x",
            "allow:[::1",
            "allow:[nothost]:1",
            "allow:a b",
            "allow:-a.org",
            "allow:1.2.3",
            "allow:a..org",
            "allow:http://a.org",
        ] {
            let err = NetPolicy::parse(bad).unwrap_err();
            assert_eq!(err.kind, crate::error::Kind::BadInput, "{bad}");
            assert!(err.message.starts_with("--net: "), "{}", err.message);
        }
        assert!(serde_json::from_str::<NetPolicy>("\"closed\"").is_err());
    }

    #[test]
    fn an_allow_list_resolves_to_addresses_and_ports() {
        let lookup = |n: &str| -> Vec<IpAddr> {
            match n {
                "a.test" => vec![
                    "203.0.113.7".parse().unwrap(),
                    "fd77:77::1".parse().unwrap(),
                ],
                "m.test" => vec!["::ffff:203.0.113.8".parse().unwrap()],
                _ => vec![],
            }
        };
        let r = resolve_with(
            &[
                e("a.test", None),
                e("a.test", Some(22)),
                e("m.test", Some(1)),
                e("gone.test", Some(1)),
                e("198.51.100.9", Some(5)),
            ],
            &lookup,
        );
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            r.targets,
            vec![
                (ip("198.51.100.9"), 5),
                (ip("203.0.113.7"), 22),
                (ip("203.0.113.7"), 80),
                (ip("203.0.113.7"), 443),
                (ip("203.0.113.8"), 1),
                (ip("fd77:77::1"), 22),
                (ip("fd77:77::1"), 80),
                (ip("fd77:77::1"), 443),
            ]
        );
        assert_eq!(r.names.len(), 2);
        assert_eq!(r.unresolved, vec!["gone.test".to_string()]);
    }

    #[test]
    fn hosts_files_read() {
        let text = "127.0.0.1 localhost\n# 1.2.3.4 a.test\n203.0.113.7 a.test b.test # x\n\
                    bad a.test\nfd77:77::1\tA.TEST\n";
        assert_eq!(
            hosts_lookup(text, "a.test"),
            vec![
                "203.0.113.7".parse::<IpAddr>().unwrap(),
                "fd77:77::1".parse().unwrap()
            ]
        );
        assert!(hosts_lookup(text, "c.test").is_empty());
    }

    #[test]
    fn pinned_names_replace_the_earlier_ones() {
        let podman = "127.0.0.1 localhost\n10.88.0.5 shrooms-x\n";
        let names = vec![("a.test".to_string(), vec!["203.0.113.7".parse().unwrap()])];
        let once = pin_hosts(podman, &names);
        assert_eq!(
            once,
            format!("{podman}{PIN_BEGIN}\n203.0.113.7\ta.test\n{PIN_END}\n")
        );
        assert_eq!(pin_hosts(&once, &names), once);
        assert_eq!(pin_hosts(&once, &[]), podman);
    }

    #[test]
    fn internet_resolvers_are_the_machines_and_the_forwarder() {
        let conf = "# x\nnameserver 10.255.255.53\nnameserver 127.0.0.53\nnameserver ::1\n\
                    nameserver 2001:db8::53\nsearch lan\n";
        assert_eq!(
            internet_resolvers(conf, None),
            ["10.255.255.53", "2001:db8::53"]
        );
        assert_eq!(
            internet_resolvers(conf, Some("10.0.2.3")),
            ["10.255.255.53", "2001:db8::53", "10.0.2.3"]
        );
        assert_eq!(internet_resolvers("", Some("169.254.1.1")), ["169.254.1.1"]);
    }
}
