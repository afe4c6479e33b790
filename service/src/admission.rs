//! Admission of job inputs under the engine's byte budget.
//!
//! A job's payload is parsed only once its input is admitted: the bytes its parsing may hold
//! are reserved from the budget the partitions are reserved from, and the parsed form is then
//! counted in the ledger as a `job_input` resident entry. The admission is let go when the
//! job's last partition has left synthesis (the engine drops it then: see
//! [`prover_core::Engine::submit_holding`]).
//!
//! Inputs and partitions share one budget, and an input is let go only after its job's
//! partitions have been given budget in turn, so admission keeps room for them: an input is
//! admitted only while the inputs admitted, plus the largest partition any of their jobs still
//! needs, fit the budget. With no partition in flight, the next partition of every admitted job
//! then fits, so jobs always move and no set of inputs can hold the budget that their own
//! partitions wait for.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use prover_core::accounting::ledger::{ResidentKind, ResidentToken, StageLedger};
use prover_core::runtime::budget::{BudgetPermit, MemoryBudget};

/// Admits job inputs under one budget (or none: inputs are then only counted).
pub struct Admission {
    budget: Option<MemoryBudget>,
    ledger: StageLedger,
    held: Mutex<Held>,
    freed: Condvar,
}

/// The inputs admitted now.
#[derive(Default)]
struct Held {
    /// Bytes reserved for them.
    bytes: u64,
    /// Their jobs' partition sizes (a multiset: size -> jobs).
    partitions: BTreeMap<u64, usize>,
}

impl Held {
    fn largest_partition(&self) -> u64 {
        self.partitions.keys().next_back().copied().unwrap_or(0)
    }
}

/// An admitted input: its reservation and its ledger entry, given back when dropped.
pub struct Admitted {
    admission: Arc<Admission>,
    bytes: u64,
    partition: u64,
    permit: Option<BudgetPermit>,
    counted: Option<ResidentToken>,
}

/// How often a waiting admission looks again (partitions give budget back without a signal).
const POLL: Duration = Duration::from_millis(50);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

impl Admission {
    /// Admission under `budget`, counting admitted inputs in `ledger`.
    pub fn new(budget: Option<MemoryBudget>, ledger: StageLedger) -> Arc<Self> {
        Arc::new(Admission {
            budget,
            ledger,
            held: Mutex::new(Held::default()),
            freed: Condvar::new(),
        })
    }

    /// Bytes reserved for the inputs admitted now.
    pub fn held_bytes(&self) -> u64 {
        lock(&self.held).bytes
    }

    /// Admits an input of at most `bytes` whose job's partitions each reserve `partition`
    /// bytes, waiting until both fit beside the inputs admitted already; `stop` is asked while
    /// it waits, and an error from it ends the wait. An input that could never fit is an error
    /// at once.
    pub fn admit(
        self: &Arc<Self>,
        bytes: u64,
        partition: u64,
        stop: impl Fn() -> Result<(), String>,
    ) -> Result<Admitted, String> {
        let admitted = |permit| Admitted {
            admission: self.clone(),
            bytes,
            partition,
            permit,
            counted: None,
        };
        let Some(budget) = &self.budget else {
            return Ok(admitted(None));
        };
        let capacity = budget.capacity();
        if bytes.saturating_add(partition) > capacity {
            return Err(format!(
                "the job's input ({}) and one of its partitions ({}) exceed the memory budget \
                 ({}): raise --mem-budget",
                mib(bytes),
                mib(partition),
                mib(capacity)
            ));
        }
        let mut held = lock(&self.held);
        loop {
            stop()?;
            let room = held.bytes + bytes + held.largest_partition().max(partition) <= capacity;
            if let Some(permit) = room.then(|| budget.try_acquire(bytes)).flatten() {
                held.bytes += bytes;
                *held.partitions.entry(partition).or_default() += 1;
                return Ok(admitted(Some(permit)));
            }
            held = self
                .freed
                .wait_timeout(held, POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Admitted {
    /// Counts the parsed input, `bytes`, in the ledger (a `job_input` entry), and gives back
    /// what the admission reserved beyond it. An input larger than its admission keeps the
    /// reservation it has, and the ledger shows its real size.
    pub fn count(&mut self, bytes: u64) {
        self.counted = Some(
            self.admission
                .ledger
                .resident(ResidentKind::JobInput, bytes),
        );
        let Some(permit) = &mut self.permit else {
            return; // no budget: nothing was reserved
        };
        if bytes < self.bytes {
            let spare = self.bytes - bytes;
            permit.release(spare);
            lock(&self.admission.held).bytes -= spare;
            self.bytes = bytes;
            self.admission.freed.notify_all();
        } else if bytes > self.bytes {
            eprintln!(
                "warning: a job's parsed input ({}) is larger than its admission ({}); the \
                 ledger counts the parsed size",
                mib(bytes),
                mib(self.bytes)
            );
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if self.permit.take().is_none() {
            return; // no budget: nothing was registered
        }
        let mut held = lock(&self.admission.held);
        held.bytes -= self.bytes;
        if let Some(n) = held.partitions.get_mut(&self.partition) {
            *n -= 1;
            if *n == 0 {
                held.partitions.remove(&self.partition);
            }
        }
        drop(held);
        self.admission.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn go() -> Result<(), String> {
        Ok(())
    }

    #[test]
    fn inputs_leave_room_for_the_largest_partition() {
        let budget = MemoryBudget::new(100);
        let a = Admission::new(Some(budget.clone()), StageLedger::new());
        let first = a.admit(30, 40, go).unwrap();
        assert_eq!((a.held_bytes(), budget.available()), (30, 70));
        // 30 + 30 + 40 = 100 fits; a third input of 1 would leave no room for a partition.
        let second = a.admit(30, 10, go).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| a.admit(1, 10, go));
            std::thread::sleep(POLL * 3);
            assert!(
                !waiter.is_finished(),
                "admitted past the largest partition's room"
            );
            // Twin: once an input is let go, the waiter is admitted.
            drop(second);
            let third = waiter.join().unwrap().unwrap();
            assert_eq!(a.held_bytes(), 31);
            drop(third);
        });
        // A stop ends a wait with its error: 30 + 30 + 40 fills the budget, so the next input
        // waits until the stop comes.
        let stop = AtomicBool::new(false);
        let fill = a.admit(30, 40, go).unwrap();
        let stopped = || match stop.load(Ordering::Acquire) {
            true => Err("stopped".to_string()),
            false => Ok(()),
        };
        std::thread::scope(|s| {
            let waiter = s.spawn(|| a.admit(1, 40, stopped).err());
            std::thread::sleep(POLL * 3);
            assert!(!waiter.is_finished(), "admitted past a full budget");
            stop.store(true, Ordering::Release);
            assert_eq!(waiter.join().unwrap().as_deref(), Some("stopped"));
        });
        drop(first);
        drop(fill);
        assert_eq!((a.held_bytes(), budget.available()), (0, 100));
    }

    #[test]
    fn an_input_that_can_never_fit_is_an_error_at_once() {
        let a = Admission::new(Some(MemoryBudget::new(100)), StageLedger::new());
        let err = a.admit(70, 31, go).err().expect("over the budget");
        assert!(err.contains("exceed the memory budget"), "{err}");
        // Twin: exactly the budget is admitted.
        assert!(a.admit(70, 30, go).is_ok());
    }

    #[test]
    fn counting_the_parsed_input_gives_the_rest_back_and_shows_in_the_ledger() {
        let budget = MemoryBudget::new(1000);
        let ledger = StageLedger::new();
        let a = Admission::new(Some(budget.clone()), ledger.clone());
        let mut input = a.admit(600, 100, go).unwrap();
        input.count(250);
        assert_eq!((a.held_bytes(), budget.available()), (250, 750));
        let usage = ledger.snapshot().resident(ResidentKind::JobInput);
        assert_eq!((usage.count.live, usage.bytes.live), (1, 250));
        drop(input);
        let usage = ledger.snapshot().resident(ResidentKind::JobInput);
        assert_eq!((usage.count.live, usage.bytes.live), (0, 0));
        assert_eq!(budget.available(), 1000);
        // An input larger than its admission keeps its reservation; the ledger shows its size.
        let mut input = a.admit(100, 100, go).unwrap();
        input.count(300);
        assert_eq!((a.held_bytes(), budget.available()), (100, 900));
        let usage = ledger.snapshot().resident(ResidentKind::JobInput);
        assert_eq!(usage.bytes.live, 300);
    }

    #[test]
    fn without_a_budget_inputs_are_only_counted() {
        let ledger = StageLedger::new();
        let a = Admission::new(None, ledger.clone());
        let mut input = a.admit(u64::MAX, u64::MAX, go).unwrap();
        input.count(42);
        assert_eq!(
            ledger
                .snapshot()
                .resident(ResidentKind::JobInput)
                .bytes
                .live,
            42
        );
    }
}
