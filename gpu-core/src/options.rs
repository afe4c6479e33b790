//! The settings of a device backend, typed ([`GpuOptions`]), and their parse from the
//! environment's names ([`GpuOptions::from_lookup`]). The library never reads the environment:
//! a binary (or a test) hands in a lookup of its variables by name.
//!
//! | variable | setting | unset |
//! | --- | --- | --- |
//! | `PROOFLINE_GPU_FAIL_CALLS` ([`FAIL_CALLS_VAR`]) | [`GpuOptions::faults`] | none |
//! | `PROOFLINE_GPU_MSM` ([`MSM_VAR`]) | [`GpuOptions::msm`] | `sorted` |
//! | `PROOFLINE_GPU_SCAN` ([`SCAN_VAR`]) | [`GpuOptions::scan`] | `device` |
//! | `PROOFLINE_GPU_TRACE` ([`TRACE_VAR`]) | [`GpuOptions::trace`] | off |
//! | `PROOFLINE_GPU_PROFILE` ([`PROFILE_VAR`]) | [`GpuOptions::profile`] | off |
//! | `PROOFLINE_GPU_BESIDE` ([`BESIDE_VAR`]) | [`GpuOptions::beside`] | on |
//! | `PROOFLINE_GPU_NTT_SHAPE` ([`NTT_SHAPE_VAR`]) | [`GpuOptions::ntt_shape`] | the device's |
//! | `PROOFLINE_KERNEL_CACHE` ([`CACHE_VAR`]), `XDG_CACHE_HOME`, `HOME` | [`GpuOptions::kernel_cache`] | none |

use std::path::PathBuf;

use prover_core::{Error, Result};

use crate::cache::KernelCache;
pub use crate::cache::CACHE_VAR;
use crate::fault::Faults;
pub use crate::fault::FAIL_CALLS_VAR;
pub use crate::msm::classify::SCAN_VAR;
pub use crate::msm::query::MSM_VAR;
use crate::msm::{MsmKernel, ScanMode};
use crate::ntt::NttShape;

/// The environment variable that turns tracing on (`1` or `true`), as the harness's
/// `--device-trace` does.
pub const TRACE_VAR: &str = "PROOFLINE_GPU_TRACE";

/// The environment variable that turns profiling on (`1` or `true`): each accelerator step
/// waits for the device before it is timed ([`crate::profile`]).
pub const PROFILE_VAR: &str = "PROOFLINE_GPU_PROFILE";

/// The environment variable that turns the H pipeline's uploads beside its kernels off (`0`).
pub const BESIDE_VAR: &str = "PROOFLINE_GPU_BESIDE";

/// The environment variable that sets the NTT's pass shape (`RADIX/TILE/G`).
pub const NTT_SHAPE_VAR: &str = "PROOFLINE_GPU_NTT_SHAPE";

/// Options of a device backend. [`Default`] is what an empty environment gives.
#[derive(Debug)]
pub struct GpuOptions {
    /// Caps the device memory the backend uses on each device (`--gpu-mem-limit`); `None`: the
    /// device's memory less a tenth for the driver and other processes.
    pub mem_limit: Option<u64>,
    /// Injected faults (a test hook; `PROOFLINE_GPU_FAIL_CALLS`).
    pub faults: Faults,
    /// The MSM kernel (`PROOFLINE_GPU_MSM`).
    pub msm: MsmKernel,
    /// Where the MSMs' 0/1 split runs (`PROOFLINE_GPU_SCAN`).
    pub scan: ScanMode,
    /// Whether the workers trace their queues (`PROOFLINE_GPU_TRACE`, `--device-trace`):
    /// [`prover_core::Accelerator::device_trace`] then returns every copy and kernel, timed by
    /// the device.
    pub trace: bool,
    /// Whether each accelerator step waits for the device and is timed
    /// (`PROOFLINE_GPU_PROFILE`): [`prover_core::Accelerator::step_times`].
    pub profile: bool,
    /// Whether the H pipeline uploads b and c beside a's transforms where the device can and
    /// its memory allows (`PROOFLINE_GPU_BESIDE`, on unless `0` or `false`: an A/B knob).
    pub beside: bool,
    /// How the H pipeline's transforms are cut (`PROOFLINE_GPU_NTT_SHAPE=RADIX/TILE/G`, as
    /// logarithms); `None`: the device's default ([`NttShape::for_device`]).
    pub ntt_shape: Option<NttShape>,
    /// The folder of the program binary cache ([`crate::cache`]; `PROOFLINE_KERNEL_CACHE`, else
    /// `$XDG_CACHE_HOME/proofline/kernels`, else `$HOME/.cache/proofline/kernels`); `None`:
    /// programs are built at every start and not kept.
    pub kernel_cache: Option<PathBuf>,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            mem_limit: None,
            faults: Faults::none(),
            msm: MsmKernel::default(),
            scan: ScanMode::default(),
            trace: false,
            profile: false,
            beside: true,
            ntt_shape: None,
            kernel_cache: None,
        }
    }
}

impl GpuOptions {
    /// The options with `mem_limit` and what `lookup` (a variable's value by name, `None` when
    /// unset) gives each variable of the table above; a malformed value is an error naming it.
    pub fn from_lookup(
        mem_limit: Option<u64>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let invalid = |what| move |detail| Error::InvalidConfig { what, detail };
        let faults = match lookup(FAIL_CALLS_VAR) {
            None => Faults::none(),
            Some(v) => Faults::parse(&v).map_err(invalid("fault injection"))?,
        };
        let msm = match lookup(MSM_VAR) {
            None => MsmKernel::default(),
            Some(v) => MsmKernel::parse(&v).map_err(invalid("MSM kernel"))?,
        };
        let scan = match lookup(SCAN_VAR) {
            None => ScanMode::default(),
            Some(v) => ScanMode::parse(&v)
                .map_err(|e| format!("{SCAN_VAR}={e}"))
                .map_err(invalid("scalar scan"))?,
        };
        let flag = |name| lookup(name).is_some_and(|v| v == "1" || v == "true");
        Ok(GpuOptions {
            mem_limit,
            faults,
            msm,
            scan,
            trace: flag(TRACE_VAR),
            profile: flag(PROFILE_VAR),
            beside: parse_beside(lookup(BESIDE_VAR).as_deref())
                .map_err(invalid("uploads beside kernels"))?,
            ntt_shape: parse_ntt_shape(lookup(NTT_SHAPE_VAR).as_deref())
                .map_err(invalid("NTT pass shape"))?,
            kernel_cache: crate::cache::folder(&lookup),
        })
    }

    /// The program binary cache in [`GpuOptions::kernel_cache`], if there is one.
    pub fn kernel_cache(&self) -> Option<KernelCache> {
        self.kernel_cache.clone().map(KernelCache::new)
    }
}

/// `PROOFLINE_GPU_BESIDE`: unset, empty, `1` or `true` on; `0` or `false` off.
fn parse_beside(value: Option<&str>) -> std::result::Result<bool, String> {
    match value {
        None | Some("" | "1" | "true") => Ok(true),
        Some("0" | "false") => Ok(false),
        Some(other) => Err(format!("{BESIDE_VAR}={other:?}: write 1, true, 0 or false")),
    }
}

/// `PROOFLINE_GPU_NTT_SHAPE`: unset or empty, the device's default; else a shape.
fn parse_ntt_shape(value: Option<&str>) -> std::result::Result<Option<NttShape>, String> {
    match value {
        None | Some("") => Ok(None),
        Some(v) => NttShape::parse(v)
            .map(Some)
            .map_err(|e| format!("{NTT_SHAPE_VAR}: {e}")),
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

    /// A lookup over `vars` (name, value) alone.
    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn an_empty_environment_gives_the_defaults() {
        let o = GpuOptions::from_lookup(Some(7), lookup(&[])).unwrap();
        let d = GpuOptions::default();
        assert_eq!(o.mem_limit, Some(7));
        assert_eq!((o.msm, o.scan), (d.msm, d.scan));
        assert_eq!((o.msm, o.scan), (MsmKernel::Sorted, ScanMode::Device));
        assert_eq!((o.trace, o.profile, o.beside), (false, false, true));
        assert_eq!((d.trace, d.profile, d.beside), (false, false, true));
        assert_eq!((o.ntt_shape, o.kernel_cache), (None, None));
        assert!(o.faults.is_empty() && d.faults.is_empty());
    }

    #[test]
    fn every_variable_sets_its_option() {
        let vars = [
            (FAIL_CALLS_VAR, "0,3"),
            (MSM_VAR, "stock"),
            (SCAN_VAR, "host"),
            (TRACE_VAR, "1"),
            (PROFILE_VAR, "true"),
            (BESIDE_VAR, "0"),
            (NTT_SHAPE_VAR, "8/10/1"),
            (CACHE_VAR, "/cache"),
        ];
        let o = GpuOptions::from_lookup(None, lookup(&vars)).unwrap();
        assert!(!o.faults.is_empty());
        assert_eq!((o.msm, o.scan), (MsmKernel::Stock, ScanMode::Host));
        assert_eq!((o.trace, o.profile, o.beside), (true, true, false));
        assert_eq!(o.ntt_shape, Some(NttShape::parse("8/10/1").unwrap()));
        assert_eq!(o.kernel_cache, Some(PathBuf::from("/cache")));
        // Flags are on for `1` and `true` alone.
        let o = GpuOptions::from_lookup(None, lookup(&[(TRACE_VAR, "yes")])).unwrap();
        assert!(!o.trace);
    }

    #[test]
    fn a_malformed_value_is_refused_naming_its_variable() {
        for (var, bad, says) in [
            (
                FAIL_CALLS_VAR,
                "1,x",
                "PROOFLINE_GPU_FAIL_CALLS: \"x\" is not a call number",
            ),
            (
                MSM_VAR,
                "fast",
                "PROOFLINE_GPU_MSM=fast: expected `stock` or `sorted`",
            ),
            (
                SCAN_VAR,
                "gpu",
                "PROOFLINE_GPU_SCAN=gpu: expected `host` or `device`",
            ),
            (BESIDE_VAR, "yes", "PROOFLINE_GPU_BESIDE=\"yes\""),
            (
                NTT_SHAPE_VAR,
                "8",
                "PROOFLINE_GPU_NTT_SHAPE: \"8\" is not RADIX/TILE[/G]",
            ),
        ] {
            let e = GpuOptions::from_lookup(None, lookup(&[(var, bad)])).unwrap_err();
            assert!(
                matches!(e, Error::InvalidConfig { .. }) && e.to_string().contains(says),
                "{var}: {e}"
            );
        }
    }
}
