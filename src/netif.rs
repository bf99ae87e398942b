//! The machine's own networks, read from its interfaces (getifaddrs), so a
//! sealed cage can be kept from them: "the internet and nothing local" must
//! hold where the LAN and this machine have global addresses too (a home
//! network's IPv6 /64, a VPS's public /24), which no fixed list of private
//! ranges covers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The prefixes of every address on a non-loopback interface (IPv4, IPv6),
/// as `network/length`, without repeats. Loopback interfaces are left out:
/// their addresses are this machine's own loopback, refused already (and
/// the tests' stand-in for the internet sits there).
pub fn local_prefixes() -> (Vec<String>, Vec<String>) {
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
    fn this_machine_has_no_loopback_prefix_listed() {
        let (v4, v6) = local_prefixes();
        assert!(!v4.iter().any(|p| p.starts_with("127.")), "{v4:?}");
        assert!(!v6.iter().any(|p| p == "::1/128"), "{v6:?}");
    }
}
