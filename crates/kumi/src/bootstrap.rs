//! How a rank learns who it is and reaches its launcher.
//!
//! `kumi run` puts the rank's identity in the environment
//! ([`kumi_core::rankenv`]: rank, size, local rank and size, job id, the control
//! socket's name, the job secret and the shared segment's inherited
//! descriptor). A rank started by a PMI-2 process manager (`srun
//! --mpi=pmi2`) learns it from that instead ([`crate::pmi`]). Without either
//! the program was started by hand and is a job of size 1 (a singleton).
//!
//! Either way the ranks publish and read their address cards through an
//! [`Exchange`]: the launcher's key-value store, or the process manager's.

use crate::error::{Error, Result};
use kumi_core::control::{self, FrameDecoder, ToLauncher, ToRank};
use kumi_core::rankenv::RankEnv;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

/// A rank's identity, read from the environment.
#[derive(Clone, Debug)]
pub(crate) struct Identity {
    pub job: String,
    pub rank: u32,
    pub size: u32,
    pub local_rank: u32,
    pub local_size: u32,
    pub control: Option<String>,
    pub secret: Vec<u8>,
    pub shm_fd: Option<i32>,
    /// Global ranks of this host in local-rank order (`KUMI_HOST_RANKS`);
    /// `None`: every rank of the job runs here.
    pub host_ranks: Option<Vec<u32>>,
    /// The host's name as the launcher knows it (`KUMI_HOST`), for reports.
    pub host: String,
    /// Which network address ranks use (`KUMI_NET`, see `kumi_transport::tcp::addr`).
    pub net: String,
    /// Cores of this host as its launcher saw them (`KUMI_LOCAL_CORES`), so
    /// every local rank takes the same view of oversubscription even if some
    /// were started with a narrower CPU affinity; `None`: ask the system.
    pub local_cores: Option<usize>,
    /// Which program of an MPMD job this rank runs (`KUMI_APPNUM`).
    pub appnum: u32,
}

impl Identity {
    /// This rank's host as the job names it: as given to `kumi run --hosts`
    /// (or by the process manager), else this machine's name.
    pub fn host_name(&self) -> String {
        if self.host.is_empty() {
            crate::hostname()
        } else {
            self.host.clone()
        }
    }

    /// This rank's identity from what its launcher said (`None`: started by
    /// hand, a singleton).
    pub fn new(contract: Option<RankEnv>) -> Identity {
        let Some(RankEnv { job, host, rank }) = contract else {
            return Identity {
                job: format!("singleton-{}", std::process::id()),
                rank: 0,
                size: 1,
                local_rank: 0,
                local_size: 1,
                control: None,
                secret: Vec::new(),
                shm_fd: None,
                host_ranks: None,
                host: String::new(),
                net: String::new(),
                local_cores: None,
                appnum: 0,
            };
        };
        Identity {
            job: job.id,
            rank: rank.rank,
            size: job.size,
            local_rank: rank.local_rank,
            local_size: rank.local_size,
            control: job.control,
            secret: job.secret,
            shm_fd: rank.shm_fd,
            host_ranks: host.host_ranks,
            host: host.host,
            net: host.net,
            local_cores: rank.local_cores,
            appnum: rank.appnum,
        }
    }
}

/// The control channel's socket: a local Unix socket, or TCP for ranks on
/// another host than the launcher.
pub(crate) enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    pub fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The rank's end of the control channel: blocking request/answer.
pub(crate) struct Control {
    stream: Stream,
    decoder: FrameDecoder,
}

impl Control {
    /// Connects to the launcher and proves the job secret.
    pub fn connect(id: &Identity) -> Result<Control> {
        let name = id
            .control
            .as_deref()
            .ok_or_else(|| Error::Bootstrap("KUMI_CONTROL is not set".into()))?;
        let stream = connect_socket(name)
            .map_err(|e| Error::Bootstrap(format!("cannot reach the launcher at {name}: {e}")))?;
        let mut c = Control {
            stream,
            decoder: FrameDecoder::new(),
        };
        let nonce = match c.read()? {
            ToRank::Challenge { nonce } => nonce,
            other => {
                return Err(Error::Bootstrap(format!(
                    "launcher sent {other:?} instead of a challenge"
                )))
            }
        };
        let mac = control::prove(&id.secret, &nonce, &id.job, id.rank);
        c.send(&ToLauncher::Hello {
            job: id.job.clone(),
            rank: id.rank,
            pid: std::process::id(),
            mac,
        })?;
        match c.read()? {
            ToRank::Welcome => Ok(c),
            ToRank::Refused { reason } => Err(Error::Bootstrap(format!(
                "the launcher refused this rank: {reason}"
            ))),
            other => Err(Error::Bootstrap(format!(
                "unexpected answer to hello: {other:?}"
            ))),
        }
    }

    pub fn send(&mut self, msg: &ToLauncher) -> Result<()> {
        self.stream
            .write_all(&control::encode(msg))
            .map_err(|e| Error::Bootstrap(format!("lost the launcher: {e}")))
    }

    fn read(&mut self) -> Result<ToRank> {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(m) = self
                .decoder
                .next_frame()
                .map_err(|e| Error::Bootstrap(e.to_string()))?
            {
                return Ok(m);
            }
            let n = self
                .stream
                .read(&mut buf)
                .map_err(|e| Error::Bootstrap(format!("lost the launcher: {e}")))?;
            if n == 0 {
                return Err(Error::Bootstrap(
                    "the launcher closed the control channel".into(),
                ));
            }
            self.decoder.push(&buf[..n]);
        }
    }

    pub fn put(&mut self, key: &str, value: Vec<u8>) -> Result<()> {
        self.send(&ToLauncher::Put {
            key: key.into(),
            value,
        })
    }

    /// A second handle on the channel that can only send (aborts from inside the
    /// progress engine; frames are written whole, so the two never interleave).
    pub fn sender(&self) -> Result<Stream> {
        self.stream
            .try_clone()
            .map_err(|e| Error::Bootstrap(format!("cannot share the control channel: {e}")))
    }

    /// Reads many keys in one round trip (all requests first, then the answers).
    pub fn get_many(&mut self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = Vec::with_capacity(keys.len());
        let mut bytes = Vec::new();
        for k in keys {
            bytes.extend(control::encode(&ToLauncher::Get { key: k.clone() }));
        }
        self.stream
            .write_all(&bytes)
            .map_err(|e| Error::Bootstrap(format!("lost the launcher: {e}")))?;
        for k in keys {
            match self.read()? {
                ToRank::Value { key, value } if &key == k => out.push(value),
                other => {
                    return Err(Error::Bootstrap(format!(
                        "unexpected answer to get {k:?}: {other:?}"
                    )))
                }
            }
        }
        Ok(out)
    }

    pub fn fence(&mut self) -> Result<()> {
        self.send(&ToLauncher::Fence)?;
        match self.read()? {
            ToRank::FenceDone => Ok(()),
            other => Err(Error::Bootstrap(format!(
                "unexpected answer to fence: {other:?}"
            ))),
        }
    }
}

/// A job-wide key-value store with fences: what bootstrap needs of whoever
/// started the ranks.
/// Keys belong to the rank that publishes them (as in PMIx); a store with
/// one name space (the launcher's, PMI-2's) names them `key/rank`.
pub(crate) trait Exchange {
    /// Publishes `key` of this rank, `rank` (visible to every rank after the
    /// next fence).
    fn put(&mut self, rank: u32, key: &str, value: Vec<u8>) -> Result<()>;
    /// Waits until every rank of the job has reached its fence.
    fn fence(&mut self) -> Result<()>;
    /// Reads `(rank, key)`s published before the last fence (`None`: that
    /// rank did not).
    fn get_many(&mut self, keys: &[(u32, String)]) -> Result<Vec<Option<Vec<u8>>>>;
}

/// The name of `rank`'s `key` in a store with one name space.
pub(crate) fn flat_key(rank: u32, key: &str) -> String {
    format!("{key}/{rank}")
}

impl Exchange for Control {
    fn put(&mut self, rank: u32, key: &str, value: Vec<u8>) -> Result<()> {
        Control::put(self, &flat_key(rank, key), value)
    }
    fn fence(&mut self) -> Result<()> {
        Control::fence(self)
    }
    fn get_many(&mut self, keys: &[(u32, String)]) -> Result<Vec<Option<Vec<u8>>>> {
        let flat: Vec<String> = keys.iter().map(|(r, k)| flat_key(*r, k)).collect();
        Control::get_many(self, &flat)
    }
}

/// `@name`: abstract Unix socket; `ip:port`: TCP (ranks on other hosts than the
/// launcher's); anything else: a Unix socket path.
fn connect_socket(name: &str) -> std::io::Result<Stream> {
    if let Some(abstract_name) = name.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())?;
        return UnixStream::connect_addr(&addr).map(Stream::Unix);
    }
    if let Ok(addr) = name.parse::<std::net::SocketAddr>() {
        let s = TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(10))?;
        s.set_nodelay(true)?;
        return Ok(Stream::Tcp(s));
    }
    UnixStream::connect(name).map(Stream::Unix)
}
