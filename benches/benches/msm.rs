//! CPU MSMs side by side, G1 and G2, 2^14 .. 2^20 (`--bench`; one size in test mode): proofline's
//! batch-affine Pippenger, blst's Pippenger (one call per thread, as the CPU backend ran it
//! before), and bellperson 0.26's CPU multiexp (ec-gpu-gen's `multiexp_cpu`). Random dense
//! scalars, distinct bases with known logarithms: every engine's sum is checked against the
//! exact answer before it is timed.

mod common;

use std::sync::Arc;

use backend_cpu::msm::{msm_with, MsmEngine, MsmGroup};
use blstrs::{G1Projective, G2Projective, Scalar};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use proofline_benches::{random_scalars, KnownBases};

fn sizes() -> Vec<u32> {
    if std::env::args().any(|a| a == "--bench") {
        (14..=20).step_by(2).collect()
    } else {
        vec![14]
    }
}

fn bench_group<G>(c: &mut Criterion, name: &str)
where
    G: Curve + Group<Scalar = Scalar> + Send + Sync,
    G::AffineRepr:
        MsmGroup<Projective = G> + Default + PrimeCurveAffine<Curve = G, Scalar = Scalar>,
{
    let sizes = sizes();
    let max = 1usize << sizes.last().unwrap();
    let scalars = random_scalars(max);
    let bases = KnownBases::<G>::new(max);
    let pool = ec_gpu_gen::threadpool::Worker::new();
    let mut g = c.benchmark_group(name);
    g.sample_size(10);
    for k in sizes {
        let n = 1usize << k;
        let (points, exps) = (&bases.points[..n], &scalars[..n]);
        let want = bases.msm(exps);
        g.throughput(Throughput::Elements(n as u64));
        for (id, engine) in [
            ("proofline", MsmEngine::Proofline),
            ("blst", MsmEngine::Blst),
        ] {
            assert_eq!(msm_with(engine, points, exps, None), want, "{id} 2^{k}");
            g.bench_function(BenchmarkId::new(id, k), |b| {
                b.iter(|| msm_with(engine, points, exps, None))
            });
        }
        let arc_bases = Arc::new(points.to_vec());
        let arc_exps = Arc::new(exps.iter().map(|s| s.0).collect::<Vec<_>>());
        let run = || {
            ec_gpu_gen::multiexp_cpu::multiexp_cpu::<_, _, _, _>(
                &pool,
                (arc_bases.clone(), 0),
                Arc::new(ec_gpu_gen::multiexp_cpu::FullDensity),
                arc_exps.clone(),
            )
            .wait()
            .unwrap()
        };
        assert_eq!(run(), want, "bellperson 2^{k}");
        g.bench_function(BenchmarkId::new("bellperson", k), |b| b.iter(run));
    }
    g.finish();
}

fn bench_msm(c: &mut Criterion) {
    bench_group::<G1Projective>(c, "msm_g1");
    bench_group::<G2Projective>(c, "msm_g2");
}

criterion_group! {
    name = msm;
    config = common::criterion();
    targets = bench_msm
}
criterion_main!(msm);
