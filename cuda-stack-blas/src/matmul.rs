//! `Blas::matmul`: a GEMM through cuBLASLt with a fused epilogue (bias, ReLU, GELU).
//!
//! Seed 004's fused `relu(x·W + b)` is one call: `matmul` with [`Epilogue::BiasRelu`].
//! cuBLASLt's heuristic (`cublasLtMatmulAlgoGetHeuristic`) costs tens of microseconds; it is
//! asked once per distinct problem — shape, leading dimensions, batch, element and compute
//! types, transposes, epilogue, operand alignments and workspace size — and its answer is
//! cached in the handle (`algo_cache`), so repeated calls (a training loop) go straight to
//! `cublasLtMatmul`.

use crate::algo_cache::AlgoKey;
use crate::element::{Element, Scalars};
use crate::epilogue::{alignment, check_bias, Epilogue};
use crate::error::{BlasError, Result};
use crate::handle::{Blas, ForStream};
use crate::lt_desc::{Layout, MatmulDesc, Preference};
use crate::shape::{ColMajor, Gemm, Transpose};
use cuda_stack_driver::cuda_stack_sys::cublas_types::cublasStatus_t;
use cuda_stack_driver::cuda_stack_sys::cublaslt_types::{
    cublasLtMatmulDescAttributes_t as DescAttr, cublasLtMatmulHeuristicResult_t,
};
use cuda_stack_driver::{DeviceSlice, ForeignUse, Stream};

impl Blas {
    /// `C = epilogue(alpha · op(A) · op(B) + beta · C [+ bias])` through cuBLASLt, row-major
    /// (see [`Gemm`]; strided batches share one bias). `bias` must be given exactly when the
    /// epilogue adds one, hold at least `n` elements of `C`'s type and start 16-byte aligned
    /// ([`BIAS_ALIGNMENT`](crate::BIAS_ALIGNMENT)). Element types as for [`Blas::gemm`]. The
    /// algorithm is chosen by cuBLASLt's heuristic for the operands' actual alignments, once per
    /// distinct problem — shape, leading dimensions, batch, element and compute types,
    /// transposes, epilogue, alignments, workspace — and cached in the handle
    /// ([`Blas::heuristic_queries`] counts the questions); [`BlasError::NoAlgorithm`] when it
    /// has none.
    #[allow(clippy::too_many_arguments)]
    pub fn matmul<A: Element, C: Element>(
        &self,
        stream: &Stream,
        g: &Gemm,
        epilogue: Epilogue,
        a: &DeviceSlice<A>,
        b: &DeviceSlice<A>,
        bias: Option<&DeviceSlice<C>>,
        c: &mut DeviceSlice<C>,
    ) -> Result<()> {
        const OP: &str = "matmul";
        let p = g.plan(OP, A::DTYPE, C::DTYPE, a.len(), b.len(), c.len())?;
        check_bias(OP, epilogue, bias.map(|b| (b.len(), b.as_raw_ptr())), g.n)?;
        if p.is_empty() {
            return Ok(());
        }
        let inner = &*self.inner;
        let lt = inner.lt;
        let bytes = inner.workspace_bytes;
        let (a_ptr, b_ptr, c_ptr) = (a.as_raw_ptr(), b.as_raw_ptr(), c.as_raw_ptr());
        let align = [alignment(b_ptr), alignment(a_ptr), alignment(c_ptr)];

        let desc = MatmulDesc::new(lt, p.compute.compute, p.compute.scale.cuda())?;
        desc.set(
            DescAttr::CUBLASLT_MATMUL_DESC_TRANSA,
            p.trans_first.cublas().0 as i32,
        )?;
        desc.set(
            DescAttr::CUBLASLT_MATMUL_DESC_TRANSB,
            p.trans_second.cublas().0 as i32,
        )?;
        desc.set(DescAttr::CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue.lt().0)?;
        if let Some(bias) = bias {
            desc.set(
                DescAttr::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                bias.as_raw_ptr(),
            )?;
        }
        let batch = |stride| p.batched.then_some((p.count, stride));
        let stored = |t: Transpose, rows: i32, cols: i32| match t {
            Transpose::No => (rows, cols),
            Transpose::Yes => (cols, rows),
        };
        let (r1, c1) = stored(p.trans_first, p.m, p.k);
        let (r2, c2) = stored(p.trans_second, p.k, p.n);
        let (ti, to) = (p.input.cuda(), p.output.cuda());
        let l_first = Layout::new(lt, ti, r1, c1, p.ld_first, batch(p.stride_first))?;
        let l_second = Layout::new(lt, ti, r2, c2, p.ld_second, batch(p.stride_second))?;
        let l_c = Layout::new(lt, to, p.m, p.n, p.ldc, batch(p.stride_c))?;

        let key = AlgoKey::new(&p, epilogue, align, bytes);
        let keep = self.keep_alive();
        let mut st = self.lock_for(OP, stream)?;
        let ForStream {
            lt_handle,
            workspace: ws,
            ..
        } = st.workspace_for(stream, bytes)?;
        let no_algorithm = || BlasError::NoAlgorithm {
            op: OP,
            problem: describe(g, &p, epilogue, align),
            workspace: bytes,
        };
        let (algo, needed) = match inner.algos.get(&key) {
            Some(Some(hit)) => hit,
            // Asked before, and it had none: the same answer, without asking again.
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
        let scalars = Scalars::new(p.compute.scale, p.alpha, p.beta);
        let (alpha, beta) = scalars.ptrs();
        let ws_ptr = ws.as_raw_ptr();
        let mut uses = vec![
            ForeignUse::read(a),
            ForeignUse::read(b),
            ForeignUse::write(c),
            ForeignUse::write(&mut **ws),
        ];
        if let Some(bias) = bias {
            uses.push(ForeignUse::read(bias));
        }
        let (first, second) = (
            b_ptr as *const std::ffi::c_void,
            a_ptr as *const std::ffi::c_void,
        );
        let c_raw = c_ptr as *mut std::ffi::c_void;
        // SAFETY: `plan` checked the shape, leading dimensions, batch and lengths of A, B and C,
        // and `check_bias` the bias's length (n) and alignment, so cuBLASLt reads and writes
        // only inside the buffers in `uses`; the algorithm was chosen by the heuristic for these
        // descriptors and alignments (the cache key holds all of them) and fits the workspace,
        // which belongs to this stream; the descriptors, algo, alpha and beta live on this frame
        // until the call returns; the handle is locked.
        let r = unsafe {
            stream.enqueue_foreign(&uses, Some(&keep), |raw| {
                lt.cublasLtMatmul(
                    lt_handle,
                    desc.raw,
                    alpha,
                    first,
                    l_first.raw,
                    second,
                    l_second.raw,
                    beta,
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

    /// How many times this handle asked cuBLASLt's heuristic for an algorithm: once per
    /// distinct problem, not once per call.
    pub fn heuristic_queries(&self) -> u64 {
        self.inner.algos.queries()
    }

    /// How many problems have a cached algorithm.
    pub fn cached_algorithms(&self) -> usize {
        self.inner.algos.len()
    }
}

fn describe(g: &Gemm, p: &ColMajor, epilogue: Epilogue, align: [u32; 3]) -> String {
    format!(
        "C[{}, {}] = op(A)·op(B) with k = {} (A {:?}, B {:?}; lda {}, ldb {}, ldc {}{}), \
         {:?} inputs, {:?} output, epilogue {epilogue:?}, addresses aligned to A {} B {} C {} bytes",
        g.m,
        g.n,
        g.k,
        g.trans_a,
        g.trans_b,
        g.lda(),
        g.ldb(),
        g.ldc(),
        if p.batched {
            format!(", batch of {}", p.count)
        } else {
            String::new()
        },
        p.input,
        p.output,
        align[1],
        align[0],
        align[2],
    )
}
