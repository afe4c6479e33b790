//! Records to Markdown tables, and the tables filled into documents between markers.
//!
//! A document marks each table it shows with a pair of lines,
//!
//! ```text
//! <!-- table: cpu-msm -->
//! <!-- end table -->
//! ```
//!
//! and [`fill_document`] replaces what lies between them with the table rendered from the
//! records whose `table` is that id: one row per case and machine, from its latest record (by
//! date; on the same date, the later one in file order). The id `headlines` is the table of
//! headline figures: one row per `headline` label, from its latest record, with the peer, the
//! machine and a link to the record's file.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Component, Path, PathBuf};

use crate::record::Record;

const BEGIN: &str = "<!-- table: ";
const END: &str = "<!-- end table -->";
/// The id of the headline figures' table.
pub const HEADLINES: &str = "headlines";

/// Records with the file each came from, in the order they were read.
pub type Sourced<'a> = [(&'a Path, &'a Record)];

/// Why a document could not be filled.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("line {line}: `{BEGIN}{id} -->` has no `{END}` after it")]
    Unclosed { line: usize, id: String },
    #[error("line {line}: `{END}` without a table marker before it")]
    Unopened { line: usize },
    #[error("line {line}: no record belongs to table `{id}`")]
    Unknown { line: usize, id: String },
}

/// `text` with every marked table rendered afresh from `records`; `doc_dir` is the folder of the
/// document, for the links to the record files (paths relative to one root).
pub fn fill_document(text: &str, records: &Sourced, doc_dir: &Path) -> Result<String, RenderError> {
    let mut out = String::with_capacity(text.len());
    let mut open: Option<(usize, String)> = None;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim();
        if let Some(id) = bare
            .strip_prefix(BEGIN)
            .and_then(|r| r.strip_suffix("-->"))
            .map(|id| id.trim().to_string())
        {
            if let Some((line, id)) = open {
                return Err(RenderError::Unclosed { line, id });
            }
            out.push_str(line);
            let rendered = if id == HEADLINES {
                render_headlines(records, doc_dir)
            } else {
                render_table(&id, records, doc_dir)
            };
            let rendered = rendered.ok_or(RenderError::Unknown {
                line: i + 1,
                id: id.clone(),
            })?;
            out.push_str(&rendered);
            open = Some((i + 1, id));
        } else if bare == END {
            if open.take().is_none() {
                return Err(RenderError::Unopened { line: i + 1 });
            }
            out.push_str(line);
        } else if open.is_none() {
            out.push_str(line);
        }
    }
    match open {
        Some((line, id)) => Err(RenderError::Unclosed { line, id }),
        None => Ok(out),
    }
}

/// The table `id` as Markdown (with the machine, the commands and the record files below it),
/// or `None` when no record belongs to it.
pub fn render_table(id: &str, records: &Sourced, doc_dir: &Path) -> Option<String> {
    // The latest record of each (case, machine), rows in the order the pairs first appear.
    let rows = latest(
        records,
        |r| r.table.as_deref() == Some(id),
        |a, b| a.case == b.case && a.machine == b.machine,
    )?;
    let extras: Vec<&String> = unique(rows.iter().flat_map(|(_, r)| r.extra.keys()));
    let peers: Vec<&String> = unique(
        rows.iter()
            .flat_map(|(_, r)| r.peers.iter().map(|p| &p.name)),
    );
    let machines: Vec<&String> = unique(rows.iter().map(|(_, r)| &r.machine));
    let one_machine = machines.len() == 1;

    let mut head = vec!["case".to_string()];
    head.extend(extras.iter().map(|e| e.to_string()));
    if !one_machine {
        head.push("machine".into());
    }
    head.push("proofline".into());
    for p in &peers {
        head.push(p.to_string());
        head.push(format!("proofline / {p}"));
    }
    head.push("measured".into());

    let mut t = String::new();
    line(&mut t, &head);
    line(&mut t, &vec!["---".to_string(); head.len()]);
    for (_, r) in &rows {
        let mut cells = vec![escape(&r.case)];
        cells.extend(
            extras
                .iter()
                .map(|e| escape(r.extra.get(*e).map_or("", |s| s))),
        );
        if !one_machine {
            cells.push(escape(&r.machine));
        }
        cells.push(figure(r.ours, &r.unit));
        for p in &peers {
            match r.peers.iter().find(|q| &&q.name == p) {
                Some(q) => {
                    cells.push(figure(q.value, &r.unit));
                    cells.push(format!("{:.2}", r.ours / q.value));
                }
                None => cells.extend(["n/a".to_string(), "n/a".to_string()]),
            }
        }
        cells.push(format!("{}, `{}`", r.date, r.commit));
        line(&mut t, &cells);
    }
    t.push('\n');
    if one_machine {
        let _ = writeln!(t, "Machine: {}.", machines[0]);
    }
    let metrics: Vec<&String> = unique(rows.iter().map(|(_, r)| &r.metric));
    let _ = writeln!(
        t,
        "Figures: {}.",
        metrics
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    );
    for c in unique(rows.iter().map(|(_, r)| &r.command)) {
        let _ = writeln!(t, "Command: `{c}`.");
    }
    let files: Vec<&Path> = unique(rows.iter().map(|(p, _)| *p));
    let links: Vec<String> = files
        .iter()
        .map(|p| {
            let rel = relative(doc_dir, p);
            let name = p
                .file_name()
                .map_or(rel.clone(), |n| n.to_string_lossy().into_owned());
            format!("[{name}]({rel})")
        })
        .collect();
    let _ = writeln!(t, "Records: {}.", links.join(", "));
    Some(t)
}

/// The headline figures: one row per label, from its latest record.
pub fn render_headlines(records: &Sourced, doc_dir: &Path) -> Option<String> {
    let rows = latest(
        records,
        |r| r.headline.is_some(),
        |a, b| a.headline == b.headline,
    )?;
    let mut t = String::from(
        "| headline | proofline | peer | machine | measured |\n| --- | --- | --- | --- | --- |\n",
    );
    for (path, r) in &rows {
        let peer = r.peers.first().map_or(String::new(), |p| {
            format!("{} {}", p.name, figure(p.value, &r.unit))
        });
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {}, [record]({}) |",
            escape(r.headline.as_deref().unwrap_or_default()),
            figure(r.ours, &r.unit),
            escape(&peer),
            escape(&r.machine),
            r.date,
            relative(doc_dir, path)
        );
    }
    Some(t)
}

/// The records `keep` selects, the latest of each group of `same` ones (by date; on one date,
/// the later in file order), in the order the groups first appear; `None` when none is kept.
fn latest<'a>(
    records: &Sourced<'a>,
    keep: impl Fn(&Record) -> bool,
    same: impl Fn(&Record, &Record) -> bool,
) -> Option<Vec<(&'a Path, &'a Record)>> {
    let mut rows: Vec<(&Path, &Record)> = Vec::new();
    for &(path, r) in records.iter().filter(|(_, r)| keep(r)) {
        match rows.iter_mut().find(|(_, old)| same(old, r)) {
            Some(slot) if r.date >= slot.1.date => *slot = (path, r),
            Some(_) => {}
            None => rows.push((path, r)),
        }
    }
    (!rows.is_empty()).then_some(rows)
}

fn unique<'a, T: PartialEq + ?Sized + 'a>(items: impl Iterator<Item = &'a T>) -> Vec<&'a T> {
    let mut out: Vec<&T> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

fn line(t: &mut String, cells: &[String]) {
    let _ = writeln!(t, "| {} |", cells.join(" | "));
}

fn escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The figure as recorded (Rust's shortest round-trip form) and its unit.
fn figure(v: f64, unit: &str) -> String {
    match unit {
        "%" => format!("{v}%"),
        _ => format!("{v} {unit}"),
    }
}

/// `to` relative to the folder `from` (both relative to the same root, or both absolute).
fn relative(from: &Path, to: &Path) -> String {
    let norm = |p: &Path| -> Vec<PathBuf> {
        p.components()
            .filter(|c| !matches!(c, Component::CurDir))
            .map(|c| PathBuf::from(c.as_os_str()))
            .collect()
    };
    let (f, t) = (norm(from), norm(to));
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); f.len() - common];
    parts.extend(t[common..].iter().map(|c| c.to_string_lossy().into_owned()));
    parts.join("/")
}

/// Records grouped by table id (history-only records left out), for reports of unused tables.
pub fn tables<'a>(records: &Sourced<'a>) -> BTreeMap<&'a str, usize> {
    let mut out = BTreeMap::new();
    for (_, r) in records {
        if let Some(t) = r.table.as_deref() {
            *out.entry(t).or_insert(0) += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{sample, Peer};

    fn sourced(rs: &[Record]) -> Vec<(&Path, &Record)> {
        rs.iter()
            .map(|r| (Path::new("docs/records/cpu.jsonl"), r))
            .collect()
    }

    #[test]
    fn the_latest_record_of_each_case_is_shown_with_its_ratio() {
        let mut older = sample("cpu-msm", "G1 2^14", "2026-11-30", 120.0);
        older.commit = "old0000".into();
        let newer = sample("cpu-msm", "G1 2^14", "2026-12-01", 92.4);
        let other = sample("cpu-msm", "G1 2^16", "2026-12-01", 282.6);
        let unrelated = sample("gpu", "G1 2^24", "2026-12-09", 1.0);
        let rs = [older, other, newer, unrelated];
        let t = render_table("cpu-msm", &sourced(&rs), Path::new("docs")).unwrap();
        let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("| G1")).collect();
        assert_eq!(
            rows,
            [
                "| G1 2^14 | 92.4 ms | 184.8 ms | 0.50 | 2026-12-01, `abc1234` |",
                "| G1 2^16 | 282.6 ms | 565.2 ms | 0.50 | 2026-12-01, `abc1234` |",
            ]
        );
        assert!(t.starts_with("| case | proofline | blst | proofline / blst | measured |\n"));
        assert!(
            t.contains("Records: [cpu.jsonl](records/cpu.jsonl)."),
            "{t}"
        );
        assert!(!t.contains("old0000"));
        assert!(render_table("none", &sourced(&rs), Path::new("docs")).is_none());
    }

    #[test]
    fn machines_extras_and_missing_peers_get_columns() {
        let mut a = sample("t", "x", "2026-12-01", 1.5);
        a.extra.insert("constraints".into(), "65,536".into());
        let mut b = sample("t", "x", "2026-12-01", 3.0);
        b.machine = "H200".into();
        b.peers = vec![Peer {
            name: "sppark".into(),
            value: 2.0,
        }];
        let rs = [a, b];
        let t = render_table("t", &sourced(&rs), Path::new("")).unwrap();
        assert!(t.starts_with(
            "| case | constraints | machine | proofline | blst | proofline / blst | sppark | proofline / sppark | measured |"
        ), "{t}");
        assert!(
            t.contains("| x | 65,536 | 2 cores | 1.5 ms | 3 ms | 0.50 | n/a | n/a |"),
            "{t}"
        );
        assert!(
            t.contains("| x |  | H200 | 3 ms | n/a | n/a | 2 ms | 1.50 |"),
            "{t}"
        );
        assert!(t.contains("[cpu.jsonl](docs/records/cpu.jsonl)"), "{t}");
    }

    #[test]
    fn documents_are_filled_between_markers_and_bad_markers_are_named() {
        let rs = [sample("cpu-msm", "G1 2^14", "2026-12-01", 92.4)];
        let src = sourced(&rs);
        let doc = "# P\n\ntext\n<!-- table: cpu-msm -->\nstale row\n<!-- end table -->\nafter\n";
        let filled = fill_document(doc, &src, Path::new("docs")).unwrap();
        assert!(filled.starts_with("# P\n\ntext\n<!-- table: cpu-msm -->\n| case |"));
        assert!(filled.ends_with("<!-- end table -->\nafter\n"));
        assert!(!filled.contains("stale row"));
        // Filling is idempotent.
        assert_eq!(
            fill_document(&filled, &src, Path::new("docs")).unwrap(),
            filled
        );
        assert_eq!(
            fill_document("<!-- table: cpu-msm -->\n", &src, Path::new("docs")),
            Err(RenderError::Unclosed {
                line: 1,
                id: "cpu-msm".into()
            })
        );
        assert_eq!(
            fill_document("a\n<!-- end table -->\n", &src, Path::new("docs")),
            Err(RenderError::Unopened { line: 2 })
        );
        assert_eq!(
            fill_document(
                "<!-- table: gone -->\n<!-- end table -->\n",
                &src,
                Path::new("")
            ),
            Err(RenderError::Unknown {
                line: 1,
                id: "gone".into()
            })
        );
    }

    #[test]
    fn headlines_show_the_latest_record_of_each_label() {
        let mut old = sample("gpu", "G1 2^24", "2026-12-01", 160.0);
        old.headline = Some("G1 MSM 2^24".into());
        let mut new = sample("gpu", "G1 2^24", "2026-12-05", 149.0);
        new.headline = old.headline.clone();
        let plain = sample("gpu", "G1 2^22", "2026-12-09", 40.0);
        let rs = [old, new, plain];
        let t = render_headlines(&sourced(&rs), Path::new("")).unwrap();
        assert_eq!(
            t.lines().nth(2),
            Some("| G1 MSM 2^24 | 149 ms | blst 298 ms | 2 cores | 2026-12-05, [record](docs/records/cpu.jsonl) |")
        );
        assert_eq!(t.lines().count(), 3);
        let doc = "<!-- table: headlines -->\n<!-- end table -->\n";
        assert!(fill_document(doc, &sourced(&rs), Path::new(""))
            .unwrap()
            .contains("149 ms"));
        assert!(render_headlines(&sourced(&rs[2..]), Path::new("")).is_none());
    }

    #[test]
    fn relative_links() {
        assert_eq!(
            relative(Path::new("docs"), Path::new("docs/records/a.jsonl")),
            "records/a.jsonl"
        );
        assert_eq!(
            relative(Path::new(""), Path::new("docs/records/a.jsonl")),
            "docs/records/a.jsonl"
        );
        assert_eq!(
            relative(Path::new("docs/x"), Path::new("docs/records/a.jsonl")),
            "../records/a.jsonl"
        );
    }
}
