//! The shared kernel source compiled by NVRTC to a CUBIN for the device's architecture, cached
//! on disk (`gpu_core::cache`, key: source digest, architecture, NVRTC version): a proving
//! process pays the compile (17-55 s) once per machine, not at every start.
//!
//! ec-gpu-gen writes its CUDA branch for nvcc; under NVRTC it needs three changes, made here and
//! nowhere else: `__NVCC__` defined (its common header picks the CUDA branch on it), the C
//! integer typedefs nvcc gets from host headers, and C compound literals `((T){...})` written as
//! C++ `(T{...})`. (proofline's own kernels take their local memory through `PL_SHARED`, which
//! is empty under CUDA: the shared memory is sized at launch.)

use std::ffi::CString;

use cudarc::nvrtc::sys;
use gpu_core::{cache, KernelSource};

/// Whether the NVRTC library can be opened (it is found through `LD_LIBRARY_PATH` or the
/// linker cache: `libnvrtc.so.13`).
pub fn available() -> bool {
    // SAFETY: only tries to open the library.
    unsafe { sys::is_culib_present() }
}

/// NVRTC's version.
pub fn version() -> Result<(i32, i32), String> {
    if !available() {
        return Err(missing());
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| format!("nvrtcVersion: {e:?}"))?;
    Ok((major, minor))
}

fn missing() -> String {
    "NVRTC (libnvrtc.so.13) not found: install the CUDA toolkit, or `pip install --target DIR nvidia-cuda-nvrtc==13.0.88` and put DIR/nvidia/cu13/lib on LD_LIBRARY_PATH".into()
}

/// The source as NVRTC takes it.
pub fn nvrtc_source(source: &KernelSource) -> String {
    let mut text = String::with_capacity(source.text.len() + 256);
    text.push_str(
        "#define __NVCC__ 1\ntypedef unsigned short ushort;\ntypedef unsigned int uint;\ntypedef unsigned long long ulong;\n",
    );
    text.push_str(&source.text);
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

/// Compiles `source` to a CUBIN for `sm_{major}{minor}` (no cache).
pub fn compile_cubin(source: &KernelSource, arch: (i32, i32)) -> Result<Vec<u8>, String> {
    if !available() {
        return Err(missing());
    }
    let text = CString::new(nvrtc_source(source)).map_err(|e| e.to_string())?;
    let name = CString::new("proofline.cu").expect("no NUL");
    let prog = cudarc::nvrtc::result::create_program(&text, Some(&name))
        .map_err(|e| format!("nvrtcCreateProgram: {e:?}"))?;
    // `--split-compile=0`: optimisation passes in parallel, on every core (the program is one
    // large translation unit; minutes on a small machine otherwise).
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
                gpu_core::source::log_tail(&log, 4000)
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

/// The CUBIN for `arch`, from the cache or compiled (and stored); `true` when it came from the
/// cache.
pub fn cubin(source: &KernelSource, arch: (i32, i32)) -> Result<(Vec<u8>, bool), String> {
    cubin_cached(source, arch).map(|(bin, cached, _)| (bin, cached))
}

/// As [`cubin`], also naming the cache file (`None` when no cache folder can be named).
pub fn cubin_cached(
    source: &KernelSource,
    arch: (i32, i32),
) -> Result<(Vec<u8>, bool, Option<std::path::PathBuf>), String> {
    let (major, minor) = version()?;
    let key = source.digest(&format!(
        "cuda|sm_{}{}|nvrtc {major}.{minor}",
        arch.0, arch.1
    ));
    let path = cache::path("cuda", &key);
    if let Some(bin) = cache::load("cuda", &key) {
        return Ok((bin, true, path));
    }
    let bin = compile_cubin(source, arch)?;
    cache::store("cuda", &key, &bin);
    Ok((bin, false, path))
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
        let s = nvrtc_source(&KernelSource::new(gpu_core::Limbs::L32));
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
