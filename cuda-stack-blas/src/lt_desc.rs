//! cuBLASLt's host-side descriptors (operation, matrix layouts, search preference), owned:
//! each is destroyed when dropped. They live in host memory and need no GPU.

use crate::error::Result;
use cuda_stack_driver::cuda_stack_sys::cublas_types::cublasComputeType_t;
use cuda_stack_driver::cuda_stack_sys::cublaslt_types::{
    cublasLtMatmulDescAttributes_t as DescAttr, cublasLtMatmulDesc_t,
    cublasLtMatmulPreferenceAttributes_t as PrefAttr, cublasLtMatmulPreference_t,
    cublasLtMatrixLayoutAttribute_t as LayoutAttr, cublasLtMatrixLayout_t,
};
use cuda_stack_driver::cuda_stack_sys::{cublas_types::cudaDataType_t, CublasLt};
use std::ffi::c_void;

fn as_buf<T>(v: &T) -> (*const c_void, usize) {
    ((v as *const T).cast(), std::mem::size_of::<T>())
}

/// A `cublasLtMatmulDesc_t`.
pub(crate) struct MatmulDesc {
    lt: &'static CublasLt,
    pub(crate) raw: cublasLtMatmulDesc_t,
}

impl MatmulDesc {
    pub(crate) fn new(
        lt: &'static CublasLt,
        compute: cublasComputeType_t,
        scale: cudaDataType_t,
    ) -> Result<MatmulDesc> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; destroyed in Drop.
        unsafe { lt.cublasLtMatmulDescCreate(&mut raw, compute, scale)? };
        Ok(MatmulDesc { lt, raw })
    }

    /// Sets an attribute to `value`, whose type must be the one cuBLASLt documents for `attr`.
    pub(crate) fn set<T: Copy>(&self, attr: DescAttr, value: T) -> Result<()> {
        let (p, n) = as_buf(&value);
        // SAFETY: live descriptor; `p` points to `n` bytes of the attribute's type (the callers
        // pass the documented types: i32 operations, u32 epilogue, device pointers, i64 aux ld).
        unsafe {
            self.lt
                .cublasLtMatmulDescSetAttribute(self.raw, attr, p, n)?
        };
        Ok(())
    }
}

impl Drop for MatmulDesc {
    fn drop(&mut self) {
        // SAFETY: ours, destroyed once.
        if let Err(e) = unsafe { self.lt.cublasLtMatmulDescDestroy(self.raw) } {
            log::warn!("cuda-stack-blas: cublasLtMatmulDescDestroy failed in Drop: {e}");
        }
    }
}

/// A column-major `cublasLtMatrixLayout_t`, optionally a strided batch.
pub(crate) struct Layout {
    lt: &'static CublasLt,
    pub(crate) raw: cublasLtMatrixLayout_t,
}

impl Layout {
    pub(crate) fn new(
        lt: &'static CublasLt,
        dtype: cudaDataType_t,
        rows: i32,
        cols: i32,
        ld: i32,
        batch: Option<(i32, i64)>,
    ) -> Result<Layout> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; destroyed in Drop (also when a setter below fails).
        unsafe {
            lt.cublasLtMatrixLayoutCreate(&mut raw, dtype, rows as u64, cols as u64, ld as i64)?
        };
        let layout = Layout { lt, raw };
        if let Some((count, stride)) = batch {
            layout.set(LayoutAttr::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count)?;
            layout.set(
                LayoutAttr::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                stride,
            )?;
        }
        Ok(layout)
    }

    fn set<T: Copy>(&self, attr: LayoutAttr, value: T) -> Result<()> {
        let (p, n) = as_buf(&value);
        // SAFETY: live layout; the callers pass the documented types (i32 count, i64 stride).
        unsafe {
            self.lt
                .cublasLtMatrixLayoutSetAttribute(self.raw, attr, p, n)?
        };
        Ok(())
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: ours, destroyed once.
        if let Err(e) = unsafe { self.lt.cublasLtMatrixLayoutDestroy(self.raw) } {
            log::warn!("cuda-stack-blas: cublasLtMatrixLayoutDestroy failed in Drop: {e}");
        }
    }
}

/// A `cublasLtMatmulPreference_t`: the workspace limit and the operands' alignments.
pub(crate) struct Preference {
    lt: &'static CublasLt,
    pub(crate) raw: cublasLtMatmulPreference_t,
}

impl Preference {
    /// `align` is the byte alignment of A, B, C and D, as cuBLASLt's `MIN_ALIGNMENT` preferences
    /// (the heuristic then only offers algorithms valid for these addresses).
    pub(crate) fn new(
        lt: &'static CublasLt,
        workspace: usize,
        align: [u32; 4],
    ) -> Result<Preference> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; destroyed in Drop.
        unsafe { lt.cublasLtMatmulPreferenceCreate(&mut raw)? };
        let pref = Preference { lt, raw };
        pref.set(
            PrefAttr::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            workspace as u64,
        )?;
        let attrs = [
            PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
            PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
            PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
        ];
        for (attr, a) in attrs.into_iter().zip(align) {
            pref.set(attr, a)?;
        }
        Ok(pref)
    }

    fn set<T: Copy>(&self, attr: PrefAttr, value: T) -> Result<()> {
        let (p, n) = as_buf(&value);
        // SAFETY: live preference; u64 workspace bytes and u32 alignments, as documented.
        unsafe {
            self.lt
                .cublasLtMatmulPreferenceSetAttribute(self.raw, attr, p, n)?
        };
        Ok(())
    }
}

impl Drop for Preference {
    fn drop(&mut self) {
        // SAFETY: ours, destroyed once.
        if let Err(e) = unsafe { self.lt.cublasLtMatmulPreferenceDestroy(self.raw) } {
            log::warn!("cuda-stack-blas: cublasLtMatmulPreferenceDestroy failed in Drop: {e}");
        }
    }
}
