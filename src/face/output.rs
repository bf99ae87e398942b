//! The command line's face: results as text or `--json` on stdout, errors
//! and warnings on stderr. A closed pipe (`| head`) is not an error
//! (ripgrep's habit): output stops quietly.

use std::io::Write;

use serde::Serialize;

use crate::error::{Error, Face};
use crate::host::process::shown_line;
use crate::ops::{
    create::Created, doctor, listing::Listing, prune::Pruned, rm::Removed, session_object::Session,
};

/// Print a result as JSON or through its text form.
pub fn show<T: Serialize>(value: &T, json: bool, text: impl Fn(&T) -> String) {
    if json {
        // Written as it is made, through one small buffer: a listing of
        // many sessions (most of a megabyte) is never whole in memory, and
        // the reader takes its start while the rest is made. The types
        // printed here have string keys only, so the one error is the
        // write's: a closed pipe, and nothing more to say.
        let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        let _ = serde_json::to_writer_pretty(&mut out, value)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
    } else {
        raw(text(value).as_bytes());
    }
}

pub fn raw(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    if out.write_all(bytes).and_then(|_| out.flush()).is_err() {
        // Broken pipe or closed stdout: nothing more to say.
    }
}

/// Warnings on stderr. A stderr that is gone (a closed terminal, after
/// its hangup ended a turn) is not an error either: `eprintln!` would panic.
pub fn warnings<W: std::fmt::Display>(list: &[W]) {
    for w in list {
        let _ = writeln!(std::io::stderr(), "shrooms-agent: warning: {w}");
    }
}

/// A slow step as it begins, one line as cargo says its steps: the verb
/// right-aligned in twelve columns, then what.
pub fn step_line(p: &crate::ops::Progress) -> String {
    use crate::ops::Progress as P;
    let (verb, what) = match p {
        P::Making { container, image } => ("Making", format!("container {container} from {image}")),
        P::Removing { container } => ("Removing", format!("container {container}")),
        P::Stopping { container } => ("Stopping", format!("container {container}")),
        P::Starting { container } => ("Starting", format!("container {container}")),
    };
    format!("{verb:>12} {what}")
}

/// Say each slow step of the operation on stderr as it begins, where
/// stderr is a terminal and the result is not `--json`: nothing on
/// stdout, nothing for a script.
pub fn say_progress(ctx: &crate::ops::Context, json: bool) {
    use std::io::IsTerminal;
    if json || !std::io::stderr().is_terminal() {
        return;
    }
    ctx.on_progress(Box::new(|p| {
        let _ = writeln!(std::io::stderr(), "{}", step_line(p));
    }));
}

pub fn error(e: &Error, json: bool) {
    let _ = writeln!(
        std::io::stderr(),
        "shrooms-agent: error: {}",
        e.words(Face::Terminal)
    );
    if json {
        error_json(e);
    }
}

/// An error as `--json` gives it, on stdout: `{"error": ..., "exit_code":
/// N, "kind": ...}`.
pub fn error_json(e: &Error) {
    error_json_with(e, e.kind.exit_code());
}

fn error_json_with(e: &Error, code: u8) {
    let body = serde_json::Value::Object(error_keys(e, code));
    raw(format!("{body}\n").as_bytes());
}

/// An error's keys as `--json` gives them: its words, exit code and kind,
/// then what it is about, as data, each only when there is one: the
/// option whose value was refused (`"option": "--memory"`), what holds a
/// busy session (`"holder"`), the podman call that failed (`"podman"`),
/// what runs in a cage that cannot be moved or renamed now (`"running"`).
pub fn error_keys(e: &Error, code: u8) -> serde_json::Map<String, serde_json::Value> {
    let mut keys = serde_json::Map::new();
    keys.insert("error".into(), e.words(Face::Terminal).into());
    keys.insert("exit_code".into(), code.into());
    keys.insert("kind".into(), e.kind.name().into());
    if let Some(field) = e.field() {
        keys.insert("option".into(), crate::error::flag_of(field).into());
    }
    if let Some(holder) = e.holder().and_then(|h| serde_json::to_value(h).ok()) {
        keys.insert("holder".into(), holder);
    }
    if let Some(podman) = e.podman().and_then(|p| serde_json::to_value(p).ok()) {
        keys.insert("podman".into(), podman);
    }
    if let Some(running) = e.running() {
        keys.insert("running".into(), running.into());
    }
    keys
}

/// A failure of `cage exec` or `cage run` themselves: they exit
/// [`crate::error::TOOL_FAILED`] whatever the kind, so stderr and `--json`
/// name the kind (`busy`, `bad_input`, ...).
pub fn tool_error(e: &Error, json: bool) {
    let _ = writeln!(
        std::io::stderr(),
        "shrooms-agent: error ({}): {}",
        e.kind.name(),
        e.words(Face::Terminal)
    );
    if json {
        tool_error_json(e);
    }
}

/// A failure of `cage exec` or `cage run` as `--json` gives it (exit 125).
pub fn tool_error_json(e: &Error) {
    error_json_with(e, crate::error::TOOL_FAILED);
}

/// A command that did part of its work and then ends with an error (`cage
/// stop --all` with a busy session): what it did on stdout, then the error
/// on stderr; with `--json`, one object on stdout, the error's (`error`,
/// `exit_code`) with the fields of what it did.
/// What a command that did part of its work gives as JSON: the error's
/// keys (`error`, `exit_code`, `kind`), then what was done. Without an
/// error the same keys are there, null (exit code 0), so that a command
/// whose outcome may be partial (`cage stop --all`) has one shape.
pub fn error_body<T: Serialize>(e: Option<&Error>, done: &T) -> serde_json::Value {
    let mut body = match e {
        Some(e) => serde_json::Value::Object(error_keys(e, e.kind.exit_code())),
        None => serde_json::json!({"error": null, "exit_code": 0, "kind": null}),
    };
    if let (Some(b), Ok(serde_json::Value::Object(d))) =
        (body.as_object_mut(), serde_json::to_value(done))
    {
        b.extend(d);
    }
    body
}

pub fn error_after<T: Serialize>(e: &Error, json: bool, done: &T, text: impl Fn(&T) -> String) {
    if json {
        let body = error_body(Some(e), done);
        eprintln!("shrooms-agent: error: {}", e.words(Face::Terminal));
        raw(format!("{body:#}\n").as_bytes());
    } else {
        raw(text(done).as_bytes());
        error(e, false);
    }
}

pub fn created(c: &Created) -> String {
    let argv = shown_line(c.argv.iter().map(String::as_str));
    if c.dry_run {
        let refused = match &c.refused {
            Some(why) => format!("; the real create would be refused: {}", why.message()),
            None => String::new(),
        };
        format!(
            "# podman command line (nothing was changed{refused})\n{argv}\n\n\
             # env file cages/{}.env, written at each exec (mode 0600; secrets shown as <redacted>)\n{}",
            c.container, c.env_file
        )
    } else {
        format!(
            "created {} ({}): {} on {}, image {}, network {}\n",
            c.session,
            c.container,
            c.harness_name(),
            c.dir.display(),
            c.image,
            c.network
        )
    }
}

impl Created {
    fn harness_name(&self) -> &'static str {
        self.harness.name()
    }
}

pub fn removed(r: &Removed) -> String {
    let mut s = format!("removed {}", r.session);
    if let Some(c) = &r.container {
        s.push_str(&format!(" and its container {c}"));
    }
    s.push('\n');
    for f in &r.files {
        s.push_str(&format!("  removed {}\n", f.display()));
    }
    for line in crate::ops::before_git_goes::said_before_removal(&r.git) {
        s.push_str(&format!("  {line}\n"));
    }
    s
}

/// `cage bring`: what came in, what was refused, what `--ff` did.
pub fn brought(r: &crate::ops::bring::Brought) -> String {
    let mut lines = r.git.lines();
    if let Some(f) = &r.fast_forward {
        lines.push(crate::ops::bring::ff_line(f));
    }
    if lines.is_empty() {
        return format!("session {} has no new commits to bring in\n", r.session);
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// `cage ls -q`: the names, one a line.
pub fn names(n: &Vec<&str>) -> String {
    n.iter().map(|n| format!("{n}\n")).collect()
}

pub fn listing(l: &Listing) -> String {
    listing_at(l, crate::state::when::now())
}

/// The table as seen at `now` (Unix seconds): ages are relative to it.
pub fn listing_at(l: &Listing, now: u64) -> String {
    let mut rows: Vec<[String; 9]> = vec![[
        "SESSION".to_string(),
        "CONTAINER".into(),
        "STATE".into(),
        "BUSY".into(),
        "AGE".into(),
        "CAGE".into(),
        "HARNESS".into(),
        "IMAGE".into(),
        "DIR".into(),
    ]];
    for r in &l.sessions {
        let cage = r.cage.as_ref();
        rows.push([
            r.name.clone(),
            cage.map_or_else(|| "-".into(), |c| c.container.clone()),
            cage.map_or_else(|| "uncaged".into(), |c| c.state.clone()),
            match &r.busy {
                None => "-".into(),
                Some(b) => {
                    let mut s = match b.since {
                        Some(t) => format!("{} ({})", b.what, since(t, now)),
                        None => b.what.clone(),
                    };
                    if let Some(w) = &b.waiting {
                        s.push_str(&format!(", waits on budget ({})", since(w.since, now)));
                    }
                    s
                }
            },
            age(r.created.0, now),
            match (cage, r.sealed) {
                (None, _) => "-".into(),
                (Some(_), true) => "sealed".into(),
                (Some(_), false) => "caged".into(),
            },
            r.harness.name().into(),
            cage.map_or_else(|| "-".into(), |c| c.image.clone()),
            r.dir.display().to_string(),
        ]);
    }
    let mut s = table(&rows);
    if !l.leftovers.is_empty() {
        s.push_str(
            "\nleftovers (labelled, no session here; `shrooms-agent cage prune` removes those \
             this state folder made):\n",
        );
        for o in &l.leftovers {
            s.push_str(&format!(
                "  {} (session {}, {}, {})\n",
                o.container, o.session, o.state, o.image
            ));
        }
    }
    if !l.damaged.is_empty() {
        s.push_str(
            "
damaged records (the other sessions are listed above):
",
        );
        for d in &l.damaged {
            s.push_str(&format!(
                "  {}: {}
",
                d.name, d.error
            ));
        }
    }
    s
}

/// How long ago, for a table: `3 min` (the column says it is an age).
fn age(then: u64, now: u64) -> String {
    let a = crate::state::when::age(then, now);
    a.strip_suffix(" ago").unwrap_or(&a).to_string()
}

/// Since when, for a table: `for 3 min`.
fn since(then: u64, now: u64) -> String {
    match age(then, now).as_str() {
        "just now" => "just now".to_string(),
        a => format!("for {a}"),
    }
}

fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut s = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i + 1 == N {
                    c.clone()
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        s.push_str(line.join("  ").trim_end());
        s.push('\n');
    }
    s
}

pub fn shown(r: &Session) -> String {
    let mut s = format!(
        "session   {}\ndir       {}\nharness   {}\nstate     {}\n",
        r.name,
        r.dir.display(),
        r.harness.name(),
        r.cage.as_ref().map_or("uncaged", |c| c.state.as_str())
    );
    s.push_str(&format!(
        "caged     {} tasks and files from caged sessions (accept-caged {})\n",
        if r.accept_caged { "takes" } else { "refuses" },
        if r.accept_caged { "on" } else { "off" }
    ));
    if let Some(c) = &r.cage {
        s.push_str(&shown_cage(c));
    }
    let t = &r.tokens;
    s.push_str(&format!(
        "tokens    {}; budget {}\n",
        t.used.describe(),
        budget(t.budget)
    ));
    s.push_str(&format!(
        "dollars   {}; budget {}\n",
        t.spent.words(),
        usd_budget(t.usd_budget)
    ));
    if let Some(last) = &t.last_turn {
        s.push_str(&format!(
            "last turn {}; {}\n",
            last.usage.describe(),
            last.spent.words()
        ));
    }
    if let Some(w) = r.busy.as_ref().and_then(|b| b.waiting.as_ref()) {
        s.push_str(&format!(
            "waiting   on its {} budget since {}: {}\n",
            w.budget,
            crate::state::when::local(w.since),
            w.why
        ));
    }
    if let Some(after) = &r.after_turn {
        for line in after
            .git
            .said()
            .into_iter()
            .chain(crate::ops::later::said(&after.files))
        {
            s.push_str(&format!("after it  {line}\n"));
        }
    }
    s
}

/// A cage's lines of `cage show`: its container, image, network and
/// limits, and what it has besides (the egress log, a shared folder,
/// writable protected paths, a seal).
fn shown_cage(c: &crate::ops::session_object::Cage) -> String {
    let mut s = format!(
        "container {}\nimage     {}\nnetwork   {}, policy {}\nlimits    memory {}, cpus {}, pids {}{}\nargv      {}\n",
        c.container,
        c.image,
        c.network.name(),
        if c.sealed.is_some() {
            "sealed"
        } else {
            c.net.as_str()
        },
        c.limits.memory,
        c.limits.cpus,
        c.limits.pids,
        if c.limits_enforced == Some(false) {
            NOT_ENFORCED
        } else {
            ""
        },
        shown_line(c.create_argv.iter().map(String::as_str))
    );
    if let Some(log) = &c.egress_log {
        match &log.problem {
            None => s.push_str("egress    logged\n"),
            Some(p) => s.push_str(&format!("egress    CUT: {p}\n")),
        }
    }
    if let Some(p) = &c.shared_path {
        s.push_str(&format!("shared    {}\n", p.display()));
    }
    if !c.options.writable.is_empty() {
        s.push_str(&format!(
            "writable  {} (protected paths left writable)\n",
            c.options.writable.join(" ")
        ));
    }
    if let Some(sd) = &c.sealed {
        s.push_str(&format!(
            "sealed    yes: rules {}, seccomp {} ({}), dns {}\noutbox    {}\n",
            sd.rules,
            sd.seccomp,
            sd.seccomp_file.display(),
            sd.dns.join(" "),
            sd.outbox.display()
        ));
    }
    s
}

pub fn pruned(p: &Pruned) -> String {
    let verb = if p.dry_run { "would remove" } else { "removed" };
    let mut s = String::new();
    if p.removes_nothing() {
        s.push_str("nothing to prune\n");
    }
    for c in &p.containers {
        s.push_str(&format!("{verb} container {c}\n"));
    }
    for f in &p.files {
        s.push_str(&format!("{verb} {}\n", f.display()));
    }
    if !p.made_by_another_state_folder.is_empty() {
        s.push_str(
            "made by another state folder: kept (`cage prune` with that folder's \
             SHROOMS_AGENT_STATE_DIR removes them):\n",
        );
        for k in &p.made_by_another_state_folder {
            s.push_str(&format!(
                "  {} (session {}, state folder {})\n",
                k.container,
                k.session,
                k.state_folder.as_deref().unwrap_or("?")
            ));
        }
    }
    if !p.made_before_state_labels.is_empty() {
        s.push_str(
            "made before containers were labelled with their state folder: kept (look, then \
             `podman rm` one by hand):\n",
        );
        for k in &p.made_before_state_labels {
            s.push_str(&format!("  {} (session {})\n", k.container, k.session));
        }
    }
    s
}

/// "2 containers and 1 file", for prune's question and refusal.
pub fn prune_count(p: &Pruned) -> String {
    let n = |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
    format!(
        "{} and {}",
        n(p.containers.len(), "container", "containers"),
        n(p.files.len(), "file", "files")
    )
}

/// How `doctor` is laid out: on a terminal, its tags in colour (unless
/// NO_COLOR is set, no-color.org) and its lines wrapped to the terminal's
/// width, indented under their check; elsewhere one line per detail and
/// hint, as scripts read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub colour: bool,
    /// Wrap at this many columns (a terminal's width).
    pub width: Option<usize>,
}

impl Layout {
    /// Asked of stdout: a terminal, its width (TIOCGWINSZ); colour there
    /// when the settings want it (`NO_COLOR`).
    pub fn of_stdout(colour: bool) -> Layout {
        let tty = rustix::termios::isatty(std::io::stdout());
        if !tty {
            return Layout {
                colour: false,
                width: None,
            };
        }
        let width = match rustix::termios::tcgetwinsize(std::io::stdout()) {
            Ok(ws) if ws.ws_col > 0 => ws.ws_col as usize,
            _ => 80,
        };
        Layout {
            colour,
            width: Some(width),
        }
    }
}

pub fn doctor(r: &doctor::Report, colour: bool) -> String {
    doctor_laid_out(r, Layout::of_stdout(colour))
}

/// `text` wrapped at `width` (at spaces; a word longer than a line stays
/// whole), each line after the first indented by `indent` spaces; the
/// first line has `first` columns taken already.
fn wrap(text: &str, first: usize, indent: usize, width: Option<usize>) -> String {
    let Some(width) = width else {
        return text.to_string();
    };
    let mut out = String::new();
    let mut col = first;
    let mut line_start = true;
    for word in text.split(' ') {
        let w = word.chars().count();
        if !line_start && col + 1 + w > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
            line_start = true;
        }
        if !line_start {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += w;
        line_start = false;
    }
    out
}

pub fn doctor_laid_out(r: &doctor::Report, layout: Layout) -> String {
    // "pass  podman    ": the tag, two spaces, the name in nine, a space.
    const INDENT: usize = 16;
    let mut s = String::new();
    for c in &r.checks {
        let (tag, colour) = match c.status {
            doctor::Status::Pass => ("pass", "\x1b[32m"),
            doctor::Status::Warn => ("warn", "\x1b[33m"),
            doctor::Status::Fail => ("FAIL", "\x1b[1;31m"),
        };
        let tag = if layout.colour {
            format!("{colour}{tag}\x1b[0m")
        } else {
            tag.to_string()
        };
        let name = format!("{:<9}", c.name);
        let at = INDENT.max(6 + name.chars().count() + 1);
        s.push_str(&format!(
            "{tag}  {name} {}\n",
            wrap(&c.detail, at, INDENT, layout.width)
        ));
        if let Some(h) = &c.hint {
            s.push_str(&format!(
                "{:INDENT$}hint: {}\n",
                "",
                wrap(h, INDENT + 6, INDENT + 6, layout.width)
            ));
        }
    }
    s
}

pub fn packed(p: &crate::ops::outbox::PackResult) -> String {
    let mut s = format!(
        "packed {} ({}, {}) from the outbox of {}\n",
        p.archive.display(),
        crate::state::when::count(p.packed.files as u64, "file", "files"),
        crate::state::when::count(p.packed.bytes, "byte", "bytes"),
        p.session
    );
    let left = p.packed.left_out.len() + p.packed.left_out_unlisted;
    if left > 0 {
        s.push_str(&format!(
            "{left} left out (see README-UNTRUSTED.txt in it)\n"
        ));
    }
    s
}

pub fn files(f: &crate::ops::files::FilesList) -> String {
    let mut s = String::new();
    if f.files.allow.is_empty() {
        s.push_str(&format!("{} takes files from nobody\n", f.session));
    } else {
        s.push_str(&format!("{} takes files from:\n", f.session));
        for a in &f.files.allow {
            s.push_str(&format!("  {a}\n"));
        }
    }
    if !f.files.refused.is_empty() {
        s.push_str("refused (when, from), newest last:\n");
        for r in &f.files.refused {
            s.push_str(&format!(
                "  {}  {}\n",
                crate::state::when::local(r.when.0),
                r.from
            ));
        }
    }
    s
}

pub fn received(r: &crate::ops::files::ReceivedList) -> String {
    if r.files.is_empty() {
        return format!("{} has received no files\n", r.session);
    }
    let mut s = format!("{} has received (from, size, name):\n", r.session);
    for f in &r.files {
        s.push_str(&format!("  {}  {}  {}\n", f.from, f.size, f.name));
    }
    s
}

pub fn stopped(r: &crate::ops::stop::Stopped) -> String {
    if r.was_running {
        format!("stopped {} ({})\n", r.session, r.container)
    } else {
        format!("{} ({}) was not running\n", r.session, r.container)
    }
}

pub fn limits(r: &crate::ops::limits::LimitsChanged) -> String {
    format!(
        "{}: memory {}, cpus {}, pids {}{}, token budget {} (applied {}), dollar budget {}\n",
        r.session,
        r.after.memory,
        r.after.cpus,
        r.after.pids,
        if r.enforced == Some(false) {
            NOT_ENFORCED
        } else {
            ""
        },
        budget(r.tokens_after),
        r.applied,
        usd_budget(r.usd_after)
    ) + &match &r.net_applied {
        Some(when) => format!(
            "{}: network policy {} -> {} (applied {when})\n",
            r.session, r.net_before, r.net_after
        ),
        None => String::new(),
    }
}

/// Beside limits that podman keeps but does not enforce (rootless on
/// cgroups v1: `doctor` says why).
pub const NOT_ENFORCED: &str =
    " (NOT enforced on this machine: podman ignores them; see `shrooms-agent doctor`)";

/// `cage limits NAME`: as configured, and as podman reports them.
/// Bytes of memory as a person reads them: in GiB or MiB when whole (what
/// `4g` or `512m` gives, podman's units being powers of 1024), else the
/// bytes with a rounded GiB beside them.
fn memory_for_people(b: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if b >= GIB && b.is_multiple_of(GIB) {
        format!("{} GiB", b / GIB)
    } else if b >= MIB && b.is_multiple_of(MIB) {
        format!("{} MiB", b / MIB)
    } else {
        format!("{b} bytes ({:.2} GiB)", b as f64 / GIB as f64)
    }
}

pub fn limits_shown(r: &crate::ops::limits::LimitsShown) -> String {
    let c = &r.configured;
    let mut s = format!(
        "{}: configured memory {}, cpus {}, pids {} ({})\n",
        r.session,
        c.memory,
        c.cpus,
        c.pids,
        if r.own {
            "its own, set with `cage limits`"
        } else {
            "the machine's, from the config"
        }
    );
    let none = || "none".to_string();
    match &r.applied {
        Some(a) => s.push_str(&format!(
            "{}: applied memory {}, cpus {}, pids {} (as podman reports {}{})\n",
            r.session,
            a.memory_bytes.map_or_else(none, memory_for_people),
            a.cpus.map_or_else(none, |c| format!("{c}")),
            a.pids.map_or_else(none, |p| p.to_string()),
            r.container,
            if r.enforced {
                ""
            } else {
                "; NOT enforced on this machine"
            }
        )),
        None => s.push_str(&format!(
            "{}: applied: none, the container {} is gone{}\n",
            r.session,
            r.container,
            if r.enforced { "" } else { NOT_ENFORCED }
        )),
    }
    s.push_str(&format!(
        "{}: token budget {}, spent {}\n",
        r.session,
        budget(r.tokens_budget),
        r.tokens_used
    ));
    s.push_str(&format!(
        "{}: dollar budget {}, spent {} (list prices of {}, and the config's [prices])\n",
        r.session,
        usd_budget(r.usd_budget),
        r.spent.words(),
        crate::settings::prices::TAKEN
    ));
    s
}

fn budget(b: Option<u64>) -> String {
    b.map_or("none".to_string(), |n| n.to_string())
}

fn usd_budget(b: Option<crate::settings::prices::Usd>) -> String {
    b.map_or("none".to_string(), crate::settings::prices::Usd::budget)
}

pub fn history(h: &crate::ops::history::History) -> String {
    let mut s = String::new();
    for e in &h.entries {
        s.push_str(&format!(
            "{}  {}  {}\n",
            crate::state::when::local(e.when.0),
            e.who,
            e.what
        ));
    }
    if s.is_empty() {
        s = format!("no history for {}\n", h.session);
    }
    s
}

/// `cage history --net`: one line per connection, its time local.
pub fn egress(h: &crate::ops::history::Egress) -> String {
    let mut s = String::new();
    for l in &h.connections {
        s.push_str(&egress_line(l));
        s.push('\n');
    }
    if s.is_empty() {
        s = format!("no connections logged for {}\n", h.session);
    }
    s
}

/// One line of the egress log, as a person reads it: when, allowed or
/// refused, where, how, by which rule, and the name asked where known.
pub fn egress_line(l: &crate::net::egress::Line) -> String {
    let when = chrono::DateTime::parse_from_rfc3339(&l.time)
        .ok()
        .and_then(|t| u64::try_from(t.timestamp()).ok())
        .map(crate::state::when::local)
        .unwrap_or_else(|| l.time.clone());
    if l.rule == "lost" {
        return format!("{when}  some connections were not logged (the listener fell behind)");
    }
    let verdict = if l.allowed { "allowed" } else { "refused" };
    let dest = match (l.port, l.address.contains(':')) {
        (Some(p), true) => format!("[{}]:{p}", l.address),
        (Some(p), false) => format!("{}:{p}", l.address),
        (None, _) => l.address.clone(),
    };
    let name = l
        .name
        .as_deref()
        .map(|n| format!(" asking {n}"))
        .unwrap_or_default();
    format!("{when}  {verdict} {dest} {} ({}){name}", l.protocol, l.rule)
}

/// A foreground image build's progress, on stderr: podman's own lines on a
/// terminal, else one line per build step.
/// A foreground build's events without the progress line: podman's lines
/// as they come (all of them on a terminal, with `--json`; its STEP lines
/// otherwise).
pub fn image_event(e: &crate::ops::image::Event, tty: bool) {
    use crate::ops::image::Event;
    match e {
        Event::Waiting(name) => eprintln!(
            "shrooms-agent: {name} is being built by another shrooms-agent; waiting for it"
        ),
        Event::Line(l) if tty || crate::images::workbench::is_step_line(l) => eprintln!("{l}"),
        Event::Line(_) | Event::Building { .. } | Event::Ended { .. } => {}
    }
}

/// The width of the terminal on stderr (TIOCGWINSZ), 80 when it says none.
pub fn stderr_width() -> usize {
    match rustix::termios::tcgetwinsize(std::io::stderr()) {
        Ok(ws) if ws.ws_col > 0 => ws.ws_col as usize,
        _ => 80,
    }
}

/// Back to the start of the line, and clear it (ECMA-48 EL, "erase in line").
const REWRITE: &str = "\r\x1b[K";

/// How many of a failed build's last lines are shown with its failure.
const LAST_LINES: usize = 5;

/// `image build --wait` on a terminal: one line, rewritten in place, with
/// the step, its name and the time so far; at the end of each image a line
/// that stays: built, or failed with the build's last lines and its log.
/// Each method returns what to write to stderr.
pub struct Progress {
    /// The image being built or waited for, and since when.
    current: Option<(String, std::time::Instant)>,
    waiting: bool,
    step: Option<String>,
    last: std::collections::VecDeque<String>,
}

impl Default for Progress {
    fn default() -> Progress {
        Progress::new()
    }
}

impl Progress {
    pub fn new() -> Progress {
        Progress {
            current: None,
            waiting: false,
            step: None,
            last: std::collections::VecDeque::new(),
        }
    }

    pub fn event(&mut self, e: &crate::ops::image::Event, width: usize) -> String {
        use crate::ops::image::Event;
        match e {
            Event::Waiting(name) | Event::Building { name } => {
                self.current = Some((name.to_string(), std::time::Instant::now()));
                self.waiting = matches!(e, Event::Waiting(_));
                self.step = None;
                self.last.clear();
                self.draw(width)
            }
            Event::Line(l) => match crate::images::workbench::step_of(l) {
                Some(step) => {
                    self.step = Some(step_words(&step));
                    self.draw(width)
                }
                None => {
                    let l = l.trim();
                    if !l.is_empty() && !l.starts_with("--> ") {
                        if self.last.len() == LAST_LINES {
                            self.last.pop_front();
                        }
                        self.last.push_back(l.to_string());
                    }
                    String::new()
                }
            },
            Event::Ended { name, log, built } => {
                let took = self.elapsed();
                let out = if *built {
                    format!(
                        "{REWRITE}built {name} in {}\n",
                        crate::state::when::span(took)
                    )
                } else {
                    let mut out = format!(
                        "{REWRITE}failed to build {name} after {}{}",
                        crate::state::when::span(took),
                        match &self.step {
                            Some(step) => format!(", at {step}"),
                            None => String::new(),
                        }
                    );
                    if self.last.is_empty() {
                        out.push('\n');
                    } else {
                        out.push_str("; its last lines:\n");
                        for l in &self.last {
                            out.push_str(&format!("  {l}\n"));
                        }
                    }
                    out.push_str(&format!("its log: {}\n", log.display()));
                    out
                };
                self.current = None;
                out
            }
        }
    }

    /// The line again, with the time so far: once a second.
    pub fn tick(&self, width: usize) -> String {
        self.draw(width)
    }

    fn elapsed(&self) -> u64 {
        self.current
            .as_ref()
            .map(|(_, t)| t.elapsed().as_secs())
            .unwrap_or(0)
    }

    fn draw(&self, width: usize) -> String {
        let Some((name, _)) = &self.current else {
            return String::new();
        };
        let what = match (&self.step, self.waiting) {
            (Some(step), _) => step.clone(),
            (None, true) => format!("waiting for another shrooms-agent's build of {name}"),
            (None, false) => format!("building {name}"),
        };
        format!(
            "{REWRITE}{}",
            progress_line(&what, &crate::state::when::span(self.elapsed()), width)
        )
    }
}

/// `[2/2] 3/9 RUN apt-get ...`: a step as the progress line shows it.
pub fn step_words(step: &crate::images::workbench::Step) -> String {
    let stage = match step.stage {
        Some((a, b)) if b > 1 => format!("[{a}/{b}] "),
        _ => String::new(),
    };
    format!("{stage}{}/{} {}", step.n, step.of, step.what)
}

/// The progress line: what, cut to fit, then the time so far, in fewer
/// columns than the terminal has (a line as wide as the terminal wraps on
/// some, and `\r` would then rewrite only its second row). Cut on a
/// character, never inside one; `…` says it was cut.
pub fn progress_line(what: &str, took: &str, width: usize) -> String {
    let tail = format!("  {took}");
    let room = width.saturating_sub(1).saturating_sub(tail.chars().count());
    let what = what.split_whitespace().collect::<Vec<_>>().join(" ");
    let shown = if what.chars().count() <= room {
        what
    } else if room == 0 {
        String::new()
    } else {
        let mut cut: String = what.chars().take(room - 1).collect();
        cut.push('…');
        cut
    };
    format!("{shown}{tail}")
}

pub fn image_built(r: &crate::ops::image::BuildReport) -> String {
    use crate::ops::image::Outcome;
    let mut s = String::new();
    for b in &r.images {
        let short = &b.hash[..b.hash.len().min(12)];
        s.push_str(&match b.outcome {
            Outcome::Built => format!("built {} (Containerfile {short})\n", b.name),
            Outcome::Current => format!(
                "{} is current (Containerfile {short}): nothing to build\n",
                b.name
            ),
            Outcome::BuiltByAnother => format!(
                "{} was built by another shrooms-agent while this one waited (Containerfile {short})\n",
                b.name
            ),
            Outcome::Started => format!(
                "building {} in the background (log: {}); `shrooms-agent image status` shows when it is ready\n",
                b.name,
                b.log.display()
            ),
            Outcome::Building => format!(
                "{} is being built already; `shrooms-agent image status` shows when it is ready\n",
                b.name
            ),
        });
    }
    s
}

pub fn image_status(r: &crate::ops::image::StatusReport) -> String {
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    let mut rows: Vec<[String; 6]> = vec![[
        "IMAGE".to_string(),
        "OF".into(),
        "PRESENT".into(),
        "CURRENT".into(),
        "BUILDING".into(),
        "ERROR".into(),
    ]];
    for i in &r.images {
        let of = match (i.stage, i.machine) {
            (Some(s), true) => format!("{}, the machine's", s.name()),
            (Some(s), false) => s.name().to_string(),
            (None, _) => "the machine's".into(),
        };
        rows.push([
            i.name.clone(),
            of,
            yes(i.present),
            if i.stage.is_some() {
                yes(i.current)
            } else {
                "-".into()
            },
            if i.stage.is_some() {
                yes(i.building)
            } else {
                "-".into()
            },
            i.error.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    table(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::prune::Kept;

    #[test]
    fn memory_for_people_golden() {
        assert_eq!(memory_for_people(4 << 30), "4 GiB");
        assert_eq!(memory_for_people(512 << 20), "512 MiB");
        assert_eq!(memory_for_people(1536 << 20), "1536 MiB");
        assert_eq!(memory_for_people(6_000_000), "6000000 bytes (0.01 GiB)");
    }

    #[test]
    fn slow_steps_are_said_as_cargo_says_its_steps() {
        use crate::ops::Progress as P;
        assert_eq!(
            step_line(&P::Making {
                container: "shrooms-web-0a1b2c".into(),
                image: "localhost/shrooms-workbench:latest".into(),
            }),
            "      Making container shrooms-web-0a1b2c from localhost/shrooms-workbench:latest"
        );
        assert_eq!(
            step_line(&P::Removing {
                container: "shrooms-web-0a1b2c".into()
            }),
            "    Removing container shrooms-web-0a1b2c"
        );
    }

    #[test]
    fn the_progress_line_fits_the_terminal() {
        let step = crate::images::workbench::step_of(
            "STEP 3/9: RUN apt-get update && apt-get install -y --no-install-recommends git",
        )
        .unwrap();
        let what = step_words(&step);
        assert_eq!(
            what,
            "3/9 RUN apt-get update && apt-get install -y --no-install-recommends git"
        );
        assert_eq!(
            progress_line(&what, "1 min 12 s", 120),
            "3/9 RUN apt-get update && apt-get install -y --no-install-recommends git  1 min 12 s"
        );
        let cut = progress_line(&what, "1 min 12 s", 40);
        assert_eq!(cut, "3/9 RUN apt-get update && …  1 min 12 s");
        assert_eq!(cut.chars().count(), 39);
        // Cut on a character, not a byte: each `é` is two bytes.
        let cut = progress_line("1/2 RUN echo éééééééééé", "5 s", 23);
        assert_eq!(cut, "1/2 RUN echo ééé…  5 s");
        assert_eq!(cut.chars().count(), 22);
        // Too narrow for the words: the time alone.
        assert_eq!(progress_line(&what, "5 s", 6), "  5 s");
        // A multi-line step (a RUN with a heredoc) stays one line.
        assert_eq!(
            progress_line("1/2 RUN a\n b", "0 s", 80),
            "1/2 RUN a b  0 s"
        );
        let staged =
            crate::images::workbench::step_of("[2/2] STEP 1/2: FROM abc AS desktop").unwrap();
        assert_eq!(step_words(&staged), "[2/2] 1/2 FROM abc AS desktop");
    }

    #[test]
    fn the_progress_ends_with_a_line_that_stays() {
        use crate::ops::image::Event;
        let log = std::path::Path::new("/state/images/workbench.log");
        let mut p = Progress::new();
        let out = p.event(
            &Event::Building {
                name: "localhost/x:latest",
            },
            80,
        );
        assert_eq!(out, "\r\x1b[Kbuilding localhost/x:latest  0 s");
        assert_eq!(
            p.event(&Event::Line("STEP 2/3: RUN false"), 80),
            "\r\x1b[K2/3 RUN false  0 s"
        );
        for l in [
            "--> abc",
            "",
            "boom",
            "Error: building at STEP \"RUN false\": exit status 1",
        ] {
            assert_eq!(p.event(&Event::Line(l), 80), "", "{l}");
        }
        assert_eq!(p.tick(80), "\r\x1b[K2/3 RUN false  0 s");
        assert_eq!(
            p.event(
                &Event::Ended {
                    name: "localhost/x:latest",
                    log,
                    built: false
                },
                80
            ),
            "\r\x1b[Kfailed to build localhost/x:latest after 0 s, at 2/3 RUN false; its last \
             lines:\n  boom\n  Error: building at STEP \"RUN false\": exit status 1\n\
             its log: /state/images/workbench.log\n"
        );
        assert_eq!(p.tick(80), "", "nothing is drawn between builds");
        p.event(&Event::Waiting("localhost/x:latest"), 80);
        assert_eq!(
            p.tick(200),
            "\r\x1b[Kwaiting for another shrooms-agent's build of localhost/x:latest  0 s"
        );
        assert_eq!(
            p.event(
                &Event::Ended {
                    name: "localhost/x:latest",
                    log,
                    built: true
                },
                80
            ),
            "\r\x1b[Kbuilt localhost/x:latest in 0 s\n"
        );
    }

    fn report() -> doctor::Report {
        doctor::Report {
            checks: vec![
                doctor::Check {
                    name: "podman",
                    status: doctor::Status::Pass,
                    detail: "4.3.1 at /usr/bin/podman".into(),
                    hint: None,
                },
                doctor::Check {
                    name: "config",
                    status: doctor::Status::Fail,
                    detail: "config file /c.toml: key `image`: not a string, so not used".into(),
                    hint: Some("fix it in /c.toml; the README lists every key".into()),
                },
            ],
        }
    }

    /// Without a terminal: one line per detail and hint, no colour.
    #[test]
    fn doctor_without_a_terminal_is_plain() {
        let plain = Layout {
            colour: false,
            width: None,
        };
        assert_eq!(
            doctor_laid_out(&report(), plain),
            "pass  podman    4.3.1 at /usr/bin/podman\n\
             FAIL  config    config file /c.toml: key `image`: not a string, so not used\n\
             \x20               hint: fix it in /c.toml; the README lists every key\n"
        );
    }

    /// On a terminal: the tags in colour, lines wrapped at its width and
    /// indented under their check (the hint's under the hint's text).
    #[test]
    fn doctor_on_a_terminal_wraps_under_its_check_in_colour() {
        let tty = Layout {
            colour: true,
            width: Some(40),
        };
        assert_eq!(
            doctor_laid_out(&report(), tty),
            "\x1b[32mpass\x1b[0m  podman    4.3.1 at /usr/bin/podman\n\
             \x1b[1;31mFAIL\x1b[0m  config    config file /c.toml: key\n\
             \x20               `image`: not a string,\n\
             \x20               so not used\n\
             \x20               hint: fix it in /c.toml;\n\
             \x20                     the README lists\n\
             \x20                     every key\n"
        );
    }

    #[test]
    fn listing_has_age_and_busy() {
        let now = 1_796_061_909;
        let row = |name: &str, created: u64, busy: Option<(&str, u64)>| {
            let mut r = crate::state::session::sample_record(name);
            r.created = created;
            r.cage = Some(crate::state::session::sample_cage(&format!(
                "shrooms-{name}-000001"
            )));
            crate::ops::session_object::Session::new(
                r,
                crate::ops::session_object::Seen::of_ps("running"),
                None,
                busy.map(|(what, since)| crate::state::session::Busy {
                    what: what.into(),
                    since: Some(since),
                    since_rfc3339: None,
                    waiting: (name == "c").then(|| crate::state::session::Waiting {
                        since: since + 60,
                        since_rfc3339: String::new(),
                        budget: "session".into(),
                        why: "spent".into(),
                    }),
                }),
                Some(true),
            )
        };
        let l = Listing {
            sessions: vec![
                row("a", now - 3 * 60, Some(("turn", now - 125))),
                row("bb", now - 86_400, None),
                row("c", now - 3 * 60, Some(("turn", now - 125))),
            ],
            leftovers: vec![],
            damaged: vec![],
        };
        assert_eq!(
            listing_at(&l, now),
            "SESSION  CONTAINER          STATE    BUSY                                           AGE    CAGE   HARNESS  IMAGE  DIR\n\
             a        shrooms-a-000001   running  turn (for 2 min)                               3 min  caged  claude   img    /p\n\
             bb       shrooms-bb-000001  running  -                                              1 day  caged  claude   img    /p\n\
             c        shrooms-c-000001   running  turn (for 2 min), waits on budget (for 1 min)  3 min  caged  claude   img    /p\n"
        );
        assert_eq!(names(&vec!["a", "bb"]), "a\nbb\n");
    }

    /// `cage stop --all --json` has the same keys whether or not a session
    /// was busy: the error's keys are null when none was.
    #[test]
    fn stop_all_has_one_shape() {
        let mut r = crate::ops::stop::StoppedAll {
            stopped: vec![crate::ops::stop::Stopped {
                session: "a".into(),
                container: "shrooms-a-000001".into(),
                was_running: true,
            }],
            busy: vec![],
            damaged: vec![],
        };
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        let fine = error_body(r.error().as_ref(), &r);
        assert_eq!(
            fine,
            serde_json::json!({
                "error": null, "exit_code": 0, "kind": null, "busy": [], "damaged": [],
                "stopped": [{"session": "a", "container": "shrooms-a-000001", "was_running": true}]
            })
        );
        r.busy.push("b".into());
        let busy = error_body(r.error().as_ref(), &r);
        assert_eq!(keys(&busy), keys(&fine));
        assert_eq!(busy["exit_code"], 3);
        assert_eq!(busy["kind"], "busy");
        assert_eq!(busy["busy"], serde_json::json!(["b"]));
        assert!(
            busy["error"]
                .as_str()
                .unwrap()
                .contains("not stopped, busy: b")
        );
    }

    #[test]
    fn pruned_lists_what_it_keeps_apart() {
        let p = Pruned {
            dry_run: true,
            containers: vec!["shrooms-a-000001".into()],
            files: vec!["/s/cages/shrooms-a-000001".into()],
            made_by_another_state_folder: vec![Kept {
                container: "shrooms-b-000002".into(),
                session: "b".into(),
                state_folder: Some("0123".into()),
            }],
            made_before_state_labels: vec![Kept {
                container: "shrooms-c-000003".into(),
                session: "c".into(),
                state_folder: None,
            }],
        };
        assert_eq!(
            pruned(&p),
            "would remove container shrooms-a-000001\n\
             would remove /s/cages/shrooms-a-000001\n\
             made by another state folder: kept (`cage prune` with that folder's \
             SHROOMS_AGENT_STATE_DIR removes them):\n  \
             shrooms-b-000002 (session b, state folder 0123)\n\
             made before containers were labelled with their state folder: kept (look, then \
             `podman rm` one by hand):\n  \
             shrooms-c-000003 (session c)\n"
        );
        assert_eq!(prune_count(&p), "1 container and 1 file");
        let none = Pruned {
            containers: vec![],
            files: vec![],
            made_by_another_state_folder: vec![],
            made_before_state_labels: vec![],
            ..p
        };
        assert_eq!(pruned(&none), "nothing to prune\n");
        assert_eq!(prune_count(&none), "0 containers and 0 files");
    }

    /// `--json`'s error keys: the subject as data beside the words, only
    /// when there is one; the option as the command line takes it.
    #[test]
    fn error_keys_carry_the_subject() {
        let plain = serde_json::Value::Object(error_keys(&Error::failed("no"), 1));
        assert_eq!(
            plain,
            serde_json::json!({"error": "no", "exit_code": 1, "kind": "failed"})
        );
        let e = Error::bad_field("meshes", "\"a b\" is not a mesh");
        assert_eq!(
            serde_json::Value::Object(error_keys(&e, 2)),
            serde_json::json!({
                "error": "--mesh: \"a b\" is not a mesh", "exit_code": 2,
                "kind": "bad_input", "option": "--mesh"
            })
        );
        let e = crate::error::samples::busy_by_exec();
        assert_eq!(
            serde_json::Value::Object(error_keys(&e, 3)),
            serde_json::json!({
                "error": "session s is busy: another shrooms-agent command (an exec or run, \
                          pid 7) is using it; try again when it ends",
                "exit_code": 3, "kind": "busy",
                "holder": {"what": "exec", "since": null, "pid": 7}
            })
        );
        let e = crate::error::samples::podman_start_failed();
        assert_eq!(
            serde_json::Value::Object(error_keys(&e, 1)),
            serde_json::json!({
                "error": "podman start: Error: x", "exit_code": 1, "kind": "podman_failed",
                "podman": {"call": "podman start c1", "status": 125}
            })
        );
        // What runs in a cage; the podman call whole, its paths with it.
        let e = crate::error::samples::busy_in_its_cage();
        assert_eq!(
            serde_json::Value::Object(error_keys(&e, 3)),
            serde_json::json!({
                "error": "session s is busy: bash, claude --resume runs in its cage; move it \
                          once it is idle",
                "exit_code": 3, "kind": "busy",
                "running": ["bash", "claude --resume"]
            })
        );
        let e = crate::error::samples::podman_unshare_rm_failed();
        assert_eq!(
            error_keys(&e, 1)["podman"],
            serde_json::json!({
                "call": "podman unshare rm /home/u/.local/state/shrooms-agent/sessions/my web/copies",
                "status": 1
            })
        );
    }
}
