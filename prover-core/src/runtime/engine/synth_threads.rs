//! The synthesis threads: plain threads (`proofline-synth-<i>`, and `proofline-synth-urgent-<i>`
//! for the urgent lane), as many as the lane's synthesis pool has, each running one partition's
//! synthesis task at a time with that pool (`proofline-synth-par-<i>`,
//! `proofline-urgent-par-<i>`) as the pool of the synthesis's parallel parts. The tasks are not
//! the pool's own: [`crate::parallel`] says why.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use rayon::ThreadPool;

use crate::error::Result;
use crate::parallel;

use super::spawn;

/// One partition's synthesis.
pub(super) type Task = Box<dyn FnOnce() + Send>;

/// Starts one thread (`<name>-<i>`) per thread of `pool`; they end once the returned sender is
/// dropped and every task sent has run. Their handles go into `handles`.
pub(super) fn start(
    name: &str,
    pool: Arc<ThreadPool>,
    handles: &mut Vec<JoinHandle<()>>,
) -> Result<Sender<Task>> {
    let (tx, rx) = crossbeam_channel::unbounded::<Task>();
    for i in 0..pool.current_num_threads() {
        let (rx, pool) = (rx.clone(), pool.clone());
        handles.push(spawn(format!("{name}-{i}"), move || {
            for task in rx {
                let run = std::panic::AssertUnwindSafe(|| parallel::with_pool(&pool, task));
                // A task catches the synthesizer's panics itself; one that escapes is a bug in
                // the engine, which would leave its partition unsettled: stop, as rayon does
                // for a panic in a spawned task.
                if std::panic::catch_unwind(run).is_err() {
                    let _ = std::io::Write::write_all(
                        &mut std::io::stderr(),
                        b"proofline: a synthesis task panicked outside the synthesizer\n",
                    );
                    std::process::abort();
                }
            }
        })?);
    }
    Ok(tx)
}
