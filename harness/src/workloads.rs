//! Workloads: the circuits a job's partitions prove.
//!
//! - `dense`: prover-core's chain circuit, the worst case for the MSMs.
//! - `merkle`: Poseidon (neptune 11, arity 2) Merkle inclusion proofs of challenged leaves, depth
//!   [`MERKLE_DEPTH`]; the root of each challenge is public. A C2-like shape: hashes and bits.
//! - `sha256`: bellpepper 0.2's SHA-256 over a random preimage of whole blocks; the digest is
//!   packed into public inputs. A bit-heavy witness like PoRep's.
//!
//! Every partition proves different data: its witness comes from a seed of (job, partition).

use bellpepper::gadgets::multipack;
use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use generic_array::typenum::U2;
use neptune::poseidon::{Poseidon, PoseidonConstants};
use proofline_workloads::circuits::DenseCircuit;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Depth of the `merkle` workload's trees.
pub const MERKLE_DEPTH: usize = 16;
/// Approximate constraints of one Merkle challenge (measured: see the unit test).
const MERKLE_CHALLENGE_CONSTRAINTS: usize = 4_000;
/// Approximate constraints of one SHA-256 compression (measured: see the unit test). The gadget
/// pads, so `blocks` data blocks cost `blocks + 1` compressions.
const SHA256_BLOCK_CONSTRAINTS: usize = 22_500;
const DENSE_INPUTS: usize = 4;
const SHAPE_SEED: u64 = 0x0070_7266_6c6e;

/// The workload kinds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// The dense chain circuit.
    Dense,
    /// Poseidon Merkle inclusion proofs.
    Merkle,
    /// SHA-256 blocks.
    Sha256,
    /// Filecoin PoRep C2 of a 2KiB sector (one partition, 2.7M constraints): real sectors sealed
    /// through C1 by filecoin-proofs.
    #[value(name = "porep-2k")]
    #[serde(rename = "porep-2k")]
    Porep2k,
    /// Filecoin WinningPoSt over a 2KiB sector (one partition).
    #[value(name = "winning-post-2k")]
    #[serde(rename = "winning-post-2k")]
    WinningPost2k,
    /// Filecoin WindowPoSt over a 2KiB sector (one partition).
    #[value(name = "window-post-2k")]
    #[serde(rename = "window-post-2k")]
    WindowPost2k,
}

impl Workload {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Dense => "dense",
            Workload::Merkle => "merkle",
            Workload::Sha256 => "sha256",
            Workload::Porep2k => "porep-2k",
            Workload::WinningPost2k => "winning-post-2k",
            Workload::WindowPost2k => "window-post-2k",
        }
    }

    /// Whether this is one of Filecoin's circuits (fixed size and partition count; a job is one
    /// sector's proof).
    pub fn is_filecoin(self) -> bool {
        matches!(
            self,
            Workload::Porep2k | Workload::WinningPost2k | Workload::WindowPost2k
        )
    }
}

/// A workload at a size: what every partition of every job proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadSpec {
    /// The kind.
    pub kind: Workload,
    /// About `2^log2` constraints per partition.
    pub log2: u32,
}

impl WorkloadSpec {
    /// Merkle challenges or SHA-256 blocks per partition (1 for dense).
    pub fn units(&self) -> usize {
        let target = 1usize << self.log2;
        match self.kind {
            Workload::Dense => 1,
            Workload::Porep2k | Workload::WinningPost2k | Workload::WindowPost2k => 1,
            Workload::Merkle => (target / MERKLE_CHALLENGE_CONSTRAINTS).max(1),
            Workload::Sha256 => (target / SHA256_BLOCK_CONSTRAINTS).saturating_sub(1).max(1),
        }
    }

    /// A file-name key that changes whenever the circuit's shape does.
    pub fn cache_key(&self) -> String {
        match self.kind {
            Workload::Dense => format!("dense-k{}-i{DENSE_INPUTS}-s{SHAPE_SEED:x}", self.log2),
            Workload::Merkle => format!("merkle-d{MERKLE_DEPTH}-c{}", self.units()),
            Workload::Sha256 => format!("sha256-b{}", self.units()),
            filecoin => filecoin.name().to_string(),
        }
    }

    /// The circuit without witness (for parameter generation); `None` for the Filecoin
    /// workloads, whose circuits come from [`crate::filecoin`].
    pub fn shape(&self) -> Option<WorkloadCircuit> {
        Some(match self.kind {
            Workload::Porep2k | Workload::WinningPost2k | Workload::WindowPost2k => return None,
            Workload::Dense => WorkloadCircuit::Dense(DenseCircuit::with_domain(
                self.log2,
                DENSE_INPUTS,
                SHAPE_SEED,
            )),
            Workload::Merkle => WorkloadCircuit::Merkle(MerkleCircuit {
                challenges: vec![None; self.units()],
            }),
            Workload::Sha256 => WorkloadCircuit::Sha256(Sha256Circuit {
                blocks: self.units(),
                preimage: None,
            }),
        })
    }

    /// Partition `partition` of job `job`: its circuit and its public inputs (`None` for the
    /// Filecoin workloads, whose jobs are sealed sectors: [`crate::filecoin::jobs`]).
    pub fn partition(
        &self,
        job: usize,
        partition: usize,
    ) -> Option<(WorkloadCircuit, Vec<Scalar>)> {
        let seed = ((job as u64) << 32) | partition as u64;
        Some(match self.shape()? {
            WorkloadCircuit::Dense(c) => {
                let c = c.with_witness(seed.wrapping_add(1));
                let inputs = c.public_inputs();
                (WorkloadCircuit::Dense(c), inputs)
            }
            WorkloadCircuit::Merkle(_) => {
                let c = MerkleCircuit::random(self.units(), seed);
                let inputs = c.roots();
                (WorkloadCircuit::Merkle(c), inputs)
            }
            WorkloadCircuit::Sha256(_) => {
                let mut rng = ChaCha20Rng::seed_from_u64(seed);
                let mut preimage = vec![0u8; self.units() * 64];
                rng.fill_bytes(&mut preimage);
                let c = Sha256Circuit {
                    blocks: self.units(),
                    preimage: Some(preimage),
                };
                let inputs = c.public_inputs();
                (WorkloadCircuit::Sha256(c), inputs)
            }
            WorkloadCircuit::Porep(_) | WorkloadCircuit::Post(_) | WorkloadCircuit::Update(_) => {
                return None
            }
        })
    }
}

/// A circuit of any workload.
#[derive(Clone)]
pub enum WorkloadCircuit {
    /// `dense`.
    Dense(DenseCircuit),
    /// `merkle`.
    Merkle(MerkleCircuit),
    /// `sha256`.
    Sha256(Sha256Circuit),
    /// `porep-2k`.
    Porep(Box<proofline_filecoin::porep::AnyPorepCircuit>),
    /// A SnapDeals update partition (`snap-prove`).
    Update(Box<proofline_filecoin::snap::AnyUpdateCircuit>),
    /// `winning-post-2k` and `window-post-2k`.
    Post(Box<proofline_filecoin::PostCircuit<proofline_filecoin::Tree2KiB>>),
}

impl Circuit<Scalar> for WorkloadCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            WorkloadCircuit::Dense(c) => c.synthesize(cs),
            WorkloadCircuit::Merkle(c) => c.synthesize(cs),
            WorkloadCircuit::Sha256(c) => c.synthesize(cs),
            WorkloadCircuit::Porep(c) => c.synthesize(cs),
            WorkloadCircuit::Post(c) => c.synthesize(cs),
            WorkloadCircuit::Update(c) => c.synthesize(cs),
        }
    }
}

/// One challenged leaf: its value, its index bits (leaf to root) and its siblings.
#[derive(Debug, Clone)]
pub struct Challenge {
    leaf: Scalar,
    bits: Vec<bool>,
    siblings: Vec<Scalar>,
}

fn hash2(a: Scalar, b: Scalar, constants: &PoseidonConstants<Scalar, U2>) -> Scalar {
    Poseidon::new_with_preimage(&[a, b], constants).hash()
}

/// Poseidon Merkle inclusion proofs; the roots are the public inputs.
#[derive(Debug, Clone)]
pub struct MerkleCircuit {
    challenges: Vec<Option<Challenge>>,
}

impl MerkleCircuit {
    /// `n` random challenges from `seed`.
    pub fn random(n: usize, seed: u64) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let challenges = (0..n)
            .map(|_| {
                let index = rng.next_u64();
                Some(Challenge {
                    leaf: Scalar::random(&mut rng),
                    bits: (0..MERKLE_DEPTH).map(|i| index >> i & 1 == 1).collect(),
                    siblings: (0..MERKLE_DEPTH)
                        .map(|_| Scalar::random(&mut rng))
                        .collect(),
                })
            })
            .collect();
        MerkleCircuit { challenges }
    }

    /// The root of each challenge, computed natively.
    pub fn roots(&self) -> Vec<Scalar> {
        let constants = PoseidonConstants::<Scalar, U2>::new();
        self.challenges
            .iter()
            .map(|c| {
                let c = c.as_ref().expect("a witness");
                c.bits
                    .iter()
                    .zip(&c.siblings)
                    .fold(c.leaf, |node, (bit, sib)| {
                        if *bit {
                            hash2(*sib, node, &constants)
                        } else {
                            hash2(node, *sib, &constants)
                        }
                    })
            })
            .collect()
    }
}

impl Circuit<Scalar> for MerkleCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let constants = PoseidonConstants::<Scalar, U2>::new();
        let missing = || SynthesisError::AssignmentMissing;
        for (ci, c) in self.challenges.iter().enumerate() {
            let mut cs = cs.namespace(|| format!("challenge {ci}"));
            let mut node = AllocatedNum::alloc(cs.namespace(|| "leaf"), || {
                c.as_ref().map(|c| c.leaf).ok_or_else(missing)
            })?;
            for level in 0..MERKLE_DEPTH {
                let mut cs = cs.namespace(|| format!("level {level}"));
                let bit = Boolean::from(AllocatedBit::alloc(
                    cs.namespace(|| "bit"),
                    c.as_ref().map(|c| c.bits[level]),
                )?);
                let sibling = AllocatedNum::alloc(cs.namespace(|| "sibling"), || {
                    c.as_ref().map(|c| c.siblings[level]).ok_or_else(missing)
                })?;
                // bit = 1: the node is the right child.
                let (left, right) = AllocatedNum::conditionally_reverse(
                    cs.namespace(|| "order"),
                    &node,
                    &sibling,
                    &bit,
                )?;
                node = neptune::circuit2::poseidon_hash_allocated(
                    cs.namespace(|| "hash"),
                    vec![left, right],
                    &constants,
                )?;
            }
            node.inputize(cs.namespace(|| "root"))?;
        }
        Ok(())
    }
}

/// SHA-256 of `blocks * 64` bytes (whole blocks, no padding block); the digest is public.
#[derive(Debug, Clone)]
pub struct Sha256Circuit {
    blocks: usize,
    preimage: Option<Vec<u8>>,
}

impl Sha256Circuit {
    /// The digest packed into field elements as the circuit exposes it.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        use sha2::Digest;
        let preimage = self.preimage.as_ref().expect("a witness");
        // bellpepper's sha256 gadget pads like SHA-256 proper.
        let digest = sha2::Sha256::digest(preimage);
        multipack::compute_multipacking(&multipack::bytes_to_bits(&digest))
    }
}

impl Circuit<Scalar> for Sha256Circuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let bits: Vec<Option<bool>> = match &self.preimage {
            Some(p) => multipack::bytes_to_bits(p).into_iter().map(Some).collect(),
            None => vec![None; self.blocks * 512],
        };
        let input = bits
            .into_iter()
            .enumerate()
            .map(|(i, b)| {
                AllocatedBit::alloc(cs.namespace(|| format!("preimage bit {i}")), b)
                    .map(Boolean::from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let digest = bellpepper::gadgets::sha256::sha256(cs.namespace(|| "sha256"), &input)?;
        multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellpepper_core::test_cs::TestConstraintSystem;

    fn check(spec: WorkloadSpec) -> usize {
        let (c, inputs) = spec.partition(1, 2).unwrap();
        let mut cs = TestConstraintSystem::<Scalar>::new();
        c.synthesize(&mut cs).unwrap();
        assert!(
            cs.is_satisfied(),
            "{:?}: {:?}",
            spec,
            cs.which_is_unsatisfied()
        );
        assert!(cs.verify(&inputs), "{spec:?}: public inputs");
        // Negative twin: other inputs do not match.
        let mut wrong = inputs.clone();
        wrong[0] += Scalar::ONE;
        assert!(!cs.verify(&wrong));
        cs.num_constraints()
    }

    #[test]
    fn workloads_are_satisfied_and_expose_their_inputs() {
        let dense = check(WorkloadSpec {
            kind: Workload::Dense,
            log2: 10,
        });
        assert_eq!(dense + DENSE_INPUTS + 1, 1 << 10);
        let merkle = check(WorkloadSpec {
            kind: Workload::Merkle,
            log2: 13,
        });
        let per_challenge = merkle / 2;
        assert!(
            (MERKLE_CHALLENGE_CONSTRAINTS * 3 / 4..MERKLE_CHALLENGE_CONSTRAINTS * 5 / 4)
                .contains(&per_challenge),
            "merkle challenge: {per_challenge} constraints"
        );
        let spec = WorkloadSpec {
            kind: Workload::Sha256,
            log2: 16,
        };
        let per_compression = check(spec) / (spec.units() + 1);
        assert!(
            (SHA256_BLOCK_CONSTRAINTS * 3 / 4..SHA256_BLOCK_CONSTRAINTS * 5 / 4)
                .contains(&per_compression),
            "sha256: {per_compression} constraints per compression"
        );
    }

    #[test]
    fn partitions_differ() {
        let spec = WorkloadSpec {
            kind: Workload::Merkle,
            log2: 12,
        };
        assert_ne!(
            spec.partition(0, 0).unwrap().1,
            spec.partition(0, 1).unwrap().1
        );
        assert_ne!(
            spec.partition(0, 0).unwrap().1,
            spec.partition(1, 0).unwrap().1
        );
    }
}
