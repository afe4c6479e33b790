//! The harness: workloads, the parameter cache, one measured point, the sweep runner and its
//! reports. Its binary, `proofline`, runs everything without cargo (also on the GPU machine).
#![warn(missing_docs)]

pub mod backend;
pub mod commands;
pub mod config;
pub mod console;
pub mod filecoin;
pub mod outputs;
pub mod params_cache;
pub mod pce;
pub mod plan;
pub mod point;
pub mod preflight;
pub mod profile;
pub mod records;
pub mod report;
pub mod serve;
pub mod serve_config;
pub mod signals;
pub mod snap;
pub mod sweep;
pub mod synthetic;
pub mod units;
pub mod workloads;
