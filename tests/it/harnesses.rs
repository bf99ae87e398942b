//! Codex CLI and opencode, the real programs from npm, caged: each
//! completes a turn through the cage's model gateway against a stand-in
//! upstream on this machine, the machine's key reaches the stand-in, and
//! nothing of the machine's credentials (the key, the harness's own login
//! file, the keys in its settings file) is anywhere in the cage.

use crate::common::*;
use crate::gateway::{MACHINE_KEY, Mock, world_for};
use crate::openai::{
    ANSWER_TEXT, MACHINE_OPENAI_KEY, OpenAiMock, RESPONSES_STREAMED, recorded, world_for_openai,
};

/// What the user's Codex settings and login hold, which must stay out.
const CODEX_FILE_KEY: &str = "sk-proj-in-the-users-codex-config-5e0";
const CODEX_LOGIN_KEY: &str = "sk-proj-in-the-users-codex-login-a41";

/// What the user's opencode settings and login hold, which must stay out.
const OPENCODE_FILE_KEY: &str = "sk-ant-in-the-users-opencode-json-71d";
const OPENCODE_LOGIN_KEY: &str = "sk-ant-in-the-users-opencode-login-2b8";

/// A session of `harness` in a project folder of its own, its cage made
/// from `image`; its name.
fn caged(w: &World, base: &str, harness: &str, image: &str) -> String {
    let name = w.session(base);
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--harness", harness, "--image", image])
        .ok();
    name
}

/// Everything of the machine's credentials in the cage: the count of its
/// processes' environment lines holding one, then the files holding one,
/// then END.
fn look_for(w: &World, name: &str, secrets: &[&str]) -> Run {
    let pattern = secrets.join("\\|");
    w.run(&[
        "cage",
        "exec",
        name,
        "--",
        "sh",
        "-c",
        &format!(
            "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '{pattern}'; \
             grep -rls '{pattern}' / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -5; \
             echo END"
        ),
    ])
}

/// The machine's opencode: its settings with a key of their own and an
/// MCP server's secret, and its login.
fn users_opencode(w: &World) {
    let config = w.home.join(".config/opencode");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("opencode.json"),
        serde_json::json!({
            "provider": { "anthropic": { "options": { "apiKey": OPENCODE_FILE_KEY } } },
            "mcp": { "db": { "type": "local", "command": ["true"], "enabled": false,
                              "environment": { "DB_TOKEN": OPENCODE_FILE_KEY } } }
        })
        .to_string(),
    )
    .unwrap();
    let data = w.home.join(".local/share/opencode");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("auth.json"),
        serde_json::json!({ "anthropic": { "type": "api", "key": OPENCODE_LOGIN_KEY } })
            .to_string(),
    )
    .unwrap();
    w.chown_all();
}

/// opencode, its config naming Anthropic, completes a turn through the
/// gateway's Messages route with the machine's key; its own keys stay on
/// the machine.
fn opencode_turn(w: World) {
    let (opencode, image) = real_opencode();
    let mock = Mock::start();
    world_for(
        &w,
        &mock,
        &format!("[harness]\nopencode = \"{opencode}\"\n"),
    );
    users_opencode(&w);
    let name = caged(&w, "octurn", "opencode", &image);
    let env = [
        ("ANTHROPIC_API_KEY", MACHINE_KEY),
        // The catalogue of models comes from the internet, which this
        // machine's tests never reach: opencode's bundled one is used.
        ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
    ];
    let run = w
        .run_env(
            &[
                "cage",
                "run",
                &name,
                "--",
                "run",
                "-m",
                "anthropic/claude-sonnet-4-5",
                "say hi",
            ],
            &env,
        )
        .ok();
    assert!(
        run.stdout().contains("hello from the mock"),
        "{}\n{}",
        run.explain(),
        mock.explain()
    );
    let seen = mock.seen();
    assert!(
        seen.iter().any(|s| s.path() == "/v1/messages"),
        "{}",
        mock.explain()
    );
    for s in &seen {
        assert_eq!(s.header("x-api-key"), Some(MACHINE_KEY), "{s:?}");
        let all = format!("{s:?}");
        for other in [
            OPENCODE_FILE_KEY,
            OPENCODE_LOGIN_KEY,
            "shrooms-gateway-adds",
        ] {
            assert!(!all.contains(other), "{other} reached the upstream: {s:?}");
        }
    }
    let look = look_for(
        &w,
        &name,
        &[MACHINE_KEY, OPENCODE_FILE_KEY, OPENCODE_LOGIN_KEY],
    )
    .ok();
    assert_eq!(look.stdout(), "0\nEND\n", "{}", look.explain());
    // The copy the cage reads is the tool's, read-only inside.
    let copy = w
        .run(&[
            "cage",
            "exec",
            &name,
            "--",
            "sh",
            "-c",
            "cat \"$OPENCODE_CONFIG\"; echo x >> \"$OPENCODE_CONFIG\" && echo WROTE; true",
        ])
        .ok();
    assert!(
        copy.stdout().contains("\"permission\": \"allow\""),
        "{}",
        copy.explain()
    );
    assert!(!copy.stdout().contains("WROTE"), "{}", copy.explain());
    on_a_shells_path(&w, &name, "opencode", "1.18.33");
}

#[test]
fn harness_real_opencode_turn_through_the_gateway() {
    opencode_turn(World::new());
}

#[test]
fn harness_real_opencode_turn_through_the_gateway_rootless() {
    opencode_turn(World::rootless());
}

/// The machine's Codex: a config with a provider of its own holding a
/// token and an MCP server's secret, and its login (an API key).
fn users_codex(w: &World) {
    let codex = w.home.join(".codex");
    std::fs::create_dir_all(&codex).unwrap();
    std::fs::write(
        codex.join("config.toml"),
        format!(
            "model = \"gpt-5.1-codex\"\nmodel_provider = \"mine\"\n\n\
             [model_providers.mine]\nname = \"mine\"\nbase_url = \"https://elsewhere.invalid/v1\"\n\
             experimental_bearer_token = \"{CODEX_FILE_KEY}\"\n\n\
             [mcp_servers.db]\ncommand = \"true\"\nenabled = false\n\
             env = {{ DB_TOKEN = \"{CODEX_FILE_KEY}\" }}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        codex.join("auth.json"),
        serde_json::json!({ "OPENAI_API_KEY": CODEX_LOGIN_KEY }).to_string(),
    )
    .unwrap();
    w.chown_all();
}

/// Codex CLI, npm's launcher followed to its native program, completes a
/// turn through the gateway's Responses route with the machine's OpenAI
/// key; its tokens land in the session's record; its own settings' and
/// login's keys stay on the machine.
fn codex_turn(w: World) {
    let (codex, image) = real_codex();
    let mock = OpenAiMock::start();
    world_for_openai(&w, &mock, &format!("[harness]\ncodex = \"{codex}\"\n"));
    users_codex(&w);
    let name = caged(&w, "cxturn", "codex", &image);
    let run = w
        .run_env(
            &[
                "cage",
                "run",
                &name,
                "--",
                "exec",
                "--skip-git-repo-check",
                "say hi",
            ],
            &[("OPENAI_API_KEY", MACHINE_OPENAI_KEY)],
        )
        .ok();
    assert!(
        run.stdout().contains(ANSWER_TEXT),
        "{}\n{}",
        run.explain(),
        mock.explain()
    );
    let seen = mock.seen();
    assert!(
        seen.iter()
            .any(|s| s.method == "POST" && s.path() == "/v1/responses"),
        "{}",
        mock.explain()
    );
    for s in &seen {
        assert_eq!(
            s.header("authorization").map(str::to_string),
            Some(format!("Bearer {MACHINE_OPENAI_KEY}")),
            "{s:?}"
        );
        let all = format!("{s:?}");
        for other in [CODEX_FILE_KEY, CODEX_LOGIN_KEY, "shrooms-gateway-adds"] {
            assert!(!all.contains(other), "{other} reached the upstream: {s:?}");
        }
    }
    let used = &w.record(&name)["tokens"]["used"];
    let answers: Vec<_> = seen.iter().map(|_| &RESPONSES_STREAMED).collect();
    assert_eq!(used, &recorded(&answers), "{}", run.explain());
    let look = look_for(
        &w,
        &name,
        &[MACHINE_OPENAI_KEY, CODEX_FILE_KEY, CODEX_LOGIN_KEY],
    )
    .ok();
    assert_eq!(look.stdout(), "0\nEND\n", "{}", look.explain());
    on_a_shells_path(&w, &name, "codex", "codex-cli 0.171.0");
}

/// The harness is at hand in the cage's shell, by its own name, as the
/// program `cage run` runs.
fn on_a_shells_path(w: &World, name: &str, command: &str, version: &str) {
    let shell = w
        .run(&[
            "cage",
            "exec",
            name,
            "--",
            "sh",
            "-c",
            &format!("command -v {command} && {command} --version"),
        ])
        .ok();
    assert!(
        shell.stdout().contains(&format!("/{command}\n")) && shell.stdout().contains(version),
        "{}",
        shell.explain()
    );
}

#[test]
fn harness_real_codex_turn_through_the_gateway() {
    codex_turn(World::new());
}

#[test]
fn harness_real_codex_turn_through_the_gateway_rootless() {
    codex_turn(World::rootless());
}

/// opencode with an OpenAI model: its `openai` provider reaches the
/// gateway's OpenAI routes with the machine's OpenAI key.
fn opencode_openai_turn(w: World) {
    let (opencode, image) = real_opencode();
    let mock = OpenAiMock::start();
    world_for_openai(
        &w,
        &mock,
        &format!("[harness]\nopencode = \"{opencode}\"\n"),
    );
    users_opencode(&w);
    let name = caged(&w, "ocopenai", "opencode", &image);
    let run = w
        .run_env(
            &[
                "cage",
                "run",
                &name,
                "--",
                "run",
                "-m",
                "openai/gpt-5",
                "say hi",
            ],
            &[
                ("OPENAI_API_KEY", MACHINE_OPENAI_KEY),
                ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
            ],
        )
        .ok();
    assert!(
        run.stdout().contains(ANSWER_TEXT),
        "{}\n{}",
        run.explain(),
        mock.explain()
    );
    let seen = mock.seen();
    assert!(!seen.is_empty());
    for s in &seen {
        assert_eq!(
            s.header("authorization").map(str::to_string),
            Some(format!("Bearer {MACHINE_OPENAI_KEY}")),
            "{s:?}"
        );
    }
    let look = look_for(&w, &name, &[MACHINE_OPENAI_KEY, OPENCODE_LOGIN_KEY]).ok();
    assert_eq!(look.stdout(), "0\nEND\n", "{}", look.explain());
}

#[test]
fn harness_real_opencode_openai_turn_through_the_gateway() {
    opencode_openai_turn(World::new());
}

#[test]
fn harness_real_opencode_openai_turn_through_the_gateway_rootless() {
    opencode_openai_turn(World::rootless());
}
