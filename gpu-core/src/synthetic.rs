//! Synthetic bases made on the device (`synthetic.cl`), for timing workloads whose proving key
//! cannot be generated (a 32 GiB PoRep partition's: about 47 GB of points): base `i` of a
//! query is `T[u_i] + T[v_i]` for a host table `T` of `2^TABLE_LOG` random points and indices
//! hashed from the query's seed and `i`. Distinct in practice, with logarithms nobody knows, so
//! the MSMs do the work they do on a real key. The same bases are computed on the CPU
//! ([`synthetic_base`]) for the conformance suite.
//!
//! The table's points are the generator's products by known scalars, so every base's discrete
//! logarithm is known too (`log T[u_i] + log T[v_i]`): an MSM over synthetic bases has an answer
//! computed with scalar arithmetic alone ([`known_msm`]), at sizes where a CPU MSM would take
//! too long; a synthetic partition's L, A and B sums are checked so
//! ([`SyntheticKey::check_sums`]).

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use prover_core::groth16::generator::fixed_base::FixedBase;
use prover_core::stages::density::ScalarBytes;
use prover_core::stages::plan::MsmTerm;
use prover_core::{CpuMultiplier, KeyShape, Multiplier, Parameters, PendingProof, VerifyingKey};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rayon::prelude::*;

use crate::context::{launch_threads, GpuDevice};
use crate::device::{bytes_of, Arg, Device, DeviceError, DeviceResult, Queue};
use crate::memory::DeviceBuffer;
use crate::msm::{DeviceCurve, Scan};

/// Points in the host tables (2^16: 2^32 index pairs, so 130M bases repeat one pair in about
/// 2,000 on average).
pub const TABLE_LOG: u32 = 16;

/// Threads per compute unit of a launch (each makes `n / threads` bases with one inversion).
const THREADS_PER_UNIT: usize = 1024;

/// A curve whose synthetic bases the device makes.
pub trait SyntheticCurve: DeviceCurve + Default + PartialEq + std::fmt::Debug {
    /// The generator's products by `scalars` (fixed-base), on every core.
    fn generator_products(scalars: &[Scalar]) -> Vec<Self>;
    /// `s` times the generator.
    fn generator_times(s: Scalar) -> Self::Projective;
    /// `a + b` in affine form.
    fn sum(a: &Self, b: &Self) -> Self;
}

fn scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| loop {
            let s = Scalar::random(&mut rng);
            if !bool::from(s.is_zero()) {
                break s;
            }
        })
        .collect()
}

impl SyntheticCurve for G1Affine {
    fn generator_products(scalars: &[Scalar]) -> Vec<Self> {
        let base = FixedBase::new(G1Projective::generator(), scalars.len());
        CpuMultiplier
            .g1(&base, scalars)
            .expect("the CPU multiplier does not fail")
    }
    fn generator_times(s: Scalar) -> G1Projective {
        G1Projective::generator() * s
    }
    fn sum(a: &Self, b: &Self) -> Self {
        (G1Projective::from(a) + b).to_affine()
    }
}

impl SyntheticCurve for G2Affine {
    fn generator_products(scalars: &[Scalar]) -> Vec<Self> {
        let base = FixedBase::new(G2Projective::generator(), scalars.len());
        CpuMultiplier
            .g2(&base, scalars)
            .expect("the CPU multiplier does not fail")
    }
    fn generator_times(s: Scalar) -> G2Projective {
        G2Projective::generator() * s
    }
    fn sum(a: &Self, b: &Self) -> Self {
        (G2Projective::from(a) + b).to_affine()
    }
}

/// A table for [`synthetic_bases`]: `2^log` random points whose x coordinates are pairwise
/// distinct (so no sum the kernel forms is a doubling or the identity), from `seed`.
pub fn table<C: SyntheticCurve>(log: u32, seed: u64) -> Vec<C> {
    table_with_logs(log, seed).0
}

/// [`table`], with each point's discrete logarithm to the generator (the random nonzero scalar
/// it is the generator's product by).
pub fn table_with_logs<C: SyntheticCurve>(log: u32, seed: u64) -> (Vec<C>, Vec<Scalar>) {
    assert!((1..=24).contains(&log), "a table of 2^{log} points");
    let mut seed = seed;
    loop {
        let logs = scalars(1 << log, seed);
        let t = C::generator_products(&logs);
        let half = (C::AFFINE_BYTES / 2) as usize;
        let mut xs: Vec<&[u8]> = bytes_of(&t)
            .chunks(C::AFFINE_BYTES as usize)
            .map(|p| &p[..half])
            .collect();
        xs.sort_unstable();
        // A repeated x (P and -P, or P twice) has probability about 2^-350: draw again.
        if xs.windows(2).all(|w| w[0] != w[1]) {
            return (t, logs);
        }
        seed = seed.wrapping_add(1);
    }
}

/// `synthetic.cl`'s 32-bit hash.
pub fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// The two table indices of base `i` (never equal), as `synthetic.cl` picks them.
pub fn pair(seed: u32, i: u32, log: u32) -> (usize, usize) {
    let mask = (1u32 << log) - 1;
    let u = mix(seed ^ mix(i)) & mask;
    let h = mix(seed.wrapping_add(0x9e37_79b9) ^ mix(i ^ 0x85eb_ca6b));
    let v = u.wrapping_add(1).wrapping_add(h % mask) & mask;
    (u as usize, v as usize)
}

/// Base `i` of the query seeded `seed`, on the CPU.
pub fn synthetic_base<C: SyntheticCurve>(table: &[C], seed: u32, i: u32) -> C {
    let (u, v) = pair(seed, i, table.len().trailing_zeros());
    C::sum(&table[u], &table[v])
}

/// The discrete logarithm to the generator of base `i` of the query seeded `seed`, from its
/// table's logarithms `logs` ([`table_with_logs`]).
pub fn synthetic_log(logs: &[Scalar], seed: u32, i: u32) -> Scalar {
    let (u, v) = pair(seed, i, logs.len().trailing_zeros());
    logs[u] + logs[v]
}

/// The known answer of the MSM of `scalars` over the first bases of the query seeded `seed`
/// (scalar `i` against base `i`), whose table has the logarithms `logs`: `(sum_i scalars_i
/// log_i)` times the generator, from scalar arithmetic on the host (on every core). `None`
/// where a scalar is not canonical.
pub fn known_msm<C: SyntheticCurve>(
    logs: &[Scalar],
    seed: u32,
    scalars: &[ScalarBytes],
) -> Option<C::Projective> {
    let sum = scalars
        .par_iter()
        .enumerate()
        .map(|(i, s)| Some(s.to_scalar()? * synthetic_log(logs, seed, i as u32)))
        .try_reduce(|| Scalar::ZERO, |a, b| Some(a + b))?;
    Some(C::generator_times(sum))
}

/// `n` random field elements (uniform over Fr) from `seed`, on every core: the inputs of
/// known-answer checks at sizes where drawing them one by one takes a while.
pub fn random_field(n: usize, seed: u64) -> Vec<Scalar> {
    const CHUNK: usize = 1 << 16;
    let mut out = vec![Scalar::ZERO; n];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(k, piece)| {
            let mut rng =
                StdRng::seed_from_u64(seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            for x in piece {
                *x = Scalar::random(&mut rng);
            }
        });
    out
}

/// [`random_field`] as canonical exponents: the scalars of a known-answer MSM.
pub fn random_exponents(n: usize, seed: u64) -> Vec<ScalarBytes> {
    random_field(n, seed)
        .par_iter()
        .map(ScalarBytes::from_scalar)
        .collect()
}

/// The logarithm of the sum of a query's scanned terms (its ones, and its other scalars against
/// their bases) over the query seeded `seed`: what [`known_msm`] sums, for a query's lists.
fn scanned_log(logs: &[Scalar], seed: u32, scan: &Scan) -> Option<Scalar> {
    let ones: Scalar = scan
        .ones
        .par_iter()
        .map(|&i| synthetic_log(logs, seed, i))
        .sum();
    let others = scan
        .idx
        .par_iter()
        .zip(&scan.exps)
        .map(|(&i, s)| Some(s.to_scalar()? * synthetic_log(logs, seed, i)))
        .try_reduce(|| Scalar::ZERO, |a, b| Some(a + b))?;
    Some(ones + others)
}

/// Whether `p` is a point of G1's prime-order subgroup other than the identity (on the curve
/// and torsion-free), as a sum of synthetic bases by scalars that are not all zero is.
fn in_subgroup_not_identity(p: &G1Projective) -> bool {
    let a = p.to_affine();
    bool::from(a.is_on_curve() & a.is_torsion_free() & !a.is_identity())
}

/// The `n` bases of the query seeded `seed` in a new device buffer (counted by the device's
/// gauge as `what`), made by `threads` threads (`None`: as many as keep the device busy).
pub fn synthetic_bases<D: Device, C: SyntheticCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    table: &[C],
    seed: u32,
    n: usize,
    threads: Option<usize>,
    what: &str,
) -> DeviceResult<DeviceBuffer<D>> {
    let log = table.len().trailing_zeros();
    if table.len() < 2 || !table.len().is_power_of_two() {
        return Err(DeviceError::new(
            what,
            format!(
                "a table of {} points is not a power of two >= 2",
                table.len()
            ),
        ));
    }
    let count = u32::try_from(n)
        .map_err(|_| DeviceError::new(what, format!("{n} bases: at most 2^32 - 1")))?;
    let out = gpu.alloc(n as u64 * C::AFFINE_BYTES, what)?;
    if n == 0 {
        return Ok(out);
    }
    let t = gpu.upload_scratch(q, table, "synthetic table")?;
    let units = gpu.device.info().compute_units.max(1) as usize;
    let threads = threads.unwrap_or(units * THREADS_PER_UNIT).clamp(1, n);
    launch_threads(
        q,
        C::synthetic_kernel(gpu),
        threads,
        &[
            Arg::Buffer(t.raw()),
            Arg::U32(log),
            Arg::U32(seed),
            Arg::U32(count),
            Arg::U32(threads as u32),
            Arg::Buffer(out.raw()),
        ],
    )?;
    q.synchronize()?;
    drop(t);
    Ok(out)
}

/// A synthetic proving key: a shape and a seed. Its bases exist only on a device
/// ([`crate::accelerator::GpuAccelerator::prepare_synthetic`]), or on the host for small keys
/// ([`SyntheticKey::host_parameters`], the conformance suite's reference); its verifying key is
/// a placeholder of generator points, so nothing proven with it is a proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntheticKey {
    /// The queries' sizes.
    pub shape: KeyShape,
    /// The seed of the tables and of every query's indices.
    pub seed: u64,
    /// Points in each table, as a power of two ([`TABLE_LOG`] unless a test wants it small).
    pub table_log: u32,
}

/// The queries of a key, in the order their seeds are derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// The H query (`domain - 1` points).
    H,
    /// The L query.
    L,
    /// The A query.
    A,
    /// The B query in G1.
    BG1,
    /// The B query in G2.
    BG2,
}

impl SyntheticKey {
    /// A key of `shape` from `seed`, with tables of [`TABLE_LOG`].
    pub fn new(shape: KeyShape, seed: u64) -> Self {
        SyntheticKey {
            shape,
            seed,
            table_log: TABLE_LOG,
        }
    }

    /// The seed of `query`'s indices.
    pub fn query_seed(&self, query: Query) -> u32 {
        mix(self.seed as u32 ^ mix((self.seed >> 32) as u32 ^ (query as u32 + 1)))
    }

    /// The query's length.
    pub fn len(&self, query: Query) -> usize {
        let s = &self.shape;
        match query {
            Query::H => s.domain - 1,
            Query::L => s.l,
            Query::A => s.a,
            Query::BG1 => s.b_g1,
            Query::BG2 => s.b_g2,
        }
    }

    /// Whether every query is empty.
    pub fn is_empty(&self) -> bool {
        [Query::H, Query::L, Query::A, Query::BG1, Query::BG2]
            .iter()
            .all(|q| self.len(*q) == 0)
    }

    /// The G1 and G2 tables.
    pub fn tables(&self) -> (Vec<G1Affine>, Vec<G2Affine>) {
        let ((t1, _), (t2, _)) = self.tables_with_logs();
        (t1, t2)
    }

    /// The G1 and G2 tables with their points' logarithms ([`table_with_logs`]).
    #[allow(clippy::type_complexity)]
    pub fn tables_with_logs(&self) -> ((Vec<G1Affine>, Vec<Scalar>), (Vec<G2Affine>, Vec<Scalar>)) {
        (
            table_with_logs(self.table_log, self.seed),
            table_with_logs(self.table_log, self.seed ^ 0x5eed_0000_0000_0002),
        )
    }

    /// Checks a synthetic partition's sums, `out` (an accelerator's output for a partition
    /// against this key): the L, A and B sums (b_g2 where the accelerator made it) equal their
    /// known answers, from the scalars its plan and witness give each base and the bases'
    /// logarithms ([`known_msm`]'s arithmetic); the H sum, whose scalars the device computed,
    /// is a point of G1's prime-order subgroup other than the identity. On the host (on every
    /// core: seconds for a 2^27 partition). The first wrong sum, named.
    pub fn check_sums(&self, out: &PendingProof) -> Result<(), String> {
        if !in_subgroup_not_identity(&out.sums.h) {
            return Err("the H sum is not a point of G1's subgroup other than the identity".into());
        }
        let ((_, l1), (_, l2)) = self.tables_with_logs();
        let plan = &out.plan;
        let sum_of = |terms: &[&MsmTerm], query: Query, logs: &[Scalar]| {
            let scan = Scan::new(terms.iter().copied(), &out.witness)
                .map_err(|e| format!("the {query:?} query's scalars: {e}"))?;
            scanned_log(logs, self.query_seed(query), &scan)
                .ok_or_else(|| format!("the {query:?} query has a scalar that is not canonical"))
        };
        let g1 = [
            (Query::L, vec![&plan.l], out.sums.l),
            (Query::A, plan.a.iter().collect(), out.sums.a),
            (Query::BG1, plan.b.iter().collect(), out.sums.b_g1),
        ];
        for (query, terms, got) in g1 {
            let want = G1Affine::generator_times(sum_of(&terms, query, &l1)?);
            if got != want {
                return Err(format!("the {query:?} sum is not its known answer"));
            }
        }
        if let Some(got) = out.b_g2 {
            let terms: Vec<&MsmTerm> = plan.b.iter().collect();
            let want = G2Affine::generator_times(sum_of(&terms, Query::BG2, &l2)?);
            if got != want {
                return Err("the BG2 sum is not its known answer".into());
            }
        }
        Ok(())
    }

    /// Device bytes of every base.
    pub fn bases_bytes(&self) -> u64 {
        let g1 =
            self.len(Query::H) + self.len(Query::L) + self.len(Query::A) + self.len(Query::BG1);
        g1 as u64 * G1Affine::AFFINE_BYTES + self.len(Query::BG2) as u64 * G2Affine::AFFINE_BYTES
    }

    /// The placeholder verifying key (generator points; `shape.inputs` ic points).
    pub fn placeholder_vk(&self) -> VerifyingKey {
        let (g1, g2) = (G1Affine::generator(), G2Affine::generator());
        VerifyingKey {
            alpha_g1: g1,
            beta_g1: g1,
            beta_g2: g2,
            gamma_g2: g2,
            delta_g1: g1,
            delta_g2: g2,
            ic: vec![g1; self.shape.inputs.max(1)],
        }
    }

    /// A parameter set with no host bases: what a prepared synthetic key carries.
    pub fn shape_only_parameters(&self) -> Parameters {
        Parameters {
            vk: self.placeholder_vk(),
            h: Default::default(),
            l: Default::default(),
            a: Default::default(),
            b_g1: Default::default(),
            b_g2: Default::default(),
        }
    }

    /// Every base on the host (the CPU's reference; small keys only).
    pub fn host_parameters(&self) -> Parameters {
        let (t1, t2) = self.tables();
        let g1 = |q| {
            let seed = self.query_seed(q);
            (0..self.len(q) as u32)
                .map(|i| synthetic_base(&t1, seed, i))
                .collect()
        };
        let seed = self.query_seed(Query::BG2);
        Parameters {
            vk: self.placeholder_vk(),
            h: g1(Query::H),
            l: g1(Query::L),
            a: g1(Query::A),
            b_g1: g1(Query::BG1),
            b_g2: (0..self.len(Query::BG2) as u32)
                .map(|i| synthetic_base(&t2, seed, i))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_never_equal_and_stay_in_the_table() {
        for log in [1, 2, 5, 16] {
            for i in 0..2000 {
                let (u, v) = pair(12345, i, log);
                assert!(u != v && u < 1 << log && v < 1 << log, "{log} {i}: {u} {v}");
            }
        }
        // Another seed picks other pairs.
        let a: Vec<_> = (0..64).map(|i| pair(1, i, 16)).collect();
        let b: Vec<_> = (0..64).map(|i| pair(2, i, 16)).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn tables_are_seeded_and_their_points_distinct() {
        let t = table::<G1Affine>(4, 9);
        assert_eq!(t.len(), 16);
        assert_eq!(t, table::<G1Affine>(4, 9));
        assert_ne!(t, table::<G1Affine>(4, 10));
        assert!(t
            .iter()
            .all(|p| bool::from(p.is_on_curve()) && !bool::from(p.is_identity())));
        let s = synthetic_base(&t, 3, 0);
        let (u, v) = pair(3, 0, 4);
        assert_eq!(s, (G1Projective::from(t[u]) + t[v]).to_affine());
        let t2 = table::<G2Affine>(2, 9);
        assert!(bool::from(synthetic_base(&t2, 3, 5).is_on_curve()));
    }

    /// A plain CPU MSM: `sum_i scalars_i points_i`.
    fn plain_msm<C: SyntheticCurve>(points: &[C], scalars: &[ScalarBytes]) -> C::Projective
    where
        C::Projective: From<C>,
        C::Projective: std::ops::Mul<Scalar, Output = C::Projective>,
    {
        points
            .iter()
            .zip(scalars)
            .map(|(p, s)| C::Projective::from(*p) * s.to_scalar().unwrap())
            .fold(C::Projective::identity(), |a, b| a + b)
    }

    fn known_answer_is_a_plain_msm<C: SyntheticCurve>(n: u32)
    where
        C::Projective: From<C> + std::ops::Mul<Scalar, Output = C::Projective> + std::fmt::Debug,
    {
        let mut rng = rand::thread_rng();
        let (t, logs) = table_with_logs::<C>(3, rand::Rng::gen(&mut rng));
        assert_eq!(
            t,
            C::generator_products(&logs),
            "the logarithms are the table's"
        );
        let seed = rand::Rng::gen(&mut rng);
        let bases: Vec<C> = (0..n).map(|i| synthetic_base(&t, seed, i)).collect();
        let mut scalars: Vec<ScalarBytes> = (0..n)
            .map(|_| ScalarBytes::from_scalar(&Scalar::random(&mut rng)))
            .collect();
        scalars[1] = ScalarBytes::from_scalar(&Scalar::ZERO);
        scalars[2] = ScalarBytes::from_scalar(&Scalar::ONE);
        let want = plain_msm(&bases, &scalars);
        let got = known_msm::<C>(&logs, seed, &scalars).expect("canonical scalars");
        assert_eq!(got, want, "{} bases", C::NAME);
        // Negative twins: another query's seed, or one scalar changed, gives another sum; a
        // scalar that is not canonical (p itself) has none.
        assert_ne!(known_msm::<C>(&logs, seed ^ 1, &scalars), Some(want));
        let mut bad = scalars.clone();
        bad[n as usize - 1] = ScalarBytes::from_scalar(&Scalar::from(5u64));
        assert_ne!(known_msm::<C>(&logs, seed, &bad), Some(want));
        bad[0] = ScalarBytes([0xff; 32]);
        assert_eq!(known_msm::<C>(&logs, seed, &bad), None);
    }

    #[test]
    fn the_known_answer_of_an_msm_over_synthetic_bases_is_the_plain_msms() {
        known_answer_is_a_plain_msm::<G1Affine>(300);
        known_answer_is_a_plain_msm::<G2Affine>(40);
    }

    /// A query's sum over host bases, term by term: the `k`-th used scalar of a term against its
    /// base `bases.start + k`.
    fn query_sum<C: SyntheticCurve>(
        bases: &[C],
        terms: &[&MsmTerm],
        w: &prover_core::stages::Witness,
    ) -> C::Projective
    where
        C::Projective: From<C> + std::ops::Mul<Scalar, Output = C::Projective>,
    {
        let mut sum = C::Projective::identity();
        for t in terms {
            let scalars = t.scalars(w);
            let used: Vec<&ScalarBytes> = match t.density(w) {
                Some(d) => (0..scalars.len())
                    .filter(|&j| d.get(j))
                    .map(|j| &scalars[j])
                    .collect(),
                None => scalars.iter().collect(),
            };
            assert_eq!(used.len(), t.bases.len());
            let points = &bases[t.bases.clone()];
            let owned: Vec<ScalarBytes> = used.into_iter().copied().collect();
            sum += plain_msm(points, &owned);
        }
        sum
    }

    #[test]
    fn a_synthetic_partitions_sums_check_against_their_known_answers() {
        use proofline_workloads::synthetic::{key_shape, SyntheticSpec};
        use prover_core::stages::plan::QueryPlan;
        use prover_core::AcceleratorSums;
        let mut rng = rand::thread_rng();
        let partition = SyntheticSpec::scaled(9).partition(rand::Rng::gen(&mut rng));
        let key = SyntheticKey {
            table_log: 5,
            ..SyntheticKey::new(key_shape(&partition), rand::Rng::gen(&mut rng))
        };
        let plan = QueryPlan::for_key(&partition, &key.shape).unwrap();
        let w = partition.witness;
        // The CPU's sums over the bases made on the host; H any point of the subgroup.
        let p = key.host_parameters();
        let b: Vec<&MsmTerm> = plan.b.iter().collect();
        let sums = AcceleratorSums {
            h: G1Projective::random(&mut rng),
            l: query_sum(&p.l, &[&plan.l], &w),
            a: query_sum(&p.a, &plan.a.iter().collect::<Vec<_>>(), &w),
            b_g1: query_sum(&p.b_g1, &b, &w),
        };
        let b_g2 = query_sum(&p.b_g2, &b, &w);
        let out = |sums: AcceleratorSums, b_g2| PendingProof {
            sums,
            b_g2: Some(b_g2),
            plan: plan.clone(),
            witness: w.clone(),
            spent: None,
        };
        assert_eq!(key.check_sums(&out(sums, b_g2)), Ok(()));
        // Negative twins: each sum off by the generator, and an identity H, are named.
        let g = G1Projective::generator();
        for (bad, name) in [
            (
                AcceleratorSums {
                    l: sums.l + g,
                    ..sums
                },
                "L sum",
            ),
            (
                AcceleratorSums {
                    a: sums.a + g,
                    ..sums
                },
                "A sum",
            ),
            (
                AcceleratorSums {
                    b_g1: sums.b_g1 + g,
                    ..sums
                },
                "BG1 sum",
            ),
            (
                AcceleratorSums {
                    h: G1Projective::identity(),
                    ..sums
                },
                "H sum",
            ),
        ] {
            let err = key.check_sums(&out(bad, b_g2)).unwrap_err();
            assert!(err.contains(name), "{name}: {err}");
        }
        let err = key
            .check_sums(&out(sums, b_g2 + G2Projective::generator()))
            .unwrap_err();
        assert!(err.contains("BG2 sum"), "{err}");
        // Another key's tables give other answers.
        let other = SyntheticKey {
            seed: key.seed ^ 1,
            ..key
        };
        assert!(other.check_sums(&out(sums, b_g2)).is_err());
    }
}
