//! The error type of the core crate: every failure names what was wrong and where.

use std::fmt;

/// Why a point could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointError {
    /// The flag bits or a coordinate (>= p) are not a valid encoding.
    BadEncoding,
    /// The coordinates do not satisfy the curve equation.
    NotOnCurve,
    /// The point is on the curve but not in the prime-order subgroup.
    NotInSubgroup,
    /// The point at infinity, where the format forbids it.
    Identity,
}

impl fmt::Display for PointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PointError::BadEncoding => "bad encoding",
            PointError::NotOnCurve => "not on the curve",
            PointError::NotInSubgroup => "not in the prime-order subgroup",
            PointError::Identity => "the point at infinity, which is forbidden here",
        })
    }
}

/// Errors of proofline's core.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input ended before a field was complete.
    #[error("{what}: truncated data: needed {needed} bytes at offset {offset}, {available} left")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Byte offset where the field starts.
        offset: u64,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes that were left.
        available: u64,
    },
    /// A length prefix claims more elements than the data can hold.
    #[error("{what}: length prefix claims {claimed} elements ({claimed_bytes} bytes) but only {available} bytes are left")]
    LengthExceedsData {
        /// The section.
        what: &'static str,
        /// Element count of the prefix.
        claimed: u64,
        /// Bytes those elements need.
        claimed_bytes: u64,
        /// Bytes that were left.
        available: u64,
    },
    /// Bytes remain after the last section.
    #[error("{what}: {extra} trailing bytes after the last section")]
    TrailingBytes {
        /// What was being read.
        what: &'static str,
        /// Count of extra bytes.
        extra: u64,
    },
    /// A point failed to decode.
    #[error("{what}[{index}]: {reason}")]
    InvalidPoint {
        /// The section or field.
        what: &'static str,
        /// Index inside the section (0 for single fields).
        index: usize,
        /// Why.
        reason: PointError,
    },
    /// A structural problem of a verifying key or parameters.
    #[error("malformed {what}: {detail}")]
    Malformed {
        /// What is malformed.
        what: &'static str,
        /// Details.
        detail: String,
    },
    /// The number of public inputs does not match the verifying key.
    #[error("public inputs: the verifying key expects {expected}, got {got}")]
    PublicInputCount {
        /// Count that the key expects (without the implicit ONE).
        expected: usize,
        /// Count given.
        got: usize,
    },
    /// The circuit does not match the parameters.
    #[error("circuit does not match the parameters: {what}: circuit has {circuit}, parameters have {params}")]
    ShapeMismatch {
        /// The quantity that differs.
        what: &'static str,
        /// The circuit's value.
        circuit: usize,
        /// The parameters' value.
        params: usize,
    },
    /// The circuit does not match the pre-compiled synthesizer's recorded matrices.
    #[error("circuit does not match the recorded constraint system (pre-compiled synthesis): {what}: circuit has {circuit}, recorded matrices have {recorded}")]
    PrecompiledMismatch {
        /// The quantity that differs.
        what: &'static str,
        /// The circuit's value.
        circuit: usize,
        /// The recorded value.
        recorded: usize,
    },
    /// The witness does not satisfy a constraint.
    #[error("circuit is not satisfied: constraint {index} ({annotation}) fails a * b = c")]
    Unsatisfied {
        /// Index of the first failing constraint.
        index: usize,
        /// The constraint's annotation.
        annotation: String,
    },
    /// The witness's public inputs are not the statement the caller gave for the partition.
    #[error("the witness's public inputs differ from the statement's (first at input {position}; the witness has {own}, the statement {declared}): the circuit's data does not prove the statement it was given")]
    StatementMismatch {
        /// The first input (without the constant ONE) that differs.
        position: usize,
        /// How many inputs the witness has.
        own: usize,
        /// How many the statement has.
        declared: usize,
    },
    /// An error raised by the circuit's own code during synthesis.
    #[error("synthesis: {0}")]
    Synthesis(#[from] bellpepper_core::SynthesisError),
    /// The circuit needs a larger evaluation domain than BLS12-381's Fr supports.
    #[error("circuit needs an evaluation domain of 2^{log2}; BLS12-381's Fr allows at most 2^31")]
    DomainTooLarge {
        /// log2 of the needed domain.
        log2: u32,
    },
    /// A backend failed.
    #[error("backend {backend}: {source}")]
    Backend {
        /// The backend's name.
        backend: String,
        /// The backend's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A partition of a job failed; names the partition and the stage.
    #[error("partition {partition} failed in {stage}: {source}")]
    PartitionFailed {
        /// Index of the partition in its job.
        partition: usize,
        /// The stage (`synthesis`, `accelerator`, `finalize`).
        stage: &'static str,
        /// The cause.
        #[source]
        source: Box<Error>,
    },
    /// A partition's proof did not verify against its public inputs; says who produced it and
    /// what that points to (a device fault, the parameters, or the witness).
    #[error("the proof from {produced_by} does not verify: {detail}")]
    ProofRejected {
        /// The device or backend that produced the proof's sums (`cuda:0`, `cpu`).
        produced_by: String,
        /// What the rejection points to, and what to do.
        detail: String,
    },
    /// A stage panicked; the panic was caught and the partition failed.
    #[error("{stage} panicked: {message}")]
    Panicked {
        /// The stage.
        stage: &'static str,
        /// The panic message.
        message: String,
    },
    /// A partition needs more memory than the whole budget.
    #[error("partition needs {needed} bytes but the whole memory budget is {budget} bytes")]
    OverBudget {
        /// Estimated bytes of the partition.
        needed: u64,
        /// The budget.
        budget: u64,
    },
    /// An option or a combination of options that cannot run (engine configuration, a prove
    /// request).
    #[error("invalid {what}: {detail}")]
    InvalidConfig {
        /// What is configured: a noun without an article, read after "invalid" (`engine
        /// configuration`, `NTT pass shape`).
        what: &'static str,
        /// What is wrong, and what would be accepted.
        detail: String,
    },
    /// A resource could not be obtained (threads, a device, a memory limit reading).
    #[error("could not obtain {what}: {detail}")]
    Resource {
        /// The resource.
        what: &'static str,
        /// Why.
        detail: String,
    },
    /// Parameters prepared by one backend were given to another.
    #[error("parameters were prepared by backend {prepared} but are used with backend {used}: prepare them with the backend that proves")]
    BackendMismatch {
        /// The backend that prepared them.
        prepared: String,
        /// The backend they were given to.
        used: String,
    },
    /// The job was cancelled.
    #[error("job cancelled")]
    Cancelled,
    /// The engine shut down before the job finished.
    #[error("engine shut down before the job finished")]
    ShutDown,
    /// An I/O error. Its reason is part of the message ([`io_reason`]) and is not
    /// given again as the error's `source()`, so a report of the whole chain (`{:#}`) says it
    /// once.
    #[error("{context}: {}", io_reason(.error))]
    Io {
        /// What was being done, naming the file.
        context: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// An error in the contents of a file (a parameter or key file that does not decode): the
    /// file, then what is wrong at which offset ([`Error::inner`]).
    #[error("{}: {error}", .path.display())]
    InFile {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with its contents.
        error: Box<Error>,
    },
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, error: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            error,
        }
    }

    /// This error, found while reading the contents of `path` ([`Error::InFile`]). For the
    /// errors of decoding a file, not of opening it (those name the file already).
    pub fn in_file(self, path: &std::path::Path) -> Self {
        match self {
            Error::InFile { .. } => self,
            error => Error::InFile {
                path: path.to_path_buf(),
                error: Box::new(error),
            },
        }
    }

    /// The error itself, without the file that [`Error::InFile`] names.
    pub fn inner(&self) -> &Error {
        match self {
            Error::InFile { error, .. } => error.inner(),
            other => other,
        }
    }
}

/// Runs `f`, turning a panic into [`Error::Panicked`] for `stage`: the one place where a stage's
/// panic is caught, so a panicking backend fails its partition instead of the engine.
pub fn catch_panic<T>(stage: &'static str, f: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| Error::Panicked {
        stage,
        message: p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".into()),
    })
}

/// Result alias of the core crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An I/O error's reason in words: the system's own message, except where its wording
/// misleads.
pub fn io_reason(e: &std::io::Error) -> String {
    #[cfg(unix)]
    match e.raw_os_error() {
        Some(libc::ELOOP) => return "a loop of symbolic links".into(),
        Some(libc::EROFS) => return "a read-only file system".into(),
        Some(libc::ENOSPC) => return "no space left on the device".into(),
        _ => {}
    }
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_says_its_reason_once() {
        let e = Error::io(
            "opening x",
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a FIFO, not a regular file",
            ),
        );
        assert_eq!(e.to_string(), "opening x: a FIFO, not a regular file");
        // A chain report (anyhow's `{:#}`) adds each source's message: there is none to repeat.
        assert!(std::error::Error::source(&e).is_none());
    }

    #[test]
    fn an_error_in_a_file_names_it_once() {
        let path = std::path::Path::new("/p/x.params");
        let e = Error::TrailingBytes {
            what: "parameters",
            extra: 1,
        }
        .in_file(path);
        assert_eq!(
            e.to_string(),
            "/p/x.params: parameters: 1 trailing bytes after the last section"
        );
        assert!(matches!(e.inner(), Error::TrailingBytes { extra: 1, .. }));
        assert!(std::error::Error::source(&e).is_none());
        // Twin: wrapped again, the file is still named once.
        assert_eq!(e.in_file(path).to_string().matches("x.params").count(), 1);
    }
}
