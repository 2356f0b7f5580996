//! Integration tests: every test runs the real `crdctl` binary.

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
mod tidy;
mod validate;
mod versions;
mod webhook;
