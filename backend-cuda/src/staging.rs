//! A queue's pinned staging buffer ([`Staging`]): large copies to the device go through it,
//! two halves in turn, so that the host's copy into one half (on every core) overlaps the DMA
//! from the other.

use std::sync::Arc;

use cudarc::driver::result as cu;
use cudarc::driver::sys::{CUdeviceptr, CUevent, CUevent_flags, CUstream};
use cudarc::driver::CudaContext;
use gpu_core::device::DeviceResult;

use crate::event::{err, Event};

/// Bytes of each half of a queue's pinned staging buffer.
pub const STAGING_HALF: usize = 32 << 20;

/// Bytes each thread copies into a staging half (one thread copied at about 8 GB/s on the
/// H200's host, a sixth of what the link takes: a 2^24-scalar witness took 67 ms to upload).
const COPY_PIECE: usize = 2 << 20;

/// Copies of at least this many bytes go through the pinned staging buffer.
pub const STAGED_MIN: usize = 1 << 20;

/// A pinned host buffer of two halves of [`STAGING_HALF`] bytes, with an event per half marking
/// the end of the last copy out of it.
pub(crate) struct Staging {
    ctx: Arc<CudaContext>,
    ptr: *mut u8,
    events: [CUevent; 2],
}

// SAFETY: the pinned memory and the events belong to the queue that owns them; a queue is used
// by one thread at a time (it is `Send`, not `Sync`).
unsafe impl Send for Staging {}

impl Staging {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> DeviceResult<Self> {
        ctx.bind_to_thread().map_err(err("binding the context"))?;
        let event = || {
            cu::event::create(CUevent_flags::CU_EVENT_DISABLE_TIMING)
                .map_err(err("creating an event"))
        };
        let events = [event()?, event()?];
        // SAFETY: a plain page-locked allocation, freed once in `drop`.
        let ptr = unsafe { cu::malloc_host(2 * STAGING_HALF, 0) }
            .map_err(err(format!("pinning {} of host memory", 2 * STAGING_HALF)))?;
        Ok(Staging {
            ctx: ctx.clone(),
            ptr: ptr.cast(),
            events,
        })
    }

    /// Copies `src` to `dst` through the two halves: the host fills one while the other's DMA
    /// runs. Returns when everything is queued. Each half is refilled only once its last copy
    /// has run, whichever write and stream queued that copy: a copy beside the queue's kernels
    /// returns with its last halves' copies still queued behind whatever its stream waits for.
    /// `dst` must have room for `src` (the queue checks the range against its buffer first).
    /// `first` is called once, right before the first DMA is queued (for the copy's start
    /// mark, which this returns).
    pub(crate) fn write(
        &mut self,
        stream: CUstream,
        dst: CUdeviceptr,
        src: &[u8],
        first: &mut dyn FnMut() -> DeviceResult<Option<Event>>,
    ) -> DeviceResult<Option<Event>> {
        let mut start = None;
        for (i, chunk) in src.chunks(STAGING_HALF).enumerate() {
            let half = i % 2;
            // SAFETY: the event was recorded after the last copy out of this half (or never, and
            // then it is complete); the half has `STAGING_HALF` >= `chunk.len()` bytes; the
            // copy reads the pinned half, which stays untouched until its event completes.
            unsafe {
                cu::event::synchronize(self.events[half])
                    .map_err(err("waiting for a staged copy"))?;
                let buf = self.ptr.add(half * STAGING_HALF);
                copy_in_pieces(chunk, buf);
                if i == 0 {
                    start = first()?;
                }
                cudarc::driver::sys::cuMemcpyHtoDAsync_v2(
                    dst + (i * STAGING_HALF) as u64,
                    buf.cast(),
                    chunk.len(),
                    stream,
                )
                .result()
                .map_err(err(format!("copying {} bytes to the device", chunk.len())))?;
                cu::event::record(self.events[half], stream)
                    .map_err(err("recording a staged copy"))?;
            }
        }
        Ok(start)
    }
}

/// Copies `src` to `dst` in pieces of [`COPY_PIECE`] bytes on rayon's threads.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes and not overlap `src`.
unsafe fn copy_in_pieces(src: &[u8], dst: *mut u8) {
    use rayon::prelude::*;
    // The address crosses threads as an integer: each piece writes its own disjoint range.
    let base = dst as usize;
    src.par_chunks(COPY_PIECE)
        .enumerate()
        .for_each(|(k, piece)| {
            // SAFETY: piece k is `src[k * COPY_PIECE..][..piece.len()]`, and the caller gives `dst`
            // valid for `src.len()` bytes; the pieces' ranges are disjoint.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    piece.as_ptr(),
                    (base + k * COPY_PIECE) as *mut u8,
                    piece.len(),
                )
            }
        });
}

impl Drop for Staging {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: every copy out of the buffer is finished (the events are waited for), then
            // the buffer and the events are freed once.
            unsafe {
                for e in self.events {
                    let _ = cu::event::synchronize(e);
                    let _ = cu::event::destroy(e);
                }
                let _ = cu::free_host(self.ptr.cast());
            }
        }
    }
}
