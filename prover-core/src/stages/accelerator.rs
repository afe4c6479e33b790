//! Stage 2, the accelerator: H through iNTT, coset NTT and coset iNTT, and the raw MSM sums
//! for h, l, a and b_g1 (and b_g2 where the backend can), with the types it takes and hands on.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use blstrs::{G1Projective, G2Projective};

use crate::accounting::ledger::{BackendBuffers, StageLedger};
use crate::error::{Error, Result};
use crate::groth16::params::Parameters;
use crate::stages::plan::QueryPlan;
use crate::stages::{SynthesizedPartition, Witness};

/// The raw MSM sums of the accelerator stage (no randomiser applied yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceleratorSums {
    /// `sum_i h_i * H_i`: the quotient polynomial against the H query.
    pub h: G1Projective,
    /// `sum_j aux_j * L_j`.
    pub l: G1Projective,
    /// `sum_i z_i * A_i` over the A query (inputs and dense aux).
    pub a: G1Projective,
    /// `sum_i z_i * B_i` over the B query in G1.
    pub b_g1: G1Projective,
}

/// The accelerator's output: the raw sums and the witness, which the finalizer still needs.
#[derive(Debug)]
pub struct PendingProof {
    /// The four G1 sums.
    pub sums: AcceleratorSums,
    /// `sum_i z_i * B_i` over the B query in G2, when the accelerator computed it (a device
    /// backend with the b_g2 bases resident); `None` leaves it to the finalizer.
    pub b_g2: Option<G2Projective>,
    /// The partition's query plan (the finalizer's b_g2 MSM follows it).
    pub plan: QueryPlan,
    /// The witness.
    pub witness: Witness,
    /// The partition's a, b and c when the backend gives them back instead of freeing them
    /// itself, so that the engine frees them off the accelerator's thread (at 2^27 they are
    /// 11.6 GiB, and freeing them took 0.55 s: the device would idle that long); the ledger and
    /// the byte budget count them until they are freed. `None`: the backend freed or consumed
    /// them.
    pub spent: Option<crate::stages::Evaluations>,
}

/// A partition handed back untouched by a failing accelerator, with the reason, so that the
/// caller can run it elsewhere instead of losing it.
pub struct HandBack {
    /// The partition, exactly as it was given (boxed: this is the rare path).
    pub partition: Box<SynthesizedPartition>,
    /// Why the backend failed.
    pub error: Error,
}

impl fmt::Debug for HandBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandBack")
            .field("error", &self.error)
            .field("shape", &self.partition.shape())
            .finish()
    }
}

/// Parameters prepared by a backend: the parameters and whatever per-parameters state the
/// backend keeps (for example bases resident on a device), reused by every partition.
#[derive(Clone)]
pub struct PreparedParameters {
    params: Arc<Parameters>,
    backend: String,
    state: Option<Arc<dyn Any + Send + Sync>>,
}

impl PreparedParameters {
    /// Prepared parameters with backend state.
    pub fn new(
        params: Arc<Parameters>,
        backend: impl Into<String>,
        state: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Self {
        PreparedParameters {
            params,
            backend: backend.into(),
            state,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &Arc<Parameters> {
        &self.params
    }

    /// The name of the backend that prepared them.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// Checks that these parameters were prepared by the backend named `backend`.
    pub fn check_backend(&self, backend: &str) -> Result<()> {
        if self.backend == backend {
            Ok(())
        } else {
            Err(Error::BackendMismatch {
                prepared: self.backend.clone(),
                used: backend.to_string(),
            })
        }
    }

    /// The backend's state, which must be of type `T`: parameters prepared by another backend,
    /// or without state, are an error naming both, never a silent `None`.
    pub fn state<T: Any + Send + Sync>(&self) -> Result<&T> {
        self.state
            .as_deref()
            .and_then(|s| s.downcast_ref())
            .ok_or_else(|| Error::BackendMismatch {
                prepared: self.backend.clone(),
                used: std::any::type_name::<T>().to_string(),
            })
    }
}

impl fmt::Debug for PreparedParameters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedParameters")
            .field("backend", &self.backend)
            .field("domain_size", &self.params.domain_size())
            .field("has_state", &self.state.is_some())
            .finish()
    }
}

/// Stage 2: H through iNTT, coset NTT and coset iNTT; the raw MSM sums for h, l, a and b_g1
/// (and b_g2 where the backend can). A backend has one or more devices; the engine creates one
/// [`AcceleratorWorker`] per worker thread and device, once, and routes each partition to one
/// device for its whole accelerator stage.
pub trait Accelerator: Send + Sync {
    /// A short name for logs and errors (`cpu`, `cuda`, ...); prepared parameters carry it.
    fn name(&self) -> &str;

    /// Whether the backend computes with the host reference arithmetic (the CPU backend): a
    /// proof of its that does not verify points to the parameters or the witness, never to a
    /// device fault. False by default.
    fn is_reference(&self) -> bool {
        false
    }

    /// How many devices the backend drives (ordinals `0..device_count()`).
    fn device_count(&self) -> usize;

    /// A device's name in reports (`cuda:0`).
    fn device_name(&self, device: usize) -> String {
        format!("{}:{device}", self.name())
    }

    /// Per-parameters preparation, done once and reused across partitions and jobs (bases
    /// uploaded to the devices, pinned pools). Per-parameters buffers are registered in
    /// `ledger` as resident entries whose tokens the returned state holds.
    fn prepare(&self, params: Arc<Parameters>, ledger: &StageLedger) -> Result<PreparedParameters>;

    /// The most host bytes the backend registers for one partition during its accelerator
    /// stage (pinned staging, host temporaries: [`crate::accounting::ledger::BackendBuffer`]'s host
    /// kinds), so that the byte budget reserves them with the partition. None by default.
    fn partition_host_bytes(&self, _params: &Parameters) -> u64 {
        0
    }

    /// Where the backend's accelerator time went, step by step, summed over partitions (device
    /// backends under `PROOFLINE_GPU_PROFILE=1`, which waits for the device after each step);
    /// empty when the backend does not profile.
    fn step_times(&self) -> Vec<StepTime> {
        Vec::new()
    }

    /// Per device: the most bytes the backend had allocated at once, and what the driver
    /// reported in use (its baseline when the backend opened, and its peak, read after each
    /// allocation), where the API can tell; empty for backends without device memory.
    fn device_memory(&self) -> Vec<DeviceMemory> {
        Vec::new()
    }

    /// The devices' own timeline (one span per copy and kernel, timed by the device) since the
    /// backend opened, when it was opened with tracing on (device backends:
    /// `PROOFLINE_GPU_TRACE=1` or the harness's `--device-trace`); empty otherwise.
    fn device_trace(&self) -> Vec<crate::accounting::trace::DeviceSpan> {
        Vec::new()
    }

    /// A worker context for `device` (its stream, pinned staging, device scratch), created once
    /// on the thread that will use it; `slot` numbers the workers of one device.
    fn worker(&self, device: usize, slot: usize) -> Result<Box<dyn AcceleratorWorker>>;
}

/// One step of the accelerator stage, summed over partitions.
#[derive(Debug, Clone, PartialEq)]
pub struct StepTime {
    /// The step (`h_ntt`, `msm_l`, ...).
    pub name: String,
    /// How many times it ran.
    pub count: u64,
    /// Seconds, summed.
    pub seconds: f64,
}

/// One device's memory as its backend and its driver saw it (see
/// [`Accelerator::device_memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceMemory {
    /// The device's ordinal.
    pub device: usize,
    /// The most bytes the backend had allocated on it at one moment.
    pub allocated_peak: u64,
    /// Bytes the driver reported in use when the backend opened the device (its context and
    /// kernels, other processes), where the API can tell (CUDA; not OpenCL).
    pub driver_baseline: Option<u64>,
    /// The most bytes the driver reported in use, read after each allocation.
    pub driver_peak: Option<u64>,
}

impl DeviceMemory {
    /// What the driver saw in use at its peak beyond its baseline.
    pub fn driver_above_baseline(&self) -> Option<u64> {
        Some(self.driver_peak?.saturating_sub(self.driver_baseline?))
    }
}

/// One accelerator worker: owns its context, so the hot path takes no lock.
pub trait AcceleratorWorker: Send {
    /// Runs the stage on this worker's device. a/b/c are released when it ends; the backend's
    /// own buffers are registered through `buffers`. On error the partition is handed back
    /// untouched.
    fn accelerate(
        &mut self,
        prepared: &PreparedParameters,
        partition: SynthesizedPartition,
        buffers: &mut BackendBuffers<'_>,
    ) -> Result<PendingProof, HandBack>;
}
