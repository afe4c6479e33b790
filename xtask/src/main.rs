//! `cargo xtask [CARGO OPTIONS] <command> [args]`: builds the `proofline` harness binary in
//! release mode and runs it with the same arguments, so that every job runs optimized and the
//! binary alone can be carried to a machine without cargo; and keeps the docs' tables.
//!
//! Commands run by the harness:
//! - `sweep`: the workload once per worker count, each in a fresh process (`--pw 10..15`);
//!   results.json, results.csv, timelines and report.svg under `target/sweep/`.
//! - `prove`: the workload at one worker count, with stage times and ledger peaks.
//! - `filecoin seal`: a random sector sealed through C1 by filecoin-proofs (C1 output in both
//!   forms, and sector.json).
//! - `c2`: the PoRep C2 of a C1 output through the engine, checked by `verify_seal`.
//! - `kernels --cuda-arch sm_90`: the CUDA kernels compiled into the kernel cache (no GPU).
//! - `synthetic`: the synthetic partition workload on a device.
//! - `report DIR`: a sweep's report.svg drawn again.
//! - `serve --data-dir DIR`: the proving service; `client --connect ADDR ...`: its client.
//!
//! Cargo options before the command choose the harness's features: `--no-default-features`
//! (the CPU backend only), `--features cuda,opencl`. By default the binary has every backend
//! (the GPU APIs are loaded at run time, so nothing GPU is needed to build); `--backend` picks.
//!
//! Commands of the xtask itself:
//! - `bench-tables [--check]`: the tables of README.md and docs/*.md rendered from the records
//!   under docs/records/ (`--check`: fail when a document is out of date, write nothing).
//! - `record-criterion --table ID --out FILE [--filter TEXT]`: criterion's latest medians under
//!   target/criterion appended as records.

mod criterion;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask [--no-default-features] [--features F] <command> [args]
commands run by the proofline binary:
       cargo xtask sweep [--pw 10..15] [options]   (cargo xtask sweep --help)
       cargo xtask prove [--pw N] [options]     (cargo xtask prove --help)
       cargo xtask filecoin seal --sector-size 2KiB --out DIR
       cargo xtask c2 --c1 DIR/c1.json [--out proof.bin] (cargo xtask c2 --help)
       cargo xtask c2 --plan --sector-size 32GiB [--ram 256GiB]
       cargo xtask filecoin snap --sector-size 16KiB --out DIR
       cargo xtask snap-prove --dir DIR [--out proof.bin]
       cargo xtask kernels --cuda-arch sm_90
       cargo xtask synthetic --backend cuda [--partitions N]
       cargo xtask report DIR
       cargo xtask serve --data-dir DIR [--listen unix:///PATH|HOST:PORT]
       cargo xtask client --connect ADDR submit|await|prove|status|metrics|cancel ...
commands of the xtask:
       cargo xtask bench-tables [--check]
       cargo xtask record-criterion --table ID --out docs/records/FILE.jsonl [--filter TEXT]";

const HARNESS_COMMANDS: [&str; 10] = [
    "prove",
    "serve",
    "client",
    "sweep",
    "c2",
    "snap-prove",
    "filecoin",
    "kernels",
    "report",
    "synthetic",
];

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf();
    // Cargo options for the harness's build, before the command.
    let mut features: Vec<String> = Vec::new();
    while let Some(first) = args.first().cloned() {
        match first.as_str() {
            "--no-default-features" => {
                features.push(first);
                args.remove(0);
            }
            "--features" if args.len() > 1 => {
                features.extend(args.drain(..2));
            }
            f if f.starts_with("--features=") => {
                features.push(first);
                args.remove(0);
            }
            _ => break,
        }
    }
    match args.first().map(String::as_str) {
        Some(c) if HARNESS_COMMANDS.contains(&c) => run_harness(&root, &features, &args),
        Some("bench-tables") => bench_tables(&root, &args[1..]),
        Some("record-criterion") => criterion::record(&root, &args[1..]),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("{USAGE}");
            ExitCode::FAILURE
        }
        Some(other) => {
            eprintln!("error: unknown xtask command `{other}`\n{USAGE}");
            ExitCode::FAILURE
        }
    }
}

/// Builds the harness (with `features`) and runs it with `args`.
fn run_harness(root: &Path, features: &[String], args: &[String]) -> ExitCode {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(root)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "harness",
            "--bin",
            "proofline",
        ])
        .args(features)
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
    match Command::new(&bin).current_dir(root).args(args).status() {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!(
                "error: {} {} exited with {s}",
                bin.display(),
                args.join(" ")
            );
            // The harness's own status (2: usage, 130/143: signals) passes through.
            ExitCode::from(s.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1))
        }
        Err(e) => {
            eprintln!("error: could not start {}: {e}", bin.display());
            ExitCode::FAILURE
        }
    }
}

/// `bench-tables [--check]`: the docs' tables rendered from the records.
fn bench_tables(root: &Path, args: &[String]) -> ExitCode {
    let check = match args {
        [] => false,
        [c] if c == "--check" => true,
        _ => {
            eprintln!("usage: cargo xtask bench-tables [--check]");
            return ExitCode::FAILURE;
        }
    };
    let docs = match proofline_records::docs::refresh(root) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stale = 0;
    for d in &docs {
        if d.current == d.rendered {
            println!("{}: up to date", d.path.display());
            continue;
        }
        stale += 1;
        if check {
            eprintln!("{}: out of date", d.path.display());
        } else if let Err(e) = std::fs::write(root.join(&d.path), &d.rendered) {
            eprintln!("error: {}: {e}", d.path.display());
            return ExitCode::FAILURE;
        } else {
            println!("{}: tables rendered", d.path.display());
        }
    }
    if check && stale > 0 {
        eprintln!("error: {stale} document(s) out of date: run `cargo xtask bench-tables`");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
