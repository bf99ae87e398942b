//! HTTP/1.1 by hand, one request per connection (`Connection: close`).
//!
//! The request line and headers are parsed by `httparse`: small, without
//! dependencies of its own, fuzzed, and the parser under hyper, so the part
//! of HTTP that is easy to get wrong is not written here. What is written
//! here is the little `serve` needs around it: reading with a deadline,
//! a body only by its Content-Length (no chunked bodies), and a response.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde::Serialize;

/// The request line and headers together may be at most this long.
pub const MAX_HEAD: usize = 16 * 1024;
/// A request's head, and a JSON body, must arrive within this time.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A response must be taken within this time.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// A request's line and headers.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The path, without the query string, as sent (percent-encoded).
    pub path: String,
    /// The query string's pairs, decoded.
    pub query: Vec<(String, String)>,
    /// Header names in lower case; values as sent.
    pub headers: Vec<(String, Vec<u8>)>,
    pub content_length: Option<u64>,
    /// A Transfer-Encoding was sent (not taken: a body needs Content-Length).
    pub transfer_encoding: bool,
    pub peer: SocketAddr,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    pub fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path and the query's names, never its values, with anything
    /// unprintable shown as `?`: what the log line shows.
    pub fn for_log(&self) -> String {
        let mut s: String = self.path.chars().take(200).map(printable).collect();
        if !self.query.is_empty() {
            s.push('?');
            let names: Vec<String> = self
                .query
                .iter()
                .map(|(n, _)| n.chars().take(40).map(printable).collect())
                .collect();
            s.push_str(&names.join("&"));
        }
        s
    }
}

fn printable(c: char) -> char {
    if c.is_ascii_graphic() { c } else { '?' }
}

/// Why no request could be read.
#[derive(Debug)]
pub enum HeadError {
    /// The client closed before sending anything: nothing to answer.
    Closed,
    /// Too slow: answered 408.
    Timeout,
    /// Not HTTP, or over the bounds: answered 400 with the reason.
    Bad(String),
    /// The connection failed: nothing can be answered.
    Io,
}

/// One connection: the stream, and the bytes read past the head.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Body bytes the client announced and nobody has read yet.
    pub unread: u64,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Conn {
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        Conn {
            stream,
            buf: Vec::new(),
            unread: 0,
        }
    }

    /// Read the request line and headers, within [`READ_TIMEOUT`] in all.
    pub fn read_head(&mut self, peer: SocketAddr) -> Result<Request, HeadError> {
        let deadline = Instant::now() + READ_TIMEOUT;
        let mut chunk = [0u8; 4096];
        loop {
            if !self.buf.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut req = httparse::Request::new(&mut headers);
                match req.parse(&self.buf) {
                    Ok(httparse::Status::Complete(n)) => {
                        let parsed = owned(&req, peer)?;
                        self.buf.drain(..n);
                        self.unread = parsed.content_length.unwrap_or(0);
                        return Ok(parsed);
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(e) => return Err(HeadError::Bad(format!("not an HTTP request: {e}"))),
                }
                if self.buf.len() > MAX_HEAD {
                    return Err(HeadError::Bad(format!(
                        "the request line and headers are over {} KiB",
                        MAX_HEAD / 1024
                    )));
                }
            }
            let n = match read_until(&mut self.stream, &mut chunk, deadline) {
                Ok(0) if self.buf.is_empty() => return Err(HeadError::Closed),
                Ok(0) => return Err(HeadError::Bad("the request ended in its headers".into())),
                Ok(n) => n,
                Err(e) if is_timeout(&e) => return Err(HeadError::Timeout),
                Err(_) => return Err(HeadError::Io),
            };
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The whole body (its Content-Length, at most `max` bytes, checked by
    /// the caller), within [`READ_TIMEOUT`] in all.
    pub fn read_body(&mut self, len: u64) -> io::Result<Vec<u8>> {
        let deadline = Instant::now() + READ_TIMEOUT;
        let mut out = Vec::with_capacity(len as usize);
        let mut reader = self.body(len, Some(deadline));
        reader.read_to_end(&mut out)?;
        if (out.len() as u64) < len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the body ended after {} of {len} bytes", out.len()),
            ));
        }
        Ok(out)
    }

    /// The body as a reader of `len` bytes: with a deadline for all of it,
    /// or (`None`, for uploads) with [`READ_TIMEOUT`] for each read.
    pub fn body(&mut self, len: u64, deadline: Option<Instant>) -> Body<'_> {
        Body {
            conn: self,
            left: len,
            deadline,
        }
    }

    /// Write a response and close the connection. A body the client sent
    /// and nobody read is drained first (a bounded amount, briefly), so the
    /// client reads the answer rather than a reset connection.
    pub fn respond(&mut self, r: &Response) -> io::Result<()> {
        let result = self.write_response(r);
        let _ = self.stream.flush();
        let _ = self.stream.shutdown(Shutdown::Write);
        self.drain();
        result
    }

    fn write_response(&mut self, r: &Response) -> io::Result<()> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", r.status, reason(r.status));
        if !r.body.is_empty() || r.status != 204 {
            head.push_str(&format!("Content-Type: {}\r\n", r.content_type));
            head.push_str(&format!("Content-Length: {}\r\n", r.body.len()));
        }
        for (k, v) in &r.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        self.stream.write_all(head.as_bytes())?;
        if r.status != 204 {
            self.stream.write_all(&r.body)?;
        }
        Ok(())
    }

    fn drain(&mut self) {
        const MAX_DRAIN: u64 = 101 * 1024 * 1024;
        let left = self.unread.saturating_sub(self.buf.len() as u64);
        if left == 0 {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut budget = left.min(MAX_DRAIN);
        let mut chunk = vec![0u8; 64 * 1024];
        let _ = self.stream.set_read_timeout(Some(Duration::from_secs(2)));
        while budget > 0 && Instant::now() < deadline {
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => budget = budget.saturating_sub(n as u64),
            }
        }
    }

    /// Answer at once and close, reading nothing: the pool is full.
    pub fn refuse_busy(stream: TcpStream) {
        let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
        let mut c = Conn {
            stream,
            buf: Vec::new(),
            unread: 0,
        };
        let mut r = Response::error(503, "the server is busy; try again in a moment");
        r.headers.push(("Retry-After".into(), "1".into()));
        let _ = c.write_response(&r);
        let _ = c.stream.shutdown(Shutdown::Both);
    }
}

/// A request's body: the bytes read past the head, then the stream.
pub struct Body<'a> {
    conn: &'a mut Conn,
    left: u64,
    deadline: Option<Instant>,
}

impl Read for Body<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 || out.is_empty() {
            return Ok(0);
        }
        let want = out.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = if !self.conn.buf.is_empty() {
            let n = want.min(self.conn.buf.len());
            out[..n].copy_from_slice(&self.conn.buf[..n]);
            self.conn.buf.drain(..n);
            n
        } else {
            let deadline = self
                .deadline
                .unwrap_or_else(|| Instant::now() + READ_TIMEOUT);
            read_until(&mut self.conn.stream, &mut out[..want], deadline)?
        };
        self.left -= n as u64;
        self.conn.unread = self.conn.unread.saturating_sub(n as u64);
        Ok(n)
    }
}

/// One read, which must come before the deadline.
fn read_until(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<usize> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client is too slow",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

fn owned(req: &httparse::Request, peer: SocketAddr) -> Result<Request, HeadError> {
    let method = req.method.unwrap_or("").to_string();
    let target = req.path.unwrap_or("/");
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, q),
        None => (target, ""),
    };
    let mut headers = Vec::new();
    let mut content_length = None;
    let mut transfer_encoding = false;
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if name == "content-length" {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| HeadError::Bad("Content-Length is not a number".into()))?;
            if content_length.is_some_and(|c| c != n) {
                return Err(HeadError::Bad("two different Content-Lengths".into()));
            }
            content_length = Some(n);
        }
        if name == "transfer-encoding" {
            transfer_encoding = true;
        }
        headers.push((name, h.value.to_vec()));
    }
    Ok(Request {
        method,
        path: path.to_string(),
        query: parse_query(query),
        headers,
        content_length,
        transfer_encoding,
        peer,
    })
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

/// A response, whole (bodies here are small: JSON, or the OpenAPI document).
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
}

impl Response {
    pub fn json(status: u16, value: &impl Serialize) -> Response {
        match serde_json::to_vec(value) {
            Ok(mut body) => {
                body.push(b'\n');
                Response {
                    status,
                    content_type: "application/json",
                    headers: Vec::new(),
                    body,
                }
            }
            Err(e) => Response::error(500, &format!("writing the answer: {e}")),
        }
    }

    /// `{"error": "..."}`.
    pub fn error(status: u16, message: &str) -> Response {
        let mut body = serde_json::to_vec(&ErrorBody { error: message }).unwrap_or_default();
        body.push(b'\n');
        Response {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body,
        }
    }

    /// An operation's error: its kind's status, its message as the CLI prints it.
    pub fn from_error(e: &crate::error::Error) -> Response {
        let mut r = Response::error(e.http_status(), &e.message);
        if let Some(secs) = e.retry_after() {
            r.headers.push(("Retry-After".into(), secs.to_string()));
        }
        r
    }

    pub fn no_content() -> Response {
        Response {
            status: 204,
            content_type: "application/json",
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn with_header(mut self, k: &str, v: &str) -> Response {
        self.headers.push((k.into(), v.into()));
        self
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
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

    #[test]
    fn the_log_shows_no_query_values() {
        let r = Request {
            method: "POST".into(),
            path: "/v1/sessions/x/drop".into(),
            query: parse_query("name=secret.tar.gz&note=private"),
            headers: vec![],
            content_length: None,
            transfer_encoding: false,
            peer: "127.0.0.1:1".parse().unwrap(),
        };
        assert_eq!(r.for_log(), "/v1/sessions/x/drop?name&note");
    }
}
