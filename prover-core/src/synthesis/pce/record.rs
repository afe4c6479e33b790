//! Recording a circuit's constraint system once: a constraint system that keeps every
//! constraint's linear combinations as rows of sparse matrices (and each constraint's name),
//! without evaluating anything, so a circuit without a witness records as well as one with.

use std::collections::HashMap;

use bellpepper_core::{Circuit, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::{Field, PrimeField};

use super::matrices::{Matrices, SparseMatrix, CODE_MINUS_ONE, CODE_ONE, CODE_TABLE};
use super::names::Names;
use crate::error::Result;
use crate::groth16::assembly::{constraint_system, Assembly};
use crate::groth16::generator::AUX_TAG;
use crate::groth16::shape::synthesize_in_bellperson_shape;

/// Records `circuit`'s A, B and C matrices and constraint names, in bellperson's shape (the ONE
/// input first, the input constraints last).
pub fn record<C: Circuit<Scalar>>(circuit: C) -> Result<(Matrices, Names)> {
    let mut cs = Recorder::default();
    synthesize_in_bellperson_shape(&mut cs, circuit, |cs| cs.inputs)?;
    cs.finish()
}

#[derive(Default)]
struct Recorder {
    inputs: usize,
    aux: usize,
    a: Tagged,
    b: Tagged,
    c: Tagged,
    table: Vec<Scalar>,
    codes: HashMap<[u8; 32], u32>,
    names: Names,
    /// A variable index that does not fit the column format (more than 2^31 variables).
    overflow: bool,
}

/// A matrix whose aux columns are tagged with [`AUX_TAG`].
struct Tagged(SparseMatrix);

impl Default for Tagged {
    fn default() -> Self {
        Tagged(SparseMatrix::new())
    }
}

impl Recorder {
    fn code(&mut self, coeff: &Scalar) -> u32 {
        if *coeff == Scalar::ONE {
            CODE_ONE
        } else if *coeff == -Scalar::ONE {
            CODE_MINUS_ONE
        } else {
            intern(&mut self.table, &mut self.codes, coeff)
        }
    }

    fn row(&mut self, which: usize, lc: &LinearCombination<Scalar>) {
        let mut entries = Vec::with_capacity(lc.len());
        for (&i, coeff) in lc.iter_inputs() {
            if !crate::groth16::public::is_zero(coeff) {
                entries.push((self.column(i, 0), self.code(coeff)));
            }
        }
        for (&j, coeff) in lc.iter_aux() {
            if !crate::groth16::public::is_zero(coeff) {
                entries.push((self.column(j, AUX_TAG), self.code(coeff)));
            }
        }
        let m = match which {
            0 => &mut self.a.0,
            1 => &mut self.b.0,
            _ => &mut self.c.0,
        };
        for (col, code) in entries {
            m.cols.push(col);
            m.codes.push(code);
        }
        m.end_row();
    }

    fn column(&mut self, index: usize, tag: u32) -> u32 {
        if index >= AUX_TAG as usize {
            self.overflow = true;
        }
        index as u32 | tag
    }

    /// The matrices with columns in their final numbering (inputs, then aux).
    fn finish(mut self) -> Result<(Matrices, Names)> {
        if self.overflow || self.inputs + self.aux > u32::MAX as usize {
            return Err(crate::error::Error::InvalidConfig {
                what: "pre-compiled constraints",
                detail: format!(
                    "{} inputs and {} aux variables do not fit 32-bit columns",
                    self.inputs, self.aux
                ),
            });
        }
        let inputs = self.inputs as u32;
        for m in [&mut self.a.0, &mut self.b.0, &mut self.c.0] {
            for c in &mut m.cols {
                if *c & AUX_TAG != 0 {
                    *c = (*c & !AUX_TAG) + inputs;
                }
            }
            m.starts.shrink_to_fit();
            m.cols.shrink_to_fit();
            m.codes.shrink_to_fit();
        }
        self.table.shrink_to_fit();
        let matrices = Matrices {
            inputs: self.inputs,
            aux: self.aux,
            a: self.a.0,
            b: self.b.0,
            c: self.c.0,
            table: self.table,
        };
        Ok((matrices, self.names))
    }
}

/// The code of `coeff` in the coefficient table, added to it when it is not there yet.
fn intern(table: &mut Vec<Scalar>, codes: &mut HashMap<[u8; 32], u32>, coeff: &Scalar) -> u32 {
    let next = CODE_TABLE + table.len() as u32;
    let code = *codes.entry(coeff.to_repr()).or_insert(next);
    if code == next {
        table.push(*coeff);
    }
    code
}

impl Assembly for Recorder {
    const EXTENSIBLE: bool = true;

    fn alloc_aux<F>(&mut self, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
    {
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F>(&mut self, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
    {
        self.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
    }

    fn enforce<N, LA, LB, LC>(&mut self, annotation: N, a: LA, b: LB, c: LC)
    where
        N: FnOnce() -> String,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.row(0, &a(LinearCombination::zero()));
        self.row(1, &b(LinearCombination::zero()));
        self.row(2, &c(LinearCombination::zero()));
        self.names.push(&annotation());
    }

    fn extend(&mut self, other: &Self) {
        // The other system's input 0 is its own temporary ONE, this system's input 0.
        let (inputs, aux) = (self.inputs as u32, self.aux as u32);
        let map_col = |c: u32| -> u32 {
            if c & AUX_TAG != 0 {
                ((c & !AUX_TAG) + aux) | AUX_TAG
            } else if c == 0 {
                0
            } else {
                c - 1 + inputs
            }
        };
        // The other system's table holds no +1 or -1: each entry is interned as it is.
        let remap: Vec<u32> = other
            .table
            .iter()
            .map(|coeff| intern(&mut self.table, &mut self.codes, coeff))
            .collect();
        let map_code = |k: u32| {
            if k < CODE_TABLE {
                k
            } else {
                remap[(k - CODE_TABLE) as usize]
            }
        };
        for (mine, theirs) in [
            (&mut self.a.0, &other.a.0),
            (&mut self.b.0, &other.b.0),
            (&mut self.c.0, &other.c.0),
        ] {
            let base = mine.cols.len() as u64;
            mine.cols.extend(theirs.cols.iter().map(|&c| map_col(c)));
            mine.codes.extend(theirs.codes.iter().map(|&k| map_code(k)));
            mine.starts
                .extend(theirs.starts[1..].iter().map(|s| s + base));
        }
        self.names.extend(&other.names);
        self.inputs += other.inputs.saturating_sub(1);
        self.aux += other.aux;
        self.overflow |= other.overflow;
    }
}

constraint_system!(Recorder {});
