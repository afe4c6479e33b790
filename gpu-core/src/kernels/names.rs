//! The names of the kernels the host logic launches ([`KernelNames`]), as the generated source
//! defines them.

/// The NTT pass's kernels: 2^G elements a thread for G in `1..=NTT_MAX_G`.
pub const NTT_MAX_G: u32 = 3;

/// The names of the kernels the host logic launches.
#[derive(Debug, Clone)]
pub struct KernelNames {
    /// One pass of proofline's NTT over Fr, 2^G elements a thread: entry G - 1.
    pub ntt_pass: [String; NTT_MAX_G as usize],
    /// A pass's single twiddle table from the two-level table of the root's powers.
    pub ntt_table: String,
    /// `x[start..n] = 0`.
    pub fill_zero: String,
    /// `x *= y`.
    pub mul_assign: String,
    /// `x = (x - y) * k`.
    pub sub_scaled: String,
    /// Montgomery to canonical.
    pub to_canonical: String,
    /// G1 sum of indexed bases.
    pub g1_sum_indexed: String,
    /// G1 bucket MSM.
    pub g1_msm: String,
    /// G2 sum of indexed bases.
    pub g2_sum_indexed: String,
    /// G2 bucket MSM.
    pub g2_msm: String,
    /// Sorted MSM: zero a count array.
    pub pl_zero: String,
    /// Sorted MSM: signed digits, bucket keys and counts.
    pub pl_digits: String,
    /// Sorted MSM: scan of count blocks.
    pub pl_scan_blocks: String,
    /// Sorted MSM: scan of the block totals.
    pub pl_scan_sums: String,
    /// Sorted MSM: block offsets added.
    pub pl_scan_add: String,
    /// Sorted MSM: the counting sort's scatter.
    pub pl_scatter: String,
    /// Sorted MSM, G1: runs of sorted entries added.
    pub g1_pl_runs: String,
    /// Sorted MSM, G1: the runs' heads and tails made jacobian.
    pub g1_pl_edges: String,
    /// Sorted MSM, G1: buckets crossing runs completed.
    pub g1_pl_fixup: String,
    /// Sorted MSM, G1: weighted bucket sums by segments.
    pub g1_pl_reduce: String,
    /// Sorted MSM, G1: groups of partial sums added.
    pub g1_pl_sum: String,
    /// Sorted MSM, G2: runs of sorted entries added.
    pub g2_pl_runs: String,
    /// Sorted MSM, G2: the runs' heads and tails made jacobian.
    pub g2_pl_edges: String,
    /// Sorted MSM, G2: buckets crossing runs completed.
    pub g2_pl_fixup: String,
    /// Sorted MSM, G2: weighted bucket sums by segments.
    pub g2_pl_reduce: String,
    /// Sorted MSM, G2: groups of partial sums added.
    pub g2_pl_sum: String,
    /// The 0/1 split: a term's scalars counted per block of 32 (used, ones, others).
    pub cls_count: String,
    /// The 0/1 split: the lists of ones and others written at the scanned offsets.
    pub cls_write: String,
    /// Parameter generation: G1 fixed-base products.
    pub g1_fixed_base: String,
    /// Parameter generation: G2 fixed-base products.
    pub g2_fixed_base: String,
    /// Parameter generation: G1 products made affine.
    pub g1_to_affine: String,
    /// Parameter generation: G2 products made affine.
    pub g2_to_affine: String,
    /// Timing workloads: G1 synthetic bases.
    pub g1_synthetic: String,
    /// Timing workloads: G2 synthetic bases.
    pub g2_synthetic: String,
}

impl KernelNames {
    /// Every kernel the host logic launches.
    pub fn all(&self) -> [&str; 36] {
        [
            &self.ntt_pass[0],
            &self.ntt_pass[1],
            &self.ntt_pass[2],
            &self.ntt_table,
            &self.fill_zero,
            &self.mul_assign,
            &self.sub_scaled,
            &self.to_canonical,
            &self.g1_sum_indexed,
            &self.g1_msm,
            &self.g2_sum_indexed,
            &self.g2_msm,
            &self.pl_zero,
            &self.pl_digits,
            &self.pl_scan_blocks,
            &self.pl_scan_sums,
            &self.pl_scan_add,
            &self.pl_scatter,
            &self.g1_pl_runs,
            &self.g1_pl_edges,
            &self.g1_pl_fixup,
            &self.g1_pl_reduce,
            &self.g1_pl_sum,
            &self.g2_pl_runs,
            &self.g2_pl_edges,
            &self.g2_pl_fixup,
            &self.g2_pl_reduce,
            &self.g2_pl_sum,
            &self.cls_count,
            &self.cls_write,
            &self.g1_fixed_base,
            &self.g2_fixed_base,
            &self.g1_to_affine,
            &self.g2_to_affine,
            &self.g1_synthetic,
            &self.g2_synthetic,
        ]
    }

    /// The names for the field `fr` and the curves `g1` and `g2` (ec-gpu-gen's names).
    pub(super) fn new(fr: &str, g1: &str, g2: &str) -> Self {
        KernelNames {
            ntt_pass: std::array::from_fn(|i| format!("{fr}_ntt_pass_g{}", i + 1)),
            ntt_table: format!("{fr}_ntt_table"),
            fill_zero: format!("{fr}_fill_zero"),
            mul_assign: format!("{fr}_mul_assign"),
            sub_scaled: format!("{fr}_sub_scaled"),
            to_canonical: format!("{fr}_to_canonical"),
            g1_sum_indexed: format!("{g1}_sum_indexed"),
            g1_msm: format!("{g1}_msm"),
            g2_sum_indexed: format!("{g2}_sum_indexed"),
            g2_msm: format!("{g2}_msm"),
            pl_zero: "pl_zero".into(),
            pl_digits: "pl_digits".into(),
            pl_scan_blocks: "pl_scan_blocks".into(),
            pl_scan_sums: "pl_scan_sums".into(),
            pl_scan_add: "pl_scan_add".into(),
            pl_scatter: "pl_scatter".into(),
            g1_pl_runs: format!("{g1}_pl_runs"),
            g1_pl_edges: format!("{g1}_pl_edges"),
            g1_pl_fixup: format!("{g1}_pl_fixup"),
            g1_pl_reduce: format!("{g1}_pl_reduce"),
            g1_pl_sum: format!("{g1}_pl_sum"),
            g2_pl_runs: format!("{g2}_pl_runs"),
            g2_pl_edges: format!("{g2}_pl_edges"),
            g2_pl_fixup: format!("{g2}_pl_fixup"),
            g2_pl_reduce: format!("{g2}_pl_reduce"),
            g2_pl_sum: format!("{g2}_pl_sum"),
            cls_count: "cls_count".into(),
            cls_write: "cls_write".into(),
            g1_fixed_base: format!("{g1}_fixed_base"),
            g2_fixed_base: format!("{g2}_fixed_base"),
            g1_to_affine: format!("{g1}_to_affine"),
            g2_to_affine: format!("{g2}_to_affine"),
            g1_synthetic: format!("{g1}_synthetic"),
            g2_synthetic: format!("{g2}_synthetic"),
        }
    }
}
