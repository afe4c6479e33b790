//! The query plan: which bases of the proving key pair with which scalars of a partition's
//! witness. Computed once here, executed by every backend, so that no backend redoes the index
//! arithmetic of inputs against aux, density filters and the B query's input split.
//!
//! The layout it encodes is bellperson's: the A query holds every input, then the aux variables
//! used in some A; the B queries (G1 and G2 alike) hold the inputs used in some B, then the aux
//! variables used in some B; L holds every aux variable; H holds `domain - 1` points against the
//! quotient's coefficients.

use std::ops::Range;

use crate::error::Result;
use crate::groth16::params::{KeyShape, Parameters};
use crate::stages::density::{Density, ScalarBytes};
use crate::stages::{SynthesizedPartition, Witness};

/// The assignment an MSM term reads its scalars from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarSource {
    /// The public inputs, ONE first.
    Input,
    /// The auxiliary assignment.
    Aux,
}

/// Which variables of the source the query uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// Every variable (the query has one point per variable).
    All,
    /// The aux variables used in some A.
    AAux,
    /// The inputs used in some B.
    BInput,
    /// The aux variables used in some B.
    BAux,
}

/// One term of a query's MSM: `sum_j scalar_j * bases[k(j)]` over the variables `j` of `source`
/// that `filter` keeps, where `k(j)` runs through `bases` in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsmTerm {
    /// The bases, as a range of the query's points.
    pub bases: Range<usize>,
    /// Where the scalars come from.
    pub source: ScalarSource,
    /// Which of them are used.
    pub filter: Filter,
}

impl MsmTerm {
    /// The scalars of this term (all of the source; `density` says which are used).
    pub fn scalars<'w>(&self, w: &'w Witness) -> &'w [ScalarBytes] {
        match self.source {
            ScalarSource::Input => &w.input,
            ScalarSource::Aux => &w.aux,
        }
    }

    /// The density that selects the used scalars (`None`: all of them).
    pub fn density<'w>(&self, w: &'w Witness) -> Option<&'w Density> {
        match self.filter {
            Filter::All => None,
            Filter::AAux => Some(&w.a_aux_density),
            Filter::BInput => Some(&w.b_input_density),
            Filter::BAux => Some(&w.b_aux_density),
        }
    }
}

/// The plan of a partition's MSMs against its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryPlan {
    /// The H query's points, against the quotient's `domain - 1` coefficients.
    pub h: Range<usize>,
    /// The L query: every aux variable.
    pub l: MsmTerm,
    /// The A query: inputs, then the aux variables used in A.
    pub a: [MsmTerm; 2],
    /// The B query, in G1 and in G2 (the same layout): used inputs, then used aux variables.
    pub b: [MsmTerm; 2],
}

impl QueryPlan {
    /// The plan for `partition` against `params`, after checking that every size the MSMs and
    /// the NTT rely on agrees (a wrong circuit is an error, never a wrong proof).
    pub fn new(partition: &SynthesizedPartition, params: &Parameters) -> Result<Self> {
        Self::for_key(partition, &params.shape())
    }

    /// The plan for `partition` against a key of shape `key` (after the same checks).
    pub fn for_key(partition: &SynthesizedPartition, key: &KeyShape) -> Result<Self> {
        partition.check_key_shape(key)?;
        let s = partition.shape();
        let term = |bases: Range<usize>, source, filter| MsmTerm {
            bases,
            source,
            filter,
        };
        Ok(QueryPlan {
            h: 0..key.domain - 1,
            l: term(0..s.aux, ScalarSource::Aux, Filter::All),
            a: [
                term(0..s.inputs, ScalarSource::Input, Filter::All),
                term(
                    s.inputs..s.inputs + s.a_aux,
                    ScalarSource::Aux,
                    Filter::AAux,
                ),
            ],
            b: [
                term(0..s.b_inputs, ScalarSource::Input, Filter::BInput),
                term(
                    s.b_inputs..s.b_inputs + s.b_aux,
                    ScalarSource::Aux,
                    Filter::BAux,
                ),
            ],
        })
    }

    /// Every term of the plan's G1 and G2 queries with its query's name, in the order h (dense,
    /// its own scalars), l, a, b_g1, b_g2.
    pub fn terms(&self) -> impl Iterator<Item = (&'static str, &MsmTerm)> {
        std::iter::once(("l", &self.l))
            .chain(self.a.iter().map(|t| ("a", t)))
            .chain(self.b.iter().map(|t| ("b_g1", t)))
            .chain(self.b.iter().map(|t| ("b_g2", t)))
    }
}
