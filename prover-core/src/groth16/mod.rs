//! Groth16 on BLS12-381 in bellperson's formats: keys and parameters ([`params`]), proofs
//! ([`proof`]), the point encodings they use, seeded parameter generation ([`generator`]),
//! verification ([`verify`]), the evaluation domain ([`domain`]) and public inputs
//! ([`public`]).

pub(crate) mod assembly;
pub mod domain;
pub(crate) mod encoding;
pub mod generator;
pub mod native;
pub mod params;
pub mod points;
pub mod proof;
pub mod public;
pub(crate) mod shape;
pub mod verify;
