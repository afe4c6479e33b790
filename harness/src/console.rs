//! Printing that never panics. `std`'s `println!` panics when standard output is a closed pipe
//! (`proofline prove | head -1`) or a full disk, which would lose a proof already made. Here a
//! failed write is remembered instead; the command finishes the work that matters (a proof is
//! still verified and written), and the binary then exits quietly with a closed pipe's
//! conventional status, or with an error naming standard output. Standard error is best
//! effort: nothing is left to tell when it fails.

use std::io::Write;
use std::sync::Mutex;

/// What became of standard output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stdout {
    /// Every write went through.
    Fine,
    /// The reader went away (EPIPE): output stopped, the work went on.
    Closed,
    /// A write failed otherwise (a full disk): the reason.
    Failed(String),
}

static STATE: Mutex<Stdout> = Mutex::new(Stdout::Fine);

/// The exit status of a command whose output pipe closed (128 + SIGPIPE, as a shell reports a
/// process that SIGPIPE ended).
pub const CLOSED_PIPE_STATUS: u8 = 141;

/// Writes to standard output; a failure is remembered, and later writes are skipped.
pub fn out(args: std::fmt::Arguments) {
    let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if *state != Stdout::Fine {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.flush()) {
        *state = if e.kind() == std::io::ErrorKind::BrokenPipe {
            Stdout::Closed
        } else {
            Stdout::Failed(crate::outputs::reason(&e))
        };
    }
}

/// Writes to standard error, ignoring failure.
pub fn err(args: std::fmt::Arguments) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_fmt(args).and_then(|()| e.flush());
}

/// What became of standard output so far.
pub fn stdout_state() -> Stdout {
    STATE.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// `println!` that never panics (see the module).
#[macro_export]
macro_rules! say {
    () => { $crate::console::out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::console::out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that never panics (see the module).
#[macro_export]
macro_rules! tell {
    ($($arg:tt)*) => { $crate::console::err(format_args!("{}\n", format_args!($($arg)*))) };
}
