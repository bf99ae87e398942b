//! The requests both faces build, each built in one place from the command
//! line's arguments (`face::cli`) and from serve's JSON body, side by side:
//! a `TryFrom` of each for the operation's request type. A refusal here is
//! bad input, made before the operation runs.
//!
//! The bodies are serve's: their types, with their `ToSchema` (the
//! OpenAPI document), are here beside the arguments they mirror; serve
//! reads them (`serve::routes`) and hands them over.

pub mod build;
pub mod create;
pub mod limits;
pub mod moves;
pub mod rename;
pub mod send;

use serde::{Deserialize, Deserializer};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::face::cli::CageArgs;
use crate::net::netpolicy::NetPolicy;
use crate::ops::make::CageChoice;

pub use build::BuildBody;
pub use create::{CageBody, CreateBody};
pub use limits::LimitsBody;
pub use moves::MoveBody;
pub use rename::RenameBody;
pub use send::SendBody;

/// What a route on a session was sent: the session its path names, its
/// body, and who asked (for the session's history).
pub struct OnSession<B> {
    pub name: String,
    pub body: B,
    pub by: String,
}

/// The cage flags as the operations take them.
impl TryFrom<CageArgs> for CageChoice {
    type Error = Error;

    fn try_from(a: CageArgs) -> Result<CageChoice> {
        Ok(CageChoice {
            image: a.image,
            sealed: a.sealed,
            sealed_token: a.sealed_token,
            conversation: a.conversation,
            github: a.github,
            nix: a.nix,
            shared: a.shared,
            meshes: a.meshes,
            unseal: false,
            writable: a.writable,
            net: a.net.as_deref().map(NetPolicy::parse).transpose()?,
        })
    }
}

/// The cage options of a body, as the operations take them.
impl TryFrom<CageBody> for CageChoice {
    type Error = Error;

    fn try_from(b: CageBody) -> Result<CageChoice> {
        let sealed = b.sealed.unwrap_or(false);
        if b.conversation.is_some() && !sealed {
            return Err(Error::choice(
                crate::error::ChoiceProblem::ConversationUnsealed,
            ));
        }
        Ok(CageChoice {
            image: b.image,
            sealed,
            sealed_token: None,
            conversation: b.conversation,
            github: b.github.unwrap_or(false),
            nix: b.nix.unwrap_or(false),
            shared: b.shared.unwrap_or(false),
            meshes: b.meshes.unwrap_or_default(),
            // A folder a sealed session worked in gets an ordinary cage
            // only by the owner's decision, at the machine (`--unseal`).
            unseal: false,
            // So is a protected path left writable (`--writable`).
            writable: Vec::new(),
            net: b.net.as_deref().map(NetPolicy::parse).transpose()?,
        })
    }
}

/// `16g` or `"16g"`, `8` or `"8"`: numbers and strings both read.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Loose {
    Text(String),
    Whole(u64),
    Number(f64),
}

impl Loose {
    pub fn text(self) -> String {
        match self {
            Loose::Text(s) => s,
            Loose::Whole(n) => n.to_string(),
            Loose::Number(f) => f.to_string(),
        }
    }
}

/// `Option<Option<T>>` from a field: missing is `None`, `null` is `Some(None)`.
pub fn present<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}
