//! `record-criterion`: criterion's latest estimates appended as measurement records.
//!
//! Criterion keeps each benchmark's latest run under
//! `target/criterion/<group>/<function>[/<parameter>]/new/` (`benchmark.json` names it,
//! `estimates.json` holds the median in nanoseconds). One record per benchmark whose id
//! contains the filter; the command recorded is the `cargo bench` run the caller names. A peer's
//! figure measured beside it is given per benchmark: `--peer sppark:ID=154.1ms`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use proofline_records::{append, Peer, Provenance, Record};

/// A peer's figure for one benchmark, in nanoseconds.
#[derive(Debug, PartialEq)]
struct PeerFigure {
    name: String,
    id: String,
    ns: f64,
}

/// `NAME:ID=VALUE` with the value's unit (`154.1ms`).
fn parse_peer(s: &str) -> Result<PeerFigure, String> {
    let bad = || format!("--peer {s}: expected NAME:BENCHMARK_ID=VALUE with ns, us, ms or s");
    let (name, rest) = s.split_once(':').ok_or_else(bad)?;
    let (id, value) = rest.rsplit_once('=').ok_or_else(bad)?;
    let split = value
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(bad)?;
    let (number, unit) = value.split_at(split);
    let v: f64 = number.parse().map_err(|_| bad())?;
    if name.is_empty() || id.is_empty() || !(v.is_finite() && v > 0.0) {
        return Err(bad());
    }
    let scale = unit_ns(unit).ok_or_else(bad)?;
    Ok(PeerFigure {
        name: name.into(),
        id: id.into(),
        ns: v * scale,
    })
}

/// The units figures are recorded in, largest first, with their nanoseconds.
const UNITS: [(&str, f64); 4] = [("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0)];

/// Nanoseconds in one `unit`, or `None` for a unit not in [`UNITS`].
fn unit_ns(unit: &str) -> Option<f64> {
    UNITS.iter().find(|(u, _)| *u == unit).map(|&(_, ns)| ns)
}

const USAGE: &str = "usage: cargo xtask record-criterion --table ID --out FILE [--filter TEXT] [--bench NAME] [--device NAME] [--machine TEXT] [--commit HASH] [--criterion DIR] [--peer NAME:ID=VALUE(ns|us|ms|s)]...";

pub fn record(root: &Path, args: &[String]) -> ExitCode {
    match run(root, args) {
        Ok(n) => {
            println!("{n} record(s) appended");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            ExitCode::FAILURE
        }
    }
}

fn run(root: &Path, args: &[String]) -> Result<usize, String> {
    let (mut table, mut out, mut filter, mut bench, mut device) =
        (None, None, String::new(), "gpu".to_string(), String::new());
    // Where the benchmarks ran, when not here: the records of a run on another machine
    // (its criterion folder copied back) name that machine and the commit it was built from.
    let (mut machine, mut commit, mut folder): (Option<String>, Option<String>, Option<PathBuf>) =
        (None, None, None);
    let mut peers: Vec<PeerFigure> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--table" => table = Some(value()?),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--filter" => filter = value()?,
            "--bench" => bench = value()?,
            "--device" => device = value()?,
            "--machine" => machine = Some(value()?),
            "--commit" => commit = Some(value()?),
            "--criterion" => folder = Some(PathBuf::from(value()?)),
            "--peer" => peers.push(parse_peer(&value()?)?),
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    let table = table.ok_or("--table is required")?;
    let out = out.ok_or("--out is required")?;
    let dir = folder.unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"))
            .join("criterion")
    });
    let mut found = Vec::new();
    collect(&dir, &mut found).map_err(|e| format!("{}: {e}", dir.display()))?;
    found.sort();
    let mut here = Provenance::here();
    if let Some(m) = machine {
        here.machine = m;
    }
    if let Some(c) = commit {
        here.commit = c;
    }
    let here = here.with_device(&device);
    let mut n = 0;
    for new in found {
        let (id, median_ns, samples) = estimate(&new)?;
        if !id.contains(&filter) {
            continue;
        }
        let (value, (unit, scale)) = scaled(median_ns);
        let record = Record {
            date: here.date.clone(),
            commit: here.commit.clone(),
            machine: here.machine.clone(),
            command: format!("cargo bench -p proofline-benches --bench {bench} -- '{id}'"),
            table: Some(table.clone()),
            case: id.clone(),
            metric: format!("criterion's median of {samples} samples"),
            unit: unit.into(),
            ours: value,
            peers: peers
                .iter()
                .filter(|p| p.id == id)
                .map(|p| Peer {
                    name: p.name.clone(),
                    value: proofline_records::significant(p.ns / scale, 4),
                })
                .collect(),
            extra: Default::default(),
            note: None,
            headline: None,
        };
        append(&root.join(&out), &record).map_err(|e| e.to_string())?;
        n += 1;
    }
    if n == 0 {
        return Err(format!(
            "no benchmark under {} matches `{filter}`",
            dir.display()
        ));
    }
    Ok(n)
}

/// Every `.../new` folder holding an `estimates.json` under `dir`.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == "new") && path.join("estimates.json").is_file() {
            out.push(path);
        } else {
            collect(&path, out)?;
        }
    }
    Ok(())
}

/// The benchmark's full id, its median in nanoseconds and its sample count.
fn estimate(new: &Path) -> Result<(String, f64, usize), String> {
    let read = |name: &str| -> Result<serde_json::Value, String> {
        let p = new.join(name);
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
    };
    let bench = read("benchmark.json")?;
    let id = bench["full_id"]
        .as_str()
        .ok_or_else(|| format!("{}: no full_id", new.display()))?
        .to_string();
    let est = read("estimates.json")?;
    let median = est["median"]["point_estimate"]
        .as_f64()
        .ok_or_else(|| format!("{}: no median", new.display()))?;
    let samples = read("sample.json")
        .ok()
        .and_then(|s| s["iters"].as_array().map(Vec::len))
        .unwrap_or(0);
    Ok((id, median, samples))
}

/// Nanoseconds as a figure with four significant digits, and its unit with the unit's
/// nanoseconds (the largest of [`UNITS`] the figure reaches).
fn scaled(ns: f64) -> (f64, (&'static str, f64)) {
    let &(unit, scale) = UNITS
        .iter()
        .find(|(_, scale)| ns >= *scale)
        .unwrap_or(&UNITS[UNITS.len() - 1]);
    (proofline_records::significant(ns / scale, 4), (unit, scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_keep_four_digits_in_a_readable_unit() {
        assert_eq!(scaled(149_012_345.0), (149.0, ("ms", 1e6)));
        assert_eq!(scaled(1_428_700_000.0), (1.429, ("s", 1e9)));
        assert_eq!(scaled(950.0), (950.0, ("ns", 1.0)));
        assert_eq!(scaled(12_345.0), (12.35, ("us", 1e3)));
    }

    #[test]
    fn peer_figures_are_parsed_with_their_units() {
        assert_eq!(
            parse_peer("sppark:cuda_msm_g1/sorted/24=154.1ms"),
            Ok(PeerFigure {
                name: "sppark".into(),
                id: "cuda_msm_g1/sorted/24".into(),
                ns: 154.1e6
            })
        );
        for bad in [
            "sppark=1ms",
            "sppark:x=1",
            "sppark:x=ms",
            "sppark:x=-1ms",
            ":x=1ms",
            "s:x=1h",
        ] {
            assert!(parse_peer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn criterion_folders_become_records() {
        let root = std::env::temp_dir().join(format!("xtask-crit-{}", std::process::id()));
        let new = root.join("target/criterion/cuda_msm_g1/sorted/24/new");
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(
            new.join("benchmark.json"),
            r#"{"full_id":"cuda_msm_g1/sorted/24"}"#,
        )
        .unwrap();
        std::fs::write(
            new.join("estimates.json"),
            r#"{"median":{"point_estimate":149012345.0}}"#,
        )
        .unwrap();
        std::fs::write(new.join("sample.json"), r#"{"iters":[1,1,1]}"#).unwrap();
        std::env::remove_var("CARGO_TARGET_DIR");
        let args: Vec<String> = [
            "--table",
            "gpu-kernels",
            "--out",
            "r/gpu.jsonl",
            "--filter",
            "msm",
            "--peer",
            "sppark:cuda_msm_g1/sorted/24=154.116ms",
            "--peer",
            "sppark:cuda_msm_g1/sorted/22=40ms",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(run(&root, &args), Ok(1));
        let recs = proofline_records::read_file(&root.join("r/gpu.jsonl")).unwrap();
        assert_eq!(recs[0].case, "cuda_msm_g1/sorted/24");
        assert_eq!((recs[0].ours, recs[0].unit.as_str()), (149.0, "ms"));
        assert_eq!(recs[0].metric, "criterion's median of 3 samples");
        assert_eq!(
            recs[0].peers,
            vec![Peer {
                name: "sppark".into(),
                value: 154.1
            }]
        );
        let nothing: Vec<String> = ["--table", "t", "--out", "r/x.jsonl", "--filter", "ntt"]
            .map(String::from)
            .to_vec();
        assert!(run(&root, &nothing).unwrap_err().contains("no benchmark"));
        // A run elsewhere: its folder, machine and commit named.
        let elsewhere: Vec<String> = [
            "--table",
            "gpu-kernels",
            "--out",
            "r/gpu.jsonl",
            "--criterion",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([root.join("target/criterion").display().to_string()])
        .chain(
            [
                "--machine",
                "16 cores",
                "--commit",
                "abc1234",
                "--device",
                "H200",
            ]
            .map(String::from),
        )
        .collect();
        let far = root.join("far");
        let mut with_out = elsewhere.clone();
        with_out[3] = far.join("gpu.jsonl").display().to_string();
        assert_eq!(run(&root, &with_out), Ok(1));
        let recs = proofline_records::read_file(&far.join("gpu.jsonl")).unwrap();
        assert_eq!(
            (recs[0].machine.as_str(), recs[0].commit.as_str()),
            ("H200; 16 cores", "abc1234")
        );
        std::fs::remove_dir_all(root).unwrap();
    }
}
