//! What a parameter generation reports while it runs: points computed, and the time of each of
//! its phases (so a slow generation says where its time went).

use std::time::Duration;

/// The phases of a parameter generation, in the order they first run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenPhase {
    /// Synthesizing the circuit's shape (its constraints, on one thread).
    Shape,
    /// The QAP at tau, the check for unconstrained variables, the fixed-base tables.
    Qap,
    /// The points' scalars.
    Scalars,
    /// The multiplier's products, affine (on the CPU or a device).
    Products,
    /// Handing the points to their destination (encoding and writing, for a file).
    Write,
    /// Flushing the file to its disk.
    Sync,
}

impl GenPhase {
    /// Every phase, in order.
    pub const ALL: [GenPhase; 6] = [
        GenPhase::Shape,
        GenPhase::Qap,
        GenPhase::Scalars,
        GenPhase::Products,
        GenPhase::Write,
        GenPhase::Sync,
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            GenPhase::Shape => "shape",
            GenPhase::Qap => "qap",
            GenPhase::Scalars => "scalars",
            GenPhase::Products => "products",
            GenPhase::Write => "write",
            GenPhase::Sync => "sync",
        }
    }
}

/// Progress of a parameter generation, in points computed, and the time of its phases.
pub trait GenProgress: Sync {
    /// Called once the circuit is synthesized, with the number of points to compute.
    fn start(&self, _total: u64) {}
    /// Called as points are computed.
    fn advance(&self, _points: u64) {}
    /// Called after each span of a phase with its length (a phase may run in many spans).
    fn phase(&self, _phase: GenPhase, _took: Duration) {}
}

/// No progress reporting.
impl GenProgress for () {}

/// Times `f` as a span of `phase`.
pub(super) fn timed<T>(progress: &dyn GenProgress, phase: GenPhase, f: impl FnOnce() -> T) -> T {
    let t = std::time::Instant::now();
    let out = f();
    progress.phase(phase, t.elapsed());
    out
}
