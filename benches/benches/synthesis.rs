//! Synthesis with both synthesizers side by side, in one run: bellpepper's constraint system
//! (`cs`, one thread per partition) and pre-compiled constraints (`pce`: witness-only synthesis
//! and a sparse product over all cores), on the dense circuit at 2^16 and 2^20 and on a 2 KiB
//! PoRep partition (a sector sealed through C1 by filecoin-proofs at the start). Each
//! workload's static memory for `pce` (the recorded matrices) and the bytes of a synthesized
//! partition are printed once.

mod common;

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use filecoin_proofs::SECTOR_SIZE_2_KIB;
use proofline_filecoin::variant::{SealSpec, SealVariant};
use proofline_filecoin::{porep, Tree2KiB};
use proofline_workloads::circuits::DenseCircuit;
use prover_core::bellpepper_core::Circuit;
use prover_core::blstrs::Scalar;
use prover_core::{CpuSynthesizer, PceSynthesizer, Precompiled, Synthesizer};

const INPUTS: usize = 4;

fn both<C: Circuit<Scalar> + Clone>(c: &mut Criterion, workload: &str, circuit: C) {
    let pce = Precompiled::record(circuit.clone()).unwrap();
    let m = pce.matrices();
    let partition = CpuSynthesizer.synthesize(circuit.clone()).unwrap();
    eprintln!(
        "{workload}: {} constraints, {} nonzeros, {} table coefficients; pce static memory \
         {:.1} MiB ({:.1} bytes per nonzero); a synthesized partition {:.1} MiB",
        m.constraints(),
        m.nonzeros(),
        m.table_len(),
        pce.heap_bytes() as f64 / (1 << 20) as f64,
        m.bytes_per_nonzero(),
        partition.heap_bytes() as f64 / (1 << 20) as f64
    );
    let pce = PceSynthesizer::new(Arc::new(pce));
    let mut g = c.benchmark_group(format!("synthesis/{workload}"));
    g.sample_size(10);
    g.bench_function(BenchmarkId::from_parameter("cs"), |b| {
        b.iter(|| CpuSynthesizer.synthesize(circuit.clone()).unwrap())
    });
    g.bench_function(BenchmarkId::from_parameter("pce"), |b| {
        b.iter(|| pce.synthesize(circuit.clone()).unwrap())
    });
    g.finish();
}

fn bench_dense(c: &mut Criterion) {
    for k in [16, 20] {
        let circuit = DenseCircuit::with_domain(k, INPUTS, 1).with_witness(7);
        both(c, &format!("dense-2^{k}"), circuit);
    }
}

fn bench_porep(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let spec = SealSpec::new(SECTOR_SIZE_2_KIB, SealVariant::V1_1, None).unwrap();
    let sealed = porep::seal_c1(&spec, dir.path(), &mut rand::thread_rng()).unwrap();
    let c1 = sealed.c1.as_tree::<Tree2KiB>().unwrap();
    let (circuit, _) = porep::porep_circuits::<Tree2KiB>(&sealed.config().unwrap(), c1)
        .unwrap()
        .remove(0);
    both(c, "porep-2k", circuit);
}

criterion_group! {
    name = synthesis_benches;
    config = common::criterion();
    targets = bench_dense, bench_porep
}
criterion_main!(synthesis_benches);
