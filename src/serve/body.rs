//! A request's body: a JSON body whole, within the connection's deadline;
//! an upload as a reader for the synchronous operation, held to its pace
//! at every read.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use http_body_util::BodyExt;

use super::conn::{ConnInfo, READ_TIMEOUT};
use super::reply::{Pace, Response};
use crate::error::{BodyProblem, Error};

/// A JSON body may be at most this long (1 MiB).
pub const MAX_JSON: u64 = 1024 * 1024;

/// Why a body was not read: an operation's kind of error, or an answer
/// of HTTP's own (408).
pub enum Unread {
    Op(Error),
    Http(Response),
}

/// The Content-Length a body must have (a chunked body is not taken).
pub fn length(headers: &HeaderMap, what: &'static str) -> Result<Option<u64>, Error> {
    if headers.contains_key(axum::http::header::TRANSFER_ENCODING) {
        return Err(Error::body(what, BodyProblem::Chunked));
    }
    // hyper has refused a Content-Length that is not digits, and two
    // that differ.
    Ok(headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok()))
}

/// The whole JSON body: at most 1 MiB (413, unread), by the connection's
/// deadline (408). `Expect: 100-continue` is answered by hyper when the
/// body is first read, so a refused request never sends it.
pub async fn json(info: &ConnInfo, headers: &HeaderMap, body: Body) -> Result<Bytes, Unread> {
    whole(info, headers, body, MAX_JSON).await
}

/// A whole body of at most `max` bytes (413, unread), by the connection's
/// deadline (408).
pub async fn whole(
    info: &ConnInfo,
    headers: &HeaderMap,
    body: Body,
    max: u64,
) -> Result<Bytes, Unread> {
    let len = length(headers, "a body").map_err(Unread::Op)?.unwrap_or(0);
    if len > max {
        return Err(Unread::Op(Error::body(
            "a body",
            BodyProblem::TooLarge { len, max },
        )));
    }
    let read = axum::body::to_bytes(body, max as usize);
    match tokio::time::timeout_at(info.deadline.into(), read).await {
        Ok(Ok(bytes)) => {
            info.body_read.set();
            Ok(bytes)
        }
        Ok(Err(e)) => Err(Unread::Op(Error::act_on_input("reading the body", &e))),
        Err(_) => Err(Unread::Http(Response::error(
            408,
            "the body did not arrive in time",
        ))),
    }
}

/// An upload, read from a blocking thread: each read waits for the next
/// bytes until they are due by the pace, and never longer than
/// [`READ_TIMEOUT`].
pub struct Upload {
    body: Body,
    runtime: tokio::runtime::Handle,
    pace: Pace,
    left: Bytes,
    received: u64,
    timed_out: Arc<AtomicBool>,
    info: ConnInfo,
}

impl Upload {
    pub fn new(body: Body, info: ConnInfo, grace: Duration) -> (Upload, Arc<AtomicBool>) {
        let timed_out = Arc::new(AtomicBool::new(false));
        let u = Upload {
            body,
            runtime: tokio::runtime::Handle::current(),
            pace: Pace {
                since: Instant::now(),
                grace,
            },
            left: Bytes::new(),
            received: 0,
            timed_out: timed_out.clone(),
            info,
        };
        (u, timed_out)
    }
}

impl Read for Upload {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.left.is_empty() {
            let due = self.pace.due(self.received);
            let deadline = due.min(Instant::now() + READ_TIMEOUT);
            let frame = self
                .runtime
                .block_on(tokio::time::timeout_at(deadline.into(), self.body.frame()));
            match frame {
                Err(_) => {
                    self.timed_out.store(true, Ordering::SeqCst);
                    return Err(if Instant::now() >= due {
                        io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "{} bytes in {} s: slower than 256 KiB a second after {} s",
                                self.received,
                                self.pace.since.elapsed().as_secs(),
                                self.pace.grace.as_secs_f32()
                            ),
                        )
                    } else {
                        io::Error::new(io::ErrorKind::TimedOut, "the client is too slow")
                    });
                }
                Ok(None) => {
                    self.info.body_read.set();
                    return Ok(0);
                }
                Ok(Some(Err(e))) => return Err(io::Error::other(e.to_string())),
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.left = data;
                    }
                }
            }
        }
        let n = out.len().min(self.left.len());
        out[..n].copy_from_slice(&self.left.split_to(n));
        self.received += n as u64;
        Ok(n)
    }
}
