//! How the tensor-core attention backward computes dq ([`AttentionBwdDq`]), the one place
//! [`AttentionBwdDq::Auto`] chooses ([`attention_bwd_dq_choice`]), and the one-pass paths' f32
//! workspace ([`attention_bwd_dq_workspace_len`]: the dq accumulator, then the ordered pass's
//! counters).

use super::AttentionShape;
use crate::{Error, Result};

/// The environment variable [`AttentionBwdDq::Auto`] reads first: `atomic` (or `fused`) picks
/// [`AttentionBwdDq::Atomic`], `ordered` [`AttentionBwdDq::Ordered`], `separate` (or
/// `deterministic`) [`AttentionBwdDq::Separate`] (case-insensitive; other values are ignored).
/// Read at every call, so a benchmark can flip it between runs of the same program.
pub const ATTENTION_BWD_DQ_ENV: &str = "CUDA_STACK_ATTN_BWD_DQ";

/// How the tensor-core backward computes dq (the SIMT backward always runs its own dq kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AttentionBwdDq {
    /// [`attention_bwd_dq_choice`] decides ([`ATTENTION_BWD_DQ_ENV`] first, then the shape);
    /// without a dq workspace, [`AttentionBwdDq::Separate`]. Every choice it makes is
    /// deterministic: `Separate` or, on the wgmma kernels, `Ordered`.
    #[default]
    Auto,
    /// dq's own kernel beside the dk/dv kernel (`attn_bwd_dq_mma_*` / `attn_bwd_dq_wgmma_*`):
    /// dq's kernel recomputes S, P and dP per query tile (3 of its GEMMs repeat the dk/dv
    /// kernel's work); no atomics, the same bits every run.
    Separate,
    /// One pass over the key blocks computes dk, dv and each (query tile, key block)'s share of
    /// dq, added into an f32 workspace ([`attention_bwd_dq_workspace_len`], zeroed first):
    /// `attn_bwd_fused_mma_*` (FlashAttention-2's backward, `red.global.add.f32`) or, on
    /// compute capability 9.0, `attn_bwd_fused_wgmma_*` (FlashAttention-3's: bulk reductions of
    /// each tile's dQ from shared memory); `attn_bwd_dq_convert_*` then scales and rounds it into
    /// dq. The order of the adds varies from run to run, so **dq is not bitwise reproducible**
    /// (it differs in the last bits; dk and dv are the same bits as with
    /// [`AttentionBwdDq::Separate`]).
    Atomic,
    /// The wgmma one pass (compute capability 9.0: `attn_bwd_fused_ord_wgmma_*`) with each query
    /// tile's adds in key-tile order: a key tile adds its block once the tiles before it have
    /// (a counter per (b, h, query tile) in the workspace's tail; CTAs take their tiles from a
    /// counter, so the waits end whatever number of CTAs runs at once). dq is the same bits on
    /// every run (not the same bits as `Separate`'s: another summation order); dk and dv are
    /// `Separate`'s bits. Elsewhere (the mma.sync and SIMT kernels) an explicit `Ordered` is
    /// [`Error::Unsupported`](crate::Error::Unsupported); where the wgmma kernels were chosen, a
    /// problem without a query or a key (nothing to add) runs the two kernels.
    Ordered,
}

/// The rows of the smallest query tile of the one-pass kernels (`ABF_BM(128)`; 128 at D = 64):
/// the ordered pass's counters are sized for it.
const ORDER_TILE_ROWS: usize = 64;

/// The fewest keys at which [`AttentionBwdDq::Auto`] takes [`AttentionBwdDq::Ordered`] for a head
/// dimension of at most 64 (causal or not).
pub const ATTENTION_BWD_ORDERED_MIN_KEYS_D64: usize = 4096;

/// The fewest keys at which [`AttentionBwdDq::Auto`] takes [`AttentionBwdDq::Ordered`] for a head
/// dimension of 65 to 128 without a causal mask (with one it never does).
pub const ATTENTION_BWD_ORDERED_MIN_KEYS_D128: usize = 8192;

/// The choice [`AttentionBwdDq::Auto`] makes for a problem that fits the tensor cores, on a
/// device of `sm_count` SMs: [`ATTENTION_BWD_DQ_ENV`] when set to a known value, else a
/// deterministic path: [`AttentionBwdDq::Ordered`] for head dimensions up to 64 with at least
/// [`ATTENTION_BWD_ORDERED_MIN_KEYS_D64`] keys, and up to 128 without a causal mask with at least
/// [`ATTENTION_BWD_ORDERED_MIN_KEYS_D128`] keys; [`AttentionBwdDq::Separate`] elsewhere. The op
/// runs `Ordered` only on the wgmma kernels (compute capability 9.0) and `Separate` in its place
/// on the others.
///
/// Measured on an H200 (sessions 59 and 60, kernels/TUNING.md): the ordered pass's backward
/// takes 0.83–0.85× the two kernels' time at 2 × 12 × 4097 × 64 (full and causal; forward +
/// backward through `attention_bench` 976 against 1074 µs full, 587 against 602 causal) but
/// 1.05–1.17× at 512 and 1024 keys: its adds wait for each other, which long sequences hide. At
/// D = 128 (sessions 65 and 66, forward + backward in CUDA-graph replays, in turn with the two
/// kernels): full attention 0.955–0.96× the time at 1 × 16 × 16384 and 0.96–0.97× at
/// 2 × 16 × 8192, 1.5% slower at 4 × 16 × 4096, 2–10% slower at 2048 keys and fewer; causal within
/// 1.5% either way at every length, so it stays on the two kernels. The atomic one pass is faster
/// still at 11 of `attention_bench`'s 14 shapes (forward + backward 0.917–0.921× PyTorch's SDPA
/// against 0.890–0.893× with the two kernels), but dq then changes in its last bits from run to
/// run — cuDNN's backward, the comparison's other side, is just as nondeterministic — so `Auto`
/// never takes it. `sm_count` is kept for a rule that needs it. Explicit choices are returned
/// unchanged. This is the one place the rule lives.
pub fn attention_bwd_dq_choice(
    sm_count: u32,
    shape: &AttentionShape,
    dq: AttentionBwdDq,
) -> AttentionBwdDq {
    if dq != AttentionBwdDq::Auto {
        return dq;
    }
    if let Ok(v) = std::env::var(ATTENTION_BWD_DQ_ENV) {
        match v.trim().to_ascii_lowercase().as_str() {
            "atomic" | "fused" => return AttentionBwdDq::Atomic,
            "ordered" => return AttentionBwdDq::Ordered,
            "separate" | "deterministic" => return AttentionBwdDq::Separate,
            _ => {}
        }
    }
    let _ = sm_count;
    let long_d64 = shape.head_dim <= 64 && shape.kv_len >= ATTENTION_BWD_ORDERED_MIN_KEYS_D64;
    let long_full_d128 = shape.head_dim <= 128
        && !shape.causal
        && shape.kv_len >= ATTENTION_BWD_ORDERED_MIN_KEYS_D128;
    if long_d64 || long_full_d128 {
        AttentionBwdDq::Ordered
    } else {
        AttentionBwdDq::Separate
    }
}

/// The f32 elements of the dq workspace the one-pass paths ([`AttentionBwdDq::Atomic`],
/// [`AttentionBwdDq::Ordered`]) need: the `B·H·Nq·D` accumulator, rounded up to a multiple of
/// 4 (16 bytes), then `1 + B·H·ceil(Nq / 64)` 32-bit words for the ordered pass's counters
/// ([`Error::TooLarge`] when that overflows).
pub fn attention_bwd_dq_workspace_len(shape: &AttentionShape) -> Result<usize> {
    let acc = dq_acc_len(shape)?;
    let counters = order_words(shape)?;
    acc.div_ceil(4)
        .checked_mul(4)
        .and_then(|a| a.checked_add(counters))
        .ok_or_else(|| too_large("the dq workspace (B·H·Nq·D and the ordered pass's counters)"))
}

/// The accumulator's elements at the workspace's start: `B·H·Nq·D`.
pub(super) fn dq_acc_len(shape: &AttentionShape) -> Result<usize> {
    super::product(
        "scaled_dot_product_attention_backward",
        "B·H·Nq·D",
        &[shape.batch, shape.heads, shape.q_len, shape.head_dim],
    )
}

/// The ordered pass's counters: the tile counter, then one per (b, h, query tile).
pub(super) fn order_words(shape: &AttentionShape) -> Result<usize> {
    super::product(
        "scaled_dot_product_attention_backward",
        "B·H·ceil(Nq / 64)",
        &[
            shape.batch,
            shape.heads,
            shape.q_len.div_ceil(ORDER_TILE_ROWS),
        ],
    )?
    .checked_add(1)
    .ok_or_else(|| too_large("B·H·ceil(Nq / 64) + 1"))
}

/// Where the counters start in the workspace: the accumulator rounded up to 16 bytes.
pub(super) fn order_offset(shape: &AttentionShape) -> Result<usize> {
    Ok(dq_acc_len(shape)?.div_ceil(4) * 4)
}

fn too_large(what: &'static str) -> Error {
    super::too_large("scaled_dot_product_attention_backward", what)
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::causal_test_shape as shape;

    #[test]
    fn explicit_choices_pass_through() {
        for d in [
            AttentionBwdDq::Separate,
            AttentionBwdDq::Atomic,
            AttentionBwdDq::Ordered,
        ] {
            assert_eq!(attention_bwd_dq_choice(132, &shape(1, 1, 1, 1), d), d);
            assert_eq!(attention_bwd_dq_choice(1, &shape(64, 64, 4096, 4096), d), d);
        }
    }

    fn d128(mut sh: AttentionShape) -> AttentionShape {
        sh.head_dim = 128;
        sh
    }

    #[test]
    fn auto_is_deterministic_and_orders_long_d64_and_long_full_d128() {
        if std::env::var_os(ATTENTION_BWD_DQ_ENV).is_some() {
            return; // the variable decides; nothing of the shape rule to check
        }
        let auto = |sms, sh| attention_bwd_dq_choice(sms, &sh, AttentionBwdDq::Auto);
        for (sms, sh) in [
            (132, shape(16, 12, 1024, 1024)),
            (132, shape(2, 33, 1, 65)),
            (132, shape(1, 1, 0, 0)),
            (0, shape(1, 1, 1, 1)),
            (132, d128(shape(1, 131, 8192, 8192))),
            (132, shape(2, 12, 4097, 4095)),
        ] {
            assert_eq!(auto(sms, sh), AttentionBwdDq::Separate, "{sh:?}");
        }
        let full = |mut sh: AttentionShape| {
            sh.causal = false;
            sh
        };
        for sh in [
            d128(full(shape(4, 16, 4096, 4096))),
            d128(full(shape(1, 1, 1, 8191))),
            d128(shape(1, 16, 16384, 16384)),
        ] {
            assert_eq!(auto(132, sh), AttentionBwdDq::Separate, "{sh:?}");
        }
        for sh in [
            shape(2, 12, 4097, 4097),
            shape(1, 1, 1, 4096),
            full(shape(2, 12, 4097, 4097)),
            d128(full(shape(2, 16, 8192, 8192))),
            d128(full(shape(1, 16, 16384, 16384))),
            d128(full(shape(1, 1, 1, 8192))),
        ] {
            assert_eq!(auto(132, sh), AttentionBwdDq::Ordered, "{sh:?}");
        }
        let mut d256 = full(shape(1, 1, 8192, 8192));
        d256.head_dim = 256;
        assert_eq!(auto(132, d256), AttentionBwdDq::Separate, "{d256:?}");
    }

    #[test]
    fn the_workspace_holds_the_accumulator_then_the_counters() {
        let sh = shape(2, 3, 65, 7);
        let acc = 2 * 3 * 65 * sh.head_dim;
        assert_eq!(dq_acc_len(&sh).unwrap(), acc);
        assert_eq!(order_offset(&sh).unwrap() % 4, 0);
        assert!(order_offset(&sh).unwrap() >= acc);
        assert_eq!(order_words(&sh).unwrap(), 1 + 2 * 3 * 2);
        assert_eq!(
            attention_bwd_dq_workspace_len(&sh).unwrap(),
            order_offset(&sh).unwrap() + order_words(&sh).unwrap()
        );
        let huge = shape(usize::MAX / 2, 4, 1, 1);
        assert!(attention_bwd_dq_workspace_len(&huge).is_err());
    }
}
