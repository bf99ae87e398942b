//! A cage's limits as `cage limits` changes them: the record's values
//! (`Step::SetLimits`) and the running cage's network rules
//! (`Step::NewRules`).

use crate::error::{Doing, Error, Result};
use crate::host::Host;
use crate::ops::Context;
use crate::state::session::CageRecord;

/// What `Step::SetLimits` sets: the cage's limits and whether they are
/// the session's own, its network policy, the budgets.
pub type LimitsSet = (
    Option<(crate::settings::Limits, bool)>,
    Option<crate::net::netpolicy::NetPolicy>,
    Budgets,
);

/// A session's budgets, as its record keeps them: in tokens and in dollars
/// (None: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budgets {
    pub tokens: Option<u64>,
    pub usd: Option<crate::settings::prices::Usd>,
}

/// Set a session's limits, policy and budget in its record, for its cage
/// `container` (refused as busy when it was moved meanwhile); what they
/// were.
pub fn set_limits(
    ctx: &Context,
    session: &str,
    container: &str,
    limits: Option<(crate::settings::Limits, bool)>,
    net: Option<crate::net::netpolicy::NetPolicy>,
    budgets: Budgets,
) -> Result<LimitsSet> {
    ctx.store.update(session, |r| {
        let budget = Budgets {
            tokens: r.tokens.budget,
            usd: r.tokens.usd_budget,
        };
        let c = match r.cage.as_mut() {
            Some(c) if c.container == container => c,
            _ => {
                return Err(Error::session(
                    &r.name,
                    crate::error::SessionProblem::MovedMeanwhile,
                ));
            }
        };
        let before = (
            limits.as_ref().map(|_| (c.limits.clone(), c.own_limits)),
            net.as_ref().map(|_| c.net.clone()),
            budget,
        );
        if let Some((l, own)) = limits {
            c.limits = l;
            c.own_limits = own;
        }
        if let Some(n) = net {
            c.net = n;
        }
        r.tokens.budget = budgets.tokens;
        r.tokens.usd_budget = budgets.usd;
        Ok(before)
    })
}

/// Load a session's new rules into its running cage (`Step::NewRules`).
/// A failure stops the cage: it never runs with rules other than its
/// record's, which the executor then puts back as they were.
pub fn load_new_rules(ctx: &Context, host: &Host, session: &str, cage: &CageRecord) -> Result<()> {
    let running = match host.podman.inspect(&cage.container)? {
        Some(c) if c.state.running => crate::net::netns::Running::of(&c).ok_or_else(|| {
            Error::session(
                session,
                crate::error::SessionProblem::OldCage {
                    container: cage.container.clone(),
                },
            )
        })?,
        // Stopped meanwhile: its next start loads the record's.
        _ => return Ok(()),
    };
    crate::ops::load_rules(ctx, host, session, cage, &running).map_err(|e| {
        let stopped = host.podman.stop(&cage.container).is_ok();
        e.context(Doing::NewRules {
            container: cage.container.clone(),
            stopped,
        })
    })
}
