//! The CPU backend's NTT, 2^12 .. 2^18, and the GPU backends' host scan of a query's scalars
//! (PoRep-like: 51% zero, 47% one), 2^18 .. 2^22. The MSMs are in `msm.rs`.

mod common;

use backend_cpu::ntt::{ntt, Domain};
use blstrs::Scalar;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ff::Field;

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

fn bench_scan(c: &mut Criterion) {
    use gpu_core::msm::Scan;
    use prover_core::stages::plan::{Filter, MsmTerm, ScalarSource};
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

criterion_group! {
    name = kernels;
    config = common::criterion();
    targets = bench_ntt, bench_scan
}
criterion_main!(kernels);
