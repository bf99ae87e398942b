//! `cage show`: a session's record, its container's state, and the argv it
//! was made with.

use serde::Serialize;

use super::Context;
use crate::error::Result;
use crate::session::Record;

#[derive(Debug, Clone, Serialize)]
pub struct Shown {
    #[serde(flatten)]
    pub record: Record,
    /// podman's state of the container, "missing" when it is gone,
    /// "uncaged" out of a cage.
    pub state: String,
    pub running: bool,
}

pub fn show(ctx: &Context, name: &str) -> Result<Shown> {
    let record = ctx.store.load(name)?;
    let (state, running) = match &record.cage {
        None => ("uncaged".to_string(), false),
        Some(cage) => {
            let host = ctx.host_for_session()?;
            match host.podman.container(&cage.container)? {
                Some(s) => (s.status.clone(), s.running),
                None => ("missing".to_string(), false),
            }
        }
    };
    Ok(Shown {
        record,
        state,
        running,
    })
}
