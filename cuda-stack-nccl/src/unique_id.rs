//! [`UniqueId`]: the token that lets ranks in different processes (or threads) find each other.

use crate::{env, Error, Result};
use cuda_stack_sys::nccl_types::ncclUniqueId;

/// The number of bytes in a unique id (`NCCL_UNIQUE_ID_BYTES`).
pub const UNIQUE_ID_BYTES: usize = 128;

/// An NCCL unique id (`ncclUniqueId`, 128 bytes): made once, by one rank
/// ([`UniqueId::new`], `ncclGetUniqueId`), and handed to every other rank by the caller — over
/// TCP ([`crate::tcp`]), MPI, a file, an environment variable — before each rank calls
/// [`crate::Communicator::init_rank`] with it. It holds the address where rank 0 listens for its
/// peers, so it is only meaningful on the network it was made on.
#[derive(Clone, Copy)]
pub struct UniqueId {
    pub(crate) raw: ncclUniqueId,
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.as_bytes();
        write!(
            f,
            "UniqueId({:02x}{:02x}{:02x}{:02x}…)",
            b[0], b[1], b[2], b[3]
        )
    }
}

impl PartialEq for UniqueId {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for UniqueId {}

impl UniqueId {
    /// A new id (`ncclGetUniqueId`). This may be the first NCCL call of the process, so it checks
    /// that NVLS is off first ([`crate::check_nvls_disabled`]).
    pub fn new() -> Result<UniqueId> {
        env::check_nvls_disabled()?;
        crate::open_group::refuse_if_open("UniqueId::new")?;
        let nccl = cuda_stack_sys::Nccl::get()?;
        let mut raw = ncclUniqueId::default();
        // SAFETY: out-pointer to a local of the declared type.
        unsafe { nccl.ncclGetUniqueId(&mut raw)? };
        Ok(UniqueId { raw })
    }

    /// The id as bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> [u8; UNIQUE_ID_BYTES] {
        self.raw.internal.map(|c| c as u8)
    }

    /// The id another rank made, from its bytes. Any 128 bytes make an id; one that no rank 0
    /// made fails (or times out) in [`crate::Communicator::init_rank`].
    pub fn from_bytes(bytes: [u8; UNIQUE_ID_BYTES]) -> UniqueId {
        UniqueId {
            raw: ncclUniqueId {
                internal: bytes.map(|b| b as std::ffi::c_char),
            },
        }
    }

    /// [`UniqueId::from_bytes`] from a slice, which must hold exactly 128 bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<UniqueId> {
        let arr: [u8; UNIQUE_ID_BYTES] = bytes.try_into().map_err(|_| Error::Invalid {
            what: "UniqueId::from_slice",
            problem: format!(
                "an NCCL unique id has {UNIQUE_ID_BYTES} bytes, this has {}",
                bytes.len()
            ),
        })?;
        Ok(UniqueId::from_bytes(arr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip() {
        let mut b = [0u8; UNIQUE_ID_BYTES];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i * 7 + 200) as u8;
        }
        let id = UniqueId::from_bytes(b);
        assert_eq!(id.as_bytes(), b);
        assert_eq!(UniqueId::from_slice(&b).unwrap(), id);
        assert!(UniqueId::from_slice(&b[..10]).is_err());
    }
}
