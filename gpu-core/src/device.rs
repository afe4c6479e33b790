//! The small device trait each GPU API crate implements (buffers, copies, kernel launches,
//! synchronisation, memory facts), so that the stage logic above it is written once.

use std::fmt;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use prover_core::stages::density::ScalarBytes;

use crate::trace::{Pending, QueueSpan, Recorder};

/// What the host logic needs to know about a device to size its work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's name, as its driver reports it.
    pub name: String,
    /// The platform or driver it runs under (for logs and cache keys).
    pub platform: String,
    /// Driver version (part of the program cache key).
    pub driver: String,
    /// Compute units (OpenCL) or multiprocessors (CUDA).
    pub compute_units: u32,
    /// Global memory in bytes.
    pub memory_bytes: u64,
    /// The largest single allocation the device allows.
    pub max_alloc_bytes: u64,
    /// Local (shared) memory per group, in bytes.
    pub local_memory_bytes: u64,
    /// The largest group the device runs.
    pub max_group_size: usize,
    /// Whether its kernels were loaded from the program cache (not compiled at this start).
    pub program_from_cache: bool,
}

/// The alignment, in bytes, that every device buffer's start must have: the CUDA kernels read
/// and write 32-byte field elements in 16-byte accesses (`ntt.cl`'s `_ntt_read`). The drivers'
/// allocations are aligned to 256 bytes; the CUDA backend refuses one that is not aligned to
/// this (OpenCL's kernels read word by word and need no more than the word's alignment).
pub const BUFFER_ALIGN: u64 = 32;

/// Whether a buffer starting at device address `address` meets [`BUFFER_ALIGN`] (else the error
/// that says so).
pub fn check_aligned(address: u64, during: &str) -> DeviceResult<()> {
    if address % BUFFER_ALIGN == 0 {
        Ok(())
    } else {
        Err(DeviceError::new(
            during,
            format!("the buffer starts at {address:#x}, not on a {BUFFER_ALIGN}-byte boundary"),
        ))
    }
}

/// A device buffer as an API crate hands it out: it knows its size, so that every copy into or
/// out of it, and every launch given it with a count of elements, is checked against it.
pub trait RawBuffer: Send + Sync + 'static {
    /// Its size in bytes: what the allocation was asked for.
    fn len_bytes(&self) -> u64;
}

/// Whether `len` bytes at byte `offset` lie inside a buffer of `buffer_len` bytes (else the error
/// that says so, during `what`). A range ending exactly at the end passes, an empty one there
/// included; an offset and length whose sum overflows is refused.
pub fn check_range(buffer_len: u64, offset: u64, len: u64, what: &str) -> DeviceResult<()> {
    match offset.checked_add(len) {
        Some(end) if end <= buffer_len => Ok(()),
        Some(end) => Err(DeviceError::new(
            what,
            format!("bytes {offset}..{end} are outside a buffer of {buffer_len} bytes"),
        )),
        None => Err(DeviceError::new(
            what,
            format!("{len} bytes at offset {offset} overflow the address range"),
        )),
    }
}

/// Whether elements `first..first + count` of `element_bytes` bytes each lie inside a buffer of
/// `buffer_len` bytes: what a kernel given the buffer, a first element and a count may touch
/// ([`check_range`] in bytes, the products overflow-checked).
pub fn check_elements(
    buffer_len: u64,
    first: u64,
    count: u64,
    element_bytes: u64,
    what: &str,
) -> DeviceResult<()> {
    let bytes = |elements: u64| {
        elements.checked_mul(element_bytes).ok_or_else(|| {
            DeviceError::new(
                what,
                format!("{elements} elements of {element_bytes} bytes overflow the address range"),
            )
        })
    };
    check_range(buffer_len, bytes(first)?, bytes(count)?, what)
}

/// Whether a copy of `len` bytes at byte `offset` of `buffer` stays inside it: what every
/// queue's `write` and `read` checks before the API is asked (`what`: `writing`, `reading`).
pub fn check_copy<B: RawBuffer>(
    buffer: &B,
    offset: usize,
    len: usize,
    what: &str,
) -> DeviceResult<()> {
    check_range(
        buffer.len_bytes(),
        offset as u64,
        len as u64,
        &format!("{what} {len} bytes at offset {offset}"),
    )
}

/// A device error: what the API said, and what was being done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceError {
    /// The operation (`alloc 4.0 MiB`, `launch Fr_radix_fft`, ...).
    pub during: String,
    /// The API's own message or code.
    pub detail: String,
}

impl DeviceError {
    /// An error during `during`.
    pub fn new(during: impl Into<String>, detail: impl fmt::Display) -> Self {
        DeviceError {
            during: during.into(),
            detail: detail.to_string(),
        }
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.during, self.detail)
    }
}

impl std::error::Error for DeviceError {}

/// A device result.
pub type DeviceResult<T> = std::result::Result<T, DeviceError>;

/// A kernel argument.
pub enum Arg<'a, B> {
    /// A device buffer.
    Buffer(&'a B),
    /// A 32-bit unsigned integer.
    U32(u32),
    /// A field element by value.
    Scalar(Scalar),
    /// Group-local (shared) memory of this many bytes.
    Local(usize),
}

/// One device: it allocates buffers (shared by all its queues: resident bases are read by every
/// worker) and makes queues.
pub trait Device: Send + Sync + 'static {
    /// A device buffer of bytes; dropping it frees it.
    type Buffer: RawBuffer;
    /// An in-order command queue (an OpenCL queue, a CUDA stream), one per worker.
    type Queue: Queue<Buffer = Self::Buffer>;

    /// What the device is.
    fn info(&self) -> &DeviceInfo;

    /// A new buffer of `bytes` bytes (contents undefined).
    fn alloc(&self, bytes: usize) -> DeviceResult<Self::Buffer>;

    /// A new queue.
    fn queue(&self) -> DeviceResult<Self::Queue>;

    /// A new buffer used only by work queued on `queue` (a partition's scratch), freed in the
    /// queue's order where the API allows it, so that freeing it never waits for another
    /// queue's kernels (CUDA's stream-ordered allocator). By default, [`Device::alloc`].
    fn alloc_on(&self, queue: &mut Self::Queue, bytes: usize) -> DeviceResult<Self::Buffer> {
        let _ = queue;
        self.alloc(bytes)
    }

    /// Bytes free on the device right now, where the API can tell (CUDA can, OpenCL cannot).
    fn free_memory(&self) -> Option<u64> {
        None
    }
}

/// An in-order queue: operations run one after another, and a read returns when its data is
/// on the host.
pub trait Queue: Send + 'static {
    /// The device's buffer type.
    type Buffer: RawBuffer;
    /// The API's handle(s) that time one traced copy or kernel (CUDA: two events, OpenCL: the
    /// command's event); `()` for a queue that cannot trace.
    type Timing: Send;

    /// Copies `src` to `dst` at byte `offset`; a range outside `dst` is an error
    /// ([`check_copy`]), before the API is asked.
    fn write(&mut self, dst: &Self::Buffer, offset: usize, src: &[u8]) -> DeviceResult<()>;

    /// Copies `src` to `dst` at byte `offset` beside the queue's kernels: where the API can
    /// ([`Queue::copies_beside`]), the copy may run while kernels queued before it still run
    /// (`dst` must be a buffer none of them uses), and everything queued after it waits for it.
    /// The copy still waits for `dst`'s allocation: a scratch buffer (stream-ordered) must be
    /// made before the kernels it should overlap are queued, or it waits for them too.
    /// Returns when `src` may be reused. By default, [`Queue::write`].
    fn write_beside(&mut self, dst: &Self::Buffer, offset: usize, src: &[u8]) -> DeviceResult<()> {
        self.write(dst, offset, src)
    }

    /// Whether [`Queue::write_beside`] overlaps the queue's kernels (by default it does not).
    fn copies_beside(&self) -> bool {
        false
    }

    /// Copies bytes at `offset` of `src` into `dst`, and waits for them; a range outside `src`
    /// is an error ([`check_copy`]), before the API is asked.
    fn read(&mut self, src: &Self::Buffer, offset: usize, dst: &mut [u8]) -> DeviceResult<()>;

    /// Launches `kernel` on `groups` groups of `group_size` threads.
    fn launch(
        &mut self,
        kernel: &str,
        groups: usize,
        group_size: usize,
        args: &[Arg<'_, Self::Buffer>],
    ) -> DeviceResult<()>;

    /// Waits until everything queued has finished.
    fn synchronize(&mut self) -> DeviceResult<()>;

    /// Pinned (page-locked) host bytes the queue keeps for staging its copies (0 where the API
    /// copies from pageable memory); the worker registers them in the ledger while a partition
    /// uses them.
    fn staging_bytes(&self) -> u64 {
        0
    }

    /// The queue's trace recorder, where it can trace: while tracing is on, the queue records
    /// every copy and kernel there with its [`Queue::Timing`] (by default it cannot trace, and
    /// records nothing).
    fn recorder(&mut self) -> Option<&mut Recorder<Self::Timing>> {
        None
    }

    /// The spans of `pending` (recorded in queue order, everything queued finished) on the
    /// device's own clock: seconds since the device was opened.
    fn time_spans(&mut self, pending: Vec<Pending<Self::Timing>>) -> DeviceResult<Vec<QueueSpan>> {
        let _ = pending;
        Ok(Vec::new())
    }

    /// Turns tracing on or off: while on, the queue times every copy and kernel on the
    /// device's own clock (CUDA events, OpenCL profiling) without waiting for them. Returns
    /// whether the queue can trace ([`Queue::recorder`]).
    fn set_trace(&mut self, on: bool) -> DeviceResult<bool> {
        Ok(self.recorder().map(|r| r.set(on)).is_some())
    }

    /// The label of the spans recorded from now on (the accelerator's step).
    fn trace_label(&mut self, label: &str) {
        if let Some(r) = self.recorder() {
            r.label(label);
        }
    }

    /// The spans recorded since the last call, in queue order; waits for the queue.
    fn take_spans(&mut self) -> DeviceResult<Vec<QueueSpan>> {
        let pending = self.recorder().map(Recorder::drain).unwrap_or_default();
        if pending.is_empty() {
            return Ok(Vec::new());
        }
        self.synchronize()?;
        self.time_spans(pending)
    }
}

/// Types whose bytes are exactly what the kernels read and write: blstrs's field elements and
/// points are `repr(transparent)` over blst's little-endian Montgomery limbs (jacobian points
/// in projective types), which is ec-gpu-gen's layout; `ScalarBytes` is a canonical scalar
/// (an MSM exponent); `u32` an index.
///
/// # Safety
/// Implementors must be plain data with no padding, valid for any bytes the kernels write
/// (the projective types: any jacobian triple the kernels produce).
pub unsafe trait DeviceCopy: Copy + Send + Sync + 'static {}

// SAFETY: 32 bytes of limbs (size checked below).
unsafe impl DeviceCopy for Scalar {}
// SAFETY: `[u8; 32]`.
unsafe impl DeviceCopy for ScalarBytes {}
// SAFETY: two 48-byte coordinates.
unsafe impl DeviceCopy for G1Affine {}
// SAFETY: two 96-byte coordinates.
unsafe impl DeviceCopy for G2Affine {}
// SAFETY: three 48-byte coordinates (blst's jacobian `blst_p1`).
unsafe impl DeviceCopy for G1Projective {}
// SAFETY: three 96-byte coordinates (blst's jacobian `blst_p2`).
unsafe impl DeviceCopy for G2Projective {}
// SAFETY: an integer.
unsafe impl DeviceCopy for u32 {}
// SAFETY: a plain integer.
unsafe impl DeviceCopy for u64 {}

const _: () = {
    assert!(std::mem::size_of::<Scalar>() == 32);
    assert!(std::mem::size_of::<ScalarBytes>() == 32);
    assert!(std::mem::size_of::<G1Affine>() == 96);
    assert!(std::mem::size_of::<G2Affine>() == 192);
    assert!(std::mem::size_of::<G1Projective>() == 144);
    assert!(std::mem::size_of::<G2Projective>() == 288);
};

/// The bytes of a slice of device-copyable values.
pub fn bytes_of<T: DeviceCopy>(values: &[T]) -> &[u8] {
    // SAFETY: `DeviceCopy` types are plain data without padding.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}

/// The bytes of a mutable slice of device-copyable values.
pub fn bytes_of_mut<T: DeviceCopy>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as above, and every byte pattern the kernels write is a valid `T`.
    unsafe {
        std::slice::from_raw_parts_mut(values.as_mut_ptr().cast(), std::mem::size_of_val(values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_on_the_alignment_pass_and_others_are_refused() {
        for address in [0u64, 32, 256, 0x7f00_0000_0000] {
            assert_eq!(check_aligned(address, "alloc"), Ok(()), "{address:#x}");
        }
        for address in [16u64, 8, 0x7f00_0000_0010] {
            let e = check_aligned(address, "alloc").unwrap_err();
            assert_eq!(e.during, "alloc");
            assert!(e.detail.contains("32-byte boundary"), "{e}");
        }
    }

    #[test]
    fn ranges_inside_a_buffer_pass_and_others_are_refused() {
        // (buffer, offset, len): inside, to the end, empty at the end, empty buffer.
        for (buffer, offset, len) in [
            (100u64, 0u64, 100u64),
            (100, 40, 60),
            (100, 100, 0),
            (0, 0, 0),
        ] {
            assert_eq!(
                check_range(buffer, offset, len, "copy"),
                Ok(()),
                "{offset}+{len}"
            );
        }
        // Negative twins: one byte past the end, an offset past the end (even empty), an
        // offset and length whose sum overflows.
        for (buffer, offset, len, says) in [
            (
                100u64,
                0u64,
                101u64,
                "bytes 0..101 are outside a buffer of 100 bytes",
            ),
            (100, 41, 60, "bytes 41..101 are outside"),
            (100, 101, 0, "bytes 101..101 are outside"),
            (0, 0, 1, "outside a buffer of 0 bytes"),
            (100, u64::MAX, 1, "overflow"),
            (u64::MAX, 1, u64::MAX, "overflow"),
        ] {
            let e = check_range(buffer, offset, len, "copy").unwrap_err();
            assert_eq!(e.during, "copy");
            assert!(e.detail.contains(says), "{offset}+{len}: {e}");
        }
    }

    #[test]
    fn element_ranges_are_checked_in_bytes_without_overflow() {
        // 10 elements of 32 bytes: all, the last one, none past the end.
        assert_eq!(check_elements(320, 0, 10, 32, "exps"), Ok(()));
        assert_eq!(check_elements(320, 9, 1, 32, "exps"), Ok(()));
        assert_eq!(check_elements(320, 10, 0, 32, "exps"), Ok(()));
        // Negative twins: one element more, one further, counts whose bytes overflow.
        assert!(check_elements(320, 0, 11, 32, "exps").is_err());
        assert!(check_elements(320, 10, 1, 32, "exps").is_err());
        let e = check_elements(320, 0, u64::MAX / 16, 32, "exps").unwrap_err();
        assert!(e.detail.contains("overflow"), "{e}");
        let e = check_elements(320, u64::MAX / 16, 0, 32, "exps").unwrap_err();
        assert!(e.detail.contains("overflow"), "{e}");
    }

    struct Bytes(u64);
    impl RawBuffer for Bytes {
        fn len_bytes(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn copies_are_checked_against_the_buffers_length() {
        assert_eq!(check_copy(&Bytes(64), 32, 32, "writing"), Ok(()));
        let e = check_copy(&Bytes(64), 32, 33, "writing").unwrap_err();
        assert_eq!(e.during, "writing 33 bytes at offset 32");
        assert!(e.detail.contains("outside a buffer of 64 bytes"), "{e}");
        assert!(check_copy(&Bytes(64), usize::MAX, 1, "reading").is_err());
    }
}
