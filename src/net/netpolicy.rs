//! A cage's network policy (docs/network.md, "Network policy"): what it may reach,
//! kept in its record, enforced by the nftables rules loaded into its
//! network namespace from outside (`rules::policy`). The names of an
//! allow-list are resolved here, on the machine, at every load of the
//! rules; the cage gets the answers pinned in its hosts file and no DNS.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, ToSocketAddrs};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Ranges a sealed cage may not reach (the internet and nothing local: no
/// LAN, no mesh over IPv6 or IPv4, no link-local, on any port): private, carrier-grade NAT (also Tailscale's mesh), loopback
/// of the machine, link-local, multicast, benchmark and reserved ranges.
pub const SEALED_REFUSED_V4: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
];

/// The same for IPv6. The IPv6 forms of IPv4 addresses are refused whole,
/// so that none can reach the IPv4 ranges above: IPv4-compatible (`::/96`,
/// deprecated by RFC 4291 2.5.5.1, which a stack or a user-mode network
/// such as slirp4netns may still send out by the machine's IPv6 route; it
/// holds the unspecified `::` and loopback `::1` too), IPv4-mapped, NAT64
/// (64:ff9b::/96 and the local-use 64:ff9b:1::/48 of RFC 8215 translate to
/// IPv4 on an IPv6-only network, the LAN's included), 6to4 and Teredo; and
/// 200::/7 is the Yggdrasil mesh's.
pub const SEALED_REFUSED_V6: &[&str] = &[
    "::/96",
    "::ffff:0:0/96",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "2001::/32",
    "2002::/16",
    "100::/64",
    "200::/7",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
];

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

/// The names of an allow-list with the addresses each resolved to, for the
/// cage's hosts file.
pub type Pinned = Vec<(String, Vec<IpAddr>)>;

/// An allow-list as the rules need it: each address with its ports, and
/// the names with their addresses, for the cage's hosts file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// (address, port), sorted, without repeats.
    pub targets: Vec<(IpAddr, u16)>,
    /// (name, its addresses) for each name that resolved to an address
    /// it may open.
    pub names: Pinned,
    /// The names that did not resolve: reachable by no address.
    pub unresolved: Vec<String>,
    /// The answers left out: a name's address that is local (private,
    /// link-local, CGNAT, the machine's own...), which only the address
    /// written in the policy itself opens.
    pub local: Vec<LocalAnswer>,
}

/// A name's answer that is not opened, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalAnswer {
    pub name: String,
    pub address: IpAddr,
    /// What it is: "private", "link-local", "the machine's own network
    /// 198.51.100.0/24"...
    pub why: String,
}

impl fmt::Display for LocalAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} resolves to {} ({})",
            self.name, self.address, self.why
        )
    }
}

/// Resolve an allow-list on the machine: addresses as they are, names
/// through [`HOSTS_ENV`]'s file if there is one, then the machine's
/// resolver (getaddrinfo(3): /etc/hosts, then DNS, as nsswitch.conf(5)
/// says). A name's answers that are local ([`why_local`], with the
/// machine's own networks `machine_v4` and `machine_v6`) are left out: a
/// name someone else controls may be made to answer with the LAN (DNS
/// rebinding).
pub fn resolve(
    entries: &[Entry],
    hosts_file: Option<&std::path::Path>,
    machine_v4: &[String],
    machine_v6: &[String],
) -> Resolved {
    let extra = hosts_file
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let lookup = |name: &str| {
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
    };
    resolve_with(entries, &lookup, &|a| why_local(a, machine_v4, machine_v6))
}

/// Pure: [`resolve`] with its lookup and its judge of local answers given.
pub fn resolve_with(
    entries: &[Entry],
    lookup: &dyn Fn(&str) -> Vec<IpAddr>,
    local: &dyn Fn(IpAddr) -> Option<String>,
) -> Resolved {
    let mut targets = BTreeSet::new();
    let mut names: Pinned = Vec::new();
    let mut unresolved = Vec::new();
    let mut refused: Vec<LocalAnswer> = Vec::new();
    for e in entries {
        let addrs = match e.host.parse::<IpAddr>() {
            // Written as an address: opened as it is, local or not.
            Ok(a) => vec![a],
            Err(_) => match names.iter().find(|(n, _)| *n == e.host) {
                Some((_, a)) => a.clone(),
                None if unresolved.contains(&e.host)
                    || refused.iter().any(|l| l.name == e.host) =>
                {
                    continue;
                }
                None => {
                    let mut kept = Vec::new();
                    for a in lookup(&e.host) {
                        match local(a) {
                            Some(why) => refused.push(LocalAnswer {
                                name: e.host.clone(),
                                address: a,
                                why,
                            }),
                            None => kept.push(a),
                        }
                    }
                    if kept.is_empty() {
                        if !refused.iter().any(|l| l.name == e.host) {
                            unresolved.push(e.host.clone());
                        }
                        continue;
                    }
                    names.push((e.host.clone(), kept.clone()));
                    kept
                }
            },
        };
        for a in addrs {
            // An IPv4-mapped answer goes out as the IPv4 address it is.
            let a = a.to_canonical();
            for p in e.ports() {
                targets.insert((a, p));
            }
        }
    }
    Resolved {
        targets: targets.into_iter().collect(),
        names,
        unresolved,
        local: refused,
    }
}

/// Pure: why an address is local, the way the `internet` policy refuses it
/// (`SEALED_REFUSED_V4` and `_V6`, and the machine's own networks
/// `machine_v4`, `machine_v6` as `network/length`); None for an address of
/// the internet. IPv4-mapped addresses are judged as the IPv4 address
/// they are; the other IPv6 forms of IPv4 (IPv4-compatible, NAT64, 6to4,
/// Teredo) are refused whole, whatever IPv4 address is inside.
pub fn why_local(a: IpAddr, machine_v4: &[String], machine_v6: &[String]) -> Option<String> {
    let a = a.to_canonical();
    let named = match a {
        IpAddr::V4(v4) => {
            if v4.is_private() {
                Some("private")
            } else if v4.is_loopback() {
                Some("loopback")
            } else if v4.is_link_local() {
                Some("link-local")
            } else if in_prefix(a, "100.64.0.0/10") {
                Some("carrier-grade NAT")
            } else if v4.is_multicast() {
                Some("multicast")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_loopback() || v6.is_unspecified() {
                Some("loopback")
            } else if in_prefix(a, "fc00::/7") {
                Some("private")
            } else if in_prefix(a, "fe80::/10") {
                Some("link-local")
            } else if v6.is_multicast() {
                Some("multicast")
            } else if [
                "::/96",
                "64:ff9b::/96",
                "64:ff9b:1::/48",
                "2002::/16",
                "2001::/32",
            ]
            .iter()
            .any(|p| in_prefix(a, p))
            {
                Some("an IPv6 form of an IPv4 address")
            } else {
                None
            }
        }
    };
    if let Some(why) = named {
        return Some(why.to_string());
    }
    let fixed = match a {
        IpAddr::V4(_) => SEALED_REFUSED_V4,
        IpAddr::V6(_) => SEALED_REFUSED_V6,
    };
    if fixed.iter().any(|p| in_prefix(a, p)) {
        return Some("reserved".into());
    }
    let own = if a.is_ipv4() { machine_v4 } else { machine_v6 };
    own.iter()
        .find(|p| in_prefix(a, p))
        .map(|p| format!("the machine's own network {p}"))
}

/// Pure: is the address in `network/length` (a prefix of its own family)?
pub fn in_prefix(a: IpAddr, prefix: &str) -> bool {
    let Some((net, len)) = prefix.split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(len)) = (net.parse::<IpAddr>(), len.parse::<u32>()) else {
        return false;
    };
    match (a, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if len <= 32 => {
            let m = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            u32::from(a) & m == u32::from(n) & m
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if len <= 128 => {
            let m = u128::MAX.checked_shl(128 - len).unwrap_or(0);
            u128::from(a) & m == u128::from(n) & m
        }
        _ => false,
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
/// was asked; one that resolves to a local address (private, link-local,
/// CGNAT, the machine's own: [`why_local`]) would not be opened there,
/// which is not what was asked either, and says the name is not what it
/// seems. `machine` reads the machine's own networks (`netif`).
pub fn check_enforceable(
    policy: &NetPolicy,
    hosts_file: Option<&std::path::Path>,
    machine: &dyn Fn() -> Result<(Vec<String>, Vec<String>)>,
) -> Result<()> {
    let NetPolicy::Allow(entries) = policy else {
        return Ok(());
    };
    if !entries.iter().any(Entry::is_name) {
        return Ok(());
    }
    let (v4, v6) = machine()?;
    let r = resolve(entries, hosts_file, &v4, &v6);
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
    if !r.local.is_empty() {
        let said: Vec<String> = r.local.iter().map(LocalAnswer::to_string).collect();
        return Err(Error::bad_field(
            "net",
            format!(
                "{}: a name of an allow-list never opens a local address (its answers can be \
                 changed by whoever runs its DNS); give the address itself to allow it \
                 (allow:{})",
                said.join("; "),
                Entry {
                    host: r.local[0].address.to_string(),
                    port: entries
                        .iter()
                        .find(|e| e.host == r.local[0].name)
                        .and_then(|e| e.port)
                        .or(Some(443)),
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
            assert!(err.message().starts_with("--net: "), "{}", err.message());
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
            &|_| None,
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
    fn a_names_local_answers_are_left_out_and_said() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let lookup = |n: &str| -> Vec<IpAddr> {
            let a: &[&str] = match n {
                "lan.test" => &["192.168.1.10"],
                "mixed.test" => &["203.0.113.7", "10.1.2.3", "fd00::5"],
                "meta.test" => &["169.254.169.254"],
                "cgnat.test" => &["100.100.100.100"],
                "own.test" => &["198.51.100.9"],
                "mapped.test" => &["::ffff:10.0.0.1"],
                "compat.test" => &["::10.0.0.1"],
                "nat64.test" => &["64:ff9b::a00:1"],
                "loop.test" => &["127.0.0.1", "::1"],
                _ => &[],
            };
            a.iter().map(|s| ip(s)).collect()
        };
        let machine = (vec!["198.51.100.0/24".to_string()], vec![]);
        let judge = |a: IpAddr| why_local(a, &machine.0, &machine.1);
        let entries = [
            e("lan.test", Some(22)),
            e("mixed.test", None),
            e("meta.test", Some(80)),
            e("cgnat.test", Some(1)),
            e("own.test", Some(1)),
            e("mapped.test", Some(1)),
            e("compat.test", Some(1)),
            e("nat64.test", Some(1)),
            e("loop.test", Some(1)),
            // Written as addresses: opened as they are.
            e("192.168.1.10", Some(8080)),
            e("198.51.100.9", Some(2)),
        ];
        let r = resolve_with(&entries, &lookup, &judge);
        assert_eq!(
            r.targets,
            vec![
                (ip("192.168.1.10"), 8080),
                (ip("198.51.100.9"), 2),
                (ip("203.0.113.7"), 80),
                (ip("203.0.113.7"), 443),
            ]
        );
        assert_eq!(
            r.names,
            vec![("mixed.test".into(), vec![ip("203.0.113.7")])]
        );
        assert!(r.unresolved.is_empty(), "{:?}", r.unresolved);
        let said: Vec<String> = r.local.iter().map(|l| l.to_string()).collect();
        assert_eq!(
            said,
            [
                "lan.test resolves to 192.168.1.10 (private)",
                "mixed.test resolves to 10.1.2.3 (private)",
                "mixed.test resolves to fd00::5 (private)",
                "meta.test resolves to 169.254.169.254 (link-local)",
                "cgnat.test resolves to 100.100.100.100 (carrier-grade NAT)",
                "own.test resolves to 198.51.100.9 (the machine's own network 198.51.100.0/24)",
                "mapped.test resolves to ::ffff:10.0.0.1 (private)",
                "compat.test resolves to ::a00:1 (an IPv6 form of an IPv4 address)",
                "nat64.test resolves to 64:ff9b::a00:1 (an IPv6 form of an IPv4 address)",
                "loop.test resolves to 127.0.0.1 (loopback)",
                "loop.test resolves to ::1 (loopback)",
            ]
        );
    }

    #[test]
    fn what_is_local() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let none: &[String] = &[];
        for a in [
            "203.0.113.7",
            "2001:db8::1",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(why_local(ip(a), none, none), None, "{a}");
        }
        for (a, why) in [
            ("0.1.2.3", "reserved"),
            ("198.18.0.1", "reserved"),
            ("240.0.0.1", "reserved"),
            ("224.0.0.1", "multicast"),
            ("ff02::1", "multicast"),
            ("fe80::1", "link-local"),
            ("2002:a00:1::", "an IPv6 form of an IPv4 address"),
            ("200::1", "reserved"),
            ("::", "loopback"),
        ] {
            assert_eq!(why_local(ip(a), none, none).as_deref(), Some(why), "{a}");
        }
        // Every fixed range refused under `internet` is local here too.
        for p in SEALED_REFUSED_V4.iter().chain(SEALED_REFUSED_V6) {
            let net = ip(p.split('/').next().unwrap());
            assert!(why_local(net, none, none).is_some(), "{p}");
        }
        assert!(in_prefix(ip("10.9.9.9"), "10.0.0.0/8"));
        assert!(!in_prefix(ip("11.0.0.0"), "10.0.0.0/8"));
        assert!(!in_prefix(ip("::a00:1"), "10.0.0.0/8"));
        assert!(in_prefix(ip("1.2.3.4"), "0.0.0.0/0"));
        assert!(!in_prefix(ip("1.2.3.4"), "1.2.3.4/33"));
        assert!(!in_prefix(ip("1.2.3.4"), "nonsense"));
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
