//! One measurement, and the JSON Lines files that hold them.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One measurement of one case, with the peer's figures measured beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The day it was measured, `YYYY-MM-DD` (UTC).
    pub date: String,
    /// The commit of the measured code (short hash, or `unknown`).
    pub commit: String,
    /// The machine: processor or GPU, cores, memory.
    pub machine: String,
    /// The command that measured it, as a user of the repository runs it.
    pub command: String,
    /// The table of the docs this record belongs to; `None`: history only, rendered nowhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The row: what was measured (size, variant).
    pub case: String,
    /// What the figure is (`median of 10`, `mean of 3 runs`).
    pub metric: String,
    /// The figure's unit (`ms`, `s`, `MiB`, `proofs/min`, ...).
    pub unit: String,
    /// proofline's figure.
    pub ours: f64,
    /// The peers' figures, in the same unit, measured beside ours.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<Peer>,
    /// Further columns shown after the case (constraints, memory), as text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, String>,
    /// A short fact about the measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The figure's label among the README's headline figures (the latest record with a label
    /// is shown under it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
}

/// A peer's figure for the same case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// The peer (`blst`, `bellperson`, `sppark`, `filecoin-proofs`).
    pub name: String,
    /// Its figure, in the record's unit.
    pub value: f64,
}

/// Why records could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be read or written.
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A line is not a record.
    #[error("{path}:{line}: not a record: {error}")]
    Parse {
        path: PathBuf,
        line: usize,
        error: String,
    },
    /// A record breaks a rule the renderer relies on.
    #[error("{0}")]
    Invalid(String),
}

impl Record {
    /// Checks what serde cannot: a real date, finite positive figures, no empty names.
    pub fn check(&self) -> Result<(), String> {
        let d = self.date.as_bytes();
        let date_ok = d.len() == 10
            && d[4] == b'-'
            && d[7] == b'-'
            && d.iter()
                .enumerate()
                .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
        if !date_ok {
            return Err(format!("date `{}` is not YYYY-MM-DD", self.date));
        }
        for (what, v) in [
            ("commit", &self.commit),
            ("machine", &self.machine),
            ("command", &self.command),
            ("case", &self.case),
            ("metric", &self.metric),
            ("unit", &self.unit),
        ] {
            if v.trim().is_empty() {
                return Err(format!("{what} is empty"));
            }
        }
        if !(self.ours.is_finite() && self.ours >= 0.0) {
            return Err(format!("ours = {} is not a finite figure", self.ours));
        }
        for p in &self.peers {
            if p.name.trim().is_empty() || !(p.value.is_finite() && p.value > 0.0) {
                return Err(format!("peer `{}` = {} is not a figure", p.name, p.value));
            }
        }
        Ok(())
    }
}

/// `v` rounded to `digits` significant digits (figures are recorded as they are read).
pub fn significant(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// Appends `record` as one line to the JSON Lines file `path`, creating it (and its folder).
pub fn append(path: &Path, record: &Record) -> Result<(), RecordError> {
    record.check().map_err(RecordError::Invalid)?;
    let io = |error| RecordError::Io {
        path: path.to_path_buf(),
        error,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut line = serde_json::to_string(record).expect("a record serializes");
    line.push('\n');
    // One write of one line to a file opened for appending: concurrent writers do not
    // interleave within a line.
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    f.write_all(line.as_bytes()).map_err(io)
}

/// The records of one JSON Lines file, in file order (blank lines are skipped).
pub fn read_file(path: &Path) -> Result<Vec<Record>, RecordError> {
    let text = std::fs::read_to_string(path).map_err(|error| RecordError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parse = |error: String| RecordError::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            error,
        };
        let r: Record = serde_json::from_str(line).map_err(|e| parse(e.to_string()))?;
        r.check().map_err(parse)?;
        out.push(r);
    }
    Ok(out)
}

/// Every `*.jsonl` file of `dir`, sorted by name, with its records.
pub fn read_dir(dir: &Path) -> Result<Vec<(PathBuf, Vec<Record>)>, RecordError> {
    let io = |error| RecordError::Io {
        path: dir.to_path_buf(),
        error,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    files.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    files
        .into_iter()
        .map(|p| read_file(&p).map(|r| (p, r)))
        .collect()
}

#[cfg(test)]
pub(crate) fn sample(table: &str, case: &str, date: &str, ours: f64) -> Record {
    Record {
        date: date.into(),
        commit: "abc1234".into(),
        machine: "2 cores".into(),
        command: "cargo bench".into(),
        table: Some(table.into()),
        case: case.into(),
        metric: "median of 10".into(),
        unit: "ms".into(),
        ours,
        peers: vec![Peer {
            name: "blst".into(),
            value: 2.0 * ours,
        }],
        extra: BTreeMap::new(),
        note: None,
        headline: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "proofline-records-{}-{name}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn figures_keep_their_significant_digits() {
        assert_eq!(significant(0.179079215, 4), 0.1791);
        assert_eq!(significant(1428.7, 4), 1429.0);
        assert_eq!(significant(12.345, 4), 12.35);
        assert_eq!(significant(0.0, 4), 0.0);
    }

    #[test]
    fn appended_records_read_back_in_order() {
        let dir = scratch("append");
        let path = dir.join("sub/cpu.jsonl");
        let a = sample("t", "G1 2^14", "2026-12-01", 92.4);
        let mut b = sample("t", "G1 2^16", "2026-12-02", 282.6);
        b.extra.insert("constraints".into(), "65,536".into());
        append(&path, &a).unwrap();
        append(&path, &b).unwrap();
        assert_eq!(read_file(&path).unwrap(), vec![a, b]);
        let all = read_dir(&dir.join("sub")).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].1.len(), 2);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_bad_record_is_refused_with_its_line() {
        let dir = scratch("bad");
        let path = dir.join("x.jsonl");
        let mut r = sample("t", "c", "2026-12-01", 1.0);
        r.date = "2026-1-01".into();
        assert!(matches!(append(&path, &r), Err(RecordError::Invalid(_))));
        r.date = "2026-12-01".into();
        r.ours = f64::NAN;
        assert!(append(&path, &r).is_err());
        let good = serde_json::to_string(&sample("t", "c", "2026-12-01", 1.0)).unwrap();
        std::fs::write(&path, format!("{good}\n{{\"date\": 3}}\n")).unwrap();
        let err = read_file(&path).unwrap_err().to_string();
        assert!(err.contains("x.jsonl:2: not a record"), "{err}");
        std::fs::write(&path, format!("{}\n", good.replace("\"case\"", "\"kase\""))).unwrap();
        assert!(read_file(&path).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
