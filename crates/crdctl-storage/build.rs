//! With the `etcd` feature: etcd's v3 API client, generated from the vendored protos
//! (`proto/`) by protox (a protobuf compiler in Rust) and tonic-prost-build, so building needs
//! no `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    #[cfg(feature = "etcd")]
    {
        let descriptors = protox::compile(["etcd/api/etcdserverpb/rpc.proto"], ["proto"])?;
        tonic_prost_build::configure().build_server(false).compile_fds(descriptors)?;
    }
    Ok(())
}
