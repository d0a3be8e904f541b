//! Checks of binary module images before the driver reads them.
//!
//! `cuModuleLoadDataEx` takes only a pointer: the driver learns an image's length from its
//! contents (an ELF's headers, a fatbin's header), and reads anything it does not recognise as
//! NUL-terminated PTX. A safe `load_module` must therefore make sure, first, that the bytes are
//! the kind of image they claim to be and that every extent their headers declare lies inside
//! the slice; the image is then copied into an 8-byte-aligned buffer (fatbins need it) with
//! zeros after it.

use crate::{Error, Result};

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// `SHT_NOBITS`: a section that takes no bytes in the file (`.bss`, `.nv.shared.*`).
const SHT_NOBITS: u32 = 8;

fn bad(kind: &'static str, problem: String) -> Error {
    Error::InvalidImage { kind, problem }
}

fn u16_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as u64)
}

fn u32_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as u64)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// `[offset, offset + count * size)` lies inside `len` bytes.
fn inside(offset: u64, count: u64, size: u64, len: usize) -> bool {
    count
        .checked_mul(size)
        .and_then(|n| n.checked_add(offset))
        .is_some_and(|end| end <= len as u64)
}

/// A 64-bit little-endian ELF (what `nvcc -cubin` and NVRTC's `nvrtcGetCUBIN` produce) whose
/// program headers, section headers and sections all lie inside `b`.
pub(crate) fn check_cubin(b: &[u8]) -> Result<()> {
    const K: &str = "cubin";
    let field = |v: Option<u64>| v.ok_or_else(|| bad(K, "the ELF header is truncated".into()));
    if b.len() < 64 || &b[..4] != ELF_MAGIC {
        return Err(bad(
            K,
            format!("{} bytes that do not start with an ELF header", b.len()),
        ));
    }
    if b[4] != 2 || b[5] != 1 {
        return Err(bad(K, "not a 64-bit little-endian ELF file".into()));
    }
    let (phoff, shoff) = (field(u64_at(b, 0x20))?, field(u64_at(b, 0x28))?);
    let (phentsize, phnum) = (field(u16_at(b, 0x36))?, field(u16_at(b, 0x38))?);
    let (shentsize, shnum) = (field(u16_at(b, 0x3A))?, field(u16_at(b, 0x3C))?);
    if phnum > 0 && (phentsize < 56 || !inside(phoff, phnum, phentsize, b.len())) {
        return Err(bad(K, "its program headers lie outside the image".into()));
    }
    if shnum > 0 && (shentsize < 64 || !inside(shoff, shnum, shentsize, b.len())) {
        return Err(bad(K, "its section headers lie outside the image".into()));
    }
    for i in 0..phnum {
        let h = (phoff + i * phentsize) as usize;
        let (off, size) = (field(u64_at(b, h + 8))?, field(u64_at(b, h + 0x20))?);
        if !inside(off, 1, size, b.len()) {
            return Err(bad(K, format!("segment {i} lies outside the image")));
        }
    }
    for i in 0..shnum {
        let h = (shoff + i * shentsize) as usize;
        let kind = field(u32_at(b, h + 4))?;
        let (off, size) = (field(u64_at(b, h + 0x18))?, field(u64_at(b, h + 0x20))?);
        if kind as u32 != SHT_NOBITS && !inside(off, 1, size, b.len()) {
            return Err(bad(K, format!("section {i} lies outside the image")));
        }
    }
    Ok(())
}

/// A fatbin (`nvcc -fatbin`): its header and every entry's header and payload lie inside `b`,
/// and every uncompressed ELF entry passes [`check_cubin`].
pub(crate) fn check_fatbin(b: &[u8]) -> Result<()> {
    const K: &str = "fatbin";
    let field = |v: Option<u64>| v.ok_or_else(|| bad(K, "the fatbin header is truncated".into()));
    if u32_at(b, 0) != Some(FATBIN_MAGIC as u64) {
        return Err(bad(
            K,
            format!(
                "{} bytes that do not start with the fatbin magic 0x{FATBIN_MAGIC:08X}",
                b.len()
            ),
        ));
    }
    let header = field(u16_at(b, 6))?;
    let size = field(u64_at(b, 8))?;
    if header < 16 || !inside(header, 1, size, b.len()) {
        return Err(bad(
            K,
            format!(
                "its header declares {size} bytes after a {header}-byte header, but the slice \
                 has {}",
                b.len()
            ),
        ));
    }
    let end = header + size;
    let mut at = header;
    while at < end {
        let eh = field(u32_at(b, at as usize + 4))?;
        let payload = field(u64_at(b, at as usize + 8))?;
        let next = at
            .checked_add(eh)
            .and_then(|p| p.checked_add(payload))
            .filter(|&n| eh >= 16 && n <= end)
            .ok_or_else(|| bad(K, format!("the entry at byte {at} lies outside the fatbin")))?;
        // An entry that is an ELF (SASS) must have its own headers inside the entry too (a
        // compressed one is inflated by the driver into memory of its own).
        let payload = &b[(at + eh) as usize..next as usize];
        if payload.starts_with(ELF_MAGIC) {
            check_cubin(payload)?;
        }
        at = next;
    }
    Ok(())
}

/// `b` copied into 8-byte-aligned memory with 8 zero bytes after it.
pub(crate) fn aligned_copy(b: &[u8]) -> Vec<u64> {
    let mut v = vec![0u64; b.len().div_ceil(8) + 1];
    bytemuck::cast_slice_mut::<u64, u8>(&mut v)[..b.len()].copy_from_slice(b);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    // `testdata/add1.cu` compiled by nvcc 13.0: `-cubin -arch=sm_90`, and `-fatbin` for sm_80
    // and sm_90 with compute_90 PTX.
    const CUBIN: &[u8] = include_bytes!("../testdata/add1_sm90.cubin");
    const FATBIN: &[u8] = include_bytes!("../testdata/add1_sm80_sm90.fatbin");

    #[test]
    fn real_images_pass() {
        check_cubin(CUBIN).unwrap();
        check_fatbin(FATBIN).unwrap();
    }

    #[test]
    fn empty_short_or_wrong_kind_images_are_refused() {
        for b in [&[][..], b"abc", &CUBIN[..40], FATBIN] {
            assert!(
                check_cubin(b).is_err(),
                "{} bytes taken as a cubin",
                b.len()
            );
        }
        for b in [&[][..], b"abc", &FATBIN[..12], CUBIN] {
            assert!(
                check_fatbin(b).is_err(),
                "{} bytes taken as a fatbin",
                b.len()
            );
        }
    }

    #[test]
    fn truncated_images_are_refused() {
        for cut in [64, CUBIN.len() / 2, CUBIN.len() - 1] {
            assert!(check_cubin(&CUBIN[..cut]).is_err(), "cubin cut at {cut}");
        }
        for cut in [16, 100, FATBIN.len() / 2, FATBIN.len() - 1] {
            assert!(check_fatbin(&FATBIN[..cut]).is_err(), "fatbin cut at {cut}");
        }
    }

    #[test]
    fn headers_pointing_outside_are_refused() {
        // A section header table offset past the end.
        let mut c = CUBIN.to_vec();
        c[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(check_cubin(&c).is_err());
        // A fatbin entry whose payload size runs past the declared end.
        let mut f = FATBIN.to_vec();
        f[16 + 8..16 + 16].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(check_fatbin(&f).is_err());
    }

    #[test]
    fn aligned_copy_pads_with_zeros() {
        let v = aligned_copy(b"xyz");
        assert_eq!(v.len(), 2);
        assert_eq!(&bytemuck::cast_slice::<u64, u8>(&v)[..4], b"xyz\0");
    }
}
