//! The kernel family an environment variable asks the automatic choice for
//! ([`ATTENTION_FWD_ENV`](super::ATTENTION_FWD_ENV) for the forward,
//! [`ATTENTION_BWD_ENV`](super::ATTENTION_BWD_ENV) for the backward): one parser for both.

/// The attention kernel families a variable can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FamilyOverride {
    /// The Hopper kernels (TMA, wgmma).
    Wgmma,
    /// The mma.sync kernels.
    Mma,
    /// The SIMT kernels.
    Simt,
}

/// The family `var` names: `wgmma`, `mma` (or `mma.sync`, `tensorcore`) or `simt`,
/// case-insensitive; `None` when unset or another value. Read at every call, so a benchmark can
/// compare the families in one run.
pub(super) fn family_override(var: &str) -> Option<FamilyOverride> {
    let v = std::env::var(var).ok()?;
    match v.trim().to_ascii_lowercase().as_str() {
        "wgmma" => Some(FamilyOverride::Wgmma),
        "mma" | "mma.sync" | "tensorcore" => Some(FamilyOverride::Mma),
        "simt" => Some(FamilyOverride::Simt),
        _ => None,
    }
}
