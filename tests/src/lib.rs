//! Helpers shared by proofline's integration tests: random satisfiable circuits, one-call
//! proving with the CPU backend, and a fault-injecting test backend with emulated devices.

/// The README, whose Rust example is compiled and run as this crate's doctest.
#[doc = include_str!("../../README.md")]
mod readme {}

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use backend_cpu::{CpuBackend, CpuWorker};
use blstrs::Scalar;
use ff::Field;
use prover_core::accounting::ledger::{
    BackendBuffer, BackendBuffers, ResidentKind, ResidentToken, StageLedger,
};
use prover_core::bellpepper_core::{
    Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable,
};
use prover_core::{
    Accelerator, AcceleratorWorker, CpuSynthesizer, HandBack, Parameters, PendingProof,
    PreparedParameters, Proof, Stages, SynthesizedPartition,
};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

/// A random satisfiable circuit: its shape (which variables meet in which constraint, with
/// which coefficients) comes from `shape_seed`, its witness from `witness_seed`.
///
/// Every aux variable is constrained (each is the fresh C term of its own constraint), and
/// every coefficient is nonzero, so no query point is at infinity: bellperson rejects both.
#[derive(Clone, Debug)]
pub struct RandomCircuit {
    /// Public inputs (without ONE).
    pub inputs: usize,
    /// Constraints (without input constraints).
    pub constraints: usize,
    /// Fixes the circuit.
    pub shape_seed: u64,
    /// Fixes the witness; `None` for parameter generation.
    pub witness_seed: Option<u64>,
    /// Makes the last constraint unsatisfied (for negative tests).
    pub break_last: bool,
}

impl RandomCircuit {
    /// A circuit with a witness.
    pub fn new(inputs: usize, constraints: usize, shape_seed: u64, witness_seed: u64) -> Self {
        RandomCircuit {
            inputs,
            constraints,
            shape_seed,
            witness_seed: Some(witness_seed),
            break_last: false,
        }
    }

    /// The same circuit without witness.
    pub fn shape(&self) -> Self {
        RandomCircuit {
            witness_seed: None,
            ..self.clone()
        }
    }

    /// The public inputs of the witness.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        let mut rng = ChaCha20Rng::seed_from_u64(self.witness_seed.expect("a witness"));
        (0..self.inputs).map(|_| Scalar::random(&mut rng)).collect()
    }
}

fn nonzero(rng: &mut impl RngCore) -> Scalar {
    loop {
        let s = Scalar::random(&mut *rng);
        if !bool::from(s.is_zero()) {
            return s;
        }
    }
}

impl Circuit<Scalar> for RandomCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut shape = ChaCha20Rng::seed_from_u64(self.shape_seed);
        let mut wit = self.witness_seed.map(ChaCha20Rng::seed_from_u64);
        let mut vars: Vec<(Variable, Option<Scalar>)> = vec![(CS::one(), Some(Scalar::ONE))];
        for i in 0..self.inputs {
            let v = wit.as_mut().map(Scalar::random);
            let var = cs.alloc_input(
                || format!("input {i}"),
                || v.ok_or(SynthesisError::AssignmentMissing),
            )?;
            vars.push((var, v));
        }
        // Two starting aux variables, each pinned by its own constraint x * 1 = x.
        for i in 0..2 {
            let v = wit.as_mut().map(Scalar::random);
            let var = cs.alloc(
                || format!("start {i}"),
                || v.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(
                || format!("pin {i}"),
                |lc| lc + var,
                |lc| lc + CS::one(),
                |lc| lc + var,
            );
            vars.push((var, v));
        }
        for i in 0..self.constraints {
            let mut pick = |lc: &mut Vec<(usize, Scalar)>| {
                let terms = 1 + (shape.next_u32() % 3) as usize;
                for _ in 0..terms {
                    lc.push((
                        (shape.next_u32() as usize) % vars.len(),
                        nonzero(&mut shape),
                    ));
                }
            };
            let (mut la, mut lb) = (Vec::new(), Vec::new());
            pick(&mut la);
            pick(&mut lb);
            let eval = |lc: &[(usize, Scalar)]| -> Option<Scalar> {
                lc.iter()
                    .try_fold(Scalar::ZERO, |acc, (j, c)| Some(acc + vars[*j].1? * c))
            };
            let broken = self.break_last && i + 1 == self.constraints;
            let value = match (eval(&la), eval(&lb)) {
                (Some(a), Some(b)) => Some(a * b + if broken { Scalar::ONE } else { Scalar::ZERO }),
                _ => None,
            };
            let out = cs.alloc(
                || format!("out {i}"),
                || value.ok_or(SynthesisError::AssignmentMissing),
            )?;
            let to_lc = |lc: &[(usize, Scalar)], vars: &[(Variable, Option<Scalar>)]| {
                lc.iter().fold(LinearCombination::zero(), |acc, (j, c)| {
                    acc + (*c, vars[*j].0)
                })
            };
            let a = to_lc(&la, &vars);
            let b = to_lc(&lb, &vars);
            cs.enforce(|| format!("c{i}"), |_| a, |_| b, |lc| lc + out);
            vars.push((out, value));
        }
        Ok(())
    }
}

/// Prepared parameters for the CPU backend.
pub fn prepare_cpu(params: Parameters) -> PreparedParameters {
    CpuBackend
        .prepare(Arc::new(params), &StageLedger::new())
        .expect("the CPU backend prepares any parameters")
}

/// Runs the CPU accelerator on one partition (a private ledger takes its buffers).
pub fn accelerate_cpu(
    prepared: &PreparedParameters,
    partition: SynthesizedPartition,
) -> Result<PendingProof, HandBack> {
    let ledger = StageLedger::new();
    let mut token = ledger.enter(prover_core::accounting::ledger::Stage::OnAccelerator, 0, 0);
    CpuWorker.accelerate(prepared, partition, &mut token.backend_buffers())
}

/// The CPU stages.
pub fn cpu_stages() -> Stages<'static, CpuSynthesizer> {
    Stages {
        synthesizer: &CpuSynthesizer,
        accelerator: &CpuBackend,
        finalizer: &CpuBackend,
    }
}

/// Proves one circuit on the CPU with fresh randomness.
pub fn prove_one<C: Circuit<Scalar>>(
    prepared: &PreparedParameters,
    circuit: C,
) -> prover_core::Result<Proof> {
    let mut rng = rand::thread_rng();
    Ok(prover_core::prove(cpu_stages(), prepared, vec![circuit], &mut rng)?.remove(0))
}

/// Which partitions a [`TestBackend`] treats specially.
pub type Picks = fn(&SynthesizedPartition) -> bool;

/// What the [`TestBackend`] does with a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Prove it on the CPU.
    Pass,
    /// Hand it back with an error.
    Fail,
    /// Panic.
    Panic,
    /// Prove it on the CPU, then return a wrong h sum, as a faulty device would: the proof
    /// made from it does not verify.
    Corrupt,
}

/// A gate that accelerator calls wait at until the test opens it.
#[derive(Default)]
pub struct Gate {
    open: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
    arrived: AtomicUsize,
}

impl Gate {
    /// A closed gate.
    pub fn closed() -> Arc<Self> {
        Arc::new(Gate::default())
    }

    /// An open gate.
    pub fn opened() -> Arc<Self> {
        let g = Gate::default();
        *g.open.lock().unwrap() = true;
        Arc::new(g)
    }

    /// Opens the gate for good.
    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }

    /// Calls that have reached the gate.
    pub fn arrived(&self) -> usize {
        self.arrived.load(Ordering::Acquire)
    }

    /// Waits at the gate until it is open (counted in [`Gate::arrived`]).
    pub fn pass(&self) {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }
}

/// Bytes the test backend registers as its emulated device's copy of the bases.
pub fn emulated_bases_bytes(params: &Parameters) -> u64 {
    let g1 = params.h.len() + params.l.len() + params.a.len() + params.b_g1.len();
    (g1 * 96 + params.b_g2.len() * 192) as u64
}

/// A backend for engine and conformance tests: emulated devices that prove on the CPU behind a
/// gate, register device and pinned buffers in the ledger as a device backend would, and fail
/// on purpose: on the partitions whose first public input a rule names (any device), or every
/// `n`-th partition a device receives (`fail_every`; 1 = every partition).
pub struct TestBackend {
    /// The gate.
    pub gate: Arc<Gate>,
    /// First public input -> behaviour (anything else passes).
    pub rules: Vec<(Scalar, Behaviour)>,
    /// Per emulated device: hand back every n-th partition it receives (`None`: never).
    pub fail_every: Vec<Option<usize>>,
    /// Per emulated device: partitions received.
    pub received: Arc<Vec<AtomicUsize>>,
    /// Partitions this picks get its behaviour, whatever `rules` say (a backend that refuses,
    /// or gets wrong, some kind of work).
    pub pick: Option<(Picks, Behaviour)>,
    /// The first public input of each partition, in the order the devices took them.
    pub taken: Arc<Mutex<Vec<Scalar>>>,
}

impl TestBackend {
    /// One emulated device, failing only by `rules`.
    pub fn new(gate: Arc<Gate>, rules: Vec<(Scalar, Behaviour)>) -> Self {
        Self::with_devices(gate, rules, vec![None])
    }

    /// One emulated device per entry of `fail_every`.
    pub fn with_devices(
        gate: Arc<Gate>,
        rules: Vec<(Scalar, Behaviour)>,
        fail_every: Vec<Option<usize>>,
    ) -> Self {
        let received = Arc::new(fail_every.iter().map(|_| AtomicUsize::new(0)).collect());
        TestBackend {
            gate,
            rules,
            fail_every,
            received,
            pick: None,
            taken: Arc::default(),
        }
    }

    /// The backend, handing back every partition `refuse` picks.
    pub fn refusing(self, refuse: fn(&SynthesizedPartition) -> bool) -> Self {
        TestBackend {
            pick: Some((refuse, Behaviour::Fail)),
            ..self
        }
    }

    /// The backend, returning a wrong sum for every partition `corrupt` picks.
    pub fn corrupting(self, corrupt: fn(&SynthesizedPartition) -> bool) -> Self {
        TestBackend {
            pick: Some((corrupt, Behaviour::Corrupt)),
            ..self
        }
    }

    /// One device handing back every `n`-th partition (for the conformance suite).
    pub fn failing_every(n: usize) -> Self {
        Self::with_devices(Gate::opened(), vec![], vec![Some(n)])
    }
}

/// The pinned staging the test backend registers per partition: one of a, b, c.
fn pinned_bytes(params: &Parameters) -> u64 {
    prover_core::runtime::engine::estimate_partition_bytes(params).0 / 3
}

/// What the test backend prepares: the CPU backend's preparation, and the emulated device's
/// copy of the bases as a resident entry.
struct TestPrepared {
    cpu: PreparedParameters,
    _bases: Vec<ResidentToken>,
}

impl Accelerator for TestBackend {
    fn name(&self) -> &str {
        "test"
    }

    fn device_count(&self) -> usize {
        self.fail_every.len()
    }

    fn prepare(
        &self,
        params: Arc<Parameters>,
        ledger: &StageLedger,
    ) -> prover_core::Result<PreparedParameters> {
        let bases = emulated_bases_bytes(&params);
        let state = TestPrepared {
            cpu: CpuBackend.prepare(params.clone(), ledger)?,
            _bases: (0..self.device_count())
                .map(|_| ledger.resident(ResidentKind::DeviceBases, bases))
                .collect(),
        };
        Ok(PreparedParameters::new(
            params,
            "test",
            Some(Arc::new(state)),
        ))
    }

    fn partition_host_bytes(&self, params: &Parameters) -> u64 {
        // Pinned staging, and the CPU quotient's temporaries (its accelerator runs the CPU's).
        pinned_bytes(params) + CpuBackend.partition_host_bytes(params)
    }

    fn worker(
        &self,
        device: usize,
        _slot: usize,
    ) -> prover_core::Result<Box<dyn AcceleratorWorker>> {
        if device >= self.device_count() {
            return Err(prover_core::Error::InvalidConfig {
                what: "device",
                detail: format!("the test backend has no device {device}"),
            });
        }
        Ok(Box::new(TestWorker {
            gate: self.gate.clone(),
            rules: self.rules.clone(),
            fail_every: self.fail_every[device],
            received: self.received.clone(),
            pick: self.pick,
            taken: self.taken.clone(),
            device,
        }))
    }
}

struct TestWorker {
    gate: Arc<Gate>,
    rules: Vec<(Scalar, Behaviour)>,
    fail_every: Option<usize>,
    received: Arc<Vec<AtomicUsize>>,
    pick: Option<(Picks, Behaviour)>,
    taken: Arc<Mutex<Vec<Scalar>>>,
    device: usize,
}

fn hand_back(partition: SynthesizedPartition, detail: &str) -> HandBack {
    HandBack {
        partition: Box::new(partition),
        error: prover_core::Error::Malformed {
            what: "test backend",
            detail: detail.into(),
        },
    }
}

impl AcceleratorWorker for TestWorker {
    fn accelerate(
        &mut self,
        prepared: &PreparedParameters,
        partition: SynthesizedPartition,
        buffers: &mut BackendBuffers<'_>,
    ) -> Result<PendingProof, HandBack> {
        let first = partition.witness.public_inputs().first().copied();
        self.taken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(first.unwrap_or(Scalar::ZERO));
        self.gate.pass();
        let n = self.received[self.device].fetch_add(1, Ordering::AcqRel) + 1;
        let state = match prepared.state::<TestPrepared>() {
            Ok(s) => s,
            Err(e) => {
                return Err(HandBack {
                    partition: Box::new(partition),
                    error: e,
                })
            }
        };
        // What a device backend holds per partition: a/b/c on the device, a pinned staging
        // copy of the largest vector.
        buffers.register(
            BackendBuffer::DeviceAbc,
            partition.evaluations.heap_bytes() as u64,
        );
        buffers.register(
            BackendBuffer::PinnedStaging,
            pinned_bytes(prepared.params()),
        );
        if self.fail_every.is_some_and(|k| n % k == 0) {
            return Err(hand_back(partition, "failing on purpose (every n-th)"));
        }
        let first = partition.witness.input.get(1).and_then(|b| b.to_scalar());
        let behaviour = self
            .rules
            .iter()
            .find(|(x, _)| Some(*x) == first)
            .map_or(Behaviour::Pass, |r| r.1);
        let behaviour = match self.pick {
            Some((picks, b)) if picks(&partition) => b,
            _ => behaviour,
        };
        match behaviour {
            Behaviour::Pass | Behaviour::Corrupt => {
                // As a device backend does: a/b/c go back to the engine to be freed off this
                // thread (the CPU worker consumes them, so a copy stands in).
                let spent = partition.evaluations.clone();
                let out = CpuWorker.accelerate(&state.cpu, partition, buffers);
                buffers.release(BackendBuffer::DeviceAbc);
                out.map(|mut p| {
                    if behaviour == Behaviour::Corrupt {
                        p.sums.h += <blstrs::G1Projective as group::Group>::generator();
                    }
                    PendingProof {
                        spent: Some(spent),
                        ..p
                    }
                })
            }
            Behaviour::Fail => Err(hand_back(partition, "failing on purpose")),
            Behaviour::Panic => panic!("test backend panics on purpose"),
        }
    }
}

/// Spins (yielding) until `cond` holds; panics after a minute so a broken engine fails the test
/// instead of hanging it.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::yield_now();
    }
}
