//! Images of ours: the workbench's Containerfile and how it is built.

pub mod workbench;
