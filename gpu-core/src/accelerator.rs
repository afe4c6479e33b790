//! The accelerator stage on any [`Device`]: a [`Accelerator`] whose workers run the H pipeline
//! and every MSM (b_g2 included, so the finalizer only assembles) on their device. The API
//! crates give it their devices; everything above the device trait is here, once.

use std::sync::Arc;

use blstrs::{G1Affine, G2Affine};
use prover_core::accounting::ledger::{
    BackendBuffer, BackendBuffers, ResidentKind, ResidentToken, StageLedger,
};
use prover_core::{
    Accelerator, AcceleratorSums, AcceleratorWorker, Domain, Error, HandBack, KeyShape, Parameters,
    PendingProof, PreparedParameters, QueryPlan, Result, SynthesizedPartition,
};

use crate::classify::{DeviceScan, DeviceWitness, ScanMode};
use crate::context::GpuDevice;
use crate::device::{Device, DeviceCopy, DeviceError, DeviceResult, Queue};
use crate::fault::Faults;
use crate::memory::{driver_in_use, free_counted, DeviceBuffer, MemoryGauge};
use crate::msm::{dense_msm, query_msm, scanned_msm, Bases, DeviceCurve, MsmKernel, Scan};
use crate::ntt::{quotient, NttMode, NttShape};
use crate::profile::Profile;
use crate::source::KernelNames;
use crate::synthetic::{synthetic_bases, Query, SyntheticKey};
use crate::trace::Trace;

/// Options of a device backend.
#[derive(Debug, Default)]
pub struct GpuOptions {
    /// Caps the device memory the backend uses on each device (`--gpu-mem-limit`); `None`: the
    /// device's memory less a tenth for the driver and other processes.
    pub mem_limit: Option<u64>,
    /// Injected faults (a test hook).
    pub faults: Faults,
    /// The MSM kernel (`PROOFLINE_GPU_MSM`).
    pub msm: MsmKernel,
    /// Where the MSMs' 0/1 split runs (`PROOFLINE_GPU_SCAN`).
    pub scan: ScanMode,
    /// Whether the workers trace their queues (`PROOFLINE_GPU_TRACE`, `--device-trace`):
    /// [`Accelerator::device_trace`] then returns every copy and kernel, timed by the device.
    pub trace: bool,
    /// Whether the H pipeline uploads b and c beside a's transforms where the device can and
    /// its memory allows (`PROOFLINE_GPU_BESIDE`, on unless `0` or `false`: an A/B knob).
    pub beside: bool,
    /// How the H pipeline's transforms are cut (`PROOFLINE_GPU_NTT_SHAPE=RADIX/TILE/G`, as
    /// logarithms); `None`: the device's default ([`NttShape::for_device`]).
    pub ntt_shape: Option<NttShape>,
}

/// The environment variable that sets the NTT's pass shape (`RADIX/TILE/G`).
pub const NTT_SHAPE_VAR: &str = "PROOFLINE_GPU_NTT_SHAPE";

/// `PROOFLINE_GPU_NTT_SHAPE`: unset or empty, the device's default; else a shape.
fn ntt_shape_from_env() -> std::result::Result<Option<NttShape>, String> {
    match std::env::var(NTT_SHAPE_VAR).ok().as_deref() {
        None | Some("") => Ok(None),
        Some(v) => NttShape::parse(v)
            .map(Some)
            .map_err(|e| format!("{NTT_SHAPE_VAR}: {e}")),
    }
}

/// The environment variable that turns the H pipeline's uploads beside its kernels off (`0`).
pub const BESIDE_VAR: &str = "PROOFLINE_GPU_BESIDE";

/// `PROOFLINE_GPU_BESIDE`: unset, empty, `1` or `true` on; `0` or `false` off.
fn beside_from_env() -> std::result::Result<bool, String> {
    parse_beside(std::env::var(BESIDE_VAR).ok().as_deref())
}

fn parse_beside(value: Option<&str>) -> std::result::Result<bool, String> {
    match value {
        None | Some("" | "1" | "true") => Ok(true),
        Some("0" | "false") => Ok(false),
        Some(other) => Err(format!("{BESIDE_VAR}={other:?}: write 1, true, 0 or false")),
    }
}

impl GpuOptions {
    /// The options with what the environment sets: faults (`PROOFLINE_GPU_FAIL_CALLS`, unless
    /// given), the MSM kernel (`PROOFLINE_GPU_MSM`), where the 0/1 split runs
    /// (`PROOFLINE_GPU_SCAN`), tracing (`PROOFLINE_GPU_TRACE`), uploads beside the kernels
    /// (`PROOFLINE_GPU_BESIDE`) and the NTT's pass shape (`PROOFLINE_GPU_NTT_SHAPE`); a malformed
    /// value is an error.
    pub fn from_env(mem_limit: Option<u64>, faults: Option<Faults>) -> Result<Self> {
        let invalid = |what| move |detail| Error::InvalidConfig { what, detail };
        let faults = match faults {
            Some(f) => f,
            None => Faults::from_env().map_err(invalid("fault injection"))?,
        };
        Ok(GpuOptions {
            mem_limit,
            faults,
            msm: MsmKernel::from_env().map_err(invalid("MSM kernel"))?,
            scan: ScanMode::from_env().map_err(invalid("scalar scan"))?,
            trace: crate::trace::trace_from_env(),
            beside: beside_from_env().map_err(invalid("uploads beside kernels"))?,
            ntt_shape: ntt_shape_from_env().map_err(invalid("NTT pass shape"))?,
        })
    }
}

/// A device backend over devices of one API.
pub struct GpuAccelerator<D: Device> {
    name: &'static str,
    devices: Vec<Arc<GpuDevice<D>>>,
    faults: Arc<Faults>,
    profile: Arc<Profile>,
    trace: Arc<Trace>,
    msm: MsmKernel,
    scan: ScanMode,
    beside: bool,
    ntt_shape: Option<NttShape>,
}

impl<D: Device> GpuAccelerator<D> {
    /// A backend named `name` (`opencl`, `cuda`) over `devices`, whose programs define `names`.
    pub fn new(
        name: &'static str,
        devices: Vec<D>,
        names: &KernelNames,
        options: GpuOptions,
    ) -> Self {
        let devices = devices
            .into_iter()
            .map(|device| {
                let own = device.info().memory_bytes / 10 * 9;
                let limit = options.mem_limit.map_or(own, |l| l.min(own));
                let gauge = MemoryGauge::new(limit);
                if let Some(in_use) = driver_in_use(&device) {
                    gauge.set_driver_baseline(in_use);
                }
                Arc::new(GpuDevice {
                    device,
                    gauge: Arc::new(gauge),
                    names: names.clone(),
                })
            })
            .collect();
        GpuAccelerator {
            name,
            devices,
            faults: Arc::new(options.faults),
            profile: Arc::new(Profile::from_env()),
            trace: Arc::new(Trace::new(options.trace)),
            msm: options.msm,
            scan: options.scan,
            beside: options.beside,
            ntt_shape: options.ntt_shape,
        }
    }

    /// One line per device, for logs and tests: which device, on what, its memory limit, and
    /// whether its kernels came from the cache.
    pub fn describe(&self) -> Vec<String> {
        self.devices
            .iter()
            .enumerate()
            .map(|(d, gpu)| {
                let info = gpu.device.info();
                format!(
                    "{} device {d}: {} on {} ({} compute units, limit {}{})",
                    self.name,
                    info.name,
                    info.platform,
                    info.compute_units,
                    prover_core::units::human_bytes(gpu.gauge.limit()),
                    if info.program_from_cache {
                        ", kernels from the cache"
                    } else {
                        ""
                    }
                )
            })
            .collect()
    }

    /// Device `i` with its gauge.
    pub fn device(&self, i: usize) -> Option<&GpuDevice<D>> {
        self.devices.get(i).map(|d| &**d)
    }

    /// Prepares a synthetic key (a timing workload's: see [`crate::synthetic`]): every query's
    /// bases made on every device and counted in `ledger` as resident device bases. Refused,
    /// with what it needs, where the bases and a partition's working memory do not fit.
    pub fn prepare_synthetic(
        &self,
        key: &SyntheticKey,
        ledger: &StageLedger,
    ) -> Result<PreparedParameters> {
        let (t1, t2) = key.tables();
        let need = key.bases_bytes() + working_bytes(key.shape.domain);
        let devices = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, gpu)| {
                if gpu.gauge.available() < need {
                    return Err(Error::Resource {
                        what: "device memory for a synthetic key",
                        detail: format!(
                            "{} needs {} for the bases and a partition, {} is left under its limit",
                            self.device_name(i),
                            prover_core::units::human_bytes(need),
                            prover_core::units::human_bytes(gpu.gauge.available())
                        ),
                    });
                }
                synthetic_resident(gpu, key, (&t1, &t2), ledger).map_err(|e| Error::Backend {
                    backend: self.device_name(i),
                    source: Box::new(e),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let state: Arc<PreparedState<D>> = Arc::new(PreparedState {
            devices,
            key: key.shape,
        });
        Ok(PreparedParameters::new(
            Arc::new(key.shape_only_parameters()),
            self.name,
            Some(state),
        ))
    }

    /// Parameter generation's products on device `i` (its memory counted by the same gauge).
    pub fn multiplier(&self, i: usize) -> Option<crate::GpuMultiplier<D>> {
        self.devices
            .get(i)
            .map(|d| crate::GpuMultiplier::new(Arc::clone(d), self.device_name(i)))
    }
}

/// A query's bases on one device, when they fit.
struct Resident<D: Device> {
    h: Option<DeviceBuffer<D>>,
    l: Option<DeviceBuffer<D>>,
    a: Option<DeviceBuffer<D>>,
    b_g1: Option<DeviceBuffer<D>>,
    b_g2: Option<DeviceBuffer<D>>,
    _tokens: Vec<ResidentToken>,
}

/// What `prepare` keeps: the resident bases of every device, and the key's shape (a synthetic
/// key's parameters carry no host bases to read it from).
struct PreparedState<D: Device> {
    devices: Vec<Resident<D>>,
    key: KeyShape,
}

/// Device bytes a partition of a `2^log2` domain needs beside the bases (three H vectors, and
/// as much again for the MSMs' buckets and lists): what `prepare` leaves free.
fn working_bytes(domain: usize) -> u64 {
    4 * domain as u64 * 32 + (64 << 20)
}

fn upload_if_room<D: Device, G: DeviceCopy>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    bases: &[G],
    keep: u64,
    ledger: &StageLedger,
    tokens: &mut Vec<ResidentToken>,
    what: &str,
) -> DeviceResult<Option<DeviceBuffer<D>>> {
    let bytes = std::mem::size_of_val(bases) as u64;
    if bases.is_empty()
        || bytes > gpu.device.info().max_alloc_bytes
        || gpu.gauge.available() < bytes.saturating_add(keep)
    {
        return Ok(None);
    }
    let buf = gpu.upload(q, bases, what)?;
    tokens.push(ledger.resident(ResidentKind::DeviceBases, bytes));
    Ok(Some(buf))
}

fn prepare_device<D: Device>(
    gpu: &GpuDevice<D>,
    params: &Parameters,
    ledger: &StageLedger,
) -> DeviceResult<Resident<D>> {
    let mut q = gpu.device.queue()?;
    let keep = working_bytes(params.domain_size());
    let mut tokens = Vec::new();
    let mut up = |bases: &[G1Affine], what| {
        upload_if_room(gpu, &mut q, bases, keep, ledger, &mut tokens, what)
    };
    let h = up(&params.h, "H bases")?;
    let l = up(&params.l, "L bases")?;
    let a = up(&params.a, "A bases")?;
    let b_g1 = up(&params.b_g1, "B G1 bases")?;
    let b_g2 = upload_if_room(
        gpu,
        &mut q,
        &params.b_g2,
        keep,
        ledger,
        &mut tokens,
        "B G2 bases",
    )?;
    q.synchronize()?;
    Ok(Resident {
        h,
        l,
        a,
        b_g1,
        b_g2,
        _tokens: tokens,
    })
}

fn synthetic_resident<D: Device>(
    gpu: &GpuDevice<D>,
    key: &SyntheticKey,
    (t1, t2): (&[G1Affine], &[G2Affine]),
    ledger: &StageLedger,
) -> DeviceResult<Resident<D>> {
    let mut q = gpu.device.queue()?;
    let mut tokens = Vec::new();
    let mut make = |query, what| -> DeviceResult<Option<DeviceBuffer<D>>> {
        let (n, seed) = (key.len(query), key.query_seed(query));
        let buf = match query {
            Query::BG2 => synthetic_bases(gpu, &mut q, t2, seed, n, None, what)?,
            _ => synthetic_bases(gpu, &mut q, t1, seed, n, None, what)?,
        };
        tokens.push(ledger.resident(ResidentKind::DeviceBases, buf.bytes()));
        Ok(Some(buf))
    };
    Ok(Resident {
        h: make(Query::H, "synthetic H bases")?,
        l: make(Query::L, "synthetic L bases")?,
        a: make(Query::A, "synthetic A bases")?,
        b_g1: make(Query::BG1, "synthetic B G1 bases")?,
        b_g2: make(Query::BG2, "synthetic B G2 bases")?,
        _tokens: tokens,
    })
}

impl<D: Device> Accelerator for GpuAccelerator<D> {
    fn name(&self) -> &str {
        self.name
    }

    fn device_count(&self) -> usize {
        self.devices.len()
    }

    fn device_name(&self, device: usize) -> String {
        match self.devices.get(device) {
            Some(d) => format!("{}:{device} ({})", self.name, d.device.info().name),
            None => format!("{}:{device}", self.name),
        }
    }

    fn prepare(&self, params: Arc<Parameters>, ledger: &StageLedger) -> Result<PreparedParameters> {
        let devices = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, gpu)| {
                prepare_device(gpu, &params, ledger).map_err(|e| Error::Backend {
                    backend: self.device_name(i),
                    source: Box::new(e),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let state: Arc<PreparedState<D>> = Arc::new(PreparedState {
            devices,
            key: params.shape(),
        });
        Ok(PreparedParameters::new(params, self.name, Some(state)))
    }

    fn partition_host_bytes(&self, params: &Parameters) -> u64 {
        // The split H pipeline's host vector, and the largest query's scan (index and exponent
        // per term).
        let largest = params.l.len().max(params.a.len()).max(params.b_g1.len());
        params.domain_size() as u64 * 32 + largest as u64 * 40
    }

    fn step_times(&self) -> Vec<prover_core::StepTime> {
        self.profile.steps()
    }

    fn device_trace(&self) -> Vec<prover_core::DeviceSpan> {
        self.trace.spans()
    }

    fn device_memory(&self) -> Vec<prover_core::DeviceMemory> {
        self.devices
            .iter()
            .enumerate()
            .map(|(device, gpu)| prover_core::DeviceMemory {
                device,
                allocated_peak: gpu.gauge.peak(),
                driver_baseline: gpu.gauge.driver_baseline(),
                driver_peak: gpu.gauge.driver_peak(),
            })
            .collect()
    }

    fn worker(&self, device: usize, slot: usize) -> Result<Box<dyn AcceleratorWorker>> {
        let gpu = self
            .devices
            .get(device)
            .ok_or_else(|| Error::InvalidConfig {
                what: "device",
                detail: format!(
                    "the {} backend has {} device(s), not {device}",
                    self.name,
                    self.devices.len()
                ),
            })?;
        let backend_err = |e| Error::Backend {
            backend: self.device_name(device),
            source: Box::new(e),
        };
        let mut queue = gpu.device.queue().map_err(backend_err)?;
        if self.trace.enabled() && !queue.set_trace(true).map_err(backend_err)? {
            return Err(Error::InvalidConfig {
                what: "device tracing",
                detail: format!("{}'s queues cannot trace", self.device_name(device)),
            });
        }
        Ok(Box::new(GpuWorker {
            backend: self.name,
            label: self.device_name(device),
            ordinal: device,
            slot,
            gpu: gpu.clone(),
            queue,
            faults: self.faults.clone(),
            profile: self.profile.clone(),
            trace: self.trace.clone(),
            msm: self.msm,
            scan: self.scan,
            beside: self.beside,
            ntt_shape: self.ntt_shape,
        }))
    }
}

/// One worker: its device and its own queue.
struct GpuWorker<D: Device> {
    backend: &'static str,
    label: String,
    ordinal: usize,
    slot: usize,
    gpu: Arc<GpuDevice<D>>,
    queue: D::Queue,
    faults: Arc<Faults>,
    profile: Arc<Profile>,
    trace: Arc<Trace>,
    msm: MsmKernel,
    scan: ScanMode,
    beside: bool,
    ntt_shape: Option<NttShape>,
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
        let beside = self.beside && q.copies_beside();
        // The 0/1 split on the device when every query's bases are resident and the witness
        // fits beside them; on the host otherwise.
        let all_resident = [&resident.l, &resident.a, &resident.b_g1, &resident.b_g2]
            .iter()
            .all(|b| b.is_some());
        let on_device =
            self.scan == ScanMode::Device && all_resident && DeviceWitness::fits(gpu, w);
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
        let p = &*self.profile;
        let msm = self.msm;
        let exps = p.step("h_ntt", q, |q| {
            let shape = self.ntt_shape.unwrap_or_else(|| NttShape::for_device(gpu));
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
        let fault = self.faults.next_call().map(|n| {
            DeviceError::new(
                format!("accelerator call {n}"),
                format!("fault injected ({})", crate::fault::FAIL_CALLS_VAR),
            )
        });
        let outcome = match fault {
            Some(e) => Err(e),
            None if self.trace.enabled() => {
                let number = self.trace.next_partition();
                let outcome = self.run(resident, params, &partition, &plan, &domain, buffers);
                // The spans of a failed call are what the device did before it failed; a
                // queue that cannot say loses only its trace, never the partition.
                if let Ok(spans) = self.queue.take_spans() {
                    self.trace.add(self.ordinal, self.slot, number, spans);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beside_is_on_unless_turned_off() {
        for on in [None, Some(""), Some("1"), Some("true")] {
            assert_eq!(parse_beside(on), Ok(true), "{on:?}");
        }
        for off in [Some("0"), Some("false")] {
            assert_eq!(parse_beside(off), Ok(false), "{off:?}");
        }
        // Negative twin: anything else is refused, not read as on.
        for bad in ["yes", "off", " 0", "2"] {
            assert!(parse_beside(Some(bad)).is_err(), "{bad}");
        }
    }
}
