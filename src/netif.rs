//! The machine's own networks, read from its interfaces (getifaddrs), so a
//! sealed cage can be kept from them: "the internet and nothing local" must
//! hold where the LAN and this machine have global addresses too (a home
//! network's IPv6 /64, a VPS's public /24), which no fixed list of private
//! ranges covers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The machine's own networks (IPv4, IPv6) as `network/length`, without
/// repeats: the prefix of every address on a non-loopback interface, and
/// every route of the main table but the default ones, since a network can
/// be local without an address of its own in it: the LAN's prefix when the
/// address is a DHCPv6 /128, the networks behind a VPN. Loopback interfaces
/// are left out: their addresses are this machine's own loopback, refused
/// already (and the tests' stand-in for the internet sits there).
pub fn local_prefixes() -> (Vec<String>, Vec<String>) {
    let (mut v4, mut v6) = interface_prefixes();
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let (r4, r6) = route_prefixes(&read("/proc/net/route"), &read("/proc/net/ipv6_route"));
    for (list, more) in [(&mut v4, r4), (&mut v6, r6)] {
        for p in more {
            if !list.contains(&p) {
                list.push(p);
            }
        }
    }
    (v4, v6)
}

/// Pure: the routes of `/proc/net/route` and `/proc/net/ipv6_route` as
/// prefixes, leaving out default routes, routes on `lo`, rejecting
/// (unreachable, blackhole) ones, multicast and link-local, which the fixed
/// lists refuse already, and routes wider than /8 (IPv4) or /16 (IPv6):
/// those are the internet sent another way, not a network of the machine's
/// (OpenVPN's `redirect-gateway def1` routes 0.0.0.0/1 and 128.0.0.0/1,
/// and ::/3, 2000::/4 and 3000::/4, through the tunnel).
pub fn route_prefixes(v4_table: &str, v6_table: &str) -> (Vec<String>, Vec<String>) {
    const RTF_UP: u32 = 0x1;
    const RTF_REJECT: u32 = 0x200;
    let usable = |flags: u32| flags & RTF_UP != 0 && flags & RTF_REJECT == 0;
    let mut v4 = Vec::new();
    for line in v4_table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(iface), Some(dest), Some(flags), Some(mask)) =
            (f.first(), f.get(1), f.get(3), f.get(7))
        else {
            continue;
        };
        let hex = |s: &str| u32::from_str_radix(s, 16).ok();
        let (Some(dest), Some(flags), Some(mask)) = (hex(dest), hex(flags), hex(mask)) else {
            continue;
        };
        // The kernel prints the address's bytes (network order) as a u32 of
        // this machine's: its native bytes are the address's.
        let (dest, mask) = (
            Ipv4Addr::from(dest.to_ne_bytes()),
            Ipv4Addr::from(mask.to_ne_bytes()),
        );
        if *iface == "lo"
            || !usable(flags)
            || u32::from(mask).count_ones() < 8
            || dest.is_multicast()
        {
            continue;
        }
        if let Some(p) = prefix(IpAddr::V4(dest), IpAddr::V4(mask))
            && !v4.contains(&p)
        {
            v4.push(p);
        }
    }
    let mut v6 = Vec::new();
    for line in v6_table.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        let (Ok(dest), Ok(len), Ok(flags)) = (
            u128::from_str_radix(f[0], 16),
            u8::from_str_radix(f[1], 16),
            u32::from_str_radix(f[8], 16),
        ) else {
            continue;
        };
        let dest = Ipv6Addr::from(dest);
        let link_local = dest.segments()[0] & 0xffc0 == 0xfe80;
        if f[9] == "lo"
            || !usable(flags)
            || !(16..=128).contains(&len)
            || dest.is_multicast()
            || link_local
        {
            continue;
        }
        let mask = Ipv6Addr::from(u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0));
        if let Some(p) = prefix(IpAddr::V6(dest), IpAddr::V6(mask))
            && !v6.contains(&p)
        {
            v6.push(p);
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

    #[test]
    fn routes_but_the_default_ones() {
        // Read off a machine: a default route, its LAN, a VPN's network, a
        // blackhole (RTF_REJECT), lo's local routes, and OpenVPN's def1
        // halves of the internet (not the machine's).
        let v4 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
            eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
            eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
            wg0\t0000192D\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
            tun0\t00000000\t0100080A\t0003\t0\t0\t0\t00000080\t0\t0\t0\n\
            tun0\t00000080\t0100080A\t0003\t0\t0\t0\t00000080\t0\t0\t0\n\
            eth0\t00000005\t00000000\t0201\t0\t0\t0\t000000FF\t0\t0\t0\n\
            lo\t0000007F\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n";
        let v6 = "\
            20010db8000100000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n\
            fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n\
            00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0\n\
            00000000000000000000000000000000 03 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     tun0\n\
            20000000000000000000000000000000 04 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     tun0\n\
            20010db8000200000000000000000005 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000004 00000000 80200001     eth0\n\
            00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo\n\
            ff000000000000000000000000000000 08 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001     eth0\n";
        let (r4, r6) = route_prefixes(v4, v6);
        if cfg!(target_endian = "little") {
            assert_eq!(r4, vec!["192.0.2.0/24", "45.25.0.0/16"]);
        }
        assert_eq!(r6, vec!["2001:db8:1::/64", "2001:db8:2::5/128"]);
    }

    #[test]
    fn this_machine_has_no_loopback_prefix_listed() {
        let (v4, v6) = local_prefixes();
        assert!(!v4.iter().any(|p| p.starts_with("127.")), "{v4:?}");
        assert!(!v6.iter().any(|p| p == "::1/128"), "{v6:?}");
    }
}
