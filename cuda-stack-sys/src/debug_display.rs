//! `Debug` that says what `Display` says, for the family's error types. `fn main() -> Result<(),
//! E>` prints a returned error with `Debug`, and a derived `Debug` of these errors is a struct
//! dump (the missing-driver [`crate::LoadError`], with every place tried nested in it, runs to
//! kilobytes) where `Display` is the readable text, numbered list and hint included.

/// Implements `Debug` for an error type as `Type::Variant: <Display>` (for an enum that derives
/// `strum::IntoStaticStr`) or `Type: <Display>` (for a struct). For the crates of this family.
#[doc(hidden)]
#[macro_export]
macro_rules! debug_as_display {
    (enum $t:ident) => {
        impl ::core::fmt::Debug for $t {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                let variant: &'static str = self.into();
                write!(f, concat!(stringify!($t), "::{}: {}"), variant, self)
            }
        }
    };
    (struct $t:ident) => {
        impl ::core::fmt::Debug for $t {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                write!(f, concat!(stringify!($t), ": {}"), self)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use crate::{DriverError, LoadError, MissingSymbol};

    #[test]
    fn debug_is_the_display_text() {
        let e = LoadError {
            library: "the CUDA driver (libcuda)",
            attempts: Vec::new(),
            note: Some("CUDA_DRIVER_PATH is set".into()),
            hint: "install the NVIDIA driver",
        };
        assert_eq!(format!("{e:?}"), format!("LoadError: {e}"));
        let d = DriverError::MissingSymbol(MissingSymbol {
            symbol: "cuFoo",
            library: "libcuda.so.1".into(),
            version: "13.0".into(),
            what: "CUDA driver",
        });
        assert_eq!(format!("{d:?}"), format!("DriverError::MissingSymbol: {d}"));
    }
}
