//! NTT and MSM kernels of the CPU backend, 2^12 .. 2^18, with bellperson's CPU multiexp
//! (ec-gpu-gen's `multiexp_cpu`, what bellperson 0.26 runs without a GPU) side by side; and the
//! GPU backends' host scan of a query's scalars (PoRep-like: 51% zero, 47% one), 2^18 .. 2^22.

use std::sync::Arc;

use backend_cpu::msm::msm;
use backend_cpu::ntt::{ntt, Domain};
use blstrs::Scalar;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ff::Field;
use proofline_benches::{g1_bases, g2_bases, random_scalars};

const SIZES: [u32; 4] = [12, 14, 16, 18];

fn bench_ntt(c: &mut Criterion) {
    let mut g = c.benchmark_group("ntt");
    g.sample_size(10);
    let mut rng = rand::thread_rng();
    for k in SIZES {
        let d = Domain::new(k).unwrap();
        let v: Vec<Scalar> = (0..d.size()).map(|_| Scalar::random(&mut rng)).collect();
        g.throughput(Throughput::Elements(d.size() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(k), &v, |b, v| {
            b.iter_batched_ref(
                || v.clone(),
                |w| ntt(w, d.omega),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

fn bench_msm(c: &mut Criterion) {
    let max = 1usize << SIZES[SIZES.len() - 1];
    let scalars = random_scalars(max);
    let g1 = g1_bases(max);
    let g2 = g2_bases(max);
    let pool = ec_gpu_gen::threadpool::Worker::new();
    let mut g = c.benchmark_group("msm_g1");
    g.sample_size(10);
    for k in SIZES {
        let n = 1usize << k;
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new("proofline", k), |b| {
            b.iter(|| msm(&g1[..n], &scalars[..n], None))
        });
        let bases = Arc::new(g1[..n].to_vec());
        let exps = Arc::new(scalars[..n].iter().map(|s| s.0).collect::<Vec<_>>());
        g.bench_function(BenchmarkId::new("bellperson", k), |b| {
            b.iter(|| {
                ec_gpu_gen::multiexp_cpu::multiexp_cpu::<_, _, _, _>(
                    &pool,
                    (bases.clone(), 0),
                    Arc::new(ec_gpu_gen::multiexp_cpu::FullDensity),
                    exps.clone(),
                )
                .wait()
                .unwrap()
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("msm_g2");
    g.sample_size(10);
    for k in SIZES {
        let n = 1usize << k;
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::from_parameter(k), |b| {
            b.iter(|| msm(&g2[..n], &scalars[..n], None))
        });
    }
    g.finish();
}

fn bench_scan(c: &mut Criterion) {
    use gpu_core::msm::Scan;
    use prover_core::plan::{Filter, MsmTerm, ScalarSource};
    let mut g = c.benchmark_group("host_scan_porep");
    g.sample_size(10);
    for k in [18u32, 20, 22] {
        let n = 1usize << k;
        let w = proofline_benches::porep_like_witness(n);
        let term = MsmTerm {
            bases: 0..n,
            source: ScalarSource::Aux,
            filter: Filter::All,
        };
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::from_parameter(k), |b| {
            b.iter(|| Scan::new([&term], &w).unwrap())
        });
    }
    g.finish();
}

criterion_group!(kernels, bench_ntt, bench_msm, bench_scan);
criterion_main!(kernels);
