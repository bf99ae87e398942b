//! No key reaches a cage through Claude Code's settings, `pass_env` takes
//! no credential unasked, and a fresh cage's Claude Code goes straight to
//! its prompt. Real podman, rootful and rootless; the last with the real
//! Claude Code from npm on a terminal the test reads (tmux).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The user's settings with a key in its `env` block and commands that
/// fetch credentials, and an allowed model choice.
fn user_settings(secret: &str, model: &str) -> String {
    format!(
        r#"{{
  "apiKeyHelper": "echo {secret}-helper",
  "awsCredentialExport": "echo {secret}-aws",
  "awsAuthRefresh": "echo {secret}-aws-refresh",
  "otelHeadersHelper": "echo {secret}-otel",
  "env": {{
    "ANTHROPIC_API_KEY": "{secret}",
    "ANTHROPIC_MODEL": "{model}",
    "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/{secret}"
  }},
  "permissions": {{"allow": ["Bash(ls)"]}}
}}
"#
    )
}

fn settings_keep_keys_out(w: World) {
    let secret = format!("sk-secret-settings-{}-{}", std::process::id(), w.agent_port);
    let settings = w.file(
        "home/.claude/settings.json",
        &user_settings(&secret, "model-one"),
    );
    w.file(
        "home/.claude/settings.local.json",
        &format!(r#"{{"env": {{"ANTHROPIC_AUTH_TOKEN": "{secret}-local"}}, "apiKeyHelper": "x"}}"#),
    );
    let name = w.session("nokeyset");
    let dir = fs::canonicalize(w.dir(&format!("{name}-project"))).unwrap();
    w.create(&name, &dir, &[]);
    let cfg = w.home.join(".claude");
    let (st, local) = (
        s(&cfg.join("settings.json")),
        s(&cfg.join("settings.local.json")),
    );
    let look = format!(
        "cat {st}; echo ===; cat {local}; echo ===; \
         for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done; echo ===; \
         grep -rl -e sk-secret-settings {} 2>/dev/null; echo ===; \
         echo '{{}}' > {st} && echo WROTE; true",
        s(&cfg)
    );
    let r = w.sh(&name, &look).ok();
    let out = r.stdout();
    let copy: Vec<&str> = out.split("===\n").collect();
    assert_eq!(copy.len(), 5, "{}", r.explain());
    assert!(
        !out.contains(&secret),
        "a key reached the cage:\n{}",
        r.explain()
    );
    // Neither copy names them. (The cage's environment has an
    // ANTHROPIC_BASE_URL of its own, the model gateway's; the settings'
    // value, which holds the secret, is checked above.)
    let copies = format!("{}{}", copy[0], copy[1]);
    for gone in [
        "apiKeyHelper",
        "awsCredentialExport",
        "awsAuthRefresh",
        "otelHeadersHelper",
        "ANTHROPIC_BASE_URL",
    ] {
        assert!(
            !copies.contains(gone),
            "{gone} reached the cage:\n{}",
            r.explain()
        );
    }
    let main: serde_json::Value = serde_json::from_str(copy[0]).unwrap();
    assert_eq!(
        main["env"],
        serde_json::json!({"ANTHROPIC_MODEL": "model-one"}),
        "{}",
        r.explain()
    );
    assert_eq!(main["permissions"]["allow"][0], "Bash(ls)");
    assert_eq!(main["skipDangerousModePermissionPrompt"], true);
    let local_copy: serde_json::Value = serde_json::from_str(copy[1]).unwrap();
    assert_eq!(
        local_copy,
        serde_json::json!({"env": {}}),
        "{}",
        r.explain()
    );
    assert!(
        !out.contains("WROTE"),
        "the copy is writable inside:\n{}",
        r.explain()
    );
    assert!(
        r.stderr().contains("Read-only file system"),
        "{}",
        r.explain()
    );
    // The user's file is as it was; the copy is the cage's own, private.
    assert_eq!(
        fs::read_to_string(&settings).unwrap(),
        user_settings(&secret, "model-one")
    );
    let container = w.container(&name);
    let copy_dir = w.state.join("cages").join(&container).join("settings");
    assert_eq!(mode_of(&copy_dir) & 0o777, 0o700);
    for f in ["settings.json", "settings.local.json"] {
        assert_eq!(mode_of(&copy_dir.join(f)) & 0o777, 0o600, "{f}");
    }
    // Made again at each start: the next exec sees today's settings.
    fs::write(&settings, user_settings(&secret, "model-two")).unwrap();
    w.chown_all();
    let r = w.sh(&name, &format!("cat {st}")).ok();
    assert!(r.stdout().contains("model-two"), "{}", r.explain());
    assert!(!r.stdout().contains(&secret), "{}", r.explain());
}

/// The user's settings.json reaches a cage as a copy: its `env` keeps only
/// what the environment's allow-list passes (ANTHROPIC_MODEL, not
/// ANTHROPIC_API_KEY), without apiKeyHelper and the other keys that fetch
/// credentials; read-only inside, 0600 in a 0700 folder outside, made again
/// at each start. Neither a file nor a process of the cage holds the key.
#[test]
fn settings_env_key_and_helpers_never_reach_the_cage() {
    settings_keep_keys_out(World::new());
}

#[test]
fn settings_env_key_and_helpers_never_reach_the_cage_rootless() {
    settings_keep_keys_out(World::rootless());
}

/// `pass_env` refuses a `*_TOKEN` name at config load (exit 2, the key and
/// the file named, making nothing); under `pass_secrets` it passes.
#[test]
fn pass_env_refuses_a_token_unless_pass_secrets() {
    let w = World::new();
    w.write_config("pass_env = [\"MY_SERVICE_TOKEN\"]");
    let name = w.session("nokeytok");
    let dir = w.dir(&format!("{name}-project"));
    let r = w
        .run(&["cage", "create", &name, "--dir", &s(&dir)])
        .code_is(2);
    let err = r.stderr();
    assert!(err.contains("key `pass_env`"), "{}", r.explain());
    assert!(err.contains(&s(&w.config)), "{}", r.explain());
    assert!(err.contains("pass_secrets"), "{}", r.explain());
    assert!(w.containers_of(&name).is_empty());
    w.write_config("pass_secrets = [\"MY_SERVICE_TOKEN\"]");
    w.create(&name, &dir, &[]);
    let r = w
        .run_env(
            &[
                "cage",
                "exec",
                &name,
                "--",
                "sh",
                "-c",
                "echo T=$MY_SERVICE_TOKEN",
            ],
            &[("MY_SERVICE_TOKEN", "chosen-on-purpose")],
        )
        .ok();
    assert!(
        r.stdout().contains("T=chosen-on-purpose"),
        "{}",
        r.explain()
    );
}

/// The names of secrets the fourth attack round passed through `pass_env`
/// are refused there, each, naming `pass_secrets` and making nothing; a
/// variable `pass_env` passes reaches the cage without the user and
/// password of every URL in it (before, only the proxy variables lost
/// theirs), and a name under `pass_secrets` passes whole.
fn pass_env_keeps_secrets_and_url_passwords_out(w: World) {
    let name = w.session("nokeyurl");
    let dir = w.dir(&format!("{name}-project"));
    for secret in [
        "SSHPASS",
        "BW_SESSION",
        "OP_SESSION_myaccount",
        "LDAP_BIND_PW",
        "DB_PW",
        "SONAR_LOGIN",
        "ID_RSA",
        "KEYSTORE_BASE64",
        "GOOGLE_CLOUD_KEYFILE_JSON",
    ] {
        w.write_config(&format!("pass_env = [\"{secret}\"]"));
        let r = w
            .run(&["cage", "create", &name, "--dir", &s(&dir)])
            .code_is(2);
        let err = r.stderr();
        assert!(
            err.contains(&format!("{secret} looks like a credential"))
                && err.contains("pass_secrets"),
            "{secret}: {}",
            r.explain()
        );
        assert!(w.containers_of(&name).is_empty(), "{secret}");
        assert!(!w.record_path(&name).exists(), "{secret}");
    }
    w.write_config(
        "pass_env = [\"PIP_INDEX_URL\", \"PIP_EXTRA_INDEX_URL\", \"XDG_SESSION_TYPE\"]\n\
         pass_secrets = [\"ADMIN_URL\"]",
    );
    w.create(&name, &dir, &[]);
    let r = w
        .sh_env(
            &name,
            "echo \"I=$PIP_INDEX_URL\"; echo \"E=$PIP_EXTRA_INDEX_URL\"; \
             echo \"A=$ADMIN_URL\"; echo \"X=$XDG_SESSION_TYPE\"; \
             for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done",
            &[
                ("PIP_INDEX_URL", "https://bob:pw-of-bob@pypi.example/simple"),
                (
                    "PIP_EXTRA_INDEX_URL",
                    "https://al:pw-of-al@one.example/s https://tok-of-al@two.example/s",
                ),
                ("ADMIN_URL", "https://root:chosen@admin.example/"),
                ("XDG_SESSION_TYPE", "tty"),
                ("SSHPASS", "pw-of-ssh"),
                ("BW_SESSION", "pw-of-bw"),
            ],
        )
        .ok();
    let out = r.stdout();
    for want in [
        "I=https://pypi.example/simple\n",
        "E=https://one.example/s https://two.example/s\n",
        "A=https://root:chosen@admin.example/\n",
        "X=tty\n",
    ] {
        assert!(out.contains(want), "{want:?} not seen:\n{}", r.explain());
    }
    for secret in ["bob", "pw-of-", "tok-of-al"] {
        assert!(
            !out.contains(secret),
            "{secret} reached the cage:\n{}",
            r.explain()
        );
    }
}

#[test]
fn pass_env_keeps_secrets_and_url_passwords_out_of_the_cage() {
    pass_env_keeps_secrets_and_url_passwords_out(World::new());
}

#[test]
fn pass_env_keeps_secrets_and_url_passwords_out_of_the_cage_rootless() {
    pass_env_keeps_secrets_and_url_passwords_out(World::rootless());
}

// ---- the real Claude Code on a terminal -----------------------------------

/// A terminal of tmux's, on a server of the test's own, running one command.
pub struct Screen {
    socket: PathBuf,
}

impl Screen {
    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    /// Start `cmd` (as built for the world's user) on a 200x50 terminal.
    pub fn start(socket: PathBuf, cmd: &Command) -> Screen {
        let mut argv: Vec<String> = Vec::new();
        if cmd.get_program() != "runuser" {
            // The command's own environment, cleared, as the world gives it.
            argv.push("env".into());
            argv.push("-i".into());
            for (k, v) in cmd.get_envs() {
                if let Some(v) = v {
                    argv.push(format!("{}={}", k.to_string_lossy(), v.to_string_lossy()));
                }
            }
        }
        argv.push(cmd.get_program().to_string_lossy().into_owned());
        argv.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
        let screen = Screen { socket };
        let st = screen
            .tmux()
            .args([
                "new-session",
                "-d",
                "-x",
                "200",
                "-y",
                "50",
                "-c",
                "/tmp",
                "--",
            ])
            .args(&argv)
            .status()
            .expect("tmux");
        assert!(st.success(), "tmux new-session failed");
        // Keep the pane when the command ends, to read how it ended.
        let _ = screen
            .tmux()
            .args(["set-option", "-g", "remain-on-exit", "on"])
            .status();
        screen
    }

    pub fn text(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-J"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn keys(&self, keys: &[&str]) {
        let _ = self.tmux().arg("send-keys").args(keys).status();
    }

    /// Type `line`, wait until the screen shows it, then press Enter: the
    /// text and the Enter in one read are a paste to these programs, not a
    /// line given (a fixed pause before the Enter was enough only while
    /// the program kept up).
    pub fn type_line(&self, line: &str) {
        self.keys(&["-l", line]);
        wait_until(
            &format!("{line:?} on the screen"),
            Duration::from_secs(30),
            || self.text().contains(line),
        );
        std::thread::sleep(Duration::from_millis(300));
        self.keys(&["Enter"]);
    }

    pub fn dead(&self) -> bool {
        let out = self
            .tmux()
            .args(["display-message", "-p", "#{pane_dead}"])
            .output();
        match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim() == "1",
            _ => true,
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

/// What Claude Code shows instead of its prompt when a cage is not ready.
const NOT_READY: &[&str] = &[
    "Unable to connect",
    "Select login method",
    "Choose the text style",
    "Do you want to use this API key",
    "Bypass Permissions mode",
    "Yes, I accept",
    "Do you trust the files",
    "trust this folder",
    "Not logged in",
    "Security notes",
];

/// Wait for Claude Code's prompt (its input line, with bypass permissions
/// on), failing on the first screen that shows something else to answer.
pub fn reaches_the_prompt(screen: &Screen, what: &str) -> String {
    let start = Instant::now();
    loop {
        let text = screen.text();
        if let Some(bad) = NOT_READY.iter().find(|b| text.contains(**b)) {
            panic!("{what}: Claude Code shows {bad:?}, not its prompt:\n{text}");
        }
        if text.contains("bypass permissions on") && text.contains('\u{276f}') {
            return text;
        }
        if screen.dead() || start.elapsed() > Duration::from_secs(90) {
            panic!("{what}: no prompt (ended: {}):\n{text}", screen.dead());
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn fresh_cage_reaches_the_prompt(w: World) {
    let (claude, image) = real_claude();
    // The model API is nowhere: the gateway's upstream is a closed port on
    // this machine's loopback, and the cage gets the gateway's own base URL
    // and stand-in key. The machine's key is a stand-in too; nothing is sent
    // anywhere.
    w.write_config(&format!(
        "[harness]\nclaude = \"{claude}\"\n[gateway]\nanthropic_url = \"http://127.0.0.1:9\"\n"
    ));
    let name = w.session("nokeytty");
    let dir = fs::canonicalize(w.dir(&format!("{name}-project"))).unwrap();
    w.create(&name, &dir, &["--image", &image]);
    let env = [
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
        (
            "ANTHROPIC_API_KEY",
            "sk-ant-api03-stand-in-key-for-the-tty-test",
        ),
        // Nothing else may leave: no updates, telemetry or error reports.
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
    ];
    let args = ["cage", "run", &name, "--", "--dangerously-skip-permissions"];
    let socket = w.dir("tmux").join("sock");
    for round in ["first run", "second run, after a stop"] {
        let screen = Screen::start(socket.clone(), &w.command_env(&args, &env));
        let text = reaches_the_prompt(&screen, round);
        eprintln!("{round}: Claude Code's screen:\n{text}");
        // Leave it: /exit ends the turn, which stops the cage.
        screen.type_line("/exit");
        wait_until("cage run to end", Duration::from_secs(60), || screen.dead());
        drop(screen);
        w.run(&["cage", "stop", &name]);
    }
    // The cage's own .claude.json kept what Claude Code wrote in it.
    let container = w.container(&name);
    let own = w
        .state
        .join("cages")
        .join(&container)
        .join("home/.claude.json");
    let json: serde_json::Value = serde_json::from_str(&fs::read_to_string(&own).unwrap()).unwrap();
    assert_eq!(json["hasCompletedOnboarding"], true);
    assert_eq!(json["projects"][s(&dir)]["hasTrustDialogAccepted"], true);
    assert!(json.get("numStartups").is_some(), "{json}");
}

/// A fresh cage's first interactive `cage run` of the real Claude Code goes
/// straight to the prompt (no onboarding, login, key question or
/// bypass-permissions warning), and so does the next one after a stop.
#[test]
fn fresh_cage_goes_straight_to_claude_codes_prompt() {
    fresh_cage_reaches_the_prompt(World::new());
}

#[test]
fn fresh_cage_goes_straight_to_claude_codes_prompt_rootless() {
    fresh_cage_reaches_the_prompt(World::rootless());
}

/// The settings are read at each start: a project folder that holds them
/// (here, where a stow link of `~/.claude/settings.json` leads) is refused,
/// since its cage could change what the next start copies and what the
/// machine's own Claude Code obeys.
#[test]
fn a_project_holding_the_settings_is_refused() {
    let w = World::new();
    let name = w.session("nokeystow");
    let dir = fs::canonicalize(w.dir(&format!("{name}-project"))).unwrap();
    let target = w.file(&format!("{name}-project/dotfiles/settings.json"), "{}\n");
    let settings = w.dir_in_home(".claude").join("settings.json");
    std::os::unix::fs::symlink(&target, &settings).unwrap();
    let r = w
        .run(&["cage", "create", &name, "--dir", &s(&dir)])
        .code_is(2);
    assert!(r.stderr().contains("settings.json"), "{}", r.explain());
    assert!(w.containers_of(&name).is_empty());
}
