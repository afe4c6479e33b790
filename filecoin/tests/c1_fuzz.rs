//! Mutated C1 outputs into the reader and the circuit builder: an error or circuits, never a
//! panic. Its own test binary: building circuits reads filecoin-proofs' settings, which
//! `porep.rs` sets for its end-to-end test before first use.

use filecoin_proofs::{SECTOR_SIZE_16_KIB, SECTOR_SIZE_2_KIB};
use proofline_filecoin::c1::{read_c1, AnyC1, C1File};
use proofline_filecoin::porep;
use proofline_filecoin::variant::{SealSpec, SealVariant};

/// Every number of a C1 output's JSON, in a list, by its path of object keys and indices.
fn numbers(
    v: &serde_json::Value,
    path: &mut Vec<serde_json::Value>,
    out: &mut Vec<Vec<serde_json::Value>>,
) {
    match v {
        serde_json::Value::Number(_) => out.push(path.clone()),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(i.into());
                numbers(x, path, out);
                path.pop();
            }
        }
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                path.push(k.clone().into());
                numbers(x, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut serde_json::Value, path: &[serde_json::Value]) -> &'a mut serde_json::Value {
    path.iter().fold(v, |v, k| match k {
        serde_json::Value::String(s) => &mut v[s.as_str()],
        k => &mut v[k.as_u64().unwrap() as usize],
    })
}

/// Damaged C1 outputs of a 2 KiB sector (the wrapper, as Lotus and Curio hand it) and of a
/// 16 KiB sector (the 32 GiB tree shape; the raw form, the only one a test size has).
#[test]
fn mutated_c1_outputs_are_errors_or_circuits_never_panics() {
    use rand::{Rng, RngCore};
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::thread_rng();
    for size in [SECTOR_SIZE_2_KIB, SECTOR_SIZE_16_KIB] {
        let spec = SealSpec::new(size, SealVariant::V1_1, None).unwrap();
        let sealed = porep::seal_c1(&spec, &dir.path().join(format!("s{size}")), &mut rng).unwrap();
        let json: serde_json::Value = match sealed.wrapped() {
            Some(w) => serde_json::to_value(w.unwrap()).unwrap(),
            None => serde_json::from_slice(&sealed.c1.to_json().unwrap()).unwrap(),
        };
        let mut paths = Vec::new();
        numbers(&json, &mut Vec::new(), &mut paths);
        let config = sealed.config().unwrap();
        let (mut refused, mut built) = (0, 0);
        for case in 0..30 {
            let mut bad = json.clone();
            for _ in 0..rng.gen_range(1..4) {
                let path = &paths[rng.gen_range(0..paths.len())];
                *at(&mut bad, path) = match case % 3 {
                    0 => serde_json::json!(rng.gen::<u8>()),
                    1 => serde_json::json!(rng.next_u64()),
                    _ => serde_json::json!(-1),
                };
            }
            let file = dir.path().join(format!("c1-{size}-{case}.json"));
            std::fs::write(&file, serde_json::to_vec(&bad).unwrap()).unwrap();
            let outcome = std::panic::catch_unwind(|| -> anyhow::Result<usize> {
                let c1 = match read_c1(&file, Some(size))? {
                    C1File::Wrapped(w) => AnyC1::from_wrapped(*w)?,
                    C1File::Raw(r) => r,
                };
                Ok(porep::circuits(&config, &c1)?.len())
            });
            match outcome {
                Ok(Ok(_)) => built += 1,
                Ok(Err(e)) => {
                    assert!(!format!("{e:#}").is_empty());
                    refused += 1;
                }
                Err(_) => {
                    panic!("{size} bytes, case {case}: reading or building the circuits panicked")
                }
            }
        }
        // Twin: the undamaged output builds its circuits.
        assert!(porep::circuits(&config, &sealed.c1).is_ok());
        assert_eq!(refused + built, 30);
    }
}
