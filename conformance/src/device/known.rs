//! A production partition's transform and MSMs, checked against answers known without a CPU
//! MSM.

use blstrs::{G1Affine, G2Affine, Scalar};
use ff::Field;
use gpu_core::device::Device;
use gpu_core::msm::{Bases, MsmKernel};
use gpu_core::ntt::{ntt, NttShape, NttTables};
use gpu_core::{GpuDevice, Queue};
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::stages::density::ScalarBytes;
use prover_core::Domain;
use rand::{Rng, RngCore};

use super::ntt::read_scalars;
use super::sizes::SuiteSizes;

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

#[cfg(test)]
mod tests {
    use super::*;
    use backend_cpu::msm::msm;
    use gpu_core::synthetic::SyntheticCurve;

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
}
