//! The nftables rules set inside a cage's network namespace from outside
//! (docs/cages.md, "What a cage is given": the agent port is closed inside every
//! cage, by a rule its root cannot remove). The text is a pure function; `netns`
//! loads it. The cage runs without NET_ADMIN, so root inside cannot change it.
//!
//! Each verdict is logged for the egress log (`egress::log_statement`), in
//! [`verdict`]: a refusing rule logs each packet it refuses; what is let
//! through is logged once per connection (`ct state new`: each new flow for
//! UDP and ICMP), by a rule of its own before the verdict, as a match in the
//! verdict's own rule would keep it from applying to the rest of the
//! connection. The cage's own loopback (the model gateway) and IPv6's
//! neighbour discovery are not egress, and are not logged. Every cage's
//! first table is the egress log's gate ([`egress_gate`]): its network is
//! cut while the log cannot be written.

use crate::net::egress::log_statement;

/// The table that closes the agent port. Its name says what it is.
pub const AGENT_PORT_TABLE: &str = "shrooms_agent_port";

/// A rule set that refuses TCP to the agent port on any address, with a
/// reset so a client fails at once instead of hanging; with `log_open` (a
/// cage under the `open` policy, whose policy table has no verdicts to log),
/// it also logs every other connection leaving the cage as `open`. Loading
/// it replaces an earlier copy atomically ("add table; delete table;
/// define" in one transaction), so it can be loaded after every start.
///
/// `host_loopback`, under `open`: the address the cage's network helper
/// keeps for the machine's loopback and never lets through
/// (`Network::host_loopback`), refused here at once as `host-loopback`,
/// so that the log says what happens to such a connection rather than
/// `open`, let through, for a packet the helper then drops.
pub fn agent_port(port: u16, log_open: bool, host_loopback: Option<&str>) -> String {
    let mut rule = verdict("agent-port", Verdict::Reset, &format!("tcp dport {port}"));
    if log_open {
        if let Some(addr) = host_loopback {
            rule.push_str(&verdict(
                "host-loopback",
                Verdict::Refuse,
                &format!("ip daddr {addr}"),
            ));
        }
        rule.push_str(&format!(
            "\t\toif != \"lo\" ct state new {}\n",
            log_statement("open", true)
        ));
    }
    format!(
        "table inet {AGENT_PORT_TABLE}\n\
         delete table inet {AGENT_PORT_TABLE}\n\
         table inet {AGENT_PORT_TABLE} {{\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority 0; policy accept;\n\
         {rule}\
         \t}}\n\
         }}\n"
    )
}

/// What a rule does with what it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    /// Refused: an ICMP error (TCP: connection refused) or, on the output
    /// hook, the sending call itself failing (EPERM).
    Refuse,
    /// Refused with a TCP reset, so a client fails at once.
    Reset,
}

/// Every rule that decides for a cage's outgoing packets, in one place:
/// `matcher` (empty: everything) and the verdict, named by `rule` in the
/// rule's comment (`nft list ruleset` shows it). The names are stable:
/// `loopback`, `ndp`, `dns`, `agent-port`, `host-loopback`, `private`,
/// `machine`, `allow-list`, `default`; a statement that should see every verdict (a
/// log) goes here.
pub fn verdict(rule: &str, v: Verdict, matcher: &str) -> String {
    let what = match v {
        Verdict::Accept => "accept",
        Verdict::Refuse => "reject",
        Verdict::Reset => "reject with tcp reset",
    };
    let sep = if matcher.is_empty() { "" } else { " " };
    let rule_line = |log: &str| format!("\t\t{matcher}{sep}{log}{what} comment \"{rule}\"\n");
    match v {
        _ if NOT_EGRESS.contains(&rule) => rule_line(""),
        Verdict::Accept => format!(
            "\t\t{matcher}{sep}ct state new {}\n{}",
            log_statement(rule, true),
            rule_line("")
        ),
        Verdict::Refuse | Verdict::Reset => rule_line(&format!("{} ", log_statement(rule, false))),
    }
}

/// Rules not logged: those whose packets do not leave the cage, and the
/// egress log's own gate (its refusals are what the log cannot take).
const NOT_EGRESS: [&str; 3] = ["loopback", "ndp", "egress-log"];

// The gate's table and set are the egress log's listener's (`egress`),
// which keeps the set's element.
pub use crate::net::egress::{EGRESS_SET, EGRESS_TABLE};

/// The egress log's gate: every packet that leaves the cage is refused
/// unless the set `alive` holds the mark it carries, 0 (a cage has no
/// NET_ADMIN, so no socket of its can set another). The listener keeps
/// that element in the set, with a timeout of a few seconds it renews
/// while it can write the log; when it cannot write, it takes the element
/// out, and when it dies, the element times out: either way the cage's
/// network is cut until the log is written again. Loaded before the
/// policy (priority -10), so that a packet refused here is neither logged
/// nor judged. Loading it again keeps the set and its element (only the
/// chain's rules are replaced), so a running cage's listener is not cut
/// off by a change of its rules.
pub fn egress_gate() -> String {
    // TCP is answered with a reset: the ICMP error of a plain reject is
    // rate-limited by the kernel (icmp_ratelimit, ip-sysctl), so that a
    // client trying again at once would wait for its SYN's retransmission.
    let cut = format!("meta mark != @{EGRESS_SET}");
    let rules = verdict("loopback", Verdict::Accept, "oif \"lo\"")
        + &verdict(
            "egress-log",
            Verdict::Reset,
            &format!("meta l4proto tcp {cut}"),
        )
        + &verdict("egress-log", Verdict::Refuse, &cut);
    format!(
        "table inet {EGRESS_TABLE} {{\n\
         \tset {EGRESS_SET} {{\n\
         \t\ttype mark\n\
         \t\tflags timeout\n\
         \t}}\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority -10; policy accept;\n\
         \t}}\n\
         }}\n\
         flush chain inet {EGRESS_TABLE} output\n\
         table inet {EGRESS_TABLE} {{\n\
         \tchain output {{\n\
         {rules}\
         \t}}\n\
         }}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_egress_gate() {
        assert_eq!(
            egress_gate(),
            "table inet shrooms_egress {\n\
             \tset alive {\n\
             \t\ttype mark\n\
             \t\tflags timeout\n\
             \t}\n\
             \tchain output {\n\
             \t\ttype filter hook output priority -10; policy accept;\n\
             \t}\n\
             }\n\
             flush chain inet shrooms_egress output\n\
             table inet shrooms_egress {\n\
             \tchain output {\n\
             \t\toif \"lo\" accept comment \"loopback\"\n\
             \t\tmeta l4proto tcp meta mark != @alive reject with tcp reset comment \"egress-log\"\n\
             \t\tmeta mark != @alive reject comment \"egress-log\"\n\
             \t}\n\
             }\n"
        );
    }

    #[test]
    fn golden_agent_port_rules() {
        assert_eq!(
            agent_port(7387, false, Some("10.0.2.2")),
            "table inet shrooms_agent_port\n\
             delete table inet shrooms_agent_port\n\
             table inet shrooms_agent_port {\n\
             \tchain output {\n\
             \t\ttype filter hook output priority 0; policy accept;\n\
             \t\ttcp dport 7387 log group 7 prefix \"shrooms:refuse:agent-port\" reject with tcp reset comment \"agent-port\"\n\
             \t}\n\
             }\n"
        );
        // Under `open`, every other connection out is logged as such.
        assert_eq!(
            agent_port(7387, true, None),
            "table inet shrooms_agent_port\n\
             delete table inet shrooms_agent_port\n\
             table inet shrooms_agent_port {\n\
             \tchain output {\n\
             \t\ttype filter hook output priority 0; policy accept;\n\
             \t\ttcp dport 7387 log group 7 prefix \"shrooms:refuse:agent-port\" reject with tcp reset comment \"agent-port\"\n\
             \t\toif != \"lo\" ct state new log group 7 prefix \"shrooms:accept:open\"\n\
             \t}\n\
             }\n"
        );
        // On slirp4netns, its address for the machine's loopback is
        // refused first, and logged so.
        assert_eq!(
            agent_port(7387, true, Some("10.0.2.2")),
            "table inet shrooms_agent_port\n\
             delete table inet shrooms_agent_port\n\
             table inet shrooms_agent_port {\n\
             \tchain output {\n\
             \t\ttype filter hook output priority 0; policy accept;\n\
             \t\ttcp dport 7387 log group 7 prefix \"shrooms:refuse:agent-port\" reject with tcp reset comment \"agent-port\"\n\
             \t\tip daddr 10.0.2.2 log group 7 prefix \"shrooms:refuse:host-loopback\" reject comment \"host-loopback\"\n\
             \t\toif != \"lo\" ct state new log group 7 prefix \"shrooms:accept:open\"\n\
             \t}\n\
             }\n"
        );
    }
}

/// The table of a sealed cage. Its name says what it is.
pub const SEALED_TABLE: &str = "shrooms_sealed";
/// Kept in a sealed cage's record; raise it when the rules change.
pub const SEALED_VERSION: u32 = 3;

// The ranges a sealed cage may not reach are the policy's (`netpolicy`),
// which the allow-list's answers are checked against too.
pub use crate::net::netpolicy::{SEALED_REFUSED_V4, SEALED_REFUSED_V6};

/// A sealed cage's rule set: the `internet` policy's rules
/// ([`internet_rules`]) with the agent port refused in its own table's
/// place. Replaces an earlier copy atomically, like `agent_port`.
pub fn sealed(
    agent_port: u16,
    resolvers: &[String],
    local_v4: &[String],
    local_v6: &[String],
) -> String {
    let rules = internet_rules(Some(agent_port), resolvers, local_v4, local_v6);
    table(SEALED_TABLE, &rules)
}

/// The `internet` policy, and a sealed cage's: its own loopback (where the
/// model gateway listens), the ICMPv6 that IPv6 needs, DNS only to
/// `resolvers`, the agent port refused with a reset (when given: a sealed
/// cage's one table), every local range refused, the rest of the internet
/// open. `local_v4` and `local_v6` are the machine's own networks
/// (`netif::local_prefixes`), refused one rule each: they may overlap the
/// fixed ranges, which one set cannot hold.
fn internet_rules(
    agent_port: Option<u16>,
    resolvers: &[String],
    local_v4: &[String],
    local_v6: &[String],
) -> String {
    let v4 = SEALED_REFUSED_V4.join(", ");
    let v6 = SEALED_REFUSED_V6.join(", ");
    let (dns4, dns6): (Vec<&String>, Vec<&String>) =
        resolvers.iter().partition(|r| !r.contains(':'));
    let mut r = first_rules();
    for (family, list) in [("ip", dns4), ("ip6", dns6)] {
        if !list.is_empty() {
            let list: Vec<&str> = list.iter().map(|s| s.as_str()).collect();
            r.push_str(&verdict(
                "dns",
                Verdict::Accept,
                &format!(
                    "{family} daddr {{ {} }} meta l4proto {{ tcp, udp }} th dport 53",
                    list.join(", ")
                ),
            ));
        }
    }
    r.push_str(&verdict("dns", Verdict::Refuse, DNS_MATCH));
    if let Some(port) = agent_port {
        r.push_str(&verdict(
            "agent-port",
            Verdict::Reset,
            &format!("tcp dport {port}"),
        ));
    }
    r.push_str(&verdict(
        "private",
        Verdict::Refuse,
        &format!("ip daddr {{ {v4} }}"),
    ));
    r.push_str(&verdict(
        "private",
        Verdict::Refuse,
        &format!("ip6 daddr {{ {v6} }}"),
    ));
    for p in local_v4 {
        r.push_str(&verdict(
            "machine",
            Verdict::Refuse,
            &format!("ip daddr {p}"),
        ));
    }
    for p in local_v6 {
        r.push_str(&verdict(
            "machine",
            Verdict::Refuse,
            &format!("ip6 daddr {p}"),
        ));
    }
    r.push_str(&verdict("default", Verdict::Accept, ""));
    r
}

/// DNS, on either transport.
const DNS_MATCH: &str = "meta l4proto { tcp, udp } th dport 53";

/// The rules every policy but `open` begins with: the cage's own loopback
/// (where the model gateway listens: `gateway::open`), and the ICMPv6 that
/// IPv6 needs to find its neighbours and router.
fn first_rules() -> String {
    let mut r = verdict("loopback", Verdict::Accept, "oif \"lo\"");
    r.push_str(&verdict(
        "ndp",
        Verdict::Accept,
        "icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, \
         nd-neighbor-advert, packet-too-big }",
    ));
    r
}

/// A table of one output chain holding `rules`, replacing an earlier copy
/// atomically ("add table; delete table; define" in one transaction).
fn table(name: &str, rules: &str) -> String {
    format!(
        "table inet {name}\n\
         delete table inet {name}\n\
         table inet {name} {{\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority 0; policy accept;\n\
         {rules}\
         \t}}\n\
         }}\n"
    )
}

/// The table of an ordinary cage's network policy (docs/network.md, "Network
/// policy"); beside the agent port's, which every cage has. A packet must
/// pass both: a refusal in either is final (nft(8), "Chains").
pub const POLICY_TABLE: &str = "shrooms_net";

/// A policy as the rules need it, its names resolved and the machine's
/// networks read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyRules {
    Open,
    Internet {
        resolvers: Vec<String>,
        local_v4: Vec<String>,
        local_v6: Vec<String>,
    },
    /// Each address with a port it may be reached on over TCP.
    Allow(Vec<(std::net::IpAddr, u16)>),
}

/// An ordinary cage's policy table: none for `open` (an earlier one is
/// deleted), else the rules of its policy. An allow-list accepts TCP to
/// its addresses and ports only, and refuses the rest, DNS included (the
/// names are pinned in the cage's hosts file instead).
pub fn policy(p: &PolicyRules) -> String {
    let rules = match p {
        PolicyRules::Open => {
            return format!("table inet {POLICY_TABLE}\ndelete table inet {POLICY_TABLE}\n");
        }
        PolicyRules::Internet {
            resolvers,
            local_v4,
            local_v6,
        } => internet_rules(None, resolvers, local_v4, local_v6),
        PolicyRules::Allow(targets) => {
            let mut r = first_rules();
            let (v4, v6): (Vec<_>, Vec<_>) = targets.iter().partition(|(a, _)| a.is_ipv4());
            for (family, list) in [("ip", v4), ("ip6", v6)] {
                if list.is_empty() {
                    continue;
                }
                let set: Vec<String> = list.iter().map(|(a, p)| format!("{a} . {p}")).collect();
                r.push_str(&verdict(
                    "allow-list",
                    Verdict::Accept,
                    &format!("{family} daddr . tcp dport {{ {} }}", set.join(", ")),
                ));
            }
            r.push_str(&verdict("dns", Verdict::Refuse, DNS_MATCH));
            r.push_str(&verdict("default", Verdict::Refuse, ""));
            r
        }
    };
    table(POLICY_TABLE, &rules)
}

#[cfg(test)]
mod sealed_tests {
    use super::*;

    #[test]
    fn golden_sealed_rules() {
        let text = sealed(
            7387,
            &["1.1.1.1".into(), "9.9.9.9".into()],
            &["198.51.100.0/24".into()],
            &["2a02:1:2:3::/64".into()],
        );
        assert_eq!(
            text,
            "table inet shrooms_sealed\n\
             delete table inet shrooms_sealed\n\
             table inet shrooms_sealed {\n\
             \tchain output {\n\
             \t\ttype filter hook output priority 0; policy accept;\n\
             \t\toif \"lo\" accept comment \"loopback\"\n\
             \t\ticmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, packet-too-big } accept comment \"ndp\"\n\
             \t\tip daddr { 1.1.1.1, 9.9.9.9 } meta l4proto { tcp, udp } th dport 53 ct state new log group 7 prefix \"shrooms:accept:dns\"\n\t\tip daddr { 1.1.1.1, 9.9.9.9 } meta l4proto { tcp, udp } th dport 53 accept comment \"dns\"\n\
             \t\tmeta l4proto { tcp, udp } th dport 53 log group 7 prefix \"shrooms:refuse:dns\" reject comment \"dns\"\n\
             \t\ttcp dport 7387 log group 7 prefix \"shrooms:refuse:agent-port\" reject with tcp reset comment \"agent-port\"\n\
             \t\tip daddr { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/4, 240.0.0.0/4 } log group 7 prefix \"shrooms:refuse:private\" reject comment \"private\"\n\
             \t\tip6 daddr { ::/96, ::ffff:0:0/96, 64:ff9b::/96, 64:ff9b:1::/48, 2001::/32, 2002::/16, 100::/64, 200::/7, fc00::/7, fe80::/10, fec0::/10, ff00::/8 } log group 7 prefix \"shrooms:refuse:private\" reject comment \"private\"\n\
             \t\tip daddr 198.51.100.0/24 log group 7 prefix \"shrooms:refuse:machine\" reject comment \"machine\"\n\
             \t\tip6 daddr 2a02:1:2:3::/64 log group 7 prefix \"shrooms:refuse:machine\" reject comment \"machine\"\n\
             \t\tct state new log group 7 prefix \"shrooms:accept:default\"\n\t\taccept comment \"default\"\n\
             \t}\n\
             }\n"
        );
    }

    #[test]
    fn every_sealed_range_is_refused() {
        for r in [
            "0.0.0.0/8",
            "10.0.0.0/8",
            "100.64.0.0/10",
            "127.0.0.0/8",
            "169.254.0.0/16",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "198.18.0.0/15",
            "224.0.0.0/4",
            "240.0.0.0/4",
        ] {
            assert!(SEALED_REFUSED_V4.contains(&r), "{r}");
        }
        for r in [
            "::/96",
            "::ffff:0:0/96",
            "64:ff9b::/96",
            "64:ff9b:1::/48",
            "fc00::/7",
            "fe80::/10",
            "ff00::/8",
        ] {
            assert!(SEALED_REFUSED_V6.contains(&r), "{r}");
        }
    }

    #[test]
    fn ipv6_resolvers_get_their_own_line() {
        let text = sealed(1, &["2606:4700:4700::1111".into()], &[], &[]);
        assert!(text.contains(
            "ip6 daddr { 2606:4700:4700::1111 } meta l4proto { tcp, udp } th dport 53 accept"
        ));
        assert!(!text.contains("ip daddr {  }"));
    }
}

#[cfg(test)]
mod policy_tests {
    use super::*;

    /// How every policy table but `open`'s begins.
    const HEAD: &str = "table inet shrooms_net\n\
         delete table inet shrooms_net\n\
         table inet shrooms_net {\n\
         \tchain output {\n\
         \t\ttype filter hook output priority 0; policy accept;\n\
         \t\toif \"lo\" accept comment \"loopback\"\n\
         \t\ticmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, \
         nd-neighbor-advert, packet-too-big } accept comment \"ndp\"\n";

    #[test]
    fn golden_open_policy_rules() {
        assert_eq!(
            policy(&PolicyRules::Open),
            "table inet shrooms_net\ndelete table inet shrooms_net\n"
        );
    }

    #[test]
    fn golden_internet_policy_rules() {
        let text = policy(&PolicyRules::Internet {
            resolvers: vec!["10.255.255.53".into(), "10.0.2.3".into()],
            local_v4: vec!["198.51.100.0/24".into()],
            local_v6: vec![],
        });
        assert_eq!(
            text,
            HEAD.to_string()
                + "\t\tip daddr { 10.255.255.53, 10.0.2.3 } meta l4proto { tcp, udp } th dport 53 ct state new log group 7 prefix \"shrooms:accept:dns\"\n\t\tip daddr { 10.255.255.53, 10.0.2.3 } meta l4proto { tcp, udp } th dport 53 accept comment \"dns\"\n\
             \t\tmeta l4proto { tcp, udp } th dport 53 log group 7 prefix \"shrooms:refuse:dns\" reject comment \"dns\"\n\
             \t\tip daddr { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/4, 240.0.0.0/4 } log group 7 prefix \"shrooms:refuse:private\" reject comment \"private\"\n\
             \t\tip6 daddr { ::/96, ::ffff:0:0/96, 64:ff9b::/96, 64:ff9b:1::/48, 2001::/32, 2002::/16, 100::/64, 200::/7, fc00::/7, fe80::/10, fec0::/10, ff00::/8 } log group 7 prefix \"shrooms:refuse:private\" reject comment \"private\"\n\
             \t\tip daddr 198.51.100.0/24 log group 7 prefix \"shrooms:refuse:machine\" reject comment \"machine\"\n\
             \t\tct state new log group 7 prefix \"shrooms:accept:default\"\n\t\taccept comment \"default\"\n\
             \t}\n\
             }\n"
        );
        // No resolver: DNS refused everywhere, and no empty set.
        let none = policy(&PolicyRules::Internet {
            resolvers: vec![],
            local_v4: vec![],
            local_v6: vec![],
        });
        assert!(!none.contains("{  }"), "{none}");
        assert!(!none.contains("dport 53 accept"), "{none}");
    }

    #[test]
    fn golden_allow_list_policy_rules() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        let text = policy(&PolicyRules::Allow(vec![
            (ip("203.0.113.7"), 443),
            (ip("203.0.113.7"), 8080),
            (ip("fd77:77::1"), 443),
        ]));
        assert_eq!(
            text,
            HEAD.to_string()
                + "\t\tip daddr . tcp dport { 203.0.113.7 . 443, 203.0.113.7 . 8080 } ct state new log group 7 prefix \"shrooms:accept:allow-list\"\n\t\tip daddr . tcp dport { 203.0.113.7 . 443, 203.0.113.7 . 8080 } accept comment \"allow-list\"\n\
             \t\tip6 daddr . tcp dport { fd77:77::1 . 443 } ct state new log group 7 prefix \"shrooms:accept:allow-list\"\n\t\tip6 daddr . tcp dport { fd77:77::1 . 443 } accept comment \"allow-list\"\n\
             \t\tmeta l4proto { tcp, udp } th dport 53 log group 7 prefix \"shrooms:refuse:dns\" reject comment \"dns\"\n\
             \t\tlog group 7 prefix \"shrooms:refuse:default\" reject comment \"default\"\n\
             \t}\n\
             }\n"
        );
        // Nothing resolved: everything but loopback refused.
        let none = policy(&PolicyRules::Allow(vec![]));
        assert!(!none.contains("allow-list"), "{none}");
        assert!(none.contains("reject comment \"default\""), "{none}");
    }

    #[test]
    fn every_verdict_is_named() {
        assert_eq!(
            verdict("dns", Verdict::Refuse, "udp dport 53"),
            "\t\tudp dport 53 log group 7 prefix \"shrooms:refuse:dns\" reject comment \"dns\"\n"
        );
        assert_eq!(
            verdict("default", Verdict::Accept, ""),
            "\t\tct state new log group 7 prefix \"shrooms:accept:default\"\n\t\taccept comment \"default\"\n"
        );
    }
}
