//! Finding and opening a shared library at run time, and resolving its symbols one by one.
//!
//! Nothing in this crate is linked against libcuda or libnvrtc: a [`Search`] lists the places to
//! look, in order, and [`Search::open`] tries each with the OS loader (`dlopen`), keeping every
//! failure so that a [`LoadError`] can say exactly where it looked and why each place failed.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a candidate path came from. Shown in [`LoadError`] so a user can tell which knob to turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CandidateSource {
    /// An explicit file named by an environment variable (`CUDA_DRIVER_PATH`, `CUDA_NVRTC_PATH`).
    EnvVar(&'static str),
    /// A bare soname handed to the system loader, which searches `LD_LIBRARY_PATH`, the
    /// `ld.so` cache and the default directories.
    Soname,
    /// A file in a well-known install directory.
    InstallDir,
    /// A path given to `load_from`.
    Explicit,
}

impl fmt::Display for CandidateSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CandidateSource::EnvVar(var) => write!(f, "${var}"),
            CandidateSource::Soname => f.write_str("soname, via the system loader"),
            CandidateSource::InstallDir => f.write_str("install directory"),
            CandidateSource::Explicit => f.write_str("path given to load_from"),
        }
    }
}

/// One place a library was looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// What is passed to `dlopen`: a soname or a path.
    pub path: PathBuf,
    /// Why this place was tried.
    pub source: CandidateSource,
}

/// One failed attempt: the place, and the OS loader's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadAttempt {
    /// The place tried.
    pub candidate: Candidate,
    /// What the OS loader said (`dlerror()`).
    pub error: String,
}

/// A library could not be loaded from any of the places searched.
///
/// Its `Display` lists every place tried, in order, with the OS loader's message for each, and
/// says what to do about it.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub struct LoadError {
    /// What was being loaded, e.g. `"the CUDA driver (libcuda)"`.
    pub library: &'static str,
    /// Every attempt, in the order made.
    pub attempts: Vec<LoadAttempt>,
    /// A note on what was not searched and why (e.g. an environment variable overrode the search).
    pub note: Option<String>,
    /// What the user can do.
    pub hint: &'static str,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "could not load {}; tried {} place{}:",
            self.library,
            self.attempts.len(),
            if self.attempts.len() == 1 { "" } else { "s" }
        )?;
        for (i, a) in self.attempts.iter().enumerate() {
            writeln!(
                f,
                "  {:>2}. {} ({}): {}",
                i + 1,
                a.candidate.path.display(),
                a.candidate.source,
                a.error
            )?;
        }
        if let Some(note) = &self.note {
            writeln!(f, "  note: {note}")?;
        }
        write!(f, "  help: {}", self.hint)
    }
}

/// An ordered list of places to look for one library.
#[derive(Debug, Clone)]
pub struct Search {
    pub(crate) library: &'static str,
    pub(crate) candidates: Vec<Candidate>,
    pub(crate) note: Option<String>,
    pub(crate) hint: &'static str,
}

impl Search {
    /// The places this search will try, in order.
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// Builds the standard search: the file named by `env_var` if it is set (and then nothing
    /// else: an explicit choice is never silently replaced by another library), otherwise each
    /// soname, then each file name in each install directory.
    pub(crate) fn standard(
        library: &'static str,
        hint: &'static str,
        env_var: &'static str,
        sonames: &[&str],
        dirs: &[PathBuf],
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Search {
        Self::standard_by_version(library, hint, env_var, &[sonames], dirs, env)
    }

    /// [`Search::standard`] for a library with several ABI versions, each a group of sonames,
    /// preferred first: every place is searched for one version before the next version is
    /// looked for (`libcublas.so.13` through the system loader and in every folder, then
    /// `libcublas.so.12` the same way).
    pub(crate) fn standard_by_version(
        library: &'static str,
        hint: &'static str,
        env_var: &'static str,
        versions: &[&[&str]],
        dirs: &[PathBuf],
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Search {
        if let Some(p) = env(env_var).filter(|p| !p.is_empty()) {
            return Search {
                library,
                candidates: vec![Candidate {
                    path: PathBuf::from(p),
                    source: CandidateSource::EnvVar(env_var),
                }],
                note: Some(format!(
                    "${env_var} is set, so no other place was searched; unset it to search the default places"
                )),
                hint,
            };
        }
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut add = |path: PathBuf, source: CandidateSource| {
            if !candidates.iter().any(|c| c.path == path) {
                candidates.push(Candidate { path, source });
            }
        };
        for sonames in versions {
            for s in *sonames {
                add(PathBuf::from(s), CandidateSource::Soname);
            }
            for dir in dirs {
                for s in *sonames {
                    add(dir.join(s), CandidateSource::InstallDir);
                }
            }
        }
        Search {
            library,
            candidates,
            note: None,
            hint,
        }
    }

    /// A search of exactly one path.
    pub(crate) fn single(library: &'static str, hint: &'static str, path: &Path) -> Search {
        Search {
            library,
            candidates: vec![Candidate {
                path: path.to_path_buf(),
                source: CandidateSource::Explicit,
            }],
            note: None,
            hint,
        }
    }

    /// Tries each candidate in order; returns the first library that opens, with its path.
    pub(crate) fn open(&self) -> Result<(libloading::Library, PathBuf), LoadError> {
        self.open_with_companions(&[])
            .map(|(lib, path, _)| (lib, path))
    }

    /// Like [`Search::open`], for a library that needs others by soname (libcublas needs
    /// libcublasLt): before a candidate given as a path (`/dir/libcublas.so.13`) is opened, each
    /// companion found beside it with the same suffix (`/dir/libcublasLt.so.13`) is loaded first,
    /// so the system loader's lookup of the dependency by soname finds it already loaded, even
    /// when `/dir` is not on its search path (a pip wheel's folder). Candidates that are bare
    /// sonames need nothing: the system loader resolves their dependencies from the same places.
    /// The companions that were loaded are returned and must be kept alive with the library.
    pub(crate) fn open_with_companions(
        &self,
        companions: &[&str],
    ) -> Result<(libloading::Library, PathBuf, Vec<libloading::Library>), LoadError> {
        let mut attempts = Vec::new();
        for c in &self.candidates {
            let preloaded = preload_companions(&c.path, companions);
            // SAFETY: loading a library runs its initialisers. The libraries searched for here
            // (libcuda, libnvrtc, libcublas, libcublasLt, libnccl, or a file the user named
            // explicitly) are ordinary shared libraries whose initialisers have no
            // preconditions on our side.
            match unsafe { libloading::Library::new(&c.path) } {
                Ok(lib) => return Ok((lib, c.path.clone(), preloaded)),
                Err(e) => attempts.push(LoadAttempt {
                    candidate: c.clone(),
                    error: loader_message(&e),
                }),
            }
        }
        Err(LoadError {
            library: self.library,
            attempts,
            note: self.note.clone(),
            hint: self.hint,
        })
    }
}

/// Loads each companion that sits beside `path` (same folder, `path`'s file name with its stem
/// replaced: `libcublas.so.13` → `libcublasLt.so.13`); skips those that are not there.
fn preload_companions(path: &Path, companions: &[&str]) -> Vec<libloading::Library> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    if dir.as_os_str().is_empty() {
        return Vec::new(); // a bare soname: the system loader finds its dependencies itself
    }
    let suffix = name.find(".so").map_or("", |i| &name[i..]);
    companions
        .iter()
        .map(|stem| dir.join(format!("{stem}{suffix}")))
        .filter(|p| p.is_file())
        // SAFETY: the companion is the library's own dependency, shipped beside it; its
        // initialisers have no preconditions on our side.
        .filter_map(|p| unsafe { libloading::Library::new(&p) }.ok())
        .collect()
}

/// The usual install folders of a CUDA library: `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`,
/// then each of `pip_dirs` (e.g. `nvidia/cu13/lib`) under every Python site-packages found.
pub(crate) fn cuda_library_dirs(
    env: &dyn Fn(&str) -> Option<OsString>,
    pip_dirs: &[&str],
) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(home) = env("CUDA_HOME").filter(|h| !h.is_empty()) {
        dirs.push(PathBuf::from(home).join("lib64"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    for site in python_site_dirs(env) {
        dirs.extend(pip_dirs.iter().map(|d| site.join(d)));
    }
    dirs
}

/// The OS loader's own words, without libloading's wrapper text.
fn loader_message(e: &libloading::Error) -> String {
    match e {
        libloading::Error::DlOpen { desc } => format!("{desc:?}").trim_matches('"').to_string(),
        other => other.to_string(),
    }
}

/// Resolves one symbol; `None` when the library does not export it.
///
/// # Safety
/// `T` must be the symbol's true type (a function pointer with the right signature).
pub(crate) unsafe fn resolve<T: Copy>(lib: &libloading::Library, name: &[u8]) -> Option<T> {
    // SAFETY: forwarded to the caller: `T` is the symbol's type.
    unsafe { lib.get::<T>(name).ok().map(|s| *s) }
}

/// `site-packages` (and Debian's `dist-packages`) directories of the Python installations that
/// are cheap to find without running Python: `$PYTHONPATH`, `$VIRTUAL_ENV`, `$CONDA_PREFIX`,
/// `~/.local`, pyenv versions, `/usr/local`, `/usr` and `/opt/*/.venv`. Only existing ones.
///
/// The same list [`crate::Nvrtc::search`] uses for pip's `nvidia-*` wheels; `cuda-stack-build` looks
/// for the `nvidia-cuda-nvcc` wheel's `nvcc` in it.
pub fn python_site_dirs(env: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let mut sites = Vec::new();
    if let Some(pp) = env("PYTHONPATH") {
        sites.extend(std::env::split_paths(&pp));
    }
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(p) = env(var).filter(|p| !p.is_empty()) {
            prefixes.push(p.into());
        }
    }
    if let Some(home) = env("HOME").filter(|p| !p.is_empty()) {
        let home = PathBuf::from(home);
        prefixes.push(home.join(".local"));
        prefixes.extend(subdirs(&home.join(".pyenv/versions")));
    }
    prefixes.extend(["/usr/local", "/usr", "/opt/conda"].map(PathBuf::from));
    prefixes.extend(
        subdirs(Path::new("/opt"))
            .into_iter()
            .map(|d| d.join(".venv")),
    );
    for prefix in prefixes {
        for lib in ["lib", "lib64"] {
            for py in subdirs(&prefix.join(lib)) {
                let is_python = py
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"));
                if is_python {
                    sites.push(py.join("site-packages"));
                    sites.push(py.join("dist-packages"));
                }
            }
        }
    }
    sites.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    let mut seen = Vec::new();
    sites.retain(|s| {
        s.is_dir() && !seen.contains(s) && {
            seen.push(s.clone());
            true
        }
    });
    sites
}

/// The subdirectories of `dir`, sorted; empty if it cannot be read.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    #[test]
    fn env_var_is_authoritative() {
        let env = |k: &str| (k == "X_PATH").then(|| OsString::from("/nope/libx.so"));
        let s = Search::standard(
            "x",
            "h",
            "X_PATH",
            &["libx.so.1"],
            &[PathBuf::from("/d")],
            &env,
        );
        assert_eq!(s.candidates().len(), 1);
        assert_eq!(s.candidates()[0].source, CandidateSource::EnvVar("X_PATH"));
        let err = s.open().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/nope/libx.so ($X_PATH)"), "{text}");
        assert!(text.contains("no other place was searched"), "{text}");
    }

    #[test]
    fn sonames_come_before_install_dirs() {
        let dirs = [PathBuf::from("/a"), PathBuf::from("/b")];
        let s = Search::standard("x", "h", "X_PATH", &["l.so.1", "l.so"], &dirs, &no_env);
        let paths: Vec<_> = s.candidates().iter().map(|c| c.path.clone()).collect();
        let expect: Vec<PathBuf> = [
            "l.so.1",
            "l.so",
            "/a/l.so.1",
            "/a/l.so",
            "/b/l.so.1",
            "/b/l.so",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(paths, expect);
    }

    #[test]
    fn each_version_is_searched_everywhere_before_the_next() {
        let dirs = [PathBuf::from("/a"), PathBuf::from("/b")];
        let versions: [&[&str]; 2] = [&["l.so.13"], &["l.so.12"]];
        let s = Search::standard_by_version("x", "h", "X_PATH", &versions, &dirs, &no_env);
        let paths: Vec<_> = s.candidates().iter().map(|c| c.path.clone()).collect();
        let expect: Vec<PathBuf> = [
            "l.so.13",
            "/a/l.so.13",
            "/b/l.so.13",
            "l.so.12",
            "/a/l.so.12",
            "/b/l.so.12",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(paths, expect);
        let env = |k: &str| (k == "X_PATH").then(|| OsString::from("/x/l.so.12"));
        let s = Search::standard_by_version("x", "h", "X_PATH", &versions, &dirs, &env);
        assert_eq!(s.candidates().len(), 1);
    }

    #[test]
    fn every_failure_is_listed_with_the_loader_message() {
        let dirs = [PathBuf::from("/definitely/not/here")];
        let s = Search::standard(
            "libnothing",
            "do X",
            "X_PATH",
            &["libnothing-at-all.so.7"],
            &dirs,
            &no_env,
        );
        let err = s.open().unwrap_err();
        assert_eq!(err.attempts.len(), 2);
        for a in &err.attempts {
            assert!(!a.error.is_empty());
        }
        let text = err.to_string();
        assert!(text.contains("tried 2 places"), "{text}");
        assert!(
            text.contains("/definitely/not/here/libnothing-at-all.so.7"),
            "{text}"
        );
        assert!(text.contains("cannot open shared object file"), "{text}");
        assert!(text.contains("help: do X"), "{text}");
    }
}

crate::debug_as_display!(struct LoadError);
