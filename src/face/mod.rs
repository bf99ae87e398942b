//! The command line's face: its arguments (clap), its commands, how results
//! and errors are printed, the man pages, and `--on` (a command run on
//! another machine); and the requests both faces build (`requests`: each
//! from the command line's arguments and from serve's body, side by side).

pub mod cli;
pub mod commands;
pub mod manual;
pub mod output;
pub mod remote;
pub mod requests;
