//! What the suite's tests are told by the environment ([`SuiteEnv`]): the devices to check
//! (test binaries take no `--gpus`) and the device checks' sizes. The library reads no
//! variable: the tests its macros expand to hand it a lookup (`|name| std::env::var(name).ok()`).

pub use crate::device::sizes::SIZES_VAR;
use prover_core::Accelerator;

use crate::device::sizes::SuiteSizes;

/// The environment variable that picks the devices the suite runs on: ordinals separated by
/// commas (`0`, `1`, `0,1`). Unset: every device the backend opened.
pub const TEST_DEVICES_VAR: &str = "PROOFLINE_TEST_DEVICES";

/// The suite's settings as the environment gives them, parsed when a test asks (a bad value
/// fails the test that asked, not the others).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuiteEnv {
    devices: Option<String>,
    sizes: Option<String>,
}

impl SuiteEnv {
    /// `PROOFLINE_TEST_DEVICES` and `PROOFLINE_DEVICE_CHECK_SIZES` as `lookup` gives them
    /// (`None`: unset).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        SuiteEnv {
            devices: lookup(TEST_DEVICES_VAR),
            sizes: lookup(SIZES_VAR),
        }
    }

    /// The devices to check among a backend's `count`: `PROOFLINE_TEST_DEVICES`, or all of
    /// them. A bad value, or a device the backend does not have, is a panic.
    pub fn devices(&self, count: usize) -> Vec<usize> {
        match &self.devices {
            Some(v) => {
                parse_test_devices(v, count).unwrap_or_else(|e| panic!("{TEST_DEVICES_VAR}: {e}"))
            }
            None => (0..count).collect(),
        }
    }

    /// [`SuiteEnv::devices`] of `backend`'s devices.
    pub fn devices_of(&self, backend: &dyn Accelerator) -> Vec<usize> {
        self.devices(backend.device_count())
    }

    /// The first of [`SuiteEnv::devices_of`] (a panic where there is none): where the checks
    /// run one worker.
    pub fn first_device(&self, backend: &dyn Accelerator) -> usize {
        *self.devices_of(backend).first().expect("a device to test")
    }

    /// The stage checks' sizes: `PROOFLINE_DEVICE_CHECK_SIZES` (unset: small). A bad value is a
    /// panic.
    pub fn sizes(&self) -> SuiteSizes {
        match &self.sizes {
            Some(v) => SuiteSizes::parse(v).unwrap_or_else(|e| panic!("{e}")),
            None => SuiteSizes::Small,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn unset_variables_mean_every_device_and_small_sizes() {
        let unset = SuiteEnv::from_lookup(|_| None);
        assert_eq!(unset, SuiteEnv::default());
        assert_eq!(unset.devices(3), vec![0, 1, 2]);
        assert_eq!(unset.sizes(), SuiteSizes::Small);
        let set = SuiteEnv::from_lookup(|name| {
            Some(
                if name == TEST_DEVICES_VAR {
                    "1"
                } else {
                    "large"
                }
                .to_string(),
            )
        });
        assert_eq!(set.devices(2), vec![1]);
        assert_eq!(set.sizes(), SuiteSizes::Large);
    }

    #[test]
    #[should_panic(expected = "PROOFLINE_TEST_DEVICES: device 2 is not there")]
    fn a_device_the_backend_lacks_fails_the_test_that_asked() {
        SuiteEnv::from_lookup(|name| (name == TEST_DEVICES_VAR).then(|| "2".to_string()))
            .devices(2);
    }
}
