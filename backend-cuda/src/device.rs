//! The CUDA device through cudarc's driver API: a context per device, the kernels' CUBINs (one
//! module per kernel, `nvrtc::modules`) loaded once,
//! a non-blocking stream per queue. Buffers shared by every queue (resident bases) are
//! `cuMemAlloc`/`cuMemFree` allocations (freeing waits for the device, so a buffer dropped while
//! a kernel still reads it is safe); a partition's scratch comes from the stream-ordered
//! allocator (`cuMemAllocAsync`/`cuMemFreeAsync` on the worker's stream: freed after the
//! stream's earlier work, without waiting for other workers' kernels). Large copies to the
//! device go through a pinned staging buffer per queue, two halves in turn, so that the host's
//! copy into one half overlaps the DMA from the other.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use blstrs::Scalar;
use cudarc::driver::result as cu;
use cudarc::driver::sys::{CUdevice_attribute, CUdeviceptr, CUevent_wait_flags, CUstream};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use gpu_core::device::{
    check_aligned, check_copy, Arg, Device, DeviceError, DeviceInfo, DeviceResult, Queue, RawBuffer,
};
use gpu_core::trace::{Pending, QueueSpan, Recorder};
use prover_core::SpanKind;

pub use crate::event::Event;
use crate::event::{err, record_mark};
use crate::staging::Staging;
pub use crate::staging::{STAGED_MIN, STAGING_HALF};

/// Each kernel's module, by kernel name.
type Kernels = Arc<HashMap<String, Arc<CudaModule>>>;

/// One CUDA device with its modules.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    kernels: Kernels,
    info: DeviceInfo,
    /// Whether the device has the stream-ordered allocator.
    pools: bool,
    /// The device clock's zero for traces: an event recorded when the device was opened.
    epoch: Arc<Event>,
}

impl CudaDevice {
    /// Opens device `ordinal` and loads each kernel's CUBIN (made for its architecture).
    pub fn open(
        ordinal: usize,
        modules: Vec<crate::nvrtc::Module>,
        nvrtc: (i32, i32),
    ) -> DeviceResult<Self> {
        let ctx =
            CudaContext::new(ordinal).map_err(err(format!("opening CUDA device {ordinal}")))?;
        let mut info = info(&ctx, nvrtc)?;
        info.program_from_cache = modules.iter().all(|m| m.cached);
        let mut kernels = HashMap::with_capacity(modules.len());
        for m in modules {
            let module = ctx
                .load_module(cudarc::nvrtc::Ptx::from_binary(m.cubin))
                .map_err(err(format!("loading kernel {} on {}", m.kernel, info.name)))?;
            kernels.insert(m.kernel, module);
        }
        let pools = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
            .map_err(err("reading a device attribute"))?
            != 0;
        let epoch = {
            ctx.bind_to_thread().map_err(err("binding the context"))?;
            let stream = ctx.new_stream().map_err(err("creating a stream"))?;
            let e = Event::new()?;
            // SAFETY: a live event recorded on a live stream of its context, then waited for.
            unsafe { cu::event::record(e.0, stream.cu_stream()) }
                .map_err(err("recording an event"))?;
            stream
                .synchronize()
                .map_err(err("waiting for the stream"))?;
            Arc::new(e)
        };
        Ok(CudaDevice {
            ctx,
            kernels: Arc::new(kernels),
            info,
            pools,
            epoch,
        })
    }

    /// The device's compute capability.
    pub fn arch(ordinal: usize) -> DeviceResult<(i32, i32)> {
        let ctx =
            CudaContext::new(ordinal).map_err(err(format!("opening CUDA device {ordinal}")))?;
        ctx.compute_capability()
            .map_err(err("reading the compute capability"))
    }
}

fn info(ctx: &Arc<CudaContext>, nvrtc: (i32, i32)) -> DeviceResult<DeviceInfo> {
    let attr = |a| ctx.attribute(a).map_err(err("reading a device attribute"));
    let (major, minor) = ctx
        .compute_capability()
        .map_err(err("reading the compute capability"))?;
    let memory = ctx.total_mem().map_err(err("reading the memory size"))? as u64;
    let mut driver = 0;
    // SAFETY: a valid out-pointer.
    let _ = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver) };
    Ok(DeviceInfo {
        name: ctx.name().map_err(err("reading the device name"))?,
        platform: format!("CUDA sm_{major}{minor}, NVRTC {}.{}", nvrtc.0, nvrtc.1),
        driver: format!("CUDA driver {}.{}", driver / 1000, driver % 1000 / 10),
        compute_units: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
        memory_bytes: memory,
        max_alloc_bytes: memory,
        local_memory_bytes: attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
        )? as u64,
        max_group_size: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?
            as usize,
        program_from_cache: false,
    })
}

/// A device allocation of bytes: device-wide, or ordered on the stream it was made for (then
/// with an event recorded on that stream right after the allocation, which a copy on another
/// stream waits for before writing into it). It knows its length: every copy is checked
/// against it (the driver does not check: a copy past the end would write into whatever the
/// memory pool put next).
pub struct CuBuffer {
    ptr: CUdeviceptr,
    /// Bytes asked for (the allocation has at least one more when this is 0).
    len: u64,
    ctx: Arc<CudaContext>,
    stream: Option<Arc<CudaStream>>,
    allocated: Option<Event>,
}

impl RawBuffer for CuBuffer {
    fn len_bytes(&self) -> u64 {
        self.len
    }
}

impl Drop for CuBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: freed once, the way it was allocated: `cuMemAllocAsync` on `stream` (only
            // that stream's work uses it, and the free is ordered after it) or `cuMemAlloc`.
            let _ = unsafe {
                match &self.stream {
                    Some(stream) => cu::free_async(self.ptr, stream.cu_stream()),
                    None => cu::free_sync(self.ptr),
                }
            };
        }
    }
}

impl Device for CudaDevice {
    type Buffer = CuBuffer;
    type Queue = CudaQueue;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> DeviceResult<CuBuffer> {
        self.ctx
            .bind_to_thread()
            .map_err(err("binding the context"))?;
        // SAFETY: a plain allocation in the bound context.
        let ptr = unsafe { cu::malloc_sync(bytes.max(1)) }.map_err(err(format!(
            "allocating {bytes} bytes on {}",
            self.info.name
        )))?;
        let buffer = CuBuffer {
            ptr,
            len: bytes as u64,
            ctx: self.ctx.clone(),
            stream: None,
            allocated: None,
        };
        check_aligned(buffer.ptr, "allocating")?;
        Ok(buffer)
    }

    fn alloc_on(&self, queue: &mut CudaQueue, bytes: usize) -> DeviceResult<CuBuffer> {
        if !self.pools {
            return self.alloc(bytes);
        }
        self.ctx
            .bind_to_thread()
            .map_err(err("binding the context"))?;
        // SAFETY: an allocation ordered on the queue's stream; its users are that stream's
        // work (gpu-core's scratch buffers), and it is freed on the same stream.
        let ptr = unsafe { cu::malloc_async(queue.stream.cu_stream(), bytes.max(1)) }.map_err(
            err(format!("allocating {bytes} bytes on {}", self.info.name)),
        )?;
        // Made first, so that a failure below frees it.
        let mut buffer = CuBuffer {
            ptr,
            len: bytes as u64,
            ctx: self.ctx.clone(),
            stream: Some(queue.stream.clone()),
            allocated: None,
        };
        check_aligned(buffer.ptr, "allocating")?;
        let allocated = Event::plain()?;
        // SAFETY: a live event recorded on the queue's live stream, after the allocation.
        unsafe { cu::event::record(allocated.0, queue.stream.cu_stream()) }
            .map_err(err("recording an allocation"))?;
        buffer.allocated = Some(allocated);
        Ok(buffer)
    }

    fn queue(&self) -> DeviceResult<CudaQueue> {
        let stream = self.ctx.new_stream().map_err(err("creating a stream"))?;
        let side = self.ctx.new_stream().map_err(err("creating a stream"))?;
        let staging = Staging::new(&self.ctx)?;
        Ok(CudaQueue {
            ctx: self.ctx.clone(),
            stream,
            side,
            side_done: Event::plain()?,
            kernels: self.kernels.clone(),
            functions: HashMap::new(),
            staging,
            epoch: self.epoch.clone(),
            trace: Recorder::default(),
            spare: Vec::new(),
        })
    }

    fn free_memory(&self) -> Option<u64> {
        self.ctx.bind_to_thread().ok()?;
        cu::mem_get_info().ok().map(|(free, _)| free as u64)
    }
}

/// A CUDA stream with the functions it has launched and its pinned staging buffer, and a second
/// stream for copies beside its kernels (`write_beside`).
pub struct CudaQueue {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Copies beside the kernels.
    side: Arc<CudaStream>,
    /// Recorded on `side` after each copy there; `stream` waits for it.
    side_done: Event,
    kernels: Kernels,
    functions: HashMap<String, CudaFunction>,
    staging: Staging,
    /// The device's trace epoch.
    epoch: Arc<Event>,
    /// While tracing: each copy's and kernel's start and end events.
    trace: Recorder<(Event, Event)>,
    /// Timed events to reuse.
    spare: Vec<Event>,
}

impl CudaQueue {
    /// A timing event recorded on the queue's stream now, when tracing.
    fn mark(&mut self) -> DeviceResult<Option<Event>> {
        self.mark_on(self.stream.cu_stream())
    }

    /// A timing event recorded on `stream` (the queue's or its side stream) now, when tracing.
    fn mark_on(&mut self, stream: CUstream) -> DeviceResult<Option<Event>> {
        record_mark(&mut self.spare, self.trace.on(), stream)
    }

    /// Copies `src` to `dst` through the pinned staging on `stream` (the queue's or its side
    /// stream) and returns the copy's start mark, recorded when the first DMA is queued (after
    /// the host has filled the first half), so that the host's fill is not counted as device
    /// time.
    fn staged(
        &mut self,
        stream: CUstream,
        dst: CUdeviceptr,
        src: &[u8],
    ) -> DeviceResult<Option<Event>> {
        let (spare, on) = (&mut self.spare, self.trace.on());
        self.staging
            .write(stream, dst, src, &mut || record_mark(spare, on, stream))
    }

    /// Records the span from `start` (a [`CudaQueue::mark`]) to now.
    fn span(
        &mut self,
        start: Option<Event>,
        kind: SpanKind,
        name: &str,
        bytes: usize,
    ) -> DeviceResult<()> {
        self.span_on(self.stream.cu_stream(), start, kind, name, bytes)
    }

    /// Records the span from `start` (a [`CudaQueue::mark_on`] of `stream`) to now.
    fn span_on(
        &mut self,
        stream: CUstream,
        start: Option<Event>,
        kind: SpanKind,
        name: &str,
        bytes: usize,
    ) -> DeviceResult<()> {
        if let Some(start) = start {
            if let Some(end) = self.mark_on(stream)? {
                self.trace.push(kind, name, bytes as u64, (start, end));
            }
        }
        Ok(())
    }
}

/// A kernel argument's value, kept alive until the launch call returns.
enum Value {
    Ptr(CUdeviceptr),
    U32(u32),
    Scalar(Scalar),
}

impl Queue for CudaQueue {
    type Buffer = CuBuffer;
    type Timing = (Event, Event);

    fn write(&mut self, dst: &CuBuffer, offset: usize, src: &[u8]) -> DeviceResult<()> {
        check_copy(dst, offset, src.len(), "writing")?;
        self.ctx
            .bind_to_thread()
            .map_err(err("binding the context"))?;
        let to = dst.ptr + offset as u64;
        let start = if src.len() >= STAGED_MIN {
            self.staged(self.stream.cu_stream(), to, src)?
        } else {
            let start = self.mark()?;
            // SAFETY: `dst` has at least `offset + src.len()` bytes (checked above); the copy is
            // finished before returning, so `src` may be reused.
            unsafe {
                cu::memcpy_htod_async(to, src, self.stream.cu_stream())
                    .map_err(err(format!("copying {} bytes to the device", src.len())))?;
            }
            start
        };
        self.span(start, SpanKind::CopyIn, "copy", src.len())?;
        self.stream.synchronize().map_err(err("waiting for a copy"))
    }

    fn write_beside(&mut self, dst: &CuBuffer, offset: usize, src: &[u8]) -> DeviceResult<()> {
        check_copy(dst, offset, src.len(), "writing")?;
        self.ctx
            .bind_to_thread()
            .map_err(err("binding the context"))?;
        let side = self.side.cu_stream();
        if let Some(allocated) = &dst.allocated {
            // SAFETY: a live event of this context; the side stream waits for the allocation
            // (made on the queue's stream), not for the kernels queued after it.
            unsafe {
                cu::stream::wait_event(side, allocated.0, CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
            }
            .map_err(err("ordering a copy after its buffer's allocation"))?;
        }
        let to = dst.ptr + offset as u64;
        let start = if src.len() >= STAGED_MIN {
            // The host fills the staging halves from `src` (done when this returns), each
            // half's DMA on the side stream.
            self.staged(side, to, src)?
        } else {
            let start = self.mark_on(side)?;
            // SAFETY: `dst` has at least `offset + src.len()` bytes (checked above); the side
            // stream is waited for below, so `src` may be reused on return.
            unsafe {
                cu::memcpy_htod_async(to, src, side)
                    .map_err(err(format!("copying {} bytes to the device", src.len())))?;
            }
            self.side.synchronize().map_err(err("waiting for a copy"))?;
            start
        };
        self.span_on(side, start, SpanKind::CopyBeside, "copy", src.len())?;
        // SAFETY: a live event recorded on the side stream; the queue's stream waits for it
        // (its work queued from now on runs after the copy; the work already queued does not).
        unsafe {
            cu::event::record(self.side_done.0, side).map_err(err("recording a copy"))?;
            cu::stream::wait_event(
                self.stream.cu_stream(),
                self.side_done.0,
                CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
            .map_err(err("ordering the queue after a copy"))
        }
    }

    fn copies_beside(&self) -> bool {
        true
    }

    fn read(&mut self, src: &CuBuffer, offset: usize, dst: &mut [u8]) -> DeviceResult<()> {
        check_copy(src, offset, dst.len(), "reading")?;
        self.ctx
            .bind_to_thread()
            .map_err(err("binding the context"))?;
        let start = self.mark()?;
        // SAFETY: `src` has at least `offset + dst.len()` bytes (checked above), and `dst` is
        // written before returning.
        unsafe {
            cu::memcpy_dtoh_async(dst, src.ptr + offset as u64, self.stream.cu_stream())
                .map_err(err(format!("copying {} bytes from the device", dst.len())))?;
        }
        self.span(start, SpanKind::CopyOut, "copy", dst.len())?;
        self.stream.synchronize().map_err(err("waiting for a copy"))
    }

    fn launch(
        &mut self,
        kernel: &str,
        groups: usize,
        group_size: usize,
        args: &[Arg<'_, CuBuffer>],
    ) -> DeviceResult<()> {
        self.ctx
            .bind_to_thread()
            .map_err(err("binding the context"))?;
        if !self.functions.contains_key(kernel) {
            let f = self
                .kernels
                .get(kernel)
                .ok_or_else(|| {
                    DeviceError::new(format!("finding kernel {kernel}"), "no module defines it")
                })?
                .load_function(kernel)
                .map_err(err(format!("finding kernel {kernel}")))?;
            self.functions.insert(kernel.to_string(), f);
        }
        // Local memory is CUDA's dynamic shared memory: sized at launch, the parameter gets a
        // null pointer (the kernel uses `cuda_shared`).
        let too_large = |what: &str| {
            DeviceError::new(format!("launching {kernel}"), format!("{what} past 2^32"))
        };
        let mut shared = 0u32;
        let mut values: Vec<Value> = args
            .iter()
            .map(|a| match a {
                Arg::Buffer(b) => Ok(Value::Ptr(b.ptr)),
                Arg::U32(v) => Ok(Value::U32(*v)),
                Arg::Scalar(s) => Ok(Value::Scalar(*s)),
                Arg::Local(bytes) => {
                    shared = u32::try_from(*bytes).map_err(|_| too_large("shared memory"))?;
                    Ok(Value::Ptr(0))
                }
            })
            .collect::<DeviceResult<_>>()?;
        let mut params: Vec<*mut c_void> = values
            .iter_mut()
            .map(|v| match v {
                Value::Ptr(p) => (p as *mut CUdeviceptr).cast(),
                Value::U32(x) => (x as *mut u32).cast(),
                Value::Scalar(s) => (s as *mut Scalar).cast(),
            })
            .collect();
        let grid = u32::try_from(groups).map_err(|_| too_large("groups"))?;
        let block = u32::try_from(group_size).map_err(|_| too_large("the group size"))?;
        let start = self.mark()?;
        let f = &self.functions[kernel];
        // SAFETY: the parameters match the kernel's in order, type and size (gpu-core's host
        // logic is written against the source it generates); `values` outlives the call.
        unsafe {
            cu::launch_kernel(
                f.cu_function(),
                (grid, 1, 1),
                (block, 1, 1),
                shared,
                self.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(err(format!(
            "launching {kernel} ({groups} groups of {group_size})"
        )))?;
        self.span(start, SpanKind::Kernel, kernel, 0)
    }

    fn synchronize(&mut self) -> DeviceResult<()> {
        self.stream
            .synchronize()
            .map_err(err("waiting for the stream"))
    }

    fn staging_bytes(&self) -> u64 {
        2 * STAGING_HALF as u64
    }

    fn recorder(&mut self) -> Option<&mut Recorder<(Event, Event)>> {
        Some(&mut self.trace)
    }

    fn time_spans(
        &mut self,
        pending: Vec<Pending<(Event, Event)>>,
    ) -> DeviceResult<Vec<QueueSpan>> {
        self.ctx
            .bind_to_thread()
            .map_err(err("binding the context"))?;
        // Event times are f32 milliseconds: each span is timed from the batch's first event
        // (short intervals, microseconds exact) and that event once from the device's epoch.
        let Some(first) = pending.first() else {
            return Ok(Vec::new());
        };
        let anchor_ms = self.epoch.ms_to(&first.handle.0)?;
        let mut spans = Vec::with_capacity(pending.len());
        let mut anchor: Option<Event> = None;
        for p in pending {
            let (start, end) = {
                let a = anchor.as_ref().unwrap_or(&p.handle.0);
                (a.ms_to(&p.handle.0)?, a.ms_to(&p.handle.1)?)
            };
            let (span, (s, e)) = p.timed((anchor_ms + start) / 1000.0, (anchor_ms + end) / 1000.0);
            spans.push(span);
            match anchor {
                None => anchor = Some(s),
                Some(_) => self.spare.push(s),
            }
            self.spare.push(e);
        }
        self.spare.extend(anchor);
        Ok(spans)
    }
}
