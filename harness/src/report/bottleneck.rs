//! What bounds the recommended point, read from its measured busy shares, and the setting to
//! try next: printed under the sweep's recommendation and kept as `recommendation.bottleneck`
//! in `results.json`. A hint from the point's own figures, not a measurement of the setting it
//! names.
//!
//! Two shares decide: each device's own (`trace_busy_fraction`, from its queues' timeline;
//! device backends) and the accelerator workers' (their share of the wall time in the
//! accelerator stage, host work included). On the H200
//! (`docs/design-decisions.md#multiple-gpus`): a device 88-89% busy with one GPU worker gave 6%
//! more throughput with two; a device 41% busy under workers 97% busy was a worker doing host
//! work between kernels.

use crate::config::{BackendKind, RunConfig, SynthesisMode};
use crate::report::model::PointResult;

/// At or above this share a stage counts as the bound.
pub const BUSY: f64 = 0.9;

/// What bounds `p` (a point of a sweep run with `run`), with what to try; `None` without the
/// figures to tell.
pub fn bottleneck(p: &PointResult, run: &RunConfig) -> Option<String> {
    let workers = p.accelerator_busy_fraction?;
    let synthesis_bound = || {
        let pce = if run.synthesis == SynthesisMode::Cs && !run.replay {
            ", or --synthesis pce (witness only, matrices recorded once)"
        } else {
            ""
        };
        format!(
            "synthesis: the accelerator workers wait for partitions (busy {workers:.2}); try a \
             higher pw if memory allows{pce}"
        )
    };
    if run.backend == BackendKind::Cpu {
        return Some(if workers >= BUSY {
            format!(
                "the CPU accelerator (its workers busy {workers:.2}): more pw adds memory, not \
                 speed; a GPU backend is the next step"
            )
        } else {
            synthesis_bound()
        });
    }
    // The least busy device: the one a setting would help first.
    let device = p
        .devices
        .iter()
        .filter_map(|d| d.trace_busy_fraction)
        .min_by(f64::total_cmp)?;
    Some(if device >= BUSY {
        format!("the device (busy {device:.2} of its own timeline): more pw adds memory, not speed")
    } else if workers >= BUSY {
        let next = if run.gpu_workers == 1 {
            "; try --gpu-workers 2, which overlaps one partition's host steps and copies with the \
             other's kernels"
        } else {
            ""
        };
        format!(
            "the accelerator's host steps: its workers are busy {workers:.2} while the device is \
             busy {device:.2}{next}"
        )
    } else {
        synthesis_bound()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{DevicePoint, PointResult};
    use clap::Parser;

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        run: RunConfig,
    }

    fn run(args: &[&str]) -> RunConfig {
        Args::parse_from(std::iter::once("t").chain(args.iter().copied())).run
    }

    fn point(workers: Option<f64>, devices: &[Option<f64>]) -> PointResult {
        let mut p = PointResult::empty(1, crate::report::model::PointStatus::Ok);
        p.accelerator_busy_fraction = workers;
        p.devices = devices
            .iter()
            .enumerate()
            .map(|(i, t)| {
                DevicePoint::with_shares(i, &format!("cuda:{i}"), workers.unwrap_or(0.0), *t)
            })
            .collect();
        p
    }

    #[test]
    fn each_bound_names_its_stage_and_the_setting_to_try() {
        let cuda = run(&["--backend", "cuda"]);
        // A busy device bounds it.
        let b = bottleneck(&point(Some(0.97), &[Some(0.95)]), &cuda).unwrap();
        assert!(b.starts_with("the device (busy 0.95"), "{b}");
        // Busy workers, idle device (0.97 against 0.41): a second GPU worker.
        let b = bottleneck(&point(Some(0.97), &[Some(0.41)]), &cuda).unwrap();
        assert!(
            b.contains("host steps") && b.contains("--gpu-workers 2"),
            "{b}"
        );
        // ... which is not suggested again with two.
        let two = run(&["--backend", "cuda", "--gpu-workers", "2"]);
        let b = bottleneck(&point(Some(0.97), &[Some(0.41)]), &two).unwrap();
        assert!(
            b.contains("host steps") && !b.contains("--gpu-workers"),
            "{b}"
        );
        // Both waiting: synthesis, with pce where the run used cs.
        let b = bottleneck(&point(Some(0.5), &[Some(0.45)]), &cuda).unwrap();
        assert!(
            b.starts_with("synthesis") && b.contains("--synthesis pce"),
            "{b}"
        );
        let pce = run(&["--backend", "cuda", "--synthesis", "pce"]);
        let b = bottleneck(&point(Some(0.5), &[Some(0.45)]), &pce).unwrap();
        assert!(
            b.starts_with("synthesis") && !b.contains("--synthesis"),
            "{b}"
        );
        // Two devices: the least busy one decides.
        let b = bottleneck(&point(Some(0.97), &[Some(0.95), Some(0.6)]), &cuda).unwrap();
        assert!(b.contains("busy 0.60"), "{b}");
        // The CPU backend: its workers are the device.
        let cpu = run(&[]);
        let b = bottleneck(&point(Some(0.97), &[None]), &cpu).unwrap();
        assert!(b.starts_with("the CPU accelerator"), "{b}");
        let b = bottleneck(&point(Some(0.6), &[None]), &cpu).unwrap();
        assert!(b.starts_with("synthesis"), "{b}");
    }

    #[test]
    fn without_the_figures_it_says_nothing() {
        let cuda = run(&["--backend", "cuda"]);
        // An untimed device (--no-device-trace), or a failed point with no shares.
        assert_eq!(bottleneck(&point(Some(0.97), &[None]), &cuda), None);
        assert_eq!(bottleneck(&point(None, &[Some(0.9)]), &cuda), None);
    }
}
