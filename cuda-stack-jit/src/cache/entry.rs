//! The format of one disk-cache entry: a header (magic, what the payload is, the key it belongs
//! to, its length) and a SHA-256 checksum over header and payload, so a torn write, a
//! truncated file or flipped bits are detected before the driver ever sees the bytes.
//!
//! ```text
//! 0..8    magic  b"CUJIT01\n"
//! 8       kind   0 = cubin, 1 = PTX
//! 9..16   zero
//! 16..48  the key digest the entry was written for
//! 48..56  payload length (little-endian u64)
//! 56..88  SHA-256 of bytes 0..56 followed by the payload
//! 88..    payload
//! ```

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"CUJIT01\n";
/// Bytes before the payload.
pub(crate) const HEADER: usize = 88;

/// What an entry's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryKind {
    /// SASS for one architecture.
    Cubin,
    /// PTX text (the driver compiles it at load).
    Ptx,
}

fn checksum(head: &[u8], payload: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(head);
    h.update(payload);
    h.finalize().into()
}

/// The entry's bytes.
pub(crate) fn encode(key: &[u8; 32], kind: BinaryKind, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.push(match kind {
        BinaryKind::Cubin => 0,
        BinaryKind::Ptx => 1,
    });
    out.extend_from_slice(&[0u8; 7]);
    out.extend_from_slice(key);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let sum = checksum(&out, payload);
    out.extend_from_slice(&sum);
    out.extend_from_slice(payload);
    out
}

/// The payload of an entry written for `key`, or why the bytes are not a valid one.
pub(crate) fn decode(bytes: &[u8], key: &[u8; 32]) -> Result<(BinaryKind, Vec<u8>), String> {
    if bytes.len() < HEADER {
        return Err(format!("{} bytes, shorter than the header", bytes.len()));
    }
    if &bytes[..8] != MAGIC {
        return Err("not a cuda-stack-jit cache entry of this format (bad magic)".into());
    }
    let kind = match bytes[8] {
        0 => BinaryKind::Cubin,
        1 => BinaryKind::Ptx,
        k => return Err(format!("unknown payload kind {k}")),
    };
    if &bytes[16..48] != key {
        return Err("written for another key".into());
    }
    let len = u64::from_le_bytes(bytes[48..56].try_into().unwrap_or([0; 8]));
    let payload = &bytes[HEADER..];
    if len != payload.len() as u64 {
        return Err(format!(
            "the header promises {len} payload bytes but the file holds {} (torn or truncated)",
            payload.len()
        ));
    }
    if checksum(&bytes[..56], payload)[..] != bytes[56..88] {
        return Err("checksum mismatch (corrupted contents)".into());
    }
    Ok((kind, payload.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_corruption_is_caught() {
        let key = [7u8; 32];
        let e = encode(&key, BinaryKind::Cubin, b"\x7fELF payload");
        assert_eq!(
            decode(&e, &key).unwrap(),
            (BinaryKind::Cubin, b"\x7fELF payload".to_vec())
        );
        assert!(decode(&e, &[8u8; 32]).unwrap_err().contains("another key"));
        for cut in [0, 10, HEADER - 1, HEADER, e.len() - 1] {
            assert!(decode(&e[..cut], &key).is_err(), "truncated at {cut}");
        }
        for flip in 0..e.len() {
            if (9..16).contains(&flip) {
                continue; // reserved bytes are covered by the checksum too, but check below
            }
            let mut c = e.clone();
            c[flip] ^= 0x10;
            assert!(
                decode(&c, &key).is_err(),
                "bit flip at byte {flip} went unnoticed"
            );
        }
        let mut c = e.clone();
        c[12] ^= 1;
        assert!(decode(&c, &key).unwrap_err().contains("checksum"));
    }
}
