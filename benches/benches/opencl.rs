//! The OpenCL backend's kernels on its first device (POCL here and in CI, the H200 through
//! NVIDIA's OpenCL on the GPU machine): the NTT, and G1 and G2 MSMs with the bases resident and
//! the exponents on the device (what the H MSM runs; the sparse queries add an index upload).
//!
//! Sizes: `PROOFLINE_GPU_BENCH=full` takes the GPU machine's (NTT 2^20..2^24, G1 2^16..2^22,
//! G2 2^16..2^20); otherwise small ones for POCL. In test mode (`cargo test --benches`) only
//! the smallest of each runs. Without an OpenCL platform the benchmark says so and does nothing
//! (with `CI=true` it fails).

use backend_opencl::{open_or_skip, OpenClBackend, OpenClOptions};
use blstrs::{G1Affine, G2Affine, Scalar};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ff::Field;
use gpu_core::device::Device;
use gpu_core::msm::{dense_msm, Bases, DeviceCurve};
use gpu_core::ntt::ntt;
use gpu_core::GpuDevice;
use proofline_benches::{g1_bases, g2_bases, random_scalars};
use prover_core::ledger::{Stage, StageLedger};
use prover_core::Domain;

struct Sizes {
    ntt: Vec<u32>,
    g1: Vec<u32>,
    g2: Vec<u32>,
}

fn sizes() -> Sizes {
    let full = std::env::var("PROOFLINE_GPU_BENCH").is_ok_and(|v| v == "full");
    let mut s = if full {
        Sizes {
            ntt: vec![20, 22, 24],
            g1: vec![16, 18, 20, 22],
            g2: vec![16, 18, 20],
        }
    } else {
        Sizes {
            ntt: vec![10, 12, 14],
            g1: vec![8, 10, 12],
            g2: vec![8, 10],
        }
    };
    // `cargo bench` passes --bench; test mode does not: smallest sizes only.
    if !std::env::args().any(|a| a == "--bench") {
        for v in [&mut s.ntt, &mut s.g1, &mut s.g2] {
            v.truncate(1);
        }
    }
    s
}

fn backend() -> Option<OpenClBackend> {
    open_or_skip(OpenClOptions::default())
}

fn bench_ntt(c: &mut Criterion) {
    let Some(b) = backend() else { return };
    let gpu = b.device(0).expect("a device");
    let mut q = gpu.device.queue().expect("a queue");
    let mut g = c.benchmark_group("opencl_ntt");
    g.sample_size(10);
    let mut rng = rand::thread_rng();
    for k in sizes().ntt {
        let d = Domain::new(k).unwrap();
        let v: Vec<Scalar> = (0..d.size()).map(|_| Scalar::random(&mut rng)).collect();
        let mut x = gpu.upload(&mut q, &v, "x").unwrap();
        let mut t = gpu.alloc(d.size() as u64 * 32, "t").unwrap();
        g.throughput(Throughput::Elements(d.size() as u64));
        g.bench_function(BenchmarkId::from_parameter(k), |bch| {
            bch.iter(|| {
                ntt(gpu, &mut q, &mut x, &mut t, k, d.omega).unwrap();
                gpu_core::Queue::synchronize(&mut q).unwrap();
            })
        });
    }
    g.finish();
}

fn bench_curve<G: DeviceCurve>(
    c: &mut Criterion,
    name: &str,
    gpu: &GpuDevice<backend_opencl::OpenClDevice>,
    sizes: &[u32],
    bases: impl Fn(usize) -> Vec<G>,
) {
    let Some(&max) = sizes.iter().max() else {
        return;
    };
    let n_max = 1usize << max;
    let mut q = gpu.device.queue().expect("a queue");
    let all = bases(n_max);
    let exps = random_scalars(n_max);
    let bases_buf = gpu.upload(&mut q, &all, "bases").unwrap();
    let exps_buf = gpu.upload(&mut q, &exps, "exponents").unwrap();
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let mut g = c.benchmark_group(name);
    g.sample_size(10);
    for &k in sizes {
        let n = 1usize << k;
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::from_parameter(k), |bch| {
            bch.iter(|| {
                dense_msm::<_, G>(
                    gpu,
                    &mut q,
                    Bases::Resident(&bases_buf),
                    &exps_buf,
                    n,
                    &mut token.backend_buffers(),
                )
                .unwrap()
            })
        });
    }
    g.finish();
}

fn bench_msm(c: &mut Criterion) {
    let Some(b) = backend() else { return };
    let gpu = b.device(0).expect("a device");
    let s = sizes();
    bench_curve::<G1Affine>(c, "opencl_msm_g1", gpu, &s.g1, g1_bases);
    bench_curve::<G2Affine>(c, "opencl_msm_g2", gpu, &s.g2, g2_bases);
}

criterion_group!(opencl, bench_ntt, bench_msm);
criterion_main!(opencl);
