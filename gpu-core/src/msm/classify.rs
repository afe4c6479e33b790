//! The 0/1 split on the device (`classify.cl`): a partition's witness is uploaded once, and each
//! query's scalars are classified there into the lists the host scan ([`Scan`]) makes: the
//! base indices of the ones, and the base indices and exponents of the others, ascending. The
//! host reads three counts per term instead of scanning every scalar (the scan of a PoRep-like
//! 2^24 query took 75 ms of a 99 ms MSM on the H200's host).

use prover_core::accounting::ledger::{BackendBuffer, BackendBuffers};
use prover_core::stages::plan::{Filter, MsmTerm, ScalarSource};
use prover_core::stages::Witness;

use crate::context::{launch_threads, GpuDevice};
use crate::device::{bytes_of, bytes_of_mut, Arg, Device, DeviceError, DeviceResult, Queue};
use crate::memory::{free_counted, DeviceBuffer};
use crate::msm::prefix::{exclusive_scan, scan_sums_bytes};
use crate::msm::scan::Scan;

/// Scalars per classification block (one thread each; one 32-bit word of a density).
const BLOCK: usize = 32;
/// Device bytes per listed term at most: a u32 index and a 32-byte exponent.
const LISTED_BYTES: u64 = 36;

/// Whether the MSMs' 0/1 split runs on the host or on the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScanMode {
    /// The host scans each query's scalars and uploads the lists.
    Host,
    /// The witness is uploaded once and classified on the device (when the bases are resident
    /// and it fits beside them; the host scan otherwise). The default.
    #[default]
    Device,
}

/// The environment variable choosing where the 0/1 split runs (`host` or `device`).
pub const SCAN_VAR: &str = "PROOFLINE_GPU_SCAN";

impl ScanMode {
    /// `host` or `device`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "host" => Ok(ScanMode::Host),
            "device" => Ok(ScanMode::Device),
            other => Err(format!("{other}: expected `host` or `device`")),
        }
    }
}

/// A partition's witness on the device: both assignments and the three densities.
pub struct DeviceWitness<D: Device> {
    input: DeviceBuffer<D>,
    aux: DeviceBuffer<D>,
    a_aux: DeviceBuffer<D>,
    b_input: DeviceBuffer<D>,
    b_aux: DeviceBuffer<D>,
}

impl<D: Device> DeviceWitness<D> {
    /// Device bytes the witness of `w` takes.
    pub fn bytes(w: &Witness) -> u64 {
        let densities = [&w.a_aux_density, &w.b_input_density, &w.b_aux_density];
        (std::mem::size_of_val(w.input.as_slice())
            + std::mem::size_of_val(w.aux.as_slice())
            + densities.iter().map(|d| 8 * d.words().len()).sum::<usize>()) as u64
    }

    /// Whether the witness and the largest query's lists fit in what is left on `gpu`, with
    /// as much again for the MSM's own scratch.
    pub fn fits(gpu: &GpuDevice<D>, w: &Witness) -> bool {
        let lists = LISTED_BYTES * (w.input.len() + w.aux.len()) as u64;
        2 * (Self::bytes(w) + lists) <= gpu.gauge.available()
    }

    /// Uploads `w` (registered in `ledger` as device scratch until [`DeviceWitness::release`]).
    pub fn upload(
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        w: &Witness,
        ledger: &mut BackendBuffers<'_>,
    ) -> DeviceResult<Self> {
        let dw = Self::allocate(gpu, q, w, ledger)?;
        dw.fill(q, w, false)?;
        Ok(dw)
    }

    /// The device buffers for `w`, not yet filled (registered in `ledger` as device scratch
    /// until [`DeviceWitness::release`]). Made before other work is queued, a copy beside
    /// ([`DeviceWitness::fill`]) waits for nothing but them.
    pub fn allocate(
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        w: &Witness,
        ledger: &mut BackendBuffers<'_>,
    ) -> DeviceResult<Self> {
        let words = |d: &prover_core::stages::density::Density| 8 * d.words().len() as u64;
        let dw = DeviceWitness {
            input: gpu.scratch(q, bytes_of(&w.input).len() as u64, "witness inputs")?,
            aux: gpu.scratch(q, bytes_of(&w.aux).len() as u64, "witness aux")?,
            a_aux: gpu.scratch(q, words(&w.a_aux_density), "A density")?,
            b_input: gpu.scratch(q, words(&w.b_input_density), "B input density")?,
            b_aux: gpu.scratch(q, words(&w.b_aux_density), "B aux density")?,
        };
        ledger.register(BackendBuffer::DeviceScratch, dw.held_bytes());
        Ok(dw)
    }

    /// Copies `w` into buffers made by [`DeviceWitness::allocate`] for it; `beside`: beside the
    /// queue's kernels ([`Queue::write_beside`]; the queue's later work waits for the copies).
    pub fn fill(&self, q: &mut D::Queue, w: &Witness, beside: bool) -> DeviceResult<()> {
        let parts: [(&DeviceBuffer<D>, &[u8]); 5] = [
            (&self.input, bytes_of(&w.input)),
            (&self.aux, bytes_of(&w.aux)),
            (&self.a_aux, bytes_of(w.a_aux_density.words())),
            (&self.b_input, bytes_of(w.b_input_density.words())),
            (&self.b_aux, bytes_of(w.b_aux_density.words())),
        ];
        for (buf, bytes) in parts {
            if bytes.len() as u64 > buf.bytes() {
                return Err(DeviceError::new(
                    "uploading the witness",
                    format!("{} bytes for a buffer of {}", bytes.len(), buf.bytes()),
                ));
            }
            if bytes.is_empty() {
                continue;
            }
            if beside {
                q.write_beside(buf.raw(), 0, bytes)?;
            } else {
                q.write(buf.raw(), 0, bytes)?;
            }
        }
        Ok(())
    }

    fn held_bytes(&self) -> u64 {
        [
            &self.input,
            &self.aux,
            &self.a_aux,
            &self.b_input,
            &self.b_aux,
        ]
        .iter()
        .map(|b| b.bytes())
        .sum()
    }

    /// Frees the witness and releases its ledger entry.
    pub fn release(self, ledger: &mut BackendBuffers<'_>) {
        let DeviceWitness {
            input,
            aux,
            a_aux,
            b_input,
            b_aux,
        } = self;
        free_counted(
            ledger,
            BackendBuffer::DeviceScratch,
            [input, aux, a_aux, b_input, b_aux],
        );
    }

    fn scalars(&self, source: ScalarSource) -> &DeviceBuffer<D> {
        match source {
            ScalarSource::Input => &self.input,
            ScalarSource::Aux => &self.aux,
        }
    }

    fn density(&self, filter: Filter) -> Option<&DeviceBuffer<D>> {
        match filter {
            Filter::All => None,
            Filter::AAux => Some(&self.a_aux),
            Filter::BInput => Some(&self.b_input),
            Filter::BAux => Some(&self.b_aux),
        }
    }
}

/// A query's lists on the device, as [`Scan`] holds them on the host.
pub struct DeviceScan<D: Device> {
    /// Base indices of the ones (u32).
    pub ones: DeviceBuffer<D>,
    /// How many.
    pub n_ones: usize,
    /// Base indices of the other nonzero scalars (u32).
    pub idx: DeviceBuffer<D>,
    /// Their exponents (32 bytes each).
    pub exps: DeviceBuffer<D>,
    /// How many.
    pub n_others: usize,
    /// One past the largest base index a term may use.
    pub bases_end: usize,
}

/// One term's block counts, scanned.
struct Counted<'a, D: Device> {
    term: &'a MsmTerm,
    n: usize,
    /// used, ones, others per block (blocks + 1 each, exclusive prefix sums).
    counts: [DeviceBuffer<D>; 3],
    ones_at: usize,
    others_at: usize,
}

impl<D: Device> DeviceScan<D> {
    /// Classifies the scalars of a query's terms (bases ranges disjoint and ascending) on the
    /// device; `w` is the host witness `dw` was uploaded from (for its lengths).
    pub fn new<'a>(
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        terms: impl IntoIterator<Item = &'a MsmTerm>,
        w: &Witness,
        dw: &DeviceWitness<D>,
        ledger: &mut BackendBuffers<'_>,
    ) -> DeviceResult<Self> {
        let fail = |detail: String| DeviceError::new("classifying scalars", detail);
        let mut counted = Vec::new();
        let (mut n_ones, mut n_others, mut bases_end) = (0usize, 0usize, 0usize);
        let result = (|| {
            for term in terms {
                let n = term.scalars(w).len();
                if let Some(d) = term.density(w) {
                    if d.len() != n {
                        return Err(fail(format!(
                            "a density of {} bits for {n} scalars",
                            d.len()
                        )));
                    }
                }
                if term.bases.end > u32::MAX as usize || n >= u32::MAX as usize - BLOCK {
                    return Err(fail("more than 2^32 bases or scalars".into()));
                }
                let c = count(gpu, q, term, n, dw, ledger)?;
                let mut totals = [0u32; 3];
                for (t, buf) in totals.iter_mut().zip(&c) {
                    let blocks = n.div_ceil(BLOCK);
                    q.read(buf.raw(), 4 * blocks, bytes_of_mut(std::slice::from_mut(t)))?;
                }
                let [used, ones, others] = totals.map(|t| t as usize);
                let entry = Counted {
                    term,
                    n,
                    counts: c,
                    ones_at: n_ones,
                    others_at: n_others,
                };
                counted.push(entry);
                if used != term.bases.len() {
                    return Err(fail(format!(
                        "{used} used scalars for {} bases",
                        term.bases.len()
                    )));
                }
                n_ones += ones;
                n_others += others;
                bases_end = bases_end.max(term.bases.end);
            }
            let ones = gpu.scratch(q, 4 * n_ones as u64, "indices of ones")?;
            let idx = gpu.scratch(q, 4 * n_others as u64, "MSM indices")?;
            let exps = gpu.scratch(q, 32 * n_others as u64, "MSM exponents")?;
            ledger.register(
                BackendBuffer::DeviceScratch,
                ones.bytes() + idx.bytes() + exps.bytes(),
            );
            for c in &counted {
                write(gpu, q, c, dw, [&ones, &idx, &exps])?;
            }
            Ok(DeviceScan {
                ones,
                n_ones,
                idx,
                exps,
                n_others,
                bases_end,
            })
        })();
        for c in counted {
            free_counted(ledger, BackendBuffer::DeviceScratch, c.counts);
        }
        result
    }

    /// The lists read back to the host.
    pub fn read(&self, q: &mut D::Queue) -> DeviceResult<Scan> {
        let mut out = Scan {
            ones: vec![0; self.n_ones],
            idx: vec![0; self.n_others],
            exps: vec![Default::default(); self.n_others],
        };
        if self.n_ones > 0 {
            q.read(self.ones.raw(), 0, bytes_of_mut(&mut out.ones))?;
        }
        if self.n_others > 0 {
            q.read(self.idx.raw(), 0, bytes_of_mut(&mut out.idx))?;
            q.read(self.exps.raw(), 0, bytes_of_mut(&mut out.exps))?;
        }
        Ok(out)
    }

    /// Frees the lists and releases their ledger entry.
    pub fn release(self, ledger: &mut BackendBuffers<'_>) {
        free_counted(
            ledger,
            BackendBuffer::DeviceScratch,
            [self.ones, self.idx, self.exps],
        );
    }
}

/// Counts one term's used variables, ones and others per block, and scans each count.
fn count<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    term: &MsmTerm,
    n: usize,
    dw: &DeviceWitness<D>,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<[DeviceBuffer<D>; 3]> {
    let blocks = n.div_ceil(BLOCK);
    let len = blocks + 1;
    let bytes = 4 * len as u64;
    let counts = [
        gpu.scratch(q, bytes, "used variables per block")?,
        gpu.scratch(q, bytes, "ones per block")?,
        gpu.scratch(q, bytes, "others per block")?,
    ];
    ledger.register(BackendBuffer::DeviceScratch, 3 * bytes);
    let sums = match gpu.scratch(q, scan_sums_bytes(len), "block count sums") {
        Ok(s) => s,
        Err(e) => {
            free_counted(ledger, BackendBuffer::DeviceScratch, counts);
            return Err(e);
        }
    };
    ledger.register(BackendBuffer::DeviceScratch, sums.bytes());
    let scalars = dw.scalars(term.source);
    let density = dw.density(term.filter);
    let result = (|| {
        launch_threads(
            q,
            &gpu.names.cls_count,
            len,
            &[
                Arg::Buffer(scalars.raw()),
                Arg::Buffer(density.unwrap_or(scalars).raw()),
                Arg::U32(density.is_some() as u32),
                Arg::U32(n as u32),
                Arg::U32(blocks as u32),
                Arg::Buffer(counts[0].raw()),
                Arg::Buffer(counts[1].raw()),
                Arg::Buffer(counts[2].raw()),
            ],
        )?;
        for c in &counts {
            exclusive_scan(gpu, q, c, len, &sums)?;
        }
        Ok(())
    })();
    free_counted(ledger, BackendBuffer::DeviceScratch, [sums]);
    match result {
        Ok(()) => Ok(counts),
        Err(e) => {
            free_counted(ledger, BackendBuffer::DeviceScratch, counts);
            Err(e)
        }
    }
}

/// Writes one term's lists at its offsets.
fn write<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    c: &Counted<'_, D>,
    dw: &DeviceWitness<D>,
    [ones, idx, exps]: [&DeviceBuffer<D>; 3],
) -> DeviceResult<()> {
    let blocks = c.n.div_ceil(BLOCK);
    let scalars = dw.scalars(c.term.source);
    let density = dw.density(c.term.filter);
    launch_threads(
        q,
        &gpu.names.cls_write,
        blocks,
        &[
            Arg::Buffer(scalars.raw()),
            Arg::Buffer(density.unwrap_or(scalars).raw()),
            Arg::U32(density.is_some() as u32),
            Arg::U32(c.n as u32),
            Arg::U32(blocks as u32),
            Arg::Buffer(c.counts[0].raw()),
            Arg::Buffer(c.counts[1].raw()),
            Arg::Buffer(c.counts[2].raw()),
            Arg::U32(c.term.bases.start as u32),
            Arg::U32(c.ones_at as u32),
            Arg::U32(c.others_at as u32),
            Arg::Buffer(ones.raw()),
            Arg::Buffer(idx.raw()),
            Arg::Buffer(exps.raw()),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_modes_parse_and_anything_else_is_refused() {
        assert_eq!(ScanMode::parse("host"), Ok(ScanMode::Host));
        assert_eq!(ScanMode::parse(" device\n"), Ok(ScanMode::Device));
        assert_eq!(ScanMode::default(), ScanMode::Device);
        for bad in ["", "Host", "gpu", "host,device"] {
            let err = ScanMode::parse(bad).unwrap_err();
            assert!(
                err.contains("expected `host` or `device`"),
                "{bad:?}: {err}"
            );
        }
    }
}
