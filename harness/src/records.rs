//! Measurement records of the sweep and `c2` (`--record FILE`): one JSON line per figure,
//! stamped with the date, the binary's commit, the machine and the command, for `cargo xtask
//! bench-tables` to render.

use std::path::Path;

use proofline_records::provenance::{describe_machine, today};
use proofline_records::{append, Provenance, Record};

use crate::report::model::PointStatus;
use crate::report::{report_title, SweepResults};

/// Where a record was measured: today, this binary's commit, this machine (with its GPUs).
pub fn provenance(cpus: usize, ram_bytes: u64, gpus: &[String]) -> Provenance {
    let host = describe_machine(cpus, (ram_bytes > 0).then_some(ram_bytes));
    Provenance {
        date: today(),
        commit: env!("PROOFLINE_GIT_REV").to_string(),
        machine: host,
    }
    .with_device(&gpus.join(", "))
}

fn record(at: &Provenance, command: &str, table: &str, case: String) -> Record {
    Record {
        date: at.date.clone(),
        commit: at.commit.clone(),
        machine: at.machine.clone(),
        command: command.to_string(),
        table: Some(table.to_string()),
        case,
        metric: String::new(),
        unit: String::new(),
        ours: 0.0,
        peers: Vec::new(),
        extra: Default::default(),
        note: None,
        headline: None,
    }
}

/// One record per `ok` point of a sweep: its seconds per proof, with its throughput, peak RSS
/// and verified proofs beside it.
pub fn sweep_records(results: &SweepResults, command: &str, table: &str) -> Vec<Record> {
    let at = provenance(
        results.host.cpus,
        results.host.ram_bytes,
        &results.host.gpus,
    );
    let title = report_title(&results.config.run);
    results
        .points
        .iter()
        .filter(|p| p.status == PointStatus::Ok)
        .filter_map(|p| {
            let mut r = record(&at, command, table, format!("{title}, pw {}", p.pw));
            r.metric = "seconds per proof, one run".into();
            r.unit = "s".into();
            r.ours = proofline_records::significant(p.seconds_per_proof?, 4);
            if let Some(ppm) = p.proofs_per_minute {
                r.extra.insert("proofs/min".into(), format!("{ppm:.2}"));
            }
            if let Some(rss) = p.peak_rss_bytes {
                r.extra
                    .insert("peak RSS".into(), prover_core::units::human_bytes(rss));
            }
            r.extra
                .insert("proofs verified".into(), p.proofs_verified.to_string());
            Some(r)
        })
        .collect()
}

/// The record of one `c2` run: its wall seconds, parameters loaded and proof checked by
/// `verify_seal` included.
pub fn c2_record(
    sector: &str,
    partitions: usize,
    pw: usize,
    backend: &str,
    wall_seconds: f64,
    command: &str,
    table: &str,
) -> Record {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ram = proofline_records::provenance::memory_bytes().unwrap_or(0);
    let at = provenance(cpus, ram, &[]);
    let mut r = record(
        &at,
        command,
        table,
        format!(
            "{sector} PoRep C2, {partitions} partition{}, {backend} backend, pw {pw}",
            if partitions == 1 { "" } else { "s" }
        ),
    );
    r.metric = "wall seconds, one run (parameters read, proof checked by verify_seal)".into();
    r.unit = "s".into();
    r.ours = proofline_records::significant(wall_seconds, 4);
    r
}

/// Appends `records` to the JSON Lines file `path`.
pub fn append_all(path: &Path, records: &[Record]) -> Result<(), String> {
    for r in records {
        append(path, r).map_err(|e| format!("writing the record: {e}"))?;
    }
    Ok(())
}
