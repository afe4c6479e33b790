//! Synthetic bases made on the device (`synthetic.cl`), for timing workloads whose proving key
//! cannot be generated (a 32 GiB PoRep partition's: about 47 GB of points): base `i` of a
//! query is `T[u_i] + T[v_i]` for a host table `T` of `2^TABLE_LOG` random points and indices
//! hashed from the query's seed and `i`. Distinct in practice, with logarithms nobody knows, so
//! the MSMs do the work they do on a real key. The same bases are computed on the CPU
//! ([`synthetic_base`]) for the conformance suite.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use prover_core::generator::fixed_base::FixedBase;
use prover_core::{CpuMultiplier, KeyShape, Multiplier, Parameters, VerifyingKey};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::context::{launch_threads, GpuDevice};
use crate::device::{bytes_of, Arg, Device, DeviceError, DeviceResult, Queue};
use crate::memory::DeviceBuffer;
use crate::msm::DeviceCurve;

/// Points in the host tables (2^16: 2^32 index pairs, so 130M bases repeat one pair in about
/// 2,000 on average).
pub const TABLE_LOG: u32 = 16;

/// Threads per compute unit of a launch (each makes `n / threads` bases with one inversion).
const THREADS_PER_UNIT: usize = 1024;

/// A curve whose synthetic bases the device makes.
pub trait SyntheticCurve: DeviceCurve + Default + PartialEq + std::fmt::Debug {
    /// `2^log` random points from `seed` (the generator's fixed-base products by random nonzero
    /// scalars), on every core.
    fn random_points(log: u32, seed: u64) -> Vec<Self>;
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
    fn random_points(log: u32, seed: u64) -> Vec<Self> {
        let n = 1usize << log;
        let base = FixedBase::new(G1Projective::generator(), n);
        CpuMultiplier
            .g1(&base, &scalars(n, seed))
            .expect("the CPU multiplier does not fail")
    }
    fn sum(a: &Self, b: &Self) -> Self {
        (G1Projective::from(a) + b).to_affine()
    }
}

impl SyntheticCurve for G2Affine {
    fn random_points(log: u32, seed: u64) -> Vec<Self> {
        let n = 1usize << log;
        let base = FixedBase::new(G2Projective::generator(), n);
        CpuMultiplier
            .g2(&base, &scalars(n, seed))
            .expect("the CPU multiplier does not fail")
    }
    fn sum(a: &Self, b: &Self) -> Self {
        (G2Projective::from(a) + b).to_affine()
    }
}

/// A table for [`synthetic_bases`]: `2^log` random points whose x coordinates are pairwise
/// distinct (so no sum the kernel forms is a doubling or the identity), from `seed`.
pub fn table<C: SyntheticCurve>(log: u32, seed: u64) -> Vec<C> {
    assert!((1..=24).contains(&log), "a table of 2^{log} points");
    let mut seed = seed;
    loop {
        let t = C::random_points(log, seed);
        let half = (C::AFFINE_BYTES / 2) as usize;
        let mut xs: Vec<&[u8]> = bytes_of(&t)
            .chunks(C::AFFINE_BYTES as usize)
            .map(|p| &p[..half])
            .collect();
        xs.sort_unstable();
        // A repeated x (P and -P, or P twice) has probability about 2^-350: draw again.
        if xs.windows(2).all(|w| w[0] != w[1]) {
            return t;
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
/// ([`crate::GpuAccelerator::prepare_synthetic`]), or on the host for small keys
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
        (
            table(self.table_log, self.seed),
            table(self.table_log, self.seed ^ 0x5eed_0000_0000_0002),
        )
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
            h: Vec::new(),
            l: Vec::new(),
            a: Vec::new(),
            b_g1: Vec::new(),
            b_g2: Vec::new(),
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
}
