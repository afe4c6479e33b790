//! Synthetic bases and a synthetic partition on a device against the CPU.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use blstrs::{G1Affine, G1Projective, G2Affine};
use gpu_core::device::{bytes_of_mut, Device};
use gpu_core::{GpuAccelerator, GpuDevice, Queue};
use group::{Curve, Group};
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::Accelerator;
use prover_core::AcceleratorWorker;
use rand::RngCore;

/// Synthetic bases (a timing workload's key): the kernel's bases equal the CPU's
/// (`T[u_i] + T[v_i]`) for G1 and G2, with long and short per-thread chains (one inversion per
/// chain); another seed gives other bases. Then a whole synthetic partition through
/// `prepare_synthetic` and a worker: its sums equal the CPU backend's on the same bases made
/// on the host.
pub fn check_synthetic<D: Device>(backend: &GpuAccelerator<D>, device: usize) {
    use gpu_core::synthetic::{synthetic_base, synthetic_bases, table, SyntheticKey};
    let gpu = backend.device(device).expect("a device");
    let mut rng = rand::thread_rng();
    let mut q = gpu.device.queue().expect("a queue");
    let seed = rng.next_u32();
    let t1 = table::<G1Affine>(5, rng.next_u64());
    let t2 = table::<G2Affine>(3, rng.next_u64());
    for (n, threads) in [(1, None), (700, Some(7)), (700, None), (5, Some(64))] {
        let buf = synthetic_bases(gpu, &mut q, &t1, seed, n, threads, "t").expect("G1 bases");
        let got: Vec<G1Affine> = read_points(gpu, &mut q, &buf, n);
        for (i, p) in got.iter().enumerate() {
            assert_eq!(
                *p,
                synthetic_base(&t1, seed, i as u32),
                "G1 base {i} of {n}, {threads:?}"
            );
        }
        let other = synthetic_bases(gpu, &mut q, &t1, seed ^ 1, n, threads, "t").expect("G1");
        let other: Vec<G1Affine> = read_points(gpu, &mut q, &other, n);
        assert!(n < 5 || other != got, "the seed is ignored");
    }
    let buf = synthetic_bases(gpu, &mut q, &t2, seed, 90, Some(4), "t").expect("G2 bases");
    let got: Vec<G2Affine> = read_points(gpu, &mut q, &buf, 90);
    for (i, p) in got.iter().enumerate() {
        assert_eq!(*p, synthetic_base(&t2, seed, i as u32), "G2 base {i}");
    }
    // A whole partition.
    let spec = proofline_workloads::synthetic::SyntheticSpec::scaled(9);
    let partition = spec.partition(rng.next_u64());
    let key = SyntheticKey {
        table_log: 6,
        ..SyntheticKey::new(
            proofline_workloads::synthetic::key_shape(&partition),
            rng.next_u64(),
        )
    };
    let ledger = StageLedger::new();
    let prepared = backend
        .prepare_synthetic(&key, &ledger)
        .expect("prepare_synthetic");
    let mut worker = backend.worker(device, 0).expect("a worker");
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let got = worker
        .accelerate(&prepared, partition.clone(), &mut token.backend_buffers())
        .unwrap_or_else(|b| panic!("synthetic partition handed back: {}", b.error));
    token.release_backend_buffers();
    drop(token);
    let params = Arc::new(key.host_parameters());
    let cpu = CpuBackend
        .prepare(params.clone(), &StageLedger::new())
        .expect("cpu");
    let mut token = ledger.enter(Stage::OnAccelerator, 1, 0);
    let want = backend_cpu::CpuWorker
        .accelerate(&cpu, partition, &mut token.backend_buffers())
        .unwrap_or_else(|b| panic!("the CPU reference failed: {}", b.error));
    token.release_backend_buffers();
    drop(token);
    let same = |a: &G1Projective, b: &G1Projective, what: &str| {
        assert_eq!(a.to_affine(), b.to_affine(), "synthetic partition: {what}")
    };
    // The check a synthetic partition too large for the CPU gets: it passes here, and fails
    // for a sum moved by the generator.
    assert_eq!(
        key.check_sums(&got),
        Ok(()),
        "synthetic partition: known answers"
    );
    let moved = prover_core::PendingProof {
        sums: prover_core::AcceleratorSums {
            a: got.sums.a + G1Projective::generator(),
            ..got.sums
        },
        b_g2: got.b_g2,
        plan: got.plan.clone(),
        witness: got.witness.clone(),
        spent: None,
    };
    assert!(key.check_sums(&moved).is_err(), "synthetic partition: twin");
    same(&got.sums.h, &want.sums.h, "h");
    same(&got.sums.l, &want.sums.l, "l");
    same(&got.sums.a, &want.sums.a, "a");
    same(&got.sums.b_g1, &want.sums.b_g1, "b_g1");
    let b_g2 = backend_cpu::msm::msm_terms(&params.b_g2, &want.plan.b, &want.witness);
    assert_eq!(
        got.b_g2.map(|b| b.to_affine()),
        Some(b_g2.to_affine()),
        "b_g2"
    );
    drop(prepared);
    assert!(ledger.snapshot().is_balanced(), "{}", ledger.snapshot());
}

fn read_points<D: Device, T: gpu_core::device::DeviceCopy + Default>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    buf: &gpu_core::memory::DeviceBuffer<D>,
    n: usize,
) -> Vec<T> {
    let _ = gpu;
    let mut out = vec![T::default(); n];
    q.read(buf.raw(), 0, bytes_of_mut(&mut out)).expect("read");
    out
}
