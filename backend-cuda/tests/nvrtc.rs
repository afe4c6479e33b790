//! Without a GPU: the whole kernel source compiles through NVRTC to an sm_90 CUBIN (the
//! H200's). NVRTC comes from the CUDA toolkit or the `nvidia-cuda-nvrtc==13.0.88` PyPI wheel
//! (`.ci/run` installs it under `target/nvrtc`; `scripts/test.sh` puts its `lib` folder, or
//! `$PROOFLINE_NVRTC_DIR`, on `LD_LIBRARY_PATH`). Under `CI=true` a missing NVRTC fails the test.

use backend_cuda::nvrtc;
use gpu_core::{KernelSource, Limbs};

#[test]
fn nvrtc_compiles_kernels() {
    if !nvrtc::available() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(
            !ci,
            "CI=true but NVRTC (libnvrtc.so.13) was not found on LD_LIBRARY_PATH"
        );
        eprintln!("skipped: NVRTC not found (set PROOFLINE_NVRTC_DIR or LD_LIBRARY_PATH)");
        return;
    }
    let version = nvrtc::version().unwrap();
    let source = KernelSource::new(Limbs::L32);
    let t = std::time::Instant::now();
    let cubin = nvrtc::compile_cubin(&source, (9, 0)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "NVRTC {}.{}: sm_90 CUBIN of {} bytes from {} bytes of source in {:.1} s",
        version.0,
        version.1,
        cubin.len(),
        source.text.len(),
        t.elapsed().as_secs_f64()
    );
    // An ELF image: the magic, and big enough to hold the kernels.
    assert_eq!(&cubin[..4], b"\x7fELF");
    assert!(cubin.len() > 100_000, "{} bytes", cubin.len());
    // Every kernel the host logic launches is in it (as a symbol name).
    for k in source.names.all() {
        assert!(
            cubin.windows(k.len()).any(|w| w == k.as_bytes()),
            "{k} is not in the CUBIN"
        );
    }
}

#[test]
fn nvrtc_rejects_broken_source() {
    if !nvrtc::available() {
        eprintln!("skipped: NVRTC not found");
        return;
    }
    // Negative twin: a source that does not compile is an error carrying NVRTC's log.
    let mut source = KernelSource::new(Limbs::L32);
    source
        .text
        .push_str("\nKERNEL void broken(uint n) { undefined_function(n); }\n");
    let err = nvrtc::compile_cubin(&source, (9, 0)).unwrap_err();
    assert!(err.contains("undefined_function"), "{err}");
}
