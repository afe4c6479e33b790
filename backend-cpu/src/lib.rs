//! proofline's CPU backend: the accelerator and finalizer stages on the CPU.
//!
//! - [`ntt`]: a parallel radix-2 NTT over Fr and the H quotient of a partition.
//! - [`msm`]: G1 and G2 MSMs with density filtering and 0/1 skipping, on proofline's
//!   batch-affine Pippenger (blst's kept for comparison),
//!   executing prover-core's query plan.
//!
//! [`CpuBackend`] implements [`Accelerator`] (one device, `cpu:0`, whose workers are stateless)
//! and [`Finalizer`]; it is the default backend, the fallback of the others, and the reference
//! they are checked against.
#![warn(missing_docs)]

pub mod msm;
pub mod ntt;

use std::sync::Arc;

use prover_core::accounting::ledger::{BackendBuffer, BackendBuffers, StageLedger};
use prover_core::stages::density::into_canonical;
use prover_core::{
    assemble, Accelerator, AcceleratorSums, AcceleratorWorker, Domain, Error, Finalizer,
    FinishedPartition, HandBack, Parameters, PendingProof, PreparedParameters, QueryPlan,
    Randomness, Result, SynthesizedPartition,
};

use crate::msm::{msm, msm_terms};
use crate::ntt::quotient;

/// The CPU backend (runs on the global rayon pool, or on whatever pool it is called from).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuBackend;

impl Accelerator for CpuBackend {
    fn name(&self) -> &str {
        "cpu"
    }

    fn is_reference(&self) -> bool {
        true
    }

    fn device_count(&self) -> usize {
        1
    }

    /// The quotient's shared twiddle table (half a domain of scalars), registered with the
    /// growth of a/b/c (which the budget's domain-sized share for a/b/c already holds).
    fn partition_host_bytes(&self, params: &Parameters) -> u64 {
        crate::ntt::Twiddles::bytes(params.domain_size())
    }

    fn prepare(&self, params: Arc<Parameters>, _: &StageLedger) -> Result<PreparedParameters> {
        Ok(PreparedParameters::new(params, "cpu", None))
    }

    fn worker(&self, device: usize, _slot: usize) -> Result<Box<dyn AcceleratorWorker>> {
        if device != 0 {
            return Err(Error::InvalidConfig {
                what: "device",
                detail: format!("the CPU backend has one device, 0, not {device}"),
            });
        }
        Ok(Box::new(CpuWorker))
    }
}

/// A CPU accelerator worker: it holds nothing between partitions.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuWorker;

impl AcceleratorWorker for CpuWorker {
    fn accelerate(
        &mut self,
        prepared: &PreparedParameters,
        partition: SynthesizedPartition,
        buffers: &mut BackendBuffers<'_>,
    ) -> Result<PendingProof, HandBack> {
        let params = prepared.params();
        let checked = prepared
            .check_backend("cpu")
            .and_then(|()| QueryPlan::new(&partition, params))
            .and_then(|plan| Ok((plan, Domain::new(params.domain_size().trailing_zeros())?)));
        let (plan, domain) = match checked {
            Ok(x) => x,
            Err(error) => {
                return Err(HandBack {
                    partition: Box::new(partition),
                    error,
                })
            }
        };
        // Nothing below can fail: the plan checked every size the NTT and MSMs use. The MSMs'
        // pointer arrays live only inside each call and are not registered.
        let SynthesizedPartition {
            evaluations,
            witness,
        } = partition;
        // The quotient grows a, b and c to the domain's size in place (the synthesizer hands
        // them over at their lengths) and shares one twiddle table (half a domain of scalars)
        // among its NTTs: host temporaries of this stage. The budget's share for a/b/c is
        // domain-sized, so it holds the growth; the table is reserved through
        // `partition_host_bytes`.
        let grown = [&evaluations.a, &evaluations.b, &evaluations.c]
            .iter()
            .map(|v| domain.size().saturating_sub(v.capacity()) as u64)
            .sum::<u64>()
            * std::mem::size_of::<blstrs::Scalar>() as u64;
        buffers.register(
            BackendBuffer::HostTemp,
            grown + crate::ntt::Twiddles::bytes(domain.size()),
        );
        let h = into_canonical(quotient(
            evaluations.a,
            evaluations.b,
            evaluations.c,
            &domain,
        ));
        let h_sum = msm(&params.h[plan.h.clone()], &h, None);
        drop(h);
        let sums = AcceleratorSums {
            h: h_sum,
            l: msm_terms(&params.l, [&plan.l], &witness),
            a: msm_terms(&params.a, &plan.a, &witness),
            b_g1: msm_terms(&params.b_g1, &plan.b, &witness),
        };
        // a/b/c became the H vector, already freed.
        Ok(PendingProof {
            sums,
            b_g2: None,
            plan,
            witness,
            spent: None,
        })
    }
}

impl Finalizer for CpuBackend {
    fn name(&self) -> &str {
        "cpu"
    }

    fn finalize(
        &self,
        prepared: &PreparedParameters,
        pending: PendingProof,
        randomness: Randomness,
    ) -> Result<FinishedPartition> {
        let params = prepared.params();
        let b_g2 = match pending.b_g2 {
            Some(sum) => sum,
            None => {
                let end = pending.plan.b[1].bases.end;
                if end != params.b_g2.len() {
                    return Err(Error::ShapeMismatch {
                        what: "B query points in G2",
                        circuit: end,
                        params: params.b_g2.len(),
                    });
                }
                msm_terms(&params.b_g2, &pending.plan.b, &pending.witness)
            }
        };
        let proof = assemble(&params.vk, &pending.sums, &b_g2, randomness)?;
        Ok(FinishedPartition {
            proof,
            remains: pending.witness,
        })
    }
}
