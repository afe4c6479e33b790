//! `proofline synthetic`: a partition shaped like a 32 GiB PoRep's (its constraint, aux and
//! input counts from filecoin-proofs' circuit, carried into the chosen domain; the PoRep
//! witness's mix and densities) through a device backend's accelerator
//! worker, the engine's accelerator stage: a, b, c and the witness go from host memory through
//! the worker's pinned staging to the device, the H pipeline and every MSM run (b_g2 included)
//! against random bases made on the device. A timing workload, not a proof: a 32 GiB sector's
//! proving key cannot be generated here, so the bases are synthetic; every partition's sums are
//! checked (outside the timed call) against answers known from the bases' logarithms.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use gpu_core::synthetic::SyntheticKey;
use gpu_core::DeviceBackend;
use proofline_filecoin::variant::{SealSpec, SealVariant};
use proofline_workloads::synthetic::{key_shape, SyntheticSpec};
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::units::human_bytes;

use crate::config::BackendKind;

/// What every line about the workload says.
pub const NOT_A_PROOF: &str = "a timing workload, not a proof";

/// `proofline synthetic`'s options.
#[derive(clap::Args, Debug)]
pub struct SyntheticArgs {
    /// The device backend.
    #[arg(long, value_enum)]
    pub backend: BackendKind,
    /// The evaluation domain, as a power of two (27: a 32 GiB PoRep partition's).
    #[arg(long = "log2-domain", default_value_t = 27)]
    pub log2_domain: u32,
    /// Partitions to run, one after another on one worker (the first pays one-time costs).
    #[arg(long, default_value_t = 3)]
    pub partitions: usize,
    /// The device's ordinal.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// OpenCL devices (opencl only; `--opencl-device`'s syntax).
    #[arg(long = "opencl-device")]
    pub opencl_device: Option<String>,
    /// Caps the device memory used (`80GiB`).
    #[arg(long = "gpu-mem-limit", value_parser = crate::units::parse_size)]
    pub gpu_mem_limit: Option<u64>,
    /// The seed of the partition and the bases (default: random).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Trace the device: the CSV, an SVG beside it, busy and idle time printed.
    #[arg(long = "device-trace")]
    pub device_trace: Option<PathBuf>,
}

impl SyntheticArgs {
    /// Refuses what cannot run, with a clear message.
    pub fn validate(&self) -> Result<(), String> {
        if self.backend == BackendKind::Cpu {
            return Err(
                "the synthetic partition runs on a device backend: --backend cuda or opencl".into(),
            );
        }
        if !(10..=27).contains(&self.log2_domain) {
            return Err("--log2-domain must be between 10 and 27".into());
        }
        if !(1..=64).contains(&self.partitions) {
            return Err("--partitions must be between 1 and 64".into());
        }
        if self.backend != BackendKind::Opencl && self.opencl_device.is_some() {
            return Err("--opencl-device applies to the opencl backend".into());
        }
        Ok(())
    }
}

/// Runs the workload on the backend `args` names.
pub fn synthetic(args: SyntheticArgs) -> anyhow::Result<()> {
    args.validate().map_err(anyhow::Error::msg)?;
    if let Some(csv) = &args.device_trace {
        crate::outputs::check_file("--device-trace", csv, &[]).map_err(anyhow::Error::msg)?;
        let svg = csv.with_extension("svg");
        crate::outputs::check_file("--device-trace (its SVG)", &svg, &[])
            .map_err(anyhow::Error::msg)?;
    }
    // The libraries and `--gpu` checked before the kernels are compiled or loaded.
    crate::backend::check_devices(args.backend, args.opencl_device.as_deref(), &[args.gpu])?;
    let options = crate::backend::BackendOptions::new(
        args.backend,
        args.opencl_device.as_deref(),
        args.gpu_mem_limit,
        args.device_trace.is_some(),
    )?;
    let backend = crate::backend::open_backend(options)?
        .device
        .context("the synthetic partition runs on a device backend")?;
    run(&*backend, &args)
}

fn run(acc: &dyn DeviceBackend, args: &SyntheticArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.gpu < acc.device_count(),
        "--gpu {}: the backend has {} device(s)",
        args.gpu,
        acc.device_count()
    );
    acc.describe().iter().for_each(|l| crate::say!("{l}"));
    let seed = args.seed.unwrap_or_else(rand::random);
    // The shape: the real 32 GiB PoRep partition's counts and densities (filecoin-proofs'
    // blank circuit, every linear combination built), carried into the chosen domain.
    let t = std::time::Instant::now();
    let real = proofline_filecoin::plan::partition_density(&SealSpec::new(
        32 << 30,
        SealVariant::V1_1,
        None,
    )?)?;
    let share = |used: usize| 100.0 * used as f64 / real.size.aux.max(1) as f64;
    crate::say!(
        "a 32 GiB PoRep partition: {} constraints, {} aux variables ({:.1}% in A, {:.1}% in B), {} inputs (counted in {:.1} s)",
        real.size.constraints,
        real.size.aux,
        share(real.a_aux),
        share(real.b_aux),
        real.size.inputs,
        t.elapsed().as_secs_f64()
    );
    let spec = SyntheticSpec::like(&real, args.log2_domain);
    crate::say!(
        "synthetic partition shaped like a 32 GiB PoRep's, {NOT_A_PROOF}: domain 2^{}, {} constraints, {} aux variables (51% zeros, 47% ones, 2% dense), seed {seed}",
        args.log2_domain, spec.constraints, spec.aux
    );
    let t = Instant::now();
    let partition = spec.partition(seed);
    let shape = partition.shape();
    crate::say!(
        "host partition: {} (a, b, c, witness, densities) in {:.1} s; A uses {} aux variables, B {}",
        human_bytes(partition.heap_bytes() as u64),
        t.elapsed().as_secs_f64(),
        shape.a_aux,
        shape.b_aux
    );
    let key = SyntheticKey::new(key_shape(&partition), seed);
    let ledger = StageLedger::new();
    let t = Instant::now();
    let prepared = acc
        .prepare_synthetic(&key, &ledger)
        .context("making the synthetic bases")?;
    crate::say!(
        "synthetic bases on the device: {} in {:.1} s (tables of 2^{} random points, sums made on the device)",
        human_bytes(key.bases_bytes()),
        t.elapsed().as_secs_f64(),
        key.table_log
    );
    let mut worker = acc.worker(args.gpu, 0)?;
    let mut times = Vec::new();
    for k in 0..args.partitions {
        let copy = partition.clone();
        let mut token = ledger.enter(Stage::OnAccelerator, 0, k);
        let t = Instant::now();
        let out = worker.accelerate(&prepared, copy, &mut token.backend_buffers());
        let secs = t.elapsed().as_secs_f64();
        token.release_backend_buffers();
        drop(token);
        let out = out.map_err(|h| anyhow::anyhow!("partition {k}: {}", h.error))?;
        // Checked outside the timed call: every sum against its known answer (the synthetic
        // bases' logarithms are known), the H sum in the subgroup.
        let c = Instant::now();
        key.check_sums(&out)
            .map_err(|e| anyhow::anyhow!("partition {k}: {e}"))?;
        crate::say!(
            "partition {k}: accelerator + b_g2 {secs:.3} s, sums checked in {:.1} s ({NOT_A_PROOF})",
            c.elapsed().as_secs_f64()
        );
        times.push(secs);
    }
    // What the worker's thread spends at the end of each call, after the device's last step:
    // freeing the partition's a, b and c (the call owns the partition).
    let spare = partition.evaluations.clone();
    let t = Instant::now();
    drop(spare);
    crate::say!(
        "host: freeing one partition's a, b and c ({}) takes {:.3} s (each call does it after its last device step)",
        human_bytes(partition.evaluations.heap_bytes() as u64),
        t.elapsed().as_secs_f64()
    );
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let later = &times[1.min(times.len() - 1)..];
    crate::say!(
        "accelerator + b_g2 per partition: median {median:.3} s, best {:.3} s, mean after the first {:.3} s, over {} partitions ({NOT_A_PROOF})",
        sorted[0],
        later.iter().sum::<f64>() / later.len() as f64,
        times.len()
    );
    let snap = ledger.snapshot();
    crate::say!(
        "device memory: ledger peak {} (bases {}), {}",
        human_bytes(snap.device_total.peak),
        human_bytes(key.bases_bytes()),
        acc.device_memory()
            .iter()
            .map(|m| format!(
                "device {}: allocated peak {}, driver {} above its baseline",
                m.device,
                human_bytes(m.allocated_peak),
                m.driver_above_baseline().map_or("-".into(), human_bytes)
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let steps = acc.step_times();
    if !steps.is_empty() {
        let s: Vec<String> = steps
            .iter()
            .map(|s| format!("{} {:.3} s ({}x)", s.name, s.seconds, s.count))
            .collect();
        crate::say!("device steps, summed: {}", s.join(", "));
    }
    if let Some(path) = &args.device_trace {
        let title = format!(
            "synthetic 32 GiB-shaped partition (2^{}), {NOT_A_PROOF}",
            args.log2_domain
        );
        crate::report::device_trace::report_trace(path, &acc.device_trace(), &title)
            .map_err(anyhow::Error::msg)?;
    }
    drop(prepared);
    anyhow::ensure!(
        ledger.snapshot().is_balanced(),
        "the ledger did not balance: {}",
        ledger.snapshot()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(backend: BackendKind) -> SyntheticArgs {
        SyntheticArgs {
            backend,
            log2_domain: 27,
            partitions: 3,
            gpu: 0,
            opencl_device: None,
            gpu_mem_limit: None,
            seed: None,
            device_trace: None,
        }
    }

    #[test]
    fn bad_options_are_refused_with_a_reason() {
        assert!(args(BackendKind::Cuda).validate().is_ok());
        let e = args(BackendKind::Cpu).validate().unwrap_err();
        assert!(e.contains("device backend"), "{e}");
        for bad in [9, 28] {
            let a = SyntheticArgs {
                log2_domain: bad,
                ..args(BackendKind::Cuda)
            };
            assert!(a.validate().unwrap_err().contains("--log2-domain"));
        }
        let a = SyntheticArgs {
            partitions: 0,
            ..args(BackendKind::Opencl)
        };
        assert!(a.validate().unwrap_err().contains("--partitions"));
        let a = SyntheticArgs {
            opencl_device: Some("nvidia".into()),
            ..args(BackendKind::Cuda)
        };
        assert!(a.validate().unwrap_err().contains("--opencl-device"));
    }
}
