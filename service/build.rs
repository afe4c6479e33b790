//! Compiles the wire contract with protox (a Rust protobuf compiler: no system `protoc`) and
//! generates its messages and the gRPC server and client with tonic-build.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(["cuzk/v1/proving.proto"], ["proto"])?;
    tonic_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
