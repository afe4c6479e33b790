//! Where the time of a PoRep partition goes on the CPU backend, kernel by kernel, and what its
//! witness looks like (how many scalars are 0, 1, small or full size):
//!
//! ```sh
//! porep_bench seal DIR && FIL_PROOFS_PARAMETER_CACHE=... porep_profile DIR
//! ```

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use backend_cpu::msm::{msm, msm_terms};
use backend_cpu::ntt::{quotient, Domain};
use proofline_filecoin::c1::{read_c1, AnyC1, C1File};
use proofline_filecoin::porep;
use proofline_filecoin::{cached_parameters, Tree2KiB};
use prover_core::stages::density::{into_canonical, ScalarBytes};
use prover_core::{CpuSynthesizer, PointCheck, QueryPlan, SynthesizedPartition, Synthesizer};

fn bits(s: &ScalarBytes) -> u32 {
    let b = &s.0;
    (0..32)
        .rev()
        .find(|&i| b[i] != 0)
        .map_or(0, |i| 8 * i as u32 + (8 - b[i].leading_zeros()))
}

fn main() -> Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .context("usage: porep_profile DIR")?,
    );
    let info: porep::SectorInfo = serde_json::from_slice(&std::fs::read(dir.join("sector.json"))?)?;
    let spec = info.spec()?;
    let config = spec.config()?;
    let c1 = match read_c1(&dir.join("c1-raw.json"), Some(spec.sector_size))? {
        C1File::Wrapped(w) => AnyC1::from_wrapped(*w)?,
        C1File::Raw(r) => r,
    };
    // A 2 KiB sector's (the 8-0-0 shape).
    let c1 = c1.into_tree::<Tree2KiB>()?;
    let cached = cached_parameters(
        &porep::cache_id::<Tree2KiB>(&config)?,
        || -> Result<porep::PorepCircuit<Tree2KiB>> { anyhow::bail!("no parameters") },
        PointCheck::Unchecked,
        &(),
    )?;
    let params = cached.params;
    let (circuit, _) = porep::porep_circuits::<Tree2KiB>(&config, &c1)?
        .into_iter()
        .next()
        .context("a partition")?;
    let time = |what: &str, t: Instant| println!("{what:<12} {:>8.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let partition = CpuSynthesizer.synthesize(circuit)?;
    time("synthesis", t);
    let plan = QueryPlan::new(&partition, &params)?;
    let SynthesizedPartition {
        evaluations,
        witness,
    } = partition;

    let mut hist = [0usize; 6];
    for s in &witness.aux {
        let k = match bits(s) {
            0 => 0,
            1 => 1,
            2..=32 => 2,
            33..=64 => 3,
            65..=128 => 4,
            _ => 5,
        };
        hist[k] += 1;
    }
    println!(
        "aux {}: zero {}, one {}, <=32 bits {}, <=64 bits {}, <=128 bits {}, larger {}; A density {}, B density {}",
        witness.aux.len(),
        hist[0],
        hist[1],
        hist[2],
        hist[3],
        hist[4],
        hist[5],
        witness.a_aux_density.count_ones(),
        witness.b_aux_density.count_ones()
    );

    let domain = Domain::new(params.domain_size().trailing_zeros())?;
    let t = Instant::now();
    let h = into_canonical(quotient(
        evaluations.a,
        evaluations.b,
        evaluations.c,
        &domain,
    ));
    time("ntt+quotient", t);
    if std::env::var_os("PROFILE_NTT_ONLY").is_some() {
        return Ok(());
    }
    let t = Instant::now();
    let _ = msm(&params.h, &h, None);
    time("msm h", t);
    if std::env::var_os("PROFILE_BLST_MULTIPOINT").is_some() {
        use blst::MultiPoint;
        let t = Instant::now();
        // SAFETY: G1Affine is repr(transparent) over blst_p1_affine; ScalarBytes is 32 bytes.
        let pts: &[blst::blst_p1_affine] =
            unsafe { std::slice::from_raw_parts(params.h.as_ptr().cast(), params.h.len()) };
        let sc: &[u8] = unsafe { std::slice::from_raw_parts(h.as_ptr().cast(), h.len() * 32) };
        let _ = pts.mult(sc, 255);
        time("blst mult h", t);
    }
    // The query MSMs as the CPU backend runs them: prover-core's query plan, term by term.
    let t = Instant::now();
    let _ = msm_terms(&params.l, [&plan.l], &witness);
    time("msm l", t);
    let t = Instant::now();
    let _ = msm_terms(&params.a, &plan.a, &witness);
    time("msm a", t);
    let t = Instant::now();
    let _ = msm_terms(&params.b_g1, &plan.b, &witness);
    time("msm b_g1", t);
    let t = Instant::now();
    let _ = msm_terms(&params.b_g2, &plan.b, &witness);
    time("msm b_g2", t);
    Ok(())
}
