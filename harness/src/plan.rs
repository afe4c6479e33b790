//! `proofline c2 --plan`: a C2's memory plan printed before anything is proven.

use anyhow::Context;
use proofline_filecoin::plan::porep_plan;
use proofline_filecoin::porep::SectorInfo;
use proofline_filecoin::variant::{SealSpec, SealVariant};
use prover_core::units::human_bytes;

use crate::commands::C2Args;
use crate::say;

/// This machine's RAM (`MemTotal` of /proc/meminfo).
fn machine_ram() -> anyhow::Result<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no MemTotal in /proc/meminfo: pass --ram")?;
    Ok(kib * 1024)
}

/// Prints the plan of the sector `args` names (its options, else `--c1`'s sector.json).
pub fn c2_plan(args: &C2Args) -> anyhow::Result<()> {
    let info = match &args.c1 {
        Some(c1) => SectorInfo::beside(c1)?,
        None => None,
    };
    let from_info = info.as_ref().map(SectorInfo::spec).transpose()?;
    let size = args
        .sector_size
        .or(from_info.as_ref().map(|s| s.sector_size))
        .context("--plan needs the sector: pass --sector-size (and --variant, --porep-id)")?;
    let variant = args
        .variant
        .or(from_info.as_ref().map(|s| s.variant))
        .unwrap_or(SealVariant::V1_1);
    let spec = SealSpec::new(size, variant, args.porep_id)?;
    let c1_bytes = match &args.c1 {
        Some(c1) => Some(
            std::fs::metadata(c1)
                .with_context(|| format!("reading the size of {}", c1.display()))?
                .len(),
        ),
        None => None,
    };
    let ram = match args.ram {
        Some(ram) => ram,
        None => machine_ram()?,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    say!("counting the circuit of one partition...");
    let plan = porep_plan(&spec, ram, cores, c1_bytes)?;
    say!(
        "C2 memory plan: {}, {} partition{} of {} constraints (domain 2^{}), {} aux variables, {} inputs",
        plan.proof,
        plan.partitions,
        if plan.partitions == 1 { "" } else { "s" },
        plan.size.constraints,
        plan.size.domain_size().trailing_zeros(),
        plan.size.aux,
        plan.size.inputs
    );
    say!("one partition's host buffers (the ledger's kinds):");
    for (kind, bytes) in plan.partition.kinds() {
        say!("  {:<8} {}", kind.name(), human_bytes(bytes));
    }
    say!("  {:<8} {}", "total", human_bytes(plan.partition.total()));
    match plan.params_file_bytes {
        Some(bytes) => say!(
            "parameters: {} ({}, held for the whole run)",
            plan.params_path.display(),
            human_bytes(bytes)
        ),
        None => say!(
            "parameters: {} is not in the cache; at most {} from the counts",
            plan.params_path.display(),
            human_bytes(plan.params_bound_bytes)
        ),
    }
    match plan.c1_bytes {
        Some(bytes) => say!(
            "C1 output: {} (held while it is parsed; its vanilla proofs until the partitions are synthesized)",
            human_bytes(bytes)
        ),
        None => say!("C1 output: not given (--c1 adds its size)"),
    }
    say!(
        "device memory: not planned (a CUDA or OpenCL backend sizes its buffers to the device it \
         opens; `c2 --backend cuda` prints the device ledger's peaks)"
    );
    if plan.pw == 0 {
        anyhow::bail!(
            "{} of RAM does not hold the parameters and one partition ({} + {})",
            human_bytes(ram),
            human_bytes(plan.params_bytes()),
            human_bytes(plan.partition.total())
        );
    }
    say!(
        "fits {} of RAM ({cores} cores): --pw {} --mem-budget {} (that many partitions' buffers beside the parameters{})",
        human_bytes(ram),
        plan.pw,
        human_bytes(plan.budget_bytes),
        if plan.c1_bytes.is_some() {
            " and the C1 output"
        } else {
            ""
        }
    );
    Ok(())
}
