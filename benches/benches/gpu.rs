//! The device backends' kernels on their first device: OpenCL (POCL here and in CI; NVIDIA's
//! OpenCL on the GPU machine) and CUDA (the GPU machine). The NTT (forward, natural order, the
//! data and the tables on the device, as sppark-bench times its NTT); the H pipeline on device
//! vectors (`quotient`: a's, b's and c's coset transforms with the element-wise steps, and the
//! inverse coset transform, as the accelerator runs it, less the uploads); G1 and G2 MSMs with the bases
//! resident and dense exponents on the device (what the H MSM runs); and a G1 query MSM with
//! PoRep-like scalars (51% zero, 47% one, 2% dense: the host scan, the uploads, the batch
//! addition and the bucket MSM, as the l/a/b queries run).
//!
//! Sizes: `PROOFLINE_GPU_BENCH=full` takes the GPU machine's (NTT 2^20..2^27, H pipeline 2^24
//! and 2^27, G1 2^16..2^24, G2 2^16..2^24); otherwise small ones. In test mode (`cargo test
//! --benches`) only the smallest of each runs. `PROOFLINE_GPU_BENCH_NTT_SHAPES=10/10,8/9/1` benches
//! the NTT cut in other pass shapes too (largest radix / tile [/ elements a thread], as
//! logarithms: `NttShape::parse`). `PROOFLINE_GPU_BENCH_API=cuda` (or `opencl`) benches one API only. A missing
//! API is skipped with the reason printed (OpenCL fails instead under `CI=true`). Each MSM runs
//! with both MSM kernels (`stock`: `{api}_msm_*`; `sorted`: `{api}_sorted_msm_*`), or the one
//! `PROOFLINE_GPU_BENCH_MSM=stock|sorted` names.
//!
//! What is timed is checked first, at every size and shape (a failed check panics): the NTT's
//! values at random points against direct evaluation of its input, and its inverse transform
//! back to the input; the H pipeline's quotient, of a satisfied system (`c = a b`), against the
//! CPU backend's at the first size, and at every size by the identity `H(r) Z(r) = A(r) B(r) -
//! C(r)` at a random point `r`; each dense MSM against the exact sum over
//! bases of known logarithms, with one exponent changed as its negative twin.

mod common;

use std::time::Duration;

use blstrs::{G1Affine, G1Projective, G2Projective, Scalar};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ff::Field;
use gpu_core::device::{bytes_of_mut, Device};
use gpu_core::memory::DeviceBuffer;
use gpu_core::msm::{dense_msm, query_msm, Bases, DeviceCurve, MsmKernel, Scan};
use gpu_core::ntt::{check_ntt, check_quotient_at, ntt_with, HPipeline, NttShape, NttTables};
use gpu_core::skip::Missing;
use gpu_core::{GpuDevice, Queue};
use proofline_benches::{porep_like_witness, random_scalars, KnownBases};
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::stages::density::ScalarBytes;
use prover_core::stages::plan::{Filter, MsmTerm, ScalarSource};
use prover_core::Domain;
use rand::Rng;

struct Sizes {
    ntt: Vec<u32>,
    quotient: Vec<u32>,
    g1: Vec<u32>,
    g2: Vec<u32>,
}

fn sizes() -> Sizes {
    let full = std::env::var("PROOFLINE_GPU_BENCH").is_ok_and(|v| v == "full");
    let mut s = if full {
        Sizes {
            ntt: vec![20, 22, 24, 27],
            quotient: vec![24, 27],
            g1: vec![16, 18, 20, 22, 24],
            g2: vec![16, 18, 20, 22, 24],
        }
    } else {
        Sizes {
            ntt: vec![10, 12, 14],
            quotient: vec![10, 14],
            g1: vec![8, 10, 12],
            g2: vec![8, 10],
        }
    };
    // `cargo bench` passes --bench; test mode does not: smallest sizes only.
    if !std::env::args().any(|a| a == "--bench") {
        for v in [&mut s.ntt, &mut s.quotient, &mut s.g1, &mut s.g2] {
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

/// `n` random field elements (on every core: 2^27 of them take a while).
fn random_field(n: usize) -> Vec<Scalar> {
    use rayon::prelude::*;
    (0..n)
        .into_par_iter()
        .map_init(rand::thread_rng, |rng, _| Scalar::random(rng))
        .collect()
}

/// The pass shapes to bench: the device's, and those `PROOFLINE_GPU_BENCH_NTT_SHAPES` names.
fn ntt_shapes<D: Device>(gpu: &GpuDevice<D>) -> Vec<NttShape> {
    let mut shapes = vec![NttShape::for_device(gpu)];
    if let Ok(v) = std::env::var("PROOFLINE_GPU_BENCH_NTT_SHAPES") {
        for item in v.split(',').filter(|i| !i.is_empty()) {
            let shape = NttShape::parse(item)
                .unwrap_or_else(|e| panic!("PROOFLINE_GPU_BENCH_NTT_SHAPES: {e}"));
            shapes.push(shape);
        }
    }
    shapes
}

/// A benchmark's name for size 2^k in the `i`-th shape (the first is the device's default).
fn shape_id(k: u32, i: usize, shape: &NttShape) -> String {
    match i {
        0 => format!("{k}"),
        _ => format!(
            "{k}/r{}t{}g{}",
            shape.max_log_radix, shape.log_tile, shape.log_per_thread
        ),
    }
}

fn bench_ntt<D: Device>(c: &mut Criterion, api: &str, gpu: &GpuDevice<D>, sizes: &[u32]) {
    let mut q = gpu.device.queue().expect("a queue");
    let mut g = group(c, format!("{api}_ntt"));
    let shapes = ntt_shapes(gpu);
    let mut rng = rand::thread_rng();
    for &k in sizes {
        let d = Domain::new(k).unwrap();
        let v = random_field(d.size());
        g.throughput(Throughput::Elements(d.size() as u64));
        for (i, shape) in shapes.iter().enumerate() {
            let tables = NttTables::new(gpu, &mut q, k, d.omega, *shape).unwrap();
            // What is timed is checked first: values at random points, and the way back.
            let inverse = NttTables::new(gpu, &mut q, k, d.omega_inv(), *shape).unwrap();
            let spots: Vec<usize> = (0..4).map(|_| rng.gen_range(0..d.size())).collect();
            if let Err(e) = check_ntt(gpu, &mut q, &v, &tables, &inverse, &spots) {
                panic!("{api}: {e}");
            }
            drop(inverse);
            let mut x = gpu.upload(&mut q, &v, "x").unwrap();
            let mut t = gpu.alloc(d.size() as u64 * 32, "t").unwrap();
            g.bench_function(BenchmarkId::from_parameter(shape_id(k, i, shape)), |b| {
                b.iter(|| {
                    ntt_with(gpu, &mut q, &mut x, &mut t, &tables).unwrap();
                    q.synchronize().unwrap();
                })
            });
        }
    }
    g.finish();
}

/// The H pipeline on four device vectors (a, b, c, scratch): a and b random, c their product
/// (a satisfied system, so that the quotient can be checked at a point). Its time does not
/// depend on the values, so every iteration runs on what the last one left; the first run
/// of each size and shape is checked ([`check_quotient`]).
fn bench_quotient<D: Device>(c: &mut Criterion, api: &str, gpu: &GpuDevice<D>, sizes: &[u32]) {
    use rayon::prelude::*;
    let mut q = gpu.device.queue().expect("a queue");
    let mut g = group(c, format!("{api}_quotient"));
    for (s, &k) in sizes.iter().enumerate() {
        let d = Domain::new(k).unwrap();
        let (a, b) = (random_field(d.size()), random_field(d.size()));
        let abc: [Vec<Scalar>; 3] = [
            a.clone(),
            b.clone(),
            a.par_iter().zip(&b).map(|(a, b)| *a * b).collect(),
        ];
        drop((a, b));
        // The CPU reference at the first size only (at 2^27 it takes minutes).
        let reference = (s == 0).then(|| {
            let [a, b, c] = abc.clone();
            backend_cpu::ntt::quotient(a, b, c, &d)
        });
        g.throughput(Throughput::Elements(d.size() as u64));
        for (i, shape) in ntt_shapes(gpu).iter().enumerate() {
            let p = HPipeline::new(gpu, &mut q, &d, *shape).unwrap();
            let [mut x, mut y, mut w] = abc
                .each_ref()
                .map(|v| gpu.upload(&mut q, v, "H input").unwrap());
            let mut t = gpu.alloc(d.size() as u64 * 32, "scratch").unwrap();
            let run = |q: &mut D::Queue, [x, y, w, t]: [&mut DeviceBuffer<D>; 4]| {
                p.coset(gpu, q, x, t).unwrap();
                p.mul_coset(gpu, q, y, t, x).unwrap();
                p.sub_coset_div_z(gpu, q, w, t, x).unwrap();
                p.coefficients(gpu, q, x, t).unwrap();
                q.synchronize().unwrap();
            };
            run(&mut q, [&mut x, &mut y, &mut w, &mut t]);
            let mut h = vec![ScalarBytes::default(); d.size()];
            q.read(x.raw(), 0, bytes_of_mut(&mut h)).unwrap();
            let what = format!("{api} quotient {}", shape_id(k, i, shape));
            check_quotient(&what, &h, &abc, &d, reference.as_deref());
            g.bench_function(BenchmarkId::from_parameter(shape_id(k, i, shape)), |b| {
                b.iter(|| run(&mut q, [&mut x, &mut y, &mut w, &mut t]))
            });
        }
    }
    g.finish();
}

/// Checks the H pipeline's output `h` (canonical exponents, the domain's size, the last
/// unused) for the satisfied system `abc`: its coefficients equal the CPU backend's where
/// `reference` holds them, and `H(r) Z(r) = A(r) B(r) - C(r)` at a random `r`. Panics with
/// `what` and the difference.
fn check_quotient(
    what: &str,
    h: &[ScalarBytes],
    abc: &[Vec<Scalar>; 3],
    d: &Domain,
    reference: Option<&[Scalar]>,
) {
    use rayon::prelude::*;
    let h: Vec<Scalar> = h[..d.size() - 1]
        .par_iter()
        .map(|s| {
            s.to_scalar()
                .unwrap_or_else(|| panic!("{what}: a coefficient is not canonical"))
        })
        .collect();
    if let Some(want) = reference {
        if let Some(j) = (0..h.len()).find(|&j| h[j] != want[j]) {
            panic!("{what}: coefficient {j} is not the CPU backend's");
        }
    }
    let r = Scalar::random(rand::thread_rng());
    let [a, b, c] = abc;
    if let Err(e) = check_quotient_at(&h, [a, b, c], d, r) {
        panic!("{what}: {e}");
    }
}

/// A dense MSM over resident bases, checked at every size first against the exact sum
/// (`known`'s bases have known logarithms), with its negative twin: one exponent changed.
fn bench_dense<D: Device, G, P>(
    c: &mut Criterion,
    name: String,
    gpu: &GpuDevice<D>,
    sizes: &[u32],
    known: &KnownBases<P>,
    kernel: MsmKernel,
) where
    G: DeviceCurve<Projective = P>,
    P: group::Curve<AffineRepr = G> + group::Group<Scalar = Scalar> + Send + Sync + std::fmt::Debug,
    G: Default + Clone + Send + Sync,
{
    let mut q = gpu.device.queue().expect("a queue");
    let bases = &known.points[..];
    let n_max = bases.len();
    let exps = random_scalars(n_max);
    let bases_buf = gpu.upload(&mut q, bases, "bases").unwrap();
    let exps_buf = gpu.upload(&mut q, &exps, "exponents").unwrap();
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let mut g = group(c, name.clone());
    for &k in sizes {
        let n = 1usize << k;
        let got = dense_msm::<D, G>(
            gpu,
            &mut q,
            Bases::Resident(&bases_buf),
            &exps_buf,
            n,
            kernel,
            &mut token.backend_buffers(),
        )
        .unwrap();
        let want = known.msm(&exps[..n]);
        assert_eq!(got, want, "{name} 2^{k}: not the exact sum");
        let mut other = exps[..n].to_vec();
        other[n / 2] = ScalarBytes::from_scalar(&Scalar::ONE);
        assert_ne!(
            known.msm(&other),
            want,
            "{name} 2^{k}: the check cannot fail"
        );
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
    bench_quotient(c, api, gpu, &s.quotient);
    if let Some(&max) = s.g1.iter().max() {
        let g1 = KnownBases::<G1Projective>::new(1 << max);
        for (k, pre) in kernels() {
            bench_dense(c, format!("{api}_{pre}msm_g1"), gpu, &s.g1, &g1, k);
            let name = format!("{api}_{pre}msm_g1_porep_bits");
            bench_bits(c, name, gpu, &s.g1, &g1.points, k);
        }
    }
    if let Some(&max) = s.g2.iter().max() {
        let g2 = KnownBases::<G2Projective>::new(1 << max);
        for (k, pre) in kernels() {
            bench_dense(c, format!("{api}_{pre}msm_g2"), gpu, &s.g2, &g2, k);
        }
    }
}

fn benches(c: &mut Criterion) {
    // The backends' settings (`PROOFLINE_GPU_*`, `PROOFLINE_OPENCL_DEVICE`, the kernel cache).
    let env = |name: &str| std::env::var(name).ok();
    if wanted("opencl") {
        let options = backend_opencl::OpenClOptions::from_lookup(None, env)
            .expect("the benchmark's settings");
        if let Some(b) =
            backend_opencl::open_or_skip(options, Missing::unless_ci(env("CI").as_deref()))
        {
            bench_device(c, "opencl", b.device(0).expect("a device"));
        }
    }
    if wanted("cuda") {
        let gpu = gpu_core::GpuOptions::from_lookup(None, env).expect("the benchmark's settings");
        if let Some(b) = backend_cuda::open_or_skip(backend_cuda::CudaOptions { gpu }) {
            bench_device(c, "cuda", b.device(0).expect("a device"));
        }
    }
}

criterion_group! {
    name = gpu;
    config = common::criterion();
    targets = benches
}
criterion_main!(gpu);
