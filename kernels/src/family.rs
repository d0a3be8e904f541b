//! One kernel file's handles, loaded into their context on first use and kept: a program
//! loads (and, where it falls back to PTX, JIT-compiles) only the files whose kernels it calls.

use crate::image::{load_image, ImagePreference, LoadedImage};
use crate::ptx::PtxFile;
use crate::Result;
use cuda_stack_driver::{Context, Module};
use std::sync::{Mutex, OnceLock};

/// The typed handles `T` of one file, made by the generated `load_<file>` from its module on
/// the first [`LazyModule::get`].
pub(crate) struct LazyModule<T> {
    ctx: Context,
    file: &'static PtxFile,
    pref: ImagePreference,
    /// Held while loading, so two threads racing on the first call load (and maybe
    /// JIT-compile) the file once.
    loading: Mutex<()>,
    cell: OnceLock<(T, LoadedImage)>,
}

impl<T> LazyModule<T> {
    pub(crate) fn new(ctx: &Context, file: &'static PtxFile, pref: ImagePreference) -> Self {
        Self {
            ctx: ctx.clone(),
            file,
            pref,
            loading: Mutex::new(()),
            cell: OnceLock::new(),
        }
    }

    /// The handles, loading the file first if no call has yet. A failed load is not kept: the
    /// next call tries again.
    pub(crate) fn get(&self, make: impl FnOnce(&Module) -> Result<T>) -> Result<&T> {
        if let Some((v, _)) = self.cell.get() {
            return Ok(v);
        }
        // A panic while loading cannot leave the cell half-set, so a poisoned lock is usable.
        let _loading = self.loading.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, _)) = self.cell.get() {
            return Ok(v);
        }
        let (module, loaded) = load_image(&self.ctx, self.file, self.pref)?;
        let v = make(&module)?;
        Ok(&self.cell.get_or_init(|| (v, loaded)).0)
    }

    /// How the file was loaded, once it has been.
    pub(crate) fn loaded(&self) -> Option<&LoadedImage> {
        self.cell.get().map(|(_, l)| l)
    }

    /// The handles, if the file has been loaded.
    pub(crate) fn if_loaded(&self) -> Option<&T> {
        self.cell.get().map(|(v, _)| v)
    }
}

impl<T: Clone> Clone for LazyModule<T> {
    fn clone(&self) -> Self {
        let cell = OnceLock::new();
        if let Some(v) = self.cell.get() {
            let _ = cell.set(v.clone());
        }
        Self {
            ctx: self.ctx.clone(),
            file: self.file,
            pref: self.pref,
            loading: Mutex::new(()),
            cell,
        }
    }
}

impl<T> std::fmt::Debug for LazyModule<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyModule")
            .field("file", &self.file.name)
            .field("loaded", &self.loaded().map(|l| l.arch))
            .finish()
    }
}
