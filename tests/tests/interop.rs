//! Interoperability with bellperson 0.26: parameters, keys and proofs cross in both directions.

use bellperson::groth16 as bp;
use blstrs::{Bls12, Scalar};
use ff::Field;
use proofline_tests::{cpu_stages, prepare_cpu, prove_one, RandomCircuit};
use prover_core::{
    generate_random_parameters, prepare_verifying_key, prove_with_randomness, verify_proof,
    Parameters, PointCheck, Proof, Randomness,
};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn circuit(seed: u64) -> RandomCircuit {
    RandomCircuit::new(3, 40, 7, seed)
}

fn bp_params_bytes(p: &bp::Parameters<Bls12>) -> Vec<u8> {
    let mut v = Vec::new();
    p.write(&mut v).unwrap();
    v
}

fn to_bp_proof(p: &Proof) -> bp::Proof<Bls12> {
    bp::Proof::read(&p.to_bytes()[..]).unwrap()
}

fn from_bp_proof(p: &bp::Proof<Bls12>) -> Proof {
    let mut v = Vec::new();
    p.write(&mut v).unwrap();
    Proof::from_bytes(&v).unwrap()
}

fn bp_verify(params: &bp::Parameters<Bls12>, proof: &bp::Proof<Bls12>, inputs: &[Scalar]) -> bool {
    let pvk = bp::prepare_verifying_key(&params.vk);
    bp::verify_proof(&pvk, proof, inputs).unwrap()
}

#[test]
fn same_rng_gives_the_same_parameters_as_bellperson() {
    let seed = rand::thread_rng().next_u64();
    let c = circuit(1).shape();
    let ours =
        generate_random_parameters(c.clone(), &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
    let theirs = bp::generate_random_parameters::<Bls12, _, _>(
        c.clone(),
        &mut ChaCha20Rng::seed_from_u64(seed),
    )
    .unwrap();
    let mut ours_bytes = Vec::new();
    ours.write(&mut ours_bytes).unwrap();
    assert_eq!(ours_bytes, bp_params_bytes(&theirs), "seed {seed}");
    // Negative twin: another seed gives other parameters.
    let other = generate_random_parameters(c, &mut ChaCha20Rng::seed_from_u64(seed ^ 1)).unwrap();
    assert_ne!(other, ours);
}

#[test]
fn bellperson_verifies_our_proofs() {
    let mut rng = rand::thread_rng();
    let c = circuit(rng.next_u64());
    let params = generate_random_parameters(c.shape(), &mut rng).unwrap();
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    let bp_params = bp::Parameters::<Bls12>::read(&bytes[..], true).unwrap();
    let proof = prove_one(&prepare_cpu(params), c.clone()).unwrap();
    let inputs = c.public_inputs();
    assert!(bp_verify(&bp_params, &to_bp_proof(&proof), &inputs));
    // Negative twin: a wrong public input is rejected by bellperson.
    let mut wrong = inputs.clone();
    wrong[0] += Scalar::ONE;
    assert!(!bp_verify(&bp_params, &to_bp_proof(&proof), &wrong));
}

#[test]
fn we_verify_bellpersons_proofs() {
    let mut rng = rand::thread_rng();
    let c = circuit(rng.next_u64());
    let bp_params = bp::generate_random_parameters::<Bls12, _, _>(c.shape(), &mut rng).unwrap();
    let bp_proof = bp::create_random_proof(c.clone(), &bp_params, &mut rng).unwrap();
    let params = Parameters::from_bytes(&bp_params_bytes(&bp_params), PointCheck::Checked).unwrap();
    let pvk = prepare_verifying_key(&params.vk);
    let inputs = c.public_inputs();
    assert!(verify_proof(&pvk, &from_bp_proof(&bp_proof), &inputs).unwrap());
    let mut wrong = inputs.clone();
    wrong[2] = Scalar::ZERO;
    assert!(!verify_proof(&pvk, &from_bp_proof(&bp_proof), &wrong).unwrap());
}

#[test]
fn parameters_cross_in_both_directions() {
    let mut rng = rand::thread_rng();
    let c = circuit(rng.next_u64());
    let inputs = c.public_inputs();

    // bellperson writes, proofline reads and proves, bellperson verifies.
    let bp_params = bp::generate_random_parameters::<Bls12, _, _>(c.shape(), &mut rng).unwrap();
    let dir = std::env::temp_dir().join(format!("proofline-interop-{}", rng.next_u64()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bp.params");
    std::fs::write(&path, bp_params_bytes(&bp_params)).unwrap();
    let ours = Parameters::read_mmap(&path, PointCheck::Checked).unwrap();
    let proof = prove_one(&prepare_cpu(ours), c.clone()).unwrap();
    assert!(bp_verify(&bp_params, &to_bp_proof(&proof), &inputs));

    // proofline writes, bellperson reads and proves, proofline verifies.
    let ours = generate_random_parameters(c.shape(), &mut rng).unwrap();
    let path2 = dir.join("ours.params");
    ours.write_file(&path2).unwrap();
    let bp_read = bp::Parameters::<Bls12>::read(&std::fs::read(&path2).unwrap()[..], true).unwrap();
    let bp_proof = bp::create_random_proof(c.clone(), &bp_read, &mut rng).unwrap();
    let pvk = prepare_verifying_key(&ours.vk);
    assert!(verify_proof(&pvk, &from_bp_proof(&bp_proof), &inputs).unwrap());

    // Negative twin: each side's proof fails against the other parameter set's key.
    assert!(!verify_proof(
        &pvk,
        &from_bp_proof(&bp::create_random_proof(c.clone(), &bp_params, &mut rng).unwrap()),
        &inputs
    )
    .unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fixed_randomness_gives_bellpersons_bytes() {
    let mut rng = rand::thread_rng();
    let c = circuit(rng.next_u64());
    let bp_params = bp::generate_random_parameters::<Bls12, _, _>(c.shape(), &mut rng).unwrap();
    let params =
        Parameters::from_bytes(&bp_params_bytes(&bp_params), PointCheck::Unchecked).unwrap();
    let rs = Randomness::random(&mut rng);
    let theirs = bp::create_proof(c.clone(), &bp_params, rs.r, rs.s).unwrap();
    let prepared = prepare_cpu(params);
    let ours = prove_with_randomness(cpu_stages(), &prepared, vec![c.clone()], &[rs]).unwrap();
    assert_eq!(ours[0].to_bytes(), from_bp_proof(&theirs).to_bytes());
    // Negative twin: another r gives other bytes.
    let other = Randomness {
        r: rs.r + Scalar::ONE,
        s: rs.s,
    };
    let ours2 = prove_with_randomness(cpu_stages(), &prepared, vec![c], &[other]).unwrap();
    assert_ne!(ours2[0].to_bytes(), ours[0].to_bytes());
}
