//! The products evaluated beside the witness. While the circuit assigns its variables on the
//! calling thread, a helper thread evaluates the rows of A, B and C whose variables are all
//! assigned: rows in order, each as soon as every variable up to the last one it uses is
//! assigned (`Precompiled`'s readiness), with the satisfiability check. A circuit whose witness
//! is one sequential chain (the `dense` circuit) then spends its second core on the products
//! while the first computes the witness, instead of one after the other.
//!
//! The helper reads the aux values in place, without a copy (a copy would double the witness's
//! memory while it lives). The witness's aux vector is reserved at the recorded length, so it
//! never moves while the stream is open. Values below the published length are never written
//! again: only one-by-one allocations publish, and they append. The writer closes the stream
//! (waiting for a batch in progress) before anything that could move or free the buffer or
//! write it in bulk: growing past its capacity, appending a system or bulk values, handing
//! the vector on, being dropped. Only `assign_beside` makes an assignment with an open stream,
//! and a circuit sees it only as its generic constraint system, through the trait's methods,
//! which keep those rules.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use blstrs::Scalar;

use super::matrices::{first_unsatisfied, Matrices};

/// Rows evaluated at least at once by the helper (fewer wait for more to be ready).
const MIN_ROWS: usize = 4096;
/// Rows evaluated at most while the helper holds the gate (so that closing waits little).
const MAX_ROWS: usize = 1 << 16;
/// Aux values assigned between two publications.
const STEP: usize = 1 << 14;

/// The aux buffer's start, shareable with the helper.
#[derive(Clone, Copy)]
struct Start(*const Scalar);

// SAFETY: the pointer is only read through while the gate is open and locked, and the writer
// keeps the buffer in place and its published values unchanged for as long as the gate is open
// (the module's text).
unsafe impl Send for Start {}

/// What the writer publishes.
#[derive(Default)]
struct Shared {
    /// The aux buffer and how many of its values are final; `None` before the first
    /// publication and once closed.
    aux: Option<(Start, usize)>,
    /// The inputs, once the recorded count is assigned.
    inputs: Option<Vec<Scalar>>,
    closed: bool,
}

/// The gate between the witness thread and the helper.
#[derive(Default)]
pub(crate) struct Gate {
    shared: Mutex<Shared>,
    changed: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The witness thread's end of the gate (in its `Assignment`). Dropping it closes the gate.
pub struct Writer {
    gate: Arc<Gate>,
    inputs: usize,
    published: usize,
}

impl Writer {
    /// A writer for a witness of `inputs` recorded inputs.
    pub(crate) fn new(gate: Arc<Gate>, inputs: usize) -> Self {
        Writer {
            gate,
            inputs,
            published: 0,
        }
    }

    /// Publishes `aux` (whose values are all final) if `STEP` more are assigned since the last
    /// time, and the inputs once they are all assigned; skipped while the helper holds the gate
    /// (the next call publishes).
    pub(crate) fn publish(&mut self, input: &[Scalar], aux: &[Scalar]) {
        if aux.len() < self.published + STEP {
            return;
        }
        let Ok(mut s) = self.gate.shared.try_lock() else {
            return;
        };
        if s.closed {
            return;
        }
        if s.inputs.is_none() && input.len() == self.inputs {
            s.inputs = Some(input.to_vec());
        }
        s.aux = Some((Start(aux.as_ptr()), aux.len()));
        self.published = aux.len();
        drop(s);
        self.gate.changed.notify_one();
    }

    /// Closes the gate: the helper reads nothing more (a batch in progress is waited for).
    pub(crate) fn close(&mut self) {
        let mut s = self.gate.lock();
        s.closed = true;
        s.aux = None;
        drop(s);
        self.gate.changed.notify_one();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.close();
    }
}

/// The rows the helper evaluated: `a`, `b`, `c` for rows `0..rows`, and the first of them that
/// is unsatisfied.
#[derive(Debug, Default)]
pub(crate) struct Evaluated {
    pub a: Vec<Scalar>,
    pub b: Vec<Scalar>,
    pub c: Vec<Scalar>,
    pub rows: usize,
    pub unsatisfied: Option<usize>,
}

/// The helper's loop: evaluates the rows of `m` that `ready` (row `r` needs `ready[r]` aux
/// values and every input) lets it, in order, until the gate closes.
pub(crate) fn evaluate_beside(m: &Matrices, ready: &[u32], gate: &Gate) -> Evaluated {
    let mut out = Evaluated::default();
    let rows = ready.len();
    let mut s = gate.lock();
    loop {
        if s.closed {
            return out;
        }
        let avail = match (&s.aux, &s.inputs) {
            (Some((start, len)), Some(inputs)) => {
                let upto = ready.partition_point(|&n| n as usize <= *len);
                (upto >= (out.rows + MIN_ROWS).min(rows) && upto > out.rows)
                    .then_some((*start, *len, inputs, upto))
            }
            _ => None,
        };
        let Some((start, len, inputs, upto)) = avail else {
            s = gate.changed.wait(s).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        let upto = upto.min(out.rows + MAX_ROWS);
        // SAFETY: the gate is open and locked, so the writer keeps the buffer where `start`
        // points and its first `len` values written and unchanged (the module's text).
        let aux = unsafe { std::slice::from_raw_parts(start.0, len) };
        let range = out.rows..upto;
        if out.rows == 0 {
            // Exactly the partition's length, as a whole evaluation's would be (the ledger
            // counts capacity); the rest is appended after the witness.
            for v in [&mut out.a, &mut out.b, &mut out.c] {
                v.reserve_exact(rows);
            }
        }
        m.evaluate_rows_into(
            range.clone(),
            inputs,
            aux,
            false,
            [&mut out.a, &mut out.b, &mut out.c],
        );
        if out.unsatisfied.is_none() {
            let r = range.clone();
            out.unsatisfied =
                first_unsatisfied(&out.a[r.clone()], &out.b[r.clone()], &out.c[r], false)
                    .map(|i| i + range.start);
        }
        out.rows = upto;
        if out.rows == rows {
            return out;
        }
        // Let the writer in between batches.
        drop(s);
        s = gate.lock();
    }
}

#[cfg(test)]
mod tests {
    use ff::Field;
    use rand::Rng;

    use super::*;
    use crate::synthesis::pce::{assign, Precompiled};
    use crate::synthesis::test_circuit::ChainCircuit;

    /// The helper, given the whole assignment at once, evaluates every constraint in batches
    /// (more than one of `MAX_ROWS`), as the matrices' product does; a changed aux value is
    /// the first unsatisfied constraint it finds.
    #[test]
    fn the_helper_evaluates_what_is_published() {
        let seed = rand::thread_rng().gen();
        let shape = ChainCircuit::new(MAX_ROWS + 3000, 2, seed);
        let pce = Precompiled::record(shape.clone()).unwrap();
        let m = pce.matrices();
        let full = assign(shape.with_witness(seed ^ 1)).unwrap();
        let rows = m.constraints();
        let (a, b, c) = m.evaluate_rows(0..rows, &full.input, &full.aux, true);
        for broken in [false, true] {
            let mut aux = full.aux.clone();
            if broken {
                aux[7000] += Scalar::from(1u64);
            }
            // Published by hand (a writer publishes by steps, skipping while the helper holds
            // the gate).
            let gate = Gate::default();
            {
                let mut s = gate.lock();
                s.inputs = Some(full.input.clone());
                s.aux = Some((Start(aux.as_ptr()), aux.len()));
            }
            let got = evaluate_beside(m, &pce.ready, &gate);
            assert_eq!(got.rows, rows);
            if broken {
                let (a2, b2, c2) = m.evaluate_rows(0..rows, &full.input, &aux, true);
                let want = first_unsatisfied(&a2, &b2, &c2, true);
                assert!(want.is_some());
                assert_eq!(got.unsatisfied, want);
                assert_eq!((got.a, got.b, got.c), (a2, b2, c2));
            } else {
                assert_eq!(got.unsatisfied, None);
                assert_eq!((&got.a, &got.b, &got.c), (&a, &b, &c));
            }
        }
    }

    /// Nothing published, or inputs not all assigned: the helper evaluates nothing and returns
    /// once the gate closes.
    #[test]
    fn a_closed_gate_ends_the_helper() {
        let pce = Precompiled::record(ChainCircuit::new(100, 2, 1)).unwrap();
        let gate = Arc::new(Gate::default());
        let got = std::thread::scope(|s| {
            let helper = s.spawn(|| evaluate_beside(pce.matrices(), &pce.ready, &gate));
            let mut w = Writer::new(gate.clone(), pce.matrices().inputs);
            w.publish(&[Scalar::ONE], &[]);
            drop(w);
            helper.join().unwrap()
        });
        assert_eq!((got.rows, got.unsatisfied, got.a.len()), (0, None, 0));
    }
}
