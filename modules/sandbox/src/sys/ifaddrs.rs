//! The crate's one unsafe zone: libc calls the safe crates lack.

#![allow(unsafe_code)] // getifaddrs has no safe wrapper in the workspace's crates

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The addresses of this host's interfaces (what `ip addr` shows), for the proxy's check that a
/// name does not resolve to the host itself. Empty when the kernel will not say.
pub fn own_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list that we free with freeifaddrs below;
    // each node and its address are valid until then.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return out;
        }
        let mut node = list;
        while !node.is_null() {
            let addr = (*node).ifa_addr;
            if !addr.is_null() {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(addr as *const libc::sockaddr_in);
                        out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(addr as *const libc::sockaddr_in6);
                        out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            node = (*node).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    out
}
