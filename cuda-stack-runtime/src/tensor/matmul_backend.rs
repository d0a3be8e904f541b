//! Which implementation [`Tensor::matmul`](super::Tensor::matmul) uses, and whether f32 products
//! may use TF32 — PyTorch's `torch.backends.cuda.preferred_blas_library` and
//! `torch.backends.cuda.matmul.allow_tf32`, as settings of this crate.
//!
//! | setting | default | process-wide | this thread only | environment |
//! |---|---|---|---|---|
//! | backend | [`MatmulBackend::Auto`] | [`set_matmul_backend`] | [`with_matmul_backend`] | `CUDA_RS_MATMUL_BACKEND=auto\|cublas\|kernels` |
//! | TF32 for f32 | off | [`set_allow_tf32`] | [`with_allow_tf32`] | `CUDA_RS_ALLOW_TF32=1` |
//!
//! The environment is read once, on first use; a call of the `set_` functions replaces it. A
//! thread's [`with_matmul_backend`] / [`with_allow_tf32`] wins over the process-wide setting
//! while its closure runs.

use super::error::{Result, TensorError};
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

/// The environment variable that picks the default [`MatmulBackend`].
pub const MATMUL_BACKEND_VAR: &str = "CUDA_RS_MATMUL_BACKEND";
/// The environment variable that turns TF32 on for f32 products (`1`/`true`/`on`).
pub const ALLOW_TF32_VAR: &str = "CUDA_RS_ALLOW_TF32";

/// The implementation behind [`Tensor::matmul`](super::Tensor::matmul).
///
/// | dtype | `Cublas` | `Kernels` |
/// |---|---|---|
/// | f32 | `cublasGemmEx`, f32 (TF32 if [`allow_tf32`]) | the fast sgemm kernel |
/// | f64 | `cublasGemmEx`, f64 | the 16×16 tiled kernel |
/// | f16, bf16 | `cublasGemmEx`, f32 accumulation, rounded once to f16/bf16 | cast to f32, sgemm, cast back (the same f32 accumulation and one rounding; a fallback until tensor-core kernels take its place behind this switch) |
/// | i32 | — (cuBLAS has no i32 GEMM: [`TensorError::UnsupportedDType`]) | the 16×16 tiled kernel (wrapping) |
///
/// Batched (3-D) products are one `cublasGemmStridedBatchedEx` call on cuBLAS (operands taken as
/// they are stored when their batch and row strides allow), a loop over the batch on the
/// kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MatmulBackend {
    /// cuBLAS where it is installed and supports the dtype, the kernels otherwise (like
    /// PyTorch, which always uses cuBLAS).
    #[default]
    Auto,
    /// cuBLAS, or an error: [`TensorError::Blas`] when it cannot be loaded,
    /// [`TensorError::UnsupportedDType`] for i32.
    Cublas,
    /// The project's own kernels (`cuda-stack-kernels`), never cuBLAS.
    Kernels,
}

impl MatmulBackend {
    /// Parses `auto`, `cublas` or `kernels` (any case).
    pub fn parse(s: &str) -> Option<MatmulBackend> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(MatmulBackend::Auto),
            "cublas" => Some(MatmulBackend::Cublas),
            "kernels" => Some(MatmulBackend::Kernels),
            _ => None,
        }
    }

    fn code(self) -> u8 {
        match self {
            MatmulBackend::Auto => 1,
            MatmulBackend::Cublas => 2,
            MatmulBackend::Kernels => 3,
        }
    }

    fn from_code(c: u8) -> Option<MatmulBackend> {
        match c {
            1 => Some(MatmulBackend::Auto),
            2 => Some(MatmulBackend::Cublas),
            3 => Some(MatmulBackend::Kernels),
            _ => None,
        }
    }
}

/// 0: not decided yet (read the environment); 4: the environment holds an invalid value.
static GLOBAL: AtomicU8 = AtomicU8::new(0);
const INVALID: u8 = 4;
/// 0: not decided yet; 1: off; 2: on.
static TF32: AtomicU8 = AtomicU8::new(0);

thread_local! {
    static LOCAL: Cell<Option<MatmulBackend>> = const { Cell::new(None) };
    static LOCAL_TF32: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Sets a thread-local `Cell` for the duration of `f`, restoring it after (also on panic).
fn scoped<T: Copy + 'static, R>(
    key: &'static std::thread::LocalKey<Cell<Option<T>>>,
    value: T,
    f: impl FnOnce() -> R,
) -> R {
    struct Restore<T: Copy + 'static>(&'static std::thread::LocalKey<Cell<Option<T>>>, Option<T>);
    impl<T: Copy + 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            self.0.with(|l| l.set(self.1));
        }
    }
    let _restore = Restore(key, key.with(|l| l.replace(Some(value))));
    f()
}

/// Sets the backend for every thread (that is not inside [`with_matmul_backend`]).
pub fn set_matmul_backend(backend: MatmulBackend) {
    GLOBAL.store(backend.code(), Ordering::Relaxed);
}

/// Runs `f` with `backend` as this thread's matmul backend, then restores the previous one
/// (also if `f` panics).
pub fn with_matmul_backend<R>(backend: MatmulBackend, f: impl FnOnce() -> R) -> R {
    scoped(&LOCAL, backend, f)
}

/// The backend `Tensor::matmul` uses on this thread now; an invalid
/// `CUDA_RS_MATMUL_BACKEND` is an error naming the value and the valid ones.
pub fn matmul_backend() -> Result<MatmulBackend> {
    if let Some(b) = LOCAL.with(Cell::get) {
        return Ok(b);
    }
    let mut code = GLOBAL.load(Ordering::Relaxed);
    if code == 0 {
        code = match std::env::var(MATMUL_BACKEND_VAR) {
            Err(_) => MatmulBackend::Auto.code(),
            Ok(v) => MatmulBackend::parse(&v).map_or(INVALID, MatmulBackend::code),
        };
        // Only the first reader decides; a `set_matmul_backend` meanwhile wins.
        let _ = GLOBAL.compare_exchange(0, code, Ordering::Relaxed, Ordering::Relaxed);
        code = GLOBAL.load(Ordering::Relaxed);
    }
    MatmulBackend::from_code(code).ok_or_else(|| TensorError::InvalidArgument {
        op: "matmul",
        problem: format!(
            "{MATMUL_BACKEND_VAR} is {:?}; expected auto, cublas or kernels (or call \
             set_matmul_backend)",
            std::env::var(MATMUL_BACKEND_VAR).unwrap_or_default()
        ),
    })
}

/// Allows (or forbids) TF32 tensor cores for f32 products on cuBLAS: ~1e-3 relative error for
/// several times the speed. Off by default, as PyTorch's `allow_tf32` for matmul.
pub fn set_allow_tf32(allow: bool) {
    TF32.store(if allow { 2 } else { 1 }, Ordering::Relaxed);
}

/// Runs `f` with TF32 allowed (or not) for this thread's f32 products, then restores the
/// previous setting (also if `f` panics).
pub fn with_allow_tf32<R>(allow: bool, f: impl FnOnce() -> R) -> R {
    scoped(&LOCAL_TF32, allow, f)
}

/// Whether f32 products may use TF32 on this thread (see [`set_allow_tf32`],
/// [`with_allow_tf32`]; `CUDA_RS_ALLOW_TF32`).
pub fn allow_tf32() -> bool {
    if let Some(v) = LOCAL_TF32.with(Cell::get) {
        return v;
    }
    let mut v = TF32.load(Ordering::Relaxed);
    if v == 0 {
        let on = std::env::var(ALLOW_TF32_VAR)
            .map(|s| matches!(s.trim().to_ascii_lowercase().as_str(), "1" | "true" | "on"))
            .unwrap_or(false);
        let _ = TF32.compare_exchange(
            0,
            if on { 2 } else { 1 },
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        v = TF32.load(Ordering::Relaxed);
    }
    v == 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        assert_eq!(
            MatmulBackend::parse(" CuBLAS "),
            Some(MatmulBackend::Cublas)
        );
        assert_eq!(
            MatmulBackend::parse("kernels"),
            Some(MatmulBackend::Kernels)
        );
        assert_eq!(MatmulBackend::parse("auto"), Some(MatmulBackend::Auto));
        assert_eq!(MatmulBackend::parse("cublsa"), None);
    }

    #[test]
    fn the_thread_setting_wins_and_is_restored() {
        let outer = matmul_backend().unwrap_or_default();
        with_matmul_backend(MatmulBackend::Kernels, || {
            assert_eq!(matmul_backend().unwrap(), MatmulBackend::Kernels);
            with_matmul_backend(MatmulBackend::Cublas, || {
                assert_eq!(matmul_backend().unwrap(), MatmulBackend::Cublas)
            });
            assert_eq!(matmul_backend().unwrap(), MatmulBackend::Kernels);
        });
        assert_eq!(matmul_backend().unwrap_or_default(), outer);
        let caught = std::panic::catch_unwind(|| {
            with_matmul_backend(MatmulBackend::Cublas, || panic!("inside"))
        });
        assert!(caught.is_err());
        assert_eq!(matmul_backend().unwrap_or_default(), outer);
    }
}
