//! The 0/1 split classified on the device against the host scan.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use gpu_core::device::Device;
use gpu_core::msm::{DeviceScan, DeviceWitness, Scan};
use gpu_core::GpuDevice;
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::stages::density::{Density, ScalarBytes};
use prover_core::stages::plan::{Filter, MsmTerm, ScalarSource};
use prover_core::stages::Witness;
use rand::Rng;

/// The 0/1 split classified on the device lists what the host scan lists, for the prover's
/// three query layouts (L: every aux variable; A: the inputs, then the aux variables A uses;
/// B: the inputs and the aux variables B uses), sizes around the 32-scalar blocks, scalars
/// zero, one, two, 2^64 + 1 (a low word of one) and random. A changed scalar changes the
/// lists; bases that do not match the used variables, and a density of the wrong length, are
/// refused with the reason.
pub fn check_device_scan<D: Device>(gpu: &GpuDevice<D>) {
    let mut rng = rand::thread_rng();
    let mut q = gpu.device.queue().unwrap();
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let low_one = Scalar::from_u128((1u128 << 64) + 1);
    let pick = |rng: &mut rand::rngs::ThreadRng| {
        let s = match rng.gen_range(0..6) {
            0 | 1 => Scalar::ZERO,
            2 => Scalar::ONE,
            3 => Scalar::from(2u64),
            4 => low_one,
            _ => Scalar::random(&mut *rng),
        };
        ScalarBytes::from_scalar(&s)
    };
    let density = |n: usize, rng: &mut rand::rngs::ThreadRng| {
        let mut d = Density::default();
        for j in 0..n {
            d.push_unset();
            if rng.gen_bool(0.7) {
                d.set(j);
            }
        }
        d
    };
    for (ni, na) in [
        (1, 0),
        (1, 1),
        (3, 31),
        (1, 32),
        (33, 33),
        (2, 64),
        (5, 1000),
        (9, 4099),
    ] {
        let input: Vec<ScalarBytes> = (0..ni).map(|_| pick(&mut rng)).collect();
        let aux: Vec<ScalarBytes> = (0..na).map(|_| pick(&mut rng)).collect();
        let w = Witness {
            input,
            aux,
            a_aux_density: density(na, &mut rng),
            b_input_density: density(ni, &mut rng),
            b_aux_density: density(na, &mut rng),
        };
        let term = |bases: std::ops::Range<usize>, source, filter| MsmTerm {
            bases,
            source,
            filter,
        };
        let (a_used, bi_used) = (w.a_aux_density.count_ones(), w.b_input_density.count_ones());
        let b_used = w.b_aux_density.count_ones();
        let queries = [
            vec![term(0..na, ScalarSource::Aux, Filter::All)],
            vec![
                term(0..ni, ScalarSource::Input, Filter::All),
                term(ni..ni + a_used, ScalarSource::Aux, Filter::AAux),
            ],
            vec![
                term(0..bi_used, ScalarSource::Input, Filter::BInput),
                term(bi_used..bi_used + b_used, ScalarSource::Aux, Filter::BAux),
            ],
        ];
        let mut buffers = token.backend_buffers();
        let dw = DeviceWitness::upload(gpu, &mut q, &w, &mut buffers).unwrap();
        for terms in &queries {
            let what = format!("inputs {ni} aux {na} {:?}", terms.last().map(|t| t.filter));
            let want = Scan::new(terms, &w).unwrap();
            let ds = DeviceScan::new(gpu, &mut q, terms, &w, &dw, &mut buffers)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = ds.read(&mut q).unwrap();
            assert_eq!(got, want, "{what}");
            assert_eq!((ds.n_ones, ds.n_others), (want.ones.len(), want.idx.len()));
            ds.release(&mut buffers);
            // Negative twin: the first used one made a two lists it with the others.
            if let Some(&first) = want.ones.first() {
                let mut bad = w.clone();
                let (t, k) = terms
                    .iter()
                    .find(|t| t.bases.contains(&(first as usize)))
                    .map(|t| (t, first as usize - t.bases.start))
                    .unwrap();
                let j = match t.density(&w) {
                    Some(d) => (0..d.len()).filter(|&j| d.get(j)).nth(k).unwrap(),
                    None => k,
                };
                let two = ScalarBytes::from_scalar(&Scalar::from(2u64));
                match t.source {
                    ScalarSource::Input => bad.input[j] = two,
                    ScalarSource::Aux => bad.aux[j] = two,
                }
                let bdw = DeviceWitness::upload(gpu, &mut q, &bad, &mut buffers).unwrap();
                let ds = DeviceScan::new(gpu, &mut q, terms, &bad, &bdw, &mut buffers).unwrap();
                let got = ds.read(&mut q).unwrap();
                assert_ne!(got, want, "{what}: twin");
                assert_eq!(got, Scan::new(terms, &bad).unwrap(), "{what}: twin's lists");
                ds.release(&mut buffers);
                bdw.release(&mut buffers);
            }
        }
        // Bases one short of the used variables, and a density of the wrong length.
        let short = term(0..na.saturating_sub(1), ScalarSource::Aux, Filter::All);
        if na > 0 {
            let err = DeviceScan::new(gpu, &mut q, [&short], &w, &dw, &mut buffers)
                .err()
                .expect("a short term is refused")
                .to_string();
            assert!(err.contains("used scalars for"), "{err}");
        }
        let mut odd = w.clone();
        odd.a_aux_density.push_unset();
        let err = DeviceScan::new(gpu, &mut q, &queries[1], &odd, &dw, &mut buffers)
            .err()
            .expect("a density of the wrong length is refused")
            .to_string();
        assert!(err.contains("a density of"), "{err}");
        dw.release(&mut buffers);
    }
}
