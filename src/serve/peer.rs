//! Whose process is at the other end of a TCP connection from this
//! machine. The kernel is asked about that one socket, by its four
//! addresses and ports, with sock_diag (sock_diag(7), the `inet_diag`
//! request `ss` and identd daemons make): the client's socket is the one
//! whose local end is the client's address and whose remote end is ours.
//! Where a netlink socket cannot be opened, the socket tables
//! `/proc/net/tcp` and `/proc/net/tcp6` (proc(5)) are read instead.
//!
//! Only a live socket answers for a user. A client that sent its request
//! and closed at once has left an orphan or a TIME_WAIT mini-socket, which
//! the kernel lists with uid 0 and inode 0 whoever made it: taken at its
//! word, it would pass for root. So a socket that is not there, has no
//! inode, or is not ESTABLISHED is refused, and so is an answer that names
//! more than one socket.
//!
//! A process of serve's own user may still speak for someone else: the
//! network helper of a rootless container (slirp4netns with
//! `allow_host_loopback`, pasta with `--map-gw`) connects to the host's
//! loopback on the container's behalf. [`network_helper`] finds the process
//! holding the client's socket among the user's processes that could be
//! such a helper.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::MetadataExt;

use netlink_packet_core::{NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
use netlink_packet_sock_diag::{
    SockDiagMessage,
    constants::{AF_INET, AF_INET6, IPPROTO_TCP},
    inet::{ExtensionFlags, InetRequest, SocketId, StateFlags},
};
use netlink_sys::{Socket, protocols::NETLINK_SOCK_DIAG};

/// TCP_ESTABLISHED, as the kernel numbers a socket's state (include/net/tcp_states.h).
const ESTABLISHED: u8 = 1;

/// One socket as the kernel describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub state: u8,
    pub uid: u32,
    pub inode: u64,
}

/// A live client socket's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    pub uid: u32,
    pub inode: u64,
}

/// The user of the client's socket, from what the kernel found for its
/// four addresses and ports; why not, when that does not name one live
/// socket.
pub fn decide(found: &[Seen]) -> Result<Local, &'static str> {
    match found {
        [] => Err("a socket the kernel does not know (it closed)"),
        [one] if one.inode == 0 => Err("a socket that closed (it has no inode)"),
        [one] if one.state != ESTABLISHED => Err("a socket that is closing"),
        [one] => Ok(Local {
            uid: one.uid,
            inode: one.inode,
        }),
        _ => Err("an address the kernel names several sockets for"),
    }
}

/// Asks the kernel; one per accepting loop (not shared between threads).
pub struct Lookup {
    /// None where a netlink socket could not be opened: then `/proc`.
    diag: Option<Socket>,
    seq: u32,
}

impl Lookup {
    pub fn new() -> Lookup {
        let diag = Socket::new(NETLINK_SOCK_DIAG).ok().and_then(|mut s| {
            s.bind_auto().ok()?;
            s.connect(&netlink_sys::SocketAddr::new(0, 0)).ok()?;
            // The kernel answers an exact request before send returns: a
            // read that would wait means no answer, not a slow one.
            s.set_non_blocking(true).ok()?;
            Some(s)
        });
        Lookup { diag, seq: 0 }
    }

    /// Whether the kernel is asked over netlink (else `/proc` is read).
    #[cfg(test)]
    pub fn netlink(&self) -> bool {
        self.diag.is_some()
    }

    /// The user of the socket `peer` connected to `ours` with.
    pub fn user(&mut self, peer: SocketAddr, ours: SocketAddr) -> Result<Local, &'static str> {
        let found = match &self.diag {
            Some(s) => {
                self.seq = self.seq.wrapping_add(1);
                ask(s, self.seq, peer, ours)
                    .map_err(|_| "a socket the kernel could not be asked about")?
            }
            None => {
                let v4 = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
                let v6 = std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default();
                in_tables(&[&v4, &v6], peer, ours)
            }
        };
        decide(&found)
    }
}

/// One exact `inet_diag` request: the socket whose source is `peer` and
/// whose destination is `ours`.
fn ask(s: &Socket, seq: u32, peer: SocketAddr, ours: SocketAddr) -> std::io::Result<Vec<Seen>> {
    let (peer, ours) = (canonical(peer), canonical(ours));
    s.send(&request(seq, peer, ours), 0)?;
    let mut found = Vec::new();
    let mut buf = vec![0u8; 8192];
    // Replies to earlier requests that were not read whole are skipped;
    // a few at most, never a wait.
    for _ in 0..8 {
        buf.clear();
        buf.resize(8192, 0);
        let n = s.recv(&mut &mut buf[..], 0)?;
        let mut at = 0;
        while at < n {
            let msg = <NetlinkMessage<SockDiagMessage>>::deserialize(&buf[at..n])
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let len = msg.header.length as usize;
            if msg.header.sequence_number == seq {
                match msg.payload {
                    NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                        let id = &r.header.socket_id;
                        let theirs = (
                            canonical(SocketAddr::new(id.source_address, id.source_port)),
                            canonical(SocketAddr::new(id.destination_address, id.destination_port)),
                        );
                        if theirs != (peer, ours) {
                            return Err(std::io::Error::other(
                                "the kernel answered for another socket",
                            ));
                        }
                        found.push(Seen {
                            state: r.header.state,
                            uid: r.header.uid,
                            inode: r.header.inode.into(),
                        });
                    }
                    NetlinkPayload::Error(e) if e.code.map(|c| -c.get()) == Some(libc::ENOENT) => {}
                    NetlinkPayload::Error(e) => return Err(e.to_io()),
                    _ => {}
                }
                // An exact request has one answer (or an error).
                return Ok(found);
            }
            if len == 0 {
                break;
            }
            at += len;
        }
    }
    Err(std::io::Error::other("no answer from the kernel"))
}

/// Pure: the request's bytes: the socket whose source is `peer` and whose
/// destination is `ours` (both canonical), numbered `seq`.
fn request(seq: u32, peer: SocketAddr, ours: SocketAddr) -> Vec<u8> {
    let family = match (peer.ip(), ours.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => AF_INET,
        _ => AF_INET6,
    };
    let v6 = |a: IpAddr| match a {
        IpAddr::V4(v4) if family == AF_INET6 => IpAddr::V6(v4.to_ipv6_mapped()),
        a => a,
    };
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST;
    header.sequence_number = seq;
    let mut packet = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::all(),
            socket_id: SocketId {
                source_port: peer.port(),
                destination_port: ours.port(),
                source_address: v6(peer.ip()),
                destination_address: v6(ours.ip()),
                interface_id: 0,
                // INET_DIAG_NOCOOKIE: any socket of these addresses.
                cookie: [0xff; 8],
            },
        })
        .into(),
    );
    packet.finalize();
    let mut out = vec![0u8; packet.buffer_len()];
    packet.serialize(&mut out);
    out
}

/// The sockets the tables list for `peer` connected to `ours`, as the
/// kernel writes them.
pub fn in_tables(tables: &[&str], peer: SocketAddr, ours: SocketAddr) -> Vec<Seen> {
    let peer = canonical(peer);
    let ours = canonical(ours);
    let mut found: Vec<Seen> = tables
        .iter()
        .flat_map(|t| t.lines().skip(1))
        .filter_map(parse_line)
        .filter(|(local, remote, _)| canonical(*local) == peer && canonical(*remote) == ours)
        .map(|(_, _, seen)| seen)
        .collect();
    // The tables are read in pieces while they change, and a socket can be
    // listed twice: the same line twice is one socket.
    found.sort_by_key(|s| (s.inode, s.uid, s.state));
    found.dedup();
    found
}

/// `sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...`.
fn parse_line(line: &str) -> Option<(SocketAddr, SocketAddr, Seen)> {
    let mut fields = line.split_whitespace();
    let _sl = fields.next()?;
    let local = address(fields.next()?)?;
    let remote = address(fields.next()?)?;
    let state = u8::from_str_radix(fields.next()?, 16).ok()?;
    let uid = fields.nth(3)?.parse().ok()?;
    let _timeout = fields.next()?;
    let inode = fields.next()?.parse().ok()?;
    Some((local, remote, Seen { state, uid, inode }))
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
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// The programs through which podman connects a rootless container to the
/// host: slirp4netns(1), pasta(1) (also installed as passt, and as
/// `*.avx2` builds), and podman's rootlessport.
const HELPERS: &[&str] = &[
    "slirp4netns",
    "pasta",
    "pasta.avx2",
    "passt",
    "passt.avx2",
    "rootlessport",
    "rootlessport-ch",
];

/// The name of the network helper holding the client socket `inode`, when
/// one does: among the processes of `uid`, those named as a helper or in
/// another user namespace than serve's (rootless podman runs its helpers
/// in its own), whichever of them has the socket open. Only those
/// processes' descriptors are read, so the cost stays with the number of
/// the user's processes and the helpers' few descriptors.
pub fn network_helper(inode: u64, uid: u32) -> Option<String> {
    let own_ns = std::fs::read_link("/proc/self/ns/user").ok();
    let target = format!("socket:[{inode}]");
    let procs = std::fs::read_dir("/proc").ok()?;
    for entry in procs.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if entry.metadata().map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let comm = comm.trim_end();
        let other_ns = std::fs::read_link(format!("/proc/{pid}/ns/user")).ok() != own_ns;
        if !HELPERS.contains(&comm) && !other_ns {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str()) {
                return Some(if comm.is_empty() {
                    format!("pid {pid}")
                } else {
                    comm.to_string()
                });
            }
        }
    }
    None
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
   4: 0100007F:A0B4 0100007F:1CDB 05 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
   5: 0100007F:A0B5 0100007F:1CDB 06 00000000:00000000 03:00000ED2 00000000     0        0 0 3 0000000000000000
   6: 0100007F:A0B6 0100007F:1CDB 07 00000000:00000000 00:00000000 00000000  1001        0 31341 1 0000000000000000 20 4 30 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1CDB 00000000000000000000000001000000:B000 01 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 20 4 30 10 -1
   1: 00000000000000000000000001000000:B000 00000000000000000000000001000000:1CDB 01 00000000:00000000 00:00000000 00000000  1003        0 4243 1 0000000000000000 20 4 30 10 -1
   2: 0000000000000000FFFF00000100007F:B001 0000000000000000FFFF00000100007F:1CDB 01 00000000:00000000 00:00000000 00000000  1004        0 4244 1 0000000000000000 20 4 30 10 -1
";

    fn at(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn uid_in(tables: &[&str], peer: &str, ours: &str) -> Result<u32, &'static str> {
        decide(&in_tables(tables, at(peer), at(ours))).map(|l| l.uid)
    }

    #[test]
    fn only_one_live_established_socket_names_a_user() {
        let live = Seen {
            state: ESTABLISHED,
            uid: 1001,
            inode: 7,
        };
        assert_eq!(
            decide(&[live]),
            Ok(Local {
                uid: 1001,
                inode: 7
            })
        );
        // Unknown: the kernel has no such socket.
        assert!(decide(&[]).is_err());
        // A socket closed by its owner: orphaned (FIN_WAIT2) or a
        // TIME_WAIT mini-socket, uid 0 and inode 0 whoever made it.
        for state in [5, 6] {
            assert!(
                decide(&[Seen {
                    state,
                    uid: 0,
                    inode: 0
                }])
                .is_err(),
                "{state}"
            );
        }
        // Inode 0 in an established state too.
        assert!(
            decide(&[Seen {
                inode: 0,
                uid: 0,
                ..live
            }])
            .is_err()
        );
        // Live but not established: half closed (FIN_WAIT1, FIN_WAIT2,
        // CLOSE_WAIT...), a listener, a connection not made yet.
        for state in 2..=11 {
            assert!(decide(&[Seen { state, ..live }]).is_err(), "{state}");
        }
        // Two sockets for one address: ambiguous.
        assert!(decide(&[live, live]).is_err());
        assert!(decide(&[live, Seen { uid: 0, ..live }]).is_err());
    }

    #[test]
    fn the_peer_is_the_socket_whose_ends_are_swapped() {
        if cfg!(target_endian = "big") {
            return;
        }
        let ours = "127.0.0.1:7387";
        // Not our own end of that connection (uid 0), but the peer's.
        assert_eq!(uid_in(&[TCP], "127.0.0.1:41138", ours), Ok(1001));
        assert_eq!(uid_in(&[TCP], "127.0.0.2:41139", ours), Ok(1002));
        assert_eq!(
            in_tables(&[TCP], at("127.0.0.1:41138"), at(ours)),
            vec![Seen {
                state: 1,
                uid: 1001,
                inode: 31339
            }]
        );
        // A port nobody has, or another server's connection: nobody.
        assert!(uid_in(&[TCP], "127.0.0.1:41140", ours).is_err());
        assert!(uid_in(&[TCP], "127.0.0.1:41138", "127.0.0.1:7388").is_err());
        // A client that closed first: FIN_WAIT2 and TIME_WAIT, listed as
        // uid 0 with inode 0, are not root's.
        assert!(uid_in(&[TCP], "127.0.0.1:41140", ours).is_err());
        assert!(uid_in(&[TCP], "127.0.0.1:41141", ours).is_err());
        // A live socket that is closing.
        assert!(uid_in(&[TCP], "127.0.0.1:41142", ours).is_err());
        // A line read twice (the tables changed while they were read) is
        // one socket.
        assert_eq!(uid_in(&[TCP, TCP], "127.0.0.1:41138", ours), Ok(1001));
        // IPv6, and a v4 peer of a v6 socket written as a mapped address.
        assert_eq!(uid_in(&[TCP, TCP6], "[::1]:45056", "[::1]:7387"), Ok(1003));
        assert_eq!(uid_in(&[TCP, TCP6], "127.0.0.1:45057", ours), Ok(1004));
        assert_eq!(
            uid_in(&[TCP, TCP6], "[::ffff:127.0.0.1]:45057", ours),
            Ok(1004)
        );
    }

    #[test]
    fn lines_that_are_not_sockets_are_skipped() {
        let ours = at("127.0.0.1:7387");
        for bad in [
            "header\n",
            "header\n 0: junk\n",
            "header\n 0: 0100007F:ZZZZ 0100007F:1CDB 01 0:0 0:0 0 1001 0 5\n",
            "header\n 0: 0100007:A0B2 0100007F:1CDB 01 0:0 0:0 0 1001 0 5\n",
            "header\n 0: 0100007F:A0B2 0100007F:1CDB 01 0:0 0:0 0\n",
            "header\n 0: 0100007F:A0B2 0100007F:1CDB 01 0:0 0:0 0 1001 0\n",
            "",
        ] {
            assert!(
                in_tables(&[bad], at("127.0.0.1:41138"), ours).is_empty(),
                "{bad:?}"
            );
        }
    }

    /// The kernel asked for real: this test's own connection is found,
    /// with this process's user, ESTABLISHED; once its client closed, it
    /// is not anyone's. Also the lookup's cost.
    #[test]
    fn the_kernel_names_a_live_connection_and_not_a_closed_one() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = l.local_addr().unwrap();
        let mut c = std::net::TcpStream::connect(ours).unwrap();
        let (_s, peer) = l.accept().unwrap();
        let me = crate::ops::euid();
        let mut lookup = Lookup::new();
        assert!(lookup.netlink(), "no netlink socket could be opened");
        let found = lookup.user(peer, ours).unwrap();
        assert_eq!(found.uid, me);
        assert_ne!(found.inode, 0);
        // The same from /proc.
        let mut procfs = Lookup { diag: None, seq: 0 };
        assert_eq!(procfs.user(peer, ours), Ok(found));
        // serve's own end is not the client's.
        assert_ne!(lookup.user(ours, peer).map(|l| l.inode), Ok(found.inode));
        let n = 2000;
        let start = std::time::Instant::now();
        for _ in 0..n {
            lookup.user(peer, ours).unwrap();
        }
        eprintln!("sock_diag lookup: {:?} each", start.elapsed() / n);
        let start = std::time::Instant::now();
        for _ in 0..200 {
            procfs.user(peer, ours).unwrap();
        }
        eprintln!("/proc lookup: {:?} each", start.elapsed() / 200);
        // This test's own socket is no network helper's; the search's cost.
        let start = std::time::Instant::now();
        assert_eq!(network_helper(found.inode, me), None);
        eprintln!("network helper search: {:?}", start.elapsed());
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        drop(c);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(lookup.user(peer, ours).is_err());
        assert!(procfs.user(peer, ours).is_err());
    }
}
