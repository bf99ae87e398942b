//! The program's modules stay in layers: no two of them import each other,
//! directly or through others, so that each can be read, changed and
//! tested from the modules below it. The faces' servers (`server`,
//! `gateway`, `cage_socket`) and `pi_models` take plain values and never
//! reach back into the operations (`ops`); what `podman` is told
//! (`settings`, `spec`, `harness`, `envfile`) knows nothing of `podman`.
//! Read from the sources' `crate::` paths (comments and test modules left
//! out). No podman needed: a plain `cargo test` runs this.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

mod source;
use source::rs_files;

/// The one circle still allowed, with why: `output` renders the
/// operations' results, and two operations write a line of `output`'s
/// themselves (a decision's text, a warning) while they run.
const ALLOWED: &[&[&str]] = &[&["ops", "output"]];

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

/// The first segment of every `crate::` path, in a `use crate::{a, b::c}`
/// group too.
fn crate_names(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut start = 0;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => {
                        out.insert(ident(&group[start..j]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 1 => {
                        out.insert(ident(&group[start..j]));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
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

/// The program's own graph, from `src/`.
fn program() -> Graph {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rs_files(&src, &mut paths);
    let files: Vec<(String, String)> = paths
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(&src).unwrap();
            let first = rel.components().next().unwrap().as_os_str();
            let top = first.to_string_lossy().trim_end_matches(".rs").to_string();
            (top, std::fs::read_to_string(p).unwrap())
        })
        .collect();
    graph(&files)
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
        ("server", "ops"),
        ("gateway", "ops"),
        ("cage_socket", "ops"),
        ("pi_models", "ops"),
        ("settings", "podman"),
        ("spec", "podman"),
        ("harness", "podman"),
        ("envfile", "podman"),
    ] {
        assert!(g.contains_key(module), "no module {module}");
        assert!(
            !g[module].contains(not),
            "{module} uses {not}, which is above it"
        );
    }
}
