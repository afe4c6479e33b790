//! One device as the stage logic sees it: the API's device, its memory gauge and the kernel
//! names, with the allocation and launch helpers every stage uses.

use std::sync::Arc;

use crate::device::{bytes_of, Arg, Device, DeviceCopy, DeviceResult, Queue};
use crate::kernels::KernelNames;
use crate::memory::{DeviceBuffer, MemoryGauge};

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
    /// A counted buffer of `bytes` bytes, usable from every queue (resident bases).
    pub fn alloc(&self, bytes: u64, what: &str) -> DeviceResult<DeviceBuffer<D>> {
        DeviceBuffer::new(&self.device, &self.gauge, bytes, what)
    }

    /// A counted buffer of `bytes` bytes used only by work on `queue` (a partition's scratch:
    /// freeing it does not wait for other queues, see [`Device::alloc_on`]).
    pub fn scratch(
        &self,
        queue: &mut D::Queue,
        bytes: u64,
        what: &str,
    ) -> DeviceResult<DeviceBuffer<D>> {
        DeviceBuffer::new_with(&self.device, &self.gauge, bytes, what, |size| {
            self.device.alloc_on(queue, size)
        })
    }

    /// A counted buffer holding `values`, usable from every queue.
    pub fn upload<T: DeviceCopy>(
        &self,
        queue: &mut D::Queue,
        values: &[T],
        what: &str,
    ) -> DeviceResult<DeviceBuffer<D>> {
        let buf = self.alloc(std::mem::size_of_val(values) as u64, what)?;
        write_all(queue, &buf, values)?;
        Ok(buf)
    }

    /// A scratch buffer of `queue` holding `values`.
    pub fn upload_scratch<T: DeviceCopy>(
        &self,
        queue: &mut D::Queue,
        values: &[T],
        what: &str,
    ) -> DeviceResult<DeviceBuffer<D>> {
        let buf = self.scratch(queue, std::mem::size_of_val(values) as u64, what)?;
        write_all(queue, &buf, values)?;
        Ok(buf)
    }
}

fn write_all<D: Device, T: DeviceCopy>(
    queue: &mut D::Queue,
    buf: &DeviceBuffer<D>,
    values: &[T],
) -> DeviceResult<()> {
    if values.is_empty() {
        return Ok(());
    }
    queue.write(buf.raw(), 0, bytes_of(values))
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
