//! serve's status page (`GET /`): what it shows of real cages, opened in a
//! real headless Chromium (Debian's, which scripts/setup-host installs);
//! values from records and histories escaped; the API's access rules.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// What a `--by` can carry into a history line: markup, which the page
/// must show as text.
const SCRIPT: &str = "<script>document.title='PWNED'</script>";
const IMG: &str = "\"><img src=x onerror=alert(1)>";

/// Chromium, headless, as root (so `--no-sandbox`), with a fresh profile
/// and nothing of its own on the network; stdout to `out`. Ended after
/// 60 s whatever it is doing.
fn chromium(root: &Path, tag: &str, args: &[&str], url: &str, out: &Path) -> (bool, String) {
    let profile = root.join(format!("chromium-{tag}"));
    let home = root.join(format!("chromium-home-{tag}"));
    fs::create_dir_all(&profile).unwrap();
    fs::create_dir_all(&home).unwrap();
    let err = root.join(format!("chromium-{tag}.stderr"));
    let mut c = Command::new("chromium");
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .arg(url)
    .env("HOME", &home)
    .stdin(Stdio::null())
    .stdout(fs::File::create(out).unwrap())
    .stderr(fs::File::create(&err).unwrap());
    let mut child = c
        .spawn()
        .expect("chromium: scripts/setup-host installs Debian's chromium");
    let end = Instant::now() + Duration::from_secs(60);
    let ok = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.success();
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (ok, fs::read_to_string(&err).unwrap_or_default())
}

/// Where CI leaves the screenshot: target/ci-artifacts/status-page.png.
fn artifact() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ci-artifacts");
    fs::create_dir_all(&dir).unwrap();
    dir.join("status-page.png")
}

/// The PNG's size and how many different colours it has.
fn png_facts(path: &Path) -> (u32, u32, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buf).expect("a PNG's pixels");
    let bytes = &buf[..info.buffer_size()];
    let step = info.color_type.samples() * usize::from(info.bit_depth as u8).div_ceil(8);
    let mut colours = std::collections::HashSet::new();
    for px in bytes.chunks(step) {
        colours.insert(px.to_vec());
        if colours.len() > 64 {
            break;
        }
    }
    (info.width, info.height, colours.len())
}

/// The page in a real browser: serve on loopback with three real
/// sessions (one whose turn is running, so busy; one with history lines
/// whose `--by` holds markup; one out of its cage), Chromium takes a
/// screenshot (a PNG of the window's size that is not one flat colour,
/// left in target/ci-artifacts) and dumps the DOM it rendered: the
/// sessions, their states, what holds the busy one, the image and the
/// history lines are there, and the markup in the history is text, not
/// an element. The Host Chromium sends to 127.0.0.1 passes serve's checks
/// (the page is 200, not 403).
#[test]
fn the_status_page_in_a_real_browser() {
    let w = World::new();
    let busy = w.session("pgbusy");
    let hist = w.session("pghist");
    let out = w.session("pgout");
    for n in [&busy, &hist, &out] {
        let d = w.dir(n);
        w.create(n, &d, &[]);
    }
    w.run(&["cage", "limits", &hist, "--memory", "300m", "--by", SCRIPT])
        .ok();
    w.run(&["cage", "limits", &hist, "--tokens", "5000", "--by", IMG])
        .ok();
    w.run(&["cage", "move", &out, "--out"]).ok();
    let turn = w.hold(&busy, &w.dir(&busy));
    let s = w.serve(&[], &[]);
    let url = format!("{}/", s.url);
    wait_until(
        "the page shows the busy cage running",
        Duration::from_secs(20),
        || get(&url).body.contains(">running</span>"),
    );

    // What a program gets: HTML, the headers that keep a browser from
    // running anything, and the markup of the history escaped.
    let r = get(&url).is(200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let csp = r.header("content-security-policy").unwrap_or("");
    assert!(
        csp.starts_with("default-src 'none'; style-src 'unsafe-inline'"),
        "{csp}"
    );
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert!(!r.body.contains("<script"), "{}", r.body);
    assert!(!r.body.contains("<img"), "{}", r.body);
    assert!(
        r.body
            .contains("&lt;script&gt;document.title='PWNED'&lt;/script&gt;"),
        "{}",
        r.body
    );
    assert!(
        r.body
            .contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"),
        "{}",
        r.body
    );

    // Root's serve wants its token, which a browser cannot send from its
    // address bar: the browser goes through a proxy that adds it.
    let browsed = format!("http://127.0.0.1:{}/", owner_proxy(s.port));
    let shot = w.root.join("status-page.png");
    let (ok, err) = chromium(
        &w.root,
        "shot",
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,900",
        ],
        &browsed,
        &w.root.join("chromium-shot.stdout"),
    );
    assert!(ok && shot.is_file(), "chromium --screenshot failed:\n{err}");
    let kept = artifact();
    fs::copy(&shot, &kept).unwrap();
    println!("the status page's screenshot: {}", kept.display());
    let (width, height, colours) = png_facts(&shot);
    assert_eq!((width, height), (1280, 900));
    assert!(
        colours > 8,
        "the screenshot has {colours} colours: a blank page?"
    );

    let dump = w.root.join("status-page.dom.html");
    let (ok, err) = chromium(&w.root, "dom", &["--dump-dom"], &browsed, &dump);
    let dom = fs::read_to_string(&dump).unwrap_or_default();
    assert!(ok, "chromium --dump-dom failed:\n{err}");
    // The document's title is ours: no script ran to change it.
    assert!(dom.contains("<title>shrooms-agent on "), "{dom}");
    assert!(!dom.contains("PWNED</title>"), "{dom}");
    // The markup in the history is text in the DOM, not elements.
    assert!(!dom.contains("<script"), "{dom}");
    assert!(!dom.contains("<img"), "{dom}");
    assert!(
        dom.contains("&lt;script&gt;document.title='PWNED'&lt;/script&gt;"),
        "{dom}"
    );
    assert!(
        dom.contains("\"&gt;&lt;img src=x onerror=alert(1)&gt;"),
        "{dom}"
    );
    let text = strip_tags(&dom);
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row for {name} in\n{text}"))
            .to_string()
    };
    let b = row(&busy);
    assert!(
        b.contains("| caged | no | internet | running | exec, "),
        "{b}"
    );
    assert!(b.contains("memory "), "{b}");
    let h = row(&hist);
    assert!(h.contains("| caged | no | internet | created | - |"), "{h}");
    assert!(h.contains("memory 300m,"), "{h}");
    assert!(h.contains("| 5000 |"), "{h}");
    let o = row(&out);
    assert!(o.contains("| out | no | - | - |"), "{o}");
    assert!(text.contains(IMAGE), "{text}");
    assert!(text.contains("Sessions (3)"), "{text}");
    for (who, what) in [(SCRIPT, "limits: memory"), (IMG, "limits: tokens")] {
        assert!(
            text.lines()
                .any(|l| l.contains(&format!("| {hist} | {who} | {what}"))),
            "no history line by {who} in\n{text}"
        );
    }
    assert!(
        text.lines()
            .any(|l| l.contains(&format!("| {out} |")) && l.contains("taken out of its cage")),
        "{text}"
    );
    // The request Chromium made passed serve's checks.
    assert!(
        s.log_text().lines().any(|l| l.contains(" GET / 200 ")),
        "{}",
        s.log_text()
    );
    drop(s);
    let _ = turn.release();
}

/// The DOM's text, a table row a line with its cells joined by ` | `,
/// entities as they are (the markup the page escaped stays escaped).
fn strip_tags(dom: &str) -> String {
    let marked = dom
        .replace("</td><td", " | </td><td")
        .replace("</th><th", " | </th><th")
        .replace("<tr", "\n<tr")
        .replace("<h2", "\n<h2")
        .replace("</tr>", "\n");
    let mut out = String::new();
    let mut in_tag = false;
    let mut in_style = false;
    let mut rest = marked.as_str();
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("<style") {
            in_style = true;
        }
        if in_style && rest.starts_with("</style>") {
            in_style = false;
        }
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            _ if !in_tag && !in_style => out.push(c),
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// `GET /` goes through the checks every route does: without a token,
/// another user's program is refused 403, and so is a request from a web
/// page (Origin, Sec-Fetch-Site: cross-site, a Host that is a name); with
/// a token, no token or a wrong one is 401, and the token is served.
#[test]
fn the_status_page_has_the_apis_access_rules() {
    // Without a token: an ordinary user's serve (root's answers TCP only
    // with its token); root is the other user here.
    let mine = World::rootless();
    let s = mine.serve(&[], &[]);
    let url = format!("{}/", s.url);
    let owner = Some(test_user());
    assert_eq!(curl_status(owner, &[&url]), "200");
    assert_eq!(curl_status(None, &[&url]), "403");
    let r = http("GET", &url, None, &[("Origin", "http://attacker.example")]).is(403);
    assert!(r.error().contains("web pages"), "{r:#?}");
    assert!(!r.body.contains("<html"), "{r:#?}");
    assert_eq!(
        curl_status(owner, &["-H", "Origin: http://attacker.example", &url]),
        "403"
    );
    assert_eq!(
        curl_status(owner, &["-H", "Sec-Fetch-Site: cross-site", &url]),
        "403"
    );
    let rebind = format!("Host: rebind.attacker.example:{}", s.port);
    assert_eq!(curl_status(owner, &["-H", &rebind, &url]), "403");
    // What a browser sends when the address is typed in: served.
    assert_eq!(
        curl_status(owner, &["-H", "Sec-Fetch-Site: none", &url]),
        "200"
    );
    let log = s.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains(" GET / 403 ") && l.contains("(from uid 0, not serve's own user)")),
        "{log}"
    );
    drop(s);

    let w = World::new();
    let other = test_user();
    let token = "page-s3cret";
    let file = w.file("serve-token", &format!("{token}\n"));
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    let s = w.serve(&["--token-file", &file.to_string_lossy()], &[]);
    let url = format!("{}/", s.url);
    let r = get(&url).is(401);
    assert!(!r.body.contains("<html"), "{r:#?}");
    http("GET", &url, None, &[("Authorization", "Bearer wrong")]).is(401);
    let bearer = format!("Bearer {token}");
    let r = http("GET", &url, None, &[("Authorization", &bearer)]).is(200);
    assert!(r.body.contains("<title>shrooms-agent on "), "{r:#?}");
    // The token decides, whoever the user.
    let header = format!("Authorization: {bearer}");
    assert_eq!(curl_status(Some(other), &["-H", &header, &url]), "200");
    assert_eq!(curl_status(Some(other), &[&url]), "401");
}
