//! The embedding lookup and its deterministic backward (`cuda/embedding.cu`): f32, f64, f16
//! and bf16 tables, i32 ids.

use crate::dispatch;
use crate::launch::{check_len, check_matrix, elems, to_i32, to_int_dim};
use crate::{Element, Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// Tokens per chunk of the backward's stable sort (the rank kernel's block size).
const CHUNK: usize = 256;

// Extents are capped at 2^30 (`to_int_dim`, `launch::MAX_INT_DIM`), because of the steps below.
// The most tokens, vocabulary rows and columns the kernels take. Their `int` loop counters
// step by less than 2^30 (tokens: `gridDim.x · 8 <= 65535 · 8`; ids: `gridDim.y <= 65535` or
// 256; columns: 32 or 256) from a value below this bound, so they stay below 2^31, as do the
// sort's positions (at most n) and `(vocab + 1023) / 1024`.

/// The i32 workspace [`embedding_bwd`] needs for `n` tokens and a `[vocab, C]` table:
/// `ceil(n / 256) · vocab` per-chunk counts, plus `2n + 2·vocab + 1` (ranks, order, totals,
/// offsets). E.g. 1.6 M i32 (6.5 MB) for GPT-2's 8192 tokens of a 50304-word vocabulary.
pub fn embedding_workspace_len(n: usize, vocab: usize) -> Result<usize> {
    const OP: &str = "embedding_backward";
    let counts = elems(OP, n.div_ceil(CHUNK), vocab)?;
    let rest = (n as u128) * 2 + (vocab as u128) * 2 + 1;
    usize::try_from(counts as u128 + rest).map_err(|_| Error::TooLarge {
        op: OP,
        what: "workspace",
        value: counts as u128 + rest,
        max: usize::MAX as u128,
    })
}

/// `out[i] = weight[ids[i]]` (rows of the `[vocab, cols]` table) for the `n` ids. An id outside
/// `0..vocab` gives a NaN row: the device cannot report it without a host round trip, so check
/// ids where they come from the host. One warp per token, 16-byte packets when aligned. `n`,
/// `vocab` and `cols` are at most 2^30 each ([`Error::TooLarge`] otherwise).
#[allow(clippy::too_many_arguments)]
pub fn embedding_fwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    weight: &DeviceSlice<T>,
    ids: &DeviceSlice<i32>,
    out: &mut DeviceSlice<T>,
    n: usize,
    vocab: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "embedding";
    let kernel = dispatch::embedding_fwd::<T>(k)?;
    check_matrix(OP, "weight", weight.len(), vocab, cols)?;
    check_len(OP, "ids", ids.len(), n)?;
    check_matrix(OP, "out", out.len(), n, cols)?;
    let (nn, v, c) = (
        to_int_dim(OP, "n", n)?,
        to_int_dim(OP, "vocab", vocab)?,
        to_int_dim(OP, "cols", cols)?,
    );
    if n == 0 || cols == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(n.div_ceil(8).clamp(1, 65535) as u32, 256);
    // SAFETY: token t < n reads ids[t] and, only when 0 <= id < vocab, row id of the checked
    // [vocab, cols] weight; it writes row t of the checked [n, cols] out. n, cols <= 2^30
    // (checked): the token counter steps by gridDim.x · 8 < 2^20 and the column counters by
    // 32 from below those bounds, so no `int` counter passes 2^31 − 1.
    unsafe { kernel.launch(s, &cfg, weight, ids, out, nn, v, c) }?;
    Ok(())
}

/// The gradient of [`embedding_fwd`] with respect to the table: `dweight[v] = Σ dy[t]` over
/// the tokens `t` with `ids[t] == v`, in increasing `t` (unused ids get zeros; ids outside
/// `0..vocab` are skipped). No float atomics: a stable counting sort of the tokens by id
/// (chunks of 256 tokens, ranks within a chunk, per-chunk counts scanned per id, offsets
/// scanned over ids) and one ordered sum per id — bit-identical on every run. `workspace` has
/// [`embedding_workspace_len`] elements. `n`, `vocab` and `cols` are at most 2^30 each
/// ([`Error::TooLarge`] otherwise).
#[allow(clippy::too_many_arguments)]
pub fn embedding_bwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    ids: &DeviceSlice<i32>,
    dy: &DeviceSlice<T>,
    dweight: &mut DeviceSlice<T>,
    workspace: &mut DeviceSlice<i32>,
    n: usize,
    vocab: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "embedding_backward";
    let ksum = dispatch::embedding_bwd_sum::<T>(k)?;
    check_len(OP, "ids", ids.len(), n)?;
    check_matrix(OP, "dy", dy.len(), n, cols)?;
    check_matrix(OP, "dweight", dweight.len(), vocab, cols)?;
    check_len(
        OP,
        "workspace",
        workspace.len(),
        embedding_workspace_len(n, vocab)?,
    )?;
    // Offsets and positions are i32 (at most n and vocab + 1), and every `int` loop counter
    // stays below 2^31 (see to_int_dim's cap above): n, vocab, cols <= 2^30.
    let (nn, v, c) = (
        to_int_dim(OP, "n", n)?,
        to_int_dim(OP, "vocab", vocab)?,
        to_int_dim(OP, "cols", cols)?,
    );
    if vocab == 0 || cols == 0 {
        return Ok(());
    }
    let chunks = n.div_ceil(CHUNK);
    let (mut counts, mut rest) = workspace.split_at_mut(chunks * vocab)?;
    let (mut rank, mut rest) = rest.split_at_mut(n)?;
    let (mut order, mut rest) = rest.split_at_mut(n)?;
    let (mut totals, mut offsets) = rest.split_at_mut(vocab)?;
    if n > 0 {
        let cfg = LaunchConfig::new(chunks.clamp(1, 65535) as u32, CHUNK as u32);
        // SAFETY: block 256 as required; chunk k < ceil(n / 256) zeroes and writes
        // counts[k · vocab .. (k + 1) · vocab) (chunks · vocab elements) and rank[t], t < n.
        // Its `int` counters: k < chunks < 2^22 steps by gridDim.x <= 65535, the id v < vocab
        // <= 2^30 by 256: both stay below 2^31.
        unsafe {
            k.embedding_bwd_rank()?
                .launch(s, &cfg, ids, &mut rank, &mut counts, nn, v)
        }?;
    }
    let kc = to_i32(OP, "chunks", chunks)?;
    let cfg = LaunchConfig::new(vocab.div_ceil(256).clamp(1, 65535) as u32, 256);
    // SAFETY: id v < vocab reads and writes counts[k · vocab + v] for k < chunks and writes
    // totals[v]; both lengths are exact (u64 counters; k < chunks < 2^22).
    unsafe {
        k.embedding_bwd_chunk_scan()?
            .launch(s, &cfg, &mut counts, &mut totals, kc, v)
    }?;
    // SAFETY: one block of 1024 as required; reads totals[0..vocab), writes offsets[0..=vocab]
    // (vocab + 1 elements, the rest of the workspace); (vocab + 1023) / 1024 cannot overflow
    // (vocab <= 2^30).
    unsafe {
        k.embedding_bwd_offsets()?
            .launch(s, &LaunchConfig::new(1, 1024), &totals, &mut offsets, v)
    }?;
    if n > 0 {
        let cfg = LaunchConfig::new(n.div_ceil(256).clamp(1, 65535) as u32, 256);
        // SAFETY: token t < n with a valid id writes order[offsets[id] + counts[k][id] +
        // rank[t]], a position below offsets[vocab] <= n: the stable sort places each valid
        // token exactly once in order[0..n), and the kernel skips any position >= n (u64
        // token counter).
        unsafe {
            k.embedding_bwd_place()?
                .launch(s, &cfg, ids, &rank, &counts, &offsets, &mut order, nn, v)
        }?;
    }
    // Long buckets (many tokens per id: a character vocabulary) get 32-column tiles, so that
    // the (few) ids still fill the GPU; otherwise one block covers a whole row.
    let tile = if n >= 64 * vocab { 32 } else { cols };
    let grid = (cols.div_ceil(tile) as u32, vocab.min(65535) as u32, 1);
    // SAFETY: block 256 as required; id v < vocab reads order[offsets[v]..offsets[v + 1])
    // (tokens < n, rows of the checked [n, cols] dy) and writes row v, columns < cols, of the
    // checked [vocab, cols] dweight. Its `int` counters stay below 2^31: the id < vocab <= 2^30
    // steps by gridDim.y <= 65535, the columns < cols <= 2^30 by 256 or 32, the bucket index
    // j < n <= 2^30 by 8.
    unsafe {
        ksum.launch(
            s,
            &LaunchConfig::new(grid, 256),
            &order,
            &offsets,
            dy,
            dweight,
            v,
            c,
            to_i32(OP, "tile", tile)?,
        )
    }?;
    Ok(())
}
