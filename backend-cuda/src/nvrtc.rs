//! The shared kernel source compiled by NVRTC to CUBINs for the device's architecture, one per
//! launched kernel ([`gpu_core::Unit`]), on every core at once, each cached on disk
//! (`gpu_core::cache`, key: the unit's digest, architecture, NVRTC version): a proving process
//! pays the compile once per machine, not at every start, and a change to one kernel rebuilds
//! that kernel only. As one whole program the source took NVRTC about 19 minutes on 2 cores
//! (its G2 kernels most of it); as units it takes the longest unit's time on a machine with a
//! core per unit, and about half the single-thread sum on 2 cores (see `docs/design-decisions.md#kernel-source-and-compilation`).
//!
//! ec-gpu-gen writes its CUDA branch for nvcc; under NVRTC it needs three changes, made here and
//! nowhere else: `__NVCC__` defined (its common header picks the CUDA branch on it), the C
//! integer typedefs nvcc gets from host headers, and C compound literals `((T){...})` written as
//! C++ `(T{...})`. (proofline's own kernels take their local memory through `PL_SHARED`, which
//! is empty under CUDA: the shared memory is sized at launch.)

use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use cudarc::nvrtc::sys;
use gpu_core::cache::{KernelCache, CACHE_VAR};
use gpu_core::{KernelSource, Unit};

/// NVRTC's version (an error when NVRTC, `libnvrtc.so.13` found through `LD_LIBRARY_PATH` or
/// the linker cache, is missing or lacks a function: [`crate::library::nvrtc`]).
pub fn version() -> Result<(i32, i32), String> {
    crate::library::nvrtc().map_err(|e| e.to_string())?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| format!("nvrtcVersion: {e:?}"))?;
    Ok((major, minor))
}

/// A program text (the whole source's or a unit's) as NVRTC takes it.
pub fn nvrtc_source(program: &str) -> String {
    let mut text = String::with_capacity(program.len() + 256);
    text.push_str(
        "#define __NVCC__ 1\ntypedef unsigned short ushort;\ntypedef unsigned int uint;\ntypedef unsigned long long ulong;\n",
    );
    text.push_str(program);
    // `((T){` -> `(T{`: compound literals.
    rewrite_compound_literals(&text)
}

fn rewrite_compound_literals(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("((") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let ident_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if ident_len > 0 && after[ident_len..].starts_with("){") {
            out.push('(');
            out.push_str(&after[..ident_len]);
            out.push('{');
            rest = &after[ident_len + 2..];
        } else {
            out.push_str("((");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Compiles one program text (the whole source's or a unit's) to a CUBIN for
/// `sm_{major}{minor}` (no cache).
pub fn compile_cubin(program: &str, arch: (i32, i32)) -> Result<Vec<u8>, String> {
    crate::library::nvrtc().map_err(|e| e.to_string())?;
    let text = CString::new(nvrtc_source(program)).map_err(|e| e.to_string())?;
    let name = CString::new("proofline.cu").expect("no NUL");
    let prog = cudarc::nvrtc::result::create_program(&text, Some(&name))
        .map_err(|e| format!("nvrtcCreateProgram: {e:?}"))?;
    // `--split-compile=0`: a unit's optimisation passes in parallel too, on every core (for
    // when one unit is left to build).
    let opts = [
        format!("--gpu-architecture=sm_{}{}", arch.0, arch.1),
        "--split-compile=0".to_string(),
    ];
    // SAFETY: `prog` is a live program; options are valid strings.
    let compiled = unsafe { cudarc::nvrtc::result::compile_program(prog, &opts) };
    let result = match compiled {
        Err(e) => {
            // SAFETY: as above.
            let log = unsafe { cudarc::nvrtc::result::get_program_log(prog) }
                .map(|l| {
                    let bytes: Vec<u8> =
                        l.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
                    String::from_utf8_lossy(&bytes).into_owned()
                })
                .unwrap_or_default();
            Err(format!(
                "NVRTC failed ({e:?}); log (end): {}",
                gpu_core::kernels::log_tail(&log, 4000)
            ))
        }
        Ok(()) => {
            let mut size = 0usize;
            // SAFETY: a compiled program; out-pointer valid; the buffer has `size` bytes.
            unsafe {
                sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| format!("nvrtcGetCUBINSize: {e:?}"))
                    .and_then(|()| {
                        let mut buf = vec![0u8; size];
                        sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast())
                            .result()
                            .map(|()| buf)
                            .map_err(|e| format!("nvrtcGetCUBIN: {e:?}"))
                    })
            }
        }
    };
    // SAFETY: destroys the program once.
    let _ = unsafe { cudarc::nvrtc::result::destroy_program(prog) };
    result
}

/// One kernel's CUBIN.
#[derive(Debug, Clone)]
pub struct Module {
    /// The kernel it defines.
    pub kernel: String,
    /// The CUBIN.
    pub cubin: Vec<u8>,
    /// Whether it came from the cache.
    pub cached: bool,
}

/// What [`modules`] reports while it compiles: one line per event.
pub type Progress<'a> = &'a (dyn Fn(&str) + Sync);

/// Compiles `units` on up to `threads` threads at once (each takes the next unit left); the
/// results are in the units' order. The units whose kernels work on G2, then G1, start first:
/// they take longest, so the last to finish is a short one.
pub fn compile_units(
    units: &[&Unit],
    arch: (i32, i32),
    threads: usize,
    progress: Progress<'_>,
) -> Vec<Result<Vec<u8>, String>> {
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by_key(|&i| {
        let k = &units[i].kernel;
        (!k.contains("G2"), !k.contains("G1"))
    });
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    type Built = Option<Result<Vec<u8>, String>>;
    let results: Mutex<Vec<Built>> = Mutex::new(units.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, units.len().max(1)) {
            scope.spawn(|| {
                while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let t = Instant::now();
                    let result = compile_cubin(&units[i].text, arch)
                        .map_err(|e| format!("kernel {}: {e}", units[i].kernel));
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    progress(&format!(
                        "[{n}/{}] {} {} in {:.1} s",
                        units.len(),
                        units[i].kernel,
                        if result.is_ok() { "compiled" } else { "failed" },
                        t.elapsed().as_secs_f64()
                    ));
                    results.lock().expect("no thread panics holding it")[i] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("no thread panics holding it")
        .into_iter()
        .map(|r| r.expect("every unit was taken"))
        .collect()
}

/// The cache key of `unit` for `arch` under NVRTC `version`.
fn unit_key(unit: &Unit, arch: (i32, i32), version: (i32, i32)) -> String {
    unit.digest(&format!(
        "cuda unit|sm_{}{}|nvrtc {}.{}",
        arch.0, arch.1, version.0, version.1
    ))
}

/// Every kernel's CUBIN for `arch`, in [`gpu_core::kernels::KernelNames::all`]'s order: from
/// `cache`, or compiled (all missing units at once, on every core) and stored there.
/// `progress` hears of the compile when there is one (its start, each unit, its end).
pub fn modules(
    source: &KernelSource,
    arch: (i32, i32),
    cache: Option<&KernelCache>,
    progress: Progress<'_>,
) -> Result<Vec<Module>, String> {
    modules_of(&source.units(), arch, cache, Cached::Use, progress)
}

/// Whether [`modules_of`] takes CUBINs from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cached {
    /// Cached CUBINs are used; the missing ones are compiled and stored.
    Use,
    /// Every unit is compiled and stored over its cached CUBIN (after a cached one failed to
    /// load).
    Replace,
}

/// Whether `bytes` can be a CUBIN (an ELF image): a cached entry that is sound but holds no
/// CUBIN (written by something else) is compiled again and stored over.
fn is_cubin(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

/// The CUBIN cached in `cache` for `key`, if there is a sound one (the cache reports a refused
/// entry; a sound one that is no CUBIN is reported here).
fn cached_cubin(cache: &KernelCache, key: &str) -> Option<Vec<u8>> {
    let bin = cache.load("cuda", key)?;
    if is_cubin(&bin) {
        return Some(bin);
    }
    eprintln!(
        "warning: the cuda program cache file {} holds no CUBIN (no ELF header); compiling it \
         again",
        cache.path("cuda", key).display()
    );
    None
}

/// As [`modules`], for any units, with `cache` (or none: every unit compiled, nothing stored).
pub fn modules_of(
    units: &[Unit],
    arch: (i32, i32),
    cache: Option<&KernelCache>,
    from: Cached,
    progress: Progress<'_>,
) -> Result<Vec<Module>, String> {
    let version = version()?;
    let keys: Vec<String> = units.iter().map(|u| unit_key(u, arch, version)).collect();
    let mut cached: Vec<Option<Vec<u8>>> = keys
        .iter()
        .map(|k| match (from, cache) {
            (Cached::Use, Some(cache)) => cached_cubin(cache, k),
            _ => None,
        })
        .collect();
    let missing: Vec<usize> = (0..units.len()).filter(|&i| cached[i].is_none()).collect();
    if !missing.is_empty() {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let t = Instant::now();
        progress(&format!(
            "compiling {} of {} CUDA kernels for sm_{}{} with NVRTC {}.{} on {} threads (once: \
             they are cached in {})",
            missing.len(),
            units.len(),
            arch.0,
            arch.1,
            version.0,
            version.1,
            threads.min(missing.len()),
            cache.map_or(format!("no folder: set {CACHE_VAR} or HOME"), |c| c
                .folder()
                .display()
                .to_string())
        ));
        let todo: Vec<&Unit> = missing.iter().map(|&i| &units[i]).collect();
        let built = compile_units(&todo, arch, threads, progress);
        progress(&format!(
            "compiled {} CUDA kernels in {:.1} s",
            missing.len(),
            t.elapsed().as_secs_f64()
        ));
        for (&i, bin) in missing.iter().zip(built) {
            let bin = bin?;
            if let Some(cache) = cache {
                cache.store("cuda", &keys[i], &bin);
            }
            cached[i] = Some(bin);
        }
    }
    Ok(units
        .iter()
        .zip(cached)
        .enumerate()
        .map(|(i, (u, bin))| Module {
            kernel: u.kernel.clone(),
            cubin: bin.expect("every unit is loaded or built"),
            cached: !missing.contains(&i),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rewrites_apply_and_leave_the_rest() {
        assert_eq!(
            rewrite_compound_literals("#define Z ((P_jacobian){A, B}) f((x)) ((y){"),
            "#define Z (P_jacobian{A, B}) f((x)) (y{"
        );
        let s = nvrtc_source(&KernelSource::new(gpu_core::Limbs::L32).text);
        assert!(s.starts_with("#define __NVCC__ 1\n"));
        assert!(
            !s.lines().any(local_parameter),
            "a kernel takes a `LOCAL` pointer parameter (CUDA sizes shared memory at launch)"
        );
        // Negative twin: ec-gpu-gen's FFT parameter (what `PL_SHARED` replaced) is caught; a
        // local pointer assigned in OpenCL's branch is not a parameter.
        assert!(local_parameter("  LOCAL Fr* u_arg, // x"));
        assert!(local_parameter("f(LOCAL Fr *u)"));
        assert!(!local_parameter("  LOCAL Fr_limb *sh = sh_arg;"));
        assert!(!local_parameter("extern LOCAL uchar cuda_shared[];"));
        assert!(!s.contains("_jacobian){"), "a compound literal is left");
    }

    /// Whether a `LOCAL ` declaration on `line` ends at `,` or `)`: a parameter.
    fn local_parameter(line: &str) -> bool {
        line.match_indices("LOCAL ").any(|(i, _)| {
            let rest = &line[i..];
            rest.find([',', ')', '=', ';'])
                .is_some_and(|j| matches!(rest.as_bytes()[j], b',' | b')'))
        })
    }
}
