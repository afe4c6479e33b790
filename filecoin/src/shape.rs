//! Sector sizes and their tree shapes. filecoin-proofs' sectors come in four Merkle tree shapes
//! (base, sub-tree and top-tree arity of `tree_r_last`); every size of one shape proves with the
//! same Rust types, so proofline's generic code is instantiated four times and dispatched here.
//!
//! | shape | sizes |
//! | --- | --- |
//! | 8-0-0 | 2 KiB, 8 MiB, 512 MiB |
//! | 8-2-0 | 4 KiB, 16 MiB, 1 GiB |
//! | 8-8-0 | 16 KiB, 32 GiB |
//! | 8-8-2 | 32 KiB, 64 GiB |
//!
//! The shape of each size is filecoin-proofs' (`is_sector_shape_base` and its siblings); the
//! sizes without a registered proof (4, 16 and 32 KiB, 16 MiB, 1 GiB) are its test sizes.

use anyhow::{bail, Result};
use filecoin_proofs::constants::{
    is_sector_shape_base, is_sector_shape_sub2, is_sector_shape_sub8, is_sector_shape_top2,
};

/// A sector's tree shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// Arity 8, no sub or top tree (`SectorShapeBase`).
    Base,
    /// Arity 8 with a sub-tree of arity 2 (`SectorShapeSub2`).
    Sub2,
    /// Arity 8 with a sub-tree of arity 8 (`SectorShapeSub8`): 32 GiB.
    Sub8,
    /// Arity 8, sub-tree 8, top-tree 2 (`SectorShapeTop2`): 64 GiB.
    Top2,
}

/// Every sector size filecoin-proofs 19.1 proves, smallest first.
pub const SECTOR_SIZES: [u64; 10] = [
    2 << 10,
    4 << 10,
    16 << 10,
    32 << 10,
    8 << 20,
    16 << 20,
    512 << 20,
    1 << 30,
    32 << 30,
    64 << 30,
];

impl Shape {
    /// The shape of a sector size, or an error naming the sizes there are.
    pub fn of(sector_size: u64) -> Result<Shape> {
        Ok(if is_sector_shape_base(sector_size) {
            Shape::Base
        } else if is_sector_shape_sub2(sector_size) {
            Shape::Sub2
        } else if is_sector_shape_sub8(sector_size) {
            Shape::Sub8
        } else if is_sector_shape_top2(sector_size) {
            Shape::Top2
        } else {
            let sizes: Vec<String> = SECTOR_SIZES.iter().map(|&s| size_name(s)).collect();
            bail!(
                "no Filecoin sector of {sector_size} bytes: the sizes are {}",
                sizes.join(", ")
            )
        })
    }

    /// The arities of `tree_r_last`'s levels, leaf to root, in a sector of `sector_size` bytes
    /// (32-byte nodes): base levels of 8, then the sub-tree's and top-tree's level when the shape
    /// has them.
    pub fn level_arities(self, sector_size: u64) -> Vec<usize> {
        let (sub, top) = match self {
            Shape::Base => (0, 0),
            Shape::Sub2 => (2, 0),
            Shape::Sub8 => (8, 0),
            Shape::Top2 => (8, 2),
        };
        let mut base_leaves = sector_size / 32 / sub.max(1) / top.max(1);
        let mut arities = Vec::new();
        while base_leaves > 1 {
            arities.push(8);
            base_leaves /= 8;
        }
        arities.extend(
            [sub, top]
                .into_iter()
                .filter(|&a| a > 0)
                .map(|a| a as usize),
        );
        arities
    }

    /// The shape as base-sub-top arities, `8-8-0`.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Base => "8-0-0",
            Shape::Sub2 => "8-2-0",
            Shape::Sub8 => "8-8-0",
            Shape::Top2 => "8-8-2",
        }
    }
}

/// A sector size as the registered proofs name it: `2KiB`, `512MiB`, `32GiB`.
pub fn size_name(sector_size: u64) -> String {
    let units = [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in units {
        if sector_size >= unit && sector_size % unit == 0 {
            return format!("{}{name}", sector_size / unit);
        }
    }
    format!("{sector_size}B")
}

/// Runs `$body` with `$Tree` the Merkle tree type of `$shape` (a [`Shape`]), the way
/// filecoin-proofs' `with_shape!` does for a size: four instantiations, one per shape.
#[macro_export]
macro_rules! with_tree {
    ($shape:expr, $Tree:ident => $body:expr) => {
        match $shape {
            $crate::shape::Shape::Base => {
                type $Tree = $crate::filecoin_proofs::SectorShapeBase;
                $body
            }
            $crate::shape::Shape::Sub2 => {
                type $Tree = $crate::filecoin_proofs::SectorShapeSub2;
                $body
            }
            $crate::shape::Shape::Sub8 => {
                type $Tree = $crate::filecoin_proofs::SectorShapeSub8;
                $body
            }
            $crate::shape::Shape::Top2 => {
                type $Tree = $crate::filecoin_proofs::SectorShapeTop2;
                $body
            }
        }
    };
}

/// Defines `$Any`, one circuit type for `$Inner<Tree>` of every shape (the engine proves one
/// circuit type per job): an enum of the four, `From<$Inner<Tree>>` and `Circuit` by delegation.
/// `$bound` is the tree bound `$Inner` needs.
macro_rules! any_shape_circuit {
    ($(#[$meta:meta])* $Any:ident, $Inner:ident, $($bound:tt)+) => {
        $(#[$meta])*
        #[derive(Clone)]
        pub enum $Any {
            /// 2 KiB, 8 MiB, 512 MiB.
            Base($Inner<filecoin_proofs::SectorShapeBase>),
            /// 4 KiB, 16 MiB, 1 GiB.
            Sub2($Inner<filecoin_proofs::SectorShapeSub2>),
            /// 16 KiB, 32 GiB.
            Sub8($Inner<filecoin_proofs::SectorShapeSub8>),
            /// 32 KiB, 64 GiB.
            Top2($Inner<filecoin_proofs::SectorShapeTop2>),
        }

        impl<Tree: $($bound)+> From<$Inner<Tree>> for $Any {
            /// # Panics
            /// On a tree type that is none of filecoin-proofs' four sector shapes (a
            /// programming error: no sector has one).
            fn from(circuit: $Inner<Tree>) -> Self {
                use std::any::Any;
                let any: Box<dyn Any> = Box::new(circuit);
                let any = match any.downcast() {
                    Ok(c) => return $Any::Base(*c),
                    Err(a) => a,
                };
                let any = match any.downcast() {
                    Ok(c) => return $Any::Sub2(*c),
                    Err(a) => a,
                };
                let any = match any.downcast() {
                    Ok(c) => return $Any::Sub8(*c),
                    Err(a) => a,
                };
                match any.downcast() {
                    Ok(c) => $Any::Top2(*c),
                    Err(_) => panic!(
                        "{} is not one of filecoin-proofs' sector shapes",
                        std::any::type_name::<Tree>()
                    ),
                }
            }
        }

        impl bellpepper_core::Circuit<blstrs::Scalar> for $Any {
            fn synthesize<CS: bellpepper_core::ConstraintSystem<blstrs::Scalar>>(
                self,
                cs: &mut CS,
            ) -> Result<(), bellpepper_core::SynthesisError> {
                match self {
                    $Any::Base(c) => c.synthesize(cs),
                    $Any::Sub2(c) => c.synthesize(cs),
                    $Any::Sub8(c) => c.synthesize(cs),
                    $Any::Top2(c) => c.synthesize(cs),
                }
            }
        }
    };
}
pub(crate) use any_shape_circuit;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_has_filecoin_proofs_shape_and_nothing_else_does() {
        let shapes: Vec<&str> = SECTOR_SIZES
            .iter()
            .map(|&s| Shape::of(s).unwrap().name())
            .collect();
        assert_eq!(
            shapes,
            [
                "8-0-0", "8-2-0", "8-8-0", "8-8-2", "8-0-0", "8-2-0", "8-0-0", "8-2-0", "8-8-0",
                "8-8-2"
            ]
        );
        for bad in [0, 1024, 8 << 10, 64 << 10, 2 << 30, u64::MAX] {
            let e = Shape::of(bad).unwrap_err().to_string();
            assert!(e.contains("32GiB") && e.contains("4KiB"), "{e}");
        }
        assert_eq!(Shape::Base.level_arities(2048), [8, 8]);
        assert_eq!(Shape::Sub2.level_arities(4096), [8, 8, 2]);
        assert_eq!(Shape::Sub8.level_arities(16384), [8, 8, 8]);
        assert_eq!(Shape::Top2.level_arities(32768), [8, 8, 8, 2]);
        assert_eq!(Shape::Sub8.level_arities(32 << 30).len(), 10);
        assert_eq!(size_name(34_359_738_368), "32GiB");
        assert_eq!(size_name(16_384), "16KiB");
        assert_eq!(size_name(1000), "1000B");
    }
}
