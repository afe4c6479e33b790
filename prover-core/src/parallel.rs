//! Where synthesis's parallel parts run.
//!
//! The engine runs each partition's synthesis on one of its plain synthesis threads, and the
//! parallel parts of a synthesis (pre-compiled synthesis's sparse product and satisfiability
//! check, a circuit's parts assigned each on its own thread, the canonical conversion of the
//! assignment) in its synthesis pool, through [`install`]. The sequential body must not be a
//! task of that pool: a rayon worker that waits for the rest of a parallel loop takes whatever
//! work is queued, and a whole partition's synthesis taken there holds the partition waiting
//! under it for that synthesis's length. On the H200's 16 cores, with the synthesis tasks in
//! the pool, a dense 2^22 partition's pre-compiled synthesis took 2.5 s with 4 in flight and
//! 6.2 s with 8 (`docs/design-decisions.md#synthesis`).
//!
//! From a plain thread, [`rayon::ThreadPool::install`] blocks the caller without giving it other
//! work, and inside the pool a waiting worker can only take other parallel parts.

use std::cell::RefCell;
use std::sync::Arc;

use rayon::ThreadPool;

thread_local! {
    static POOL: RefCell<Option<Arc<ThreadPool>>> = const { RefCell::new(None) };
}

/// Puts the previous pool back when dropped (also when `f` panics).
struct Restore(Option<Arc<ThreadPool>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        POOL.with(|p| *p.borrow_mut() = previous);
    }
}

/// Runs `f` on this thread with `pool` as the pool of its parallel parts.
pub fn with_pool<R>(pool: &Arc<ThreadPool>, f: impl FnOnce() -> R) -> R {
    let previous = POOL.with(|p| p.borrow_mut().replace(pool.clone()));
    let _restore = Restore(previous);
    f()
}

/// Runs a parallel part: in the pool [`with_pool`] set for this thread, the caller blocked
/// until it is done; without one, or when already on a rayon worker, where it is called (in
/// rayon's current pool).
pub fn install<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    let pool = POOL.with(|p| p.borrow().clone());
    match pool {
        Some(pool) if rayon::current_thread_index().is_none() => pool.install(op),
        _ => op(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &'static str) -> Arc<ThreadPool> {
        Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .thread_name(move |i| format!("{name}-{i}"))
                .build()
                .unwrap(),
        )
    }

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or("").to_string()
    }

    #[test]
    fn a_part_runs_in_the_pool_set_for_the_thread() {
        let p = pool("parts");
        let name = with_pool(&p, || install(thread_name));
        assert!(name.starts_with("parts-"), "{name}");
    }

    #[test]
    fn without_a_pool_a_part_runs_where_it_is_called() {
        let here = thread_name();
        assert_eq!(install(thread_name), here);
        // And the pool is gone again after with_pool, also after a panic inside it.
        let p = pool("gone");
        let inside = std::panic::AssertUnwindSafe(|| with_pool(&p, || panic!("inside")));
        assert!(std::panic::catch_unwind(inside).is_err());
        assert_eq!(install(thread_name), here);
    }

    #[test]
    fn on_a_worker_a_part_stays_in_that_worker_s_pool() {
        let outer = pool("outer");
        let inner = pool("inner");
        let name = outer.install(|| with_pool(&inner, || install(thread_name)));
        assert!(name.starts_with("outer-"), "{name}");
    }
}
