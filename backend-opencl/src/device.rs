//! The OpenCL device: a context, the program built once (or loaded from the binary cache), and
//! in-order queues with their own kernel objects (OpenCL kernels hold their arguments, so each
//! queue keeps its own).

use std::collections::HashMap;
use std::ptr;
use std::sync::{Arc, OnceLock};

use gpu_core::device::{
    check_copy, Arg, Device, DeviceError, DeviceInfo, DeviceResult, Queue, RawBuffer,
};
use gpu_core::trace::{Pending, QueueSpan, Recorder};
use gpu_core::KernelSource;
use opencl3::command_queue::{
    enqueue_read_buffer, enqueue_write_buffer, CommandQueue, CL_QUEUE_PROFILING_ENABLE,
};
use opencl3::context::Context;
use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::CL_BLOCKING;
use prover_core::SpanKind;

use crate::select::Found;
use gpu_core::cache::KernelCache;

/// One OpenCL device with its built program.
pub struct OpenClDevice {
    context: Context,
    program: Arc<Program>,
    info: DeviceInfo,
    /// The device clock's zero for traces: the first traced span's start, in nanoseconds.
    epoch: Arc<OnceLock<u64>>,
}

fn err(during: impl Into<String>) -> impl FnOnce(opencl3::error_codes::ClError) -> DeviceError {
    let during = during.into();
    move |e| DeviceError::new(during, e)
}

/// For cl3's raw calls, which return the bare error code.
fn raw_err(during: impl Into<String>) -> impl FnOnce(i32) -> DeviceError {
    let during = during.into();
    move |e| DeviceError::new(during, opencl3::error_codes::ClError(e))
}

impl OpenClDevice {
    /// Opens `found` and builds `source` for it, or loads the binary cached in `cache` (a
    /// binary the driver refuses is built again and stored over).
    pub fn open(
        found: &Found,
        source: &KernelSource,
        cache: Option<&KernelCache>,
    ) -> DeviceResult<Self> {
        let d = &found.device;
        let name = d.name().map_err(err("reading the device name"))?;
        let mut info = DeviceInfo {
            name: name.clone(),
            platform: format!("{} ({})", found.platform, found.platform_version),
            driver: d.driver_version().unwrap_or_default(),
            compute_units: d
                .max_compute_units()
                .map_err(err("reading compute units"))?,
            memory_bytes: d.global_mem_size().map_err(err("reading memory size"))?,
            max_alloc_bytes: d
                .max_mem_alloc_size()
                .map_err(err("reading allocation size"))?,
            local_memory_bytes: d.local_mem_size().map_err(err("reading local memory"))?,
            max_group_size: d.max_work_group_size().map_err(err("reading group size"))?,
            program_from_cache: false,
        };
        let context =
            Context::from_device(d).map_err(err(format!("creating a context on {name}")))?;
        let key = source.digest(&format!(
            "opencl|{}|{}|{}",
            info.platform, info.name, info.driver
        ));
        let cached = cache
            .and_then(|c| c.load("opencl", &key).map(|bin| (c, bin)))
            .and_then(|(c, bin)| {
                Program::create_and_build_from_binary(&context, &[&bin], "")
                    .map_err(|e| {
                        eprintln!(
                            "warning: the driver refused the cached OpenCL program {} ({e}); \
                             building it again",
                            c.path("opencl", &key).display()
                        )
                    })
                    .ok()
            });
        info.program_from_cache = cached.is_some();
        let program = match cached {
            Some(p) => p,
            None => {
                let p = build(&context, d.id(), &source.text, &name)?;
                let bin = p.get_binaries().ok().and_then(|b| b.into_iter().next());
                if let (Some(cache), Some(bin)) = (cache, bin) {
                    cache.store("opencl", &key, &bin);
                }
                p
            }
        };
        Ok(OpenClDevice {
            context,
            program: Arc::new(program),
            info,
            epoch: Arc::new(OnceLock::new()),
        })
    }
}

fn build(
    context: &Context,
    device: opencl3::types::cl_device_id,
    text: &str,
    name: &str,
) -> DeviceResult<Program> {
    let mut program = Program::create_from_source(context, text)
        .map_err(err(format!("creating the program on {name}")))?;
    if let Err(e) = program.build(&[device], "") {
        let log = program.get_build_log(device).unwrap_or_default();
        return Err(DeviceError::new(
            format!("building the kernels on {name}"),
            format!(
                "{e}; build log (end): {}",
                gpu_core::kernels::log_tail(&log, 4000)
            ),
        ));
    }
    Ok(program)
}

/// An OpenCL buffer of bytes, with its length (every copy is checked against it before the
/// driver is asked, as the CUDA backend checks its own).
pub struct ClBuffer {
    buffer: Buffer<u8>,
    len: u64,
}

impl RawBuffer for ClBuffer {
    fn len_bytes(&self) -> u64 {
        self.len
    }
}

impl Device for OpenClDevice {
    type Buffer = ClBuffer;
    type Queue = OpenClQueue;

    fn alloc(&self, bytes: usize) -> DeviceResult<ClBuffer> {
        // SAFETY: no host pointer is given; the size is checked by the caller's gauge.
        unsafe { Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, bytes, ptr::null_mut()) }
            .map(|buffer| ClBuffer {
                buffer,
                len: bytes as u64,
            })
            .map_err(err(format!(
                "allocating {bytes} bytes on {}",
                self.info.name
            )))
    }

    fn queue(&self) -> DeviceResult<OpenClQueue> {
        // Profiling on, so that tracing can read each command's times; nothing is read while
        // tracing is off.
        #[allow(deprecated)]
        let queue = CommandQueue::create_default(&self.context, CL_QUEUE_PROFILING_ENABLE)
            .map_err(err(format!("creating a queue on {}", self.info.name)))?;
        Ok(OpenClQueue {
            queue,
            program: self.program.clone(),
            kernels: HashMap::new(),
            epoch: self.epoch.clone(),
            trace: Recorder::default(),
        })
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }
}

/// An in-order OpenCL queue with its own kernel objects.
pub struct OpenClQueue {
    queue: CommandQueue,
    program: Arc<Program>,
    kernels: HashMap<String, Kernel>,
    epoch: Arc<OnceLock<u64>>,
    /// While tracing: each copy's and kernel's event.
    trace: Recorder<Event>,
}

impl OpenClQueue {
    /// Keeps `event` as a span when tracing (else releases it).
    fn keep(&mut self, event: Event, kind: SpanKind, name: &str, bytes: usize) {
        if self.trace.on() {
            self.trace.push(kind, name, bytes as u64, event);
        }
    }
}

impl Queue for OpenClQueue {
    type Buffer = ClBuffer;
    type Timing = Event;

    fn write(&mut self, dst: &ClBuffer, offset: usize, src: &[u8]) -> DeviceResult<()> {
        check_copy(dst, offset, src.len(), "writing")?;
        // SAFETY: a blocking write of `src.len()` bytes from a live slice, inside `dst` (checked
        // above; OpenCL checks it too). The event is released by its wrapper.
        let event = unsafe {
            enqueue_write_buffer(
                self.queue.get(),
                dst.buffer.get(),
                CL_BLOCKING,
                offset,
                src.len(),
                src.as_ptr().cast(),
                0,
                ptr::null(),
            )
        }
        .map_err(raw_err(format!("writing {} bytes", src.len())))?;
        self.keep(Event::new(event), SpanKind::CopyIn, "copy", src.len());
        Ok(())
    }

    fn read(&mut self, src: &ClBuffer, offset: usize, dst: &mut [u8]) -> DeviceResult<()> {
        check_copy(src, offset, dst.len(), "reading")?;
        // SAFETY: a blocking read into a live mutable slice of the given length, from inside
        // `src` (checked above).
        let event = unsafe {
            enqueue_read_buffer(
                self.queue.get(),
                src.buffer.get(),
                CL_BLOCKING,
                offset,
                dst.len(),
                dst.as_mut_ptr().cast(),
                0,
                ptr::null(),
            )
        }
        .map_err(raw_err(format!("reading {} bytes", dst.len())))?;
        self.keep(Event::new(event), SpanKind::CopyOut, "copy", dst.len());
        Ok(())
    }

    fn launch(
        &mut self,
        kernel: &str,
        groups: usize,
        group_size: usize,
        args: &[Arg<'_, ClBuffer>],
    ) -> DeviceResult<()> {
        if !self.kernels.contains_key(kernel) {
            let k = Kernel::create(&self.program, kernel)
                .map_err(err(format!("creating kernel {kernel}")))?;
            self.kernels.insert(kernel.to_string(), k);
        }
        let k = &self.kernels[kernel];
        let mut exec = ExecuteKernel::new(k);
        // SAFETY: the arguments match the kernel's parameters in order, type and size (the
        // host logic in gpu-core is written against the kernel source it generates).
        let event = unsafe {
            for a in args {
                match a {
                    Arg::Buffer(b) => exec.set_arg(&b.buffer.get()),
                    Arg::U32(v) => exec.set_arg(v),
                    Arg::Scalar(s) => exec.set_arg(s),
                    Arg::Local(bytes) => exec.set_arg_local_buffer(*bytes),
                };
            }
            exec.set_global_work_size(groups * group_size)
                .set_local_work_size(group_size)
                .enqueue_nd_range(&self.queue)
        }
        .map_err(err(format!(
            "launching {kernel} ({groups} groups of {group_size})"
        )))?;
        self.keep(event, SpanKind::Kernel, kernel, 0);
        Ok(())
    }

    fn synchronize(&mut self) -> DeviceResult<()> {
        self.queue.finish().map_err(err("waiting for the queue"))
    }

    fn recorder(&mut self) -> Option<&mut Recorder<Event>> {
        Some(&mut self.trace)
    }

    fn time_spans(&mut self, pending: Vec<Pending<Event>>) -> DeviceResult<Vec<QueueSpan>> {
        let mut spans = Vec::with_capacity(pending.len());
        for p in pending {
            let ns = |r: Result<u64, opencl3::error_codes::ClError>| {
                r.map_err(err("reading a command's profiling times"))
            };
            let start = ns(p.handle.profiling_command_start())?;
            let end = ns(p.handle.profiling_command_end())?;
            let epoch = *self.epoch.get_or_init(|| start);
            let secs = |t: u64| (i128::from(t) - i128::from(epoch)) as f64 / 1e9;
            spans.push(p.timed(secs(start), secs(end)).0);
        }
        Ok(spans)
    }
}
