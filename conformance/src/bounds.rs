//! Device buffers' bounds, on any device (the device suite, [`crate::device_backend_tests`],
//! runs them on each API's first device): copies
//! outside a buffer, and MSMs of more terms than their bases, indices or exponents hold, are
//! errors raised before the API is asked; their in-range twins succeed with the CPU's sums.

use blstrs::{G1Affine, G1Projective, Scalar};
use gpu_core::device::{Device, RawBuffer};
use gpu_core::msm::pippenger::{msm as sorted_msm, Plan};
use gpu_core::msm::{dense_msm, Bases, DeviceCurve, MsmKernel};
use gpu_core::{GpuDevice, Queue};
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::stages::density::ScalarBytes;
use rand::Rng;

/// Terms of the MSMs below.
const N: usize = 40;

/// `N` distinct bases and random exponents.
fn terms() -> (Vec<G1Affine>, Vec<ScalarBytes>) {
    let mut rng = rand::thread_rng();
    let bases = gpu_core::synthetic::table::<G1Affine>(6, rng.gen())[..N].to_vec();
    let exps = (0..N)
        .map(|_| {
            // 253 random bits: below the modulus.
            let mut le: [u8; 32] = rng.gen();
            le[31] &= 0x1f;
            let s: Option<Scalar> = Scalar::from_bytes_le(&le).into();
            ScalarBytes::from_scalar(&s.expect("below the modulus"))
        })
        .collect();
    (bases, exps)
}

/// Writes and reads inside a buffer work; one byte past its end, an offset past its end and an
/// overflowing offset are refused, naming the buffer's length.
pub fn check_copies<D: Device>(gpu: &GpuDevice<D>) {
    let mut q = gpu.device.queue().unwrap();
    let buf = gpu.device.alloc(64).unwrap();
    assert_eq!(buf.len_bytes(), 64);
    // Inside: up to the end, and an empty copy at the end; the bytes come back.
    let bytes: Vec<u8> = (0..32).collect();
    q.write(&buf, 32, &bytes).unwrap();
    q.write(&buf, 64, &[]).unwrap();
    let mut back = vec![0u8; 32];
    q.read(&buf, 32, &mut back).unwrap();
    assert_eq!(back, bytes);
    for (offset, len) in [(33usize, 32usize), (65, 0), (usize::MAX, 1)] {
        let e = q.write(&buf, offset, &vec![0u8; len]).unwrap_err();
        assert!(e.during.starts_with("writing"), "{e}");
        assert!(
            e.detail.contains("buffer of 64 bytes") || e.detail.contains("overflow"),
            "{e}"
        );
        let e = q.read(&buf, offset, &mut vec![0u8; len]).unwrap_err();
        assert!(e.during.starts_with("reading"), "{e}");
    }
}

/// Dense MSMs, resident and streamed, with either kernel: `N` terms against `N` bases and
/// exponents give the CPU's sum; one term more than the bases or the exponents hold is an error
/// naming both lengths.
pub fn check_dense_msms<D: Device>(gpu: &GpuDevice<D>) {
    let mut q = gpu.device.queue().unwrap();
    let (bases, scalars) = terms();
    let want = backend_cpu::msm::msm(&bases, &scalars, None);
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let all_bases = gpu.upload(&mut q, &bases, "bases").unwrap();
    let few_bases = gpu.upload(&mut q, &bases[..N - 1], "bases").unwrap();
    let all_exps = gpu.upload(&mut q, &scalars, "exponents").unwrap();
    let few_exps = gpu.upload(&mut q, &scalars[..N - 1], "exponents").unwrap();
    for kernel in [MsmKernel::Stock, MsmKernel::Sorted] {
        let mut run = |bases: Bases<'_, D, G1Affine>, exps, terms| {
            dense_msm::<D, G1Affine>(
                gpu,
                &mut q,
                bases,
                exps,
                terms,
                kernel,
                &mut token.backend_buffers(),
            )
        };
        assert_eq!(
            run(Bases::Resident(&all_bases), &all_exps, N).unwrap(),
            want
        );
        assert_eq!(run(Bases::Streamed(&bases), &all_exps, N).unwrap(), want);
        for (bases, exps, held) in [
            (
                Bases::Resident(&few_bases),
                &all_exps,
                "39 bases, 40 exponents",
            ),
            (
                Bases::Resident(&all_bases),
                &few_exps,
                "40 bases, 39 exponents",
            ),
            (
                Bases::Streamed(&bases[..N - 1]),
                &all_exps,
                "39 bases, 40 exponents",
            ),
            (Bases::Streamed(&bases), &few_exps, "40 bases, 39 exponents"),
        ] {
            let e = run(bases, exps, N).unwrap_err();
            assert!(e.detail.contains(held), "{kernel:?}: {e}");
            assert!(e.detail.contains("40 terms"), "{kernel:?}: {e}");
        }
    }
}

/// The sorted MSM called directly: dense, gathered and from an exponent offset, in range, give
/// the CPU's sums; a term past the bases and exponents, past the indices or past the exponents
/// from an offset (an overflowing one too) is an error naming the lengths.
pub fn check_sorted_msms<D: Device>(gpu: &GpuDevice<D>) {
    let mut q = gpu.device.queue().unwrap();
    let (bases, scalars) = terms();
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let bases_buf = gpu.upload(&mut q, &bases, "bases").unwrap();
    let exps_buf = gpu.upload(&mut q, &scalars, "exponents").unwrap();
    let idx: Vec<u32> = (0..N as u32).rev().collect();
    let idx_buf = gpu.upload(&mut q, &idx, "indices").unwrap();
    let plan = Plan::new(N + 1, G1Affine::JACOBIAN_BYTES, 1 << 30, 1).unwrap();
    let mut run = |idx, exp_offset, terms| {
        sorted_msm::<D, G1Affine>(
            gpu,
            &mut q,
            &plan,
            &bases_buf,
            idx,
            &exps_buf,
            exp_offset,
            terms,
            &mut token.backend_buffers(),
        )
    };
    let want = backend_cpu::msm::msm(&bases, &scalars, None);
    assert_eq!(run(None, 0, N).unwrap(), want);
    let reversed: Vec<G1Affine> = idx.iter().map(|&i| bases[i as usize]).collect();
    let want = backend_cpu::msm::msm(&reversed, &scalars, None);
    assert_eq!(run(Some(&idx_buf), 0, N).unwrap(), want);
    let last = G1Projective::from(bases[0]) * scalars[N - 1].to_scalar().unwrap();
    assert_eq!(run(None, N - 1, 1).unwrap(), last);
    for (idx, exp_offset, terms, says) in [
        (None, 0, N + 1, "40 bases, 40 exponents"),
        (Some(&idx_buf), 0, N + 1, "40 indices"),
        (None, N - 1, 2, "2 terms from exponent 39"),
        (None, usize::MAX, 1, "40 exponents"),
    ] {
        let e = run(idx, exp_offset, terms).unwrap_err();
        assert!(e.detail.contains(says), "{e}");
    }
}
