//! Device-level checks for backends on gpu-core (every API crate runs them on its devices):
//! the NTT and the H pipeline, and the query MSMs, against the CPU backend on fresh random
//! inputs; and the engine's fallback under injected faults.

use std::sync::Arc;

use backend_cpu::msm::msm;
use backend_cpu::ntt::{ntt as cpu_ntt, quotient as cpu_quotient};
use backend_cpu::CpuBackend;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use gpu_core::classify::{DeviceScan, DeviceWitness};
use gpu_core::context::launch_threads;
use gpu_core::device::{bytes_of_mut, Arg, Device};
use gpu_core::msm::{query_msm, scanned_msm, Bases, MsmKernel, Scan};
use gpu_core::ntt::{
    ntt, ntt_with, quotient, table_bytes_bound, HPipeline, NttMode, NttShape, NttTables,
    MAX_LOG_SINGLE,
};
pub use gpu_core::Faults;
use gpu_core::{GpuAccelerator, GpuDevice, Queue};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::groth16::generator::fixed_base::FixedBase;
use prover_core::stages::density::{Density, ScalarBytes};
use prover_core::stages::plan::{Filter, MsmTerm, ScalarSource};
use prover_core::stages::Witness;
use prover_core::AcceleratorWorker;
use prover_core::{generate_parameters, generate_parameters_on, Multiplier, Trapdoor};
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, verify_proofs_batch, Accelerator, Config,
    CpuSynthesizer, Domain, Engine, EngineStats,
};
use rand::{Rng, RngCore};

use crate::{cases, SuiteCircuit};

/// How large the suite's stage checks are: small by default (CI's POCL); with
/// `PROOFLINE_DEVICE_CHECK_SIZES=large` (a GPU) the sizes where the windows and the NTT passes
/// of real partitions appear; with `=production` (a GPU of 80 GB) those and a production
/// partition's own: the NTT of 2^27 points, G1 MSMs of 2^24 and 2^27 terms and a G2 MSM of 2^24,
/// checked against answers known without a CPU MSM ([`check_known_answers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuiteSizes {
    /// CI's sizes.
    Small,
    /// A GPU's stage sizes.
    Large,
    /// A GPU's stage sizes and a production partition's.
    Production,
}

/// The environment variable that picks the suite's sizes ([`SuiteSizes`]).
pub const SIZES_VAR: &str = "PROOFLINE_DEVICE_CHECK_SIZES";

impl SuiteSizes {
    /// `small`, `large` or `production`.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.trim() {
            "small" => Ok(SuiteSizes::Small),
            "large" => Ok(SuiteSizes::Large),
            "production" => Ok(SuiteSizes::Production),
            other => Err(format!(
                "{SIZES_VAR}={other}: expected `small`, `large` or `production`"
            )),
        }
    }

    /// From `PROOFLINE_DEVICE_CHECK_SIZES` (unset: small). A bad value fails the test that
    /// asked.
    pub fn from_env() -> Self {
        match std::env::var(SIZES_VAR) {
            Ok(v) => Self::parse(&v).unwrap_or_else(|e| panic!("{e}")),
            Err(_) => SuiteSizes::Small,
        }
    }

    /// The sizes of the NTT, H pipeline and query MSM checks.
    fn stages(self) -> Sizes {
        match self {
            SuiteSizes::Large | SuiteSizes::Production => Sizes {
                ntt_logs: vec![13, 14, 15, 16, 18, 21],
                msm_terms: vec![3000, 1 << 13, (1 << 14) + 7, 1 << 16],
            },
            SuiteSizes::Small => Sizes {
                // 2^14: the element-wise kernels run several groups, the NTT two passes.
                ntt_logs: vec![0, 1, 2, 3, 9, 11, 14],
                msm_terms: vec![1, 7, 100, 257, 3000],
            },
        }
    }

    /// The sizes of the known-answer checks (logarithms), and their tables' (points).
    fn known(self) -> KnownSizes {
        match self {
            SuiteSizes::Small => KnownSizes {
                ntt_log: 10,
                g1_logs: vec![8],
                g2_logs: vec![5],
                table_log: 4,
            },
            SuiteSizes::Large => KnownSizes {
                ntt_log: 21,
                g1_logs: vec![16],
                g2_logs: vec![14],
                table_log: gpu_core::synthetic::TABLE_LOG,
            },
            SuiteSizes::Production => KnownSizes {
                ntt_log: 27,
                g1_logs: vec![24, 27],
                g2_logs: vec![24],
                table_log: gpu_core::synthetic::TABLE_LOG,
            },
        }
    }
}

/// The sizes the stage checks run.
struct Sizes {
    ntt_logs: Vec<u32>,
    msm_terms: Vec<usize>,
}

/// The sizes the known-answer checks run.
struct KnownSizes {
    ntt_log: u32,
    g1_logs: Vec<u32>,
    g2_logs: Vec<u32>,
    table_log: u32,
}

/// The environment variable that picks the devices the suite runs on (test binaries take no
/// `--gpus`): ordinals separated by commas (`0`, `1`, `0,1`). Unset: every device the backend
/// opened.
pub const TEST_DEVICES_VAR: &str = "PROOFLINE_TEST_DEVICES";

/// The devices to check among a backend's `count`: `PROOFLINE_TEST_DEVICES`, or all of them.
/// A bad value, or a device the backend does not have, fails the test that asked.
pub fn test_devices(count: usize) -> Vec<usize> {
    match std::env::var(TEST_DEVICES_VAR) {
        Ok(v) => {
            parse_test_devices(&v, count).unwrap_or_else(|e| panic!("{TEST_DEVICES_VAR}: {e}"))
        }
        Err(_) => (0..count).collect(),
    }
}

/// `PROOFLINE_TEST_DEVICES`'s value for a backend with `count` devices.
pub fn parse_test_devices(value: &str, count: usize) -> Result<Vec<usize>, String> {
    let mut out: Vec<usize> = Vec::new();
    for part in value.split(',') {
        let part = part.trim();
        let d: usize = part
            .parse()
            .map_err(|_| format!("`{part}` is not a device ordinal (give e.g. `0` or `0,1`)"))?;
        if d >= count {
            return Err(format!(
                "device {d} is not there: the backend opened {count} device(s)"
            ));
        }
        if out.contains(&d) {
            return Err(format!("device {d} is named twice"));
        }
        out.push(d);
    }
    Ok(out)
}

fn read_scalars<D: Device>(
    q: &mut D::Queue,
    buf: &gpu_core::memory::DeviceBuffer<D>,
    n: usize,
) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; n];
    q.read(buf.raw(), 0, bytes_of_mut(&mut out)).expect("read");
    out
}

fn random_scalars(n: usize, rng: &mut impl rand::RngCore) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

/// The NTT (forward and inverse, sizes 2^0..2^14, the device's pass shape and smaller ones that
/// cut the same sizes into more, narrower passes; and 2^17, whose last pass makes its twiddles
/// from the two-level table while the passes before it read single tables) and the whole H
/// pipeline (both memory modes, inputs shorter than the domain) on `gpu` equal the CPU
/// backend's, on fresh random inputs; a wrong root gives another transform.
pub fn check_ntt_and_quotient<D: Device>(gpu: &GpuDevice<D>, sizes: SuiteSizes) {
    let mut q = gpu.device.queue().unwrap();
    let mut rng = rand::thread_rng();
    let shapes = [
        NttShape::for_device(gpu),
        // Radix 2^3 in tiles of 2^5: one to five columns a tile, passes of 1..3 rounds; each
        // kernel (2, 4 and 8 elements a thread), with passes shorter and longer than a thread's
        // rounds.
        NttShape {
            max_log_radix: 3,
            log_tile: 5,
            log_per_thread: 3,
        },
        NttShape {
            max_log_radix: 5,
            log_tile: 8,
            log_per_thread: 2,
        },
        NttShape {
            max_log_radix: 4,
            log_tile: 6,
            log_per_thread: 1,
        },
        NttShape {
            max_log_radix: 8,
            log_tile: 10,
            log_per_thread: 1,
        },
        // Passes as long as the tile: one column a tile where a pass takes all of it (as the
        // default's passes of 2^9 in tiles of 2^9).
        NttShape {
            max_log_radix: 5,
            log_tile: 5,
            log_per_thread: 2,
        },
    ];
    // 2^17 in passes of 2^3 (and one of 2^2): with single tables up to 2^16 entries the passes
    // after the first read them, the last (2^17) the two-level table; with the default limit
    // every pass after the first reads a single table.
    for (limit, singles) in [(16, 4), (MAX_LOG_SINGLE, 5)] {
        let log = 17;
        let d = Domain::new(log).unwrap();
        let v = random_scalars(d.size(), &mut rng);
        let mut want = v.clone();
        cpu_ntt(&mut want, d.omega);
        let shape = shapes[1];
        let tables = NttTables::with_single_limit(gpu, &mut q, log, d.omega, shape, limit).unwrap();
        assert_eq!(shape.radices(log).len(), 6);
        assert_eq!(
            tables.single_table_passes(),
            singles,
            "single tables up to 2^{limit}"
        );
        let mut x = gpu.upload(&mut q, &v, "x").unwrap();
        let mut t = gpu.alloc(d.size() as u64 * 32, "t").unwrap();
        ntt_with(gpu, &mut q, &mut x, &mut t, &tables).unwrap();
        assert_eq!(
            read_scalars(&mut q, &x, d.size()),
            want,
            "NTT 2^17 {shape:?}, single tables up to 2^{limit}"
        );
    }
    for log in sizes.stages().ntt_logs {
        let d = Domain::new(log).unwrap();
        let n = d.size();
        let v = random_scalars(n, &mut rng);
        for omega in [d.omega, d.omega_inv()] {
            let mut want = v.clone();
            cpu_ntt(&mut want, omega);
            let mut x = gpu.upload(&mut q, &v, "x").unwrap();
            let mut t = gpu.alloc(n as u64 * 32, "t").unwrap();
            ntt(gpu, &mut q, &mut x, &mut t, log, omega).unwrap();
            assert_eq!(read_scalars(&mut q, &x, n), want, "NTT 2^{log}");
            for shape in &shapes[1..] {
                let tables = NttTables::new(gpu, &mut q, log, omega, *shape).unwrap();
                let mut x = gpu.upload(&mut q, &v, "x").unwrap();
                ntt_with(gpu, &mut q, &mut x, &mut t, &tables).unwrap();
                let got = read_scalars(&mut q, &x, n);
                assert_eq!(got, want, "NTT 2^{log}, {shape:?}");
            }
            // Negative twin: the wrong root gives another transform.
            if log > 1 {
                let mut y = gpu.upload(&mut q, &v, "y").unwrap();
                ntt(gpu, &mut q, &mut y, &mut t, log, omega.square()).unwrap();
                assert_ne!(read_scalars(&mut q, &y, n), want);
            }
        }
        // The whole H pipeline (coset NTTs inside), every memory mode (b and c uploaded beside
        // the transforms where the queue can), shorter inputs padded.
        let len = n - n / 3;
        let (a, bb, c) = (
            random_scalars(len, &mut rng),
            random_scalars(len, &mut rng),
            random_scalars(len, &mut rng),
        );
        let want = cpu_quotient(a.clone(), bb.clone(), c.clone(), &d);
        // The memory mode's choice leaves room for the pipeline's tables.
        let tables = HPipeline::new(gpu, &mut q, &d, NttShape::for_device(gpu))
            .unwrap()
            .bytes();
        assert!(
            tables <= table_bytes_bound(log),
            "2^{log}: {tables} B of tables"
        );
        assert!(tables > 0);
        // Each mode with another kernel: the device's default (4 elements a thread), 2 and 8.
        let modes = [
            (NttMode::Ahead, NttShape::for_device(gpu)),
            (NttMode::Resident, shapes[4]),
            (NttMode::Split, shapes[1]),
        ];
        for (mode, shape) in modes {
            let ledger = StageLedger::new();
            let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
            let h = quotient(
                gpu,
                &mut q,
                [&a, &bb, &c],
                &d,
                mode,
                shape,
                &mut token.backend_buffers(),
            )
            .unwrap();
            // The device leaves canonical exponents: compare their bytes with the CPU's.
            let got = read_scalars(&mut q, &h, n);
            let got: Vec<[u8; 32]> = got[..n - 1].iter().map(bytes).collect();
            let want: Vec<[u8; 32]> = want.iter().map(|s| s.to_repr()).collect();
            assert_eq!(got, want, "quotient 2^{log} {mode:?} {shape:?}");
        }
    }
}

/// Copies beside the queue's kernels keep their bytes, and so do the copies after them: a copy
/// beside whose buffer is made after long kernels (so its transfer waits for them) is followed
/// at once by a plain copy and another copy beside, each of more than one staging piece where
/// the backend stages; all three read back exact. Where copies beside are plain writes
/// (OpenCL), the same sequence runs with short kernels.
pub fn check_copies_beside<D: Device>(gpu: &GpuDevice<D>) {
    let mut q = gpu.device.queue().expect("a queue");
    let beside = q.copies_beside();
    let mut rng = rand::thread_rng();
    // 48 MiB each (two staging pieces of the CUDA backend's), drawn before the kernels are
    // queued, so that the copies come while the kernels still run.
    let len = if beside { 48 << 20 } else { 1 << 16 };
    let data: Vec<Vec<u8>> = (0..3)
        .map(|_| {
            let mut v = vec![0u8; len];
            rng.fill_bytes(&mut v);
            v
        })
        .collect();
    assert!(data[0] != data[1] && data[1] != data[2] && data[0] != data[2]);
    // Long kernels (on a device that copies beside): products over 2^24 scalars, repeated
    // (about half a second on an H200).
    let (log, reps) = if beside { (24, 1000) } else { (10, 1) };
    let n = 1usize << log;
    let x = gpu
        .scratch(&mut q, n as u64 * 32, "long kernels")
        .expect("scratch");
    let n32 = Arg::U32(n as u32);
    launch_threads(
        &mut q,
        &gpu.names.fill_zero,
        n,
        &[Arg::Buffer(x.raw()), Arg::U32(0), n32],
    )
    .expect("fill");
    for _ in 0..reps {
        let args = [
            Arg::Buffer(x.raw()),
            Arg::Buffer(x.raw()),
            Arg::U32(n as u32),
        ];
        launch_threads(&mut q, &gpu.names.mul_assign, n, &args).expect("products");
    }
    // Made after the kernels are queued: the first copy beside waits for them.
    let bufs: Vec<_> = (0..3)
        .map(|_| gpu.scratch(&mut q, len as u64, "copies").expect("scratch"))
        .collect();
    q.write_beside(bufs[0].raw(), 0, &data[0])
        .expect("copy beside");
    q.write(bufs[1].raw(), 0, &data[1]).expect("plain copy");
    q.write_beside(bufs[2].raw(), 0, &data[2])
        .expect("copy beside");
    for (i, (buf, want)) in bufs.iter().zip(&data).enumerate() {
        let mut got = vec![0u8; len];
        q.read(buf.raw(), 0, &mut got).expect("read");
        if let Some(at) = (0..len).find(|&j| got[j] != want[j]) {
            panic!("copy {i} of 3 (copies beside the kernels: {beside}): byte {at} differs");
        }
    }
}

/// The raw bytes of a scalar (on the device side: canonical limbs after `to_canonical`).
fn bytes(s: &Scalar) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(gpu_core::device::bytes_of(std::slice::from_ref(s)));
    out
}

#[derive(Clone, Copy, Debug)]
enum Mix {
    Zeros,
    Ones,
    Mixed,
    Dense,
    /// One random scalar, repeated: every window's terms crowd into one bucket.
    Equal,
}

fn scalars(mix: Mix, n: usize, rng: &mut impl rand::RngCore) -> Vec<ScalarBytes> {
    let same = Scalar::random(&mut *rng);
    (0..n)
        .map(|i| {
            let s = match (mix, i % 4) {
                (Mix::Zeros, _) => Scalar::ZERO,
                (Mix::Ones, _) => Scalar::ONE,
                (Mix::Equal, _) => same,
                (Mix::Mixed, 0) => Scalar::ZERO,
                (Mix::Mixed, 1) => Scalar::ONE,
                _ => Scalar::random(&mut *rng),
            };
            ScalarBytes::from_scalar(&s)
        })
        .collect()
}

fn witness_with(aux: Vec<ScalarBytes>, density: Density) -> Witness {
    Witness {
        input: Vec::new(),
        aux,
        a_aux_density: density,
        b_input_density: Density::default(),
        b_aux_density: Density::default(),
    }
}

fn check_msm<D: Device, G, P, R: rand::RngCore>(
    gpu: &GpuDevice<D>,
    rng: &mut R,
    sizes: SuiteSizes,
    stream: bool,
    kernel: MsmKernel,
    point: impl Fn(&mut R, bool) -> G,
) where
    G: gpu_core::msm::DeviceCurve<Projective = P>
        + backend_cpu::msm::MsmGroup<Projective = P>
        + PartialEq,
    P: Group,
{
    let mut q = gpu.device.queue().unwrap();
    for n in sizes.stages().msm_terms {
        for mix in [Mix::Zeros, Mix::Ones, Mix::Mixed, Mix::Dense, Mix::Equal] {
            // Repeated bases: a handful of distinct points, one identity among them.
            let distinct: Vec<G> = (0..5).map(|i| point(rng, i == 4)).collect();
            let sc = scalars(mix, n, rng);
            // Every third variable unused (density), the rest meet the bases in order.
            let mut density = Density::default();
            for j in 0..n {
                density.push_unset();
                if j % 3 != 2 {
                    density.set(j);
                }
            }
            let used = density.count_ones();
            let bases: Vec<G> = (0..used).map(|_| distinct[rng.gen_range(0..5)]).collect();
            let want = msm(&bases, &sc, Some(&density));
            let w = witness_with(sc.clone(), density.clone());
            let term = MsmTerm {
                bases: 0..used,
                source: ScalarSource::Aux,
                filter: Filter::AAux,
            };
            let ledger = StageLedger::new();
            let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
            let resident = (!stream).then(|| gpu.upload(&mut q, &bases, "bases").unwrap());
            // The host scan's lists, streamed or resident; resident, the scalars classified on
            // the device too: the same lists, the same sum.
            let mut run = |w: &Witness| {
                let scan = Scan::new([&term], w).unwrap();
                let at = match &resident {
                    Some(r) => Bases::Resident(r),
                    None => Bases::Streamed(&bases[..]),
                };
                let what = format!("{} {kernel:?} n {n} {mix:?}", G::NAME);
                let mut buffers = token.backend_buffers();
                let host = query_msm::<D, G>(gpu, &mut q, at, &scan, kernel, &mut buffers)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                if let Some(r) = &resident {
                    let dw = DeviceWitness::upload(gpu, &mut q, w, &mut buffers).unwrap();
                    let ds = DeviceScan::new(gpu, &mut q, [&term], w, &dw, &mut buffers)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(ds.read(&mut q).unwrap(), scan, "{what}: device lists");
                    let dev = scanned_msm::<D, G>(gpu, &mut q, r, &ds, kernel, &mut buffers)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(dev, host, "{what}: classified on the device");
                    ds.release(&mut buffers);
                    dw.release(&mut buffers);
                }
                host
            };
            let got = run(&w);
            assert_eq!(
                got,
                want,
                "{} {kernel:?} n {n} {mix:?} stream {stream}",
                G::NAME
            );
            // Negative twin: one changed nonzero scalar changes the sum.
            if let Some(j) = (0..n).find(|&j| {
                density.get(j)
                    && !sc[j].is_zero()
                    && !(bases[density_rank(&density, j)] == distinct[4])
            }) {
                let mut bad = sc.clone();
                bad[j] = ScalarBytes::from_scalar(
                    &(Scalar::from_repr_vartime(sc[j].0).unwrap() + Scalar::ONE),
                );
                let w = witness_with(bad, density.clone());
                let got = run(&w);
                assert_ne!(got, want, "{} n {n} {mix:?}: twin", G::NAME);
            }
        }
    }
}

fn density_rank(d: &Density, j: usize) -> usize {
    (0..j).filter(|&i| d.get(i)).count()
}

/// Room for the smallest G2 bucket set (about 150 KiB) and a few hundred bases per streamed
/// chunk: the 3000-term MSMs take several chunks.
pub const STREAM_LIMIT: u64 = 320 << 10;

/// G1 and G2 MSMs on `gpu`, with each MSM kernel, equal the CPU backend's: zeros, ones, mixed,
/// dense and all-equal scalars, an
/// unused variable in three, repeated bases with an identity among them, 1 to 3000 terms; the
/// bases resident, or (`stream`) streamed from the host in chunks. A changed scalar changes the
/// sum. With `stream`, give the device a limit of [`STREAM_LIMIT`].
pub fn check_msms<D: Device>(gpu: &GpuDevice<D>, sizes: SuiteSizes, stream: bool) {
    let mut rng = rand::thread_rng();
    if !stream {
        check_sorted_shapes(gpu, &mut rng, |r, zero| {
            if zero {
                G1Affine::identity()
            } else {
                G1Projective::random(r).to_affine()
            }
        });
        check_sorted_shapes(gpu, &mut rng, |r, zero| {
            if zero {
                G2Affine::identity()
            } else {
                G2Projective::random(r).to_affine()
            }
        });
    }
    for kernel in [MsmKernel::Stock, MsmKernel::Sorted] {
        check_msm(gpu, &mut rng, sizes, stream, kernel, |r, zero| {
            if zero {
                G1Affine::identity()
            } else {
                G1Projective::random(r).to_affine()
            }
        });
        check_msm(gpu, &mut rng, sizes, stream, kernel, |r, zero| {
            if zero {
                G2Affine::identity()
            } else {
                G2Projective::random(r).to_affine()
            }
        });
    }
}

/// A production partition's transform and MSMs at `sizes`' known-answer sizes (at
/// [`SuiteSizes::Production`]: the NTT of 2^27 points in the device's default shape, G1 MSMs of
/// 2^24 and 2^27 terms, a G2 MSM of 2^24), where a CPU reference would take too long:
///
/// - the NTT's values at a few points against direct evaluation of its input as a polynomial,
///   and the inverse transform back to the input ([`gpu_core::ntt::check_ntt`]); a transform
///   by another root fails the same check;
/// - dense MSMs of random exponents, with each MSM kernel, over bases made on the device from a
///   table of the generator's products by known scalars ([`gpu_core::synthetic`]): every base's
///   discrete logarithm is known, so the sum is `(sum_i s_i log_i) G`, from scalar arithmetic
///   ([`known_msm`], checked against a CPU MSM at small sizes); one exponent changed on the
///   device moves the sum by that base's multiple.
///
/// [`known_msm`]: gpu_core::synthetic::known_msm
pub fn check_known_answers<D: Device>(gpu: &GpuDevice<D>, sizes: SuiteSizes) {
    use gpu_core::ntt::{check_ntt, check_values};
    use gpu_core::synthetic::random_field;
    let known = sizes.known();
    let mut rng = rand::thread_rng();
    let mut q = gpu.device.queue().expect("a queue");
    let log = known.ntt_log;
    let d = Domain::new(log).unwrap();
    let n = d.size();
    let input = random_field(n, rng.next_u64());
    let shape = NttShape::for_device(gpu);
    let forward = NttTables::new(gpu, &mut q, log, d.omega, shape).expect("NTT tables");
    let inverse = NttTables::new(gpu, &mut q, log, d.omega_inv(), shape).expect("NTT tables");
    let mut spots = vec![0, 1, n - 1];
    spots.extend((0..4).map(|_| rng.gen_range(0..n)));
    if let Err(e) = check_ntt(gpu, &mut q, &input, &forward, &inverse, &spots) {
        panic!("{e}");
    }
    // Negative twin: the transform by the root's square is not the one checked.
    let mut x = gpu.upload(&mut q, &input, "x").unwrap();
    let mut t = gpu.alloc(n as u64 * 32, "t").unwrap();
    ntt(gpu, &mut q, &mut x, &mut t, log, d.omega.square()).unwrap();
    let wrong = read_scalars(&mut q, &x, n);
    drop((x, t, forward, inverse));
    assert!(
        check_values(&input, &wrong, d.omega, &spots).is_err(),
        "NTT 2^{log}: another root's transform passed the check"
    );
    drop((input, wrong));
    for log in known.g1_logs {
        check_known_msm::<D, G1Affine>(gpu, &mut q, log, known.table_log);
    }
    for log in known.g2_logs {
        check_known_msm::<D, G2Affine>(gpu, &mut q, log, known.table_log);
    }
}

/// A dense MSM of `2^log` random exponents over synthetic bases (a table of `2^table_log`
/// points) equals its known answer with each MSM kernel; one exponent changed on the device
/// moves the sum by its base.
fn check_known_msm<D: Device, C>(gpu: &GpuDevice<D>, q: &mut D::Queue, log: u32, table_log: u32)
where
    C: gpu_core::synthetic::SyntheticCurve,
    C::Projective: std::fmt::Debug,
{
    use gpu_core::msm::dense_msm;
    use gpu_core::synthetic::{
        known_msm, random_exponents, synthetic_bases, synthetic_log, table_with_logs,
    };
    let mut rng = rand::thread_rng();
    let n = 1usize << log;
    let (table, logs) = table_with_logs::<C>(table_log, rng.next_u64());
    let seed = rng.next_u32();
    let bases = synthetic_bases(gpu, q, &table, seed, n, None, "known-answer bases")
        .unwrap_or_else(|e| panic!("{} bases 2^{log}: {e}", C::NAME));
    let exps = random_exponents(n, rng.next_u64());
    let want = known_msm::<C>(&logs, seed, &exps).expect("canonical exponents");
    let exps_buf = gpu.upload(q, &exps, "exponents").unwrap();
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let mut run = |q: &mut D::Queue, kernel| {
        let at = Bases::Resident(&bases);
        dense_msm::<D, C>(
            gpu,
            q,
            at,
            &exps_buf,
            n,
            kernel,
            &mut token.backend_buffers(),
        )
        .unwrap_or_else(|e| panic!("{} MSM 2^{log} {kernel:?}: {e}", C::NAME))
    };
    for kernel in [MsmKernel::Stock, MsmKernel::Sorted] {
        let got = run(q, kernel);
        assert!(
            got == want,
            "{} MSM 2^{log} {kernel:?}: not the known answer",
            C::NAME
        );
    }
    // Negative twin: exponent j plus one on the device adds base j once.
    let j = rng.gen_range(0..n);
    let plus = ScalarBytes::from_scalar(&(exps[j].to_scalar().unwrap() + Scalar::ONE));
    q.write(exps_buf.raw(), j * 32, &plus.0).expect("write");
    let moved = run(q, MsmKernel::default());
    assert!(moved != want, "{} MSM 2^{log}: a changed exponent", C::NAME);
    let base_j = C::generator_times(synthetic_log(&logs, seed, j as u32));
    assert!(
        moved == want + base_j,
        "{} MSM 2^{log}: exponent {j} plus one did not add its base",
        C::NAME
    );
}

/// The 0/1 split classified on the device lists what the host scan lists, for the prover's
/// three query layouts (L: every aux variable; A: the inputs, then the aux variables A uses;
/// B: the inputs and the aux variables B uses), sizes around the 32-scalar blocks, scalars
/// zero, one, two, 2^64 + 1 (a low word of one) and random. A changed scalar changes the
/// lists; bases that do not match the used variables, and a density of the wrong length, are
/// refused with the reason.
pub fn check_device_scan<D: Device>(gpu: &GpuDevice<D>) {
    let mut rng = rand::thread_rng();
    let mut q = gpu.device.queue().unwrap();
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let low_one = Scalar::from_u128((1u128 << 64) + 1);
    let pick = |rng: &mut rand::rngs::ThreadRng| {
        let s = match rng.gen_range(0..6) {
            0 | 1 => Scalar::ZERO,
            2 => Scalar::ONE,
            3 => Scalar::from(2u64),
            4 => low_one,
            _ => Scalar::random(&mut *rng),
        };
        ScalarBytes::from_scalar(&s)
    };
    let density = |n: usize, rng: &mut rand::rngs::ThreadRng| {
        let mut d = Density::default();
        for j in 0..n {
            d.push_unset();
            if rng.gen_bool(0.7) {
                d.set(j);
            }
        }
        d
    };
    for (ni, na) in [
        (1, 0),
        (1, 1),
        (3, 31),
        (1, 32),
        (33, 33),
        (2, 64),
        (5, 1000),
        (9, 4099),
    ] {
        let input: Vec<ScalarBytes> = (0..ni).map(|_| pick(&mut rng)).collect();
        let aux: Vec<ScalarBytes> = (0..na).map(|_| pick(&mut rng)).collect();
        let w = Witness {
            input,
            aux,
            a_aux_density: density(na, &mut rng),
            b_input_density: density(ni, &mut rng),
            b_aux_density: density(na, &mut rng),
        };
        let term = |bases: std::ops::Range<usize>, source, filter| MsmTerm {
            bases,
            source,
            filter,
        };
        let (a_used, bi_used) = (w.a_aux_density.count_ones(), w.b_input_density.count_ones());
        let b_used = w.b_aux_density.count_ones();
        let queries = [
            vec![term(0..na, ScalarSource::Aux, Filter::All)],
            vec![
                term(0..ni, ScalarSource::Input, Filter::All),
                term(ni..ni + a_used, ScalarSource::Aux, Filter::AAux),
            ],
            vec![
                term(0..bi_used, ScalarSource::Input, Filter::BInput),
                term(bi_used..bi_used + b_used, ScalarSource::Aux, Filter::BAux),
            ],
        ];
        let mut buffers = token.backend_buffers();
        let dw = DeviceWitness::upload(gpu, &mut q, &w, &mut buffers).unwrap();
        for terms in &queries {
            let what = format!("inputs {ni} aux {na} {:?}", terms.last().map(|t| t.filter));
            let want = Scan::new(terms, &w).unwrap();
            let ds = DeviceScan::new(gpu, &mut q, terms, &w, &dw, &mut buffers)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = ds.read(&mut q).unwrap();
            assert_eq!(got, want, "{what}");
            assert_eq!((ds.n_ones, ds.n_others), (want.ones.len(), want.idx.len()));
            ds.release(&mut buffers);
            // Negative twin: the first used one made a two lists it with the others.
            if let Some(&first) = want.ones.first() {
                let mut bad = w.clone();
                let (t, k) = terms
                    .iter()
                    .find(|t| t.bases.contains(&(first as usize)))
                    .map(|t| (t, first as usize - t.bases.start))
                    .unwrap();
                let j = match t.density(&w) {
                    Some(d) => (0..d.len()).filter(|&j| d.get(j)).nth(k).unwrap(),
                    None => k,
                };
                let two = ScalarBytes::from_scalar(&Scalar::from(2u64));
                match t.source {
                    ScalarSource::Input => bad.input[j] = two,
                    ScalarSource::Aux => bad.aux[j] = two,
                }
                let bdw = DeviceWitness::upload(gpu, &mut q, &bad, &mut buffers).unwrap();
                let ds = DeviceScan::new(gpu, &mut q, terms, &bad, &bdw, &mut buffers).unwrap();
                let got = ds.read(&mut q).unwrap();
                assert_ne!(got, want, "{what}: twin");
                assert_eq!(got, Scan::new(terms, &bad).unwrap(), "{what}: twin's lists");
                ds.release(&mut buffers);
                bdw.release(&mut buffers);
            }
        }
        // Bases one short of the used variables, and a density of the wrong length.
        let short = term(0..na.saturating_sub(1), ScalarSource::Aux, Filter::All);
        if na > 0 {
            let err = DeviceScan::new(gpu, &mut q, [&short], &w, &dw, &mut buffers)
                .err()
                .expect("a short term is refused")
                .to_string();
            assert!(err.contains("used scalars for"), "{err}");
        }
        let mut odd = w.clone();
        odd.a_aux_density.push_unset();
        let err = DeviceScan::new(gpu, &mut q, &queries[1], &odd, &dw, &mut buffers)
            .err()
            .expect("a density of the wrong length is refused")
            .to_string();
        assert!(err.contains("a density of"), "{err}");
        dw.release(&mut buffers);
    }
}

/// The sorted MSM under shapes the prover does not pick by itself, against the CPU: runs of one
/// entry and of 64, all-equal scalars (every window's terms in one bucket, spanning thousands of
/// runs: the fixup's sums by 64 and 4096 runs) and dense ones, over repeated bases with an
/// identity among them (doublings inside a bucket, and a base beside its negation where the
/// digits' signs differ), in G1 and G2. A changed scalar changes the sum.
fn check_sorted_shapes<D: Device, G, P, R: RngCore>(
    gpu: &GpuDevice<D>,
    rng: &mut R,
    point: impl Fn(&mut R, bool) -> G,
) where
    G: gpu_core::msm::DeviceCurve<Projective = P>
        + backend_cpu::msm::MsmGroup<Projective = P>
        + PartialEq
        + Copy,
    P: Group + std::fmt::Debug,
{
    use gpu_core::pippenger::{msm as sorted_msm, Plan};
    let n = 9000;
    let mut q = gpu.device.queue().unwrap();
    let distinct: Vec<G> = (0..5).map(|i| point(rng, i == 4)).collect();
    let bases: Vec<G> = (0..n).map(|_| distinct[rng.gen_range(0..5)]).collect();
    let bases_buf = gpu.upload(&mut q, &bases, "bases").unwrap();
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let w = Plan::window(n);
    let shapes = [(w, 1), (w, 64), (11, 1)];
    for mix in [Mix::Equal, Mix::Dense] {
        let sc = scalars(mix, n, rng);
        let want = msm(&bases, &sc, None);
        // The twin changes a term whose base is not the identity.
        let j = (0..n).find(|&j| bases[j] != distinct[4]).unwrap();
        let mut bad = sc.clone();
        bad[j] = ScalarBytes::from_scalar(&(sc[j].to_scalar().unwrap() + Scalar::ONE));
        for (c, run) in shapes {
            let plan = Plan::with_window(n, c, run, G::JACOBIAN_BYTES, 1 << 30).unwrap();
            for (exps, twin) in [(&sc, false), (&bad, true)] {
                let exps_buf = gpu.upload(&mut q, exps, "exponents").unwrap();
                let got = sorted_msm::<D, G>(
                    gpu,
                    &mut q,
                    &plan,
                    &bases_buf,
                    None,
                    &exps_buf,
                    0,
                    n,
                    &mut token.backend_buffers(),
                )
                .unwrap();
                if twin {
                    assert_ne!(got, want, "{} {mix:?} {plan:?}: twin", G::NAME);
                } else {
                    assert_eq!(got, want, "{} {mix:?} {plan:?}", G::NAME);
                }
            }
        }
    }
}

/// Six partitions through the engine on `backend` (one worker, the CPU as fallback): every
/// proof verifies, none is lost, the ledger balances. Returns the engine's figures, for the
/// caller to check how many partitions the device did and how many fell back. The device is the
/// first of [`test_devices`].
pub fn check_engine_fallback(backend: Arc<dyn Accelerator>) -> EngineStats {
    let mut rng = rand::thread_rng();
    let shape = cases(&mut rng).remove(0);
    let params = Arc::new(generate_seeded_parameters(shape.clone(), rng.next_u64()).unwrap());
    let pvk = prepare_verifying_key(&params.vk);
    let device = *test_devices(backend.device_count())
        .first()
        .expect("a device to test");
    let config = Config {
        synthesis_workers: 2,
        gpu_workers: 1,
        devices: vec![device],
        fallback: Some(Arc::new(CpuBackend)),
        ..Config::default()
    };
    let engine: Engine<SuiteCircuit, CpuSynthesizer> = Engine::new(
        config,
        CpuSynthesizer,
        backend.clone(),
        Arc::new(CpuBackend),
    )
    .unwrap();
    let prepared = engine.prepare(params).unwrap();
    let job: Vec<SuiteCircuit> = (0..6).map(|_| shape.reseeded(rng.next_u64())).collect();
    let proofs = engine
        .submit(&prepared, job.clone(), &mut rng)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(proofs.len(), job.len(), "a proof was lost");
    let inputs: Vec<_> = job.iter().map(SuiteCircuit::public_inputs).collect();
    assert!(verify_proofs_batch(&pvk, &proofs, &inputs, &mut rng).unwrap());
    let ledger = engine.ledger().clone();
    let stats = engine.shutdown();
    drop(prepared);
    let snap = ledger.snapshot();
    assert!(snap.is_balanced(), "{snap}");
    check_device_memory(&*backend, snap.device_total.peak);
    stats
}

/// A traced engine run (`stats` from [`check_engine_fallback`]): every partition the device
/// proved has spans, of copies in, kernels and copies out, labelled with the accelerator's
/// steps; each lane (device worker, an in-order queue; its copies beside its kernels, another)
/// runs one span at a time; copies carry
/// their bytes; the kernels' own busy time is positive and within the union of copies and
/// kernels, which is no more than the host timed the accelerator calls at.
pub fn check_trace(backend: &dyn Accelerator, stats: &EngineStats) {
    use prover_core::SpanKind;
    let spans = backend.device_trace();
    let proved: u64 = stats.devices.iter().map(|d| d.partitions).sum();
    assert!(proved > 0, "{stats:?}");
    let mut partitions: Vec<u64> = spans.iter().map(|s| s.partition).collect();
    partitions.sort_unstable();
    partitions.dedup();
    assert_eq!(
        partitions,
        (0..proved).collect::<Vec<_>>(),
        "partitions traced"
    );
    // Copies beside the kernels are where the queue can overlap them (CUDA), not on POCL.
    for kind in [SpanKind::CopyIn, SpanKind::CopyOut, SpanKind::Kernel] {
        assert!(spans.iter().any(|s| s.kind == kind), "no {kind} span");
    }
    for step in ["h_ntt", "msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2"] {
        assert!(
            spans
                .iter()
                .any(|s| s.step == step && s.kind == SpanKind::Kernel),
            "no kernel of step {step}"
        );
    }
    for s in &spans {
        assert!(s.end >= s.start && s.start.is_finite(), "{s:?}");
        match s.kind {
            SpanKind::Kernel => assert!(s.bytes == 0 && s.name != "copy" && !s.name.is_empty()),
            _ => assert!(s.bytes > 0 && s.name == "copy", "{s:?}"),
        }
    }
    // A worker's copies beside its kernels are a lane of their own (its second stream).
    type Lane = (usize, usize, bool);
    let mut lanes: std::collections::BTreeMap<Lane, Vec<&prover_core::DeviceSpan>> =
        Default::default();
    for s in &spans {
        let beside = s.kind == SpanKind::CopyBeside;
        lanes
            .entry((s.device, s.worker, beside))
            .or_default()
            .push(s);
    }
    for (lane, mut v) in lanes {
        v.sort_by(|a, b| a.start.total_cmp(&b.start));
        for w in v.windows(2) {
            // One microsecond of slack for the clocks' rounding.
            assert!(
                w[1].start + 1e-6 >= w[0].end,
                "lane {lane:?}: {:?} starts before {:?} ends",
                w[1],
                w[0]
            );
        }
    }
    for d in prover_core::accounting::trace::summarize(&spans) {
        assert_eq!(d.partitions as u64, proved);
        // The kernels took time on the device's clock, and within the copies' and kernels'
        // union.
        assert!(
            d.kernel_busy > 0.0 && d.kernel_busy_fraction() <= d.busy_fraction(),
            "{d:?}"
        );
        // Every span ran inside an accelerator call (the worker waits for its device before
        // it returns), so the device's clock cannot count more busy time than the host's
        // clock counted for the calls (plus a millisecond a partition for the two clocks'
        // rounding): a span timed in the wrong unit, or from the wrong epoch, fails here.
        let host = stats
            .devices
            .iter()
            .find(|s| s.device == d.device)
            .map_or(0.0, |s| s.accelerator_seconds);
        assert!(
            d.busy <= host + 1e-3 * proved as f64,
            "device {}: busy {:.6} s on its clock, the host timed its accelerator calls at {host:.6} s",
            d.device,
            d.busy
        );
    }
}

/// Synthetic bases (a timing workload's key): the kernel's bases equal the CPU's
/// (`T[u_i] + T[v_i]`) for G1 and G2, with long and short per-thread chains (one inversion per
/// chain); another seed gives other bases. Then a whole synthetic partition through
/// `prepare_synthetic` and a worker: its sums equal the CPU backend's on the same bases made
/// on the host.
pub fn check_synthetic<D: Device>(backend: &GpuAccelerator<D>, device: usize) {
    use gpu_core::synthetic::{synthetic_base, synthetic_bases, table, SyntheticKey};
    let gpu = backend.device(device).expect("a device");
    let mut rng = rand::thread_rng();
    let mut q = gpu.device.queue().expect("a queue");
    let seed = rng.next_u32();
    let t1 = table::<G1Affine>(5, rng.next_u64());
    let t2 = table::<G2Affine>(3, rng.next_u64());
    for (n, threads) in [(1, None), (700, Some(7)), (700, None), (5, Some(64))] {
        let buf = synthetic_bases(gpu, &mut q, &t1, seed, n, threads, "t").expect("G1 bases");
        let got: Vec<G1Affine> = read_points(gpu, &mut q, &buf, n);
        for (i, p) in got.iter().enumerate() {
            assert_eq!(
                *p,
                synthetic_base(&t1, seed, i as u32),
                "G1 base {i} of {n}, {threads:?}"
            );
        }
        let other = synthetic_bases(gpu, &mut q, &t1, seed ^ 1, n, threads, "t").expect("G1");
        let other: Vec<G1Affine> = read_points(gpu, &mut q, &other, n);
        assert!(n < 5 || other != got, "the seed is ignored");
    }
    let buf = synthetic_bases(gpu, &mut q, &t2, seed, 90, Some(4), "t").expect("G2 bases");
    let got: Vec<G2Affine> = read_points(gpu, &mut q, &buf, 90);
    for (i, p) in got.iter().enumerate() {
        assert_eq!(*p, synthetic_base(&t2, seed, i as u32), "G2 base {i}");
    }
    // A whole partition.
    let spec = proofline_workloads::synthetic::SyntheticSpec::scaled(9);
    let partition = spec.partition(rng.next_u64());
    let key = SyntheticKey {
        table_log: 6,
        ..SyntheticKey::new(
            proofline_workloads::synthetic::key_shape(&partition),
            rng.next_u64(),
        )
    };
    let ledger = StageLedger::new();
    let prepared = backend
        .prepare_synthetic(&key, &ledger)
        .expect("prepare_synthetic");
    let mut worker = backend.worker(device, 0).expect("a worker");
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let got = worker
        .accelerate(&prepared, partition.clone(), &mut token.backend_buffers())
        .unwrap_or_else(|b| panic!("synthetic partition handed back: {}", b.error));
    token.release_backend_buffers();
    drop(token);
    let params = Arc::new(key.host_parameters());
    let cpu = CpuBackend
        .prepare(params.clone(), &StageLedger::new())
        .expect("cpu");
    let mut token = ledger.enter(Stage::OnAccelerator, 1, 0);
    let want = backend_cpu::CpuWorker
        .accelerate(&cpu, partition, &mut token.backend_buffers())
        .unwrap_or_else(|b| panic!("the CPU reference failed: {}", b.error));
    token.release_backend_buffers();
    drop(token);
    let same = |a: &G1Projective, b: &G1Projective, what: &str| {
        assert_eq!(a.to_affine(), b.to_affine(), "synthetic partition: {what}")
    };
    // The check a synthetic partition too large for the CPU gets: it passes here, and fails
    // for a sum moved by the generator.
    assert_eq!(
        key.check_sums(&got),
        Ok(()),
        "synthetic partition: known answers"
    );
    let moved = prover_core::PendingProof {
        sums: prover_core::AcceleratorSums {
            a: got.sums.a + G1Projective::generator(),
            ..got.sums
        },
        b_g2: got.b_g2,
        plan: got.plan.clone(),
        witness: got.witness.clone(),
        spent: None,
    };
    assert!(key.check_sums(&moved).is_err(), "synthetic partition: twin");
    same(&got.sums.h, &want.sums.h, "h");
    same(&got.sums.l, &want.sums.l, "l");
    same(&got.sums.a, &want.sums.a, "a");
    same(&got.sums.b_g1, &want.sums.b_g1, "b_g1");
    let b_g2 = backend_cpu::msm::msm_terms(&params.b_g2, &want.plan.b, &want.witness);
    assert_eq!(
        got.b_g2.map(|b| b.to_affine()),
        Some(b_g2.to_affine()),
        "b_g2"
    );
    drop(prepared);
    assert!(ledger.snapshot().is_balanced(), "{}", ledger.snapshot());
}

fn read_points<D: Device, T: gpu_core::device::DeviceCopy + Default>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    buf: &gpu_core::memory::DeviceBuffer<D>,
    n: usize,
) -> Vec<T> {
    let _ = gpu;
    let mut out = vec![T::default(); n];
    q.read(buf.raw(), 0, bytes_of_mut(&mut out)).expect("read");
    out
}

/// A margin for device bytes the ledger does not count (the H pipeline's tables are counted as
/// scratch; small per-launch tables may not be).
const UNLEDGERED: u64 = 64 << 10;

/// Slack of the driver's figure above the ledger's device peak: allocations round up (to 2 MiB
/// pages, and a memory pool grows in larger steps), and the driver reserves memory the
/// ledger never sees (kernels' local memory as they are first launched, the context's heaps).
/// An H200 holds 70 MiB above its baseline for a run whose ledger peak is under 1 MiB: local
/// memory for every resident thread (132 SMs x 2048 threads) is reserved at the first launch.
const DRIVER_SLACK: u64 = 128 << 20;

/// The ledger's device peak against what the backend allocated (one worker, no errors mid-run:
/// every buffer is registered after its allocation and released before its free, so the
/// ledger never counts more, and misses only the small tables), and against the driver's own
/// figure where the API reports one (CUDA: memory in use above what it was when the device
/// was opened). The driver's is the independent one: the allocated peak counts the same
/// requested sizes as the ledger. The driver must account for the ledger's peak
/// (`ledger <= driver + 2 MiB`, one page of the driver's rounding) and not hold much more
/// (`driver <= 1.25 ledger + 128 MiB`: rounding up, pools, and what the driver reserves for
/// itself). OpenCL reports no such figure, so there the driver's side is not checked.
pub fn check_device_memory(backend: &dyn Accelerator, ledger_peak: u64) {
    for m in backend.device_memory() {
        eprintln!(
            "device {} memory: ledger peak {ledger_peak} B, allocated peak {} B, driver {:?} B above a baseline of {:?} B",
            m.device,
            m.allocated_peak,
            m.driver_above_baseline(),
            m.driver_baseline
        );
        assert!(
            ledger_peak <= m.allocated_peak,
            "the ledger counted {ledger_peak} device bytes at its peak, more than were allocated ({})",
            m.allocated_peak
        );
        assert!(
            m.allocated_peak <= ledger_peak + UNLEDGERED,
            "{} device bytes were allocated at the peak, the ledger counted {ledger_peak}",
            m.allocated_peak
        );
        match m.driver_above_baseline() {
            Some(driver) => assert!(
                driver_accounts_for(driver, ledger_peak),
                "device {}: the driver saw {driver} B in use above its baseline at the peak, \
                 the ledger counted {ledger_peak} B (allowed: from the ledger's less 2 MiB to \
                 1.25 times it plus 128 MiB)",
                m.device
            ),
            None => eprintln!(
                "device {}: the API reports no driver figure (OpenCL); the ledger is checked \
                 against the allocated sizes only",
                m.device
            ),
        }
    }
}

/// Whether the driver's figure `driver` (bytes in use above its baseline, at its peak) is
/// within [`check_device_memory`]'s tolerance of the ledger's peak.
fn driver_accounts_for(driver: u64, ledger_peak: u64) -> bool {
    ledger_peak <= driver + (2 << 20) && driver <= ledger_peak + ledger_peak / 4 + DRIVER_SLACK
}

/// Equal lists, or a panic naming `what`, the first differing index and its scalar position
/// (not the whole lists).
fn assert_same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("{what}: entry {i} differs: {:?} != {:?}", got[i], want[i]);
    }
}

/// Parameter generation on a device: fixed-base products of G1 and G2 equal the CPU's for
/// every window width, edge and random scalars (zeros, one, -1, powers of two and their
/// predecessors, repeats), with a negative twin (another base's table); then whole parameter
/// sets of the suite's circuits generated through `m` are byte-identical to the CPU
/// generator's for the same fresh trapdoor, with a negative twin (another trapdoor).
pub fn check_generator(m: &dyn Multiplier) {
    let mut rng = rand::thread_rng();
    let mut scalars = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(2u64)];
    for k in [1u32, 15, 16, 17, 31, 32, 63, 64, 127, 128, 254] {
        let p = Scalar::from(2u64).pow_vartime([k as u64]);
        scalars.extend([p, p - Scalar::ONE]);
    }
    scalars.extend((0..40).map(|_| Scalar::random(&mut rng)));
    // Zeros (identity products) first, inside and last among a device thread's points.
    scalars.push(Scalar::ZERO);
    scalars.extend_from_within(3..10);
    scalars.push(Scalar::ZERO);
    let g1 = G1Projective::random(&mut rng);
    let g2 = G2Projective::random(&mut rng);
    for window in [2usize, 5, 8, 11, 13, 16] {
        let t1 = FixedBase::with_window(g1, window);
        let got = m.g1(&t1, &scalars).expect("G1 products");
        let want: Vec<G1Affine> = scalars.iter().map(|s| (g1 * s).to_affine()).collect();
        assert_same(&got, &want, &format!("G1 products, window {window}"));
        let other = FixedBase::with_window(g1.double(), window);
        let wrong = m.g1(&other, &scalars).expect("G1 products");
        assert!(wrong != want, "another base's table, window {window}");
        // (G2 tables of the widest windows take seconds to build on the host.)
        if window <= 11 {
            let t2 = FixedBase::with_window(g2, window);
            let got = m.g2(&t2, &scalars).expect("G2 products");
            let want: Vec<G2Affine> = scalars.iter().map(|s| (g2 * s).to_affine()).collect();
            assert_same(&got, &want, &format!("G2 products, window {window}"));
        }
    }
    assert!(m
        .g1(&FixedBase::with_window(g1, 4), &[])
        .unwrap()
        .is_empty());

    let bytes = |p: &prover_core::Parameters| {
        let mut b = Vec::new();
        p.write(&mut b).expect("in memory");
        b
    };
    for c in cases(&mut rng).into_iter().take(3) {
        let trapdoor = Trapdoor::random(&mut rng);
        let cpu = generate_parameters(c.clone(), &trapdoor).expect("CPU parameters");
        let dev = generate_parameters_on(c.clone(), &trapdoor, &(), m).expect("device parameters");
        assert!(
            bytes(&cpu) == bytes(&dev),
            "{}: device parameters differ",
            c.describe()
        );
        let other = Trapdoor::random(&mut rng);
        let dev2 = generate_parameters_on(c.clone(), &other, &(), m).expect("device parameters");
        assert!(
            bytes(&cpu) != bytes(&dev2),
            "{}: trapdoor ignored",
            c.describe()
        );
    }
}

/// A device memory limit small enough that no query of the suite's circuits stays resident
/// (every base is streamed in chunks), big enough for a G2 bucket set.
pub const TIGHT: u64 = 320 << 10;

/// Expands to the whole device suite of a backend on gpu-core: `$open(limit, faults, trace)`
/// returns the backend (`Option`: `None` skips, as the backend's `open_or_skip` decides). The
/// conformance checks run with the device's memory and under [`TIGHT`]; the stage checks
/// compare the NTT, the H pipeline and the MSMs with the CPU; the fault checks make calls 0 and
/// 2 fail and see the fallback prove them, and see nothing fall back without faults.
#[macro_export]
macro_rules! device_backend_tests {
    ($open:expr) => {
        fn each_limit(check: impl Fn(&dyn ::prover_core::Accelerator)) {
            for limit in [None, Some($crate::device::TIGHT)] {
                if let Some(b) = ($open)(limit, $crate::device::Faults::none(), false) {
                    eprintln!("memory limit: {limit:?}");
                    check(&b);
                }
            }
        }

        #[test]
        fn conformance_accelerate_matches_cpu() {
            each_limit(|b| $crate::check_accelerate(b));
        }

        #[test]
        fn conformance_wrong_shape_is_handed_back() {
            each_limit(|b| $crate::check_wrong_shape(b));
        }

        #[test]
        fn conformance_proofs_match_cpu_bytes_and_bellperson_verifies() {
            each_limit(|b| $crate::check_proofs(b, &::backend_cpu::CpuBackend));
        }

        #[test]
        fn conformance_engine_proves_on_every_device() {
            for limit in [None, Some($crate::device::TIGHT)] {
                if let Some(b) = ($open)(limit, $crate::device::Faults::none(), false) {
                    $crate::check_engine(
                        ::std::sync::Arc::new(b),
                        ::std::sync::Arc::new(::backend_cpu::CpuBackend),
                    );
                }
            }
        }

        #[test]
        fn bounds_copies_outside_a_buffer_are_refused() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                $crate::bounds::check_copies(b.device(0).expect("a device"));
            }
        }

        #[test]
        fn bounds_dense_msms_past_their_bases_or_exponents_are_refused() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                $crate::bounds::check_dense_msms(b.device(0).expect("a device"));
            }
        }

        #[test]
        fn bounds_sorted_msms_past_their_buffers_are_refused() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                $crate::bounds::check_sorted_msms(b.device(0).expect("a device"));
            }
        }

        #[test]
        fn stages_ntt_and_quotient_match_cpu() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in $crate::device::test_devices(::prover_core::Accelerator::device_count(&b))
                {
                    eprintln!("device {d}");
                    let sizes = $crate::device::SuiteSizes::from_env();
                    $crate::device::check_ntt_and_quotient(b.device(d).expect("a device"), sizes);
                }
            }
        }

        #[test]
        fn stages_known_answers_at_the_suites_sizes() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in $crate::device::test_devices(::prover_core::Accelerator::device_count(&b))
                {
                    eprintln!("device {d}");
                    let sizes = $crate::device::SuiteSizes::from_env();
                    $crate::device::check_known_answers(b.device(d).expect("a device"), sizes);
                }
            }
        }

        #[test]
        fn stages_msms_match_cpu_resident_and_streamed() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in $crate::device::test_devices(::prover_core::Accelerator::device_count(&b))
                {
                    eprintln!("device {d}");
                    let sizes = $crate::device::SuiteSizes::from_env();
                    $crate::device::check_msms(b.device(d).expect("a device"), sizes, false);
                }
            }
            let limit = Some($crate::device::STREAM_LIMIT);
            if let Some(b) = ($open)(limit, $crate::device::Faults::none(), false) {
                for d in $crate::device::test_devices(::prover_core::Accelerator::device_count(&b))
                {
                    eprintln!("device {d}, streamed");
                    let sizes = $crate::device::SuiteSizes::from_env();
                    $crate::device::check_msms(b.device(d).expect("a device"), sizes, true);
                }
            }
        }

        #[test]
        fn stages_copies_beside_the_kernels_keep_their_bytes() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in $crate::device::test_devices(::prover_core::Accelerator::device_count(&b))
                {
                    eprintln!("device {d}");
                    $crate::device::check_copies_beside(b.device(d).expect("a device"));
                }
            }
        }

        #[test]
        fn stages_parameters_generated_on_the_device_equal_the_cpus() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in $crate::device::test_devices(::prover_core::Accelerator::device_count(&b))
                {
                    eprintln!("device {d}");
                    $crate::device::check_generator(&b.multiplier(d).expect("a device"));
                }
            }
        }

        #[test]
        fn stages_scan_on_device_lists_what_the_host_scan_lists() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in $crate::device::test_devices(::prover_core::Accelerator::device_count(&b))
                {
                    eprintln!("device {d}");
                    $crate::device::check_device_scan(b.device(d).expect("a device"));
                }
            }
        }

        #[test]
        fn stages_synthetic_bases_and_partition_match_cpu() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in $crate::device::test_devices(::prover_core::Accelerator::device_count(&b))
                {
                    eprintln!("device {d}");
                    $crate::device::check_synthetic(&b, d);
                }
            }
        }

        #[test]
        fn trace_times_every_copy_and_kernel_of_every_partition() {
            let Some(b) = ($open)(None, $crate::device::Faults::none(), true) else {
                return;
            };
            let b = ::std::sync::Arc::new(b);
            let stats = $crate::device::check_engine_fallback(b.clone());
            $crate::device::check_trace(&*b, &stats);
            // Its negative twin: without tracing, nothing is recorded.
            let Some(b) = ($open)(None, $crate::device::Faults::none(), false) else {
                return;
            };
            let b = ::std::sync::Arc::new(b);
            $crate::device::check_engine_fallback(b.clone());
            assert!(
                ::prover_core::Accelerator::device_trace(&*b).is_empty(),
                "spans recorded with tracing off"
            );
        }

        #[test]
        fn faults_injected_fall_back_and_every_proof_verifies() {
            let faults = $crate::device::Faults::fail_calls([0, 2]);
            let Some(b) = ($open)(None, faults, false) else {
                return;
            };
            let stats = $crate::device::check_engine_fallback(::std::sync::Arc::new(b));
            assert_eq!(stats.fallback_partitions, 2, "{stats:?}");
            assert_eq!(stats.devices[0].failures, 2, "{stats:?}");
            assert_eq!(stats.devices[0].partitions, 4, "{stats:?}");
            assert!(stats.devices[0].in_service);
        }

        #[test]
        fn faults_none_nothing_falls_back_even_streaming() {
            for limit in [None, Some($crate::device::TIGHT)] {
                let Some(b) = ($open)(limit, $crate::device::Faults::none(), false) else {
                    return;
                };
                let stats = $crate::device::check_engine_fallback(::std::sync::Arc::new(b));
                assert_eq!(stats.fallback_partitions, 0, "limit {limit:?}: {stats:?}");
                assert_eq!(stats.devices[0].failures, 0, "limit {limit:?}: {stats:?}");
                assert_eq!(stats.devices[0].partitions, 6, "limit {limit:?}: {stats:?}");
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_core::synthetic::SyntheticCurve;

    #[test]
    fn test_devices_are_ordinals_the_backend_has() {
        assert_eq!(parse_test_devices("0", 1), Ok(vec![0]));
        assert_eq!(parse_test_devices("1, 0", 2), Ok(vec![1, 0]));
        // Its twins: a device not there, a repeat, junk.
        assert!(parse_test_devices("1", 1)
            .unwrap_err()
            .contains("not there"));
        assert!(parse_test_devices("0,0", 2).unwrap_err().contains("twice"));
        assert!(parse_test_devices("gpu0", 2)
            .unwrap_err()
            .contains("not a device"));
        assert!(parse_test_devices("", 2).is_err());
    }

    #[test]
    fn suite_sizes_are_small_large_or_production() {
        assert_eq!(SuiteSizes::parse("small"), Ok(SuiteSizes::Small));
        assert_eq!(SuiteSizes::parse("large"), Ok(SuiteSizes::Large));
        assert_eq!(
            SuiteSizes::parse(" production "),
            Ok(SuiteSizes::Production)
        );
        let p = SuiteSizes::Production.known();
        assert_eq!(
            (p.ntt_log, p.g1_logs, p.g2_logs),
            (27, vec![24, 27], vec![24])
        );
        // Its twins: another word is refused with the choices; the small suite stays small.
        let err = SuiteSizes::parse("huge").unwrap_err();
        assert!(err.contains("`production`"), "{err}");
        assert!(SuiteSizes::parse("").is_err());
        assert!(SuiteSizes::Small.known().ntt_log <= 14);
    }

    /// The known-answer MSMs' construction against the CPU backend's MSM, G1 and G2, at a
    /// small size; another seed, or a changed exponent, gives another answer.
    fn known_answer_is_the_cpu_msm<C>(n: usize)
    where
        C: SyntheticCurve
            + backend_cpu::msm::MsmGroup<Projective = <C as gpu_core::msm::DeviceCurve>::Projective>,
        <C as gpu_core::msm::DeviceCurve>::Projective: std::fmt::Debug,
    {
        use gpu_core::synthetic::{known_msm, random_exponents, synthetic_base, table_with_logs};
        let mut rng = rand::thread_rng();
        let (t, logs) = table_with_logs::<C>(4, rng.next_u64());
        let seed = rng.next_u32();
        let bases: Vec<C> = (0..n as u32).map(|i| synthetic_base(&t, seed, i)).collect();
        let exps = random_exponents(n, rng.next_u64());
        let want = msm(&bases, &exps, None);
        assert_eq!(
            known_msm::<C>(&logs, seed, &exps),
            Some(want),
            "{}",
            C::NAME
        );
        assert_ne!(known_msm::<C>(&logs, seed ^ 1, &exps), Some(want));
        let mut bad = exps.clone();
        bad[n / 2] = ScalarBytes::from_scalar(&Scalar::ONE);
        assert_ne!(known_msm::<C>(&logs, seed, &bad), Some(want));
    }

    #[test]
    fn known_answers_equal_the_cpu_msm() {
        known_answer_is_the_cpu_msm::<G1Affine>(500);
        known_answer_is_the_cpu_msm::<G2Affine>(60);
    }

    #[test]
    fn the_driver_accounts_for_the_ledger_within_its_tolerance() {
        let mib = 1u64 << 20;
        // Rounded up a little, or a pool's step above: accounted for.
        assert!(driver_accounts_for(1000 * mib, 1000 * mib));
        assert!(driver_accounts_for(1000 * mib - mib, 1000 * mib));
        assert!(driver_accounts_for(1250 * mib + 128 * mib, 1000 * mib));
        assert!(driver_accounts_for(70 * mib, mib));
        assert!(driver_accounts_for(128 * mib, 0));
        // Its twins: less than the ledger's peak (a buffer the driver never held), or far
        // more (a buffer the ledger never counted).
        assert!(!driver_accounts_for(1000 * mib - 3 * mib, 1000 * mib));
        assert!(!driver_accounts_for(1250 * mib + 129 * mib, 1000 * mib));
        assert!(!driver_accounts_for(129 * mib, 0));
    }
}
