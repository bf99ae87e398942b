//! End-to-end tests of budgets that pause (docs/gateway.md, "Budgets"): a
//! model request at a session's budget is held by the gateway, not
//! refused; it is shown waiting (`cage ls`, `cage show`, serve's session
//! and status page, the turn's terminal); raised (by the CLI or serve's
//! limits route), the same request goes on and its answer comes whole;
//! after the config's `[budget] wait` it is refused with the words that
//! say how to raise it. With the mock of the model API, and with the real
//! Claude Code and pi, whose turn goes on without a restart.

use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::gateway::{
    MACHINE_KEY, Mock, PI_QUIET, PLAIN, QUIET, REQ_FN, STREAMED, TOOL_MARKER, read, session_in,
    status, world_for, write_pi_models,
};
use crate::usage::{MOCK_PRICES, PLAIN_FN};

/// What `cage show --json` says the session's turn waits on (null: it
/// waits on nothing).
fn waiting(w: &World, name: &str) -> Value {
    let shown = w.run(&["cage", "show", name, "--json"]).ok().json();
    shown["busy"]["waiting"].clone()
}

fn model_posts(mock: &Mock) -> usize {
    mock.seen()
        .iter()
        .filter(|s| s.method == "POST" && s.path().ends_with("/v1/messages"))
        .count()
}

/// A child's stdout and stderr, once it has ended (within `timeout`).
fn ended(mut child: std::process::Child, timeout: Duration) -> (bool, String, String) {
    let end = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.success(), out, err)
}

/// A turn's streamed request past the budget is held: the harness gets
/// the answer's head and the API's ping events, the mock sees nothing, and
/// `cage ls`, `cage show` (JSON and text), serve's session and its status
/// page say the session waits on its budget, since when and what it
/// spent. Raised over serve's limits route, the same request goes on and
/// its events follow the pings; the next, a plain one, is held at the new
/// budget and goes on when the CLI removes it. The answers come whole,
/// the record counts them all, the terminal told each wait and each end.
fn held_then_raised(w: World) {
    let mock = Mock::start();
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "held");
    let p = project.display();
    let budget = STREAMED.total() - 1;
    w.run(&["cage", "limits", &name, "--tokens", &budget.to_string()])
        .ok();
    // Root's serve (a rootless one answers only its user's programs).
    let s = w.user.is_none().then(|| w.serve(&[], &[]));
    let script = format!(
        "{REQ_FN}{PLAIN_FN}stream /v1/messages {p}/a.txt; stream /v1/messages {p}/b.txt; \
         plain {p}/c.txt; echo done > {p}/done"
    );
    let child = w.spawn_env(
        &["cage", "exec", &name, "--", "sh", "-c", &script],
        &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
    );
    wait_until("the request held", Duration::from_secs(90), || {
        waiting(&w, &name).is_object()
    });
    let held_at = Instant::now();
    let said = format!(
        "has spent its token budget: {} of {budget} tokens",
        STREAMED.total()
    );
    let wt = waiting(&w, &name);
    assert_eq!(wt["budget"], "session", "{wt:#}");
    assert!(wt["why"].as_str().unwrap().contains(&said), "{wt:#}");
    let since = chrono::DateTime::parse_from_rfc3339(wt["since"].as_str().unwrap()).unwrap();
    assert!((chrono::Utc::now().timestamp() - since.timestamp()).abs() < 120);
    let text = w.run(&["cage", "show", &name]).ok().stdout();
    assert!(
        text.contains("waiting   on its session budget since "),
        "{text}"
    );
    assert!(text.contains(&said), "{text}");
    let ls = w.run(&["cage", "ls"]).ok().stdout();
    assert!(ls.contains("waits on budget"), "{ls}");
    let ls = w.run(&["cage", "ls", "--json"]).ok().json();
    let row = ls["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["busy"]["waiting"], wt, "{row:#}");
    assert_eq!(row["tokens"]["used"]["responses"], 1, "{row:#}");
    if let Some(s) = &s {
        let over_http = get(&format!("{}/v1/sessions/{name}", s.url)).is(200).json();
        assert_eq!(
            over_http["busy"]["waiting"]["why"], wt["why"],
            "{over_http:#}"
        );
        let page = get(&format!("{}/", s.url)).is(200).body;
        assert!(page.contains("waits on its session budget"), "{page}");
    }
    let listed = |s: &Serve| {
        get(&format!("{}/v1/sessions", s.url)).is(200).json()["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name.as_str())
            .unwrap()["busy"]["waiting"]
            .clone()
    };
    if let Some(s) = &s {
        assert_eq!(listed(s)["why"], wt["why"]);
    }

    // Kept waiting with pings, as long as it is held; nothing upstream.
    wait_until("two pings", Duration::from_secs(30), || {
        read(&project.join("b.txt")).matches("event: ping").count() >= 2
    });
    assert!(held_at.elapsed() >= Duration::from_secs(4));
    assert!(!read(&project.join("b.txt")).contains("message_start"));
    assert_eq!(model_posts(&mock), 1, "{}", mock.explain());

    // Raised (over HTTP where there is a serve): the held stream goes on.
    let more = 2 * STREAMED.total();
    match &s {
        Some(s) => {
            post(
                &format!("{}/v1/sessions/{name}/cage/limits", s.url),
                &format!(r#"{{"tokens": {more}}}"#),
            )
            .is(200);
        }
        None => {
            w.run(&["cage", "limits", &name, "--tokens", &more.to_string()])
                .ok();
        }
    }
    // The plain request after it is held at the new budget.
    wait_until("the plain request held", Duration::from_secs(30), || {
        model_posts(&mock) == 2 && waiting(&w, &name).is_object()
    });
    let b = read(&project.join("b.txt"));
    let (ping, start) = (
        b.find("event: ping").unwrap(),
        b.find("event: message_start").unwrap(),
    );
    assert!(
        ping < start && b.ends_with("data: {\"type\":\"message_stop\"}\n\n"),
        "{b}"
    );
    assert!(!project.join("done").exists());

    // Removed with the CLI: the plain request goes on.
    w.run(&["cage", "limits", &name, "--tokens", "none"]).ok();
    let (ok, _, err) = ended(child, Duration::from_secs(60));
    assert!(ok, "{err}");
    assert!(project.join("done").exists(), "{err}");
    let c = read(&project.join("c.txt"));
    assert!(
        c.starts_with('{') && c.contains("cache_read_input_tokens"),
        "{c}"
    );
    assert_eq!(model_posts(&mock), 3, "{}", mock.explain());
    assert_eq!(
        err.matches("Its model request waits (at most 1 h 0 min)")
            .count(),
        2,
        "{err}"
    );
    assert_eq!(
        err.matches("its budget was raised; its model request goes on")
            .count(),
        2,
        "{err}"
    );
    assert_eq!(waiting(&w, &name), Value::Null);
    if let Some(s) = &s {
        // serve's listing, kept between changes, sees the wait end too.
        assert_eq!(listed(s), Value::Null);
    }
    assert!(!w.state.join(format!("sessions/{name}@budget")).exists());
    let used = &w.record(&name)["tokens"]["used"];
    assert_eq!(used["responses"], 3, "{used:#}");
    assert_eq!(
        used["output_tokens"].as_u64().unwrap(),
        2 * STREAMED.output_tokens + PLAIN.output_tokens
    );
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    assert!(!history.contains("refused"), "{history}");
}

#[test]
fn budgets_a_held_request_goes_on_when_raised() {
    held_then_raised(World::new());
}

#[test]
fn budgets_a_held_request_goes_on_when_raised_rootless() {
    held_then_raised(World::rootless());
}

/// Raised from serve's status page: a streamed request held at the
/// budget goes on once the page's form (its secret read from the page,
/// posted as the browser posts it) raises the budget, its answer whole
/// after the pings; the page said the session waited. Rootless: serve
/// without a token, the form posted by its user's program.
#[test]
fn budgets_a_held_request_goes_on_when_raised_from_the_page() {
    use crate::page::{curl, page_form, post_form};
    let w = World::rootless();
    let me = Some(test_user());
    let mock = Mock::start();
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "heldpage");
    let p = project.display();
    let budget = STREAMED.total() - 1;
    w.run(&["cage", "limits", &name, "--tokens", &budget.to_string()])
        .ok();
    let s = w.serve(&[], &[]);
    let script = format!(
        "{REQ_FN}stream /v1/messages {p}/a.txt; stream /v1/messages {p}/b.txt; \
         echo done > {p}/done"
    );
    let child = w.spawn_env(
        &["cage", "exec", &name, "--", "sh", "-c", &script],
        &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
    );
    wait_until("the request held", Duration::from_secs(90), || {
        waiting(&w, &name).is_object()
    });
    wait_until("a ping", Duration::from_secs(30), || {
        read(&project.join("b.txt")).contains("event: ping")
    });
    let page = curl(me, s.port, &[&format!("{}/", s.url)]).is(200);
    assert!(
        page.body.contains("waits on its session budget"),
        "{}",
        page.body
    );
    let (path, secret) = page_form(&page.body, &name);
    assert_eq!(model_posts(&mock), 1, "{}", mock.explain());
    assert!(!project.join("done").exists());

    let more = 2 * STREAMED.total();
    let r = post_form(
        me,
        &s,
        &path,
        &format!("secret={secret}&tokens={more}"),
        &[],
    )
    .is(303);
    assert_eq!(r.header("location"), Some("/"));
    let (ok, _, err) = ended(child, Duration::from_secs(60));
    assert!(ok, "{err}");
    assert!(project.join("done").exists(), "{err}");
    let b = read(&project.join("b.txt"));
    let (ping, start) = (
        b.find("event: ping").unwrap(),
        b.find("event: message_start").unwrap(),
    );
    assert!(
        ping < start && b.ends_with("data: {\"type\":\"message_stop\"}\n\n"),
        "{b}"
    );
    assert_eq!(model_posts(&mock), 2, "{}", mock.explain());
    assert!(
        err.contains("its budget was raised; its model request goes on"),
        "{err}"
    );
    assert_eq!(w.record(&name)["tokens"]["budget"], more);
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    assert!(
        history.contains(&format!("limits: tokens {budget} -> {more}")),
        "{history}"
    );
    assert_eq!(waiting(&w, &name), Value::Null);
}

/// After the config's `[budget] wait` a held stream ends with the API's
/// error event, in the words that say what was spent and how to raise it;
/// the turn's next request at the budget is refused at once (a harness
/// that retries is not held again); the mock sees none of them.
#[test]
fn budgets_a_held_request_is_refused_after_the_wait() {
    let w = World::new();
    let mock = Mock::start();
    world_for(&w, &mock, "[budget]\nwait = \"5s\"\n");
    let (name, project) = session_in(&w, "heldlong");
    let p = project.display();
    let budget = STREAMED.total() - 1;
    w.run(&["cage", "limits", &name, "--tokens", &budget.to_string()])
        .ok();
    let script = format!(
        "{REQ_FN}stream /v1/messages {p}/a.txt; date +%s > {p}/t0; \
         stream /v1/messages {p}/b.txt; date +%s > {p}/t1; \
         req POST /v1/messages {p}/c.txt; date +%s > {p}/t2"
    );
    let r = w
        .run_env(
            &["cage", "exec", &name, "--", "sh", "-c", &script],
            &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
        )
        .ok();
    let secs = |f: &str| read(&project.join(f)).trim().parse::<i64>().unwrap();
    let waited = "the request waited 5 s (the config's [budget] wait) and is refused";
    let raise = format!("shrooms-agent cage limits {name} --tokens N");
    let b = read(&project.join("b.txt"));
    assert!(b.starts_with("event: ping\n"), "{b}");
    let error = b.find("event: error\ndata: ").expect("an error event");
    assert!(b[error..].contains("\"invalid_request_error\""), "{b}");
    for words in [waited, raise.as_str()] {
        assert!(b[error..].contains(words), "{b}");
    }
    assert!(secs("t1") - secs("t0") >= 5, "{}", r.explain());
    let c = read(&project.join("c.txt"));
    assert_eq!(status(&c), 400, "{c}");
    assert!(c.contains(waited), "{c}");
    // At once: `req` itself takes 2 s (it waits for its answer to stop
    // growing), not another wait of 5.
    assert!(secs("t2") - secs("t1") < 5, "{}", r.explain());
    assert_eq!(r.stderr().matches(waited).count(), 1, "{}", r.explain());
    assert_eq!(model_posts(&mock), 1, "{}", mock.explain());
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    assert!(
        history.contains("; 2 model requests refused: token budget spent"),
        "{history}"
    );
    assert_eq!(waiting(&w, &name), Value::Null);
}

/// Wait until `name`'s turn is held at its budget, check for a while that
/// it stays held (the harness does not give up, nothing more reaches the
/// mock), then raise the budget.
fn hold_then_raise(w: &World, name: &str, mock: &Mock) {
    wait_until(
        "the harness's request held",
        Duration::from_secs(180),
        || waiting(w, name).is_object(),
    );
    let posts = model_posts(mock);
    std::thread::sleep(Duration::from_secs(12));
    assert!(waiting(w, name).is_object());
    assert_eq!(model_posts(mock), posts, "{}", mock.explain());
    assert!(
        !mock.seen().iter().any(|s| s.body.contains("tool_result")),
        "{}",
        mock.explain()
    );
    w.run(&["cage", "limits", name, "--tokens", "10M"]).ok();
}

/// The real Claude Code's tool turn: its first answer (the tool call)
/// spends the budget, so its next request (the tool's result) is held;
/// raised, the same Claude Code process goes on and ends its turn.
fn claude_code_waits(w: World) {
    let (claude, image) = real_claude();
    let mock = Mock::start();
    world_for(&w, &mock, &format!("[harness]\nclaude = \"{claude}\"\n"));
    let name = w.session("heldclaude");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--image", &image]);
    w.run(&["cage", "limits", &name, "--tokens", "1"]).ok();
    let mut env = QUIET.to_vec();
    env.push(("ANTHROPIC_API_KEY", MACHINE_KEY));
    let child = w.spawn_env(
        &[
            "cage",
            "run",
            &name,
            "--",
            "-p",
            &format!("{TOOL_MARKER}: write hi to a file"),
            "--dangerously-skip-permissions",
        ],
        &env,
    );
    let mock = goes_on_after_the_raise(&w, &name, &project, mock, child);
    assert!(
        mock.seen().iter().any(|s| s.body.contains("tool_result")),
        "{}",
        mock.explain()
    );
}

#[test]
fn budgets_real_claude_code_waits_and_goes_on() {
    claude_code_waits(World::new());
}

#[test]
fn budgets_real_claude_code_waits_and_goes_on_rootless() {
    claude_code_waits(World::rootless());
}

/// The same with the real pi, its provider's requests through the
/// gateway's provider route.
fn pi_waits(w: World) {
    let image = real_pi_image();
    let mock = Mock::start();
    world_for(&w, &mock, "");
    let models = serde_json::json!({"providers": {
        "corp": {
            "baseUrl": format!("{}/corp", mock.url()),
            "api": "anthropic-messages",
            "apiKey": "sk-corp-pi-budget-key",
            "models": [{"id": "corp-mock", "name": "Corp mock", "reasoning": false}]
        }
    }});
    write_pi_models(&w, &models);
    w.chown_all();
    let name = w.session("heldpi");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--harness", "pi", "--image", &image]);
    w.run(&["cage", "limits", &name, "--tokens", "1"]).ok();
    let child = w.spawn_env(
        &[
            "cage",
            "run",
            &name,
            "--",
            "--provider",
            "corp",
            "--model",
            "corp-mock",
            "-p",
            &format!("{TOOL_MARKER}: write hi to a file"),
        ],
        PI_QUIET,
    );
    goes_on_after_the_raise(&w, &name, &project, mock, child);
}

/// A real harness's turn, held at its budget: raised, it runs its tool
/// and ends with the mock's answer, no longer shown waiting. The mock, to
/// look at further.
fn goes_on_after_the_raise(
    w: &World,
    name: &str,
    project: &std::path::Path,
    mock: Mock,
    child: std::process::Child,
) -> Mock {
    hold_then_raise(w, name, &mock);
    let (ok, out, err) = ended(child, Duration::from_secs(180));
    assert!(ok, "{out}\n{err}\n{}", mock.explain());
    assert_eq!(read(&project.join("tool-ran.txt")), "hi\n", "{out}\n{err}");
    assert!(out.contains("hello from the mock"), "{out}\n{err}");
    assert!(err.contains("its model request goes on"), "{err}");
    assert_eq!(waiting(w, name), Value::Null);
    mock
}

#[test]
fn budgets_real_pi_waits_and_goes_on() {
    pi_waits(World::new());
}

#[test]
fn budgets_real_pi_waits_and_goes_on_rootless() {
    pi_waits(World::rootless());
}

/// A harness that goes away while its request is held ends the wait: the
/// session is no longer shown waiting, and raising the budget later sends
/// nothing upstream for it.
#[test]
fn budgets_a_harness_that_goes_away_is_no_longer_held() {
    let w = World::new();
    let mock = Mock::start();
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "heldgone");
    let (p, budget) = (project.display(), STREAMED.total() - 1);
    w.run(&["cage", "limits", &name, "--tokens", &budget.to_string()])
        .ok();
    let script = format!(
        "{REQ_FN}stream /v1/messages {p}/a.txt
         body='{{\"model\":\"m\",\"max_tokens\":9,\"stream\":true,\"messages\":[]}}'
         wget -q -O {p}/b.txt --header 'Content-Type: application/json' --post-data \"$body\" \
           \"$ANTHROPIC_BASE_URL/v1/messages\" & pid=$!
         while ! grep -q 'event: ping' {p}/b.txt 2>/dev/null; do sleep 0.1; done
         kill $pid; wait $pid; echo gone > {p}/gone
         while [ ! -e {p}/raised ]; do sleep 0.1; done; sleep 3"
    );
    let child = w.spawn_env(
        &["cage", "exec", &name, "--", "sh", "-c", &script],
        &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
    );
    wait_until("the client killed", Duration::from_secs(90), || {
        project.join("gone").exists()
    });
    wait_until("no longer held", Duration::from_secs(20), || {
        waiting(&w, &name).is_null()
    });
    w.run(&["cage", "limits", &name, "--tokens", "none"]).ok();
    std::fs::write(project.join("raised"), "").unwrap();
    let (ok, _, err) = ended(child, Duration::from_secs(60));
    assert!(ok, "{err}");
    assert_eq!(model_posts(&mock), 1, "{}", mock.explain());
    assert!(!err.contains("its model request goes on"), "{err}");
}

/// The machine's daily budget holds the same way: past it, a session's
/// streamed request waits, shown as waiting on the daily budget; the
/// config's number raised, the same request goes on. In tokens, and in
/// dollars (at the mock's prices, one streamed answer is $0.0132).
fn daily_holds(config: &dyn Fn(bool) -> String, said: &str) {
    let w = World::new();
    let mock = Mock::start();
    world_for(&w, &mock, &config(false));
    let (name, project) = session_in(&w, "heldday");
    let p = project.display();
    let script = format!(
        "{REQ_FN}stream /v1/messages {p}/a.txt; stream /v1/messages {p}/b.txt; echo done > {p}/done"
    );
    let child = w.spawn_env(
        &["cage", "exec", &name, "--", "sh", "-c", &script],
        &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
    );
    wait_until("the request held", Duration::from_secs(90), || {
        waiting(&w, &name).is_object()
    });
    let wt = waiting(&w, &name);
    assert_eq!(wt["budget"], "daily", "{wt:#}");
    assert!(wt["why"].as_str().unwrap().contains(said), "{wt:#}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(model_posts(&mock), 1, "{}", mock.explain());
    world_for(&w, &mock, &config(true));
    let (ok, _, err) = ended(child, Duration::from_secs(60));
    assert!(ok, "{err}");
    assert!(
        read(&project.join("b.txt")).contains("message_stop"),
        "{err}"
    );
    assert_eq!(model_posts(&mock), 2, "{}", mock.explain());
    assert!(err.contains("its model request goes on"), "{err}");
}

#[test]
fn budgets_the_daily_budget_holds_the_same_way() {
    let tokens = |raised: bool| {
        let n = if raised { 3 } else { 1 } * STREAMED.total() - 1;
        format!("[budget]\ndaily_tokens = {n}\n")
    };
    daily_holds(
        &tokens,
        &format!(
            "this machine's daily token budget is spent: {} of {} tokens today",
            STREAMED.total(),
            STREAMED.total() - 1
        ),
    );
}

#[test]
fn budgets_the_daily_dollar_budget_holds_the_same_way() {
    let dollars = |raised: bool| {
        let usd = if raised { "1" } else { "0.01" };
        format!("{MOCK_PRICES}[budget]\ndaily_usd = {usd}\n")
    };
    daily_holds(
        &dollars,
        "this machine's daily dollar budget is spent: $0.0132 of $0.01 today",
    );
}

/// A cage that sends many requests at its budget at once is not held
/// beyond the most a turn holds (8): those past it are refused at once,
/// saying why, and none reaches the mock.
#[test]
fn budgets_no_more_than_eight_requests_are_held() {
    let w = World::new();
    let mock = Mock::start();
    world_for(&w, &mock, "");
    let (name, project) = session_in(&w, "heldmany");
    let (p, budget) = (project.display(), STREAMED.total() - 1);
    w.run(&["cage", "limits", &name, "--tokens", &budget.to_string()])
        .ok();
    let script = format!(
        "{REQ_FN}stream /v1/messages {p}/a.txt
         for i in 1 2 3 4 5 6 7 8 9 10 11 12; do req POST /v1/messages {p}/h$i.txt & done
         wait"
    );
    let r = w
        .run_env(
            &["cage", "exec", &name, "--", "sh", "-c", &script],
            &[("ANTHROPIC_API_KEY", MACHINE_KEY)],
        )
        .ok();
    let answers: Vec<String> = (1..=12)
        .map(|i| read(&project.join(format!("h{i}.txt"))))
        .collect();
    let refused = answers
        .iter()
        .filter(|a| status(a) == 400 && a.contains("the most held at once"))
        .count();
    let held = answers
        .iter()
        .filter(|a| status(a) == 200 && a.contains("event: ping"))
        .count();
    assert_eq!((held, refused), (8, 4), "{answers:#?}\n{}", r.explain());
    assert_eq!(model_posts(&mock), 1, "{}", mock.explain());
}
