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

/// The time a 192-row CTA takes per query row and key tile, relative to a 128-row CTA's, with all
/// three consumers multiplying: they share each K and V tile and the exponentials of one consumer
/// overlap two others' products. Measured on an H200 through the library at the power cap's
/// clock (kernels/TUNING.md, session 64: `attention_bench` with the tile forced each way, five
/// D = 64 cases): 0.85–0.875 per unit of work, 0.86 taken.
const ROWS192_UNIT_COST: f64 = 0.86;

/// A key tile's time in a CTA when only one of its 64-row consumers still multiplies (the others
/// have passed the last key their rows see, or hold padding, and only wait: `AW_SKIP`), in the
/// units of [`tile_costs`] (a 128-row CTA's key tile is 128). Fitted, with
/// [`TWO_OF_THREE_ACTIVE_COST`] and [`ROWS192_TILE_FILL`], to session 65's library run (H200,
/// `attention_bench` with the tile forced each way, in turn): 192 rows against 128 at 16 × 16
/// heads, causal 512 and 1024 queries 0.976× and 0.951×, full 512 and 1024 1.026× and 0.995×.
const ONE_ACTIVE_COST: f64 = 71.0;

/// Two of a 192-row CTA's three consumers still multiplying ([`ONE_ACTIVE_COST`]).
const TWO_OF_THREE_ACTIVE_COST: f64 = 113.0;

/// What a 192-row tile costs beyond its key tiles, in its full key tiles: the three consumers'
/// turns take longer to start and drain than two's (fitted with [`ONE_ACTIVE_COST`]; it is why
/// 192 rows lose at 512 keys, four key tiles a tile, and tie at 1024).
const ROWS192_TILE_FILL: f64 = 0.24;

/// How much cheaper the 192-row tile must model to be chosen: near a tie the 128-row kernel (more
/// measurements behind it) is kept.
const ROWS192_MARGIN: f64 = 0.98;

/// Query rows per consumer warpgroup.
const CONSUMER_ROWS: u64 = 64;

/// The query rows per CTA the wgmma forward runs `shape` with on a device of `sm_count` SMs:
/// [`ATTENTION_FWD_ROWS_ENV`] when it names 128 or 192 (192 only at head dimension 64), else 128
/// at head dimensions other than 64, else the tile whose modelled time is lower.
///
/// The model: a CTA streams the key tiles its last row sees (all of them without a mask), and
/// each of its 64-row consumers multiplies those its own last real row sees (none for padding
/// past the queries); a key tile costs by how many consumers multiply it (a 128-row CTA's full
/// tile 128, a 192-row CTA's 0.86 × 192, one active consumer 71, two of three 113), and a
/// 192-row tile 0.24 of a key tile more.
/// Without a mask every tile is the same work and the persistent CTAs take them in waves of one
/// per SM: the launch is the number of waves times a tile. Under a causal mask (tiles of unequal
/// work, heaviest first) it is the longer of the total over the SMs and the longest tile. 192
/// rows must model at least 2% faster. The 192-row tile does more useful work a second but pads
/// more (1024 queries are 6 × 192 = 1152 rows), costs more to start and drain, and with fewer
/// tiles than SMs the longest one decides; under a causal mask its consumers past the diagonal
/// stop early. Measured against that (session 65, H200, `attention_bench` with the tile forced
/// each way in turn, 192 against 128 rows, the model in brackets): 16 × 16 heads of 512 queries
/// 1.026× full (1.026) and 0.976× causal (0.977), of 1024 0.995× (0.997) and 0.951× (0.951);
/// 2 × 12 heads of 4097 0.898× (0.866) and 0.911× (0.874); 1 × 16 heads of 4096 full 0.956×
/// (0.975). The first four fitted the three constants.
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
    let c128 = modelled_time(sm_count, shape, 128);
    let c192 = modelled_time(sm_count, shape, 192);
    if c192 < c128 * ROWS192_MARGIN {
        192
    } else {
        128
    }
}

/// A key tile's modelled time in a CTA of `rows` rows by the number of consumers multiplying it:
/// entry `a − 1` for `a` active consumers.
fn tile_costs(rows: u64) -> &'static [f64] {
    const COSTS_128: [f64; 2] = [ONE_ACTIVE_COST, 128.0];
    const COSTS_192: [f64; 3] = [
        ONE_ACTIVE_COST,
        TWO_OF_THREE_ACTIVE_COST,
        192.0 * ROWS192_UNIT_COST,
    ];
    if rows == 192 {
        &COSTS_192
    } else {
        &COSTS_128
    }
}

/// What a tile of `rows` rows costs beyond its key tiles ([`ROWS192_TILE_FILL`]; the 128-row
/// tile's own is the unit's baseline, 0).
fn tile_fill(rows: u64) -> f64 {
    if rows == 192 {
        ROWS192_TILE_FILL * tile_costs(rows)[2]
    } else {
        0.0
    }
}

/// The model's time (arbitrary units) of `shape` with `rows`-row query tiles.
fn modelled_time(sm_count: u32, shape: &AttentionShape, rows: u64) -> f64 {
    let sms = f64::from(sm_count.max(1));
    let costs = tile_costs(rows);
    let fill = tile_fill(rows);
    let n_qt = (shape.q_len as u64).div_ceil(rows);
    let n_kb = (shape.kv_len as u64).div_ceil(KEY_TILE);
    let bh = shape.batch as f64 * shape.heads as f64;
    if n_qt == 0 || n_kb == 0 {
        return 0.0;
    }
    if !shape.causal {
        // Equal tiles in waves: ceil(tiles / SMs) of them.
        let tile = n_kb as f64 * costs[costs.len() - 1] + fill;
        return ((bh * n_qt as f64) / sms).ceil() * tile;
    }
    let (total, longest) = causal_tile_times(shape, rows, costs);
    (bh * (total + n_qt as f64 * fill) / sms).max(longest + fill)
}

/// Under the bottom-right causal mask, the key tiles the consumer whose rows start at `row0` (of a
/// CTA's tile) multiplies: those up to the last key its last real row sees; none for padding.
fn consumer_key_tiles(shape: &AttentionShape, row0: u64) -> u64 {
    let (nq, nk) = (shape.q_len as u64, shape.kv_len as u64);
    if row0 >= nq {
        return 0;
    }
    let last = (row0 + CONSUMER_ROWS - 1).min(nq - 1);
    let e = (i128::from(last) + 1 + i128::from(nk) - i128::from(nq)).clamp(0, i128::from(nk));
    (e as u64).div_ceil(KEY_TILE)
}

/// One causal query tile's modelled time: its consumers' key tile counts rise with their rows,
/// so the first count's key tiles have every real consumer active, the next count's one fewer,
/// and so on.
fn causal_tile_time(shape: &AttentionShape, rows: u64, costs: &[f64], t: u64) -> f64 {
    let row0 = |c: usize| t * rows + CONSUMER_ROWS * c as u64;
    let real = (0..costs.len())
        .filter(|&c| row0(c) < shape.q_len as u64)
        .count();
    let mut prev = 0;
    let mut time = 0.0;
    for c in 0..real {
        let k = consumer_key_tiles(shape, row0(c));
        time += (k - prev) as f64 * costs[real - 1 - c];
        prev = k;
    }
    time
}

/// One head's causal query tiles of `rows` rows: their modelled times summed, and the longest.
/// The tiles whose rows are all real are summed per consumer in closed form (floor sums), so the
/// cost does not grow with the sequence; the ragged last tile is taken on its own.
fn causal_tile_times(shape: &AttentionShape, rows: u64, costs: &[f64]) -> (f64, f64) {
    let (nq, nk) = (shape.q_len as u64, shape.kv_len as u64);
    let n_full = nq / rows;
    let off = i128::from(nk) - i128::from(nq);
    let mut total = 0.0;
    let mut prev = 0u128;
    for c in 0..costs.len() {
        // Consumer c of tile t sees keys below t rows + 64 (c + 1) + Nk − Nq.
        let s = i128::from(CONSUMER_ROWS * (c as u64 + 1)) + off;
        let sum = key_tiles_sum(n_full, rows, s, nk);
        total += (sum - prev) as f64 * costs[costs.len() - 1 - c];
        prev = sum;
    }
    let mut longest = if n_full > 0 {
        causal_tile_time(shape, rows, costs, n_full - 1)
    } else {
        0.0
    };
    if nq % rows != 0 {
        let ragged = causal_tile_time(shape, rows, costs, n_full);
        total += ragged;
        longest = longest.max(ragged);
    }
    (total, longest)
}

/// Σ_{t = 0}^{n − 1} ceil(clamp(t step + s, 0, nk) / 128): the key tiles a consumer row block
/// sees, over `n` query tiles `step` rows apart.
fn key_tiles_sum(n: u64, step: u64, s: i128, nk: u64) -> u128 {
    let n_kb = nk.div_ceil(KEY_TILE);
    if n == 0 || n_kb == 0 {
        return 0;
    }
    let step_i = i128::from(step);
    // First t with t step + s > bound (clamped to 0 ..= n): t >= floor((bound − s) / step) + 1.
    let first_above = |bound: i128| -> u64 {
        ((bound - s).div_euclid(step_i) + 1).clamp(0, i128::from(n)) as u64
    };
    let lo = first_above(0); // before: no key seen
    let hi = first_above(i128::from(KEY_TILE * (n_kb - 1))).max(lo); // from: every key tile
                                                                     // Σ_{t = lo}^{hi − 1} floor((t step + s + 127) / 128), with t = lo + i.
    let b = i128::from(lo) * step_i + s + i128::from(KEY_TILE) - 1;
    floor_sum(hi - lo, KEY_TILE, step, b) + u128::from(n - hi) * u128::from(n_kb)
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

    /// The kernel's own counts, tile by tile and consumer by consumer (`aw_tile` and `my_nkt` in
    /// `cuda/attention_wgmma.cu`), weighed as the model does: the closed form's reference.
    fn tile_times_by_loop(sh: &AttentionShape, rows: u64) -> (f64, f64) {
        let costs = tile_costs(rows);
        let (nq, nk) = (sh.q_len as i128, sh.kv_len as i128);
        let (mut total, mut longest) = (0.0, 0.0f64);
        for t in 0..(nq as u64).div_ceil(rows) {
            let mut n = Vec::new();
            for c in 0..costs.len() as i128 {
                let first = t as i128 * rows as i128 + 64 * c;
                if first >= nq {
                    break;
                }
                let last = (first + 63).min(nq - 1);
                let e = (last + 1 + nk - nq).clamp(0, nk) as u64;
                n.push(e.div_ceil(KEY_TILE));
            }
            // Key tile k (1-based) is multiplied by the consumers with n_c >= k.
            let most = n.iter().copied().max().unwrap_or(0);
            let time: f64 = (1..=most)
                .map(|k| costs[n.iter().filter(|&&x| x >= k).count() - 1])
                .sum();
            total += time;
            longest = longest.max(time);
        }
        (total, longest)
    }

    #[test]
    fn causal_tile_times_match_the_kernels_counts() {
        let lens = [
            0, 1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 256, 300, 384, 511, 512,
        ];
        let more = [700, 900, 1000, 1023, 1024, 1025, 2047, 4097, 5000];
        for &nq in lens.iter().chain(&more) {
            for &nk in lens.iter().chain(&more) {
                let sh = shape(1, 1, nq, nk, 64, true);
                for rows in [128, 192] {
                    let (total, longest) = causal_tile_times(&sh, rows, tile_costs(rows));
                    let (want_total, want_longest) = tile_times_by_loop(&sh, rows);
                    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.max(1.0);
                    assert!(
                        close(total, want_total) && close(longest, want_longest),
                        "Nq {nq} Nk {nk} rows {rows}: ({total}, {longest}) against \
                         ({want_total}, {want_longest})"
                    );
                }
            }
        }
    }

    #[test]
    fn key_tiles_sum_matches_a_loop() {
        for n in 0..12u64 {
            for step in [1u64, 64, 128, 192, 500] {
                for s in [-1000i128, -129, -128, -1, 0, 1, 63, 64, 127, 128, 129, 700] {
                    for nk in [0u64, 1, 127, 128, 129, 1000] {
                        let want: u128 = (0..n)
                            .map(|t| {
                                let e = (t as i128 * step as i128 + s).clamp(0, nk as i128);
                                u128::from((e as u64).div_ceil(KEY_TILE))
                            })
                            .sum();
                        assert_eq!(key_tiles_sum(n, step, s, nk), want, "{n} {step} {s} {nk}");
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
        let (total, longest) = causal_tile_times(&sh, 192, tile_costs(192));
        assert!(total.is_finite() && total > longest && longest > 0.0);
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
            // Measured faster with 192 rows (session 65's library run, 192 against 128 rows).
            (shape(16, 16, 512, 512, 64, true), 192), // 0.976 (model 0.977)
            (shape(16, 16, 1024, 1024, 64, true), 192), // 0.951 (0.951)
            (shape(2, 12, 4097, 4097, 64, false), 192), // 0.898 (0.866)
            (shape(2, 12, 4097, 4097, 64, true), 192), // 0.911 (0.874)
            (shape(1, 16, 4096, 4096, 64, false), 192), // 0.956 (0.975)
            // Measured slower, or within 2%.
            (shape(16, 16, 512, 512, 64, false), 128), // 1.026 (1.026)
            (shape(16, 16, 1024, 1024, 64, false), 128), // 0.995 (0.997)
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
