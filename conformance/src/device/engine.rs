//! The engine on a device backend: its fallback under injected faults, its trace, and its
//! device memory against the ledger.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, verify_proofs_batch, Accelerator, Config,
    CpuSynthesizer, Engine, EngineStats,
};
use rand::RngCore;

use crate::{cases, SuiteCircuit};

/// Six partitions through the engine on `backend`'s `device` (one worker, the CPU as
/// fallback): every proof verifies, none is lost, the ledger balances. Returns the engine's
/// figures, for the caller to check how many partitions the device did and how many fell back.
pub fn check_engine_fallback(backend: Arc<dyn Accelerator>, device: usize) -> EngineStats {
    let mut rng = rand::thread_rng();
    let shape = cases(&mut rng).remove(0);
    let params = Arc::new(generate_seeded_parameters(shape.clone(), rng.next_u64()).unwrap());
    let pvk = prepare_verifying_key(&params.vk);
    let config = Config {
        synthesis_workers: 2,
        gpu_workers: 1,
        devices: vec![device],
        fallback: Some(Arc::new(CpuBackend)),
        ..Config::default()
    };
    let engine: Engine<SuiteCircuit, CpuSynthesizer> = Engine::new(
        config,
        CpuSynthesizer,
        backend.clone(),
        Arc::new(CpuBackend),
    )
    .unwrap();
    let prepared = engine.prepare(params).unwrap();
    let job: Vec<SuiteCircuit> = (0..6).map(|_| shape.reseeded(rng.next_u64())).collect();
    let proofs = engine
        .submit(&prepared, job.clone(), &mut rng)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(proofs.len(), job.len(), "a proof was lost");
    let inputs: Vec<_> = job.iter().map(SuiteCircuit::public_inputs).collect();
    assert!(verify_proofs_batch(&pvk, &proofs, &inputs, &mut rng).unwrap());
    let ledger = engine.ledger().clone();
    let stats = engine.shutdown();
    drop(prepared);
    let snap = ledger.snapshot();
    assert!(snap.is_balanced(), "{snap}");
    check_device_memory(&*backend, snap.device_total.peak);
    stats
}

/// A traced engine run (`stats` from [`check_engine_fallback`]): every partition the device
/// proved has spans, of copies in, kernels and copies out, labelled with the accelerator's
/// steps; each lane (device worker, an in-order queue; its copies beside its kernels, another)
/// runs one span at a time; copies carry
/// their bytes; the kernels' own busy time is positive and within the union of copies and
/// kernels, which is no more than the host timed the accelerator calls at.
pub fn check_trace(backend: &dyn Accelerator, stats: &EngineStats) {
    use prover_core::SpanKind;
    let spans = backend.device_trace();
    let proved: u64 = stats.devices.iter().map(|d| d.partitions).sum();
    assert!(proved > 0, "{stats:?}");
    let mut partitions: Vec<u64> = spans.iter().map(|s| s.partition).collect();
    partitions.sort_unstable();
    partitions.dedup();
    assert_eq!(
        partitions,
        (0..proved).collect::<Vec<_>>(),
        "partitions traced"
    );
    // Copies beside the kernels are where the queue can overlap them (CUDA), not on POCL.
    for kind in [SpanKind::CopyIn, SpanKind::CopyOut, SpanKind::Kernel] {
        assert!(spans.iter().any(|s| s.kind == kind), "no {kind} span");
    }
    for step in ["h_ntt", "msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2"] {
        assert!(
            spans
                .iter()
                .any(|s| s.step == step && s.kind == SpanKind::Kernel),
            "no kernel of step {step}"
        );
    }
    for s in &spans {
        assert!(s.end >= s.start && s.start.is_finite(), "{s:?}");
        match s.kind {
            SpanKind::Kernel => assert!(s.bytes == 0 && s.name != "copy" && !s.name.is_empty()),
            _ => assert!(s.bytes > 0 && s.name == "copy", "{s:?}"),
        }
    }
    // A worker's copies beside its kernels are a lane of their own (its second stream).
    type Lane = (usize, usize, bool);
    let mut lanes: std::collections::BTreeMap<Lane, Vec<&prover_core::DeviceSpan>> =
        Default::default();
    for s in &spans {
        let beside = s.kind == SpanKind::CopyBeside;
        lanes
            .entry((s.device, s.worker, beside))
            .or_default()
            .push(s);
    }
    for (lane, mut v) in lanes {
        v.sort_by(|a, b| a.start.total_cmp(&b.start));
        for w in v.windows(2) {
            // One microsecond of slack for the clocks' rounding.
            assert!(
                w[1].start + 1e-6 >= w[0].end,
                "lane {lane:?}: {:?} starts before {:?} ends",
                w[1],
                w[0]
            );
        }
    }
    for d in prover_core::accounting::trace::summarize(&spans) {
        assert_eq!(d.partitions as u64, proved);
        // The kernels took time on the device's clock, and within the copies' and kernels'
        // union.
        assert!(
            d.kernel_busy > 0.0 && d.kernel_busy_fraction() <= d.busy_fraction(),
            "{d:?}"
        );
        // Every span ran inside an accelerator call (the worker waits for its device before
        // it returns), so the device's clock cannot count more busy time than the host's
        // clock counted for the calls (plus a millisecond a partition for the two clocks'
        // rounding): a span timed in the wrong unit, or from the wrong epoch, fails here.
        let host = stats
            .devices
            .iter()
            .find(|s| s.device == d.device)
            .map_or(0.0, |s| s.accelerator_seconds);
        assert!(
            d.busy <= host + 1e-3 * proved as f64,
            "device {}: busy {:.6} s on its clock, the host timed its accelerator calls at {host:.6} s",
            d.device,
            d.busy
        );
    }
}

/// A margin for device bytes the ledger does not count (the H pipeline's tables are counted as
/// scratch; small per-launch tables may not be).
const UNLEDGERED: u64 = 64 << 10;

/// Slack of the driver's figure above the ledger's device peak: allocations round up (to 2 MiB
/// pages, and a memory pool grows in larger steps), and the driver reserves memory the
/// ledger never sees (kernels' local memory as they are first launched, the context's heaps).
/// An H200 holds 70 MiB above its baseline for a run whose ledger peak is under 1 MiB: local
/// memory for every resident thread (132 SMs x 2048 threads) is reserved at the first launch.
const DRIVER_SLACK: u64 = 128 << 20;

/// The ledger's device peak against what the backend allocated (one worker, no errors mid-run:
/// every buffer is registered after its allocation and released before its free, so the
/// ledger never counts more, and misses only the small tables), and against the driver's own
/// figure where the API reports one (CUDA: memory in use above what it was when the device
/// was opened). The driver's is the independent one: the allocated peak counts the same
/// requested sizes as the ledger. The driver must account for the ledger's peak
/// (`ledger <= driver + 2 MiB`, one page of the driver's rounding) and not hold much more
/// (`driver <= 1.25 ledger + 128 MiB`: rounding up, pools, and what the driver reserves for
/// itself). OpenCL reports no such figure, so there the driver's side is not checked.
pub fn check_device_memory(backend: &dyn Accelerator, ledger_peak: u64) {
    for m in backend.device_memory() {
        eprintln!(
            "device {} memory: ledger peak {ledger_peak} B, allocated peak {} B, driver {:?} B above a baseline of {:?} B",
            m.device,
            m.allocated_peak,
            m.driver_above_baseline(),
            m.driver_baseline
        );
        assert!(
            ledger_peak <= m.allocated_peak,
            "the ledger counted {ledger_peak} device bytes at its peak, more than were allocated ({})",
            m.allocated_peak
        );
        assert!(
            m.allocated_peak <= ledger_peak + UNLEDGERED,
            "{} device bytes were allocated at the peak, the ledger counted {ledger_peak}",
            m.allocated_peak
        );
        match m.driver_above_baseline() {
            Some(driver) => assert!(
                driver_accounts_for(driver, ledger_peak),
                "device {}: the driver saw {driver} B in use above its baseline at the peak, \
                 the ledger counted {ledger_peak} B (allowed: from the ledger's less 2 MiB to \
                 1.25 times it plus 128 MiB)",
                m.device
            ),
            None => eprintln!(
                "device {}: the API reports no driver figure (OpenCL); the ledger is checked \
                 against the allocated sizes only",
                m.device
            ),
        }
    }
}

/// Whether the driver's figure `driver` (bytes in use above its baseline, at its peak) is
/// within [`check_device_memory`]'s tolerance of the ledger's peak.
fn driver_accounts_for(driver: u64, ledger_peak: u64) -> bool {
    ledger_peak <= driver + (2 << 20) && driver <= ledger_peak + ledger_peak / 4 + DRIVER_SLACK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_accounts_for_the_ledger_within_its_tolerance() {
        let mib = 1u64 << 20;
        // Rounded up a little, or a pool's step above: accounted for.
        assert!(driver_accounts_for(1000 * mib, 1000 * mib));
        assert!(driver_accounts_for(1000 * mib - mib, 1000 * mib));
        assert!(driver_accounts_for(1250 * mib + 128 * mib, 1000 * mib));
        assert!(driver_accounts_for(70 * mib, mib));
        assert!(driver_accounts_for(128 * mib, 0));
        // Its twins: less than the ledger's peak (a buffer the driver never held), or far
        // more (a buffer the ledger never counted).
        assert!(!driver_accounts_for(1000 * mib - 3 * mib, 1000 * mib));
        assert!(!driver_accounts_for(1250 * mib + 129 * mib, 1000 * mib));
        assert!(!driver_accounts_for(129 * mib, 0));
    }
}
