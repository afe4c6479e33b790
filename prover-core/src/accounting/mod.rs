//! What the prover counts: the stage [`ledger`] (partitions and buffer bytes per stage, host
//! and device, live and peak; resident per-parameters entries) and the device [`trace`] (each
//! copy and kernel of a partition on its device). The stages report into both.

pub mod ledger;
pub mod trace;
