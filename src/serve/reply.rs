//! What a route answers, and the small pieces of HTTP that are ours: a
//! JSON answer ended by a newline, `{"error": "..."}` for every refusal,
//! the log's view of a path, the constant-time token comparison, and an
//! upload's pace. Reading and writing HTTP itself is hyper's.

use std::time::{Duration, Instant};

use axum::http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use utoipa::ToSchema;

/// An upload's time before its pace counts.
pub const UPLOAD_GRACE: Duration = Duration::from_secs(30);
/// The slowest an upload may arrive, on average, once its grace is over:
/// 256 KiB a second.
pub const UPLOAD_RATE: u64 = 256 * 1024;

/// A response, whole (bodies here are small: JSON, or the OpenAPI document).
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// Every error's body: the words the CLI prints.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody<'a> {
    /// What was wrong, and how to fix it.
    pub error: &'a str,
}

impl Response {
    pub fn json(status: u16, value: &impl Serialize) -> Response {
        match serde_json::to_vec(value) {
            Ok(body) => Response::json_line(status, body),
            Err(e) => Response::error(500, &format!("writing the answer: {e}")),
        }
    }

    /// `{"error": "..."}`.
    pub fn error(status: u16, message: &str) -> Response {
        let body = serde_json::to_vec(&ErrorBody { error: message }).unwrap_or_default();
        Response::json_line(status, body)
    }

    /// A JSON body, ended by a newline.
    fn json_line(status: u16, mut body: Vec<u8>) -> Response {
        body.push(b'\n');
        Response {
            status,
            headers: Vec::new(),
            body,
        }
    }

    /// An operation's error: its kind's status, its message worded for an
    /// HTTP client (what to do next: "send again", not "run it again"), but
    /// for the options it names, which become the JSON fields an HTTP
    /// client sends ([`for_http`]).
    pub fn from_error(e: &crate::error::Error) -> Response {
        let mut r = Response::error(
            e.http_status(),
            &for_http(&e.words(crate::error::Face::Http)),
        );
        if let Some(secs) = e.retry_after() {
            r.headers.push(("retry-after", secs.to_string()));
        }
        r
    }

    pub fn no_content() -> Response {
        Response {
            status: 204,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn with_header(mut self, k: &'static str, v: &str) -> Response {
        self.headers.push((k, v.into()));
        self
    }

    /// The whole answer as bytes, for a connection hyper no longer holds
    /// (408 for a head that did not arrive, 503 before one is read).
    pub fn raw(&self) -> Vec<u8> {
        let reason = StatusCode::from_u16(self.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        let mut head = format!(
            "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            self.status,
            self.body.len()
        );
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("connection: close\r\n\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
}

impl axum::response::IntoResponse for Response {
    fn into_response(self) -> axum::response::Response {
        let mut r = if self.status == 204 {
            axum::response::Response::new(axum::body::Body::empty())
        } else {
            let mut r = axum::response::Response::new(axum::body::Body::from(self.body));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        };
        *r.status_mut() = StatusCode::from_u16(self.status).unwrap_or(StatusCode::OK);
        for (k, v) in self.headers {
            if let Ok(v) = HeaderValue::from_str(&v) {
                r.headers_mut().append(k, v);
            }
        }
        r
    }
}

/// `a=1&b=x%20y` -> [("a", "1"), ("b", "x y")]; `+` is a space.
pub fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent-decoding, with `+` as a space; bytes that are not UTF-8 become U+FFFD.
pub fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8_lossy()
        .into_owned()
}

/// The path and the query's names, never its values, with anything
/// unprintable shown as `?`: what the log line shows.
/// An operation's message for an HTTP client, who passes fields, not
/// command-line options: `--tokens: 0 would ...` becomes `field "tokens":
/// 0 would ...`. Text in backticks is a command for a terminal, and is
/// kept as it is.
pub fn for_http(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut quoted = false;
    let mut rest = message;
    while let Some(c) = rest.chars().next() {
        if c == '`' {
            quoted = !quoted;
        }
        let at_word = out.is_empty() || out.ends_with([' ', '(', '"', '\'']);
        if !quoted && at_word && rest.starts_with("--") {
            let name: String = rest[2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                out.push_str(&format!("field {:?}", field_of(&name)));
                rest = &rest[2 + name.len()..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The JSON field that stands for a command-line option.
fn field_of(option: &str) -> String {
    match option {
        "mesh" => "meshes".to_string(),
        o => o.replace('-', "_"),
    }
}

pub fn for_log(path: &str, query: Option<&str>) -> String {
    let mut s: String = path.chars().take(200).map(printable).collect();
    let names: Vec<String> = parse_query(query.unwrap_or(""))
        .iter()
        .map(|(n, _)| n.chars().take(40).map(printable).collect())
        .collect();
    if !names.is_empty() {
        s.push('?');
        s.push_str(&names.join("&"));
    }
    s
}

fn printable(c: char) -> char {
    if c.is_ascii_graphic() { c } else { '?' }
}

/// Compare a secret in time that does not depend on where it differs.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() != b.len()) as u8;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    diff == 0
}

/// The pace an upload is held to: by any moment after `grace` from
/// `since`, at least [`UPLOAD_RATE`] bytes for each second past the grace
/// must have arrived. A total time for the whole length alone would let a
/// sender that announces 100 MiB trickle a byte every few seconds and
/// hold its place for the seven minutes that length allows.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub since: Instant,
    pub grace: Duration,
}

impl Pace {
    /// When `received` bytes stop being enough: more must have arrived by then.
    pub fn due(&self, received: u64) -> Instant {
        let nanos = u128::from(received) * 1_000_000_000 / u128::from(UPLOAD_RATE);
        let behind = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        // (Instant + Duration panics past the clock's range.)
        self.since
            .checked_add(self.grace.saturating_add(behind))
            .unwrap_or_else(|| self.since + Duration::from_secs(365 * 86_400))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode() {
        assert_eq!(
            parse_query("name=a%20b.tar.gz&note=hi+there&flag"),
            vec![
                ("name".into(), "a b.tar.gz".into()),
                ("note".into(), "hi there".into()),
                ("flag".into(), String::new())
            ]
        );
        assert!(parse_query("").is_empty());
    }

    #[test]
    fn secrets_compare() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
        assert!(!same_secret(b"", b"a"));
        assert!(same_secret(b"", b""));
    }

    /// Bytes so far are enough until the grace plus a second for each
    /// 256 KiB of them.
    #[test]
    fn the_pace_is_due_by_what_has_arrived() {
        let since = Instant::now();
        let p = Pace {
            since,
            grace: Duration::from_secs(30),
        };
        assert_eq!(p.due(0), since + Duration::from_secs(30));
        assert_eq!(p.due(256 * 1024), since + Duration::from_secs(31));
        assert_eq!(p.due(128 * 1024), since + Duration::from_millis(30_500));
        assert_eq!(
            p.due(100 * 1024 * 1024),
            since + Duration::from_secs(30 + 400)
        );
        assert!(p.due(u64::MAX) >= since + Duration::from_secs(365 * 86_400));
    }

    #[test]
    fn the_log_shows_no_query_values() {
        assert_eq!(
            for_log(
                "/v1/sessions/x/drop",
                Some("name=secret.tar.gz&note=private")
            ),
            "/v1/sessions/x/drop?name&note"
        );
        assert_eq!(for_log("/v1/a\u{7}b", None), "/v1/a?b");
    }

    /// An image being built: 503, Retry-After, and "send again then".
    #[test]
    fn an_error_is_worded_for_http() {
        let e = crate::error::Error::new(crate::error::Kind::NotReady, "being built").next(
            crate::error::Next::AgainWithHint {
                hint: "its log /var/x.log".into(),
            },
        );
        let r = Response::from_error(&e);
        assert_eq!(r.status, 503);
        assert_eq!(
            String::from_utf8(r.body.clone()).unwrap(),
            "{\"error\":\"being built; send again then\"}\n"
        );
        assert!(r.headers.iter().any(|(k, _)| *k == "retry-after"));
    }

    #[test]
    fn options_become_fields_for_http() {
        for (cli, http) in [
            (
                "--tokens: 0 would refuse every model request",
                "field \"tokens\": 0 would refuse every model request",
            ),
            (
                "--memory: \"12x\" is not a size",
                "field \"memory\": \"12x\" is not a size",
            ),
            (
                "--mesh only chooses the shared folder's set of meshes",
                "field \"meshes\" only chooses the shared folder's set of meshes",
            ),
            (
                "there is a session \"a\" already; pick another name, or `shrooms-agent cage rm --force a` first",
                "there is a session \"a\" already; pick another name, or `shrooms-agent cage rm --force a` first",
            ),
            ("a -- b --5 x--y", "a -- b --5 x--y"),
            ("(--auto-approve)", "(field \"auto_approve\")"),
        ] {
            assert_eq!(for_http(cli), http);
        }
    }

    #[test]
    fn a_raw_answer_is_whole() {
        let r = Response::error(408, "late").with_header("retry-after", "1");
        let text = String::from_utf8(r.raw()).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n\
             content-length: 17\r\nretry-after: 1\r\nconnection: close\r\n\r\n\
             {\"error\":\"late\"}\n"
        );
    }
}
