//! The Hopper forward's query tile at head dimension 64: 128 rows a CTA (two consumer
//! warpgroups, `attn_fwd_wgmma_d64_*`) or 192 (three, `attn_fwd_wgmma_d64_m192_*`), chosen per
//! problem by [`attention_fwd_wgmma_rows`] from a cost model of the two kernels; and
//! [`ATTENTION_FWD_ROWS_ENV`], which overrides it for measurements and tests.

use super::AttentionShape;

/// The environment variable [`attention_fwd_wgmma_rows`] reads first: `128` or `192` (other
/// values are ignored; only head dimension 64 has the 192-row kernels). Read at every call, so a
/// benchmark can compare the two tiles in one run. It applies wherever the wgmma forward runs,
/// whether [`AttentionAlgo::Auto`](super::AttentionAlgo::Auto) chose it or
/// [`AttentionAlgo::Wgmma`](super::AttentionAlgo::Wgmma) asked for it.
pub const ATTENTION_FWD_ROWS_ENV: &str = "CUDA_STACK_ATTN_FWD_ROWS";

/// Keys per key tile (`AW_BN`).
const KEY_TILE: u64 = 128;

/// The time a 192-row CTA takes per query row and key tile, relative to a 128-row CTA's: three
/// consumers share each K and V tile and the exponentials of one consumer overlap two others'
/// products. Measured on an H200 through the library at the power cap's clock (kernels/
/// TUNING.md, session 64: `attention_bench` with the tile forced each way, five D = 64 cases):
/// 0.85–0.875 per unit of work, 0.86 taken. (The lab's short timings, before the cap lowers the
/// clock, gave 0.83–0.87.)
const ROWS192_UNIT_COST: f64 = 0.86;

/// How much cheaper the 192-row tile must model to be chosen: the model matched the library's
/// five measurements within 1.5%, and near a tie the 128-row kernel (more measurements behind it)
/// is kept.
const ROWS192_MARGIN: f64 = 0.98;

/// The query rows per CTA the wgmma forward runs `shape` with on a device of `sm_count` SMs:
/// [`ATTENTION_FWD_ROWS_ENV`] when it names 128 or 192 (192 only at head dimension 64), else 128
/// at head dimensions other than 64, else the tile whose modelled time is lower.
///
/// The model: a CTA's time is proportional to the query rows it holds (padding included) times
/// the key tiles it streams (under a causal mask, only those its rows see), times 0.86 for the
/// 192-row kernel (its measured cost per unit). Without a mask every tile is the same work and
/// the persistent CTAs take them in waves of one per SM: the launch is the number of waves times
/// a tile. Under a causal mask (tiles of unequal work, heaviest first) it is the longer of the
/// total over the SMs and the longest tile. 192 rows must model at least 2% faster. The 192-row
/// tile does more useful work a second but pads more (1024 queries are 6 × 192 = 1152 rows),
/// under a causal mask computes more of the masked triangle (a 192-row tile spans two key tiles
/// of the diagonal), and with fewer tiles than SMs the longest one decides. Measured against
/// that (session 64, H200, `attention_bench`, 192 against 128 rows; the model in brackets):
/// 16 × 16 heads of 512 and 1024 queries 0.955× and 0.97× full (0.968, 0.968), 2 × 12 heads of
/// 4097 0.875× full and 0.90× causal (0.86, 0.885), 1 × 16 heads of 4096 0.962× (0.968); in the
/// lab, 512 and 1024 causal 1.06× and 1.13× (1.16, 1.15: 128 rows kept).
pub fn attention_fwd_wgmma_rows(sm_count: u32, shape: &AttentionShape) -> usize {
    if shape.head_dim != 64 {
        return 128;
    }
    if let Ok(v) = std::env::var(ATTENTION_FWD_ROWS_ENV) {
        match v.trim() {
            "128" => return 128,
            "192" => return 192,
            _ => {}
        }
    }
    let c128 = modelled_time(sm_count, shape, 128, 1.0);
    let c192 = modelled_time(sm_count, shape, 192, ROWS192_UNIT_COST);
    if c192 < c128 * ROWS192_MARGIN {
        192
    } else {
        128
    }
}

/// The model's time (arbitrary units) of `shape` with `rows`-row query tiles whose unit of work
/// (a query row against a key tile) costs `unit`.
fn modelled_time(sm_count: u32, shape: &AttentionShape, rows: u64, unit: f64) -> f64 {
    let sms = f64::from(sm_count.max(1));
    let (sum, longest) = key_tiles(shape, rows);
    let bh = shape.batch as f64 * shape.heads as f64;
    let tile = longest as f64 * rows as f64;
    if !shape.causal {
        // Equal tiles in waves: ceil(tiles / SMs) of them.
        let tiles = bh * shape.q_len.div_ceil(rows as usize) as f64;
        return unit * (tiles / sms).ceil() * tile;
    }
    unit * (bh * sum as f64 * rows as f64 / sms).max(tile)
}

/// The key tiles one head's query tiles of `rows` rows stream (the kernel's `n_kt`: all of them
/// without a mask; under the bottom-right causal mask those up to the last key the tile's last
/// row sees), summed over the tiles, and the most any one tile streams.
fn key_tiles(shape: &AttentionShape, rows: u64) -> (u128, u64) {
    let nq = shape.q_len as u64;
    let nk = shape.kv_len as u64;
    let n_qt = nq.div_ceil(rows);
    let n_kb = nk.div_ceil(KEY_TILE);
    if n_qt == 0 || n_kb == 0 {
        return (0, 0);
    }
    if !shape.causal {
        return (u128::from(n_qt) * u128::from(n_kb), n_kb);
    }
    // Query tile t's rows see keys below e(t) = (t + 1) rows + Nk − Nq (clamped to 0 ..= Nk), so
    // it streams ceil(e(t) / 128) key tiles. Tiles with e(t) <= 0 stream none; tiles with
    // e(t) > 128 (n_kb − 1) stream all n_kb; between them the count is
    // floor(((t + 1) rows + Nk − Nq + 127) / 128), a floor sum.
    let off = i128::from(nk) - i128::from(nq); // e(t) = (t + 1) rows + off
    let rows_i = i128::from(rows);
    let full_from = i128::from(KEY_TILE * (n_kb - 1)); // e(t) > this: all key tiles
                                                       // First t with e(t) > 0, and first t with e(t) > full_from (each clamped to 0 ..= n_qt).
                                                       // (t + 1) rows + off > bound  <=>  t >= floor((bound − off) / rows).
    let first_above =
        |bound: i128| -> u64 { (bound - off).div_euclid(rows_i).clamp(0, i128::from(n_qt)) as u64 };
    let lo = first_above(0);
    let hi = first_above(full_from).max(lo);
    // Σ_{t = lo}^{hi − 1} floor(((t + 1) rows + off + 127) / 128), with t = lo + i.
    let b = i128::from(lo + 1) * rows_i + off + i128::from(KEY_TILE) - 1;
    let partial = floor_sum(hi - lo, KEY_TILE, rows, b);
    let full = u128::from(n_qt - hi) * u128::from(n_kb);
    let last = (i128::from(n_qt) * rows_i + off).clamp(0, i128::from(nk)) as u64;
    (partial + full, last.div_ceil(KEY_TILE))
}

/// Σ_{i = 0}^{n − 1} floor((a i + b) / m) for m > 0, a >= 0 and every term's numerator >= 0 (the
/// caller's b >= 0): the classic Euclid-like reduction, O(log) steps.
fn floor_sum(n: u64, m: u64, a: u64, b: i128) -> u128 {
    let (mut n, mut m, mut a) = (u128::from(n), u128::from(m), u128::from(a));
    let mut b = b.max(0) as u128;
    let mut sum = 0u128;
    loop {
        if n == 0 || m == 0 {
            return sum;
        }
        if a >= m {
            sum += n * (n - 1) / 2 * (a / m);
            a %= m;
        }
        if b >= m {
            sum += n * (b / m);
            b %= m;
        }
        let y_max = a * n + b;
        if y_max < m {
            return sum;
        }
        n = y_max / m;
        b = y_max % m;
        std::mem::swap(&mut m, &mut a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(b: usize, h: usize, nq: usize, nk: usize, d: usize, causal: bool) -> AttentionShape {
        AttentionShape {
            batch: b,
            heads: h,
            q_len: nq,
            kv_len: nk,
            head_dim: d,
            causal,
        }
    }

    /// The kernel's own count, tile by tile (`aw_tile` in `cuda/attention_wgmma.cu`).
    fn key_tiles_by_loop(sh: &AttentionShape, rows: u64) -> (u128, u64) {
        let (nq, nk) = (sh.q_len as i128, sh.kv_len as i128);
        let n_qt = (nq as u64).div_ceil(rows);
        let (mut sum, mut most) = (0u128, 0u64);
        for t in 0..n_qt {
            let end = if sh.causal {
                ((t as i128 + 1) * rows as i128 + nk - nq).clamp(0, nk)
            } else {
                nk
            };
            let n = (end as u64).div_ceil(KEY_TILE);
            sum += u128::from(n);
            most = most.max(n);
        }
        (sum, most)
    }

    #[test]
    fn key_tiles_match_the_kernels_count() {
        let lens = [
            0, 1, 2, 63, 64, 127, 128, 129, 191, 192, 193, 255, 256, 300, 384, 511, 512,
        ];
        let more = [700, 900, 1000, 1023, 1024, 1025, 2047, 4097, 5000];
        for &nq in lens.iter().chain(&more) {
            for &nk in lens.iter().chain(&more) {
                for causal in [false, true] {
                    let sh = shape(1, 1, nq, nk, 64, causal);
                    for rows in [128, 192] {
                        assert_eq!(
                            key_tiles(&sh, rows),
                            key_tiles_by_loop(&sh, rows),
                            "Nq {nq} Nk {nk} causal {causal} rows {rows}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn floor_sum_matches_a_loop() {
        for n in 0..40u64 {
            for m in 1..20u64 {
                for a in 0..30u64 {
                    for b in [0i128, 1, 5, 19, 127, 300] {
                        let want: u128 = (0..n)
                            .map(|i| ((a * i) as i128 + b) as u128 / u128::from(m))
                            .sum();
                        assert_eq!(floor_sum(n, m, a, b), want, "n {n} m {m} a {a} b {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn huge_lengths_do_not_overflow_or_loop() {
        let sh = shape(1, 1, (1 << 31) - 1, (1 << 31) - 1, 64, true);
        let (sum, most) = key_tiles(&sh, 192);
        assert_eq!(most, ((1u64 << 31) - 1).div_ceil(128));
        assert!(sum > 0);
        assert_eq!(attention_fwd_wgmma_rows(132, &sh), 192);
    }

    // The choices below hold only without the override in the environment (no test sets it).
    #[test]
    fn the_choice_follows_the_measurements() {
        if std::env::var_os(ATTENTION_FWD_ROWS_ENV).is_some() {
            return;
        }
        // (shape, the rows chosen) on 132 SMs (an H200 or an H100 SXM).
        let cases = [
            // Measured faster with 192 rows (session 64).
            (shape(16, 16, 512, 512, 64, false), 192),
            (shape(1, 16, 4096, 4096, 64, false), 192),
            (shape(16, 16, 1024, 1024, 64, false), 192),
            (shape(2, 12, 4097, 4097, 64, false), 192),
            (shape(2, 12, 4097, 4097, 64, true), 192),
            // Measured slower with 192 rows.
            (shape(16, 16, 512, 512, 64, true), 128),
            (shape(16, 16, 1024, 1024, 64, true), 128),
            // Fewer tiles than SMs: the longest tile decides.
            (shape(1, 1, 4096, 4096, 64, false), 128),
            // Padding: 128 queries fill one 128-row tile and half a 192-row one.
            (shape(64, 16, 128, 4096, 64, false), 128),
            // Only D = 64 has the 192-row kernels.
            (shape(2, 12, 4097, 4097, 128, false), 128),
        ];
        for (sh, want) in cases {
            assert_eq!(attention_fwd_wgmma_rows(132, &sh), want, "{sh:?}");
        }
    }
}
