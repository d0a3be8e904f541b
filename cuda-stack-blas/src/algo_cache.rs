//! The algorithms cuBLASLt's heuristic chose, per handle: keyed by everything the choice depends
//! on, and counted, so a training loop asks the heuristic once per distinct problem — also when
//! the answer was "no algorithm" (a caller that then takes another path, as
//! `Tensor::linear` does, must not pay the question on every call).

use crate::element::DataType;
use crate::epilogue::Epilogue;
use crate::shape::{ColMajor, Transpose};
use cuda_stack_driver::cuda_stack_sys::cublas_types::cublasComputeType_t;
use cuda_stack_driver::cuda_stack_sys::cublaslt_types::cublasLtMatmulAlgo_t;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

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
    /// FP8 products only: the second operand's type and fast accumulation.
    fp8: Option<(DataType, bool)>,
    /// The alignment of the bias (or bias-gradient) vector, where there is one: the heuristic
    /// reads its address.
    vector_align: Option<u32>,
    /// The GELU epilogues' auxiliary matrix: leading dimension and alignment.
    aux: Option<(i64, u32)>,
}

impl AlgoKey {
    pub(crate) fn new(
        p: &ColMajor,
        epilogue: Epilogue,
        align: [u32; 3],
        workspace: usize,
    ) -> AlgoKey {
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
            fp8: None,
            vector_align: None,
            aux: None,
        }
    }

    /// The key with the bias (or bias-gradient) vector's alignment and the auxiliary matrix's
    /// leading dimension and alignment, which the heuristic's choice depends on too.
    pub(crate) fn with_vectors(
        mut self,
        vector_align: Option<u32>,
        aux: Option<(i64, u32)>,
    ) -> AlgoKey {
        (self.vector_align, self.aux) = (vector_align, aux);
        self
    }

    /// The key of an FP8 product (`matmul_fp8`: TN, no batch, no epilogue): dims (m, n, k),
    /// leading dimensions (lda, ldb, ldc), types (A, B, C), fast accumulation.
    pub(crate) fn fp8(
        dims: (i32, i32, i32),
        lds: (i32, i32, i32),
        types: (DataType, DataType, DataType),
        fast_accum: bool,
        align: [u32; 3],
        workspace: usize,
    ) -> AlgoKey {
        AlgoKey {
            trans: (Transpose::Yes, Transpose::No),
            dims,
            lds,
            batch: None,
            types: (types.0, types.2),
            compute: cublasComputeType_t::CUBLAS_COMPUTE_32F,
            epilogue: Epilogue::None,
            align,
            workspace,
            fp8: Some((types.1, fast_accum)),
            vector_align: None,
            aux: None,
        }
    }
}

/// An algorithm the heuristic chose, with the workspace bytes it needs.
pub(crate) type Chosen = (cublasLtMatmulAlgo_t, usize);

/// The heuristic's answers so far for one handle (`None`: it had no algorithm), and how many
/// times it was asked.
#[derive(Default)]
pub(crate) struct AlgoCache {
    map: Mutex<HashMap<AlgoKey, Option<Chosen>>>,
    queries: AtomicU64,
}

impl AlgoCache {
    /// The map, locked (a poisoned lock holds a consistent map: every change is one insert or
    /// one clear).
    fn lock(&self) -> MutexGuard<'_, HashMap<AlgoKey, Option<Chosen>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The heuristic's answer for `key` (`Some(None)`: no algorithm), if it was asked before.
    pub(crate) fn get(&self, key: &AlgoKey) -> Option<Option<Chosen>> {
        self.lock().get(key).copied()
    }

    /// Counts one question to the heuristic (asked whether or not it finds an algorithm).
    pub(crate) fn count_query(&self) {
        self.queries.fetch_add(1, Ordering::Relaxed);
    }

    /// Remembers the heuristic's answer for `key` (`None`: no algorithm).
    pub(crate) fn insert(&self, key: AlgoKey, chosen: Option<Chosen>) {
        let mut map = self.lock();
        if map.len() >= CACHE_CAPACITY {
            map.clear();
        }
        map.insert(key, chosen);
    }

    /// How many times the heuristic was asked.
    pub(crate) fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }

    /// How many problems have an algorithm cached.
    pub(crate) fn len(&self) -> usize {
        self.lock().values().filter(|c| c.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Gemm;

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

    #[test]
    fn the_cache_counts_questions_and_starts_over_when_full() {
        let cache = AlgoCache::default();
        let g = Gemm::new(8, 8, 8);
        let p = g
            .plan("t", DataType::F32, DataType::F32, 64, 64, 64)
            .unwrap();
        let chosen = (cublasLtMatmulAlgo_t::default(), 128);
        for w in 0..CACHE_CAPACITY {
            let key = AlgoKey::new(&p, Epilogue::None, [256; 3], w);
            assert!(cache.get(&key).is_none());
            cache.count_query();
            cache.insert(key, Some(chosen));
        }
        assert_eq!(
            (cache.len(), cache.queries()),
            (CACHE_CAPACITY, CACHE_CAPACITY as u64)
        );
        let first = AlgoKey::new(&p, Epilogue::None, [256; 3], 0);
        assert_eq!(cache.get(&first).flatten().map(|c| c.1), Some(128));
        cache.insert(AlgoKey::new(&p, Epilogue::Relu, [256; 3], 0), Some(chosen));
        assert_eq!(cache.len(), 1);
        assert!(cache.get(&first).is_none());
    }

    #[test]
    fn a_no_algorithm_answer_is_remembered_too() {
        let cache = AlgoCache::default();
        let p = Gemm::new(8, 8, 8)
            .plan("t", DataType::F32, DataType::F32, 64, 64, 64)
            .unwrap();
        let key = AlgoKey::new(&p, Epilogue::Bias, [4; 3], 0);
        assert_eq!(cache.get(&key), None);
        cache.insert(key, None);
        // Asked once: the answer "none" is known, and it counts as no cached algorithm.
        assert_eq!(cache.get(&key), Some(None));
        assert_eq!(cache.len(), 0);
    }
}
