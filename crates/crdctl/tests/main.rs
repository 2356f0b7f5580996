//! Integration tests: every test runs the real `crdctl` binary.

mod util;

mod check;
mod convert_crd;
mod formats;
mod inputs;
mod layering;
mod migrate;
mod schemas;
mod serve;
mod tidy;
mod validate;
mod versions;
mod webhook;
