//! The records `thread_hierarchy` writes.

/// The record word holding the SM id, which only the GPU knows (the reference leaves it 0).
pub const SMID_WORD: usize = 6;

/// The 8-word records of every thread of a 2-D launch, indexed by linear thread id `g`:
/// `[blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, warp, lane, 0 (smid), g]`.
pub fn thread_hierarchy(grid: (u32, u32), block: (u32, u32)) -> Vec<u32> {
    let per_block = block.0 * block.1;
    let mut out = vec![0u32; 8 * (grid.0 * grid.1 * per_block) as usize];
    for by in 0..grid.1 {
        for bx in 0..grid.0 {
            for ty in 0..block.1 {
                for tx in 0..block.0 {
                    let t = ty * block.0 + tx;
                    let g = (by * grid.0 + bx) * per_block + t;
                    let rec = &mut out[8 * g as usize..8 * g as usize + 8];
                    rec.copy_from_slice(&[bx, by, tx, ty, t / 32, t % 32, 0, g]);
                }
            }
        }
    }
    out
}
