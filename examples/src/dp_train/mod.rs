//! `dp_train`'s parts (the program and what it measures are described in `src/bin/dp_train.rs`).

pub mod layouts;
pub mod training;

/// The program's result type (ranks' errors cross threads).
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
