//! `cage move` and `POST /v1/sessions/{name}/cage`: a session into a fresh
//! cage, or out of its cage.

use serde::Deserialize;
use utoipa::ToSchema;

use super::{CageBody, OnSession};
use crate::error::{Error, Result};
use crate::face::cli::MoveArgs;
use crate::ops::make::CageChoice;
use crate::ops::moves::MoveRequest;

impl TryFrom<MoveArgs> for MoveRequest {
    type Error = Error;

    fn try_from(a: MoveArgs) -> Result<MoveRequest> {
        Ok(MoveRequest {
            name: a.name,
            out: a.out,
            choice: CageChoice::try_from(a.cage)?,
            by: a.by,
            unseal: a.unseal,
            dir: a.dir,
        })
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveBody {
    /// The new cage's options, or null to take the session out of its cage.
    #[serde(default, deserialize_with = "super::present")]
    #[schema(required, nullable)]
    pub cage: Option<Option<CageBody>>,
}

impl TryFrom<OnSession<MoveBody>> for MoveRequest {
    type Error = Error;

    fn try_from(sent: OnSession<MoveBody>) -> Result<MoveRequest> {
        let cage = sent
            .body
            .cage
            .ok_or_else(|| Error::input(crate::error::InputProblem::MoveWhere))?;
        Ok(MoveRequest {
            name: sent.name,
            out: cage.is_none(),
            choice: cage
                .map(CageChoice::try_from)
                .transpose()?
                .unwrap_or_default(),
            by: Some(sent.by),
            // Over HTTP a sealed session is never taken out of its seal: that
            // is the owner's decision, at the machine (`cage move --unseal`).
            unseal: false,
            dir: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_says_where_or_is_refused() {
        let parse = |t: &str| serde_json::from_str::<MoveBody>(t);
        let request = |t: &str| {
            MoveRequest::try_from(OnSession {
                name: "s".to_string(),
                body: parse(t).unwrap(),
                by: "u".to_string(),
            })
        };
        assert!(parse("{}").unwrap().cage.is_none());
        let e = request("{}").unwrap_err();
        assert!(e.message().starts_with("say where"), "{e:?}");
        assert!(matches!(
            parse(r#"{"cage": null}"#).unwrap().cage,
            Some(None)
        ));
        let out = request(r#"{"cage": null}"#).unwrap();
        assert!(out.out && !out.unseal);
        assert_eq!(out.by.as_deref(), Some("u"));
        let into = request(r#"{"cage": {"nix": true}}"#).unwrap();
        assert!(into.choice.nix && !into.out);
        let sealed = request(r#"{"cage": {"sealed": true, "conversation": "abc-123"}}"#).unwrap();
        assert_eq!(sealed.choice.conversation.as_deref(), Some("abc-123"));
        let e = request(r#"{"cage": {"conversation": "abc-123"}}"#).unwrap_err();
        assert!(e.message().contains("for a sealed cage"), "{e:?}");
        let e = parse(r#"{"cage": {"nix": true, "gpu": 1}}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `gpu`"), "{e}");
        let e = parse(r#"{"where": null}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `where`"), "{e}");
    }
}
