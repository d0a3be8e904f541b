//! The embedded PTX files and how one is picked for a device.
//!
//! The same types serve the handles `cuda-stack-build` writes for other crates' kernels (their
//! generated code calls [`load`], [`check_entry`], [`find_file`] and [`load_fatbin`]).

use crate::{Error, Result};
use cuda_stack_driver::launch::Signature;
use cuda_stack_driver::{ComputeCapability, Context, JitOptions, Module, ModuleImage};

pub use crate::embedded::{PtxFile, PtxTarget};

/// The PTX text of file `name` (e.g. `"vector_add"`) for a device of compute capability `cc`.
pub fn ptx_for(name: &str, cc: ComputeCapability) -> Result<&'static str> {
    let file = crate::PTX_FILES
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| Error::Invalid {
            op: "ptx_for",
            problem: format!(
                "no PTX file named `{name}`; the files are: {}",
                crate::PTX_FILES
                    .iter()
                    .map(|f| f.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
    Ok(file.pick(cc)?.ptx)
}

/// Loads `file` into `ctx`: the SASS that fits the device where the file has one, else the
/// PTX target [`PtxFile::pick`] chooses (see [`crate::image::load_image`];
/// `CUDA_STACK_KERNELS_IMAGE=ptx` forces the PTX).
pub fn load(ctx: &Context, file: &'static PtxFile) -> Result<Module> {
    let (m, _) = crate::image::load_image(ctx, file, crate::image::ImagePreference::from_env())?;
    Ok(m)
}

/// Loads a fatbin (SASS for some architectures plus PTX): the driver picks the SASS for the
/// device, or JIT-compiles the PTX. (`load_module` checks the image and copies it to the
/// aligned memory the fatbin header wants: `include_bytes!` data has no alignment.)
pub fn load_fatbin(ctx: &Context, fatbin: &[u8]) -> Result<Module> {
    Ok(ctx.load_module(ModuleImage::Fatbin(fatbin), &JitOptions::default())?)
}

/// The file called `name` in `files`.
pub fn find_file<'a>(files: &'a [PtxFile], name: &str) -> Result<&'a PtxFile> {
    files
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| Error::Invalid {
            op: "find_file",
            problem: format!(
                "no PTX file named `{name}`; the files are: {}",
                files.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
            ),
        })
}

/// The fatbin called `name` in a generated `FATBINS` table.
pub fn find_fatbin(fatbins: &[(&'static str, &'static [u8])], name: &str) -> Result<&'static [u8]> {
    fatbins
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, b)| *b)
        .ok_or_else(|| Error::Invalid {
            op: "find_fatbin",
            problem: format!("no fatbin named `{name}`"),
        })
}

/// Checks, without a driver, that `.entry kernel` in every target of `file` has exactly the
/// parameter byte sizes of `Args` ([`cuda_stack_driver::Error::SignatureMismatch`] otherwise, or
/// [`cuda_stack_driver::Error::KernelNotFound`] when a target lacks the entry). Generated handles run
/// this before loading, so PTX that disagrees with the Rust signature is never launched.
pub fn check_entry<Args: Signature>(file: &PtxFile, kernel: &str) -> Result<()> {
    for t in file.targets {
        match cuda_stack_driver::ptx_info::entry_param_sizes(t.ptx, kernel) {
            Some(found) if found == Args::SIZES => {}
            Some(found) => {
                return Err(cuda_stack_driver::Error::SignatureMismatch {
                    kernel: format!("{kernel} ({} of {})", t.arch, file.name),
                    expected: Args::SIZES.to_vec(),
                    found,
                }
                .into())
            }
            None => {
                return Err(cuda_stack_driver::Error::KernelNotFound {
                    name: format!("{kernel} ({} of {})", t.arch, file.name),
                    available: cuda_stack_driver::ptx_info::entries(t.ptx),
                }
                .into())
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuda_stack_driver::DeviceSlice;

    const fn cc(major: i32, minor: i32) -> ComputeCapability {
        ComputeCapability { major, minor }
    }

    const PTX: &str = ".version 8.4\n.target sm_75\n.address_size 64\n\n.visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u32 k_param_1\n)\n{\n}\n";

    static FILE: PtxFile = PtxFile {
        name: "f",
        source: "f.cu",
        targets: &[
            PtxTarget {
                arch: "compute_75",
                min_cc: cc(7, 5),
                ptx: PTX,
            },
            PtxTarget {
                arch: "compute_80",
                min_cc: cc(8, 0),
                ptx: PTX,
            },
            PtxTarget {
                arch: "compute_90a",
                min_cc: cc(9, 0),
                ptx: PTX,
            },
        ],
        sass: &[],
    };

    #[test]
    fn arch_specific_targets_run_only_on_their_gpu() {
        assert_eq!(FILE.pick(cc(7, 5)).unwrap().arch, "compute_75");
        assert_eq!(FILE.pick(cc(8, 9)).unwrap().arch, "compute_80");
        assert_eq!(FILE.pick(cc(9, 0)).unwrap().arch, "compute_90a");
        assert_eq!(FILE.pick(cc(10, 0)).unwrap().arch, "compute_80");
        assert!(FILE.pick(cc(7, 0)).is_err());
    }

    #[test]
    fn entry_check_refuses_a_disagreeing_signature() {
        check_entry::<(&DeviceSlice<f32>, u32)>(&FILE, "k").unwrap();
        let e = check_entry::<(&DeviceSlice<f32>, u64)>(&FILE, "k")
            .unwrap_err()
            .to_string();
        assert!(e.contains("[8, 4]") && e.contains("[8, 8]"), "{e}");
        let e = check_entry::<(u32,)>(&FILE, "nope")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope"), "{e}");
    }
}
