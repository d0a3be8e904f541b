//! Which Rust types may live in device memory.

/// A type that can live in device memory and be copied to and from it byte for byte.
///
/// It is exactly [`bytemuck::Pod`] (plus `Send + Sync`): plain data with no padding, no
/// references, valid for any bit pattern — whatever bytes a kernel writes, reading them back as
/// `T` is sound. So `f32`, `u32`, `[f32; 4]`, `half::f16` and your `#[repr(C)]` structs with
/// `#[derive(Pod, Zeroable)]` qualify; `bool` (only 0 and 1 are valid), enums, references, `Vec`
/// and `String` do not, and `DeviceBuffer<bool>` does not compile.
pub trait DeviceRepr: bytemuck::Pod + Send + Sync {}

impl<T: bytemuck::Pod + Send + Sync> DeviceRepr for T {}
