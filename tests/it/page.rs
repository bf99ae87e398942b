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

/// A request with curl as `user` (None: root, with its serve's token when
/// the harness gave it one): the status, the headers and the body.
pub fn curl(user: Option<&TestUser>, port: u16, args: &[&str]) -> Reply {
    let mut all = vec!["-s", "-i", "--max-time", "20"];
    let auth;
    if user.is_none()
        && let Some(t) = owner_token(port)
    {
        auth = format!("Authorization: Bearer {t}");
        all.extend_from_slice(&["-H", &auth]);
    }
    all.extend_from_slice(args);
    let out = as_user(user, "curl", &all, &[]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no answer from curl {args:?}: {}", show_output(&out)));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        what: format!("curl {args:?}"),
        status,
        headers,
        body: body.to_string(),
    }
}

/// The status page's form for `name`, as served: its path and the
/// page's secret in it.
pub fn page_form(page: &str, name: &str) -> (String, String) {
    let action = format!("action=\"/limits/{name}\"");
    let at = page
        .find(&action)
        .unwrap_or_else(|| panic!("no form for {name} in\n{page}"));
    let form = &page[at..at + page[at..].find("</form>").unwrap()];
    let secret = form
        .split("name=\"secret\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("no secret in {form}"));
    (format!("/limits/{name}"), secret.to_string())
}

/// Post the page's form as a browser does from the page: the form's
/// type, its own origin, same-origin; a header of `extra` instead of the
/// one of that name (curl sends both of a header given twice; `Name:`
/// with no value sends none).
pub fn post_form(
    user: Option<&TestUser>,
    s: &Serve,
    path: &str,
    body: &str,
    extra: &[&str],
) -> Reply {
    let origin = format!("Origin: {}", s.url);
    let url = format!("{}{path}", s.url);
    let name = |h: &str| h.split(':').next().unwrap_or("").to_ascii_lowercase();
    let mut headers: Vec<&str> = vec![
        "Content-Type: application/x-www-form-urlencoded",
        &origin,
        "Sec-Fetch-Site: same-origin",
    ];
    headers.retain(|h| !extra.iter().any(|e| name(e) == name(h)));
    headers.extend_from_slice(extra);
    let mut args = Vec::new();
    for h in &headers {
        args.extend_from_slice(&["-H", h]);
    }
    args.extend_from_slice(&["--data-raw", body, &url]);
    curl(user, s.port, &args)
}

/// The status page's form sets a caged session's token budget, as `cage
/// limits --tokens` does: the page holds one form per caged session, with
/// the page's secret; posted from the page (its origin, same-origin),
/// it answers 303 to the page, the record's budget and the history say
/// the change, and the page shows it. What a forger could send is refused
/// and changes nothing: no secret or a wrong one, another site's Origin,
/// Sec-Fetch-Site cross-site or same-site, a rebinding Host (without a
/// token), another user's program (without a token), a body of another
/// type; bad tokens are 400 in `cage limits`' words.
fn the_pages_form_sets_a_budget(w: World) {
    let me = w.user.is_some().then(test_user);
    let name = w.session("pgform");
    let out = w.session("pgformout");
    w.create(&name, &w.dir(&name), &[]);
    w.create(&out, &w.dir(&out), &[]);
    w.run(&["cage", "move", &out, "--out"]).ok();
    w.run(&["cage", "limits", &name, "--tokens", "5000"]).ok();
    let s = w.serve(&[], &[]);
    let page = curl(me, s.port, &[&format!("{}/", s.url)]).is(200);
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("form-action 'self'"), "{csp}");
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert_eq!(page.header("referrer-policy"), Some("same-origin"));
    assert!(!page.body.contains("<script"), "{}", page.body);
    // One form, the caged session's; none for the one out of its cage.
    assert_eq!(page.body.matches("<form").count(), 1, "{}", page.body);
    assert!(!page.body.contains(&format!("/limits/{out}\"")));
    let (path, secret) = page_form(&page.body, &name);
    assert_eq!(secret.len(), 64, "{secret}");
    let budget = || w.record(&name)["tokens"]["budget"].clone();
    let history = || w.run(&["cage", "history", &name]).ok().stdout();
    let before = history();

    let good = |tokens: &str| format!("secret={secret}&tokens={tokens}");
    let wrong = format!("secret={}&tokens=2M", "0".repeat(64));
    let evil = "Origin: http://attacker.example";
    let own = format!("Origin: {}", s.url);
    let port = s.port;
    let rebind_host = format!("Host: rebind.attacker.example:{port}");
    let rebind_origin = format!("Origin: http://rebind.attacker.example:{port}");
    let mut forged: Vec<(&str, String, Vec<&str>, u16)> = vec![
        ("no secret", "tokens=2M".into(), vec![], 403),
        ("a wrong secret", wrong, vec![], 403),
        ("another site's page", good("2M"), vec![evil], 403),
        ("a null origin", good("2M"), vec!["Origin: null"], 403),
        ("a second origin", good("2M"), vec![&own, evil], 403),
        (
            "cross-site",
            good("2M"),
            vec!["Sec-Fetch-Site: cross-site"],
            403,
        ),
        (
            "same-site",
            good("2M"),
            vec!["Sec-Fetch-Site: same-site"],
            403,
        ),
        ("bad tokens", good("lots"), vec![], 400),
        ("zero tokens", good("0"), vec![], 400),
        ("another field", good("2M&memory=1g"), vec![], 400),
        (
            "JSON",
            good("2M"),
            vec!["Content-Type: application/json"],
            415,
        ),
    ];
    if me.is_some() {
        forged.push((
            "a rebinding name",
            good("2M"),
            vec![&rebind_host, &rebind_origin],
            403,
        ));
    }
    for (what, body, extra, status) in &forged {
        let r = post_form(me, &s, &path, body, extra);
        assert_eq!(r.status, *status, "{what}: {r:#?}");
        assert_eq!(budget(), 5000, "{what}: changed the budget");
    }
    let r = post_form(me, &s, &path, &good("lots"), &[]).is(400);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(
        r.body
            .contains("&quot;lots&quot; is not a number of tokens"),
        "{}",
        r.body
    );
    assert!(r.body.contains("Nothing was changed."), "{}", r.body);
    let r = post_form(me, &s, &path, "tokens=2M", &[]).is(403);
    assert!(r.body.contains("status page's secret"), "{}", r.body);
    if me.is_some() {
        // Another user's program, with the secret: refused before the route.
        let r = post_form(None, &s, &path, &good("2M"), &[]).is(403);
        assert!(
            r.body.contains("answers only its own user's programs"),
            "{r:#?}"
        );
    }
    assert_eq!(budget(), 5000);
    assert_eq!(history(), before);

    // From the page: 303 to it; the budget set, in the history and on the page.
    let r = post_form(me, &s, &path, &good("2M"), &[]).is(303);
    assert_eq!(r.header("location"), Some("/"));
    assert_eq!(budget(), 2_000_000);
    assert!(
        history().contains("limits: tokens 5000 -> 2000000"),
        "{}",
        history()
    );
    // The page the browser loads after the 303 (which may name its origin).
    let page = curl(
        me,
        s.port,
        &[
            "-H",
            &own,
            "-H",
            "Sec-Fetch-Site: same-origin",
            &format!("{}/", s.url),
        ],
    )
    .is(200);
    assert!(
        page.body.contains("<td class=\"num\">2000000</td>"),
        "{}",
        page.body
    );
    // Removed with none; a program that sends neither header, with the
    // secret, is taken too (the secret decides).
    let url = format!("{}{path}", s.url);
    curl(me, s.port, &["--data-raw", &good("none"), &url]).is(303);
    assert_eq!(budget(), serde_json::Value::Null);
    assert!(
        history().contains("limits: tokens 2000000 -> none"),
        "{}",
        history()
    );
    // Another serve draws another secret: this one's forms are not its.
    drop(s);
    let s = w.serve(&[], &[]);
    post_form(me, &s, &path, &good("1M"), &[]).is(403);
    assert_eq!(budget(), serde_json::Value::Null);
}

#[test]
fn the_status_pages_form_sets_a_budget() {
    the_pages_form_sets_a_budget(World::new());
}

#[test]
fn the_status_pages_form_sets_a_budget_rootless() {
    the_pages_form_sets_a_budget(World::rootless());
}

/// Serve `html` to every request on a loopback port of its own: another
/// site, for the browser. Its port.
fn another_site(html: String) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match c.read(&mut b) {
                    Ok(1) => head.push(b[0]),
                    _ => break,
                }
            }
            let _ = c.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{html}",
                    html.len()
                )
                .as_bytes(),
            );
        }
    });
    port
}

/// Cross-site request forgery in a real browser: another site's page
/// (another port of 127.0.0.1, so another origin of the same site) that
/// even knows the page's secret makes headless Chromium post the form to
/// serve, through a proxy that adds the token as a browser adds a cookie.
/// serve refuses it (the browser names the other origin), and the budget
/// stays; the same post with serve's own origin would have passed.
#[test]
fn a_forged_form_in_a_real_browser_is_refused() {
    let w = World::new();
    let name = w.session("pgforge");
    w.create(&name, &w.dir(&name), &[]);
    w.run(&["cage", "limits", &name, "--tokens", "5000"]).ok();
    let s = w.serve(&[], &[]);
    let proxy = owner_proxy(s.port);
    let page = get(&format!("{}/", s.url)).is(200);
    let (path, secret) = page_form(&page.body, &name);
    let attack = format!(
        "<!doctype html><html><body><form id=\"f\" method=\"post\" \
         action=\"http://127.0.0.1:{proxy}{path}\"><input name=\"secret\" value=\"{secret}\">\
         <input name=\"tokens\" value=\"9M\"></form>\
         <script>document.getElementById('f').submit()</script></body></html>"
    );
    let site = another_site(attack);
    let (ok, err) = chromium(
        &w.root,
        "forge",
        &["--dump-dom", "--virtual-time-budget=10000"],
        &format!("http://127.0.0.1:{site}/"),
        &w.root.join("chromium-forge.stdout"),
    );
    assert!(ok, "chromium failed:\n{err}");
    let posted = format!(" POST {path} ");
    wait_until(
        "the browser's post reached serve",
        Duration::from_secs(20),
        || s.log_text().lines().any(|l| l.contains(&posted)),
    );
    let log = s.log_text();
    assert!(
        log.lines().any(|l| l.contains(&format!("{posted}403 "))),
        "{log}"
    );
    assert_eq!(w.record(&name)["tokens"]["budget"], 5000);
    let dom = std::fs::read_to_string(w.root.join("chromium-forge.stdout")).unwrap_or_default();
    println!("what the browser showed after the forged post:\n{dom}");
    // The same secret from the page's own origin is taken: the refusal
    // was the browser's word on where the post came from.
    let own = format!("Origin: {}", s.url);
    post_form(
        None,
        &s,
        &path,
        &format!("secret={secret}&tokens=9M"),
        &[&own],
    )
    .is(303);
    assert_eq!(w.record(&name)["tokens"]["budget"], 9_000_000);
}

/// The least of a WebSocket client (RFC 6455) that Chromium's DevTools
/// protocol needs: text frames, masked with a zero key (the RFC lets the
/// key be any), unfragmented.
struct DevTools {
    stream: std::net::TcpStream,
    id: u64,
}

impl DevTools {
    fn connect(url: &str) -> DevTools {
        use std::io::{Read, Write};
        let rest = url.strip_prefix("ws://").expect("a ws:// URL");
        let (host, path) = rest.split_once('/').unwrap();
        let mut stream = std::net::TcpStream::connect(host).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut b).unwrap();
            head.push(b[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        DevTools { stream, id: 0 }
    }

    fn send(&mut self, text: &str) {
        use std::io::Write;
        let b = text.as_bytes();
        let mut f = vec![0x81u8];
        match b.len() {
            n if n < 126 => f.push(0x80 | n as u8),
            n if n < 65536 => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&[0, 0, 0, 0]);
        f.extend_from_slice(b);
        self.stream.write_all(&f).unwrap();
    }

    fn receive(&mut self) -> String {
        use std::io::Read;
        loop {
            let mut h = [0u8; 2];
            self.stream.read_exact(&mut h).unwrap();
            let len = match h[1] & 0x7f {
                126 => {
                    let mut l = [0u8; 2];
                    self.stream.read_exact(&mut l).unwrap();
                    u16::from_be_bytes(l) as usize
                }
                127 => {
                    let mut l = [0u8; 8];
                    self.stream.read_exact(&mut l).unwrap();
                    u64::from_be_bytes(l) as usize
                }
                n => n as usize,
            };
            let mut payload = vec![0u8; len];
            self.stream.read_exact(&mut payload).unwrap();
            if h[0] & 0x0f == 1 {
                return String::from_utf8_lossy(&payload).into_owned();
            }
        }
    }

    /// A command, and its answer (events meanwhile are skipped).
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.id += 1;
        let id = self.id;
        self.send(&serde_json::json!({"id": id, "method": method, "params": params}).to_string());
        loop {
            let v: serde_json::Value = serde_json::from_str(&self.receive()).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    /// The value of `expression` in the page (DevTools' evaluation is the
    /// inspector's, which the page's CSP does not govern).
    fn eval(&mut self, expression: &str) -> serde_json::Value {
        let v = self.call(
            "Runtime.evaluate",
            serde_json::json!({"expression": expression, "returnByValue": true}),
        );
        v["result"]["result"]["value"].clone()
    }
}

/// The page's form in a real browser: headless Chromium opens the page
/// (through a proxy that adds root's serve's token), a person's typing and
/// click are played through its DevTools protocol (the page itself runs
/// no script), and Chromium posts the form as browsers do, naming the
/// page's origin (its Referrer-Policy keeps that from being `null`) and
/// `Sec-Fetch-Site: same-origin`, within the page's CSP (`form-action
/// 'self'`): serve takes it (303), the browser loads the page again (200)
/// and it shows the new budget, which the record has.
#[test]
fn the_pages_form_in_a_real_browser_sets_a_budget() {
    let w = World::new();
    let name = w.session("pgbrowse");
    w.create(&name, &w.dir(&name), &[]);
    w.run(&["cage", "limits", &name, "--tokens", "5000"]).ok();
    let s = w.serve(&[], &[]);
    let proxy = owner_proxy(s.port);
    let profile = w.root.join("chromium-devtools");
    let home = w.root.join("chromium-devtools-home");
    fs::create_dir_all(&profile).unwrap();
    fs::create_dir_all(&home).unwrap();
    let child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("http://127.0.0.1:{proxy}/"))
        .env("HOME", &home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(w.root.join("chromium-devtools.stderr")).unwrap())
        .spawn()
        .expect("chromium");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Kill(child);
    let active = profile.join("DevToolsActivePort");
    wait_until("chromium's DevTools port", Duration::from_secs(30), || {
        fs::read_to_string(&active).is_ok_and(|t| t.lines().count() >= 2)
    });
    let port = fs::read_to_string(&active).unwrap();
    let port = port.lines().next().unwrap();
    let mut target = None;
    wait_until("the page's target", Duration::from_secs(30), || {
        let list = http(
            "GET",
            &format!("http://127.0.0.1:{port}/json/list"),
            None,
            &[],
        );
        target = list.json().as_array().and_then(|a| {
            a.iter()
                .find(|t| {
                    t["type"] == "page"
                        && t["url"].as_str().unwrap_or("").contains(&proxy.to_string())
                })
                .map(|t| t["webSocketDebuggerUrl"].as_str().unwrap().to_string())
        });
        target.is_some()
    });
    let mut tab = DevTools::connect(&target.unwrap());
    wait_until("the page loaded", Duration::from_secs(30), || {
        tab.eval("document.readyState") == "complete" && tab.eval("document.forms.length") == 1
    });
    // Typed into the field, then the button pressed.
    tab.eval(&format!(
        "document.querySelector('form[action=\"/limits/{name}\"] input[name=tokens]').focus()"
    ));
    tab.call("Input.insertText", serde_json::json!({"text": "3M"}));
    tab.eval(&format!(
        "document.querySelector('form[action=\"/limits/{name}\"] button').click()"
    ));
    wait_until("the budget set", Duration::from_secs(30), || {
        w.record(&name)["tokens"]["budget"] == 3_000_000
    });
    wait_until("the page loaded again", Duration::from_secs(30), || {
        tab.eval("document.readyState") == "complete"
            && tab.eval("document.body.innerText.includes('3000000')") == true
    });
    assert_eq!(tab.eval("location.pathname"), "/");
    let log = s.log_text();
    let post = log
        .lines()
        .position(|l| l.contains(&format!(" POST /limits/{name} 303 ")))
        .unwrap_or_else(|| panic!("no post taken in\n{log}"));
    assert!(
        log.lines()
            .skip(post + 1)
            .any(|l| l.contains(" GET / 200 ")),
        "{log}"
    );
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    assert!(
        history.contains("limits: tokens 5000 -> 3000000"),
        "{history}"
    );
    drop(child);
}
