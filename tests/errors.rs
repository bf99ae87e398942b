//! Errors carry what went wrong as data (`error::What`), worded by each
//! face when it gives them, not made as a sentence where they are found
//! (`Error::failed(format!(...))`, `Error::bad_input`, `Error::worded`,
//! ...). The list below says how many each room (a folder of `src/`, or a
//! file at its top) may still make so: none now. A room with more than its
//! entry fails this test (make the new error from a variant of `What`, or
//! add one). Read from the sources, test modules left out (a file's `mod
//! tests`, and a module its parent declares under `#[cfg(test)]`, with all
//! below it); std's own `io::Error::new` is no sentence of ours. No podman
//! needed: a plain `cargo test` runs this. A failed act is named by an
//! `error::Doing`, its subject kept as data, never by words made with
//! `format!` (`Error::act(format!(...))`): none is allowed.

use std::collections::BTreeMap;
use std::path::PathBuf;

mod source;
use source::{before_tests, rs_files};

/// The constructors that make an error from a sentence made on the spot.
const SENTENCE_MAKERS: &[&str] = &[
    "Error::failed(",
    "Error::bad_input(",
    "Error::new(",
    "Error::not_found(",
    "Error::busy(",
    "Error::forbidden(",
    "Error::too_large(",
    "Error::worded(",
    "What::Said(",
    "What::Worded {",
];

/// Errors made from sentences, left per room (a folder of `src/`, or a
/// file at its top), as of this writing.
const LEFT: &[(&str, usize)] = &[];

/// Pure: how many errors a file's code makes from sentences.
fn sentences(code: &str) -> usize {
    let code = before_tests(code);
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| {
            SENTENCE_MAKERS
                .iter()
                .map(|m| {
                    l.match_indices(m)
                        .filter(|(i, _)| !l[..*i].ends_with("io::"))
                        .count()
                })
                .sum::<usize>()
        })
        .sum()
}

/// The calls that make an error from a failed act, and what names it: a
/// `Doing` (`error/doing.rs`), which carries the act's subject as data.
const ACT_MAKERS: &[&str] = &["Error::act(", "Error::act_on_input(", ".ctx(||"];

/// Pure: how many acts a file's code names with words made on the spot
/// (`format!`), given to an act's maker or to a `Doing`'s variant. What
/// follows the call's opening counts with blanks and line breaks skipped,
/// so a call split over lines is caught as well as one on one line.
fn acts_from_format(code: &str) -> usize {
    let code = before_tests(code)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let made_on_the_spot = |rest: &str| rest.trim_start().starts_with("format!");
    let by_makers: usize = ACT_MAKERS
        .iter()
        .map(|m| {
            code.match_indices(m)
                .filter(|(i, _)| made_on_the_spot(&code[i + m.len()..]))
                .count()
        })
        .sum();
    let by_variants = code
        .match_indices("Doing::")
        .filter(|(i, m)| {
            let rest = code[i + m.len()..].trim_start_matches(|c: char| c.is_alphanumeric());
            rest.strip_prefix('(').is_some_and(made_on_the_spot)
        })
        .count();
    by_makers + by_variants
}

/// Whether the module of `rel` (a path below `src/`), or one above it, is
/// declared under `#[cfg(test)]` by its parent: test code, all of it.
/// `read` gives a file's text below `src/`, if there is one.
fn test_only(rel: &str, read: &dyn Fn(&str) -> Option<String>) -> bool {
    let parts: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
    (0..parts.len()).any(|i| {
        let name = parts[i];
        let parent = parts[..i].join("/");
        let parents = if parent.is_empty() {
            vec!["main.rs".to_string(), "lib.rs".to_string()]
        } else {
            vec![format!("{parent}.rs"), format!("{parent}/mod.rs")]
        };
        let declared = format!("#[cfg(test)]\nmod {name};");
        parents
            .iter()
            .filter_map(|p| read(p))
            .any(|text| text.contains(&declared))
    })
}

/// The room of a file below `src/`: its first folder, or the file.
fn room(rel: &str) -> String {
    rel.split_once('/')
        .map(|(r, _)| r.to_string())
        .unwrap_or_else(|| rel.to_string())
}

/// Pure: what is wrong with the counts found against the list.
fn wrong(found: &BTreeMap<String, usize>, left: &[(&str, usize)]) -> Vec<String> {
    let mut out = Vec::new();
    for (room, n) in found {
        let allowed = left.iter().find(|(r, _)| r == room).map_or(0, |(_, a)| *a);
        if *n > allowed {
            out.push(format!(
                "{room}: {n} errors made from sentences, {allowed} allowed: make the new \
                 ones from a variant of error::What"
            ));
        }
    }
    for (room, allowed) in left {
        let n = found.get(*room).copied().unwrap_or(0);
        if n < *allowed {
            out.push(format!(
                "{room}: {n} left, the list says {allowed}: lower its entry"
            ));
        }
    }
    out
}

#[test]
fn the_reader_counts_what_it_should() {
    let code = "fn a() -> Error {\n    Error::failed(format!(\"x {y}\"))\n}\n\
                // Error::bad_input(\"in a comment\")\n\
                fn b() { Error::act(\"reading x\", &e); Error::worded(k, |f| w(f)); }\n\
                #[cfg(test)]\nmod tests {\n    fn c() { Error::busy(\"x\"); }\n}\n";
    assert_eq!(sentences(code), 2);
    assert_eq!(
        sentences("io::Error::new(k, \"x\"); Error::new(k, \"y\")"),
        1
    );
    let tree = |p: &str| match p {
        "ops/mod.rs" => Some("#[cfg(test)]\nmod decisions;\nmod make;".to_string()),
        "ops/decisions.rs" => Some("mod faults;".to_string()),
        _ => None,
    };
    assert!(test_only("ops/decisions/faults.rs", &tree));
    assert!(test_only("ops/decisions.rs", &tree));
    assert!(!test_only("ops/make.rs", &tree));
    assert!(!test_only("ops/acts/drop.rs", &tree));
    let found = BTreeMap::from([("ops".to_string(), 3), ("net".to_string(), 1)]);
    assert!(wrong(&found, &[("ops", 3), ("net", 1)]).is_empty());
    assert_eq!(wrong(&found, &[("ops", 2), ("net", 1)]).len(), 1);
    assert_eq!(wrong(&found, &[("ops", 4), ("net", 1)]).len(), 1);
    // A room not listed has none allowed.
    assert_eq!(wrong(&found, &[("ops", 3)]).len(), 1);
    assert_eq!(room("ops/acts/send.rs"), "ops");
    assert_eq!(room("host.rs"), "host.rs");
}

/// The program's source files below `src/` (a path below it, and the
/// text), test-only modules left out.
fn program_files() -> Vec<(String, String)> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    let read = |p: &str| std::fs::read_to_string(src.join(p)).ok();
    files
        .into_iter()
        .map(|f| {
            let rel = f
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(&f).unwrap())
        })
        .filter(|(rel, _)| !test_only(rel, &read))
        .collect()
}

#[test]
fn errors_made_from_sentences_only_go_down() {
    let mut found = BTreeMap::new();
    for (rel, text) in program_files() {
        if rel.starts_with("error/") {
            continue;
        }
        let n = sentences(&text);
        if n > 0 {
            *found.entry(room(&rel)).or_insert(0) += n;
        }
    }
    let wrong = wrong(&found, LEFT);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_reader_finds_acts_named_with_format() {
    // One line, a call split over lines, a closure for `ctx`, an act on
    // the input, and a variant that takes a string.
    let code = "fn a() { Error::act(format!(\"reading {}\", p.display()), &e) }\n\
                fn b() {\n    Error::act(\n        format!(\"x {y}\"),\n        &e,\n    )\n}\n\
                fn c() { r.ctx(|| format!(\"making {}\", d.display())) }\n\
                fn d() { Error::act_on_input(\n format!(\"the token {t}\"), &e) }\n\
                fn e() { Error::act(Doing::Start(format!(\"{n}\")), &e) }\n";
    assert_eq!(acts_from_format(code), 5);
    // Data, a fixed phrase, a comment and a test module are not.
    let code = "fn a() { Error::act(Doing::Read(p.to_path_buf()), &e) }\n\
                fn b() { Error::act(\"starting serve's threads\", &e) }\n\
                fn c() { r.ctx(|| Doing::Write(p.to_path_buf())) }\n\
                // Error::act(format!(\"in a comment\"), &e)\n\
                let d = Doing::within(SUBCOMMAND, Doing::At(p.into()));\n\
                #[cfg(test)]\nmod tests {\n    fn t() { Error::act(format!(\"x\"), &e); }\n}\n";
    assert_eq!(acts_from_format(code), 0);
}

#[test]
fn no_act_is_named_with_format() {
    let mut found = Vec::new();
    for (rel, text) in program_files() {
        let n = acts_from_format(&text);
        if n > 0 {
            found.push(format!(
                "{rel}: {n} acts named with format!: give a variant of error::Doing, with \
                 its subject as data"
            ));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
