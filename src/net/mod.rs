//! The network: the policy a cage's traffic obeys, its nftables rules and
//! their loading into the cage's namespace, the machine's own networks, and
//! the egress log.

pub mod egress;
pub mod netif;
pub mod netns;
pub mod netpolicy;
pub mod rules;
