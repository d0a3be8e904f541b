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

use crate::embedded::PtxFile;
pub use crate::embedded::SassImage;
use crate::Result;
use cuda_stack_driver::{ComputeCapability, Context, JitOptions, Module, ModuleImage};
use std::time::{Duration, Instant};

impl PtxFile {
    /// The SASS images a device of compute capability `cc` under a driver of version `driver`
    /// (`cuDriverGetVersion`; `None`: unknown) can run, best first: the newest architecture that
    /// runs on it (see [`SassImage::runs_on`]), the architecture-specific one of two for the same
    /// capability, and of two cubins for one architecture the one from the newer ptxas where the
    /// driver loads it ([`SassImage::min_driver`]; an unknown driver gets only the cubins every
    /// supported driver loads). Empty when none runs (a GPU newer than the SASS: the PTX is
    /// JIT-compiled there).
    pub fn sass_candidates(
        &self,
        cc: ComputeCapability,
        driver: Option<i32>,
    ) -> Vec<&'static SassImage> {
        let floor = self.sass.iter().map(|s| s.min_driver).min().unwrap_or(0);
        let loads = |s: &SassImage| match driver {
            Some(v) => i64::from(s.min_driver) <= i64::from(v),
            None => s.min_driver <= floor,
        };
        let mut v: Vec<&'static SassImage> = self
            .sass
            .iter()
            .filter(|s| s.runs_on(cc) && loads(s))
            .collect();
        v.sort_by_key(|s| std::cmp::Reverse((s.cc, s.arch.ends_with('a'), s.min_driver)));
        v
    }

    /// The first of [`PtxFile::sass_candidates`]: what [`load_image`] loads unless the driver
    /// refuses it.
    pub fn pick_sass(
        &self,
        cc: ComputeCapability,
        driver: Option<i32>,
    ) -> Option<&'static SassImage> {
        self.sass_candidates(cc, driver).first().copied()
    }
}

/// The loaded driver's `cuDriverGetVersion` (e.g. `13000`), or `None` when it could not say.
pub fn driver_version() -> Option<i32> {
    cuda_stack_driver::cuda_stack_sys::Driver::get()
        .ok()
        .and_then(|d| d.version())
}

/// Which image to load where both exist.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ImagePreference {
    /// The SASS that fits the device, else the PTX (the default).
    #[default]
    MachineCode,
    /// The SASS that fits the device among the cubins every supported driver loads (today NVRTC
    /// 12.4's, what a CUDA 12 driver runs), even under a driver that would load a newer ptxas's
    /// ([`SassImage::min_driver`]); else the PTX. For testing on a new driver the machine code
    /// an older one gets.
    BaselineMachineCode,
    /// Always the PTX, JIT-compiled by the driver (what a GPU no SASS fits gets; for tests and
    /// for measuring the JIT).
    Ptx,
}

impl ImagePreference {
    /// The environment variable [`ImagePreference::from_env`] reads.
    pub const ENV: &'static str = "CUDA_STACK_KERNELS_IMAGE";

    /// `CUDA_STACK_KERNELS_IMAGE=ptx` gives [`ImagePreference::Ptx`],
    /// `CUDA_STACK_KERNELS_IMAGE=baseline-sass` [`ImagePreference::BaselineMachineCode`];
    /// anything else (or nothing) [`ImagePreference::MachineCode`].
    pub fn from_env() -> ImagePreference {
        Self::parse(std::env::var(Self::ENV).ok().as_deref())
    }

    /// [`ImagePreference::from_env`]'s reading of the variable's value (`None`: unset).
    fn parse(value: Option<&str>) -> ImagePreference {
        match value.map(str::trim) {
            Some(v) if v.eq_ignore_ascii_case("ptx") => ImagePreference::Ptx,
            Some(v) if v.eq_ignore_ascii_case("baseline-sass") => {
                ImagePreference::BaselineMachineCode
            }
            _ => ImagePreference::MachineCode,
        }
    }

    /// The driver version to choose SASS for (`Some(None)`: the version every supported driver
    /// has, as [`PtxFile::sass_candidates`] takes an unknown one), or `None` for no SASS.
    fn sass_driver(self) -> Option<Option<i32>> {
        match self {
            ImagePreference::MachineCode => Some(driver_version()),
            ImagePreference::BaselineMachineCode => Some(None),
            ImagePreference::Ptx => None,
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
    /// For SASS, the oldest driver the cubin needs ([`SassImage::min_driver`]; which of two
    /// cubins for one architecture ran); 0 for PTX.
    pub min_driver: u32,
    /// Wall time of the load (for PTX, the driver's JIT compile, unless its cache had it).
    pub took: Duration,
    /// Why a SASS image the file has for the device was not used (it failed to load: the
    /// driver's error; a later one or the PTX was loaded instead), else `None`.
    pub fallback: Option<String>,
}

impl std::fmt::Display for LoadedImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            ImageKind::Sass => "SASS",
            ImageKind::Ptx => "PTX, JIT-compiled",
        };
        write!(f, "{}: {} {kind}", self.file, self.arch)?;
        if self.kind == ImageKind::Sass && self.min_driver >= 13000 {
            write!(
                f,
                " for drivers from CUDA {}.{}",
                self.min_driver / 1000,
                (self.min_driver % 1000) / 10
            )?;
        }
        write!(
            f,
            " ({} KiB) in {:.1} ms",
            self.bytes.div_ceil(1024),
            self.took.as_secs_f64() * 1e3
        )?;
        if let Some(why) = &self.fallback {
            write!(f, " (a SASS image did not load: {why})")?;
        }
        Ok(())
    }
}

/// Loads `file` into `ctx`: its SASS for the device and driver unless `pref` is
/// [`ImagePreference::Ptx`] or none fits ([`PtxFile::sass_candidates`], tried best first), else
/// the newest PTX target the device can run ([`PtxFile::pick`]). A SASS image the driver refuses
/// falls back to the next one, then to the PTX, and the [`LoadedImage`] says why.
pub fn load_image(
    ctx: &Context,
    file: &'static PtxFile,
    pref: ImagePreference,
) -> Result<(Module, LoadedImage)> {
    let cc = ctx.limits().compute_capability;
    let mut fallback: Option<String> = None;
    if let Some(driver) = pref.sass_driver() {
        for sass in file.sass_candidates(cc, driver) {
            let start = Instant::now();
            match ctx.load_module(ModuleImage::Cubin(sass.cubin), &JitOptions::default()) {
                Ok(m) => {
                    let loaded = LoadedImage {
                        file: file.name,
                        kind: ImageKind::Sass,
                        arch: sass.arch,
                        bytes: sass.cubin.len(),
                        min_driver: sass.min_driver,
                        took: start.elapsed(),
                        fallback,
                    };
                    return Ok((m, loaded));
                }
                Err(e) => {
                    let why = format!("{} cubin of {} bytes: {e}", sass.arch, sass.cubin.len());
                    fallback = Some(match fallback {
                        Some(before) => format!("{before}; {why}"),
                        None => why,
                    });
                }
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
        min_driver: 0,
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
                min_driver: 12000,
                cubin: &[],
            },
            SassImage {
                arch: "sm_80",
                cc: cc(8, 0),
                min_driver: 12000,
                cubin: &[],
            },
            SassImage {
                arch: "sm_90",
                cc: cc(9, 0),
                min_driver: 12000,
                cubin: &[],
            },
            SassImage {
                arch: "sm_90a",
                cc: cc(9, 0),
                min_driver: 13000,
                cubin: &[1],
            },
            SassImage {
                arch: "sm_90a",
                cc: cc(9, 0),
                min_driver: 12000,
                cubin: &[],
            },
        ],
    };

    fn picked(major: i32, minor: i32) -> Option<&'static str> {
        FILE.pick_sass(cc(major, minor), Some(12040))
            .map(|s| s.arch)
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
    fn of_two_cubins_for_one_architecture_the_driver_picks() {
        let h100 = cc(9, 0);
        let drivers = |d: Option<i32>| -> Vec<(&str, u32)> {
            FILE.sass_candidates(h100, d)
                .iter()
                .map(|s| (s.arch, s.min_driver))
                .collect()
        };
        // A CUDA 13 driver gets the newer ptxas's cubin first, then the older one to fall back on.
        assert_eq!(
            drivers(Some(13000)),
            [("sm_90a", 13000), ("sm_90a", 12000), ("sm_90", 12000)]
        );
        assert_eq!(
            FILE.pick_sass(h100, Some(13020)).map(|s| s.cubin.len()),
            Some(1)
        );
        // A CUDA 12 driver, or one that could not say, never gets the CUDA 13 cubin.
        for d in [Some(12080), Some(12000), None] {
            assert_eq!(drivers(d), [("sm_90a", 12000), ("sm_90", 12000)], "{d:?}");
        }
        // Other architectures are unaffected.
        assert_eq!(drivers(Some(13000)).len(), 3);
        assert_eq!(
            FILE.pick_sass(cc(8, 6), Some(13000)).map(|s| s.arch),
            Some("sm_80")
        );
    }

    #[test]
    fn the_preference_comes_from_the_environment_name() {
        assert_eq!(ImagePreference::default(), ImagePreference::MachineCode);
        assert_eq!(ImagePreference::ENV, "CUDA_STACK_KERNELS_IMAGE");
        let parse = ImagePreference::parse;
        assert_eq!(parse(None), ImagePreference::MachineCode);
        assert_eq!(parse(Some(" PTX ")), ImagePreference::Ptx);
        assert_eq!(
            parse(Some("baseline-sass")),
            ImagePreference::BaselineMachineCode
        );
        assert_eq!(
            parse(Some("Baseline-SASS\n")),
            ImagePreference::BaselineMachineCode
        );
        assert_eq!(parse(Some("sass")), ImagePreference::MachineCode);
        assert_eq!(parse(Some("")), ImagePreference::MachineCode);
    }

    #[test]
    fn the_baseline_preference_takes_the_cubins_every_driver_loads() {
        // Whatever driver is loaded: the unknown driver's choice, never the CUDA 13 cubin.
        assert_eq!(
            ImagePreference::BaselineMachineCode.sass_driver(),
            Some(None)
        );
        assert_eq!(ImagePreference::Ptx.sass_driver(), None);
        let h100 = cc(9, 0);
        let baseline: Vec<u32> = FILE
            .sass_candidates(h100, None)
            .iter()
            .map(|s| s.min_driver)
            .collect();
        assert_eq!(baseline, [12000, 12000]);
    }
}
