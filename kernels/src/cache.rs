//! The per-context cache of loaded kernels.

use crate::image::ImagePreference;
use crate::{Kernels, Result};
use cuda_stack_driver::Context;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

fn cache() -> &'static Mutex<HashMap<usize, Arc<Kernels>>> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<Kernels>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Kernels {
    /// The kernels for `ctx`'s device, shared by every caller for that device. Nothing is
    /// loaded here: each kernel file loads on the first use of one of its kernels (its SASS where
    /// one fits the device, else its PTX; [`crate::image`]), so a program pays only for the files
    /// it uses. Contexts are primary contexts, one per device, so the cache is keyed by device
    /// ordinal; it keeps the modules (and so the context) alive for the rest of the process. Use
    /// [`Kernels::load`] for an uncached copy with everything loaded.
    pub fn get(ctx: &Context) -> Result<Arc<Kernels>> {
        let ordinal = ctx.device().ordinal();
        // A panic while loading cannot leave the map half-updated, so a poisoned lock is usable.
        let mut map = cache().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = map.get(&ordinal) {
            return Ok(Arc::clone(k));
        }
        let k = Arc::new(Kernels::new(ctx, ImagePreference::from_env()));
        map.insert(ordinal, Arc::clone(&k));
        Ok(k)
    }

    /// Loads every kernel file the device can run into `ctx` now, without the cache, and makes
    /// every typed handle ([`Kernels::load_all`]).
    pub fn load(ctx: &Context) -> Result<Kernels> {
        let k = Kernels::new(ctx, ImagePreference::from_env());
        k.load_all()?;
        Ok(k)
    }

    /// Uncached handles for `ctx` that load each file on first use as `pref` says:
    /// [`ImagePreference::Ptx`] makes every file JIT-compile its PTX even where SASS fits (what
    /// a GPU newer than the shipped SASS gets; for tests and for measuring the JIT).
    pub fn load_with(ctx: &Context, pref: ImagePreference) -> Kernels {
        Kernels::new(ctx, pref)
    }
}
