//! `GET /`: the status page (docs/serve.md, "HTTP API"). One HTML page made here:
//! what was spent today and the daily budget, the sessions, the machine's
//! image, the last history lines, and for each caged session a form that
//! sets its token budget (posted to `form`'s route, with the page's secret
//! in it). No script, nothing loaded from anywhere (the style is in the
//! page), and a Content-Security-Policy that forbids all of it and lets a
//! form post to serve alone, so that even a value that slipped through
//! unescaped could run nothing and send nothing elsewhere.
//!
//! It answers from what serve holds, as `GET /v1/sessions` does: the
//! records and histories on disk, the sessions' locks (what holds one),
//! serve's live view of the cages and what it last saw of the image. It
//! never calls podman: without a live view, a cage's state is "unknown".
//!
//! Every value from a record, a history, a lock file or a build's log is
//! text a session or a hand could have written: the page is made with
//! maud, whose `html!` escapes every value put into it (`&`, `<`, `>`,
//! `"`) unless it is marked as already HTML, which nothing here is.
//! Attributes are always in double quotes, which it escapes.

use std::sync::Arc;

use axum::Extension;
use axum::response::IntoResponse;
use maud::{DOCTYPE, Markup, html};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::Shared;
use super::live::Live;
use super::reply::Response;
use super::state::CageInfo;
use crate::settings::prices::Usd;
use crate::state::session::{Busy, Damaged, HistoryEntry, Record, Store};

/// History lines shown, across the sessions, newest first.
pub const HISTORY_LINES: usize = 20;

/// Refused connections shown for each session, newest first.
pub const REFUSALS: usize = 3;

/// Nothing is loaded and nothing runs: no script, image, font or frame,
/// a form posts to serve itself only, and no other page may frame this
/// one (a framed form could be clicked through a page laid over it); the
/// page's own `<style>` alone is allowed. `base-uri`, `form-action` and
/// `frame-ancestors` do not fall back to `default-src` (CSP Level 3), so
/// they are named.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; \
                       form-action 'self'; frame-ancestors 'none'";

/// The headers of every HTML answer (the page, and what its form is
/// answered): they keep a browser from doing anything with it but showing
/// it, and from keeping it (the page holds its secret). The referrer goes
/// to serve's own origin only: a browser names the origin of a post from
/// a page whose policy is `no-referrer` as `null` (the Fetch standard,
/// "append a request `Origin` header"), and the form's route wants to see
/// serve's own there.
pub const HEADERS: [(&str, &str); 6] = [
    ("content-type", "text/html; charset=utf-8"),
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
];

/// What the page shows, gathered without podman.
pub struct Page {
    /// This machine's name among the machines.
    pub machine: String,
    /// When it was made (Unix seconds): ages are counted from it.
    pub now: u64,
    pub sessions: Vec<Row>,
    /// Records that do not read.
    pub damaged: Vec<Damaged>,
    /// What serve last saw of the machine's image (`GET /v1/harnesses`).
    pub cage: CageInfo,
    pub history: Vec<Line>,
    /// Histories that did not read: the session, and why.
    pub unread: Vec<(String, String)>,
    /// Each session's last refused connections (`REFUSALS`, newest first),
    /// for the sessions that have any; or why its egress log did not read.
    pub refusals: Vec<(
        String,
        std::result::Result<Vec<crate::net::egress::Line>, String>,
    )>,
    /// serve has a live view of the cages (else states are unknown).
    pub live: bool,
    /// Whether podman enforces the cages' limits on this machine (None:
    /// not known, serve found no podman).
    pub limits_enforced: Option<bool>,
    /// serve's page secret, which each form carries (`form`).
    pub secret: String,
    pub today: Today,
}

/// What the sessions of serve's state folder spent today, together, and
/// the daily budget (docs/gateway.md, "Daily budget").
pub struct Today {
    /// The machine's local day, `YYYY-MM-DD`.
    pub day: String,
    /// The day's file (tokens, dollars, the models without a price), or
    /// why it did not read.
    pub spent: std::result::Result<crate::state::spend::Day, String>,
    /// `[budget] daily_tokens` and `daily_usd` as the config file says
    /// now, or why it did not read.
    pub budget: std::result::Result<(Option<u64>, Option<Usd>), String>,
}

impl Today {
    /// Read now: the day's file, and the config's `[budget]`.
    fn read(store: &Store, config: &std::path::Path) -> Today {
        let day = crate::state::spend::today();
        Today {
            day: day.to_string(),
            spent: crate::state::spend::read(&store.spend_dir(), day).map_err(|e| e.message()),
            budget: crate::settings::budget_of(config)
                .map(|b| (b.daily_tokens, b.daily_usd))
                .map_err(|e| e.message()),
        }
    }
}

/// A session.
pub struct Row {
    pub record: Record,
    /// podman's state of its container ("missing" when podman has none);
    /// None where serve has no live view.
    pub state: Option<String>,
    /// What holds it now, if anything.
    pub busy: Option<Busy>,
    /// Its running cage's egress log (`egress::state`); None when its
    /// cage does not run.
    pub egress: Option<crate::net::egress::LogState>,
}

/// A history line and its session.
#[derive(Debug, PartialEq, Eq)]
pub struct Line {
    pub session: String,
    pub entry: HistoryEntry,
}

/// The status page's route, from its `#[utoipa::path]`.
pub fn api() -> OpenApiRouter {
    OpenApiRouter::new().routes(routes!(page))
}

/// The status page, for a person in a browser: HTML made on the server,
/// whose only forms set a session's token budget (`POST /limits/{name}`).
///
/// Its headers keep a browser from doing anything with it but showing it.
#[utoipa::path(get, path = "/", operation_id = "statusPage",
    responses((status = 200,
        description = "The status page: the sessions, the machine's image and the last history \
            lines, as HTML made on the server; for each caged session a form that sets its \
            token budget (POST /limits/{name}, with the page's secret). No script, nothing \
            loaded from elsewhere, never cached.",
        content_type = "text/html", body = String)))]
pub async fn page(Extension(shared): Extension<Arc<Shared>>) -> axum::response::Response {
    // The records and histories are read on a blocking thread, never
    // behind the operations that wait on podman.
    let made = tokio::task::spawn_blocking(move || {
        let live = super::ready_view(&shared);
        gather(&shared, live.as_deref(), crate::state::when::now()).map(|p| render(&p))
    })
    .await;
    match made {
        Ok(Ok(markup)) => html(200, markup.into_string()).into_response(),
        Ok(Err(e)) => Response::from_error(&e).into_response(),
        Err(_) => Response::error(500, "the request failed inside serve (a bug); see its log")
            .into_response(),
    }
}

/// An HTML answer with [`HEADERS`].
pub fn html(status: u16, body: String) -> Response {
    Response {
        status,
        headers: HEADERS.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        body: body.into_bytes(),
    }
}

/// What the page's form is answered when it changed nothing: the status
/// and the words of why, escaped as on the page, and the way back.
pub fn not_changed(status: u16, words: &str) -> Response {
    let reason = axum::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Not changed" }
                style { (maud::PreEscaped(STYLE)) }
            }
            body {
                h1 { "Not changed " small { "(" (status) " " (reason) ")" } }
                p.bad { (words) }
                p { "Nothing was changed. " a href="/" { "Back to the status page" } }
            }
        }
    };
    html(status, markup.into_string())
}

/// Everything the page shows, from the disk and serve's memory.
fn gather(shared: &Shared, live: Option<&Live>, now: u64) -> crate::error::Result<Page> {
    let store = Store::new(&shared.base.settings.state_dir);
    let (records, damaged) = store.list_readable()?;
    let mut histories = Vec::new();
    let mut unread = Vec::new();
    let mut sessions = Vec::new();
    let mut refusals = Vec::new();
    for record in records {
        match crate::net::egress::read(
            &store.egress_path(&record.name),
            &store.egress_refused_path(&record.name),
        ) {
            Ok(lines) => {
                let last = shown_refusals(&lines);
                if !last.is_empty() {
                    refusals.push((record.name.clone(), Ok(last)));
                }
            }
            Err(e) => refusals.push((record.name.clone(), Err(e.message()))),
        }
        match store.history(&record.name) {
            Ok(h) => histories.push((record.name.clone(), h)),
            Err(e) => unread.push((record.name.clone(), e.message())),
        }
        let state = match (&record.cage, live) {
            (None, _) => None,
            (Some(_), None) => None,
            (Some(c), Some(l)) => Some(l.state(&c.container).unwrap_or_else(|| "missing".into())),
        };
        let busy = store.busy(&record.name).ok().flatten();
        let egress = (state.as_deref() == Some("running"))
            .then(|| crate::net::egress::state(&store.egress_pid_path(&record.name)));
        sessions.push(Row {
            record,
            state,
            busy,
            egress,
        });
    }
    Ok(Page {
        machine: shared.base.settings.machine_name.clone(),
        now,
        sessions,
        damaged,
        cage: shared.state.harnesses().cage,
        history: newest(histories, HISTORY_LINES),
        unread,
        refusals,
        live: live.is_some(),
        limits_enforced: shared
            .state
            .host()
            .as_ref()
            .map(crate::host::enforces_limits),
        today: Today::read(&store, &shared.base.settings.config_path),
        secret: shared.page_secret.clone(),
    })
}

/// The `n` newest lines of the sessions' histories (each oldest first, as
/// kept), newest first; of lines written in the same second, the one
/// later in its file first.
pub fn newest(histories: Vec<(String, Vec<HistoryEntry>)>, n: usize) -> Vec<Line> {
    let mut all: Vec<(u64, usize, Line)> = histories
        .into_iter()
        .flat_map(|(session, entries)| {
            entries.into_iter().enumerate().map(move |(i, entry)| {
                (
                    entry.when,
                    i,
                    Line {
                        session: session.clone(),
                        entry,
                    },
                )
            })
        })
        .collect();
    all.sort_by_key(|l| std::cmp::Reverse((l.0, l.1)));
    all.into_iter().take(n).map(|(_, _, l)| l).collect()
}

const STYLE: &str = "
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em 2em; color: #1d232b; background: #fafbfc; }
h1 { font-size: 1.5em; margin: 0 0 .2em; }
h1 small { font-weight: normal; color: #5b6673; }
h2 { font-size: 1.15em; margin: 1.6em 0 .5em; }
p.meta { color: #5b6673; margin: 0 0 1em; }
table { border-collapse: collapse; background: #fff; box-shadow: 0 0 0 1px #d5dbe1; }
th, td { text-align: left; padding: .35em .7em; border-bottom: 1px solid #e3e7eb; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; white-space: nowrap; }
tr:nth-child(even) td { background: #f6f8fa; }
td.nw { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.what { max-width: 48em; overflow-wrap: anywhere; }
.state { display: inline-block; padding: 0 .5em; border-radius: .7em; background: #e3e7eb; }
.state.running { background: #cdebd3; color: #13541f; }
.state.missing, .state.unknown { background: #f6d5d5; color: #7a1616; }
.busy { background: #fbe6b8; color: #5c3d00; padding: 0 .4em; border-radius: .3em; }
.waiting { background: #f6c9c4; color: #5c0d00; padding: 0 .4em; border-radius: .3em; }
.bad { color: #9b1c1c; }
.none { color: #8a949e; }
form.budget { margin: 0; }
form.budget input[type=text] { width: 6em; }
";

/// The page, whole.
pub fn render(p: &Page) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "shrooms-agent on " (p.machine) }
                style { (maud::PreEscaped(STYLE)) }
            }
            body {
                h1 { "shrooms-agent " small { "on " (p.machine) } }
                p.meta {
                    "As of " (crate::state::when::local(p.now))
                    ". Reload the page to see it again. A caged session's token budget is set \
                     here as cage limits --tokens takes it (2M, 500k, none)."
                }
                (today(&p.today))
                (sessions(p))
                (left(p))
                (refused(p))
                (image(&p.cage))
                (history(p))
            }
        }
    }
}

/// Today's spend, all sessions together, beside the daily budget.
fn today(t: &Today) -> Markup {
    html! {
        p.meta {
            "Today (" (t.day) "): "
            @match &t.spent {
                Ok(d) => {
                    (crate::state::when::count(d.total.total(), "token", "tokens")) ", "
                    (Usd(d.usd).spend()) " spent, all sessions together"
                    @if !d.unpriced.is_empty() {
                        " (" (d.unpriced.iter().map(String::as_str).collect::<Vec<_>>().join(", "))
                        " at the price table's highest prices)"
                    }
                }
                Err(why) => span.bad { "what was spent does not read: " (why) }
            }
            "; "
            @match &t.budget {
                Ok((None, None)) => { "no daily budget" }
                Ok((tokens, usd)) => {
                    "daily budget "
                    @if let Some(b) = tokens { (b) " tokens" }
                    @if tokens.is_some() && usd.is_some() { " and " }
                    @if let Some(b) = usd { (b.budget()) }
                }
                Err(why) => span.bad { "the daily budget does not read: " (why) }
            }
            " ([budget] daily_tokens, daily_usd)."
        }
    }
}

fn none(text: &str) -> Markup {
    html! { span.none { (text) } }
}

fn sessions(p: &Page) -> Markup {
    html! {
        h2 { "Sessions (" (p.sessions.len()) ")" }
        @if !p.live {
            p.bad {
                "serve has no view of podman's containers (podman was not found when it \
                 started, or its podman ps failed): the cages' states are unknown here."
            }
        }
        @if p.sessions.is_empty() {
            p { (none("No sessions.")) }
        } @else {
            table.sessions {
                thead { tr {
                    th { "Session" } th { "Cage" } th { "Sealed" } th { "Network" } th { "State" }
                    th { "Busy" } th { "Age" } th { "Limits" } th { "Tokens spent" }
                    th { "Budget" } th { "Set the budget" } th { "Dollars spent" } th { "Dollar budget" }
                    th { "Harness" } th { "Image" }
                } }
                tbody {
                    @for row in &p.sessions { (session(row, p)) }
                }
            }
        }
        @if !p.damaged.is_empty() {
            h2 { "Damaged records" }
            ul {
                @for d in &p.damaged { li { b { (d.name) } ": " (d.error) } }
            }
        }
    }
}

fn session(row: &Row, p: &Page) -> Markup {
    let now = p.now;
    let r = &row.record;
    let cage = r.cage.as_ref();
    let used = &r.tokens.used;
    html! {
        tr {
            td.nw { b { (r.name) } }
            td { @if cage.is_some() { "caged" } @else { "out" } }
            td { @if cage.is_some_and(|c| c.sealed.is_some()) { "sealed" } @else { (none("no")) } }
            // The network policy (docs/network.md, "Network policy"); a sealed
            // cage's rules are its own.
            td.net {
                @match cage {
                    None => (none("-")),
                    Some(c) if c.sealed.is_some() => "sealed",
                    Some(c) => (c.net),
                }
                // A log that cannot be written cuts the cage's network
                // (docs/network.md, "The egress log").
                @if let Some(problem) = row.egress.as_ref().and_then(|e| e.problem.as_ref()) {
                    br;
                    span.bad { "CUT: " (problem) }
                }
            }
            td {
                @match (cage, &row.state) {
                    (None, _) => (none("-")),
                    (Some(_), None) => span.state.unknown { "unknown" },
                    (Some(_), Some(s)) => span class={ "state " (state_class(s)) } { (s) },
                }
            }
            td.nw { (busy(row.busy.as_ref(), now)) }
            td.nw title=(crate::state::when::local(r.created)) { (crate::state::when::age(r.created, now)) }
            td {
                @match cage {
                    None => (none("-")),
                    Some(c) => {
                        "memory " (c.limits.memory) ", "
                        (c.limits.cpus) " CPUs, " (c.limits.pids) " pids"
                        @if p.limits_enforced == Some(false) {
                            " " span.bad title="podman keeps these limits but does not enforce \
                                them here (rootless on cgroups v1); see shrooms-agent doctor" {
                                "(NOT enforced on this machine)"
                            }
                        }
                    },
                }
            }
            td.num title=(used.describe()) { (used.total()) }
            (budget_cells(r, &p.secret))
            // At list prices (docs/gateway.md, "Budgets"); by model in the title.
            td.num title=(by_model(&r.tokens)) { (r.tokens.spend().words()) }
            td.num {
                @match r.tokens.usd_budget {
                    None => (none("none")),
                    Some(b) => (b.budget()),
                }
            }
            td { (r.harness.name()) }
            td { @match cage { None => (none("-")), Some(c) => (c.image) } }
        }
    }
}

/// What holds a session, since when, and what its turn waits on.
fn busy(busy: Option<&Busy>, now: u64) -> Markup {
    html! {
        @match busy {
            None => (none("-")),
            Some(b) => {
                span.busy title=[b.since.map(crate::state::when::local)] {
                    (b.what)
                    @if let Some(t) = b.since { ", " (since(t, now)) }
                }
                @if let Some(w) = b.waiting.as_ref() {
                    " " span.waiting title=(w.why) {
                        "waits on its " (w.budget) " budget, " (since(w.since, now))
                    }
                }
            },
        }
    }
}

/// A session's budget, and the form that sets it where it is caged.
fn budget_cells(r: &Record, secret: &str) -> Markup {
    html! {
        td.num {
            @match r.tokens.budget {
                None => (none("none")),
                Some(b) => (b),
            }
        }
        td.nw {
            @match r.cage {
                None => (none("-")),
                Some(_) => (budget_form(&r.name, secret)),
            }
        }
    }
}

/// A session's tokens and dollars by model, one model a line.
fn by_model(t: &crate::state::session::Tokens) -> String {
    let priced = t.by_model.iter().map(|(m, s)| {
        let usd = s.usd.map_or("no price".to_string(), |u| u.spend());
        format!("{m}: {}; {usd}", s.usage.describe())
    });
    let signed_in = t
        .subscription
        .iter()
        .map(|(m, u)| format!("{m}: {}; on a subscription sign-in", u.describe()));
    priced.chain(signed_in).collect::<Vec<_>>().join("\n")
}

/// The characters a session's name keeps in the form's path; any other is
/// percent-encoded, as a path segment must be (RFC 3986, 3.3).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_');

/// A form that sets a session's token budget: posted (URL-encoded, as a
/// form is by default) to `POST /limits/{name}` with the page's secret.
fn budget_form(name: &str, secret: &str) -> Markup {
    let action = format!(
        "/limits/{}",
        percent_encoding::utf8_percent_encode(name, SEGMENT)
    );
    html! {
        form.budget method="post" action=(action) enctype="application/x-www-form-urlencoded" {
            input type="hidden" name="secret" value=(secret);
            input type="text" name="tokens" size="8" required placeholder="2M, none"
                autocomplete="off" aria-label={ "The token budget of " (name) };
            " "
            button type="submit" { "Set" }
        }
    }
}

/// A class name for a state: podman's word when it is one of a few, so a
/// state never makes up a class of its own.
fn state_class(state: &str) -> &'static str {
    match state {
        "running" => "running",
        "missing" => "missing",
        _ => "other",
    }
}

/// `for 3 min`, `just now`.
fn since(then: u64, now: u64) -> String {
    let a = crate::state::when::age(then, now);
    match a.strip_suffix(" ago") {
        Some(d) => format!("for {d}"),
        None => a,
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn image(c: &CageInfo) -> Markup {
    html! {
        h2 { "Image" }
        @if !c.available {
            p.bad { "No podman was found: no cage can be made or started here." }
        }
        table.images {
            thead { tr { th { "Image" } th { "Ready" } th { "Building" } th { "Last build error" } } }
            tbody { tr {
                td { (c.image) }
                td { (yes_no(c.ready)) }
                td { (yes_no(c.building)) }
                td.what {
                    @match &c.error {
                        None => (none("-")),
                        Some(e) => span.bad { (e) },
                    }
                }
            } }
        }
        @let others: Vec<&String> = c.images.iter().filter(|i| **i != c.image).collect();
        @if !others.is_empty() {
            p.meta {
                "Also offered: "
                @for (i, o) in others.iter().enumerate() {
                    @if i > 0 { ", " }
                    (o)
                }
            }
        }
    }
}

/// What each session's last turn left for the machine (docs/security.md, "Git in a
/// cage", "What the machine runs later"): the agent's branches brought
/// into the user's repository, those refused and why, and the files other
/// tools run later that it created, changed or removed.
fn left(p: &Page) -> Markup {
    let rows: Vec<(&str, &crate::state::session::AfterTurn)> = p
        .sessions
        .iter()
        .filter_map(|row| Some((row.record.name.as_str(), row.record.after_turn.as_ref()?)))
        .collect();
    html! {
        h2 { "What the last turns left for this machine" }
        @if rows.is_empty() {
            p { (none("No commits came in, and no file another tool runs later was written.")) }
        } @else {
            table.left {
                thead { tr { th { "Session" } th { "When" } th { "What" } } }
                tbody {
                    @for (name, after) in &rows {
                        @for b in &after.git.brought {
                            tr {
                                td { (name) } td.nw { (crate::state::when::local(after.when)) }
                                td.what { "brought in: its branch " (b.branch) " as "
                                    code { (b.into.trim_start_matches("refs/heads/")) }
                                    " (" (b.commit.get(..12).unwrap_or(&b.commit)) ", "
                                    (b.objects) " new objects)" }
                            }
                        }
                        @for r in &after.git.refused {
                            tr {
                                td { (name) } td.nw { (crate::state::when::local(after.when)) }
                                td.what.bad { "refused: its branch " (r.branch) ": " (r.why) }
                            }
                        }
                        @for f in &after.files {
                            tr {
                                td { (name) } td.nw { (crate::state::when::local(after.when)) }
                                td.what.bad { (f.change) " " code { (f.path) } ", which a tool on \
                                    this machine runs or loads later (" (f.why) ")" }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Pure: a session's last refusals as the page shows them, without those
/// to IPv6 multicast addresses (ff00::/8): a cage's own network sends its
/// multicast listener reports and router solicitations there as it comes
/// up (RFC 3810, RFC 4861), refused under every policy but `open` and
/// asked for by no program of the cage, so they would only push the
/// refusals worth a look off the page. The egress log keeps them
/// (`cage history --net`).
fn shown_refusals(lines: &[crate::net::egress::Line]) -> Vec<crate::net::egress::Line> {
    let multicast = |l: &crate::net::egress::Line| {
        l.address
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|a| a.is_multicast())
    };
    let kept: Vec<_> = lines.iter().filter(|l| !multicast(l)).cloned().collect();
    crate::net::egress::last_refusals(&kept, REFUSALS)
}

fn refused(p: &Page) -> Markup {
    html! {
        h2 { "Refused connections (each session's last " (REFUSALS) ", newest first)" }
        p { "Refusals of IPv6 multicast, which a cage's network sends as it comes up, are left out here; \
             cage history --net shows every line." }
        @if p.refusals.is_empty() {
            p { (none("No connection refused.")) }
        } @else {
            table.refused {
                thead { tr { th { "Session" } th { "When, where, by which rule" } } }
                tbody {
                    @for (s, lines) in &p.refusals {
                        @match lines {
                            Ok(lines) => {
                                @for l in lines {
                                    tr {
                                        td { (s) }
                                        td.what { (crate::face::output::egress_line(l)) }
                                    }
                                }
                            }
                            Err(e) => {
                                tr { td { (s) } td.bad { "The egress log does not read: " (e) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn history(p: &Page) -> Markup {
    html! {
        h2 { "History (the last " (HISTORY_LINES) " lines, newest first)" }
        @if p.history.is_empty() {
            p { (none("No history yet.")) }
        } @else {
            table.history {
                thead { tr { th { "When" } th { "Session" } th { "Who" } th { "What" } } }
                tbody {
                    @for l in &p.history {
                        tr {
                            td.nw {
                                (crate::state::when::local(l.entry.when))
                                " " span.none { "(" (crate::state::when::age(l.entry.when, p.now)) ")" }
                            }
                            td { (l.session) }
                            td { (l.entry.who) }
                            td.what { (l.entry.what) }
                        }
                    }
                }
            }
        }
        @if !p.unread.is_empty() {
            ul {
                @for (s, e) in &p.unread {
                    li.bad { "The history of " (s) " does not read: " (e) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::session::{sample_cage, sample_record};

    fn entry(when: u64, what: &str) -> HistoryEntry {
        HistoryEntry {
            when,
            who: "alice".into(),
            what: what.into(),
        }
    }

    fn cage_info() -> CageInfo {
        CageInfo {
            available: true,
            image: "localhost/shrooms-workbench:latest".into(),
            images: vec![
                "localhost/shrooms-workbench:latest".into(),
                "localhost/shrooms-workbench:desktop".into(),
            ],
            nix: false,
            sealed: false,
            ready: false,
            building: true,
            error: None,
            shared: true,
            shared_in: "/shared",
            shared_root: None,
        }
    }

    /// Across sessions, newest first; within a second, the later line of
    /// a file first; at most `n`.
    #[test]
    fn the_newest_history_lines_across_sessions() {
        let got = newest(
            vec![
                (
                    "a".into(),
                    vec![entry(10, "a1"), entry(30, "a2"), entry(30, "a3")],
                ),
                ("b".into(), vec![entry(20, "b1"), entry(40, "b2")]),
                ("c".into(), vec![]),
            ],
            4,
        );
        let whats: Vec<(&str, &str)> = got
            .iter()
            .map(|l| (l.session.as_str(), l.entry.what.as_str()))
            .collect();
        assert_eq!(whats, [("b", "b2"), ("a", "a3"), ("a", "a2"), ("b", "b1")]);
        assert!(newest(Vec::new(), 20).is_empty());
    }

    fn page_with(record: Record, state: Option<&str>, history: Vec<Line>) -> Page {
        Page {
            machine: "laptop".into(),
            now: 1_796_061_909,
            sessions: vec![Row {
                record,
                state: state.map(str::to_string),
                busy: Some(Busy {
                    what: "turn".into(),
                    since: Some(1_796_061_909 - 180),
                    since_rfc3339: None,
                    waiting: None,
                }),
                egress: None,
            }],
            damaged: Vec::new(),
            cage: cage_info(),
            history,
            unread: Vec::new(),
            refusals: Vec::new(),
            live: true,
            limits_enforced: Some(true),
            today: Today {
                day: "2026-12-06".into(),
                spent: Ok(crate::state::spend::Day {
                    total: crate::state::session::Usage {
                        input_tokens: 1000,
                        output_tokens: 234,
                        ..Default::default()
                    },
                    usd: 13_200_000,
                    ..Default::default()
                }),
                budget: Ok((Some(2_000_000), None)),
            },
            secret: "5ec2e7".into(),
        }
    }

    /// The refusals the page shows leave out IPv6 multicast (a cage's own
    /// network announcing itself), however many and however new.
    #[test]
    fn ipv6_multicast_refusals_are_left_out_of_the_page() {
        let line = |address: &str, allowed: bool| crate::net::egress::Line {
            time: "2026-12-01T18:00:00.000Z".into(),
            session: "webapp".into(),
            address: address.into(),
            name: None,
            port: None,
            protocol: "icmpv6".into(),
            allowed,
            rule: "private".into(),
        };
        let mut lines = vec![line("10.0.0.9", false), line("192.168.1.1", false)];
        lines.push(line("ff02::1:2", true));
        for a in ["ff02::16", "ff02::2", "ff05::2", "ff02::16", "ff02::2"] {
            lines.push(line(a, false));
        }
        let shown: Vec<String> = shown_refusals(&lines)
            .into_iter()
            .map(|l| l.address)
            .collect();
        assert_eq!(shown, ["192.168.1.1", "10.0.0.9"]);
        assert!(shown_refusals(&lines[2..]).is_empty());
    }

    /// What the page says of a session: its name, cage, seal, state,
    /// what holds it and since when, its age, limits, tokens and budget;
    /// the image and its build; the history with local times and ages.
    #[test]
    fn the_page_shows_sessions_image_and_history() {
        let mut r = sample_record("webapp");
        r.created = 1_796_061_909 - 2 * 3600;
        let mut c = sample_cage("shrooms-webapp-0a1b2c");
        c.image = "localhost/shrooms-workbench:latest".into();
        r.cage = Some(c);
        r.tokens.budget = Some(5000);
        r.tokens.used.input_tokens = 12;
        r.tokens.used.output_tokens = 7;
        r.tokens.used.responses = 1;
        r.tokens.usd_budget = Some(crate::settings::prices::Usd::cents(250));
        r.tokens.by_model.insert(
            "claude-sonnet-4-5".into(),
            crate::state::session::ModelSpend {
                usage: r.tokens.used,
                usd: Some(crate::settings::prices::Usd(141_000)),
            },
        );
        let history = vec![Line {
            session: "webapp".into(),
            entry: entry(1_796_061_909 - 600, "limits memory 4g -> 8g"),
        }];
        let mut p = page_with(r, Some("running"), history);
        p.refusals = vec![(
            "webapp".into(),
            Ok(vec![crate::net::egress::Line {
                time: "2026-12-01T18:00:00.000Z".into(),
                session: "webapp".into(),
                address: "10.199.77.1".into(),
                name: None,
                port: Some(22),
                protocol: "tcp".into(),
                allowed: false,
                rule: "local-range".into(),
            }]),
        )];
        let html = render(&p).into_string();
        for want in [
            "refused 10.199.77.1:22 tcp (local-range)",
            "<title>shrooms-agent on laptop</title>",
            r#"<td class="nw"><b>webapp</b></td><td>caged</td>"#,
            r#"<span class="state running">running</span>"#,
            "turn, for 3 min",
            "2 hours ago",
            "memory 4g, 2 CPUs, 2048 pids",
            r#"title="in 12, out 7, cache write 0, cache read 0 (19 tokens, 1 response)">19</td>"#,
            r#"<td class="num">5000</td>"#,
            r#"title="claude-sonnet-4-5: in 12, out 7, cache write 0, cache read 0 (19 tokens, 1 response); $0.0001">$0.0001</td>"#,
            r#"<td class="num">$2.50</td>"#,
            "<td>claude</td>",
            r#"<td>no</td><td>yes</td><td class="what">"#,
            "Also offered: localhost/shrooms-workbench:desktop",
            "limits memory 4g -&gt; 8g",
            "(10 min ago)",
            "Today (2026-12-06): 1234 tokens, $0.0132 spent, all sessions together; daily \
             budget 2000000 tokens ([budget] daily_tokens, daily_usd).",
        ] {
            assert!(html.contains(want), "{want:?} not in\n{html}");
        }
        assert!(!html.contains("NOT enforced"), "{html}");
        assert!(!html.contains("CUT"), "{html}");
        // A cage whose egress log cannot be written: said in its row.
        let mut cut = p;
        cut.sessions[0].egress = Some(crate::net::egress::state_of(Some("egress:nospc")));
        let html = render(&cut).into_string();
        assert!(
            html.contains(
                "<span class=\"bad\">CUT: the egress log cannot be written (no space is left"
            ),
            "{html}"
        );
        // No script, nothing loaded from elsewhere; the one form, the
        // caged session's budget, posts to serve with the page's secret.
        for never in ["<script", "<link", "<img", "src=", "href="] {
            assert!(!html.contains(never), "{never:?} in\n{html}");
        }
        assert_eq!(html.matches("<form").count(), 1, "{html}");
        assert_eq!(html.matches("<input").count(), 2, "{html}");
        assert!(
            html.contains(
                r#"<td class="num">5000</td><td class="nw"><form class="budget" method="post" action="/limits/webapp" enctype="application/x-www-form-urlencoded"><input type="hidden" name="secret" value="5ec2e7"><input type="text" name="tokens" size="8" required placeholder="2M, none" autocomplete="off" aria-label="The token budget of webapp"> <button type="submit">Set</button></form></td>"#
            ),
            "{html}"
        );
    }

    /// A session out of its cage has no budget to set (the gateway is a
    /// cage's): no form in its row.
    #[test]
    fn no_form_for_a_session_out_of_its_cage() {
        let html = render(&page_with(sample_record("notes"), None, Vec::new())).into_string();
        assert!(!html.contains("<form"), "{html}");
        assert!(!html.contains("5ec2e7"), "{html}");
    }

    /// The form's path holds the session's name percent-encoded, whatever
    /// a record says its name is: it names no other path.
    #[test]
    fn the_forms_path_is_the_name_encoded() {
        let mut r = sample_record("a/../b c?d#e");
        r.cage = Some(sample_cage("c"));
        let html = render(&page_with(r, None, Vec::new())).into_string();
        assert!(
            html.contains(r#"action="/limits/a%2F..%2Fb%20c%3Fd%23e""#),
            "{html}"
        );
        let mut r = sample_record("web-app_2.0");
        r.cage = Some(sample_cage("c"));
        let html = render(&page_with(r, None, Vec::new())).into_string();
        assert!(html.contains(r#"action="/limits/web-app_2.0""#), "{html}");
    }

    /// Without a daily budget, or with files that do not read, the line of
    /// today's spend says so.
    #[test]
    fn todays_spend_without_a_budget_or_unread() {
        let mut p = page_with(sample_record("web"), None, Vec::new());
        p.today.budget = Ok((None, None));
        let mut day = crate::state::spend::Day::default();
        day.total.output_tokens = 1;
        p.today.spent = Ok(day.clone());
        let html = render(&p).into_string();
        assert!(
            html.contains(
                "Today (2026-12-06): 1 token, $0.0000 spent, all sessions together; no daily budget"
            ),
            "{html}"
        );
        // A dollar budget; models without a price, named.
        day.usd = 140_000_000;
        day.unpriced = ["gpt-3.5-turbo".to_string(), "o1".to_string()].into();
        p.today.spent = Ok(day);
        p.today.budget = Ok((None, Some(crate::settings::prices::Usd::cents(500))));
        let html = render(&p).into_string();
        let want = "Today (2026-12-06): 1 token, $0.1400 spent, all sessions together \
             (gpt-3.5-turbo, o1 at the price table's highest prices); daily budget $5.00";
        assert!(html.contains(want), "{want}\n{html}");
        p.today.budget = Ok((Some(9), Some(crate::settings::prices::Usd::cents(500))));
        let html = render(&p).into_string();
        assert!(html.contains("daily budget 9 tokens and $5.00 ("), "{html}");
        p.today.spent = Err("its file is damaged".into());
        p.today.budget = Err("key `budget`: bad".into());
        let html = render(&p).into_string();
        for want in [
            r#"<span class="bad">what was spent does not read: its file is damaged</span>"#,
            r#"<span class="bad">the daily budget does not read: key `budget`: bad</span>"#,
        ] {
            assert!(html.contains(want), "{want}\n{html}");
        }
    }

    /// Where podman keeps limits but does not enforce them, the page says
    /// so beside them.
    #[test]
    fn unenforced_limits_are_shown_as_such() {
        let mut r = sample_record("webapp");
        r.cage = Some(sample_cage("shrooms-webapp-0a1b2c"));
        let mut p = page_with(r, Some("running"), Vec::new());
        p.limits_enforced = Some(false);
        let html = render(&p).into_string();
        assert!(
            html.contains("memory 4g, 2 CPUs, 2048 pids <span class=\"bad\""),
            "{html}"
        );
        assert!(html.contains("(NOT enforced on this machine)"), "{html}");
    }

    #[test]
    fn out_of_a_cage_or_without_a_view() {
        let html = render(&page_with(sample_record("notes"), None, Vec::new())).into_string();
        assert!(html.contains("<td>out</td>"), "{html}");
        assert!(html.contains("No history yet."), "{html}");
        assert!(html.contains("No connection refused."), "{html}");
        let mut r = sample_record("webapp");
        r.cage = Some(sample_cage("shrooms-webapp-0a1b2c"));
        let mut p = page_with(r, None, Vec::new());
        p.live = false;
        let html = render(&p).into_string();
        assert!(
            html.contains(r#"<span class="state unknown">unknown</span>"#),
            "{html}"
        );
        assert!(html.contains("serve has no view of podman"), "{html}");
    }

    /// What a session's last turn left: each branch brought in (its
    /// name in the user's repository, its commit), each refused with why,
    /// each named file with its change and reason; escaped as the rest.
    #[test]
    fn what_the_last_turn_left_is_shown() {
        use crate::cage::git::bring::{Brought, Refused, Report};
        let html = render(&page_with(sample_record("web"), None, Vec::new())).into_string();
        assert!(html.contains("No commits came in"), "{html}");
        let mut r = sample_record("web");
        r.after_turn = Some(crate::state::session::AfterTurn {
            when: 1_796_061_909 - 60,
            git: Report {
                brought: vec![Brought {
                    branch: "main".into(),
                    into: "refs/heads/cage/web/main".into(),
                    commit: "0123456789abcdef0123456789abcdef01234567".into(),
                    objects: 3,
                }],
                refused: vec![Refused {
                    branch: "evil".into(),
                    why: crate::error::NotBrought::Said(
                        "its tree <b> has an entry named \".git\"".into(),
                    ),
                }],
            },
            files: vec![crate::state::session::NamedFile {
                path: ".envrc.local".into(),
                change: "created".into(),
                why: "sourced by an allowed .envrc".into(),
            }],
        });
        let html = render(&page_with(r, None, Vec::new())).into_string();
        for want in [
            "brought in: its branch main as <code>cage/web/main</code> (0123456789ab, 3 new objects)",
            "refused: its branch evil: its tree &lt;b&gt; has an entry named &quot;.git&quot;",
            "created <code>.envrc.local</code>, which a tool on this machine runs or loads later \
             (sourced by an allowed .envrc)",
        ] {
            assert!(html.contains(want), "{want}\n{html}");
        }
    }

    /// Whatever a record, a history line, a lock file or a build's log
    /// holds comes out as text: markup in it is escaped, in the text and
    /// in the attributes alike, and a state makes up no class.
    #[test]
    fn every_value_is_escaped() {
        let evil = r#""><img src=x onerror=alert(1)><script>alert(2)</script>"#;
        let mut r = sample_record(evil);
        let mut c = sample_cage("c");
        c.image = evil.into();
        r.cage = Some(c);
        let mut p = page_with(
            r,
            Some(evil),
            vec![Line {
                session: evil.into(),
                entry: HistoryEntry {
                    when: 1,
                    who: evil.into(),
                    what: evil.into(),
                },
            }],
        );
        p.machine = evil.into();
        p.sessions[0].busy = Some(Busy {
            what: evil.into(),
            since: None,
            since_rfc3339: None,
            waiting: Some(crate::state::session::Waiting {
                since: 1,
                since_rfc3339: String::new(),
                budget: evil.into(),
                why: evil.into(),
            }),
        });
        p.cage.error = Some(evil.into());
        p.cage.image = evil.into();
        p.damaged.push(Damaged {
            name: evil.into(),
            error: crate::error::Error::failed(evil),
        });
        p.unread.push((evil.into(), evil.into()));
        p.today.spent = Err(evil.into());
        p.today.budget = Err(evil.into());
        let html = render(&p).into_string();
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("alert(1)>"), "{html}");
        let escaped =
            "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;";
        // The machine's name (title, heading), the session (table, its
        // form's label, history, damaged, unread), the image (table
        // twice), the state, the busy and what it waits on (shown, and
        // its title), who and what, the build error, the record's error
        // and the history's, today's spend's and the daily budget's
        // errors.
        assert_eq!(html.matches(escaped).count(), 20, "{html}");
        // In the form's path, the name is percent-encoded.
        assert!(
            html.contains(r#"action="/limits/%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29"#),
            "{html}"
        );
        assert!(html.contains(r#"<span class="state other">"#), "{html}");
    }
}
