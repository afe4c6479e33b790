//! proofline's proving service, in parts: the wire contract Curio's cuzk client speaks
//! ([`proto`], package `cuzk.v1`, service `ProvingEngine`, built from
//! `proto/cuzk/v1/proving.proto` without a system `protoc`), the registered proof numbers it
//! carries ([`registered`]), the parameter sets by circuit id ([`circuits`]), the checks a `SubmitProofRequest` passes before a job is
//! accepted ([`request`]), the durable job store ([`store`]), admission of a job's input under
//! the memory budget ([`admission`]), proving an accepted job ([`prove`]), its metrics ([`metrics`]), where the server listens ([`listen`]), the server
//! ([`server`]) and a client ([`client`]).

pub mod admission;
pub mod circuits;
pub mod client;
mod heartbeat;
pub mod listen;
pub mod metrics;
pub mod prove;
pub mod registered;
pub mod request;
pub mod server;
pub mod store;

/// The messages, enums and the gRPC server and client of `cuzk.v1`.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    tonic::include_proto!("cuzk.v1");
}
