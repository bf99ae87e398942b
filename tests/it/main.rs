//! The end-to-end tests: one binary, one module per area, driving the built
//! shrooms-agent against real podman (see common/ for the harness).

mod common;

mod cage;
mod cli;
mod images;
mod options;
mod pid1;
mod rootless;
mod sealed;
mod serve;
