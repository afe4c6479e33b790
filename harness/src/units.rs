//! Parsing of sizes (`512MiB`, `20GiB`) and worker-count lists (`10..15`, `10..=15`, `10,12,15`).

/// Parses a byte size: a number with an optional unit (`B`, `K`/`KB`/`KiB`, `M`/`MB`/`MiB`,
/// `G`/`GB`/`GiB`, `T`/`TB`/`TiB`; all binary multiples), case-insensitive; fractions allowed
/// (`1.5GiB`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (expected e.g. 512MiB, 20GiB, 1073741824)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => return Err(format!("`{s}`: unknown size unit `{other}`")),
    };
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(bytes.round() as u64)
}

/// Checks a synthesis worker count (`--pw`): between 1 and the engine's slot limit.
fn validate_pw(pw: usize) -> Result<(), String> {
    let max = prover_core::runtime::engine::MAX_SLOTS;
    if pw == 0 || pw > max {
        return Err(format!("--pw {pw}: it must be between 1 and {max}"));
    }
    Ok(())
}

/// Parses one worker count (`--pw` of `prove`, `c2`), bounded like a list's.
pub fn parse_pw(s: &str) -> Result<usize, String> {
    let v: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a worker count"))?;
    validate_pw(v)?;
    Ok(v)
}

/// Parses worker counts: `A..B` and `A..=B` (both inclusive: 10..15 is 10 through 15), a comma
/// list `A,B,C`, or one number. Counts are between 1 and 65,536; the result is sorted, without
/// duplicates.
pub fn parse_pw_list(s: &str) -> Result<Vec<usize>, String> {
    let num = |x: &str| -> Result<usize, String> {
        let v: usize = x
            .trim()
            .parse()
            .map_err(|_| format!("`{x}` is not a worker count"))?;
        validate_pw(v)?;
        Ok(v)
    };
    let mut out = if let Some((a, b)) = s.split_once("..") {
        let b = b.strip_prefix('=').unwrap_or(b);
        let (a, b) = (num(a)?, num(b)?);
        if a > b {
            return Err(format!("`{s}`: empty range ({a} > {b})"));
        }
        if b - a > 1000 {
            return Err(format!("`{s}`: more than 1000 points"));
        }
        (a..=b).collect::<Vec<_>>()
    } else {
        s.split(',').map(num).collect::<Result<Vec<_>, _>>()?
    };
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_counts_are_bounded() {
        assert!(parse_pw_list("0").is_err());
        assert!(parse_pw_list("18446744073709551615").is_err());
        assert!(parse_pw_list("70000").is_err());
        // Twin: the largest accepted count.
        assert_eq!(parse_pw_list("65536"), Ok(vec![65536]));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("20GiB"), Ok(20 << 30));
        assert_eq!(parse_size("1.5gb"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("-1GiB").is_err());
    }

    #[test]
    fn pw_lists() {
        assert_eq!(parse_pw_list("10..15"), Ok((10..=15).collect()));
        assert_eq!(parse_pw_list("10..=15"), Ok((10..=15).collect()));
        assert_eq!(parse_pw_list("15,10,12,12"), Ok(vec![10, 12, 15]));
        assert_eq!(parse_pw_list("3"), Ok(vec![3]));
        assert!(parse_pw_list("5..2").is_err());
        assert!(parse_pw_list("0..2").is_err());
        assert!(parse_pw_list("a,b").is_err());
    }
}
