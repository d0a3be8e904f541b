//! Launch configurations and typed kernel launches.

mod args;
mod config;
mod kernel;

pub use args::{KernelArg, KernelParam, Signature};
pub use config::{Dim3, KernelLimits, LaunchConfig};
pub use kernel::Kernel;
