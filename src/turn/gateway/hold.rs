//! A model request at a budget is held, not refused (docs/gateway.md,
//! "Budgets"): it waits until the budget is raised (its record is read
//! again each second, so `cage limits`, serve's limits route or the status
//! page raise it beside the running turn), the harness goes away, or the
//! config's `[budget] wait` passes; then it goes upstream as if nothing had
//! happened, or is refused with words that say why and how to raise it.
//!
//! How the harness is kept waiting depends on what it asked for:
//! - A streamed answer (`"stream": true`, how Claude Code, pi and Codex ask
//!   during a turn): the answer's head (200, `text/event-stream`) goes back
//!   at once, then the API's own keep-alive events (the Messages API's
//!   `ping`; an SSE comment for OpenAI's, which its clients skip) every few
//!   seconds, so no read timeout of the harness's fires. Once the budget is
//!   raised, the upstream's events follow on the same stream; an upstream
//!   that answers an error, or the end of the wait, is an `error` event,
//!   which the harnesses' clients show as the API's error.
//! - Anything else: the answer waits, and comes whole once there is one.
//!
//! The body is read whole first (a held request must be sent again as it
//! was), at most [`MAX_HELD_BODY`] within [`BODY_TIME`], and at most [`usage::MAX_HELD`]
//! requests are held at once (past them, refused at once); an answer is never cut in the middle,
//! since only a request that has not gone upstream is held.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};

use super::{NotNow, State, api_error, usage};

/// How often a held request asks again whether the budget was raised.
const POLL: Duration = Duration::from_secs(1);

/// How often a held stream is sent a keep-alive event.
const PING: Duration = Duration::from_secs(5);

/// The largest request body held: the Messages API takes at most 32 MB in
/// one request. With at most [`usage::MAX_HELD`] held at once, a cage
/// sending more makes this process keep 256 MiB at most.
const MAX_HELD_BODY: usize = 32 << 20;

/// How long a held request's body may take to come: a harness sends its
/// request at once, and a slower body would keep one of the turn's
/// [`usage::MAX_HELD`] places.
const BODY_TIME: Duration = Duration::from_secs(60);

/// How much of an upstream's error answer is passed on in a held stream.
const MAX_ERROR_BODY: usize = 1 << 20;

/// Hold a request at a budget (`at`: which, what was spent, how to raise
/// it), as the module says.
pub(super) async fn held(
    state: Arc<State>,
    parts: Parts,
    body: Incoming,
    at: usage::AtBudget,
) -> Response<reqwest::Body> {
    let ledger = state.config.ledger.clone();
    let wait = state.config.budget_wait;
    if wait.is_zero() || ledger.gave_up() {
        return super::refused(&state, &usage::gave_up(&at.why, wait));
    }
    let Some(waiting) = ledger.waiting(at.budget, &at.why, wait) else {
        return super::refused(&state, &too_many(&at.why));
    };
    // The wait counts from the request's head: a body that trickles in
    // spends it, and may take [`BODY_TIME`] at most.
    let deadline = Instant::now() + wait;
    let body = match read_body(body, MAX_HELD_BODY, Instant::now() + BODY_TIME.min(wait)).await {
        Ok(b) => b,
        Err(why) => {
            return api_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!(
                    "shrooms-agent's model gateway holds this request at a budget and could \
                     not read its body: {why}"
                ),
            );
        }
    };
    let wire = Wire::of(&parts);
    if !asks_stream(&body) {
        let plan = until_raised(&state, &parts, deadline, None).await;
        drop(waiting);
        return match plan {
            Ok(plan) => {
                went_on(&state);
                let body = http_body_util::Full::new(body);
                super::forward(&state, parts.method, body, plan).await
            }
            Err(Ended::Answer(a)) => a,
            Err(Ended::GaveUp(words)) => super::refused(&state, &words),
            Err(Ended::Gone) => api_error(StatusCode::BAD_REQUEST, "invalid_request_error", ""),
        };
    }
    let (send, receive) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let plan = until_raised(&state, &parts, deadline, Some((&send, wire))).await;
        drop(waiting);
        match plan {
            Ok(mut plan) => {
                went_on(&state);
                // The head went back before the answer came: an answer
                // compressed after it could not be told apart.
                plan.headers.remove(header::ACCEPT_ENCODING);
                let body = http_body_util::Full::new(body);
                let answer = super::forward(&state, parts.method, body, plan).await;
                pass_on(answer, &send, wire).await;
            }
            Err(Ended::Answer(a)) => pass_on(a, &send, wire).await,
            Err(Ended::GaveUp(words)) => {
                if state.config.ledger.refused() {
                    eprintln!("shrooms-agent: {words}");
                }
                let _ = send.send(wire.error_event(&refusal_json(&words))).await;
            }
            Err(Ended::Gone) => {}
        }
    });
    stream_head(receive)
}

/// Read a held request's body whole, at most `max` bytes, by `until`, into
/// one buffer of its own. Each frame's bytes are copied out: a body sent in
/// tiny chunks would otherwise be kept as one piece per chunk, each keeping
/// the server's read buffer it was cut from, many times its length. The
/// buffer grows at most to `max`.
async fn read_body<B>(body: B, max: usize, until: Instant) -> Result<Bytes, String>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    let mut kept: Vec<u8> = Vec::new();
    loop {
        let frame = match tokio::time::timeout_at(until.into(), body.frame()).await {
            Err(_) => {
                return Err(format!(
                    "it did not come whole within {} s",
                    BODY_TIME.as_secs()
                ));
            }
            Ok(None) => return Ok(Bytes::from(kept)),
            Ok(Some(Err(e))) => return Err(e.to_string()),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let needed = kept.len() + data.len();
        if needed > max {
            return Err(format!("at most {} MiB is held", max >> 20));
        }
        if needed > kept.capacity() {
            let grown = (kept.capacity() * 2).clamp(needed, max);
            kept.reserve_exact(grown - kept.len());
        }
        kept.extend_from_slice(&data);
    }
}

/// The words that refuse a request at a budget when the turn already holds
/// as many as it may.
fn too_many(why: &str) -> String {
    format!(
        "{why}; {} of the turn's model requests already wait for it, the most held at once, \
         so this one is refused",
        usage::MAX_HELD
    )
}

/// How a held request ended without going upstream.
enum Ended {
    /// This answer, as planned (no credential, an answer that could not be
    /// counted before).
    Answer(Response<reqwest::Body>),
    /// The wait passed: these words refuse it.
    GaveUp(String),
    /// The harness went away.
    Gone,
}

/// Ask again each [`POLL`] until the request may go, keeping a stream
/// alive meanwhile (`stream`: where its events go, and in whose words).
async fn until_raised(
    state: &State,
    parts: &Parts,
    deadline: Instant,
    stream: Option<(&tokio::sync::mpsc::Sender<Bytes>, Wire)>,
) -> Result<super::Plan, Ended> {
    let mut last_ping = Instant::now();
    if let Some((send, wire)) = stream
        && send.send(wire.ping()).await.is_err()
    {
        return Err(Ended::Gone);
    }
    loop {
        tokio::time::sleep(POLL).await;
        let why = match super::plan_for(state, parts).await {
            Ok(plan) => return Ok(plan),
            Err(NotNow::Answer(a)) => return Err(Ended::Answer(a)),
            Err(NotNow::AtBudget(at)) => at.why,
        };
        if Instant::now() >= deadline {
            state.config.ledger.give_up();
            return Err(Ended::GaveUp(usage::gave_up(
                &why,
                state.config.budget_wait,
            )));
        }
        if let Some((send, wire)) = stream {
            if send.is_closed() {
                return Err(Ended::Gone);
            }
            if last_ping.elapsed() >= PING {
                last_ping = Instant::now();
                if send.send(wire.ping()).await.is_err() {
                    return Err(Ended::Gone);
                }
            }
        }
    }
}

/// The terminal is told the turn goes on.
fn went_on(state: &State) {
    eprintln!(
        "shrooms-agent: session {}: its budget was raised; its model request goes on",
        state.config.session
    );
}

/// Does the request ask for a streamed answer? Read as JSON, `stream`
/// alone; a body that is not JSON asks for none.
fn asks_stream(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Asked {
        #[serde(default)]
        stream: bool,
    }
    serde_json::from_slice::<Asked>(body).is_ok_and(|a| a.stream)
}

/// Which API's events a held stream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    /// The Messages API's (`event: ping`, `event: error`).
    Messages,
    /// OpenAI's (comments, an `error` event).
    OpenAi,
}

impl Wire {
    fn of(parts: &Parts) -> Wire {
        match super::openai::under_prefix(parts.uri.path()) {
            Some(_) => Wire::OpenAi,
            None => Wire::Messages,
        }
    }

    /// The keep-alive event: the Messages API sends `ping` itself while an
    /// answer is slow; an SSE comment is skipped by every reader (the
    /// HTML standard's server-sent events, "comment").
    fn ping(self) -> Bytes {
        Bytes::from_static(match self {
            Wire::Messages => b"event: ping\ndata: {\"type\": \"ping\"}\n\n",
            Wire::OpenAi => b": shrooms-agent holds this request at a budget\n\n",
        })
    }

    /// An error event carrying `json`, an error object in the API's shape.
    fn error_event(self, json: &serde_json::Value) -> Bytes {
        Bytes::from(format!("event: error\ndata: {json}\n\n"))
    }
}

/// A refusal as the API's error object.
fn refusal_json(words: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "error",
        "error": {"type": "invalid_request_error", "message": words},
    })
}

/// Pass an answer on as the held stream's rest: its events as they come,
/// or, when it is not a stream that went well, an error event with its
/// error object.
async fn pass_on(
    answer: Response<reqwest::Body>,
    send: &tokio::sync::mpsc::Sender<Bytes>,
    wire: Wire,
) {
    let compressed = answer
        .headers()
        .get(header::CONTENT_ENCODING)
        .is_some_and(|e| e.as_bytes() != b"identity");
    let status = answer.status();
    let mut body = answer.into_body();
    if status.is_success() && !compressed {
        // Dropped (the harness went away) or read to its end, the body is
        // metered as any other (`usage::Metered`).
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data()
                && send.send(data).await.is_err()
            {
                return;
            }
        }
        return;
    }
    let text = http_body_util::Limited::new(body, MAX_ERROR_BODY)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let json = match serde_json::from_slice::<serde_json::Value>(&text) {
        Ok(v) if v.get("error").is_some() => v,
        _ if compressed => refusal_json(
            "shrooms-agent's model gateway held this request at a budget, and the model API's \
             answer came compressed though none was asked for; it was not passed on",
        ),
        _ => refusal_json(&format!(
            "the model API answered {status} to a request shrooms-agent's model gateway held \
             at a budget"
        )),
    };
    let _ = send.send(wire.error_event(&json)).await;
}

/// The head of a held stream, and its events as they are sent.
fn stream_head(receive: tokio::sync::mpsc::Receiver<Bytes>) -> Response<reqwest::Body> {
    let mut r = Response::new(reqwest::Body::wrap(Events(receive)));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// A body made of the events sent on a channel, ended when it is closed.
struct Events(tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for Events {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|e| e.map(|b| Ok(Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_what_the_body_asks_for() {
        assert!(asks_stream(br#"{"model":"m","stream":true,"messages":[]}"#));
        assert!(!asks_stream(br#"{"model":"m","stream":false}"#));
        assert!(!asks_stream(br#"{"model":"m"}"#));
        assert!(!asks_stream(br#"{"stream":"yes"}"#));
        assert!(!asks_stream(b"stream: true"));
        assert!(!asks_stream(b""));
    }

    /// A body sent one byte a frame, each frame cut from one buffer, as
    /// the server cuts them from its read buffer; it notes whether a frame
    /// given before was still kept when the next is asked for.
    struct Dribble {
        buffer: Bytes,
        at: usize,
        /// Never ends: the body stops coming after its bytes.
        stalls: bool,
        kept: Arc<std::sync::atomic::AtomicBool>,
    }

    impl hyper::body::Body for Dribble {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            if self.at > 0 && !self.buffer.is_unique() {
                self.kept.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            if self.at == self.buffer.len() {
                return match self.stalls {
                    true => std::task::Poll::Pending,
                    false => std::task::Poll::Ready(None),
                };
            }
            let at = self.at;
            self.at += 1;
            let byte = self.buffer.slice(at..at + 1);
            std::task::Poll::Ready(Some(Ok(Frame::data(byte))))
        }
    }

    fn dribble(len: usize, stalls: bool) -> (Dribble, Arc<std::sync::atomic::AtomicBool>) {
        let kept = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let buffer = Bytes::from((0..len).map(|i| i as u8).collect::<Vec<u8>>());
        let body = Dribble {
            buffer,
            at: 0,
            stalls,
            kept: kept.clone(),
        };
        (body, kept)
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// A held body sent in one-byte frames is copied out frame by frame:
    /// no frame, nor the buffer it was cut from, is kept while the rest
    /// comes (kept, 8 such bodies of 32 MiB would be gigabytes). It is
    /// read whole, and no more than the most held.
    #[test]
    fn a_held_body_keeps_no_frame() {
        let (body, kept) = dribble(100_000, false);
        let later = Instant::now() + Duration::from_secs(30);
        let read = block_on(read_body(body, 1 << 20, later)).unwrap();
        let want: Vec<u8> = (0..100_000).map(|i| i as u8).collect();
        assert_eq!(read, want);
        assert!(!kept.load(std::sync::atomic::Ordering::SeqCst));

        // Collected as frames, as it was before, the frames are kept.
        let (body, kept) = dribble(1000, false);
        let collected = block_on(http_body_util::Limited::new(body, 1 << 20).collect()).unwrap();
        assert_eq!(collected.to_bytes().len(), 1000);
        assert!(kept.load(std::sync::atomic::Ordering::SeqCst));

        let (body, _) = dribble(2000, false);
        let e = block_on(read_body(body, 1999, later)).unwrap_err();
        assert!(e.contains("at most"), "{e}");
    }

    /// A body that stops coming is given up by its time, so it keeps one
    /// of the turn's places no longer than that.
    #[test]
    fn a_held_body_that_stops_coming_is_given_up() {
        let (body, _) = dribble(10, true);
        let t = Instant::now();
        let e = block_on(read_body(body, 1 << 20, t + Duration::from_millis(300))).unwrap_err();
        assert!(e.contains("did not come whole"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn the_events_of_a_held_stream() {
        assert_eq!(
            Wire::Messages.ping(),
            Bytes::from_static(b"event: ping\ndata: {\"type\": \"ping\"}\n\n")
        );
        assert!(Wire::OpenAi.ping().starts_with(b": "));
        assert_eq!(
            Wire::Messages.error_event(&refusal_json("spent")),
            Bytes::from_static(
                b"event: error\ndata: {\"error\":{\"message\":\"spent\",\"type\":\"invalid_request_error\"},\"type\":\"error\"}\n\n"
            )
        );
    }
}
