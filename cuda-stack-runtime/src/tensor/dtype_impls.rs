//! The [`TensorElement`] implementations, one per dtype: each row of the table in `dtype.rs`'s
//! module docs, written as the kernels it forwards to (the shared parts as macros), or the
//! trait's defaults (unsupported, with the reason `dtype.rs` gives).

use super::dtype::{DType, TensorElement};
use super::error::Result;
use cuda_stack_blas::{Blas, Gemm};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceSlice, Stream};
use cuda_stack_kernels::ops::{
    self, BinaryOp, BroadcastOperand, MatmulAlgo, ReduceAlgo, Transpose,
};
use cuda_stack_kernels::{Kernels, StridedLayout};

/// The methods every kernel dtype (f32, f64, i32, f16, bf16) forwards to `cuda-stack-kernels` the
/// same way; `$scalar`, `$sum`, `$max` are the kernels' `Element::Scalar`, `SumAcc` and the
/// max result type for `$t`.
macro_rules! forward_common {
    ($t:ty, $scalar:ty, $sum:ty, $max:ty) => {
        fn binary(
            k: &Kernels,
            s: &Stream,
            op: BinaryOp,
            a: &DeviceSlice<$t>,
            b: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$t>,
        ) -> Result<()> {
            Ok(ops::binary::<$t>(k, s, op, a, b, out)?)
        }

        fn binary_broadcast(
            k: &Kernels,
            s: &Stream,
            op: BinaryOp,
            a: (&DeviceSlice<$t>, BroadcastOperand),
            b: (&DeviceSlice<$t>, BroadcastOperand),
            out: &mut DeviceSlice<$t>,
            outer: usize,
            inner: usize,
        ) -> Result<()> {
            Ok(ops::binary_broadcast::<$t>(
                k, s, op, a.0, a.1, b.0, b.1, out, outer, inner,
            )?)
        }

        fn binary_strided(
            k: &Kernels,
            s: &Stream,
            op: BinaryOp,
            a: (&DeviceSlice<$t>, &StridedLayout),
            b: (&DeviceSlice<$t>, &StridedLayout),
            out: &mut DeviceSlice<$t>,
        ) -> Result<()> {
            Ok(ops::binary_strided::<$t>(
                k, s, op, a.0, a.1, b.0, b.1, out,
            )?)
        }

        fn scale(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$t>,
            alpha: $scalar,
        ) -> Result<()> {
            Ok(ops::scale::<$t>(k, s, x, out, alpha)?)
        }

        fn relu(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$t>,
        ) -> Result<()> {
            Ok(ops::relu::<$t>(k, s, x, out)?)
        }

        fn fill(k: &Kernels, s: &Stream, out: &mut DeviceSlice<$t>, value: $t) -> Result<()> {
            let v = <$t as cuda_stack_kernels::Element>::to_scalar(value);
            Ok(ops::fill::<$t>(k, s, out, v)?)
        }

        fn sum_all(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$sum>,
        ) -> Result<()> {
            Ok(ops::sum::<$t>(k, s, ReduceAlgo::Fast, x, out)?)
        }

        fn max_all(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$max>,
        ) -> Result<()> {
            Ok(ops::max::<$t>(k, s, ReduceAlgo::Fast, x, out)?)
        }
    };
}

/// `gemm_strided` on the tensor cores (`ops::gemm_half`: wgmma on compute capability 9.0,
/// mma.sync on 8.0 and newer; `matmul` takes the f32 route on older GPUs).
macro_rules! tensor_core_gemm {
    ($t:ty) => {
        fn gemm_strided(
            k: &Kernels,
            s: &Stream,
            ta: Transpose,
            tb: Transpose,
            m: usize,
            n: usize,
            kdim: usize,
            a: &DeviceSlice<$t>,
            lda: usize,
            b: &DeviceSlice<$t>,
            ldb: usize,
            c: &mut DeviceSlice<$t>,
        ) -> Result<()> {
            ops::gemm_half(
                k,
                s,
                ops::TcAlgo::Auto,
                ta,
                tb,
                m,
                n,
                kdim,
                a,
                lda,
                b,
                ldb,
                c,
                n.max(1),
            )?;
            Ok(())
        }
    };
}

/// The floating-point methods (tanh, mean, row reductions) of f32, f64, f16 and bf16.
macro_rules! forward_float {
    ($t:ty, $sum:ty, $max:ty) => {
        fn tanh(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$t>,
        ) -> Result<()> {
            Ok(ops::tanh::<$t>(k, s, x, out)?)
        }

        fn mean_all(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$sum>,
        ) -> Result<()> {
            Ok(ops::mean::<$t>(k, s, ReduceAlgo::Fast, x, out)?)
        }

        fn sum_dim(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$sum>,
            shape: (usize, usize, usize),
        ) -> Result<()> {
            Ok(ops::sum_dim::<$t>(k, s, x, out, shape)?)
        }

        fn max_dim(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$max>,
            shape: (usize, usize, usize),
        ) -> Result<()> {
            Ok(ops::max_dim::<$t>(k, s, x, out, shape)?)
        }
    };
}

/// The cuBLAS GEMM of a dtype `cuda-stack-blas` multiplies (`c` of the same dtype, f32 accumulation
/// for 16-bit types).
macro_rules! cublas_gemm {
    () => {
        const CUBLAS_GEMM: bool = true;

        fn gemm_cublas(
            blas: &Blas,
            s: &Stream,
            g: &Gemm,
            a: &DeviceSlice<Self>,
            b: &DeviceSlice<Self>,
            c: &mut DeviceSlice<Self>,
        ) -> Result<()> {
            Ok(blas.gemm(s, g, a, b, c)?)
        }

        fn gemm_bias_cublas(
            blas: &Blas,
            s: &Stream,
            g: &Gemm,
            a: &DeviceSlice<Self>,
            b: &DeviceSlice<Self>,
            bias: &DeviceSlice<Self>,
            c: &mut DeviceSlice<Self>,
        ) -> Result<()> {
            Ok(blas.matmul::<Self, Self>(
                s,
                g,
                cuda_stack_blas::Epilogue::Bias,
                a,
                b,
                Some(bias),
                c,
            )?)
        }

        fn gemm_gelu_aux_cublas(
            blas: &Blas,
            s: &Stream,
            g: &Gemm,
            a: &DeviceSlice<Self>,
            b: &DeviceSlice<Self>,
            bias: Option<&DeviceSlice<Self>>,
            c: &mut DeviceSlice<Self>,
            aux: &mut DeviceSlice<Self>,
            aux_ld: usize,
        ) -> Result<()> {
            Ok(blas.matmul_gelu_aux::<Self, Self>(s, g, a, b, bias, c, aux, aux_ld)?)
        }

        fn gemm_dgelu_cublas(
            blas: &Blas,
            s: &Stream,
            g: &Gemm,
            a: &DeviceSlice<Self>,
            b: &DeviceSlice<Self>,
            aux: &DeviceSlice<Self>,
            aux_ld: usize,
            bias_grad: Option<&mut DeviceSlice<Self>>,
            c: &mut DeviceSlice<Self>,
        ) -> Result<()> {
            Ok(blas.matmul_dgelu::<Self, Self>(s, g, a, b, aux, aux_ld, bias_grad, c)?)
        }

        fn gemm_bgrad_a_cublas(
            blas: &Blas,
            s: &Stream,
            g: &Gemm,
            a: &DeviceSlice<Self>,
            b: &DeviceSlice<Self>,
            bias_grad: &mut DeviceSlice<Self>,
            c: &mut DeviceSlice<Self>,
        ) -> Result<()> {
            Ok(blas.matmul_bgrad::<Self, Self>(
                s,
                g,
                cuda_stack_blas::Epilogue::BGradA,
                a,
                b,
                bias_grad,
                c,
            )?)
        }
    };
}

impl TensorElement for f32 {
    const DTYPE: DType = DType::F32;
    type Scalar = f32;
    type Sum = f32;
    type Max = f32;
    type SumAcc = f32;
    type MaxAcc = f32;
    fn round_sum(t: super::Tensor<Self::SumAcc>) -> Result<super::Tensor<Self::Sum>> {
        Ok(t)
    }
    fn round_max(t: super::Tensor<Self::MaxAcc>) -> Result<super::Tensor<Self::Max>> {
        Ok(t)
    }
    const STRIDED_GEMM: bool = true;
    cublas_gemm!();

    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn scalar_from_f64(v: f64) -> f32 {
        v as f32
    }

    forward_common!(f32, f32, f32, f32);
    forward_float!(f32, f32, f32);

    fn matmul_dense(
        k: &Kernels,
        s: &Stream,
        a: &DeviceSlice<f32>,
        b: &DeviceSlice<f32>,
        c: &mut DeviceSlice<f32>,
        m: usize,
        n: usize,
        kdim: usize,
    ) -> Result<()> {
        Ok(ops::matmul::<f32>(
            k,
            s,
            MatmulAlgo::Fast,
            a,
            b,
            c,
            m,
            n,
            kdim,
        )?)
    }

    fn gemm_strided(
        k: &Kernels,
        s: &Stream,
        ta: Transpose,
        tb: Transpose,
        m: usize,
        n: usize,
        kdim: usize,
        a: &DeviceSlice<f32>,
        lda: usize,
        b: &DeviceSlice<f32>,
        ldb: usize,
        c: &mut DeviceSlice<f32>,
    ) -> Result<()> {
        // alpha = 1, beta = 0: C is written, never read.
        ops::sgemm(
            k,
            s,
            ta,
            tb,
            m,
            n,
            kdim,
            1.0,
            a,
            lda,
            b,
            ldb,
            0.0,
            c,
            n.max(1),
        )?;
        Ok(())
    }

    fn softmax_rows(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f32>,
        out: &mut DeviceSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::softmax_rows(k, s, x, out, rows, cols)?)
    }

    fn bias_relu_fwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f32>,
        bias: &DeviceSlice<f32>,
        scale: f32,
        out: &mut DeviceSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::bias_relu_fwd(k, s, x, bias, scale, out, rows, cols)?)
    }

    fn bias_relu_bwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f32>,
        bias: &DeviceSlice<f32>,
        scale: f32,
        grad_out: &DeviceSlice<f32>,
        grad_x: &mut DeviceSlice<f32>,
        grad_bias: &mut DeviceSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::bias_relu_bwd(
            k, s, x, bias, scale, grad_out, grad_x, grad_bias, rows, cols,
        )?)
    }

    fn rand_uniform(k: &Kernels, s: &Stream, out: &mut DeviceSlice<f32>, seed: u64) -> Result<()> {
        Ok(ops::fill_uniform(k, s, out, seed, 0)?)
    }

    fn rand_normal(k: &Kernels, s: &Stream, out: &mut DeviceSlice<f32>, seed: u64) -> Result<()> {
        Ok(ops::fill_normal(k, s, out, seed, 0)?)
    }
}

impl TensorElement for f64 {
    const DTYPE: DType = DType::F64;
    cublas_gemm!();
    type Scalar = f64;
    type Sum = f64;
    type Max = f64;
    type SumAcc = f64;
    type MaxAcc = f64;
    fn round_sum(t: super::Tensor<Self::SumAcc>) -> Result<super::Tensor<Self::Sum>> {
        Ok(t)
    }
    fn round_max(t: super::Tensor<Self::MaxAcc>) -> Result<super::Tensor<Self::Max>> {
        Ok(t)
    }

    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn scalar_from_f64(v: f64) -> f64 {
        v
    }

    forward_common!(f64, f64, f64, f64);
    forward_float!(f64, f64, f64);

    fn matmul_dense(
        k: &Kernels,
        s: &Stream,
        a: &DeviceSlice<f64>,
        b: &DeviceSlice<f64>,
        c: &mut DeviceSlice<f64>,
        m: usize,
        n: usize,
        kdim: usize,
    ) -> Result<()> {
        Ok(ops::matmul::<f64>(
            k,
            s,
            MatmulAlgo::Tiled16,
            a,
            b,
            c,
            m,
            n,
            kdim,
        )?)
    }

    fn softmax_rows(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f64>,
        out: &mut DeviceSlice<f64>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::row_softmax(k, s, x, out, rows, cols, false)?)
    }

    fn bias_relu_fwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f64>,
        bias: &DeviceSlice<f64>,
        scale: f64,
        out: &mut DeviceSlice<f64>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::bias_relu_fwd_f64(
            k, s, x, bias, scale, out, rows, cols,
        )?)
    }

    fn bias_relu_bwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f64>,
        bias: &DeviceSlice<f64>,
        scale: f64,
        grad_out: &DeviceSlice<f64>,
        grad_x: &mut DeviceSlice<f64>,
        grad_bias: &mut DeviceSlice<f64>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::bias_relu_bwd_f64(
            k, s, x, bias, scale, grad_out, grad_x, grad_bias, rows, cols,
        )?)
    }
}

impl TensorElement for i32 {
    const DTYPE: DType = DType::I32;
    type Scalar = i32;
    type Sum = i64;
    type Max = i32;
    type SumAcc = i64;
    type MaxAcc = i32;
    fn round_sum(t: super::Tensor<Self::SumAcc>) -> Result<super::Tensor<Self::Sum>> {
        Ok(t)
    }
    fn round_max(t: super::Tensor<Self::MaxAcc>) -> Result<super::Tensor<Self::Max>> {
        Ok(t)
    }

    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> i32 {
        v as i32
    }
    fn to_i64(self) -> Option<i64> {
        Some(i64::from(self))
    }
    fn scalar_from_f64(v: f64) -> i32 {
        v as i32
    }

    forward_common!(i32, i32, i64, i32);

    fn matmul_dense(
        k: &Kernels,
        s: &Stream,
        a: &DeviceSlice<i32>,
        b: &DeviceSlice<i32>,
        c: &mut DeviceSlice<i32>,
        m: usize,
        n: usize,
        kdim: usize,
    ) -> Result<()> {
        Ok(ops::matmul::<i32>(
            k,
            s,
            MatmulAlgo::Tiled16,
            a,
            b,
            c,
            m,
            n,
            kdim,
        )?)
    }
}

impl TensorElement for i64 {
    const DTYPE: DType = DType::I64;
    type Scalar = i64;
    type Sum = i64;
    type Max = i64;
    type SumAcc = i64;
    type MaxAcc = i64;
    fn round_sum(t: super::Tensor<Self::SumAcc>) -> Result<super::Tensor<Self::Sum>> {
        Ok(t)
    }
    fn round_max(t: super::Tensor<Self::MaxAcc>) -> Result<super::Tensor<Self::Max>> {
        Ok(t)
    }

    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> i64 {
        v as i64
    }
    fn to_i64(self) -> Option<i64> {
        Some(self)
    }
    fn scalar_from_f64(v: f64) -> i64 {
        v as i64
    }
    // Everything else: the defaults (fill by broadcast; the rest unsupported).
}

impl TensorElement for f16 {
    const DTYPE: DType = DType::F16;
    const STRIDED_GEMM: bool = true;
    const MATMUL_VIA_F32: bool = true;
    cublas_gemm!();
    type Scalar = f32;
    type Sum = f16;
    type Max = f16;
    type SumAcc = f32;
    type MaxAcc = f32;
    fn round_sum(t: super::Tensor<f32>) -> Result<super::Tensor<f16>> {
        t.to_dtype::<f16>()
    }
    fn round_max(t: super::Tensor<f32>) -> Result<super::Tensor<f16>> {
        t.to_dtype::<f16>()
    }

    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> f16 {
        f16::from_f64(v)
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn scalar_from_f64(v: f64) -> f32 {
        v as f32
    }

    forward_common!(f16, f32, f32, f32);
    forward_float!(f16, f32, f32);
    tensor_core_gemm!(f16);

    /// The row kernel of `log_softmax.cu` (computed in f32, rounded once).
    fn softmax_rows(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f16>,
        out: &mut DeviceSlice<f16>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::row_softmax(k, s, x, out, rows, cols, false)?)
    }
}

impl TensorElement for bf16 {
    const DTYPE: DType = DType::BF16;
    const STRIDED_GEMM: bool = true;
    const MATMUL_VIA_F32: bool = true;
    cublas_gemm!();
    type Scalar = f32;
    type Sum = bf16;
    type Max = bf16;
    type SumAcc = f32;
    type MaxAcc = f32;
    fn round_sum(t: super::Tensor<f32>) -> Result<super::Tensor<bf16>> {
        t.to_dtype::<bf16>()
    }
    fn round_max(t: super::Tensor<f32>) -> Result<super::Tensor<bf16>> {
        t.to_dtype::<bf16>()
    }

    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> bf16 {
        bf16::from_f64(v)
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn scalar_from_f64(v: f64) -> f32 {
        v as f32
    }

    forward_common!(bf16, f32, f32, f32);
    forward_float!(bf16, f32, f32);
    tensor_core_gemm!(bf16);

    /// The row kernel of `log_softmax.cu` (computed in f32, rounded once).
    fn softmax_rows(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<bf16>,
        out: &mut DeviceSlice<bf16>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::row_softmax(k, s, x, out, rows, cols, false)?)
    }
}
