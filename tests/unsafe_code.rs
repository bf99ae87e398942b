//! The program's `unsafe` code is the list below, each site with why it
//! cannot be safe: a new `unsafe` block, fn or impl in `src/` fails this
//! test until it is added here with its reason, and one that is gone must
//! leave the list. Every site also says why it is sound, in a `// SAFETY:`
//! comment right above it (a `/// # Safety` section for an `unsafe fn`).
//! What has a safe API (std's, rustix's) uses it instead. Read from the
//! sources, comments left out. No podman needed: a plain `cargo test` runs
//! this.

use std::path::PathBuf;

mod source;
use source::rs_files;

/// (file under src/, a piece of the site's code, why it is unsafe). The
/// piece is looked for in the site's text: its line from `unsafe` on and
/// the line after. A site listed twice is two sites.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "host/process.rs",
        "cmd.pre_exec(in_child)",
        "std's CommandExt::pre_exec is an unsafe fn (the closure runs between \
         fork and exec): a process that dies with its parent (PR_SET_PDEATHSIG)",
    ),
    (
        "host/process.rs",
        "cmd.pre_exec(in_child)",
        "std's CommandExt::pre_exec: a detached process's own session (setsid) \
         and the descriptors passed on to it (std has process_group, not setsid)",
    ),
    (
        "host/process.rs",
        "BorrowedFd::borrow_raw(fd) }",
        "in the child before exec, a descriptor number the caller holds open",
    ),
    (
        "host/process.rs",
        "fcntl_getfd(BorrowedFd::borrow_raw(fd))",
        "a descriptor number passed on to us on our command line, taken as ours",
    ),
    (
        "host/process.rs",
        "libc::sigset_t",
        "neither std nor rustix sets a signal mask (pthread_sigmask)",
    ),
    (
        "net/netif.rs",
        "libc::getifaddrs",
        "neither std nor rustix lists the interfaces' addresses (getifaddrs)",
    ),
    ("net/netif.rs", "&*cur", "getifaddrs's list"),
    (
        "net/netif.rs",
        "sockaddr_ip(ifa.ifa_addr)",
        "getifaddrs's list",
    ),
    ("net/netif.rs", "libc::freeifaddrs", "getifaddrs's list"),
    ("net/netif.rs", "unsafe fn sockaddr_ip", "getifaddrs's list"),
    ("net/netif.rs", "sa_family", "getifaddrs's list"),
];

/// One `unsafe` in code: its file, line (from 1) and text.
#[derive(Debug)]
struct Site {
    file: String,
    line: usize,
    text: String,
    /// A `// SAFETY:` comment (or `/// # Safety`) stands right above it.
    documented: bool,
}

/// Where `unsafe` starts a block, fn, impl, trait, extern block or an
/// unsafe attribute (not a word in a string, as CSP's 'unsafe-inline').
fn unsafe_at(line: &str) -> Option<usize> {
    let code = match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    };
    for (i, _) in code.match_indices("unsafe") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '\'' || c == '"') {
            continue;
        }
        let rest = code[i + "unsafe".len()..].trim_start();
        let word = |w: &str| {
            rest.strip_prefix(w)
                .is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        };
        if rest.is_empty()
            || rest.starts_with('{')
            || rest.starts_with('(')
            || ["fn", "impl", "trait", "extern"].into_iter().any(word)
        {
            return Some(i);
        }
    }
    None
}

/// Every `unsafe` site of one file's text.
fn sites(file: &str, text: &str) -> Vec<Site> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let Some(at) = unsafe_at(line) else {
            continue;
        };
        let next = lines.get(n + 1).map_or("", |l| l.trim());
        let comments = lines[..n]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with("//") || l.starts_with("#["));
        let documented = comments
            .into_iter()
            .any(|c| c.starts_with("// SAFETY:") || c == "/// # Safety");
        out.push(Site {
            file: file.to_string(),
            line: n + 1,
            text: format!("{} {next}", line[at..].trim()),
            documented,
        });
    }
    out
}

/// The sites not in `allowed`, and the entries of `allowed` matching no
/// site.
fn unlisted<'a>(
    mut found: Vec<Site>,
    allowed: &'a [(&'a str, &'a str, &'a str)],
) -> (Vec<Site>, Vec<&'a (&'a str, &'a str, &'a str)>) {
    let mut gone = Vec::new();
    for entry in allowed {
        let (file, piece, _) = entry;
        match found
            .iter()
            .position(|s| s.file == *file && s.text.contains(piece))
        {
            Some(i) => {
                found.remove(i);
            }
            None => gone.push(entry),
        }
    }
    (found, gone)
}

/// The program's sites, from `src/`.
fn program() -> Vec<Site> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rs_files(&src, &mut paths);
    paths.sort();
    paths
        .iter()
        .flat_map(|p| {
            let rel = p.strip_prefix(&src).unwrap().to_string_lossy().to_string();
            sites(&rel, &std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

#[test]
fn the_reader_finds_every_unsafe_site() {
    let text = r#"
const CSP: &str = "style-src 'unsafe-inline'";
// unsafe { in a comment }
fn not_unsafe_fn() {}
/// # Safety
/// `p` is valid.
unsafe fn f(p: *const u8) -> u8 {
    // SAFETY: the caller's promise.
    unsafe { *p }
}
fn g() {
    let n = unsafe { libc::getpid() };
    // SAFETY: why.
    #[allow(unused)]
    let owned = unsafe {
        from_raw(3)
    };
}
"#;
    let found = sites("x.rs", text);
    let seen: Vec<(usize, &str, bool)> = found
        .iter()
        .map(|s| (s.line, s.text.as_str(), s.documented))
        .collect();
    assert_eq!(
        seen,
        [
            (
                7,
                "unsafe fn f(p: *const u8) -> u8 { // SAFETY: the caller's promise.",
                true
            ),
            (9, "unsafe { *p } }", true),
            (12, "unsafe { libc::getpid() }; // SAFETY: why.", false),
            (15, "unsafe { from_raw(3)", true),
        ]
    );
    // A listed site passes; a new one and a gone entry are told.
    let allowed = [
        ("x.rs", "unsafe fn f", ""),
        ("x.rs", "*p", ""),
        ("x.rs", "from_raw(3)", ""),
        ("x.rs", "from_raw(4)", ""),
    ];
    let (new, gone) = unlisted(found, &allowed);
    assert_eq!(new.iter().map(|s| s.line).collect::<Vec<_>>(), [12]);
    assert_eq!(gone, [&allowed[3]]);
}

#[test]
fn every_unsafe_site_is_listed_with_its_reason() {
    let (new, gone) = unlisted(program(), ALLOWED);
    assert!(
        new.is_empty(),
        "unsafe code not in tests/unsafe_code.rs's list: {new:#?}; use a safe API \
         (std's, rustix's) instead, or add it to the list with why it must be unsafe"
    );
    assert!(
        gone.is_empty(),
        "listed in tests/unsafe_code.rs but not found in src/: {gone:#?}; \
         take it off the list"
    );
}

#[test]
fn every_unsafe_site_says_why_it_is_sound() {
    let bare: Vec<Site> = program().into_iter().filter(|s| !s.documented).collect();
    assert!(
        bare.is_empty(),
        "unsafe code without a `// SAFETY:` comment right above it (`/// # Safety` \
         for an unsafe fn) saying why it is sound: {bare:#?}"
    );
}
