//! One worker of a device backend: its device and its own queue, running a partition's whole
//! accelerator stage (the H pipeline, the 0/1 splits and every MSM, b_g2 included), and
//! handing the partition back on any device error (or an injected fault).

use std::sync::Arc;

use blstrs::{G1Affine, G2Affine};
use prover_core::accounting::ledger::{BackendBuffer, BackendBuffers};
use prover_core::{
    AcceleratorSums, AcceleratorWorker, Domain, Error, HandBack, Parameters, PendingProof,
    PreparedParameters, QueryPlan, SynthesizedPartition,
};

use crate::context::GpuDevice;
use crate::device::{Device, DeviceError, DeviceResult, Queue};
use crate::fault::{Faults, FAIL_CALLS_VAR};
use crate::memory::{free_counted, DeviceBuffer};
use crate::msm::{
    dense_msm, query_msm, scanned_msm, Bases, DeviceCurve, DeviceScan, DeviceWitness, MsmKernel,
    Scan, ScanMode,
};
use crate::ntt::{quotient, NttMode, NttShape};
use crate::options::GpuOptions;
use crate::profile::Profile;
use crate::trace::Trace;

use super::resident::{PreparedState, Resident};

/// What every worker of a backend shares: the fault hook, the step times, the trace store, and
/// the choices of kernels and memory use.
pub(super) struct Shared {
    pub(super) faults: Faults,
    pub(super) profile: Profile,
    pub(super) trace: Trace,
    msm: MsmKernel,
    scan: ScanMode,
    beside: bool,
    ntt_shape: Option<NttShape>,
}

impl Shared {
    /// What `options` choose (its memory limit and kernel cache are the backend's own).
    pub(super) fn new(options: GpuOptions) -> Self {
        Shared {
            faults: options.faults,
            profile: Profile::new(options.profile),
            trace: Trace::new(options.trace),
            msm: options.msm,
            scan: options.scan,
            beside: options.beside,
            ntt_shape: options.ntt_shape,
        }
    }
}

/// One worker: its device and its own queue.
pub(super) struct GpuWorker<D: Device> {
    pub(super) backend: &'static str,
    pub(super) label: String,
    pub(super) ordinal: usize,
    pub(super) slot: usize,
    pub(super) gpu: Arc<GpuDevice<D>>,
    pub(super) queue: D::Queue,
    pub(super) shared: Arc<Shared>,
}

/// A query's 0/1 split: scanned on the host, or classified on the device.
enum Lists<D: Device> {
    Host(Scan),
    Device(DeviceScan<D>),
}

impl<D: Device> Lists<D> {
    /// The query's MSM against its bases (`resident` on the device, else `host`).
    fn msm<G: DeviceCurve>(
        &self,
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        (resident, host): (&Option<DeviceBuffer<D>>, &[G]),
        kernel: MsmKernel,
        ledger: &mut BackendBuffers<'_>,
    ) -> DeviceResult<G::Projective> {
        match (self, resident) {
            (Lists::Host(s), _) => {
                query_msm::<D, G>(gpu, q, bases(resident, host), s, kernel, ledger)
            }
            (Lists::Device(s), Some(b)) => scanned_msm::<D, G>(gpu, q, b, s, kernel, ledger),
            (Lists::Device(_), None) => Err(DeviceError::new(
                format!("{} MSM", G::NAME),
                "scalars classified on the device for bases that are not there",
            )),
        }
    }

    /// Frees the lists, then releases their ledger entry (as `free_counted` does for device
    /// buffers: the ledger never counts less than is held).
    fn release(self, ledger: &mut BackendBuffers<'_>) {
        match self {
            Lists::Host(scan) => {
                let bytes = scan.heap_bytes();
                drop(scan);
                ledger.release_one(BackendBuffer::HostTemp, bytes);
            }
            Lists::Device(scan) => scan.release(ledger),
        }
    }
}

fn bases<'a, D: Device, G>(
    resident: &'a Option<DeviceBuffer<D>>,
    host: &'a [G],
) -> Bases<'a, D, G> {
    match resident {
        Some(buf) => Bases::Resident(buf),
        None => Bases::Streamed(host),
    }
}

impl<D: Device> GpuWorker<D> {
    fn run(
        &mut self,
        resident: &Resident<D>,
        params: &Parameters,
        partition: &SynthesizedPartition,
        plan: &QueryPlan,
        domain: &Domain,
        ledger: &mut BackendBuffers<'_>,
    ) -> DeviceResult<(AcceleratorSums, blstrs::G2Projective)> {
        let gpu = &*self.gpu;
        let q = &mut self.queue;
        let n = domain.size();
        let w = &partition.witness;
        let shared = &*self.shared;
        let beside = shared.beside && q.copies_beside();
        // The 0/1 split on the device when every query's bases are resident and the witness
        // fits beside them; on the host otherwise.
        let all_resident = [&resident.l, &resident.a, &resident.b_g1, &resident.b_g2]
            .iter()
            .all(|b| b.is_some());
        let on_device =
            shared.scan == ScanMode::Device && all_resident && DeviceWitness::fits(gpu, w);
        // Where the queue copies beside its kernels and the H pipeline still gets its four
        // vectors, the witness's buffers are made first and filled beside the H pipeline's
        // kernels (made later, their allocation would order the copy after those kernels).
        let early = on_device
            && beside
            && NttMode::choose(
                n,
                gpu.gauge
                    .available()
                    .saturating_sub(DeviceWitness::<D>::bytes(w)),
                true,
            ) == Some(NttMode::Ahead);
        let made = if early {
            Some(DeviceWitness::allocate(gpu, q, w, ledger)?)
        } else {
            None
        };
        let mode = NttMode::choose(n, gpu.gauge.available(), beside).ok_or_else(|| {
            DeviceError::new(
                "H",
                format!(
                    "a domain of 2^{} needs {} on the device, {} is left under its limit",
                    domain.log2,
                    prover_core::units::human_bytes(2 * n as u64 * 32),
                    prover_core::units::human_bytes(gpu.gauge.available())
                ),
            )
        })?;
        let staging = q.staging_bytes();
        if staging > 0 {
            ledger.register(BackendBuffer::PinnedStaging, staging);
        }
        let e = &partition.evaluations;
        let p = &shared.profile;
        let msm = shared.msm;
        let exps = p.step("h_ntt", q, |q| {
            let shape = shared
                .ntt_shape
                .unwrap_or_else(|| NttShape::for_device(gpu));
            quotient(gpu, q, [&e.a, &e.b, &e.c], domain, mode, shape, ledger)
        })?;
        let dw = match made {
            Some(dw) => Some(p.step("witness_upload", q, |q| dw.fill(q, w, true).map(|()| dw))?),
            None => None,
        };
        let h = p.step("msm_h", q, |q| {
            dense_msm::<D, G1Affine>(
                gpu,
                q,
                bases(&resident.h, &params.h),
                &exps,
                plan.h.len(),
                msm,
                ledger,
            )
        })?;
        free_counted(ledger, BackendBuffer::DeviceAbc, [exps]);
        let dw = match dw {
            Some(dw) => Some(dw),
            None if on_device => Some(p.step("witness_upload", q, |q| {
                DeviceWitness::upload(gpu, q, w, ledger)
            })?),
            None => None,
        };
        let mut scan_seconds = 0.0;
        let mut scan =
            |terms: &[&prover_core::MsmTerm], q: &mut D::Queue, ledger: &mut BackendBuffers<'_>| {
                if let Some(dw) = &dw {
                    let terms = terms.iter().copied();
                    return p
                        .step("device_scan", q, |q| {
                            DeviceScan::new(gpu, q, terms, w, dw, ledger)
                        })
                        .map(Lists::Device);
                }
                let t = std::time::Instant::now();
                let scan = Scan::new(terms.iter().copied(), w)?;
                ledger.register(BackendBuffer::HostTemp, scan.heap_bytes());
                scan_seconds += t.elapsed().as_secs_f64();
                Ok::<_, DeviceError>(Lists::Host(scan))
            };
        let s = scan(&[&plan.l], q, ledger)?;
        let l = p.step("msm_l", q, |q| {
            s.msm::<G1Affine>(gpu, q, (&resident.l, &params.l), msm, ledger)
        })?;
        s.release(ledger);
        let s = scan(&[&plan.a[0], &plan.a[1]], q, ledger)?;
        let a = p.step("msm_a", q, |q| {
            s.msm::<G1Affine>(gpu, q, (&resident.a, &params.a), msm, ledger)
        })?;
        s.release(ledger);
        // The G2 B query has the G1 one's layout: one scan for both.
        let s = scan(&[&plan.b[0], &plan.b[1]], q, ledger)?;
        let b_g1 = p.step("msm_b_g1", q, |q| {
            s.msm::<G1Affine>(gpu, q, (&resident.b_g1, &params.b_g1), msm, ledger)
        })?;
        let b_g2 = p.step("msm_b_g2", q, |q| {
            s.msm::<G2Affine>(gpu, q, (&resident.b_g2, &params.b_g2), msm, ledger)
        })?;
        s.release(ledger);
        if let Some(dw) = dw {
            dw.release(ledger);
        }
        q.synchronize()?;
        if scan_seconds > 0.0 {
            p.record("host_scan", scan_seconds);
        }
        Ok((AcceleratorSums { h, l, a, b_g1 }, b_g2))
    }
}

impl<D: Device> AcceleratorWorker for GpuWorker<D> {
    fn accelerate(
        &mut self,
        prepared: &PreparedParameters,
        partition: SynthesizedPartition,
        buffers: &mut BackendBuffers<'_>,
    ) -> std::result::Result<PendingProof, HandBack> {
        let params = prepared.params();
        let checked = prepared
            .check_backend(self.backend)
            .and_then(|()| prepared.state::<PreparedState<D>>())
            .and_then(|s| {
                s.devices
                    .get(self.ordinal)
                    .map(|r| (r, &s.key))
                    .ok_or_else(|| Error::InvalidConfig {
                        what: "device",
                        detail: format!("parameters were not prepared on {}", self.label),
                    })
            })
            .and_then(|(r, key)| Ok((r, key, QueryPlan::for_key(&partition, key)?)))
            .and_then(|(r, key, plan)| Ok((r, plan, Domain::new(key.domain.trailing_zeros())?)));
        let (resident, plan, domain) = match checked {
            Ok(x) => x,
            Err(error) => {
                return Err(HandBack {
                    partition: Box::new(partition),
                    error,
                })
            }
        };
        let shared = Arc::clone(&self.shared);
        let trace = &shared.trace;
        let fault = shared.faults.next_call().map(|n| {
            DeviceError::new(
                format!("accelerator call {n}"),
                format!("fault injected ({})", FAIL_CALLS_VAR),
            )
        });
        let outcome = match fault {
            Some(e) => Err(e),
            None if trace.enabled() => {
                let number = trace.next_partition();
                let outcome = self.run(resident, params, &partition, &plan, &domain, buffers);
                // The spans of a failed call are what the device did before it failed; a
                // queue that cannot say loses only its trace, never the partition.
                if let Ok(spans) = self.queue.take_spans() {
                    trace.add(self.ordinal, self.slot, number, spans);
                }
                outcome
            }
            None => self.run(resident, params, &partition, &plan, &domain, buffers),
        };
        match outcome {
            // a/b/c go back to the engine, which frees them off this thread.
            Ok((sums, b_g2)) => Ok(PendingProof {
                sums,
                b_g2: Some(b_g2),
                plan,
                witness: partition.witness,
                spent: Some(partition.evaluations),
            }),
            Err(e) => Err(HandBack {
                partition: Box::new(partition),
                error: Error::Backend {
                    backend: self.label.clone(),
                    source: Box::new(e),
                },
            }),
        }
    }
}
