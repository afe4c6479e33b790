//! ec-gpu-gen's generated fields and curves (Fr, Fp, Fp2, G1, G2), isolated one builder at a
//! time and joined in a fixed order (`Parts`), with the fields' comparison, equality,
//! addition, subtraction and doubling replaced by `field.cl`'s branch-free ones and their
//! product by [`mont`]'s.

use blstrs::{G1Affine, G2Affine, Scalar};
use ec_gpu::{GpuField, GpuName};
use ec_gpu_gen::SourceBuilder;

use crate::kernels::mont;

const FIELD: &str = include_str!("field.cl");

/// The limb width of the generated field arithmetic. The bytes of a field element are the same
/// either way (little-endian Montgomery limbs, as blstrs stores them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limbs {
    /// 32-bit limbs (ec-gpu-gen's choice for CUDA and NVIDIA's OpenCL).
    L32,
    /// 64-bit limbs.
    L64,
}

/// ec-gpu-gen's builder keeps its parts in hash sets, so the order of the fields and of the
/// curves in its output changes from process to process. A program binary cache needs the
/// same text every time: the parts are generated one builder at a time (whose output order is
/// fixed) and joined in a fixed order, in the builder's own layout
/// (`[common, fields, extension fields, ffts, multiexps, extra].join("\n\n")`).
pub(super) struct Parts {
    pub(super) common: String,
    pub(super) fr: String,
    pub(super) fp: String,
    pub(super) fp2: String,
    pub(super) g1: String,
    pub(super) g2: String,
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
pub(super) fn name_of<F: GpuName, C>(_coordinate: fn(&C) -> F) -> String {
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
    pub(super) fn new(limbs: Limbs) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::KernelSource;

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
}
