//! The end-to-end tests: one binary, one module per area, driving the built
//! shrooms-agent against real podman (see common/ for the harness).
//!
//! They need root, podman and the test user that scripts/setup-host makes,
//! so they are built only with the `e2e` feature: `scripts/test` runs them
//! (`cargo test --features e2e`), a plain `cargo test` does not.
#![cfg(feature = "e2e")]

mod common;

mod attacks;
mod bounds;
mod budgets;
mod cage;
mod calls;
mod cli;
mod crashes;
mod egress;
mod exec;
mod gateway;
mod github;
mod harnesses;
mod here;
mod home_prune;
mod images;
mod mcp;
mod netpolicy;
mod nokey;
mod openai;
mod options;
mod page;
mod peer;
mod pid1;
mod policy;
mod protected;
mod races;
mod remote;
mod rename;
mod resume;
mod rootful;
mod rootless;
mod sealed;
mod serve;
mod shells;
mod sidedoors;
mod soak;
mod socket;
mod truth;
mod turn;
mod update;
mod usage;
