//! CUDA events: a traced copy's or kernel's start and end ([`Event`]), and the error of a
//! driver call.

use cudarc::driver::result as cu;
use cudarc::driver::sys::{CUevent, CUevent_flags, CUstream};
use gpu_core::device::{DeviceError, DeviceResult};

/// The error of a driver call made during `during`.
pub(crate) fn err(during: impl Into<String>) -> impl FnOnce(cu::DriverError) -> DeviceError {
    let during = during.into();
    move |e| DeviceError::new(during, format!("{e:?}"))
}

/// A CUDA event that may cross threads (events are driver handles, usable from any thread of
/// the context), destroyed when dropped: a traced span's start or end.
pub struct Event(pub(crate) CUevent);

// SAFETY: an event handle is not tied to a thread; every use binds the context first.
unsafe impl Send for Event {}
// SAFETY: after it is recorded (in `open`) the epoch is only read (`cuEventElapsedTime`).
unsafe impl Sync for Event {}

impl Event {
    /// A timing event in the current context.
    pub(crate) fn new() -> DeviceResult<Self> {
        cu::event::create(CUevent_flags::CU_EVENT_DEFAULT)
            .map(Event)
            .map_err(err("creating an event"))
    }

    /// An event for ordering only (not timed: cheaper to record and wait for).
    pub(crate) fn plain() -> DeviceResult<Self> {
        cu::event::create(CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map(Event)
            .map_err(err("creating an event"))
    }

    /// Milliseconds from `self` to `later` (both recorded and complete).
    pub(crate) fn ms_to(&self, later: &Event) -> DeviceResult<f64> {
        // SAFETY: two live timing events of this context, both complete (the caller waited).
        unsafe { cu::event::elapsed(self.0, later.0) }
            .map(f64::from)
            .map_err(err("timing an event"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: destroyed once; a pending event's resources are released when it completes.
        let _ = unsafe { cu::event::destroy(self.0) };
    }
}

/// A timing event recorded on `stream` now, reusing one of `spare`, when tracing (`on`).
pub(crate) fn record_mark(
    spare: &mut Vec<Event>,
    on: bool,
    stream: CUstream,
) -> DeviceResult<Option<Event>> {
    if !on {
        return Ok(None);
    }
    let e = match spare.pop() {
        Some(e) => e,
        None => Event::new()?,
    };
    // SAFETY: a live timing event recorded on one of the queue's live streams.
    unsafe { cu::event::record(e.0, stream) }.map_err(err("recording an event"))?;
    Ok(Some(e))
}
