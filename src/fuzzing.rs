//! The properties the fuzz targets check, one function a target
//! (fuzz/fuzz_targets/NAME.rs calls `NAME` with libFuzzer's bytes). Each
//! takes any bytes, and panics only when its property fails: a panic is
//! what libFuzzer reports as a crash. The unit tests below run each over
//! its seeds in fuzz/seeds/NAME/, so that a plain `cargo test` checks them
//! too, and a crash once found stays fixed (its input is kept there).

use std::path::{Component, Path, PathBuf};

use crate::error::Kind;

/// Bytes as text, for the parsers that take `&str`: lossy, so that every
/// input reaches them.
fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// The config file: any text is settings or a bad-input error (a key and
/// why), never a panic nor another kind of failure.
pub fn config(data: &[u8]) {
    let env = crate::settings::Env::new();
    let r = crate::settings::Settings::resolve(
        Some(&text(data)),
        Path::new("/cfg/config.toml"),
        PathBuf::from("/state"),
        PathBuf::from("/home/u"),
        &env,
        &crate::settings::Overrides::default(),
    );
    if let Err(e) = r {
        assert_eq!(e.kind, Kind::BadInput, "{e:?}");
    }
}

/// The env file as podman reads it (`pkg/env/env.go`, 4.3 and 5.x): lines
/// split at `\n`, a `\r` before it dropped (Go's `bufio.ScanLines`), a line
/// over 64 KiB an error, leading blanks trimmed, `#` a comment only at the
/// start, the name before the first `=`, the value the rest verbatim; a
/// line without `=` would copy podman's own variable (a failure here).
fn read_env_file(text: &str) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = Vec::new();
    assert!(text.is_empty() || text.ends_with('\n'), "no final newline");
    for line in text.split_terminator('\n') {
        assert!(
            line.len() <= crate::host::podman::envfile::MAX_LINE,
            "a line over 64 KiB"
        );
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = line.trim_start_matches([' ', '\t']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("a line without `=`: {line:?}"));
        assert!(!name.is_empty(), "a line with no name: {line:?}");
        // podman keeps the last of two equal names.
        vars.retain(|(n, _)| n != name);
        vars.push((name.to_string(), value.to_string()));
    }
    vars
}

/// Variables from bytes: records split by U+001E, a name from its value
/// by U+001F (so that names and values may hold `=`, `#`, line breaks
/// and NUL).
fn variables(data: &[u8]) -> Vec<(String, String)> {
    text(data)
        .split('\u{1e}')
        .map(|r| match r.split_once('\u{1f}') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => (r.to_string(), String::new()),
        })
        .collect()
}

/// The env file's writer: what it writes reads back, as podman reads it,
/// as exactly the variables it could write (the last of two equal names),
/// never one more; the redacted text (`--dry-run`) names the same ones.
pub fn env_file(data: &[u8]) {
    use crate::host::podman::envfile;
    let vars = variables(data);
    let written = envfile::render(&vars);
    let mut want: Vec<(String, String)> = Vec::new();
    for (n, v) in &vars {
        if envfile::unwritable(n, v).is_none() {
            want.retain(|(m, _)| m != n);
            want.push((n.clone(), v.clone()));
        }
    }
    let read = read_env_file(&written);
    let sorted = |mut v: Vec<(String, String)>| {
        v.sort();
        v
    };
    assert_eq!(sorted(read), sorted(want), "{written:?}");
    let names =
        |text: &str| -> Vec<String> { read_env_file(text).into_iter().map(|(n, _)| n).collect() };
    assert_eq!(names(&envfile::render_redacted(&vars)), names(&written));
}

/// serve's request bodies and query strings: every body is its route's
/// value or a bad-input error; a query's pairs, written again, read back
/// the same; the log's line of a query has nothing unprintable.
pub fn http(data: &[u8]) {
    for r in crate::serve::check_bodies(data) {
        if let Err(e) = r {
            assert_eq!(e.kind, Kind::BadInput, "{e:?}");
        }
    }
    use crate::serve::{for_log, parse_query};
    let q = text(data);
    let pairs = parse_query(&q);
    let enc = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    let again: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect();
    assert_eq!(parse_query(&again.join("&")), pairs, "{q:?}");
    let line = for_log("/v1/sessions", Some(&q));
    assert!(!line.chars().any(char::is_control), "{line:?}");
}

/// The cage socket's routes, said again plainly (docs/cages.md, "The cage's
/// socket"): what a path of plain segments may be.
fn socket_allow_list(
    method: &str,
    segs: &[&str],
    rpc: Option<&str>,
) -> Option<crate::turn::cage_socket::Kind> {
    use crate::turn::cage_socket::Kind;
    match (method, segs) {
        ("GET", ["v1", "sessions"])
        | ("GET", [".well-known", "agent-card.json"])
        | ("GET", ["a2a", _, ".well-known", "agent-card.json"]) => Some(Kind::Read),
        ("POST", ["a2a"] | ["a2a", _]) => match rpc? {
            "SendMessage" | "SendStreamingMessage" => Some(Kind::Send),
            "GetTask" | "AckTask" => Some(Kind::Rpc),
            _ => None,
        },
        ("POST", ["v1", "tasks", _]) => Some(Kind::TaskUpdate),
        ("POST", ["v1", "sessions", _, "drop"]) => Some(Kind::Drop),
        _ => None,
    }
}

/// Lines of bytes: method, path, then the body (the rest).
fn request(data: &[u8]) -> (String, String, Vec<u8>) {
    let mut parts = data.splitn(3, |b| *b == b'\n');
    let method = text(parts.next().unwrap_or_default());
    let path = text(parts.next().unwrap_or_default());
    (method, path, parts.next().unwrap_or_default().to_vec())
}

/// The cage socket: what it passes is on its allow-list once its path is
/// normalised (percent-decoded, no `.`, `..` or empty segment, nothing
/// left to decode), and the path forwarded is that path; a sealed cage
/// passes only task updates; a body it forwards is one it read, written
/// again, with no two keys a case-folding reader takes as one.
pub fn cage_socket(data: &[u8]) {
    use crate::turn::cage_socket::{self as socket, Kind, strict_json};
    let (method, path, body) = request(data);
    let read = strict_json::parse(&body, 10_000);
    let rpc = read
        .as_ref()
        .ok()
        .filter(|_| socket::is_rpc_route(&method, &path))
        .and_then(socket::rpc_method);
    let Some(kind) = socket::classify(&method, &path, rpc.as_deref()) else {
        return;
    };
    let sent = socket::forwarded_path(kind, &path);
    let decoded = percent_encoding::percent_decode_str(&sent).decode_utf8_lossy();
    assert_eq!(decoded, sent, "{path:?} is forwarded with escapes");
    let segs: Vec<&str> = sent
        .strip_prefix('/')
        .expect("absolute")
        .split('/')
        .collect();
    assert!(
        segs.iter()
            .all(|s| !s.is_empty() && *s != "." && *s != ".."),
        "{path:?} is forwarded as {sent:?}"
    );
    assert_eq!(
        socket_allow_list(&method, &segs, rpc.as_deref()),
        Some(kind),
        "{method} {path:?} ({rpc:?}) passes as {kind:?}"
    );
    let agents = [socket::Agent {
        name: "here".into(),
        addr: "here".into(),
        url: "http://127.0.0.1:1".into(),
        token_file: None,
    }];
    if let Ok((k, _)) = socket::decide(true, &method, &path, rpc.as_deref(), "here", &agents) {
        assert_eq!(k, Kind::TaskUpdate);
    }
    if let Ok(v) = read
        && let Ok(bytes) = socket::forwarded(kind, v, "m", "s")
    {
        let again = strict_json::parse(&bytes, 10_000).expect("the forwarded body reads again");
        strict_json::check(&again).expect("no two keys alike");
    }
}

/// The model gateway: what passes is one of the model API's own routes,
/// the path sent upstream exactly the route's; a pi provider's prefix
/// picks that provider alone.
pub fn gateway_route(data: &[u8]) {
    use crate::turn::gateway::routes::{Route, Routes};
    let (method, path, _) = request(data);
    let route = |name: &str| Route {
        name: name.into(),
        upstream: Some("http://127.0.0.1:1".into()),
        key: None,
        headers: vec![],
        bearer: false,
    };
    let routes = Routes(vec![route("anthropic"), route("a.b"), route("a")]);
    let Some((r, sent)) = crate::turn::gateway::passes(&routes, &method, &path) else {
        return;
    };
    assert!(
        crate::turn::gateway::ROUTES.contains(&(method.as_str(), sent.as_str())),
        "{method} {path:?} passes as {sent:?}"
    );
    match r {
        None => assert_eq!(path, sent),
        Some(r) => assert_eq!(path, format!("/pi/{}{sent}", r.name)),
    }
}

/// GitHub's routes (`--github`): what passes the gateway's git route is
/// one of git's smart-HTTP routes of one repository, sent to GitHub as
/// the same path without the prefix, never with a `.` or `..` segment;
/// what passes gh's socket names GitHub's API host and nothing else.
pub fn github_route(data: &[u8]) {
    use crate::turn::gateway::github;
    let (method, target, host) = request(data);
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target.as_str(), None),
    };
    if let Some(sent) = github::git_route(&method, path, query) {
        assert_eq!(format!("/github.com{sent}"), path, "{method} {target:?}");
        let segments: Vec<&str> = sent.split('/').skip(1).collect();
        assert!(
            segments[..2]
                .iter()
                .all(|s| !s.is_empty() && *s != "." && *s != ".."),
            "{target:?}"
        );
        let tail = segments[2..].join("/");
        assert!(
            matches!(
                (method.as_str(), tail.as_str()),
                ("GET", "info/refs") | ("POST", "git-upload-pack" | "git-receive-pack")
            ),
            "{method} {target:?}"
        );
    }
    let host = text(&host);
    let mut headers = hyper::HeaderMap::new();
    if let Ok(v) = hyper::header::HeaderValue::from_str(&host) {
        headers.insert(hyper::header::HOST, v);
    }
    let uri = hyper::Uri::from_static("/user");
    if github::is_api_request(&headers, &uri) {
        let h = host.to_ascii_lowercase();
        let name = h.strip_suffix(":443").unwrap_or(&h).trim_end_matches('.');
        assert_eq!(name, github::API_HOST, "{host:?}");
    }
}

/// Bytes cut at the places the first byte and the rest pick.
fn chunks(data: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let Some((&n, rest)) = data.split_first() else {
        return (Vec::new(), Vec::new());
    };
    let mut cuts: Vec<usize> = rest
        .iter()
        .take(usize::from(n % 16))
        .map(|b| usize::from(*b) * rest.len() / 256)
        .collect();
    cuts.sort();
    let mut out = Vec::new();
    let mut from = 0;
    for c in cuts {
        out.push(rest[from..c].to_vec());
        from = c;
    }
    out.push(rest[from..].to_vec());
    (rest.to_vec(), out)
}

/// The gateway's usage reader: a streamed answer (SSE) and a plain one
/// (JSON) read whole or in any pieces give the same counts.
pub fn usage(data: &[u8]) {
    use crate::turn::gateway::usage::{JsonMeter, SseMeter};
    let (whole, pieces) = chunks(data);
    let (one, many) = fed(&whole, &pieces, SseMeter::feed);
    assert_eq!(one.usage(), many.usage());
    assert_eq!(one.started(), many.started());
    assert_eq!(one.ended(), many.ended());
    let (one, many) = fed(&whole, &pieces, JsonMeter::feed);
    assert_eq!(one.usage(), many.usage());
}

/// Two meters, one fed `whole` at once, the other its `pieces` one by one.
fn fed<M: Default>(whole: &[u8], pieces: &[Vec<u8>], feed: fn(&mut M, &[u8])) -> (M, M) {
    let mut one = M::default();
    feed(&mut one, whole);
    let mut many = M::default();
    for p in pieces {
        feed(&mut many, p);
    }
    (one, many)
}

/// pi's models.json: the cage's copy is JSON, holds no key of the
/// machine's (each provider's `apiKey` is the stand-in), points every
/// provider at the gateway under its own prefix, and the gateway routes
/// that prefix to that provider alone.
pub fn pi_models(data: &[u8]) {
    use crate::turn::gateway::routes::Picked;
    const SECRET: &str = "the-machines-secret";
    let env = |_: &str| Some(SECRET.to_string());
    let Ok(plan) = crate::cage::pi_models::plan(Some(&text(data)), "dummy", &env) else {
        return;
    };
    let base = "http://10.0.2.2:1";
    let copy = plan.copy_text(base);
    assert!(!copy.contains(SECRET), "{copy}");
    let v: serde_json::Value = serde_json::from_str(&copy).expect("the copy is JSON");
    let providers = v["providers"].as_object().expect("providers");
    for (name, p) in providers {
        if let Some(k) = p.get("apiKey") {
            assert_eq!(k, "dummy", "{name}");
        }
        let url = p["baseUrl"].as_str().expect("a baseUrl");
        assert!(
            url == base || url == format!("{base}/pi/{name}"),
            "{name}: {url}"
        );
    }
    for r in &plan.routes.0 {
        let path = format!("/pi/{}/v1/messages", r.name);
        match plan.routes.pick(&path) {
            Picked::Provider(p, rest) => {
                assert_eq!(p.name, r.name);
                assert_eq!(rest, "/v1/messages");
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}

/// An outbox made once: folders, a file, a link out of it.
fn outbox() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("shrooms-fuzz-outbox-")
            .tempdir()
            .unwrap()
            .keep();
        std::fs::create_dir_all(dir.join("box/notes/deep")).unwrap();
        std::fs::write(dir.join("box/notes/a.txt"), "a").unwrap();
        std::fs::write(dir.join("box/notes/deep/b.txt"), "b").unwrap();
        std::fs::write(dir.join("box/top.txt"), "t").unwrap();
        std::fs::write(dir.join("outside.txt"), "o").unwrap();
        std::os::unix::fs::symlink("..", dir.join("box/up")).unwrap();
        std::os::unix::fs::symlink("notes", dir.join("box/link")).unwrap();
        dir
    })
}

/// Outbox paths (`outbox pack --only`, `outbox send`'s `only`): a path
/// that packs is a folder inside the outbox, reached by plain names, never
/// through a link; any other is a bad-input error.
pub fn outbox_path(data: &[u8]) {
    let only = text(data);
    let root = outbox();
    let out = root.join("out.tar.gz");
    let r = crate::cage::pack::pack(&root.join("box"), Some(Path::new(&only)), &out, true);
    let _ = std::fs::remove_file(&out);
    match r {
        Err(e) => assert_eq!(e.kind, Kind::BadInput, "{only:?}: {e:?}"),
        Ok(_) => {
            let mut at = root.join("box");
            for c in Path::new(&only).components() {
                match c {
                    Component::Normal(n) => at.push(n),
                    Component::CurDir => {}
                    other => panic!("{only:?} packed, with {other:?}"),
                }
                let meta = std::fs::symlink_metadata(&at).unwrap();
                assert!(meta.is_dir(), "{only:?} packed through {at:?}");
            }
        }
    }
}

/// Drop names: a received file's name is one plain name of the folder,
/// visible, not hidden, and made safe once for all.
pub fn drop_name(data: &[u8]) {
    use crate::ops::files::safe_name;
    let name = text(data);
    let safe = safe_name(&name);
    let mut parts = Path::new(&safe).components();
    assert!(
        matches!(parts.next(), Some(Component::Normal(_))) && parts.next().is_none(),
        "{name:?} -> {safe:?}"
    );
    assert!(!safe.contains(['/', '\\', '\0']), "{safe:?}");
    assert!(
        !safe.starts_with('.') && !safe.starts_with(char::is_whitespace),
        "{safe:?}"
    );
    assert!(!safe.chars().any(char::is_control), "{safe:?}");
    assert!(safe.len() <= 200, "{safe:?}");
    assert_eq!(safe_name(&safe), safe);
}

/// Session names: one the tool takes is one plain file name in the state
/// folder and a name in a container's name.
pub fn session_name(data: &[u8]) {
    let name = text(data);
    if crate::state::session::validate_name(&name).is_err() {
        return;
    }
    let store = crate::state::session::Store::new("/state");
    let record = store.record_path(&name);
    assert_eq!(
        record.parent(),
        Some(Path::new("/state/sessions")),
        "{name:?}"
    );
    assert!(!name.starts_with(['-', '.']));
    assert!(crate::state::session::is_container_name_of(
        &format!("shrooms-{name}-0a1b2c"),
        &name
    ));
}

/// The machine's routes (`netif`): a piece of a routing-table dump, as
/// the kernel would send it, reads as routes or fails, never panics; every
/// prefix the `machine` rule makes of them is a network and its length
/// that nft reads back as written (no host bits, a length its family has).
pub fn route_dump(data: &[u8]) {
    let mut routes = Vec::new();
    let _ = crate::net::netif::parse_route_dump(data, &mut routes);
    let (v4, v6) = crate::net::netif::route_prefixes(&routes);
    for (list, max) in [(&v4, 32u32), (&v6, 128)] {
        for p in list {
            let (net, len) = p.split_once('/').unwrap_or_else(|| panic!("{p}"));
            let net: std::net::IpAddr = net.parse().unwrap_or_else(|e| panic!("{p}: {e}"));
            let len: u32 = len.parse().unwrap_or_else(|e| panic!("{p}: {e}"));
            assert!(len <= max && net.is_ipv4() == (max == 32), "{p}");
            let bits = match net {
                std::net::IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
                std::net::IpAddr::V6(a) => u128::from(a),
            };
            assert_eq!(bits.checked_shl(len).unwrap_or(0), 0, "{p} has host bits");
        }
    }
}

/// `--on`'s key lender: the other machine's bytes, read a bounded line at
/// a time (never more than a line's bound is held), each line a request or
/// nothing; and the lender's answer as the gateway there reads it: a key
/// or token is one non-empty word of one line, or an error.
pub fn key_lender(data: &[u8]) {
    let max = crate::face::remote::MAX_LINE;
    let mut r = std::io::BufReader::new(data);
    let mut lines = 0;
    while let Ok(Some(line)) = crate::host::bounded::read_line(&mut r, max) {
        assert!(line.len() <= max && !line.contains(&b'\n'), "{line:?}");
        if let crate::face::remote::Asked::Exit(_) = crate::face::remote::asked(&text(&line)) {
            assert!(line.starts_with(b"exit "));
        }
        lines += 1;
    }
    assert!(lines <= data.len() + 1);
    let line = text(data);
    let line = line.lines().next().unwrap_or("");
    if let Ok(
        crate::turn::gateway::Credential::ApiKey(k) | crate::turn::gateway::Credential::OAuth(k),
    ) = crate::turn::gateway::credentials::parse_lent(line)
    {
        assert!(!k.is_empty() && !k.contains('\n'), "{line:?}");
    }
}

/// A value's URLs without their user information: what is left has none
/// (taking it out again changes nothing), is no longer, and a value with
/// no `@` is left as it is.
pub fn userinfo(data: &[u8]) {
    use crate::cage::secret_names::{has_userinfo, without_userinfo};
    let value = text(data);
    let out = without_userinfo(&value);
    assert!(!has_userinfo(&out), "{value:?} -> {out:?}");
    assert_eq!(without_userinfo(&out), out, "{value:?}");
    assert!(out.len() <= value.len());
    if !value.contains('@') {
        assert_eq!(out, value);
    }
    assert_eq!(has_userinfo(&value), out != value, "{value:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fuzz target's name (fuzz/fuzz_targets/NAME.rs) and its property.
    type Target = (&'static str, fn(&[u8]));

    const TARGETS: &[Target] = &[
        ("config", config),
        ("env_file", env_file),
        ("http", http),
        ("cage_socket", cage_socket),
        ("gateway_route", gateway_route),
        ("github_route", github_route),
        ("usage", usage),
        ("pi_models", pi_models),
        ("outbox_path", outbox_path),
        ("drop_name", drop_name),
        ("session_name", session_name),
        ("route_dump", route_dump),
        ("key_lender", key_lender),
        ("userinfo", userinfo),
    ];

    /// Each target's seeds, run through its property; every target of
    /// fuzz/ is listed here, and has seeds.
    #[test]
    fn the_seeds_hold() {
        let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        let mut files: Vec<String> = std::fs::read_dir(fuzz.join("fuzz_targets"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let mut listed: Vec<String> = TARGETS.iter().map(|(n, _)| format!("{n}.rs")).collect();
        listed.sort();
        assert_eq!(files, listed, "fuzz/fuzz_targets and TARGETS differ");
        for (name, check) in TARGETS {
            let dir = fuzz.join("seeds").join(name);
            let mut n = 0;
            for f in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
                let f = f.unwrap().path();
                let data = std::fs::read(&f).unwrap();
                let r = std::panic::catch_unwind(|| check(&data));
                assert!(r.is_ok(), "{name}: {} fails", f.display());
                n += 1;
            }
            assert!(n > 0, "{name}: no seeds in {}", dir.display());
        }
        // The outbox the seeds were packed from (made once per process,
        // used by this test alone here) is not left in the temporary folder.
        let _ = std::fs::remove_dir_all(super::outbox());
    }
}
