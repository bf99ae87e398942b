//! `outbox send` and `POST /v1/sessions/{name}/outbox/send`: a sealed
//! session's outbox, to a session of this or another machine.

use std::path::PathBuf;

use serde::Deserialize;
use utoipa::ToSchema;

use crate::face::cli::SendArgs;
use crate::ops::outbox::SendRequest;

impl From<SendArgs> for SendRequest {
    fn from(a: SendArgs) -> SendRequest {
        SendRequest {
            name: a.name,
            to: a.to,
            only: a.only,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendBody {
    /// MACHINE/SESSION.
    pub to: String,
    /// One file or folder of the outbox only.
    pub only: Option<String>,
}

/// The session its path names, and the body. Nothing is refused here: the
/// operation checks the receiver and the folder, from either face.
impl From<(String, SendBody)> for SendRequest {
    fn from((name, body): (String, SendBody)) -> SendRequest {
        SendRequest {
            name,
            to: body.to,
            only: body.only.map(PathBuf::from),
        }
    }
}
