//! Philox4x32-10 and the distributions built on it (as `kernels/cuda/random.cu`).

/// The four words of Philox4x32-10 block `j` under key `seed`: counter `(j as u32, j >> 32, 0,
/// 0)`, key `(seed as u32, seed >> 32)`, 10 rounds. Known answer: `philox4x32_10(0, 0) ==
/// [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]`.
pub fn philox4x32_10(j: u64, seed: u64) -> [u32; 4] {
    let (mut c0, mut c1, mut c2, mut c3) = (j as u32, (j >> 32) as u32, 0u32, 0u32);
    let (mut k0, mut k1) = (seed as u32, (seed >> 32) as u32);
    for round in 0..10 {
        if round > 0 {
            k0 = k0.wrapping_add(0x9E37_79B9);
            k1 = k1.wrapping_add(0xBB67_AE85);
        }
        let p0 = u64::from(0xD251_1F53u32) * u64::from(c0);
        let p1 = u64::from(0xCD9E_8D57u32) * u64::from(c2);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        (c0, c1, c2, c3) = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0);
    }
    [c0, c1, c2, c3]
}

fn words(n: usize, seed: u64, offset: u64) -> impl Iterator<Item = (usize, [u32; 4], usize)> {
    (0..n).map(move |i| {
        let e = offset + i as u64;
        (i, philox4x32_10(e / 4, seed), (e % 4) as usize)
    })
}

/// Words `offset .. offset + n` of the stream keyed by `seed` (bit-exact).
pub fn philox_u32(n: usize, seed: u64, offset: u64) -> Vec<u32> {
    words(n, seed, offset).map(|(_, w, k)| w[k]).collect()
}

const TWO_POW_M24: f32 = 5.960_464_5e-8; // 2^-24, exact

/// `(word >> 8) · 2^-24` (bit-exact).
pub fn fill_uniform(n: usize, seed: u64, offset: u64) -> Vec<f32> {
    words(n, seed, offset)
        .map(|(_, w, k)| (w[k] >> 8) as f32 * TWO_POW_M24)
        .collect()
}

/// Box–Muller on the word pairs (0, 1) and (2, 3), computed in f64 and rounded (the GPU's
/// `logf`/`sincospif` agree to a few ulp).
pub fn fill_normal(n: usize, seed: u64, offset: u64) -> Vec<f32> {
    words(n, seed, offset)
        .map(|(_, w, k)| {
            let (a, b) = if k < 2 { (w[0], w[1]) } else { (w[2], w[3]) };
            let u1 = ((a >> 8) + 1) as f32 * TWO_POW_M24;
            let u2 = (b >> 8) as f32 * TWO_POW_M24;
            let r = (-2.0 * f64::from(u1).ln()).sqrt();
            let (s, c) = (std::f64::consts::PI * 2.0 * f64::from(u2)).sin_cos();
            (if k % 2 == 0 { r * c } else { r * s }) as f32
        })
        .collect()
}
