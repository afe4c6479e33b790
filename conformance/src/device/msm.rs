//! The query MSMs on a device against the CPU backend: each kernel, resident and streamed
//! bases, and the sorted MSM under shapes the prover does not pick by itself.

use backend_cpu::msm::msm;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use gpu_core::device::Device;
use gpu_core::msm::{query_msm, scanned_msm, Bases, DeviceScan, DeviceWitness, MsmKernel, Scan};
use gpu_core::GpuDevice;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::stages::density::{Density, ScalarBytes};
use prover_core::stages::plan::{Filter, MsmTerm, ScalarSource};
use prover_core::stages::Witness;
use rand::{Rng, RngCore};

use super::sizes::SuiteSizes;

/// The raw bytes of a scalar (on the device side: canonical limbs after `to_canonical`).
pub(super) fn bytes(s: &Scalar) -> [u8; 32] {
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
    use gpu_core::msm::pippenger::{msm as sorted_msm, Plan};
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
