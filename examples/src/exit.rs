//! The `main` of every program: run, and on failure print the error chain (for a missing driver,
//! the loader's list of every place it looked) and exit with status 1, never a panic.

use std::error::Error;
use std::process::ExitCode;

/// What a program's body returns.
pub type ProgramResult = Result<(), Box<dyn Error>>;

/// Runs `body`; prints `program: error` and its sources on failure and returns exit status 1.
pub fn run(program: &str, body: impl FnOnce() -> ProgramResult) -> ExitCode {
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let text = e.to_string();
            if text.starts_with("could not load the CUDA driver") {
                eprintln!("{program}: no CUDA driver found, so there is no GPU to run on.");
            }
            eprintln!("{program}: {text}");
            let mut src = e.source();
            while let Some(s) = src {
                let st = s.to_string();
                if !text.contains(&st) {
                    eprintln!("  caused by: {st}");
                }
                src = s.source();
            }
            ExitCode::FAILURE
        }
    }
}
