//! The program's modules stay in layers: no two of them import each other,
//! directly or through others, so that each can be read, changed and
//! tested from the modules below it. A module is a file of a room
//! (`cage::spec`, `turn::gateway`: see `ROOMS`), or a room that is one
//! module (`ops`, `serve`, `host`, `settings`). The turn's servers
//! (`turn::server`, `turn::gateway`, `turn::cage_socket`) and
//! `cage::pi_models` take plain values and never reach back into the
//! operations (`ops`); what podman is told (`settings`, `cage::spec`,
//! `cage::harness`, `cage::envfile`) knows nothing of `host::podman`.
//! Read from the sources' `crate::` paths (comments, test modules and the
//! files compiled for tests only left out). No podman needed: a plain
//! `cargo test` runs this.
//!
//! The same holds between files: no file imports one that imports it
//! back, inside a room too (`ops::listing` and `ops::show` are two files,
//! where the rooms' check sees one `ops`). A path names the longest module that
//! is a file of `src/` (`crate::ops::show::show` is `ops::show`), and a
//! `super::` path is read from the file it is in.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

mod source;
use source::{before_tests, rs_files};

/// The circles between rooms still allowed, with why: none.
const ALLOWED: &[&[&str]] = &[];

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The top-level modules each file's code names through `crate::`.
fn graph(files: &[(String, String)]) -> Graph {
    let mut g = Graph::new();
    for (top, text) in files {
        let code = code_of(text);
        let to = g.entry(top.clone()).or_default();
        for name in crate_names(&code) {
            if &name != top {
                to.insert(name);
            }
        }
    }
    g
}

/// A file's code: its test module and its comment lines left out.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The rooms whose files are each a module of their own here (`cage::spec`,
/// `turn::gateway`); `ops`, `serve`, `error` and `fuzzing` are one module
/// each.
const ROOMS: &[&str] = &["face", "cage", "net", "turn", "images", "state"];

/// Rooms that are a module themselves and hold others: `host` (the
/// machine's facts) holds `podman`, `process`, `userns` and `bounded`;
/// `settings` holds `ssh_table` and `token`.
const HOLDERS: &[(&str, &[&str])] = &[
    ("host", &["podman", "process", "userns", "bounded"]),
    ("settings", &["ssh_table", "token"]),
];

/// The module a path names: its room's module for a path into a room
/// (`cage::spec::CageSpec` is `cage::spec`), else its first segment.
fn unit(segments: &[String]) -> String {
    let first = segments.first().map(String::as_str).unwrap_or("");
    let second = segments.get(1).map(String::as_str);
    if ROOMS.contains(&first) {
        return match second {
            Some(m) => format!("{first}::{m}"),
            None => first.to_string(),
        };
    }
    for (holder, held) in HOLDERS {
        if first == *holder
            && let Some(m) = second.filter(|m| held.contains(m))
        {
            return format!("{first}::{m}");
        }
    }
    first.to_string()
}

/// The module a file under `src/` belongs to, by the same rule.
fn unit_of_file(rel: &std::path::Path) -> String {
    let segments: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .filter(|s| s != "mod")
        .collect();
    unit(&segments)
}

/// Every path a `crate::` names, as segments, each `{a, b::c}` group
/// opened: `crate::{cage::{spec, harness}, error}` names `cage::spec`,
/// `cage::harness` and `error`.
fn paths(rest: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    if let Some(group) = rest.trim_start().strip_prefix('{') {
        let mut depth = 1;
        let mut start = 0;
        for (j, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => {
                    paths(&group[start..j], prefix, out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 1 => {
                    paths(&group[start..j], prefix, out);
                    start = j + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let name = ident(rest);
    if name.is_empty() {
        if !prefix.is_empty() {
            out.push(prefix.to_vec());
        }
        return;
    }
    let mut next = prefix.to_vec();
    next.push(name.clone());
    let after = &rest.trim_start()[name.len()..];
    match after.strip_prefix("::") {
        // The whole path: which of its segments name a module is the
        // reader's (`unit`, `file_of`).
        Some(more) => paths(more, &next, out),
        None => out.push(next),
    }
}

/// The modules every `crate::` path names.
fn crate_names(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let mut found = Vec::new();
        paths(&code[i + "crate::".len()..], &[], &mut found);
        out.extend(found.iter().map(|p| unit(p)));
    }
    out.remove("");
    out
}

/// The groups of modules that reach each other (Tarjan's strongly
/// connected components), those of more than one module.
fn circles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

/// Every file below `src/` (`/`-separated) and its text, and the files
/// compiled for tests only (`test_modules`).
fn all_sources() -> (Vec<(String, String)>, Vec<String>) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rs_files(&src, &mut paths);
    paths.sort();
    let texts: Vec<(String, String)> = paths
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            (rel, std::fs::read_to_string(p).unwrap())
        })
        .collect();
    let modules: Vec<String> = texts
        .iter()
        .flat_map(|(rel, text)| test_modules(rel, text))
        .collect();
    (texts, modules)
}

/// The program's files below `src/` and their text, the files compiled
/// for tests only left out.
fn sources() -> Vec<(String, String)> {
    let (texts, modules) = all_sources();
    texts
        .into_iter()
        .filter(|(rel, _)| !test_only(rel, &modules))
        .collect()
}

/// The program's own graph of rooms, from `src/`.
fn program() -> Graph {
    let files: Vec<(String, String)> = sources()
        .into_iter()
        .map(|(rel, text)| (unit_of_file(std::path::Path::new(&rel)), text))
        .collect();
    graph(&files)
}

// ---- no circle between files ----------------------------------------------

/// The module a file below `src/` is, as `::`-separated segments:
/// `ops/show.rs` is `ops::show`, `ops/mod.rs` is `ops`, and `main.rs` (or
/// `lib.rs`, which includes it) is the crate's root, `crate`.
fn module_of_file(rel: &str) -> String {
    let segments: Vec<&str> = rel
        .trim_end_matches(".rs")
        .split('/')
        .filter(|s| *s != "mod")
        .collect();
    match segments.as_slice() {
        ["main"] | ["lib"] => "crate".to_string(),
        s => s.join("::"),
    }
}

/// The file a path (segments after `crate::`) names: the longest of its
/// prefixes that is one of `modules`, else the crate's root.
fn file_of(segments: &[String], modules: &BTreeSet<String>) -> String {
    (1..=segments.len())
        .rev()
        .map(|n| segments[..n].join("::"))
        .find(|m| modules.contains(m))
        .unwrap_or_else(|| "crate".to_string())
}

/// The modules a file's code names, through `crate::` and through
/// `super::` (read from `module`: `super::` in `ops/show.rs` or in
/// `ops/show/mod.rs` is `ops`, and each further `super::` one more up).
fn file_names(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let own: Vec<String> = match module {
        "crate" => Vec::new(),
        m => m.split("::").map(String::from).collect(),
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let mut found = Vec::new();
        paths(&code[i + "crate::".len()..], &[], &mut found);
        out.extend(found.iter().map(|p| file_of(p, modules)));
    }
    for (i, _) in code.match_indices("super::") {
        // The first of a `super::super::` only.
        if code[..i].ends_with("::") {
            continue;
        }
        let mut rest = &code[i..];
        let mut base = own.clone();
        while let Some(more) = rest.strip_prefix("super::") {
            base.pop();
            rest = more;
        }
        let mut found = Vec::new();
        paths(rest, &base, &mut found);
        if found.is_empty() {
            found.push(base);
        }
        out.extend(found.iter().map(|p| file_of(p, modules)));
    }
    out.remove(module);
    out
}

/// The files' graph: each file's module, to the modules its code names.
fn file_graph(files: &[(String, String)]) -> Graph {
    let modules: BTreeSet<String> = files.iter().map(|(rel, _)| module_of_file(rel)).collect();
    let mut g = Graph::new();
    for (rel, text) in files {
        let module = module_of_file(rel);
        let names = file_names(&module, &code_of(text), &modules);
        g.entry(module).or_default().extend(names);
    }
    g
}

/// The circles between files still left, with why. None: the executor
/// (`ops::plan`) runs steps whose bodies live below it (`ops::acts`). This
/// list only shrinks.
const FILE_CIRCLES_LEFT: &[&[&str]] = &[];

#[test]
fn the_reader_finds_a_circle_between_files_of_a_folder() {
    let files = [
        ("main.rs", "mod ops;\nfn main() { crate::ops::ls::ls(); }"),
        (
            "ops/mod.rs",
            "pub mod ls;\npub mod show;\npub struct Context;",
        ),
        (
            "ops/ls.rs",
            "use super::{Context, show::{Seen, Session}};\n// crate::ops::plan in a comment",
        ),
        ("ops/show.rs", "fn f() { super::ls::helper(); }"),
        ("ops/plan.rs", "use crate::ops::Context;"),
        (
            "ops/decisions/faults.rs",
            "fn f() { super::super::ls::ls(); }",
        ),
        ("ops/show/more.rs", "use crate::ops::show::inner::Item;"),
    ]
    .map(|(a, b)| (a.to_string(), b.to_string()));
    assert_eq!(module_of_file("ops/mod.rs"), "ops");
    assert_eq!(module_of_file("ops/show.rs"), "ops::show");
    assert_eq!(
        module_of_file("turn/gateway/routes.rs"),
        "turn::gateway::routes"
    );
    assert_eq!(module_of_file("main.rs"), "crate");
    let g = file_graph(&files);
    let set = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    // `super::{Context, show::...}`: the folder's own module, and a file
    // beside; a comment names nothing.
    assert_eq!(g["ops::ls"], set(&["ops", "ops::show"]));
    assert_eq!(g["ops::show"], set(&["ops::ls"]));
    // The longest prefix that is a file; `super::super::` two up.
    assert_eq!(g["ops::show::more"], set(&["ops::show"]));
    assert_eq!(g["ops::decisions::faults"], set(&["ops::ls"]));
    assert_eq!(g["crate"], set(&["ops::ls"]));
    // The rooms' reader sees one `ops` here; the files' reader, a circle.
    assert_eq!(
        circles(&g),
        [["ops::ls".to_string(), "ops::show".to_string()]]
    );
    // Without the one call back, no circle.
    let mut without = files.clone();
    without[3].1 = "fn f() {}".into();
    assert!(circles(&file_graph(&without)).is_empty());
}

#[test]
fn no_two_files_import_each_other() {
    let g = file_graph(&sources());
    // The reader found the program's files and their paths at all.
    assert!(g.len() > 100, "only {} files", g.len());
    assert!(g["ops::tidy"].contains("ops::plan"), "{:?}", g["ops::tidy"]);
    let left: Vec<Vec<String>> = FILE_CIRCLES_LEFT
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(
        circles(&g),
        left,
        "files that import each other, directly or through others (or a circle of \
         FILE_CIRCLES_LEFT gone: take it off the list); move what they share down into \
         a file that imports neither (a type, a helper), or pass it as a value"
    );
}

#[test]
fn the_reader_finds_a_circle_where_there_is_one() {
    let files = [
        (
            "ops",
            "use crate::{error::Error, gateway::{self, Gateway}};",
        ),
        (
            "gateway",
            "// crate::ops::Context in a comment is no use\nuse crate::error;",
        ),
        ("gateway", "fn f() { let t = crate::ops::create::now(); }"),
        ("podman", "use crate::spec::CageSpec;"),
        (
            "spec",
            "#[cfg(test)]\nmod tests {\n use crate::podman::argv;\n}",
        ),
        ("error", ""),
    ]
    .map(|(a, b)| (a.to_string(), b.to_string()));
    // Into rooms: a room's module, groups opened.
    assert_eq!(
        crate_names(
            "use crate::{cage::{spec::CageSpec, harness}, error::Error};\n\
             fn f() { crate::host::podman::argv::ps(); crate::host::Host::x(); crate::face::output::show(); }"
        ),
        BTreeSet::from(
            [
                "cage::spec",
                "cage::harness",
                "error",
                "host::podman",
                "host",
                "face::output"
            ]
            .map(String::from)
        )
    );
    assert_eq!(
        unit_of_file(std::path::Path::new("turn/gateway/routes.rs")),
        "turn::gateway"
    );
    assert_eq!(unit_of_file(std::path::Path::new("cage/mod.rs")), "cage");
    assert_eq!(
        unit_of_file(std::path::Path::new("host/facts_cache.rs")),
        "host"
    );
    assert_eq!(
        unit_of_file(std::path::Path::new("host/podman/argv.rs")),
        "host::podman"
    );
    assert_eq!(unit_of_file(std::path::Path::new("ops/plan.rs")), "ops");
    let g = graph(&files);
    assert_eq!(
        g["ops"],
        BTreeSet::from(["error".to_string(), "gateway".to_string()])
    );
    assert_eq!(circles(&g), [["gateway".to_string(), "ops".to_string()]]);
    // Without the one call, no circle.
    let g = graph(&[files[0].clone(), files[1].clone(), files[3].clone()]);
    assert!(circles(&g).is_empty(), "{:?}", circles(&g));
}

#[test]
fn no_two_modules_import_each_other() {
    let g = program();
    let allowed: Vec<Vec<String>> = ALLOWED
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let found: Vec<Vec<String>> = circles(&g)
        .into_iter()
        .filter(|c| !allowed.contains(c))
        .collect();
    assert!(
        found.is_empty(),
        "these modules import each other, directly or through others: {found:?}; \
         move what they share down into the lower one (a type, a pure function), \
         or pass it as a value"
    );
}

#[test]
fn the_servers_and_what_podman_is_told_stay_below() {
    let g = program();
    for (module, not) in [
        ("turn::server", "ops"),
        ("turn::gateway", "ops"),
        ("turn::cage_socket", "ops"),
        ("cage::pi_models", "ops"),
        ("settings", "host::podman"),
        ("cage::spec", "host::podman"),
        ("cage::harness", "host::podman"),
        ("cage::envfile", "host::podman"),
    ] {
        assert!(g.contains_key(module), "no module {module}");
        assert!(
            !g[module].contains(not),
            "{module} uses {not}, which is above it"
        );
    }
}

// ---- decisions stay small -------------------------------------------------
//
// Decisions stay small enough to read at once. In `src/ops/` (every file
// below it, test modules left out), a decision is a function named
// `decide...` or `..._decision`, or one whose doc comment begins `Pure`
// (what the operations call their pure functions: a refusal or a plan
// from facts). Each is at most `MAX_LINES` lines, from its `fn` line to
// its closing brace; a longer one is split into smaller decisions, each
// named for what it decides. No podman needed: a plain `cargo test` runs
// this.

const MAX_LINES: usize = 80;

/// A function found: its name, where its `fn` line is (1-based), how many
/// lines it spans, and whether it is a decision.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
    decision: bool,
}

/// The name after `fn ` on a line that declares a function, if it does.
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for word in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(word).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    Some(&name[..end]).filter(|n| !n.is_empty())
}

/// Pure: a file's functions (rustfmt's layout: a body closes with `}` at
/// the indentation of its `fn`; a declaration without a body, in a trait,
/// ends with `;` and is left out).
fn functions(code: &str) -> Vec<Function> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else {
            continue;
        };
        let indent = &line[..line.len() - line.trim_start().len()];
        let close = format!("{indent}}}");
        // The end of its signature: a body opens, or a declaration ends.
        let Some(open) = (i..lines.len()).find(|&j| {
            let l = lines[j].trim_end();
            l.ends_with('{') || l.ends_with("{}") || l.ends_with(';')
        }) else {
            continue;
        };
        let end = if lines[open].trim_end().ends_with(';') {
            continue;
        } else if lines[open].trim_end().ends_with("{}") {
            open
        } else {
            match (open + 1..lines.len()).find(|&j| lines[j] == close) {
                Some(end) => end,
                None => continue,
            }
        };
        // Its doc comment: the `///` lines above it, attributes between.
        let doc_first = lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim_start())
            .take_while(|l| l.starts_with("///") || l.starts_with("#["))
            .filter(|l| l.starts_with("///"))
            .last();
        let pure =
            doc_first.is_some_and(|d| d.trim_start_matches('/').trim_start().starts_with("Pure"));
        out.push(Function {
            name: name.to_string(),
            line: i + 1,
            lines: end - i + 1,
            decision: name.starts_with("decide") || name.ends_with("_decision") || pure,
        });
    }
    out
}

#[test]
fn the_reader_finds_functions_and_their_length() {
    let code = "\
/// Pure: a decision by its doc.
#[must_use]
pub fn a(x: u8) -> u8 {
    x
}

fn decide_b() {}

impl T {
    /// Not a decision.
    pub(super) fn c(&self) {
        let _ = 1;
    }

    fn d_decision(
        &self,
    ) {
    }
}

trait U {
    fn e(&self);
}
";
    let found = functions(code);
    let seen: Vec<(&str, usize, usize, bool)> = found
        .iter()
        .map(|f| (f.name.as_str(), f.line, f.lines, f.decision))
        .collect();
    assert_eq!(
        seen,
        [
            ("a", 3, 3, true),
            ("decide_b", 7, 1, true),
            ("c", 11, 3, false),
            ("d_decision", 15, 4, true),
        ]
    );
    assert_eq!(
        before_tests("fn a() {}\n#[cfg(test)]\nmod tests {\n fn decide() {}\n}\n"),
        "fn a() {}\n"
    );
}

#[test]
fn no_decision_is_over_80_lines() {
    let ops = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/ops");
    let mut files = Vec::new();
    rs_files(&ops, &mut files);
    files.sort();
    let mut long = Vec::new();
    let mut decisions = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for f in functions(before_tests(&text))
            .into_iter()
            .filter(|f| f.decision)
        {
            decisions += 1;
            if f.lines > MAX_LINES {
                long.push(format!(
                    "{}:{} {} is {} lines",
                    file.strip_prefix(&ops).unwrap().display(),
                    f.line,
                    f.name,
                    f.lines
                ));
            }
        }
    }
    // The reader found the decisions at all (`make::decide` and its parts
    // among them).
    assert!(decisions > 20, "only {decisions} decisions found");
    assert!(
        long.is_empty(),
        "decisions over {MAX_LINES} lines; split each into smaller decisions:\n{}",
        long.join("\n")
    );
}

// ---- functions stay small ---------------------------------------------------
//
// Every function of the program stays small enough to read at once: at most
// `MAX_LINES` lines, as the decisions above (the same reader counts them).
// Test modules are left out, and so are the files compiled for tests only
// (a `#[cfg(test)] mod NAME;` and everything below it). A longer function
// is split into functions named for what each part does; one still too long
// is named in `LONG_ALLOWED`, which only shrinks. No podman needed.

/// The functions still over `MAX_LINES`, by file (below `src/`) and name,
/// with the length each had when it was listed: none may grow, none may be
/// added, and one that is split is taken off the list.
const LONG_ALLOWED: &[(&str, &str, usize)] = &[];

/// Pure: the files (below `src/`, as `/`-separated paths) that a file
/// declares for tests only: `#[cfg(test)]` over `mod NAME;`. A `NAME.rs`
/// or `NAME/mod.rs` beside it (for `main.rs`, `lib.rs`, `mod.rs`), or
/// below its own folder (for `x.rs`, in `x/`); what is below is the
/// caller's (`test_only`).
fn test_modules(rel: &str, text: &str) -> Vec<String> {
    let (folder, file) = rel.rsplit_once('/').unwrap_or(("", rel));
    let base = match file {
        "main.rs" | "lib.rs" | "mod.rs" => folder.to_string(),
        f if folder.is_empty() => f.trim_end_matches(".rs").to_string(),
        f => format!("{folder}/{}", f.trim_end_matches(".rs")),
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for pair in lines.windows(2) {
        if pair[0].trim() != "#[cfg(test)]" {
            continue;
        }
        let decl = pair[1].trim();
        let decl = decl.strip_prefix("pub ").unwrap_or(decl);
        if let Some(name) = decl.strip_prefix("mod ").and_then(|n| n.strip_suffix(';')) {
            out.push(if base.is_empty() {
                name.to_string()
            } else {
                format!("{base}/{name}")
            });
        }
    }
    out
}

/// Whether a file (below `src/`) is compiled for tests only: it is one of
/// `modules` (as `NAME.rs` or `NAME/mod.rs`), or below one's folder.
fn test_only(rel: &str, modules: &[String]) -> bool {
    modules
        .iter()
        .any(|m| rel == format!("{m}.rs") || rel.starts_with(&format!("{m}/")))
}

/// Pure: what is wrong with the functions found (file, name, length),
/// against the allowed list: a function over `MAX_LINES` not listed, a
/// listed one longer than its entry, an entry for no function over it.
fn long_functions(found: &[(String, Function)], allowed: &[(&str, &str, usize)]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (file, f) in found.iter().filter(|(_, f)| f.lines > MAX_LINES) {
        match allowed
            .iter()
            .find(|(a_file, a_name, _)| a_file == file && *a_name == f.name)
        {
            None => wrong.push(format!(
                "src/{file}:{} {} is {} lines, over {MAX_LINES}: split it into functions \
                 named for what each part does",
                f.line, f.name, f.lines
            )),
            Some((_, _, was)) if f.lines > *was => wrong.push(format!(
                "src/{file}:{} {} is {} lines, longer than the {was} it is allowed in \
                 LONG_ALLOWED: split it rather than grow it",
                f.line, f.name, f.lines
            )),
            Some(_) => {}
        }
    }
    for (file, name, _) in allowed {
        let still = found
            .iter()
            .any(|(f_file, f)| f_file == file && f.name == *name && f.lines > MAX_LINES);
        if !still {
            wrong.push(format!(
                "src/{file} {name} is in LONG_ALLOWED but no function of that name there is \
                 over {MAX_LINES} lines now: take it off the list"
            ));
        }
    }
    wrong
}

#[test]
fn the_length_check_refuses_what_it_should() {
    let f = |name: &str, lines: usize| Function {
        name: name.to_string(),
        line: 1,
        lines,
        decision: false,
    };
    let found = vec![
        ("a.rs".to_string(), f("long", 90)),
        ("a.rs".to_string(), f("short", 80)),
        ("b/c.rs".to_string(), f("long", 81)),
    ];
    let allowed = [("a.rs", "long", 90), ("b/c.rs", "long", 81)];
    assert!(long_functions(&found, &allowed).is_empty());
    // An entry taken off: its function is refused.
    let refused = long_functions(&found, &allowed[..1]);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].starts_with("src/b/c.rs:1 long is 81 lines"));
    // A listed function that grew, and an entry left for one split.
    let grown = [("a.rs".to_string(), f("long", 91))];
    assert!(long_functions(&grown, &allowed[..1])[0].contains("longer than the 90"));
    let split = [("a.rs".to_string(), f("long", 40))];
    assert!(long_functions(&split, &allowed[..1])[0].contains("take it off the list"));
    // Files for tests only, from their declarations.
    let decl = "mod a;\n#[cfg(test)]\nmod decisions;\n#[cfg(test)]\npub mod fake;\n";
    assert_eq!(
        test_modules("ops/mod.rs", decl),
        ["ops/decisions", "ops/fake"]
    );
    assert_eq!(test_modules("main.rs", decl), ["decisions", "fake"]);
    assert_eq!(
        test_modules("ops/x.rs", decl),
        ["ops/x/decisions", "ops/x/fake"]
    );
    let modules = test_modules("ops/mod.rs", decl);
    assert!(test_only("ops/decisions.rs", &modules));
    assert!(test_only("ops/decisions/faults.rs", &modules));
    assert!(!test_only("ops/decisions_of.rs", &modules));
}

#[test]
fn no_function_is_over_80_lines() {
    let (texts, modules) = all_sources();
    // The reader found the files for tests only (the fault matrix among
    // them) and functions at all.
    assert!(
        modules.contains(&"ops/decisions".to_string()),
        "{modules:?}"
    );
    let mut found = Vec::new();
    for (rel, text) in texts.iter().filter(|(rel, _)| !test_only(rel, &modules)) {
        for f in functions(before_tests(text)) {
            found.push((rel.clone(), f));
        }
    }
    assert!(found.len() > 1000, "only {} functions found", found.len());
    let wrong = long_functions(&found, LONG_ALLOWED);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---- operations never print -------------------------------------------------
//
// An operation returns what it did, and the faces say it (`face::output`,
// serve's log): a line an operation wrote to a terminal itself would never
// reach serve's client, nor wait for the result it belongs with. Its code
// (comments and test modules left out) names no stream of the terminal and
// no printing macro. No podman needed.

/// What prints: the terminal's streams and the macros that write to them
/// (`print!` finds `eprint!` too, and `println!` finds `eprintln!`).
const PRINTS: &[&str] = &["io::stderr", "io::stdout", "print!", "println!", "dbg!"];

/// Pure: the lines of a file's code that print, numbered from 1 (its
/// comments and its test module left out, as [`code_of`] reads it).
fn printing_lines(text: &str) -> Vec<(usize, String)> {
    before_tests(text)
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| PRINTS.iter().any(|p| l.contains(p)))
        .map(|(i, l)| (i + 1, l.trim().to_string()))
        .collect()
}

#[test]
fn the_print_reader_finds_what_prints() {
    let text = "fn a() {\n    // eprintln! in a comment\n    let _ = writeln!(std::io::stderr(), \"x\");\n    eprintln!(\"y\");\n    println!(\"z\");\n    let out = p.stdout;\n}\n#[cfg(test)]\nmod tests {\n    fn t() { println!(\"t\"); }\n}\n";
    let found: Vec<usize> = printing_lines(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(found, vec![3, 4, 5]);
}

#[test]
fn no_operation_prints() {
    let ops: Vec<(String, String)> = sources()
        .into_iter()
        .filter(|(rel, _)| rel.starts_with("ops/"))
        .collect();
    // The reader found the operations, and left out the files for tests
    // only (the fault matrix prints what it ran).
    assert!(ops.iter().any(|(rel, _)| rel == "ops/dead_turn.rs"));
    assert!(!ops.iter().any(|(rel, _)| rel.starts_with("ops/decisions")));
    let wrong: Vec<String> = ops
        .iter()
        .flat_map(|(rel, text)| {
            printing_lines(text)
                .into_iter()
                .map(move |(n, l)| format!("src/{rel}:{n}: {l}"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "operations print (hand the line to the face: a field of the result, or \
         `Context::warn`):\n{}",
        wrong.join("\n")
    );
}

// ---- a unit test's scratch folder is its own -----------------------------
//
// The unit tests run as root and then as another user, many at once in one
// process. Folders named by hand (by pid, by the clock) met each other: two
// tests of one process chose the same name, and a folder root's run left
// behind was one the next user could not remove. `tempfile` makes each
// folder new, with a name nobody else holds; `std::env::temp_dir()` is not
// used below `src/` at all.

/// Pure: the lines of `text` that name the system's scratch folder.
fn scratch_by_hand(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains("env::temp_dir()"))
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn the_reader_finds_a_scratch_folder_named_by_hand() {
    let text = "fn t() {\n    let d = std::env::temp_dir().join(\"x\");\n}\n";
    assert_eq!(scratch_by_hand(text), [2]);
    assert!(scratch_by_hand("let d = tempfile::tempdir().unwrap();").is_empty());
}

#[test]
fn unit_tests_take_scratch_folders_from_tempfile() {
    let (texts, _) = all_sources();
    let found: Vec<String> = texts
        .iter()
        .flat_map(|(rel, text)| {
            scratch_by_hand(text)
                .into_iter()
                .map(move |n| format!("src/{rel}:{n}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "scratch folders named by hand; use tempfile::tempdir() or tempfile::Builder:\n{}",
        found.join("\n")
    );
}
