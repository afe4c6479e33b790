//! `cargo xtask <command> [args]`: builds the `proofline` harness binary in release mode and runs
//! it with the same arguments, so that every job runs optimized and the binary alone can be
//! carried to a machine without cargo.
//!
//! Commands:
//! - `sweep`: the workload once per worker count, each in a fresh process (`--pw 10..15`);
//!   results.json, results.csv, timelines and report.svg under `target/sweep/`.
//! - `prove`: the workload at one worker count, with stage times and ledger peaks.
//! - `filecoin seal`: a random sector sealed through C1 by filecoin-proofs (C1 output in both
//!   forms, and sector.json).
//! - `c2`: the PoRep C2 of a C1 output through the engine, checked by `verify_seal`.
//! - `kernels --cuda-arch sm_90`: the CUDA kernels compiled into the kernel cache (no GPU).
//! - `report DIR`: a sweep's report.svg drawn again.
//!
//! The binary is built with its default features (the CPU, OpenCL and CUDA backends: the GPU
//! APIs are loaded at run time, so nothing GPU is needed to build); `--backend` picks one.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask sweep [--pw 10..15] [options]   (cargo xtask sweep --help)\n       cargo xtask prove [--pw N] [options]     (cargo xtask prove --help)\n       cargo xtask filecoin seal --sector-size 2KiB --out DIR\n       cargo xtask c2 --c1 DIR/c1.json [--out proof.bin] (cargo xtask c2 --help)\n       cargo xtask kernels --cuda-arch sm_90\n       cargo xtask synthetic --backend cuda [--partitions N]\n       cargo xtask report DIR";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("prove" | "sweep" | "c2" | "filecoin" | "kernels" | "report" | "synthetic") => {}
        Some("-h" | "--help") | None => {
            eprintln!("{USAGE}");
            return if args.is_empty() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
        Some(other) => {
            eprintln!("error: unknown xtask command `{other}`\n{USAGE}");
            return ExitCode::FAILURE;
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(&root)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "harness",
            "--bin",
            "proofline",
        ])
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!("error: building the harness failed ({s})");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("error: could not run {cargo}: {e}");
            return ExitCode::FAILURE;
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("release").join("proofline");
    match Command::new(&bin).current_dir(&root).args(&args).status() {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!(
                "error: {} {} exited with {s}",
                bin.display(),
                args.join(" ")
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: could not start {}: {e}", bin.display());
            ExitCode::FAILURE
        }
    }
}
