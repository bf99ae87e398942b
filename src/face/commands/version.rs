//! `version`: this program's version and the protocol its ends speak over
//! ssh.

use std::process::ExitCode;

use crate::error::Result;
use crate::face::{output, remote};
use crate::settings::Settings;

pub fn run(settings: &Settings, json: bool) -> Result<ExitCode> {
    let v = remote::version(settings);
    output::show(&v, json, |v| {
        format!("shrooms-agent {} (protocol {})\n", v.version, v.protocol)
    });
    Ok(ExitCode::SUCCESS)
}
