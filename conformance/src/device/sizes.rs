//! How large the device suite's stage checks are ([`SuiteSizes`]).

/// How large the suite's stage checks are: small by default (CI's POCL); with
/// `PROOFLINE_DEVICE_CHECK_SIZES=large` (a GPU) the sizes where the windows and the NTT passes
/// of real partitions appear; with `=production` (a GPU of 80 GB) those and a production
/// partition's own: the NTT of 2^27 points, G1 MSMs of 2^24 and 2^27 terms and a G2 MSM of 2^24,
/// checked against answers known without a CPU MSM ([`check_known_answers`](super::check_known_answers)).
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

    /// The sizes of the NTT, H pipeline and query MSM checks.
    pub(super) fn stages(self) -> Sizes {
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
    pub(super) fn known(self) -> KnownSizes {
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
pub(super) struct Sizes {
    pub(super) ntt_logs: Vec<u32>,
    pub(super) msm_terms: Vec<usize>,
}

/// The sizes the known-answer checks run.
pub(super) struct KnownSizes {
    pub(super) ntt_log: u32,
    pub(super) g1_logs: Vec<u32>,
    pub(super) g2_logs: Vec<u32>,
    pub(super) table_log: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
