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
//! words (`q`, 0, `t_0`, `q - [q != 0]`) instead of multiplied ([`low_words`]): on sm_90 the NTT
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

use std::fmt::Write;

/// An operand: a variable (by its C name) or an immediate word.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Src {
    Var(String),
    Imm(u32),
}

/// What an operation computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `d = lo(x y)`, no carries.
    MulLo,
    /// `d = lo(x y) + z (+ carry)`.
    MadLo,
    /// `d = hi(x y) + z (+ carry)`.
    MadHi,
    /// `d = hi(x y)`, no carries.
    MulHi,
    /// `d = x + z (+ carry)` (`y` unused).
    Add,
}

#[derive(Debug, Clone)]
struct Op {
    kind: Kind,
    d: String,
    x: Src,
    y: Src,
    z: Src,
    carry_in: bool,
    carry_out: bool,
}

/// A step of the product: a carry chain, or `q = t_0 (-p^-1) mod 2^32` from the variable of
/// word 0 (plain C in both renderings: it uses no carry). With `low` (a modulus of Fr's low
/// words, see [`low_words`]) the step is `q = -t_0` and also gives `ql`, `qh`: the low and high
/// words of `q (2^32 - 1)`, which are `t_0` and `q - [q != 0]`, written `min(q - 1, q)` (one
/// add-and-minimum instruction on sm_90, where a compare and a select took two more).
#[derive(Debug, Clone)]
enum Step {
    Chain(Vec<Op>),
    Quotient { t0: String, low: bool },
}

/// Whether `p`'s two low words are 1 and 2^32 - 1 (`p = 2^64 - 2^32 + 1 mod 2^64`), as
/// BLS12-381's Fr's are (its two-adicity is 32). Then `-p^-1 = -1 mod 2^32`, `q p`'s word 0 is
/// `q` and its word-1 product `q (2^32 - 1)` has the words above: the reduction row adds them
/// instead of multiplying, which takes four of its sixteen half-products off the multiplier
/// (ptxas multiplies by the immediates 1 and -1 as by any other word).
fn low_words(p: &[u32]) -> bool {
    p.len() >= 4 && p[0] == 1 && p[1] == u32::MAX
}

/// An accumulator: its words' rotating C variables by position, and which are known to be
/// zero (read as the immediate 0).
struct Acc {
    vars: Vec<String>,
    zero: Vec<bool>,
}

impl Acc {
    fn new(names: impl Iterator<Item = String>) -> Self {
        let vars: Vec<String> = names.collect();
        let zero = vec![true; vars.len()];
        Acc { vars, zero }
    }

    fn read(&self, k: usize) -> Src {
        if self.zero[k] {
            Src::Imm(0)
        } else {
            Src::Var(self.vars[k].clone())
        }
    }

    fn empty(&self) -> bool {
        self.zero.iter().all(|&z| z)
    }
}

/// Sets the carry to the pending `bucket` (0 or 1): `bucket + 2^32 - 1` carries out exactly
/// when it is 1. A chain that adds to the bucket's word begins with it.
fn carry_bucket() -> Op {
    add(
        "bucket",
        Src::Var("bucket".into()),
        Src::Imm(u32::MAX),
        false,
        true,
    )
}

/// `{d} = {x} + {z} (+ carry)`.
fn add(d: &str, x: Src, z: Src, carry_in: bool, carry_out: bool) -> Op {
    Op {
        kind: Kind::Add,
        d: d.into(),
        x,
        y: Src::Imm(0),
        z,
        carry_in,
        carry_out,
    }
}

/// The steps of `a b R^-1` (`a.val`, `b.val` the operands) over the modulus `p`'s words, and the
/// variables of the result's words.
///
/// The accumulator is split by the parity of the products' words (Emmart, Zheng and Weems):
/// `even` holds words `0..=N` and takes the products `x_j y` of even `j`, whose low and high
/// halves land on words `j` and `j + 1`; `odd` holds words `1..=N` and takes those of odd `j`.
/// Within either, one chain adds a product's two halves to adjacent words, which the GPU's
/// assembler fuses into one wide multiply-add. Dropping the low word swaps the two parts' roles:
/// the odd part becomes the even one (its word 1 now word 0), the even part's words `2..=N`
/// become the odd one, and its word 1 is added into the new word 0, the carry of that addition
/// (`bucket`) going into the next chain that adds to the new word 1.
fn steps(p: &[u32]) -> (Vec<Step>, Vec<String>) {
    steps_with(p, low_words(p))
}

/// [`steps`], with the reduction's two low words added (`low`, right only where
/// [`low_words`] holds) or multiplied.
fn steps_with(p: &[u32], low: bool) -> (Vec<Step>, Vec<String>) {
    let n = p.len();
    assert!(n >= 2 && n % 2 == 0, "a field of an even number of words");
    assert!(
        p[n - 1] < 1 << 31,
        "the product's bounds need p < R / 2 (its top word below 2^31)"
    );
    let mut even = Acc::new((0..=n).map(|k| format!("e{k}")));
    let mut odd = Acc::new((0..n).map(|k| format!("o{k}")));
    let mut bucket = false;
    let mut out = Vec::new();
    let a = |j: usize| Src::Var(format!("a.val[{j}]"));
    for i in 0..n {
        let b = Src::Var(format!("b.val[{i}]"));
        // t += a b_i.
        row(
            &mut out,
            &mut even,
            &mut odd,
            &a,
            &b,
            std::mem::take(&mut bucket),
            false,
        );
        // q = t_0 (-p^-1) mod 2^32; t += q p makes word 0 zero.
        out.push(Step::Quotient {
            t0: even.vars[0].clone(),
            low,
        });
        let q = Src::Var("q".into());
        row(
            &mut out,
            &mut even,
            &mut odd,
            &|j| Src::Imm(p[j]),
            &q,
            false,
            low,
        );
        // Drop word 0: the odd part's words 1..=N are the new even part's 0..N (its word N
        // fresh); the even part's 2..=N the new odd part's 1..N (its word N fresh), and its word
        // 1 goes into the new word 0.
        let (e1, e1_zero) = (even.vars[1].clone(), even.zero[1]);
        let mut new_even = Acc {
            vars: odd.vars.clone(),
            zero: odd.zero.clone(),
        };
        new_even.vars.push(even.vars[0].clone());
        new_even.zero.push(true);
        let mut new_odd = Acc {
            vars: even.vars[2..].to_vec(),
            zero: even.zero[2..].to_vec(),
        };
        new_odd.vars.push(e1.clone());
        new_odd.zero.push(true);
        if !e1_zero {
            let w0 = new_even.vars[0].clone();
            out.push(Step::Chain(vec![
                add(&w0, new_even.read(0), Src::Var(e1), false, true),
                add("bucket", Src::Imm(0), Src::Imm(0), true, false),
            ]));
            new_even.zero[0] = false;
            bucket = true;
        }
        even = new_even;
        odd = new_odd;
    }
    // The result: even + odd (one word up) + bucket (into word 1), below 2p < R: N words.
    let mut fin = Vec::new();
    if bucket {
        fin.push(carry_bucket());
    }
    for k in 1..n {
        let d = even.vars[k].clone();
        fin.push(add(
            &d,
            even.read(k),
            odd.read(k - 1),
            bucket || k > 1,
            k + 1 < n,
        ));
        even.zero[k] = false;
    }
    out.push(Step::Chain(fin));
    (out, even.vars[..n].to_vec())
}

/// `t += x y` for the N words `x(j)` and the word `y`: the products of even `j` into `even`
/// (one chain, the carry out into its word N), those of odd `j` into `odd` (one chain, the
/// pending `bucket` first carried into its word 1). Neither part's top word carries out (the
/// module's bounds hold for each part, a part of the sum). With `low` (the reduction row of a
/// modulus whose low words are 1 and 2^32 - 1, `y` being `q`) the products of `j` = 0 and 1
/// are added as their words: `q` and 0, `ql` and `qh`.
fn row(
    out: &mut Vec<Step>,
    even: &mut Acc,
    odd: &mut Acc,
    x: &dyn Fn(usize) -> Src,
    y: &Src,
    bucket: bool,
    low: bool,
) {
    let n = odd.vars.len();
    // Products with nothing to add carry nothing: a multiplication each, no chain.
    let lone = |out: &mut Vec<Step>, part: &mut Acc, base: usize| {
        for j in (base..n).step_by(2) {
            let k = j - base;
            for (kind, d) in [(Kind::MulLo, k), (Kind::MulHi, k + 1)] {
                out.push(Step::Chain(vec![Op {
                    kind,
                    d: part.vars[d].clone(),
                    x: x(j),
                    y: y.clone(),
                    z: Src::Imm(0),
                    carry_in: false,
                    carry_out: false,
                }]));
                part.zero[d] = false;
            }
        }
    };
    if even.empty() {
        lone(out, even, 0);
    } else {
        let mut chain = Vec::new();
        for j in (0..n).step_by(2) {
            if low && j == 0 {
                add_words(&mut chain, even, Src::Var("q".into()), Src::Imm(0), false);
                continue;
            }
            for (kind, d) in [(Kind::MadLo, j), (Kind::MadHi, j + 1)] {
                chain.push(Op {
                    kind,
                    d: even.vars[d].clone(),
                    x: x(j),
                    y: y.clone(),
                    z: even.read(d),
                    carry_in: d > 0,
                    carry_out: true,
                });
            }
        }
        chain.push(add(&even.vars[n], even.read(n), Src::Imm(0), true, false));
        for z in &mut even.zero {
            *z = false;
        }
        out.push(Step::Chain(chain));
    }
    if odd.empty() && !bucket {
        lone(out, odd, 1);
    } else {
        let mut chain = Vec::new();
        if bucket {
            chain.push(carry_bucket());
        }
        for j in (1..n).step_by(2) {
            if low && j == 1 {
                add_words(
                    &mut chain,
                    odd,
                    Src::Var("ql".into()),
                    Src::Var("qh".into()),
                    bucket,
                );
                continue;
            }
            for (kind, d) in [(Kind::MadLo, j - 1), (Kind::MadHi, j)] {
                chain.push(Op {
                    kind,
                    d: odd.vars[d].clone(),
                    x: x(j),
                    y: y.clone(),
                    z: odd.read(d),
                    carry_in: d > 0 || bucket,
                    carry_out: d + 1 < n,
                });
            }
        }
        for z in &mut odd.zero {
            *z = false;
        }
        out.push(Step::Chain(chain));
    }
}

/// Adds the words `lo` and `hi` of a product to `part`'s words 0 and 1 (the carry in `carry_in`,
/// out of both): a product of [`low_words`] added instead of multiplied.
fn add_words(chain: &mut Vec<Op>, part: &Acc, lo: Src, hi: Src, carry_in: bool) {
    chain.push(add(&part.vars[0], lo, part.read(0), carry_in, true));
    chain.push(add(&part.vars[1], hi, part.read(1), true, true));
}

/// A source operand as C.
fn c_src(s: &Src) -> String {
    match s {
        Src::Var(v) => v.clone(),
        Src::Imm(k) => format!("{k}u"),
    }
}

/// One operation as C, the carry in `cc` (a word) through `w` (a double word).
fn c_op(op: &Op) -> String {
    let (x, y, z) = (c_src(&op.x), c_src(&op.y), c_src(&op.z));
    let term = match op.kind {
        Kind::MulLo => return format!("{} = {x} * {y};", op.d),
        Kind::MulHi => return format!("{} = (uint)(((ulong){x} * {y}) >> 32);", op.d),
        Kind::MadLo => format!("(ulong)({x} * {y})"),
        Kind::MadHi => format!("(((ulong){x} * {y}) >> 32)"),
        Kind::Add => format!("(ulong){x}"),
    };
    let carry = if op.carry_in { " + cc" } else { "" };
    let mut s = format!("w = {term} + {z}{carry}; {} = (uint)w;", op.d);
    if op.carry_out {
        s.push_str(" cc = (uint)(w >> 32);");
    }
    s
}

/// How a rendering writes a carry chain.
type RenderChain = fn(&[Op]) -> String;

/// A chain as C: its operations one after the other, a line each.
fn c_chain(ops: &[Op]) -> String {
    ops.iter().map(c_op).collect::<Vec<_>>().join("\n  ")
}

/// A chain as one PTX `asm` statement (its variables as operands, immediates inline).
fn ptx_chain(ops: &[Op]) -> String {
    let mut outs: Vec<String> = Vec::new();
    let mut ins: Vec<String> = Vec::new();
    for op in ops {
        if !outs.contains(&op.d) {
            outs.push(op.d.clone());
        }
    }
    for op in ops {
        for s in [&op.x, &op.y, &op.z] {
            if let Src::Var(v) = s {
                if !outs.contains(v) && !ins.contains(v) {
                    ins.push(v.clone());
                }
            }
        }
    }
    let index = |v: &str| -> usize {
        outs.iter()
            .position(|o| o == v)
            .or_else(|| ins.iter().position(|i| i == v).map(|i| outs.len() + i))
            .expect("every operand listed")
    };
    let operand = |s: &Src| match s {
        Src::Var(v) => format!("%{}", index(v)),
        Src::Imm(k) => k.to_string(),
    };
    let mut asm = String::from("asm(");
    for (k, op) in ops.iter().enumerate() {
        let c = if op.carry_in { "c" } else { "" };
        let cc = if op.carry_out { ".cc" } else { "" };
        let line = match op.kind {
            Kind::MulLo | Kind::MulHi => format!(
                "mul.{}.u32 {}, {}, {};",
                if op.kind == Kind::MulLo { "lo" } else { "hi" },
                operand(&Src::Var(op.d.clone())),
                operand(&op.x),
                operand(&op.y)
            ),
            Kind::MadLo | Kind::MadHi => format!(
                "mad{c}.{}{cc}.u32 {}, {}, {}, {};",
                if op.kind == Kind::MadLo { "lo" } else { "hi" },
                operand(&Src::Var(op.d.clone())),
                operand(&op.x),
                operand(&op.y),
                operand(&op.z)
            ),
            Kind::Add => format!(
                "add{c}{cc}.u32 {}, {}, {};",
                operand(&Src::Var(op.d.clone())),
                operand(&op.x),
                operand(&op.z)
            ),
        };
        let sep = if k + 1 < ops.len() { "\\n\\t" } else { "" };
        let _ = write!(asm, "\n      \"{line}{sep}\"");
    }
    let list = |v: &[String], c: &str| {
        v.iter()
            .map(|x| format!("\"{c}\"({x})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = write!(
        asm,
        "\n      : {}\n      : {});",
        list(&outs, "+r"),
        list(&ins, "r")
    );
    asm
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the generated steps on the host, for checking the algorithm against
    /// arbitrary-precision arithmetic.
    fn run(p: &[u32], inv: u32, a: &[u32], b: &[u32]) -> Vec<u32> {
        run_with(p, low_words(p), inv, a, b)
    }

    /// [`run`] with the reduction's low words added (`low`) or multiplied.
    fn run_with(p: &[u32], low: bool, inv: u32, a: &[u32], b: &[u32]) -> Vec<u32> {
        let (steps, result) = steps_with(p, low);
        execute(&steps, &result, inv, a, b).unwrap_or_else(|e| panic!("p {p:x?}: {e}"))
    }

    /// Executes `steps` on the host as PTX runs them, and reads the words `result`. The carry
    /// flag is as PTX keeps it: set by an operation with `.cc`, left alone by one without, and
    /// undefined at the start of every chain (one `asm` statement: nothing carries the flag
    /// from one statement to the next, and the compiler may put anything between them). An
    /// operation that reads a carry no earlier operation of its own chain set is an error (the
    /// C rendering, whose `cc` lives across chains, would hide it), as is a chain's operation
    /// without `.cc` whose sum carries out.
    fn execute(
        steps: &[Step],
        result: &[String],
        inv: u32,
        a: &[u32],
        b: &[u32],
    ) -> Result<Vec<u32>, String> {
        use std::collections::HashMap;
        let mut vars: HashMap<String, u32> = HashMap::new();
        for (j, (x, y)) in a.iter().zip(b).enumerate() {
            vars.insert(format!("a.val[{j}]"), *x);
            vars.insert(format!("b.val[{j}]"), *y);
        }
        for k in 0..=a.len() {
            vars.insert(format!("e{k}"), 0);
            vars.insert(format!("o{k}"), 0);
        }
        vars.insert("bucket".into(), 0);
        let get = |vars: &HashMap<String, u32>, s: &Src| match s {
            Src::Var(v) => vars[v],
            Src::Imm(k) => *k,
        };
        for (c, step) in steps.iter().enumerate() {
            match step {
                Step::Quotient { t0, low: false } => {
                    vars.insert("q".into(), vars[t0].wrapping_mul(inv));
                }
                Step::Quotient { t0, low: true } => {
                    // The rendering's own formulas, not the product they stand for.
                    let q = 0u32.wrapping_sub(vars[t0]);
                    vars.insert("q".into(), q);
                    vars.insert("ql".into(), vars[t0]);
                    vars.insert("qh".into(), q.wrapping_sub(1).min(q));
                }
                Step::Chain(ops) => {
                    // Undefined at the chain's start: a carry is only what this chain set.
                    let mut carry: Option<u64> = None;
                    for (k, op) in ops.iter().enumerate() {
                        let (x, y, z) = (
                            get(&vars, &op.x) as u64,
                            get(&vars, &op.y) as u64,
                            get(&vars, &op.z) as u64,
                        );
                        let term = match op.kind {
                            Kind::MulLo => {
                                vars.insert(op.d.clone(), (x * y) as u32);
                                continue;
                            }
                            Kind::MulHi => {
                                vars.insert(op.d.clone(), ((x * y) >> 32) as u32);
                                continue;
                            }
                            Kind::MadLo => (x * y) & 0xffff_ffff,
                            Kind::MadHi => (x * y) >> 32,
                            Kind::Add => x,
                        };
                        let carry_in = match (op.carry_in, carry) {
                            (false, _) => 0,
                            (true, Some(cf)) => cf,
                            (true, None) => {
                                return Err(format!(
                                    "step {c}, operation {k} (into {}) reads a stale carry: no \
                                     earlier operation of its chain set one",
                                    op.d
                                ))
                            }
                        };
                        let w = term + z + carry_in;
                        if op.carry_out {
                            carry = Some(w >> 32);
                        } else if w >> 32 != 0 {
                            return Err(format!(
                                "step {c}, operation {k} (into {}): a chain's last word carried out",
                                op.d
                            ));
                        }
                        vars.insert(op.d.clone(), w as u32);
                    }
                }
            }
        }
        Ok(result.iter().map(|v| vars[v]).collect())
    }

    fn to_big(w: &[u32]) -> num_bigint::BigUint {
        num_bigint::BigUint::from_slice(w)
    }

    /// `-p^-1 mod 2^32` (Newton's iteration on the low word) and `R^-1 mod p`: what a
    /// Montgomery product over `p` needs, and what its result is checked against.
    fn montgomery_constants(p: &[u32]) -> (u32, num_bigint::BigUint) {
        let inv = (0..31)
            .fold(1u32, |x, _| {
                x.wrapping_mul(2u32.wrapping_sub(p[0].wrapping_mul(x)))
            })
            .wrapping_neg();
        let r = num_bigint::BigUint::from(1u8) << (32 * p.len());
        (inv, r.modinv(&to_big(p)).expect("p odd"))
    }

    #[test]
    fn the_generated_steps_compute_the_montgomery_product() {
        use rand::{Rng, SeedableRng};
        // BLS12-381's Fr and Fp, and a 2-word modulus near its bound.
        use ec_gpu::GpuField;
        let mut rng = rand::rngs::StdRng::from_entropy();
        for p in [
            blstrs::Scalar::modulus(),
            crate::source::modulus_of(blstrs::G1Affine::x),
            vec![0xffff_fff1, 0x7fff_ffff],
        ] {
            let n = p.len();
            let (inv, r_inv) = montgomery_constants(&p);
            let big_p = to_big(&p);
            let mut cases: Vec<(Vec<u32>, Vec<u32>)> = Vec::new();
            let pm1 = (&big_p - 1u8).to_u32_digits();
            let pad = |mut v: Vec<u32>| {
                v.resize(n, 0);
                v
            };
            cases.push((pad(pm1.clone()), pad(pm1.clone())));
            cases.push((vec![0; n], pad(pm1.clone())));
            for _ in 0..2000 {
                let x = pad(
                    (to_big(&(0..n).map(|_| rng.gen()).collect::<Vec<u32>>()) % &big_p)
                        .to_u32_digits(),
                );
                let y = pad(
                    (to_big(&(0..n).map(|_| rng.gen()).collect::<Vec<u32>>()) % &big_p)
                        .to_u32_digits(),
                );
                cases.push((x, y));
            }
            for (x, y) in cases {
                let got = to_big(&run(&p, inv, &x, &y));
                assert!(
                    got < &big_p * 2u8,
                    "the result before its subtraction is below 2p"
                );
                let want = to_big(&x) * to_big(&y) * &r_inv % &big_p;
                assert_eq!(got % &big_p, want, "p {p:x?}, a {x:x?}, b {y:x?}");
            }
        }
    }

    /// Fr takes the added low words, Fp the general row; forced onto a modulus without Fr's low
    /// words, the added row gives wrong products (the twin of the test above for Fr's path).
    #[test]
    fn only_a_modulus_of_frs_low_words_adds_them() {
        use ec_gpu::GpuField;
        let fr = blstrs::Scalar::modulus();
        let fp = crate::source::modulus_of(blstrs::G1Affine::x);
        assert!(low_words(&fr));
        assert!(!low_words(&fp));
        assert!(mul_definition("F", &fr, Inline::Always).contains("qh = min("));
        assert!(!mul_definition("F", &fp, Inline::Always).contains("qh = min("));
        // Fp with the added row: its low words are not 1 and 2^32 - 1, so q p's are wrong.
        let (inv, r_inv) = montgomery_constants(&fp);
        let big_p = to_big(&fp);
        let a: Vec<u32> = (1..=fp.len() as u32).collect();
        let want = to_big(&a) * to_big(&a) * &r_inv % &big_p;
        let right = to_big(&run_with(&fp, false, inv, &a, &a));
        assert_eq!(right % &big_p, want);
        let forced = to_big(&run_with(&fp, true, inv, &a, &a));
        assert_ne!(forced % &big_p, want);
    }

    /// Every chain of Fr's and Fp's products sets each carry it reads (the test above runs
    /// them under the PTX carry rules); cut in two where an operation reads the carry of the
    /// one before it, a chain reads a stale carry, which the emulation refuses although the
    /// C rendering, its `cc` kept across chains, would compute the same words.
    #[test]
    fn a_chain_that_reads_a_carry_set_before_it_is_refused() {
        use ec_gpu::GpuField;
        for p in [
            blstrs::Scalar::modulus(),
            crate::source::modulus_of(blstrs::G1Affine::x),
        ] {
            let (inv, _) = montgomery_constants(&p);
            let (steps, result) = steps(&p);
            let a: Vec<u32> = (0..p.len() as u32).map(|j| 0x1234_5678 ^ j).collect();
            execute(&steps, &result, inv, &a, &a).expect("the generated chains");
            // Every chain whose second operation reads the first one's carry, split there.
            let cuts: Vec<usize> = steps
                .iter()
                .enumerate()
                .filter_map(|(i, s)| match s {
                    Step::Chain(ops) if ops.len() > 1 && ops[1].carry_in => Some(i),
                    _ => None,
                })
                .collect();
            assert!(!cuts.is_empty(), "chains that carry");
            for i in cuts {
                let mut cut = steps.clone();
                let Step::Chain(ops) = cut.remove(i) else {
                    unreachable!("a chain")
                };
                cut.insert(i, Step::Chain(ops[1..].to_vec()));
                cut.insert(i, Step::Chain(ops[..1].to_vec()));
                let err = execute(&cut, &result, inv, &a, &a)
                    .expect_err("a chain reading the carry of the chain before it");
                assert!(err.contains("stale carry"), "{err}");
                assert!(
                    err.starts_with(&format!("step {}, operation 0", i + 1)),
                    "{err}"
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "p < R / 2")]
    fn a_modulus_past_half_the_words_range_is_refused() {
        // The twin: the bounds fail for p >= R / 2, whose accumulator could carry out.
        steps(&[1, 0x8000_0000]);
    }

    #[test]
    fn both_renderings_hold_the_same_operations() {
        let fr = <blstrs::Scalar as ec_gpu::GpuField>::modulus();
        let text = mul_definition("F", &fr, Inline::Called);
        assert!(text.contains("__noinline__"));
        assert!(!mul_definition("F", &fr, Inline::Always).contains("__noinline__"));
        let (steps, _) = steps(&fr);
        let ops: usize = steps
            .iter()
            .map(|s| match s {
                Step::Chain(ops) => ops.len(),
                Step::Quotient { .. } => 0,
            })
            .sum();
        let (cuda, c) = text.split_once("#else").expect("two renderings");
        let ptx = cuda.matches(".u32 %").count();
        let body = c
            .split_once("uint cc;")
            .and_then(|(_, rest)| rest.split_once("(void)w;"))
            .expect("the C rendering's body")
            .0;
        let emulated = body
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.trim().starts_with("q = "))
            .count();
        assert_eq!(ptx, ops, "one PTX instruction per operation");
        assert_eq!(emulated, ops, "one C line per operation");
        // 4 N^2 multiply-adds and a few carries: the interleaved product's size for N = 8.
        assert!((4 * 64..4 * 64 + 8 * 8).contains(&ops), "{ops} operations");
    }
}
