//! `MACHINE/SESSION`: a session of a machine, as a sender names it (`files
//! allow`, `MACHINE/*` for every session of it) and as `outbox send` names
//! where it sends to.

use crate::error::{Error, Result};
use crate::settings::validate_machine_name;
use crate::state::session;

/// A sender: `MACHINE/SESSION`, or `MACHINE/*` for every session of it.
pub(super) fn parse_sender(text: &str, wildcard: bool) -> Result<(String, String)> {
    let bad = || {
        Error::input(crate::error::InputProblem::NotASender {
            text: text.to_string(),
            wildcard,
        })
    };
    let (machine, s) = text.split_once('/').ok_or_else(bad)?;
    validate_machine_name(machine).map_err(Error::bad_input)?;
    if !(wildcard && s == "*") {
        session::validate_name(s)?;
    }
    Ok((machine.to_string(), s.to_string()))
}

/// Parse `MACHINE/SESSION` (no wildcard): where `outbox send` sends to.
pub fn parse_target(text: &str) -> Result<(String, String)> {
    parse_sender(text, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn senders() {
        assert_eq!(
            parse_sender("alpha/review", true).unwrap(),
            ("alpha".into(), "review".into())
        );
        assert_eq!(parse_sender("alpha/*", true).unwrap().1, "*");
        assert!(parse_target("alpha/*").is_err());
        assert!(parse_sender("alpha", true).is_err());
        assert!(parse_sender("al_pha/x", true).is_err());
        assert!(parse_sender("alpha/x/y", true).is_err());
    }
}
