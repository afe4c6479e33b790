//! `timeline-pw<N>.csv`: the ledger and the RSS over time, written and read back by header.

use std::fmt::Write as _;
use std::path::Path;

use prover_core::accounting::ledger::Stage;
use prover_core::files::InputKind;
use prover_core::runtime::sampler::Sample;

use crate::report::model::PointResult;

/// `timeline-pw<N>.csv`.
pub fn timeline_csv(samples: &[Sample]) -> String {
    let mut s = String::from("t_seconds,rss_bytes");
    for st in Stage::ALL {
        let _ = write!(s, ",{0}_count,{0}_bytes", st.name());
    }
    s.push('\n');
    for x in samples {
        let _ = write!(s, "{:.4},{}", x.t_seconds, x.rss_bytes);
        for (c, b) in x.stages {
            let _ = write!(s, ",{c},{b}");
        }
        s.push('\n');
    }
    s
}

/// Reads a timeline written by [`timeline_csv`], by header name: a stage whose columns are
/// missing (a timeline written before that stage existed) reads as zero.
pub fn parse_timeline_csv(text: &str) -> Result<Vec<Sample>, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or("timeline is empty")?
        .split(',')
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let need = |name: &str| col(name).ok_or(format!("timeline has no column {name}"));
    let (t, rss) = (need("t_seconds")?, need("rss_bytes")?);
    let stage_cols: Vec<(Option<usize>, Option<usize>)> = Stage::ALL
        .iter()
        .map(|s| {
            (
                col(&format!("{}_count", s.name())),
                col(&format!("{}_bytes", s.name())),
            )
        })
        .collect();
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            if f.len() != header.len() {
                return Err(format!(
                    "timeline row has {} fields, the header {}: {l}",
                    f.len(),
                    header.len()
                ));
            }
            let n = |i: Option<usize>| {
                i.map_or(Ok(0), |i| {
                    f[i].parse::<u64>().map_err(|e| format!("{l}: {e}"))
                })
            };
            let mut stages = [(0, 0); 6];
            for (slot, (c, b)) in stages.iter_mut().zip(&stage_cols) {
                *slot = (n(*c)?, n(*b)?);
            }
            Ok(Sample {
                t_seconds: f[t].parse().map_err(|e| format!("{l}: {e}"))?,
                rss_bytes: n(Some(rss))?,
                stages,
            })
        })
        .collect()
}

/// The timelines of the points that have one. A point without its file is left out (a point
/// that failed wrote none); a file that cannot be read or parsed (a FIFO, a device, a damaged
/// file) is left out with a warning on standard error that names it and says why.
pub fn read_timelines(out: &Path, points: &[PointResult]) -> Vec<(usize, Vec<Sample>)> {
    points
        .iter()
        .filter_map(|p| {
            let file = out.join(format!("timeline-pw{}.csv", p.pw));
            let read = prover_core::files::read_input_text(&file, InputKind::Document)
                .map_err(|e| match e {
                    prover_core::Error::Io { ref error, .. }
                        if error.kind() == std::io::ErrorKind::NotFound =>
                    {
                        None
                    }
                    e => Some(e.to_string()),
                })
                .and_then(|text| {
                    parse_timeline_csv(&text)
                        .map_err(|e| Some(format!("reading {}: {e}", file.display())))
                });
            match read {
                Ok(t) => Some((p.pw, t)),
                Err(None) => None,
                Err(Some(why)) => {
                    crate::tell!("warning: {why}; the report is drawn without this timeline");
                    None
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_csv_round_trips() {
        let s = vec![Sample {
            t_seconds: 0.5,
            rss_bytes: 1 << 20,
            stages: [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12)],
        }];
        let text = timeline_csv(&s);
        assert!(text.starts_with("t_seconds,rss_bytes,synthesizing_count,synthesizing_bytes,"));
        assert_eq!(parse_timeline_csv(&text).unwrap(), s);
        assert!(parse_timeline_csv("h\n1,2,3\n").is_err());
        // Read by header: columns in another order, and a timeline from before the fallback
        // stage existed (its columns read as zero).
        let old = "rss_bytes,t_seconds,synthesizing_count,synthesizing_bytes\n7,0.25,1,2\n";
        let got = parse_timeline_csv(old).unwrap();
        assert_eq!(got[0].rss_bytes, 7);
        assert_eq!(got[0].t_seconds, 0.25);
        assert_eq!(got[0].stages[0], (1, 2));
        assert_eq!(got[0].stages[3], (0, 0));
        // Twin: a row shorter than its header is an error.
        assert!(parse_timeline_csv("t_seconds,rss_bytes\n0.1\n").is_err());
    }
}
