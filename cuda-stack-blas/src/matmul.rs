//! `Blas::matmul`: a GEMM through cuBLASLt with a fused epilogue (bias, ReLU, GELU), and
//! `Blas::matmul_gelu_aux` / `Blas::matmul_dgelu`: GELU's forward that keeps its input in an
//! auxiliary matrix, and its backward that reads it (the MLP's training pair); and
//! `Blas::matmul_bgrad`: a GEMM that also writes the sums over `k` of one operand (a linear
//! layer's weight gradient with its bias gradient).
//!
//! Seed 004's fused `relu(x·W + b)` is one call: `matmul` with [`Epilogue::BiasRelu`].
//! cuBLASLt's heuristic (`cublasLtMatmulAlgoGetHeuristic`) costs tens of microseconds; it is
//! asked once per distinct problem — shape, leading dimensions, batch, element and compute
//! types, transposes, epilogue, operand alignments and workspace size — and its answer is
//! cached in the handle (`algo_cache`), so repeated calls (a training loop) go straight to
//! `cublasLtMatmul`.

use crate::algo_cache::AlgoKey;
use crate::element::{Element, Scalars};
use crate::epilogue::{
    alignment, check_aux, check_aux_types, check_bgrad_operand, check_bias, check_bias_grad,
    AuxUse, Epilogue,
};
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
        if epilogue.has_aux() || epilogue.has_bias_grad() {
            return Err(BlasError::Epilogue {
                op: "matmul",
                problem: format!(
                    "the {epilogue:?} epilogue uses an auxiliary matrix or writes a bias \
                     gradient; call Blas::matmul_gelu_aux (GeluAux, GeluAuxBias), \
                     Blas::matmul_dgelu (DGelu, DGeluBGrad) or Blas::matmul_bgrad (BGradA, \
                     BGradB)"
                ),
            });
        }
        let io = EpilogueIo {
            bias,
            ..EpilogueIo::default()
        };
        self.matmul_with("matmul", stream, g, epilogue, a, b, io, c)
    }

    /// `C = gelu(alpha · op(A) · op(B) + beta · C [+ bias])` through cuBLASLt, writing the
    /// GELU's input (the pre-activation, bias included) to `aux` as well: the forward of a
    /// linear layer followed by GELU that keeps what [`Blas::matmul_dgelu`] needs
    /// ([`Epilogue::GeluAuxBias`] with a bias, [`Epilogue::GeluAux`] without).
    ///
    /// **Row-major view** (see the [`epilogue`](crate::Epilogue) docs): `aux` is a row-major
    /// `[m, n]` matrix, `C`'s shape, whose row stride is `aux_ld` (in elements; at least `n`
    /// and a multiple of [`AUX_LD_MULTIPLE`](crate::AUX_LD_MULTIPLE) = 8, cuBLASLt's rule),
    /// starting [`AUX_ALIGNMENT`](crate::AUX_ALIGNMENT)-aligned, of `C`'s type. The bias as for
    /// [`Blas::matmul`]. f32 (also TF32), f16 and bf16 outputs; one product (no batch).
    /// Errors: [`BlasError::AuxLeadingDimension`], [`BlasError::LeadingDimension`],
    /// [`BlasError::Length`] and [`BlasError::Misaligned`] (operand `"aux"`),
    /// [`BlasError::Epilogue`] for an f64 output or a batch, and those of [`Blas::matmul`].
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_gelu_aux<A: Element, C: Element>(
        &self,
        stream: &Stream,
        g: &Gemm,
        a: &DeviceSlice<A>,
        b: &DeviceSlice<A>,
        bias: Option<&DeviceSlice<C>>,
        c: &mut DeviceSlice<C>,
        aux: &mut DeviceSlice<C>,
        aux_ld: usize,
    ) -> Result<()> {
        let epilogue = if bias.is_some() {
            Epilogue::GeluAuxBias
        } else {
            Epilogue::GeluAux
        };
        let io = EpilogueIo {
            bias,
            aux: Some(AuxArg::Write(aux)),
            aux_ld,
            ..EpilogueIo::default()
        };
        self.matmul_with("matmul_gelu_aux", stream, g, epilogue, a, b, io, c)
    }

    /// GELU's backward fused into the GEMM that produces its output's gradient:
    /// `C = (alpha · op(A) · op(B) + beta · C) ⊙ gelu'(aux)`, elementwise, with `aux` the
    /// pre-activation [`Blas::matmul_gelu_aux`] wrote; with `bias_grad`, also the column sums of
    /// that `C` (one per column, summed over the `m` rows) — the gradient of the bias of the
    /// linear layer that made `aux` ([`Epilogue::DGeluBGrad`]; [`Epilogue::DGelu`] without).
    ///
    /// In an MLP `y = gelu(x·W₁ᵀ + b₁)·W₂ᵀ + b₂`, the `dH = dY · W₂` GEMM of the second layer's
    /// backward (`op(A) = dY [rows, out]`, `op(B) = W₂ [out, hidden]`) with this epilogue gives
    /// `d(pre) [rows, hidden]` and `db₁ [hidden]` at once. `aux` is a row-major `[m, n]` matrix
    /// with row stride `aux_ld` (at least `n`, a multiple of 8), 16-byte aligned; `bias_grad`
    /// holds at least `n` elements, 16-byte aligned, of `C`'s type. Types, batches and errors
    /// as for [`Blas::matmul_gelu_aux`] (operands `"aux"`, `"bias_grad"`).
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_dgelu<A: Element, C: Element>(
        &self,
        stream: &Stream,
        g: &Gemm,
        a: &DeviceSlice<A>,
        b: &DeviceSlice<A>,
        aux: &DeviceSlice<C>,
        aux_ld: usize,
        bias_grad: Option<&mut DeviceSlice<C>>,
        c: &mut DeviceSlice<C>,
    ) -> Result<()> {
        let epilogue = if bias_grad.is_some() {
            Epilogue::DGeluBGrad
        } else {
            Epilogue::DGelu
        };
        let io = EpilogueIo {
            bias_grad,
            aux: Some(AuxArg::Read(aux)),
            aux_ld,
            ..EpilogueIo::default()
        };
        self.matmul_with("matmul_dgelu", stream, g, epilogue, a, b, io, c)
    }

    /// `C = alpha · op(A) · op(B) + beta · C` through cuBLASLt, and the sums over `k` of one
    /// input operand written to `bias_grad`, in the same GEMM (cuBLASLt's `BGRADA` / `BGRADB`
    /// epilogues; the names swap, see the [`epilogue`](crate::Epilogue) docs):
    /// - [`Epilogue::BGradA`]: `bias_grad[i] = Σ_p op(A)[i, p]`, one per row of `C` (`m`);
    /// - [`Epilogue::BGradB`]: `bias_grad[j] = Σ_p op(B)[p, j]`, one per column of `C` (`n`).
    ///
    /// A linear layer `Y = X·Wᵀ + b` with `dY [rows, out]`, `X [rows, in]`: the weight gradient
    /// `dW [out, in] = dYᵀ · X` is `Gemm::new(out, in, rows).trans_a(Transpose::Yes)` with
    /// `a = dY`, `b = X`, and [`Epilogue::BGradA`] gives `db = Σ_rows dY` (`out` elements) from
    /// the same read of `dY`. The sums are accumulated in the compute type (f32 for 16-bit
    /// inputs) and rounded once to `C`'s type.
    ///
    /// `bias_grad` holds at least `m` ([`Epilogue::BGradA`]) or `n` ([`Epilogue::BGradB`])
    /// elements of `C`'s type, 16-byte aligned ([`AUX_ALIGNMENT`](crate::AUX_ALIGNMENT)); only
    /// those are written. f32 (also TF32), f16 and bf16 outputs; one product (no batch);
    /// `alpha = 1` (cuBLASLt does not document whether alpha scales the sums). cuBLASLt may have
    /// no kernel with these epilogues for a transpose, type or alignment combination (odd 16-bit
    /// leading dimensions, say): [`BlasError::NoAlgorithm`], nothing written — compute the
    /// product with [`Blas::gemm`] and reduce separately. The heuristic may also pick another
    /// kernel than the plain GEMM's (not split-K): measure before assuming it is faster.
    /// Errors: [`BlasError::Epilogue`] for another epilogue, f64, a batch, `alpha ≠ 1` or an
    /// empty product (`m`, `n` or `k` = 0: cuBLASLt would write no sums);
    /// [`BlasError::Length`] and [`BlasError::Misaligned`] (operand `"bias_grad"`); and those of
    /// [`Blas::matmul`].
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_bgrad<A: Element, C: Element>(
        &self,
        stream: &Stream,
        g: &Gemm,
        epilogue: Epilogue,
        a: &DeviceSlice<A>,
        b: &DeviceSlice<A>,
        bias_grad: &mut DeviceSlice<C>,
        c: &mut DeviceSlice<C>,
    ) -> Result<()> {
        if !matches!(epilogue, Epilogue::BGradA | Epilogue::BGradB) {
            return Err(BlasError::Epilogue {
                op: "matmul_bgrad",
                problem: format!(
                    "matmul_bgrad takes Epilogue::BGradA or BGradB, not {epilogue:?}; use \
                     Blas::matmul or Blas::matmul_dgelu"
                ),
            });
        }
        let io = EpilogueIo {
            bias_grad: Some(bias_grad),
            ..EpilogueIo::default()
        };
        self.matmul_with("matmul_bgrad", stream, g, epilogue, a, b, io, c)
    }

    /// The one cuBLASLt call behind [`Blas::matmul`], [`Blas::matmul_gelu_aux`],
    /// [`Blas::matmul_dgelu`] and [`Blas::matmul_bgrad`]: every check first, then the heuristic
    /// (cached) and the GEMM.
    #[allow(clippy::too_many_arguments)]
    fn matmul_with<A: Element, C: Element>(
        &self,
        op: &'static str,
        stream: &Stream,
        g: &Gemm,
        epilogue: Epilogue,
        a: &DeviceSlice<A>,
        b: &DeviceSlice<A>,
        io: EpilogueIo<'_, C>,
        c: &mut DeviceSlice<C>,
    ) -> Result<()> {
        let EpilogueIo {
            bias,
            bias_grad,
            aux,
            aux_ld,
        } = io;
        let p = g.plan(op, A::DTYPE, C::DTYPE, a.len(), b.len(), c.len())?;
        check_bias(op, epilogue, bias.map(|b| (b.len(), b.as_raw_ptr())), g.n)?;
        check_bias_grad(
            op,
            epilogue,
            bias_grad.as_ref().map(|b| (b.len(), b.as_raw_ptr())),
            g.m,
            g.n,
        )?;
        check_bgrad_operand(op, epilogue, g.alpha, (g.m, g.n, g.k))?;
        let aux_parts = aux.as_ref().map(|x| {
            let (len, ptr) = match x {
                AuxArg::Read(s) => (s.len(), s.as_raw_ptr()),
                AuxArg::Write(s) => (s.len(), s.as_raw_ptr()),
            };
            (len, ptr, aux_ld)
        });
        check_aux(op, epilogue, aux_parts, g.m, g.n)?;
        check_aux_types(op, epilogue, C::DTYPE)?;
        if let Some(use_) = epilogue.aux() {
            if p.batched {
                return Err(BlasError::Epilogue {
                    op,
                    problem: format!(
                        "the {epilogue:?} epilogue ({}) is supported for one product, not a \
                         strided batch; call it once per matrix",
                        match use_ {
                            AuxUse::Write => "GELU forward with its auxiliary output",
                            AuxUse::Read => "GELU backward",
                        }
                    ),
                });
            }
        }
        if epilogue.has_bias_grad() && p.batched {
            return Err(BlasError::Epilogue {
                op,
                problem: format!(
                    "the {epilogue:?} epilogue (a bias gradient) is supported for one product, \
                     not a strided batch; call it once per matrix"
                ),
            });
        }
        if p.is_empty() {
            return Ok(());
        }
        let inner = &*self.inner;
        let lt = inner.lt;
        let bytes = inner.workspace_bytes;
        let (a_ptr, b_ptr, c_ptr) = (a.as_raw_ptr(), b.as_raw_ptr(), c.as_raw_ptr());
        let align = [alignment(b_ptr), alignment(a_ptr), alignment(c_ptr)];
        let aux_ptr = aux_parts.map(|(_, ptr, _)| ptr);
        let vector_ptr = bias
            .map(|b| b.as_raw_ptr())
            .or(bias_grad.as_ref().map(|b| b.as_raw_ptr()));

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
        // The bias (read) or the bias gradient (written): one attribute. One element per row of
        // cuBLASLt's D, i.e. per column of our row-major C — except BGRADB (our BGradA): one per
        // column of D, per row of C. Its type is C's (BIAS_DATA_TYPE left at its default).
        if let Some(ptr) = vector_ptr {
            desc.set(DescAttr::CUBLASLT_MATMUL_DESC_BIAS_POINTER, ptr)?;
        }
        // The auxiliary matrix: cuBLASLt's D-shaped column-major [n, m] matrix with leading
        // dimension aux_ld is, byte for byte, our row-major [m, n] with row stride aux_ld. Set
        // before the heuristic, which reads the address for its alignment.
        if let Some(ptr) = aux_ptr {
            desc.set(DescAttr::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, ptr)?;
            desc.set(
                DescAttr::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                aux_ld as i64,
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

        let key = AlgoKey::new(&p, epilogue, align, bytes).with_vectors(
            vector_ptr.map(alignment),
            aux_ptr.map(|ptr| (aux_ld as i64, alignment(ptr))),
        );
        let keep = self.keep_alive();
        let mut st = self.lock_for(op, stream)?;
        let ForStream {
            lt_handle,
            workspace: ws,
            ..
        } = st.workspace_for(stream, bytes)?;
        let no_algorithm = || BlasError::NoAlgorithm {
            op,
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
                op,
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
        if let Some(grad) = bias_grad {
            uses.push(ForeignUse::write(grad));
        }
        match aux {
            Some(AuxArg::Read(x)) => uses.push(ForeignUse::read(x)),
            Some(AuxArg::Write(x)) => uses.push(ForeignUse::write(x)),
            None => {}
        }
        let (first, second) = (
            b_ptr as *const std::ffi::c_void,
            a_ptr as *const std::ffi::c_void,
        );
        let c_raw = c_ptr as *mut std::ffi::c_void;
        // SAFETY: `plan` checked the shape, leading dimensions, batch and lengths of A, B and C,
        // `check_bias` / `check_bias_grad` the bias's (n) or bias gradient's length (m for
        // BGradA, n otherwise; bias-gradient epilogues are refused for batches) and alignment, and `check_aux` the auxiliary matrix's leading dimension (>= n, a multiple
        // of 8), length ((m - 1)·ld + n) and alignment (aux epilogues are refused for batches),
        // so cuBLASLt reads and writes only inside the buffers in `uses` (each written one is a
        // distinct `&mut` borrow); the algorithm was chosen by the heuristic for these
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

/// What an epilogue reads or writes besides A, B and C.
struct EpilogueIo<'a, C: Element> {
    bias: Option<&'a DeviceSlice<C>>,
    bias_grad: Option<&'a mut DeviceSlice<C>>,
    aux: Option<AuxArg<'a, C>>,
    aux_ld: usize,
}

impl<C: Element> Default for EpilogueIo<'_, C> {
    fn default() -> Self {
        EpilogueIo {
            bias: None,
            bias_grad: None,
            aux: None,
            aux_ld: 0,
        }
    }
}

/// The auxiliary matrix, as the epilogue uses it.
enum AuxArg<'a, C: Element> {
    Read(&'a DeviceSlice<C>),
    Write(&'a mut DeviceSlice<C>),
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
