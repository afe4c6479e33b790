//! The harness: parameter cache and the `prove` job (the sweep arrives with its issue).
#![warn(missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backend_cpu::CpuBackend;
use prover_core::circuits::DenseCircuit;
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, verify_proof, verify_proofs_batch,
    CpuSynthesizer, Error, Finalizer, GpuBackend, Parameters, PointCheck, Randomness, Result,
    Synthesizer,
};

/// Loads the parameters for `circuit` from `path`, or generates them (seeded) and writes them
/// there. Our own cache is trusted: it is read without the subgroup check.
pub fn load_or_generate(
    path: &Path,
    circuit: DenseCircuit,
    seed: u64,
) -> Result<(Parameters, bool)> {
    if path.exists() {
        return Ok((Parameters::read_mmap(path, PointCheck::Unchecked)?, true));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    let params = generate_seeded_parameters(circuit, seed)?;
    params.write_file(path)?;
    Ok((params, false))
}

/// Options of the `prove` job.
#[derive(Debug, Clone)]
pub struct ProveConfig {
    /// log2 of the constraints per partition (the domain size).
    pub log2_constraints: u32,
    /// Partitions in the job.
    pub partitions: usize,
    /// Public inputs per partition.
    pub inputs: usize,
    /// Folder of the parameter cache.
    pub params_dir: PathBuf,
}

/// Timings of one partition.
#[derive(Debug, Clone, Copy, Default)]
pub struct StageTimes {
    /// Synthesis.
    pub synthesis: Duration,
    /// Accelerator stage.
    pub accelerator: Duration,
    /// Finalizer.
    pub finalize: Duration,
}

/// Runs one job of `partitions` dense partitions on the CPU backend, verifies every proof and
/// prints each stage's time.
pub fn run_prove(cfg: &ProveConfig) -> Result<()> {
    const SHAPE_SEED: u64 = 0x0070_7266_6c6e;
    let shape = DenseCircuit::with_domain(cfg.log2_constraints, cfg.inputs, SHAPE_SEED);
    let path = cfg.params_dir.join(format!(
        "dense-k{}-i{}-s{SHAPE_SEED:x}.params",
        cfg.log2_constraints, cfg.inputs
    ));
    let t = Instant::now();
    let (params, cached) = load_or_generate(&path, shape.clone(), SHAPE_SEED)?;
    println!(
        "parameters: {} ({}, {:.2} s, domain 2^{}, {:.1} MiB in memory)",
        path.display(),
        if cached {
            "loaded from cache"
        } else {
            "generated"
        },
        t.elapsed().as_secs_f64(),
        cfg.log2_constraints,
        params.heap_bytes() as f64 / (1 << 20) as f64
    );
    let prepared = CpuBackend.prepare(Arc::new(params))?;
    let pvk = prepare_verifying_key(&prepared.params().vk);
    let mut rng = rand::thread_rng();

    let job = Instant::now();
    let mut proofs = Vec::new();
    let mut inputs = Vec::new();
    let mut total = StageTimes::default();
    println!("partition  synthesis_s  accelerator_s  finalize_s");
    for p in 0..cfg.partitions {
        let circuit = shape.clone().with_witness(p as u64 + 1);
        inputs.push(circuit.public_inputs());
        let fail = |stage| {
            move |e: Error| Error::PartitionFailed {
                partition: p,
                stage,
                source: Box::new(e),
            }
        };
        let t = Instant::now();
        let partition = CpuSynthesizer
            .synthesize(circuit)
            .map_err(fail("synthesis"))?;
        let synthesis = t.elapsed();
        let t = Instant::now();
        let pending = CpuBackend
            .accelerate(&prepared, partition)
            .map_err(|h| fail("accelerator")(h.error))?;
        let accelerator = t.elapsed();
        let t = Instant::now();
        let done = CpuBackend
            .finalize(prepared.params(), pending, Randomness::random(&mut rng))
            .map_err(fail("finalize"))?;
        let finalize = t.elapsed();
        println!(
            "{p:>9}  {:>11.3}  {:>13.3}  {:>10.3}",
            synthesis.as_secs_f64(),
            accelerator.as_secs_f64(),
            finalize.as_secs_f64()
        );
        total.synthesis += synthesis;
        total.accelerator += accelerator;
        total.finalize += finalize;
        proofs.push(done.proof);
    }
    let wall = job.elapsed();
    println!(
        "{:>9}  {:>11.3}  {:>13.3}  {:>10.3}",
        "total",
        total.synthesis.as_secs_f64(),
        total.accelerator.as_secs_f64(),
        total.finalize.as_secs_f64()
    );
    let t = Instant::now();
    let mut verified = 0;
    for (i, (proof, x)) in proofs.iter().zip(&inputs).enumerate() {
        if !verify_proof(&pvk, proof, x)? {
            return Err(Error::Malformed {
                what: "proof",
                detail: format!("partition {i}'s proof does not verify"),
            });
        }
        verified += 1;
    }
    let batch_ok = verify_proofs_batch(&pvk, &proofs, &inputs, &mut rng)?;
    println!(
        "job: {} partitions in {:.3} s ({:.3} s per partition); {verified}/{} proofs verified, batch check {} ({:.3} s)",
        cfg.partitions,
        wall.as_secs_f64(),
        wall.as_secs_f64() / cfg.partitions.max(1) as f64,
        cfg.partitions,
        if batch_ok { "ok" } else { "FAILED" },
        t.elapsed().as_secs_f64()
    );
    if !batch_ok {
        return Err(Error::Malformed {
            what: "proofs",
            detail: "the batch check failed although each proof verified".into(),
        });
    }
    Ok(())
}
