//! The generated product run on the host against arbitrary-precision arithmetic, and its
//! renderings compared.

use super::steps::*;
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
        crate::kernels::fields::modulus_of(blstrs::G1Affine::x),
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
                (to_big(&(0..n).map(|_| rng.gen()).collect::<Vec<u32>>()) % &big_p).to_u32_digits(),
            );
            let y = pad(
                (to_big(&(0..n).map(|_| rng.gen()).collect::<Vec<u32>>()) % &big_p).to_u32_digits(),
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
    let fp = crate::kernels::fields::modulus_of(blstrs::G1Affine::x);
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
        crate::kernels::fields::modulus_of(blstrs::G1Affine::x),
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
