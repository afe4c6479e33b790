//! proofline's CPU backend: the accelerator and finalizer stages on the CPU.
//!
//! - [`ntt`]: a parallel radix-2 NTT over Fr and the H quotient of a partition.
//! - [`msm`]: G1 and G2 MSMs with density filtering and 0/1 skipping, on blst's Pippenger.
//!
//! [`CpuBackend`] implements [`GpuBackend`] and [`Finalizer`]; it is the default backend, the
//! fallback of the others, and the reference they are checked against.
#![warn(missing_docs)]

pub mod msm;
pub mod ntt;

use std::sync::Arc;

use prover_core::density::into_canonical;
use prover_core::{
    assemble, AcceleratorSums, Finalizer, FinishedPartition, GpuBackend, HandBack, Parameters,
    PendingProof, PreparedParameters, Randomness, Result, SynthesizedPartition,
};

use crate::msm::msm;
use crate::ntt::{quotient, Domain};

/// The CPU backend (runs on the global rayon pool, or on whatever pool it is called from).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuBackend;

impl GpuBackend for CpuBackend {
    fn name(&self) -> &str {
        "cpu"
    }

    fn prepare(&self, params: Arc<Parameters>) -> Result<PreparedParameters> {
        Ok(PreparedParameters::new(params, "cpu", None))
    }

    fn accelerate(
        &self,
        prepared: &PreparedParameters,
        partition: SynthesizedPartition,
    ) -> Result<PendingProof, HandBack> {
        let params = prepared.params();
        if let Err(error) = partition.check_shape(params) {
            return Err(HandBack {
                partition: Box::new(partition),
                error,
            });
        }
        // Nothing below can fail: the shape check covers every size the NTT and MSMs use.
        let SynthesizedPartition {
            evaluations,
            witness,
        } = partition;
        let domain = Domain::new(params.domain_size().trailing_zeros());
        let h = into_canonical(quotient(
            evaluations.a,
            evaluations.b,
            evaluations.c,
            &domain,
        ));
        let h_sum = msm(&params.h, &h, None);
        drop(h);
        let l = msm(&params.l, &witness.aux, None);
        let n_in = witness.input.len();
        let a = msm(&params.a[..n_in], &witness.input, None)
            + msm(
                &params.a[n_in..],
                &witness.aux,
                Some(&witness.a_aux_density),
            );
        let b_in = witness.b_input_density.count_ones();
        let b_g1 = msm(
            &params.b_g1[..b_in],
            &witness.input,
            Some(&witness.b_input_density),
        ) + msm(
            &params.b_g1[b_in..],
            &witness.aux,
            Some(&witness.b_aux_density),
        );
        Ok(PendingProof {
            sums: AcceleratorSums {
                h: h_sum,
                l,
                a,
                b_g1,
            },
            witness,
        })
    }
}

impl Finalizer for CpuBackend {
    fn name(&self) -> &str {
        "cpu"
    }

    fn finalize(
        &self,
        params: &Parameters,
        pending: PendingProof,
        randomness: Randomness,
    ) -> Result<FinishedPartition> {
        let w = &pending.witness;
        let b_in = w.b_input_density.count_ones();
        if params.b_g2.len() != b_in + w.b_aux_density.count_ones() {
            return Err(prover_core::Error::ShapeMismatch {
                what: "B query points in G2",
                circuit: b_in + w.b_aux_density.count_ones(),
                params: params.b_g2.len(),
            });
        }
        let b_g2 = msm(&params.b_g2[..b_in], &w.input, Some(&w.b_input_density))
            + msm(&params.b_g2[b_in..], &w.aux, Some(&w.b_aux_density));
        let proof = assemble(&params.vk, &pending.sums, &b_g2, randomness)?;
        Ok(FinishedPartition {
            proof,
            remains: pending.witness,
        })
    }
}
