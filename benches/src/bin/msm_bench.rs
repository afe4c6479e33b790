//! `msm-bench`: the device MSMs at the sizes a GPU machine can hold, every result checked.
//!
//! G1 and G2 MSMs over distinct bases with known logarithms (so each result is compared with the
//! exact answer, warm-up calls included), bases and exponents resident on the device (what the
//! H MSM runs), or PoRep-like scalars (51% zero, 47% one, 2% dense) through the query path (the
//! 0/1 split, the batch addition of the ones and the MSM of the rest, as the l, a and b_g1
//! queries run): split by the host scan (its lists uploaded), or by the device (the witness
//! uploaded and classified there; `--scan`). One line per measurement:
//!
//! `msm <curve> <mix> <kernel> c=<window> run=<run> [scan=<where>] 2^<k> <median ms> <min ms>
//! <runs>`
//!
//! then `check ok` or the failure. A wrong result is an error (exit status 1) after the rest
//! has run. Sorted-kernel windows and run lengths can be swept (`--window 16,18,20 --run
//! 32,64`); `auto` is the choice the prover makes.

use std::time::Instant;

use blstrs::{G1Affine, G2Affine};
use clap::Parser;
use gpu_core::device::Device;
use gpu_core::msm::pippenger::{self, Plan};
use gpu_core::msm::{
    dense_msm, query_msm, scanned_msm, Bases, DeviceCurve, DeviceScan, DeviceWitness, MsmKernel,
    Scan, ScanMode,
};
use gpu_core::{GpuDevice, GpuOptions, Queue};
use group::{Curve, Group};
use proofline_benches::{porep_like_witness, random_scalars, KnownBases};
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::stages::plan::{Filter, MsmTerm, ScalarSource};

#[derive(Parser, Debug, Clone)]
#[command(name = "msm-bench", about = "Device MSMs, every result checked")]
struct Args {
    /// `cuda` or `opencl` (the first device).
    #[arg(long, default_value = "cuda")]
    api: String,
    /// G1 sizes as log2, comma-separated (`none`: none).
    #[arg(long, default_value = "16,18,20", value_parser = sizes)]
    g1: Sizes,
    /// G2 sizes as log2 (`none`: none).
    #[arg(long, default_value = "16", value_parser = sizes)]
    g2: Sizes,
    /// Scalar mixes: `dense` and `porep` (each for the G1 and G2 sizes).
    #[arg(long, value_delimiter = ',', default_value = "dense,porep")]
    mix: Vec<String>,
    /// Where PoRep-like scalars are split into zeros, ones and the rest: `host`, `device`.
    #[arg(long, value_delimiter = ',', default_value = "host,device")]
    scan: Vec<String>,
    /// MSM kernels: `stock`, `sorted`.
    #[arg(long, value_delimiter = ',', default_value = "sorted")]
    kernel: Vec<String>,
    /// Sorted-kernel windows (bits) for dense MSMs: `auto` or numbers.
    #[arg(long, value_delimiter = ',', default_value = "auto")]
    window: Vec<String>,
    /// Sorted-kernel run lengths for dense MSMs (with a numeric window).
    #[arg(long, value_delimiter = ',', default_value = "64")]
    run: Vec<u32>,
    /// Timed calls per measurement (the median and minimum are printed).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Untimed (but checked) calls first.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Append a measurement record per checked measurement (its median, with the date, commit,
    /// machine and command) to this JSON Lines file, e.g. docs/records/gpu.jsonl.
    #[arg(long)]
    record: Option<std::path::PathBuf>,
    /// The docs table the records belong to (`cargo xtask bench-tables`).
    #[arg(
        long = "record-table",
        default_value = "msm-bench",
        requires = "record"
    )]
    record_table: String,
    /// Where the records are measured: the date, commit, and the device with its host (taken
    /// once, when the device is opened).
    #[arg(skip)]
    provenance: Option<proofline_records::Provenance>,
}

/// The largest size taken (2^28 G1 bases are 25.8 GB on the host and on the device).
const MAX_LOG2: u32 = 28;

/// Sizes as log2.
#[derive(Clone, Debug)]
struct Sizes(Vec<u32>);

fn sizes(s: &str) -> Result<Sizes, String> {
    if s.is_empty() || s == "none" {
        return Ok(Sizes(Vec::new()));
    }
    s.split(',')
        .map(|x| match x.trim().parse::<u32>() {
            Ok(k) if (1..=MAX_LOG2).contains(&k) => Ok(k),
            _ => Err(format!("{x}: a log2 size from 1 to {MAX_LOG2}")),
        })
        .collect::<Result<_, _>>()
        .map(Sizes)
}

/// One configuration of a measurement.
#[derive(Clone, Copy)]
struct Config {
    kernel: MsmKernel,
    /// A window and run length for the sorted kernel (`None`: the prover's choice).
    shape: Option<(u32, u32)>,
}

impl Config {
    fn label(&self) -> String {
        let kernel = match self.kernel {
            MsmKernel::Stock => "stock",
            MsmKernel::Sorted => "sorted",
        };
        match self.shape {
            Some((c, run)) => format!("{kernel} c={c} run={run}"),
            None => format!("{kernel} c=auto run=auto"),
        }
    }
}

fn configs(args: &Args, porep: bool) -> Result<Vec<Config>, String> {
    let mut out = Vec::new();
    for k in &args.kernel {
        let kernel = MsmKernel::parse(k)?;
        if kernel == MsmKernel::Stock || porep {
            out.push(Config {
                kernel,
                shape: None,
            });
            continue;
        }
        for w in &args.window {
            if w == "auto" {
                out.push(Config {
                    kernel,
                    shape: None,
                });
                continue;
            }
            let c: u32 = w
                .parse()
                .map_err(|_| format!("--window {w}: a number or auto"))?;
            for &run in &args.run {
                out.push(Config {
                    kernel,
                    shape: Some((c, run)),
                });
            }
        }
    }
    Ok(out)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `call` (`warmup` + `reps` calls, each checked against `want`) and prints the line.
fn measure<P: PartialEq>(
    line: &str,
    args: &Args,
    want: &P,
    mut call: impl FnMut() -> Result<P, String>,
) -> bool {
    let mut times = Vec::new();
    let mut ok = true;
    for i in 0..args.warmup + args.reps {
        let t = Instant::now();
        match call() {
            Ok(got) => {
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if got != *want {
                    ok = false;
                }
                if i >= args.warmup {
                    times.push(ms);
                }
            }
            Err(e) => {
                println!("{line} error: {e}");
                return false;
            }
        }
    }
    let min = times.iter().copied().fold(f64::INFINITY, f64::min);
    let med = median(&mut times);
    let check = if ok { "check ok" } else { "check FAILED" };
    println!("{line} {med:.3} {min:.3} {} {check}", args.reps);
    if let (true, Some(path)) = (ok, &args.record) {
        if let Err(e) = record(path, args, line, med) {
            println!("{line} error: {e}");
            return false;
        }
    }
    ok
}

/// Appends a checked measurement's record (see `--record`).
fn record(path: &std::path::Path, args: &Args, line: &str, median_ms: f64) -> Result<(), String> {
    let at = args
        .provenance
        .as_ref()
        .ok_or("the device was not described")?;
    let command: Vec<String> = std::env::args().collect();
    let r = proofline_records::Record {
        date: at.date.clone(),
        commit: at.commit.clone(),
        machine: at.machine.clone(),
        command: command.join(" "),
        table: Some(args.record_table.clone()),
        case: line.to_string(),
        metric: format!("median of {} runs, every result checked", args.reps),
        unit: "ms".into(),
        ours: proofline_records::significant(median_ms, 4),
        peers: Vec::new(),
        extra: Default::default(),
        note: None,
        headline: None,
    };
    proofline_records::append(path, &r).map_err(|e| e.to_string())
}

/// Every dense measurement of one curve; false if any result was wrong.
fn dense<D: Device, G>(gpu: &GpuDevice<D>, args: &Args, curve: &str, sizes: &[u32]) -> bool
where
    G: DeviceCurve,
    G::Projective: Curve<AffineRepr = G> + Group<Scalar = blstrs::Scalar> + Send + Sync,
    G: Default + Clone + Send + Sync,
{
    let Some(&max) = sizes.iter().max() else {
        return true;
    };
    let configs = match configs(args, false) {
        Ok(c) => c,
        Err(e) => {
            println!("{e}");
            return false;
        }
    };
    let t = Instant::now();
    let bases = KnownBases::<G::Projective>::new(1 << max);
    let exps = random_scalars(1 << max);
    eprintln!(
        "{curve}: 2^{max} bases and exponents made in {:.1?}",
        t.elapsed()
    );
    let mut q = gpu.device.queue().expect("a queue");
    let bases_buf = gpu
        .upload(&mut q, &bases.points, "bases")
        .expect("bases fit");
    let exps_buf = gpu
        .upload(&mut q, &exps, "exponents")
        .expect("exponents fit");
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let mut all_ok = true;
    for &k in sizes {
        let n = 1usize << k;
        let want = bases.msm(&exps[..n]);
        for cfg in &configs {
            let line = format!("msm {curve} dense {} 2^{k}", cfg.label());
            let ok = measure(&line, args, &want, || {
                let mut buffers = token.backend_buffers();
                match cfg.shape {
                    None => dense_msm::<D, G>(
                        gpu,
                        &mut q,
                        Bases::Resident(&bases_buf),
                        &exps_buf,
                        n,
                        cfg.kernel,
                        &mut buffers,
                    )
                    .map_err(|e| e.to_string()),
                    Some((c, run)) => {
                        let budget = gpu.gauge.available().min(gpu.device.info().max_alloc_bytes);
                        let plan = Plan::with_window(n, c, run, G::JACOBIAN_BYTES, budget)
                            .ok_or_else(|| format!("no room for a window of {c} bits"))?;
                        pippenger::msm::<D, G>(
                            gpu,
                            &mut q,
                            &plan,
                            &bases_buf,
                            None,
                            &exps_buf,
                            0,
                            n,
                            &mut buffers,
                        )
                        .map_err(|e| e.to_string())
                    }
                }
            });
            all_ok &= ok;
        }
    }
    all_ok
}

/// Every PoRep-like measurement of one curve; false if any result was wrong.
fn porep<D: Device, G>(gpu: &GpuDevice<D>, args: &Args, curve: &str, sizes: &[u32]) -> bool
where
    G: DeviceCurve,
    G::Projective: Curve<AffineRepr = G> + Group<Scalar = blstrs::Scalar> + Send + Sync,
    G: Default + Clone + Send + Sync,
{
    let Some(&max) = sizes.iter().max() else {
        return true;
    };
    let configs = match configs(args, true) {
        Ok(c) => c,
        Err(e) => {
            println!("{e}");
            return false;
        }
    };
    let scans = match args
        .scan
        .iter()
        .map(|s| ScanMode::parse(s))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(s) => s,
        Err(e) => {
            println!("{e}");
            return false;
        }
    };
    let bases = KnownBases::<G::Projective>::new(1 << max);
    let mut q = gpu.device.queue().expect("a queue");
    let bases_buf = gpu
        .upload(&mut q, &bases.points, "bases")
        .expect("bases fit");
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let mut all_ok = true;
    for &k in sizes {
        let n = 1usize << k;
        let w = porep_like_witness(n);
        let want = bases.msm(&w.aux);
        let term = MsmTerm {
            bases: 0..n,
            source: ScalarSource::Aux,
            filter: Filter::All,
        };
        // The 0/1 split alone (the part of each call below that is not the MSMs): the host
        // scan, or the witness's upload and its classification on the device.
        for &scan in &scans {
            let mut ms: Vec<f64> = (0..args.reps)
                .map(|_| {
                    let t = Instant::now();
                    let mut buffers = token.backend_buffers();
                    match scan {
                        ScanMode::Host => {
                            std::hint::black_box(Scan::new([&term], &w).expect("a valid term"));
                        }
                        ScanMode::Device => {
                            let dw = DeviceWitness::upload(gpu, &mut q, &w, &mut buffers)
                                .expect("the witness fits");
                            let ds = DeviceScan::new(gpu, &mut q, [&term], &w, &dw, &mut buffers)
                                .expect("a valid term");
                            q.synchronize().expect("the device");
                            ds.release(&mut buffers);
                            dw.release(&mut buffers);
                        }
                    }
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            println!(
                "scan {curve} porep {} 2^{k} {:.3} ms (median)",
                scan_label(scan),
                median(&mut ms)
            );
        }
        for cfg in &configs {
            for &scan in &scans {
                let line = format!(
                    "msm {curve} porep {} scan={} 2^{k}",
                    cfg.label(),
                    scan_label(scan)
                );
                all_ok &= measure(&line, args, &want, || {
                    let mut buffers = token.backend_buffers();
                    let err = |e: gpu_core::DeviceError| e.to_string();
                    match scan {
                        ScanMode::Host => {
                            let scan = Scan::new([&term], &w).map_err(err)?;
                            query_msm::<D, G>(
                                gpu,
                                &mut q,
                                Bases::Resident(&bases_buf),
                                &scan,
                                cfg.kernel,
                                &mut buffers,
                            )
                            .map_err(err)
                        }
                        ScanMode::Device => {
                            let dw = DeviceWitness::upload(gpu, &mut q, &w, &mut buffers)
                                .map_err(err)?;
                            let ds = DeviceScan::new(gpu, &mut q, [&term], &w, &dw, &mut buffers)
                                .map_err(err)?;
                            let sum = scanned_msm::<D, G>(
                                gpu,
                                &mut q,
                                &bases_buf,
                                &ds,
                                cfg.kernel,
                                &mut buffers,
                            )
                            .map_err(err)?;
                            ds.release(&mut buffers);
                            dw.release(&mut buffers);
                            Ok(sum)
                        }
                    }
                });
            }
        }
    }
    all_ok
}

fn scan_label(scan: ScanMode) -> &'static str {
    match scan {
        ScanMode::Host => "host",
        ScanMode::Device => "device",
    }
}

fn run<D: Device>(gpu: &GpuDevice<D>, args: &Args) -> bool {
    let mixes: Vec<&str> = args.mix.iter().map(String::as_str).collect();
    let mut ok = true;
    if mixes.contains(&"dense") {
        ok &= dense::<D, G1Affine>(gpu, args, "g1", &args.g1.0);
        ok &= dense::<D, G2Affine>(gpu, args, "g2", &args.g2.0);
    }
    if mixes.contains(&"porep") {
        ok &= porep::<D, G1Affine>(gpu, args, "g1", &args.g1.0);
        ok &= porep::<D, G2Affine>(gpu, args, "g2", &args.g2.0);
    }
    ok
}

/// The arguments with where the records are measured (the first device and its host), when
/// records are asked for.
fn described(args: &Args, devices: &[String]) -> Args {
    let provenance = args.record.as_ref().map(|_| {
        proofline_records::Provenance::here()
            .with_device(devices.first().map_or("", String::as_str))
    });
    Args {
        provenance,
        ..args.clone()
    }
}

fn main() {
    let args = Args::parse();
    if let Some(m) = args
        .mix
        .iter()
        .find(|m| !["dense", "porep"].contains(&m.as_str()))
    {
        eprintln!("msm-bench: --mix {m}: expected dense or porep");
        std::process::exit(2);
    }
    if let Some(e) = args.scan.iter().find_map(|s| ScanMode::parse(s).err()) {
        eprintln!("msm-bench: --scan: {e}");
        std::process::exit(2);
    }
    if args.reps == 0 {
        eprintln!("msm-bench: --reps 0: at least one timed run is needed for a median");
        std::process::exit(2);
    }
    println!("# msm <curve> <mix> <kernel> c=<window> run=<run> 2^<k> <median ms> <min ms> <runs>");
    // The device layer's settings (`PROOFLINE_GPU_*`, the kernel cache) from the environment.
    let gpu = || GpuOptions::from_lookup(None, |name| std::env::var(name).ok());
    let ok = match args.api.as_str() {
        "cuda" => match gpu().and_then(|gpu| backend_cuda::open(backend_cuda::CudaOptions { gpu }))
        {
            Ok(b) => run(
                b.device(0).expect("a device"),
                &described(&args, &b.describe()),
            ),
            Err(e) => {
                eprintln!("msm-bench: CUDA: {e}");
                std::process::exit(2);
            }
        },
        "opencl" => match gpu().and_then(|gpu| {
            backend_opencl::open(backend_opencl::OpenClOptions {
                gpu,
                ..Default::default()
            })
        }) {
            Ok(b) => run(
                b.device(0).expect("a device"),
                &described(&args, &b.describe()),
            ),
            Err(e) => {
                eprintln!("msm-bench: OpenCL: {e}");
                std::process::exit(2);
            }
        },
        other => {
            eprintln!("msm-bench: --api {other}: expected cuda or opencl");
            std::process::exit(2);
        }
    };
    if !ok {
        eprintln!("msm-bench: a result was wrong or a call failed");
        std::process::exit(1);
    }
}
