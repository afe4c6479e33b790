//! Hostile drivers and device lists, end to end through the binary: a CUDA driver or an NVRTC
//! that lacks a function proofline calls (fake libraries built here with `cc`, first on
//! `LD_LIBRARY_PATH`) is an error, exit status 1, naming the library and the function, never
//! cudarc's panic (exit 101); a device ordinal that does not exist is refused before any
//! parameter is generated (on OpenCL: POCL in CI, where `CI=true` makes a missing platform a
//! failure).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Builds the shared library `dir/name` defining `functions` (each `int f(void)`), and a copy
/// under each of `aliases`.
fn fake_library(dir: &Path, name: &str, functions: &[&str], aliases: &[&str]) {
    let c = dir.join(format!("{name}.c"));
    let body: String = functions
        .iter()
        .map(|f| format!("int {f}(void) {{ return 0; }}\n"))
        .collect();
    std::fs::write(&c, body).unwrap();
    let path = dir.join(name);
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&path)
        .arg(&c)
        .status()
        .expect("a C compiler (cc) to build the fake libraries");
    assert!(status.success(), "cc failed for {name}");
    for alias in aliases {
        std::fs::copy(&path, dir.join(alias)).unwrap();
    }
}

/// A folder with a CUDA driver that has `cuDriverGetVersion` but no `cuInit` (as `libcuda.so`
/// and `libcuda.so.1`) and an NVRTC without `nvrtcVersion` (as `libnvrtc.so` and
/// `libnvrtc.so.13`).
fn broken_libraries() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fake_library(
        dir.path(),
        "libcuda.so.1",
        &["cuDriverGetVersion"],
        &["libcuda.so"],
    );
    fake_library(
        dir.path(),
        "libnvrtc.so.13",
        &["nvrtcGetErrorString"],
        &["libnvrtc.so"],
    );
    dir
}

/// Runs `proofline args` with `libs` first on `LD_LIBRARY_PATH` (when given), the kernel cache
/// and Filecoin's parameter cache in `scratch`, and `env`.
fn proofline(args: &[&str], libs: Option<&Path>, scratch: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proofline"));
    cmd.args(args)
        .env("PROOFLINE_KERNEL_CACHE", scratch.join("kernels"))
        .env("FIL_PROOFS_PARAMETER_CACHE", scratch.join("fil-params"))
        .env_remove("PROOFLINE_PARAMS_ON");
    if let Some(libs) = libs {
        let mut path = libs.as_os_str().to_owned();
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
            path.push(":");
            path.push(old);
        }
        cmd.env("LD_LIBRARY_PATH", path);
    }
    cmd.envs(env.iter().copied());
    cmd.output().unwrap()
}

/// Asserts that the run failed as an error (exit 1, no panic) whose message has every one of
/// `wants`; returns its standard error.
fn assert_refused(o: &Output, wants: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(1),
        "expected an error (exit 1); stderr:\n{err}"
    );
    assert!(!err.contains("panicked"), "a panic, not an error:\n{err}");
    for want in wants {
        assert!(err.contains(want), "{want:?} is not in stderr:\n{err}");
    }
    err
}

/// Whether `dir` holds nothing (or does not exist): no parameters were generated there.
fn empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none())
}

/// A tiny workload on `backend` with its parameters in `params`, then `extra`.
fn tiny<'a>(backend: &'a str, params: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--backend",
        backend,
        "--log2-constraints",
        "8",
        "--partitions",
        "1",
        "--jobs",
        "1",
        "--params-dir",
        params.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args
}

/// What every refusal of the fake driver says: the file, where it came from, the function.
fn driver_lacks_cuinit(libs: &Path) -> [String; 4] {
    [
        "the CUDA driver library libcuda.so".into(),
        format!("(from {})", libs.join("libcuda.so").display()),
        "lacks cuInit".into(),
        "the driver is too old or broken for this build (CUDA 13)".into(),
    ]
}

#[test]
fn a_driver_without_cuinit_is_an_error_naming_it() {
    let libs = broken_libraries();
    let scratch = tempfile::tempdir().unwrap();
    let params = scratch.path().join("params");
    let wants = driver_lacks_cuinit(libs.path());
    let wants: Vec<&str> = wants.iter().map(String::as_str).collect();
    let out = scratch.path().join("sweep");
    let c1 = scratch.path().join("c1.json");
    let runs: Vec<Vec<&str>> = vec![
        [vec!["prove", "--pw", "1"], tiny("cuda", &params, &[])].concat(),
        [
            vec!["sweep", "--pw", "1", "--out", out.to_str().unwrap()],
            tiny("cuda", &params, &[]),
        ]
        .concat(),
        vec![
            "synthetic",
            "--backend",
            "cuda",
            "--log2-domain",
            "10",
            "--partitions",
            "1",
        ],
        vec!["c2", "--c1", c1.to_str().unwrap(), "--backend", "cuda"],
    ];
    for args in runs {
        let o = proofline(&args, Some(libs.path()), scratch.path(), &[]);
        assert_refused(&o, &wants);
        assert!(empty(&params), "{args:?} generated parameters");
        assert!(
            empty(&scratch.path().join("fil-params")),
            "{args:?} generated parameters"
        );
    }
    assert!(!out.exists(), "the sweep made its folder before the check");
}

#[test]
fn an_nvrtc_without_nvrtcversion_is_an_error_naming_it() {
    let libs = broken_libraries();
    let scratch = tempfile::tempdir().unwrap();
    let o = proofline(
        &["kernels", "--cuda-arch", "sm_90"],
        Some(libs.path()),
        scratch.path(),
        &[],
    );
    let nvrtc = libs.path().join("libnvrtc.so");
    assert_refused(
        &o,
        &[
            "the NVRTC library libnvrtc.so",
            &format!("(from {})", nvrtc.display()),
            "lacks nvrtcVersion",
        ],
    );
    assert!(empty(&scratch.path().join("kernels")));
}

#[test]
fn no_driver_at_all_is_an_error_before_parameters() {
    // Without a driver (this machine's case, and CI's) the error says so; with one, the
    // ordinal that cannot exist is refused. Either way before any parameter is generated.
    let scratch = tempfile::tempdir().unwrap();
    let params = scratch.path().join("params");
    let args = [
        vec!["prove", "--pw", "1"],
        tiny("cuda", &params, &["--gpus", "0,4096"]),
    ]
    .concat();
    let o = proofline(&args, None, scratch.path(), &[]);
    let err = assert_refused(&o, &[]);
    assert!(
        err.contains("the CUDA driver (libcuda.so) is not installed")
            || err.contains("device 4096 does not exist")
            || err.contains("lacks"),
        "{err}"
    );
    assert!(empty(&params), "parameters were generated before the check");
    // The same for c2, whose parameters take minutes.
    let c1 = scratch.path().join("c1.json");
    let o = proofline(
        &[
            "c2",
            "--c1",
            c1.to_str().unwrap(),
            "--backend",
            "cuda",
            "--gpus",
            "0,4096",
        ],
        None,
        scratch.path(),
        &[],
    );
    let err = assert_refused(&o, &[]);
    assert!(
        err.contains("libcuda.so") || err.contains("device 4096") || err.contains("lacks"),
        "c2 did not check the device first: {err}"
    );
}

/// Runs `prove` on OpenCL with `gpus`; `None` (skipped, reason printed) when there is no
/// OpenCL here and this is not CI.
fn prove_opencl(gpus: &str, env: &[(&str, &str)]) -> Option<(Output, PathBuf, tempfile::TempDir)> {
    let scratch = tempfile::tempdir().unwrap();
    let params = scratch.path().join("params");
    let args = [
        vec!["prove", "--pw", "1"],
        tiny("opencl", &params, &["--gpus", gpus]),
    ]
    .concat();
    let o = proofline(&args, None, scratch.path(), env);
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && err.contains("no OpenCL platform") && !in_ci() {
        eprintln!("skipped: no OpenCL here ({err})");
        return None;
    }
    Some((o, params, scratch))
}

#[test]
fn every_listed_device_is_checked_before_parameters() {
    let Some((o, params, _scratch)) = prove_opencl("0,7", &[]) else {
        return;
    };
    assert_refused(&o, &["device 7 does not exist", "the opencl backend has"]);
    assert!(empty(&params), "parameters were generated before the check");
}

#[test]
fn a_missing_device_is_refused_when_the_cpu_makes_the_parameters() {
    let Some((o, params, _scratch)) = prove_opencl("7", &[("PROOFLINE_PARAMS_ON", "cpu")]) else {
        return;
    };
    assert_refused(&o, &["device 7 does not exist"]);
    assert!(empty(&params), "parameters were generated before the check");
}
