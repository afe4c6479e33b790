//! Stage 1 on the CPU: [`cpu`] (bellpepper's constraint system in bellperson's shape) and
//! [`pce`] (pre-compiled constraints: a circuit shape's matrices recorded once, then
//! witness-only synthesis and a sparse product per partition), with the pool their parallel
//! parts run in ([`crate::parallel`]).

pub mod cpu;
pub mod pce;
#[cfg(test)]
pub(crate) mod test_circuit;
