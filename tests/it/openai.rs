//! End-to-end tests of OpenAI's APIs on the model gateway (docs/gateway.md,
//! "OpenAI's APIs"): a stand-in of OpenAI's API on this machine's loopback
//! (`OpenAiMock`, for any test that runs an OpenAI harness in a cage)
//! records every request; the cage reaches only the gateway, under
//! `/openai`, and the gateway the stand-in, with the machine's key.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::common::*;
use crate::gateway::{Seen, read, read_request, session_in, status};

/// The machine's OpenAI key in these tests: it must reach the stand-in,
/// never a cage.
pub const MACHINE_OPENAI_KEY: &str = "sk-proj-machine-openai-key-9b2d";
/// What a cage sends as its key: it must never reach the stand-in.
const DUMMY: &str = "sk-dummy-from-the-cage-31ee";

/// Token counts the stand-in reports, distinct in each answer so that a
/// count taken from the wrong place shows. `input` includes `cached`, as
/// OpenAI's do.
#[derive(Debug, Clone, Copy)]
pub struct OpenAiCounts {
    pub input: u64,
    pub cached: u64,
    pub output: u64,
}

/// A streamed Responses API answer's counts (in `response.completed`).
pub const RESPONSES_STREAMED: OpenAiCounts = OpenAiCounts {
    input: 230,
    cached: 30,
    output: 17,
};
/// A plain (JSON) Responses API answer's.
pub const RESPONSES_PLAIN: OpenAiCounts = OpenAiCounts {
    input: 62,
    cached: 2,
    output: 5,
};
/// A streamed Chat Completions answer's (its usage chunk, sent when asked).
pub const CHAT_STREAMED: OpenAiCounts = OpenAiCounts {
    input: 44,
    cached: 4,
    output: 6,
};
/// A plain Chat Completions answer's.
pub const CHAT_PLAIN: OpenAiCounts = OpenAiCounts {
    input: 51,
    cached: 11,
    output: 7,
};

impl OpenAiCounts {
    pub fn total(&self) -> u64 {
        self.input + self.output
    }
    /// As the Responses API writes them.
    fn responses(&self) -> Value {
        json!({"input_tokens": self.input, "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens": self.output, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.total()})
    }
    /// As Chat Completions writes them.
    fn chat(&self) -> Value {
        json!({"prompt_tokens": self.input, "prompt_tokens_details": {"cached_tokens": self.cached},
            "completion_tokens": self.output, "total_tokens": self.total()})
    }
}

/// What a session's record keeps of these answers (`tokens.used`): the
/// cached input as the cache read, the rest as input.
pub fn recorded(answers: &[&OpenAiCounts]) -> Value {
    let sum = |f: fn(&OpenAiCounts) -> u64| answers.iter().map(|c| f(c)).sum::<u64>();
    json!({
        "input_tokens": sum(|c| c.input - c.cached),
        "output_tokens": sum(|c| c.output),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": sum(|c| c.cached),
        "responses": answers.len(),
    })
}

/// The text of the stand-in's answers.
pub const ANSWER_TEXT: &str = "hello from the openai mock";

/// A recording stand-in of OpenAI's API on 127.0.0.1: `POST /v1/responses`
/// (and the ChatGPT backend's `POST /backend-api/codex/responses`, the
/// same) answers a streamed Responses API answer when the body asks
/// `"stream": true`, else a JSON one; `POST /v1/chat/completions` likewise,
/// with a usage chunk when asked `stream_options.include_usage`. Anything
/// else is a 404. Start it with `OpenAiMock::start()`, point the gateway
/// at it with `world_for_openai` (or `[gateway] openai_url = mock.url()`).
pub struct OpenAiMock {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    tool: Arc<Mutex<Option<(String, String)>>>,
}

impl OpenAiMock {
    pub fn start() -> OpenAiMock {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let tool = Arc::new(Mutex::new(None));
        let (s, t) = (seen.clone(), tool.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { continue };
                let (s, t) = (s.clone(), t.clone());
                std::thread::spawn(move || answer(c, &s, &t));
            }
        });
        OpenAiMock { port, seen, tool }
    }
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    /// Every request it received, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    /// From now on, a Responses API request that carries no tool output
    /// yet (no `function_call_output` in its body) is answered with a call
    /// of the function `name` with `arguments` (JSON, as the API sends
    /// them: a string), and one that carries it with the text.
    pub fn call_tool(&self, name: &str, arguments: &Value) {
        *self.tool.lock().unwrap() = Some((name.to_string(), arguments.to_string()));
    }
    /// Everything it received, for failure messages.
    pub fn explain(&self) -> String {
        self.seen()
            .iter()
            .map(|s| format!("{} {} {:?}\n{}\n", s.method, s.target, s.headers, s.body))
            .collect()
    }
}

fn sse(kind: &str, data: Value) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

/// The Responses API's output item of an answer: a message with the text,
/// or a call of a function.
fn output_item(tool: Option<&(String, String)>) -> Value {
    match tool {
        Some((name, arguments)) => json!({"id": "fc_mock", "type": "function_call",
            "status": "completed", "call_id": "call_mock1", "name": name, "arguments": arguments}),
        None => json!({"id": "msg_mock", "type": "message", "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": ANSWER_TEXT,
            "annotations": []}]}),
    }
}

/// A Responses API object.
fn response(status: &str, output: Vec<Value>, usage: Value) -> Value {
    json!({"id": "resp_mock", "object": "response", "created_at": 1_700_000_000,
        "status": status, "model": "gpt-mock", "output": output, "usage": usage})
}

/// The events of a streamed Responses API answer, as OpenAI's streaming
/// documentation lists them.
pub fn responses_events(tool: Option<&(String, String)>) -> Vec<String> {
    let item = output_item(tool);
    let mut added = item.clone();
    added["status"] = json!("in_progress");
    let mut v = vec![
        sse(
            "response.created",
            json!({"type": "response.created", "sequence_number": 0,
                "response": response("in_progress", vec![], Value::Null)}),
        ),
        sse(
            "response.in_progress",
            json!({"type": "response.in_progress", "sequence_number": 1,
                "response": response("in_progress", vec![], Value::Null)}),
        ),
    ];
    if tool.is_some() {
        added["arguments"] = json!("");
        v.push(sse(
            "response.output_item.added",
            json!({"type": "response.output_item.added", "sequence_number": 2, "output_index": 0, "item": added}),
        ));
        v.push(sse(
            "response.function_call_arguments.delta",
            json!({"type": "response.function_call_arguments.delta", "sequence_number": 3,
                "item_id": "fc_mock", "output_index": 0, "delta": item["arguments"]}),
        ));
        v.push(sse(
            "response.function_call_arguments.done",
            json!({"type": "response.function_call_arguments.done", "sequence_number": 4,
                "item_id": "fc_mock", "output_index": 0, "arguments": item["arguments"]}),
        ));
    } else {
        added["content"] = json!([]);
        let part = json!({"type": "output_text", "text": "", "annotations": []});
        let done_part = json!({"type": "output_text", "text": ANSWER_TEXT, "annotations": []});
        let at = json!({"item_id": "msg_mock", "output_index": 0, "content_index": 0});
        let with = |mut base: Value, more: Value| {
            for (k, val) in more.as_object().unwrap() {
                base[k] = val.clone();
            }
            base
        };
        v.push(sse(
            "response.output_item.added",
            json!({"type": "response.output_item.added", "sequence_number": 2, "output_index": 0, "item": added}),
        ));
        v.push(sse(
            "response.content_part.added",
            with(
                at.clone(),
                json!({"type": "response.content_part.added", "sequence_number": 3, "part": part}),
            ),
        ));
        v.push(sse(
            "response.output_text.delta",
            with(at.clone(), json!({"type": "response.output_text.delta", "sequence_number": 4, "delta": ANSWER_TEXT})),
        ));
        v.push(sse(
            "response.output_text.done",
            with(at.clone(), json!({"type": "response.output_text.done", "sequence_number": 5, "text": ANSWER_TEXT})),
        ));
        v.push(sse(
            "response.content_part.done",
            with(at, json!({"type": "response.content_part.done", "sequence_number": 6, "part": done_part})),
        ));
    }
    v.push(sse(
        "response.output_item.done",
        json!({"type": "response.output_item.done", "sequence_number": 7, "output_index": 0, "item": item}),
    ));
    v.push(sse(
        "response.completed",
        json!({"type": "response.completed", "sequence_number": 8,
            "response": response("completed", vec![item], RESPONSES_STREAMED.responses())}),
    ));
    v
}

/// The chunks of a streamed Chat Completions answer, with the usage chunk
/// when `usage`, and the closing `[DONE]`.
pub fn chat_chunks(usage: bool) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": "gpt-mock", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": null})
    };
    let mut v = vec![
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": ANSWER_TEXT}), Value::Null),
        chunk(json!({}), json!("stop")),
    ];
    if usage {
        v.push(
            json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk",
            "created": 1_700_000_000, "model": "gpt-mock", "choices": [],
            "usage": CHAT_STREAMED.chat()}),
        );
    }
    let mut out: Vec<String> = v.iter().map(|c| format!("data: {c}\n\n")).collect();
    out.push("data: [DONE]\n\n".to_string());
    out
}

fn chat_plain() -> Value {
    json!({"id": "chatcmpl-mock", "object": "chat.completion", "created": 1_700_000_000,
        "model": "gpt-mock", "choices": [{"index": 0, "message": {"role": "assistant",
        "content": ANSWER_TEXT}, "finish_reason": "stop"}], "usage": CHAT_PLAIN.chat()})
}

fn answer(c: TcpStream, seen: &Mutex<Vec<Seen>>, tool: &Mutex<Option<(String, String)>>) {
    let mut w = c.try_clone().unwrap();
    let mut r = BufReader::new(c);
    let Some(req) = read_request(&mut r) else {
        return;
    };
    seen.lock().unwrap().push(req.clone());
    let path = req.target.split('?').next().unwrap_or("").to_string();
    let body: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
    let streamed = body["stream"] == json!(true);
    let (ctype, text) = match (req.method.as_str(), path.as_str()) {
        ("POST", "/v1/responses" | "/backend-api/codex/responses") => {
            let t = tool.lock().unwrap().clone();
            let t = t.filter(|_| !req.body.contains("function_call_output"));
            if streamed {
                ("text/event-stream", responses_events(t.as_ref()).concat())
            } else {
                let out = vec![output_item(t.as_ref())];
                let r = response("completed", out, RESPONSES_PLAIN.responses());
                ("application/json", r.to_string())
            }
        }
        ("POST", "/v1/chat/completions") if streamed => {
            let usage = body["stream_options"]["include_usage"] == json!(true);
            ("text/event-stream", chat_chunks(usage).concat())
        }
        ("POST", "/v1/chat/completions") => ("application/json", chat_plain().to_string()),
        _ => {
            let e = json!({"error": {"message": "not in the mock", "type": "invalid_request_error",
                "param": null, "code": "unknown_url"}});
            let _ = write!(
                w,
                "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{e}",
                e.to_string().len()
            );
            return;
        }
    };
    if ctype == "application/json" {
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        );
    } else {
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
        );
        for piece in text.split_inclusive("\n\n") {
            if w.write_all(piece.as_bytes()).is_err() {
                return;
            }
            let _ = w.flush();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// A world whose config sends the gateway's OpenAI routes (and the ChatGPT
/// backend's) to the stand-in.
pub fn world_for_openai(w: &World, mock: &OpenAiMock, extra: &str) {
    w.write_config(&format!(
        "[gateway]\nopenai_url = \"{0}\"\nchatgpt_url = \"{0}\"\n{extra}",
        mock.url()
    ));
}

/// A shell function for the busybox cage: `oreq METHOD PATH OUTFILE BODY
/// [HEADER...]` sends one HTTP/1.0 request to the gateway's OpenAI routes
/// (`$ANTHROPIC_BASE_URL/openai` + PATH) with the cage's dummy key and
/// writes the whole answer to OUTFILE, as gateway.rs's `req` does.
const OREQ_FN: &str = r#"oreq() {
  m=$1; t=$2; out=$3; body=$4; shift 4
  hp=${ANTHROPIC_BASE_URL#http://}
  {
    printf '%s /openai%s HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\nAccept-Encoding: zstd, gzip\r\n' "$m" "$t" "$hp"
    for h in "$@"; do printf '%s\r\n' "$h"; done
    printf 'Content-Length: %s\r\n\r\n%s' "${#body}" "$body"
    i=0; same=0; was=-1
    while [ $i -lt 300 ] && [ $same -lt 20 ]; do
      sleep 0.1; i=$((i+1)); n=$(wc -c 2>/dev/null < "$out"); n=${n:-0}
      if [ "$n" -gt 0 ] && [ "$n" -eq "$was" ]; then same=$((same+1)); else same=0; fi
      was=$n
    done
  } | nc "${hp%:*}" "${hp##*:}" > "$out"
}
"#;

const RESPONSES_STREAM_BODY: &str =
    r#"{"model":"gpt-mock","stream":true,"input":[{"role":"user","content":"hi"}]}"#;
const RESPONSES_PLAIN_BODY: &str = r#"{"model":"gpt-mock","input":"hi"}"#;
const CHAT_STREAM_BODY: &str = r#"{"model":"gpt-mock","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}"#;
/// Streamed, without asking for the usage chunk.
const CHAT_UNCOUNTED_BODY: &str =
    r#"{"model":"gpt-mock","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
const CHAT_PLAIN_BODY: &str = r#"{"model":"gpt-mock","messages":[{"role":"user","content":"hi"}]}"#;

fn exec_with_key(w: &World, name: &str, script: &str) -> Run {
    w.run_env(
        &["cage", "exec", name, "--", "sh", "-c", script],
        &[("OPENAI_API_KEY", MACHINE_OPENAI_KEY)],
    )
}

fn answer_in(project: &Path, f: &str) -> String {
    read(&project.join(f))
}

/// The machine's key, never the cage's, and OpenAI's model routes only:
/// the Responses API and Chat Completions, streamed and not, reach the
/// stand-in with the machine's `OPENAI_API_KEY` in place of the cage's
/// dummy (and no account or organisation of the cage's choosing); any
/// other path under `/openai` is refused with 403 and never reaches it;
/// the key is nowhere in the cage; the answers' counts land in the
/// session's record (a Chat Completions stream that did not ask for them:
/// what its request and text are worth, and the turn spends nothing more).
fn routes_with_the_machines_key(w: World) {
    let mock = OpenAiMock::start();
    world_for_openai(&w, &mock, GPT_MOCK_PRICES);
    let (name, project) = session_in(&w, "oaroutes");
    let p = project.display();
    let auth = format!("'Authorization: Bearer {DUMMY}'");
    let script = format!(
        "{OREQ_FN}\
         oreq POST /v1/responses {p}/rs.txt '{RESPONSES_STREAM_BODY}' {auth} 'ChatGPT-Account-ID: forged' 'OpenAI-Organization: org-forged'
         oreq POST /v1/responses {p}/rp.txt '{RESPONSES_PLAIN_BODY}' {auth}
         oreq POST /v1/chat/completions {p}/cs.txt '{CHAT_STREAM_BODY}' {auth}
         oreq POST /v1/chat/completions {p}/cp.txt '{CHAT_PLAIN_BODY}' {auth}
         oreq POST /v1/chat/completions {p}/cu.txt '{CHAT_UNCOUNTED_BODY}' {auth}
         oreq POST /v1/responses {p}/after.txt '{RESPONSES_PLAIN_BODY}' {auth}
         oreq GET /v1/models {p}/models.txt '' {auth}
         oreq POST /v1/files {p}/files.txt '{{}}' {auth}
         oreq POST /v1/embeddings {p}/emb.txt '{{}}' {auth}
         oreq POST /v1/responses/../files {p}/dots.txt '{{}}' {auth}
         oreq GET /v1/responses {p}/get.txt '' {auth}
         oreq POST /v1/messages {p}/msg.txt '{{}}' {auth}
         cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {MACHINE_OPENAI_KEY}
         grep -rls {MACHINE_OPENAI_KEY} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -5
         echo END"
    );
    let run = exec_with_key(&w, &name, &script).ok();
    let out = run.stdout();
    let rs = answer_in(&project, "rs.txt");
    assert_eq!(status(&rs), 200, "{rs}\n{}", run.explain());
    assert!(rs.contains("response.completed"), "{rs}");
    assert!(rs.contains(ANSWER_TEXT), "{rs}");
    for f in ["rp", "cs", "cp", "cu"] {
        let t = answer_in(&project, &format!("{f}.txt"));
        assert_eq!(status(&t), 200, "{f}: {t}");
        assert!(t.contains(ANSWER_TEXT), "{f}: {t}");
    }
    assert!(answer_in(&project, "cs.txt").contains("[DONE]"));
    // The answer without its counts was charged an estimate, and what it
    // spent is not known: the turn's next model request is refused, and
    // never reaches the stand-in (its targets, below).
    let after = answer_in(&project, "after.txt");
    assert_eq!(status(&after), 400, "{after}");
    assert!(after.contains("could not count"), "{after}");
    for f in ["models", "files", "emb", "dots", "get", "msg"] {
        let t = answer_in(&project, &format!("{f}.txt"));
        assert_eq!(status(&t), 403, "{f}: {t}");
        assert!(t.contains("permission_error"), "{f}: {t}");
    }
    let seen = mock.seen();
    let targets: Vec<String> = seen
        .iter()
        .map(|s| format!("{} {}", s.method, s.target))
        .collect();
    assert_eq!(
        targets,
        [
            "POST /v1/responses",
            "POST /v1/responses",
            "POST /v1/chat/completions",
            "POST /v1/chat/completions",
            "POST /v1/chat/completions"
        ],
        "{}",
        mock.explain()
    );
    for s in &seen {
        let bearer = format!("Bearer {MACHINE_OPENAI_KEY}");
        assert_eq!(s.headers.get("authorization"), Some(&bearer), "{s:?}");
        assert_eq!(s.headers.get("chatgpt-account-id"), None, "{s:?}");
        assert_eq!(s.headers.get("openai-organization"), None, "{s:?}");
        // Asked for answers as they are, whatever the cage asked.
        assert_eq!(
            s.headers.get("accept-encoding").map(String::as_str),
            Some("identity"),
            "{s:?}"
        );
        assert!(!format!("{s:?}").contains(DUMMY), "{s:?}");
    }
    let lines: Vec<&str> = out.lines().collect();
    let end = lines.iter().position(|l| *l == "END").unwrap();
    assert_eq!(lines[end - 1..end], ["0"], "the key is in the cage:\n{out}");
    assert!(!out.contains(MACHINE_OPENAI_KEY), "{out}");
    // The stream that did not ask for its counts is charged one token per
    // 3 bytes of its request's body and of the text that passed.
    let uncounted = OpenAiCounts {
        input: (CHAT_UNCOUNTED_BODY.len() as u64).div_ceil(3),
        cached: 0,
        output: (ANSWER_TEXT.len() as u64).div_ceil(3),
    };
    let used = &w.record(&name)["tokens"]["used"];
    assert_eq!(
        used,
        &recorded(&[
            &RESPONSES_STREAMED,
            &RESPONSES_PLAIN,
            &CHAT_STREAMED,
            &CHAT_PLAIN,
            &uncounted
        ]),
        "{}",
        run.explain()
    );
    // In dollars at the configured price: the cached input once, at the
    // cached price, the rest of the input at the input price.
    let all = [
        &RESPONSES_STREAMED,
        &RESPONSES_PLAIN,
        &CHAT_STREAMED,
        &CHAT_PLAIN,
        &uncounted,
    ];
    let cost: u64 = all
        .iter()
        .map(|c| (c.input - c.cached) * 2_000 + c.cached * 500 + c.output * 8_000)
        .sum();
    let gpt = &w.record(&name)["tokens"]["by_model"]["gpt-mock"];
    assert_eq!(gpt["usd"], json!(cost as f64 / 1e9), "{gpt:#}");
    assert_eq!(
        gpt["cache_read_input_tokens"],
        recorded(&all)["cache_read_input_tokens"]
    );
}

/// The price the tests give the stand-in's model, in dollars per million
/// tokens (GPT-4.1's): 2000, 8000, 2000 and 500 billionths a token.
const GPT_MOCK_PRICES: &str = "[prices.\"gpt-mock\"]
input = 2.0
output = 8.0
cache_write = 2.0
cache_read = 0.5
";

#[test]
fn openai_routes_with_the_machines_key() {
    routes_with_the_machines_key(World::new());
}

#[test]
fn openai_routes_with_the_machines_key_rootless() {
    routes_with_the_machines_key(World::rootless());
}

/// The session's budget holds for OpenAI's answers as for the Messages
/// API's: the answer that crosses it finishes, the next request is
/// answered 400 naming the command that raises it and never reaches the
/// stand-in.
fn budget_refuses(w: World) {
    let mock = OpenAiMock::start();
    world_for_openai(&w, &mock, crate::gateway::REFUSE_AT_ONCE);
    let (name, project) = session_in(&w, "oabudget");
    let p = project.display();
    let budget = RESPONSES_STREAMED.total() - 1;
    w.run(&["cage", "limits", &name, "--tokens", &budget.to_string()])
        .ok();
    let script = format!(
        "{OREQ_FN}\
         oreq POST /v1/responses {p}/a.txt '{RESPONSES_STREAM_BODY}'
         oreq POST /v1/responses {p}/b.txt '{RESPONSES_STREAM_BODY}'
         oreq POST /v1/chat/completions {p}/c.txt '{CHAT_PLAIN_BODY}'"
    );
    let run = exec_with_key(&w, &name, &script).ok();
    assert!(
        answer_in(&project, "a.txt").contains("response.completed"),
        "{}",
        run.explain()
    );
    let said = format!(
        "has spent its token budget: {} of {budget} tokens",
        RESPONSES_STREAMED.total()
    );
    let raise = format!("shrooms-agent cage limits {name} --tokens N");
    for f in ["b.txt", "c.txt"] {
        let t = answer_in(&project, f);
        assert_eq!(status(&t), 400, "{f}: {t}\n{}", run.explain());
        assert!(t.contains(&said) && t.contains(&raise), "{f}: {t}");
    }
    assert!(run.stderr().contains(&said), "{}", run.explain());
    assert_eq!(mock.seen().len(), 1, "{}", mock.explain());
    assert_eq!(
        w.record(&name)["tokens"]["used"],
        recorded(&[&RESPONSES_STREAMED])
    );
}

#[test]
fn openai_budget_refuses() {
    budget_refuses(World::new());
}

#[test]
fn openai_budget_refuses_rootless() {
    budget_refuses(World::rootless());
}

/// Codex's ChatGPT sign-in on the machine (`~/.codex/auth.json` with
/// tokens and no key): the Responses API goes to the ChatGPT backend's
/// Codex route with its access token and account, read from the file at
/// the request; Chat Completions is refused. No sources at all: a 401
/// naming the OpenAI settings.
fn chatgpt_sign_in(w: World) {
    let mock = OpenAiMock::start();
    // Its answer is a call of a tool, as a harness's turn would get.
    mock.call_tool("shell", &json!({"command": ["echo", "hi"]}));
    world_for_openai(&w, &mock, "");
    let (name, project) = session_in(&w, "oachatgpt");
    let p = project.display();
    let script = format!(
        "{OREQ_FN}\
         oreq POST /v1/responses {p}/r.txt '{RESPONSES_STREAM_BODY}' 'Authorization: Bearer {DUMMY}' 'ChatGPT-Account-ID: forged'
         oreq POST /v1/chat/completions {p}/c.txt '{CHAT_PLAIN_BODY}'"
    );
    // No source: the harness is told what to set.
    let run = w
        .run(&["cage", "exec", &name, "--", "sh", "-c", &script])
        .ok();
    let none = answer_in(&project, "r.txt");
    assert_eq!(status(&none), 401, "{none}\n{}", run.explain());
    assert!(
        none.contains("openai_key_file") && none.contains("OPENAI_API_KEY"),
        "{none}"
    );
    assert!(mock.seen().is_empty(), "{}", mock.explain());

    let codex = w.dir_in_home(".codex");
    std::fs::write(
        codex.join("auth.json"),
        json!({"auth_mode": "chatgpt", "OPENAI_API_KEY": null, "tokens": {"id_token": "id-x",
            "access_token": "at-machine-signin", "refresh_token": "rt-machine",
            "account_id": "acc-machine"}, "last_refresh": "2026-12-01T00:00:00Z"})
        .to_string(),
    )
    .unwrap();
    w.chown_all();
    let run = w
        .run(&["cage", "exec", &name, "--", "sh", "-c", &script])
        .ok();
    let r = answer_in(&project, "r.txt");
    assert_eq!(status(&r), 200, "{r}\n{}", run.explain());
    assert!(r.contains("response.completed"), "{r}");
    assert!(r.contains("\"call_id\":\"call_mock1\""), "{r}");
    let c = answer_in(&project, "c.txt");
    assert_eq!(status(&c), 403, "{c}");
    assert!(c.contains("ChatGPT sign-in"), "{c}");
    let seen = mock.seen();
    assert_eq!(seen.len(), 1, "{}", mock.explain());
    assert_eq!(seen[0].target, "/backend-api/codex/responses");
    let h = |n: &str| seen[0].headers.get(n).cloned();
    assert_eq!(h("authorization"), Some("Bearer at-machine-signin".into()));
    assert_eq!(h("chatgpt-account-id"), Some("acc-machine".into()));
    assert!(!mock.explain().contains("rt-machine"));
    assert_eq!(
        w.record(&name)["tokens"]["used"],
        recorded(&[&RESPONSES_STREAMED])
    );
    // A subscription has no price per token: its tokens kept apart, and a
    // dollar budget refuses the next request that would go upstream on it,
    // which never reaches the stand-in (docs/gateway.md, "Budgets").
    let t = w.record(&name)["tokens"].clone();
    assert_eq!(
        t["subscription"]["gpt-mock"],
        recorded(&[&RESPONSES_STREAMED])
    );
    assert_eq!(t["by_model"], json!({}), "{t:#}");
    w.run(&["cage", "limits", &name, "--usd", "5"]).ok();
    let run = w
        .run(&["cage", "exec", &name, "--", "sh", "-c", &script])
        .ok();
    let r = answer_in(&project, "r.txt");
    assert_eq!(status(&r), 400, "{r}\n{}", run.explain());
    assert!(
        r.contains("Codex's ChatGPT sign-in, a subscription sign-in"),
        "{r}"
    );
    assert_eq!(mock.seen().len(), 1, "{}", mock.explain());
}

#[test]
fn openai_chatgpt_sign_in() {
    chatgpt_sign_in(World::new());
}

#[test]
fn openai_chatgpt_sign_in_rootless() {
    chatgpt_sign_in(World::rootless());
}
