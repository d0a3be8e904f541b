//! Random numbers: Philox's known answer (CPU), uniform and normal fills.

use super::*;

pub(crate) fn philox_known_answer() -> TestResult {
    // Random123's known-answer test for Philox4x32-10 (counter 0, key 0).
    ensure!(
        reference::philox4x32_10(0, 0) == [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
        "Philox4x32-10 KAT mismatch: {:08x?}",
        reference::philox4x32_10(0, 0)
    );
    Ok(())
}

pub(crate) fn random() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let seed = 0x0123_4567_89ab_cdef;
    for &n in SIZES {
        for &offset in &[0u64, 1, 2, 3, 5, (1u64 << 34) + 7] {
            let off = (offset % 2) as usize; // view offset follows the stream offset's parity
            let tag = format!("n={n} offset={offset} view_off={off}");
            let mut o = poisoned::<u32>(&s, n, off)?;
            ops::philox_u32(&k, &s, &mut o.slice_mut(off..)?, seed, offset)?;
            check_bits(
                &format!("philox_u32 {tag}"),
                &download(&s, &o, off)?,
                &reference::philox_u32(n, seed, offset),
            )?; // exact
            let mut o = poisoned::<f32>(&s, n, off)?;
            ops::fill_uniform(&k, &s, &mut o.slice_mut(off..)?, seed, offset)?;
            check_exact(
                &format!("fill_uniform {tag}"),
                &download(&s, &o, off)?,
                &reference::fill_uniform(n, seed, offset),
            )?; // exact
            let mut o = poisoned::<f32>(&s, n, off)?;
            ops::fill_normal(&k, &s, &mut o.slice_mut(off..)?, seed, offset)?;
            let got: Vec<f64> = download(&s, &o, off)?
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            let want: Vec<f64> = reference::fill_normal(n, seed, offset)
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            // logf/sincospif: 4e-6 relative + 1e-6 absolute.
            check_close(&format!("fill_normal {tag}"), &got, &want, |i| {
                4e-6 * want[i].abs() + 1e-6
            })?;
        }
    }
    // Counter-based: a window of the stream equals the same positions of a longer run.
    let mut long = s.alloc_zeros::<u32>(100)?;
    ops::philox_u32(&k, &s, &mut long, 7, 0)?;
    let mut window = s.alloc_zeros::<u32>(50)?;
    ops::philox_u32(&k, &s, &mut window, 7, 37)?;
    ensure!(
        s.clone_dtoh(&long)?[37..87] == s.clone_dtoh(&window)?[..],
        "philox windows must agree"
    );
    Ok(())
}
