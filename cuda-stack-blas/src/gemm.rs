//! `Blas::gemm`: one product or a strided batch through `cublasGemmEx` /
//! `cublasGemmStridedBatchedEx`.

use crate::element::{Element, Scalars};
use crate::error::Result;
use crate::handle::{bind_stream, Blas, ForStream};
use crate::shape::Gemm;
use cuda_stack_driver::cuda_stack_sys::cublas_types::cublasGemmAlgo_t;
use cuda_stack_driver::{DeviceSlice, ForeignUse, Stream};

impl Blas {
    /// `C = alpha · op(A) · op(B) + beta · C`, row-major (see [`Gemm`]), queued on `stream`.
    ///
    /// Element types: `A` for both inputs, `C` for the output; f32 → f32 (TF32 with
    /// [`crate::Math::Tf32`]), f64 → f64, f16 → f16 or f32, bf16 → bf16 or f32, all with f32
    /// accumulation except f64. Every shape, leading dimension, batch stride and buffer length is
    /// checked first ([`Gemm::check`]); an unsupported combination is
    /// [`crate::BlasError::UnsupportedTypes`]. `c`'s old values are read only when `beta != 0`.
    ///
    /// ```no_run
    /// use cuda_stack_blas::{Blas, Gemm};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = cuda_stack_driver::Context::new(0)?;
    /// let stream = ctx.new_stream()?;
    /// let blas = Blas::get(&ctx)?;
    /// let a = stream.clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?; // [2, 3]
    /// let b = stream.clone_htod(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0])?; // [3, 2]
    /// let mut c = stream.alloc_zeros::<f32>(4)?; // [2, 2]
    /// blas.gemm(&stream, &Gemm::new(2, 2, 3), &a, &b, &mut c)?;
    /// assert_eq!(stream.clone_dtoh(&c)?, [4.0, 5.0, 10.0, 11.0]);
    /// # Ok(()) }
    /// ```
    pub fn gemm<A: Element, C: Element>(
        &self,
        stream: &Stream,
        g: &Gemm,
        a: &DeviceSlice<A>,
        b: &DeviceSlice<A>,
        c: &mut DeviceSlice<C>,
    ) -> Result<()> {
        let p = g.plan("gemm", A::DTYPE, C::DTYPE, a.len(), b.len(), c.len())?;
        if p.is_empty() {
            return Ok(());
        }
        let scalars = Scalars::new(p.compute.scale, p.alpha, p.beta);
        let (alpha, beta) = scalars.ptrs();
        let (a_ptr, b_ptr, c_ptr) = (a.as_raw_ptr(), b.as_raw_ptr(), c.as_raw_ptr());
        let cublas = self.inner.cublas;
        let bytes = self.inner.workspace_bytes;
        let keep = self.keep_alive();
        let mut st = self.lock_for("gemm", stream)?;
        let ForStream {
            handle,
            bound,
            workspace: ws,
            ..
        } = st.workspace_for(stream, bytes)?;
        let ws_ptr = ws.as_raw_ptr();
        let uses = [
            ForeignUse::read(a),
            ForeignUse::read(b),
            ForeignUse::write(c),
            ForeignUse::write(&mut **ws),
        ];
        let (first, second) = (
            b_ptr as *const std::ffi::c_void,
            a_ptr as *const std::ffi::c_void,
        );
        let algo = cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT;
        // SAFETY: `plan` checked m, n, k, the leading dimensions, the batch strides and count
        // against the buffers' lengths (cuBLAS reads `first`/`second` and writes `c` only inside
        // the spans checked there), and the element types against `A`/`C`; the handle is locked
        // for the call; the workspace belongs to this stream and has `bytes` bytes; alpha and
        // beta live on this frame until the call returns (host pointer mode).
        let r = unsafe {
            stream.enqueue_foreign(&uses, Some(&keep), |raw| {
                bind_stream(cublas, handle, bound, raw, ws_ptr, bytes)?;
                let (ta, tb) = (p.trans_first.cublas(), p.trans_second.cublas());
                let (ti, to) = (p.input.cuda(), p.output.cuda());
                if p.batched {
                    cublas.cublasGemmStridedBatchedEx(
                        handle,
                        ta,
                        tb,
                        p.m,
                        p.n,
                        p.k,
                        alpha,
                        first,
                        ti,
                        p.ld_first,
                        p.stride_first,
                        second,
                        ti,
                        p.ld_second,
                        p.stride_second,
                        beta,
                        c_ptr as *mut std::ffi::c_void,
                        to,
                        p.ldc,
                        p.stride_c,
                        p.count,
                        p.compute.compute,
                        algo,
                    )
                } else {
                    cublas.cublasGemmEx(
                        handle,
                        ta,
                        tb,
                        p.m,
                        p.n,
                        p.k,
                        alpha,
                        first,
                        ti,
                        p.ld_first,
                        second,
                        ti,
                        p.ld_second,
                        beta,
                        c_ptr as *mut std::ffi::c_void,
                        to,
                        p.ldc,
                        p.compute.compute,
                        algo,
                    )
                }
            })
        };
        r?.map_err(Into::into)
    }
}
