//! The `proofline` binary: runs proofline's jobs without cargo (also on the GPU machine).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use harness::{run_prove, ProveConfig};

#[derive(Parser)]
#[command(
    name = "proofline",
    about = "Partitioned Groth16 proving on BLS12-381",
    version
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prove one job of the demo `dense` circuit on the CPU backend, verify it, print stage times.
    Prove {
        /// Constraints per partition, as log2 (the domain is exactly 2^K).
        #[arg(long = "log2-constraints", default_value_t = 14, value_parser = clap::value_parser!(u32).range(4..=26))]
        log2_constraints: u32,
        /// Partitions in the job.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        partitions: u64,
        /// Public inputs per partition.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1000))]
        inputs: u64,
        /// Parameter cache folder.
        #[arg(long, default_value = "target/proofline-params")]
        params_dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Prove {
            log2_constraints,
            partitions,
            inputs,
            params_dir,
        } => run_prove(&ProveConfig {
            log2_constraints,
            partitions: partitions as usize,
            inputs: inputs as usize,
            params_dir,
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}
