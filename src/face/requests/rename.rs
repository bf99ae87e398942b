//! `cage rename` and `POST /v1/sessions/{name}/rename`: a session under
//! another name.

use serde::Deserialize;
use utoipa::ToSchema;

use super::OnSession;
use crate::face::cli::RenameArgs;
use crate::ops::rename::RenameRequest;

impl From<RenameArgs> for RenameRequest {
    fn from(a: RenameArgs) -> RenameRequest {
        RenameRequest {
            name: a.name,
            to: a.new,
            by: a.by,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameBody {
    /// The session's new name.
    #[schema(pattern = "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")]
    pub name: String,
}

/// Nothing is refused here: the names are the operation's to check, from
/// either face.
impl From<OnSession<RenameBody>> for RenameRequest {
    fn from(sent: OnSession<RenameBody>) -> RenameRequest {
        RenameRequest {
            name: sent.name,
            to: sent.body.name,
            by: Some(sent.by),
        }
    }
}
