//! The replay workload: a synthesizer that synthesizes the first circuit it is given once and
//! hands every later caller a copy of that partition, so that the accelerator, not synthesis,
//! bounds a run (the `dense` circuit's synthesis is one sequential chain: seconds per partition
//! on one core, against a fraction of a second on a GPU).
//!
//! Every partition is then the same statement: the caller proves it with the first circuit's
//! public inputs, and every proof verifies against them. Each copy is made by the synthesis
//! worker that asked for it and is charged to synthesis (its time and its bytes, as a
//! synthesized partition's); the one kept to copy from stays in the ledger as the resident
//! entry `replay_source` from the moment a ledger is attached until [`Replay::clear`].

use std::sync::{Arc, Mutex, MutexGuard};

use bellpepper_core::Circuit;
use blstrs::Scalar;

use prover_core::accounting::ledger::{ResidentKind, ResidentToken, StageLedger};
use prover_core::error::Result;
use prover_core::stages::{SynthesizedPartition, Synthesizer};

/// A synthesizer that synthesizes once and copies after (see the module's text).
pub struct Replay<S> {
    inner: S,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    source: Option<Arc<SynthesizedPartition>>,
    ledger: Option<StageLedger>,
    token: Option<ResidentToken>,
}

impl State {
    fn charge(&mut self) {
        if let (Some(ledger), Some(source), None) = (&self.ledger, &self.source, &self.token) {
            let bytes = source.heap_bytes() as u64;
            self.token = Some(ledger.resident(ResidentKind::ReplaySource, bytes));
        }
    }
}

impl<S: Synthesizer> Replay<S> {
    /// A replaying wrapper of `inner` (which synthesizes the first circuit).
    pub fn new(inner: S) -> Self {
        Replay {
            inner,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts the partition kept to copy from in `ledger` (now, if it exists, or when it is
    /// synthesized).
    pub fn attach(&self, ledger: &StageLedger) {
        let mut st = self.state();
        st.token = None;
        st.ledger = Some(ledger.clone());
        st.charge();
    }

    /// Drops the partition kept to copy from, and its ledger entry: the next call synthesizes
    /// again.
    pub fn clear(&self) {
        let mut st = self.state();
        st.token = None;
        st.source = None;
    }

    /// Whether a partition is kept to copy from.
    pub fn has_source(&self) -> bool {
        self.state().source.is_some()
    }
}

impl<S: Synthesizer> Replay<S> {
    /// The partition to copy: the one kept, or `circuit` synthesized and kept (later callers
    /// wait for it). A failed synthesis keeps nothing.
    fn source<C: Circuit<Scalar>>(&self, circuit: C) -> Result<Arc<SynthesizedPartition>> {
        let mut st = self.state();
        if let Some(s) = &st.source {
            return Ok(s.clone());
        }
        let s = Arc::new(self.inner.synthesize(circuit)?);
        st.source = Some(s.clone());
        st.charge();
        Ok(s)
    }

    /// Synthesizes `circuit` as the partition to copy, unless one is kept: so that a timed run
    /// does not include the one real synthesis.
    pub fn prime<C: Circuit<Scalar>>(&self, circuit: C) -> Result<()> {
        self.source(circuit).map(drop)
    }
}

impl<S: Synthesizer> Synthesizer for Replay<S> {
    /// The first call synthesizes `circuit` (unless [`Replay::prime`] did); every call returns a
    /// copy of the partition kept, made outside the lock. A failed first synthesis keeps
    /// nothing: the next call tries its own circuit.
    fn synthesize<C: Circuit<Scalar>>(&self, circuit: C) -> Result<SynthesizedPartition> {
        Ok((*self.source(circuit)?).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::DenseCircuit;
    use prover_core::accounting::ledger::Memory;
    use prover_core::CpuSynthesizer;

    #[test]
    fn replays_the_first_partition_and_counts_it_until_cleared() {
        let ledger = StageLedger::new();
        let replay = Arc::new(Replay::new(CpuSynthesizer));
        replay.attach(&ledger);
        let first = DenseCircuit::with_domain(6, 3, 7).with_witness(11);
        let other = DenseCircuit::with_domain(6, 3, 7).with_witness(12);
        let fresh = CpuSynthesizer.synthesize(first.clone()).unwrap();
        let fresh_other = CpuSynthesizer.synthesize(other.clone()).unwrap();
        // Negative twin: the two circuits' witnesses differ, so equal copies below mean replay.
        assert_ne!(fresh.witness.aux, fresh_other.witness.aux);
        assert_eq!(ledger.snapshot().resident_bytes(Memory::Host), 0);
        let a = replay.synthesize(first).unwrap();
        let b = replay.synthesize(other).unwrap();
        for p in [&a, &b] {
            assert_eq!(p.witness.aux, fresh.witness.aux);
            assert_eq!(p.evaluations.a, fresh.evaluations.a);
            assert_eq!(p.evaluations.c, fresh.evaluations.c);
        }
        let held = ledger.snapshot().resident(ResidentKind::ReplaySource);
        assert_eq!(held.count.live, 1);
        assert_eq!(held.bytes.live, fresh.heap_bytes() as u64);
        replay.clear();
        assert!(!replay.has_source());
        assert_eq!(ledger.snapshot().resident_bytes(Memory::Host), 0);
        // After clearing, the next circuit is synthesized afresh.
        let c = replay
            .synthesize(DenseCircuit::with_domain(6, 3, 7).with_witness(12))
            .unwrap();
        assert_eq!(c.witness.aux, fresh_other.witness.aux);
        // Primed, the circuit given later is not synthesized.
        replay.clear();
        replay
            .prime(DenseCircuit::with_domain(6, 3, 7).with_witness(11))
            .unwrap();
        assert!(replay.has_source());
        let d = replay
            .synthesize(DenseCircuit::with_domain(6, 3, 7).with_witness(12))
            .unwrap();
        assert_eq!(d.witness.aux, fresh.witness.aux);
    }

    #[test]
    fn a_failed_first_synthesis_keeps_nothing() {
        let replay = Replay::new(CpuSynthesizer);
        // A circuit without a witness fails; nothing is kept, and a good circuit then works.
        let bad = DenseCircuit::with_domain(5, 2, 1);
        assert!(replay.synthesize(bad).is_err());
        assert!(!replay.has_source());
        assert!(replay
            .synthesize(DenseCircuit::with_domain(5, 2, 1).with_witness(3))
            .is_ok());
        assert!(replay.has_source());
    }
}
