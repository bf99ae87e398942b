//! `cage history`: what happened to a session, as the apps show it in the
//! conversation: when, who, what.

use serde::Serialize;

use super::Context;
use crate::error::Result;
use crate::session::HistoryEntry;

#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub session: String,
    pub entries: Vec<Entry>,
}

/// One line of the history: the record's entry, and its time as RFC 3339.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    #[serde(flatten)]
    pub entry: HistoryEntry,
    /// `when` as RFC 3339 with the local offset.
    pub at: String,
}

pub fn history(ctx: &Context, name: &str) -> Result<History> {
    let record = ctx.store.load(name)?;
    Ok(History {
        session: record.name,
        entries: ctx
            .store
            .history(name)?
            .into_iter()
            .map(|entry| Entry {
                at: crate::when::rfc3339(entry.when),
                entry,
            })
            .collect(),
    })
}
