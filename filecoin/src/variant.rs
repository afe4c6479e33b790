//! Which seal proof a sector is proved with: its size, its proof variant (interactive PoRep at
//! API 1.0 or 1.1, Synthetic PoRep, Non-Interactive PoRep) and its PoRep id. Registered sizes
//! take every setting from filecoin-proofs-api's registered proof; the test sizes, which have
//! none, take the API version and features of the same variant's 2 KiB registered proof and a
//! PoRep id given by the caller. Partition and challenge counts always come from filecoin-proofs.

use anyhow::{bail, ensure, Result};
use filecoin_proofs::PoRepConfig;
use filecoin_proofs_api::RegisteredSealProof;
use serde::{Deserialize, Serialize};

use crate::shape::{size_name, Shape};

/// A seal proof variant, as filecoin-proofs-api 19.1 registers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SealVariant {
    /// `StackedDrg*V1`: interactive PoRep, API 1.0.
    #[serde(rename = "v1")]
    V1,
    /// `StackedDrg*V1_1`: interactive PoRep, API 1.1 (what providers seal).
    #[serde(rename = "v1_1")]
    V1_1,
    /// `StackedDrg*V1_1_Feat_SyntheticPoRep`: Synthetic PoRep (API 1.2).
    #[serde(rename = "synthetic")]
    Synthetic,
    /// `StackedDrg*V1_2_Feat_NonInteractivePoRep`: Non-Interactive PoRep (API 1.2).
    #[serde(rename = "ni")]
    NonInteractive,
}

impl SealVariant {
    /// Every variant.
    pub const ALL: [SealVariant; 4] = [
        SealVariant::V1,
        SealVariant::V1_1,
        SealVariant::Synthetic,
        SealVariant::NonInteractive,
    ];

    /// The command line's name: `v1`, `v1_1`, `synthetic`, `ni`.
    pub fn name(self) -> &'static str {
        match self {
            SealVariant::V1 => "v1",
            SealVariant::V1_1 => "v1_1",
            SealVariant::Synthetic => "synthetic",
            SealVariant::NonInteractive => "ni",
        }
    }

    /// Parses [`SealVariant::name`].
    pub fn parse(s: &str) -> Result<SealVariant> {
        let names: Vec<&str> = Self::ALL.iter().map(|v| v.name()).collect();
        Self::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no seal proof variant `{s}`: the variants are {}",
                    names.join(", ")
                )
            })
    }

    /// The registered proof of this variant at a registered sector size.
    pub fn registered(self, sector_size: u64) -> Option<RegisteredSealProof> {
        use RegisteredSealProof::*;
        let by_size = |v1, v1_1, synth, ni| match self {
            SealVariant::V1 => v1,
            SealVariant::V1_1 => v1_1,
            SealVariant::Synthetic => synth,
            SealVariant::NonInteractive => ni,
        };
        Some(match sector_size {
            2_048 => by_size(
                StackedDrg2KiBV1,
                StackedDrg2KiBV1_1,
                StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
                StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
            ),
            8_388_608 => by_size(
                StackedDrg8MiBV1,
                StackedDrg8MiBV1_1,
                StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
                StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
            ),
            536_870_912 => by_size(
                StackedDrg512MiBV1,
                StackedDrg512MiBV1_1,
                StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
                StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
            ),
            34_359_738_368 => by_size(
                StackedDrg32GiBV1,
                StackedDrg32GiBV1_1,
                StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
                StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
            ),
            68_719_476_736 => by_size(
                StackedDrg64GiBV1,
                StackedDrg64GiBV1_1,
                StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
                StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
            ),
            _ => return None,
        })
    }

    /// The variant of a registered proof.
    pub fn of(proof: RegisteredSealProof) -> SealVariant {
        let size = u64::from(proof.sector_size());
        Self::ALL
            .into_iter()
            .find(|v| v.registered(size) == Some(proof))
            .expect("every registered seal proof has a variant")
    }
}

/// A sector's seal proof: size, variant and PoRep id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealSpec {
    /// Sector size in bytes.
    pub sector_size: u64,
    /// The proof variant.
    pub variant: SealVariant,
    /// The PoRep id: the registered proof's at a registered size, the caller's at a test size.
    pub porep_id: [u8; 32],
}

impl SealSpec {
    /// The spec of a registered proof.
    pub fn registered(proof: RegisteredSealProof) -> SealSpec {
        SealSpec {
            sector_size: u64::from(proof.sector_size()),
            variant: SealVariant::of(proof),
            porep_id: proof.as_v1_config().porep_id,
        }
    }

    /// The spec of `variant` at `sector_size`: a registered size takes its registered proof
    /// (and `porep_id`, when given, must be that proof's); a test size takes `porep_id` (all
    /// zeros when not given).
    pub fn new(
        sector_size: u64,
        variant: SealVariant,
        porep_id: Option<[u8; 32]>,
    ) -> Result<SealSpec> {
        Shape::of(sector_size)?;
        if let Some(proof) = variant.registered(sector_size) {
            let spec = SealSpec::registered(proof);
            if let Some(id) = porep_id {
                ensure!(
                    id == spec.porep_id,
                    "{proof:?} has its own PoRep id ({}); --porep-id is for the test sizes \
                     (4KiB, 16KiB, 32KiB, 16MiB, 1GiB), which have no registered proof",
                    crate::porep::to_hex(&spec.porep_id)
                );
            }
            return Ok(spec);
        }
        Ok(SealSpec {
            sector_size,
            variant,
            porep_id: porep_id.unwrap_or([0; 32]),
        })
    }

    /// The tree shape.
    pub fn shape(&self) -> Shape {
        Shape::of(self.sector_size).expect("checked when the spec was made")
    }

    /// The registered proof, at a registered size.
    pub fn registered_proof(&self) -> Option<RegisteredSealProof> {
        self.variant
            .registered(self.sector_size)
            .filter(|p| p.as_v1_config().porep_id == self.porep_id)
    }

    /// filecoin-proofs' config: the registered proof's, or at a test size the one
    /// filecoin-proofs builds for the size, PoRep id, and the API version and features of the
    /// variant's 2 KiB registered proof.
    pub fn config(&self) -> Result<PoRepConfig> {
        if let Some(proof) = self.registered_proof() {
            return Ok(proof.as_v1_config());
        }
        let Some(reference) = self.variant.registered(2_048) else {
            bail!("every variant has a 2 KiB registered proof");
        };
        let reference = reference.as_v1_config();
        let config = PoRepConfig::new_groth16_with_features(
            self.sector_size,
            self.porep_id,
            reference.api_version,
            reference.api_features,
        )?;
        Ok(config)
    }

    /// `32GiB v1_1` or `16KiB synthetic (PoRep id 00..)`.
    pub fn describe(&self) -> String {
        match self.registered_proof() {
            Some(p) => format!(
                "{} {} ({p:?})",
                size_name(self.sector_size),
                self.variant.name()
            ),
            None => format!(
                "{} {} (test size, PoRep id {})",
                size_name(self.sector_size),
                self.variant.name(),
                crate::porep::to_hex(&self.porep_id)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_proof_round_trips_and_its_config_is_filecoin_proofs() {
        use RegisteredSealProof::*;
        let all = [
            StackedDrg2KiBV1,
            StackedDrg8MiBV1,
            StackedDrg512MiBV1,
            StackedDrg32GiBV1,
            StackedDrg64GiBV1,
            StackedDrg2KiBV1_1,
            StackedDrg8MiBV1_1,
            StackedDrg512MiBV1_1,
            StackedDrg32GiBV1_1,
            StackedDrg64GiBV1_1,
            StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
            StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
            StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
            StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
            StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
            StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
            StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
            StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
            StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
            StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
        ];
        for proof in all {
            let spec = SealSpec::registered(proof);
            assert_eq!(spec.registered_proof(), Some(proof));
            let (a, b) = (spec.config().unwrap(), proof.as_v1_config());
            assert_eq!(
                (
                    u64::from(a.sector_size),
                    usize::from(a.partitions),
                    a.porep_id,
                    a.api_version,
                    a.api_features.clone()
                ),
                (
                    u64::from(b.sector_size),
                    usize::from(b.partitions),
                    b.porep_id,
                    b.api_version,
                    b.api_features.clone()
                )
            );
            assert_eq!(
                SealSpec::new(spec.sector_size, spec.variant, None).unwrap(),
                spec
            );
        }
        // A registered size refuses another PoRep id; a test size takes it.
        assert!(SealSpec::new(2048, SealVariant::V1_1, Some([1; 32])).is_err());
        let test = SealSpec::new(16 << 10, SealVariant::V1_1, Some([1; 32])).unwrap();
        assert_eq!(test.registered_proof(), None);
        assert_eq!(test.config().unwrap().porep_id, [1; 32]);
        assert_eq!(test.shape(), Shape::Sub8);
        // filecoin-proofs' counts for the NI variant at a test size: 13 partitions.
        let ni = SealSpec::new(32 << 10, SealVariant::NonInteractive, None).unwrap();
        assert_eq!(usize::from(ni.config().unwrap().partitions), 13);
        assert!(SealSpec::new(8 << 10, SealVariant::V1_1, None).is_err());
        assert!(SealVariant::parse("v2")
            .unwrap_err()
            .to_string()
            .contains("synthetic"));
    }
}
