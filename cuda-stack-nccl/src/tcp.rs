//! Handing a [`UniqueId`] from rank 0 to the other ranks over TCP: a small helper for programs
//! that start one process per GPU (or per node) without MPI.
//!
//! Rank 0 makes the id, listens on an address every rank knows, and sends the id to each peer
//! that connects; the others connect (retrying until rank 0 listens) and read it. The bytes on
//! the wire are a 16-byte magic, so that a stray connection is recognised, and the 128 bytes of
//! the id. Nothing is authenticated: use it on a trusted network, as NCCL's own bootstrap is.

use crate::{Error, Result, UniqueId};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// What goes before the id on the wire.
pub const MAGIC: &[u8; 16] = b"cuda-rs NCCL id\0";

fn io_err(what: impl Into<String>, e: std::io::Error) -> Error {
    Error::Exchange {
        what: what.into(),
        message: e.to_string(),
    }
}

/// Rank `rank` of `nranks` gets the communicator's id through `addr` (e.g.
/// `"127.0.0.1:29500"`): rank 0 makes it ([`UniqueId::new`]), listens on `addr` and serves
/// `nranks - 1` peers; the others fetch it. Gives up after `timeout`.
pub fn exchange_unique_id(
    addr: &str,
    rank: usize,
    nranks: usize,
    timeout: Duration,
) -> Result<UniqueId> {
    if rank >= nranks {
        return Err(Error::InvalidRank {
            op: "exchange_unique_id",
            what: "rank",
            rank,
            nranks,
        });
    }
    if rank == 0 {
        let id = UniqueId::new()?;
        let listener =
            TcpListener::bind(addr).map_err(|e| io_err(format!("listening on {addr}"), e))?;
        serve_unique_id(&listener, &id, nranks - 1, timeout)?;
        Ok(id)
    } else {
        fetch_unique_id(addr, timeout)
    }
}

/// Rank 0's side: accepts `peers` connections on `listener` within `timeout` and sends each the
/// id.
pub fn serve_unique_id(
    listener: &TcpListener,
    id: &UniqueId,
    peers: usize,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    listener
        .set_nonblocking(true)
        .map_err(|e| io_err("configuring the listener", e))?;
    let mut served = 0;
    while served < peers {
        match listener.accept() {
            Ok((mut s, peer)) => {
                let sent = s
                    .set_nonblocking(false)
                    .and_then(|()| s.set_write_timeout(Some(Duration::from_secs(10))))
                    .and_then(|()| s.write_all(MAGIC))
                    .and_then(|()| s.write_all(&id.as_bytes()))
                    .and_then(|()| s.flush());
                sent.map_err(|e| io_err(format!("sending the id to {peer}"), e))?;
                served += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err(Error::Exchange {
                        what: "waiting for the other ranks to connect".into(),
                        message: format!(
                            "{served} of {peers} connected within {:.1} s",
                            timeout.as_secs_f64()
                        ),
                    });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(io_err("accepting a connection", e)),
        }
    }
    Ok(())
}

/// A peer's side: connects to `addr` (retrying while rank 0 is not listening yet) and reads the
/// id, within `timeout`.
pub fn fetch_unique_id(
    addr: impl ToSocketAddrs + std::fmt::Display,
    timeout: Duration,
) -> Result<UniqueId> {
    let deadline = Instant::now() + timeout;
    let mut stream = loop {
        let last = match TcpStream::connect(&addr) {
            Ok(s) => break s,
            Err(e) => e,
        };
        if Instant::now() > deadline {
            return Err(io_err(format!("connecting to {addr}"), last));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(1));
    stream
        .set_read_timeout(Some(left))
        .map_err(|e| io_err("configuring the connection", e))?;
    let mut buf = [0u8; 16 + crate::unique_id::UNIQUE_ID_BYTES];
    stream
        .read_exact(&mut buf)
        .map_err(|e| io_err(format!("reading the id from {addr}"), e))?;
    if &buf[..16] != MAGIC {
        return Err(Error::Exchange {
            what: format!("reading the id from {addr}"),
            message: "the peer did not send a cuda-rs NCCL id (wrong magic)".into(),
        });
    }
    UniqueId::from_slice(&buf[16..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_peers_get_rank_zeros_id() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let mut bytes = [0u8; 128];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = i as u8 ^ 0x5a;
        }
        let id = UniqueId::from_bytes(bytes);
        let peers: Vec<_> = (0..3)
            .map(|_| {
                let a = addr.clone();
                std::thread::spawn(move || fetch_unique_id(a.as_str(), Duration::from_secs(20)))
            })
            .collect();
        serve_unique_id(&listener, &id, 3, Duration::from_secs(20)).unwrap();
        for p in peers {
            assert_eq!(p.join().unwrap().unwrap(), id);
        }
    }

    #[test]
    fn nobody_listening_times_out() {
        // Bind then drop: the port is (very likely) closed.
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let e = fetch_unique_id(addr, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, Error::Exchange { .. }), "{e}");
    }

    #[test]
    fn a_peer_that_never_comes_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let id = UniqueId::from_bytes([1; 128]);
        let e = serve_unique_id(&listener, &id, 1, Duration::from_millis(100)).unwrap_err();
        assert!(e.to_string().contains("0 of 1"), "{e}");
    }
}
