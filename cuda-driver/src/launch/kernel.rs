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
/// number of arguments, or a read-only buffer where the kernel writes does not compile, and a
/// launch needs no `unsafe`. Making the handle ([`crate::Module::kernel`]) is the `unsafe` step: it
/// is the promise that the CUDA declaration matches. That promise is checked as far as the driver
/// allows: the number and byte sizes of the kernel's parameters must match the signature.
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
    /// scalars their exact C type, and the kernel must not access memory beyond what the
    /// arguments describe given the launch configuration callers will use.
    pub unsafe fn from_function(func: Function) -> Result<Kernel<Args>> {
        func.check_param_sizes(Args::SIZES)?;
        Ok(Kernel {
            func,
            _sig: PhantomData,
        })
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
            /// Buffers are ordered across streams as the [`crate::memory`] docs describe.
            #[allow(clippy::too_many_arguments, unused_mut)]
            #[inline]
            pub fn launch(&self, stream: &Stream, cfg: &LaunchConfig $(, $a: $A::Arg<'_>)*) -> Result<()> {
                self.func.prepare(stream, cfg)?;
                $( $a.before_launch(stream)?; )*
                $( let $v = $a.value(); )*
                let mut params: [*mut c_void; 0 $(+ { let _ = stringify!($A); 1 })*] =
                    [$( &$v as *const _ as *mut c_void ),*];
                // SAFETY: the signature was checked against the kernel when the handle was made
                // (and promised by its maker); each pointer refers to a live local of the
                // parameter's exact size; buffers are live for the call and ordered on `stream`.
                unsafe { self.func.launch_prepared(stream, cfg, &mut params)? };
                $( $a.after_launch(stream)?; )*
                Ok(())
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
