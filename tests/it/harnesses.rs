//! Codex CLI and opencode, the real programs from npm, caged: each
//! completes a turn through the cage's model gateway against a stand-in
//! upstream on this machine, the machine's key reaches the stand-in, and
//! nothing of the machine's credentials (the key, the harness's own login
//! file, the keys in its settings file) is anywhere in the cage.

use crate::common::*;
use crate::gateway::{MACHINE_KEY, Mock, world_for};

/// What the user's opencode settings and login hold, which must stay out.
const OPENCODE_FILE_KEY: &str = "sk-ant-in-the-users-opencode-json-71d";
const OPENCODE_LOGIN_KEY: &str = "sk-ant-in-the-users-opencode-login-2b8";

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
    let name = w.session("octurn");
    let project = w.dir(&format!("projects/{name}"));
    w.create(
        &name,
        &project,
        &["--harness", "opencode", "--image", &image],
    )
    .ok();
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
}

#[test]
fn harness_real_opencode_turn_through_the_gateway() {
    opencode_turn(World::new());
}

#[test]
fn harness_real_opencode_turn_through_the_gateway_rootless() {
    opencode_turn(World::rootless());
}
