//! What a route answers, and the small pieces of HTTP that are ours: a
//! JSON answer ended by a newline, `{"error": "..."}` for every refusal,
//! the log's view of a path, the constant-time token comparison, and an
//! upload's pace. Reading and writing HTTP itself is hyper's.

use std::time::{Duration, Instant};

use axum::http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{Error, Face, Holder, PodmanCall};

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

/// Every error's body: the words the CLI prints, with the fields of a
/// request named as its body names them; then what the error is about, as
/// data, each only when there is one.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody<'a> {
    /// What was wrong, and how to fix it.
    pub error: &'a str,
    /// The field of the request's body whose value was refused (400), or
    /// where the body's JSON was refused: an unknown field's name as sent,
    /// a value of the wrong type by its path (`cage.memory`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<&'a str>,
    /// What holds the session (409): what it does, since when, its process.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(inline)]
    pub holder: Option<Holder>,
    /// The podman call that failed (500): its verb and what it acted on,
    /// and its exit status. No path of the machine: a call on a path is
    /// given by its verb alone (`podman unshare rm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(inline)]
    pub podman: Option<PodmanCall>,
    /// What runs in the session's cage and keeps it from being moved or
    /// renamed (409): each process's command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<&'a [String]>,
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
        let body = serde_json::to_vec(&ErrorBody {
            error: message,
            field: None,
            holder: None,
            podman: None,
            running: None,
        })
        .unwrap_or_default();
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

    /// An operation's error: its kind's status, its words for an HTTP
    /// client (what to do next: "send again", not "run it again"; the
    /// fields of a body, not the command line's options), and what it is
    /// about as data: the field refused, what holds a busy session, the
    /// podman call that failed (with no path of the machine), what runs in
    /// a cage.
    pub fn from_error(e: &Error) -> Response {
        let words = e.words(Face::Http);
        let body = ErrorBody {
            error: &words,
            field: e.body_field(),
            holder: e.holder().cloned(),
            podman: e.podman().map(PodmanCall::without_paths),
            running: e.running(),
        };
        let mut r = Response::json_line(
            e.http_status(),
            serde_json::to_vec(&body).unwrap_or_default(),
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
        // A response that names its own type (the status page's) keeps it.
        let typed = self
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        let mut r = if self.status == 204 || typed {
            axum::response::Response::new(axum::body::Body::from(self.body))
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

    /// What an error is about, in its body: the field refused, in the
    /// body's words and as data; what holds a busy session; the podman call
    /// that failed. An error about none of them has the error alone.
    #[test]
    fn an_error_body_carries_its_subject() {
        use crate::error::{Kind, Subject};
        let body = |e: &Error| {
            let r = Response::from_error(e);
            (r.status, String::from_utf8(r.body).unwrap())
        };
        assert_eq!(
            body(&Error::bad_field(
                "tokens",
                "0 would refuse every model request"
            )),
            (
                400,
                "{\"error\":\"field \\\"tokens\\\": 0 would refuse every model request\",\
                 \"field\":\"tokens\"}\n"
                    .to_string()
            )
        );
        let e = Error::worded(Kind::BadInput, |f| {
            format!(
                "{} does nothing without {}",
                f.field("meshes"),
                f.field("shared")
            )
        })
        .about(Subject::Field("meshes"))
        .context("session web");
        assert_eq!(
            body(&e).1,
            "{\"error\":\"session web: field \\\"meshes\\\" does nothing without field \\\"shared\\\"\",\
             \"field\":\"meshes\"}\n"
        );
        let e = crate::error::samples::busy_by_exec();
        assert_eq!(
            body(&e),
            (
                409,
                "{\"error\":\"session s is busy: another shrooms-agent command (an exec or run, \
                 pid 7) is using it; try again when it ends\",\"holder\":{\"what\":\"exec\",\
                 \"since\":null,\"pid\":7}}\n"
                    .to_string()
            )
        );
        let e = crate::error::samples::podman_start_failed();
        assert_eq!(
            body(&e),
            (
                500,
                "{\"error\":\"podman start: Error: x\",\"podman\":{\"call\":\"podman start c1\",\
                 \"status\":125}}\n"
                    .to_string()
            )
        );
        // The words name no command-line option.
        assert_eq!(
            body(&Error::failed("no")),
            (500, "{\"error\":\"no\"}\n".to_string())
        );
        // What runs in a cage that cannot be moved now.
        let e = crate::error::samples::busy_in_its_cage();
        assert_eq!(
            body(&e),
            (
                409,
                "{\"error\":\"session s is busy: bash, claude --resume runs in its cage; move it \
                 once it is idle\",\"running\":[\"bash\",\"claude --resume\"]}\n"
                    .to_string()
            )
        );
        // A podman call that named a path of the machine: its verb alone.
        let e = crate::error::samples::podman_unshare_rm_failed();
        assert_eq!(
            body(&e),
            (
                500,
                "{\"error\":\"podman unshare: rm: cannot remove: Permission denied\",\
                 \"podman\":{\"call\":\"podman unshare rm\",\"status\":1}}\n"
                    .to_string()
            )
        );
    }
}
