//! Measurement records: what a benchmark measured, where, when, with which command, and the
//! peer's figure beside it when the peer ran in the same run.
//!
//! Records live in JSON Lines files (`docs/records/*.jsonl`, one [`Record`] per line). The
//! benchmark tools append to them ([`append`]); `cargo xtask bench-tables` renders the tables of
//! the docs from them ([`render::fill_document`]): for each table, case and machine the latest
//! record is shown, and older records stay in the file as history.

pub mod docs;
pub mod provenance;
pub mod record;
pub mod render;

pub use provenance::Provenance;
pub use record::{append, read_dir, read_file, significant, Peer, Record, RecordError};
