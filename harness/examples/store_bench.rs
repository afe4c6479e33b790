//! The job store's claim rate: small fake jobs submitted to the PostgreSQL store (a fresh
//! schema) and claimed by several claimers at once, each with its own connections as separate
//! servers would have, against the embedded SQLite store claimed by one. Every job must be
//! claimed exactly once before a rate counts.
//!
//! ```sh
//! cargo build --profile test -p harness --example store_bench
//! target/debug/examples/store_bench --postgres postgres://USER@127.0.0.1:PORT/DB \
//!   --jobs 5000 --claimers 4 [--record docs/records/service.jsonl]
//! ```

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::{ensure, Result};
use clap::Parser;
use proofline_records::{Provenance, Record};
use proofline_service::store::{
    BlobLocation, ClaimFilter, JobStore, NewJob, Node, PgOptions, PgStore, SqliteStore, Submitted,
};

#[derive(Parser, Debug)]
struct Args {
    /// The PostgreSQL server.
    #[arg(long)]
    postgres: String,
    /// Jobs per store.
    #[arg(long, default_value_t = 5000)]
    jobs: usize,
    /// Claimers of the PostgreSQL store at once.
    #[arg(long, default_value_t = 4)]
    claimers: usize,
    /// Append the figures as records to this JSON Lines file.
    #[arg(long)]
    record: Option<std::path::PathBuf>,
}

fn job(i: usize) -> NewJob {
    let payload = format!("job {i}").into_bytes();
    let mut digest = [0u8; 32];
    digest[..8].copy_from_slice(&(i as u64).to_le_bytes());
    NewJob {
        request_id: format!("r{i}"),
        digest,
        kind: "WINNING_POST".into(),
        circuit: "winning-2KiB".into(),
        priority: 1 + (i % 4) as i32,
        payload: std::sync::Arc::new(payload),
        mem_bytes: 0,
        input_bytes: 0,
        max_queued: None,
    }
}

/// Submits `jobs` jobs: their ids, and submissions per second.
fn fill(store: &mut dyn JobStore, jobs: usize) -> Result<(BTreeSet<String>, f64)> {
    let t = Instant::now();
    let mut ids = BTreeSet::new();
    for i in 0..jobs {
        match store.submit(job(i))? {
            Submitted::New(j) => ids.insert(j.id),
            other => anyhow::bail!("job {i} was not new: {other:?}"),
        };
    }
    Ok((ids, jobs as f64 / t.elapsed().as_secs_f64()))
}

/// Claims with every store at once until the queue is empty: claims per second, each job
/// checked to be claimed once.
fn drain(stores: Vec<Box<dyn JobStore>>, ids: &BTreeSet<String>) -> Result<f64> {
    let t = Instant::now();
    let claimed: Vec<Vec<String>> = std::thread::scope(|s| {
        let claimers: Vec<_> = stores
            .into_iter()
            .enumerate()
            .map(|(i, mut store)| {
                s.spawn(move || -> Result<Vec<String>> {
                    // Each claimer a node of its own, as each server would be.
                    let node = Node {
                        name: format!("bench-{i}"),
                        instance: format!("{:016x}", rand::random::<u64>()),
                        lease_ms: 600_000,
                        sole: false,
                    };
                    let any = ClaimFilter {
                        min_priority: i32::MIN,
                        ..ClaimFilter::default()
                    };
                    let mut mine = Vec::new();
                    while let Some(j) = store.claim_next(&node, &any)? {
                        mine.push(j.id);
                    }
                    Ok(mine)
                })
            })
            .collect();
        claimers
            .into_iter()
            .map(|c| c.join().expect("a claimer panicked"))
            .collect::<Result<_>>()
    })?;
    let rate = ids.len() as f64 / t.elapsed().as_secs_f64();
    let all: Vec<&String> = claimed.iter().flatten().collect();
    let unique: BTreeSet<String> = all.iter().map(|s| s.to_string()).collect();
    ensure!(
        all.len() == ids.len(),
        "{} claims of {} jobs",
        all.len(),
        ids.len()
    );
    ensure!(
        &unique == ids,
        "the claimed jobs are not the submitted ones"
    );
    Ok(rate)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;

    let pg = PgOptions {
        url: args.postgres.clone(),
        schema: Some(format!("store_bench_{:08x}", rand::random::<u32>())),
        blobs: BlobLocation::Dir(dir.path().join("blobs")),
    };
    let (ids, pg_submits) = fill(&mut PgStore::open(&pg)?, args.jobs)?;
    let claimers = (0..args.claimers)
        .map(|_| Ok(Box::new(PgStore::open(&pg)?) as Box<dyn JobStore>))
        .collect::<Result<Vec<_>>>()?;
    let pg_claims = drain(claimers, &ids)?;
    println!(
        "PostgreSQL: {pg_submits:.0} submits/s, {pg_claims:.0} claims/s with {} claimers \
         ({} jobs)",
        args.claimers, args.jobs
    );

    let sqlite_dir = dir.path().join("sqlite");
    let mut sqlite = SqliteStore::open(&sqlite_dir)?;
    let (ids, sqlite_submits) = fill(&mut sqlite, args.jobs)?;
    let sqlite_claims = drain(vec![Box::new(sqlite)], &ids)?;
    println!("SQLite: {sqlite_submits:.0} submits/s, {sqlite_claims:.0} claims/s with 1 claimer");

    if let Some(path) = &args.record {
        let p = Provenance::here();
        let command = format!(
            "cargo build --profile test -p harness --example store_bench && {}",
            std::env::args().collect::<Vec<_>>().join(" ")
        );
        // The case names its figure, as the table shows cases alone.
        let record = |case: String, metric: &str, ours: f64| Record {
            date: p.date.clone(),
            commit: p.commit.clone(),
            machine: p.machine.clone(),
            command: command.clone(),
            table: Some("store".into()),
            case: format!("{metric}, {case}"),
            metric: metric.into(),
            unit: "per s".into(),
            ours: proofline_records::significant(ours, 3),
            peers: vec![],
            extra: Default::default(),
            note: None,
            headline: None,
        };
        for r in [
            record(
                format!("PostgreSQL store, {} claimers", args.claimers),
                "claims",
                pg_claims,
            ),
            record("PostgreSQL store".into(), "submits", pg_submits),
            record("SQLite store, 1 claimer".into(), "claims", sqlite_claims),
            record("SQLite store".into(), "submits", sqlite_submits),
        ] {
            r.check().map_err(anyhow::Error::msg)?;
            proofline_records::append(path, &r)?;
        }
    }
    Ok(())
}
