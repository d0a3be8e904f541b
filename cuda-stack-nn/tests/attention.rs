//! Fused attention under autograd: `Var::scaled_dot_product_attention` against f64 central
//! finite differences ([`cuda_stack_nn::gradcheck`], PyTorch's tolerances: atol 1e-5, rtol
//! 1e-3) at small odd shapes, causal and full, Nq ≠ Nk both ways; and [`MultiHeadAttention`]
//! against the same computation composed from explicit matmul/softmax `Var`s (values and
//! gradients within 1e-10 in f64), plus a gradcheck of the whole layer; and
//! `Var::packed_qkv_attention` between the layer's own projections giving the layer's result
//! and gradients bit for bit; and `Var::packed_qkv_attention` (token-major forward, packed
//! backward, no copies) against the copying implementation it replaced (the `[B, H, N, D]`
//! forward, permute + contiguous, the stacked backward, permute + contiguous), bit for bit, in
//! bf16 and f16 at D = 64 and 128 (the tensor-core kernels) and D = 80 (SIMT).

use cuda_stack_nn::{gradcheck, GradcheckOptions, Module, MultiHeadAttention, NnError, Var};
use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::{AttentionElement, GradElement, Tensor, TensorElement};
use cuda_tests::{ensure, gpu, TestResult};

fn main() {
    cuda_tests::run(vec![
        gpu("gradcheck_sdpa_full_and_causal", gradcheck_sdpa),
        gpu("mha_matches_composed_reference", mha_vs_composed),
        gpu("gradcheck_mha_layer", gradcheck_mha),
        gpu("mha_bad_configuration_is_an_error", mha_errors),
        gpu(
            "packed_qkv_attention_is_the_layer_between_its_projections",
            packed_public,
        ),
        gpu(
            "packed_qkv_attention_matches_the_copying_implementation_bf16",
            packed_vs_copies::<bf16>,
        ),
        gpu(
            "packed_qkv_attention_matches_the_copying_implementation_f16",
            packed_vs_copies::<f16>,
        ),
    ]);
}

/// The values of `t`, bit for bit comparable (through `to_f64`, one to one on these dtypes).
fn bits<T: TensorElement>(t: &Tensor<T>) -> Result<Vec<u64>, Box<dyn std::error::Error>> {
    Ok(t.contiguous()?
        .to_vec()?
        .iter()
        .map(|x| x.to_f64().to_bits())
        .collect())
}

/// `Var::packed_qkv_attention`'s value and gradient against the implementation before the
/// kernels wrote token-major outputs and packed gradients: q, k, v views, the `[B, H, N, D]`
/// forward, `permute(0, 2, 1, 3) + contiguous + reshape`; the upstream gradient made contiguous
/// and permuted, the stacked `[3, B, H, N, D]` backward, `permute(1, 3, 0, 2, 4) + contiguous`.
fn packed_vs_copies<T: GradElement + AttentionElement>() -> TestResult {
    let (b, h) = (2, 2);
    for d in [64, 80, 128] {
        for n in [1, 17, 129, 300] {
            for causal in [false, true] {
                let c = h * d;
                let seed = (d * 100 + n) as u64 + u64::from(causal);
                let mk =
                    |shape: &[usize], seed: u64| -> Result<Tensor<T>, Box<dyn std::error::Error>> {
                        let v: Vec<T> = values(shape.iter().product(), seed)
                            .into_iter()
                            .map(T::from_f64)
                            .collect();
                        Ok(Tensor::from_slice(&v, shape)?)
                    };
                let x = Var::parameter(mk(&[b, n, 3 * c], seed)?);
                let w = mk(&[b, n, c], seed + 1)?;
                let y = x.packed_qkv_attention(h, causal)?;
                // d(sum(y ∘ w))/dy = w exactly.
                y.mul(&Var::constant(w.clone()))?.sum_all()?.backward()?;
                let grad = x.grad()?.ok_or("no gradient for the projection")?;

                let xv = x.value();
                let packed = xv.reshape(&[b, n, 3, h, d])?;
                let view = |i: usize| packed.select(2, i)?.permute(&[0, 2, 1, 3]);
                let (q, k, v) = (view(0)?, view(1)?, view(2)?);
                let (out, lse) = q.scaled_dot_product_attention_forward(&k, &v, causal, None)?;
                let want_y = out
                    .permute(&[0, 2, 1, 3])?
                    .contiguous()?
                    .reshape(&[b, n, c])?;
                let g = w
                    .contiguous()?
                    .reshape(&[b, n, h, d])?
                    .permute(&[0, 2, 1, 3])?
                    .contiguous()?;
                let stacked = q.scaled_dot_product_attention_backward_stacked(
                    &k, &v, &out, &lse, &g, causal, None,
                )?;
                let want_grad =
                    stacked
                        .permute(&[1, 3, 0, 2, 4])?
                        .contiguous()?
                        .reshape(&[b, n, 3 * c])?;
                let at = format!("D = {d}, N = {n}, causal {causal}");
                ensure!(y.value().shape() == [b, n, c], "{at}: value shape");
                ensure!(bits(&y.value())? == bits(&want_y)?, "{at}: values differ");
                ensure!(grad.shape() == [b, n, 3 * c], "{at}: gradient shape");
                ensure!(bits(&grad)? == bits(&want_grad)?, "{at}: gradients differ");
            }
        }
    }
    Ok(())
}

fn values(n: usize, seed: u64) -> Vec<f64> {
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

fn t64(shape: &[usize], seed: u64) -> Result<Tensor<f64>, Box<dyn std::error::Error>> {
    Ok(Tensor::from_vec(
        values(shape.iter().product(), seed),
        shape,
    )?)
}

fn gradcheck_sdpa() -> TestResult {
    for &(nq, nk, d) in &[
        (1, 1, 3),
        (5, 5, 4),
        (17, 5, 2),
        (5, 17, 2),
        (1, 5, 3),
        (5, 1, 3),
    ] {
        for causal in [false, true] {
            for scale in [None, Some(0.8)] {
                let inputs = [
                    t64(&[1, 2, nq, d], nq as u64)?,
                    t64(&[1, 2, nk, d], 100 + nk as u64)?,
                    t64(&[1, 2, nk, d], 200 + d as u64)?,
                ];
                let report = gradcheck(
                    |v| v[0].scaled_dot_product_attention(&v[1], &v[2], causal, scale),
                    &inputs,
                    GradcheckOptions::default(),
                )?;
                ensure!(
                    report.passed && report.entries > 0,
                    "Nq {nq} Nk {nk} D {d} causal {causal} scale {scale:?}: {report}"
                );
            }
        }
    }
    Ok(())
}

/// The layer's computation from explicit Var ops: narrow the packed projection into q, k, v,
/// batched matmuls, a -1e9 additive mask, softmax, the output projection.
fn composed(
    layer: &MultiHeadAttention<f64>,
    x: &Var<f64>,
    b: usize,
    n: usize,
    c: usize,
    h: usize,
) -> cuda_stack_nn::Result<Var<f64>> {
    let d = c / h;
    let qkv = layer.qkv().forward(x)?;
    let split = |t: usize| -> cuda_stack_nn::Result<Var<f64>> {
        qkv.narrow(2, t * c, c)?
            .reshape(&[b, n, h, d])?
            .transpose(1, 2)?
            .reshape(&[b * h, n, d])
    };
    let (q, k, v) = (split(0)?, split(1)?, split(2)?);
    let mut s = q
        .matmul(&k.transpose(1, 2)?)?
        .scale(1.0 / (d as f64).sqrt())?;
    if layer.causal() {
        let mask: Vec<f64> = (0..n * n)
            .map(|e| if e % n > e / n { -1e9 } else { 0.0 })
            .collect();
        s = s.add(&Var::constant(Tensor::from_vec(mask, &[n, n])?))?;
    }
    let o = s.softmax(-1)?.matmul(&v)?;
    let o = o
        .reshape(&[b, h, n, d])?
        .transpose(1, 2)?
        .reshape(&[b, n, c])?;
    layer.proj().forward(&o)
}

fn mha_vs_composed() -> TestResult {
    let (b, n, c, h) = (2, 7, 12, 3);
    for causal in [false, true] {
        let layer = MultiHeadAttention::<f64>::new(c, h, causal, 5)?;
        let x = Var::parameter(t64(&[b, n, c], 9)?);
        let w = Var::constant(t64(&[b, n, c], 10)?);
        let fused = layer.forward(&x)?;
        let reference = composed(&layer, &x, b, n, c, h)?;
        let (fv, rv) = (fused.value().to_vec()?, reference.value().to_vec()?);
        for (i, (f, r)) in fv.iter().zip(&rv).enumerate() {
            ensure!(
                (f - r).abs() <= 1e-10,
                "causal {causal}: out[{i}] {f} vs {r}"
            );
        }
        let grads = |y: &Var<f64>| -> Result<Vec<Vec<f64>>, Box<dyn std::error::Error>> {
            layer.zero_grad();
            x.zero_grad();
            y.mul(&w)?.sum_all()?.backward()?;
            let mut out = vec![x.grad()?.ok_or("no grad for x")?.to_vec()?];
            for p in layer.parameters() {
                out.push(p.grad()?.ok_or("no grad for a parameter")?.to_vec()?);
            }
            Ok(out)
        };
        let (gf, gr) = (grads(&fused)?, grads(&reference)?);
        for (which, (a, r)) in gf.iter().zip(&gr).enumerate() {
            for (i, (p, q)) in a.iter().zip(r).enumerate() {
                ensure!(
                    (p - q).abs() <= 1e-10,
                    "causal {causal}: gradient {which} [{i}]: fused {p} vs composed {q}"
                );
            }
        }
    }
    Ok(())
}

fn gradcheck_mha() -> TestResult {
    for causal in [false, true] {
        let layer = MultiHeadAttention::<f64>::new(8, 2, causal, 3)?;
        let report = gradcheck(
            |v| layer.forward(&v[0]),
            &[t64(&[2, 5, 8], 4)?],
            GradcheckOptions::default(),
        )?;
        ensure!(
            report.passed && report.entries > 0,
            "causal {causal}: {report}"
        );
    }
    Ok(())
}

fn mha_errors() -> TestResult {
    for (c, h) in [(10, 3), (0, 1), (8, 0), (514, 2)] {
        let r = MultiHeadAttention::<f32>::new(c, h, false, 1);
        ensure!(
            matches!(r, Err(NnError::Invalid { .. })),
            "C {c} H {h}: expected Invalid"
        );
    }
    let layer = MultiHeadAttention::<f32>::new(8, 2, true, 1)?;
    let x = Var::constant(Tensor::<f32>::zeros(&[2, 5, 6])?);
    ensure!(
        matches!(layer.forward(&x), Err(NnError::Invalid { .. })),
        "wrong width must be an error"
    );
    Ok(())
}

/// `linear(qkv) → Var::packed_qkv_attention → linear(proj)` on the layer's own weights is the
/// layer, bit for bit (values and every gradient); a strided input is made contiguous; a
/// projection of the wrong shape is an error.
fn packed_public() -> TestResult {
    let (b, n, c, h) = (2, 5, 12, 3);
    for causal in [false, true] {
        let layer = MultiHeadAttention::<f64>::new(c, h, causal, 8)?;
        let x = Var::parameter(t64(&[b, n, c], 11)?);
        let w = Var::constant(t64(&[b, n, c], 12)?);
        let by_hand = |x: &Var<f64>| -> Result<Var<f64>, NnError> {
            let (q, p) = (layer.qkv(), layer.proj());
            x.linear(q.weight(), q.bias())?
                .packed_qkv_attention(h, causal)?
                .linear(p.weight(), p.bias())
        };
        let run = |y: &Var<f64>| -> Result<Vec<Vec<f64>>, Box<dyn std::error::Error>> {
            layer.zero_grad();
            x.zero_grad();
            y.mul(&w)?.sum_all()?.backward()?;
            let mut out = vec![y.value().to_vec()?, x.grad()?.ok_or("no grad")?.to_vec()?];
            for p in layer.parameters() {
                out.push(p.grad()?.ok_or("no grad for a parameter")?.to_vec()?);
            }
            Ok(out)
        };
        let (a, r) = (run(&by_hand(&x)?)?, run(&layer.forward(&x)?)?);
        ensure!(a == r, "causal {causal}: by hand differs from the layer");
    }
    // A transposed (strided) projection is taken through a contiguous copy.
    let qkv = Var::constant(t64(&[b, 3 * c, n], 13)?).transpose(1, 2)?;
    let strided = qkv.packed_qkv_attention(h, true)?.value().to_vec()?;
    let dense = Var::constant(qkv.value().contiguous()?)
        .packed_qkv_attention(h, true)?
        .value()
        .to_vec()?;
    ensure!(
        strided == dense,
        "a strided projection gives another result"
    );
    for (shape, heads) in [(vec![2, 5, 13], 3), (vec![10, 36], 3), (vec![2, 5, 36], 0)] {
        let v = Var::constant(Tensor::<f32>::zeros(&shape)?);
        ensure!(
            matches!(
                v.packed_qkv_attention(heads, false),
                Err(NnError::Invalid { .. })
            ),
            "{shape:?} with {heads} heads must be an error"
        );
    }
    Ok(())
}
