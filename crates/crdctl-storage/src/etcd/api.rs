//! etcd's v3 gRPC API, generated at build time from the vendored protos (`proto/`, see the
//! crate's build script): the messages and the `KV` and `Watch` clients the backend uses.

#![allow(missing_docs, clippy::all, clippy::pedantic, clippy::arithmetic_side_effects, reason = "generated code")]

pub mod mvccpb {
    tonic::include_proto!("mvccpb");
}

pub mod authpb {
    tonic::include_proto!("authpb");
}

pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}
