//! The nftables rules set inside a cage's network namespace from outside
//! (seed: "The agent port is closed inside every cage, by a rule its root
//! cannot remove"). The text is a pure function; `podman::Podman::set_rules`
//! loads it. The cage runs without NET_ADMIN, so root inside cannot change it.

/// The table that closes the agent port. Its name says what it is.
pub const AGENT_PORT_TABLE: &str = "shrooms_agent_port";

/// A rule set that refuses TCP to the agent port on any address, with a
/// reset so a client fails at once instead of hanging. Loading it replaces
/// an earlier copy atomically ("add table; delete table; define" in one
/// transaction), so it can be loaded after every start.
pub fn agent_port(port: u16) -> String {
    format!(
        "table inet {AGENT_PORT_TABLE}\n\
         delete table inet {AGENT_PORT_TABLE}\n\
         table inet {AGENT_PORT_TABLE} {{\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority 0; policy accept;\n\
         \t\ttcp dport {port} reject with tcp reset\n\
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
             \t\ttcp dport 7387 reject with tcp reset\n\
             \t}\n\
             }\n"
        );
    }
}
