//! SIGINT and SIGTERM, handled the same way in every phase of a command. Outside a cooperative
//! phase (parameter generation and loading, proving in this process) the process removes the
//! temporary files its writers have open and then ends on the signal, at once. Inside one (the
//! sweep's loop over its child processes) the signal is only recorded: the sweep stops its
//! running child and writes what it has; a second signal ends it at once.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The first signal received (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// Whether a cooperative phase is running.
static COOPERATIVE: AtomicBool = AtomicBool::new(false);
/// The write end of the pipe that wakes the watcher thread (-1 until installed).
static WAKE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let first = RECEIVED
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    let byte = if first { sig as u8 } else { 0xff };
    let fd = WAKE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; the buffer is a live local byte.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Installs the handlers and the watcher thread (once per process; later calls do nothing).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe(2) fills the two descriptors.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return;
        }
        let (read, write) = (fds[0], fds[1]);
        WAKE.store(write, Ordering::SeqCst);
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || watch(read))
            .ok();
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the handler stores to atomics and writes one byte; sigaction gets valid
            // pointers. No SA_RESTART, so that a wait for a child returns.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
    });
}

/// The watcher: woken by the handler, it ends the process unless a cooperative phase runs.
fn watch(read: libc::c_int) {
    loop {
        let mut byte = 0u8;
        // SAFETY: reading one byte into a live local.
        let n = unsafe { libc::read(read, (&mut byte as *mut u8).cast(), 1) };
        if n == 0 {
            return;
        }
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if byte == 0xff || !COOPERATIVE.load(Ordering::SeqCst) {
            end(RECEIVED.load(Ordering::SeqCst));
        }
    }
}

/// Removes this process's open temporary files and ends it on `sig`, as its default action
/// would (a shell then reports 128 + the signal's number).
fn end(sig: libc::c_int) -> ! {
    let removed = prover_core::groth16::params::remove_temporaries();
    crate::tell!(
        "interrupted ({}){}",
        signal_name(sig),
        if removed > 0 {
            format!("; removed {removed} partial file(s)")
        } else {
            String::new()
        }
    );
    // SAFETY: restoring the default action and raising the signal on ourselves.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
        libc::_exit(128 + sig)
    }
}

/// The signal that interrupted this process, if one did.
pub fn interrupted() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// A signal's name: SIGINT, SIGTERM, else `signal N`.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGPIPE => "SIGPIPE".into(),
        s => format!("signal {s}"),
    }
}

/// A cooperative phase: while it lives, a first signal is only recorded (see the module).
pub struct Cooperative(());

impl Cooperative {
    /// Starts a cooperative phase; a signal received before it ends the process now.
    pub fn start() -> Self {
        COOPERATIVE.store(true, Ordering::SeqCst);
        Cooperative(())
    }
}

impl Drop for Cooperative {
    fn drop(&mut self) {
        COOPERATIVE.store(false, Ordering::SeqCst);
    }
}
