//! What the model spent, and the session's token budget (docs/gateway.md, "Model
//! gateway").
//!
//! Each model response's token counts are read while it passes through:
//! from the server-sent events of a streamed one (`message_start`'s
//! `message.usage`, then each `message_delta`'s `usage`, whose counts are
//! cumulative: the Messages API's streaming documentation), from the body's
//! `usage` of a plain JSON one. Nothing is held back: each piece goes on
//! to the harness as it comes, and a copy is looked at on the way.
//!
//! OpenAI's answers (`Api`) read the same way: a streamed Responses API
//! answer's usage comes in its last event (`response.completed`,
//! `response.incomplete` or `response.failed`: `response.usage`), a
//! streamed Chat Completions answer's in the chunk that carries `usage`
//! (sent when the client asked `stream_options.include_usage`); a plain
//! JSON one's in the body's `usage`. Their input counts include the cached
//! input (`*_tokens_details.cached_tokens`), which is kept as the cache
//! read, so that the total is the API's own.
//!
//! The counts are kept in memory for the turn (the budget is checked
//! against them, so a response counts from the moment it ends) and written
//! to the session's record by a thread of their own, under the record's
//! lock, so a `cage limits` beside the turn loses nothing. While the turn
//! holds the session's lock, only it adds to the record's counts.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame};
use hyper::header::{self, HeaderMap};
use hyper::{Response, StatusCode};

use std::collections::BTreeMap;

use crate::settings::prices::{Counts, Prices, Usd};
use crate::state::session::{
    Charge, HistoryEntry, ModelSpend, NOT_REPORTED, Spend, Store, Tokens, TurnUsage, Usage,
};

/// The route whose responses spend tokens, and the only one a spent budget
/// refuses (counting tokens and the connectivity check spend none).
pub fn spends(method: &str, path: &str) -> bool {
    method == "POST" && path == "/v1/messages"
}

/// Which API an answer that spends tokens is of: how its counts are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Api {
    /// Anthropic's Messages API.
    #[default]
    Messages,
    /// OpenAI's Responses API.
    Responses,
    /// OpenAI's Chat Completions API.
    ChatCompletions,
}

/// The longest SSE line, and event data, looked at: the events that carry
/// usage are small; a longer line still passes on, unread.
const MAX_LINE: usize = 1 << 20;
/// The largest JSON response read for its usage.
const MAX_JSON: usize = 16 << 20;

/// Counts as the API reported them so far; a count it never gave is None.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Reported {
    input: Option<u64>,
    output: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    /// Of the cache writes, those kept an hour (`cache_creation`'s
    /// `ephemeral_1h_input_tokens`), at a higher price than the rest.
    cache_hour: Option<u64>,
}

impl Reported {
    /// Take the counts an API `usage` object gives; those it leaves out
    /// stay as they were (a `message_delta` may give `output_tokens` only).
    fn merge(&mut self, usage: &serde_json::Value) {
        let get = |k: &str| usage.get(k).and_then(serde_json::Value::as_u64);
        for (slot, key) in [
            (&mut self.input, "input_tokens"),
            (&mut self.output, "output_tokens"),
            (&mut self.cache_creation, "cache_creation_input_tokens"),
            (&mut self.cache_read, "cache_read_input_tokens"),
        ] {
            if let Some(v) = get(key) {
                *slot = Some(v);
            }
        }
        let hour = usage
            .get("cache_creation")
            .and_then(|c| c.get("ephemeral_1h_input_tokens"))
            .and_then(serde_json::Value::as_u64);
        if let Some(v) = hour {
            self.cache_hour = Some(v);
        }
    }

    /// Take the counts an OpenAI `usage` object gives (the Responses API's
    /// `input_tokens`, `output_tokens`, `input_tokens_details`; Chat
    /// Completions' `prompt_tokens`, `completion_tokens`,
    /// `prompt_tokens_details`): the cached input apart from the rest.
    fn merge_openai(&mut self, usage: &serde_json::Value) {
        let get = |k: &str| usage.get(k).and_then(serde_json::Value::as_u64);
        let input = get("input_tokens").or_else(|| get("prompt_tokens"));
        let cached = ["input_tokens_details", "prompt_tokens_details"]
            .iter()
            .find_map(|d| usage.get(*d)?.get("cached_tokens")?.as_u64());
        if let Some(i) = input {
            let c = cached.unwrap_or(0).min(i);
            self.input = Some(i - c);
            self.cache_read = Some(c);
        }
        if let Some(o) = get("output_tokens").or_else(|| get("completion_tokens")) {
            self.output = Some(o);
        }
    }

    /// Take a `usage` object of `api`'s.
    fn merge_of(&mut self, api: Api, usage: &serde_json::Value) {
        match api {
            Api::Messages => self.merge(usage),
            Api::Responses | Api::ChatCompletions => self.merge_openai(usage),
        }
    }

    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input.unwrap_or(0),
            output_tokens: self.output.unwrap_or(0),
            cache_creation_input_tokens: self.cache_creation.unwrap_or(0),
            cache_read_input_tokens: self.cache_read.unwrap_or(0),
            responses: 1,
        }
    }
}

/// Reads a stream of server-sent events (the WHATWG HTML standard's
/// "Server-sent events" syntax: lines end in CR LF, LF or CR; `field:
/// value`; a blank line ends an event) for the usage in it, in pieces cut
/// anywhere.
#[derive(Debug, Default)]
pub struct SseMeter {
    line: Vec<u8>,
    /// The line is longer than [`MAX_LINE`]: skipped to its end.
    overlong: bool,
    /// The last byte was a CR: an LF right after it ends nothing.
    after_cr: bool,
    event: String,
    data: Vec<u8>,
    data_overlong: bool,
    /// The bytes of the current event's data, read or skipped.
    data_len: u64,
    reported: Option<Reported>,
    /// The bytes of generated content (text, tool input, thinking) passed
    /// so far: what a stream cut before its final count is charged by.
    generated: u64,
    /// A `message_delta` gave the output count: it is the final one.
    output_final: bool,
    stopped: bool,
    /// Whose events these are.
    api: Api,
    /// A charge the answer reports beyond its four counts ([`beyond`]).
    beyond: Option<&'static str>,
    /// The bytes of the request's body sent so far, for an OpenAI answer:
    /// what its input is charged by when the answer never says
    /// (`SseMeter::usage`).
    sent: Option<Arc<AtomicU64>>,
    /// The model the answer says it is of: the Messages API's
    /// `message_start` `message.model`, a Responses API event's
    /// `response.model`, a Chat Completions chunk's `model`.
    model: Option<String>,
}

/// A stream cut before the API gave its final output count is charged
/// one output token per this many bytes of the content that passed: less
/// than the four characters of English text a token usually holds, so
/// that a cut stream is charged at least what it carried.
pub const BYTES_PER_TOKEN: u64 = 3;

impl SseMeter {
    /// A meter for a stream of `api`'s events.
    pub fn of(api: Api) -> SseMeter {
        SseMeter {
            api,
            ..SseMeter::default()
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, b == b'\r');
            match b {
                b'\n' if after_cr => {}
                b'\r' | b'\n' => self.end_line(),
                _ if self.overlong => self.data_len += 1,
                _ if self.line.len() >= MAX_LINE => {
                    self.overlong = true;
                    self.data_len += self.line.len() as u64 + 1;
                    self.line.clear();
                }
                _ => self.line.push(b),
            }
        }
    }

    fn end_line(&mut self) {
        let overlong = std::mem::replace(&mut self.overlong, false);
        let line = std::mem::take(&mut self.line);
        if line.starts_with(b"data:") {
            self.data_len += line.len() as u64;
        }
        if overlong {
            // A field cut short is not read: if it was data, the event is.
            self.data_overlong = true;
            return;
        }
        if line.is_empty() {
            self.dispatch();
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return, // a comment
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &[][..]),
        };
        match field {
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            b"data" if !self.data_overlong => {
                if self.data.len() + value.len() >= MAX_LINE {
                    self.data_overlong = true;
                    self.data.clear();
                } else {
                    self.data.extend_from_slice(value);
                    self.data.push(b'\n');
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self) {
        if self.api != Api::Messages {
            return self.dispatch_openai();
        }
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        let data_len = std::mem::take(&mut self.data_len);
        let named = matches!(
            event.as_str(),
            "message_start" | "message_delta" | "message_stop"
        );
        if std::mem::replace(&mut self.data_overlong, false) {
            // Too long to read: if it was content, it is charged whole.
            if !named {
                self.generated += data_len;
            }
            return;
        }
        if event == "content_block_delta" || contains(&data, b"\"content_block_delta\"") {
            self.generated += generated_bytes(&data);
            return;
        }
        // Only the events that can carry usage are parsed; the rest is
        // passed by unread.
        if !named && !contains(&data, b"\"message_") {
            return;
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&data) else {
            return;
        };
        match v.get("type").and_then(serde_json::Value::as_str) {
            Some("message_start") => {
                let mut r = Reported::default();
                if let Some(u) = v.get("message").and_then(|m| m.get("usage")) {
                    r.merge(u);
                }
                self.reported = Some(r);
                self.take_model(v.get("message"));
            }
            Some("message_delta") => {
                self.take_beyond(Some(&v));
                if let Some(u) = v.get("usage") {
                    self.reported.get_or_insert_with(Reported::default).merge(u);
                    if u.get("output_tokens")
                        .is_some_and(serde_json::Value::is_u64)
                    {
                        self.output_final = true;
                    }
                }
            }
            Some("message_stop") => self.stopped = true,
            _ => {}
        }
    }

    /// An event of an OpenAI stream: the text of a `*.delta` event (the
    /// Responses API's) or of a chunk's `choices[].delta` (Chat
    /// Completions') is generated content; the counts come in the
    /// Responses API's last event, or Chat Completions' chunk with `usage`;
    /// Chat Completions' stream ends with `data: [DONE]`.
    fn dispatch_openai(&mut self) {
        self.event.clear();
        let data = std::mem::take(&mut self.data);
        let data_len = std::mem::take(&mut self.data_len);
        if std::mem::replace(&mut self.data_overlong, false) {
            self.generated += data_len;
            return;
        }
        if data.trim_ascii() == b"[DONE]" {
            self.stopped = true;
            return;
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&data) else {
            return;
        };
        self.reported.get_or_insert_with(Reported::default);
        self.take_model(v.get("response").or(Some(&v)));
        let kind = v.get("type").and_then(serde_json::Value::as_str);
        let usage = match kind {
            Some("response.completed" | "response.incomplete" | "response.failed") => {
                self.stopped = true;
                v.get("response").and_then(|r| r.get("usage"))
            }
            Some(k) if k.ends_with(".delta") => {
                let d = v.get("delta").and_then(serde_json::Value::as_str);
                self.generated += d.map_or(0, |d| d.len() as u64);
                None
            }
            _ => {
                self.generated += chat_generated_bytes(&v);
                v.get("usage")
            }
        };
        if let Some(u) = usage.filter(|u| u.is_object()) {
            let api = self.api;
            if let Some(r) = self.reported.as_mut() {
                r.merge_of(api, u);
            }
            self.output_final = true;
        }
    }

    /// The response's counts so far; None before any was reported. Until
    /// the final output count came, the output is at least what the
    /// content that passed is worth ([`BYTES_PER_TOKEN`]): a stream cut
    /// short is charged what it carried, not the first event's count.
    pub fn usage(&self) -> Option<Usage> {
        let reported = self.reported.as_ref()?;
        let mut u = reported.usage();
        // An OpenAI stream gives its input count only at its end (a Chat
        // Completions stream only when asked): without it, the input is
        // charged by the request's body, as the output by what passed.
        if reported.input.is_none()
            && let Some(sent) = &self.sent
        {
            u.input_tokens = sent.load(Ordering::Relaxed).div_ceil(BYTES_PER_TOKEN);
        }
        if !self.output_final {
            u.output_tokens = u
                .output_tokens
                .max(self.generated.div_ceil(BYTES_PER_TOKEN));
        }
        Some(u)
    }

    /// The `model` of an object of the answer's, if it names one, and any
    /// charge it reports beyond the four counts.
    fn take_model(&mut self, of: Option<&serde_json::Value>) {
        if let Some(m) = model_of(of) {
            self.model = Some(m);
        }
        self.take_beyond(of);
    }

    fn take_beyond(&mut self, of: Option<&serde_json::Value>) {
        if let Some(b) = of.and_then(beyond) {
            self.beyond = Some(b);
        }
    }

    /// The model the answer said it is of, so far.
    #[cfg(test)]
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Has the stream's first event, with its input counts, been read?
    pub fn started(&self) -> bool {
        self.reported.is_some()
    }

    /// Has enough been read to charge the answer, were it cut now? A
    /// Messages stream once its first event (the input counts) came, the
    /// output being charged by what passed; an OpenAI stream only at its
    /// end, where its only counts come.
    pub fn enough(&self) -> bool {
        match self.api {
            Api::Messages => self.started() || self.ended(),
            Api::Responses | Api::ChatCompletions => self.ended(),
        }
    }

    /// Has the message ended (`message_stop`)? Its counts are final then.
    pub fn ended(&self) -> bool {
        self.stopped
    }
}

/// The bytes of generated content a `content_block_delta` event carries:
/// its text, tool input or thinking (its JSON unescaped); an event that
/// does not read is charged whole.
fn generated_bytes(data: &[u8]) -> u64 {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return data.len() as u64;
    };
    let Some(delta) = v.get("delta").and_then(serde_json::Value::as_object) else {
        return 0;
    };
    ["text", "partial_json", "thinking"]
        .iter()
        .filter_map(|k| delta.get(*k).and_then(serde_json::Value::as_str))
        .map(|t| t.len() as u64)
        .sum()
}

/// The bytes of generated content a Chat Completions chunk carries: each
/// choice's `delta` text (`content`, `reasoning_content`, `refusal`) and
/// its tool calls' `function.arguments`.
fn chat_generated_bytes(chunk: &serde_json::Value) -> u64 {
    let Some(choices) = chunk.get("choices").and_then(serde_json::Value::as_array) else {
        return 0;
    };
    let len = |v: Option<&serde_json::Value>| {
        v.and_then(serde_json::Value::as_str)
            .map_or(0, |t| t.len() as u64)
    };
    let mut n = 0;
    for delta in choices.iter().filter_map(|c| c.get("delta")) {
        n += ["content", "reasoning_content", "refusal"]
            .iter()
            .map(|k| len(delta.get(*k)))
            .sum::<u64>();
        let calls = delta
            .get("tool_calls")
            .and_then(serde_json::Value::as_array);
        for call in calls.into_iter().flatten() {
            n += len(call.get("function").and_then(|f| f.get("arguments")));
        }
    }
    n
}

/// A charge an answer's object (a message, a response, a chunk, with its
/// `usage`) reports beyond the four counts a price takes, which a dollar
/// figure would leave out: Anthropic's server tools (web search is charged
/// per search) and the priority tier; OpenAI's audio tokens,
/// its tools charged per call (web search, file search, code interpreter,
/// image generation) and its priority and scale tiers. Such an answer has
/// no price (`charge` names it so): under a dollar budget its session's
/// requests are refused, and the day counts it at the table's highest
/// prices, rather than the budget taking it for less than it cost.
fn beyond(of: &serde_json::Value) -> Option<&'static str> {
    use serde_json::Value;
    let positive = |v: Option<&Value>| v.and_then(Value::as_u64).is_some_and(|n| n > 0);
    let usage = of.get("usage");
    let at = |path: &[&str]| path.iter().try_fold(usage?, |v, k| v.get(*k));
    if let Some(Value::Object(tools)) = at(&["server_tool_use"])
        && tools.values().any(|n| positive(Some(n)))
    {
        return Some("server tools");
    }
    for details in [
        "input_tokens_details",
        "output_tokens_details",
        "prompt_tokens_details",
        "completion_tokens_details",
    ] {
        if positive(at(&[details, "audio_tokens"])) {
            return Some("audio");
        }
    }
    if matches!(
        at(&["service_tier"]).and_then(Value::as_str),
        Some("priority")
    ) || matches!(
        of.get("service_tier").and_then(Value::as_str),
        Some("priority" | "scale")
    ) {
        return Some("priority tier");
    }
    let tools = of
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for item in tools {
        if let Some(
            t @ ("web_search_call"
            | "file_search_call"
            | "code_interpreter_call"
            | "image_generation_call"),
        ) = item.get("type").and_then(Value::as_str)
        {
            return Some(match t {
                "web_search_call" => "web search",
                "file_search_call" => "file search",
                "code_interpreter_call" => "code interpreter",
                _ => "image generation",
            });
        }
    }
    None
}

/// The model an answer is kept under: its model, or with a charge beyond
/// its counts, its model `with` that charge, which no price names (a model
/// id has no space).
fn kept_as(model: Option<String>, beyond: Option<&str>) -> Option<String> {
    match beyond {
        None => model,
        Some(b) => Some(format!(
            "{} with {b}",
            model.as_deref().unwrap_or(NOT_REPORTED)
        )),
    }
}

/// The longest model id kept: longer, an answer names no model.
const MAX_MODEL: usize = 128;

/// An object's `model`, when it is a model id: at most [`MAX_MODEL`]
/// bytes of letters, digits and `-._:/@`. Any other text is taken as no
/// model: it goes into the record, the day's file and the terminal's
/// words, and an upstream that echoes what the cage asked for could put
/// anything there.
fn model_of(of: Option<&serde_json::Value>) -> Option<String> {
    of?.get("model")?
        .as_str()
        .map(str::trim)
        .filter(|m| {
            !m.is_empty()
                && m.len() <= MAX_MODEL
                && m.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._:/@".contains(&b))
        })
        .map(str::to_string)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Reads a JSON response for its `usage`: a copy of the body, up to
/// [`MAX_JSON`], parsed at its end.
#[derive(Debug, Default)]
pub struct JsonMeter {
    body: Vec<u8>,
    too_long: bool,
    /// The body's bytes that came, kept or not: what its output is
    /// charged by when it says no counts.
    seen: u64,
    /// The bytes of the request's body sent, for an OpenAI answer: what
    /// its input is charged by when it says no counts.
    sent: Option<Arc<AtomicU64>>,
    /// The body's length, where the response said it.
    length: Option<usize>,
    /// Whose body this is.
    api: Api,
}

impl JsonMeter {
    pub fn feed(&mut self, bytes: &[u8]) {
        self.seen += bytes.len() as u64;
        if self.too_long {
            return;
        }
        if self.body.len() + bytes.len() > MAX_JSON {
            self.too_long = true;
            self.body = Vec::new();
        } else {
            self.body.extend_from_slice(bytes);
        }
    }

    /// Has the whole body, as long as the response said, come?
    pub fn ended(&self) -> bool {
        !self.too_long && self.length == Some(self.body.len())
    }

    #[cfg(test)]
    pub fn usage(&self) -> Option<Usage> {
        self.read().0.map(|r| r.usage())
    }

    /// The body's counts, and the model it says it is of (its `model`).
    fn read(&self) -> (Option<Reported>, Option<String>) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&self.body) else {
            return (None, None);
        };
        let reported = v.get("usage").filter(|u| u.is_object()).map(|u| {
            let mut r = Reported::default();
            r.merge_of(self.api, u);
            r
        });
        (reported, kept_as(model_of(Some(&v)), beyond(&v)))
    }
}

/// Pure: what an answer that gave no counts is charged: one token per
/// [`BYTES_PER_TOKEN`] bytes of the request's body for its input and of
/// what came back for its output.
fn estimate(sent: Option<&Arc<AtomicU64>>, output_bytes: u64) -> Usage {
    Usage {
        input_tokens: sent.map_or(0, |s| s.load(Ordering::Relaxed).div_ceil(BYTES_PER_TOKEN)),
        output_tokens: output_bytes.div_ceil(BYTES_PER_TOKEN),
        responses: 1,
        ..Usage::default()
    }
}

/// A response's meter, by its content type.
#[derive(Debug)]
enum Meter {
    Sse(SseMeter),
    Json(JsonMeter),
}

impl Meter {
    /// The meter for an answer of this type; None: not a type the gateway
    /// reads. `encoded`: the body comes compressed, so its length says
    /// nothing of the JSON's.
    fn for_response(
        headers: &HeaderMap,
        encoded: bool,
        api: Api,
        sent: Option<Arc<AtomicU64>>,
    ) -> Option<Meter> {
        let ctype = content_type(headers);
        if ctype.starts_with("text/event-stream") {
            Some(Meter::Sse(SseMeter {
                sent,
                ..SseMeter::of(api)
            }))
        } else if ctype.starts_with("application/json") {
            let length = headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
                .filter(|_| !encoded);
            Some(Meter::Json(JsonMeter {
                length,
                api,
                sent,
                ..JsonMeter::default()
            }))
        } else {
            None
        }
    }
    fn feed(&mut self, b: &[u8]) {
        match self {
            Meter::Sse(m) => m.feed(b),
            Meter::Json(m) => m.feed(b),
        }
    }
    fn ended(&self) -> bool {
        match self {
            Meter::Sse(m) => m.ended(),
            Meter::Json(m) => m.ended(),
        }
    }
    /// What the answer is charged, whether those are the API's own counts
    /// (its input and output both reported) rather than the gateway's
    /// estimate, and the model the answer said it is of.
    fn charge(&self) -> (Option<Usage>, bool, Option<String>) {
        match self {
            Meter::Sse(m) => {
                let reported = m.output_final
                    && m.reported
                        .is_some_and(|r| r.input.is_some() && r.output.is_some());
                let usage = match m.api {
                    Api::Messages => m.usage(),
                    Api::Responses | Api::ChatCompletions => Some(
                        m.usage()
                            .unwrap_or_else(|| estimate(m.sent.as_ref(), m.generated)),
                    ),
                };
                (usage, reported, kept_as(m.model.clone(), m.beyond))
            }
            Meter::Json(m) => {
                let (r, model) = m.read();
                match (m.api, r) {
                    (_, Some(r)) if r.input.is_some() && r.output.is_some() => {
                        (Some(r.usage()), true, model)
                    }
                    (Api::Messages, r) => (r.map(|r| r.usage()), false, model),
                    (_, _) => (Some(estimate(m.sent.as_ref(), m.seen)), false, model),
                }
            }
        }
    }

    /// Of the answer's cache writes, those kept an hour.
    fn cache_hour(&self) -> u64 {
        let reported = match self {
            Meter::Sse(m) => m.reported,
            Meter::Json(m) => m.read().0,
        };
        reported.and_then(|r| r.cache_hour).unwrap_or(0)
    }

    /// Whose answer this is.
    fn api(&self) -> Api {
        match self {
            Meter::Sse(m) => m.api,
            Meter::Json(m) => m.api,
        }
    }

    /// Has enough been read to charge the answer, were it cut now? A
    /// stream once its first event (the input counts) came, the output
    /// being charged by what passed; a JSON answer only whole (its counts
    /// come last, and it is generated whole before it is sent).
    fn enough(&self) -> bool {
        match self {
            Meter::Sse(m) => m.enough(),
            Meter::Json(m) => m.ended(),
        }
    }
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// How an answer's body is encoded (RFC 9110, section 8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
}

/// The answer's `Content-Encoding`, if the gateway reads it: none (or
/// `identity`), else one `gzip` (the gateway asks for `identity`; an
/// upstream that compresses all the same is read through a decoder).
/// Anything else is named in the error.
pub fn encoding(headers: &HeaderMap) -> std::result::Result<Encoding, String> {
    let mut codings = Vec::new();
    for v in headers.get_all(header::CONTENT_ENCODING) {
        let Ok(v) = v.to_str() else {
            return Err("(not text)".to_string());
        };
        codings.extend(
            v.split(',')
                .map(|c| c.trim().to_ascii_lowercase())
                .filter(|c| !c.is_empty() && c != "identity"),
        );
    }
    match codings.as_slice() {
        [] => Ok(Encoding::Identity),
        [c] if c == "gzip" || c == "x-gzip" => Ok(Encoding::Gzip),
        _ => Err(codings.join(", ")),
    }
}

/// Where a decoder writes: the meter.
#[derive(Debug)]
struct MeterSink(Meter);

impl std::io::Write for MeterSink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.feed(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The meter, behind a decoder when the answer is compressed.
enum Reader {
    Plain(Box<Meter>),
    Gzip(Box<flate2::write::MultiGzDecoder<MeterSink>>),
}

impl Reader {
    fn feed(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Reader::Plain(m) => {
                m.feed(b);
                Ok(())
            }
            // Flushed at once: what decoded reaches the meter now, not at
            // the decoder's next write.
            Reader::Gzip(d) => {
                std::io::Write::write_all(d, b)?;
                std::io::Write::flush(d)
            }
        }
    }
    fn meter(&self) -> &Meter {
        match self {
            Reader::Plain(m) => m,
            Reader::Gzip(d) => &d.get_ref().0,
        }
    }
}

/// A response body that passes each frame on as it comes and counts the
/// usage in it; the counts go to the ledger when the message ends, or when
/// the body is dropped before (a harness that went away: what passed until
/// then still counts).
pub struct Metered {
    inner: reqwest::Body,
    reader: Option<Reader>,
    ledger: Arc<Ledger>,
    /// Read on after the harness went away, for the counts alone.
    draining: bool,
    /// The turn's gate, held while a session with a budget waits for this
    /// answer's counts (`Ledger::admit`): let go once it is counted.
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The request went upstream on a subscription sign-in.
    subscription: bool,
}

/// How long an answer is read on, at most, after its harness went away
/// before it could be charged.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

impl Metered {
    fn record(&mut self) {
        if let Some(reader) = self.reader.take() {
            let meter = reader.meter();
            let (usage, reported, model) = meter.charge();
            if let Some(u) = usage {
                let hour = meter.cache_hour().min(u.cache_creation_input_tokens);
                self.ledger
                    .add_with_hour_writes(u, model.as_deref(), self.subscription, hour);
            }
            // An OpenAI answer that ended without its counts (a background
            // response, which answers at once while the model runs on; a
            // body or an event too long to read; a Chat Completions stream
            // not asked `include_usage`, whose hidden reasoning no text
            // shows): charged the estimate, and the turn spends nothing
            // more, since what it spent is not known.
            if meter.api() != Api::Messages && !reported {
                self.ledger
                    .stop_spending("an answer of OpenAI's API ended without its token counts");
            }
        }
        // Counted: the next model request may pass.
        self.permit = None;
    }

    fn feed(&mut self, data: &[u8]) {
        let Some(r) = self.reader.as_mut() else {
            return;
        };
        if let Err(e) = r.feed(data) {
            // What was read so far counts; what follows cannot be.
            self.record();
            self.ledger
                .stop_spending(&format!("its compressed body does not decode: {e}"));
            return;
        }
        // Counted before the harness gets the end of the message, so its
        // next request meets the new total.
        if r.meter().ended() {
            self.record();
        }
    }

    /// Is there nothing more to learn by reading on?
    fn charged(&self) -> bool {
        self.reader.as_ref().is_none_or(|r| r.meter().enough())
    }
}

impl Body for Metered {
    type Data = Bytes;
    type Error = reqwest::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, reqwest::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.feed(data);
                }
            }
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => {
                if let Some(Reader::Gzip(d)) = this.reader.as_mut() {
                    let _ = d.try_finish();
                }
                this.record();
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        // The harness went away before the answer could be charged (a
        // stream before its first event, a JSON answer before its counts,
        // which come last): the rest is read here, for the counts alone,
        // and the upstream request dropped once they came. A Messages
        // stream is not read past its first event: what did not pass is
        // not generated. An OpenAI stream's counts come only in its last
        // event: it is read to its end (`SseMeter::enough`).
        if !self.draining
            && !self.charged()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let mut rest = Metered {
                inner: std::mem::replace(&mut self.inner, reqwest::Body::from(Vec::<u8>::new())),
                reader: self.reader.take(),
                ledger: self.ledger.clone(),
                draining: true,
                permit: self.permit.take(),
                subscription: self.subscription,
            };
            runtime.spawn(async move {
                use http_body_util::BodyExt;
                let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
                    while !rest.charged() {
                        match rest.frame().await {
                            Some(Ok(_)) => {}
                            _ => break,
                        }
                    }
                })
                .await;
            });
            return;
        }
        self.record();
    }
}

/// The upstream's answer, its usage counted if it is a model response
/// (`api`: of which API; None: not one that spends tokens). An answer the gateway cannot read for its counts (an
/// encoding or type it does not read) is not passed on uncounted: the
/// harness gets an error in its place and the turn spends nothing more.
/// `permit`, the turn's gate where the session has a budget, is held until
/// the answer is counted. `sent`: the bytes of the request's body, as
/// `Counted` counts them (OpenAI's requests). `subscription`: it went
/// upstream on a subscription sign-in.
pub fn metered(
    ledger: &Arc<Ledger>,
    api: Option<Api>,
    sent: Option<Arc<AtomicU64>>,
    response: Response<reqwest::Body>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    subscription: bool,
) -> Response<reqwest::Body> {
    let Some(api) = api.filter(|_| response.status().is_success()) else {
        return response;
    };
    let encoding = match encoding(response.headers()) {
        Ok(e) => e,
        Err(what) => {
            return unmeterable(
                ledger,
                &format!("its Content-Encoding {what} is not one the gateway reads"),
            );
        }
    };
    let encoded = encoding != Encoding::Identity;
    let Some(meter) = Meter::for_response(response.headers(), encoded, api, sent) else {
        let ctype = content_type(response.headers());
        return unmeterable(
            ledger,
            &format!("its Content-Type {ctype:?} is not one the gateway reads"),
        );
    };
    let reader = match encoding {
        Encoding::Identity => Reader::Plain(Box::new(meter)),
        Encoding::Gzip => Reader::Gzip(Box::new(flate2::write::MultiGzDecoder::new(MeterSink(
            meter,
        )))),
    };
    let ledger = ledger.clone();
    response.map(|inner| {
        reqwest::Body::wrap(Metered {
            inner,
            reader: Some(reader),
            ledger,
            draining: false,
            permit,
            subscription,
        })
    })
}

/// A request body passed on as it comes, its bytes counted into `sent`.
pub struct Counted<B> {
    inner: B,
    sent: Arc<AtomicU64>,
}

impl<B> Counted<B> {
    pub fn new(inner: B, sent: Arc<AtomicU64>) -> Counted<B> {
        Counted { inner, sent }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Counted<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.sent.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// In place of an answer that cannot be counted: the turn spends nothing
/// more, the terminal is told why, the harness gets fixed words (nothing
/// of the upstream's answer).
fn unmeterable(ledger: &Ledger, why: &str) -> Response<reqwest::Body> {
    ledger.stop_spending(why);
    super::api_error(StatusCode::BAD_GATEWAY, "api_error", UNMETERED)
}

/// What the harness is told when an answer could not be counted, and at
/// each model request of the turn after it.
pub const UNMETERED: &str = "shrooms-agent's model gateway could not count the tokens of an \
    answer of the model API, so it did not pass it on and refuses this turn's model requests; \
    the terminal of the turn says why";

/// What the harness is told at each model request after that.
pub const STOPPED: &str = "shrooms-agent's model gateway could not count the tokens of an \
    answer of the model API this turn, so it refuses the turn's model requests; the terminal of \
    the turn says why";

/// What a turn spent: summed in memory, written to the session's record
/// as it goes, and a line of the session's history at its end.
pub struct Ledger {
    session: String,
    store: Store,
    /// Who the history line names.
    who: String,
    /// The session's total when the turn began.
    before: Usage,
    state: Mutex<Turn>,
    writer: Mutex<Option<Writer>>,
    /// Held while the waiting marker is written or removed, as the count
    /// of held requests says then: a wait that begins as another ends
    /// leaves the marker as the count is.
    marker: Mutex<()>,
    /// One model request at a time while the session has a budget: the
    /// next is let through once the answer before it is counted.
    gate: Arc<tokio::sync::Semaphore>,
    /// What answers cost, and what the session spent in dollars when the
    /// turn began (`Ledger::priced`).
    prices: Prices,
    before_models: BTreeMap<String, ModelSpend>,
    /// The day's spend, and what of the turn's is not in it yet.
    day: Arc<DaySpend>,
    /// The config file, read again for the daily budget at each model
    /// request (`Ledger::with_daily_budget`); None: none applies.
    config: Option<std::path::PathBuf>,
}

/// The state folder's day files (`state::spend`), and the tokens the turn
/// counted that its writer has yet to add to them: read together under
/// their lock, so each answer counts once in today's total, in one or the
/// other, even before the writer got to it.
struct DaySpend {
    dir: std::path::PathBuf,
    unwritten: AtomicU64,
    /// The same of the priced answers' dollars, in billionths.
    unwritten_usd: AtomicU64,
}

/// What a model request may do now (`Ledger::admit`).
pub enum Admitted {
    /// Refused, for this reason.
    Refused(String),
    /// At a budget: held until it is raised (`super::hold`).
    AtBudget(AtBudget),
    /// Let through; with a budget, holding the turn's gate until its
    /// answer is counted.
    Pass(Option<tokio::sync::OwnedSemaphorePermit>),
}

#[derive(Default)]
struct Turn {
    spent: Usage,
    refused: u64,
    told: bool,
    /// An answer could not be counted: the turn spends nothing more.
    stopped: bool,
    /// Model requests held at a budget now.
    waiting: usize,
    /// A held request waited as long as the config says, and was refused:
    /// the turn's next ones at a budget are refused at once (a harness
    /// that retries is not held again and again).
    gave_up: bool,
    /// The turn's tokens by model, on a key and on a subscription.
    by_model: BTreeMap<String, ModelSpend>,
    subscription: BTreeMap<String, Usage>,
    /// Why a request was last refused for the dollar budget, for the
    /// history line.
    refused_for: Option<&'static str>,
}

struct Writer {
    send: mpsc::Sender<Charge>,
    thread: std::thread::JoinHandle<()>,
}

impl Ledger {
    /// A turn's ledger; `before` is the session's total as its record says.
    pub fn new(store: Store, session: &str, who: &str, before: Usage) -> Ledger {
        let (send, receive) = mpsc::channel::<Charge>();
        let started = crate::state::when::now();
        let (s, name) = (store.clone(), session.to_string());
        let day = Arc::new(DaySpend {
            dir: store.spend_dir(),
            unwritten: AtomicU64::new(0),
            unwritten_usd: AtomicU64::new(0),
        });
        let d = day.clone();
        let thread = std::thread::Builder::new()
            .name("shrooms-usage".into())
            .spawn(move || write_all(&s, &name, started, receive, &d));
        let writer = match thread {
            Ok(thread) => Some(Writer { send, thread }),
            Err(e) => {
                eprintln!(
                    "shrooms-agent: session {session}: token counts will not be kept \
                     in its record: {e}"
                );
                None
            }
        };
        Ledger {
            session: session.to_string(),
            store,
            who: who.to_string(),
            before,
            state: Mutex::new(Turn::default()),
            writer: Mutex::new(writer),
            marker: Mutex::new(()),
            gate: Arc::new(tokio::sync::Semaphore::new(1)),
            day,
            config: None,
            prices: Prices::default(),
            before_models: BTreeMap::new(),
        }
    }

    /// The machine's daily budget applies to the turn: `[budget]
    /// daily_tokens` of `config_path`, read at each model request.
    pub fn with_daily_budget(mut self, config_path: &std::path::Path) -> Ledger {
        self.config = Some(config_path.to_path_buf());
        self
    }

    /// The prices answers are charged at, and the session's spend by
    /// model when the turn began (its record's).
    pub fn priced(mut self, prices: Prices, before: &Tokens) -> Ledger {
        self.prices = prices;
        self.before_models = before.by_model.clone();
        self
    }

    /// Whether a model request passes now. Without a budget, at once. With
    /// one, the request first waits for the turn's gate, so that every
    /// answer before it is counted (a harness can send its next request
    /// the moment it has read an answer, before the gateway has read its
    /// end; and the same turn's requests at once would each be let through
    /// on the total before them): the budget is checked against them all.
    pub async fn admit(self: &Arc<Self>) -> Admitted {
        let check = |ledger: Arc<Ledger>| async move {
            tokio::task::spawn_blocking(move || ledger.check())
                .await
                .unwrap_or_else(|e| Check::Refused(format!("shrooms-agent's model gateway: {e}")))
        };
        match check(self.clone()).await {
            Check::Refused(why) => return Admitted::Refused(why),
            Check::AtBudget(at) => return Admitted::AtBudget(at),
            Check::Pass { budget: false } => return Admitted::Pass(None),
            Check::Pass { budget: true } => {}
        }
        let Ok(permit) = self.gate.clone().acquire_owned().await else {
            // Never closed; were it, nothing would be counted in order.
            return Admitted::Refused("shrooms-agent's model gateway is closing".to_string());
        };
        match check(self.clone()).await {
            Check::Refused(why) => Admitted::Refused(why),
            Check::AtBudget(at) => Admitted::AtBudget(at),
            Check::Pass { .. } => Admitted::Pass(Some(permit)),
        }
    }

    fn turn(&self) -> std::sync::MutexGuard<'_, Turn> {
        // A panic elsewhere leaves the sums as they were: still good.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Count one response: its tokens, of `model` (as the answer said),
    /// priced unless it went upstream on a subscription sign-in.
    #[cfg(test)]
    pub fn add(&self, usage: Usage, model: Option<&str>, subscription: bool) {
        self.add_with_hour_writes(usage, model, subscription, 0);
    }

    /// [`Ledger::add`], `hour` of its cache writes being kept an hour, at
    /// their own price
    /// ([`crate::settings::prices::Price::cost_of_hour_writes`]).
    pub fn add_with_hour_writes(
        &self,
        usage: Usage,
        model: Option<&str>,
        subscription: bool,
        hour: u64,
    ) {
        let model = model.unwrap_or(NOT_REPORTED).to_string();
        let usd = (!subscription)
            .then(|| self.prices.of(&model))
            .flatten()
            .map(|p| p.cost(&counts(&usage)).add(p.cost_of_hour_writes(hour)));
        let day_usd = (!subscription).then(|| {
            usd.unwrap_or_else(|| {
                let ceiling = self.prices.ceiling();
                ceiling
                    .cost(&counts(&usage))
                    .add(ceiling.cost_of_hour_writes(hour))
            })
        });
        let c = Charge {
            usage,
            model,
            subscription,
            usd,
            day_usd,
        };
        {
            let mut t = self.turn();
            let t = &mut *t;
            t.spent.add(&usage);
            crate::state::session::charge(&mut t.by_model, &mut t.subscription, &c);
        }
        // Before the writer can take it off (`DaySpend`).
        self.day
            .unwritten
            .fetch_add(usage.total(), Ordering::SeqCst);
        if let Some(u) = day_usd {
            self.day.unwritten_usd.fetch_add(u.0, Ordering::SeqCst);
        }
        if let Some(w) = self
            .writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            let _ = w.send.send(c);
        }
    }

    /// The session's spend in dollars now: its record's when the turn
    /// began and this turn's.
    pub fn spent_usd(&self) -> Spend {
        let mut models = self.before_models.clone();
        let t = self.turn();
        for (m, s) in &t.by_model {
            let e = models.entry(m.clone()).or_insert(ModelSpend {
                usage: Usage::default(),
                usd: Some(Usd::default()),
            });
            e.usage.add(&s.usage);
            e.usd = e.usd.zip(s.usd).map(|(a, b)| a.add(b));
        }
        crate::state::session::spend_of(&models, &t.subscription)
    }

    /// The dollar criterion: the session's dollar budget
    /// (`tokens.usd_budget`, its record's now) is spent (the request is
    /// held), or what was spent is not known, as a model had no price (it
    /// is refused: raising the budget would not tell it).
    fn usd_refusal(&self, tokens: &Tokens) -> Option<Check> {
        let budget = tokens.usd_budget?;
        let spend = self.spent_usd();
        let (why, check) = match spend.usd {
            None => (
                "no price to count the dollar budget by",
                Check::Refused(unpriced(&self.session, &spend.unpriced, budget)),
            ),
            Some(spent) if spent >= budget => (
                "dollar budget spent",
                Check::AtBudget(AtBudget {
                    budget: "session",
                    why: usd_spent(&self.session, spent, budget),
                }),
            ),
            Some(_) => return None,
        };
        self.turn().refused_for = Some(why);
        Some(check)
    }

    /// Why a model request that would go upstream on a subscription sign-in
    /// (`what`) must be refused, if it must: the session has a dollar
    /// budget, which a subscription's spend cannot be counted against (it
    /// has no price per token). Blocking: reads the record.
    pub fn subscription_refusal(&self, what: &str) -> Option<String> {
        let budget = match self.store.load(&self.session) {
            Ok(r) => r.tokens.usd_budget?,
            Err(e) => {
                return Some(format!(
                    "shrooms-agent could not read session {}'s dollar budget: {}",
                    self.session,
                    e.message()
                ));
            }
        };
        self.turn().refused_for = Some("dollar budget on a subscription sign-in");
        Some(on_subscription(&self.session, what, budget))
    }

    /// The session's spent tokens now: its record's total when the turn
    /// began and this turn's.
    pub fn spent(&self) -> Usage {
        let mut u = self.before;
        u.add(&self.turn().spent);
        u
    }

    /// Why a model request must be refused now, if it must: the session's
    /// budget (read from its record at each request, so a `cage limits`
    /// during the turn counts at once) is spent. Blocking: reads a file.
    #[cfg(test)]
    pub fn refusal(&self) -> Option<String> {
        match self.check() {
            Check::Refused(why) | Check::AtBudget(AtBudget { why, .. }) => Some(why),
            Check::Pass { .. } => None,
        }
    }

    /// [`Ledger::refusal`], and whether the session has a budget.
    fn check(&self) -> Check {
        if self.turn().stopped {
            return Check::Refused(STOPPED.to_string());
        }
        let daily = match self.daily() {
            Ok(daily) => daily,
            Err(check) => return check,
        };
        let budget = match self.store.load(&self.session) {
            Ok(r) => {
                if let Some(check) = self.usd_refusal(&r.tokens) {
                    return check;
                }
                match r.tokens.budget {
                    Some(b) => b,
                    None => {
                        return Check::Pass {
                            budget: daily || r.tokens.usd_budget.is_some(),
                        };
                    }
                }
            }
            Err(e) => {
                // Not knowing the budget, nothing is spent past it.
                return Check::Refused(format!(
                    "shrooms-agent could not read session {}'s token budget: {}",
                    self.session,
                    e.message()
                ));
            }
        };
        let spent = self.spent().total();
        if spent >= budget {
            self.turn().refused_for = Some("token budget spent");
            Check::AtBudget(AtBudget {
                budget: "session",
                why: budget_spent(&self.session, spent, budget),
            })
        } else {
            Check::Pass { budget: true }
        }
    }

    /// The machine's daily budget, read from the config file at each call
    /// (it may be changed while a turn runs): Ok(whether there is one) while
    /// today's spend, all sessions together, is under it; Err(at the
    /// budget) once it is reached, or Err(refused) when the budget or the
    /// day's spend cannot be read (nothing is spent past a budget not
    /// known). A read of the config and one of the day's file.
    fn daily(&self) -> std::result::Result<bool, Check> {
        let Some(config) = &self.config else {
            return Ok(false);
        };
        let budget = crate::settings::budget_of(config).map_err(|e| {
            Check::Refused(format!(
                "shrooms-agent could not read this machine's daily budget: {}",
                e.message()
            ))
        })?;
        if budget.daily_tokens.is_none() && budget.daily_usd.is_none() {
            return Ok(false);
        }
        let day = crate::state::spend::today();
        let dir = &self.day.dir;
        let (spent, usd) = crate::state::spend::locked(dir, || {
            let written = crate::state::spend::read(dir, day)?;
            let unwritten = |n: &AtomicU64| n.load(Ordering::SeqCst);
            Ok((
                written
                    .total
                    .total()
                    .saturating_add(unwritten(&self.day.unwritten)),
                Usd(written
                    .usd
                    .saturating_add(unwritten(&self.day.unwritten_usd))),
            ))
        })
        .map_err(|e| {
            Check::Refused(format!(
                "shrooms-agent could not read what this machine spent today: {}",
                e.message()
            ))
        })?;
        let at = |why: String| {
            Err(Check::AtBudget(AtBudget {
                budget: "daily",
                why,
            }))
        };
        if let Some(b) = budget.daily_tokens
            && spent >= b
        {
            self.turn().refused_for = Some("daily token budget spent");
            return at(daily_spent(&day.to_string(), spent, b, config));
        }
        if let Some(b) = budget.daily_usd
            && usd >= b
        {
            self.turn().refused_for = Some("daily dollar budget spent");
            return at(daily_usd_spent(&day.to_string(), usd, b, config));
        }
        Ok(true)
    }

    /// An answer could not be counted (`why`, for the terminal): the
    /// turn's model requests are refused from now on, whatever its budget,
    /// since what it spent is no longer known.
    pub fn stop_spending(&self, why: &str) {
        if !std::mem::replace(&mut self.turn().stopped, true) {
            eprintln!(
                "shrooms-agent: session {}: an answer of the model API could not be counted \
                 ({why}); the model gateway refuses the turn's model requests",
                self.session
            );
        }
    }

    /// A model request is held at a budget (`why`, the words of
    /// `budget_spent`) until the returned guard is dropped. The first of
    /// the turn's held requests writes the session's waiting marker (what
    /// `cage ls`, `cage show` and serve's page show) and tells the
    /// terminal; the last one to go removes it.
    /// None when [`MAX_HELD`] requests are held already: a cage that sends
    /// more is not given more of this process's memory and time.
    pub fn waiting(
        self: &Arc<Self>,
        budget: &str,
        why: &str,
        wait: std::time::Duration,
    ) -> Option<Held> {
        let first = {
            let mut t = self.turn();
            if t.waiting >= MAX_HELD {
                return None;
            }
            t.waiting += 1;
            t.waiting == 1
        };
        if first {
            let _marker = self.marker.lock().unwrap_or_else(|e| e.into_inner());
            let marker = crate::state::session::Waiting {
                since: crate::state::when::now(),
                since_rfc3339: String::new(),
                budget: budget.to_string(),
                why: why.to_string(),
            };
            if let Err(e) = self.store.set_waiting(&self.session, &marker) {
                eprintln!(
                    "shrooms-agent: session {}: its waiting on the budget will not be shown: {}",
                    self.session,
                    e.message()
                );
            }
            eprintln!(
                "shrooms-agent: {why}. Its model request waits (at most {}) and goes on as \
                 soon as the budget is raised.",
                crate::state::when::span(wait.as_secs())
            );
        }
        Some(Held {
            ledger: self.clone(),
        })
    }

    /// A held request waited as long as it may: the turn's next requests
    /// at a budget are refused at once.
    pub fn give_up(&self) {
        self.turn().gave_up = true;
    }

    /// Has a held request of this turn waited as long as it may?
    pub fn gave_up(&self) -> bool {
        self.turn().gave_up
    }

    /// Note a refused request; true the first time in the turn (the
    /// terminal is told once).
    pub fn refused(&self) -> bool {
        let mut t = self.turn();
        t.refused += 1;
        !std::mem::replace(&mut t.told, true)
    }

    /// End the turn: wait for the record to be written, then add the
    /// turn's line to the history if it reached the model or was refused.
    /// Called once the gateway has stopped; a second call does nothing.
    pub fn finish(&self) {
        let Some(w) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        drop(w.send);
        let _ = w.thread.join();
        let (spent, refused, stopped, spend, refused_for) = {
            let t = self.turn();
            let spend = crate::state::session::spend_of(&t.by_model, &t.subscription);
            (t.spent, t.refused, t.stopped, spend, t.refused_for)
        };
        let refused = Refused {
            count: refused,
            why: refused_for,
        };
        let Some(what) = turn_line(&spent, &spend, &refused, stopped) else {
            return;
        };
        let entry = HistoryEntry {
            when: crate::state::when::now(),
            who: self.who.clone(),
            what,
        };
        if let Err(e) = self.store.append_history(&self.session, &entry) {
            eprintln!(
                "shrooms-agent: session {}: the turn's line could not be added to its \
                 history: {}",
                self.session,
                e.message()
            );
        }
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The most model requests a turn has held at a budget at once: each
/// keeps its body in memory (`super::hold`), and a harness sends one or two
/// at a time (subagents a few more).
pub const MAX_HELD: usize = 8;

/// A model request held at a budget ([`Ledger::waiting`]); the last one
/// dropped removes the session's waiting marker.
pub struct Held {
    ledger: Arc<Ledger>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let last = {
            let mut t = self.ledger.turn();
            t.waiting = t.waiting.saturating_sub(1);
            t.waiting == 0
        };
        if last {
            let _marker = self.ledger.marker.lock().unwrap_or_else(|e| e.into_inner());
            // A wait may have begun since, and written its marker.
            if self.ledger.turn().waiting == 0 {
                self.ledger.store.clear_waiting(&self.ledger.session);
            }
        }
    }
}

/// A budget reached: which (`session`, the session's own; `daily`, the
/// machine's of the day), and the words that say what was spent and how
/// to raise it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtBudget {
    pub budget: &'static str,
    pub why: String,
}

/// What the record says of a model request now.
enum Check {
    Refused(String),
    AtBudget(AtBudget),
    Pass { budget: bool },
}

/// Pure: an answer's counts as prices take them.
fn counts(u: &Usage) -> Counts {
    Counts {
        input: u.input_tokens,
        output: u.output_tokens,
        cache_write: u.cache_creation_input_tokens,
        cache_read: u.cache_read_input_tokens,
    }
}

/// The writer thread: each response's counts added to the record and to
/// the day's spend (those that came meanwhile together), until the turn
/// ends.
fn write_all(
    store: &Store,
    session: &str,
    started: u64,
    receive: mpsc::Receiver<Charge>,
    day: &DaySpend,
) {
    let mut turn = TurnUsage {
        started,
        ..TurnUsage::default()
    };
    let mut complained = false;
    let mut day_complained = false;
    while let Ok(first) = receive.recv() {
        let mut delta = vec![first];
        while let Ok(more) = receive.try_recv() {
            delta.push(more);
        }
        for c in &delta {
            turn.usage.add(&c.usage);
            crate::state::session::charge(&mut turn.by_model, &mut turn.subscription, c);
        }
        for c in &delta {
            add_to_day(day, c, &mut day_complained);
        }
        let written = store.update(session, |r| {
            let t = &mut r.tokens;
            for c in &delta {
                t.used.add(&c.usage);
                crate::state::session::charge(&mut t.by_model, &mut t.subscription, c);
            }
            t.last_turn = Some(turn.clone());
            Ok(())
        });
        if let Err(e) = written
            && !std::mem::replace(&mut complained, true)
        {
            eprintln!(
                "shrooms-agent: session {session}: its token counts could not be written \
                 to its record: {}",
                e.message()
            );
        }
    }
}

/// Add a response's counts (of `model`, where known) to the day's spend,
/// and take them off what the turn has yet to write there, at once under
/// its lock. Not written, they stay counted as not yet written.
fn add_to_day(day: &DaySpend, c: &Charge, complained: &mut bool) {
    use crate::state::spend::Cost;
    let today = crate::state::spend::today();
    let cost = match (c.usd, c.day_usd) {
        (_, None) => Cost::Subscription,
        (Some(u), Some(_)) => Cost::Usd(u.0),
        (None, Some(ceiling)) => Cost::Unpriced(ceiling.0),
    };
    let written = crate::state::spend::add(&day.dir, today, &c.usage, Some(&c.model), cost, || {
        day.unwritten.fetch_sub(c.usage.total(), Ordering::SeqCst);
        if let Cost::Usd(n) | Cost::Unpriced(n) = cost {
            day.unwritten_usd.fetch_sub(n, Ordering::SeqCst);
        }
    });
    if let Err(e) = written
        && !std::mem::replace(complained, true)
    {
        eprintln!(
            "shrooms-agent: the tokens of this turn could not be added to what this machine \
             spent today: {}",
            e.message()
        );
    }
}

/// The model requests a turn refused, and why the last one for the dollar
/// budget was (None: none was).
pub struct Refused {
    pub count: u64,
    pub why: Option<&'static str>,
}

/// The history line of a turn, if it reached the model or was refused:
/// its tokens, and what they cost when it had answers.
pub fn turn_line(spent: &Usage, spend: &Spend, refused: &Refused, stopped: bool) -> Option<String> {
    let n = refused.count;
    if spent.responses == 0 && n == 0 && !stopped {
        return None;
    }
    let mut s = format!("turn: tokens {}", spent.describe());
    if spent.responses > 0 {
        s.push_str(&format!("; {}", spend.words()));
    }
    if stopped {
        s.push_str("; an answer could not be counted");
    }
    if n > 0 {
        s.push_str(&format!(
            "; {n} model request{} refused: {}",
            if n == 1 { "" } else { "s" },
            match (stopped, refused.why) {
                (true, _) => "tokens no longer counted",
                (false, Some(why)) => why,
                (false, None) => "token budget spent",
            }
        ));
    }
    Some(s)
}

/// The words the harness and the terminal get once the dollar budget is
/// spent.
pub fn usd_spent(session: &str, spent: Usd, budget: Usd) -> String {
    format!(
        "session {session} has spent its dollar budget: {} of {} at list prices; \
         shrooms-agent holds its model requests until you raise it: shrooms-agent cage limits \
         {session} --usd AMOUNT (or --usd none for no budget)",
        spent.spend(),
        budget.budget()
    )
}

/// The words when a model the session used has no price, so its dollar
/// budget cannot be counted.
fn unpriced(session: &str, models: &[String], budget: Usd) -> String {
    format!(
        "session {session} has a dollar budget ({}), but shrooms-agent has no price for the \
         model {} it used, so what it spent is not known; shrooms-agent refuses its model \
         requests until the config gives that price under [prices] (input, output, cache_write \
         and cache_read, in dollars per million tokens) or the budget is removed: \
         shrooms-agent cage limits {session} --usd none",
        budget.budget(),
        models.join(", ")
    )
}

/// The words when a request of a session with a dollar budget would go
/// upstream on a subscription sign-in (`what`).
fn on_subscription(session: &str, what: &str, budget: Usd) -> String {
    format!(
        "session {session} has a dollar budget ({}), but its model requests go upstream on \
         {what}, a subscription sign-in, which has no price per token, so the budget cannot be \
         kept; shrooms-agent refuses them: give the gateway an API key (docs/gateway.md, \
         \"Budgets\") or remove the budget: shrooms-agent cage limits {session} --usd none",
        budget.budget()
    )
}

/// The words the harness and the terminal get once the budget is spent.
pub fn budget_spent(session: &str, spent: u64, budget: u64) -> String {
    format!(
        "session {session} has spent its token budget: {spent} of {budget} tokens (input, \
         output and cache together); shrooms-agent holds its model requests until you \
         raise it: shrooms-agent cage limits {session} --tokens N (or --tokens none for no budget)"
    )
}

/// What the harness and the terminal get when a held request waited as
/// long as the config's `[budget] wait` says (zero: at once).
pub fn gave_up(why: &str, wait: std::time::Duration) -> String {
    if wait.is_zero() {
        format!("{why}; the config's [budget] wait is 0, so the request is refused at once")
    } else {
        format!(
            "{why}; the request waited {} (the config's [budget] wait) and is refused",
            crate::state::when::span(wait.as_secs())
        )
    }
}

/// The words the harness and the terminal get once the machine's daily
/// dollar budget is spent: what was spent `day`, and how to raise it.
pub fn daily_usd_spent(day: &str, spent: Usd, budget: Usd, config: &std::path::Path) -> String {
    format!(
        "this machine's daily dollar budget is spent: {} of {} today ({day}, all sessions \
         together, at list prices); shrooms-agent holds model requests until you raise it: edit \
         daily_usd in [budget] of {}, or wait for the next day",
        spent.spend(),
        budget.budget(),
        config.display()
    )
}

/// The words the harness and the terminal get once the machine's daily
/// token budget is spent: what was spent `day`, and how to raise it.
pub fn daily_spent(day: &str, spent: u64, budget: u64, config: &std::path::Path) -> String {
    format!(
        "this machine's daily token budget is spent: {spent} of {budget} tokens today ({day}, \
         all sessions together; input, output and cache); shrooms-agent holds model requests \
         until you raise it: edit daily_tokens in [budget] of {}, or wait for the next day",
        config.display()
    )
}

/// The answer to a model request past the budget: an error in the API's
/// own shape, which the harness shows. A 429 or 5xx the harnesses retry,
/// and Claude Code 2.1 shows a 403 as "Failed to authenticate"; a 400 it
/// shows at once as it is ("API Error: 400 <message>"), not retried.
pub fn refused_response(message: &str) -> Response<reqwest::Body> {
    super::api_error(StatusCode::BAD_REQUEST, "invalid_request_error", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of a streamed answer as the Messages API sends them
    /// (its streaming documentation's example, shortened).
    const STREAM: &str = "event: message_start\n\
        data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":300,\"cache_read_input_tokens\":4000,\"output_tokens\":1}}}\n\
        \n\
        event: content_block_start\n\
        data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\
        \n\
        event: ping\n\
        data: {\"type\": \"ping\"}\n\
        \n\
        event: content_block_delta\n\
        data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a \\\"usage\\\" of message_delta\"}}\n\
        \n\
        event: content_block_stop\n\
        data: {\"type\":\"content_block_stop\",\"index\":0}\n\
        \n\
        event: message_delta\n\
        data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\
        \n\
        event: message_stop\n\
        data: {\"type\":\"message_stop\"}\n\
        \n";

    fn usage(i: u64, o: u64, cw: u64, cr: u64) -> Usage {
        Usage {
            input_tokens: i,
            output_tokens: o,
            cache_creation_input_tokens: cw,
            cache_read_input_tokens: cr,
            responses: 1,
        }
    }

    fn fed(pieces: &[&[u8]]) -> SseMeter {
        let mut m = SseMeter::default();
        for p in pieces {
            m.feed(p);
        }
        m
    }

    #[test]
    fn a_streamed_answers_usage() {
        let m = fed(&[STREAM.as_bytes()]);
        assert!(m.ended());
        assert_eq!(m.usage(), Some(usage(25, 15, 300, 4000)));
        assert_eq!(m.usage().unwrap().total(), 4340);
    }

    /// Cut anywhere, one byte at a time, and with CR LF or CR line ends:
    /// the same counts.
    #[test]
    fn cut_anywhere_the_same_counts() {
        let want = Some(usage(25, 15, 300, 4000));
        let bytes = STREAM.as_bytes();
        for cut in 0..bytes.len() {
            let m = fed(&[&bytes[..cut], &bytes[cut..]]);
            assert_eq!(m.usage(), want, "cut at {cut}");
            assert!(m.ended(), "cut at {cut}");
        }
        let ones: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(fed(&ones).usage(), want);
        for ending in ["\r\n", "\r"] {
            let text = STREAM.replace('\n', ending);
            let b = text.as_bytes();
            for cut in 0..b.len() {
                let m = fed(&[&b[..cut], &b[cut..]]);
                assert_eq!(m.usage(), want, "{ending:?} cut at {cut}");
            }
        }
    }

    /// A stream cut before its end: what was reported so far, and the
    /// output by the text that passed (26 bytes: 9 tokens), not the first
    /// event's 1. Before the first event: nothing.
    #[test]
    fn a_stream_cut_short_counts_what_came() {
        let cut = STREAM.find("event: message_delta").unwrap();
        let m = fed(&[&STREAM.as_bytes()[..cut]]);
        assert!(!m.ended());
        assert_eq!(m.usage(), Some(usage(25, 9, 300, 4000)));
        let before_text = STREAM.find("event: content_block_delta").unwrap();
        assert_eq!(
            fed(&[&STREAM.as_bytes()[..before_text]]).usage(),
            Some(usage(25, 1, 300, 4000))
        );
        // Tool input and thinking count as text does; an overlong delta whole.
        let more = format!(
            "{}event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}}}\n\n\
             event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"delta\":{{\"type\":\"thinking_delta\",\"thinking\":\"{}\"}}}}\n\n\
             event: content_block_delta\ndata: {{\"delta\":{{\"text\":\"{}\"}}}}\n\n",
            &STREAM[..cut],
            "j".repeat(30),
            "t".repeat(30),
            "x".repeat(MAX_LINE)
        );
        let out = fed(&[more.as_bytes()]).usage().unwrap().output_tokens;
        assert!(out > (26 + 60 + MAX_LINE as u64) / 3, "{out}");
        // The final count, once it came, is the API's own.
        assert_eq!(
            fed(&[more.as_bytes(), &STREAM.as_bytes()[cut..]])
                .usage()
                .unwrap()
                .output_tokens,
            15
        );
        assert_eq!(fed(&[b"event: message_start\ndata: {\"ty"]).usage(), None);
        // An event is counted only once its blank line came.
        let first_event_end = STREAM.find("\n\n").unwrap();
        assert_eq!(fed(&[&STREAM.as_bytes()[..first_event_end]]).usage(), None);
        assert!(
            fed(&[&STREAM.as_bytes()[..first_event_end + 2]])
                .usage()
                .is_some()
        );
    }

    /// Newer answers give every count in `message_delta` too (cumulative,
    /// as the documentation says): the last of each wins, not their sum.
    /// Data over two lines, comments, no space after the colon, and events
    /// without an `event:` line read as the standard says.
    #[test]
    fn cumulative_deltas_and_the_syntax_of_the_standard() {
        let text = ": a comment\n\
            data:{\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":7,\n\
            data: \"output_tokens\":2}}}\n\
            \n\
            event: message_delta\n\
            data: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":9,\"cache_read_input_tokens\":40,\"output_tokens\":5}}\n\
            \n\
            event: message_delta\n\
            data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":11}}\n\
            \n";
        let m = fed(&[text.as_bytes()]);
        assert_eq!(m.usage(), Some(usage(9, 11, 0, 40)));
        assert!(!m.ended());
    }

    /// A line past the limit passes by unread, and what follows reads.
    #[test]
    fn an_overlong_line_is_skipped() {
        let long = format!(
            "event: content_block_delta\ndata: {{\"t\":\"{}\"}}\n\n",
            "x".repeat(MAX_LINE + 10)
        );
        let m = fed(&[long.as_bytes(), STREAM.as_bytes()]);
        assert_eq!(m.usage(), Some(usage(25, 15, 300, 4000)));
        // An overlong message_start is not read at all.
        let big_start = format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"pad\":\"{}\",\"usage\":{{\"input_tokens\":1}}}}}}\n\n",
            "x".repeat(MAX_LINE)
        );
        assert_eq!(fed(&[big_start.as_bytes()]).usage(), None);
    }

    #[test]
    fn a_json_answers_usage() {
        let body = br#"{"id":"msg_1","type":"message","content":[{"type":"text","text":"hi"}],
            "usage":{"input_tokens":30,"output_tokens":4,"cache_creation_input_tokens":2,"cache_read_input_tokens":1}}"#;
        let mut m = JsonMeter {
            length: Some(body.len()),
            ..JsonMeter::default()
        };
        m.feed(&body[..10]);
        assert!(!m.ended());
        assert_eq!(m.usage(), None);
        m.feed(&body[10..]);
        assert!(m.ended());
        assert_eq!(m.usage(), Some(usage(30, 4, 2, 1)));
        // Without the cache counts (an older answer): zero.
        let mut m = JsonMeter::default();
        m.feed(br#"{"usage":{"input_tokens":3,"output_tokens":4}}"#);
        assert!(!m.ended());
        assert_eq!(m.usage(), Some(usage(3, 4, 0, 0)));
        // An error body has no usage.
        let mut m = JsonMeter::default();
        m.feed(br#"{"type":"error","error":{"type":"overloaded_error","message":"x"}}"#);
        assert_eq!(m.usage(), None);
    }

    #[test]
    fn the_encodings_read() {
        let h = |vals: &[&str]| {
            let mut m = HeaderMap::new();
            for v in vals {
                m.append(header::CONTENT_ENCODING, v.parse().unwrap());
            }
            encoding(&m)
        };
        assert_eq!(h(&[]), Ok(Encoding::Identity));
        assert_eq!(h(&["identity"]), Ok(Encoding::Identity));
        assert_eq!(h(&["gzip"]), Ok(Encoding::Gzip));
        assert_eq!(h(&["X-Gzip"]), Ok(Encoding::Gzip));
        assert_eq!(h(&["br"]), Err("br".to_string()));
        assert_eq!(h(&["gzip", "gzip"]), Err("gzip, gzip".to_string()));
        assert_eq!(h(&["gzip, zstd"]), Err("gzip, zstd".to_string()));
        assert_eq!(h(&["deflate"]), Err("deflate".to_string()));
    }

    /// A gzip answer, cut anywhere, reads as the plain one; gzip members
    /// one after another too.
    #[test]
    fn a_gzip_answer_reads_as_the_plain_one() {
        use std::io::Write;
        let gz = |b: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(b).unwrap();
            e.finish().unwrap()
        };
        let (a, b) = STREAM.split_at(STREAM.len() / 2);
        let mut bytes = gz(a.as_bytes());
        bytes.extend(gz(b.as_bytes()));
        for cut in (0..bytes.len()).step_by(7) {
            let mut r = Reader::Gzip(Box::new(flate2::write::MultiGzDecoder::new(MeterSink(
                Meter::Sse(SseMeter::default()),
            ))));
            r.feed(&bytes[..cut]).unwrap();
            r.feed(&bytes[cut..]).unwrap();
            assert_eq!(
                r.meter().charge().0,
                Some(usage(25, 15, 300, 4000)),
                "cut at {cut}"
            );
            assert!(r.meter().ended());
        }
        let mut r = Reader::Gzip(Box::new(flate2::write::MultiGzDecoder::new(MeterSink(
            Meter::Sse(SseMeter::default()),
        ))));
        assert!(r.feed(b"\x1f\x8b\x08\x00garbage-not-deflate").is_err());
    }

    /// A streamed Responses API answer, as OpenAI's streaming documentation
    /// shows one (shortened; `response.completed` carries the usage).
    const RESPONSES_STREAM: &str = "event: response.created\n\
        data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"usage\":null}}\n\
        \n\
        event: response.output_item.added\n\
        data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\
        \n\
        event: response.output_text.delta\n\
        data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"a usage of response.completed\"}\n\
        \n\
        event: response.output_item.done\n\
        data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"a usage of response.completed\"}]}}\n\
        \n\
        event: response.completed\n\
        data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":328,\"input_tokens_details\":{\"cached_tokens\":300},\"output_tokens\":52,\"output_tokens_details\":{\"reasoning_tokens\":10},\"total_tokens\":380}}}\n\
        \n";

    /// A streamed Chat Completions answer asked with
    /// `stream_options.include_usage` (its last chunk has the usage and no
    /// choices), ending with `[DONE]`.
    const CHAT_STREAM: &str = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}\n\
        \n\
        data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello there\"}}],\"usage\":null}\n\
        \n\
        data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\
        \n\
        data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":7,\"total_tokens\":47,\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\
        \n\
        data: [DONE]\n\
        \n";

    fn fed_as(api: Api, pieces: &[&[u8]]) -> SseMeter {
        let mut m = SseMeter::of(api);
        for p in pieces {
            m.feed(p);
        }
        m
    }

    /// The Responses API's counts: the cached input as the cache read,
    /// the rest as input, so the total is the API's own (380); cut
    /// anywhere, the same.
    #[test]
    fn a_streamed_responses_answers_usage() {
        let want = Some(usage(28, 52, 0, 300));
        let b = RESPONSES_STREAM.as_bytes();
        for cut in 0..b.len() {
            let m = fed_as(Api::Responses, &[&b[..cut], &b[cut..]]);
            assert_eq!(m.usage(), want, "cut at {cut}");
            assert!(m.ended() && m.enough(), "cut at {cut}");
        }
        assert_eq!(usage(28, 52, 0, 300).total(), 380);
        // Cut before its end: the text that passed (29 bytes: 10 tokens),
        // and not enough to charge it (its counts come last).
        let cut = RESPONSES_STREAM.find("event: response.completed").unwrap();
        let m = fed_as(Api::Responses, &[&b[..cut]]);
        assert!(!m.ended() && !m.enough());
        assert_eq!(m.usage(), Some(usage(0, 10, 0, 0)));
        // Read as a Messages stream, it has no counts: the API matters.
        assert_eq!(fed(&[b]).usage(), None);
        // An answer that ended short of complete still says what it spent.
        let incomplete = "data: {\"type\":\"response.incomplete\",\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":9}}}\n\n";
        let m = fed_as(Api::Responses, &[incomplete.as_bytes()]);
        assert!(m.ended());
        assert_eq!(m.usage(), Some(usage(5, 9, 0, 0)));
    }

    /// Chat Completions' counts from the chunk that carries them; without
    /// that chunk (the client did not ask `include_usage`), the output by
    /// the text that passed.
    #[test]
    fn a_streamed_chat_answers_usage() {
        let b = CHAT_STREAM.as_bytes();
        for cut in 0..b.len() {
            let m = fed_as(Api::ChatCompletions, &[&b[..cut], &b[cut..]]);
            assert_eq!(m.usage(), Some(usage(8, 7, 0, 32)), "cut at {cut}");
            assert!(m.ended(), "cut at {cut}");
        }
        let without: String = CHAT_STREAM
            .split("\n\n")
            .filter(|e| !e.contains("prompt_tokens"))
            .map(|e| format!("{e}\n\n"))
            .collect();
        let m = fed_as(Api::ChatCompletions, &[without.as_bytes()]);
        assert!(m.ended());
        // "hello there": 11 bytes, 4 tokens.
        assert_eq!(m.usage(), Some(usage(0, 4, 0, 0)));
        // The input, never given, by the request's body: 100 bytes, 34.
        let mut m = SseMeter {
            sent: Some(Arc::new(AtomicU64::new(100))),
            ..SseMeter::of(Api::ChatCompletions)
        };
        m.feed(without.as_bytes());
        assert_eq!(m.usage(), Some(usage(34, 4, 0, 0)));
        // Given, it is the API's own.
        let mut m = SseMeter {
            sent: Some(Arc::new(AtomicU64::new(100))),
            ..SseMeter::of(Api::ChatCompletions)
        };
        m.feed(CHAT_STREAM.as_bytes());
        assert_eq!(m.usage(), Some(usage(8, 7, 0, 32)));
        // Tool calls' arguments count as text does: 12 bytes, 4 tokens.
        let tool = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"cmd\\\":\\\"ls\\\"}\"}}]}}]}\n\n";
        assert_eq!(
            fed_as(Api::ChatCompletions, &[tool.as_bytes()])
                .usage()
                .unwrap()
                .output_tokens,
            4
        );
    }

    #[test]
    fn an_openai_json_answers_usage() {
        let responses = br#"{"id":"resp_1","object":"response","status":"completed","output":[],
            "usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":60},"output_tokens":20,"total_tokens":120}}"#;
        let mut m = JsonMeter {
            length: Some(responses.len()),
            api: Api::Responses,
            ..JsonMeter::default()
        };
        m.feed(responses);
        assert!(m.ended());
        assert_eq!(m.usage(), Some(usage(40, 20, 0, 60)));
        let chat = br#"{"id":"c1","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hi"}}],
            "usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#;
        let mut m = JsonMeter {
            api: Api::ChatCompletions,
            ..JsonMeter::default()
        };
        m.feed(chat);
        assert_eq!(m.usage(), Some(usage(12, 3, 0, 0)));
        // OpenAI's error body has no usage.
        let mut m = JsonMeter {
            api: Api::Responses,
            ..JsonMeter::default()
        };
        m.feed(br#"{"error":{"message":"x","type":"invalid_request_error"},"usage":null}"#);
        assert_eq!(m.usage(), None);
    }

    /// The model each answer says it is of: a Messages stream's
    /// `message_start`, a Responses stream's `response.model`, a Chat
    /// Completions chunk's `model`, a JSON body's `model`; cut anywhere,
    /// the same.
    #[test]
    fn the_meters_read_the_model() {
        let b = STREAM.as_bytes();
        for cut in 0..b.len() {
            let m = fed(&[&b[..cut], &b[cut..]]);
            assert_eq!(m.model(), Some("m"), "cut at {cut}");
        }
        let responses = RESPONSES_STREAM.replace(
            "\"status\":\"completed\",",
            "\"status\":\"completed\",\"model\":\"gpt-5-2025-08-07\",",
        );
        let m = fed_as(Api::Responses, &[responses.as_bytes()]);
        assert_eq!(m.model(), Some("gpt-5-2025-08-07"));
        let chat = CHAT_STREAM.replace("\"id\":\"c1\",", "\"id\":\"c1\",\"model\":\"gpt-4.1\",");
        let m = fed_as(Api::ChatCompletions, &[chat.as_bytes()]);
        assert_eq!(m.model(), Some("gpt-4.1"));
        assert_eq!(
            fed_as(Api::ChatCompletions, &[CHAT_STREAM.as_bytes()]).model(),
            None
        );
        let json = Meter::Json(JsonMeter {
            body: br#"{"model":"claude-sonnet-4-5-20250929","usage":{"input_tokens":3,"output_tokens":4}}"#
                .to_vec(),
            ..JsonMeter::default()
        });
        assert_eq!(
            json.charge(),
            (
                Some(usage(3, 4, 0, 0)),
                true,
                Some("claude-sonnet-4-5-20250929".to_string())
            )
        );
        let empty = Meter::Json(JsonMeter {
            body: br#"{"model":"  ","usage":{"input_tokens":3,"output_tokens":4}}"#.to_vec(),
            ..JsonMeter::default()
        });
        assert_eq!(empty.charge().2, None);
        // A name that is no model id is no model: not a terminal's escape,
        // not a megabyte in the record.
        let long = "m".repeat(MAX_MODEL + 1);
        let just = "m".repeat(MAX_MODEL);
        for (name, kept) in [
            ("gpt-4o\\u001b[2J", false),
            ("a b", false),
            (long.as_str(), false),
            (just.as_str(), true),
            ("corp/llama-3.1:70b@q4_k", true),
        ] {
            let body =
                format!(r#"{{"model":"{name}","usage":{{"input_tokens":3,"output_tokens":4}}}}"#);
            let json = Meter::Json(JsonMeter {
                body: body.into_bytes(),
                ..JsonMeter::default()
            });
            let got = json.charge().2;
            assert_eq!(got.is_some(), kept, "{name}: {got:?}");
        }
    }

    /// The ledger prices each answer by its model; a subscription's
    /// tokens are kept apart; the dollar budget refuses once spent, or
    /// when a model has no price, and a request on a subscription sign-in
    /// while there is one; the record keeps it all by model.
    #[test]
    fn the_ledger_counts_dollars_by_model() {
        let scratch = tempfile::tempdir().unwrap();
        let store = Store::new(scratch.path());
        store.ensure().unwrap();
        let mut r = crate::state::session::sample_record("u");
        r.tokens.usd_budget = Some(Usd::cents(1));
        // Spent before: 5000 billionths on Sonnet 4.5.
        r.tokens.by_model.insert(
            "claude-sonnet-4-5".into(),
            ModelSpend {
                usage: usage(1, 0, 0, 0),
                usd: Some(Usd(5_000)),
            },
        );
        store.save(&r).unwrap();
        let ledger = Ledger::new(store.clone(), "u", "alice", r.tokens.used)
            .priced(Prices::default(), &r.tokens);
        assert_eq!(ledger.refusal(), None);
        assert_eq!(ledger.spent_usd().usd, Some(Usd(5_000)));
        // 101 in, 11 out, 203 written, 307 read on Sonnet 4.5: 1321350.
        ledger.add(
            usage(101, 11, 203, 307),
            Some("claude-sonnet-4-5-20250929"),
            false,
        );
        ledger.add(usage(1000, 1000, 0, 0), Some("claude-sonnet-4-5"), true);
        assert_eq!(ledger.spent_usd().usd, Some(Usd(1_326_350)));
        assert_eq!(ledger.spent_usd().subscription_tokens, 2000);
        assert_eq!(ledger.refusal(), None);
        // 1 cent: 10000000 billionths; 7 more answers reach it.
        for _ in 0..7 {
            ledger.add(
                usage(101, 11, 203, 307),
                Some("claude-sonnet-4-5-20250929"),
                false,
            );
        }
        let why = ledger.refusal().unwrap();
        assert!(why.contains("$0.0106 of $0.01"), "{why}");
        ledger.refused();
        ledger.refused();
        assert!(ledger.subscription_refusal("a Claude login").is_some());
        // A model without a price: not known, refused naming it.
        store
            .update("u", |r| {
                r.tokens.usd_budget = Some(Usd::cents(100));
                Ok(())
            })
            .unwrap();
        assert_eq!(ledger.refusal(), None);
        ledger.add(usage(1, 1, 0, 0), Some("claude-new-1"), false);
        let why = ledger.refusal().unwrap();
        assert!(why.contains("no price for the model claude-new-1"), "{why}");
        // Without a dollar budget: neither refuses.
        store
            .update("u", |r| {
                r.tokens.usd_budget = None;
                Ok(())
            })
            .unwrap();
        assert_eq!(ledger.refusal(), None);
        assert_eq!(ledger.subscription_refusal("a Claude login"), None);
        ledger.finish();
        let t = store.load("u").unwrap().tokens;
        let sonnet = |k: &str| t.by_model[k];
        assert_eq!(sonnet("claude-sonnet-4-5").usd, Some(Usd(5_000)));
        let dated = sonnet("claude-sonnet-4-5-20250929");
        assert_eq!(dated.usd, Some(Usd(8 * 1_321_350)));
        assert_eq!(dated.usage.responses, 8);
        assert_eq!(t.by_model["claude-new-1"].usd, None);
        assert_eq!(t.subscription["claude-sonnet-4-5"].total(), 2000);
        let last = t.last_turn.as_ref().unwrap();
        assert_eq!(last.by_model.len(), 2);
        assert_eq!(last.spend().unpriced, ["claude-new-1"]);
        assert_eq!(t.spend().usd, None);
        let h = store.history("u").unwrap();
        assert!(
            h[0].what.contains(
                "; dollars unknown: no price for claude-new-1, and 2000 tokens on a subscription \
                 sign-in (no price per token); 2 model requests refused: no price to count the \
                 dollar budget by"
            ),
            "{}",
            h[0].what
        );
    }

    #[test]
    fn only_the_messages_route_spends() {
        assert!(spends("POST", "/v1/messages"));
        assert!(!spends("POST", "/v1/messages/count_tokens"));
        assert!(!spends("HEAD", "/api/hello"));
    }

    #[test]
    fn the_lines_and_the_words() {
        let none = |count| Refused { count, why: None };
        let spend = Spend {
            usd: Some(Usd(1_321_350)),
            ..Spend::default()
        };
        assert_eq!(turn_line(&Usage::default(), &spend, &none(0), false), None);
        let mut two = usage(12, 7, 0, 0);
        two.add(&usage(30, 4, 2, 1));
        assert_eq!(
            turn_line(&two, &spend, &none(0), false).unwrap(),
            "turn: tokens in 42, out 11, cache write 2, cache read 1 (56 tokens, 2 responses); \
             $0.0013"
        );
        assert_eq!(
            turn_line(&Usage::default(), &spend, &none(1), false).unwrap(),
            "turn: tokens in 0, out 0, cache write 0, cache read 0 (0 tokens, 0 responses); \
             1 model request refused: token budget spent"
        );
        // A model without a price, tokens on a subscription, a dollar refusal.
        let unknown = Spend {
            usd: None,
            unpriced: vec!["claude-new".into()],
            subscription_tokens: 40,
        };
        let dollars = Refused {
            count: 2,
            why: Some("dollar budget spent"),
        };
        assert_eq!(
            turn_line(&two, &unknown, &dollars, false).unwrap(),
            "turn: tokens in 42, out 11, cache write 2, cache read 1 (56 tokens, 2 responses); \
             dollars unknown: no price for claude-new, and 40 tokens on a subscription sign-in \
             (no price per token); 2 model requests refused: dollar budget spent"
        );
        let m = usd_spent("web", Usd(5_012_345_678), Usd::cents(500));
        assert!(m.contains("$5.0123 of $5.00 at list prices"), "{m}");
        assert!(
            m.contains("shrooms-agent cage limits web --usd AMOUNT"),
            "{m}"
        );
        let m = unpriced("web", &["claude-new".to_string()], Usd::cents(500));
        assert!(m.contains("no price for the model claude-new"), "{m}");
        assert!(m.contains("[prices]"), "{m}");
        let m = budget_spent("web", 120, 100);
        assert!(
            m.contains("shrooms-agent cage limits web --tokens N"),
            "{m}"
        );
        assert!(m.contains("120 of 100 tokens"), "{m}");
        let r = refused_response(&m);
        assert_eq!(r.status(), 400);
    }

    /// The ledger counts at once, writes the record under its lock beside
    /// another writer, and adds the turn's line to the history.
    #[test]
    fn the_ledger_counts_and_writes_the_record_and_the_history() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let store = Store::new(&dir);
        store.ensure().unwrap();
        let mut r = crate::state::session::sample_record("u");
        r.tokens.used = usage(100, 0, 0, 0);
        r.tokens.budget = Some(150);
        store.save(&r).unwrap();
        let ledger = Ledger::new(store.clone(), "u", "alice", r.tokens.used);
        assert_eq!(ledger.refusal(), None);
        ledger.add(usage(12, 7, 0, 0), None, false);
        ledger.add(usage(30, 4, 2, 1), None, false);
        // 100 + 56 = 156 >= 150: refused, at once, before the record is written.
        let why = ledger.refusal().unwrap();
        assert!(why.contains("156 of 150 tokens"), "{why}");
        assert!(ledger.refused());
        assert!(!ledger.refused());
        // A budget raised meanwhile (another process) counts at the next request.
        store
            .update("u", |r| {
                r.tokens.budget = Some(1000);
                Ok(())
            })
            .unwrap();
        assert_eq!(ledger.refusal(), None);
        ledger.finish();
        let r = store.load("u").unwrap();
        assert_eq!(r.tokens.budget, Some(1000));
        let mut want = usage(142, 11, 2, 1);
        want.responses = 3;
        assert_eq!(r.tokens.used, want);
        let last = r.tokens.last_turn.unwrap();
        assert_eq!(last.usage.total(), 56);
        assert_eq!(last.usage.responses, 2);
        let h = store.history("u").unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].who, "alice");
        assert_eq!(
            h[0].what,
            "turn: tokens in 42, out 11, cache write 2, cache read 1 (56 tokens, 2 responses); \
             dollars unknown: no price for (model not reported); 2 model requests refused: token \
             budget spent"
        );
        ledger.finish();
        assert_eq!(store.history("u").unwrap().len(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A state folder with sessions `u` and `v`, and a config file that
    /// says `config`.
    fn two_sessions(config: &str) -> (tempfile::TempDir, Store, std::path::PathBuf) {
        let scratch = tempfile::tempdir().unwrap();
        let store = Store::new(scratch.path());
        store.ensure().unwrap();
        for name in ["u", "v"] {
            store
                .save(&crate::state::session::sample_record(name))
                .unwrap();
        }
        let path = scratch.path().join("config.toml");
        std::fs::write(&path, config).unwrap();
        (scratch, store, path)
    }

    /// The machine's daily budget, read from the config at each request:
    /// today's spend is every turn's together (another turn's from the
    /// day's file; this one's at once, before its writer wrote it);
    /// reached, a model request is refused with the words; raised in the
    /// config, it passes again. A ledger not given the config has none.
    #[test]
    fn the_daily_budget_counts_every_turn_of_the_day() {
        let (_scratch, store, config) = two_sessions("[budget]\ndaily_tokens = 100\n");
        let turn = |name: &str| {
            Ledger::new(store.clone(), name, "alice", Usage::default()).with_daily_budget(&config)
        };
        let (a, b) = (turn("u"), turn("v"));
        assert_eq!(b.refusal(), None);
        // A daily budget lets a turn's model requests through one at a time.
        assert!(matches!(b.check(), Check::Pass { budget: true }));
        a.add(usage(60, 0, 0, 0), Some("m"), false);
        assert_eq!(a.refusal(), None);
        a.add(usage(30, 5, 3, 2), Some("m"), false);
        // Counted at once, whether its writer has written it yet or not.
        let why = a.refusal().unwrap();
        let day = crate::state::spend::today();
        assert_eq!(
            why,
            format!(
                "this machine's daily token budget is spent: 100 of 100 tokens today ({day}, all \
                 sessions together; input, output and cache); shrooms-agent holds model \
                 requests until you raise it: edit daily_tokens in [budget] of {}, or wait for \
                 the next day",
                config.display()
            )
        );
        a.finish();
        // The other session's turn: refused by what the first spent.
        assert_eq!(b.refusal(), Some(why));
        let spent = crate::state::spend::read(&store.spend_dir(), day).unwrap();
        assert_eq!((spent.total.total(), spent.total.responses), (100, 2));
        // Raised in the config: passes, at the next request.
        std::fs::write(&config, "[budget]\ndaily_tokens = \"1k\"\n").unwrap();
        assert_eq!(b.refusal(), None);
        // None in the config: passes as they come.
        std::fs::write(&config, "memory = \"1g\"\n").unwrap();
        assert!(matches!(b.check(), Check::Pass { budget: false }));
        // A config that does not read: refused, saying why.
        std::fs::write(&config, "[budget]\ndaily_tokens = 0\n").unwrap();
        let why = b.refusal().unwrap();
        assert!(
            why.starts_with("shrooms-agent could not read this machine's daily budget: "),
            "{why}"
        );
        assert!(
            why.contains("key `budget`: daily_tokens: 0 would refuse"),
            "{why}"
        );
        // Not given the config: no daily budget.
        let c = Ledger::new(store.clone(), "v", "alice", Usage::default());
        assert!(matches!(c.check(), Check::Pass { budget: false }));
    }

    /// A model without a price does not stop the day: under a daily dollar
    /// budget, one session's answer of a model nobody priced is counted at
    /// the table's highest prices, named, and another session's requests
    /// pass until the day's dollars reach the budget, then are held.
    #[test]
    fn a_model_without_a_price_is_counted_high_not_stopping_the_day() {
        let (_scratch, store, config) = two_sessions("[budget]\ndaily_usd = 5\n");
        let turn = |name: &str| {
            Ledger::new(store.clone(), name, "alice", Usage::default()).with_daily_budget(&config)
        };
        let (a, b) = (turn("u"), turn("v"));
        a.add(usage(1000, 1000, 0, 0), Some("gpt-3.5-turbo"), false);
        // At the ceiling: $20 and $120 per million, $0.14.
        assert!(matches!(b.check(), Check::Pass { budget: true }));
        a.finish();
        let day = crate::state::spend::today();
        let spent = crate::state::spend::read(&store.spend_dir(), day).unwrap();
        assert_eq!(spent.usd, 140_000_000);
        assert_eq!(spent.unpriced.iter().collect::<Vec<_>>(), ["gpt-3.5-turbo"]);
        assert!(matches!(b.check(), Check::Pass { budget: true }));
        // Enough of it reaches the budget: held, not refused at once.
        let c = turn("u");
        c.add(usage(0, 50_000, 0, 0), Some("o1"), false);
        c.finish();
        assert!(matches!(
            b.check(),
            Check::AtBudget(AtBudget {
                budget: "daily",
                ..
            })
        ));
    }

    /// An answer that reports a charge beyond its four counts is kept
    /// under its model with that charge, which has no price: its dollars
    /// are not known, rather than taken for less than they were.
    #[test]
    fn a_charge_beyond_the_counts_has_no_price() {
        let json = |body: &str| {
            Meter::Json(JsonMeter {
                body: body.as_bytes().to_vec(),
                ..JsonMeter::default()
            })
            .charge()
            .2
        };
        let kept = |usage: &str, more: &str| {
            json(&format!(
                r#"{{"model":"claude-haiku-4-5","usage":{{"input_tokens":10,"output_tokens":5{usage}}}{more}}}"#
            ))
        };
        assert_eq!(kept("", "").as_deref(), Some("claude-haiku-4-5"));
        for (usage, more, with) in [
            (
                r#","server_tool_use":{"web_search_requests":3}"#,
                "",
                "server tools",
            ),
            (r#","service_tier":"priority""#, "", "priority tier"),
            ("", r#","service_tier":"scale""#, "priority tier"),
            (
                r#","output_tokens_details":{"audio_tokens":4}"#,
                "",
                "audio",
            ),
            (
                "",
                r#","output":[{"type":"web_search_call"}]"#,
                "web search",
            ),
            (
                "",
                r#","output":[{"type":"message"},{"type":"image_generation_call"}]"#,
                "image generation",
            ),
        ] {
            let m = kept(usage, more).unwrap();
            assert_eq!(m, format!("claude-haiku-4-5 with {with}"));
            assert_eq!(Prices::default().of(&m), None, "{m}");
        }
        // Zeros, and the standard tiers, are no charge.
        for (usage, more) in [
            (r#","server_tool_use":{"web_search_requests":0}"#, ""),
            (
                r#","cache_creation":{"ephemeral_5m_input_tokens":7,"ephemeral_1h_input_tokens":0}"#,
                "",
            ),
            (
                r#","service_tier":"standard""#,
                r#","service_tier":"default""#,
            ),
        ] {
            assert_eq!(kept(usage, more).as_deref(), Some("claude-haiku-4-5"));
        }
        // A stream says it in its last events.
        let responses = RESPONSES_STREAM.replace(
            "\"status\":\"completed\",",
            "\"status\":\"completed\",\"model\":\"gpt-5\",\"output\":[{\"type\":\"web_search_call\"}],",
        );
        let m = fed_as(Api::Responses, &[responses.as_bytes()]);
        assert_eq!(
            Meter::Sse(m).charge().2.as_deref(),
            Some("gpt-5 with web search")
        );
        let messages = STREAM.replace(
            "\"usage\":{\"output_tokens\"",
            "\"usage\":{\"server_tool_use\":{\"web_search_requests\":1},\"output_tokens\"",
        );
        assert_ne!(messages, STREAM);
        let m = fed(&[messages.as_bytes()]);
        assert_eq!(
            Meter::Sse(m).charge().2.as_deref(),
            Some("m with server tools")
        );
    }

    /// Cache writes kept an hour are read from the answer and priced at
    /// twice the input price, the rest of the writes at theirs.
    #[test]
    fn an_hours_cache_writes_cost_twice_the_input() {
        let body = r#"{"model":"claude-haiku-4-5","usage":{"input_tokens":10,"output_tokens":5,
            "cache_creation_input_tokens":3000,"cache_read_input_tokens":0,
            "cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":2000}}}"#;
        let json = Meter::Json(JsonMeter {
            body: body.as_bytes().to_vec(),
            ..JsonMeter::default()
        });
        assert_eq!(json.cache_hour(), 2000);
        assert_eq!(json.charge().2.as_deref(), Some("claude-haiku-4-5"));
        let stream = STREAM.replace(
            "\"cache_read_input_tokens\":4000,",
            "\"cache_read_input_tokens\":4000,\"cache_creation\":{\"ephemeral_5m_input_tokens\":100,\"ephemeral_1h_input_tokens\":200},",
        );
        assert_ne!(stream, STREAM);
        assert_eq!(Meter::Sse(fed(&[stream.as_bytes()])).cache_hour(), 200);

        let (_scratch, store, _) = two_sessions("");
        let ledger = Ledger::new(store, "u", "alice", Usage::default());
        ledger.add_with_hour_writes(usage(10, 5, 3000, 0), Some("claude-haiku-4-5"), false, 2000);
        // Haiku 4.5: $1 in, $5 out, $1.25 a five-minute write, $2 an hour's.
        let want = 10 * 1000 + 5 * 5000 + 1000 * 1250 + 2000 * 2000;
        assert_eq!(ledger.spent_usd().usd, Some(Usd(want)));
    }

    /// The ledger of a session without a budget, and what `metered` made
    /// of one answer of `api`'s: what the turn was charged, and whether
    /// its model requests are refused from then on.
    fn charged(api: Api, ctype: &str, body: Vec<u8>, sent: u64) -> (Usage, bool) {
        let scratch = tempfile::tempdir().unwrap();
        let store = Store::new(scratch.path());
        store.ensure().unwrap();
        let r = crate::state::session::sample_record("u");
        store.save(&r).unwrap();
        let ledger = Arc::new(Ledger::new(store, "u", "alice", Usage::default()));
        let mut response = Response::new(reqwest::Body::from(body));
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, ctype.parse().unwrap());
        let sent = Some(Arc::new(AtomicU64::new(sent)));
        let answer = metered(&ledger, Some(api), sent, response, None, false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            use http_body_util::BodyExt;
            answer.into_body().collect().await.unwrap();
        });
        let stopped = ledger.refusal().is_some();
        ledger.finish();
        (ledger.spent(), stopped)
    }

    /// An OpenAI answer that ends without its counts is charged the
    /// estimate and the turn spends nothing more: a background response
    /// (`"background": true` answers at once with `"usage": null` while the
    /// model runs on), a body or a last event too long to read, a Chat
    /// Completions stream not asked for its counts. An answer with them,
    /// or a Messages answer, goes on as before.
    #[test]
    fn an_openai_answer_without_its_counts_stops_the_turns_spending() {
        let json = "application/json";
        let sse = "text/event-stream";
        let background =
            br#"{"id":"resp_1","object":"response","status":"queued","background":true,"usage":null}"#;
        let (spent, stopped) = charged(Api::Responses, json, background.to_vec(), 300);
        assert!(stopped);
        assert_eq!(spent.input_tokens, 100);
        assert!(spent.output_tokens > 0);
        let whole = br#"{"status":"completed","usage":{"input_tokens":100,"output_tokens":20}}"#;
        assert_eq!(
            charged(Api::Responses, json, whole.to_vec(), 300),
            (usage(100, 20, 0, 0), false)
        );
        // Too long to read for its counts.
        let mut long = br#"{"output_text":""#.to_vec();
        long.resize(MAX_JSON + 10, b'x');
        long.extend_from_slice(br#"","usage":{"input_tokens":1,"output_tokens":1}}"#);
        let (spent, stopped) = charged(Api::Responses, json, long, 30);
        assert!(stopped);
        assert!(spent.output_tokens > (MAX_JSON as u64) / 3, "{spent:?}");
        let completed = format!(
            "event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"output_text\":\"{}\",\"usage\":{{\"input_tokens\":1,\"output_tokens\":1}}}}}}\n\n",
            "x".repeat(MAX_LINE)
        );
        let (_, stopped) = charged(Api::Responses, sse, completed.into_bytes(), 30);
        assert!(stopped);
        assert_eq!(
            charged(Api::Responses, sse, RESPONSES_STREAM.into(), 30),
            (usage(28, 52, 0, 300), false)
        );
        // Chat Completions: with its usage chunk, as reported; without, the
        // estimate, and no more.
        assert_eq!(
            charged(Api::ChatCompletions, sse, CHAT_STREAM.into(), 30),
            (usage(8, 7, 0, 32), false)
        );
        let without: String = CHAT_STREAM
            .split("\n\n")
            .filter(|e| !e.contains("prompt_tokens"))
            .map(|e| format!("{e}\n\n"))
            .collect();
        assert_eq!(
            charged(Api::ChatCompletions, sse, without.into_bytes(), 30),
            (usage(10, 4, 0, 0), true)
        );
        let chat = br#"{"choices":[{"message":{"content":"hi"}}]}"#;
        assert!(charged(Api::ChatCompletions, json, chat.to_vec(), 30).1);
        // A Messages answer without usage stops nothing (its routes are
        // counted as they always were).
        assert!(!charged(Api::Messages, json, b"{}".to_vec(), 30).1);
    }
}
