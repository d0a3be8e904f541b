//! Launch configurations and typed kernel launches.

mod arg_list;
mod args;
mod config;
mod extended;
mod kernel;
pub(crate) mod param_kind;

pub use arg_list::ArgList;
pub use args::{KernelArg, KernelParam, Signature};
pub use config::{Dim3, KernelLimits, LaunchConfig};
pub(crate) use extended::LaunchAttributes;
pub use kernel::Kernel;
pub use param_kind::ParamKind;
