//! How a list of tensors is cut into multi-tensor launches (pure host logic, tested without a
//! GPU): every tensor gets a block count chosen from its length alone, tensors keep their
//! order, and a launch takes tensors until its table is full.

use crate::{Error, Result};

/// Elements per block of the elementwise multi-tensor kernels (256 threads, 8 elements each
/// in one pass of the grid-stride loop).
pub const MT_ELEMS_PER_BLOCK: usize = 2048;

/// The most blocks one tensor gets in one launch (larger tensors loop, grid-stride, over
/// their blocks): with at most 192 tensors a launch stays far below the 2^31 − 1 grid limit.
pub const MT_MAX_BLOCKS_PER_TENSOR: usize = 1 << 16;

/// The blocks of an elementwise kernel (fill, scale, cast, Adam) for a tensor of `n`
/// elements: `ceil(n / 2048)`, at most 2^16; 0 for an empty tensor (left out of the table).
pub fn elementwise_blocks(n: usize) -> usize {
    n.div_ceil(MT_ELEMS_PER_BLOCK).min(MT_MAX_BLOCKS_PER_TENSOR)
}

/// One launch: which tensors (indices into the caller's list, increasing) and where each
/// one's blocks start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtLaunch {
    /// The tensors of this launch, in the caller's order.
    pub tensors: Vec<usize>,
    /// `block_start[k]` is the first block of `tensors[k]`; one more entry, the launch's total.
    pub block_start: Vec<u32>,
}

impl MtLaunch {
    /// The launch's grid (blocks of all its tensors).
    pub fn blocks(&self) -> u32 {
        self.block_start.last().copied().unwrap_or(0)
    }
}

/// The largest grid (`gridDim.x`) a launch may have.
const MAX_GRID: usize = i32::MAX as usize;

/// Cuts tensors of lengths `lens` into launches of at most `cap` tensors, tensor `i` getting
/// `blocks(lens[i])` blocks; a tensor with 0 blocks is left out. Deterministic in `lens`
/// alone. [`Error::TooLarge`] if one tensor alone would need more than 2^31 − 1 blocks;
/// [`Error::Invalid`] for a capacity of 0.
pub fn plan(lens: &[usize], cap: usize, blocks: impl Fn(usize) -> usize) -> Result<Vec<MtLaunch>> {
    const OP: &str = "multi-tensor plan";
    if cap == 0 {
        return Err(Error::Invalid {
            op: OP,
            problem: "a table capacity of 0".into(),
        });
    }
    let mut out = Vec::new();
    let mut cur = MtLaunch {
        tensors: Vec::new(),
        block_start: vec![0],
    };
    for (i, &n) in lens.iter().enumerate() {
        let b = blocks(n);
        if b == 0 {
            continue;
        }
        if b > MAX_GRID {
            return Err(Error::TooLarge {
                op: OP,
                what: "blocks of one tensor",
                value: b as u128,
                max: MAX_GRID as u128,
            });
        }
        let total = cur.blocks() as usize;
        if cur.tensors.len() == cap || total + b > MAX_GRID {
            out.push(std::mem::replace(
                &mut cur,
                MtLaunch {
                    tensors: Vec::new(),
                    block_start: vec![0],
                },
            ));
        }
        let start = cur.blocks() as usize;
        cur.tensors.push(i);
        // At most MAX_GRID (checked above), so it fits a u32.
        cur.block_start.push((start + b) as u32);
    }
    if !cur.tensors.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::sumsq_parts;

    /// Every tensor with blocks appears once, in order; starts increase by each tensor's
    /// blocks; no launch exceeds the capacity.
    fn check(lens: &[usize], cap: usize, blocks: fn(usize) -> usize, launches: &[MtLaunch]) {
        let mut seen: Vec<usize> = Vec::new();
        for l in launches {
            assert!(!l.tensors.is_empty() && l.tensors.len() <= cap);
            assert_eq!(l.block_start.len(), l.tensors.len() + 1);
            assert_eq!(l.block_start[0], 0);
            for (k, &i) in l.tensors.iter().enumerate() {
                assert_eq!(
                    (l.block_start[k + 1] - l.block_start[k]) as usize,
                    blocks(lens[i])
                );
            }
            seen.extend(&l.tensors);
        }
        let want: Vec<usize> = (0..lens.len()).filter(|&i| blocks(lens[i]) > 0).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn empty_tensors_are_left_out_of_elementwise_launches() {
        let lens = [0, 1, 0, 2047, 2048, 2049, 0];
        let p = plan(&lens, 192, elementwise_blocks).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].tensors, [1, 3, 4, 5]);
        assert_eq!(p[0].block_start, [0, 1, 2, 3, 5]);
        check(&lens, 192, elementwise_blocks, &p);
        assert!(plan(&[0, 0], 4, elementwise_blocks).unwrap().is_empty());
        assert!(plan(&[], 4, elementwise_blocks).unwrap().is_empty());
    }

    #[test]
    fn more_tensors_than_a_table_holds_take_several_launches() {
        // 150 tensors of odd lengths (GPT-2 124M has 148) in tables of 64: 64 + 64 + 22.
        let lens: Vec<usize> = (0..150).map(|i| (i * 7919) % 5000 + (i % 3)).collect();
        let p = plan(&lens, 64, elementwise_blocks).unwrap();
        check(&lens, 64, elementwise_blocks, &p);
        let sizes: Vec<usize> = p.iter().map(|l| l.tensors.len()).collect();
        let nonempty = lens.iter().filter(|&&n| n > 0).count();
        assert_eq!(sizes.iter().sum::<usize>(), nonempty);
        assert!(
            sizes[..sizes.len() - 1].iter().all(|&s| s == 64),
            "{sizes:?}"
        );
        // A capacity of 1 is one launch per non-empty tensor.
        assert_eq!(plan(&lens, 1, elementwise_blocks).unwrap().len(), nonempty);
    }

    #[test]
    fn sum_of_squares_gives_every_tensor_its_per_tensor_partials() {
        // sumsq_parts: at least one block, even for an empty tensor (it writes a 0), so the
        // partial buffer is laid out exactly as the per-tensor kernels lay it out.
        let lens = [0, 1, 4096, 4097, 5 << 20, 3];
        let p = plan(&lens, 192, sumsq_parts).unwrap();
        assert_eq!(p.len(), 1);
        check(&lens, 192, sumsq_parts, &p);
        let total: usize = lens.iter().map(|&n| sumsq_parts(n)).sum();
        assert_eq!(p[0].blocks() as usize, total);
        assert_eq!(p[0].block_start, [0, 1, 2, 3, 5, 1029, 1030]);
    }

    #[test]
    fn huge_tensors_are_capped_and_a_capacity_of_zero_is_an_error() {
        assert_eq!(elementwise_blocks(usize::MAX), MT_MAX_BLOCKS_PER_TENSOR);
        let lens = [usize::MAX / 2; 3];
        let p = plan(&lens, 192, elementwise_blocks).unwrap();
        assert_eq!(p[0].blocks() as usize, 3 * MT_MAX_BLOCKS_PER_TENSOR);
        assert!(matches!(
            plan(&[1], 0, elementwise_blocks),
            Err(Error::Invalid { .. })
        ));
        assert!(matches!(
            plan(&[1], 4, |_| usize::MAX),
            Err(Error::TooLarge { .. })
        ));
        // Launches split on the grid limit too.
        let p = plan(&[1, 1, 1], 192, |_| MAX_GRID / 2 + 1).unwrap();
        assert_eq!(p.len(), 3);
    }
}
