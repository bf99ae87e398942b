//! Whose process is at the other end of a TCP connection from this
//! machine: the kernel's socket tables (`/proc/net/tcp` and
//! `/proc/net/tcp6`, proc(5)) list every socket of this network namespace
//! with its owner's uid. The peer's socket is the one whose local address
//! is the peer's and whose remote address is ours.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The uid owning the socket `peer` connected to `ours`, from the tables
/// as the kernel writes them; None when no line is that socket.
pub fn uid_of(tables: &[&str], peer: SocketAddr, ours: SocketAddr) -> Option<u32> {
    let peer = canonical(peer);
    let ours = canonical(ours);
    tables
        .iter()
        .flat_map(|t| t.lines().skip(1))
        .filter_map(parse_line)
        .find(|(local, remote, _)| canonical(*local) == peer && canonical(*remote) == ours)
        .map(|(_, _, uid)| uid)
}

/// Read the tables now and find the peer's uid.
pub fn uid_of_peer(peer: SocketAddr, ours: SocketAddr) -> Option<u32> {
    let v4 = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let v6 = std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default();
    uid_of(&[&v4, &v6], peer, ours)
}

/// `sl local_address rem_address st tx:rx tr:when retrnsmt uid ...`.
fn parse_line(line: &str) -> Option<(SocketAddr, SocketAddr, u32)> {
    let mut fields = line.split_whitespace();
    let _sl = fields.next()?;
    let local = address(fields.next()?)?;
    let remote = address(fields.next()?)?;
    let uid = fields.nth(4)?.parse().ok()?;
    Some((local, remote, uid))
}

/// `0100007F:1F90`: the address as the kernel's 32-bit words in this
/// machine's byte order, each printed as hex; the port in plain hex.
fn address(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(ip.get(i * 8..i * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// `[::ffff:127.0.0.1]:80` is `127.0.0.1:80`.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(super::canonical(a.ip()), a.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as a little-endian kernel writes them (the tests of the
    // addresses' words assume this machine is one, as x86 and arm64 are).
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1CDB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1CDB 0100007F:A0B2 01 00000000:00000000 00:00000000 00000000     0        0 31338 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:A0B2 0100007F:1CDB 01 00000000:00000000 00:00000000 00000000  1001        0 31339 1 0000000000000000 20 4 30 10 -1
   3: 0200007F:A0B3 0100007F:1CDB 01 00000000:00000000 00:00000000 00000000  1002        0 31340 1 0000000000000000 20 4 30 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1CDB 00000000000000000000000001000000:B000 01 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 20 4 30 10 -1
   1: 00000000000000000000000001000000:B000 00000000000000000000000001000000:1CDB 01 00000000:00000000 00:00000000 00000000  1003        0 4243 1 0000000000000000 20 4 30 10 -1
   2: 0000000000000000FFFF00000100007F:B001 0000000000000000FFFF00000100007F:1CDB 01 00000000:00000000 00:00000000 00000000  1004        0 4244 1 0000000000000000 20 4 30 10 -1
";

    fn at(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_peer_is_the_socket_whose_ends_are_swapped() {
        if cfg!(target_endian = "big") {
            return;
        }
        let ours = at("127.0.0.1:7387");
        // Not our own end of that connection (uid 0), but the peer's.
        assert_eq!(uid_of(&[TCP], at("127.0.0.1:41138"), ours), Some(1001));
        assert_eq!(uid_of(&[TCP], at("127.0.0.2:41139"), ours), Some(1002));
        // A port nobody has, or another server's connection: nobody.
        assert_eq!(uid_of(&[TCP], at("127.0.0.1:41140"), ours), None);
        assert_eq!(
            uid_of(&[TCP], at("127.0.0.1:41138"), at("127.0.0.1:7388")),
            None
        );
        // IPv6, and a v4 peer of a v6 socket written as a mapped address.
        assert_eq!(
            uid_of(&[TCP, TCP6], at("[::1]:45056"), at("[::1]:7387")),
            Some(1003)
        );
        assert_eq!(
            uid_of(&[TCP, TCP6], at("127.0.0.1:45057"), ours),
            Some(1004)
        );
        assert_eq!(
            uid_of(&[TCP, TCP6], at("[::ffff:127.0.0.1]:45057"), ours),
            Some(1004)
        );
    }

    #[test]
    fn lines_that_are_not_sockets_are_skipped() {
        let ours = at("127.0.0.1:7387");
        for bad in [
            "header\n",
            "header\n 0: junk\n",
            "header\n 0: 0100007F:ZZZZ 0100007F:1CDB 01 0:0 0:0 0 1001\n",
            "header\n 0: 0100007:A0B2 0100007F:1CDB 01 0:0 0:0 0 1001\n",
            "header\n 0: 0100007F:A0B2 0100007F:1CDB 01 0:0 0:0 0\n",
            "",
        ] {
            assert_eq!(uid_of(&[bad], at("127.0.0.1:41138"), ours), None, "{bad:?}");
        }
    }
}
