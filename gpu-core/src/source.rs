//! The one kernel source both APIs compile: ec-gpu-gen's field, curve and multiexp code for Fr,
//! Fp, Fp2, G1 and G2 (with 32-bit limbs, the fields' comparison, equality, addition,
//! subtraction and doubling replaced by `field.cl`'s branch-free ones), then proofline's own
//! kernels (`kernels.cl`, `ntt.cl`, and `msm.cl` once per curve), with ec-gpu-gen's type names
//! substituted.

use blstrs::{G1Affine, G2Affine, Scalar};
use ec_gpu::{GpuField, GpuName};
use ec_gpu_gen::SourceBuilder;
use sha2::{Digest, Sha256};

use crate::mont;

const KERNELS: &str = include_str!("kernels.cl");
const MSM: &str = include_str!("msm.cl");
const PIPPENGER: &str = include_str!("pippenger.cl");
const CLASSIFY: &str = include_str!("classify.cl");
const INVERSE: &str = include_str!("inverse.cl");
const FIXED_BASE: &str = include_str!("fixed_base.cl");
const NTT: &str = include_str!("ntt.cl");
const SYNTHETIC: &str = include_str!("synthetic.cl");
const FIELD: &str = include_str!("field.cl");

/// The line of `synthetic.cl` after which its text is per curve.
const PER_CURVE: &str = "// ---- per curve ----";
/// The line of `ntt.cl` after which its text is written once per elements a thread holds.
const PER_G: &str = "// ---- per G ----";
/// The NTT pass's kernels: 2^G elements a thread for G in `1..=NTT_MAX_G`.
pub const NTT_MAX_G: u32 = 3;

/// The limb width of the generated field arithmetic. The bytes of a field element are the same
/// either way (little-endian Montgomery limbs, as blstrs stores them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limbs {
    /// 32-bit limbs (ec-gpu-gen's choice for CUDA and NVIDIA's OpenCL).
    L32,
    /// 64-bit limbs.
    L64,
}

/// The generated source and its kernel names.
#[derive(Debug, Clone)]
pub struct KernelSource {
    /// The whole program text.
    pub text: String,
    /// Kernel names, by role.
    pub names: KernelNames,
}

/// One launched kernel's compile unit: the whole program, in which every other kernel is
/// declared a `static` device function instead (nothing calls it, so the compiler drops it).
///
/// NVRTC builds a whole program at once, every kernel in one thread of work: about 16 minutes
/// for this source on one core, most of it in the G2 kernels (and ec-gpu-gen's own multiexp
/// kernels, which proofline never launches: about 3 of the 16). Compiled as units, each kernel
/// is built alone, the units on all cores at once, and each cached under its own digest, so a
/// change to one kernel's text rebuilds that kernel only.
#[derive(Debug, Clone)]
pub struct Unit {
    /// The kernel this unit defines.
    pub kernel: String,
    /// The program text with that kernel alone left a kernel.
    pub text: String,
}

impl Unit {
    /// A hex digest of the unit's text (with whatever a backend prepends), for cache keys.
    pub fn digest(&self, prefix: &str) -> String {
        digest(prefix, &self.text)
    }
}

/// A kernel's declaration in the program text: the bytes from `KERNEL` to its name (the
/// qualifiers, with a register bound when it has one) and the name.
struct Declaration<'a> {
    qualifiers: std::ops::Range<usize>,
    name: &'a str,
}

/// Every `KERNEL void [PL_BOUNDS(..)] name(` that begins a line, in order.
fn declarations(text: &str) -> Vec<Declaration<'_>> {
    const HEAD: &str = "KERNEL void";
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find(HEAD) {
        let start = at + i;
        at = start + HEAD.len();
        if start > 0 && text.as_bytes()[start - 1] != b'\n' {
            continue;
        }
        let mut rest = text[at..].trim_start();
        if let Some(bounds) = rest.strip_prefix("PL_BOUNDS(") {
            let Some(close) = bounds.find(')') else {
                continue;
            };
            rest = bounds[close + 1..].trim_start();
        }
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if len == 0 || !rest[len..].starts_with('(') {
            continue;
        }
        let name_at = text.len() - rest.len();
        out.push(Declaration {
            qualifiers: start..name_at,
            name: &rest[..len],
        });
    }
    out
}

/// A hex SHA-256 of `prefix` then `text`.
fn digest(prefix: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(prefix.as_bytes());
    h.update(text.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The names of the kernels the host logic launches.
#[derive(Debug, Clone)]
pub struct KernelNames {
    /// One pass of proofline's NTT over Fr, 2^G elements a thread: entry G - 1.
    pub ntt_pass: [String; NTT_MAX_G as usize],
    /// A pass's single twiddle table from the two-level table of the root's powers.
    pub ntt_table: String,
    /// `x[start..n] = 0`.
    pub fill_zero: String,
    /// `x *= y`.
    pub mul_assign: String,
    /// `x = (x - y) * k`.
    pub sub_scaled: String,
    /// Montgomery to canonical.
    pub to_canonical: String,
    /// G1 sum of indexed bases.
    pub g1_sum_indexed: String,
    /// G1 bucket MSM.
    pub g1_msm: String,
    /// G2 sum of indexed bases.
    pub g2_sum_indexed: String,
    /// G2 bucket MSM.
    pub g2_msm: String,
    /// Sorted MSM: zero a count array.
    pub pl_zero: String,
    /// Sorted MSM: signed digits, bucket keys and counts.
    pub pl_digits: String,
    /// Sorted MSM: scan of count blocks.
    pub pl_scan_blocks: String,
    /// Sorted MSM: scan of the block totals.
    pub pl_scan_sums: String,
    /// Sorted MSM: block offsets added.
    pub pl_scan_add: String,
    /// Sorted MSM: the counting sort's scatter.
    pub pl_scatter: String,
    /// Sorted MSM, G1: runs of sorted entries added.
    pub g1_pl_runs: String,
    /// Sorted MSM, G1: the runs' heads and tails made jacobian.
    pub g1_pl_edges: String,
    /// Sorted MSM, G1: buckets crossing runs completed.
    pub g1_pl_fixup: String,
    /// Sorted MSM, G1: weighted bucket sums by segments.
    pub g1_pl_reduce: String,
    /// Sorted MSM, G1: groups of partial sums added.
    pub g1_pl_sum: String,
    /// Sorted MSM, G2: runs of sorted entries added.
    pub g2_pl_runs: String,
    /// Sorted MSM, G2: the runs' heads and tails made jacobian.
    pub g2_pl_edges: String,
    /// Sorted MSM, G2: buckets crossing runs completed.
    pub g2_pl_fixup: String,
    /// Sorted MSM, G2: weighted bucket sums by segments.
    pub g2_pl_reduce: String,
    /// Sorted MSM, G2: groups of partial sums added.
    pub g2_pl_sum: String,
    /// The 0/1 split: a term's scalars counted per block of 32 (used, ones, others).
    pub cls_count: String,
    /// The 0/1 split: the lists of ones and others written at the scanned offsets.
    pub cls_write: String,
    /// Parameter generation: G1 fixed-base products.
    pub g1_fixed_base: String,
    /// Parameter generation: G2 fixed-base products.
    pub g2_fixed_base: String,
    /// Parameter generation: G1 products made affine.
    pub g1_to_affine: String,
    /// Parameter generation: G2 products made affine.
    pub g2_to_affine: String,
    /// Timing workloads: G1 synthetic bases.
    pub g1_synthetic: String,
    /// Timing workloads: G2 synthetic bases.
    pub g2_synthetic: String,
}

/// ec-gpu-gen's builder keeps its parts in hash sets, so the order of the fields and of the
/// curves in its output changes from process to process. A program binary cache needs the
/// same text every time: the parts are generated one builder at a time (whose output order is
/// fixed) and joined in a fixed order, in the builder's own layout
/// (`[common, fields, extension fields, ffts, multiexps, extra].join("\n\n")`).
struct Parts {
    common: String,
    fr: String,
    fp: String,
    fp2: String,
    g1: String,
    g2: String,
}

fn strip<'a>(text: &'a str, prefixes: &[String], suffix: &str, what: &str) -> &'a str {
    prefixes
        .iter()
        .find_map(|p| text.strip_prefix(p.as_str()))
        .and_then(|rest| rest.strip_suffix(suffix))
        .unwrap_or_else(|| panic!("ec-gpu-gen's layout changed: cannot isolate {what}"))
}

/// The source of the field a coordinate accessor returns (blstrs does not export its base
/// fields, so they are named by inference).
fn field_of<F: GpuField + 'static, C>(_coordinate: fn(&C) -> F, limbs: Limbs) -> String {
    build(&SourceBuilder::new().add_field::<F>(), limbs)
}

/// The generated name of the field a coordinate accessor returns.
fn name_of<F: GpuName, C>(_coordinate: fn(&C) -> F) -> String {
    F::name()
}

/// The modulus (32-bit words) of the field a coordinate accessor returns (blstrs does not
/// export its base fields).
pub(crate) fn modulus_of<F: GpuField, C>(_coordinate: fn(&C) -> F) -> Vec<u32> {
    F::modulus()
}

fn multiexp<C, F>(_coordinate: fn(&C) -> F, limbs: Limbs) -> String
where
    C: group::prime::PrimeCurveAffine + GpuName,
    C::Scalar: GpuField,
    F: GpuField + 'static,
{
    build(&SourceBuilder::new().add_multiexp::<C, F>(), limbs)
}

fn build(builder: &SourceBuilder, limbs: Limbs) -> String {
    match limbs {
        Limbs::L32 => builder.build_32_bit_limbs(),
        Limbs::L64 => builder.build_64_bit_limbs(),
    }
}

/// The definitions `field.cl` replaces, as ec-gpu-gen's field text begins them (`{T}` the
/// field), in the text's order.
const REPLACED: [&str; 5] = [
    "DEVICE bool {T}_gte({T} a, {T} b) {",
    "DEVICE bool {T}_eq({T} a, {T} b) {",
    "DEVICE {T} {T}_sub({T} a, {T} b) {",
    "DEVICE {T} {T}_add({T} a, {T} b) {",
    "DEVICE {T} {T}_double({T} a) {",
];

/// Where the function whose definition starts at `start` ends (after its closing brace).
fn function_end(text: &str, start: usize) -> Option<usize> {
    let open = start + text[start..].find('{')?;
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// ec-gpu-gen's choice of product by API, which [`mont::mul_definition`]'s replaces (`{T}` the
/// field).
const MUL_CHOICE: &str = "#ifdef CUDA
DEVICE {T} {T}_mul({T} a, {T} b) {
  return {T}_mul_nvidia(a, b);
}
#else
DEVICE {T} {T}_mul({T} a, {T} b) {
  return {T}_mul_default(a, b);
}
#endif";

/// CUDA's `r = a - b` over `n` limbs in one carry chain, the borrow out into `m` as a mask
/// (`r` holds `a` before it).
fn sub_chain(n: usize) -> String {
    let mut asm = String::from("asm(\"sub.cc.u32 %0, %0, %");
    asm.push_str(&format!("{};\\n\\t\"\n", n + 1));
    for i in 1..n {
        asm.push_str(&format!(
            "      \"subc.cc.u32 %{i}, %{i}, %{};\\n\\t\"\n",
            n + 1 + i
        ));
    }
    asm.push_str(&format!("      \"subc.u32 %{n}, 0, 0;\"\n      : "));
    let outs: Vec<String> = (0..n).map(|i| format!("\"+r\"(r->val[{i}])")).collect();
    asm.push_str(&outs.join(", "));
    asm.push_str(", \"=r\"(m)\n      : ");
    let ins: Vec<String> = (0..n).map(|i| format!("\"r\"(b.val[{i}])")).collect();
    asm.push_str(&ins.join(", "));
    asm.push_str(");");
    asm
}

/// ec-gpu-gen's 32-bit-limb field text of `name` (modulus `p`) with the definitions in
/// [`REPLACED`] taken out (declared where the first was) and `field.cl`'s appended, and its
/// product replaced by [`mont::mul_definition`]'s.
fn branch_free(text: &str, name: &str, p: &[u32], inline: mont::Inline) -> String {
    let layout = |what: &str| -> ! { panic!("ec-gpu-gen's layout changed: {what} of {name}") };
    let limbs: usize = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("#define {name}_LIMBS ")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| layout("the limb count"));
    let mut out = text.to_string();
    let mut declarations = String::new();
    let mut first = None;
    for head in REPLACED {
        let head = head.replace("{T}", name);
        if out.matches(&head).count() != 1 {
            layout(&head);
        }
        let start = out.find(&head).unwrap_or_else(|| layout(&head));
        let end = function_end(&out, start).unwrap_or_else(|| layout(&head));
        declarations.push_str(&format!("{};\n", head.trim_end_matches(" {")));
        out.replace_range(start..end, "");
        first = Some(first.map_or(start, |f: usize| f.min(start)));
    }
    let first = first.unwrap_or_else(|| layout("the replaced definitions"));
    out.insert_str(first, &declarations);
    let choice = MUL_CHOICE.replace("{T}", name);
    if out.matches(&choice).count() != 1 {
        layout("the product's choice by API");
    }
    out = out.replace(
        &choice,
        &format!("DEVICE {name} {name}_mul({name} a, {name} b);"),
    );
    out.push_str("\n\n");
    out.push_str(
        &FIELD
            .replace("{SUB_CHAIN}", &sub_chain(limbs))
            .replace("{N}", &limbs.to_string())
            .replace("{T}", name),
    );
    out.push_str("\n\n");
    out.push_str(&mont::mul_definition(name, p, inline));
    out
}

impl Parts {
    fn new(limbs: Limbs) -> Self {
        let empty = build(&SourceBuilder::new(), limbs);
        let common = strip(
            &empty,
            &[String::new()],
            &"\n\n".repeat(5),
            "the common part",
        )
        .to_string();
        let c = |s: &str| format!("{common}\n\n{s}");
        let field = |text: &str, what| strip(text, &[c("")], &"\n\n".repeat(4), what).to_string();
        let fr = field(
            &build(&SourceBuilder::new().add_field::<Scalar>(), limbs),
            "Fr",
        );
        let fp = field(&field_of(G1Affine::x, limbs), "Fp");
        let fp2 = strip(
            &field_of(G2Affine::x, limbs),
            &[c(&format!("{fp}\n\n"))],
            &"\n\n".repeat(3),
            "Fp2",
        )
        .to_string();
        let either = |ext: &str| {
            [
                c(&format!("{fp}{fr}\n\n{ext}\n\n\n\n")),
                c(&format!("{fr}{fp}\n\n{ext}\n\n\n\n")),
            ]
        };
        let g1 = strip(&multiexp(G1Affine::x, limbs), &either(""), "\n\n", "G1").to_string();
        let g2 = strip(&multiexp(G2Affine::x, limbs), &either(&fp2), "\n\n", "G2").to_string();
        let (fr, fp) = match limbs {
            Limbs::L32 => (
                branch_free(
                    &fr,
                    &Scalar::name(),
                    &Scalar::modulus(),
                    mont::Inline::Always,
                ),
                branch_free(
                    &fp,
                    &name_of(G1Affine::x),
                    &modulus_of(G1Affine::x),
                    mont::Inline::Called,
                ),
            ),
            // `field.cl` is written for 32-bit limbs, which both backends use.
            Limbs::L64 => (fr, fp),
        };
        Parts {
            common,
            fr,
            fp,
            fp2,
            g1,
            g2,
        }
    }
}

/// The last `max_chars` characters of a compiler log (build errors come at its end), for error
/// messages of either API.
pub fn log_tail(log: &str, max_chars: usize) -> &str {
    let skip = log.chars().count().saturating_sub(max_chars);
    log.char_indices().nth(skip).map_or("", |(i, _)| &log[i..])
}

impl KernelNames {
    /// Every kernel the host logic launches.
    pub fn all(&self) -> [&str; 36] {
        [
            &self.ntt_pass[0],
            &self.ntt_pass[1],
            &self.ntt_pass[2],
            &self.ntt_table,
            &self.fill_zero,
            &self.mul_assign,
            &self.sub_scaled,
            &self.to_canonical,
            &self.g1_sum_indexed,
            &self.g1_msm,
            &self.g2_sum_indexed,
            &self.g2_msm,
            &self.pl_zero,
            &self.pl_digits,
            &self.pl_scan_blocks,
            &self.pl_scan_sums,
            &self.pl_scan_add,
            &self.pl_scatter,
            &self.g1_pl_runs,
            &self.g1_pl_edges,
            &self.g1_pl_fixup,
            &self.g1_pl_reduce,
            &self.g1_pl_sum,
            &self.g2_pl_runs,
            &self.g2_pl_edges,
            &self.g2_pl_fixup,
            &self.g2_pl_reduce,
            &self.g2_pl_sum,
            &self.cls_count,
            &self.cls_write,
            &self.g1_fixed_base,
            &self.g2_fixed_base,
            &self.g1_to_affine,
            &self.g2_to_affine,
            &self.g1_synthetic,
            &self.g2_synthetic,
        ]
    }
}

impl KernelSource {
    /// Generates the program (the same text in every process).
    pub fn new(limbs: Limbs) -> Self {
        let fr = Scalar::name();
        let g1 = G1Affine::name();
        let g2 = G2Affine::name();
        let (fp, fp2) = (name_of(G1Affine::x), name_of(G2Affine::x));
        let curve = |text: &str, p: &str, f: &str| {
            text.replace("{P}", p)
                .replace("{F}", f)
                .replace("{FR}", &fr)
        };
        let (synthetic_common, synthetic_curve) = SYNTHETIC
            .split_once(PER_CURVE)
            .expect("synthetic.cl has its per-curve marker");
        let (ntt_common, ntt_pass) = NTT.split_once(PER_G).expect("ntt.cl has its per-G marker");
        let ntt = (1..=NTT_MAX_G).fold(ntt_common.to_string(), |text, g| {
            text + &ntt_pass.replace("{G}", &g.to_string())
        });
        let ours = [
            KERNELS.replace("{FR}", &fr),
            ntt.replace("{FR}", &fr),
            curve(MSM, &g1, &fp),
            curve(MSM, &g2, &fp2),
            curve(PIPPENGER, &g1, &fp).replace("{BOUNDS}", "PL_BOUNDS(64, 8)"),
            curve(PIPPENGER, &g2, &fp2).replace("{BOUNDS}", ""),
            CLASSIFY.to_string(),
            INVERSE.replace("{FP2}", &fp2).replace("{FP}", &fp),
            curve(FIXED_BASE, &g1, &fp),
            curve(FIXED_BASE, &g2, &fp2),
            synthetic_common.replace("{FP2}", &fp2).replace("{FP}", &fp),
            curve(synthetic_curve, &g1, &fp),
            curve(synthetic_curve, &g2, &fp2),
        ]
        .join("\n");
        let p = Parts::new(limbs);
        let text = [
            p.common,
            format!("{}{}", p.fr, p.fp),
            p.fp2,
            format!("{}{}", p.g1, p.g2),
            ours,
        ]
        .join("\n\n");
        let names = KernelNames {
            ntt_pass: std::array::from_fn(|i| format!("{fr}_ntt_pass_g{}", i + 1)),
            ntt_table: format!("{fr}_ntt_table"),
            fill_zero: format!("{fr}_fill_zero"),
            mul_assign: format!("{fr}_mul_assign"),
            sub_scaled: format!("{fr}_sub_scaled"),
            to_canonical: format!("{fr}_to_canonical"),
            g1_sum_indexed: format!("{g1}_sum_indexed"),
            g1_msm: format!("{g1}_msm"),
            g2_sum_indexed: format!("{g2}_sum_indexed"),
            g2_msm: format!("{g2}_msm"),
            pl_zero: "pl_zero".into(),
            pl_digits: "pl_digits".into(),
            pl_scan_blocks: "pl_scan_blocks".into(),
            pl_scan_sums: "pl_scan_sums".into(),
            pl_scan_add: "pl_scan_add".into(),
            pl_scatter: "pl_scatter".into(),
            g1_pl_runs: format!("{g1}_pl_runs"),
            g1_pl_edges: format!("{g1}_pl_edges"),
            g1_pl_fixup: format!("{g1}_pl_fixup"),
            g1_pl_reduce: format!("{g1}_pl_reduce"),
            g1_pl_sum: format!("{g1}_pl_sum"),
            g2_pl_runs: format!("{g2}_pl_runs"),
            g2_pl_edges: format!("{g2}_pl_edges"),
            g2_pl_fixup: format!("{g2}_pl_fixup"),
            g2_pl_reduce: format!("{g2}_pl_reduce"),
            g2_pl_sum: format!("{g2}_pl_sum"),
            cls_count: "cls_count".into(),
            cls_write: "cls_write".into(),
            g1_fixed_base: format!("{g1}_fixed_base"),
            g2_fixed_base: format!("{g2}_fixed_base"),
            g1_to_affine: format!("{g1}_to_affine"),
            g2_to_affine: format!("{g2}_to_affine"),
            g1_synthetic: format!("{g1}_synthetic"),
            g2_synthetic: format!("{g2}_synthetic"),
        };
        KernelSource { text, names }
    }

    /// A hex digest of the text (with whatever a backend prepends), for binary cache keys.
    pub fn digest(&self, prefix: &str) -> String {
        digest(prefix, &self.text)
    }

    /// The program as one [`Unit`] per launched kernel (in [`KernelNames::all`]'s order); a
    /// kernel the host never launches (ec-gpu-gen's multiexp) is in none.
    pub fn units(&self) -> Vec<Unit> {
        let declared = declarations(&self.text);
        self.names
            .all()
            .iter()
            .map(|&kernel| {
                let mut text = String::with_capacity(self.text.len());
                let mut copied = 0;
                for d in declared.iter().filter(|d| d.name != kernel) {
                    text.push_str(&self.text[copied..d.qualifiers.start]);
                    text.push_str("static DEVICE void ");
                    copied = d.qualifiers.end;
                }
                text.push_str(&self.text[copied..]);
                Unit {
                    kernel: kernel.to_string(),
                    text,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_tail_keeps_the_end() {
        assert_eq!(log_tail("abcdef", 3), "def");
        assert_eq!(log_tail("ab", 3), "ab");
        assert_eq!(log_tail("", 3), "");
        assert_eq!(log_tail("xé€", 2), "é€", "character, not byte, boundaries");
    }

    #[test]
    fn index_macros_are_only_assigned_alone() {
        // ec-gpu-gen's CUDA index macros are not parenthesised (`blockIdx.x * blockDim.x +
        // threadIdx.x`): `GET_GLOBAL_ID() * chunk` multiplies only threadIdx.x. POCL cannot
        // see this (OpenCL's are function calls); this check can. Found on the H200 as a wrong
        // quotient from 2^13 on.
        for (name, text) in [
            ("kernels.cl", KERNELS),
            ("ntt.cl", NTT),
            ("msm.cl", MSM),
            ("pippenger.cl", PIPPENGER),
            ("classify.cl", CLASSIFY),
            ("fixed_base.cl", FIXED_BASE),
        ] {
            for (i, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for m in [
                    "GET_GLOBAL_ID()",
                    "GET_LOCAL_ID()",
                    "GET_GROUP_ID()",
                    "GET_LOCAL_SIZE()",
                ] {
                    if let Some(at) = line.find(m) {
                        let before = line[..at].trim_end();
                        let after = line[at + m.len()..].trim_start();
                        assert!(
                            before.ends_with('=') && after.starts_with(';'),
                            "{name}:{}: {m} inside an expression: {line}",
                            i + 1
                        );
                    }
                }
            }
        }
        // Negative twin: the line that was wrong is caught.
        let bad = "  const uint start = GET_GLOBAL_ID() * chunk;";
        let at = bad.find("GET_GLOBAL_ID()").unwrap();
        assert!(!bad[at + 15..].trim_start().starts_with(';'));
    }

    #[test]
    fn source_has_every_kernel_and_no_placeholder() {
        for limbs in [Limbs::L32, Limbs::L64] {
            let s = KernelSource::new(limbs);
            for k in s.names.all() {
                // A kernel is defined as `void name(`, or with its register bounds between.
                let defined = ["", " ", " PL_BOUNDS(64, 8)"]
                    .iter()
                    .any(|b| s.text.contains(&format!("void{b} {k}(")));
                assert!(defined, "{k} missing");
            }
            assert!(
                s.text
                    .contains(&format!("void PL_BOUNDS(64, 8) {}(", s.names.g1_pl_runs)),
                "G1's runs kernel has its bounds"
            );
            assert!(
                s.text.contains(&format!("void  {}(", s.names.g2_pl_runs)),
                "G2's runs kernel has none"
            );
            for placeholder in ["{FR}", "{P}", "{F}", "{BOUNDS}", "FIELD_", "POINT_"] {
                assert!(!s.text.contains(placeholder), "{placeholder} left");
            }
        }
        // The digest tells sources and prefixes apart.
        let a = KernelSource::new(Limbs::L32);
        let b = KernelSource::new(Limbs::L64);
        assert_ne!(a.digest(""), b.digest(""));
        assert_ne!(a.digest("x"), a.digest("y"));
        // The same text every time (ec-gpu-gen's builder alone orders its parts by hash).
        for _ in 0..4 {
            assert_eq!(a.text, KernelSource::new(Limbs::L32).text);
        }
    }

    #[test]
    fn the_fields_branch_free_functions_replace_ec_gpu_gen_s() {
        let s = KernelSource::new(Limbs::L32);
        for (name, limbs) in [(Scalar::name(), 8), (name_of(G1Affine::x), 12)] {
            for head in REPLACED {
                let head = head.replace("{T}", &name);
                // Defined once (field.cl's), declared once before it.
                assert_eq!(s.text.matches(&head).count(), 1, "{head}");
                let declared = format!("{};", head.trim_end_matches(" {"));
                let (d, h) = (s.text.find(&declared), s.text.find(&head));
                assert!(d.is_some_and(|d| d < h.unwrap()), "{declared}");
            }
            // ec-gpu-gen's bodies are gone: its limb-by-limb comparison loop, its branch.
            let scan = format!("for(char i = {name}_LIMBS - 1; i >= 0; i--)");
            assert!(!s.text.contains(&scan), "{scan}");
            let branch = format!("if(!{name}_gte(a, b)) res = {name}_add_(res, {name}_P);");
            assert!(!s.text.contains(&branch), "{branch}");
            // One chain of `limbs` subtractions for CUDA, the last borrow as the mask.
            let chain = format!("\"subc.cc.u32 %{0}, %{0}, %{1};", limbs - 1, 2 * limbs);
            assert!(s.text.contains(&chain), "{chain}");
            assert!(s.text.contains(&format!("\"subc.u32 %{limbs}, 0, 0;\"")));
        }
        // 64-bit limbs keep ec-gpu-gen's (field.cl is written for 32).
        let s = KernelSource::new(Limbs::L64);
        assert!(!s.text.contains("_pl_sub_mask"));
        let scan = format!("for(char i = {}_LIMBS - 1; i >= 0; i--)", Scalar::name());
        assert!(
            s.text.contains(&scan),
            "the twin: ec-gpu-gen's loop is there"
        );
    }

    #[test]
    #[should_panic(expected = "ec-gpu-gen's layout changed")]
    fn a_field_text_without_a_replaced_definition_is_refused() {
        branch_free(
            "#define F_LIMBS 12\nDEVICE bool F_gte(F a, F b) { return true; }",
            "F",
            &[1, 2],
            mont::Inline::Always,
        );
    }

    #[test]
    fn function_end_matches_braces() {
        let t = "DEVICE bool f(F a) { if (x) { y; } return z; }\nnext";
        assert_eq!(&t[function_end(t, 0).unwrap()..], "\nnext");
        assert_eq!(function_end("DEVICE bool f(F a) { {", 0), None);
    }

    #[test]
    fn each_unit_keeps_its_kernel_alone() {
        let s = KernelSource::new(Limbs::L32);
        let all = declarations(&s.text);
        let names = s.names.all();
        // Every launched kernel is declared (the sorted MSM's curve-free kernels twice: each
        // curve's text has them, inside a guard that keeps the second copy out), and besides
        // them only ec-gpu-gen's two multiexp kernels.
        let mut declared: Vec<&str> = all.iter().map(|d| d.name).collect();
        declared.sort_unstable();
        declared.dedup();
        let mut expected: Vec<&str> = names.to_vec();
        let multiexp: Vec<&str> = declared
            .iter()
            .copied()
            .filter(|n| n.ends_with("_multiexp"))
            .collect();
        assert_eq!(multiexp.len(), 2, "{multiexp:?}");
        expected.extend(multiexp);
        expected.sort_unstable();
        assert_eq!(declared, expected);
        let units = s.units();
        assert_eq!(units.len(), names.len());
        for (u, k) in units.iter().zip(names) {
            assert_eq!(u.kernel, k);
            let left: Vec<&str> = declarations(&u.text).iter().map(|d| d.name).collect();
            assert!(
                !left.is_empty() && left.iter().all(|&n| n == k),
                "the unit of {k}: {left:?}"
            );
            // Nothing else changed: each other kernel became a static device function.
            let demoted = format!("static DEVICE void {k}(");
            assert!(!u.text.contains(&demoted));
            for other in all.iter().filter(|d| d.name != k) {
                assert!(u
                    .text
                    .contains(&format!("\nstatic DEVICE void {}(", other.name)));
            }
        }
        // The bounds go with the declaration they qualify.
        let runs = &units[names.iter().position(|&k| k == s.names.g1_pl_runs).unwrap()];
        assert!(runs.text.contains(&format!(
            "KERNEL void PL_BOUNDS(64, 8) {}(",
            s.names.g1_pl_runs
        )));
        assert!(!units[0].text.contains("PL_BOUNDS(64, 8) "));
        // Units have their own digests, different from each other and from the whole.
        let mut keys: Vec<String> = units.iter().map(|u| u.digest("p")).collect();
        keys.push(s.digest("p"));
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), names.len() + 1);
        // Negative twins: a declaration inside a line, a `#define`, or without its name's
        // parenthesis is not one.
        let text =
            "#define KERNEL __kernel\n x KERNEL void f(\nKERNEL void g;\nKERNEL void  h(int)";
        let found: Vec<&str> = declarations(text).iter().map(|d| d.name).collect();
        assert_eq!(found, ["h"]);
    }
}
