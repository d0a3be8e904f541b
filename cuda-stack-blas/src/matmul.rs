//! `Blas::matmul`: a GEMM through cuBLASLt with a fused epilogue (bias, ReLU, GELU), and the
//! cache of the algorithms cuBLASLt's heuristic chose.
//!
//! Seed 004's fused `relu(x·W + b)` is one call: `matmul` with [`Epilogue::BiasRelu`].
//! cuBLASLt's heuristic (`cublasLtMatmulAlgoGetHeuristic`) costs tens of microseconds; it is
//! asked once per distinct problem — shape, leading dimensions, batch, element and compute
//! types, transposes, epilogue, operand alignments and workspace size — and its answer is
//! cached in the handle, so repeated calls (a training loop) go straight to `cublasLtMatmul`.

use crate::handle::BlasInner;
use crate::lt_desc::{Layout, MatmulDesc, Preference};
use crate::shape::ColMajor;
use crate::{Blas, BlasError, DataType, Element, Gemm, Result, Transpose};
use cuda_stack_driver::cuda_stack_sys::cublas_types::{cublasComputeType_t, cublasStatus_t};
use cuda_stack_driver::cuda_stack_sys::cublaslt_types::{
    cublasLtEpilogue_t, cublasLtMatmulAlgo_t, cublasLtMatmulDescAttributes_t as DescAttr,
    cublasLtMatmulHeuristicResult_t,
};
use cuda_stack_driver::{DeviceSlice, ForeignUse, Stream};
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// What cuBLASLt applies to `alpha·op(A)·op(B) + beta·C` before writing `C`. The bias is a
/// vector of `n` elements (one per output column, the `b` of `x·W + b`) added to every row;
/// GELU is the tanh approximation, `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// Nothing: a plain GEMM through cuBLASLt.
    None,
    /// `max(x, 0)`.
    Relu,
    /// `x + bias`.
    Bias,
    /// `max(x + bias, 0)`: seed 004's fused layer.
    BiasRelu,
    /// `gelu(x)`.
    Gelu,
    /// `gelu(x + bias)`.
    BiasGelu,
}

impl Epilogue {
    /// Whether it adds a bias vector.
    pub fn has_bias(self) -> bool {
        matches!(
            self,
            Epilogue::Bias | Epilogue::BiasRelu | Epilogue::BiasGelu
        )
    }

    fn lt(self) -> cublasLtEpilogue_t {
        match self {
            Epilogue::None => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
            Epilogue::Relu => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU,
            Epilogue::Bias => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
            Epilogue::BiasRelu => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS,
            Epilogue::Gelu => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU,
            Epilogue::BiasGelu => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS,
        }
    }
}

/// The alignment the bias vector needs: cuBLASLt's epilogue kernels read it in 16-byte pieces
/// (as PyTorch's and Marian's cuBLASLt paths also require).
pub const BIAS_ALIGNMENT: usize = 16;

/// At most this many problems are cached per handle; past it the cache starts over (a program
/// with ever-new shapes pays the heuristic again, but memory stays bounded).
const CACHE_CAPACITY: usize = 4096;

/// Everything the chosen algorithm depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct AlgoKey {
    trans: (Transpose, Transpose),
    dims: (i32, i32, i32),
    lds: (i32, i32, i32),
    batch: Option<(i32, i64, i64, i64)>,
    types: (DataType, DataType),
    compute: cublasComputeType_t,
    epilogue: Epilogue,
    /// Byte alignment of A, B, C/D (cuBLASLt's order: B first, see `shape`).
    align: [u32; 3],
    workspace: usize,
}

impl AlgoKey {
    fn new(p: &ColMajor, epilogue: Epilogue, align: [u32; 3], workspace: usize) -> AlgoKey {
        AlgoKey {
            trans: (p.trans_first, p.trans_second),
            dims: (p.m, p.n, p.k),
            lds: (p.ld_first, p.ld_second, p.ldc),
            batch: p
                .batched
                .then_some((p.count, p.stride_first, p.stride_second, p.stride_c)),
            types: (p.input, p.output),
            compute: p.compute.compute,
            epilogue,
            align,
            workspace,
        }
    }
}

/// The algorithms chosen so far, with the workspace each needs.
#[derive(Default)]
pub(crate) struct AlgoCache {
    map: HashMap<AlgoKey, (cublasLtMatmulAlgo_t, usize)>,
}

/// The largest power of two (at most 256) that divides `addr`.
pub(crate) fn alignment(addr: u64) -> u32 {
    if addr == 0 {
        256
    } else {
        1u32 << addr.trailing_zeros().min(8)
    }
}

impl Blas {
    /// `C = epilogue(alpha · op(A) · op(B) + beta · C [+ bias])` through cuBLASLt, row-major
    /// (see [`Gemm`]; strided batches share one bias). `bias` must be given exactly when the
    /// epilogue adds one, hold at least `n` elements of `C`'s type and start 16-byte aligned
    /// ([`BIAS_ALIGNMENT`]). Element types as for [`Blas::gemm`]. The algorithm is chosen by
    /// cuBLASLt's heuristic for the operands' actual alignments, once per distinct problem —
    /// shape, leading dimensions, batch, element and compute types, transposes, epilogue,
    /// alignments, workspace — and cached in the handle ([`Blas::heuristic_queries`] counts the
    /// questions); [`BlasError::NoAlgorithm`] when it has none.
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
        let crate::handle::ForStream {
            lt_handle,
            workspace: ws,
            ..
        } = st.workspace_for(stream, bytes)?;
        let cached = lock_cache(inner).map.get(&key).copied();
        let (algo, needed) = match cached {
            Some(hit) => hit,
            None => {
                inner.heuristic_queries.fetch_add(1, Ordering::Relaxed);
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
                    return Err(BlasError::NoAlgorithm {
                        op: OP,
                        problem: describe(g, &p, epilogue, align),
                        workspace: bytes,
                    });
                }
                let chosen = (result.algo, result.workspaceSize);
                let mut cache = lock_cache(inner);
                if cache.map.len() >= CACHE_CAPACITY {
                    cache.map.clear();
                }
                cache.map.insert(key, chosen);
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
        let scalars = crate::element::Scalars::new(p.compute.scale, p.alpha, p.beta);
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
        self.inner.heuristic_queries.load(Ordering::Relaxed)
    }

    /// How many problems have a cached algorithm.
    pub fn cached_algorithms(&self) -> usize {
        lock_cache(&self.inner).map.len()
    }
}

fn lock_cache(inner: &BlasInner) -> std::sync::MutexGuard<'_, AlgoCache> {
    inner.algos.lock().unwrap_or_else(|p| p.into_inner())
}

/// Checks that a bias is given exactly when the epilogue adds one, covers `n` elements and is
/// aligned for the epilogue's loads. `bias` is `(len, address)`.
pub(crate) fn check_bias(
    op: &'static str,
    epilogue: Epilogue,
    bias: Option<(usize, u64)>,
    n: usize,
) -> Result<()> {
    match (epilogue.has_bias(), bias) {
        (true, None) => Err(BlasError::Epilogue {
            op,
            problem: format!("the {epilogue:?} epilogue adds a bias vector, but none was given"),
        }),
        (false, Some(_)) => Err(BlasError::Epilogue {
            op,
            problem: format!(
                "a bias vector was given, but the {epilogue:?} epilogue adds none; use \
                 Epilogue::Bias, BiasRelu or BiasGelu"
            ),
        }),
        (true, Some((len, addr))) => {
            if len < n {
                return Err(BlasError::Length {
                    op,
                    operand: "bias",
                    expected: format!("one value per output column ({n} elements)"),
                    found: len,
                });
            }
            let found = alignment(addr) as usize;
            if found < BIAS_ALIGNMENT {
                return Err(BlasError::Misaligned {
                    op,
                    operand: "bias",
                    path: "cuBLASLt's bias epilogue",
                    found,
                    required: BIAS_ALIGNMENT,
                });
            }
            Ok(())
        }
        (false, None) => Ok(()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_the_largest_power_of_two_up_to_256() {
        assert_eq!(alignment(0x7f00_0000_0000), 256);
        assert_eq!(alignment(0x7f00_0000_0010), 16);
        assert_eq!(alignment(0x7f00_0000_0002), 2);
        assert_eq!(alignment(0x7f00_0000_0001), 1);
        assert_eq!(alignment(0x7f00_0000_0180), 128);
    }

    #[test]
    fn a_bias_goes_with_a_bias_epilogue_only() {
        let aligned = Some((8, 0x1000));
        assert!(check_bias("t", Epilogue::BiasRelu, aligned, 8).is_ok());
        assert!(check_bias("t", Epilogue::Relu, None, 8).is_ok());
        let e = check_bias("t", Epilogue::BiasGelu, None, 8).unwrap_err();
        assert!(matches!(e, BlasError::Epilogue { .. }), "{e}");
        let e = check_bias("t", Epilogue::Gelu, aligned, 8).unwrap_err();
        assert!(e.to_string().contains("adds none"), "{e}");
        match check_bias("t", Epilogue::Bias, Some((7, 0x1000)), 8) {
            Err(BlasError::Length { operand, found, .. }) => {
                assert_eq!((operand, found), ("bias", 7))
            }
            other => panic!("{other:?}"),
        }
        match check_bias("t", Epilogue::Bias, Some((8, 0x1004)), 8) {
            Err(BlasError::Misaligned {
                found, required, ..
            }) => assert_eq!((found, required), (4, 16)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_cache_key_separates_what_the_algorithm_depends_on() {
        let g = Gemm::new(64, 32, 16);
        let p = g
            .plan("t", DataType::F16, DataType::F32, 1024, 512, 2048)
            .unwrap();
        let k = AlgoKey::new(&p, Epilogue::Bias, [256; 3], 1 << 22);
        assert_eq!(k, AlgoKey::new(&p, Epilogue::Bias, [256; 3], 1 << 22));
        assert_ne!(k, AlgoKey::new(&p, Epilogue::BiasRelu, [256; 3], 1 << 22));
        assert_ne!(k, AlgoKey::new(&p, Epilogue::Bias, [256, 2, 256], 1 << 22));
        assert_ne!(k, AlgoKey::new(&p, Epilogue::Bias, [256; 3], 0));
        let t = g.trans_b(Transpose::Yes).leading_dims(16, 16, 32);
        let q = t
            .plan("t", DataType::F16, DataType::F32, 1024, 512, 2048)
            .unwrap();
        assert_ne!(k, AlgoKey::new(&q, Epilogue::Bias, [256; 3], 1 << 22));
    }
}
