//! [`ParamKind`]: what PTX says a kernel parameter is (float, integer or pointer, other).

/// What kind of value a kernel parameter is, as far as PTX tells: its `.param` declarations
/// name a type (`.f32`, `.u32`, `.s64`, `.b8 name[16]`), and a typed handle is refused when a
/// Rust type of one kind stands where the PTX declares the other (an `f32` where the kernel
/// takes an `unsigned`, say), which the byte sizes alone cannot see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// `f32`, `f64`: a PTX `.f32` / `.f64` (or untyped `.b`) parameter.
    Float,
    /// An integer, or a device pointer (a slice): a PTX `.u`, `.s` (or `.b`) parameter.
    Integer,
    /// Anything else (a `#[repr(C)]` struct, `f16`/`bf16` bits): not checked beyond its size.
    Other,
}

impl ParamKind {
    /// The kind of the by-value type `T`.
    pub fn of<T: 'static>() -> ParamKind {
        use std::any::TypeId;
        let t = TypeId::of::<T>();
        let is = |ids: &[TypeId]| ids.contains(&t);
        if is(&[TypeId::of::<f32>(), TypeId::of::<f64>()]) {
            ParamKind::Float
        } else if is(&[
            TypeId::of::<u8>(),
            TypeId::of::<i8>(),
            TypeId::of::<u16>(),
            TypeId::of::<i16>(),
            TypeId::of::<u32>(),
            TypeId::of::<i32>(),
            TypeId::of::<u64>(),
            TypeId::of::<i64>(),
            TypeId::of::<usize>(),
            TypeId::of::<isize>(),
        ]) {
            ParamKind::Integer
        } else {
            ParamKind::Other
        }
    }

    /// Whether a parameter of this kind may stand where PTX declares type `ptx_type` (e.g.
    /// `"f32"`, `"u64"`, `"b8"`).
    pub(crate) fn fits_ptx(self, ptx_type: &str) -> bool {
        !matches!(
            (self, ptx_type.as_bytes().first()),
            (ParamKind::Float, Some(b'u' | b's')) | (ParamKind::Integer, Some(b'f'))
        )
    }
}

impl std::fmt::Display for ParamKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ParamKind::Float => "a float",
            ParamKind::Integer => "an integer or pointer",
            ParamKind::Other => "a value",
        })
    }
}
