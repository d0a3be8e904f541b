//! Options shared by the kernel templates.

use crate::cache::KernelCache;
use std::sync::Arc;

/// What else a kernel definition takes besides its parameters and body (CuPy's keyword
/// arguments): a preamble, NVRTC options, and which compile cache to use.
#[derive(Debug, Clone, Default)]
pub struct KernelOptions {
    /// CUDA C inserted before the kernel (helper `__device__` functions, constants). It sees
    /// the placeholder typedefs (`T`).
    pub preamble: String,
    /// NVRTC options (`--use_fast_math`, `-DNAME=1`, …); the architecture is chosen for you.
    pub nvrtc_options: Vec<String>,
    /// The compile cache ([`KernelCache::global`] when `None`).
    pub cache: Option<Arc<KernelCache>>,
}

impl KernelOptions {
    /// No preamble, no options, the global cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// With this preamble.
    pub fn preamble(mut self, code: &str) -> Self {
        self.preamble = code.to_string();
        self
    }

    /// With these NVRTC options.
    pub fn nvrtc_options(mut self, options: &[&str]) -> Self {
        self.nvrtc_options = options.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Compiling through `cache`.
    pub fn cache(mut self, cache: Arc<KernelCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    pub(crate) fn cache_or_global(&self) -> Arc<KernelCache> {
        self.cache.clone().unwrap_or_else(KernelCache::global)
    }
}
