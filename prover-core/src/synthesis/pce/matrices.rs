//! The recorded A, B and C matrices of a circuit shape, in a compact sparse form, and their
//! product with an assignment (the evaluations a, b, c of every constraint).

use std::ops::Range;

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::parallel;
use crate::stages::density::Density;

/// Coefficient code of `+1` (no multiplication).
pub(crate) const CODE_ONE: u32 = 0;
/// Coefficient code of `-1` (a subtraction).
pub(crate) const CODE_MINUS_ONE: u32 = 1;
/// Codes from here on index the coefficient table (`code - CODE_TABLE`).
pub(crate) const CODE_TABLE: u32 = 2;

/// One sparse matrix in compressed rows. Row `r` holds the entries
/// `starts[r]..starts[r + 1]`; an entry is a column (the variable: input `i` is column `i`,
/// aux `j` is column `inputs + j`) and a coefficient code (`+1`, `-1`, or an index into the
/// coefficient table that the three matrices share). Zero coefficients are not stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SparseMatrix {
    pub(crate) starts: Vec<u64>,
    pub(crate) cols: Vec<u32>,
    pub(crate) codes: Vec<u32>,
}

impl SparseMatrix {
    /// An empty matrix (no rows).
    pub(crate) fn new() -> Self {
        SparseMatrix {
            starts: vec![0],
            cols: Vec::new(),
            codes: Vec::new(),
        }
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.starts.len() - 1
    }

    /// Stored (nonzero) entries.
    pub fn nonzeros(&self) -> usize {
        self.cols.len()
    }

    /// Real heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.starts.capacity() * 8 + self.cols.capacity() * 4 + self.codes.capacity() * 4
    }

    /// Ends the current row.
    pub(crate) fn end_row(&mut self) {
        self.starts.push(self.cols.len() as u64);
    }

    /// The columns of row `r`.
    fn row(&self, r: usize) -> (&[u32], &[u32]) {
        let (s, e) = (self.starts[r] as usize, self.starts[r + 1] as usize);
        (&self.cols[s..e], &self.codes[s..e])
    }

    /// Whether the row starts are nondecreasing and end at the entry count, and every column and
    /// code is in range: what a loaded file must satisfy before a product indexes with them.
    pub(crate) fn is_well_formed(&self, columns: usize, table: usize) -> bool {
        self.starts.first() == Some(&0)
            && self.starts.last() == Some(&(self.cols.len() as u64))
            && self.cols.len() == self.codes.len()
            && self.starts.windows(2).all(|w| w[0] <= w[1])
            && self.cols.iter().all(|&c| (c as usize) < columns)
            && self
                .codes
                .iter()
                .all(|&k| k < CODE_TABLE || ((k - CODE_TABLE) as usize) < table)
    }
}

/// The recorded constraint system of one circuit shape: its sizes, the A, B and C matrices (the
/// input constraints included, in bellperson's order) and the coefficient table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matrices {
    /// Inputs, ONE included.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    pub(crate) a: SparseMatrix,
    pub(crate) b: SparseMatrix,
    pub(crate) c: SparseMatrix,
    /// Coefficients other than `+1` and `-1`, each once.
    pub(crate) table: Vec<Scalar>,
}

/// The densities of the A and B queries, as synthesis reports them.
#[derive(Debug, Clone)]
pub(crate) struct Densities {
    pub a_aux: Density,
    pub b_input: Density,
    pub b_aux: Density,
}

impl Matrices {
    /// Constraints (rows), input constraints included.
    pub fn constraints(&self) -> usize {
        self.a.rows()
    }

    /// Stored entries of A, B and C together.
    pub fn nonzeros(&self) -> usize {
        self.a.nonzeros() + self.b.nonzeros() + self.c.nonzeros()
    }

    /// Entries in the coefficient table (coefficients other than `+1` and `-1`).
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    /// Real heap bytes: what the matrices hold in memory for as long as they are used.
    pub fn heap_bytes(&self) -> usize {
        self.a.heap_bytes()
            + self.b.heap_bytes()
            + self.c.heap_bytes()
            + self.table.capacity() * std::mem::size_of::<Scalar>()
    }

    /// Bytes per stored entry, all included (row starts and table too).
    pub fn bytes_per_nonzero(&self) -> f64 {
        self.heap_bytes() as f64 / self.nonzeros().max(1) as f64
    }

    /// Whether the three matrices have one row per constraint and every entry is in range.
    pub(crate) fn is_well_formed(&self) -> bool {
        let (cols, table) = (self.inputs + self.aux, self.table.len());
        self.a.rows() == self.b.rows()
            && self.b.rows() == self.c.rows()
            && [&self.a, &self.b, &self.c]
                .iter()
                .all(|m| m.is_well_formed(cols, table))
    }

    /// The densities: the aux variables used in A, the inputs and aux variables used in B.
    pub(crate) fn densities(&self) -> Densities {
        let mark = |m: &SparseMatrix, from: usize, len: usize| {
            let mut used = vec![false; len];
            for &c in &m.cols {
                let c = c as usize;
                if (from..from + len).contains(&c) {
                    used[c - from] = true;
                }
            }
            let mut d = Density::default();
            for (i, u) in used.into_iter().enumerate() {
                d.push_unset();
                if u {
                    d.set(i);
                }
            }
            d
        };
        Densities {
            a_aux: mark(&self.a, self.inputs, self.aux),
            b_input: mark(&self.b, 0, self.inputs),
            b_aux: mark(&self.b, self.inputs, self.aux),
        }
    }

    /// Row `r` of `m` times the assignment.
    fn row_value(&self, m: &SparseMatrix, r: usize, input: &[Scalar], aux: &[Scalar]) -> Scalar {
        let inputs = input.len();
        let (cols, codes) = m.row(r);
        let mut acc = Scalar::ZERO;
        for (&col, &code) in cols.iter().zip(codes) {
            let col = col as usize;
            let v = if col < inputs {
                &input[col]
            } else {
                &aux[col - inputs]
            };
            match code {
                CODE_ONE => acc += v,
                CODE_MINUS_ONE => acc -= v,
                k => acc += *v * self.table[(k - CODE_TABLE) as usize],
            }
        }
        acc
    }

    /// Rows `rows` of `m` times the assignment, appended to `out` (straight into its spare
    /// room: no buffer written first and copied after), over every core (`parallel`) or on the
    /// calling thread.
    fn product_into(
        &self,
        m: &SparseMatrix,
        rows: Range<usize>,
        input: &[Scalar],
        aux: &[Scalar],
        parallel: bool,
        out: &mut Vec<Scalar>,
    ) {
        if parallel {
            out.par_extend(
                rows.into_par_iter()
                    .with_min_len(4096)
                    .map(|r| self.row_value(m, r, input, aux)),
            );
        } else {
            out.extend(rows.map(|r| self.row_value(m, r, input, aux)));
        }
    }

    /// The evaluations of constraints `rows` (whose variables `input` and `aux` hold), appended
    /// to `a`, `b` and `c`, over every core (`parallel`: A, B and C side by side) or on the
    /// calling thread.
    pub(crate) fn evaluate_rows_into(
        &self,
        rows: Range<usize>,
        input: &[Scalar],
        aux: &[Scalar],
        parallel: bool,
        [a, b, c]: [&mut Vec<Scalar>; 3],
    ) {
        let product = |m, out: &mut Vec<Scalar>| {
            self.product_into(m, rows.clone(), input, aux, parallel, out)
        };
        if !parallel {
            product(&self.a, a);
            product(&self.b, b);
            product(&self.c, c);
            return;
        }
        parallel::install(|| {
            rayon::join(
                || product(&self.a, a),
                || rayon::join(|| product(&self.b, b), || product(&self.c, c)),
            )
        });
    }

    /// The evaluations of constraints `rows`, in new vectors (see [`Self::evaluate_rows_into`]).
    #[cfg(test)]
    pub(crate) fn evaluate_rows(
        &self,
        rows: Range<usize>,
        input: &[Scalar],
        aux: &[Scalar],
        parallel: bool,
    ) -> (Vec<Scalar>, Vec<Scalar>, Vec<Scalar>) {
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        self.evaluate_rows_into(rows, input, aux, parallel, [&mut a, &mut b, &mut c]);
        (a, b, c)
    }

    /// For each constraint, the aux values it needs assigned before it can be evaluated: one
    /// past the last aux variable it or an earlier constraint uses (so the counts never
    /// decrease and the ready constraints are a prefix).
    pub(crate) fn readiness(&self) -> Vec<u32> {
        let last = |m: &SparseMatrix, r: usize| {
            m.row(r)
                .0
                .iter()
                .filter(|&&c| c as usize >= self.inputs)
                .map(|&c| c as usize - self.inputs + 1)
                .max()
                .unwrap_or(0)
        };
        let mut need = 0usize;
        (0..self.constraints())
            .map(|r| {
                need = need
                    .max(last(&self.a, r))
                    .max(last(&self.b, r))
                    .max(last(&self.c, r));
                need as u32
            })
            .collect()
    }
}

/// The first constraint `i` with `a[i] * b[i] != c[i]`, if any, checked over all cores
/// (`parallel`) or on the calling thread.
pub(crate) fn first_unsatisfied(
    a: &[Scalar],
    b: &[Scalar],
    c: &[Scalar],
    parallel: bool,
) -> Option<usize> {
    let bad = |&i: &usize| a[i] * b[i] != c[i];
    if !parallel {
        return (0..a.len()).find(bad);
    }
    parallel::install(|| {
        (0..a.len())
            .into_par_iter()
            .with_min_len(4096)
            .find_first(bad)
    })
}
