//! The nftables rules set inside a cage's network namespace from outside
//! (README, "What a cage is given": the agent port is closed inside every
//! cage, by a rule its root cannot remove). The text is a pure function; `netns`
//! loads it. The cage runs without NET_ADMIN, so root inside cannot change it.
//!
//! Each verdict is logged for the egress log (`egress::log_statement`): a
//! refusing rule logs each packet it refuses; what is let through is logged
//! once per connection (`ct state new`: each new flow for UDP and ICMP), by
//! a rule of its own before the verdict, as a match in the verdict's own
//! rule would keep it from applying to the rest of the connection.

use crate::egress::log_statement;

/// The table that closes the agent port. Its name says what it is.
pub const AGENT_PORT_TABLE: &str = "shrooms_agent_port";

/// A rule set that refuses TCP to the agent port on any address, with a
/// reset so a client fails at once instead of hanging, and logs every other
/// connection leaving the cage (its own loopback is not egress). Loading it replaces
/// an earlier copy atomically ("add table; delete table; define" in one
/// transaction), so it can be loaded after every start.
pub fn agent_port(port: u16) -> String {
    let refused = log_statement("agent-port", false);
    let open = log_statement("open", true);
    format!(
        "table inet {AGENT_PORT_TABLE}\n\
         delete table inet {AGENT_PORT_TABLE}\n\
         table inet {AGENT_PORT_TABLE} {{\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority 0; policy accept;\n\
         \t\ttcp dport {port} {refused} reject with tcp reset\n\
         \t\toif != \"lo\" ct state new {open}\n\
         \t}}\n\
         }}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_agent_port_rules() {
        assert_eq!(
            agent_port(7387),
            "table inet shrooms_agent_port\n\
             delete table inet shrooms_agent_port\n\
             table inet shrooms_agent_port {\n\
             \tchain output {\n\
             \t\ttype filter hook output priority 0; policy accept;\n\
             \t\ttcp dport 7387 log group 7 prefix \"shrooms:refuse:agent-port\" reject with tcp reset\n\
             \t\toif != \"lo\" ct state new log group 7 prefix \"shrooms:accept:open\"\n\
             \t}\n\
             }\n"
        );
    }
}

/// The table of a sealed cage. Its name says what it is.
pub const SEALED_TABLE: &str = "shrooms_sealed";
/// Kept in a sealed cage's record; raise it when the rules change.
pub const SEALED_VERSION: u32 = 1;

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

/// The same for IPv6; IPv4-mapped, NAT64 (64:ff9b::/96 translates to IPv4
/// on an IPv6-only network, the LAN's included), 6to4 and Teredo addresses
/// are refused so they cannot be used to reach the IPv4 ranges above, and
/// 200::/7 is the Yggdrasil mesh's.
pub const SEALED_REFUSED_V6: &[&str] = &[
    "::/128",
    "::1/128",
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

/// A sealed cage's rule set: its own loopback, DNS only to its resolvers,
/// the ICMPv6 that IPv6 needs, the agent port refused with a reset, every
/// local range refused, and the rest of the internet open. `local_v4` and
/// `local_v6` are the machine's own networks (`netif::local_prefixes`),
/// refused one rule each: they may overlap the fixed ranges, which one set
/// cannot hold. Replaces an earlier copy atomically, like `agent_port`.
pub fn sealed(
    agent_port: u16,
    resolvers: &[String],
    local_v4: &[String],
    local_v6: &[String],
) -> String {
    let v4 = SEALED_REFUSED_V4.join(", ");
    let v6 = SEALED_REFUSED_V6.join(", ");
    let (dns4, dns6): (Vec<&String>, Vec<&String>) =
        resolvers.iter().partition(|r| !r.contains(':'));
    let mut dns = String::new();
    let dns_log = log_statement("dns", true);
    for (family, list) in [("ip", dns4), ("ip6", dns6)] {
        if list.is_empty() {
            continue;
        }
        let list: Vec<&str> = list.iter().map(|s| s.as_str()).collect();
        let matches = format!(
            "{family} daddr {{ {} }} meta l4proto {{ tcp, udp }} th dport 53",
            list.join(", ")
        );
        dns.push_str(&format!(
            "\t\t{matches} ct state new {dns_log}\n\t\t{matches} accept\n"
        ));
    }
    let mut local = String::new();
    let machine = log_statement("machine", false);
    for p in local_v4 {
        local.push_str(&format!("\t\tip daddr {p} {machine} reject\n"));
    }
    for p in local_v6 {
        local.push_str(&format!("\t\tip6 daddr {p} {machine} reject\n"));
    }
    let other_dns = log_statement("other-dns", false);
    let agent = log_statement("agent-port", false);
    let ranges = log_statement("local-range", false);
    let internet = log_statement("internet", true);
    format!(
        "table inet {SEALED_TABLE}\n\
         delete table inet {SEALED_TABLE}\n\
         table inet {SEALED_TABLE} {{\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority 0; policy accept;\n\
         \t\toif \"lo\" accept\n\
         \t\ticmpv6 type {{ nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, packet-too-big }} accept\n\
         {dns}\
         \t\tmeta l4proto {{ tcp, udp }} th dport 53 {other_dns} reject\n\
         \t\ttcp dport {agent_port} {agent} reject with tcp reset\n\
         \t\tip daddr {{ {v4} }} {ranges} reject\n\
         \t\tip6 daddr {{ {v6} }} {ranges} reject\n\
         {local}\
         \t\tct state new {internet}\n\
         \t}}\n\
         }}\n"
    )
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
             \t\toif \"lo\" accept\n\
             \t\ticmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, packet-too-big } accept\n\
             \t\tip daddr { 1.1.1.1, 9.9.9.9 } meta l4proto { tcp, udp } th dport 53 ct state new log group 7 prefix \"shrooms:accept:dns\"\n\
             \t\tip daddr { 1.1.1.1, 9.9.9.9 } meta l4proto { tcp, udp } th dport 53 accept\n\
             \t\tmeta l4proto { tcp, udp } th dport 53 log group 7 prefix \"shrooms:refuse:other-dns\" reject\n\
             \t\ttcp dport 7387 log group 7 prefix \"shrooms:refuse:agent-port\" reject with tcp reset\n\
             \t\tip daddr { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/4, 240.0.0.0/4 } log group 7 prefix \"shrooms:refuse:local-range\" reject\n\
             \t\tip6 daddr { ::/128, ::1/128, ::ffff:0:0/96, 64:ff9b::/96, 64:ff9b:1::/48, 2001::/32, 2002::/16, 100::/64, 200::/7, fc00::/7, fe80::/10, fec0::/10, ff00::/8 } log group 7 prefix \"shrooms:refuse:local-range\" reject\n\
             \t\tip daddr 198.51.100.0/24 log group 7 prefix \"shrooms:refuse:machine\" reject\n\
             \t\tip6 daddr 2a02:1:2:3::/64 log group 7 prefix \"shrooms:refuse:machine\" reject\n\
             \t\tct state new log group 7 prefix \"shrooms:accept:internet\"\n\
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
        for r in ["::1/128", "fc00::/7", "fe80::/10", "ff00::/8"] {
            assert!(SEALED_REFUSED_V6.contains(&r), "{r}");
        }
    }

    #[test]
    fn ipv6_resolvers_get_their_own_line() {
        let text = sealed(1, &["2606:4700:4700::1111".into()], &[], &[]);
        assert!(text.contains(
            "ip6 daddr { 2606:4700:4700::1111 } meta l4proto { tcp, udp } th dport 53 accept\n"
        ));
        assert!(!text.contains("ip daddr {  }"));
    }
}
