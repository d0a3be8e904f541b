//! `Tensor::scaled_dot_product_attention{,_forward,_backward}` on the GPU: q, k, v as views of
//! one packed `[B, N, 3, H, D]` projection (no copy), against the f64 CPU reference on the same
//! rounded inputs (tolerances relative to the largest reference magnitude, plus 1e-5 absolute:
//! f32 out 1e-5, gradients 1e-4; bf16 out 1e-2, gradients 6e-2); shapes with many key blocks
//! (run with `CUDA_STACK_ATTN_BWD_DQ=atomic` for the fused backward); empty problems (Nq = 0,
//! Nk = 0); the token-major forward, the backward reading `out` and `dout` as strided views and
//! the packed `[B, N, 3, H, D]` backward against the contiguous forms, bit for bit (bf16, f16,
//! f32; D = 64, 80, 128; N = 1, 17, 129, 300; causal and full); and every bad input is a typed
//! error naming the operand.

use cuda_stack_kernels::reference::{self, AttentionDims};
use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::tensor::{AttentionElement, Tensor, TensorElement, TensorError};
use cuda_tests::{ensure, gpu, TestResult};

fn main() {
    cuda_tests::run(vec![
        gpu("packed_qkv_views_f32", packed::<f32>),
        gpu("packed_qkv_views_bf16", packed::<bf16>),
        gpu("separate_lengths_and_default_scale", separate),
        gpu("many_key_blocks_bf16", many_key_blocks),
        gpu("empty_problems", empty),
        gpu("bad_inputs_are_typed_errors", bad_inputs),
        gpu("strided_layouts_match_bit_for_bit_bf16", layouts::<bf16>),
        gpu("strided_layouts_match_bit_for_bit_f16", layouts::<f16>),
        gpu("strided_layouts_match_bit_for_bit_f32", layouts::<f32>),
    ]);
}

/// Equal values, bit for bit (through `to_f64`, one to one on these dtypes; the sign of zero
/// too; NaN matches NaN), in the same shape.
fn same<T: TensorElement>(what: &str, got: &Tensor<T>, want: &Tensor<T>) -> TestResult {
    ensure!(
        got.shape() == want.shape(),
        "{what}: shape {:?}, want {:?}",
        got.shape(),
        want.shape()
    );
    let (g, w) = (to_f64(&got.contiguous()?)?, to_f64(&want.contiguous()?)?);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let eq = a == b && a.is_sign_negative() == b.is_sign_negative() || a.is_nan() && b.is_nan();
        ensure!(eq, "{what}[{i}]: {a:e}, want {b:e}");
    }
    Ok(())
}

/// The token-major forward (`[B, N, H, D]`), the backward on `out` and `dout` as strided views,
/// and the packed `[B, N, 3, H, D]` backward, against the contiguous forms on the same packed
/// q, k, v views: the same bits (only the addresses differ).
fn layouts<T: AttentionElement>() -> TestResult {
    let (b, h) = (2, 2);
    for d in [64, 80, 128] {
        for n in [1, 17, 129, 300] {
            for causal in [false, true] {
                let seed = (d * 1000 + n) as u64 + u64::from(causal);
                let x: Vec<T> = data(b * n * 3 * h * d, seed)
                    .into_iter()
                    .map(T::from_f64)
                    .collect();
                let qkv = Tensor::from_slice(&x, &[b, n, 3, h, d])?;
                let view = |i: usize| qkv.select(2, i)?.permute(&[0, 2, 1, 3]);
                let (q, k, v) = (view(0)?, view(1)?, view(2)?);
                let at = format!("D = {d}, N = {n}, causal {causal}");
                let (out, lse) = q.scaled_dot_product_attention_forward(&k, &v, causal, None)?;
                let (tm, lse2) =
                    q.scaled_dot_product_attention_forward_token_major(&k, &v, causal, None)?;
                ensure!(
                    tm.shape() == [b, n, h, d] && tm.is_contiguous(),
                    "{at}: token-major out {:?}",
                    tm.shape()
                );
                let out_view = tm.permute(&[0, 2, 1, 3])?;
                same(&format!("{at}: out"), &out_view, &out)?;
                same(&format!("{at}: lse"), &lse2, &lse)?;

                let g: Vec<T> = data(b * h * n * d, seed + 7)
                    .into_iter()
                    .map(T::from_f64)
                    .collect();
                let dout = Tensor::from_slice(&g, &[b, h, n, d])?;
                // dout as a [B, H, N, D] view of a [B, N, H, D] array (a [B, N, C] gradient).
                let dout_view = dout
                    .permute(&[0, 2, 1, 3])?
                    .contiguous()?
                    .permute(&[0, 2, 1, 3])?;
                let (dq, dk, dv) = q.scaled_dot_product_attention_backward(
                    &k, &v, &out, &lse, &dout, causal, None,
                )?;
                let (dq2, dk2, dv2) = q.scaled_dot_product_attention_backward(
                    &k, &v, &out_view, &lse2, &dout_view, causal, None,
                )?;
                same(&format!("{at}: dq"), &dq2, &dq)?;
                same(&format!("{at}: dk"), &dk2, &dk)?;
                same(&format!("{at}: dv"), &dv2, &dv)?;
                let stacked = q.scaled_dot_product_attention_backward_stacked(
                    &k, &v, &out, &lse, &dout, causal, None,
                )?;
                let packed = q.scaled_dot_product_attention_backward_packed(
                    &k, &v, &out_view, &lse2, &dout_view, causal, None,
                )?;
                ensure!(
                    packed.shape() == [b, n, 3, h, d] && packed.is_contiguous(),
                    "{at}: packed gradient {:?}",
                    packed.shape()
                );
                same(
                    &format!("{at}: packed vs stacked"),
                    &packed,
                    &stacked.permute(&[1, 3, 0, 2, 4])?,
                )?;
            }
        }
    }
    Ok(())
}

fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

fn to_f64<T: TensorElement>(t: &Tensor<T>) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    Ok(t.to_vec()?.iter().map(|x| x.to_f64()).collect())
}

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} vs {} values",
        got.len(),
        want.len()
    );
    let max = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= tol * max + 1e-5
        };
        ensure!(ok, "{what}[{i}]: got {g}, want {w} (max |ref| {max})");
    }
    Ok(())
}

/// `x` as the dense `[B, H, N, D]` f64 array the reference takes.
fn dense_f64<T: TensorElement>(x: &Tensor<T>) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    to_f64(&x.contiguous()?)
}

/// The tolerances (out, gradients) of each tested dtype.
trait Elem: AttentionElement {
    fn tol() -> (f64, f64);
}
impl Elem for f32 {
    fn tol() -> (f64, f64) {
        (1e-5, 1e-4)
    }
}
impl Elem for bf16 {
    fn tol() -> (f64, f64) {
        (1e-2, 6e-2)
    }
}

fn check<T: Elem>(
    q: &Tensor<T>,
    k: &Tensor<T>,
    v: &Tensor<T>,
    causal: bool,
    scale: Option<f64>,
) -> TestResult {
    let (qs, ks) = (q.shape().to_vec(), k.shape().to_vec());
    let dims = AttentionDims {
        batch: qs[0],
        heads: qs[1],
        q_len: qs[2],
        kv_len: ks[2],
        head_dim: qs[3],
        causal,
    };
    let sc = scale.unwrap_or(1.0 / (qs[3] as f64).sqrt());
    // The kernels use the scale rounded to f32 (the compute type).
    let sc = sc as f32 as f64;
    let (fq, fk, fv) = (dense_f64(q)?, dense_f64(k)?, dense_f64(v)?);
    let (want_out, want_lse) = reference::attention_fwd(&dims, &fq, &fk, &fv, sc);
    let (out, lse) = q.scaled_dot_product_attention_forward(k, v, causal, scale)?;
    ensure!(out.shape() == qs.as_slice(), "out shape {:?}", out.shape());
    ensure!(lse.shape() == &qs[..3], "lse shape {:?}", lse.shape());
    let (to, tg) = T::tol();
    close("out", &to_f64(&out)?, &want_out, to)?;
    close("lse", &to_f64(&lse)?, &want_lse, 1e-5)?;
    let short = q.scaled_dot_product_attention(k, v, causal, scale)?;
    close("out (short form)", &to_f64(&short)?, &want_out, to)?;

    let g: Vec<T> = data(out.numel(), 77)
        .into_iter()
        .map(<T as TensorElement>::from_f64)
        .collect();
    let dout = Tensor::from_slice(&g, out.shape())?;
    let (want_dq, want_dk, want_dv) =
        reference::attention_bwd(&dims, &fq, &fk, &fv, &to_f64(&dout)?, sc);
    let (dq, dk, dv) =
        q.scaled_dot_product_attention_backward(k, v, &out, &lse, &dout, causal, scale)?;
    close("dq", &to_f64(&dq)?, &want_dq, tg)?;
    close("dk", &to_f64(&dk)?, &want_dk, tg)?;
    close("dv", &to_f64(&dv)?, &want_dv, tg)?;
    if qs[2] == ks[2] {
        // The stacked form runs the same kernels into thirds of one buffer: the same bits
        // (the deterministic dq path; the atomic one may differ in dq's last bits).
        let st = q.scaled_dot_product_attention_backward_stacked(
            k, v, &out, &lse, &dout, causal, scale,
        )?;
        let mut want_shape = vec![3];
        want_shape.extend_from_slice(&qs);
        ensure!(
            st.shape() == want_shape.as_slice(),
            "stacked shape {:?}",
            st.shape()
        );
        let atomic = std::env::var("CUDA_STACK_ATTN_BWD_DQ").is_ok_and(|v| v == "atomic");
        for (i, (name, want)) in [("dq", &dq), ("dk", &dk), ("dv", &dv)]
            .into_iter()
            .enumerate()
        {
            let got = to_f64(&st.select(0, i)?)?;
            if atomic && i == 0 {
                close("stacked dq", &got, &want_dq, tg)?;
            } else {
                ensure!(
                    got == to_f64(want)?,
                    "stacked {name} differs from the three-tensor form"
                );
            }
        }
    }
    Ok(())
}

/// q, k, v as `select` + `permute` views of a packed `[B, N, 3, H, D]` tensor (bf16 at D = 64 and
/// 128 runs forward and backward on the tensor cores on sm_80+).
fn packed<T: Elem>() -> TestResult {
    for &(b, n, h, d) in &[
        (2, 17, 3, 16),
        (1, 65, 2, 64),
        (2, 5, 1, 40),
        (1, 70, 2, 128),
    ] {
        let x: Vec<T> = data(b * n * 3 * h * d, n as u64)
            .into_iter()
            .map(<T as TensorElement>::from_f64)
            .collect();
        let qkv = Tensor::from_slice(&x, &[b, n, 3, h, d])?;
        let view = |i: usize| qkv.select(2, i)?.permute(&[0, 2, 1, 3]);
        let (q, k, v) = (view(0)?, view(1)?, view(2)?);
        ensure!(
            q.shares_storage(&qkv) && !q.is_contiguous(),
            "q must be a view"
        );
        for causal in [false, true] {
            check(&q, &k, &v, causal, None)?;
        }
    }
    Ok(())
}

/// Shapes with a key-block grid (`B·H·⌈Nk / 64⌉` = 192) above any current GPU's SM count
/// (the automatic choice, `cuda_stack_kernels::ops::attention_bwd_dq_choice`, is the two-kernel
/// path; run with `CUDA_STACK_ATTN_BWD_DQ=atomic` for the fused pass with atomic dq): bf16,
/// D = 64 and 128, packed views, causal and full; and Nq = 0 there.
fn many_key_blocks() -> TestResult {
    for &(b, n, h, d) in &[(4, 256, 12, 64), (2, 383, 16, 128)] {
        let x: Vec<bf16> = data(b * n * 3 * h * d, n as u64)
            .into_iter()
            .map(<bf16 as TensorElement>::from_f64)
            .collect();
        let qkv = Tensor::from_slice(&x, &[b, n, 3, h, d])?;
        let view = |i: usize| qkv.select(2, i)?.permute(&[0, 2, 1, 3]);
        let (q, k, v) = (view(0)?, view(1)?, view(2)?);
        for causal in [false, true] {
            check(&q, &k, &v, causal, None)?;
        }
    }
    // Nq = 0 with the same key-block grid: no dq to accumulate (no workspace), zero dk and dv.
    let q0 = Tensor::<bf16>::zeros(&[4, 12, 0, 64])?;
    let k = Tensor::<bf16>::zeros(&[4, 12, 256, 64])?;
    let (out, lse) = q0.scaled_dot_product_attention_forward(&k, &k, true, None)?;
    let dout = Tensor::<bf16>::zeros(&[4, 12, 0, 64])?;
    let (dq, dk, dv) =
        q0.scaled_dot_product_attention_backward(&k, &k, &out, &lse, &dout, true, None)?;
    ensure!(dq.numel() == 0, "dq of Nq = 0");
    ensure!(
        to_f64(&dk)?.iter().chain(&to_f64(&dv)?).all(|&x| x == 0.0),
        "dk, dv of Nq = 0"
    );
    Ok(())
}

/// Nq ≠ Nk both ways (bottom-right causal alignment), an explicit scale.
fn separate() -> TestResult {
    for &(nq, nk) in &[(1, 9), (9, 1), (7, 20), (20, 7)] {
        let mk = |n: usize, seed: u64| -> Result<Tensor<f32>, Box<dyn std::error::Error>> {
            let v: Vec<f32> = data(2 * 3 * n * 8, seed)
                .iter()
                .map(|&x| x as f32)
                .collect();
            Ok(Tensor::from_slice(&v, &[2, 3, n, 8])?)
        };
        let (q, k, v) = (mk(nq, 1)?, mk(nk, 2)?, mk(nk, 3)?);
        for causal in [false, true] {
            check(&q, &k, &v, causal, Some(0.3))?;
        }
    }
    Ok(())
}

/// Nq = 0 gives empty outputs; Nk = 0 gives zero rows, lse −inf and zero gradients.
fn empty() -> TestResult {
    let q0 = Tensor::<f32>::zeros(&[1, 2, 0, 8])?;
    let k = Tensor::<f32>::from_slice(&[0.5; 2 * 3 * 8], &[1, 2, 3, 8])?;
    let (out, lse) = q0.scaled_dot_product_attention_forward(&k, &k, true, None)?;
    ensure!(
        out.shape() == [1, 2, 0, 8] && lse.shape() == [1, 2, 0],
        "Nq = 0 shapes"
    );
    let dout = Tensor::<f32>::zeros(&[1, 2, 0, 8])?;
    let (dq, dk, dv) =
        q0.scaled_dot_product_attention_backward(&k, &k, &out, &lse, &dout, true, None)?;
    ensure!(dq.numel() == 0, "dq of Nq = 0");
    ensure!(
        to_f64(&dk)?.iter().chain(&to_f64(&dv)?).all(|&x| x == 0.0),
        "dk, dv of Nq = 0"
    );

    let q = Tensor::<f32>::from_slice(&[0.25; 2 * 3 * 8], &[1, 2, 3, 8])?;
    let k0 = Tensor::<f32>::zeros(&[1, 2, 0, 8])?;
    let (out, lse) = q.scaled_dot_product_attention_forward(&k0, &k0, false, None)?;
    ensure!(
        to_f64(&out)?.iter().all(|&x| x == 0.0),
        "Nk = 0: out must be 0"
    );
    ensure!(
        to_f64(&lse)?.iter().all(|&x| x == f64::NEG_INFINITY),
        "Nk = 0: lse must be -inf"
    );
    let dout = Tensor::<f32>::from_slice(&[1.0; 2 * 3 * 8], &[1, 2, 3, 8])?;
    let (dq, _, _) =
        q.scaled_dot_product_attention_backward(&k0, &k0, &out, &lse, &dout, false, None)?;
    ensure!(
        to_f64(&dq)?.iter().all(|&x| x == 0.0),
        "Nk = 0: dq must be 0"
    );
    Ok(())
}

fn expect_err<T>(what: &str, r: Result<T, TensorError>, op_word: &str) -> TestResult {
    match r {
        Ok(_) => Err(format!("{what}: expected an error").into()),
        Err(e) => {
            let msg = e.to_string();
            ensure!(
                msg.contains(op_word),
                "{what}: message {msg:?} should name {op_word:?}"
            );
            Ok(())
        }
    }
}

fn bad_inputs() -> TestResult {
    let t = |shape: &[usize]| Tensor::<f32>::zeros(shape);
    let q = t(&[2, 3, 4, 8])?;
    let k = t(&[2, 3, 5, 8])?;
    expect_err(
        "rank 3",
        t(&[3, 4, 8])?.scaled_dot_product_attention(&k, &k, false, None),
        "`q`",
    )?;
    let qt = t(&[2, 3, 8, 4])?.transpose(2, 3)?; // last stride 4
    expect_err(
        "last stride",
        qt.scaled_dot_product_attention(&k, &k, false, None),
        "`q`",
    )?;
    expect_err(
        "heads",
        q.scaled_dot_product_attention(&t(&[2, 2, 5, 8])?, &k, false, None),
        "`k`",
    )?;
    expect_err(
        "head dim",
        q.scaled_dot_product_attention(&t(&[2, 3, 5, 4])?, &k, false, None),
        "`k`",
    )?;
    expect_err(
        "v shape",
        q.scaled_dot_product_attention(&k, &t(&[2, 3, 6, 8])?, false, None),
        "`v`",
    )?;
    let q0 = t(&[2, 3, 4, 0])?;
    expect_err(
        "D = 0",
        q0.scaled_dot_product_attention(&q0, &q0, false, None),
        "D = 0",
    )?;
    let q257 = t(&[1, 1, 2, 257])?;
    expect_err(
        "D = 257",
        q257.scaled_dot_product_attention(&q257, &q257, false, None),
        "D = 257",
    )?;
    let (out, lse) = q.scaled_dot_product_attention_forward(&k, &k, false, None)?;
    let bad_dout = t(&[2, 3, 4, 7])?;
    expect_err(
        "dout shape",
        q.scaled_dot_product_attention_backward(&k, &k, &out, &lse, &bad_dout, false, None),
        "`dout`",
    )?;
    let dout = t(&[2, 3, 4, 8])?;
    expect_err(
        "stacked with Nq != Nk",
        q.scaled_dot_product_attention_backward_stacked(&k, &k, &out, &lse, &dout, false, None),
        "Nq == Nk",
    )?;
    Ok(())
}
