//! The sweep's outputs: `results.json`, `results.csv` and the summary table ([`results`]),
//! `timeline-pw<N>.csv` ([`timeline`]), `report.svg` ([`draw`]); `prove --device-trace`'s
//! files ([`device_trace`]); what bounds the recommended point ([`bottleneck`]).

pub mod bottleneck;
pub mod device_trace;
pub mod draw;
pub mod model;
pub mod results;
pub mod timeline;

pub use draw::{redraw, write_svg};
pub use results::{
    points_csv, recommend, report_title, synthesis_note, table, Host, Recommendation, SweepConfig,
    SweepResults, REPLAY_NOTE, SCHEMA, THROUGHPUT_TIE,
};
pub use timeline::{parse_timeline_csv, read_timelines, timeline_csv};

/// UTC time as RFC 3339 (`2026-11-30T06:12:59Z`), and a folder-friendly stamp
/// (`20261130-061259`).
pub fn utc_now() -> (String, String) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, mo, d) = proofline_records::provenance::civil_date(secs);
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    (
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z"),
        format!("{y:04}{mo:02}{d:02}-{h:02}{m:02}{s:02}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamp_has_the_right_shape() {
        let (rfc, stamp) = utc_now();
        assert_eq!(rfc.len(), 20);
        assert!(rfc.ends_with('Z') && rfc.as_bytes()[10] == b'T');
        assert_eq!(stamp.len(), 15);
        assert!(rfc.starts_with("20"));
    }
}
