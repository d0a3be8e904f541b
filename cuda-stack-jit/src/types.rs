//! Type names in parameter lists (NumPy's, as CuPy takes them, or Rust's), the dtypes they stand
//! for, and the C types the generated code uses for them.

use cuda_stack_runtime::DType;

/// The type of a parameter: a concrete dtype (`float32 x`) or a placeholder (`T x`) that the
/// call binds to the dtype of the argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeSpec {
    /// A fixed dtype.
    Concrete(DType),
    /// A type variable, bound at call time.
    Placeholder(String),
}

/// NumPy names that are dtypes but have no `Tensor` type here.
const UNSUPPORTED: &[&str] = &[
    "bool",
    "bool_",
    "int8",
    "int16",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "uint",
    "float128",
    "complex64",
    "complex128",
    "complex",
    "char",
    "short",
    "unsigned",
];

/// Every dtype, in the order of its code in specialization keys.
pub(crate) const ALL: [DType; 6] = [
    DType::F32,
    DType::F64,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
];

/// The dtype a type name stands for: NumPy's names (`float32`, `int64`, `float16`, and
/// `bfloat16`), C's (`float`, `double`, `int`, `half`) or Rust's (`f32`, `i64`, `bf16`).
pub fn dtype_from_name(name: &str) -> Option<DType> {
    Some(match name {
        "float32" | "float" | "f32" | "single" => DType::F32,
        "float64" | "double" | "f64" => DType::F64,
        "int32" | "int" | "i32" | "intc" => DType::I32,
        "int64" | "i64" | "longlong" | "intp" => DType::I64,
        "float16" | "half" | "f16" => DType::F16,
        "bfloat16" | "bf16" => DType::BF16,
        _ => return None,
    })
}

/// NumPy's name of a dtype (`float32`, …), as messages and generated comments show it.
pub fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::F8E4M3 => "float8_e4m3fn",
        DType::F8E5M2 => "float8_e5m2",
    }
}

/// The C type of a dtype in generated code (`float16` and `bfloat16` are the prelude's
/// structs: 16-bit storage, arithmetic in `float`).
pub fn c_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        // No arithmetic type in the prelude: FP8 elements reach generated code as raw bits.
        DType::F8E4M3 | DType::F8E5M2 => "unsigned char",
    }
}

/// The dtype's code in specialization keys (0..6).
pub(crate) fn code(d: DType) -> u8 {
    ALL.iter().position(|&x| x == d).unwrap_or(0) as u8
}

/// Whether `s` is a C identifier.
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Parses a type specifier: a dtype name, or an identifier taken as a placeholder.
pub(crate) fn parse_type(text: &str) -> Result<TypeSpec, String> {
    if let Some(d) = dtype_from_name(text) {
        return Ok(TypeSpec::Concrete(d));
    }
    if UNSUPPORTED.contains(&text) {
        return Err(format!(
            "`{text}` has no tensor dtype here; the supported types are float32, float64, \
             int32, int64, float16 and bfloat16 (or a placeholder such as T)"
        ));
    }
    if is_identifier(text) {
        return Ok(TypeSpec::Placeholder(text.to_string()));
    }
    Err(format!(
        "`{text}` is neither a type name (float32, float64, int32, int64, float16, bfloat16) \
         nor a placeholder identifier such as T"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(parse_type("float32"), Ok(TypeSpec::Concrete(DType::F32)));
        assert_eq!(parse_type("bf16"), Ok(TypeSpec::Concrete(DType::BF16)));
        assert_eq!(parse_type("T"), Ok(TypeSpec::Placeholder("T".into())));
        assert!(parse_type("uint8").unwrap_err().contains("no tensor dtype"));
        assert!(parse_type("9x").is_err());
        for d in ALL {
            assert_eq!(dtype_from_name(numpy_name(d)), Some(d));
            assert_eq!(ALL[code(d) as usize], d);
        }
    }
}
