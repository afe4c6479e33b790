//! The CUDA libraries, found and checked before cudarc calls into them. cudarc opens the driver
//! (`libcuda.so`) and NVRTC (`libnvrtc.so.13`) on first use and looks each function up on its
//! first call, and a library or function it does not find is a panic. [`driver`] and [`nvrtc`]
//! open the library cudarc will open (the first of cudarc's candidate names that loads, in its
//! order) and look up every function proofline's CUDA path calls, so that a missing, old or
//! broken library is an error that names the file and the function it lacks.

use std::ffi::c_void;
use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The toolkit this build's bindings are for (cudarc's `cuda-13000` feature).
pub const BUILT_FOR: &str = "CUDA 13";

/// Every driver function proofline calls, directly or through cudarc's safe API (contexts,
/// streams, modules, events, allocations, copies, launches, and `cuGetErrorString`, which
/// cudarc's error formatting calls). cudarc looks up exactly these names (the `_v2` ones
/// included).
pub const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuStreamDestroy_v2",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemAllocAsync",
    "cuMemFreeAsync",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemGetInfo_v2",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventElapsedTime_v2",
    "cuEventDestroy_v2",
    "cuLaunchKernel",
];

/// Every NVRTC function proofline calls (the version, and a program's create, compile, log,
/// CUBIN and destroy).
pub const NVRTC_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcDestroyProgram",
];

/// One of the two libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// The CUDA driver, `libcuda.so`.
    Driver,
    /// NVRTC, `libnvrtc.so.13`.
    Nvrtc,
}

impl Library {
    /// The names cudarc tries, in its order (the first that loads is the one it uses).
    pub fn candidates(self) -> Vec<String> {
        let bases: &[&str] = match self {
            Library::Driver => &["cuda", "nvcuda"],
            Library::Nvrtc => &["nvrtc"],
        };
        bases
            .iter()
            .flat_map(|b| cudarc::get_lib_name_candidates(b))
            .collect()
    }

    /// The functions proofline calls in it.
    pub fn symbols(self) -> &'static [&'static str] {
        match self {
            Library::Driver => DRIVER_SYMBOLS,
            Library::Nvrtc => NVRTC_SYMBOLS,
        }
    }
}

/// Why a CUDA library cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LibraryError {
    /// None of the candidate names loaded.
    NotFound {
        /// Which library.
        library: Library,
        /// The candidates that exist but did not load, with the loader's reason (a damaged
        /// file, a missing dependency).
        refused: Vec<String>,
    },
    /// The library loaded lacks functions proofline calls.
    Lacks {
        /// Which library.
        library: Library,
        /// The name it was loaded by.
        file: String,
        /// Where the loader found it, when the loader says.
        path: Option<PathBuf>,
        /// The functions it lacks, in [`Library::symbols`]'s order.
        missing: Vec<&'static str>,
    },
}

impl fmt::Display for LibraryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LibraryError::NotFound { library, refused } => {
                match library {
                    Library::Driver => write!(
                        f,
                        "the CUDA driver (libcuda.so) is not installed or not on the library path"
                    )?,
                    Library::Nvrtc => write!(
                        f,
                        "NVRTC (libnvrtc.so.13) not found: install the CUDA toolkit, or `pip \
                         install --target DIR nvidia-cuda-nvrtc==13.0.88` and put \
                         DIR/nvidia/cu13/lib on LD_LIBRARY_PATH"
                    )?,
                }
                if !refused.is_empty() {
                    write!(f, " (found but not loaded: {})", refused.join("; "))?;
                }
                Ok(())
            }
            LibraryError::Lacks {
                library,
                file,
                path,
                missing,
            } => {
                let what = match library {
                    Library::Driver => "the CUDA driver library",
                    Library::Nvrtc => "the NVRTC library",
                };
                write!(f, "{what} {file}")?;
                if let Some(path) = path {
                    write!(f, " (from {})", path.display())?;
                }
                write!(f, " lacks {}", list(missing))?;
                match library {
                    Library::Driver => write!(
                        f,
                        ": the driver is too old or broken for this build ({BUILT_FOR}); install \
                         an NVIDIA driver for {BUILT_FOR} or later"
                    ),
                    Library::Nvrtc => write!(
                        f,
                        ": it is too old or broken for this build ({BUILT_FOR}); install NVRTC 13 \
                         (the CUDA 13 toolkit, or the nvidia-cuda-nvrtc==13.0.88 wheel)"
                    ),
                }
            }
        }
    }
}

impl std::error::Error for LibraryError {}

/// `a`, `a and b`, `a, b and c`, or `a, b, c and N more`.
fn list(names: &[&str]) -> String {
    const SHOWN: usize = 3;
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        _ if names.len() <= SHOWN => {
            let (last, rest) = names.split_last().expect("two or more");
            format!("{} and {last}", rest.join(", "))
        }
        _ => format!(
            "{} and {} more",
            names[..SHOWN].join(", "),
            names.len() - SHOWN
        ),
    }
}

/// A library checked to have every function: kept loaded for the process (cudarc loads the
/// same file by the same name, and keeps it).
#[derive(Debug)]
struct Checked {
    _library: libloading::Library,
}

/// The CUDA driver that cudarc will use, checked once per process: `Ok` when it loads and has
/// every function in [`DRIVER_SYMBOLS`].
pub fn driver() -> Result<(), LibraryError> {
    static DRIVER: OnceLock<Result<Checked, LibraryError>> = OnceLock::new();
    checked(&DRIVER, Library::Driver)
}

/// NVRTC as cudarc will use it, checked once per process: `Ok` when it loads and has every
/// function in [`NVRTC_SYMBOLS`].
pub fn nvrtc() -> Result<(), LibraryError> {
    static NVRTC: OnceLock<Result<Checked, LibraryError>> = OnceLock::new();
    checked(&NVRTC, Library::Nvrtc)
}

fn checked(
    cell: &OnceLock<Result<Checked, LibraryError>>,
    library: Library,
) -> Result<(), LibraryError> {
    cell.get_or_init(|| check(library, &library.candidates(), library.symbols()))
        .as_ref()
        .map(|_| ())
        .map_err(Clone::clone)
}

/// Opens the first of `candidates` that loads (as cudarc does) and looks up `symbols` in it.
fn check(
    library: Library,
    candidates: &[String],
    symbols: &[&'static str],
) -> Result<Checked, LibraryError> {
    let mut refused = Vec::new();
    for name in candidates {
        // SAFETY: loading runs the library's initialisers, as cudarc's own load of the same
        // name does right after.
        let lib = match unsafe { libloading::Library::new(name) } {
            Ok(lib) => lib,
            Err(e) => {
                // The loader's own message is the source (`dlopen failed` is all the error says).
                let reason = std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string());
                // A name that is not there is the normal case: only a file that exists and
                // does not load is worth reporting.
                if !reason.contains("No such file or directory") {
                    refused.push(reason);
                }
                continue;
            }
        };
        let missing: Vec<&'static str> = symbols
            .iter()
            .copied()
            // SAFETY: only looked up, never called (the type is a placeholder).
            .filter(|s| unsafe { lib.get::<*mut c_void>(s.as_bytes()) }.is_err())
            .collect();
        if missing.is_empty() {
            return Ok(Checked { _library: lib });
        }
        let (lib, path) = loaded_from(lib);
        drop(lib);
        return Err(LibraryError::Lacks {
            library,
            file: name.clone(),
            path,
            missing,
        });
    }
    Err(LibraryError::NotFound { library, refused })
}

/// Where the loader found `lib` (glibc's `dlinfo`), with `lib` back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn loaded_from(lib: libloading::Library) -> (libloading::Library, Option<PathBuf>) {
    use std::ffi::{c_char, CStr};
    use std::os::unix::ffi::OsStrExt;
    /// The leading fields of glibc's `struct link_map` (only these are read).
    #[repr(C)]
    struct LinkMap {
        l_addr: usize,
        l_name: *const c_char,
    }
    let raw = libloading::os::unix::Library::from(lib).into_raw();
    let mut map: *const LinkMap = std::ptr::null();
    // SAFETY: `raw` is a live handle from `dlopen`; RTLD_DI_LINKMAP writes a `struct link_map *`
    // into `map`; its `l_name` is a NUL-terminated path owned by the loader while the library
    // is loaded (it is copied before the handle is given back).
    let path = unsafe {
        let ok = libc::dlinfo(
            raw,
            libc::RTLD_DI_LINKMAP,
            (&mut map as *mut *const LinkMap).cast(),
        ) == 0;
        (ok && !map.is_null() && !(*map).l_name.is_null())
            .then(|| CStr::from_ptr((*map).l_name).to_bytes())
            .filter(|name| !name.is_empty())
            .map(|name| PathBuf::from(std::ffi::OsStr::from_bytes(name)))
    };
    // SAFETY: `raw` came from `into_raw` above and is taken back once.
    let lib = unsafe { libloading::os::unix::Library::from_raw(raw) };
    (lib.into(), path)
}

/// Where the loader found `lib`: not known on this platform.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn loaded_from(lib: libloading::Library) -> (libloading::Library, Option<PathBuf>) {
    (lib, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    /// Builds a shared library at `path` defining `functions` (each `int f(void)`).
    fn shared_library(path: &Path, functions: &[&str]) {
        let c = path.with_extension("c");
        let body: String = functions
            .iter()
            .map(|f| format!("int {f}(void) {{ return 0; }}\n"))
            .collect();
        std::fs::write(&c, body).unwrap();
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(path)
            .arg(&c)
            .status()
            .expect("a C compiler (cc) for the fake libraries");
        assert!(status.success(), "cc failed for {}", path.display());
    }

    fn names(paths: &[&Path]) -> Vec<String> {
        paths
            .iter()
            .map(|p| p.to_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn a_library_lacking_a_function_is_named_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("libcuda.so.1");
        shared_library(&old, &["cuDriverGetVersion"]);
        let absent = dir.path().join("libcuda.so");
        let e = check(
            Library::Driver,
            &names(&[&absent, &old]),
            &["cuDriverGetVersion", "cuInit"],
        )
        .unwrap_err();
        assert_eq!(
            e,
            LibraryError::Lacks {
                library: Library::Driver,
                file: old.to_str().unwrap().to_owned(),
                path: Some(old.clone()),
                missing: vec!["cuInit"],
            }
        );
        let text = e.to_string();
        assert!(
            text.starts_with("the CUDA driver library ")
                && text.contains(&format!("(from {})", old.display()))
                && text.contains("lacks cuInit: the driver is too old or broken")
                && text.contains(BUILT_FOR),
            "{text}"
        );
        // Positive twin: a library with every function passes.
        let full = dir.path().join("libfull.so");
        shared_library(&full, &["cuDriverGetVersion", "cuInit"]);
        assert!(check(
            Library::Driver,
            &names(&[&full]),
            &["cuDriverGetVersion", "cuInit"]
        )
        .is_ok());
    }

    #[test]
    fn the_first_candidate_that_loads_is_the_one_checked() {
        // As cudarc does: the first that loads is used, even when a later one is complete.
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("a.so"), dir.path().join("b.so"));
        shared_library(&first, &["other"]);
        shared_library(&second, &["nvrtcVersion"]);
        let e = check(
            Library::Nvrtc,
            &names(&[&first, &second]),
            &["nvrtcVersion"],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(&format!("the NVRTC library {}", first.display()))
                && e.contains("lacks nvrtcVersion"),
            "{e}"
        );
    }

    #[test]
    fn no_library_and_a_damaged_one_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let absent = dir.path().join("libcuda.so.1");
        let e = check(Library::Driver, &names(&[&absent]), DRIVER_SYMBOLS).unwrap_err();
        assert_eq!(
            e,
            LibraryError::NotFound {
                library: Library::Driver,
                refused: vec![]
            }
        );
        assert!(e.to_string().contains("libcuda.so"), "{e}");
        let damaged = dir.path().join("libnvrtc.so.13");
        std::fs::write(&damaged, b"not a library").unwrap();
        let e = check(Library::Nvrtc, &names(&[&damaged]), NVRTC_SYMBOLS)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("NVRTC (libnvrtc.so.13) not found") && e.contains("libnvrtc.so.13:"),
            "{e}"
        );
    }

    #[test]
    fn missing_functions_are_listed_briefly() {
        assert_eq!(list(&["a"]), "a");
        assert_eq!(list(&["a", "b"]), "a and b");
        assert_eq!(list(&["a", "b", "c"]), "a, b and c");
        assert_eq!(list(&["a", "b", "c", "d", "e"]), "a, b, c and 2 more");
    }

    #[test]
    fn every_function_called_directly_is_checked() {
        // The crate's own calls into cudarc's raw bindings (`sys::cuX(` and `sys::nvrtcX(`);
        // what cudarc's safe API calls is listed by hand.
        let mut called = Vec::new();
        for text in [
            include_str!("device.rs"),
            include_str!("lib.rs"),
            include_str!("nvrtc.rs"),
        ] {
            for (i, _) in text.match_indices("sys::") {
                let rest = &text[i + "sys::".len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let name = &rest[..end];
                if rest[end..].starts_with('(')
                    && (name.starts_with("cu") || name.starts_with("nvrtc"))
                {
                    called.push(name);
                }
            }
        }
        assert!(called.contains(&"cuDriverGetVersion"), "{called:?}");
        for name in called {
            assert!(
                DRIVER_SYMBOLS.contains(&name) || NVRTC_SYMBOLS.contains(&name),
                "{name} is called but not checked"
            );
        }
    }
}
