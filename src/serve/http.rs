//! HTTP/1.1 by hand, one request per connection (`Connection: close`).
//!
//! The request line and headers are parsed by `httparse`: small, without
//! dependencies of its own, fuzzed, and the parser under hyper, so the part
//! of HTTP that is easy to get wrong is not written here. What is written
//! here is the little `serve` needs around it: reading with a deadline,
//! a body only by its Content-Length (no chunked bodies), `100 Continue`
//! for a client that waits for it, and a response.
//!
//! Every connection has one deadline for all it reads: [`READ_TIMEOUT`]
//! for the head and a JSON body. An upload is held to a pace instead
//! ([`Conn::pace`]), at every read. An error answer does not wait for
//! the rest of the body: a client that announced a large body and stalled
//! holds a worker no longer than it takes to answer it (the thread that
//! reads heads then closes the connection gently: `heads`).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde::Serialize;

/// The request line and headers together may be at most this long.
pub const MAX_HEAD: usize = 16 * 1024;
/// A request's head and a JSON body must arrive within this time, in all,
/// from when the connection is accepted; and no read of an upload may
/// wait longer than this for its next bytes.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// An upload's time before its pace counts.
pub const UPLOAD_GRACE: Duration = Duration::from_secs(30);
/// The slowest an upload may arrive, on average, once its grace is over:
/// 256 KiB a second.
pub const UPLOAD_RATE: u64 = 256 * 1024;
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
    /// `Expect: 100-continue` (HTTP/1.1): the client sends the body only
    /// once told to go on, so a request refused before its body is read
    /// never sends it.
    pub expect_continue: bool,
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

/// The pace an upload is held to: by any moment after `grace` from
/// `since`, at least [`UPLOAD_RATE`] bytes for each second past the grace
/// must have arrived. A total time for the whole length alone would let a
/// sender that announces 100 MiB trickle a byte every few seconds and
/// hold a worker for the seven minutes that length allows.
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

/// One connection: the stream, and the bytes read past the head.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Body bytes the client announced and nobody has read yet.
    pub unread: u64,
    /// Everything read from the client must have arrived by then (an
    /// upload's body: see `pace`).
    deadline: Instant,
    /// An upload's pace, which its body's reads are held to instead.
    pace: Option<Pace>,
    /// Body bytes read so far.
    received: u64,
    /// `100 Continue` is owed before the body is read.
    continue_owed: bool,
    /// A read of the body ran out of time.
    timed_out: bool,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Conn {
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        Conn {
            stream,
            buf: Vec::new(),
            unread: 0,
            deadline: Instant::now() + READ_TIMEOUT,
            pace: None,
            received: 0,
            continue_owed: false,
            timed_out: false,
        }
    }

    /// Hold the body's reads to a pace from now, after `grace`, instead of
    /// the connection's deadline: for an upload, whose length may need
    /// minutes.
    pub fn pace(&mut self, grace: Duration) {
        self.pace = Some(Pace {
            since: Instant::now(),
            grace,
        });
    }

    /// Let the reads of this connection go on until `total` from now
    /// (tests, which cannot wait for [`READ_TIMEOUT`]).
    #[cfg(test)]
    pub fn allow(&mut self, total: Duration) {
        self.deadline = Instant::now() + total;
    }

    /// A read of the body ran out of the connection's time.
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// When the head (and a JSON body) must have arrived.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Back to blocking reads and writes, with their timeouts: a worker
    /// takes the connection once its head is whole (`heads`).
    pub fn set_blocking(&self) -> io::Result<()> {
        self.stream.set_nonblocking(false)
    }

    /// Non-blocking again: for the thread that closes connections gently.
    pub fn set_nonblocking(&self) -> io::Result<()> {
        self.stream.set_nonblocking(true)
    }

    /// Read what has arrived of the head without waiting for more (the
    /// stream is non-blocking while `heads` reads it), and parse it: None
    /// while it is not whole yet.
    pub fn read_head_now(&mut self, peer: SocketAddr) -> Result<Option<Request>, HeadError> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) if self.buf.is_empty() => return Err(HeadError::Closed),
                Ok(0) => return Err(HeadError::Bad("the request ended in its headers".into())),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(HeadError::Io),
            }
        }
        self.parse_head(peer)
    }

    /// Read the request line and headers, waiting for them until the
    /// connection's deadline: the blocking form, for tests (`serve` reads
    /// heads with `read_head_now`).
    #[cfg(test)]
    pub fn read_head(&mut self, peer: SocketAddr) -> Result<Request, HeadError> {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(req) = self.parse_head(peer)? {
                return Ok(req);
            }
            let n = match read_until(&mut self.stream, &mut chunk, self.deadline) {
                Ok(0) if self.buf.is_empty() => return Err(HeadError::Closed),
                Ok(0) => return Err(HeadError::Bad("the request ended in its headers".into())),
                Ok(n) => n,
                Err(e) if is_timeout(&e) => return Err(HeadError::Timeout),
                Err(_) => return Err(HeadError::Io),
            };
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Parse the head from what has been read: None while it is not whole.
    fn parse_head(&mut self, peer: SocketAddr) -> Result<Option<Request>, HeadError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&self.buf) {
            Ok(httparse::Status::Complete(n)) => {
                let parsed = owned(&req, peer)?;
                self.buf.drain(..n);
                self.unread = parsed.content_length.unwrap_or(0);
                self.continue_owed = parsed.expect_continue;
                return Ok(Some(parsed));
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
        Ok(None)
    }

    /// The whole body (its Content-Length, at most `max` bytes, checked by
    /// the caller), within the connection's deadline.
    pub fn read_body(&mut self, len: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len as usize);
        let mut reader = self.body(len);
        reader.read_to_end(&mut out)?;
        if (out.len() as u64) < len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the body ended after {} of {len} bytes", out.len()),
            ));
        }
        Ok(out)
    }

    /// The body as a reader of `len` bytes, all of which must arrive
    /// before the connection's deadline (or keep its pace), and each read
    /// within [`READ_TIMEOUT`]. The first read tells a client that waits
    /// for it to go on (`100 Continue`).
    pub fn body(&mut self, len: u64) -> Body<'_> {
        Body {
            conn: self,
            left: len,
        }
    }

    /// Write a response and shut the connection down for writing.
    ///
    /// A body nobody read (an error answered before it: 401, 403, 413...)
    /// is not waited for: only what has arrived of it already is thrown
    /// away, so that a client which announced a large body and stalled
    /// holds the worker no longer than the answer takes. What it sends
    /// after is read by `heads` ([`Conn::body_left`]). (A client that sent
    /// `Expect: 100-continue` sent no body at all.)
    pub fn respond(&mut self, r: &Response) -> io::Result<()> {
        let result = self.write_response(r);
        let _ = self.stream.flush();
        let _ = self.stream.shutdown(Shutdown::Write);
        self.discard_arrived();
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

    /// Drop what has arrived of the body already, at most [`MAX_DRAIN`]
    /// bytes, waiting for nothing: closing with unread bytes would reset
    /// the connection, and the client might lose the answer with it.
    fn discard_arrived(&mut self) {
        // (Also when `100 Continue` was never sent: a client may send its
        // body without waiting for it.)
        if self.unread <= self.buf.len() as u64 {
            return;
        }
        if self.stream.set_nonblocking(true).is_err() {
            return;
        }
        let mut budget = MAX_DRAIN;
        let mut chunk = vec![0u8; 64 * 1024];
        while budget > 0 {
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => budget = budget.saturating_sub(n as u64),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    /// Part of an announced body was never read (an error was answered
    /// before it): the client may still be sending it.
    pub fn body_left(&self) -> bool {
        self.unread > self.buf.len() as u64
    }

    /// Read and throw away what has arrived, waiting for nothing (the
    /// stream is non-blocking): false once the client has closed its side
    /// or the connection failed, true while it may send more. At most
    /// 1 MiB a call, so that one fast sender does not keep the thread.
    pub fn discard_now(&mut self) -> bool {
        let mut chunk = vec![0u8; 64 * 1024];
        for _ in 0..16 {
            match self.stream.read(&mut chunk) {
                Ok(0) => return false,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Answer 503 at once, saying `why`, and close, reading nothing: the
    /// server, or this address's share of it, is full. (From the thread
    /// that reads heads, on a non-blocking stream: a short answer fits in
    /// a new socket's send buffer, and nothing waits on the client.)
    pub fn refuse_busy(&mut self, why: &str) {
        let mut r = Response::error(503, why);
        r.headers.push(("Retry-After".into(), "1".into()));
        let _ = self.write_response(&r);
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

impl std::os::unix::io::AsRawFd for Conn {
    fn as_raw_fd(&self) -> std::os::unix::io::RawFd {
        self.stream.as_raw_fd()
    }
}

/// At most this much of an unread body is thrown away before closing.
const MAX_DRAIN: u64 = 2 * 1024 * 1024;

/// A request's body: the bytes read past the head, then the stream.
pub struct Body<'a> {
    conn: &'a mut Conn,
    left: u64,
}

impl Read for Body<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 || out.is_empty() {
            return Ok(0);
        }
        if self.conn.continue_owed {
            self.conn.continue_owed = false;
            self.conn
                .stream
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        let want = out.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = if !self.conn.buf.is_empty() {
            let n = want.min(self.conn.buf.len());
            out[..n].copy_from_slice(&self.conn.buf[..n]);
            self.conn.buf.drain(..n);
            n
        } else {
            // The next bytes are due by the pace (checked at every read, so
            // a sender never falls behind it for long), else by the
            // connection's deadline; and never later than READ_TIMEOUT.
            let due = match self.conn.pace {
                Some(pace) => pace.due(self.conn.received),
                None => self.conn.deadline,
            };
            let deadline = due.min(Instant::now() + READ_TIMEOUT);
            match read_until(&mut self.conn.stream, &mut out[..want], deadline) {
                Ok(n) => n,
                Err(e) if is_timeout(&e) => {
                    self.conn.timed_out = true;
                    return Err(match self.conn.pace {
                        Some(pace) if Instant::now() >= due => io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "{} bytes in {} s: slower than 256 KiB a second after {} s",
                                self.conn.received,
                                pace.since.elapsed().as_secs(),
                                pace.grace.as_secs_f32()
                            ),
                        ),
                        _ => e,
                    });
                }
                Err(e) => return Err(e),
            }
        };
        self.conn.received += n as u64;
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
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if name == "content-length" {
            let n = parse_content_length(h.value).ok_or_else(|| {
                HeadError::Bad("Content-Length is not a number (only the digits 0-9)".into())
            })?;
            if content_length.is_some_and(|c| c != n) {
                return Err(HeadError::Bad("two different Content-Lengths".into()));
            }
            content_length = Some(n);
        }
        if name == "transfer-encoding" {
            transfer_encoding = true;
        }
        if name == "expect" && h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue") {
            // Only an HTTP/1.1 client understands 100 (RFC 9110, 10.1.1).
            expect_continue = req.version == Some(1);
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
        expect_continue,
        peer,
    })
}

/// A Content-Length value: ASCII digits only (RFC 9110, 8.6), around
/// them only spaces and tabs. `u64::from_str` would also take `+2`, which
/// a proxy in front of serve might read as no length at all, and then the
/// two would disagree on where the body ends.
fn parse_content_length(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
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

    /// A connection to a listener of this test, and the server's end.
    fn pair() -> (TcpStream, Conn, SocketAddr) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, peer) = l.accept().unwrap();
        (client, Conn::new(server), peer)
    }

    fn read_all(mut s: &TcpStream) -> String {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
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

    /// Headers announcing 100 MiB, then nothing: the error answer is
    /// written and the connection closed at once, the body not waited for.
    #[test]
    fn an_error_answer_does_not_wait_for_the_body() {
        let (mut client, mut conn, peer) = pair();
        client
            .write_all(b"POST /v1/sessions/x/drop?name=a HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\nsome")
            .unwrap();
        let req = conn.read_head(peer).unwrap();
        assert_eq!(req.content_length, Some(104_857_600));
        let started = Instant::now();
        conn.respond(&Response::error(401, "no token")).unwrap();
        drop(conn);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        let answer = read_all(&client);
        assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");
        assert!(answer.ends_with("{\"error\":\"no token\"}\n"), "{answer}");
    }

    /// A body that trickles in falls behind its pace once the grace is
    /// over: the read fails as a timeout that says so, and the connection
    /// knows it.
    #[test]
    fn a_trickled_body_falls_behind_its_pace() {
        let (mut client, mut conn, peer) = pair();
        client
            .write_all(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
            .unwrap();
        let trickle = std::thread::spawn(move || {
            for _ in 0..40 {
                if client.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let req = conn.read_head(peer).unwrap();
        conn.pace(Duration::from_millis(400));
        let started = Instant::now();
        let mut out = Vec::new();
        let e = conn
            .body(req.content_length.unwrap())
            .read_to_end(&mut out)
            .unwrap_err();
        assert!(is_timeout(&e), "{e}");
        assert!(
            e.to_string().contains("slower than 256 KiB a second"),
            "{e}"
        );
        assert!(conn.timed_out());
        assert!(!out.is_empty() && out.len() < 1000, "{}", out.len());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        drop(conn);
        trickle.join().unwrap();
    }

    /// The head, and a JSON body, share one deadline.
    #[test]
    fn the_head_and_body_share_one_deadline() {
        let (mut client, mut conn, peer) = pair();
        client
            .write_all(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
            .unwrap();
        let _req = conn.read_head(peer).unwrap();
        conn.allow(Duration::from_millis(300));
        let started = Instant::now();
        let e = conn.read_body(10).unwrap_err();
        assert!(is_timeout(&e), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    /// `Expect: 100-continue`: told to go on when the body is read; an
    /// answer before that is the only one, and no body is waited for.
    #[test]
    fn continue_only_when_the_body_is_read() {
        let (mut client, mut conn, peer) = pair();
        client
            .write_all(
                b"POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
            )
            .unwrap();
        let req = conn.read_head(peer).unwrap();
        assert!(req.expect_continue);
        let reader = std::thread::spawn(move || {
            client
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut got = [0u8; 25];
            client.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"HTTP/1.1 100 Continue\r\n\r\n");
            client.write_all(b"{}").unwrap();
            read_all(&client)
        });
        assert_eq!(conn.read_body(2).unwrap(), b"{}");
        conn.respond(&Response::json(200, &serde_json::json!({"ok": true})))
            .unwrap();
        drop(conn);
        let answer = reader.join().unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");

        // Refused before the body: no 100, the answer, closed.
        let (mut client, mut conn, peer) = pair();
        client
            .write_all(b"POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n\r\n")
            .unwrap();
        conn.read_head(peer).unwrap();
        conn.respond(&Response::error(413, "too large")).unwrap();
        drop(conn);
        let answer = read_all(&client);
        assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
        // HTTP/1.0 knows no 100.
        let (mut client, mut conn, peer) = pair();
        client
            .write_all(b"POST /x HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n")
            .unwrap();
        assert!(!conn.read_head(peer).unwrap().expect_continue);
    }

    /// Content-Length is digits only (RFC 9110, 8.6): `+2`, `-0`, ` 2 2`
    /// or `0x10` is no length, though Rust's `parse` would take `+2`. A
    /// parser in front of serve that read it otherwise would see another
    /// request boundary.
    #[test]
    fn content_length_is_digits_only() {
        let head = |len: &str| {
            let (mut client, mut conn, peer) = pair();
            client
                .write_all(
                    format!("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n")
                        .as_bytes(),
                )
                .unwrap();
            conn.read_head(peer)
        };
        assert_eq!(head("2").unwrap().content_length, Some(2));
        assert_eq!(head("0").unwrap().content_length, Some(0));
        assert_eq!(head("  17 ").unwrap().content_length, Some(17));
        for bad in ["+2", "-0", "2 2", "0x10", "", "1e3", "18446744073709551616"] {
            match head(bad) {
                Err(HeadError::Bad(why)) => {
                    assert!(why.contains("Content-Length"), "{bad:?}: {why}")
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
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
            expect_continue: false,
            peer: "127.0.0.1:1".parse().unwrap(),
        };
        assert_eq!(r.for_log(), "/v1/sessions/x/drop?name&note");
    }
}
