//! For tests and benchmarks: a device backend opened, or skipped where the machine has none
//! ([`or_skip`]), or a failure where it must have one ([`Missing::Fail`]: CI, which installs
//! POCL).

use prover_core::Result;

use crate::accelerator::GpuAccelerator;
use crate::device::Device;

/// What a test does where its backend does not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// It skips, printing why (a machine without the API or a device).
    Skip,
    /// It fails: the machine is meant to have the backend.
    Fail,
}

impl Missing {
    /// `Fail` under CI (the value of `CI`, read by the test: `true` or `1`), else `Skip`.
    pub fn unless_ci(ci: Option<&str>) -> Self {
        match ci {
            Some("true" | "1") => Missing::Fail,
            _ => Missing::Skip,
        }
    }
}

/// The backend `opened`, its devices printed; where it did not open, `None` with the reason
/// printed, or (`Missing::Fail`) a panic. `api` names it in the messages.
pub fn or_skip<D: Device>(
    api: &str,
    opened: Result<GpuAccelerator<D>>,
    missing: Missing,
) -> Option<GpuAccelerator<D>> {
    match opened {
        Ok(b) => {
            b.describe().iter().for_each(|line| eprintln!("{line}"));
            Some(b)
        }
        Err(e) if missing == Missing::Skip => {
            eprintln!("skipped: no {api} device here ({e})");
            None
        }
        Err(e) => panic!("the {api} backend must open here (CI=true) but did not: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ci_makes_a_missing_backend_a_failure() {
        assert_eq!(Missing::unless_ci(Some("true")), Missing::Fail);
        assert_eq!(Missing::unless_ci(Some("1")), Missing::Fail);
        for other in [None, Some(""), Some("false"), Some("0"), Some("yes")] {
            assert_eq!(Missing::unless_ci(other), Missing::Skip, "{other:?}");
        }
    }
}
