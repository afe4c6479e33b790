//! The one scaffold of the prover's constraint systems. Each of them (the parameter
//! generator's, the synthesizers', the pre-compiled recorder's, the size counter) says only what
//! it does with a variable or a constraint ([`Assembly`]); [`constraint_system!`] wraps that in
//! bellpepper's `ConstraintSystem` (namespaces ignored, the system its own root, extension
//! where the assembly allows it).

use bellpepper_core::{LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;

/// What a constraint system does in its own way.
pub(crate) trait Assembly: Default {
    /// Whether bellpepper may synthesize parts in fresh systems and [`Assembly::extend`] this
    /// one with them.
    const EXTENSIBLE: bool;

    /// A new aux variable; `value` is called only by systems that keep values.
    fn alloc_aux<F>(&mut self, value: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>;

    /// A new input variable; `value` as for [`Assembly::alloc_aux`].
    fn alloc_input<F>(&mut self, value: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>;

    /// The constraint `a * b = c`, named by `name` (called only where the name is kept).
    fn enforce<N, LA, LB, LC>(&mut self, name: N, a: LA, b: LB, c: LC)
    where
        N: FnOnce() -> String,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>;

    /// Appends `other`, a part synthesized in a fresh system (its input 0 is its own ONE).
    /// bellpepper calls it only where [`Assembly::EXTENSIBLE`] is set.
    fn extend(&mut self, _other: &Self) {
        unreachable!("extend on a constraint system that is not extensible")
    }
}

/// `impl ConstraintSystem<Scalar> for $t` through its [`Assembly`], with any further
/// `ConstraintSystem` methods given in braces (a witness generator's bulk allocation).
macro_rules! constraint_system {
    ($t:ty { $($extra:tt)* }) => {
        impl bellpepper_core::ConstraintSystem<blstrs::Scalar> for $t {
            type Root = Self;

            fn new() -> Self {
                Self::default()
            }

            fn alloc<F, A, AR>(
                &mut self,
                _: A,
                f: F,
            ) -> Result<bellpepper_core::Variable, bellpepper_core::SynthesisError>
            where
                F: FnOnce() -> Result<blstrs::Scalar, bellpepper_core::SynthesisError>,
                A: FnOnce() -> AR,
                AR: Into<String>,
            {
                $crate::groth16::assembly::Assembly::alloc_aux(self, f)
            }

            fn alloc_input<F, A, AR>(
                &mut self,
                _: A,
                f: F,
            ) -> Result<bellpepper_core::Variable, bellpepper_core::SynthesisError>
            where
                F: FnOnce() -> Result<blstrs::Scalar, bellpepper_core::SynthesisError>,
                A: FnOnce() -> AR,
                AR: Into<String>,
            {
                $crate::groth16::assembly::Assembly::alloc_input(self, f)
            }

            fn enforce<A, AR, LA, LB, LC>(&mut self, annotation: A, a: LA, b: LB, c: LC)
            where
                A: FnOnce() -> AR,
                AR: Into<String>,
                LA: FnOnce(
                    bellpepper_core::LinearCombination<blstrs::Scalar>,
                ) -> bellpepper_core::LinearCombination<blstrs::Scalar>,
                LB: FnOnce(
                    bellpepper_core::LinearCombination<blstrs::Scalar>,
                ) -> bellpepper_core::LinearCombination<blstrs::Scalar>,
                LC: FnOnce(
                    bellpepper_core::LinearCombination<blstrs::Scalar>,
                ) -> bellpepper_core::LinearCombination<blstrs::Scalar>,
            {
                $crate::groth16::assembly::Assembly::enforce(
                    self,
                    || annotation().into(),
                    a,
                    b,
                    c,
                )
            }

            fn push_namespace<NR, N>(&mut self, _: N)
            where
                NR: Into<String>,
                N: FnOnce() -> NR,
            {
            }

            fn pop_namespace(&mut self) {}

            fn get_root(&mut self) -> &mut Self::Root {
                self
            }

            fn is_extensible() -> bool {
                <$t as $crate::groth16::assembly::Assembly>::EXTENSIBLE
            }

            fn extend(&mut self, other: &Self) {
                $crate::groth16::assembly::Assembly::extend(self, other)
            }

            $($extra)*
        }
    };
}
pub(crate) use constraint_system;
