//! The device stages against the CPU backend on fresh random inputs: NTT, inverse and coset
//! results; G1 and G2 MSMs of zeros, ones, mixed and dense scalars over repeated bases, at
//! several sizes (powers of two and not); whole partitions with no hand-back, with and without
//! a memory limit that forces streamed bases and the split H pipeline.

mod common;

use backend_cpu::msm::msm;
use backend_cpu::ntt::{ntt as cpu_ntt, quotient as cpu_quotient};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use common::backend_with;
use ff::{Field, PrimeField};
use gpu_core::device::{bytes_of_mut, Device};
use gpu_core::msm::{query_msm, Bases, Scan};
use gpu_core::ntt::{ntt, quotient, NttMode};
use gpu_core::{Faults, GpuDevice, Queue};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use prover_core::density::{Density, ScalarBytes};
use prover_core::ledger::{Stage, StageLedger};
use prover_core::plan::{Filter, MsmTerm, ScalarSource};
use prover_core::synthesize::Witness;
use prover_core::Domain;
use rand::Rng;

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

#[test]
fn opencl_ntt_inverse_and_quotient_match_cpu() {
    let Some(b) = backend_with(None, Faults::none()) else {
        return;
    };
    let gpu: &GpuDevice<_> = b.device(0).unwrap();
    let mut q = gpu.device.queue().unwrap();
    let mut rng = rand::thread_rng();
    for log in [0u32, 1, 3, 9, 12] {
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
            // Negative twin: the wrong root gives another transform.
            if log > 1 {
                let mut y = gpu.upload(&mut q, &v, "y").unwrap();
                ntt(gpu, &mut q, &mut y, &mut t, log, omega.square()).unwrap();
                assert_ne!(read_scalars(&mut q, &y, n), want);
            }
        }
        // The whole H pipeline (coset NTTs inside), both memory modes, shorter inputs padded.
        let len = n - n / 3;
        let (a, bb, c) = (
            random_scalars(len, &mut rng),
            random_scalars(len, &mut rng),
            random_scalars(len, &mut rng),
        );
        let want = cpu_quotient(a.clone(), bb.clone(), c.clone(), &d);
        for mode in [NttMode::Resident, NttMode::Split] {
            let ledger = StageLedger::new();
            let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
            let h = quotient(
                gpu,
                &mut q,
                [&a, &bb, &c],
                &d,
                mode,
                &mut token.backend_buffers(),
            )
            .unwrap();
            // The device leaves canonical exponents: compare their bytes with the CPU's.
            let got = read_scalars(&mut q, &h, n);
            let got: Vec<[u8; 32]> = got[..n - 1].iter().map(bytes).collect();
            let want: Vec<[u8; 32]> = want.iter().map(|s| s.to_repr()).collect();
            assert_eq!(got, want, "quotient 2^{log} {mode:?}");
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
}

fn scalars(mix: Mix, n: usize, rng: &mut impl rand::RngCore) -> Vec<ScalarBytes> {
    (0..n)
        .map(|i| {
            let s = match (mix, i % 4) {
                (Mix::Zeros, _) => Scalar::ZERO,
                (Mix::Ones, _) => Scalar::ONE,
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

fn check_msm<G, P, R: rand::RngCore>(
    gpu: &GpuDevice<backend_opencl::OpenClDevice>,
    rng: &mut R,
    stream: bool,
    point: impl Fn(&mut R, bool) -> G,
) where
    G: gpu_core::msm::DeviceCurve<Projective = P>
        + backend_cpu::msm::MsmGroup<Projective = P>
        + PartialEq,
    P: Group,
{
    let mut q = gpu.device.queue().unwrap();
    for n in [1usize, 7, 100, 257, 3000] {
        for mix in [Mix::Zeros, Mix::Ones, Mix::Mixed, Mix::Dense] {
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
            let scan = Scan::new([&term], &w).unwrap();
            let ledger = StageLedger::new();
            let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
            let resident = (!stream).then(|| gpu.upload(&mut q, &bases, "bases").unwrap());
            let mut run = |scan: &Scan| {
                let at = match &resident {
                    Some(r) => Bases::Resident(r),
                    None => Bases::Streamed(&bases[..]),
                };
                query_msm::<_, G>(gpu, &mut q, at, scan, &mut token.backend_buffers())
                    .unwrap_or_else(|e| panic!("{} n {n} {mix:?}: {e}", G::NAME))
            };
            let got = run(&scan);
            assert_eq!(got, want, "{} n {n} {mix:?} stream {stream}", G::NAME);
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
                let scan = Scan::new([&term], &w).unwrap();
                let got = run(&scan);
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
const STREAM_LIMIT: u64 = 320 << 10;

#[test]
fn opencl_g1_and_g2_msms_match_cpu() {
    let mut rng = rand::thread_rng();
    // Unlimited (resident bases), then a limit that streams the bases in small chunks.
    for (limit, stream) in [(None, false), (Some(STREAM_LIMIT), true)] {
        let Some(b) = backend_with(limit, Faults::none()) else {
            return;
        };
        let gpu = b.device(0).unwrap();
        check_msm(gpu, &mut rng, stream, |r, zero| {
            if zero {
                G1Affine::identity()
            } else {
                G1Projective::random(r).to_affine()
            }
        });
        check_msm(gpu, &mut rng, stream, |r, zero| {
            if zero {
                G2Affine::identity()
            } else {
                G2Projective::random(r).to_affine()
            }
        });
    }
}
