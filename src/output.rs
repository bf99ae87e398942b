//! The command line's face: results as text or `--json` on stdout, errors
//! and warnings on stderr. A closed pipe (`| head`) is not an error
//! (ripgrep's habit): output stops quietly.

use std::io::Write;

use serde::Serialize;

use crate::error::{Error, Face};
use crate::ops::{create::Created, doctor, ls::Listing, prune::Pruned, rm::Removed, show::Session};
use crate::podman::runner::shell_quote;

/// Print a result as JSON or through its text form.
pub fn show<T: Serialize>(value: &T, json: bool, text: impl Fn(&T) -> String) {
    if json {
        let mut s = serde_json::to_string_pretty(value)
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        s.push('\n');
        raw(s.as_bytes());
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
pub fn warnings(list: &[String]) {
    for w in list {
        let _ = writeln!(std::io::stderr(), "shrooms-agent: warning: {w}");
    }
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
    let body = serde_json::json!({"error": e.words(Face::Terminal), "exit_code": code, "kind": e.kind.name()});
    raw(format!("{body}\n").as_bytes());
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
        Some(e) => serde_json::json!({
            "error": e.words(Face::Terminal),
            "exit_code": e.kind.exit_code(),
            "kind": e.kind.name()
        }),
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
    let argv = c
        .argv
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    if c.dry_run {
        let refused = match &c.would_be_refused {
            Some(why) => format!("; the real create would be refused: {why}"),
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
    s
}

/// `cage ls -q`: the names, one a line.
pub fn names(n: &Vec<&str>) -> String {
    n.iter().map(|n| format!("{n}\n")).collect()
}

pub fn listing(l: &Listing) -> String {
    listing_at(l, crate::when::now())
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
                Some(b) => match b.since {
                    Some(t) => format!("{} ({})", b.what, since(t, now)),
                    None => b.what.clone(),
                },
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
    let a = crate::when::age(then, now);
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
        s.push_str(&format!(
            "container {}\nimage     {}\nnetwork   {}\nlimits    memory {}, cpus {}, pids {}\nargv      {}\n",
            c.container,
            c.image,
            c.network.name(),
            c.limits.memory,
            c.limits.cpus,
            c.limits.pids,
            c.create_argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")
        ));
        if let Some(p) = &c.shared_path {
            s.push_str(&format!("shared    {}\n", p.display()));
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
    }
    let t = &r.tokens;
    s.push_str(&format!(
        "tokens    {}; budget {}\n",
        t.used.describe(),
        budget(t.budget)
    ));
    if let Some(last) = &t.last_turn {
        s.push_str(&format!("last turn {}\n", last.usage.describe()));
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
    /// Asked of stdout: a terminal, its width (TIOCGWINSZ), NO_COLOR.
    pub fn of_stdout() -> Layout {
        // SAFETY: isatty on fd 1.
        let tty = unsafe { libc::isatty(1) } == 1;
        if !tty {
            return Layout {
                colour: false,
                width: None,
            };
        }
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ fills the winsize given, on fd 1.
        let width = match unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) } {
            0 if ws.ws_col > 0 => ws.ws_col as usize,
            _ => 80,
        };
        Layout {
            colour: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            width: Some(width),
        }
    }
}

pub fn doctor(r: &doctor::Report) -> String {
    doctor_laid_out(r, Layout::of_stdout())
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
        crate::when::count(p.packed.files as u64, "file", "files"),
        crate::when::count(p.packed.bytes, "byte", "bytes"),
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
            s.push_str(&format!("  {}  {}\n", crate::when::local(r.when.0), r.from));
        }
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
        "{}: memory {}, cpus {}, pids {}, token budget {} (applied {})\n",
        r.session,
        r.after.memory,
        r.after.cpus,
        r.after.pids,
        budget(r.tokens_after),
        r.applied
    )
}

/// `cage limits NAME`: as configured, and as podman reports them.
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
            a.memory_bytes.map_or_else(none, |b| format!("{b} bytes")),
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
            "{}: applied: none, the container {} is gone\n",
            r.session, r.container
        )),
    }
    s.push_str(&format!(
        "{}: token budget {}, spent {}\n",
        r.session,
        budget(r.tokens_budget),
        r.tokens_used
    ));
    s
}

fn budget(b: Option<u64>) -> String {
    b.map_or("none".to_string(), |n| n.to_string())
}

pub fn history(h: &crate::ops::history::History) -> String {
    let mut s = String::new();
    for e in &h.entries {
        s.push_str(&format!(
            "{}  {}  {}\n",
            crate::when::local(e.when.0),
            e.who,
            e.what
        ));
    }
    if s.is_empty() {
        s = format!("no history for {}\n", h.session);
    }
    s
}

/// A foreground image build's progress, on stderr: podman's own lines on a
/// terminal, else one line per build step.
pub fn image_event(e: &crate::ops::image::Event, tty: bool) {
    use crate::ops::image::Event;
    match e {
        Event::Waiting(name) => eprintln!(
            "shrooms-agent: {name} is being built by another shrooms-agent; waiting for it"
        ),
        Event::Line(l) if tty || crate::workbench::is_step_line(l) => eprintln!("{l}"),
        Event::Line(_) => {}
    }
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
            let mut r = crate::session::sample_record(name);
            r.created = created;
            r.cage = Some(crate::session::sample_cage(&format!(
                "shrooms-{name}-000001"
            )));
            crate::ops::show::Session::new(
                &r,
                crate::ops::show::Seen::of_ps("running"),
                None,
                busy.map(|(what, since)| crate::session::Busy {
                    what: what.into(),
                    since: Some(since),
                    since_rfc3339: None,
                }),
            )
        };
        let l = Listing {
            sessions: vec![
                row("a", now - 3 * 60, Some(("turn", now - 125))),
                row("bb", now - 86_400, None),
            ],
            leftovers: vec![],
            damaged: vec![],
        };
        assert_eq!(
            listing_at(&l, now),
            "SESSION  CONTAINER          STATE    BUSY              AGE    CAGE   HARNESS  IMAGE  DIR\n\
             a        shrooms-a-000001   running  turn (for 2 min)  3 min  caged  claude   img    /p\n\
             bb       shrooms-bb-000001  running  -                 1 day  caged  claude   img    /p\n"
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
        };
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        let fine = error_body(r.busy_error().as_ref(), &r);
        assert_eq!(
            fine,
            serde_json::json!({
                "error": null, "exit_code": 0, "kind": null, "busy": [],
                "stopped": [{"session": "a", "container": "shrooms-a-000001", "was_running": true}]
            })
        );
        r.busy.push("b".into());
        let busy = error_body(r.busy_error().as_ref(), &r);
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
}
