//! Which image of a kernel file is loaded: its SASS (machine code, ready to run) where one fits
//! the device, else its PTX, which the driver JIT-compiles for the device at load.
//!
//! The committed kernels ship both (`kernels/sass/`, `kernels/ptx/`, made by
//! `kernels/tools/gen-ptx` with the pinned NVRTC). Loading SASS costs about a millisecond per
//! file; JIT-compiling the same file's PTX costs from tens of milliseconds to seconds (the
//! tensor-core GEMMs), paid again by every process whose driver cache (`~/.nv/ComputeCache`)
//! is empty, disabled or read-only. The rule is the driver's own rule for fatbins, applied
//! here so that a program can say which image ran ([`LoadedImage`]) and a test can force the
//! PTX path ([`ImagePreference::Ptx`]).

use crate::ptx::PtxFile;
use crate::Result;
use cuda_stack_driver::{ComputeCapability, Context, JitOptions, Module, ModuleImage};
use std::time::{Duration, Instant};

/// One file's SASS for one real architecture: a cubin compiled by the same NVRTC, from the same
/// source and options, as the file's PTX.
#[derive(Debug)]
pub struct SassImage {
    /// The real architecture, e.g. `"sm_90"`, `"sm_90a"`.
    pub arch: &'static str,
    /// Its compute capability.
    pub cc: ComputeCapability,
    /// The cubin.
    pub cubin: &'static [u8],
}

impl SassImage {
    /// Whether a device of compute capability `cc` runs this SASS: same major version and a
    /// minor version not below it (`sm_80` runs on 8.6 and 8.9), exactly its own compute
    /// capability for an architecture-specific `sm_90a`.
    pub fn runs_on(&self, cc: ComputeCapability) -> bool {
        if self.arch.ends_with('a') {
            cc == self.cc
        } else {
            cc.major == self.cc.major && cc.minor >= self.cc.minor
        }
    }
}

impl PtxFile {
    /// The SASS a device of compute capability `cc` runs best: the newest that runs on it (see
    /// [`SassImage::runs_on`]), the architecture-specific one of two for the same capability.
    /// `None` when none does (a GPU newer than the SASS: the PTX is JIT-compiled there).
    pub fn pick_sass(&self, cc: ComputeCapability) -> Option<&'static SassImage> {
        self.sass
            .iter()
            .filter(|s| s.runs_on(cc))
            .max_by_key(|s| (s.cc, s.arch.ends_with('a')))
    }
}

/// Which image to load where both exist.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ImagePreference {
    /// The SASS that fits the device, else the PTX (the default).
    #[default]
    MachineCode,
    /// Always the PTX, JIT-compiled by the driver (what a GPU no SASS fits gets; for tests and
    /// for measuring the JIT).
    Ptx,
}

impl ImagePreference {
    /// The environment variable [`ImagePreference::from_env`] reads.
    pub const ENV: &'static str = "CUDA_STACK_KERNELS_IMAGE";

    /// `CUDA_STACK_KERNELS_IMAGE=ptx` gives [`ImagePreference::Ptx`]; anything else (or
    /// nothing) [`ImagePreference::MachineCode`].
    pub fn from_env() -> ImagePreference {
        match std::env::var(Self::ENV) {
            Ok(v) if v.trim().eq_ignore_ascii_case("ptx") => ImagePreference::Ptx,
            _ => ImagePreference::MachineCode,
        }
    }
}

/// What kind of image a file was loaded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// A cubin: machine code, no JIT.
    Sass,
    /// PTX, JIT-compiled by the driver at load (or taken from the driver's JIT cache).
    Ptx,
}

/// How one kernel file was loaded.
#[derive(Clone, Debug)]
pub struct LoadedImage {
    /// The file, e.g. `"elementwise"`.
    pub file: &'static str,
    /// SASS or PTX.
    pub kind: ImageKind,
    /// The architecture of the image loaded: `"sm_90"` or `"compute_75"`.
    pub arch: &'static str,
    /// The image's size in bytes.
    pub bytes: usize,
    /// Wall time of the load (for PTX, the driver's JIT compile, unless its cache had it).
    pub took: Duration,
    /// Why the SASS was not used where the file has one for the device (it failed to load:
    /// the driver's error), else `None`.
    pub fallback: Option<String>,
}

impl std::fmt::Display for LoadedImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            ImageKind::Sass => "SASS",
            ImageKind::Ptx => "PTX, JIT-compiled",
        };
        write!(
            f,
            "{}: {} {kind} ({} KiB) in {:.1} ms",
            self.file,
            self.arch,
            self.bytes.div_ceil(1024),
            self.took.as_secs_f64() * 1e3
        )?;
        if let Some(why) = &self.fallback {
            write!(f, " (its SASS did not load: {why})")?;
        }
        Ok(())
    }
}

/// Loads `file` into `ctx`: its SASS for the device unless `pref` is
/// [`ImagePreference::Ptx`] or none fits, else the newest PTX target the device can run
/// ([`PtxFile::pick`]). A SASS image the driver refuses falls back to the PTX, and the
/// [`LoadedImage`] says why.
pub fn load_image(
    ctx: &Context,
    file: &'static PtxFile,
    pref: ImagePreference,
) -> Result<(Module, LoadedImage)> {
    let cc = ctx.limits().compute_capability;
    let mut fallback = None;
    if pref == ImagePreference::MachineCode {
        if let Some(sass) = file.pick_sass(cc) {
            let start = Instant::now();
            match ctx.load_module(ModuleImage::Cubin(sass.cubin), &JitOptions::default()) {
                Ok(m) => {
                    let loaded = LoadedImage {
                        file: file.name,
                        kind: ImageKind::Sass,
                        arch: sass.arch,
                        bytes: sass.cubin.len(),
                        took: start.elapsed(),
                        fallback: None,
                    };
                    return Ok((m, loaded));
                }
                Err(e) => fallback = Some(e.to_string()),
            }
        }
    }
    let target = file.pick(cc)?;
    let start = Instant::now();
    let m = ctx.load_ptx(target.ptx)?;
    let loaded = LoadedImage {
        file: file.name,
        kind: ImageKind::Ptx,
        arch: target.arch,
        bytes: target.ptx.len(),
        took: start.elapsed(),
        fallback,
    };
    Ok((m, loaded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::PtxTarget;

    const fn cc(major: i32, minor: i32) -> ComputeCapability {
        ComputeCapability { major, minor }
    }

    static FILE: PtxFile = PtxFile {
        name: "f",
        source: "f.cu",
        targets: &[PtxTarget {
            arch: "compute_75",
            min_cc: cc(7, 5),
            ptx: "",
        }],
        sass: &[
            SassImage {
                arch: "sm_75",
                cc: cc(7, 5),
                cubin: &[],
            },
            SassImage {
                arch: "sm_80",
                cc: cc(8, 0),
                cubin: &[],
            },
            SassImage {
                arch: "sm_90",
                cc: cc(9, 0),
                cubin: &[],
            },
            SassImage {
                arch: "sm_90a",
                cc: cc(9, 0),
                cubin: &[],
            },
        ],
    };

    fn picked(major: i32, minor: i32) -> Option<&'static str> {
        FILE.pick_sass(cc(major, minor)).map(|s| s.arch)
    }

    #[test]
    fn sass_is_picked_by_the_drivers_rule() {
        assert_eq!(picked(7, 5), Some("sm_75"));
        assert_eq!(picked(8, 0), Some("sm_80"));
        // SASS runs on a newer minor version of its major one (A10, L4, RTX 4090)...
        assert_eq!(picked(8, 6), Some("sm_80"));
        assert_eq!(picked(8, 9), Some("sm_80"));
        // ...the architecture-specific one only on its own GPU, where it wins...
        assert_eq!(picked(9, 0), Some("sm_90a"));
        // ...and never across major versions: Blackwell JIT-compiles the PTX.
        assert_eq!(picked(10, 0), None);
        assert_eq!(picked(12, 0), None);
        assert_eq!(picked(7, 0), None);
    }

    #[test]
    fn the_preference_comes_from_the_environment_name() {
        assert_eq!(ImagePreference::default(), ImagePreference::MachineCode);
        assert_eq!(ImagePreference::ENV, "CUDA_STACK_KERNELS_IMAGE");
    }
}
