//! The curves the device MSMs run on ([`DeviceCurve`]: G1 and G2, each with its kernels), and
//! the check every MSM makes of its operands before a launch ([`check_terms`]).

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use group::Group;
use prover_core::stages::density::ScalarBytes;

use crate::context::GpuDevice;
use crate::device::{Device, DeviceCopy, DeviceError, DeviceResult};
use crate::memory::DeviceBuffer;

/// A curve the device MSMs run on.
pub trait DeviceCurve: DeviceCopy {
    /// The projective (jacobian) sum type, with the device's layout.
    type Projective: DeviceCopy + Group + Send + Sync;
    /// Bytes of a jacobian point.
    const JACOBIAN_BYTES: u64 = std::mem::size_of::<Self::Projective>() as u64;
    /// Bytes of an affine base.
    const AFFINE_BYTES: u64 = std::mem::size_of::<Self>() as u64;
    /// The name in messages.
    const NAME: &'static str;
    /// The batch-addition kernel.
    fn sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// The bucket MSM kernel.
    fn msm_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// The sorted MSM's kernels: adding runs, their heads and tails made jacobian, completing
    /// the buckets.
    fn pl_kernels<D: Device>(gpu: &GpuDevice<D>) -> [&str; 3];
    /// The sorted MSM's reduction kernel.
    fn pl_reduce_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// The sorted MSM's kernel adding groups of partial sums.
    fn pl_sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// Parameter generation's fixed-base products.
    fn fixed_base_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// Parameter generation: jacobian products made affine.
    fn to_affine_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// Timing workloads' synthetic bases.
    fn synthetic_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
}

impl DeviceCurve for G1Affine {
    type Projective = G1Projective;
    const NAME: &'static str = "G1";
    fn sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_sum_indexed
    }
    fn msm_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_msm
    }
    fn pl_kernels<D: Device>(gpu: &GpuDevice<D>) -> [&str; 3] {
        let n = &gpu.names;
        [&n.g1_pl_runs, &n.g1_pl_edges, &n.g1_pl_fixup]
    }
    fn pl_reduce_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_pl_reduce
    }
    fn pl_sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_pl_sum
    }
    fn fixed_base_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_fixed_base
    }
    fn to_affine_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_to_affine
    }
    fn synthetic_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_synthetic
    }
}

impl DeviceCurve for G2Affine {
    type Projective = G2Projective;
    const NAME: &'static str = "G2";
    fn sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_sum_indexed
    }
    fn msm_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_msm
    }
    fn pl_kernels<D: Device>(gpu: &GpuDevice<D>) -> [&str; 3] {
        let n = &gpu.names;
        [&n.g2_pl_runs, &n.g2_pl_edges, &n.g2_pl_fixup]
    }
    fn pl_reduce_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_pl_reduce
    }
    fn pl_sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_pl_sum
    }
    fn fixed_base_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_fixed_base
    }
    fn to_affine_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_to_affine
    }
    fn synthetic_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_synthetic
    }
}

/// Bytes of an exponent on the device.
pub(crate) const EXP_BYTES: u64 = std::mem::size_of::<ScalarBytes>() as u64;

/// Whether `n` terms fit an MSM's operands, given in elements: exponents
/// `exp_offset..exp_offset + n` of the `exps` held, and either the first `n` of the `bases`
/// held (dense: `idx` is `None`) or the first `n` of the `idx` indices held (gathered: the
/// indices' values are checked against the bases on the host, where they are listed). The
/// error names every length.
pub fn check_terms(
    what: &str,
    n: u64,
    exp_offset: u64,
    bases: u64,
    idx: Option<u64>,
    exps: u64,
) -> DeviceResult<()> {
    let fits = exp_offset.checked_add(n).is_some_and(|end| end <= exps)
        && match idx {
            None => n <= bases,
            Some(idx) => n <= idx,
        };
    if fits {
        return Ok(());
    }
    let idx = idx.map_or(String::new(), |i| format!(", {i} indices"));
    Err(DeviceError::new(
        what,
        format!(
            "{n} terms from exponent {exp_offset} do not fit the buffers: {bases} bases{idx}, \
             {exps} exponents"
        ),
    ))
}

/// [`check_terms`] for buffers on the device: `bases` of `G`, `idx` of u32, `exps` of
/// [`ScalarBytes`].
pub(crate) fn check_buffers<D: Device, G: DeviceCurve>(
    bases: &DeviceBuffer<D>,
    idx: Option<&DeviceBuffer<D>>,
    exps: &DeviceBuffer<D>,
    exp_offset: usize,
    n: usize,
) -> DeviceResult<()> {
    check_terms(
        &format!("{} MSM of {n} terms", G::NAME),
        n as u64,
        exp_offset as u64,
        bases.bytes() / G::AFFINE_BYTES,
        idx.map(|i| i.bytes() / 4),
        exps.bytes() / EXP_BYTES,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_past_the_bases_or_the_exponents_are_refused() {
        // Dense: n up to both lengths; gathered: n up to the indices (the bases may be fewer).
        assert_eq!(check_terms("msm", 10, 0, 10, None, 10), Ok(()));
        assert_eq!(check_terms("msm", 6, 4, 6, None, 10), Ok(()));
        assert_eq!(check_terms("msm", 0, 10, 0, None, 10), Ok(()));
        assert_eq!(check_terms("msm", 10, 0, 3, Some(10), 10), Ok(()));
        // Negative twins: one term past the bases, past the exponents (from an offset), past
        // the indices, and an offset whose end overflows; each error names every length.
        for (n, off, bases, idx, exps, says) in [
            (
                11u64,
                0u64,
                10u64,
                None,
                20u64,
                "11 terms from exponent 0 do not fit the buffers: 10 bases, 20 exponents",
            ),
            (11, 0, 20, None, 10, "20 bases, 10 exponents"),
            (7, 4, 6, None, 10, "7 terms from exponent 4"),
            (11, 0, 3, Some(10), 20, "3 bases, 10 indices, 20 exponents"),
            (1, u64::MAX, 10, None, 10, "10 bases, 10 exponents"),
        ] {
            let e = check_terms("msm", n, off, bases, idx, exps).unwrap_err();
            assert_eq!(e.during, "msm");
            assert!(e.detail.contains(says), "{e}");
        }
    }
}
