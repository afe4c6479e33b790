//! The Montgomery product of a prime field with 32-bit limbs, generated as straight-line text
//! for its modulus, in place of ec-gpu-gen's `{T}_mul`.
//!
//! ec-gpu-gen's CUDA product forms the full 2N-word product, then reduces it. This one
//! interleaves the two (coarsely integrated operand scanning): for each word `b_i` it adds
//! `a b_i` into an accumulator of N + 1 words, then `q p` with `q = t_0 (-p^-1) mod 2^32`, and
//! drops the accumulator's low word (zero by construction). The accumulator is split by the
//! parity of the products' words (see `steps`), so that each chain adds a product's low and
//! high halves to two adjacent words: NVIDIA's assembler fuses such a pair into one wide
//! multiply-add (`IMAD.WIDE.U32.X`). The modulus's words are immediates, and the final
//! subtraction is branch-free (`{T}_pl_reduce_once`). Fp's product is one called function a
//! kernel on CUDA, Fr's inlined ([`Inline`]).
//!
//! On sm_90 (NVRTC 13.0, `cuobjdump`), inlined: a loop of two Fp products is 904 SASS
//! instructions and 54 registers against ec-gpu-gen's 1000 and 56 (Fr: 592 and 42 against 656
//! and 42); the G1 and G2 MSMs' runs kernels spill less (G2's stack 440 -> 376 bytes), and the
//! program compiles in a third of the time (with Fp's called, in a tenth). Splitting each row
//! into a chain of low halves and one of high halves instead (tried first) cost 2.5x the
//! instructions: the assembler cannot fuse halves that sit in different chains.
//!
//! The same sequence of operations is written twice: as PTX carry chains for CUDA (one `asm`
//! statement per chain), and as C with the carry in a variable for every other compiler, so that
//! POCL runs the very arithmetic, chain for chain, that the GPU runs; the unit tests run it on
//! the host against arbitrary-precision arithmetic.
//!
//! Fr's modulus ends in the words 1 and 2^32 - 1 (its two-adicity is 32), so `-p^-1 = -1 mod
//! 2^32` and the reduction row's two lowest products, `q` and `q (2^32 - 1)`, are added as their
//! words (`q`, 0, `t_0`, `q - [q != 0]`) instead of multiplied (`low_words`): on sm_90 the NTT
//! pass kernel has 8% fewer multiply-adds (1300 against 1418 with 8 products) and about as many
//! more other instructions, and on the H200 the NTT takes 0.6-1.1% less time (2^24 5.15 against
//! 5.17 ms, 2^27 51.59 against 52.15 ms) and the H pipeline at 2^27 1.1% (388.0 against 392.5
//! ms; `docs/design-decisions.md#field-arithmetic`): the kernels keep both pipes about equally
//! busy, so trading a multiplication for additions gains little.
//!
//! Bounds (p < R / 2, which both BLS12-381 fields meet, checked): with a, b < p the accumulator
//! stays below 2p after each row, and below 2^32 R during one, so it fits N + 1 words and its
//! top word never carries out; the result is below 2p and one conditional subtraction makes it
//! canonical.

mod render;
mod steps;
#[cfg(test)]
mod tests;

use std::fmt::Write;

use render::{c_chain, ptx_chain, RenderChain};
use steps::{steps, Step};

/// How a kernel gets the product on CUDA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inline {
    /// Inlined at every use (Fr: the NTT's passes are small kernels).
    Always,
    /// One copy a kernel, called (`__noinline__`): Fp, whose curve kernels would otherwise
    /// hold dozens of copies. Inlined, the G1 runs kernel was 8.6k instructions and its warps
    /// stalled most for instructions not yet fetched (`ncu`: 5.6 of 13.5 cycles an
    /// instruction); called, 2.7k, and the G1 MSM 15% faster, G2 7-8%
    /// (`docs/design-decisions.md#field-arithmetic`).
    Called,
}

/// The definition of `{name}_mul` for the modulus `p` (little-endian 32-bit words).
pub fn mul_definition(name: &str, p: &[u32], inline: Inline) -> String {
    let (steps, result) = steps(p);
    let n = p.len();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// a b R^-1 mod p, interleaved (generated for this modulus: see gpu-core's mont.rs)."
    );
    if inline == Inline::Called {
        let _ = writeln!(s, "#ifdef CUDA\n__noinline__\n#endif");
    }
    let _ = writeln!(s, "DEVICE {name} {name}_mul({name} a, {name} b) {{");
    let vars: Vec<String> = (0..=n)
        .map(|k| format!("e{k} = 0"))
        .chain((0..n).map(|k| format!("o{k} = 0")))
        .collect();
    let _ = writeln!(s, "  uint {}, bucket = 0, q, ql, qh;", vars.join(", "));
    // The same steps twice: PTX chains for CUDA, C with an explicit carry elsewhere.
    let renderings: [(&str, RenderChain); 2] = [
        ("#ifdef CUDA", ptx_chain),
        ("#else\n  ulong w;\n  uint cc;", c_chain),
    ];
    for (head, chain) in renderings {
        let _ = writeln!(s, "{head}");
        for step in &steps {
            match step {
                Step::Chain(ops) => {
                    let _ = writeln!(s, "  {}", chain(ops));
                }
                Step::Quotient { t0, low: false } => {
                    let _ = writeln!(s, "  q = {t0} * {name}_INV;");
                }
                Step::Quotient { t0, low: true } => {
                    let _ = writeln!(s, "  q = 0u - {t0}; ql = {t0}; qh = min(q - 1u, q);");
                }
            }
        }
    }
    let _ = writeln!(
        s,
        "  (void)w;\n  (void)cc;\n#endif\n  (void)ql;\n  (void)qh;\n  {name} r;"
    );
    for (j, v) in result.iter().enumerate() {
        let _ = writeln!(s, "  r.val[{j}] = {v};");
    }
    let _ = writeln!(s, "  return {name}_pl_reduce_once(r);\n}}");
    s
}
