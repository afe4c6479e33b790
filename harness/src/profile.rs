//! `prove --profile FILE.svg`: where the proving time goes, sampled with pprof and drawn as a
//! flamegraph (every thread, 199 samples a second).

use std::path::Path;

/// Samples per second.
const SAMPLE_HZ: i32 = 199;

/// A running sampler; [`Flamegraph::write`] stops it and draws what it saw.
pub struct Flamegraph {
    guard: pprof::ProfilerGuard<'static>,
}

impl Flamegraph {
    /// Starts sampling every thread of this process.
    pub fn start() -> Result<Self, String> {
        pprof::ProfilerGuardBuilder::default()
            .frequency(SAMPLE_HZ)
            .blocklist(&["libc", "libgcc", "pthread", "vdso"])
            .build()
            .map(|guard| Flamegraph { guard })
            .map_err(|e| format!("starting the profiler: {e}"))
    }

    /// Stops sampling and writes the flamegraph to `path` (through a temporary file).
    pub fn write(self, path: &Path, title: &str) -> Result<(), String> {
        let report = self
            .guard
            .report()
            .build()
            .map_err(|e| format!("building the profile: {e}"))?;
        let mut options = pprof::flamegraph::Options::default();
        options.title = title.to_string();
        let mut svg = Vec::new();
        report
            .flamegraph_with_options(&mut svg, &mut options)
            .map_err(|e| format!("drawing the flamegraph: {e}"))?;
        crate::outputs::write_file(path, &svg)
    }
}
