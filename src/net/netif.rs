//! The machine's own networks, read from its interfaces (getifaddrs), so a
//! sealed cage can be kept from them: "the internet and nothing local" must
//! hold where the LAN and this machine have global addresses too (a home
//! network's IPv6 /64, a VPS's public /24), which no fixed list of private
//! ranges covers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The machine's own networks (IPv4, IPv6) as `network/length`, without
/// repeats: the prefix of every address on a non-loopback interface, and
/// every route of every routing table but the default ones, since a
/// network can be local without an address of its own in it: the LAN's
/// prefix when the address is a DHCPv6 /128, the networks behind a VPN,
/// which WireGuard's wg-quick and Tailscale put in tables of their own
/// (51820, 52) that `/proc/net/route` (the main table) does not show.
/// Loopback interfaces are left out: their addresses are this machine's own
/// loopback, refused already (and the tests' stand-in for the internet sits
/// there). An error when the routes cannot be read: the rules are then not
/// made, rather than made without them.
pub fn local_prefixes() -> crate::error::Result<(Vec<String>, Vec<String>)> {
    let (mut v4, mut v6) = interface_prefixes();
    let routes = read_routes().map_err(|e| {
        crate::error::Error::act("reading the machine's routing tables (rtnetlink)", &e)
    })?;
    let (r4, r6) = route_prefixes(&routes);
    for (list, more) in [(&mut v4, r4), (&mut v6, r6)] {
        for p in more {
            if !list.contains(&p) {
                list.push(p);
            }
        }
    }
    Ok((v4, v6))
}

/// One route, as the `machine` rule needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The destination's network and prefix length.
    pub dest: IpAddr,
    pub len: u8,
    /// The table it is in (RTA_TABLE, else the header's).
    pub table: u32,
    /// An ordinary route (RTN_UNICAST): not a local, broadcast, multicast,
    /// blackhole, unreachable, prohibit or throw one.
    pub unicast: bool,
    /// Its output interface, if it names one.
    pub oif: Option<u32>,
}

/// The interface index of loopback in every network namespace
/// (`LOOPBACK_IFINDEX` in the kernel's include/linux/netdevice.h).
const LOOPBACK_IFINDEX: u32 = 1;

/// Every route of every table of the machine's network namespace, IPv4 and
/// IPv6: one RTM_GETROUTE dump with no table named, which the kernel
/// answers with all of them (rtnetlink(7)).
fn read_routes() -> std::io::Result<Vec<Route>> {
    use netlink_packet_core::{NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage};
    use netlink_packet_route::{RouteNetlinkMessage, route::RouteMessage};
    use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    rustix::net::sockopt::set_socket_timeout(
        &socket,
        rustix::net::sockopt::Timeout::Recv,
        Some(std::time::Duration::from_secs(5)),
    )?;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut ask = NetlinkMessage::new(
        header,
        RouteNetlinkMessage::GetRoute(RouteMessage::default()).into(),
    );
    ask.finalize();
    let mut out = vec![0u8; ask.buffer_len()];
    ask.serialize(&mut out);
    socket.send(&out, 0)?;
    let mut routes = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = socket.recv(&mut &mut buf[..], 0)?;
        match parse_route_dump(&buf[..n], &mut routes) {
            Dump::More => continue,
            Dump::Done => return Ok(routes),
            Dump::Failed(why) => return Err(std::io::Error::other(why)),
        }
    }
}

/// Where a piece of a route dump leaves it.
#[derive(Debug, PartialEq, Eq)]
pub enum Dump {
    More,
    Done,
    Failed(String),
}

/// Pure: the routes of one read of an RTM_GETROUTE dump (netlink messages
/// one after the other), added to `routes`; whether the dump goes on, ended,
/// or failed (the kernel's error, or bytes that are no route message).
pub fn parse_route_dump(bytes: &[u8], routes: &mut Vec<Route>) -> Dump {
    use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteType};

    let mut at = 0;
    while at < bytes.len() {
        let m = match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&bytes[at..]) {
            Ok(m) => m,
            Err(e) => return Dump::Failed(format!("an answer that does not read: {e}")),
        };
        let len = m.header.length as usize;
        match m.payload {
            NetlinkPayload::Done(_) => return Dump::Done,
            NetlinkPayload::Error(e) => {
                return Dump::Failed(match e.code {
                    Some(_) => e.to_io().to_string(),
                    None => "an acknowledgement instead of routes".into(),
                });
            }
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(r)) => {
                let mut dest = None;
                let mut table = u32::from(r.header.table);
                let mut oif = None;
                for a in &r.attributes {
                    match a {
                        RouteAttribute::Destination(RouteAddress::Inet(v4)) => {
                            dest = Some(IpAddr::V4(*v4))
                        }
                        RouteAttribute::Destination(RouteAddress::Inet6(v6)) => {
                            dest = Some(IpAddr::V6(*v6))
                        }
                        RouteAttribute::Table(t) => table = *t,
                        RouteAttribute::Oif(i) => oif = Some(*i),
                        _ => {}
                    }
                }
                // No destination attribute: the default route (0/0) of its family.
                let dest = dest.or(match u8::from(r.header.address_family) {
                    f if i32::from(f) == libc::AF_INET => Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                    f if i32::from(f) == libc::AF_INET6 => Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
                    _ => None,
                });
                if let Some(dest) = dest {
                    routes.push(Route {
                        dest,
                        len: r.header.destination_prefix_length,
                        table,
                        unicast: r.header.kind == RouteType::Unicast,
                        oif,
                    });
                }
            }
            _ => {}
        }
        if len == 0 {
            return Dump::Failed("a message of length 0".into());
        }
        at += len;
    }
    Dump::More
}

/// Pure: the routes as prefixes, leaving out default routes, routes on
/// loopback, every route that is not an ordinary one (local, broadcast,
/// blackhole, unreachable...: the local table's, and rejecting ones),
/// multicast and link-local, which the fixed lists refuse already, and
/// routes wider than /8 (IPv4) or /16 (IPv6): those are the internet sent
/// another way, not a network of the machine's (OpenVPN's `redirect-gateway
/// def1` routes 0.0.0.0/1 and 128.0.0.0/1, and ::/3, 2000::/4 and 3000::/4,
/// through the tunnel).
pub fn route_prefixes(routes: &[Route]) -> (Vec<String>, Vec<String>) {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for r in routes {
        if !r.unicast || r.oif == Some(LOOPBACK_IFINDEX) || r.dest.is_multicast() {
            continue;
        }
        let (list, mask) = match r.dest {
            IpAddr::V4(_) => {
                if !(8..=32).contains(&r.len) {
                    continue;
                }
                let m = u32::MAX.checked_shl(32 - u32::from(r.len)).unwrap_or(0);
                (&mut v4, IpAddr::V4(Ipv4Addr::from(m)))
            }
            IpAddr::V6(d) => {
                if !(16..=128).contains(&r.len) || d.segments()[0] & 0xffc0 == 0xfe80 {
                    continue;
                }
                let m = u128::MAX.checked_shl(128 - u32::from(r.len)).unwrap_or(0);
                (&mut v6, IpAddr::V6(Ipv6Addr::from(m)))
            }
        };
        if let Some(p) = prefix(r.dest, mask)
            && !list.contains(&p)
        {
            list.push(p);
        }
    }
    (v4, v6)
}

/// The prefixes of every address on a non-loopback interface.
fn interface_prefixes() -> (Vec<String>, Vec<String>) {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return (v4, v6);
    }
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_flags & (libc::IFF_LOOPBACK as u32) != 0 {
            continue;
        }
        // SAFETY: the address and netmask pointers are null or point to a
        // sockaddr of the family the address says.
        let (addr, mask) = unsafe { (sockaddr_ip(ifa.ifa_addr), sockaddr_ip(ifa.ifa_netmask)) };
        let (Some(addr), Some(mask)) = (addr, mask) else {
            continue;
        };
        let Some(p) = prefix(addr, mask) else {
            continue;
        };
        let list = if addr.is_ipv4() { &mut v4 } else { &mut v6 };
        if !list.contains(&p) {
            list.push(p);
        }
    }
    // SAFETY: the list came from getifaddrs.
    unsafe { libc::freeifaddrs(list) };
    (v4, v6)
}

/// # Safety
/// `sa` must be null or point to a valid sockaddr.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: the caller's promise; the family says which struct it is.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let sin = &*(sa as *const libc::sockaddr_in);
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                    sin.sin_addr.s_addr,
                ))))
            }
            libc::AF_INET6 => {
                let sin6 = &*(sa as *const libc::sockaddr_in6);
                Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
            }
            _ => None,
        }
    }
}

/// Pure: `network/length` of an address and its netmask.
pub fn prefix(addr: IpAddr, mask: IpAddr) -> Option<String> {
    match (addr, mask) {
        (IpAddr::V4(a), IpAddr::V4(m)) => {
            let m = u32::from(m);
            Some(format!(
                "{}/{}",
                Ipv4Addr::from(u32::from(a) & m),
                m.count_ones()
            ))
        }
        (IpAddr::V6(a), IpAddr::V6(m)) => {
            let m = u128::from(m);
            Some(format!(
                "{}/{}",
                Ipv6Addr::from(u128::from(a) & m),
                m.count_ones()
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        let p = |a: &str, m: &str| prefix(a.parse().unwrap(), m.parse().unwrap()).unwrap();
        assert_eq!(p("192.168.1.23", "255.255.255.0"), "192.168.1.0/24");
        assert_eq!(p("198.51.100.7", "255.255.255.255"), "198.51.100.7/32");
        assert_eq!(
            p("2a02:1:2:3:4:5:6:7", "ffff:ffff:ffff:ffff::"),
            "2a02:1:2:3::/64"
        );
        assert_eq!(
            prefix("1.2.3.4".parse().unwrap(), "::".parse().unwrap()),
            None
        );
    }

    fn route(dest: &str, len: u8, table: u32, unicast: bool, oif: Option<u32>) -> Route {
        Route {
            dest: dest.parse().unwrap(),
            len,
            table,
            unicast,
            oif,
        }
    }

    #[test]
    fn routes_of_every_table_but_the_default_ones() {
        // Read off a machine: a default route, its LAN, a VPN's network in
        // the main table and WireGuard's and Tailscale's in tables of their
        // own (with their default routes), a blackhole, the local table's
        // routes, lo's, and OpenVPN's def1 halves of the internet (not the
        // machine's).
        let routes = [
            route("0.0.0.0", 0, 254, true, Some(2)),
            route("192.0.2.0", 24, 254, true, Some(2)),
            route("45.25.0.0", 16, 254, true, Some(3)),
            route("0.0.0.0", 0, 51820, true, Some(4)),
            route("198.51.100.0", 24, 51820, true, Some(4)),
            route("100.100.100.100", 32, 52, true, Some(5)),
            route("203.0.112.0", 23, 52, true, Some(5)),
            route("0.0.0.0", 1, 254, true, Some(6)),
            route("128.0.0.0", 1, 254, true, Some(6)),
            route("5.0.0.0", 8, 254, false, None),
            route("127.0.0.0", 8, 255, false, Some(1)),
            route("192.0.2.7", 32, 255, false, Some(2)),
            route("203.0.113.0", 24, 254, true, Some(1)),
            route("2001:db8:1::", 64, 254, true, Some(2)),
            route("fe80::", 64, 254, true, Some(2)),
            route("::", 0, 254, true, Some(2)),
            route("::", 3, 254, true, Some(6)),
            route("2000::", 4, 254, true, Some(6)),
            route("2001:db8:2::5", 128, 254, true, Some(2)),
            route("fd7a:115c:a1e0::", 48, 52, true, Some(5)),
            route("::1", 128, 255, false, Some(1)),
            route("ff00::", 8, 255, false, Some(2)),
        ];
        let (r4, r6) = route_prefixes(&routes);
        assert_eq!(
            r4,
            vec![
                "192.0.2.0/24",
                "45.25.0.0/16",
                "198.51.100.0/24",
                "100.100.100.100/32",
                "203.0.112.0/23"
            ]
        );
        assert_eq!(
            r6,
            vec![
                "2001:db8:1::/64",
                "2001:db8:2::5/128",
                "fd7a:115c:a1e0::/48"
            ]
        );
    }

    /// An RTM_NEWROUTE message as the kernel sends it in a dump.
    fn new_route(family: u8, len: u8, table: u8, kind: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = vec![family, len, 0, 0, table, 3, 0, kind, 0, 0, 0, 0];
        for (t, v) in attrs {
            let l = 4 + v.len();
            body.extend((l as u16).to_ne_bytes());
            body.extend(t.to_ne_bytes());
            body.extend(*v);
            body.resize(body.len().next_multiple_of(4), 0);
        }
        let mut m = ((16 + body.len()) as u32).to_ne_bytes().to_vec();
        m.extend(24u16.to_ne_bytes()); // RTM_NEWROUTE
        m.extend(2u16.to_ne_bytes()); // NLM_F_MULTI
        m.extend([0; 8]);
        m.extend(body);
        m
    }

    #[test]
    fn route_dumps_read() {
        const RTA_DST: u16 = 1;
        const RTA_OIF: u16 = 4;
        const RTA_TABLE: u16 = 15;
        let mut bytes = new_route(
            2,
            24,
            252,
            1,
            &[
                (RTA_TABLE, &51820u32.to_ne_bytes()),
                (RTA_DST, &[192, 0, 2, 0]),
                (RTA_OIF, &4u32.to_ne_bytes()),
            ],
        );
        // A default route: no destination attribute.
        bytes.extend(new_route(10, 0, 254, 1, &[]));
        // A local route.
        bytes.extend(new_route(2, 32, 255, 2, &[(RTA_DST, &[127, 0, 0, 1])]));
        let mut routes = Vec::new();
        assert_eq!(parse_route_dump(&bytes, &mut routes), Dump::More);
        assert_eq!(
            routes,
            vec![
                route("192.0.2.0", 24, 51820, true, Some(4)),
                route("::", 0, 254, true, None),
                route("127.0.0.1", 32, 255, false, None),
            ]
        );
        // NLMSG_DONE ends it.
        let mut done = 20u32.to_ne_bytes().to_vec();
        done.extend(3u16.to_ne_bytes());
        done.extend(2u16.to_ne_bytes());
        done.extend([0; 12]);
        assert_eq!(parse_route_dump(&done, &mut routes), Dump::Done);
        // Garbage fails, never panics.
        assert!(matches!(
            parse_route_dump(&[1, 2, 3], &mut routes),
            Dump::Failed(_)
        ));
        let mut zero = bytes.clone();
        zero[..4].copy_from_slice(&0u32.to_ne_bytes());
        assert!(matches!(
            parse_route_dump(&zero, &mut routes),
            Dump::Failed(_)
        ));
    }

    #[test]
    fn this_machine_has_no_loopback_prefix_listed() {
        let (v4, v6) = local_prefixes().unwrap();
        assert!(!v4.iter().any(|p| p.starts_with("127.")), "{v4:?}");
        assert!(!v6.iter().any(|p| p == "::1/128"), "{v6:?}");
    }
}
