//! `cage limits`: a session's memory, CPUs and processes, set on its cage as
//! it is, running or not, without making it again, so what was installed in
//! it stays (docs/cages.md, "Limits, moving, history"); and its token budget,
//! which the model gateway enforces (docs/gateway.md, "Model gateway"), on any
//! machine, since podman has no part in it.
//!
//! podman 5.1 and later: `podman update`, which persists and works on a
//! stopped container. Before: a running cage is updated now, and the
//! record's limits are set again after every start (`ensure_running`),
//! since a start brings back the limits the container was made with.
//! podman 4.3's `update` has no `--pids-limit` (it came with 4.4): a change
//! of the process limit there is refused, not done by making the container
//! again behind the user's back.

use serde::Serialize;

use super::plan::Step;
use super::{Context, cage_of};
use crate::error::{Error, Kind, LimitsProblem, Result, Warning};
use crate::host::podman::argv;
use crate::host::{Host, LimitsSupport, PASTA_SINCE};
use crate::ops::acts::limits::Budgets;
use crate::settings::prices::Usd;
use crate::settings::{Limits, LimitsAsked};
use crate::state::session::{CageRecord, HistoryEntry, Record};

#[derive(Debug, Clone, Default)]
pub struct LimitsRequest {
    pub name: String,
    /// Checked where they are read (`LimitsAsked::parse`), by the config's rules.
    pub asked: LimitsAsked,
    pub reset: bool,
    /// The token budget: `Some(None)` removes it (`--tokens none`).
    pub tokens: Option<Option<u64>>,
    /// The dollar budget: `Some(None)` removes it (`--usd none`).
    pub usd: Option<Option<Usd>>,
    /// A new network policy (docs/network.md, "Network policy").
    pub net: Option<crate::net::netpolicy::NetPolicy>,
    pub by: Option<String>,
}

/// Read a token budget as given (`--tokens`, or the `tokens` of a request's
/// body): a positive whole number, with `k` (thousands) or `M` (millions)
/// after it if wanted (`5k`, `5M`, `1.5M`), or `none` for no budget.
pub fn parse_tokens(text: &str) -> Result<Option<u64>> {
    crate::settings::budget::parse_tokens(text).map_err(|why| Error::bad_field("tokens", why))
}

/// Read a dollar budget as given (`--usd`, or the `usd` of a request's
/// body): a positive amount of dollars with at most cents (`5`, `2.50`),
/// or `none` for no budget.
pub fn parse_usd(text: &str) -> Result<Option<Usd>> {
    crate::settings::prices::parse_usd(text).map_err(|why| Error::bad_field("usd", why))
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct LimitsChanged {
    pub session: String,
    pub before: Limits,
    pub after: Limits,
    /// "now" when the running cage was updated, "at its next start" when
    /// it is stopped and set again then, "now and at every start" on podman 5.1+.
    /// A change of the token budget alone: "now".
    pub applied: String,
    /// The token budget before and after; null: none.
    pub tokens_before: Option<u64>,
    pub tokens_after: Option<u64>,
    /// The dollar budget before and after, in dollars; null: none.
    pub usd_before: Option<Usd>,
    pub usd_after: Option<Usd>,
    /// Whether podman enforces the memory, CPU and process limits on this
    /// machine (rootless on cgroups v1 it does not); null where podman
    /// could not be asked.
    pub enforced: Option<bool>,
    /// What was done, but may not be what was meant (a budget already
    /// spent).
    #[schema(value_type = Vec<String>)]
    pub warnings: Vec<Warning>,
    /// The network policy before and after (the same when not changed).
    pub net_before: String,
    pub net_after: String,
    /// When a new policy took effect: "now" (the running cage's rules were
    /// replaced), "at its next start"; null when it was not changed.
    pub net_applied: Option<String>,
}

/// `cage limits NAME` without flags: the limits as configured (the
/// record's, and whether they are the session's own or the machine's) and
/// as podman reports the container has them.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct LimitsShown {
    pub session: String,
    pub container: String,
    /// The record's: what the cage is made with, and set again at start.
    pub configured: Limits,
    /// Set with `cage limits` (true), or the machine's (the config's).
    pub own: bool,
    /// As podman reports them; null when the container is gone.
    pub applied: Option<Applied>,
    /// Whether podman enforces limits here (rootless cgroups v1 does not).
    pub enforced: bool,
    pub tokens_budget: Option<u64>,
    pub tokens_used: u64,
    /// The dollar budget; null: none.
    pub usd_budget: Option<Usd>,
    /// What the session spent in dollars (docs/gateway.md, "Budgets").
    pub spent: crate::state::session::Spend,
}

/// The limits podman reports a container has; null: none.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Applied {
    pub memory_bytes: Option<u64>,
    pub cpus: Option<f64>,
    pub pids: Option<u64>,
}

/// Pure: podman's `HostConfig` read as limits.
pub fn applied_of(h: &crate::host::podman::inspect::HostConfig) -> Applied {
    let positive = |v: i64| (v > 0).then_some(v as u64);
    let cpus = if h.nano_cpus > 0 {
        Some(h.nano_cpus as f64 / 1e9)
    } else if h.cpu_quota > 0 && h.cpu_period > 0 {
        Some(h.cpu_quota as f64 / h.cpu_period as f64)
    } else {
        None
    };
    Applied {
        memory_bytes: positive(h.memory),
        cpus,
        pids: positive(h.pids_limit),
    }
}

/// Show a session's limits: one inspect of its container.
pub fn show(ctx: &Context, name: &str) -> Result<LimitsShown> {
    let record = ctx.store.load(name)?;
    let cage = cage_of(&record)?.clone();
    let host = ctx.host_for_session()?;
    let applied = host
        .podman
        .inspect(&cage.container)?
        .map(|c| applied_of(&c.host_config));
    Ok(LimitsShown {
        session: record.name,
        container: cage.container,
        configured: cage.limits,
        own: cage.own_limits,
        applied,
        enforced: host.limits_support() == LimitsSupport::Enforced,
        tokens_budget: record.tokens.budget,
        tokens_used: record.tokens.used.total(),
        usd_budget: record.tokens.usd_budget,
        spent: record.tokens.spend(),
    })
}

fn nothing_asked() -> Error {
    Error::limits(LimitsProblem::NothingAsked)
}

/// The new limits from the old ones and the request (pure).
pub fn new_limits(
    before: &Limits,
    defaults: &Limits,
    req: &LimitsRequest,
    machine_cpus: usize,
) -> Result<Limits> {
    if req.reset {
        return Ok(defaults.clone());
    }
    if req.asked.is_empty() {
        return Err(nothing_asked());
    }
    if let Some(c) = &req.asked.cpus
        && c.value() > machine_cpus as f64
    {
        return Err(Error::bad_field(
            "cpus",
            format!("{c} is more than this machine's {machine_cpus} CPUs"),
        ));
    }
    Ok(before.with(&req.asked))
}

/// `cage limits`: under the session's lock, so that a change cannot race
/// a start (which loads the rules and limits of the record it read): a
/// start under way (its lock says `start`: `cage start`, or a turn's) is
/// waited for. A live turn holds the session for as long as it runs; once
/// its cage is started (its lock says `turn` or `exec`, `Store::busy`),
/// its limits, budget and rules are changed beside it. Either way under
/// the session's change lock (`Store::change_lock`), the record read
/// under it: two changes at once are made one after the other, the
/// second from the first's record, so the last one's policy is the
/// record's and the running cage's alike.
pub fn limits(ctx: &Context, req: &LimitsRequest) -> Result<LimitsChanged> {
    if let Some(by) = &req.by {
        crate::state::session::validate_who(by)?;
    }
    let (lock, _) = lock_or_beside_a_turn(ctx, &req.name)?;
    if let Some(lock) = &lock {
        lock.note("limits");
    }
    let _change = ctx.store.change_lock(&req.name)?;
    let record = ctx.store.load(&req.name)?;
    let facts = limits_facts(ctx, req, &record)?;
    let (steps, changed) = decide(&facts, req)?;
    let host = facts.host.as_ref().ok().copied();
    super::plan::execute(ctx, host, steps)?;
    Ok(changed)
}

/// How long `cage limits` waits for a start: its `podman start`, the
/// rules, the egress log's listener.
const START_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The session's lock and record; or, when a turn past its start holds
/// the lock, its record alone (None).
fn lock_or_beside_a_turn(
    ctx: &Context,
    name: &str,
) -> Result<(Option<crate::state::session::SessionLock>, Record)> {
    let until = std::time::Instant::now() + START_WAIT;
    loop {
        let e = match super::plan::lock_and_load(ctx, name) {
            Ok((lock, record)) => return Ok((Some(lock), record)),
            Err(e) if e.kind == Kind::Busy => e,
            Err(e) => return Err(e),
        };
        let holder = ctx.store.busy(name).ok().flatten().map(|b| b.what);
        match holder.as_deref() {
            Some("turn" | "exec") => return Ok((None, ctx.store.load(name)?)),
            Some("start") if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            _ => return Err(e),
        }
    }
}

/// What `cage limits` decides on, read before anything changes.
pub struct LimitsFacts<'a> {
    pub record: &'a Record,
    /// The host's facts, or why there are none (no podman).
    pub host: Result<&'a Host>,
    /// Whether the cage runs; None where podman was not asked (a change
    /// of the token budget alone) or is not there.
    pub running: Option<bool>,
    /// Whether the new network policy can be enforced here.
    pub enforceable: Result<()>,
    pub defaults: Limits,
    /// Does a model request at a budget wait for it to be raised (the
    /// config's `[budget] wait` is not zero)?
    pub held: bool,
    /// The budgets of a new session, which `--reset` sets back (`[budget]`).
    pub default_budgets: Budgets,
    /// What the session's model requests go upstream on, when it is a
    /// subscription sign-in (no price per token); asked only for `--usd`.
    pub subscription: Option<String>,
    pub who: String,
    pub when: u64,
}

/// Read the facts (no refusal: a check that does not pass is kept).
pub fn limits_facts<'a>(
    ctx: &'a Context,
    req: &LimitsRequest,
    record: &'a Record,
) -> Result<LimitsFacts<'a>> {
    let cage = cage_of(record)?;
    let host = ctx.host_for_session();
    let asks_podman = req.reset || !req.asked.is_empty() || req.net.is_some();
    let running = match &host {
        Ok(h) if asks_podman => Some(
            h.podman
                .container(&cage.container)?
                .is_some_and(|s| s.running),
        ),
        _ => None,
    };
    Ok(LimitsFacts {
        record,
        host,
        running,
        enforceable: match &req.net {
            Some(net) => crate::net::netpolicy::check_enforceable(
                net,
                ctx.settings.hosts_file.as_deref(),
                &crate::net::netif::local_prefixes,
            ),
            None => Ok(()),
        },
        defaults: ctx.settings.limits.clone(),
        held: !ctx.settings.budget.wait.is_zero(),
        default_budgets: Budgets {
            tokens: ctx.settings.budget.tokens,
            usd: ctx.settings.budget.usd,
        },
        subscription: match req.usd {
            Some(Some(_)) => subscription(ctx, record),
            _ => None,
        },
        who: req.by.clone().unwrap_or_else(|| ctx.settings.user.clone()),
        when: crate::state::when::now(),
    })
}

/// What a session's model requests go upstream on, when it is a
/// subscription sign-in: Codex's from OpenAI's sources, the others' from
/// the Messages API's; a sealed cage's from its token.
fn subscription(ctx: &Context, record: &Record) -> Option<String> {
    use crate::turn::gateway::{self, Credential};
    if let Some(sealed) = record.cage.as_ref().and_then(|c| c.sealed.as_ref()) {
        let token = crate::settings::token::read_sealed(&sealed.token_file).ok()?;
        return matches!(Credential::classify(&token), Some(Credential::OAuth(_)))
            .then(|| "the sealed cage's token, a Claude login".to_string());
    }
    match record.harness {
        crate::cage::harness::Harness::Codex => {
            gateway::openai_sources(&ctx.settings, &ctx.env).subscription()
        }
        _ => gateway::machine_sources(&ctx.settings, &ctx.env).subscription(),
    }
}

/// Pure: the refusal, or the plan and what it will have done: `podman
/// update` where it applies now, the record, the running cage's rules
/// again for a new policy, the history.
pub fn decide<'a>(
    f: &LimitsFacts<'a>,
    req: &LimitsRequest,
) -> Result<(Vec<Step<'a>>, LimitsChanged)> {
    let record = f.record;
    let cage = cage_of(record)?;
    let before = Budgets {
        tokens: record.tokens.budget,
        usd: record.tokens.usd_budget,
    };
    let budgets = budgets_after(f, req, &before)?;
    let (tokens_before, tokens_after) = (before.tokens, budgets.tokens);
    let podman_limits = req.reset || !req.asked.is_empty();
    if let Some(net) = &req.net {
        net_refusal(net, record, cage)?;
        f.enforceable.clone()?;
    }
    let mut steps = Vec::new();
    let (after, applied, enforced) = limits_after(f, req, cage, podman_limits, &mut steps)?;
    steps.push(Step::SetLimits {
        session: record.name.clone(),
        container: cage.container.clone(),
        limits: podman_limits.then(|| (after.clone(), !req.reset)),
        net: req.net.clone(),
        budgets,
    });
    // The new rules go into the running cage now.
    let net_applied = req.net.as_ref().map(|net| {
        if f.running != Some(true) {
            return "at its next start".to_string();
        }
        let mut new = cage.clone();
        new.net = net.clone();
        steps.push(Step::NewRules {
            session: record.name.clone(),
            cage: Box::new(new),
        });
        "now".to_string()
    });
    let net_after = req.net.clone().unwrap_or_else(|| cage.net.clone());
    let what = history_words(req, cage, &after, &net_after, &before, &budgets);
    steps.push(Step::History {
        session: record.name.clone(),
        entry: HistoryEntry {
            when: f.when,
            who: f.who.clone(),
            what,
        },
    });
    let changed = LimitsChanged {
        session: record.name.clone(),
        before: cage.limits.clone(),
        after,
        applied: applied.into(),
        tokens_before,
        tokens_after,
        usd_before: before.usd,
        usd_after: budgets.usd,
        enforced,
        warnings: spent_warning(
            record,
            req.tokens.and(tokens_after),
            req.usd.and(budgets.usd),
            f.held,
        ),
        net_before: cage.net.to_string(),
        net_after: net_after.to_string(),
        net_applied,
    };
    Ok((steps, changed))
}

/// Pure: the budgets after the request: `--reset` sets back the
/// machine's (`[budget]`); a dollar budget on a subscription sign-in is
/// refused.
fn budgets_after(f: &LimitsFacts<'_>, req: &LimitsRequest, before: &Budgets) -> Result<Budgets> {
    if let (Some(Some(_)), Some(what)) = (req.usd, &f.subscription) {
        return Err(Error::limits(LimitsProblem::UsdOnSubscription {
            session: f.record.name.clone(),
            what: what.clone(),
        }));
    }
    Ok(if req.reset {
        f.default_budgets
    } else {
        Budgets {
            tokens: req.tokens.unwrap_or(before.tokens),
            usd: req.usd.unwrap_or(before.usd),
        }
    })
}

/// Pure: the cage's limits after the request, where it applies, and
/// whether podman enforces them; the `podman update` it needs now added to
/// `steps`.
fn limits_after<'a>(
    f: &LimitsFacts<'a>,
    req: &LimitsRequest,
    cage: &CageRecord,
    podman_limits: bool,
    steps: &mut Vec<Step<'a>>,
) -> Result<(Limits, &'static str, Option<bool>)> {
    Ok(if podman_limits {
        let host = f.host.clone()?;
        let running = f.running == Some(true);
        let (after, applied, update) = podman_limits_now(host, &f.defaults, req, cage, running)?;
        steps.extend(update);
        (after, applied, Some(crate::host::enforces_limits(host)))
    } else if req.tokens.is_some() || req.usd.is_some() {
        // The gateway reads the budget at every model request, on any
        // machine; whether podman enforces the other limits is said where
        // it can be asked.
        let enforced = f
            .host
            .as_ref()
            .ok()
            .map(|h| crate::host::enforces_limits(h));
        (cage.limits.clone(), "now", enforced)
    } else if req.net.is_some() {
        f.host.clone()?;
        (cage.limits.clone(), "unchanged", None)
    } else {
        return Err(nothing_asked());
    })
}

/// Pure: a sealed cage has its own rules: no policy but `internet`.
fn net_refusal(
    net: &crate::net::netpolicy::NetPolicy,
    record: &Record,
    cage: &CageRecord,
) -> Result<()> {
    if cage.sealed.is_some() && *net != crate::net::netpolicy::NetPolicy::Internet {
        return Err(Error::limits(LimitsProblem::SealedNet {
            net: net.to_string(),
            session: record.name.clone(),
        }));
    }
    Ok(())
}

/// Pure: what a new budget (`budget` in tokens, `usd` in dollars; None
/// when none was given) already spent says; `held`: whether a request at
/// a budget waits for it to be raised.
fn spent_warning(
    record: &Record,
    budget: Option<u64>,
    usd: Option<Usd>,
    held: bool,
) -> Vec<Warning> {
    let spent = record.tokens.used.total();
    let mut warnings = match budget {
        Some(budget) if spent >= budget => vec![Warning::BudgetSpent {
            session: record.name.clone(),
            spent,
            budget,
            held,
        }],
        _ => Vec::new(),
    };
    let dollars = record.tokens.spend().usd;
    if let (Some(budget), Some(spent)) = (usd, dollars)
        && spent >= budget
    {
        warnings.push(Warning::UsdBudgetSpent(crate::error::UsdSpent {
            session: record.name.clone(),
            spent: spent.spend(),
            budget: budget.budget(),
            held,
        }));
    }
    warnings
}

/// Pure: the history's line of a change.
fn history_words(
    req: &LimitsRequest,
    cage: &CageRecord,
    after: &Limits,
    net_after: &crate::net::netpolicy::NetPolicy,
    before: &Budgets,
    after_budgets: &Budgets,
) -> String {
    let shown = |b: Option<u64>| b.map_or("none".to_string(), |n| n.to_string());
    let usd = |b: Option<Usd>| b.map_or("none".to_string(), Usd::plain);
    let (tokens_before, tokens_after) = (before.tokens, after_budgets.tokens);
    let mut parts = Vec::new();
    if req.net.is_some() {
        parts.push(format!("net {} -> {net_after}", cage.net));
    }
    if req.reset || !req.asked.is_empty() {
        parts.extend(changed_limits(&cage.limits, after));
    }
    if req.tokens.is_some() || tokens_before != tokens_after {
        parts.push(format!(
            "tokens {} -> {}",
            shown(tokens_before),
            shown(tokens_after)
        ));
    }
    if req.usd.is_some() || before.usd != after_budgets.usd {
        parts.push(format!(
            "usd {} -> {}",
            usd(before.usd),
            usd(after_budgets.usd)
        ));
    }
    format!("limits: {}", parts.join(", "))
}

/// The history's words for the limits that changed, `memory 1g -> 2g`;
/// one that stayed is left out, and nothing changed is "unchanged".
fn changed_limits(before: &Limits, after: &Limits) -> Vec<String> {
    let mut parts = Vec::new();
    let mut one = |name: &str, b: String, a: String| {
        if b != a {
            parts.push(format!("{name} {b} -> {a}"));
        }
    };
    one(
        "memory",
        before.memory.to_string(),
        after.memory.to_string(),
    );
    one("cpus", before.cpus.to_string(), after.cpus.to_string());
    one("pids", before.pids.to_string(), after.pids.to_string());
    if parts.is_empty() {
        parts.push(format!(
            "memory {}, cpus {}, pids {} (unchanged)",
            after.memory, after.cpus, after.pids
        ));
    }
    parts
}

/// Pure: memory, CPUs and processes: the new ones, the `podman update`
/// that puts them on the cage where podman can now, and when they apply.
fn podman_limits_now<'a>(
    host: &Host,
    defaults: &Limits,
    req: &LimitsRequest,
    cage: &CageRecord,
    running: bool,
) -> Result<(Limits, &'static str, Option<Step<'a>>)> {
    let after = new_limits(&cage.limits, defaults, req, host.cpus)?;
    // Where podman ignores limits (rootless on cgroups v1), `podman update`
    // fails ("runc update" has no cgroup to write), at once on a running
    // cage and at every later start of a stopped one: refused before
    // anything changes. `--reset` still puts the record back to the
    // config's, which is what the cage was made with, so a session whose
    // record an older version changed starts again.
    let enforced = host.limits_support() == LimitsSupport::Enforced;
    if !enforced && !req.reset {
        let why = crate::host::unenforced_why(&host.limits_support());
        return Err(Error::limits(LimitsProblem::NotEnforced { why }));
    }
    if after.pids != cage.limits.pids && !host.update_has_pids() {
        return Err(Error::limits(LimitsProblem::PidsNeedPodman {
            since: PASTA_SINCE.to_string(),
            version: host.version.to_string(),
        }));
    }
    let update = |pids: bool| {
        Some(Step::UpdateLimits {
            argv: argv::update(&cage.container, &after, pids),
            back: argv::update(&cage.container, &cage.limits, pids),
        })
    };
    // `--reset` where podman does not enforce limits: the record is put
    // back now; nothing is enforced (the face says so).
    let (applied, update) = if !enforced {
        ("now", None)
    } else if host.update_persists() {
        ("now and at every start", update(true))
    } else if running {
        (
            "now, and again at every start",
            update(host.update_has_pids()),
        )
    } else {
        ("at its next start", None)
    };
    Ok((after, applied, update))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(m: &str, c: &str, p: u64) -> Limits {
        Limits::of(m, c, p)
    }

    #[test]
    fn the_history_names_only_what_changed() {
        assert_eq!(
            changed_limits(&l("1g", "2", 2048), &l("2g", "2", 2048)),
            ["memory 1g -> 2g"]
        );
        assert_eq!(
            changed_limits(&l("1g", "2", 2048), &l("1g", "1.5", 100)),
            ["cpus 2 -> 1.5", "pids 2048 -> 100"]
        );
        assert_eq!(
            changed_limits(&l("1g", "2", 2048), &l("1g", "2", 2048)),
            ["memory 1g, cpus 2, pids 2048 (unchanged)"]
        );
    }

    #[test]
    fn new_limits_rules() {
        let before = l("4g", "2", 2048);
        let defaults = l("4g", "2", 2048);
        // As the command line and serve's bodies give them: read by the
        // config's parsers, then put on the old limits.
        let change = |m: Option<&str>, c: Option<&str>, p: Option<&str>| {
            let req = LimitsRequest {
                asked: LimitsAsked::parse(m, c, p)?,
                ..LimitsRequest::default()
            };
            new_limits(&before, &defaults, &req, 8)
        };
        assert_eq!(
            change(Some("16g"), Some("8"), None).unwrap(),
            l("16g", "8", 2048)
        );
        assert_eq!(
            change(Some("1.5G"), None, None).unwrap(),
            l("1.5g", "2", 2048)
        );
        assert_eq!(change(None, None, Some("100")).unwrap(), l("4g", "2", 100));
        for (m, c, p) in [
            (Some("16x"), None, None),
            (None, Some("9"), None),
            (None, Some("-1"), None),
            (None, None, Some("0")),
            (None, None, Some("ten")),
            (Some("1b"), None, None),
            (Some("16"), None, None),
            (None, Some("0.0001"), None),
            (None, None, None),
        ] {
            let e = change(m, c, p).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput, "{m:?} {c:?} {p:?}");
        }
        let reset = LimitsRequest {
            reset: true,
            ..LimitsRequest::default()
        };
        assert_eq!(
            new_limits(&l("1g", "1", 5), &defaults, &reset, 8).unwrap(),
            defaults
        );
    }

    #[test]
    fn token_budgets_read() {
        assert_eq!(parse_tokens("2000000").unwrap(), Some(2_000_000));
        assert_eq!(parse_tokens(" 1 ").unwrap(), Some(1));
        assert_eq!(parse_tokens("none").unwrap(), None);
        assert_eq!(parse_tokens("None").unwrap(), None);
        // Thousands and millions, as people write budgets.
        for (text, n) in [
            ("5k", 5_000),
            ("5K", 5_000),
            ("5M", 5_000_000),
            ("1.5M", 1_500_000),
            ("2.25k", 2_250),
            (" 10M ", 10_000_000),
            ("0.5k", 500),
        ] {
            assert_eq!(parse_tokens(text).unwrap(), Some(n), "{text}");
        }
        for bad in [
            "0",
            "-5",
            "1.5",
            "2m",
            "",
            "lots",
            "99999999999999999999999",
            "k",
            "M",
            ".5k",
            "5.k",
            "1.0005k",
            "5kk",
            "5 k",
            "5G",
            "0k",
            "-1k",
            "+5k",
            "99999999999999M",
        ] {
            let e = parse_tokens(bad).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput, "{bad}");
            assert!(e.message().starts_with("--tokens: "), "{}", e.message());
            assert!(
                e.message().contains("or none for no budget"),
                "{}",
                e.message()
            );
        }
    }
}
