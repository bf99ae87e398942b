//! `cage show`: a session's record, its container's state, and the argv it
//! was made with.

use serde::Serialize;

use super::Context;
use crate::error::Result;
use crate::session::Record;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Shown {
    #[serde(flatten)]
    pub record: Record,
    /// podman's state of the container, "missing" when it is gone,
    /// "uncaged" out of a cage.
    pub state: String,
    pub running: bool,
    /// The shared folder on the machine (podman's volume folder, then
    /// VOLUME/_data), for a cage given one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub shared_path: Option<std::path::PathBuf>,
}

pub fn show(ctx: &Context, name: &str) -> Result<Shown> {
    let record = ctx.store.load(name)?;
    let (state, running, shared_path) = match &record.cage {
        None => ("uncaged".to_string(), false, None),
        Some(cage) => {
            let host = ctx.host_for_session()?;
            let shared = cage
                .options
                .shared
                .as_ref()
                .and_then(|v| host.shared_path(v));
            match host.podman.container(&cage.container)? {
                Some(s) => (s.status.clone(), s.running, shared),
                None => ("missing".to_string(), false, shared),
            }
        }
    };
    Ok(Shown::new(record, state, running, shared_path))
}

impl Shown {
    /// A session as shown, by `cage show` and by serve alike.
    pub fn new(
        mut record: Record,
        state: String,
        running: bool,
        shared_path: Option<std::path::PathBuf>,
    ) -> Shown {
        // Shown as it is in force, also where it was never set.
        record.accept_caged = Some(record.accepts_caged());
        Shown {
            record,
            state,
            running,
            shared_path,
        }
    }
}
