//! The per-context cache of loaded kernels.

use crate::{Kernels, Result};
use cuda_stack_driver::Context;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

fn cache() -> &'static Mutex<HashMap<usize, Arc<Kernels>>> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<Kernels>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Kernels {
    /// The kernels for `ctx`'s device, loaded (all PTX files JIT-compiled) on the first call for
    /// that device and shared afterwards. Contexts are primary contexts, one per device, so the
    /// cache is keyed by device ordinal; it keeps the modules (and so the context) alive for the
    /// rest of the process. Use [`Kernels::load`] for an uncached copy.
    pub fn get(ctx: &Context) -> Result<Arc<Kernels>> {
        let ordinal = ctx.device().ordinal();
        // A panic while loading cannot leave the map half-updated, so a poisoned lock is usable.
        let mut map = cache().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = map.get(&ordinal) {
            return Ok(Arc::clone(k));
        }
        let k = Arc::new(Kernels::load(ctx)?);
        map.insert(ordinal, Arc::clone(&k));
        Ok(k)
    }

    /// Loads every kernel into `ctx` now, without the cache: each PTX file is loaded once (the
    /// newest target not above the device's compute capability) and every typed handle made.
    pub fn load(ctx: &Context) -> Result<Kernels> {
        crate::generated::handles::load(ctx)
    }
}
