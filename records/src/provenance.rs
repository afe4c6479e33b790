//! Where and when a measurement is taken: the date, the commit and the machine.

use std::process::Command;

/// The date, commit and machine a benchmark tool stamps on its records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
    /// `git rev-parse --short HEAD` of the working directory, `+changes` when tracked files
    /// differ from it; `unknown` outside a git checkout.
    pub commit: String,
    /// The processor, its cores and the memory (`AMD EPYC 9454, 2 cores, 23.4 GiB`).
    pub machine: String,
}

impl Provenance {
    /// This machine, now, in the current directory's checkout.
    pub fn here() -> Provenance {
        Provenance {
            date: today(),
            commit: commit(),
            machine: machine(),
        }
    }

    /// The same provenance with a device named in front of the host (`NVIDIA H200; ...`).
    pub fn with_device(mut self, device: &str) -> Provenance {
        if !device.is_empty() {
            self.machine = format!("{device}; {}", self.machine);
        }
        self
    }
}

/// Today's date, `YYYY-MM-DD` (UTC).
pub fn today() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_date(seconds)
}

/// `YYYY-MM-DD` of a Unix time (UTC).
pub fn utc_date(unix_seconds: u64) -> String {
    let (year, month, day) = civil_date(unix_seconds);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The year, month and day of a Unix time (the proleptic Gregorian calendar, UTC).
pub fn civil_date(unix_seconds: u64) -> (i64, u32, u32) {
    // Days since 1970-01-01 to a civil date (Howard Hinnant's `civil_from_days`).
    let z = (unix_seconds / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

fn git(args: &[&str]) -> Option<std::process::Output> {
    Command::new("git").args(args).output().ok()
}

fn commit() -> String {
    let Some(out) = git(&["rev-parse", "--short=7", "HEAD"]).filter(|o| o.status.success()) else {
        return "unknown".into();
    };
    let hash = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let changed =
        git(&["diff", "--quiet", "HEAD", "--"]).is_some_and(|o| o.status.code() == Some(1));
    if changed {
        format!("{hash}+changes")
    } else {
        hash
    }
}

/// The processor's model name (`/proc/cpuinfo`), or the architecture where it is not given.
pub fn cpu_model() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The machine's memory in bytes (`MemTotal` of `/proc/meminfo`).
pub fn memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// The processor, its logical CPUs and the memory, in words.
pub fn describe_machine(cpus: usize, memory: Option<u64>) -> String {
    let model = cpu_model();
    match memory {
        Some(b) => format!(
            "{model}, {cpus} cores, {:.1} GiB",
            b as f64 / (1024.0 * 1024.0 * 1024.0)
        ),
        None => format!("{model}, {cpus} cores"),
    }
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    describe_machine(cpus, memory_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_of_known_instants() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_796_515_199), "2026-12-05");
        assert_eq!(utc_date(1_796_515_200), "2026-12-06");
    }

    #[test]
    fn this_machine_is_described() {
        let p = Provenance::here().with_device("GPU X");
        assert!(p.machine.starts_with("GPU X; "), "{}", p.machine);
        assert!(p.machine.contains("cores"), "{}", p.machine);
        assert_eq!(p.date.len(), 10);
        assert!(!p.commit.is_empty());
    }
}
