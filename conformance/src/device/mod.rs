//! Device-level checks for backends on gpu-core (every API crate runs them on its devices,
//! through [`device_backend_tests!`](crate::device_backend_tests)), against the CPU backend on
//! fresh random inputs:
//!
//! - [`sizes`]: how large the stage checks are ([`SuiteSizes`]);
//! - [`ntt`]: the NTT and the H pipeline, and copies beside the kernels;
//! - [`msm`]: the query MSMs, each kernel, resident and streamed bases;
//! - [`known`]: a production partition's transform and MSMs against known answers;
//! - [`scan`]: the 0/1 split on the device against the host scan;
//! - [`generator`]: parameter generation on a device;
//! - [`synthetic`]: a timing workload's synthetic bases and partition;
//! - [`engine`]: the engine's fallback under injected faults, its trace, its device memory.

pub mod engine;
pub mod generator;
pub mod known;
pub mod msm;
pub mod ntt;
pub mod scan;
pub mod sizes;
pub mod synthetic;

pub use engine::{check_device_memory, check_engine_fallback, check_trace};
pub use generator::check_generator;
pub use gpu_core::Faults;
pub use known::check_known_answers;
pub use msm::{check_msms, STREAM_LIMIT};
pub use ntt::{check_copies_beside, check_ntt_and_quotient};
pub use scan::check_device_scan;
pub use sizes::{SuiteSizes, SIZES_VAR};
pub use synthetic::check_synthetic;

/// A device memory limit small enough that no query of the suite's circuits stays resident
/// (every base is streamed in chunks), big enough for a G2 bucket set.
pub const TIGHT: u64 = 320 << 10;

/// Expands to the whole device suite of a backend on gpu-core: `$open(limit, faults, trace)`
/// returns the backend (`Option`: `None` skips, as the backend's `open_or_skip` decides). The
/// conformance checks run with the device's memory and under [`TIGHT`]; the stage checks
/// compare the NTT, the H pipeline and the MSMs with the CPU; the fault checks make calls 0 and
/// 2 fail and see the fallback prove them, and see nothing fall back without faults. The tests
/// check the devices `PROOFLINE_TEST_DEVICES` names (all by default) at the sizes
/// `PROOFLINE_DEVICE_CHECK_SIZES` names, from their environment ([`crate::SuiteEnv`]).
#[macro_export]
macro_rules! device_backend_tests {
    ($open:expr) => {
        /// The suite's settings, from this test binary's environment.
        fn suite() -> $crate::SuiteEnv {
            $crate::SuiteEnv::from_lookup(|name| ::std::env::var(name).ok())
        }

        fn each_limit(check: impl Fn(&dyn ::prover_core::Accelerator, &[usize])) {
            for limit in [None, Some($crate::device::TIGHT)] {
                if let Some(b) = ($open)(limit, $crate::device::Faults::none(), false) {
                    eprintln!("memory limit: {limit:?}");
                    check(&b, &suite().devices_of(&b));
                }
            }
        }

        #[test]
        fn conformance_accelerate_matches_cpu() {
            each_limit(|b, d| $crate::check_accelerate(b, d));
        }

        #[test]
        fn conformance_wrong_shape_is_handed_back() {
            each_limit(|b, d| $crate::check_wrong_shape(b, d));
        }

        #[test]
        fn conformance_proofs_match_cpu_bytes_and_bellperson_verifies() {
            each_limit(|b, d| $crate::check_proofs(b, d, &::backend_cpu::CpuBackend));
        }

        #[test]
        fn conformance_engine_proves_on_every_device() {
            for limit in [None, Some($crate::device::TIGHT)] {
                if let Some(b) = ($open)(limit, $crate::device::Faults::none(), false) {
                    let devices = suite().devices_of(&b);
                    $crate::check_engine(
                        ::std::sync::Arc::new(b),
                        &devices,
                        ::std::sync::Arc::new(::backend_cpu::CpuBackend),
                    );
                }
            }
        }

        #[test]
        fn bounds_copies_outside_a_buffer_are_refused() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                $crate::bounds::check_copies(b.device(0).expect("a device"));
            }
        }

        #[test]
        fn bounds_dense_msms_past_their_bases_or_exponents_are_refused() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                $crate::bounds::check_dense_msms(b.device(0).expect("a device"));
            }
        }

        #[test]
        fn bounds_sorted_msms_past_their_buffers_are_refused() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                $crate::bounds::check_sorted_msms(b.device(0).expect("a device"));
            }
        }

        #[test]
        fn stages_ntt_and_quotient_match_cpu() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in suite().devices_of(&b) {
                    eprintln!("device {d}");
                    let sizes = suite().sizes();
                    $crate::device::check_ntt_and_quotient(b.device(d).expect("a device"), sizes);
                }
            }
        }

        #[test]
        fn stages_known_answers_at_the_suites_sizes() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in suite().devices_of(&b) {
                    eprintln!("device {d}");
                    let sizes = suite().sizes();
                    $crate::device::check_known_answers(b.device(d).expect("a device"), sizes);
                }
            }
        }

        #[test]
        fn stages_msms_match_cpu_resident_and_streamed() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in suite().devices_of(&b) {
                    eprintln!("device {d}");
                    let sizes = suite().sizes();
                    $crate::device::check_msms(b.device(d).expect("a device"), sizes, false);
                }
            }
            let limit = Some($crate::device::STREAM_LIMIT);
            if let Some(b) = ($open)(limit, $crate::device::Faults::none(), false) {
                for d in suite().devices_of(&b) {
                    eprintln!("device {d}, streamed");
                    let sizes = suite().sizes();
                    $crate::device::check_msms(b.device(d).expect("a device"), sizes, true);
                }
            }
        }

        #[test]
        fn stages_copies_beside_the_kernels_keep_their_bytes() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in suite().devices_of(&b) {
                    eprintln!("device {d}");
                    $crate::device::check_copies_beside(b.device(d).expect("a device"));
                }
            }
        }

        #[test]
        fn stages_parameters_generated_on_the_device_equal_the_cpus() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in suite().devices_of(&b) {
                    eprintln!("device {d}");
                    $crate::device::check_generator(&b.multiplier(d).expect("a device"));
                }
            }
        }

        #[test]
        fn stages_scan_on_device_lists_what_the_host_scan_lists() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in suite().devices_of(&b) {
                    eprintln!("device {d}");
                    $crate::device::check_device_scan(b.device(d).expect("a device"));
                }
            }
        }

        #[test]
        fn stages_synthetic_bases_and_partition_match_cpu() {
            if let Some(b) = ($open)(None, $crate::device::Faults::none(), false) {
                for d in suite().devices_of(&b) {
                    eprintln!("device {d}");
                    $crate::device::check_synthetic(&b, d);
                }
            }
        }

        #[test]
        fn trace_times_every_copy_and_kernel_of_every_partition() {
            let Some(b) = ($open)(None, $crate::device::Faults::none(), true) else {
                return;
            };
            let b = ::std::sync::Arc::new(b);
            let device = suite().first_device(&*b);
            let stats = $crate::device::check_engine_fallback(b.clone(), device);
            $crate::device::check_trace(&*b, &stats);
            // Its negative twin: without tracing, nothing is recorded.
            let Some(b) = ($open)(None, $crate::device::Faults::none(), false) else {
                return;
            };
            let b = ::std::sync::Arc::new(b);
            let device = suite().first_device(&*b);
            $crate::device::check_engine_fallback(b.clone(), device);
            assert!(
                ::prover_core::Accelerator::device_trace(&*b).is_empty(),
                "spans recorded with tracing off"
            );
        }

        #[test]
        fn faults_injected_fall_back_and_every_proof_verifies() {
            let faults = $crate::device::Faults::fail_calls([0, 2]);
            let Some(b) = ($open)(None, faults, false) else {
                return;
            };
            let device = suite().first_device(&b);
            let stats = $crate::device::check_engine_fallback(::std::sync::Arc::new(b), device);
            assert_eq!(stats.fallback_partitions, 2, "{stats:?}");
            assert_eq!(stats.devices[0].failures, 2, "{stats:?}");
            assert_eq!(stats.devices[0].partitions, 4, "{stats:?}");
            assert!(stats.devices[0].in_service);
        }

        #[test]
        fn faults_none_nothing_falls_back_even_streaming() {
            for limit in [None, Some($crate::device::TIGHT)] {
                let Some(b) = ($open)(limit, $crate::device::Faults::none(), false) else {
                    return;
                };
                let device = suite().first_device(&b);
                let stats = $crate::device::check_engine_fallback(::std::sync::Arc::new(b), device);
                assert_eq!(stats.fallback_partitions, 0, "limit {limit:?}: {stats:?}");
                assert_eq!(stats.devices[0].failures, 0, "limit {limit:?}: {stats:?}");
                assert_eq!(stats.devices[0].partitions, 6, "limit {limit:?}: {stats:?}");
            }
        }
    };
}
