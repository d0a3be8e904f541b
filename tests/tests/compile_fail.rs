//! Compile-fail suite: misuse of `cuda-stack-driver`'s safe API that must not compile.
//!
//! Each case in `tests/compile_fail/` states what misuse it proves impossible; its `.stderr` is the
//! error rustc must give. Regenerate them (after checking each one is still the intended error)
//! with `TRYBUILD=overwrite cargo test -p cuda-tests --test compile_fail`.

#[test]
fn compile_fail() {
    let t = trybuild::TestCases::new();
    t.compile_fail("compile_fail/*.rs");
}
