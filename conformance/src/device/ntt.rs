//! The NTT and the H pipeline on a device against the CPU backend, and copies beside the
//! queue's kernels.

use backend_cpu::ntt::{ntt as cpu_ntt, quotient as cpu_quotient};
use blstrs::Scalar;
use ff::{Field, PrimeField};
use gpu_core::context::launch_threads;
use gpu_core::device::{bytes_of_mut, Arg, Device};
use gpu_core::ntt::{
    ntt, ntt_with, quotient, table_bytes_bound, HPipeline, NttMode, NttShape, NttTables,
    MAX_LOG_SINGLE,
};
use gpu_core::{GpuDevice, Queue};
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::Domain;
use rand::RngCore;

use super::msm::bytes;
use super::sizes::SuiteSizes;

pub(super) fn read_scalars<D: Device>(
    q: &mut D::Queue,
    buf: &gpu_core::memory::DeviceBuffer<D>,
    n: usize,
) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; n];
    q.read(buf.raw(), 0, bytes_of_mut(&mut out)).expect("read");
    out
}

fn random_scalars(n: usize, rng: &mut impl rand::RngCore) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

/// The NTT (forward and inverse, sizes 2^0..2^14, the device's pass shape and smaller ones that
/// cut the same sizes into more, narrower passes; and 2^17, whose last pass makes its twiddles
/// from the two-level table while the passes before it read single tables) and the whole H
/// pipeline (both memory modes, inputs shorter than the domain) on `gpu` equal the CPU
/// backend's, on fresh random inputs; a wrong root gives another transform.
pub fn check_ntt_and_quotient<D: Device>(gpu: &GpuDevice<D>, sizes: SuiteSizes) {
    let mut q = gpu.device.queue().unwrap();
    let mut rng = rand::thread_rng();
    let shapes = [
        NttShape::for_device(gpu),
        // Radix 2^3 in tiles of 2^5: one to five columns a tile, passes of 1..3 rounds; each
        // kernel (2, 4 and 8 elements a thread), with passes shorter and longer than a thread's
        // rounds.
        NttShape {
            max_log_radix: 3,
            log_tile: 5,
            log_per_thread: 3,
        },
        NttShape {
            max_log_radix: 5,
            log_tile: 8,
            log_per_thread: 2,
        },
        NttShape {
            max_log_radix: 4,
            log_tile: 6,
            log_per_thread: 1,
        },
        NttShape {
            max_log_radix: 8,
            log_tile: 10,
            log_per_thread: 1,
        },
        // Passes as long as the tile: one column a tile where a pass takes all of it (as the
        // default's passes of 2^9 in tiles of 2^9).
        NttShape {
            max_log_radix: 5,
            log_tile: 5,
            log_per_thread: 2,
        },
    ];
    // 2^17 in passes of 2^3 (and one of 2^2): with single tables up to 2^16 entries the passes
    // after the first read them, the last (2^17) the two-level table; with the default limit
    // every pass after the first reads a single table.
    for (limit, singles) in [(16, 4), (MAX_LOG_SINGLE, 5)] {
        let log = 17;
        let d = Domain::new(log).unwrap();
        let v = random_scalars(d.size(), &mut rng);
        let mut want = v.clone();
        cpu_ntt(&mut want, d.omega);
        let shape = shapes[1];
        let tables = NttTables::with_single_limit(gpu, &mut q, log, d.omega, shape, limit).unwrap();
        assert_eq!(shape.radices(log).len(), 6);
        assert_eq!(
            tables.single_table_passes(),
            singles,
            "single tables up to 2^{limit}"
        );
        let mut x = gpu.upload(&mut q, &v, "x").unwrap();
        let mut t = gpu.alloc(d.size() as u64 * 32, "t").unwrap();
        ntt_with(gpu, &mut q, &mut x, &mut t, &tables).unwrap();
        assert_eq!(
            read_scalars(&mut q, &x, d.size()),
            want,
            "NTT 2^17 {shape:?}, single tables up to 2^{limit}"
        );
    }
    for log in sizes.stages().ntt_logs {
        let d = Domain::new(log).unwrap();
        let n = d.size();
        let v = random_scalars(n, &mut rng);
        for omega in [d.omega, d.omega_inv()] {
            let mut want = v.clone();
            cpu_ntt(&mut want, omega);
            let mut x = gpu.upload(&mut q, &v, "x").unwrap();
            let mut t = gpu.alloc(n as u64 * 32, "t").unwrap();
            ntt(gpu, &mut q, &mut x, &mut t, log, omega).unwrap();
            assert_eq!(read_scalars(&mut q, &x, n), want, "NTT 2^{log}");
            for shape in &shapes[1..] {
                let tables = NttTables::new(gpu, &mut q, log, omega, *shape).unwrap();
                let mut x = gpu.upload(&mut q, &v, "x").unwrap();
                ntt_with(gpu, &mut q, &mut x, &mut t, &tables).unwrap();
                let got = read_scalars(&mut q, &x, n);
                assert_eq!(got, want, "NTT 2^{log}, {shape:?}");
            }
            // Negative twin: the wrong root gives another transform.
            if log > 1 {
                let mut y = gpu.upload(&mut q, &v, "y").unwrap();
                ntt(gpu, &mut q, &mut y, &mut t, log, omega.square()).unwrap();
                assert_ne!(read_scalars(&mut q, &y, n), want);
            }
        }
        // The whole H pipeline (coset NTTs inside), every memory mode (b and c uploaded beside
        // the transforms where the queue can), shorter inputs padded.
        let len = n - n / 3;
        let (a, bb, c) = (
            random_scalars(len, &mut rng),
            random_scalars(len, &mut rng),
            random_scalars(len, &mut rng),
        );
        let want = cpu_quotient(a.clone(), bb.clone(), c.clone(), &d);
        // The memory mode's choice leaves room for the pipeline's tables.
        let tables = HPipeline::new(gpu, &mut q, &d, NttShape::for_device(gpu))
            .unwrap()
            .bytes();
        assert!(
            tables <= table_bytes_bound(log),
            "2^{log}: {tables} B of tables"
        );
        assert!(tables > 0);
        // Each mode with another kernel: the device's default (4 elements a thread), 2 and 8.
        let modes = [
            (NttMode::Ahead, NttShape::for_device(gpu)),
            (NttMode::Resident, shapes[4]),
            (NttMode::Split, shapes[1]),
        ];
        for (mode, shape) in modes {
            let ledger = StageLedger::new();
            let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
            let h = quotient(
                gpu,
                &mut q,
                [&a, &bb, &c],
                &d,
                mode,
                shape,
                &mut token.backend_buffers(),
            )
            .unwrap();
            // The device leaves canonical exponents: compare their bytes with the CPU's.
            let got = read_scalars(&mut q, &h, n);
            let got: Vec<[u8; 32]> = got[..n - 1].iter().map(bytes).collect();
            let want: Vec<[u8; 32]> = want.iter().map(|s| s.to_repr()).collect();
            assert_eq!(got, want, "quotient 2^{log} {mode:?} {shape:?}");
        }
    }
}

/// Copies beside the queue's kernels keep their bytes, and so do the copies after them: a copy
/// beside whose buffer is made after long kernels (so its transfer waits for them) is followed
/// at once by a plain copy and another copy beside, each of more than one staging piece where
/// the backend stages; all three read back exact. Where copies beside are plain writes
/// (OpenCL), the same sequence runs with short kernels.
pub fn check_copies_beside<D: Device>(gpu: &GpuDevice<D>) {
    let mut q = gpu.device.queue().expect("a queue");
    let beside = q.copies_beside();
    let mut rng = rand::thread_rng();
    // 48 MiB each (two staging pieces of the CUDA backend's), drawn before the kernels are
    // queued, so that the copies come while the kernels still run.
    let len = if beside { 48 << 20 } else { 1 << 16 };
    let data: Vec<Vec<u8>> = (0..3)
        .map(|_| {
            let mut v = vec![0u8; len];
            rng.fill_bytes(&mut v);
            v
        })
        .collect();
    assert!(data[0] != data[1] && data[1] != data[2] && data[0] != data[2]);
    // Long kernels (on a device that copies beside): products over 2^24 scalars, repeated
    // (about half a second on an H200).
    let (log, reps) = if beside { (24, 1000) } else { (10, 1) };
    let n = 1usize << log;
    let x = gpu
        .scratch(&mut q, n as u64 * 32, "long kernels")
        .expect("scratch");
    let n32 = Arg::U32(n as u32);
    launch_threads(
        &mut q,
        &gpu.names.fill_zero,
        n,
        &[Arg::Buffer(x.raw()), Arg::U32(0), n32],
    )
    .expect("fill");
    for _ in 0..reps {
        let args = [
            Arg::Buffer(x.raw()),
            Arg::Buffer(x.raw()),
            Arg::U32(n as u32),
        ];
        launch_threads(&mut q, &gpu.names.mul_assign, n, &args).expect("products");
    }
    // Made after the kernels are queued: the first copy beside waits for them.
    let bufs: Vec<_> = (0..3)
        .map(|_| gpu.scratch(&mut q, len as u64, "copies").expect("scratch"))
        .collect();
    q.write_beside(bufs[0].raw(), 0, &data[0])
        .expect("copy beside");
    q.write(bufs[1].raw(), 0, &data[1]).expect("plain copy");
    q.write_beside(bufs[2].raw(), 0, &data[2])
        .expect("copy beside");
    for (i, (buf, want)) in bufs.iter().zip(&data).enumerate() {
        let mut got = vec![0u8; len];
        q.read(buf.raw(), 0, &mut got).expect("read");
        if let Some(at) = (0..len).find(|&j| got[j] != want[j]) {
            panic!("copy {i} of 3 (copies beside the kernels: {beside}): byte {at} differs");
        }
    }
}
