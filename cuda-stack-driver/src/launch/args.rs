//! How Rust types map to kernel parameters.

use super::param_kind::ParamKind;
use crate::memory::DeviceSlice;
use crate::{DeviceRepr, Result, Stream};

/// A type that stands for one parameter in a typed kernel's signature, e.g. the `&DeviceSlice<f32>`
/// in `Kernel<(&DeviceSlice<f32>, &mut DeviceSlice<f32>, u32)>`.
///
/// - `&DeviceSlice<T>`: a pointer the kernel only reads (`const T*`);
/// - `&mut DeviceSlice<T>`: a pointer the kernel writes (`T*`);
/// - any `T: DeviceRepr` (`u32`, `f32`, a `#[repr(C)]` Pod struct): passed by value.
///
/// The lifetimes written in the signature do not matter: each launch takes arguments with its
/// own lifetimes ([`KernelParam::Arg`]), so a handle can be stored as
/// `Kernel<(&'static DeviceSlice<f32>, …)>` and launched with short-lived borrows.
///
/// # Safety
/// `SIZE` must be the number of bytes of [`KernelArg::Value`] for `Arg`.
pub unsafe trait KernelParam {
    /// The argument a launch takes for this parameter.
    type Arg<'a>: KernelArg;
    /// Bytes this parameter occupies in the kernel's parameter buffer.
    const SIZE: usize;
    /// What kind of value it is, checked against the PTX declaration (`.f32` vs `.u32`) where
    /// the module is PTX.
    fn kind() -> ParamKind;
}

/// A value passed to a kernel at launch.
///
/// # Safety
/// `value()` must return exactly what the kernel parameter expects, and `before_launch` /
/// `after_launch` must order any device memory it refers to (see [`crate::memory`]).
pub unsafe trait KernelArg {
    /// The bytes handed to the driver: the device address for slices, the value for scalars.
    type Value: Copy;
    /// The value.
    fn value(&self) -> Self::Value;
    /// Called before the launch is queued on `stream`.
    #[doc(hidden)]
    fn before_launch(&self, _stream: &Stream) -> Result<()> {
        Ok(())
    }
    /// Called after the launch was queued on `stream`.
    #[doc(hidden)]
    fn after_launch(&self, _stream: &Stream) -> Result<()> {
        Ok(())
    }
}

fn check_slice_device<T>(s: &DeviceSlice<T>, stream: &Stream) -> Result<()> {
    let home = &s.home().ctx;
    if home.same_as(stream.context()) {
        Ok(())
    } else {
        Err(crate::Error::DeviceMismatch {
            what: "a kernel argument buffer",
            expected: stream.context().device().ordinal() as i32,
            found: home.device().ordinal() as i32,
        })
    }
}

// SAFETY: a device address is 8 bytes.
unsafe impl<T: DeviceRepr> KernelParam for &DeviceSlice<T> {
    type Arg<'a> = &'a DeviceSlice<T>;
    const SIZE: usize = 8;
    fn kind() -> ParamKind {
        ParamKind::Integer
    }
}

// SAFETY: as above.
unsafe impl<T: DeviceRepr> KernelParam for &mut DeviceSlice<T> {
    type Arg<'a> = &'a mut DeviceSlice<T>;
    const SIZE: usize = 8;
    fn kind() -> ParamKind {
        ParamKind::Integer
    }
}

// SAFETY: a Pod value is passed as its own bytes.
unsafe impl<T: DeviceRepr> KernelParam for T {
    type Arg<'a> = T;
    const SIZE: usize = std::mem::size_of::<T>();
    fn kind() -> ParamKind {
        ParamKind::of::<T>()
    }
}

// SAFETY: passes the device address; orders the allocation around the launch.
unsafe impl<T: DeviceRepr> KernelArg for &DeviceSlice<T> {
    type Value = u64;
    #[inline]
    fn value(&self) -> u64 {
        self.as_raw_ptr()
    }
    #[inline]
    fn before_launch(&self, stream: &Stream) -> Result<()> {
        check_slice_device(self, stream)?;
        self.before_use(&stream.inner)
    }
    #[inline]
    fn after_launch(&self, stream: &Stream) -> Result<()> {
        self.after_use(&stream.inner)
    }
}

// SAFETY: as above.
unsafe impl<T: DeviceRepr> KernelArg for &mut DeviceSlice<T> {
    type Value = u64;
    #[inline]
    fn value(&self) -> u64 {
        self.as_raw_ptr()
    }
    #[inline]
    fn before_launch(&self, stream: &Stream) -> Result<()> {
        check_slice_device(self, stream)?;
        self.before_use(&stream.inner)
    }
    #[inline]
    fn after_launch(&self, stream: &Stream) -> Result<()> {
        self.after_use(&stream.inner)
    }
}

// SAFETY: a Pod scalar is passed by value.
unsafe impl<T: DeviceRepr> KernelArg for T {
    type Value = T;
    #[inline]
    fn value(&self) -> T {
        *self
    }
}

/// A tuple of [`KernelParam`]s: a kernel's whole signature.
///
/// # Safety
/// `SIZES` lists each parameter's `SIZE` in order.
pub unsafe trait Signature {
    /// Byte sizes of the parameters, in order.
    const SIZES: &'static [usize];
    /// The first parameter (position and kind) whose kind does not fit its PTX type in
    /// `ptx_types` (one per parameter, e.g. `"f32"`), or `None`. Allocates nothing: it runs each
    /// time a typed handle is made, which some callers do per launch.
    fn first_kind_mismatch(ptx_types: &[String]) -> Option<(usize, ParamKind)>;
}

macro_rules! impl_signature {
    ($($A:ident),*) => {
        // SAFETY: lists each parameter's size in order.
        unsafe impl<$($A: KernelParam),*> Signature for ($($A,)*) {
            const SIZES: &'static [usize] = &[$($A::SIZE),*];
            fn first_kind_mismatch(ptx_types: &[String]) -> Option<(usize, ParamKind)> {
                let kinds: &[ParamKind] = &[$($A::kind()),*];
                kinds
                    .iter()
                    .zip(ptx_types)
                    .position(|(k, t)| !k.fits_ptx(t))
                    .map(|i| (i, kinds[i]))
            }
        }
    };
}
impl_signature!();
impl_signature!(A0);
impl_signature!(A0, A1);
impl_signature!(A0, A1, A2);
impl_signature!(A0, A1, A2, A3);
impl_signature!(A0, A1, A2, A3, A4);
impl_signature!(A0, A1, A2, A3, A4, A5);
impl_signature!(A0, A1, A2, A3, A4, A5, A6);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7, A8);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7, A8, A9);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16);
impl_signature!(A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31, A32
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31, A32, A33
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31, A32, A33, A34
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31, A32, A33, A34, A35
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31, A32, A33, A34, A35, A36
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31, A32, A33, A34, A35, A36, A37
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31, A32, A33, A34, A35, A36, A37, A38
);
impl_signature!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31, A32, A33, A34, A35, A36, A37, A38, A39
);
