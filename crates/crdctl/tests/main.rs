//! Integration tests: every test runs the real `crdctl` binary.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::string_slice,
    reason = "tests and benchmarks report failure by panicking"
)]

mod util;
#[macro_use]
mod serve;

mod check;
mod convert_crd;
mod formats;
mod inputs;
mod layering;
mod migrate;
mod replicas;
mod schemas;
mod validate;
mod versions;
mod webhook;
