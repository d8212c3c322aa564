//! Two real UDP transports in one process over loopback: frames cross exact
//! and in order, with and without injected faults; a peer without the secret
//! and a stranger's datagrams are refused; a silent peer is reported.

use super::*;
use kumi_core::header::Kind;
use std::net::Ipv4Addr;

fn cfg(rank: u32, secret: &[u8], faults: Option<&str>) -> UdpConfig {
    UdpConfig {
        id: crate::NetIdentity {
            job: "test-job".into(),
            secret: secret.to_vec(),
            rank,
            size: 2,
            bind: Ipv4Addr::LOCALHOST,
            max_payload: DEFAULT_MAX_PAYLOAD,
        },
        segment: DEFAULT_SEGMENT,
        max_window: DEFAULT_WINDOW,
        net_peers: 1,
        poll_every: 1,
        dead_after: Duration::from_secs(20),
        faults: faults.map(|f| FaultSpec::parse(f).unwrap()),
        stats: false,
    }
}

fn pair(secret_b: &[u8], faults: Option<&str>) -> (UdpTransport, UdpTransport) {
    let mut a = UdpTransport::new(cfg(0, b"secret", faults)).unwrap();
    let mut b = UdpTransport::new(cfg(1, secret_b, faults)).unwrap();
    a.set_peer_addr(1, b.local_addr());
    b.set_peer_addr(0, a.local_addr());
    (a, b)
}

fn header(i: u64, len: usize) -> Header {
    let mut h = Header::new(Kind::Eager);
    h.tag = 7;
    h.id = i;
    h.len = len as u64;
    h
}

fn payload(from: u32, i: u64) -> Vec<u8> {
    let len = ((i * 7919 + u64::from(from) * 31) % 20_000) as usize;
    let len = if i.is_multiple_of(50) {
        DEFAULT_MAX_PAYLOAD
    } else {
        len
    };
    (0..len)
        .map(|j| (j as u64 * 13 + i + u64::from(from)) as u8)
        .collect()
}

/// Sends `n` frames each way at once and checks every one on arrival.
fn exchange(a: &mut UdpTransport, b: &mut UdpTransport, n: u64) {
    let t0 = Instant::now();
    let mut sent = [0u64; 2];
    let mut got = [0u64; 2];
    while got != [n, n] {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "stuck: sent {sent:?} got {got:?} of {n}"
        );
        for (side, t) in [&mut *a, &mut *b].into_iter().enumerate() {
            let me = side as u32;
            while sent[side] < n {
                let i = sent[side];
                let p = payload(me, i);
                if !t.try_send(1 - me, &header(i, p.len()), &p).unwrap() {
                    break;
                }
                sent[side] += 1;
            }
            let g = &mut got[side];
            t.poll(&mut |from, h, p| {
                assert_eq!(from, 1 - me);
                assert_eq!(h.id, *g, "frame order");
                assert_eq!(p, &payload(from, *g)[..], "frame {} from {from}", *g);
                *g += 1;
            })
            .unwrap();
        }
    }
}

#[test]
fn frames_cross_exact_and_in_order() {
    let (mut a, mut b) = pair(b"secret", None);
    exchange(&mut a, &mut b, 300);
    assert_eq!((a.refusals(), b.refusals()), (0, 0));
}

/// Datagrams larger than the MTU (the kernel fragments them, no offload).
#[test]
fn frames_cross_exact_and_in_order_in_large_datagrams() {
    let mut a = UdpTransport::new(UdpConfig {
        segment: 16 * 1024,
        ..cfg(0, b"secret", None)
    })
    .unwrap();
    let mut b = UdpTransport::new(UdpConfig {
        segment: 16 * 1024,
        ..cfg(1, b"secret", None)
    })
    .unwrap();
    a.set_peer_addr(1, b.local_addr());
    b.set_peer_addr(0, a.local_addr());
    exchange(&mut a, &mut b, 100);
}

#[test]
fn frames_cross_exact_and_in_order_through_injected_faults() {
    let (mut a, mut b) = pair(
        b"secret",
        Some("drop=0.05,dup=0.03,reorder=0.05,delay=300,seed=11"),
    );
    exchange(&mut a, &mut b, 300);
    assert!(
        a.retransmits() + b.retransmits() > 0,
        "nothing was lost: the faults were not injected"
    );
    assert_eq!((a.refusals(), b.refusals()), (0, 0));
}

#[test]
fn a_peer_without_the_secret_is_refused() {
    let (mut a, mut b) = pair(b"not the secret", None);
    let h = header(0, 3);
    assert!(a.try_send(1, &h, b"abc").unwrap());
    assert!(b.try_send(0, &h, b"xyz").unwrap());
    let t0 = Instant::now();
    let mut frames = 0;
    while t0.elapsed() < Duration::from_millis(300) {
        frames += a.poll(&mut |_, _, _| {}).unwrap();
        frames += b.poll(&mut |_, _, _| {}).unwrap();
    }
    assert_eq!(frames, 0, "a frame crossed without the secret");
    // Both dialed; rank 0's dial wins, rank 1 answers it without the secret.
    assert!(a.refusals() > 0, "rank 0 refused nothing");
    // Neither side thinks it has a session.
    assert!(!matches!(
        a.peers[1].hs,
        Hs::Open { .. } | Hs::Confirming { .. }
    ));
    a.live.clear();
    b.live.clear();
}

/// A stranger that uses rank 1's published address but has no secret: its
/// greeting is answered, its proof refused, and its data never delivered.
#[test]
fn a_wrong_proof_is_refused() {
    let mut a = UdpTransport::new(cfg(0, b"secret", None)).unwrap();
    let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    a.set_peer_addr(1, s.local_addr().unwrap());
    let pre = |ty| Prefix { ty, from: 1, to: 0 };
    let hello = Handshake {
        nonce_c: [7; NONCE],
        nonce_a: [0; NONCE],
        mac: [0; NONCE],
    };
    s.send_to(&hello.encode(pre(Type::Hello)), a.local_addr())
        .unwrap();
    let mut buf = [0u8; 200];
    let t0 = Instant::now();
    let n = loop {
        assert!(t0.elapsed() < Duration::from_secs(5), "no challenge");
        a.poll(&mut |_, _, _| {}).unwrap();
        if let Ok((n, _)) = s.recv_from(&mut buf) {
            break n;
        }
    };
    let ch = Handshake::decode(&buf[..n]).expect("a challenge");
    assert_eq!(Prefix::read(&buf[..n]).unwrap().ty, Type::Challenge);
    let proof = Handshake {
        mac: [0xee; NONCE],
        ..ch
    };
    s.send_to(&proof.encode(pre(Type::Proof)), a.local_addr())
        .unwrap();
    let mut d = Vec::new();
    pre(Type::Data).write(&mut d);
    d.extend_from_slice(&[0u8; 8 + 36 + 50]);
    s.send_to(&d, a.local_addr()).unwrap();
    let t0 = Instant::now();
    while a.refusals() < 2 && t0.elapsed() < Duration::from_secs(5) {
        a.poll(&mut |_, _, _| panic!("a frame without the secret"))
            .unwrap();
    }
    assert_eq!(a.refusals(), 2, "the wrong proof and the data datagram");
    assert!(matches!(a.peers[1].hs, Hs::Accepting { .. }));
}

#[test]
fn strangers_datagrams_are_refused_and_the_pair_runs_on() {
    let (mut a, mut b) = pair(b"secret", None);
    exchange(&mut a, &mut b, 10);
    let stranger = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let mut junk = vec![0x5au8; 100];
    stranger.send_to(&junk, a.local_addr()).unwrap();
    // Looks like rank 1's data, from the wrong address.
    junk.clear();
    Prefix {
        ty: Type::Data,
        from: 1,
        to: 0,
    }
    .write(&mut junk);
    junk.extend_from_slice(&[0u8; 64]);
    stranger.send_to(&junk, a.local_addr()).unwrap();
    let t0 = Instant::now();
    while a.refusals() < 2 && t0.elapsed() < Duration::from_secs(5) {
        a.poll(&mut |_, _, _| panic!("a stranger's frame was delivered"))
            .unwrap();
    }
    assert_eq!(a.refusals(), 2);
    exchange(&mut a, &mut b, 10);
}

#[test]
fn a_forged_token_from_the_peers_address_is_dropped() {
    let (mut a, mut b) = pair(b"secret", None);
    exchange(&mut a, &mut b, 5);
    // Rank 1's own socket sends a data datagram with a wrong token (as an
    // attacker able to use its address, but not knowing the secret, would).
    let mut d = Vec::new();
    Prefix {
        ty: Type::Data,
        from: 1,
        to: 0,
    }
    .write(&mut d);
    d.extend_from_slice(&0x1234u64.to_le_bytes());
    d.extend_from_slice(&[0u8; 40]);
    b.sock.send_to(&d, a.local_addr()).unwrap();
    let t0 = Instant::now();
    while a.refusals() < 1 && t0.elapsed() < Duration::from_secs(5) {
        a.poll(&mut |_, _, _| panic!("a forged frame was delivered"))
            .unwrap();
    }
    assert_eq!(a.refusals(), 1);
    exchange(&mut a, &mut b, 5);
}

#[test]
fn a_silent_peer_is_reported_as_a_peer_error() {
    let mut c = cfg(0, b"secret", None);
    c.dead_after = Duration::from_millis(300);
    let mut a = UdpTransport::new(c).unwrap();
    // An address where nobody answers.
    let mute = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    a.set_peer_addr(1, mute.local_addr().unwrap());
    assert!(a.try_send(1, &header(0, 1), b"x").unwrap());
    let t0 = Instant::now();
    let err = loop {
        assert!(t0.elapsed() < Duration::from_secs(5), "no error reported");
        match a.poll(&mut |_, _, _| {}) {
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => break e,
        }
    };
    let pe = PeerError::find(&err).expect("a PeerError");
    assert_eq!(pe.peer, 1);
    a.live.clear();
}

#[test]
fn flow_control_refuses_beyond_the_send_buffer() {
    let (mut a, _b) = pair(b"secret", None);
    let p = vec![1u8; DEFAULT_MAX_PAYLOAD];
    let mut accepted = 0;
    while a.try_send(1, &header(accepted, p.len()), &p).unwrap() {
        accepted += 1;
        assert!(accepted < 1000, "never refused");
    }
    assert!(accepted >= 1);
    a.live.clear();
}
