//! The thread-hierarchy introspection kernel.

use super::*;

pub(crate) fn thread_hierarchy() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &(grid, block) in &[
        ((1u32, 1u32), (1u32, 1u32)),
        ((3, 2), (32, 4)),
        ((2, 3), (7, 5)),
        ((5, 1), (256, 1)),
        ((1, 1), (32, 32)),
    ] {
        let want = reference::thread_hierarchy(grid, block);
        let mut o = poisoned::<u32>(&s, want.len(), 1)?;
        ops::thread_hierarchy(&k, &s, &mut o.slice_mut(1..)?, grid, block)?;
        let got = download(&s, &o, 1)?;
        ensure!(got.len() == want.len(), "record count");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if i % 8 != reference::SMID_WORD {
                ensure!(
                    g == w,
                    "thread_hierarchy {grid:?} {block:?}: word {i} is {g}, expected {w}"
                );
            }
        }
    }
    let mut small = s.alloc_zeros::<u32>(7)?;
    let r = ops::thread_hierarchy(&k, &s, &mut small, (1, 1), (1, 1));
    ensure!(
        matches!(r, Err(Error::Length { .. })),
        "short output must fail: {r:?}"
    );
    Ok(())
}
