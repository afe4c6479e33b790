//! The device backends' kernels on their first device: OpenCL (POCL here and in CI; NVIDIA's
//! OpenCL on the GPU machine) and CUDA (the GPU machine). The NTT; G1 and G2 MSMs with the bases
//! resident and dense exponents on the device (what the H MSM runs); and a G1 query MSM with
//! PoRep-like scalars (51% zero, 47% one, 2% dense: the host scan, the uploads, the batch
//! addition and the bucket MSM, as the l/a/b queries run).
//!
//! Sizes: `PROOFLINE_GPU_BENCH=full` takes the GPU machine's (NTT 2^20..2^24, G1 2^16..2^24,
//! G2 2^16..2^22); otherwise small ones. In test mode (`cargo test --benches`) only the smallest
//! of each runs. `PROOFLINE_GPU_BENCH_API=cuda` (or `opencl`) benches one API only. A missing
//! API is skipped with the reason printed (OpenCL fails instead under `CI=true`). Each MSM runs
//! with both MSM kernels (`stock`: `{api}_msm_*`; `sorted`: `{api}_sorted_msm_*`), or the one
//! `PROOFLINE_GPU_BENCH_MSM=stock|sorted` names.

use std::time::Duration;

use blstrs::{G1Affine, G2Affine, Scalar};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ff::Field;
use gpu_core::device::Device;
use gpu_core::msm::{dense_msm, query_msm, Bases, DeviceCurve, MsmKernel, Scan};
use gpu_core::ntt::ntt;
use gpu_core::{GpuDevice, Queue};
use proofline_benches::{g1_bases, g2_bases, porep_like_witness, random_scalars};
use prover_core::ledger::{Stage, StageLedger};
use prover_core::plan::{Filter, MsmTerm, ScalarSource};
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
            g1: vec![16, 18, 20, 22, 24],
            g2: vec![16, 18, 20, 22],
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

fn wanted(api: &str) -> bool {
    std::env::var("PROOFLINE_GPU_BENCH_API").map_or(true, |v| v == api)
}

/// The MSM kernels to bench, with their names' prefix.
fn kernels() -> Vec<(MsmKernel, &'static str)> {
    let all = [(MsmKernel::Stock, ""), (MsmKernel::Sorted, "sorted_")];
    match std::env::var("PROOFLINE_GPU_BENCH_MSM") {
        Ok(v) => {
            let k = MsmKernel::parse(&v).unwrap_or_else(|e| panic!("PROOFLINE_GPU_BENCH_MSM: {e}"));
            all.into_iter().filter(|(x, _)| *x == k).collect()
        }
        Err(_) => all.to_vec(),
    }
}

fn group<'a>(
    c: &'a mut Criterion,
    name: String,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g
}

fn bench_ntt<D: Device>(c: &mut Criterion, api: &str, gpu: &GpuDevice<D>, sizes: &[u32]) {
    let mut q = gpu.device.queue().expect("a queue");
    let mut g = group(c, format!("{api}_ntt"));
    let mut rng = rand::thread_rng();
    for &k in sizes {
        let d = Domain::new(k).unwrap();
        let v: Vec<Scalar> = (0..d.size()).map(|_| Scalar::random(&mut rng)).collect();
        let mut x = gpu.upload(&mut q, &v, "x").unwrap();
        let mut t = gpu.alloc(d.size() as u64 * 32, "t").unwrap();
        g.throughput(Throughput::Elements(d.size() as u64));
        g.bench_function(BenchmarkId::from_parameter(k), |b| {
            b.iter(|| {
                ntt(gpu, &mut q, &mut x, &mut t, k, d.omega).unwrap();
                q.synchronize().unwrap();
            })
        });
    }
    g.finish();
}

fn bench_dense<D: Device, G: DeviceCurve>(
    c: &mut Criterion,
    name: String,
    gpu: &GpuDevice<D>,
    sizes: &[u32],
    bases: &[G],
    kernel: MsmKernel,
) {
    let mut q = gpu.device.queue().expect("a queue");
    let n_max = bases.len();
    let exps = random_scalars(n_max);
    let bases_buf = gpu.upload(&mut q, bases, "bases").unwrap();
    let exps_buf = gpu.upload(&mut q, &exps, "exponents").unwrap();
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let mut g = group(c, name);
    for &k in sizes {
        let n = 1usize << k;
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::from_parameter(k), |b| {
            b.iter(|| {
                let at = Bases::Resident(&bases_buf);
                dense_msm::<D, G>(
                    gpu,
                    &mut q,
                    at,
                    &exps_buf,
                    n,
                    kernel,
                    &mut token.backend_buffers(),
                )
                .unwrap()
            })
        });
    }
    g.finish();
}

fn bench_bits<D: Device>(
    c: &mut Criterion,
    name: String,
    gpu: &GpuDevice<D>,
    sizes: &[u32],
    bases: &[G1Affine],
    kernel: MsmKernel,
) {
    let mut q = gpu.device.queue().expect("a queue");
    let bases_buf = gpu.upload(&mut q, bases, "bases").unwrap();
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let mut g = group(c, name);
    for &k in sizes {
        let n = 1usize << k;
        let w = porep_like_witness(n);
        let term = MsmTerm {
            bases: 0..n,
            source: ScalarSource::Aux,
            filter: Filter::All,
        };
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::from_parameter(k), |b| {
            b.iter(|| {
                let scan = Scan::new([&term], &w).unwrap();
                let at = Bases::Resident(&bases_buf);
                query_msm::<D, G1Affine>(
                    gpu,
                    &mut q,
                    at,
                    &scan,
                    kernel,
                    &mut token.backend_buffers(),
                )
                .unwrap()
            })
        });
    }
    g.finish();
}

fn bench_device<D: Device>(c: &mut Criterion, api: &str, gpu: &GpuDevice<D>) {
    let s = sizes();
    bench_ntt(c, api, gpu, &s.ntt);
    if let Some(&max) = s.g1.iter().max() {
        let g1 = g1_bases(1 << max);
        for (k, pre) in kernels() {
            bench_dense(c, format!("{api}_{pre}msm_g1"), gpu, &s.g1, &g1, k);
            let name = format!("{api}_{pre}msm_g1_porep_bits");
            bench_bits(c, name, gpu, &s.g1, &g1, k);
        }
    }
    if let Some(&max) = s.g2.iter().max() {
        let g2: Vec<G2Affine> = g2_bases(1 << max);
        for (k, pre) in kernels() {
            bench_dense(c, format!("{api}_{pre}msm_g2"), gpu, &s.g2, &g2, k);
        }
    }
}

fn benches(c: &mut Criterion) {
    if wanted("opencl") {
        let options = backend_opencl::OpenClOptions::default();
        if let Some(b) = backend_opencl::open_or_skip(options) {
            bench_device(c, "opencl", b.device(0).expect("a device"));
        }
    }
    if wanted("cuda") {
        if let Some(b) = backend_cuda::open_or_skip(backend_cuda::CudaOptions::default()) {
            bench_device(c, "cuda", b.device(0).expect("a device"));
        }
    }
}

criterion_group!(gpu, benches);
criterion_main!(gpu);
