//! The sweep's outputs: `results.json`, `results.csv` and the summary table ([`results`]),
//! `timeline-pw<N>.csv` ([`timeline`]), `report.svg` ([`draw`]); `prove --device-trace`'s
//! files ([`device_trace`]); what bounds the recommended point ([`bottleneck`]).

pub mod bottleneck;
pub mod device_trace;
pub mod draw;
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
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
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
