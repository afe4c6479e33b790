//! Property tests over random satisfiable circuits: proofs verify, and their negative twins (a
//! wrong public input, a flipped proof byte, a proof checked against another circuit's key) are
//! rejected. Case counts are bounded so that CI on 2 cores stays fast.

use blstrs::Scalar;
use ff::Field;
use proofline_tests::{cpu_stages, prepare_cpu, RandomCircuit};
use proptest::prelude::*;
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, verify_proof, verify_proofs_batch, Proof,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn proofs_verify_and_twins_fail(
        inputs in 1usize..4,
        constraints in 1usize..40,
        shape_seed: u64,
        witness_seeds in proptest::collection::vec(any::<u64>(), 1..4),
        flip_at in 0usize..Proof::SIZE,
        flip_bit in 0u8..8,
    ) {
        let shape = RandomCircuit::new(inputs, constraints, shape_seed, 0).shape();
        let params = generate_seeded_parameters(shape, shape_seed).unwrap();
        let pvk = prepare_verifying_key(&params.vk);
        let prepared = prepare_cpu(params);
        let circuits: Vec<_> = witness_seeds
            .iter()
            .map(|w| RandomCircuit::new(inputs, constraints, shape_seed, *w))
            .collect();
        let all_inputs: Vec<Vec<Scalar>> = circuits.iter().map(|c| c.public_inputs()).collect();
        let proofs =
            prover_core::prove(cpu_stages(), &prepared, circuits, &mut rand::thread_rng()).unwrap();

        for (proof, x) in proofs.iter().zip(&all_inputs) {
            prop_assert!(verify_proof(&pvk, proof, x).unwrap());

            // Twin 1: a wrong public input.
            let mut wrong = x.clone();
            wrong[0] += Scalar::ONE;
            prop_assert!(!verify_proof(&pvk, proof, &wrong).unwrap());

            // Twin 2: one flipped bit; the proof either no longer decodes or no longer verifies.
            let mut bytes = proof.to_bytes();
            bytes[flip_at] ^= 1 << flip_bit;
            if let Ok(p) = Proof::from_bytes(&bytes) {
                prop_assert!(!verify_proof(&pvk, &p, x).unwrap());
            }
        }
        prop_assert!(verify_proofs_batch(&pvk, &proofs, &all_inputs, &mut rand::thread_rng()).unwrap());
        // Batch twin: one bad input list sinks the batch.
        let mut bad = all_inputs.clone();
        bad[0][0] = -bad[0][0] - Scalar::ONE;
        prop_assert!(!verify_proofs_batch(&pvk, &proofs, &bad, &mut rand::thread_rng()).unwrap());

        // Twin 3: the proof of another circuit with the same number of inputs.
        let other_shape = RandomCircuit::new(inputs, constraints, shape_seed ^ 0x5a5a, 0).shape();
        let other = generate_seeded_parameters(other_shape, shape_seed ^ 0x5a5a).unwrap();
        let other_pvk = prepare_verifying_key(&other.vk);
        prop_assert!(!verify_proof(&other_pvk, &proofs[0], &all_inputs[0]).unwrap());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Counting a circuit's densities without its witness gives what synthesis marks and what
    /// its parameters' A and B queries hold.
    #[test]
    fn densities_counted_without_a_witness_match_synthesis_and_parameters(
        inputs in 1usize..4,
        constraints in 2usize..40,
        shape_seed: u64,
        witness_seed: u64,
    ) {
        use prover_core::Synthesizer;
        let circuit = RandomCircuit::new(inputs, constraints, shape_seed, witness_seed);
        let counted = prover_core::circuit_density(circuit.shape()).unwrap();
        let synthesized = prover_core::CpuSynthesizer.synthesize(circuit.clone()).unwrap();
        let w = &synthesized.witness;
        prop_assert_eq!(counted.size, prover_core::circuit_size(circuit.shape()).unwrap());
        prop_assert_eq!(counted.a_aux, w.a_aux_density.count_ones());
        prop_assert_eq!(counted.b_aux, w.b_aux_density.count_ones());
        prop_assert_eq!(counted.b_inputs, w.b_input_density.count_ones());
        let params = generate_seeded_parameters(circuit.shape(), shape_seed).unwrap();
        prop_assert_eq!(params.a.len(), counted.size.inputs + counted.a_aux);
        prop_assert_eq!(params.b_g1.len(), counted.b_inputs + counted.b_aux);
    }
}
