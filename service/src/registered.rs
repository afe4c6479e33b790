//! The registered proof numbers Curio sends (Go's `abi.RegisteredSealProof`,
//! `abi.RegisteredUpdateProof` and `abi.RegisteredPoStProof`), as proofline's types.
//!
//! Each family lists the five registered sector sizes in order (2 KiB, 8 MiB, 512 MiB, 32 GiB,
//! 64 GiB): seal proofs 0-4 are V1, 5-9 V1_1, 10-14 V1_1 with Synthetic PoRep, 15-19 V1_2
//! Non-Interactive PoRep; update proofs 0-4; PoSt proofs 0-4 are WinningPoSt, 5-9 WindowPoSt V1
//! and 10-14 WindowPoSt V1_1 (served as filecoin-proofs-api's V1_2, which is what Curio's and
//! Lotus' V1_1 numbers map to).

use proofline_filecoin::storage_proofs_core::api_version::ApiVersion;
use proofline_filecoin::variant::SealVariant;

/// The registered sector sizes, in the order every family lists them.
pub const SECTOR_SIZES: [u64; 5] = [2 << 10, 8 << 20, 512 << 20, 32 << 30, 64 << 30];

/// A seal proof number: its variant and sector size.
pub fn seal(number: u64) -> Option<(SealVariant, u64)> {
    let variant = match number / 5 {
        0 => SealVariant::V1,
        1 => SealVariant::V1_1,
        2 => SealVariant::Synthetic,
        3 => SealVariant::NonInteractive,
        _ => return None,
    };
    Some((variant, SECTOR_SIZES[(number % 5) as usize]))
}

/// The seal proof number of `variant` at a registered `sector_size` (the inverse of [`seal`]).
pub fn seal_number(variant: SealVariant, sector_size: u64) -> Option<u64> {
    (0..20).find(|&n| seal(n) == Some((variant, sector_size)))
}

/// An update proof number: its sector size.
pub fn update(number: u64) -> Option<u64> {
    SECTOR_SIZES.get(usize::try_from(number).ok()?).copied()
}

/// A PoSt proof's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostKind {
    /// WinningPoSt (numbers 0-4).
    Winning,
    /// WindowPoSt at filecoin-proofs' API `api` (V1_0 for 5-9, V1_2 for 10-14).
    Window(ApiVersion),
}

/// A PoSt proof number: its type and sector size.
pub fn post(number: u64) -> Option<(PostKind, u64)> {
    let kind = match number / 5 {
        0 => PostKind::Winning,
        1 => PostKind::Window(ApiVersion::V1_0_0),
        2 => PostKind::Window(ApiVersion::V1_2_0),
        _ => return None,
    };
    Some((kind, SECTOR_SIZES[(number % 5) as usize]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_map_to_filecoin_proofs_registered_proofs() {
        // Every seal number is filecoin-proofs-api's proof of that variant and size.
        for n in 0..20 {
            let (variant, size) = seal(n).unwrap();
            let proof = variant.registered(size).expect("a registered size");
            assert_eq!(u64::from(proof.sector_size()), size, "{n}");
            assert_eq!(SealVariant::of(proof), variant, "{n}");
        }
        assert_eq!(seal(20), None);
        assert_eq!(seal(u64::MAX), None);
        assert_eq!(update(3), Some(32 << 30));
        assert_eq!(update(5), None);
        assert_eq!(update(u64::MAX), None);
        assert_eq!(post(4), Some((PostKind::Winning, 64 << 30)));
        assert_eq!(
            post(8),
            Some((PostKind::Window(ApiVersion::V1_0_0), 32 << 30))
        );
        assert_eq!(
            post(10),
            Some((PostKind::Window(ApiVersion::V1_2_0), 2 << 10))
        );
        assert_eq!(post(15), None);
    }
}
