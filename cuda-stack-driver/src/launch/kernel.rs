//! `Kernel<Args>`: a function handle that carries its Rust signature.

use super::args::{KernelArg, KernelParam, Signature};
use crate::{Function, LaunchConfig, Result, Stream};
use std::ffi::c_void;
use std::marker::PhantomData;

/// A kernel whose parameter types are part of its type, e.g.
/// `Kernel<(&DeviceSlice<f32>, &DeviceSlice<f32>, &mut DeviceSlice<f32>, i32)>` for
/// `vector_add(const float*, const float*, float*, int)`.
///
/// [`Kernel::launch`] takes exactly those arguments, so a launch with the wrong types, the wrong
/// number of arguments, or a read-only buffer where the kernel writes does not compile.
///
/// Two promises stand between a kernel and memory safety, and both are `unsafe`:
/// - **making the handle** ([`crate::Module::kernel`], [`Kernel::from_function`]): the CUDA
///   declaration matches `Args` (checked as far as the module allows: the number and byte sizes
///   of the parameters always, and where the module is PTX their kinds too, so an `f32` where
///   the kernel takes an `unsigned` is refused: [`crate::ParamKind`]);
/// - **launching it** ([`Kernel::launch`]): with *this* grid and *these* scalar values the kernel
///   stays inside the buffers it is given. Only the caller can know that: `add(a, b, out, n)` is
///   in bounds for `n <= out.len()` and out of bounds for `n = 2 * out.len()`, and nothing in the
///   types says which scalar is a length.
///
/// ## Name a signature once
/// A type alias (with `'static` in the references: each launch borrows for as long as it needs,
/// see [`KernelParam::Arg`]) names the signature in one place, beside the CUDA declaration, and
/// keeps the `unsafe` promise out of every call site's turbofish:
///
/// ```no_run
/// use cuda_stack_driver::{Context, DeviceSlice, Kernel, Module};
/// /// `scale(const float* x, float* y, float a, unsigned n)` in scale.cu.
/// type Scale = Kernel<(&'static DeviceSlice<f32>, &'static mut DeviceSlice<f32>, f32, u32)>;
///
/// fn scale_kernel(m: &Module) -> cuda_stack_driver::Result<Scale> {
///     // SAFETY: `Scale` is scale.cu's declaration, parameter for parameter.
///     unsafe { m.kernel("scale") }
/// }
/// ```
///
/// Safe code launches kernels through wrappers that check the shapes against the real buffers
/// first and then make the `unsafe` call (the ops of `cuda-stack-kernels` are such wrappers). The
/// crate-level [soundness model](crate#soundness-model) says what the rest of the launch
/// guarantees (ordering across streams, graph keep-alive, context checks).
pub struct Kernel<Args> {
    func: Function,
    _sig: PhantomData<fn() -> Args>,
}

impl<Args> Clone for Kernel<Args> {
    fn clone(&self) -> Self {
        Kernel {
            func: self.func.clone(),
            _sig: PhantomData,
        }
    }
}

impl<Args> std::fmt::Debug for Kernel<Args> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Kernel({:?}: {})",
            self.func.name(),
            std::any::type_name::<Args>()
        )
    }
}

impl<Args: Signature> Kernel<Args> {
    /// Wraps `func` after checking its parameter sizes against `Args`.
    ///
    /// # Safety
    /// The kernel's CUDA declaration must match `Args`: pointer parameters the kernel writes must
    /// be `&mut DeviceSlice<T>` of the right `T`, pointers it only reads `&DeviceSlice<T>`, and
    /// scalars their exact C type. (Staying in bounds is promised per launch: see
    /// [`Kernel::launch`].)
    pub unsafe fn from_function(func: Function) -> Result<Kernel<Args>> {
        func.check_param_sizes(Args::SIZES)?;
        func.check_param_kinds::<Args>()?;
        Ok(Kernel {
            func,
            _sig: PhantomData,
        })
    }

    /// Wraps `func` without asking the driver for its parameters: for handles whose signature
    /// a generator checked ahead of time against the very image `func` was loaded from (as
    /// `cuda-stack-build` does against the PTX `.entry`, and compiles the SASS from the same
    /// source). Saves the `cuFuncGetParamInfo` probes [`Kernel::from_function`] makes, one per
    /// parameter plus one past the last, which are most of a module's load time once the module
    /// is machine code.
    ///
    /// # Safety
    /// As for [`Kernel::from_function`], and in addition the entry's parameter count and byte
    /// sizes must be exactly `Args::SIZES` (the check this skips would otherwise refuse a
    /// mismatch; launching with wrong sizes makes the kernel read garbage arguments).
    pub unsafe fn from_function_prechecked(func: Function) -> Kernel<Args> {
        Kernel {
            func,
            _sig: PhantomData,
        }
    }

    /// The untyped function.
    pub fn function(&self) -> &Function {
        &self.func
    }
}

macro_rules! impl_launch {
    ($($A:ident $a:ident $v:ident),*) => {
        impl<$($A: KernelParam),*> Kernel<($($A,)*)> {
            /// Queues the kernel on `stream` with `cfg` (validated first) and these arguments.
            /// Buffers are ordered across streams as the [`crate::memory`] docs describe; during a
            /// graph capture the graph keeps the buffers and the module alive.
            ///
            /// # Safety
            /// With `cfg`'s grid and block and these scalar values, every memory access the kernel
            /// makes through a buffer argument must fall inside that buffer's `len()` elements,
            /// and it must access no other device memory (no pointers smuggled in scalars or
            /// structs, no module globals written while other kernels read them). Check every
            /// length/shape scalar against the buffers before calling (e.g. `n <= out.len()`
            /// for a one-thread-per-element kernel with an `if (i < n)` guard); a kernel without
            /// a bounds guard needs the grid itself checked too. With
            /// [`LaunchConfig::with_programmatic_dependency`] the kernel must also run
            /// `griddepcontrol.wait` before its first access to any buffer (the ordering this
            /// call does for the buffers holds only from that point).
            #[allow(clippy::too_many_arguments, unused_mut)]
            #[inline]
            pub unsafe fn launch(&self, stream: &Stream, cfg: &LaunchConfig $(, $a: $A::Arg<'_>)*) -> Result<()> {
                let _gate = self.func.prepare(stream, cfg)?;
                $( $a.before_launch(stream)?; )*
                $( let $v = $a.value(); )*
                let mut params: [*mut c_void; 0 $(+ { let _ = stringify!($A); 1 })*] =
                    [$( &$v as *const _ as *mut c_void ),*];
                // SAFETY: the signature was checked against the kernel when the handle was made
                // (and promised by its maker); bounds are promised by our caller; each pointer
                // refers to a live local of the parameter's exact size; buffers are live for the
                // call and ordered on `stream`; `_gate` keeps the capture state fixed.
                unsafe { self.func.launch_prepared(stream, cfg, &mut params)? };
                // After-use bookkeeping settles the stream itself if it fails (see
                // `Allocation::after_use`), so an error here leaves nothing untracked.
                let mut first_err = Ok(());
                $( if let Err(e) = $a.after_launch(stream) { if first_err.is_ok() { first_err = Err(e); } } )*
                first_err
            }
        }
    };
}
impl_launch!();
impl_launch!(A0 a0 v0);
impl_launch!(A0 a0 v0, A1 a1 v1);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29, A30 a30 v30);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29, A30 a30 v30, A31 a31 v31);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29, A30 a30 v30, A31 a31 v31, A32 a32 v32);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29, A30 a30 v30, A31 a31 v31, A32 a32 v32, A33 a33 v33);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29, A30 a30 v30, A31 a31 v31, A32 a32 v32, A33 a33 v33, A34 a34 v34);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29, A30 a30 v30, A31 a31 v31, A32 a32 v32, A33 a33 v33, A34 a34 v34, A35 a35 v35);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29, A30 a30 v30, A31 a31 v31, A32 a32 v32, A33 a33 v33, A34 a34 v34, A35 a35 v35, A36 a36 v36);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29, A30 a30 v30, A31 a31 v31, A32 a32 v32, A33 a33 v33, A34 a34 v34, A35 a35 v35, A36 a36 v36, A37 a37 v37);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29, A30 a30 v30, A31 a31 v31, A32 a32 v32, A33 a33 v33, A34 a34 v34, A35 a35 v35, A36 a36 v36, A37 a37 v37, A38 a38 v38);
impl_launch!(A0 a0 v0, A1 a1 v1, A2 a2 v2, A3 a3 v3, A4 a4 v4, A5 a5 v5, A6 a6 v6, A7 a7 v7, A8 a8 v8, A9 a9 v9, A10 a10 v10, A11 a11 v11, A12 a12 v12, A13 a13 v13, A14 a14 v14, A15 a15 v15, A16 a16 v16, A17 a17 v17, A18 a18 v18, A19 a19 v19, A20 a20 v20, A21 a21 v21, A22 a22 v22, A23 a23 v23, A24 a24 v24, A25 a25 v25, A26 a26 v26, A27 a27 v27, A28 a28 v28, A29 a29 v29, A30 a30 v30, A31 a31 v31, A32 a32 v32, A33 a33 v33, A34 a34 v34, A35 a35 v35, A36 a36 v36, A37 a37 v37, A38 a38 v38, A39 a39 v39);
