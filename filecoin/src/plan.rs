//! What a C2 needs before it runs: for a sector size and seal proof variant, one partition's
//! host buffers by the ledger's kinds (from the circuit's real counts: `circuit_size` on
//! filecoin-proofs' blank circuit), the parameter file, the C1 output, and the synthesis workers
//! and byte budget that fit a machine's RAM.

use std::path::PathBuf;

use anyhow::Result;
use prover_core::runtime::engine::PartitionBytes;
use prover_core::synthesis::cpu::{circuit_size, CircuitSize};
use storage_proofs_core::parameter_cache::parameter_id;

use crate::variant::SealSpec;
use crate::{parameter_cache_dir, porep, with_tree};

/// Bytes of an uncompressed G1 point in a parameter file (and in memory).
const G1_BYTES: u64 = 96;
/// Bytes of an uncompressed G2 point.
const G2_BYTES: u64 = 192;

/// A C2's memory plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The seal proof, in words.
    pub proof: String,
    /// Partitions of a C2.
    pub partitions: usize,
    /// One partition's circuit counts.
    pub size: CircuitSize,
    /// One partition's host buffers by ledger kind.
    pub partition: PartitionBytes,
    /// The parameter file under the cache.
    pub params_path: PathBuf,
    /// Its size, when it is there.
    pub params_file_bytes: Option<u64>,
    /// The most the parameters can take, from the counts (h of the domain, l of the aux
    /// variables, a, b_g1 and b_g2 of every variable at most).
    pub params_bound_bytes: u64,
    /// The C1 output's bytes, when given (held while it is parsed, and its vanilla proofs until
    /// every partition is synthesized).
    pub c1_bytes: Option<u64>,
    /// The RAM planned for.
    pub ram_bytes: u64,
    /// Synthesis workers that fit (at most `cores` and the partitions); 0: not one partition
    /// fits.
    pub pw: usize,
    /// The byte budget for those workers' partitions (`--mem-budget`).
    pub budget_bytes: u64,
}

impl Plan {
    /// The parameters' bytes: the file's when it is there, else the bound.
    pub fn params_bytes(&self) -> u64 {
        self.params_file_bytes.unwrap_or(self.params_bound_bytes)
    }
}

/// The counts of one partition of `spec`'s C2 (every partition of a PoRep has the same
/// circuit). Counting a 32 GiB partition's 130 million constraints takes a while.
pub fn partition_size(spec: &SealSpec) -> Result<CircuitSize> {
    let config = spec.config()?;
    with_tree!(spec.shape(), Tree => Ok(circuit_size(porep::blank_circuit::<Tree>(&config)?)?))
}

/// One partition's counts and densities (how many aux variables its A and B use), from
/// filecoin-proofs' blank circuit with every linear combination built: slower than
/// [`partition_size`].
pub fn partition_density(spec: &SealSpec) -> Result<prover_core::CircuitDensity> {
    let config = spec.config()?;
    with_tree!(spec.shape(), Tree => Ok(prover_core::circuit_density(porep::blank_circuit::<Tree>(&config)?)?))
}

/// The plan of `spec`'s C2 on a machine with `ram_bytes` of RAM and `cores` cores, with a C1
/// output of `c1_bytes` when known.
pub fn porep_plan(
    spec: &SealSpec,
    ram_bytes: u64,
    cores: usize,
    c1_bytes: Option<u64>,
) -> Result<Plan> {
    let config = spec.config()?;
    let size = partition_size(spec)?;
    let partition = size.partition_bytes();
    let id = with_tree!(spec.shape(), Tree => porep::cache_id::<Tree>(&config)?);
    let params_path = parameter_cache_dir().join(parameter_id(&id));
    let params_file_bytes = std::fs::metadata(&params_path).ok().map(|m| m.len());
    let variables = (size.aux + size.inputs) as u64;
    let params_bound_bytes = (size.domain_size() as u64 - 1 + size.aux as u64 + 2 * variables)
        * G1_BYTES
        + variables * G2_BYTES;
    let partitions = usize::from(config.partitions);
    let mut plan = Plan {
        proof: spec.describe(),
        partitions,
        size,
        partition,
        params_path,
        params_file_bytes,
        params_bound_bytes,
        c1_bytes,
        ram_bytes,
        pw: 0,
        budget_bytes: 0,
    };
    let free = ram_bytes
        .saturating_sub(plan.params_bytes())
        .saturating_sub(c1_bytes.unwrap_or(0));
    let per = partition.total().max(1);
    plan.pw = ((free / per) as usize).min(cores.max(1)).min(partitions);
    plan.budget_bytes = plan.pw as u64 * per;
    Ok(plan)
}
