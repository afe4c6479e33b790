//! Without a GPU: every kernel's unit of the source compiles through NVRTC to an sm_90 CUBIN
//! (the H200's), on all cores at once as the backend does. NVRTC comes from the CUDA toolkit or the `nvidia-cuda-nvrtc==13.0.88` PyPI wheel
//! (`.ci/run` installs it under `target/nvrtc`; `scripts/test.sh` puts its `lib` folder, or
//! `$PROOFLINE_NVRTC_DIR`, on `LD_LIBRARY_PATH`). Under `CI=true` a missing NVRTC fails the test.

use backend_cuda::{library, nvrtc};
use gpu_core::cache::KernelCache;
use gpu_core::{KernelSource, Limbs};

/// Whether `cubin` defines the symbol `name` exactly (an entry of its string table, between
/// NULs: `pl_zero` is not found inside `..._G1Affine_pl_zero` or `.text.pl_zero`).
fn defines(cubin: &[u8], name: &str) -> bool {
    let entry = [b"\0", name.as_bytes(), b"\0"].concat();
    cubin.windows(entry.len()).any(|w| w == entry)
}

#[test]
fn nvrtc_compiles_kernels() {
    if let Err(e) = library::nvrtc() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!ci, "CI=true but NVRTC cannot be used: {e}");
        eprintln!("skipped: {e} (set PROOFLINE_NVRTC_DIR or LD_LIBRARY_PATH)");
        return;
    }
    let version = nvrtc::version().unwrap();
    let source = KernelSource::new(Limbs::L32);
    let units = source.units();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let t = std::time::Instant::now();
    let cubins = nvrtc::compile_units(
        &units.iter().collect::<Vec<_>>(),
        (9, 0),
        threads,
        &|line| eprintln!("{line}"),
    );
    eprintln!(
        "NVRTC {}.{}: {} sm_90 CUBINs ({} bytes) on {threads} threads in {:.1} s",
        version.0,
        version.1,
        cubins.len(),
        cubins.iter().flatten().map(Vec::len).sum::<usize>(),
        t.elapsed().as_secs_f64()
    );
    let all = source.names.all();
    for (unit, cubin) in units.iter().zip(cubins) {
        let cubin = cubin.unwrap_or_else(|e| panic!("{e}"));
        // An ELF image defining its kernel and no other launched kernel (each other one is a
        // static function nothing calls, dropped).
        assert_eq!(&cubin[..4], b"\x7fELF", "{}", unit.kernel);
        assert!(
            defines(&cubin, &unit.kernel),
            "{} is not in its CUBIN",
            unit.kernel
        );
        for other in all.iter().filter(|&&k| k != unit.kernel) {
            assert!(
                !defines(&cubin, other),
                "{other} is in the CUBIN of {}",
                unit.kernel
            );
        }
        // ec-gpu-gen's multiexp kernels, never launched, are in no unit.
        assert!(
            !cubin.windows(9).any(|w| w == b"_multiexp"),
            "{}",
            unit.kernel
        );
    }
    // Negative twin of the symbol check: a name that is only part of an entry is not defined.
    let fake = b"\0.text.pl_zero\0blstrs__g1__G1Affine_pl_zero\0";
    assert!(!defines(fake, "pl_zero"));
    assert!(defines(fake, "blstrs__g1__G1Affine_pl_zero"));
}

#[test]
fn nvrtc_rejects_broken_source() {
    if let Err(e) = library::nvrtc() {
        eprintln!("skipped: {e}");
        return;
    }
    // Negative twin: a source that does not compile is an error carrying NVRTC's log.
    let mut text = KernelSource::new(Limbs::L32).text;
    text.push_str("\nKERNEL void broken(uint n) { undefined_function(n); }\n");
    let err = nvrtc::compile_cubin(&text, (9, 0)).unwrap_err();
    assert!(err.contains("undefined_function"), "{err}");
}

#[test]
fn cached_units_are_reused_and_a_damaged_one_rebuilt() {
    if let Err(e) = library::nvrtc() {
        eprintln!("skipped: {e}");
        return;
    }
    // A unit of one tiny kernel (compiles in a fraction of a second), cached in a folder of its
    // own.
    let dir = tempfile::tempdir().unwrap();
    let cache = KernelCache::new(dir.path());
    let unit = gpu_core::Unit {
        kernel: "pl_tiny".into(),
        text: format!(
            "extern \"C\" __global__ void pl_tiny(uint *x) {{ x[0] = {}; }}\n",
            rand::random::<u32>()
        ),
    };
    let units = [unit];
    let get = |cached| {
        nvrtc::modules_of(&units, (9, 0), Some(&cache), cached, &|_| {})
            .unwrap()
            .remove(0)
    };
    let first = get(nvrtc::Cached::Use);
    assert!(!first.cached, "a fresh folder has nothing cached");
    assert!(defines(&first.cubin, "pl_tiny"));
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let stored = |path: &std::path::Path| {
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let entry = std::fs::read(path).unwrap();
        gpu_core::cache::decode(&name, &entry).map(<[u8]>::to_vec)
    };
    assert_eq!(stored(&files[0]).as_deref(), Ok(&first.cubin[..]));
    let second = get(nvrtc::Cached::Use);
    assert!(second.cached);
    assert_eq!(second.cubin, first.cubin);
    // Negative twins: a damaged file, a bare CUBIN (an older cache's file) and a sound entry
    // holding no CUBIN are each compiled again and stored over; `Replace` compiles even over a
    // good one.
    let mut damaged = std::fs::read(&files[0]).unwrap();
    *damaged.last_mut().unwrap() ^= 1;
    let key = files[0].file_stem().unwrap().to_str().unwrap().to_owned();
    for bad in [
        damaged,
        first.cubin.clone(),
        gpu_core::cache::encode(&key, b"not a cubin"),
    ] {
        std::fs::write(&files[0], bad).unwrap();
        let again = get(nvrtc::Cached::Use);
        assert!(!again.cached);
        assert_eq!(stored(&files[0]).as_deref(), Ok(&again.cubin[..]));
    }
    assert!(!get(nvrtc::Cached::Replace).cached);
    // With no cache, nothing is read or stored.
    let none = nvrtc::modules_of(&units, (9, 0), None, nvrtc::Cached::Use, &|_| {}).unwrap();
    assert!(!none[0].cached);
}
