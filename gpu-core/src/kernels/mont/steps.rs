//! The Montgomery product's schedule: the operations of each carry chain, over the
//! accumulator split by the parity of the products' words (see [`steps`]), and the variables
//! that hold the result.

/// An operand: a variable (by its C name) or an immediate word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Src {
    Var(String),
    Imm(u32),
}

/// What an operation computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
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
pub(super) struct Op {
    pub(super) kind: Kind,
    pub(super) d: String,
    pub(super) x: Src,
    pub(super) y: Src,
    pub(super) z: Src,
    pub(super) carry_in: bool,
    pub(super) carry_out: bool,
}

/// A step of the product: a carry chain, or `q = t_0 (-p^-1) mod 2^32` from the variable of
/// word 0 (plain C in both renderings: it uses no carry). With `low` (a modulus of Fr's low
/// words, see [`low_words`]) the step is `q = -t_0` and also gives `ql`, `qh`: the low and high
/// words of `q (2^32 - 1)`, which are `t_0` and `q - [q != 0]`, written `min(q - 1, q)` (one
/// add-and-minimum instruction on sm_90, where a compare and a select took two more).
#[derive(Debug, Clone)]
pub(super) enum Step {
    Chain(Vec<Op>),
    Quotient { t0: String, low: bool },
}

/// Whether `p`'s two low words are 1 and 2^32 - 1 (`p = 2^64 - 2^32 + 1 mod 2^64`), as
/// BLS12-381's Fr's are (its two-adicity is 32). Then `-p^-1 = -1 mod 2^32`, `q p`'s word 0 is
/// `q` and its word-1 product `q (2^32 - 1)` has the words above: the reduction row adds them
/// instead of multiplying, which takes four of its sixteen half-products off the multiplier
/// (ptxas multiplies by the immediates 1 and -1 as by any other word).
pub(super) fn low_words(p: &[u32]) -> bool {
    p.len() >= 4 && p[0] == 1 && p[1] == u32::MAX
}

/// An accumulator: its words' rotating C variables by position, and which are known to be
/// zero (read as the immediate 0).
pub(super) struct Acc {
    pub(super) vars: Vec<String>,
    pub(super) zero: Vec<bool>,
}

impl Acc {
    pub(super) fn new(names: impl Iterator<Item = String>) -> Self {
        let vars: Vec<String> = names.collect();
        let zero = vec![true; vars.len()];
        Acc { vars, zero }
    }

    pub(super) fn read(&self, k: usize) -> Src {
        if self.zero[k] {
            Src::Imm(0)
        } else {
            Src::Var(self.vars[k].clone())
        }
    }

    pub(super) fn empty(&self) -> bool {
        self.zero.iter().all(|&z| z)
    }
}

/// Sets the carry to the pending `bucket` (0 or 1): `bucket + 2^32 - 1` carries out exactly
/// when it is 1. A chain that adds to the bucket's word begins with it.
pub(super) fn carry_bucket() -> Op {
    add(
        "bucket",
        Src::Var("bucket".into()),
        Src::Imm(u32::MAX),
        false,
        true,
    )
}

/// `{d} = {x} + {z} (+ carry)`.
pub(super) fn add(d: &str, x: Src, z: Src, carry_in: bool, carry_out: bool) -> Op {
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
pub(super) fn steps(p: &[u32]) -> (Vec<Step>, Vec<String>) {
    steps_with(p, low_words(p))
}

/// [`steps`], with the reduction's two low words added (`low`, right only where
/// [`low_words`] holds) or multiplied.
pub(super) fn steps_with(p: &[u32], low: bool) -> (Vec<Step>, Vec<String>) {
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
pub(super) fn row(
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
pub(super) fn add_words(chain: &mut Vec<Op>, part: &Acc, lo: Src, hi: Src, carry_in: bool) {
    chain.push(add(&part.vars[0], lo, part.read(0), carry_in, true));
    chain.push(add(&part.vars[1], hi, part.read(1), true, true));
}
