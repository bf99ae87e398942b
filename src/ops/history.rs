//! `cage history`: what happened to a session, as the apps show it in the
//! conversation: when, who, what.

use serde::Serialize;

use super::Context;
use crate::error::Result;
use crate::state::session::HistoryEntry;

#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub session: String,
    pub entries: Vec<Entry>,
}

/// One line of the history, its time as RFC 3339 with the local offset.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub when: crate::state::when::Time,
    pub who: String,
    pub what: String,
}

impl From<HistoryEntry> for Entry {
    fn from(e: HistoryEntry) -> Entry {
        Entry {
            when: crate::state::when::Time(e.when),
            who: e.who,
            what: e.what,
        }
    }
}

/// `cage history --net`: the session's egress log, oldest first.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Egress {
    pub session: String,
    pub connections: Vec<crate::net::egress::Line>,
}

pub fn egress(ctx: &Context, name: &str) -> Result<Egress> {
    let record = ctx.store.load(name)?;
    Ok(Egress {
        connections: crate::net::egress::read(
            &ctx.store.egress_path(&record.name),
            &ctx.store.egress_refused_path(&record.name),
        )?,
        session: record.name,
    })
}

pub fn history(ctx: &Context, name: &str) -> Result<History> {
    let record = ctx.store.load(name)?;
    Ok(History {
        session: record.name,
        entries: ctx
            .store
            .history(name)?
            .into_iter()
            .map(Entry::from)
            .collect(),
    })
}
