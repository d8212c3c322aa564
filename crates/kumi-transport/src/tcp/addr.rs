//! Which local address a rank (or the launcher) uses on the network.
//!
//! The choice is written once by `kumi run` in `KUMI_NET` and read by every
//! process of the job on its own host, because each host has its own address on
//! the chosen network:
//!
//! * `iface:NAME`: the IPv4 address of interface `NAME`;
//! * `net:A.B.C.D/P`: the local IPv4 address inside that network;
//! * `addr:A.B.C.D`: exactly that address (one host only);
//! * empty or absent: the first IPv4 address of an interface that is up and not
//!   loopback, else the loopback address.

use std::io;
use std::net::Ipv4Addr;

/// A parsed network choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetChoice {
    /// First non-loopback interface that is up.
    Auto,
    /// An interface by name.
    Iface(String),
    /// A network: address and prefix length.
    Net(Ipv4Addr, u8),
    /// One address.
    Addr(Ipv4Addr),
}

impl NetChoice {
    /// Parses `KUMI_NET`'s syntax (see the module doc).
    pub fn parse(s: &str) -> Result<NetChoice, String> {
        let s = s.trim();
        if s.is_empty() || s == "auto" {
            return Ok(NetChoice::Auto);
        }
        if let Some(name) = s.strip_prefix("iface:") {
            if name.is_empty() {
                return Err("an empty interface name".into());
            }
            return Ok(NetChoice::Iface(name.to_string()));
        }
        if let Some(a) = s.strip_prefix("addr:") {
            return a
                .parse()
                .map(NetChoice::Addr)
                .map_err(|_| format!("{a:?} is not an IPv4 address"));
        }
        if let Some(n) = s.strip_prefix("net:") {
            return parse_cidr(n);
        }
        Err(format!(
            "{s:?}: expected iface:NAME, net:A.B.C.D/P, addr:A.B.C.D or auto"
        ))
    }

    /// The `KUMI_NET` spelling of this choice.
    pub fn to_env(&self) -> String {
        match self {
            NetChoice::Auto => "auto".into(),
            NetChoice::Iface(n) => format!("iface:{n}"),
            NetChoice::Net(a, p) => format!("net:{a}/{p}"),
            NetChoice::Addr(a) => format!("addr:{a}"),
        }
    }

    /// The address of this host that the choice names.
    pub fn resolve(&self) -> io::Result<Ipv4Addr> {
        if let NetChoice::Addr(a) = self {
            return Ok(*a);
        }
        let ifs = interfaces()?;
        let found = match self {
            NetChoice::Auto => ifs
                .iter()
                .find(|i| i.up && !i.addr.is_loopback())
                .or_else(|| ifs.iter().find(|i| i.addr.is_loopback())),
            NetChoice::Iface(name) => ifs.iter().find(|i| &i.name == name),
            NetChoice::Net(net, p) => ifs.iter().find(|i| in_net(i.addr, *net, *p)),
            NetChoice::Addr(_) => None,
        };
        found.map(|i| i.addr).ok_or_else(|| {
            let have: Vec<String> = ifs
                .iter()
                .map(|i| format!("{} {}", i.name, i.addr))
                .collect();
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no local IPv4 address matches {} (this host has: {})",
                    self.to_env(),
                    if have.is_empty() {
                        "none".into()
                    } else {
                        have.join(", ")
                    }
                ),
            )
        })
    }
}

/// Parses `A.B.C.D/P`.
pub fn parse_cidr(s: &str) -> Result<NetChoice, String> {
    let (a, p) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not a network A.B.C.D/P"))?;
    let a: Ipv4Addr = a
        .parse()
        .map_err(|_| format!("{a:?} is not an IPv4 address"))?;
    let p: u8 = p
        .parse()
        .ok()
        .filter(|p| *p <= 32)
        .ok_or_else(|| format!("{p:?} is not a prefix length 0..32"))?;
    Ok(NetChoice::Net(a, p))
}

fn in_net(a: Ipv4Addr, net: Ipv4Addr, p: u8) -> bool {
    let mask = if p == 0 { 0 } else { u32::MAX << (32 - p) };
    u32::from(a) & mask == u32::from(net) & mask
}

struct Iface {
    name: String,
    addr: Ipv4Addr,
    up: bool,
}

fn interfaces() -> io::Result<Vec<Iface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into `head`; we free it below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive until
        // freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr of at least its family's size.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        if family != libc::AF_INET {
            continue;
        }
        // SAFETY: an AF_INET address is a sockaddr_in.
        let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        out.push(Iface {
            name,
            addr: Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
            up: ifa.ifa_flags & libc::IFF_UP as u32 != 0,
        });
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_print() {
        for s in ["auto", "iface:eth0", "net:10.1.2.0/24", "addr:127.0.0.1"] {
            assert_eq!(NetChoice::parse(s).unwrap().to_env(), s);
        }
        assert!(NetChoice::parse("net:10.0.0.0/33").is_err());
        assert!(NetChoice::parse("bogus").is_err());
        assert!(in_net(
            "10.1.2.7".parse().unwrap(),
            "10.1.2.0".parse().unwrap(),
            24
        ));
        assert!(!in_net(
            "10.1.3.7".parse().unwrap(),
            "10.1.2.0".parse().unwrap(),
            24
        ));
    }

    #[test]
    fn loopback_resolves() {
        assert_eq!(
            NetChoice::Iface("lo".into()).resolve().unwrap(),
            Ipv4Addr::LOCALHOST
        );
        assert_eq!(
            NetChoice::parse("net:127.0.0.0/8")
                .unwrap()
                .resolve()
                .unwrap(),
            Ipv4Addr::LOCALHOST
        );
    }
}
