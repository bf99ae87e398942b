//! End-to-end tests of the gateway's token counts and a session's token
//! budget (docs/gateway.md, "Model gateway"): the mock of the model API in
//! gateway.rs reports distinct known counts, streamed and not; what the
//! session's record, `cage show`, serve's API and `cage history` say must
//! be their sums, and a request past the budget must never reach the mock.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::gateway::{
    Counts, LINGER, LONG_DELTA, LONG_DELTAS, MACHINE_KEY, Mock, Mode, PLAIN, QUIET, REFUSE_AT_ONCE,
    REQ_FN, STREAMED, read, session_in, status, world_for,
};

/// `plain OUTFILE`: a Messages request that asks for no stream, so the
/// mock answers with one JSON body (busybox wget writes its body).
pub const PLAIN_FN: &str = r#"plain() {
  body='{"model":"claude-mock","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}'
  wget -q -O "$1" --header 'Content-Type: application/json' --post-data "$body" \
    "$ANTHROPIC_BASE_URL/v1/messages"
}
"#;

/// The sums of these answers' counts, as a record keeps them.
fn summed(answers: &[&Counts]) -> Value {
    let sum = |f: fn(&Counts) -> u64| answers.iter().map(|c| f(c)).sum::<u64>();
    json!({
        "input_tokens": sum(|c| c.input_tokens),
        "output_tokens": sum(|c| c.output_tokens),
        "cache_creation_input_tokens": sum(|c| c.cache_creation_input_tokens),
        "cache_read_input_tokens": sum(|c| c.cache_read_input_tokens),
        "responses": answers.len(),
    })
}

/// A `last_turn`'s counts alone (its start time checked and left out, its
/// dollars and models too), to compare with `summed`.
fn without_start(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        assert!(o.remove("started").is_some_and(|s| started_secs(&s) > 0));
        for k in ["spent", "by_model", "subscription"] {
            o.remove(k);
        }
    }
    v
}

/// The price the tests give the mock's model (`claude-mock`), in dollars
/// per million tokens: ten times Sonnet 4.5's, so that one answer costs
/// more than a cent.
pub const MOCK_PRICES: &str = "[prices.\"claude-mock\"]
input = 30.0
output = 150.0
cache_write = 37.5
cache_read = 3.0
";

/// What these answers cost at [`MOCK_PRICES`], in billionths of a dollar:
/// 30000, 150000, 37500 and 3000 a token.
fn cost(answers: &[&Counts]) -> u64 {
    answers
        .iter()
        .map(|c| {
            c.input_tokens * 30_000
                + c.output_tokens * 150_000
                + c.cache_creation_input_tokens * 37_500
                + c.cache_read_input_tokens * 3_000
        })
        .sum()
}

/// Billionths of a dollar as JSON gives them: a number of dollars.
fn usd_json(nanos: u64) -> Value {
    json!(nanos as f64 / 1e9)
}

/// Billionths of a dollar as a line says them: `$0.0132`.
fn usd_words(nanos: u64) -> String {
    let t = (nanos + 50_000) / 100_000;
    format!("${}.{:04}", t / 10_000, t % 10_000)
}

/// A turn's start: RFC 3339 with an offset in JSON output, Unix seconds in
/// the record file.
fn started_secs(s: &Value) -> i64 {
    match s.as_str() {
        Some(t) => chrono::DateTime::parse_from_rfc3339(t)
            .unwrap_or_else(|e| panic!("{t}: not RFC 3339: {e}"))
            .timestamp(),
        None => s.as_i64().unwrap(),
    }
}

fn exec(w: &World, name: &str, script: &str) -> Run {
    w.run_env(
        &["cage", "exec", name, "--", "sh", "-c", script],
        &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
    )
}

/// The turns' lines of a session's history.
fn turn_lines(w: &World, name: &str) -> Vec<String> {
    w.run(&["cage", "history", name, "--json"]).ok().json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["what"].as_str().unwrap().to_string())
        .filter(|l| l.starts_with("turn: "))
        .collect()
}

/// The history line of a turn whose answers were these, priced at
/// [`MOCK_PRICES`].
fn turn_line(answers: &[&Counts], refused: &str) -> String {
    let s = summed(answers);
    let n = answers.len();
    format!(
        "turn: tokens in {}, out {}, cache write {}, cache read {} ({} tokens, {n} response{}); {}{refused}",
        s["input_tokens"],
        s["output_tokens"],
        s["cache_creation_input_tokens"],
        s["cache_read_input_tokens"],
        answers.iter().map(|c| c.total()).sum::<u64>(),
        if n == 1 { "" } else { "s" },
        usd_words(cost(answers))
    )
}

/// Two turns: the first gets a streamed answer and a plain one (and asks
/// to count tokens and says hello, which spend nothing), the second a
/// streamed one. The record, `cage show` (JSON and text) and the history
/// say exactly what the mock reported, per turn and summed; with `http`,
/// serve's `GET /v1/sessions/{name}` says the same as `cage show --json`.
fn counts_what_the_mock_reported(w: World, http: bool) {
    let mock = Mock::start();
    world_for(&w, &mock, MOCK_PRICES);
    let (name, project) = session_in(&w, "usage");
    let p = project.display();
    let fresh = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(fresh["tokens"]["used"], summed(&[]), "{fresh:#}");
    assert_eq!(fresh["tokens"]["budget"], Value::Null);
    assert_eq!(fresh["tokens"]["last_turn"], Value::Null);

    let turn1 = format!(
        "{REQ_FN}{PLAIN_FN}req POST '/v1/messages?beta=true' {p}/s1.txt
         plain {p}/p1.txt
         req POST /v1/messages/count_tokens {p}/c1.txt
         req HEAD /api/hello {p}/h1.txt"
    );
    let r = exec(&w, &name, &turn1).ok();
    let s1 = read(&project.join("s1.txt"));
    assert!(s1.contains("message_stop"), "{s1}\n{}", r.explain());
    assert!(
        read(&project.join("p1.txt")).contains("hello from the mock"),
        "{}\n{}",
        r.explain(),
        mock.explain()
    );
    assert_eq!(status(&read(&project.join("c1.txt"))), 200);
    let shown = w.run(&["cage", "show", &name, "--json"]).ok().json();
    let t = &shown["tokens"];
    assert_eq!(t["used"], summed(&[&STREAMED, &PLAIN]), "{shown:#}");
    assert_eq!(
        without_start(&t["last_turn"]),
        summed(&[&STREAMED, &PLAIN]),
        "{shown:#}"
    );

    let turn2 = format!("{REQ_FN}req POST /v1/messages {p}/s2.txt");
    exec(&w, &name, &turn2).ok();
    assert!(read(&project.join("s2.txt")).contains("message_stop"));
    let shown = w.run(&["cage", "show", &name, "--json"]).ok().json();
    let t = &shown["tokens"];
    let all = summed(&[&STREAMED, &PLAIN, &STREAMED]);
    assert_eq!(t["used"], all, "{shown:#}");
    assert_eq!(without_start(&t["last_turn"]), summed(&[&STREAMED]));
    // In dollars at the configured price, per session, per model and for
    // the last turn.
    let three = cost(&[&STREAMED, &PLAIN, &STREAMED]);
    assert_eq!(
        t["spent"],
        json!({"usd": usd_json(three), "unpriced": [], "subscription_tokens": 0}),
        "{shown:#}"
    );
    let mut mock_model = all.clone();
    mock_model["usd"] = usd_json(three);
    assert_eq!(
        t["by_model"],
        json!({"claude-mock": mock_model}),
        "{shown:#}"
    );
    assert_eq!(t["last_turn"]["spent"]["usd"], usd_json(cost(&[&STREAMED])));
    assert_eq!(t["usd_budget"], Value::Null);
    // Kept in the record, read again by every command.
    let kept = &w.record(&name)["tokens"];
    assert_eq!((&kept["used"], &kept["budget"]), (&t["used"], &t["budget"]));
    assert_eq!(
        without_start(&kept["last_turn"]),
        without_start(&t["last_turn"])
    );
    assert_eq!(
        started_secs(&kept["last_turn"]["started"]),
        started_secs(&t["last_turn"]["started"])
    );

    // One history line per turn, with that turn's counts.
    assert_eq!(
        turn_lines(&w, &name),
        [
            turn_line(&[&STREAMED, &PLAIN], ""),
            turn_line(&[&STREAMED], "")
        ]
    );
    // The text of `cage show`.
    let text = w.run(&["cage", "show", &name]).ok().stdout();
    assert!(
        text.contains(&format!("dollars   {}; budget none\n", usd_words(three))),
        "{text}"
    );
    let total = 2 * STREAMED.total() + PLAIN.total();
    assert!(
        text.contains(&format!(
            "tokens    in {}, out {}, cache write {}, cache read {} ({total} tokens, 3 responses); \
             budget none\n",
            all["input_tokens"],
            all["output_tokens"],
            all["cache_creation_input_tokens"],
            all["cache_read_input_tokens"],
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "last turn {}\n",
            turn_line(&[&STREAMED], "").trim_start_matches("turn: tokens ")
        )),
        "{text}"
    );
    // The mock answered three model requests: nothing else was counted.
    let posts = mock
        .seen()
        .iter()
        .filter(|s| s.method == "POST" && s.target.split('?').next() == Some("/v1/messages"))
        .count();
    assert_eq!(posts, 3, "{}", mock.explain());

    if http {
        let s = w.serve(&[], &[]);
        let api = get(&format!("{}/v1/sessions/{name}", s.url)).is(200).json();
        assert_eq!(api["tokens"], shown["tokens"], "{api:#}");
    }
}

#[test]
fn usage_counts_what_the_model_reported() {
    counts_what_the_mock_reported(World::new(), true);
}

#[test]
fn usage_counts_what_the_model_reported_rootless() {
    counts_what_the_mock_reported(World::rootless(), false);
}

/// The budget: set with `cage limits --tokens` (on any machine: podman has
/// no part in it, so it works rootless on cgroups v1 too). The turn that
/// reaches it finishes its answer; its next model request, and every one of
/// the next turn, is answered in the API's own error shape naming the
/// command that raises it, the terminal gets the same words, and the mock
/// never sees them. Raised, the session goes on; `none` removes it.
fn a_spent_budget_refuses(w: World) {
    let mock = Mock::start();
    world_for(&w, &mock, &format!("{MOCK_PRICES}{REFUSE_AT_ONCE}"));
    let (name, project) = session_in(&w, "budget");
    let p = project.display();
    let raise = format!("shrooms-agent cage limits {name} --tokens N");
    let budget = STREAMED.total() - 1;

    // Bad budgets change nothing.
    for bad in ["0", "-1", "lots", "1.5"] {
        let flag = format!("--tokens={bad}");
        let r = w.run(&["cage", "limits", &name, &flag]).code_is(2);
        assert!(r.stderr().contains("--tokens: "), "{}", r.explain());
    }
    assert_eq!(w.record(&name)["tokens"]["budget"], Value::Null);

    let r = w
        .run(&["cage", "limits", &name, "--tokens", &budget.to_string()])
        .ok();
    assert!(
        r.stdout()
            .contains(&format!("token budget {budget} (applied now)")),
        "{}",
        r.explain()
    );
    assert_eq!(w.record(&name)["tokens"]["budget"], budget);

    // The first answer spends past it; the second request is refused.
    let turn1 = format!(
        "{REQ_FN}req POST /v1/messages {p}/a.txt
         req POST /v1/messages {p}/b.txt"
    );
    let r = exec(&w, &name, &turn1).ok();
    assert!(read(&project.join("a.txt")).contains("message_stop"));
    let refused = read(&project.join("b.txt"));
    assert_eq!(status(&refused), 400, "{refused}\n{}", r.explain());
    assert!(refused.contains("\"invalid_request_error\""), "{refused}");
    let said = format!(
        "has spent its token budget: {} of {budget} tokens",
        STREAMED.total()
    );
    for words in [&said, &raise] {
        assert!(refused.contains(words.as_str()), "{refused}");
        assert!(r.stderr().contains(words.as_str()), "{}", r.explain());
    }
    // Said once per turn on the terminal.
    assert_eq!(r.stderr().matches(&said).count(), 1, "{}", r.explain());
    let model_requests = || {
        mock.seen()
            .iter()
            .filter(|s| s.method == "POST" && s.target == "/v1/messages")
            .count()
    };
    assert_eq!(model_requests(), 1, "{}", mock.explain());

    // The next turn: refused at once; the hello still passes.
    let turn2 = format!(
        "{REQ_FN}req POST /v1/messages {p}/c.txt
         req HEAD /api/hello {p}/h.txt"
    );
    let r = exec(&w, &name, &turn2).ok();
    let c = read(&project.join("c.txt"));
    assert_eq!(status(&c), 400, "{c}");
    assert!(c.contains(&raise), "{c}");
    assert!(r.stderr().contains(&raise), "{}", r.explain());
    assert_eq!(status(&read(&project.join("h.txt"))), 200);
    assert_eq!(model_requests(), 1, "{}", mock.explain());

    // Raised: the session goes on.
    let more = (2 * STREAMED.total()).to_string();
    w.run(&["cage", "limits", &name, "--tokens", &more]).ok();
    let turn3 = format!("{REQ_FN}req POST /v1/messages {p}/d.txt");
    exec(&w, &name, &turn3).ok();
    assert!(read(&project.join("d.txt")).contains("message_stop"));
    assert_eq!(model_requests(), 2, "{}", mock.explain());
    // Spent again (2 answers = the budget): refused.
    exec(&w, &name, &turn3).ok();
    assert_eq!(status(&read(&project.join("d.txt"))), 400);
    assert_eq!(model_requests(), 2, "{}", mock.explain());
    // Removed: no budget.
    let r = w.run(&["cage", "limits", &name, "--tokens", "none"]).ok();
    assert!(r.stdout().contains("token budget none"), "{}", r.explain());
    assert_eq!(w.record(&name)["tokens"]["budget"], Value::Null);
    exec(&w, &name, &turn3).ok();
    assert!(read(&project.join("d.txt")).contains("message_stop"));
    assert_eq!(model_requests(), 3, "{}", mock.explain());

    let refused_one = "; 1 model request refused: token budget spent";
    assert_eq!(
        turn_lines(&w, &name),
        [
            turn_line(&[&STREAMED], refused_one),
            format!(
                "turn: tokens in 0, out 0, cache write 0, cache read 0 (0 tokens, 0 responses){refused_one}"
            ),
            turn_line(&[&STREAMED], ""),
            format!(
                "turn: tokens in 0, out 0, cache write 0, cache read 0 (0 tokens, 0 responses){refused_one}"
            ),
            turn_line(&[&STREAMED], ""),
        ]
    );
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    for line in [
        format!("limits: tokens none -> {budget}"),
        format!("limits: tokens {budget} -> {more}"),
        format!("limits: tokens {more} -> none"),
    ] {
        assert!(history.contains(&line), "{line}:\n{history}");
    }
    let used = &w.record(&name)["tokens"]["used"];
    assert_eq!(*used, summed(&[&STREAMED, &STREAMED, &STREAMED]));
}

#[test]
fn usage_a_spent_budget_refuses_model_requests() {
    a_spent_budget_refuses(World::new());
}

#[test]
fn usage_a_spent_budget_refuses_model_requests_rootless() {
    a_spent_budget_refuses(World::rootless());
}

/// The budget over HTTP (the limits route's `tokens`), beside the CLI's:
/// set, removed with null or "none", bad ones refused with 400 and
/// nothing changed; `cage limits --reset` removes it too, as the machine
/// has none.
#[test]
fn usage_budget_over_http_and_reset() {
    let w = World::new();
    let (name, _) = session_in(&w, "budgethttp");
    let s = w.serve(&[], &[]);
    let url = format!("{}/v1/sessions/{name}/cage/limits", s.url);
    let budget = || w.record(&name)["tokens"]["budget"].clone();

    let r = post(&url, r#"{"tokens": 5000}"#).is(200).json();
    assert_eq!(r["tokens_before"], Value::Null, "{r:#}");
    assert_eq!(r["tokens_after"], 5000, "{r:#}");
    assert_eq!(r["applied"], "now", "{r:#}");
    assert_eq!(budget(), 5000);
    let shown = get(&format!("{}/v1/sessions/{name}", s.url)).is(200).json();
    assert_eq!(shown["tokens"]["budget"], 5000, "{shown:#}");
    // Memory alone leaves it as it is.
    post(&url, r#"{"memory": "700m"}"#).is(200);
    assert_eq!(budget(), 5000);
    for bad in [
        r#"{"tokens": 0}"#,
        r#"{"tokens": 1.5}"#,
        r#"{"tokens": "many"}"#,
        r#"{"tokens": true}"#,
    ] {
        post(&url, bad).is(400);
        assert_eq!(budget(), 5000, "{bad}");
    }
    let r = post(&url, r#"{"tokens": null}"#).is(200).json();
    assert_eq!(r["tokens_before"], 5000, "{r:#}");
    assert_eq!(r["tokens_after"], Value::Null, "{r:#}");
    assert_eq!(budget(), Value::Null);
    post(&url, r#"{"tokens": "2000000"}"#).is(200);
    assert_eq!(budget(), 2_000_000);
    post(&url, r#"{"tokens": "none"}"#).is(200);
    assert_eq!(budget(), Value::Null);

    // The CLI's --reset: the machine's limits, and no budget.
    w.run(&["cage", "limits", &name, "--tokens", "300"]).ok();
    assert_eq!(budget(), 300);
    let r = w.run(&["cage", "limits", &name, "--reset"]).ok();
    assert!(r.stdout().contains("token budget none"), "{}", r.explain());
    assert_eq!(budget(), Value::Null);
    assert_eq!(w.record(&name)["cage"]["limits"]["memory"], "4g");
    let r = w.run(&["cage", "limits", &name, "--reset", "--tokens", "5"]);
    assert_eq!(r.code(), 2, "{}", r.explain());
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    assert!(
        history.contains("limits: memory 700m -> 4g, tokens 300 -> none"),
        "{history}"
    );
}

/// The real Claude Code is shown the refusal: its first turn spends the
/// budget, its second prints the words that name the command raising it.
#[test]
fn usage_real_claude_code_shows_the_spent_budget() {
    let (claude, image) = crate::common::real_claude();
    let w = World::new();
    let mock = Mock::start();
    world_for(
        &w,
        &mock,
        &format!("[harness]\nclaude = \"{claude}\"\n{REFUSE_AT_ONCE}"),
    );
    let name = w.session("budgetclaude");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--image", &image]);
    w.run(&["cage", "limits", &name, "--tokens", "100"]).ok();
    let mut env = QUIET.to_vec();
    env.push(("ANTHROPIC_API_KEY", MACHINE_KEY));
    let first = w
        .run_env(&["cage", "run", &name, "--", "-p", "say hi"], &env)
        .ok();
    assert!(
        first.stdout().contains("hello from the mock"),
        "{}\n{}",
        first.explain(),
        mock.explain()
    );
    let seen = mock.seen().len();
    let started = std::time::Instant::now();
    let second = w.run_env(&["cage", "run", &name, "--", "-p", "say hi again"], &env);
    let raise = format!("shrooms-agent cage limits {name} --tokens N");
    eprintln!("Claude Code past the budget:\n{}", second.explain());
    assert!(
        second.stdout().contains(&raise),
        "Claude Code did not show the refusal:\n{}",
        second.explain()
    );
    assert!(second.stderr().contains(&raise), "{}", second.explain());
    // Shown at once, not retried against the gateway for minutes.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let posts_after = mock
        .seen()
        .iter()
        .skip(seen)
        .filter(|s| s.method == "POST")
        .count();
    assert_eq!(posts_after, 0, "{}", mock.explain());
}

/// The model requests the mock answered.
fn model_posts(mock: &Mock) -> usize {
    mock.seen()
        .iter()
        .filter(|s| s.method == "POST" && s.target.split('?').next() == Some("/v1/messages"))
        .count()
}

/// A harness that asks for compressed answers (`Accept-Encoding: gzip`),
/// against an upstream that compresses when asked: the gateway asks for
/// them as they are, counts each, and the budget holds (the gateway once
/// passed the harness's header on, could not read the compressed answers
/// and counted nothing).
fn compressed_answers_are_counted(w: World) {
    let mock = Mock::with(Mode::GzipWhenAsked);
    world_for(&w, &mock, REFUSE_AT_ONCE);
    let (name, project) = session_in(&w, "gzip");
    let p = project.display();
    w.run(&[
        "cage",
        "limits",
        &name,
        "--tokens",
        &(STREAMED.total() + 1).to_string(),
    ])
    .ok();
    let mut script = REQ_FN.to_string();
    for i in 1..=4 {
        script.push_str(&format!(
            "req POST /v1/messages {p}/g{i}.txt 'Accept-Encoding: gzip, br'\n"
        ));
    }
    let r = exec(&w, &name, &script).ok();
    // An answer compressed (as the gateway once let it be) is not text.
    let read = |p: std::path::PathBuf| {
        String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
    };
    for i in 1..=2 {
        let a = read(project.join(format!("g{i}.txt")));
        assert_eq!(status(&a), 200, "{a}\n{}", r.explain());
        assert!(a.contains("message_stop"), "{a}");
    }
    for i in 3..=4 {
        let a = read(project.join(format!("g{i}.txt")));
        assert_eq!(status(&a), 400, "{a}\n{}", r.explain());
        assert!(a.contains("has spent its token budget"), "{a}");
    }
    assert_eq!(model_posts(&mock), 2, "{}", mock.explain());
    for s in mock.seen() {
        assert_eq!(
            s.headers.get("accept-encoding").map(String::as_str),
            Some("identity"),
            "{s:?}"
        );
    }
    assert_eq!(
        w.record(&name)["tokens"]["used"],
        summed(&[&STREAMED, &STREAMED])
    );
}

#[test]
fn usage_compressed_answers_are_counted() {
    compressed_answers_are_counted(World::new());
}

#[test]
fn usage_compressed_answers_are_counted_rootless() {
    compressed_answers_are_counted(World::rootless());
}

/// `fire OUTFILE`: a plain Messages request over a connection of its own
/// (HTTP/1.0, its answer written to OUTFILE), in the background;
/// `until_answered OUTFILE`: back as soon as the answer's JSON (its
/// counts) or an error is there, not waiting for the connection's end.
const FIRE_FN: &str = r#"fire() {
  hp=${ANTHROPIC_BASE_URL#http://}
  body='{"model":"claude-mock","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}'
  { printf 'POST /v1/messages HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n%s' "$hp" "${#body}" "$body"; sleep 20; } \
    | nc "${hp%:*}" "${hp##*:}" > "$1" &
}
until_answered() {
  i=0
  while [ $i -lt 1500 ] && ! grep -q -e cache_read_input_tokens -e '"error"' "$1" 2>/dev/null; do
    sleep 0.02; i=$((i+1))
  done
}
"#;

/// The budget is checked against every answer before a request: back to
/// back (each request sent the moment the answer before it has come,
/// before the upstream's connection ends) and all at once, a budget of one
/// and a half answers lets two through and refuses the third. Before, a
/// request was checked against the answers counted so far, and an answer
/// was counted only at its connection's end: three of three passed.
fn the_budget_counts_every_answer_before_a_request(w: World) {
    let mock = Mock::with(Mode::Lingering);
    world_for(&w, &mock, REFUSE_AT_ONCE);
    let (name, project) = session_in(&w, "budgetlag");
    let p = project.display();
    let budget = PLAIN.total() * 3 / 2;
    w.run(&["cage", "limits", &name, "--tokens", &budget.to_string()])
        .ok();
    let answered = |files: &[&str], r: &Run| {
        let statuses: Vec<u16> = files
            .iter()
            .map(|f| status(&read(&project.join(f))))
            .collect();
        let seen = |code| statuses.iter().filter(|s| **s == code).count();
        assert_eq!(
            (seen(200), seen(400)),
            (2, 1),
            "{statuses:?}: {}\n{}",
            files
                .iter()
                .map(|f| read(&project.join(f)))
                .collect::<Vec<_>>()
                .join("\n---\n"),
            r.explain()
        );
    };
    // Back to back.
    let wait = LINGER.as_secs() * 3 + 5;
    let script = format!(
        "{FIRE_FN}fire {p}/a.txt; until_answered {p}/a.txt; \
         fire {p}/b.txt; until_answered {p}/b.txt; \
         fire {p}/c.txt; until_answered {p}/c.txt; sleep {wait}; kill $(jobs -p) 2>/dev/null; true"
    );
    let r = exec(&w, &name, &script).ok();
    answered(&["a.txt", "b.txt", "c.txt"], &r);
    assert_eq!(model_posts(&mock), 2, "{}", mock.explain());
    assert_eq!(w.record(&name)["tokens"]["used"], summed(&[&PLAIN, &PLAIN]));

    // All at once, with the budget raised by as much again.
    w.run(&[
        "cage",
        "limits",
        &name,
        "--tokens",
        &(2 * PLAIN.total() + budget).to_string(),
    ])
    .ok();
    let script = format!(
        "{FIRE_FN}fire {p}/d.txt; fire {p}/e.txt; fire {p}/f.txt; \
         until_answered {p}/d.txt; until_answered {p}/e.txt; until_answered {p}/f.txt; \
         sleep {wait}; kill $(jobs -p) 2>/dev/null; true"
    );
    let r = exec(&w, &name, &script).ok();
    answered(&["d.txt", "e.txt", "f.txt"], &r);
    assert_eq!(model_posts(&mock), 4, "{}", mock.explain());
}

#[test]
fn usage_the_budget_counts_every_answer_before_a_request() {
    the_budget_counts_every_answer_before_a_request(World::new());
}

#[test]
fn usage_the_budget_counts_every_answer_before_a_request_rootless() {
    the_budget_counts_every_answer_before_a_request(World::rootless());
}

/// An upstream that compresses whatever it is asked: its gzip answers,
/// streamed and plain, are read through a decoder and counted.
#[test]
fn usage_an_upstream_that_compresses_anyway_is_counted() {
    let w = World::new();
    let mock = Mock::with(Mode::GzipAlways);
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "gzipany");
    let p = project.display();
    let script = format!("{REQ_FN}{PLAIN_FN}req POST /v1/messages {p}/s.txt\nplain {p}/p.txt");
    let r = exec(&w, &name, &script).ok();
    // As the upstream sent it: compressed.
    let s = String::from_utf8_lossy(&std::fs::read(project.join("s.txt")).unwrap()).into_owned();
    assert_eq!(status(&s), 200, "{s}\n{}", r.explain());
    assert!(
        s.to_ascii_lowercase().contains("content-encoding: gzip"),
        "{s}"
    );
    assert_eq!(model_posts(&mock), 2, "{}", mock.explain());
    assert_eq!(
        w.record(&name)["tokens"]["used"],
        summed(&[&STREAMED, &PLAIN])
    );
}

/// An answer in an encoding the gateway does not read is not passed on
/// uncounted: the harness gets fixed words in its place, the turn's next
/// model request is refused without reaching the upstream, the terminal
/// says why, and the history says so.
#[test]
fn usage_an_answer_that_cannot_be_counted_ends_the_turns_spending() {
    let w = World::new();
    let mock = Mock::with(Mode::Brotli);
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "brotli");
    let p = project.display();
    let script = format!(
        "{REQ_FN}req POST /v1/messages {p}/a.txt 'Accept-Encoding: br'
         req POST /v1/messages {p}/b.txt
         req HEAD /api/hello {p}/h.txt"
    );
    let r = exec(&w, &name, &script).ok();
    let a = read(&project.join("a.txt"));
    assert_eq!(status(&a), 502, "{a}\n{}", r.explain());
    assert!(a.contains("could not count the tokens"), "{a}");
    assert!(!a.contains("not really brotli"), "{a}");
    let b = read(&project.join("b.txt"));
    assert_eq!(status(&b), 400, "{b}");
    assert!(b.contains("could not count the tokens"), "{b}");
    assert_eq!(status(&read(&project.join("h.txt"))), 200);
    assert!(
        r.stderr().contains("Content-Encoding br"),
        "{}",
        r.explain()
    );
    assert_eq!(model_posts(&mock), 1, "{}", mock.explain());
    assert_eq!(
        turn_lines(&w, &name),
        [
            "turn: tokens in 0, out 0, cache write 0, cache read 0 (0 tokens, 0 responses); \
          an answer could not be counted; 1 model request refused: tokens no longer counted"
        ]
    );
}

/// A stream the harness drops before its end is charged what passed: its
/// input counts, and its output by the bytes of the text that passed
/// (the API gives the output count only at the end), not the first
/// event's count of 1.
fn dropped_stream_is_charged(w: World) {
    let mock = Mock::with(Mode::LongThenHold);
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "dropped");
    let out = project.join("long.txt");
    let last = format!("{:03}x", LONG_DELTAS - 1);
    let script = format!(
        "body='{{\"model\":\"m\",\"max_tokens\":9,\"stream\":true,\"messages\":[]}}'
         wget -q -O {out} --header 'Content-Type: application/json' --post-data \"$body\" \
           \"$ANTHROPIC_BASE_URL/v1/messages\" & pid=$!
         n=0; while ! grep -q {last} {out} 2>/dev/null; do sleep 0.1; n=$((n+1)); [ $n -lt 300 ] || break; done
         kill $pid; wait $pid; echo killed",
        out = out.display(),
    );
    let r = exec(&w, &name, &script).ok();
    mock.release();
    assert!(read(&out).contains(&last), "{}", r.explain());
    let used = &w.record(&name)["tokens"]["used"];
    let passed = (LONG_DELTAS * LONG_DELTA) as u64;
    assert_eq!(
        *used,
        json!({
            "input_tokens": STREAMED.input_tokens,
            "output_tokens": passed.div_ceil(3),
            "cache_creation_input_tokens": STREAMED.cache_creation_input_tokens,
            "cache_read_input_tokens": STREAMED.cache_read_input_tokens,
            "responses": 1,
        }),
        "{}",
        r.explain()
    );
}

#[test]
fn usage_a_dropped_stream_is_charged_what_passed() {
    dropped_stream_is_charged(World::new());
}

#[test]
fn usage_a_dropped_stream_is_charged_what_passed_rootless() {
    dropped_stream_is_charged(World::rootless());
}

/// The machine's daily budget (`[budget] daily_tokens`): two sessions'
/// turns together reach it; the next model request of either is refused in
/// the API's error shape, with words that say what was spent today and
/// name the config file, the terminal says so once, and the mock never
/// sees it; the number raised in the config, the next request passes. The
/// day's file says what all of them spent; with `http`, the status page
/// shows it beside the budget.
fn a_spent_daily_budget_refuses(w: World, http: bool) {
    let mock = Mock::start();
    let daily = STREAMED.total() + PLAIN.total();
    // Refused at once (`wait = "0"`); budgets.rs shows it held.
    let budget = |n: u64| format!("[budget]\ndaily_tokens = {n}\nwait = \"0\"\n");
    world_for(&w, &mock, &budget(daily));
    let (a, project_a) = session_in(&w, "dailya");
    let (b, project_b) = session_in(&w, "dailyb");
    let (pa, pb) = (project_a.display(), project_b.display());
    let said =
        format!("this machine's daily token budget is spent: {daily} of {daily} tokens today");
    let raise = format!("edit daily_tokens in [budget] of {}", w.config.display());

    // Under it: a's streamed answer.
    let r = exec(&w, &a, &format!("{REQ_FN}req POST /v1/messages {pa}/1.txt")).ok();
    assert!(
        read(&project_a.join("1.txt")).contains("message_stop"),
        "{}",
        r.explain()
    );
    // b's plain answer reaches it, with a's; b's next request is refused.
    let r = exec(
        &w,
        &b,
        &format!("{REQ_FN}{PLAIN_FN}plain {pb}/2.txt\nreq POST /v1/messages {pb}/3.txt\nreq POST /v1/messages {pb}/4.txt"),
    )
    .ok();
    assert!(
        read(&project_b.join("2.txt")).contains("hello from the mock"),
        "{}\n{}",
        r.explain(),
        mock.explain()
    );
    for f in ["3.txt", "4.txt"] {
        let refused = read(&project_b.join(f));
        assert_eq!(status(&refused), 400, "{refused}\n{}", r.explain());
        assert!(refused.contains("\"invalid_request_error\""), "{refused}");
        for words in [&said, &raise] {
            assert!(refused.contains(words.as_str()), "{refused}");
        }
    }
    // The terminal: once in the turn.
    assert_eq!(r.stderr().matches(&said).count(), 1, "{}", r.explain());
    assert!(r.stderr().contains(&raise), "{}", r.explain());
    // The turn's history line says which budget.
    let history = w.run(&["cage", "history", &b]).ok();
    assert!(
        history
            .stdout()
            .contains("; 2 model requests refused: daily token budget spent"),
        "{}",
        history.explain()
    );
    // a's next turn: refused too.
    let r = exec(&w, &a, &format!("{REQ_FN}req POST /v1/messages {pa}/5.txt")).ok();
    let refused = read(&project_a.join("5.txt"));
    assert_eq!(status(&refused), 400, "{refused}\n{}", r.explain());
    assert!(refused.contains(&said), "{refused}");
    assert_eq!(model_posts(&mock), 2, "{}", mock.explain());

    // The day's file: both sessions' answers, summed.
    let spend = w.state.join("spend");
    let day = chrono::Local::now().date_naive().format("%Y-%m-%d");
    let file: Value =
        serde_json::from_str(&read(&spend.join(format!("{day}.json")))).unwrap_or(Value::Null);
    assert_eq!(file["total"], summed(&[&STREAMED, &PLAIN]), "{file:#}");

    if http {
        let s = w.serve(&[], &[]);
        let page = get(&format!("{}/", s.url)).is(200).body;
        // claude-mock has no price here: the day counts it at the table's
        // highest prices, and names it.
        for want in [
            format!("Today ({day}): {daily} tokens, $"),
            " spent, all sessions together (claude-mock at the price table's highest prices); \
             daily budget "
                .to_string(),
            format!("daily budget {daily} tokens ([budget] daily_tokens, daily_usd)."),
        ] {
            assert!(page.contains(&want), "{want}\n{page}");
        }
    }

    // Raised in the config: the next request passes, in a turn already
    // running too (the budget is read at each request).
    world_for(&w, &mock, &budget(daily + STREAMED.total() + 1));
    let r = exec(&w, &a, &format!("{REQ_FN}req POST /v1/messages {pa}/6.txt")).ok();
    assert!(
        read(&project_a.join("6.txt")).contains("message_stop"),
        "{}",
        r.explain()
    );
    assert_eq!(model_posts(&mock), 3, "{}", mock.explain());
}

#[test]
fn usage_a_spent_daily_budget_refuses_every_sessions_model_requests() {
    a_spent_daily_budget_refuses(World::new(), true);
}

#[test]
fn usage_a_spent_daily_budget_refuses_every_sessions_model_requests_rootless() {
    a_spent_daily_budget_refuses(World::rootless(), false);
}

/// The dollar budget (docs/gateway.md, "Budgets"): set with `cage limits
/// --usd` at a cent, under one answer's price at [`MOCK_PRICES`]: the
/// first answer passes, the next request is refused in the API's shape
/// with the dollars spent and the command that raises it, and never
/// reaches the mock. `cage show --json`, the history and (with `http`)
/// serve's session JSON say the dollars spent, computed from the mock's
/// counts; raised over HTTP (with `http`) or the CLI, the session goes on.
fn a_dollar_budget_holds(w: World, http: bool) {
    let mock = Mock::start();
    world_for(&w, &mock, &format!("{MOCK_PRICES}{REFUSE_AT_ONCE}"));
    let (name, project) = session_in(&w, "usd");
    let p = project.display();
    for bad in ["0", "1.234", "lots", "-1"] {
        let flag = format!("--usd={bad}");
        let r = w.run(&["cage", "limits", &name, &flag]).code_is(2);
        assert!(r.stderr().contains("--usd: "), "{}", r.explain());
    }
    assert_eq!(w.record(&name)["tokens"]["usd_budget"], Value::Null);
    let r = w.run(&["cage", "limits", &name, "--usd", "0.01"]).ok();
    assert!(
        r.stdout().contains("dollar budget $0.01"),
        "{}",
        r.explain()
    );
    assert_eq!(w.record(&name)["tokens"]["usd_budget"], 0.01);

    let one = cost(&[&STREAMED]);
    assert!(
        one >= 10_000_000,
        "one answer must cost a cent or more: {one}"
    );
    let turn = format!(
        "{REQ_FN}req POST /v1/messages {p}/a.txt
         req POST /v1/messages {p}/b.txt"
    );
    let r = exec(&w, &name, &turn).ok();
    assert!(read(&project.join("a.txt")).contains("message_stop"));
    let refused = read(&project.join("b.txt"));
    assert_eq!(status(&refused), 400, "{refused}\n{}", r.explain());
    let said = format!(
        "has spent its dollar budget: {} of $0.01 at list prices",
        usd_words(one)
    );
    let raise = format!("shrooms-agent cage limits {name} --usd AMOUNT");
    for words in [&said, &raise] {
        assert!(refused.contains(words.as_str()), "{refused}");
        assert!(r.stderr().contains(words.as_str()), "{}", r.explain());
    }
    assert_eq!(model_posts(&mock), 1, "{}", mock.explain());

    let shown = w.run(&["cage", "show", &name, "--json"]).ok().json();
    let t = &shown["tokens"];
    assert_eq!(t["usd_budget"], 0.01, "{shown:#}");
    assert_eq!(t["spent"]["usd"], usd_json(one), "{shown:#}");
    assert_eq!(t["last_turn"]["spent"]["usd"], usd_json(one), "{shown:#}");
    assert_eq!(t["by_model"]["claude-mock"]["usd"], usd_json(one));
    assert_eq!(t["by_model"]["claude-mock"]["responses"], 1);
    let limits = w.run(&["cage", "limits", &name]).ok().stdout();
    assert!(
        limits.contains(&format!("dollar budget $0.01, spent {}", usd_words(one))),
        "{limits}"
    );

    // Set again at or below what was spent: taken, with a warning.
    let r = w.run(&["cage", "limits", &name, "--usd", "0.01"]).ok();
    let warned = format!(
        "has already spent {}, at or past this dollar budget of $0.01",
        usd_words(one)
    );
    assert!(r.stderr().contains(&warned), "{}", r.explain());

    // Raised: over HTTP, or the CLI.
    if http {
        let s = w.serve(&[], &[]);
        let url = format!("{}/v1/sessions/{name}/cage/limits", s.url);
        for bad in [r#"{"usd": 0}"#, r#"{"usd": 1.234}"#, r#"{"usd": "many"}"#] {
            post(&url, bad).is(400);
        }
        let r = post(&url, r#"{"usd": 0.05}"#).is(200).json();
        assert_eq!(
            (&r["usd_before"], &r["usd_after"]),
            (&json!(0.01), &json!(0.05))
        );
        let api = get(&format!("{}/v1/sessions/{name}", s.url)).is(200).json();
        let mut shown = shown.clone();
        shown["tokens"]["usd_budget"] = json!(0.05);
        assert_eq!(api["tokens"], shown["tokens"], "{api:#}");
    } else {
        w.run(&["cage", "limits", &name, "--usd", "0.05"]).ok();
    }
    let turn2 = format!("{REQ_FN}req POST /v1/messages {p}/c.txt");
    exec(&w, &name, &turn2).ok();
    assert!(read(&project.join("c.txt")).contains("message_stop"));
    assert_eq!(model_posts(&mock), 2, "{}", mock.explain());
    let r = w.run(&["cage", "limits", &name, "--usd", "none"]).ok();
    assert!(r.stdout().contains("dollar budget none"), "{}", r.explain());
    assert_eq!(w.record(&name)["tokens"]["usd_budget"], Value::Null);

    assert_eq!(
        turn_lines(&w, &name),
        [
            turn_line(
                &[&STREAMED],
                "; 1 model request refused: dollar budget spent"
            ),
            turn_line(&[&STREAMED], ""),
        ]
    );
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    for line in [
        "limits: usd none -> 0.01",
        "limits: usd 0.01 -> 0.05",
        "limits: usd 0.05 -> none",
    ] {
        assert!(history.contains(line), "{line}:\n{history}");
    }
    let t = &w.record(&name)["tokens"];
    assert_eq!(t["by_model"]["claude-mock"]["usd"], usd_json(2 * one));
}

#[test]
fn usage_a_dollar_budget_holds() {
    a_dollar_budget_holds(World::new(), true);
}

#[test]
fn usage_a_dollar_budget_holds_rootless() {
    a_dollar_budget_holds(World::rootless(), false);
}

/// A model without a price: its spend is unknown, never guessed, and a
/// dollar budget (here the config's `[budget] usd`, which a new session
/// gets and `--reset` sets back) refuses the next request with words that
/// name the model and `[prices]`.
#[test]
fn usage_a_dollar_budget_refuses_a_model_without_a_price() {
    let w = World::new();
    let mock = Mock::start();
    world_for(&w, &mock, "[budget]\nusd = 1\n");
    let (name, project) = session_in(&w, "unpriced");
    let p = project.display();
    assert_eq!(w.record(&name)["tokens"]["usd_budget"], 1.0);
    let turn = format!(
        "{REQ_FN}req POST /v1/messages {p}/a.txt
         req POST /v1/messages {p}/b.txt"
    );
    let r = exec(&w, &name, &turn).ok();
    assert!(read(&project.join("a.txt")).contains("message_stop"));
    let b = read(&project.join("b.txt"));
    assert_eq!(status(&b), 400, "{b}\n{}", r.explain());
    for words in ["no price for the model claude-mock", "[prices]"] {
        assert!(b.contains(words), "{b}");
    }
    assert_eq!(model_posts(&mock), 1, "{}", mock.explain());
    let t = w.run(&["cage", "show", &name, "--json"]).ok().json()["tokens"].clone();
    assert_eq!(
        t["spent"],
        json!({"usd": null, "unpriced": ["claude-mock"], "subscription_tokens": 0}),
        "{t:#}"
    );
    let text = w.run(&["cage", "show", &name]).ok().stdout();
    assert!(
        text.contains("dollars   dollars unknown: no price for claude-mock; budget $1.00\n"),
        "{text}"
    );
    w.run(&["cage", "limits", &name, "--usd", "none"]).ok();
    let r = w.run(&["cage", "limits", &name, "--reset"]).ok();
    assert!(
        r.stdout().contains("dollar budget $1.00"),
        "{}",
        r.explain()
    );
    assert_eq!(w.record(&name)["tokens"]["usd_budget"], 1.0);
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    assert!(history.contains("usd 1.00 -> none"), "{history}");
    assert!(history.contains("usd none -> 1.00"), "{history}");
}

/// A subscription sign-in (here `CLAUDE_CODE_OAUTH_TOKEN`, no key) has no
/// price per token: its tokens are kept apart and shown in tokens; `cage
/// limits --usd` is refused with why (exit 2) while it is the machine's
/// credential; a session given a dollar budget with a key has its request
/// refused when the turn would go upstream on the sign-in, and the mock
/// never sees it.
fn a_subscriptions_dollar_budget_is_refused(w: World) {
    let mock = Mock::start();
    world_for(&w, &mock, MOCK_PRICES);
    let (name, project) = session_in(&w, "signin");
    let p = project.display();
    let signed_in = [("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-mock-login")];
    let script = format!("{REQ_FN}req POST /v1/messages {p}/a.txt");
    let on_login = |script: &str| {
        w.run_env(
            &["cage", "exec", &name, "--", "sh", "-c", script],
            &signed_in,
        )
    };
    let r = on_login(&script).ok();
    assert!(
        read(&project.join("a.txt")).contains("message_stop"),
        "{}",
        r.explain()
    );
    let t = w.run(&["cage", "show", &name, "--json"]).ok().json()["tokens"].clone();
    assert_eq!(
        t["spent"],
        json!({"usd": 0.0, "unpriced": [], "subscription_tokens": STREAMED.total()}),
        "{t:#}"
    );
    assert_eq!(
        t["subscription"]["claude-mock"],
        summed(&[&STREAMED]),
        "{t:#}"
    );

    let r = w
        .run_env(&["cage", "limits", &name, "--usd", "5"], &signed_in)
        .code_is(2);
    for words in ["--usd: ", "CLAUDE_CODE_OAUTH_TOKEN", "subscription sign-in"] {
        assert!(r.stderr().contains(words), "{}", r.explain());
    }
    assert_eq!(w.record(&name)["tokens"]["usd_budget"], Value::Null);
    // Set where the machine has a key; the turn then runs on the login.
    w.run_env(
        &["cage", "limits", &name, "--usd", "5"],
        &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
    )
    .ok();
    let script = format!("{REQ_FN}req POST /v1/messages {p}/b.txt");
    let r = on_login(&script).ok();
    let b = read(&project.join("b.txt"));
    assert_eq!(status(&b), 400, "{b}\n{}", r.explain());
    assert!(b.contains("subscription sign-in"), "{b}");
    assert!(b.contains("--usd none"), "{b}");
    assert!(
        r.stderr().contains("subscription sign-in"),
        "{}",
        r.explain()
    );
    assert_eq!(model_posts(&mock), 1, "{}", mock.explain());
}

#[test]
fn usage_a_subscriptions_dollar_budget_is_refused() {
    a_subscriptions_dollar_budget_is_refused(World::new());
}

#[test]
fn usage_a_subscriptions_dollar_budget_is_refused_rootless() {
    a_subscriptions_dollar_budget_is_refused(World::rootless());
}
