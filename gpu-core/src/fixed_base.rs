//! Parameter generation's fixed-base products on a device (`fixed_base.cl`): the table of the
//! base's multiples is uploaded once per table, each chunk of scalars is uploaded as it is
//! (Montgomery form), made canonical, multiplied and made affine on the device (one inversion
//! per thread's points), and the affine products come back ready to encode. Implements
//! prover-core's [`Multiplier`], so the generator writes the same bytes as on the CPU.

use std::sync::{Arc, Mutex};

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::Curve;
use prover_core::groth16::generator::fixed_base::FixedBase;
use prover_core::{Error, Multiplier, Result};

use crate::context::{launch_threads, GpuDevice};
use crate::device::{bytes_of_mut, Arg, Device, DeviceResult, Queue};
use crate::memory::DeviceBuffer;
use crate::msm::DeviceCurve;

/// Scalars per chunk at most (a G2 chunk: 64 MiB of scalars, 576 MiB of jacobian products,
/// 384 MiB of affine ones).
const MAX_CHUNK: usize = 1 << 21;
/// Points per device thread when making products affine (one inversion each).
const POINTS_PER_THREAD: usize = 32;

/// A device computing the generator's products.
pub struct GpuMultiplier<D: Device> {
    gpu: Arc<GpuDevice<D>>,
    label: String,
    state: Mutex<Option<State<D>>>,
}

/// The device's queue and the last table of each group (G1, G2), by the table's id.
struct State<D: Device> {
    queue: D::Queue,
    tables: [Option<(u64, DeviceBuffer<D>)>; 2],
}

impl<D: Device> GpuMultiplier<D> {
    /// Products on `gpu`, named `label` in messages (`cuda device 0`).
    pub fn new(gpu: Arc<GpuDevice<D>>, label: String) -> Self {
        GpuMultiplier {
            gpu,
            label,
            state: Mutex::new(None),
        }
    }

    fn fail(&self, e: crate::device::DeviceError) -> Error {
        Error::Backend {
            backend: self.label.clone(),
            source: Box::new(e),
        }
    }

    /// `scalars[i] * base` in affine form, computed and made affine on the device (slot 0: G1,
    /// 1: G2).
    fn products<C: DeviceCurve + Default>(
        &self,
        slot: usize,
        base: &FixedBase<C::Projective>,
        scalars: &[Scalar],
    ) -> DeviceResult<Vec<C>>
    where
        C::Projective: Curve<AffineRepr = C>,
    {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(State {
                queue: self.gpu.device.queue()?,
                tables: [None, None],
            });
        }
        let state = guard.as_mut().expect("set above");
        let fresh = !matches!(&state.tables[slot], Some((id, _)) if *id == base.id());
        if fresh {
            state.tables[slot] = None;
            let table = self
                .gpu
                .upload(&mut state.queue, base.table(), "fixed-base table")?;
            state.tables[slot] = Some((base.id(), table));
        }
        let State { queue, tables } = state;
        let table = &tables[slot].as_ref().expect("uploaded above").1;
        let n = scalars.len();
        let mut out = vec![C::default(); n];
        if n == 0 {
            return Ok(out);
        }
        let exps = self
            .gpu
            .upload_scratch(queue, scalars, "generator scalars")?;
        launch_threads(
            queue,
            &self.gpu.names.to_canonical,
            n,
            &[Arg::Buffer(exps.raw()), Arg::U32(n as u32)],
        )?;
        let products =
            self.gpu
                .scratch(queue, C::JACOBIAN_BYTES * n as u64, "generator products")?;
        launch_threads(
            queue,
            C::fixed_base_kernel(&self.gpu),
            n,
            &[
                Arg::Buffer(table.raw()),
                Arg::U32(base.window() as u32),
                Arg::U32(base.windows() as u32),
                Arg::Buffer(exps.raw()),
                Arg::U32(n as u32),
                Arg::Buffer(products.raw()),
            ],
        )?;
        drop(exps);
        let affine = self
            .gpu
            .scratch(queue, C::AFFINE_BYTES * n as u64, "affine products")?;
        let threads = n.div_ceil(POINTS_PER_THREAD);
        launch_threads(
            queue,
            C::to_affine_kernel(&self.gpu),
            threads,
            &[
                Arg::Buffer(products.raw()),
                Arg::U32(n as u32),
                Arg::U32(threads as u32),
                Arg::Buffer(affine.raw()),
            ],
        )?;
        queue.read(affine.raw(), 0, bytes_of_mut(&mut out))?;
        queue.synchronize()?;
        Ok(out)
    }

    fn affine<C: DeviceCurve + Default>(
        &self,
        slot: usize,
        base: &FixedBase<C::Projective>,
        scalars: &[Scalar],
    ) -> Result<Vec<C>>
    where
        C::Projective: Curve<AffineRepr = C>,
    {
        self.products::<C>(slot, base, scalars)
            .map_err(|e| self.fail(e))
    }
}

impl<D: Device> Multiplier for GpuMultiplier<D> {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn chunk_len(&self) -> usize {
        // Scalars and G2 products (jacobian and affine) of a chunk in a quarter of what is left
        // on the device.
        let per = 32
            + <G2Affine as DeviceCurve>::JACOBIAN_BYTES
            + <G2Affine as DeviceCurve>::AFFINE_BYTES;
        ((self.gpu.gauge.available() / 4 / per) as usize).clamp(1 << 10, MAX_CHUNK)
    }

    fn g1(&self, base: &FixedBase<G1Projective>, scalars: &[Scalar]) -> Result<Vec<G1Affine>> {
        self.affine::<G1Affine>(0, base, scalars)
    }

    fn g2(&self, base: &FixedBase<G2Projective>, scalars: &[Scalar]) -> Result<Vec<G2Affine>> {
        self.affine::<G2Affine>(1, base, scalars)
    }
}
