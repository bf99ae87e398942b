//! A cage's parts: its CageSpec (the pure description podman's argv is made
//! from), seccomp profile, files given to it, env file, the harnesses, the
//! tools copied in, its git directory, and its outbox's archive.

pub mod cage_files;
pub mod codex_config;
pub mod envfile;
pub mod git;
pub mod harness;
pub mod opencode_config;
pub mod pack;
pub mod pi_models;
pub mod seccomp;
pub mod secret_names;
pub mod spec;
pub mod tools;
