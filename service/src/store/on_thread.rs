//! A value that lives on a thread of its own, beside a single-threaded runtime: a store's calls
//! are synchronous, and each runs there, so that a call from an asynchronous handler never
//! starts a runtime inside another.

use std::sync::mpsc;

use tokio::runtime::Runtime;

use super::{io, Result, StoreError};

type Call<C> = Box<dyn FnOnce(&Runtime, &C) + Send>;

/// A `C` on its own thread; [`OnThread::run`] runs a call there and waits for its answer.
pub(super) struct OnThread<C> {
    calls: mpsc::Sender<Call<C>>,
    what: &'static str,
}

impl<C: 'static> OnThread<C> {
    /// Starts the thread `name` and makes its value with `open`, answering `open`'s error;
    /// `close` gets the value when the last handle is dropped. `what` names it in errors.
    pub fn start(
        name: &str,
        what: &'static str,
        open: impl FnOnce(&Runtime) -> Result<C> + Send + 'static,
        close: impl FnOnce(&Runtime, C) + Send + 'static,
    ) -> Result<Self> {
        let (ready, started) = mpsc::sync_channel::<Result<()>>(1);
        let (calls, inbox) = mpsc::channel::<Call<C>>();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let opened = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(io(format!("starting {what}'s runtime")))
                    .and_then(|runtime| open(&runtime).map(|value| (runtime, value)));
                let (runtime, value) = match opened {
                    Ok(open) => {
                        let _ = ready.send(Ok(()));
                        open
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                for call in inbox {
                    call(&runtime, &value);
                }
                close(&runtime, value);
            })
            .map_err(io(format!("starting {what}'s thread")))?;
        let handle = OnThread { calls, what };
        started.recv().map_err(|_| handle.gone())??;
        Ok(handle)
    }

    fn gone(&self) -> StoreError {
        StoreError::Corrupt(format!("{}'s thread has stopped", self.what))
    }

    /// Runs `f` on the thread and waits for its answer.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Runtime, &C) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        let call: Call<C> = Box::new(move |rt, value| {
            let _ = tx.send(f(rt, value));
        });
        self.calls.send(call).map_err(|_| self.gone())?;
        rx.recv().map_err(|_| self.gone())?
    }
}
