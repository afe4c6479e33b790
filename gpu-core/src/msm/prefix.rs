//! Exclusive prefix sums of u32 counts on the device (`pl_scan_*` in `pippenger.cl`): the
//! sorted MSM's bucket offsets and the 0/1 split's list offsets.

use crate::context::{launch_threads, GpuDevice};
use crate::device::{check_elements, Arg, Device, DeviceResult};
use crate::memory::DeviceBuffer;

/// Bucket counts scanned per thread.
const SCAN_PER: u32 = 1024;

/// Device bytes of the block totals [`exclusive_scan`] needs for `len` counts.
pub fn scan_sums_bytes(len: usize) -> u64 {
    4 * len.div_ceil(SCAN_PER as usize) as u64
}

/// Replaces `counts[0..len)` (u32, on the device) by its exclusive prefix sums, with `sums`
/// ([`scan_sums_bytes`] bytes) for the block totals: blocks of `SCAN_PER` scanned one thread
/// each, the block totals scanned, then added back. `len` past `counts`, or block totals past
/// `sums`, is an error.
pub fn exclusive_scan<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    counts: &DeviceBuffer<D>,
    len: usize,
    sums: &DeviceBuffer<D>,
) -> DeviceResult<()> {
    let names = &gpu.names;
    let blocks = len.div_ceil(SCAN_PER as usize);
    let what = format!("scanning {len} counts");
    check_elements(counts.bytes(), 0, len as u64, 4, &what)?;
    check_elements(sums.bytes(), 0, blocks as u64, 4, &what)?;
    launch_threads(
        q,
        &names.pl_scan_blocks,
        blocks,
        &[
            Arg::Buffer(counts.raw()),
            Arg::U32(len as u32),
            Arg::U32(SCAN_PER),
            Arg::U32(blocks as u32),
            Arg::Buffer(sums.raw()),
        ],
    )?;
    launch_threads(
        q,
        &names.pl_scan_sums,
        1,
        &[Arg::Buffer(sums.raw()), Arg::U32(blocks as u32)],
    )?;
    launch_threads(
        q,
        &names.pl_scan_add,
        len,
        &[
            Arg::Buffer(counts.raw()),
            Arg::U32(len as u32),
            Arg::U32(SCAN_PER),
            Arg::Buffer(sums.raw()),
        ],
    )
}
