//! `Blas::matmul_fp8`: cuBLASLt's FP8 GEMM (Ada and Hopper tensor cores, compute capability
//! 8.9+): `C = (a_inv_scale · b_inv_scale) · A · Bᵀ`, row-major `A [m, k]`, `B` stored `[n, k]`,
//! FP8 inputs (e4m3 × e4m3, e4m3 × e5m2, e5m2 × e4m3: cuBLASLt has no e5m2 × e5m2), f32
//! accumulation (`CUBLAS_COMPUTE_32F`), `C` in bf16 or f32.
//!
//! cuBLASLt's FP8 kernels take only the "TN" layout (column-major A transposed, B not): in
//! row-major terms both operands K-major, which is what the row-major `A [m, k]` and `B [n, k]`
//! above are once swapped into cuBLASLt's column-major call (`Cᵀ = B · Aᵀ`). Its other rules,
//! checked here first: 16-byte aligned pointers (the two scales' too), leading dimensions of A
//! and B multiples of 16, and `n` and `ldc` multiples of 8 (measured: no algorithm otherwise).
//! The per-tensor scales are device pointers (`CUBLASLT_MATMUL_DESC_A_SCALE_POINTER` /
//! `B_SCALE_POINTER`), so scales computed on the GPU are used without a host round trip.
//!
//! `fast_accum` is `CUBLASLT_MATMUL_DESC_FAST_ACCUM`: on, the tensor cores' FP8 accumulator is
//! used across all of k (faster; what the project's wgmma kernel does); off (cuBLASLt's default),
//! partial sums are promoted to full f32 at intervals (more accurate for long k).

use crate::algo_cache::AlgoKey;
use crate::element::{DataType, Element};
use crate::epilogue::alignment;
use crate::error::{BlasError, Result};
use crate::handle::{Blas, ForStream};
use crate::lt_desc::{Layout, MatmulDesc, Preference};
use cuda_stack_driver::cuda_stack_sys::cublas_types::{
    cublasComputeType_t, cublasOperation_t, cublasStatus_t,
};
use cuda_stack_driver::cuda_stack_sys::cublaslt_types::{
    cublasLtMatmulDescAttributes_t as DescAttr, cublasLtMatmulHeuristicResult_t,
};
use cuda_stack_driver::float8::{F8E4M3, F8E5M2};
use cuda_stack_driver::half::bf16;
use cuda_stack_driver::{ComputeCapability, DeviceRepr, DeviceSlice, ForeignUse, Stream};

const OP: &str = "matmul_fp8";

/// The oldest compute capability cuBLASLt runs FP8 on (Ada, sm_89).
pub const FP8_MIN_CC: ComputeCapability = ComputeCapability { major: 8, minor: 9 };

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::F8E4M3 {}
    impl Sealed for super::F8E5M2 {}
    pub trait OutSealed {}
    impl OutSealed for f32 {}
    impl OutSealed for super::bf16 {}
}

/// An FP8 operand type: [`F8E4M3`] or [`F8E5M2`] (the `float8` crate's). Sealed.
pub trait Fp8Element: DeviceRepr + sealed::Sealed {
    /// Its [`DataType`].
    const DTYPE: DataType;
}
impl Fp8Element for F8E4M3 {
    const DTYPE: DataType = DataType::F8E4M3;
}
impl Fp8Element for F8E5M2 {
    const DTYPE: DataType = DataType::F8E5M2;
}

/// An output type of [`Blas::matmul_fp8`]: `bf16` or `f32`. Sealed.
pub trait Fp8Output: Element + sealed::OutSealed {}
impl Fp8Output for f32 {}
impl Fp8Output for bf16 {}

/// The shape of an FP8 product `C [m, n] = A [m, k] · Bᵀ` (`B` stored `[n, k]`), row-major, with
/// leading dimensions (dense by default: `lda = ldb = k`, `ldc = n`) and the accumulation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fp8Gemm {
    /// Rows of A and C.
    pub m: usize,
    /// Rows of B (stored `[n, k]`), columns of C.
    pub n: usize,
    /// The reduction length.
    pub k: usize,
    /// Row stride of A (>= k, a multiple of 16).
    pub lda: usize,
    /// Row stride of B (>= k, a multiple of 16).
    pub ldb: usize,
    /// Row stride of C (>= n).
    pub ldc: usize,
    /// `CUBLASLT_MATMUL_DESC_FAST_ACCUM` (see the module docs). Default off.
    pub fast_accum: bool,
}

impl Fp8Gemm {
    /// Dense operands: `lda = ldb = k`, `ldc = n`, no fast accumulation.
    pub fn new(m: usize, n: usize, k: usize) -> Fp8Gemm {
        Fp8Gemm {
            m,
            n,
            k,
            lda: k,
            ldb: k,
            ldc: n,
            fast_accum: false,
        }
    }

    /// With these leading dimensions.
    pub fn leading_dims(self, lda: usize, ldb: usize, ldc: usize) -> Fp8Gemm {
        Fp8Gemm {
            lda,
            ldb,
            ldc,
            ..self
        }
    }

    /// With fast accumulation on or off.
    pub fn fast_accum(self, on: bool) -> Fp8Gemm {
        Fp8Gemm {
            fast_accum: on,
            ..self
        }
    }
}

fn fp8_error(problem: String) -> BlasError {
    BlasError::Fp8 { op: OP, problem }
}

/// Elements a row-major `[rows, cols]` matrix with row stride `ld` spans; `ld >= cols` checked.
fn span(operand: &'static str, rows: usize, cols: usize, ld: usize) -> Result<usize> {
    if ld < cols.max(1) {
        return Err(BlasError::LeadingDimension {
            op: OP,
            operand,
            ld,
            min: cols.max(1),
        });
    }
    if ld > i32::MAX as usize || rows > i32::MAX as usize || cols > i32::MAX as usize {
        return Err(BlasError::TooLarge {
            op: OP,
            what: "a dimension or leading dimension",
            value: ld.max(rows).max(cols) as u128,
            max: i32::MAX as u128,
        });
    }
    if rows == 0 || cols == 0 {
        return Ok(0);
    }
    Ok((rows - 1) * ld + cols)
}

fn check_len(operand: &'static str, need: usize, found: usize, shape: String) -> Result<()> {
    if found < need {
        return Err(BlasError::Length {
            op: OP,
            operand,
            expected: format!("{shape} ({need} elements)"),
            found,
        });
    }
    Ok(())
}

impl Blas {
    /// `C = (a_inv_scale[0] · b_inv_scale[0]) · A · Bᵀ` on cuBLASLt's FP8 tensor-core kernels
    /// (see the module docs for layout, types and rules), each output rounded once to `C`.
    /// `a_inv_scale` / `b_inv_scale` hold at least one f32 (element 0 is used, read on the GPU).
    /// The heuristic's algorithm is cached per problem as for [`Blas::matmul`]. Compute capability
    /// below 8.9 is [`BlasError::UnsupportedDevice`]; e5m2 × e5m2, leading dimensions of A or B
    /// that are not multiples of 16, or `n` / `ldc` not multiples of 8 are [`BlasError::Fp8`];
    /// a pointer (scales included) not 16-byte aligned is [`BlasError::Misaligned`].
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_fp8<A: Fp8Element, B: Fp8Element, C: Fp8Output>(
        &self,
        stream: &Stream,
        g: &Fp8Gemm,
        a: &DeviceSlice<A>,
        b: &DeviceSlice<B>,
        a_inv_scale: &DeviceSlice<f32>,
        b_inv_scale: &DeviceSlice<f32>,
        c: &mut DeviceSlice<C>,
    ) -> Result<()> {
        let device = stream.context().limits().compute_capability;
        if device < FP8_MIN_CC {
            return Err(BlasError::UnsupportedDevice {
                op: OP,
                device: device.to_string(),
                needed: "8.9 (Ada) or newer: H100, H200, L4, L40, RTX 40xx",
            });
        }
        if A::DTYPE == DataType::F8E5M2 && B::DTYPE == DataType::F8E5M2 {
            return Err(fp8_error(
                "cuBLASLt multiplies e4m3 x e4m3, e4m3 x e5m2 and e5m2 x e4m3, not e5m2 x e5m2; \
                 quantize one operand to e4m3"
                    .into(),
            ));
        }
        let (m, n, k) = (g.m, g.n, g.k);
        let sa = span("a", m, k, g.lda)?;
        let sb = span("b", n, k, g.ldb)?;
        let sc = span("c", m, n, g.ldc)?;
        check_len("a", sa, a.len(), format!("[{m}, {k}] with lda {}", g.lda))?;
        check_len("b", sb, b.len(), format!("[{n}, {k}] with ldb {}", g.ldb))?;
        check_len("c", sc, c.len(), format!("[{m}, {n}] with ldc {}", g.ldc))?;
        check_len("a_inv_scale", 1, a_inv_scale.len(), "one f32".into())?;
        check_len("b_inv_scale", 1, b_inv_scale.len(), "one f32".into())?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            return Err(fp8_error(
                "k = 0: cuBLASLt's FP8 kernels need k >= 16; the product is zero".into(),
            ));
        }
        if g.lda % 16 != 0 || g.ldb % 16 != 0 {
            return Err(fp8_error(format!(
                "lda = {} and ldb = {} must be multiples of 16 (cuBLASLt's FP8 rule; for dense \
                 operands k must be a multiple of 16: pad k with zeros)",
                g.lda, g.ldb
            )));
        }
        if n % 8 != 0 || g.ldc % 8 != 0 {
            return Err(fp8_error(format!(
                "n = {n} and ldc = {} must be multiples of 8: cuBLASLt's FP8 kernels have no \
                 algorithm otherwise (measured with cuBLASLt 12/13 on an H200: n = 1, 2, 4, 9, \
                 12, 17, 257 refused; 8, 16, 24, 40, 264 run); pad n, or use the project's \
                 wgmma kernel (cuda_stack_kernels::ops::gemm_fp8), which takes any n",
                g.ldc
            )));
        }
        let (a_ptr, b_ptr, c_ptr) = (a.as_raw_ptr(), b.as_raw_ptr(), c.as_raw_ptr());
        // The scales too: cuBLASLt returns NOT_SUPPORTED at launch for scale pointers that are
        // not 16-byte aligned (measured), after its heuristic accepted the problem.
        let (sa_ptr, sb_ptr) = (a_inv_scale.as_raw_ptr(), b_inv_scale.as_raw_ptr());
        for (what, p) in [
            ("a", a_ptr),
            ("b", b_ptr),
            ("c", c_ptr),
            ("a_inv_scale", sa_ptr),
            ("b_inv_scale", sb_ptr),
        ] {
            if alignment(p) < 16 {
                return Err(BlasError::Misaligned {
                    op: OP,
                    operand: what,
                    path: "cuBLASLt's FP8 matmul",
                    found: alignment(p) as usize,
                    required: 16,
                });
            }
        }
        let inner = &*self.inner;
        let lt = inner.lt;
        let bytes = inner.workspace_bytes;
        let align = [alignment(b_ptr), alignment(a_ptr), alignment(c_ptr)];
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);

        // Column-major call: Cᵀ [n, m] = op(first) · second with first = B stored column-major
        // [k, n] (transposed: TN), second = A stored column-major [k, m].
        let desc = MatmulDesc::new(
            lt,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
            DataType::F32.cuda(),
        )?;
        desc.set(
            DescAttr::CUBLASLT_MATMUL_DESC_TRANSA,
            cublasOperation_t::CUBLAS_OP_T.0 as i32,
        )?;
        desc.set(
            DescAttr::CUBLASLT_MATMUL_DESC_TRANSB,
            cublasOperation_t::CUBLAS_OP_N.0 as i32,
        )?;
        desc.set(
            DescAttr::CUBLASLT_MATMUL_DESC_FAST_ACCUM,
            g.fast_accum as i8,
        )?;
        desc.set(
            DescAttr::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
            b_inv_scale.as_raw_ptr(),
        )?;
        desc.set(
            DescAttr::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
            a_inv_scale.as_raw_ptr(),
        )?;
        let l_first = Layout::new(lt, B::DTYPE.cuda(), ki, ni, g.ldb as i32, None)?;
        let l_second = Layout::new(lt, A::DTYPE.cuda(), ki, mi, g.lda as i32, None)?;
        let l_c = Layout::new(lt, C::DTYPE.cuda(), ni, mi, g.ldc as i32, None)?;

        let key = AlgoKey::fp8(
            (mi, ni, ki),
            (g.lda as i32, g.ldb as i32, g.ldc as i32),
            (A::DTYPE, B::DTYPE, C::DTYPE),
            g.fast_accum,
            align,
            bytes,
        );
        let keep = self.keep_alive();
        let mut st = self.lock_for(OP, stream)?;
        let ForStream {
            lt_handle,
            workspace: ws,
            ..
        } = st.workspace_for(stream, bytes)?;
        let no_algorithm = || BlasError::NoAlgorithm {
            op: OP,
            problem: format!(
                "C[{m}, {n}] = A·Bᵀ with k = {k} (lda {}, ldb {}, ldc {}), {:?} x {:?} -> {:?}, \
                 fast accumulation {}",
                g.lda,
                g.ldb,
                g.ldc,
                A::DTYPE,
                B::DTYPE,
                C::DTYPE,
                g.fast_accum
            ),
            workspace: bytes,
        };
        let (algo, needed) = match inner.algos.get(&key) {
            Some(Some(hit)) => hit,
            Some(None) => return Err(no_algorithm()),
            None => {
                inner.algos.count_query();
                let pref = Preference::new(lt, bytes, [align[0], align[1], align[2], align[2]])?;
                let mut result = cublasLtMatmulHeuristicResult_t::default();
                let mut found = 0;
                // SAFETY: live handle and descriptors; one result slot for `requestedAlgoCount`
                // of 1; out-pointers to locals. The heuristic reads no device memory.
                let asked = unsafe {
                    lt.cublasLtMatmulAlgoGetHeuristic(
                        lt_handle,
                        desc.raw,
                        l_first.raw,
                        l_second.raw,
                        l_c.raw,
                        l_c.raw,
                        pref.raw,
                        1,
                        &mut result,
                        &mut found,
                    )
                };
                let none = match asked {
                    Ok(()) => found == 0 || result.state != cublasStatus_t::CUBLAS_STATUS_SUCCESS,
                    Err(e) if e.code() == Some(cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED) => true,
                    Err(e) => return Err(e.into()),
                };
                if none {
                    inner.algos.insert(key, None);
                    return Err(no_algorithm());
                }
                let chosen = (result.algo, result.workspaceSize);
                inner.algos.insert(key, Some(chosen));
                chosen
            }
        };
        if needed > bytes {
            return Err(BlasError::WorkspaceTooSmall {
                op: OP,
                needed,
                available: bytes,
            });
        }
        let (alpha, beta) = (1.0f32, 0.0f32);
        let ws_ptr = ws.as_raw_ptr();
        let uses = [
            ForeignUse::read(a),
            ForeignUse::read(b),
            ForeignUse::read(a_inv_scale),
            ForeignUse::read(b_inv_scale),
            ForeignUse::write(c),
            ForeignUse::write(&mut **ws),
        ];
        let c_raw = c_ptr as *mut std::ffi::c_void;
        // SAFETY: the shape, leading dimensions and lengths of A, B and C and the two scales
        // were checked above, so cuBLASLt reads and writes only inside the buffers in `uses`
        // (beta = 0: C is written, not read); the algorithm was chosen by the heuristic for
        // these descriptors and alignments (all in the cache key) and fits the workspace, which
        // belongs to this stream; the descriptors, algo, alpha and beta live on this frame until
        // the call returns; the handle is locked.
        let r = unsafe {
            stream.enqueue_foreign(&uses, Some(&keep), |raw| {
                lt.cublasLtMatmul(
                    lt_handle,
                    desc.raw,
                    (&alpha as *const f32).cast(),
                    b_ptr as *const std::ffi::c_void,
                    l_first.raw,
                    a_ptr as *const std::ffi::c_void,
                    l_second.raw,
                    (&beta as *const f32).cast(),
                    c_raw,
                    l_c.raw,
                    c_raw,
                    l_c.raw,
                    &algo,
                    ws_ptr as *mut std::ffi::c_void,
                    bytes,
                    raw,
                )
            })
        };
        r?.map_err(Into::into)
    }
}
