//! The one kernel source both APIs compile: ec-gpu-gen's field, curve and multiexp code for Fr,
//! Fp, Fp2, G1 and G2 (with 32-bit limbs, the fields' comparison, equality, addition,
//! subtraction and doubling replaced by `field.cl`'s branch-free ones), then proofline's own
//! kernels (`kernels.cl`, `ntt.cl`, and `msm.cl` once per curve), with ec-gpu-gen's type names
//! substituted.

use blstrs::{G1Affine, G2Affine, Scalar};
use ec_gpu::GpuName;
use sha2::{Digest, Sha256};

use crate::kernels::fields::{name_of, Limbs, Parts};
use crate::kernels::names::{KernelNames, NTT_MAX_G};

const KERNELS: &str = include_str!("kernels.cl");
const MSM: &str = include_str!("msm.cl");
const PIPPENGER: &str = include_str!("pippenger.cl");
const CLASSIFY: &str = include_str!("classify.cl");
const INVERSE: &str = include_str!("inverse.cl");
const FIXED_BASE: &str = include_str!("fixed_base.cl");
const NTT: &str = include_str!("ntt.cl");
const SYNTHETIC: &str = include_str!("synthetic.cl");

/// The line of `synthetic.cl` after which its text is per curve.
const PER_CURVE: &str = "// ---- per curve ----";
/// The line of `ntt.cl` after which its text is written once per elements a thread holds.
const PER_G: &str = "// ---- per G ----";

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

/// The last `max_chars` characters of a compiler log (build errors come at its end), for error
/// messages of either API.
pub fn log_tail(log: &str, max_chars: usize) -> &str {
    let skip = log.chars().count().saturating_sub(max_chars);
    log.char_indices().nth(skip).map_or("", |(i, _)| &log[i..])
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
        let names = KernelNames::new(&fr, &g1, &g2);
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
