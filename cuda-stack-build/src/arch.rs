//! GPU architectures: what `75`, `sm_80`, `compute_90a` mean, and which ones exist.

use crate::error::BuildError;
use crate::known_archs::KNOWN;
use std::fmt;

/// The architecture every file is compiled for unless it asks for others: `compute_75`
/// (Turing), the oldest the project's kernels support. Its PTX runs on every newer GPU.
pub const DEFAULT_ARCH: Arch = Arch {
    major: 7,
    minor: 5,
    variant: Variant::Portable,
};

/// How far a target's code carries to newer GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// `compute_80`: runs on compute capability 8.0 and every newer GPU.
    Portable,
    /// `compute_90a`: may use features of exactly this GPU (e.g. Hopper's `wgmma`); runs only
    /// on compute capability 9.0, never on a newer GPU.
    ArchSpecific,
    /// `compute_100f`: runs on GPUs of the same family (same major version, minor ≥ this).
    FamilySpecific,
}

/// A GPU architecture: compute capability `major.minor` plus a [`Variant`]. Written `75`,
/// `sm_75`, `compute_75` or `7.5` (all the same), `90a`, `100f`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    /// Compute capability major version.
    pub major: u32,
    /// Compute capability minor version.
    pub minor: u32,
    /// Portable, architecture-specific (`a`) or family-specific (`f`).
    pub variant: Variant,
}

impl Arch {
    /// Parses `75`, `sm_75`, `compute_75`, `7.5`, `90a`, `sm_90a`, `100f`. Unknown
    /// architectures are [`BuildError::UnsupportedArch`], with the list of known ones.
    pub fn parse(text: &str) -> Result<Arch, BuildError> {
        let t = text.trim();
        let unsupported = |why: &str| BuildError::UnsupportedArch {
            arch: text.to_string(),
            compiler: None,
            message: why.to_string(),
        };
        let body = t
            .strip_prefix("compute_")
            .or_else(|| t.strip_prefix("sm_"))
            .or_else(|| t.strip_prefix("sm"))
            .unwrap_or(t);
        let (digits, variant) = match body.as_bytes().last() {
            Some(b'a') => (&body[..body.len() - 1], Variant::ArchSpecific),
            Some(b'f') => (&body[..body.len() - 1], Variant::FamilySpecific),
            _ => (body, Variant::Portable),
        };
        let (major, minor) = if let Some((a, b)) = digits.split_once('.') {
            match (a.parse::<u32>(), b.parse::<u32>()) {
                (Ok(a), Ok(b)) if b < 10 => (a, b),
                _ => return Err(unsupported("not an architecture name")),
            }
        } else {
            match digits.parse::<u32>() {
                Ok(n) if (10..=999).contains(&n) => (n / 10, n % 10),
                _ => return Err(unsupported("not an architecture name")),
            }
        };
        if !KNOWN.contains(&(major, minor)) {
            return Err(unsupported("no CUDA release has this architecture"));
        }
        if variant == Variant::ArchSpecific && major < 9 {
            return Err(unsupported(
                "architecture-specific (`a`) targets exist from 9.0 (sm_90a) on",
            ));
        }
        if variant == Variant::FamilySpecific && major < 10 {
            return Err(unsupported(
                "family-specific (`f`) targets exist from 10.0 (sm_100f) on",
            ));
        }
        Ok(Arch {
            major,
            minor,
            variant,
        })
    }

    /// `75`, `90a`, `100f`.
    pub fn number(&self) -> String {
        let suffix = match self.variant {
            Variant::Portable => "",
            Variant::ArchSpecific => "a",
            Variant::FamilySpecific => "f",
        };
        format!("{}{}{}", self.major, self.minor, suffix)
    }

    /// The virtual architecture, `compute_75`: what PTX is written for.
    pub fn virtual_name(&self) -> String {
        format!("compute_{}", self.number())
    }

    /// The real architecture, `sm_75`: what SASS is written for.
    pub fn real_name(&self) -> String {
        format!("sm_{}", self.number())
    }

    /// The suffix of this target's PTX file: `.ptx` for [`DEFAULT_ARCH`], `.sm80.ptx`,
    /// `.sm90a.ptx` for the others (the project's naming since its first kernels).
    pub fn ptx_suffix(&self) -> String {
        if *self == DEFAULT_ARCH {
            ".ptx".to_string()
        } else {
            format!(".sm{}.ptx", self.number())
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.virtual_name())
    }
}

/// The real architectures a file with PTX targets `targets` gets SASS for, of the `asked` ones:
/// each that one of its targets runs on (the newest such target decides), as `sm_XYa` where
/// that target is architecture-specific (`compute_90a` code does not compile for plain
/// `sm_90`). Ascending, without repeats.
pub(crate) fn sass_archs(targets: &[Arch], asked: &[Arch]) -> Vec<Arch> {
    let runs_on = |t: &Arch, real: &Arch| match t.variant {
        Variant::Portable => (t.major, t.minor) <= (real.major, real.minor),
        Variant::ArchSpecific => (t.major, t.minor) == (real.major, real.minor),
        Variant::FamilySpecific => t.major == real.major && t.minor <= real.minor,
    };
    let mut out: Vec<Arch> = asked
        .iter()
        .filter_map(|real| {
            let t = targets.iter().filter(|t| runs_on(t, real)).max()?;
            Some(Arch {
                major: real.major,
                minor: real.minor,
                variant: if t.variant == Variant::Portable {
                    real.variant
                } else {
                    t.variant
                },
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        for s in ["75", "sm_75", "compute_75", "7.5", "sm75"] {
            assert_eq!(Arch::parse(s).unwrap(), DEFAULT_ARCH, "{s}");
        }
        let h = Arch::parse("sm_90a").unwrap();
        assert_eq!(h.variant, Variant::ArchSpecific);
        assert_eq!(h.virtual_name(), "compute_90a");
        assert_eq!(h.ptx_suffix(), ".sm90a.ptx");
        assert_eq!(Arch::parse("80").unwrap().ptx_suffix(), ".sm80.ptx");
        assert_eq!(DEFAULT_ARCH.ptx_suffix(), ".ptx");
        assert_eq!(
            Arch::parse("100f").unwrap().variant,
            Variant::FamilySpecific
        );
    }

    #[test]
    fn unknown_ones_are_refused_with_the_list() {
        for s in ["sm_42", "compute_99", "80a", "90f", "x", ""] {
            let e = Arch::parse(s).unwrap_err();
            let text = e.to_string();
            assert!(text.contains("unsupported GPU architecture"), "{text}");
            assert!(
                text.contains("nvidia-smi --query-gpu=compute_cap"),
                "{text}"
            );
        }
    }
}
