//! The fuzz targets' way into the program (fuzz/, run with `cargo fuzz`).
//!
//! shrooms-agent is one binary, and a fuzz target is a crate of its own
//! that links a library. Without the `fuzzing` feature this library is
//! empty, so an ordinary build compiles the modules once, for the binary.
//! With it, the library is the binary's own source (main.rs, included, so
//! that its list of modules is written once) and exports
//! [`fuzzing`], the properties each target checks.
#![cfg(feature = "fuzzing")]
// The binary's `main` and everything only it calls are unused here.
#![allow(dead_code)]

include!("main.rs");
