//! Which half-precision GEMM kernel runs at which shape: [`gemm_half_plan`], the one place
//! [`gemm_half`](super::gemm_half) makes that choice (issue 34, kernels/TUNING.md "Half-precision
//! GEMM at every shape").
//!
//! | kernel | tile | blocks | where the plan puts it (H100 sweep, kernels/TUNING.md), and why |
//! |---|---|---|---|
//! | `gemm_wgmma_*` ([`HalfPlan::Wide`]) | 128 × 256 | one per tile | empty products only (K = 0 writes zeros); [`gemm_half_with_plan`](super::gemm_half_with_plan) still runs it on request |
//! | `gemm_wgx_128x256_*` | 128 × 256 | persistent | large products (4096³, 6144³, 8192³: 0.97–1.05× cuBLAS on two H200s, where `gemm_wgmma_*` gave 0.81–0.96× in the same runs); small K (16–256) with a large M × N: C's write is the cost (1.03× at 8192 × 8192 × 64, was 0.33×); one wave of tiles (2048³, 1024 × 4096 × 1024) |
//! | `gemm_wgx_128x192_*` | 128 × 192 | persistent | where 128 × 256 and 128 × 128 round badly into waves of one unit per SM: 8192 × 768 × 3072 (192 or 384 tiles for 132 SMs; 256 of 128 × 192, two nearly full waves) |
//! | `gemm_wgx_128x128_*` | 128 × 128 | persistent | odd mid shapes (4095 × 4097 × 1023, 2039 × 1021 × 4093), 512² × 16384 with split-K |
//! | `gemm_wgx_64x128_*` | 64 × 128 | persistent | skinny M (1–64): a 128-tall tile would compute 2–128× the rows; split-K spreads the stream of B over every SM |
//! | `gemm_wgx_128x64_*` | 128 × 64 | persistent | skinny N (1–64), the same for `op(A)` |
//! | `gemm_wgx_64x64_*` | 64 × 64 | persistent | both M and N ≤ 64: 2–23% faster than the plan without it at every output of at most 64 × 64 measured (CUDA graphs on an H200: 64² × 131072 in 128 slices 9.3 µs against 12.2 µs for 128 × 64; 32² × 1024 in 8 slices 4.3 against 4.4); its model efficiency (0.25) is fitted to those runs, where one slice's k tiles cost ~0.19 µs each and splitting long K paid. At a skinny M or N alone the 64 × 128 / 128 × 64 tiles with twice the slices measured faster |
//! | `gemm_wgx_128x64x2_*` ([`HalfTile::T128x64Pair`]) | 128 × 64, clusters of two along N sharing A | persistent | where the plan picks 128 × 64 tiles with one k slice, at least two tile columns, and one wave of blocks: 1000³ (64 clusters), 127 × 8191 × 509. There the operand stream through L2 bounds the product; sharing A by TMA multicast cuts it by a third (1000³ on an H200: 0.67× → 0.82× cuBLAS, graph replays, `kernels/tuning/gemm_wgx_cluster_lab.cu`). Past one wave the two CTAs' lockstep costs more than it saves, so the plan stays with 128 × 64 |
//! | `gemm_mma_*` ([`HalfPlan::MmaSync`]) | 128 × 256 | one per tile | every shape off compute capability 9.0 (or when asked for) |
//! | `gemv_half_rows_*` ([`HalfPlan::Gemv`]) | one output row or column | 8 matrix rows per block (or warps sharing a row) | chosen by [`gemm_half`](super::gemm_half), not by this plan (it depends on the layouts): M = 1 with B transposed or N = 1 with A not, at least [`GEMV_MIN_OUTPUTS`] outputs, every GPU ([`gemv_half_fits`](super::gemv_half_fits)). A matrix times a vector is bound by reading the matrix; this kernel reads rows contiguous in k once with 16-byte loads on every SM, with no split-K reduce: 4096 × 1 × 4096 7.1–7.2 µs against 12.9 with the tiles on an H200, 1.43–1.49× cuBLAS in two sweeps (kernels/TUNING.md, session 56). `gemv_half_cols_*` (the other layouts) runs only when asked for: the tiles measured faster there |
//!
//! Split-K (`splits > 1`): unit (tile, slice z) writes its f32 partial to slab z of a workspace;
//! `gemm_wgx_reduce_*` sums the slabs and rounds once: [`reduce_block`]'s `zl` groups of
//! consecutive slabs, each added in order, then the groups in order (deterministic for a given
//! plan; the plan depends on the shape and the SM count only). Each tile's last unit adding the
//! slabs itself (one launch, a counter per tile) measured 1.7–3.4× slower on an H200
//! (kernels/TUNING.md).
//!
//! The model ([`half_plan_cost`]) is a wave model in seconds: per unit, the larger of its tensor
//! time and the time one SM takes to stream its operand bytes; units in waves of one per SM; a
//! fixed cost per wave for the one-block-per-tile kernel (pipeline fill and an epilogue that
//! overlaps nothing: what 8192 × 8192 × 64 at 0.33× cuBLAS shows) or once for the persistent
//! ones (plus each unit's epilogue); combined with the bytes over DRAM bandwidth as a soft
//! maximum (so that at the bandwidth floor the plan whose SMs finish first still wins); and for
//! split-K the workspace traffic (the reduce's reads of slabs still in L2 at twice DRAM's rate)
//! and one more launch. Its constants are nominal H100 figures, not fitted (but for the slabs'
//! L2 rate, set by one H200 measurement): the choice is relative.

use super::tc_algo::TcAlgo;

/// A tile shape of the persistent, split-K Hopper kernels (`gemm_wgx_<bm>x<bn>_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HalfTile {
    /// 128 × 256 outputs per unit, two consumer warpgroups, 3 stages.
    T128x256,
    /// 128 × 192, two consumer warpgroups (m64n192 each), 4 stages: where the 128 × 256 and
    /// 128 × 128 tiles leave the last wave mostly idle (8192 × 768: 192 or 384 tiles for 132
    /// SMs, 256 of these).
    T128x192,
    /// 128 × 128, two consumer warpgroups, 5 stages.
    T128x128,
    /// 64 × 128, one consumer warpgroup, 8 stages.
    T64x128,
    /// 128 × 64, two consumer warpgroups (m64n64 each), 8 stages.
    T128x64,
    /// 64 × 64, one consumer warpgroup (m64n64), 8 stages: for outputs of at most 64 rows and
    /// 64 columns (a long K over a 64 × 64 output; the table above).
    T64x64,
    /// 128 × 64 as [`T128x64`](Self::T128x64), in clusters of two blocks on adjacent tile
    /// columns that share the A tile (each loads 64 of its rows by TMA multicast into both):
    /// `gemm_wgx_128x64x2_*`, sm_90a clusters. Never picked by the cost search itself;
    /// [`gemm_half_plan`] moves a one-wave 128 × 64 plan with one k slice onto it.
    T128x64Pair,
}

impl HalfTile {
    /// Every tile shape.
    pub const ALL: [HalfTile; 7] = [
        HalfTile::T128x256,
        HalfTile::T128x192,
        HalfTile::T128x128,
        HalfTile::T64x128,
        HalfTile::T128x64,
        HalfTile::T64x64,
        HalfTile::T128x64Pair,
    ];

    /// The tile shapes the cost search compares (every one but the cluster pair).
    const SEARCHED: [HalfTile; 6] = [
        HalfTile::T128x256,
        HalfTile::T128x192,
        HalfTile::T128x128,
        HalfTile::T64x128,
        HalfTile::T128x64,
        HalfTile::T64x64,
    ];

    /// Blocks per cluster (2 for [`T128x64Pair`](Self::T128x64Pair), else 1).
    pub fn cluster(self) -> usize {
        match self {
            HalfTile::T128x64Pair => 2,
            _ => 1,
        }
    }

    /// Rows of a K-major A tile one block loads (its box): half the tile when a pair shares it.
    pub fn a_box_rows(self) -> usize {
        self.bm() / self.cluster()
    }

    /// Blocks the kernel runs with `splits` k slices over an `m × n` output on `sm_count` SMs:
    /// one per unit up to one per SM (for a pair, whole clusters: an even count).
    pub fn grid(self, m: usize, n: usize, splits: usize, sm_count: u32) -> usize {
        let cl = self.cluster();
        let units = m.div_ceil(self.bm()) * n.div_ceil(self.bn()).div_ceil(cl) * splits;
        cl * units.min(sm_count as usize / cl).max(1)
    }

    /// Rows of C per unit.
    pub fn bm(self) -> usize {
        match self {
            HalfTile::T64x128 | HalfTile::T64x64 => 64,
            _ => 128,
        }
    }

    /// Columns of C per unit.
    pub fn bn(self) -> usize {
        match self {
            HalfTile::T128x256 => 256,
            HalfTile::T128x192 => 192,
            HalfTile::T128x64 | HalfTile::T128x64Pair | HalfTile::T64x64 => 64,
            _ => 128,
        }
    }

    /// Shared-memory stages (`GemmWgx<..>::STAGES` in gemm_wgmma_tiles.cu: as many as fit beside
    /// the epilogue buffers).
    pub fn stages(self) -> usize {
        match self {
            HalfTile::T128x256 => 3,
            HalfTile::T128x192 => 4,
            HalfTile::T128x128 => 5,
            _ => 8,
        }
    }

    /// Threads per block: a producer warpgroup and one consumer warpgroup per 64 rows.
    pub fn threads(self) -> u32 {
        128 * (1 + self.bm() as u32 / 64)
    }

    /// Dynamic shared memory per block (`GemmWgx<..>::SMEM`): the stages of (BM + BN) rows of
    /// 128 bytes, an epilogue buffer of 64 rows × (2·BN + 16) bytes per consumer warpgroup, 1 KB
    /// of alignment slack, two mbarriers per stage.
    pub fn smem_bytes(self) -> u32 {
        let stages = self.stages() * (self.bm() + self.bn()) * 128;
        let epilogue = self.bm() / 64 * 64 * (2 * self.bn() + 16);
        (stages + epilogue + 1024 + 2 * self.stages() * 8) as u32
    }

    /// Fraction of an SM's tensor rate the tile's main loop reaches (nominal: two consumers
    /// keep the tensor cores busy while the other waits; one consumer, or m64n64 steps, less).
    fn efficiency(self) -> f64 {
        match self {
            HalfTile::T128x256 => 0.9,
            HalfTile::T128x192 => 0.85,
            HalfTile::T128x128 => 0.8,
            HalfTile::T64x128 => 0.45,
            HalfTile::T128x64 | HalfTile::T128x64Pair => 0.5,
            HalfTile::T64x64 => 0.25,
        }
    }
}

/// How [`gemm_half`](super::gemm_half) runs a product.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HalfPlan {
    /// `gemm_mma_*` (sm_80+ `mma.sync`, 128 × 256 tiles, one block per tile).
    MmaSync,
    /// `gemm_wgmma_*` (sm_90a, 128 × 256 tiles, one block per tile).
    Wide,
    /// `gemm_wgx_*` (sm_90a, persistent): `tile`, `splits` k slices (1: C written directly).
    Tiles {
        /// The tile shape.
        tile: HalfTile,
        /// k slices (split-K when > 1; each slice whole k tiles of 64, none empty).
        splits: usize,
    },
    /// `gemv_half_*` (any supported GPU, no tensor cores): a matrix times a vector, for
    /// `m == 1` or `n == 1` only (f32 sums on the CUDA cores, every byte of the matrix read once).
    Gemv,
}

/// k per pipeline stage of every Hopper kernel (a k tile).
pub const HALF_KTILE: usize = 64;

/// The most k slices a plan may use (the plan also stops at one unit per SM).
pub const HALF_MAX_SPLITS: usize = 256;

/// The largest split-K workspace (f32 partials) a plan may need, in bytes.
pub const HALF_MAX_WORKSPACE: usize = 256 << 20;

/// The fewest outputs (`max(m, n)` with `m == 1` or `n == 1`) for which
/// [`gemm_half`](super::gemm_half) runs [`HalfPlan::Gemv`] ([`gemv_half_fits`](super::gemv_half_fits)):
/// at 2048 × 1 × 8192 it took 8.8 µs on an H200 against 15.7 with the tiles. Below it the row
/// kernel splits each row between warps to fill the GPU, where the split-K tiles may spread a
/// long K further: not measured, so those shapes keep the tiles.
pub const GEMV_MIN_OUTPUTS: usize = 2048;

// The model's constants (nominal H100 SXM figures; only their ratios steer the choice).
/// Dense f16/bf16 tensor FLOP/s of one SM (4096 FLOP per clock at ~1.7 GHz).
const SM_FLOPS: f64 = 7.0e12;
/// Bytes per second one SM streams through TMA with its stages in flight.
const SM_BYTES: f64 = 120e9;
/// Bytes per second one SM's epilogue writes (register stores).
const SM_STORE: f64 = 100e9;
/// DRAM bytes per second.
const DRAM: f64 = 3.0e12;
/// A block's pipeline fill plus an epilogue that overlaps nothing, per wave of `gemm_wgmma_*`.
const WIDE_WAVE: f64 = 5e-6;
/// The persistent kernels' one fill and drain.
const PERSISTENT_FILL: f64 = 3e-6;
/// One more launch (the split-K reduce) and its gap.
const LAUNCH: f64 = 2.5e-6;
/// One round of the reduce's loads (up to 8 slabs in flight per thread, then added in order).
const REDUCE_ROUND: f64 = 0.7e-6;
/// Bytes per second the reduce reads slabs at while they are still in L2 (the product wrote
/// them just before): twice [`DRAM`]. With every slab read at DRAM's rate the model preferred 3
/// slices to 4 at 4096 × 64 × 4096 by 0.4%, where 4 measured 7% faster in CUDA-graph replays
/// (H200, session 56, every plan of the sweep's 45 half-precision shapes timed: this rate
/// changes no other choice there).
const SLAB_L2: f64 = 6.0e12;
/// The largest workspace whose slabs [`SLAB_L2`] applies to (H100 and H200 have 50 MB of L2;
/// past this the slabs are costed at [`DRAM`]).
const SLAB_L2_BYTES: f64 = 32.0 * 1024.0 * 1024.0;

/// k tiles per slice and the slices there really are when `splits` are asked for over `k`.
pub fn half_split(k: usize, splits: usize) -> (usize, usize) {
    let kt = k.div_ceil(HALF_KTILE).max(1);
    let per = kt.div_ceil(splits.clamp(1, kt));
    (per, kt.div_ceil(per))
}

/// The split-K reduce's block `(bx, zl)` for `splits` slabs: `zl` groups of consecutive slabs,
/// each thread adding at most 8 (one round of loads in flight), `zl` the least power of two
/// that allows it (at most 32); `bx` outputs per block row, 256 threads or more per block.
/// The reduce's order of additions depends on `zl`, so on `splits` only: deterministic per plan.
pub fn reduce_block(splits: usize) -> (u32, u32) {
    let zl = splits.div_ceil(8).next_power_of_two().clamp(1, 32) as u32;
    ((256 / zl).max(32), zl)
}

/// The model's time in seconds for `plan` on an `m × n × k` product over `sm_count` SMs
/// (`MmaSync` and `Gemv`: not modelled, infinity; `gemm_half` picks `Gemv` by layout). See the
/// module documentation.
pub fn half_plan_cost(plan: HalfPlan, m: usize, n: usize, k: usize, sm_count: u32) -> f64 {
    let sms = sm_count.max(1) as usize;
    let f = |x: usize| x as f64;
    let (bm, bn, eff, splits, persistent) = match plan {
        HalfPlan::MmaSync | HalfPlan::Gemv => return f64::INFINITY,
        HalfPlan::Wide => (128, 256, 0.9, 1, false),
        HalfPlan::Tiles { tile, splits } => (tile.bm(), tile.bn(), tile.efficiency(), splits, true),
    };
    let (per, splits) = half_split(k, splits);
    let tiles = m.div_ceil(bm) * n.div_ceil(bn);
    let units = tiles * splits;
    let waves = f(units.div_ceil(sms));
    let kk = f(per * HALF_KTILE);
    let compute = 2.0 * f(bm * bn) * kk / (SM_FLOPS * eff);
    let stream = f(bm + bn) * kk * 2.0 / SM_BYTES;
    let unit = compute.max(stream);
    let out_bytes = if splits > 1 { 4 } else { 2 };
    let epilogue = f(bm * bn * out_bytes) / SM_STORE;
    let time = if persistent {
        waves * (unit + epilogue) + PERSISTENT_FILL
    } else {
        waves * (unit + WIDE_WAVE)
    };
    let operands = 2.0 * (f(m) * f(k) + f(k) * f(n));
    let written = if splits > 1 {
        4.0 * f(splits) * f(m) * f(n)
    } else {
        2.0 * f(m) * f(n)
    };
    // A soft maximum (4-norm) of the SMs' time and the DRAM floor: at the floor, as the skinny
    // shapes are, the plan whose SMs finish sooner still wins (in the sweep those operands are
    // L2-resident, well above the DRAM rate), and padded compute still counts.
    let floor = (operands + written) / DRAM;
    let main = (time.powi(4) + floor.powi(4)).sqrt().sqrt();
    if splits > 1 {
        // The reduce: its bytes, and per thread's 8 slabs one dependent round of loads (the
        // slabs in groups over reduce_block's zl thread rows), a second to add the groups.
        let zl = reduce_block(splits).1 as usize;
        let rounds = f(splits.div_ceil(8 * zl) + usize::from(zl > 1)) * REDUCE_ROUND;
        let slab_rate = if written <= SLAB_L2_BYTES {
            SLAB_L2
        } else {
            DRAM
        };
        main + LAUNCH + rounds + written / slab_rate + 2.0 * f(m) * f(n) / DRAM
    } else {
        main
    }
}

/// The plan [`gemm_half`](super::gemm_half) runs an `m × n × k` product with, on the kernel
/// family `family` (as [`tc_choice`](super::tc_choice) resolved it) over `sm_count` SMs:
/// `MmaSync` for that family; on Hopper, [`HalfPlan::Wide`] for an empty product, else the
/// cheapest plan by [`half_plan_cost`] among every [`HalfTile`] with 1..=[`HALF_MAX_SPLITS`]
/// slices (at most one wave of units, a workspace within [`HALF_MAX_WORKSPACE`]). The table of
/// which kernel wins where is in this module's documentation. (The plan does not see the
/// layouts: [`gemm_half`](super::gemm_half) runs [`HalfPlan::Gemv`] instead where
/// [`gemv_half_fits`](super::gemv_half_fits) says so.)
///
/// `Wide` (`gemm_wgmma_*`, one block per tile) is no longer a candidate: until issue 34's second
/// round the plan kept it wherever it had more than one wave of tiles and was within 10% of the
/// best, as the measured kernel at 4096³ and 8192³; measured beside the persistent 128 × 256
/// kernel on two H200s (`kernels/tuning/gemm_wgx_cluster_lab.cu`, kernels/TUNING.md), the
/// persistent kernel was 4–13% faster at 4096³, 6144³ and 8192³, in both layouts measured.
pub fn gemm_half_plan(family: TcAlgo, m: usize, n: usize, k: usize, sm_count: u32) -> HalfPlan {
    if family != TcAlgo::Wgmma {
        return HalfPlan::MmaSync;
    }
    if m == 0 || n == 0 || k == 0 {
        return HalfPlan::Wide; // nothing to multiply (gemm_half writes zeros or nothing)
    }
    let sms = sm_count.max(1) as usize;
    let cost = |p| half_plan_cost(p, m, n, k, sm_count);
    let first = HalfPlan::Tiles {
        tile: HalfTile::T128x256,
        splits: 1,
    };
    let mut best = (cost(first), first);
    for tile in HalfTile::SEARCHED {
        // 64 × 64 only where both sides of the output fit one tile side: at 33 × 4096 × 4096 and
        // 4096 × 64 × 4096 the model preferred it (half the slabs to reduce) but it measured
        // 10–30% slower than 64 × 128 / 128 × 64 with twice the slices (session 52, H200).
        if tile == HalfTile::T64x64 && (m > 64 || n > 64) {
            continue;
        }
        let tiles = (m.div_ceil(tile.bm()) * n.div_ceil(tile.bn())).max(1);
        let kt = k.div_ceil(HALF_KTILE).max(1);
        // Past one wave of units a split only adds workspace traffic.
        let most = (sms.div_ceil(tiles)).clamp(1, HALF_MAX_SPLITS.min(kt));
        for s in 1..=most {
            let (_, splits) = half_split(k, s);
            if splits > 1 && splits * m * n * 4 > HALF_MAX_WORKSPACE {
                break;
            }
            let p = HalfPlan::Tiles { tile, splits };
            let c = cost(p);
            if c < best.0 {
                best = (c, p);
            }
        }
    }
    // One wave of 128 × 64 units, one k slice, two tile columns or more: share A in pairs.
    let pair = HalfTile::T128x64Pair;
    if best.1
        == (HalfPlan::Tiles {
            tile: HalfTile::T128x64,
            splits: 1,
        })
        && n.div_ceil(pair.bn()) >= 2
        && 2 * m.div_ceil(pair.bm()) * n.div_ceil(pair.bn()).div_ceil(2) <= sms
    {
        return HalfPlan::Tiles {
            tile: pair,
            splits: 1,
        };
    }
    best.1
}

/// What a remembered plan is keyed by: (family, m, n, k, SMs).
type PlanKey = (TcAlgo, usize, usize, usize, u32);

/// The most shapes [`cached_half_plan`] remembers per thread.
const PLAN_CACHE_ENTRIES: usize = 1024;

thread_local! {
    /// Plans [`gemm_half_plan`] made on this thread. At a long K its search compares every tile
    /// at up to one split per SM (528 costs at 64 × 64 × 131072, about 20 µs of host time, more
    /// than the GPU's 12 µs), so `gemm_half` asks it once per shape. Cleared when it reaches
    /// [`PLAN_CACHE_ENTRIES`]: a program cycling through more shapes pays the search again,
    /// never unbounded memory.
    static PLANS: std::cell::RefCell<std::collections::HashMap<PlanKey, HalfPlan>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// [`gemm_half_plan`]`(family, m, n, k, sm_count)`, remembered per thread (the same plan: the
/// function is pure).
pub(crate) fn cached_half_plan(
    family: TcAlgo,
    m: usize,
    n: usize,
    k: usize,
    sm_count: u32,
) -> HalfPlan {
    let key = (family, m, n, k, sm_count);
    if let Some(p) = PLANS.with(|c| c.borrow().get(&key).copied()) {
        return p;
    }
    let plan = gemm_half_plan(family, m, n, k, sm_count);
    PLANS.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= PLAN_CACHE_ENTRIES {
            c.clear();
        }
        c.insert(key, plan);
    });
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(m: usize, n: usize, k: usize) -> HalfPlan {
        gemm_half_plan(TcAlgo::Wgmma, m, n, k, 132)
    }

    #[test]
    fn splits_cover_k_with_no_empty_slice() {
        for k in [1, 63, 64, 65, 1000, 4096, 65_536] {
            for s in 1..=70 {
                let (per, real) = half_split(k, s);
                let kt = k.div_ceil(64);
                assert!(per >= 1 && real >= 1 && real <= s.max(1));
                assert!((real - 1) * per < kt && real * per >= kt, "k={k} s={s}");
            }
        }
    }

    #[test]
    fn large_squares_run_the_persistent_wide_tile() {
        let wide = HalfPlan::Tiles {
            tile: HalfTile::T128x256,
            splits: 1,
        };
        for n in [4096, 6144, 8192] {
            assert_eq!(plan(n, n, n), wide, "{n}^3");
        }
    }

    #[test]
    fn skinny_and_small_k_shapes_move_off_it() {
        for (m, n, k) in [
            (8192, 8192, 64),
            (33, 4096, 4096),
            (4096, 33, 4096),
            (1, 4096, 4096),
            (256, 256, 65_536),
            (64, 64, 131_072),
            (1000, 1000, 1000),
        ] {
            assert_ne!(plan(m, n, k), HalfPlan::Wide, "{m}x{n}x{k}");
        }
        assert!(matches!(
            plan(8192, 8192, 64),
            HalfPlan::Tiles { splits: 1, .. }
        ));
        assert!(matches!(
            plan(256, 256, 65_536),
            HalfPlan::Tiles { splits: 2.., .. }
        ));
        assert!(matches!(
            plan(33, 4096, 4096),
            HalfPlan::Tiles {
                tile: HalfTile::T64x128,
                ..
            }
        ));
    }

    #[test]
    fn the_plan_never_picks_the_matrix_vector_kernels() {
        // gemm_half does, knowing the layouts (ops::gemv_half_fits).
        for (m, n) in [(1, 4096), (4096, 1)] {
            assert_ne!(plan(m, n, 4096), HalfPlan::Gemv);
        }
        assert!(half_plan_cost(HalfPlan::Gemv, 4096, 1, 4096, 132).is_infinite());
    }

    #[test]
    fn skinny_n_fills_the_sms_with_slices() {
        // 32 tiles of 128 x 64: 4 slices (128 units) measured 7% faster than 3 in CUDA-graph
        // replays on an H200 (session 56), the reduce reading slabs still in L2.
        assert_eq!(
            plan(4096, 64, 4096),
            HalfPlan::Tiles {
                tile: HalfTile::T128x64,
                splits: 4
            }
        );
    }

    #[test]
    fn the_64x64_tile_only_where_both_sides_fit_it() {
        assert!(matches!(
            plan(64, 64, 131_072),
            HalfPlan::Tiles {
                tile: HalfTile::T64x64,
                splits: 2..
            }
        ));
        for (m, n, k) in [
            (64, 4096, 4096),
            (33, 4096, 4096),
            (4096, 64, 4096),
            (65, 64, 8192),
        ] {
            assert!(
                !matches!(
                    plan(m, n, k),
                    HalfPlan::Tiles {
                        tile: HalfTile::T64x64,
                        ..
                    }
                ),
                "{m}x{n}x{k}"
            );
        }
    }

    #[test]
    fn empty_products_do_not_panic() {
        for (m, n, k) in [(0, 4, 2), (3, 0, 2), (3, 4, 0), (0, 0, 0)] {
            assert_eq!(plan(m, n, k), HalfPlan::Wide);
            assert!(half_plan_cost(HalfPlan::Wide, m, n, k, 132).is_finite());
        }
        // No SM count reported: still a plan.
        let _ = gemm_half_plan(TcAlgo::Wgmma, 5, 5, 5, 0);
    }

    #[test]
    fn other_families_run_mma_sync() {
        assert_eq!(
            gemm_half_plan(TcAlgo::MmaSync, 33, 4096, 4096, 132),
            HalfPlan::MmaSync
        );
    }

    #[test]
    fn one_wave_128x64_plans_share_a_in_pairs() {
        let pair = HalfPlan::Tiles {
            tile: HalfTile::T128x64Pair,
            splits: 1,
        };
        assert_eq!(plan(1000, 1000, 1000), pair);
        // One tile column: nobody to pair with.
        assert_ne!(plan(4096, 33, 4096), pair);
        for (m, n, k) in [(4096, 4096, 4096), (33, 4096, 4096), (64, 64, 131_072)] {
            assert_ne!(plan(m, n, k), pair, "{m}x{n}x{k}");
        }
        // Whole clusters, at most one block per SM.
        assert_eq!(HalfTile::T128x64Pair.grid(1000, 1000, 1, 132), 128);
        assert_eq!(HalfTile::T128x64Pair.grid(1000, 65, 1, 132), 16);
        assert_eq!(HalfTile::T128x64Pair.grid(10_000, 10_000, 1, 132), 132);
        assert_eq!(HalfTile::T128x64Pair.grid(1, 1, 1, 1), 2);
        assert_eq!(HalfTile::T128x64.grid(1000, 1000, 1, 132), 128);
    }

    #[test]
    fn the_128x192_tile_where_the_others_leave_a_wave_idle() {
        let t192 = HalfPlan::Tiles {
            tile: HalfTile::T128x192,
            splits: 1,
        };
        // 8192 x 768: 192 tiles of 128 x 256 (1.45 waves of 132), 384 of 128 x 128 (2.9),
        // 256 of 128 x 192 (1.94).
        assert_eq!(plan(8192, 768, 3072), t192);
        // Where 128 x 256 fills its waves, it stays.
        for n in [2048, 4096, 8192] {
            assert_ne!(plan(n, n, n), t192, "{n}^3");
        }
        assert_eq!(
            HalfTile::T128x192.smem_bytes(),
            4 * 320 * 128 + 2 * 64 * 400 + 1024 + 64
        );
    }

    #[test]
    fn smem_fits_one_block_per_sm() {
        for t in HalfTile::ALL {
            assert!(t.smem_bytes() <= 227 * 1024, "{t:?}");
        }
        assert_eq!(
            HalfTile::T128x256.smem_bytes(),
            3 * 384 * 128 + 2 * 64 * 528 + 1024 + 48
        );
    }

    #[test]
    fn cached_plans_are_the_plans() {
        for (m, n, k) in [(64, 64, 131_072), (1000, 1000, 1000), (7, 4096, 4096)] {
            for _ in 0..2 {
                assert_eq!(cached_half_plan(TcAlgo::Wgmma, m, n, k, 132), plan(m, n, k));
            }
        }
        assert_eq!(
            cached_half_plan(TcAlgo::MmaSync, 64, 64, 64, 132),
            HalfPlan::MmaSync
        );
    }

    #[test]
    fn reduce_blocks_fit_and_take_one_round() {
        for splits in 1..=HALF_MAX_SPLITS {
            let (bx, zl) = reduce_block(splits);
            assert!(
                bx % 32 == 0 && bx * zl <= 1024 && bx * zl >= 256,
                "{splits}"
            );
            assert!(splits.div_ceil(zl as usize) <= 8, "{splits}");
        }
        assert_eq!(reduce_block(8), (256, 1));
        assert_eq!(reduce_block(128), (32, 16));
    }
}
