//! Reads a parameter file the way the prover loads it (`Parameters::read_file`, points decoded
//! in parallel; `--checked` checks each point's subgroup too; `--native` maps the file's native
//! copy `FILE.native` and checks its checksums, writing the copy first when it has none) and
//! prints how long it took, so that loading can be timed beside reading the same bytes from the
//! page cache:
//!
//! ```sh
//! params-load FILE            # prints: points N bytes B seconds S GB/s R
//! params-load FILE --native   # the same, through the native copy
//! dd if=FILE of=/dev/null bs=1M
//! ```
//!
//! The result is checked before it is reported: the points read must account for the file's
//! bytes (each query's length prefix and its points), or the run fails.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use prover_core::groth16::native;
use prover_core::{Parameters, PointCheck};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, check, through_native) = match args.as_slice() {
        [file] => (PathBuf::from(file), PointCheck::Unchecked, false),
        [file, flag] if flag == "--checked" => (PathBuf::from(file), PointCheck::Checked, false),
        [file, flag] if flag == "--native" => (PathBuf::from(file), PointCheck::Unchecked, true),
        _ => {
            eprintln!("usage: params-load FILE [--checked | --native]");
            return ExitCode::from(2);
        }
    };
    let t = Instant::now();
    let loaded = if through_native {
        let copy = native::beside(&path);
        match native::open(&copy, &path, check) {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(why)) => {
                eprintln!("native copy not used ({why}): decoding the file and writing it");
                Parameters::read_file(&path, check).and_then(|p| {
                    native::write(&p, &path, check, &copy)?;
                    eprintln!(
                        "wrote {}: run again to time the mapped load",
                        copy.display()
                    );
                    Ok(p)
                })
            }
            Err(e) => Err(e),
        }
    } else {
        Parameters::read_file(&path, check)
    };
    let params = match loaded {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let seconds = t.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let g1 = params.h.len() + params.l.len() + params.a.len() + params.b_g1.len();
    let g2 = params.b_g2.len();
    // Five length prefixes of 4 bytes, the points, and the verifying key before them.
    let points_bytes = (g1 * 96 + g2 * 192 + 5 * 4) as u64;
    if points_bytes > bytes || bytes - points_bytes > 1 << 20 {
        eprintln!("error: {g1} G1 and {g2} G2 points do not account for the file's {bytes} bytes");
        return ExitCode::FAILURE;
    }
    println!(
        "points {} bytes {bytes} seconds {seconds:.3} GB/s {:.2}",
        g1 + g2,
        bytes as f64 / seconds / 1e9
    );
    ExitCode::SUCCESS
}
