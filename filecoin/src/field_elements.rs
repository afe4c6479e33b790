//! The field elements of a C1 output checked in its JSON text as it is read, without building
//! the document in memory (a `serde_json::Value` of a C1 output takes about nine times the
//! text's bytes: a gigabyte for a 32 GiB sector's).

use std::fmt::{self, Write};

use anyhow::{anyhow, Result};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Keys whose 32 bytes are not field elements (the interactive randomness).
const NOT_FIELD_ELEMENTS: [&str; 2] = ["seed", "ticket"];

/// Checks every field element of a C1 output in its JSON form: every array of 32 byte values
/// (a commitment, the replica id, a tree node or path hash in a vanilla proof) must be a
/// canonical BLS12-381 scalar (little endian, below the modulus), or filecoin-proofs panics on
/// it. The error names the first bad one by its path in the file (`vanilla_proofs[0][3]...`);
/// text that is not JSON is an error too. Memory: the path and one array's 32 bytes.
pub fn check_field_elements(json: &[u8]) -> Result<()> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let mut path = String::new();
    let walked = Walk { path: &mut path }
        .deserialize(&mut de)
        .and_then(|_| de.end());
    walked.map_err(|e| match e.is_data() {
        // A bad element: the message the walk gave, without serde's position.
        true => anyhow!("{}", strip_position(&e.to_string())),
        false => anyhow!("the C1 output is not JSON: {e}"),
    })
}

/// serde_json appends " at line L column C" to a custom message.
fn strip_position(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |at| &message[..at])
}

/// What one value was, for the array that holds it.
enum Seen {
    Byte(u8),
    Other,
}

/// Walks one value, checking the 32-byte arrays in it; `path` names it.
struct Walk<'a> {
    path: &'a mut String,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = Seen;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Seen, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = Seen;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a C1 output's JSON")
    }

    fn visit_u64<E>(self, v: u64) -> Result<Seen, E> {
        Ok(u8::try_from(v).map_or(Seen::Other, Seen::Byte))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Seen, E> {
        Ok(u8::try_from(v).map_or(Seen::Other, Seen::Byte))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Seen, E> {
        Ok(Seen::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Seen, E> {
        Ok(Seen::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Seen, E> {
        Ok(Seen::Other)
    }

    fn visit_unit<E>(self) -> Result<Seen, E> {
        Ok(Seen::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Seen, A::Error> {
        // The bytes so far while every item is a byte; `None` once one is not.
        let mut bytes: Option<Vec<u8>> = Some(Vec::with_capacity(32));
        let mut i = 0usize;
        loop {
            let len = self.path.len();
            let _ = write!(self.path, "[{i}]");
            let item = seq.next_element_seed(Walk {
                path: &mut *self.path,
            })?;
            self.path.truncate(len);
            match item {
                None => break,
                Some(Seen::Byte(b)) => {
                    if let Some(v) = bytes.as_mut().filter(|v| v.len() < 33) {
                        v.push(b);
                    }
                }
                Some(Seen::Other) => bytes = None,
            }
            i += 1;
        }
        if let Some(repr) = bytes.and_then(|v| <[u8; 32]>::try_from(v).ok()) {
            if !bool::from(blstrs::Scalar::from_bytes_le(&repr).is_some()) {
                return Err(serde::de::Error::custom(format!(
                    "the C1 output's {} is not a canonical field element (32 little-endian \
                     bytes below the BLS12-381 scalar modulus): the file is damaged or not \
                     from a C1 of this proof",
                    self.path
                )));
            }
        }
        Ok(Seen::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Seen, A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if NOT_FIELD_ELEMENTS.contains(&key.as_str()) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let len = self.path.len();
            if !self.path.is_empty() {
                self.path.push('.');
            }
            self.path.push_str(&key);
            map.next_value_seed(Walk {
                path: &mut *self.path,
            })?;
            self.path.truncate(len);
        }
        Ok(Seen::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(fill: u8) -> String {
        format!("[{}]", vec![fill.to_string(); 32].join(","))
    }

    #[test]
    fn a_non_canonical_element_is_named_by_its_path() {
        // 0xff in the top byte is above the modulus; zeros are canonical.
        let good = format!(
            r#"{{"a": [{z}, {z}], "seed": {ff}}}"#,
            z = bytes(0),
            ff = bytes(255)
        );
        check_field_elements(good.as_bytes()).unwrap();
        let bad = format!(r#"{{"a": [{z}, {ff}]}}"#, z = bytes(0), ff = bytes(255));
        let err = check_field_elements(bad.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("the C1 output's a[1] is not a canonical"),
            "{err}"
        );
        assert!(!err.contains("at line"), "{err}");
    }

    #[test]
    fn arrays_of_other_lengths_or_values_are_not_elements() {
        // 31 or 33 bytes, or a value above 255 among them: not a field element, not checked.
        for text in [
            format!("[{}]", vec!["255"; 31].join(",")),
            format!("[{}]", vec!["255"; 33].join(",")),
            format!("[256,{}]", vec!["255"; 31].join(",")),
        ] {
            check_field_elements(text.as_bytes()).unwrap();
        }
        // Twin: 32 of them is checked.
        assert!(check_field_elements(bytes(255).as_bytes()).is_err());
    }

    #[test]
    fn text_that_is_not_json_is_an_error() {
        let err = check_field_elements(b"{\"a\": [1, 2")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("the C1 output is not JSON"), "{err}");
        let err = check_field_elements(b"{} trailing")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("the C1 output is not JSON"), "{err}");
    }
}
