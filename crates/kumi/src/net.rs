//! Wiring the network transport into a rank: which peers it reaches over the
//! network, the address card it publishes, and what happens when a job peer's
//! connection breaks.
//!
//! The network transport is reliable UDP or TCP, chosen by
//! `KUMI_NET_TRANSPORT=udp|tcp` (default `udp`: its kernel path is lighter,
//! 0.78x the references' 8-byte latency between namespace hosts where TCP
//! gives 0.97x, at the same or better bandwidth; docs/BENCHMARKS.md); every
//! rank of a job reads the same variable, so a pair always agrees. The UDP transport also reads
//! `KUMI_UDP_SEGMENT` (bytes per datagram on the wire), `KUMI_UDP_WINDOW` (most
//! datagrams in flight per peer) and `KUMI_UDP_FAULTS` (seeded
//! fault injection for tests, see `kumi_transport::udp::faults`).
//!
//! Ranks of one host talk through shared memory, others through TCP; the choice
//! is per peer, from `KUMI_HOST_RANKS` (the ranks of this host, written by the
//! launcher). `KUMI_FORCE_TCP` overrides it per pair so tests can run TCP between
//! ranks of one host: `all` (or `1`) for every pair, or a list `0:1,2:3` of pairs
//! (each rank of a listed pair reads the same variable, so both agree).
//!
//! A broken connection to a job peer is not something a program can recover
//! from (MPI's default is to abort too), so [`Guarded`] turns it into an abort
//! through the control channel, naming this rank, the peer and the peer's host;
//! the launcher then stops the job and prints that line.

use crate::bootstrap::{Exchange, Identity, Stream};
use crate::engine::Route;
use crate::error::{Error, Result};
use kumi_core::config::{self, ForceTcp};
use kumi_core::control::{self, ToLauncher};
use kumi_core::header::Header;
use kumi_transport::tcp::addr::NetChoice;
use kumi_transport::tcp::{
    PeerError, TcpConfig, TcpTransport, DEFAULT_HIGH_WATER, DEFAULT_MAX_PAYLOAD,
};
use kumi_transport::udp::faults::FaultSpec;
use kumi_transport::udp::{UdpConfig, UdpTransport};
use kumi_transport::NetIdentity;
use kumi_transport::{Sink, Transport};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::time::Duration;

/// The ranks of this host, in local-rank order.
pub(crate) fn host_ranks(id: &Identity) -> Result<Vec<u32>> {
    match &id.host_ranks {
        Some(r) => Ok(r.clone()),
        None if id.local_size == id.size => Ok((0..id.size).collect()),
        None => Err(Error::Bootstrap(format!(
            "this rank shares its host with {} of {} ranks but KUMI_HOST_RANKS does not say which: \
             start the job with `kumi run`",
            id.local_size, id.size
        ))),
    }
}

/// How each world rank is reached.
pub(crate) fn routes(id: &Identity, local: &[u32], force: &ForceTcp) -> Vec<Route> {
    let mut route = vec![Route::Net; id.size as usize];
    for &g in local {
        if !force.forces(id.rank, g) {
            route[g as usize] = Route::Shm;
        }
    }
    route[id.rank as usize] = Route::Me;
    route
}

/// The network transport of a rank.
pub(crate) enum Link {
    Tcp(Box<TcpTransport>),
    Udp(Box<UdpTransport>),
}

impl Link {
    fn transport(&mut self) -> &mut dyn Transport {
        match self {
            Link::Tcp(t) => &mut **t,
            Link::Udp(u) => &mut **u,
        }
    }

    fn transport_ref(&self) -> &dyn Transport {
        match self {
            Link::Tcp(t) => &**t,
            Link::Udp(u) => &**u,
        }
    }

    /// The address peers reach this rank at (its address card).
    pub fn local_addr(&self) -> SocketAddr {
        match self {
            Link::Tcp(t) => t.local_addr(),
            Link::Udp(u) => u.local_addr(),
        }
    }

    fn set_peer_addr(&mut self, peer: u32, addr: SocketAddr) {
        match self {
            Link::Tcp(t) => t.set_peer_addr(peer, addr),
            Link::Udp(u) => u.set_peer_addr(peer, addr),
        }
    }
}

fn udp_config(id: NetIdentity, route: &[Route], net: &config::Net) -> Result<UdpConfig> {
    let faults = match &net.udp_faults {
        Some(v) => Some(
            FaultSpec::parse(v)
                .map_err(|e| Error::Bootstrap(format!("KUMI_UDP_FAULTS={v:?}: {e}")))?,
        ),
        None => None,
    };
    Ok(UdpConfig {
        id,
        segment: net
            .udp_segment
            .unwrap_or(kumi_transport::udp::DEFAULT_SEGMENT),
        max_window: net
            .udp_window
            .unwrap_or(kumi_transport::udp::DEFAULT_WINDOW),
        net_peers: route.iter().filter(|&&r| r == Route::Net).count() as u32,
        poll_every: poll_every(route),
        dead_after: Duration::from_secs(60),
        faults,
        stats: net.udp_stats,
    })
}

/// How often a network transport looks at its sockets while idle: less
/// often when the rank also has shared-memory peers (see
/// `TcpConfig::poll_every`).
fn poll_every(route: &[Route]) -> u32 {
    if route.contains(&Route::Shm) {
        4
    } else {
        1
    }
}

/// Starts listening if some peer is reached over the network.
pub(crate) fn start(id: &Identity, route: &[Route], net: &config::Net) -> Result<Option<Link>> {
    if !route.contains(&Route::Net) {
        return Ok(None);
    }
    let choice =
        NetChoice::parse(&id.net).map_err(|e| Error::Bootstrap(format!("KUMI_NET: {e}")))?;
    let bind = choice
        .resolve()
        .map_err(|e| Error::Bootstrap(format!("choosing the network address: {e}")))?;
    let net_id = NetIdentity {
        job: id.job.clone(),
        secret: id.secret.clone(),
        rank: id.rank,
        size: id.size,
        bind,
        max_payload: DEFAULT_MAX_PAYLOAD,
    };
    if net.udp {
        let udp = UdpTransport::new(udp_config(net_id, route, net)?).map_err(|e| {
            Error::Bootstrap(format!("cannot bind a datagram socket on {bind}: {e}"))
        })?;
        return Ok(Some(Link::Udp(Box::new(udp))));
    }
    let tcp = TcpTransport::new(TcpConfig {
        id: net_id,
        high_water: DEFAULT_HIGH_WATER,
        poll_every: poll_every(route),
    })
    .map_err(|e| Error::Bootstrap(format!("cannot listen for data connections on {bind}: {e}")))?;
    Ok(Some(Link::Tcp(Box::new(tcp))))
}

/// This rank's address card: `pid=P host=H addr=IP:PORT` (fields absent when
/// unknown).
pub(crate) fn card(id: &Identity, link: Option<&Link>) -> String {
    let mut c = format!("pid={}", std::process::id());
    if !id.host.is_empty() && !id.host.contains(char::is_whitespace) {
        c.push_str(&format!(" host={}", id.host));
    }
    if let Some(t) = link {
        c.push_str(&format!(" addr={}", t.local_addr()));
    }
    c
}

fn card_field<'a>(card: &'a str, key: &str) -> Option<&'a str> {
    card.split_whitespace()
        .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
}

/// After the fence: reads the cards of the network peers and tells the
/// transport where they listen. Returns each rank's host name (for reports).
pub(crate) fn learn_peers(
    ctl: &mut dyn Exchange,
    link: &mut Link,
    route: &[Route],
) -> Result<Vec<String>> {
    let peers: Vec<u32> = (0..route.len() as u32)
        .filter(|&r| route[r as usize] == Route::Net)
        .collect();
    let keys: Vec<(u32, String)> = peers.iter().map(|&r| (r, "card".to_string())).collect();
    let cards = ctl.get_many(&keys)?;
    let mut hosts = vec![String::new(); route.len()];
    for (&r, card) in peers.iter().zip(cards) {
        let card = card
            .map(|c| String::from_utf8_lossy(&c).into_owned())
            .ok_or_else(|| Error::Bootstrap(format!("rank {r} published no address card")))?;
        let addr: SocketAddr = card_field(&card, "addr")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| {
                Error::Bootstrap(format!(
                    "rank {r}'s address card {card:?} has no network address"
                ))
            })?;
        link.set_peer_addr(r, addr);
        hosts[r as usize] = card_field(&card, "host").unwrap_or("").to_string();
    }
    Ok(hosts)
}

/// The network transport, with job peers' failures turned into a job abort.
pub(crate) struct Guarded {
    pub link: Link,
    pub rank: u32,
    pub hosts: Vec<String>,
    pub control: Option<Stream>,
}

impl Guarded {
    fn check<T>(&mut self, r: io::Result<T>) -> io::Result<T> {
        let e = match r {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let Some(pe) = PeerError::find(&e) else {
            return Err(e);
        };
        let host = match self.hosts.get(pe.peer as usize).map(String::as_str) {
            Some("") | None => String::new(),
            Some(h) => format!(" on host {h}"),
        };
        let message = format!(
            "rank {} lost rank {}{host}: {}",
            self.rank, pe.peer, pe.reason
        );
        eprintln!("kumi: rank {}: {message}", self.rank);
        if let Some(s) = &mut self.control {
            let _ = s.write_all(&control::encode(&ToLauncher::Abort { code: 1, message }));
            std::process::exit(1);
        }
        crate::pmi::end_job(&message);
        Err(e)
    }
}

impl Transport for Guarded {
    fn name(&self) -> &'static str {
        self.link.transport_ref().name()
    }
    fn max_payload(&self) -> usize {
        self.link.transport_ref().max_payload()
    }
    fn try_send(&mut self, peer: u32, header: &Header, payload: &[u8]) -> io::Result<bool> {
        let r = self.link.transport().try_send(peer, header, payload);
        self.check(r)
    }
    fn poll(&mut self, sink: &mut Sink<'_>) -> io::Result<usize> {
        let r = self.link.transport().poll(sink);
        self.check(r)
    }
    fn prepare_sleep(&mut self) -> bool {
        self.link.transport().prepare_sleep()
    }
    fn sleep(&mut self, timeout: Duration) {
        self.link.transport().sleep(timeout)
    }
    fn cancel_sleep(&mut self) {
        self.link.transport().cancel_sleep()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_fields() {
        let c = "pid=12 host=h1 addr=10.0.0.1:5000";
        assert_eq!(card_field(c, "addr"), Some("10.0.0.1:5000"));
        assert_eq!(card_field(c, "host"), Some("h1"));
        assert_eq!(card_field("pid=1", "addr"), None);
    }
}
