//! One device as the stage logic sees it: the API's device, its memory gauge and the kernel
//! names, with the allocation and launch helpers every stage uses.

use std::sync::Arc;

use crate::device::{bytes_of, Arg, Device, DeviceCopy, DeviceResult, Queue};
use crate::memory::{DeviceBuffer, MemoryGauge};
use crate::source::KernelNames;

/// Threads per group of the element-wise kernels.
pub const GROUP: usize = 64;

/// A device with its gauge and kernels.
pub struct GpuDevice<D: Device> {
    /// The API's device.
    pub device: D,
    /// Its memory gauge (the limit the layer keeps to).
    pub gauge: Arc<MemoryGauge>,
    /// The kernels' names.
    pub names: KernelNames,
}

impl<D: Device> GpuDevice<D> {
    /// A counted buffer of `bytes` bytes.
    pub fn alloc(&self, bytes: u64, what: &str) -> DeviceResult<DeviceBuffer<D>> {
        DeviceBuffer::new(&self.device, &self.gauge, bytes, what)
    }

    /// A counted buffer holding `values`.
    pub fn upload<T: DeviceCopy>(
        &self,
        queue: &mut D::Queue,
        values: &[T],
        what: &str,
    ) -> DeviceResult<DeviceBuffer<D>> {
        let buf = self.alloc(std::mem::size_of_val(values) as u64, what)?;
        if !values.is_empty() {
            queue.write(buf.raw(), 0, bytes_of(values))?;
        }
        Ok(buf)
    }
}

/// Launches `kernel` with at least `threads` threads, in groups of [`GROUP`] (kernels guard
/// their index).
pub fn launch_threads<Q: Queue>(
    queue: &mut Q,
    kernel: &str,
    threads: usize,
    args: &[Arg<'_, Q::Buffer>],
) -> DeviceResult<()> {
    if threads == 0 {
        return Ok(());
    }
    queue.launch(kernel, threads.div_ceil(GROUP), GROUP, args)
}
