//! The session object: a session as one object, the same wherever a
//! session is given as JSON (`cage ls --json`, `cage show --json`, `GET
//! /v1/sessions`, `GET /v1/sessions/{name}`; docs/cages.md, "The session
//! object"): the facts of the session, and a nested `cage` for what belongs
//! to its container. `show.rs` and `listing.rs` gather it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::cage::harness::Harness;
use crate::cage::spec::{Network, Options};
use crate::settings::Limits;
use crate::settings::prices::Usd;
use crate::state::session::{
    Busy, CageRecord, ModelSpend, MountSource, Record, SealedRecord, Spend, Usage,
};
use crate::state::when::Time;

/// A session, as every JSON face gives it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Session {
    pub name: String,
    /// The project folder, canonical and absolute.
    #[schema(value_type = String)]
    pub dir: PathBuf,
    pub harness: Harness,
    /// When it was made: RFC 3339 with the machine's local offset.
    #[schema(value_type = String, format = DateTime)]
    pub created: Time,
    /// In a sealed cage.
    pub sealed: bool,
    /// Kept for the apps, which show and set it.
    pub auto_approve: bool,
    /// Starred in the apps; the tool itself does not read it.
    pub starred: bool,
    /// Does it take tasks and files from caged sessions, as in force
    /// (set, or by default: yes in a cage).
    pub accept_caged: bool,
    /// What holds the session now (a turn, a create, ...) and since when;
    /// null when nothing does.
    pub busy: Option<Busy>,
    /// Whom it takes files from, and who tried and was refused.
    pub files: Files,
    /// The model tokens its turns spent, and its token budget.
    pub tokens: Tokens,
    /// Its cage; null for a session out of its cage.
    pub cage: Option<Cage>,
    /// What its last turn left for the machine, when it left something
    /// (docs/security.md, "Git in a cage", "What the machine runs later"): the
    /// agent's branches brought into your repository (`git.brought`:
    /// branch, into, commit, objects) or refused (`git.refused`: branch,
    /// why), and the files other tools run later that it created, changed
    /// or removed (`files`: path, change, why); null otherwise.
    pub after_turn: Option<crate::state::session::AfterTurn>,
}

/// What belongs to a session's container.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Cage {
    /// `shrooms-<session>-<6 hex>`.
    pub container: String,
    pub image: String,
    /// podman's state of the container (running, exited, created, ...);
    /// "missing" when it is gone, "no podman" where `cage ls` runs without
    /// podman.
    pub state: String,
    pub running: bool,
    pub network: Network,
    pub limits: Limits,
    /// Whether podman enforces `limits` on this machine: false where it
    /// keeps them but ignores them (rootless on cgroups v1, with
    /// `unenforced_limits = "warn"`); null where podman could not be asked.
    pub limits_enforced: Option<bool>,
    /// `limits` are the session's own (`cage limits`), not the config's.
    pub own_limits: bool,
    /// The options that widen it.
    pub options: Options,
    /// The shared folder on the machine (podman's volume folder, then
    /// VOLUME/_data), for a cage given one; null otherwise.
    #[schema(value_type = Option<String>)]
    pub shared_path: Option<PathBuf>,
    /// What a sealed cage was made with; null for an ordinary cage.
    pub sealed: Option<SealedRecord>,
    /// Its network policy (docs/network.md, "Network policy"): "open", "internet"
    /// or "allow:NAME,HOST:PORT,..."; a sealed cage's is "internet" and
    /// its own rules.
    pub net: String,
    /// The image's own PATH, for the env file.
    pub image_path: String,
    /// The harness's data folder at the machine's path (the mount target).
    #[schema(value_type = String)]
    pub harness_dir: PathBuf,
    /// The harness program run inside for `cage run`, if known.
    #[schema(value_type = Option<String>)]
    pub program: Option<PathBuf>,
    /// The `podman create` argv the container was made with.
    pub create_argv: Vec<String>,
    /// Its egress log while it runs (docs/network.md, "The egress log"): written,
    /// or what keeps it from being written, which cuts the cage's network;
    /// null when the cage is not running.
    pub egress_log: Option<crate::net::egress::LogState>,
    /// Each bind mount's source as it was when the cage was made (empty
    /// for cages made before this was kept).
    pub mount_sources: Vec<MountSource>,
}

/// Whom a session takes files from (`files allow`), and the last refused.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Files {
    /// `MACHINE/SESSION` or `MACHINE/*`.
    pub allow: Vec<String>,
    /// The refused senders, oldest first, at most 10.
    pub refused: Vec<Refused>,
}

/// One refused drop.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Refused {
    /// RFC 3339 with the machine's local offset.
    #[schema(value_type = String, format = DateTime)]
    pub when: Time,
    /// `MACHINE/SESSION`.
    pub from: String,
}

impl From<&crate::state::session::FilesPolicy> for Files {
    fn from(f: &crate::state::session::FilesPolicy) -> Files {
        Files {
            allow: f.allow.clone(),
            refused: f
                .refused
                .iter()
                .map(|r| Refused {
                    when: Time(r.when),
                    from: r.from.clone(),
                })
                .collect(),
        }
    }
}

/// A session's model tokens (docs/gateway.md, "Model gateway").
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Tokens {
    /// No model request is forwarded once `used` reaches it (all four
    /// counts together); null: no budget.
    pub budget: Option<u64>,
    /// Summed over every turn.
    pub used: Usage,
    /// The last turn that reached the model, summed over its responses.
    pub last_turn: Option<TurnUsage>,
    /// No model request is forwarded once `spent.usd` reaches it, in
    /// dollars; null: no dollar budget.
    pub usd_budget: Option<Usd>,
    /// What its turns spent in dollars at list prices (docs/gateway.md,
    /// "Budgets"): `usd` null when a model had no price (`unpriced`
    /// names them); tokens on a subscription sign-in apart.
    pub spent: Spend,
    /// Tokens and dollars by model, on a per-token key.
    pub by_model: BTreeMap<String, ModelSpend>,
    /// Tokens by model on a subscription sign-in (no price per token).
    pub subscription: BTreeMap<String, Usage>,
}

/// One turn's tokens, and when it started.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TurnUsage {
    /// RFC 3339 with the machine's local offset.
    #[schema(value_type = String, format = DateTime)]
    pub started: Time,
    #[serde(flatten)]
    pub usage: Usage,
    /// What the turn spent in dollars, as `tokens.spent`.
    pub spent: Spend,
    pub by_model: BTreeMap<String, ModelSpend>,
    pub subscription: BTreeMap<String, Usage>,
}

impl From<&crate::state::session::Tokens> for Tokens {
    fn from(t: &crate::state::session::Tokens) -> Tokens {
        Tokens {
            budget: t.budget,
            used: t.used,
            last_turn: t.last_turn.as_ref().map(|l| TurnUsage {
                started: Time(l.started),
                usage: l.usage,
                spent: l.spend(),
                by_model: l.by_model.clone(),
                subscription: l.subscription.clone(),
            }),
            usd_budget: t.usd_budget,
            spent: t.spend(),
            by_model: t.by_model.clone(),
            subscription: t.subscription.clone(),
        }
    }
}

/// A cage's state as seen: podman's words, and whether it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub state: String,
    pub running: bool,
}

impl Seen {
    pub fn missing() -> Seen {
        Seen {
            state: "missing".into(),
            running: false,
        }
    }

    /// From `podman ps`'s state (the live view and `cage ls`).
    pub fn of_ps(state: &str) -> Seen {
        Seen {
            state: state.to_string(),
            running: state == "running",
        }
    }
}

impl Session {
    /// A session as given: its record, its cage's state as seen (unused
    /// out of a cage), its shared folder's path, what holds it, and whether
    /// this machine's podman enforces limits (None: not known).
    pub fn new(
        record: Record,
        seen: Seen,
        shared_path: Option<PathBuf>,
        busy: Option<Busy>,
        limits_enforced: Option<bool>,
    ) -> Session {
        // As in force, also where it was never set.
        let accept_caged = record.accepts_caged();
        Session {
            name: record.name,
            dir: record.dir,
            harness: record.harness,
            created: Time(record.created),
            sealed: record.cage.as_ref().is_some_and(|c| c.sealed.is_some()),
            auto_approve: record.auto_approve,
            starred: record.starred,
            accept_caged,
            busy,
            files: (&record.files).into(),
            tokens: (&record.tokens).into(),
            cage: record
                .cage
                .map(|c| Cage::new(c, seen, shared_path, limits_enforced)),
            after_turn: record.after_turn,
        }
    }
}

impl Cage {
    fn new(
        c: CageRecord,
        seen: Seen,
        shared_path: Option<PathBuf>,
        limits_enforced: Option<bool>,
    ) -> Cage {
        Cage {
            net: c.net.to_string(),
            container: c.container,
            image: c.image,
            state: seen.state,
            running: seen.running,
            network: c.network,
            limits: c.limits,
            limits_enforced,
            own_limits: c.own_limits,
            options: c.options,
            shared_path,
            sealed: c.sealed,
            image_path: c.image_path,
            harness_dir: c.harness_dir,
            program: c.program,
            create_argv: c.create_argv,
            mount_sources: c.mount_sources,
            egress_log: None,
        }
    }
}

/// A running cage's egress log, read from its listener (`egress::state`:
/// its pid file and name; no podman call, no write), into the session.
pub fn with_egress_log(store: &crate::state::session::Store, mut s: Session) -> Session {
    if let Some(c) = s.cage.as_mut().filter(|c| c.running) {
        c.egress_log = Some(crate::net::egress::state(&store.egress_pid_path(&s.name)));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The session object, golden: every field by its name, the times in
    /// RFC 3339 with an offset.
    #[test]
    fn the_session_object() {
        let mut r = crate::state::session::sample_record("web");
        r.created = 1_796_061_909;
        r.files.remember_refused(1_796_061_910, "m/s".into());
        r.tokens.last_turn = Some(crate::state::session::TurnUsage {
            started: 1_796_061_911,
            ..Default::default()
        });
        let busy = Some(Busy {
            what: "turn".into(),
            since: Some(1_796_061_912),
            since_rfc3339: Some(crate::state::when::rfc3339(1_796_061_912)),
            waiting: None,
        });
        let out = Session::new(r.clone(), Seen::missing(), None, busy.clone(), Some(true));
        let v = serde_json::to_value(&out).unwrap();
        // serde_json's map sorts its keys.
        let sorted = |mut k: Vec<&'static str>| {
            k.sort();
            k
        };
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(
            keys,
            sorted(vec![
                "name",
                "dir",
                "harness",
                "created",
                "sealed",
                "auto_approve",
                "starred",
                "accept_caged",
                "after_turn",
                "busy",
                "files",
                "tokens",
                "cage"
            ])
        );
        assert_eq!(v["name"], "web");
        assert_eq!(v["cage"], serde_json::Value::Null);
        assert_eq!(v["accept_caged"], false);
        for (t, secs) in [
            (&v["created"], 1_796_061_909),
            (&v["files"]["refused"][0]["when"], 1_796_061_910),
            (&v["tokens"]["last_turn"]["started"], 1_796_061_911),
            (&v["busy"]["since"], 1_796_061_912),
        ] {
            let t = t.as_str().unwrap();
            let parsed = chrono::DateTime::parse_from_rfc3339(t).unwrap();
            assert_eq!(parsed.timestamp(), secs, "{t}");
            // An offset, never a bare time.
            assert!(t.ends_with('Z') || t[19..].starts_with(['+', '-']), "{t}");
        }
        assert_eq!(v["files"]["refused"][0]["from"], "m/s");
        assert_eq!(v["tokens"]["last_turn"]["responses"], 0);

        r.cage = Some(crate::state::session::sample_cage("shrooms-web-0a1b2c"));
        let out = Session::new(
            r.clone(),
            Seen::of_ps("running"),
            Some("/v/x/_data".into()),
            None,
            Some(false),
        );
        let v = serde_json::to_value(&out).unwrap();
        let keys: Vec<&str> = v["cage"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            sorted(vec![
                "container",
                "image",
                "state",
                "running",
                "network",
                "limits",
                "limits_enforced",
                "own_limits",
                "options",
                "shared_path",
                "sealed",
                "net",
                "image_path",
                "harness_dir",
                "program",
                "create_argv",
                "mount_sources",
                "egress_log"
            ])
        );
        assert_eq!(v["cage"]["container"], "shrooms-web-0a1b2c");
        // Filled in from its listener (`with_egress_log`), only while the
        // cage runs.
        assert_eq!(v["cage"]["egress_log"], serde_json::Value::Null);
        assert_eq!(v["cage"]["state"], "running");
        assert_eq!(v["cage"]["running"], true);
        assert_eq!(v["cage"]["network"], "bridge");
        assert_eq!(v["cage"]["net"], "open");
        assert_eq!(v["cage"]["shared_path"], "/v/x/_data");
        assert_eq!(v["cage"]["limits_enforced"], false);
        assert_eq!(v["accept_caged"], true);
        assert_eq!(v["busy"], serde_json::Value::Null);
    }
}
