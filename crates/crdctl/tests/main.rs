//! Integration tests: every test runs the real `crdctl` binary.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]
#![allow(clippy::string_slice, reason = "test inputs are ASCII")]

mod util;
#[macro_use]
mod serve;

mod admission;
mod auth;
mod check;
mod convert_crd;
mod fidelity;
mod formats;
mod helm;
mod inputs;
mod layering;
mod migrate;
mod replicas;
mod schemas;
mod validate;
mod versions;
mod webhook;
