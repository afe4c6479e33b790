//! The two renderings of a carry chain: C with the carry in a variable (every compiler but
//! NVRTC) and one PTX `asm` statement (CUDA); the same operations, chain for chain.

use std::fmt::Write;

use super::steps::{Kind, Op, Src};

/// A source operand as C.
pub(super) fn c_src(s: &Src) -> String {
    match s {
        Src::Var(v) => v.clone(),
        Src::Imm(k) => format!("{k}u"),
    }
}

/// One operation as C, the carry in `cc` (a word) through `w` (a double word).
pub(super) fn c_op(op: &Op) -> String {
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
pub(super) type RenderChain = fn(&[Op]) -> String;

/// A chain as C: its operations one after the other, a line each.
pub(super) fn c_chain(ops: &[Op]) -> String {
    ops.iter().map(c_op).collect::<Vec<_>>().join("\n  ")
}

/// A chain as one PTX `asm` statement (its variables as operands, immediates inline).
pub(super) fn ptx_chain(ops: &[Op]) -> String {
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
