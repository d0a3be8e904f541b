//! The elementwise family (scale, add, mul, relu, tanh) and seed 004's fused
//! `relu(x * scale + bias)` next to the same work as three separate launches.

use super::check;
use super::context::{fmt_n, torch_size, Bench};
use super::rows::Kind;
use super::timing::{BenchResult, Rotating};
use cuda_stack_driver::{DeviceSlice, Stream};
use cuda_stack_kernels::ops::{self, BinaryOp};
use cuda_stack_kernels::{reference, Kernels};

/// The ops of the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Scale,
    Add,
    Mul,
    Relu,
    Tanh,
}

const FAMILY: [Op; 5] = [Op::Scale, Op::Add, Op::Mul, Op::Relu, Op::Tanh];

impl Op {
    /// The kernel's name (f32).
    fn name(self) -> &'static str {
        match self {
            Op::Scale => "scale_f32",
            Op::Add => "add_f32",
            Op::Mul => "mul_f32",
            Op::Relu => "relu_f32",
            Op::Tanh => "tanh_f32",
        }
    }

    /// Arrays read or written per element (4 bytes each).
    fn arrays(self) -> usize {
        match self {
            Op::Add | Op::Mul => 3,
            Op::Scale | Op::Relu | Op::Tanh => 2,
        }
    }

    /// `out = op(x[, y])` (scale by 2).
    fn run(
        self,
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f32>,
        y: &DeviceSlice<f32>,
        out: &mut DeviceSlice<f32>,
    ) -> BenchResult<()> {
        match self {
            Op::Scale => ops::scale(k, s, x, out, 2.0)?,
            Op::Add => ops::binary(k, s, BinaryOp::Add, x, y, out)?,
            Op::Mul => ops::binary(k, s, BinaryOp::Mul, x, y, out)?,
            Op::Relu => ops::relu(k, s, x, out)?,
            Op::Tanh => ops::tanh(k, s, x, out)?,
        }
        Ok(())
    }

    /// Checks `got` against the CPU reference of `op(x[, y])`.
    fn check(self, got: &[f32], x: &[f32], y: &[f32]) -> BenchResult<()> {
        let name = self.name();
        match self {
            Op::Scale => check::exact(name, got, &reference::scale(x, 2.0f32)),
            Op::Add => check::exact(name, got, &reference::binary(BinaryOp::Add, x, y)),
            Op::Mul => check::exact(name, got, &reference::binary(BinaryOp::Mul, x, y)),
            Op::Relu => check::exact(name, got, &reference::relu(x)),
            // CUDA tanhf is within 2 ulp; |tanh| < 1 here, so 2 ulp < 2.4e-7.
            Op::Tanh => check::close(name, got, &reference::tanh(x), 3e-7, 0.0),
        }
    }
}

/// The family at seed 004's 1024 × 2048 (rotated) and at `big`: 8 bytes per element for the
/// unary ops, 12 for the binary ones.
pub fn family(b: &mut Bench) -> BenchResult<()> {
    b.section("elementwise: scale, add, mul, relu, tanh");
    let (k, s) = (b.k.clone(), b.s.clone());
    let n = 100_003;
    let (x, hx) = check::signed(&k, &s, n, 21)?;
    let (y, hy) = check::signed(&k, &s, n, 22)?;
    for op in FAMILY {
        let mut out = check::zeros(&s, n)?;
        op.run(&k, &s, &x, &y, &mut out)?;
        op.check(&s.clone_dtoh(&out)?, &hx, &hy)?;
    }

    let (r, c) = b.sizes.seed_rc;
    for (n, size) in [
        (r * c, format!("{r}x{c} f32")),
        (b.sizes.big, format!("{} f32", fmt_n(b.sizes.big))),
    ] {
        let sets = b.sets(12 * n);
        let px = Rotating::uniform(&k, &s, n, sets, 23)?;
        let py = Rotating::uniform(&k, &s, n, sets, 24)?;
        let mut po = Rotating::zeros(&s, n, sets)?;
        for op in FAMILY {
            let m = b.time(&format!("{} {size}", op.name()), |s, i| {
                op.run(&k, s, &px.get(i)?, &py.get(i)?, &mut po.get_mut(i)?)
            })?;
            let torch = if op == Op::Add {
                b.torch_fig("add", "torch add", n == torch_size::N)
            } else {
                None
            };
            let note = format!("{} bytes/element", 4 * op.arrays());
            b.mem_row(
                "elementwise",
                op.name(),
                Kind::Fast,
                size.clone(),
                m,
                (4 * op.arrays() * n) as f64,
                torch,
                &note,
            );
        }
    }
    Ok(())
}

/// Seed 004's `relu(x * 2 + bias)` at 1024 × 2048: the fused forward, the same work as three
/// launches (scale, add of a bias pre-broadcast to [rows, cols] — the elementwise ops do not
/// broadcast —, relu), and the fused forward + backward. Rates count the fused op's bytes
/// (forward: x read, out written, bias read; backward adds x and grad_out read, grad_x written,
/// bias read, grad_bias written), so fused and unfused are compared on the same useful work.
pub fn bias_relu(b: &mut Bench) -> BenchResult<()> {
    b.section("fused bias + relu (seed 004)");
    let (k, s) = (b.k.clone(), b.s.clone());
    let scale = 2.0f32;
    // float4 path, scalar path, and a backward split into several row chunks.
    for (rows, cols) in [(37, 1000), (5, 13), (300, 256)] {
        let n = rows * cols;
        let (x, hx) = check::signed(&k, &s, n, 31)?;
        let (bias, hbias) = check::signed(&k, &s, cols, 32)?;
        let (gout, hgout) = check::signed(&k, &s, n, 33)?;
        let mut out = check::zeros(&s, n)?;
        ops::bias_relu_fwd(&k, &s, &x, &bias, scale, &mut out, rows, cols)?;
        let fused_want = reference::bias_relu_fwd(&hx, &hbias, scale, rows, cols);
        check::exact("bias_relu_fwd", &s.clone_dtoh(&out)?, &fused_want)?;
        // Unfused: relu(add(scale(x), bias broadcast)), each step rounded.
        let hfull: Vec<f32> = (0..n).map(|i| hbias[i % cols]).collect();
        let full = s.clone_htod(&hfull)?;
        let (mut t1, mut t2) = (check::zeros(&s, n)?, check::zeros(&s, n)?);
        let mut out = check::zeros(&s, n)?;
        ops::scale(&k, &s, &x, &mut t1, scale)?;
        ops::binary(&k, &s, BinaryOp::Add, &t1, &full, &mut t2)?;
        ops::relu(&k, &s, &t2, &mut out)?;
        let want = reference::relu(&reference::binary(
            BinaryOp::Add,
            &reference::scale(&hx, scale),
            &hfull,
        ));
        check::exact("unfused scale + add + relu", &s.clone_dtoh(&out)?, &want)?;
        // Backward.
        let mut gx = check::zeros(&s, n)?;
        let mut gb = check::zeros(&s, cols)?;
        ops::bias_relu_bwd(
            &k, &s, &x, &bias, scale, &gout, &mut gx, &mut gb, rows, cols,
        )?;
        let parts = ops::bias_relu_bwd_parts(rows, cols, b.sm_count);
        let (want_gx, want_gb) =
            reference::bias_relu_bwd(&hx, &hbias, scale, &hgout, rows, cols, parts);
        check::exact("bias_relu_bwd grad_x", &s.clone_dtoh(&gx)?, &want_gx)?;
        check::close(
            "bias_relu_bwd grad_bias",
            &s.clone_dtoh(&gb)?,
            &want_gb,
            1e-6,
            1e-5,
        )?;
    }

    let (rows, cols) = b.sizes.seed_rc;
    let n = rows * cols;
    let same = (rows, cols) == torch_size::BIAS_RELU;
    let size = format!("{rows}x{cols} f32");
    // Per set: x, out, bias_full, grad_out, grad_x (the unfused temporaries are reused).
    let sets = b.sets(20 * n);
    let px = Rotating::uniform(&k, &s, n, sets, 34)?;
    let pfull = Rotating::uniform(&k, &s, n, sets, 35)?;
    let pgout = Rotating::uniform(&k, &s, n, sets, 36)?;
    let mut po = Rotating::zeros(&s, n, sets)?;
    let mut pgx = Rotating::zeros(&s, n, sets)?;
    let bias = Rotating::uniform(&k, &s, cols, 1, 37)?;
    let mut gb = s.alloc_zeros::<f32>(cols)?;
    let (mut t1, mut t2) = (s.alloc_zeros::<f32>(n)?, s.alloc_zeros::<f32>(n)?);
    let fwd_bytes = (8 * n + 4 * cols) as f64;
    let bwd_bytes = (12 * n + 8 * cols) as f64;

    let m = b.time(&format!("bias_relu_fwd {size}"), |s, i| {
        Ok(ops::bias_relu_fwd(
            &k,
            s,
            &px.get(i)?,
            &bias.get(0)?,
            scale,
            &mut po.get_mut(i)?,
            rows,
            cols,
        )?)
    })?;
    let torch = b.torch_us_as_gbs("relu_unfused_us", "torch relu(x*s+b)", fwd_bytes, same);
    b.mem_row(
        "fused",
        "bias_relu_fwd (fused)",
        Kind::Fast,
        size.clone(),
        m,
        fwd_bytes,
        torch,
        "fused bytes: x, out, bias",
    );

    let m = b.time(&format!("unfused scale+add+relu {size}"), |s, i| {
        ops::scale(&k, s, &px.get(i)?, &mut t1, scale)?;
        ops::binary(&k, s, BinaryOp::Add, &t1, &pfull.get(i)?, &mut t2)?;
        ops::relu(&k, s, &t2, &mut po.get_mut(i)?)?;
        Ok(())
    })?;
    let torch = b.torch_us_as_gbs("relu_unfused_us", "torch relu(x*s+b)", fwd_bytes, same);
    b.mem_row(
        "fused",
        "scale + add bias + relu (3 launches)",
        Kind::Educational,
        size.clone(),
        m,
        fwd_bytes,
        torch,
        "effective: the fused op's bytes / time (moves 28 bytes/element)",
    );

    let m = b.time(&format!("bias_relu fwd+bwd {size}"), |s, i| {
        ops::bias_relu_fwd(
            &k,
            s,
            &px.get(i)?,
            &bias.get(0)?,
            scale,
            &mut po.get_mut(i)?,
            rows,
            cols,
        )?;
        ops::bias_relu_bwd(
            &k,
            s,
            &px.get(i)?,
            &bias.get(0)?,
            scale,
            &pgout.get(i)?,
            &mut pgx.get_mut(i)?,
            &mut gb,
            rows,
            cols,
        )?;
        Ok(())
    })?;
    let torch = b.torch_us_as_gbs(
        "relu_fwd_bwd_us",
        "torch autograd fwd+bwd",
        fwd_bytes + bwd_bytes,
        same,
    );
    b.mem_row(
        "fused",
        "bias_relu_fwd + bias_relu_bwd",
        Kind::Fast,
        size,
        m,
        fwd_bytes + bwd_bytes,
        torch,
        "fwd + bwd bytes (x twice, out, grad_out, grad_x, bias twice, grad_bias)",
    );
    Ok(())
}
