//! The parameter sets the service holds, named by the wire's circuit ids (`PreloadSRS`,
//! `EvictSRS`, `GetStatus`): `porep-32g`, `snap-32g`, `wpost-32g`, `winning-32g`, the scheme
//! extended to every registered size (`2k`, `8m`, `512m`, `32g`, `64g`). A PoRep circuit other
//! than the V1_1 one Curio seals with carries its variant (`porep-32g-synthetic`,
//! `porep-32g-ni`, `porep-32g-v1`); the old WindowPoSt API `-v1` (`wpost-32g-v1`).

use proofline_filecoin::storage_proofs_core::api_version::ApiVersion;
use proofline_filecoin::variant::SealVariant;

use crate::registered::{PostKind, SECTOR_SIZES};
use crate::request::{Accepted, Work};

/// One parameter set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Circuit {
    /// A PoRep C2 partition of a seal variant.
    Porep {
        /// The variant.
        variant: SealVariant,
        /// The sector size.
        sector_size: u64,
    },
    /// A SnapDeals update partition.
    Snap {
        /// The sector size.
        sector_size: u64,
    },
    /// A WindowPoSt partition at an API version.
    Window {
        /// `V1_2_0`, or `V1_0_0` for the old registered proofs.
        api: ApiVersion,
        /// The sector size.
        sector_size: u64,
    },
    /// A WinningPoSt.
    Winning {
        /// The sector size.
        sector_size: u64,
    },
}

const SIZE_NAMES: [&str; 5] = ["2k", "8m", "512m", "32g", "64g"];

fn size_name(sector_size: u64) -> String {
    SECTOR_SIZES
        .iter()
        .position(|&s| s == sector_size)
        .map_or_else(|| format!("{sector_size}b"), |i| SIZE_NAMES[i].to_string())
}

impl Circuit {
    /// The circuit a job proves.
    pub fn of(job: &Accepted) -> Circuit {
        let sector_size = job.sector_size;
        match &job.work {
            Work::Porep { variant, .. } => Circuit::Porep {
                variant: *variant,
                sector_size,
            },
            Work::SnapDeals { .. } => Circuit::Snap { sector_size },
            Work::Post {
                kind: PostKind::Winning,
                ..
            } => Circuit::Winning { sector_size },
            Work::Post {
                kind: PostKind::Window(api),
                ..
            } => Circuit::Window {
                api: *api,
                sector_size,
            },
        }
    }

    /// Its circuit id.
    pub fn id(&self) -> String {
        match *self {
            Circuit::Porep {
                variant,
                sector_size,
            } => match variant {
                SealVariant::V1_1 => format!("porep-{}", size_name(sector_size)),
                other => format!("porep-{}-{}", size_name(sector_size), other.name()),
            },
            Circuit::Snap { sector_size } => format!("snap-{}", size_name(sector_size)),
            Circuit::Window { api, sector_size } => match api {
                ApiVersion::V1_2_0 => format!("wpost-{}", size_name(sector_size)),
                _ => format!("wpost-{}-v1", size_name(sector_size)),
            },
            Circuit::Winning { sector_size } => format!("winning-{}", size_name(sector_size)),
        }
    }

    /// Parses a circuit id; the error names what is wrong and what is accepted.
    pub fn parse(id: &str) -> Result<Circuit, String> {
        let usage = "circuit ids are <porep|snap|wpost|winning>-<2k|8m|512m|32g|64g>, a PoRep's \
                     optionally -v1, -synthetic or -ni, a WindowPoSt's optionally -v1";
        let mut parts = id.split('-');
        let (Some(family), Some(size)) = (parts.next(), parts.next()) else {
            return Err(format!("circuit_id {id:?}: {usage}"));
        };
        let suffix = parts.next();
        if parts.next().is_some() {
            return Err(format!("circuit_id {id:?}: {usage}"));
        }
        let sector_size = SIZE_NAMES
            .iter()
            .position(|&n| n == size)
            .map(|i| SECTOR_SIZES[i])
            .ok_or_else(|| format!("circuit_id {id:?}: unknown size {size:?}; {usage}"))?;
        let circuit = match (family, suffix) {
            ("porep", None) => Circuit::Porep {
                variant: SealVariant::V1_1,
                sector_size,
            },
            ("porep", Some(v)) if v != SealVariant::V1_1.name() => Circuit::Porep {
                variant: SealVariant::parse(v)
                    .map_err(|_| format!("circuit_id {id:?}: {usage}"))?,
                sector_size,
            },
            ("snap", None) => Circuit::Snap { sector_size },
            ("wpost", None) => Circuit::Window {
                api: ApiVersion::V1_2_0,
                sector_size,
            },
            ("wpost", Some("v1")) => Circuit::Window {
                api: ApiVersion::V1_0_0,
                sector_size,
            },
            ("winning", None) => Circuit::Winning { sector_size },
            _ => return Err(format!("circuit_id {id:?}: {usage}")),
        };
        Ok(circuit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_bad_ids_are_refused() {
        for id in [
            "porep-32g",
            "porep-64g",
            "porep-2k-synthetic",
            "porep-8m-ni",
            "porep-512m-v1",
            "snap-32g",
            "snap-64g",
            "wpost-32g",
            "wpost-2k-v1",
            "winning-32g",
            "winning-2k",
        ] {
            assert_eq!(Circuit::parse(id).unwrap().id(), id);
        }
        for bad in [
            "",
            "porep",
            "porep-16k",
            "porep-32g-v1_1",
            "porep-32g-x",
            "snap-32g-ni",
            "wpost-32g-v2",
            "winning-32g-v1",
            "seal-32g",
            "porep-32g-ni-x",
            "porep-32G",
        ] {
            let e = Circuit::parse(bad).unwrap_err();
            assert!(e.contains("circuit_id"), "{bad}: {e}");
        }
    }
}
