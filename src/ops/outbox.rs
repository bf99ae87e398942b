//! `outbox pack`: a sealed session's outbox as a .tar.gz, through the one
//! packer (`crate::outbox`), which never follows a link.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Context, cage_of};
use crate::error::{Error, Result};

#[derive(Debug, Clone, Serialize)]
pub struct PackResult {
    pub session: String,
    pub archive: PathBuf,
    #[serde(flatten)]
    pub packed: crate::outbox::Packed,
}

pub fn pack(ctx: &Context, name: &str, only: Option<&Path>, output: &Path) -> Result<PackResult> {
    let record = ctx.store.load(name)?;
    let sealed = cage_of(&record)?.sealed.as_ref().ok_or_else(|| {
        Error::bad_input(format!(
            "session {name} is not sealed: only a sealed cage has an outbox"
        ))
    })?;
    let packed = crate::outbox::pack(&sealed.outbox, only, output)?;
    Ok(PackResult {
        session: record.name.clone(),
        archive: output.to_path_buf(),
        packed,
    })
}
