//! `cage show`: a session as one object (`session_object.rs`), its cage's
//! state asked of podman. A look: it changes nothing (the faces call
//! `tidy::session` first).

use super::Context;
use super::session_object::{Seen, Session, with_egress_log};
use crate::error::Result;
use crate::host::enforces_limits;

pub fn show(ctx: &Context, name: &str) -> Result<Session> {
    let record = ctx.store.load(name)?;
    let busy = ctx.store.busy(name)?;
    let (seen, shared_path) = match &record.cage {
        None => (Seen::missing(), None),
        Some(cage) => {
            let host = ctx.host_for_session()?;
            let shared = cage
                .options
                .shared
                .as_ref()
                .and_then(|v| host.shared_path(v));
            let seen = match host.podman.container(&cage.container)? {
                Some(s) => Seen {
                    state: s.status.clone(),
                    running: s.running,
                },
                None => Seen::missing(),
            };
            (seen, shared)
        }
    };
    let enforced = ctx.host_known().map(enforces_limits);
    Ok(with_egress_log(
        &ctx.store,
        Session::new(record, seen, shared_path, busy, enforced),
    ))
}
