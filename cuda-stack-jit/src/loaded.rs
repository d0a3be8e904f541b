//! Compiled specializations, loaded into a device's context: the fast map a call looks up (by a
//! compact key: device, dtypes, argument kinds, dimensions), and the slow path that generates,
//! compiles (through the [`KernelCache`]), loads and checks a specialization once.

use crate::cache::{CompileRequest, KernelCache, Origin, Target};
use crate::error::{JitError, Result};
use crate::source_map::SourceMap;
use cuda_stack_driver::{Function, ModuleImage};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Threads per block of the generated kernels.
pub(crate) const BLOCK: u32 = 256;

/// A specialization's key: 8 bits of device, 4 of dimensions, and 5 bits (kind and dtype) per
/// parameter for up to [`MAX_PARAMS`] parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct SpecKey([u64; 4]);

/// Parameters a kernel may declare (inputs and outputs together).
pub(crate) const MAX_PARAMS: usize = 36;

impl SpecKey {
    pub(crate) fn new(device: usize, dims: [u8; 2]) -> SpecKey {
        SpecKey([
            (device as u64 & 0xff) | (dims[0] as u64) << 8 | (dims[1] as u64) << 16,
            0,
            0,
            0,
        ])
    }

    /// Records parameter `k`'s 5-bit code.
    pub(crate) fn set(&mut self, k: usize, code: u8) {
        let bit = 24 + k * 5;
        let (w, b) = (bit / 64, bit % 64);
        self.0[w] |= (code as u64 & 31) << b;
        if b > 59 {
            self.0[w + 1] |= (code as u64 & 31) >> (64 - b);
        }
    }
}

/// A specialization ready to launch on one device.
pub(crate) struct Loaded {
    /// The kernels of the module, in the order the generator named them.
    pub(crate) functions: Vec<Function>,
    /// The generated source.
    pub(crate) source: Arc<str>,
    /// Streaming multiprocessors of the device.
    pub(crate) sm_count: u32,
    /// Resident blocks of [`BLOCK`] threads per SM for the first function.
    pub(crate) blocks_per_sm: u32,
    /// What it was compiled for.
    pub(crate) target: Target,
    /// Where the binary came from the first time, and how long that took.
    pub(crate) origin: Origin,
    pub(crate) took: Duration,
}

/// The specializations of one kernel definition.
#[derive(Default)]
pub(crate) struct SpecTable {
    entries: RwLock<Vec<(SpecKey, Arc<Loaded>)>>,
}

impl SpecTable {
    #[inline]
    pub(crate) fn get(&self, key: &SpecKey) -> Option<Arc<Loaded>> {
        let e = self.entries.read().unwrap_or_else(|p| p.into_inner());
        e.iter().find(|(k, _)| k == key).map(|(_, l)| l.clone())
    }

    /// Inserts `l` unless another thread got there first; returns the entry in the table.
    pub(crate) fn insert(&self, key: SpecKey, l: Arc<Loaded>) -> Arc<Loaded> {
        let mut e = self.entries.write().unwrap_or_else(|p| p.into_inner());
        if let Some((_, old)) = e.iter().find(|(k, _)| *k == key) {
            return old.clone();
        }
        e.push((key, l.clone()));
        l
    }

    /// How many specializations are loaded.
    pub(crate) fn len(&self) -> usize {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// What to compile and load.
pub(crate) struct Build<'a> {
    pub(crate) kernel: &'a str,
    pub(crate) source: String,
    pub(crate) map: SourceMap,
    pub(crate) options: &'a [String],
    /// Kernel entry names and the byte size of each of their parameters.
    pub(crate) entries: Vec<(String, Vec<usize>)>,
}

/// Compiles `b` for `device` through `cache`, loads it, and checks every entry's parameter
/// sizes against what the caller will pass.
pub(crate) fn load(cache: &KernelCache, device: usize, b: Build<'_>) -> Result<Loaded> {
    let rt = cuda_stack_runtime::Runtime::get(device)?;
    let ctx = rt.context();
    let target = Target::for_context(ctx)?;
    let file = format!("{}.cu", b.kernel);
    let fetched = cache
        .get_or_compile(&CompileRequest {
            name: &file,
            source: &b.source,
            options: b.options,
            target,
        })
        .map_err(|e| match e {
            cuda_stack_driver::Error::Compile { options, log, .. } => JitError::Compile {
                kernel: b.kernel.to_string(),
                options,
                log: b.map.map_log(&file, &log),
                hint: "source_for(..) returns it".into(),
            },
            other => JitError::Driver(other),
        })?;
    let image = match target {
        Target::Cubin(_) => ModuleImage::Cubin(&fetched.binary.bytes),
        Target::Ptx(_) => {
            ModuleImage::Ptx(std::str::from_utf8(&fetched.binary.bytes).map_err(|_| {
                cuda_stack_driver::Error::Unsupported {
                    what: "a cached PTX entry",
                    why: "it is not UTF-8".into(),
                }
            })?)
        }
    };
    let module = ctx.load_module(image, &Default::default())?;
    let mut functions = Vec::with_capacity(b.entries.len());
    for (name, sizes) in &b.entries {
        let f = module.function(name)?;
        let found = f.param_sizes()?;
        if &found != sizes {
            return Err(JitError::Limit {
                kernel: b.kernel.to_string(),
                problem: format!(
                    "internal error: generated kernel `{name}` takes parameters of {found:?} \
                     bytes but the launch passes {sizes:?}"
                ),
            });
        }
        functions.push(f);
    }
    let blocks_per_sm = functions
        .first()
        .map(|f| f.max_active_blocks_per_sm(BLOCK, 0))
        .transpose()?
        .unwrap_or(1)
        .max(1);
    Ok(Loaded {
        functions,
        source: b.source.into(),
        sm_count: ctx.limits().sm_count.max(1),
        blocks_per_sm,
        target,
        origin: fetched.origin,
        took: fetched.took,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_per_parameter_code() {
        let mut a = SpecKey::new(0, [1, 0]);
        let mut b = a;
        a.set(8, 3);
        b.set(8, 4);
        assert_ne!(a, b);
        let mut c = SpecKey::new(0, [1, 0]);
        c.set(35, 31);
        let mut d = SpecKey::new(0, [1, 0]);
        d.set(35, 30);
        assert_ne!(c, d);
        assert_ne!(SpecKey::new(0, [1, 0]), SpecKey::new(1, [1, 0]));
        assert_ne!(SpecKey::new(0, [1, 0]), SpecKey::new(0, [2, 0]));
    }
}
