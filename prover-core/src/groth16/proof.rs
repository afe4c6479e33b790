//! The Groth16 proof: compressed A (G1), B (G2), C (G1), 192 bytes, as bellperson writes it.

use blstrs::{G1Affine, G2Affine};

use crate::error::{Error, Result};
use crate::groth16::encoding::EncodedPoint;

/// A Groth16 proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proof {
    /// `A = alpha + sum_i a_i u_i(tau) + r * delta`, in G1.
    pub a: G1Affine,
    /// `B = beta + sum_i a_i v_i(tau) + s * delta`, in G2.
    pub b: G2Affine,
    /// `C = (sum_aux a_j L_j + h(tau) t(tau)) / delta + s * A + r * B - r * s * delta`, in G1.
    pub c: G1Affine,
}

impl Proof {
    /// Size of an encoded proof in bytes.
    pub const SIZE: usize = 192;

    /// Encodes the proof (compressed A, B, C).
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut v = Vec::with_capacity(Self::SIZE);
        self.a.encode_compressed(&mut v);
        self.b.encode_compressed(&mut v);
        self.c.encode_compressed(&mut v);
        v.try_into().expect("a proof encodes to 192 bytes")
    }

    /// Decodes a proof of exactly 192 bytes, checking every point fully; the identity is
    /// rejected in all three, as bellperson does.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != Self::SIZE {
            return Err(Error::Malformed {
                what: "proof",
                detail: format!("expected {} bytes, got {}", Self::SIZE, bytes.len()),
            });
        }
        let point = |what, index| {
            move |reason| Error::InvalidPoint {
                what,
                index,
                reason,
            }
        };
        Ok(Proof {
            a: G1Affine::decode_compressed(&bytes[..48]).map_err(point("proof.a", 0))?,
            b: G2Affine::decode_compressed(&bytes[48..144]).map_err(point("proof.b", 0))?,
            c: G1Affine::decode_compressed(&bytes[144..]).map_err(point("proof.c", 0))?,
        })
    }

    /// Encodes proofs concatenated in order (Filecoin's `MultiProof` layout).
    pub fn many_to_bytes(proofs: &[Proof]) -> Vec<u8> {
        proofs.iter().flat_map(Proof::to_bytes).collect()
    }

    /// Decodes proofs concatenated in order (Filecoin's `MultiProof` layout).
    pub fn many_from_bytes(bytes: &[u8]) -> Result<Vec<Self>> {
        if bytes.len() % Self::SIZE != 0 {
            return Err(Error::Malformed {
                what: "proofs",
                detail: format!(
                    "{} bytes is not a multiple of the {}-byte proof size",
                    bytes.len(),
                    Self::SIZE
                ),
            });
        }
        bytes
            .chunks_exact(Self::SIZE)
            .map(Self::from_bytes)
            .collect()
    }
}
