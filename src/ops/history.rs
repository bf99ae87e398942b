//! `cage history`: what happened to a session, as the apps show it in the
//! conversation: when, who, what.

use serde::Serialize;

use super::Context;
use crate::error::Result;
use crate::session::HistoryEntry;

#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub session: String,
    pub entries: Vec<HistoryEntry>,
}

pub fn history(ctx: &Context, name: &str) -> Result<History> {
    let record = ctx.store.load(name)?;
    Ok(History {
        session: record.name,
        entries: ctx.store.history(name)?,
    })
}
