//! The commands the program runs itself, in or beside a cage: `mcp` (for a
//! harness inside one), `gateway-listen` and `egress-listen` (in its
//! network namespace).

use std::path::Path;
use std::process::ExitCode;

use crate::error::Result;
use crate::net::egress;
use crate::settings::Env;
use crate::turn::{gateway, mcp};

pub fn mcp(sealed: bool, env: &Env) -> Result<ExitCode> {
    mcp::run(sealed, env)?;
    Ok(ExitCode::SUCCESS)
}

pub fn gateway_listen(to: &Path) -> Result<ExitCode> {
    gateway::listen::helper(to)?;
    Ok(ExitCode::SUCCESS)
}

pub fn egress_listen(
    log: &Path,
    refused_log: &Path,
    pid_file: &Path,
    session: &str,
    cage_pid: i64,
) -> Result<ExitCode> {
    egress::listen(&egress::Listen {
        log,
        refused_log,
        pid_file,
        session,
        cage_pid,
    })?;
    Ok(ExitCode::SUCCESS)
}
