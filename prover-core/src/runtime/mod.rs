//! The pipeline runtime: the [`engine`] that moves partitions through the stages (synthesis
//! threads, the bounded accelerator queue, device routing with a bounded fallback, finalization
//! and deallocation), synthesis [`permit`]s, the byte [`budget`], and the ledger's timeline
//! ([`sampler`]).

pub mod budget;
pub mod engine;
pub mod permit;
pub mod sampler;
