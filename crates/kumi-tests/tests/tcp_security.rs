//! A foreign process connects to a rank's data port while the job runs over TCP:
//! with random bytes, with nothing at all, with a greeting but no proof, and with
//! a wrong proof. Each is refused with one logged line, and the job finishes
//! correctly. Runs on one host over loopback (no root needed).

use kumi_tests::AttackedJob;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A data-connection greeting claiming to be `from`, for rank `to` (the wire
/// format of `kumi_transport::tcp::wire`, written by hand as a stranger would).
fn hello(from: u32, to: u32) -> Vec<u8> {
    let mut b = b"KUMIDAT1".to_vec();
    b.extend(from.to_le_bytes());
    b.extend(to.to_le_bytes());
    b.extend([7u8; 32]);
    b
}

/// Waits until the rank closes the connection (it refused us).
fn expect_closed(mut s: TcpStream, what: &str) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("{what}: the rank did not close the connection: {e}"),
        }
    }
}

#[test]
fn strangers_on_the_data_port_are_refused_and_the_job_finishes() {
    let job = AttackedJob::start("tcp");
    let addr = job.addr.clone();

    // 1. Random bytes.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(&[0x5a; 100]).unwrap();
    expect_closed(s, "random bytes");
    // 2. Connect and say nothing, then close.
    drop(TcpStream::connect(&addr).unwrap());
    // 3. A greeting (claiming rank 2, which has not connected yet), no proof.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(&hello(2, 0)).unwrap();
    let mut answer = [0u8; 72];
    s.read_exact(&mut answer).unwrap();
    assert_eq!(
        &answer[..8],
        b"KUMIACK1",
        "the rank answers a greeting with its challenge"
    );
    drop(s);
    // 4. A greeting and a wrong proof (no secret to compute it with).
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(&hello(2, 0)).unwrap();
    s.read_exact(&mut answer).unwrap();
    s.write_all(&[0xee; 32]).unwrap();
    // Frames after a wrong proof must never be read as frames.
    let _ = s.write_all(&[1u8; 200]);
    expect_closed(s, "wrong proof");

    let err = job.finish();
    let refusals: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("refused a data connection from 127.0.0.1"))
        .collect();
    assert_eq!(refusals.len(), 4, "one line per refusal:\n{err}");
    assert!(
        refusals.iter().all(|l| l.starts_with("kumi: rank 0: ")),
        "{err}"
    );
    for reason in [
        "bad greeting",
        "closed before saying hello",
        "closed before proving",
        "wrong proof",
    ] {
        assert!(
            refusals.iter().any(|l| l.contains(reason)),
            "no refusal says {reason:?}:\n{err}"
        );
    }
}
