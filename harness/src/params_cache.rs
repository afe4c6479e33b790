//! Parameters cached on disk in bellperson's format, keyed by circuit shape.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::{ProgressBar, ProgressStyle};
use prover_core::{
    write_parameters_on, GenPhase, GenProgress, Multiplier, Parameters, PointCheck, Trapdoor,
};
use rand::SeedableRng;

use crate::workloads::WorkloadSpec;

/// A progress bar for parameter generation (hidden when not enabled). Off a terminal (a log,
/// CI) it prints a plain line at every tenth instead.
pub struct Bar {
    bar: ProgressBar,
    done: AtomicU64,
    total: AtomicU64,
    /// Tenths already printed, when printing plain lines.
    plain: Option<AtomicU64>,
    name: String,
    start: std::time::Instant,
    /// Nanoseconds spent in each phase (`GenPhase::ALL`'s order).
    phases: [AtomicU64; GenPhase::ALL.len()],
}

impl Bar {
    /// A bar titled `parameters <name>` on stderr, or a hidden one.
    pub fn new(name: &str, enabled: bool) -> Self {
        let bar = if enabled {
            ProgressBar::new(0)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} points ({eta}) {msg}",
            )
            .expect("a valid template"),
        );
        bar.set_prefix(format!("parameters {name}"));
        bar.set_message("synthesizing the circuit");
        let plain = (enabled && !std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .then(|| AtomicU64::new(0));
        Bar {
            bar,
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            plain,
            name: name.to_string(),
            start: std::time::Instant::now(),
            phases: Default::default(),
        }
    }

    /// Where the time went: `shape 1.2 s, qap 0.3 s, ...` (the phases that ran).
    pub fn phases(&self) -> String {
        GenPhase::ALL
            .iter()
            .zip(&self.phases)
            .filter_map(|(p, ns)| {
                let ns = ns.load(Ordering::Relaxed);
                (ns > 0).then(|| format!("{} {:.1} s", p.name(), ns as f64 / 1e9))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Ends the bar with a message.
    pub fn finish(&self, msg: String) {
        if self.plain.is_some() && self.total.load(Ordering::Relaxed) > 0 {
            crate::tell!("parameters {}: {msg}", self.name);
        }
        self.bar.finish_with_message(msg);
    }
}

impl GenProgress for Bar {
    fn start(&self, total: u64) {
        self.bar.set_length(total);
        self.bar.set_message("computing query points");
        self.total.store(total, Ordering::Relaxed);
        if self.plain.is_some() {
            crate::tell!(
                "parameters {}: circuit synthesized in {:.1} s, {total} points to compute",
                self.name,
                self.start.elapsed().as_secs_f64()
            );
        }
    }

    fn phase(&self, phase: GenPhase, took: std::time::Duration) {
        let i = GenPhase::ALL
            .iter()
            .position(|&p| p == phase)
            .expect("every phase is listed");
        self.phases[i].fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    fn advance(&self, points: u64) {
        let done = self.done.fetch_add(points, Ordering::Relaxed) + points;
        self.bar.set_position(done);
        if let Some(printed) = &self.plain {
            let total = self.total.load(Ordering::Relaxed).max(1);
            let tenth = (done * 10 / total).min(10);
            if printed.fetch_max(tenth, Ordering::Relaxed) < tenth {
                crate::tell!(
                    "parameters {}: {}% ({done}/{total} points, {:.1} s)",
                    self.name,
                    tenth * 10,
                    self.start.elapsed().as_secs_f64()
                );
            }
        }
    }
}

/// The cache file of a workload's parameters.
pub fn cache_path(dir: &Path, spec: &WorkloadSpec) -> PathBuf {
    dir.join(format!("{}.params", spec.cache_key()))
}

/// Loads the workload's parameters from the cache, or generates them (seeded by the cache key,
/// with a progress bar on stderr when `progress` is set) straight into the cache file, their
/// points computed by `multiplier` (the CPU, or a device: the same bytes). Our own cache is
/// trusted: it is read without the subgroup check. Returns the parameters and whether they came
/// from the cache.
pub fn load_or_generate(
    dir: &Path,
    spec: &WorkloadSpec,
    progress: bool,
    multiplier: &dyn Multiplier,
) -> prover_core::Result<(Parameters, bool)> {
    let path = cache_path(dir, spec);
    if path.exists() {
        return Ok((Parameters::read_file(&path, PointCheck::Unchecked)?, true));
    }
    prover_core::files::create_dir_all(dir)?;
    let reporter = Bar::new(&spec.cache_key(), progress);
    let seed = spec
        .cache_key()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
    let trapdoor = Trapdoor::random(&mut rand_chacha::ChaCha20Rng::seed_from_u64(seed));
    // Streamed to the file, then read back: the generator never holds the whole parameter set
    // next to its own working memory.
    let shape = spec.shape().ok_or_else(|| prover_core::Error::Malformed {
        what: "workload",
        detail: format!(
            "{} has no synthetic shape: its parameters are Filecoin's",
            spec.kind.name()
        ),
    })?;
    let t = std::time::Instant::now();
    write_parameters_on(shape, &trapdoor, &path, &reporter, multiplier)?;
    reporter.finish(format!(
        "generated on {} in {:.1} s ({}), written to {}",
        multiplier.name(),
        t.elapsed().as_secs_f64(),
        reporter.phases(),
        path.display()
    ));
    Ok((Parameters::read_file(&path, PointCheck::Unchecked)?, false))
}
