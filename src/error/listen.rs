//! `serve --listen ADDR` refused: an address other machines reach, without
//! a token or on another port than the one every cage is closed to.

use std::net::SocketAddr;

/// Why serve does not listen at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenProblem {
    /// Reachable from other machines, and no `--token-file`.
    NoToken,
    /// Reachable from other machines on a port other than `agent_port`.
    NotAgentPort { agent_port: u16 },
}

impl ListenProblem {
    pub(super) fn words(&self, addr: &SocketAddr) -> String {
        match self {
            ListenProblem::NoToken => format!(
                "--listen {addr} is reachable from other machines: give --token-file FILE too, \
                 so that every request must carry that token"
            ),
            ListenProblem::NotAgentPort { agent_port } => format!(
                "--listen {addr}: {} is not the config's agent_port ({agent_port}), the one port \
                 every cage is closed to, so cages could reach this serve; listen on port \
                 {agent_port}, or set agent_port = {} in the config (a cage takes it at its next \
                 start)",
                addr.port(),
                addr.port()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each refusal in the words it had when it was made as a sentence
    /// where it was found.
    #[test]
    fn every_listen_refusal_is_worded_as_before() {
        let addr: SocketAddr = "192.0.2.1:8080".parse().unwrap();
        assert_eq!(
            Error::listen(addr, ListenProblem::NotAgentPort { agent_port: 47000 }).message(),
            "--listen 192.0.2.1:8080: 8080 is not the config's agent_port (47000), the one port \
             every cage is closed to, so cages could reach this serve; listen on port 47000, or \
             set agent_port = 8080 in the config (a cage takes it at its next start)"
        );
        let e = Error::listen(addr, ListenProblem::NoToken);
        assert_eq!(
            e.message(),
            "--listen 192.0.2.1:8080 is reachable from other machines: give --token-file FILE \
             too, so that every request must carry that token"
        );
        assert_eq!(e.kind.exit_code(), 2);
    }
}
