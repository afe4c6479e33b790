//! Pre-compiled synthesis: a circuit shape's A, B and C matrices are recorded once (and cached
//! beside its parameters); each partition then runs its circuit for the assignments only (no
//! linear combination is built) and computes a, b, c = A z, B z, C z with a sparse product over
//! all cores. The densities come from the matrices. The result is the same partition, bit for
//! bit, as [`crate::CpuSynthesizer`]'s, and an unsatisfied constraint is the same error, named.

mod file;
mod matrices;
mod names;
mod record;
mod stream;
mod witness;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;

use bellpepper_core::Circuit;
use blstrs::Scalar;

pub use file::NamesInFile;
use matrices::Densities;
pub use matrices::{Matrices, SparseMatrix};
pub use names::Names;
pub use record::record;
use witness::assign_beside;
pub use witness::{assign, assign_parts, Assignment};

use crate::accounting::ledger::{ResidentKind, ResidentToken, StageLedger};
use crate::error::{Error, Result};
use crate::stages::density::into_canonical;
use crate::stages::{Evaluations, SynthesizedPartition, Synthesizer, Witness};

/// Where the constraint names are: in memory (just recorded) or in the cache file.
#[derive(Debug, Clone)]
enum NameSource {
    Memory(Arc<Names>),
    File(NamesInFile),
}

/// Recorded matrices, ready to synthesize with: the matrices, their densities and where the
/// constraint names are.
#[derive(Debug)]
pub struct Precompiled {
    matrices: Matrices,
    densities: Densities,
    /// For each constraint, the aux values assigned before it can be evaluated beside the
    /// witness ([`Matrices::readiness`]).
    ready: Vec<u32>,
    names: NameSource,
}

/// How [`Precompiled::load_or_record`] got its matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Read from the cache file.
    Loaded,
    /// Recorded from the circuit (and written to the cache file).
    Recorded,
}

impl Precompiled {
    fn new(matrices: Matrices, names: NameSource) -> Self {
        Precompiled {
            densities: matrices.densities(),
            ready: matrices.readiness(),
            matrices,
            names,
        }
    }

    /// Records `circuit`'s matrices (its witness is not needed), kept in memory.
    pub fn record<C: Circuit<Scalar>>(circuit: C) -> Result<Self> {
        let (m, names) = record(circuit)?;
        Ok(Self::new(m, NameSource::Memory(Arc::new(names))))
    }

    /// Reads the matrices cached at `path` (checked against the file's header and checksum).
    pub fn load(path: &Path) -> Result<Self> {
        let (m, names) = file::load(path)?;
        Ok(Self::new(m, NameSource::File(names)))
    }

    /// The matrices at `path`, or, when there is no file there, `circuit`'s recorded and written
    /// there. A file that is there but damaged is an error (delete it to record again).
    pub fn load_or_record<C: Circuit<Scalar>>(path: &Path, circuit: C) -> Result<(Self, Origin)> {
        if path.exists() {
            return Ok((Self::load(path)?, Origin::Loaded));
        }
        let (m, names) = record(circuit)?;
        file::save(path, &m, &names)?;
        Ok((
            Self::new(m, NameSource::Memory(Arc::new(names))),
            Origin::Recorded,
        ))
    }

    /// Writes the matrices and names to `path` (only for matrices recorded in this process).
    pub fn save(&self, path: &Path) -> Result<()> {
        match &self.names {
            NameSource::Memory(names) => file::save(path, &self.matrices, names),
            NameSource::File(_) => Err(Error::InvalidConfig {
                what: "pre-compiled constraints",
                detail: "matrices read from a file are saved already".into(),
            }),
        }
    }

    /// The matrices.
    pub fn matrices(&self) -> &Matrices {
        &self.matrices
    }

    /// Real heap bytes held while synthesizing: the matrices and the densities (names held in
    /// memory included).
    pub fn heap_bytes(&self) -> usize {
        let d = &self.densities;
        let names = match &self.names {
            NameSource::Memory(n) => n.heap_bytes(),
            NameSource::File(_) => 0,
        };
        self.matrices.heap_bytes()
            + d.a_aux.heap_bytes()
            + d.b_input.heap_bytes()
            + d.b_aux.heap_bytes()
            + self.ready.capacity() * 4
            + names
    }

    fn name(&self, i: usize) -> String {
        let name = match &self.names {
            NameSource::Memory(n) => n.get(i),
            NameSource::File(f) => f.get(i),
        };
        name.unwrap_or_else(|| "name not available".into())
    }

    /// Synthesizes one partition: the circuit runs for its assignments, and a, b, c are the
    /// matrices' products with them. A helper thread evaluates the constraints whose variables
    /// are assigned while the circuit runs (`stream.rs`); the rest are evaluated over every
    /// core once it is done.
    pub fn synthesize<C: Circuit<Scalar>>(&self, circuit: C) -> Result<SynthesizedPartition> {
        let m = &self.matrices;
        let gate = Arc::new(stream::Gate::default());
        let (assignment, early) = thread::scope(|s| {
            let helper = s.spawn(|| stream::evaluate_beside(m, &self.ready, &gate));
            let writer = stream::Writer::new(gate.clone(), m.inputs);
            // Closes the stream however it ends, so the helper returns.
            let assignment = assign_beside(circuit, writer, m.aux);
            let early = helper
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (assignment, early)
        });
        let assignment = assignment?;
        let counted = assignment.counts_constraints();
        let Assignment {
            input,
            aux,
            constraints,
            ..
        } = assignment;
        let check = |what, circuit: usize, recorded: usize| {
            if circuit == recorded {
                Ok(())
            } else {
                Err(Error::PrecompiledMismatch {
                    what,
                    circuit,
                    recorded,
                })
            }
        };
        // A gadget that filled its values in bulk enforced nothing: then the variables' counts
        // and every recorded constraint's satisfiability (below) are what check the shape.
        if counted {
            check("constraints", constraints, m.constraints())?;
        }
        check("inputs", input.len(), m.inputs)?;
        check("aux variables", aux.len(), m.aux)?;
        let rows = m.constraints();
        let stream::Evaluated {
            mut a,
            mut b,
            mut c,
            rows: done,
            mut unsatisfied,
        } = early;
        if done < rows {
            m.evaluate_rows_into(done..rows, &input, &aux, true, [&mut a, &mut b, &mut c]);
            if unsatisfied.is_none() {
                unsatisfied = matrices::first_unsatisfied(&a[done..], &b[done..], &c[done..], true)
                    .map(|i| i + done);
            }
        }
        if let Some(index) = unsatisfied {
            return Err(Error::Unsatisfied {
                index,
                annotation: self.name(index),
            });
        }
        let d = &self.densities;
        Ok(SynthesizedPartition {
            evaluations: Evaluations { a, b, c },
            witness: Witness {
                input: into_canonical(input),
                aux: into_canonical(aux),
                a_aux_density: d.a_aux.clone(),
                b_input_density: d.b_input.clone(),
                b_aux_density: d.b_aux.clone(),
            },
        })
    }
}

/// The pre-compiled synthesizer: [`Precompiled`] matrices shared by every synthesis worker, and
/// counted in a ledger (once attached) as the resident entry `pce_matrices`.
pub struct PceSynthesizer {
    precompiled: Arc<Precompiled>,
    token: Mutex<Option<ResidentToken>>,
}

impl PceSynthesizer {
    /// A synthesizer over `precompiled`.
    pub fn new(precompiled: Arc<Precompiled>) -> Self {
        PceSynthesizer {
            precompiled,
            token: Mutex::new(None),
        }
    }

    /// Counts the matrices in `ledger` as a resident entry (replacing an earlier one).
    pub fn attach(&self, ledger: &StageLedger) {
        let bytes = self.precompiled.heap_bytes() as u64;
        let mut t = self.token.lock().unwrap_or_else(|p| p.into_inner());
        *t = None;
        *t = Some(ledger.resident(ResidentKind::PceMatrices, bytes));
    }

    /// The matrices.
    pub fn precompiled(&self) -> &Arc<Precompiled> {
        &self.precompiled
    }
}

impl Synthesizer for PceSynthesizer {
    fn synthesize<C: Circuit<Scalar>>(&self, circuit: C) -> Result<SynthesizedPartition> {
        self.precompiled.synthesize(circuit)
    }
}

#[cfg(test)]
mod tests;
