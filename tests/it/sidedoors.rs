//! Nothing secret leaves by the side doors: a credential named in
//! `pass_env` under any spelling, a proxy URL's password, an `LC_*` that is
//! no locale, a token in pi's `mcp.json` or `settings.json`, another
//! session's received files. And pi's read-only files stay read-only for a
//! real caged pi. Real podman, rootful and rootless.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::*;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A marker of this test run, to look for inside the cage.
fn marker(w: &World, what: &str) -> String {
    format!("{what}-{}-{}", std::process::id(), w.agent_port)
}

/// The names the attack round passed through `pass_env` although
/// `--dry-run` showed them redacted.
const CREDENTIALS: [&str; 5] = [
    "AWS_SECRET_ACCESS_KEY",
    "PGPASSWORD",
    "OPENAI_KEY",
    "STRIPE_SECRET_KEY",
    "DATABASE_URL",
];

fn environment_side_doors(w: World) {
    let name = w.session("doors");
    let dir = w.dir(&format!("projects/{name}"));
    w.create(&name, &dir, &[]);
    let secret = marker(&w, "sidedoor-secret");
    let values: Vec<(String, String)> = CREDENTIALS
        .iter()
        .map(|n| (n.to_string(), format!("{n}-{secret}")))
        .chain([
            (
                "HTTPS_PROXY".to_string(),
                format!("http://alice:{secret}@127.0.0.1:9"),
            ),
            (
                "http_proxy".to_string(),
                format!("http://{secret}@127.0.0.1:9/"),
            ),
            ("LC_CTYPE".to_string(), format!("x; {secret}")),
            ("LC_MY_TOKEN".to_string(), secret.clone()),
            ("LC_TIME".to_string(), "C.UTF-8".to_string()),
        ])
        .collect();
    let env: Vec<(&str, &str)> = values
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let exec_env = |cfg: &str| {
        w.write_config(cfg);
        w.run_env(&["cage", "exec", &name, "--", "env"], &env)
    };
    // Named in pass_env: refused at config load (exit 2), nothing runs.
    let listed = CREDENTIALS
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    // (125: `cage exec`'s own failure, docs/configuration.md "Exit codes".)
    let r = exec_env(&format!("pass_env = [{listed}]")).code_is(125);
    assert!(r.stderr().contains("pass_secrets"), "{}", r.explain());
    assert!(
        r.stderr().contains("AWS_SECRET_ACCESS_KEY"),
        "{}",
        r.explain()
    );
    assert!(
        !r.stdout().contains(&secret) && !r.stderr().contains(&secret),
        "{}",
        r.explain()
    );
    // Named nowhere: the proxies pass without user or password, the
    // locale names only with locale values.
    let r = exec_env("").ok();
    let out = r.stdout();
    assert!(
        !out.contains(&secret),
        "a secret reached the cage:\n{}",
        r.explain()
    );
    for line in [
        "HTTPS_PROXY=http://127.0.0.1:9",
        "http_proxy=http://127.0.0.1:9/",
        "LC_TIME=C.UTF-8",
    ] {
        assert!(out.lines().any(|l| l == line), "{line}\n{}", r.explain());
    }
    assert!(
        !out.contains("LC_CTYPE=") && !out.contains("LC_MY_TOKEN="),
        "{}",
        r.explain()
    );
    assert!(
        r.stderr().contains("LC_CTYPE"),
        "no warning:\n{}",
        r.explain()
    );
    let env_file = w
        .state
        .join("cages")
        .join(format!("{}.env", w.container(&name)));
    let text = fs::read_to_string(&env_file).unwrap();
    assert!(!text.contains(&secret), "{text}");
    assert!(text.contains("HTTPS_PROXY=http://127.0.0.1:9\n"), "{text}");
    // Under pass_secrets, chosen danger and all, they pass whole.
    let r = exec_env(&format!("pass_secrets = [{listed}, \"HTTPS_PROXY\"]")).ok();
    for (n, v) in values.iter().take(CREDENTIALS.len() + 1) {
        assert!(
            r.stdout().lines().any(|l| l == format!("{n}={v}")),
            "{n}\n{}",
            r.explain()
        );
    }
}

/// `pass_env` refuses a credential word anywhere in a name (the names the
/// attack round got in: `AWS_SECRET_ACCESS_KEY`, `PGPASSWORD`, ...), so
/// such a variable reaches a cage only under `pass_secrets`; a proxy URL
/// passes without its user and password; an `LC_*` passes only as a locale
/// category with a locale name (else a warning); the env file holds none
/// of it.
#[test]
fn environment_side_doors_are_shut() {
    environment_side_doors(World::new());
}

#[test]
fn environment_side_doors_are_shut_rootless() {
    environment_side_doors(World::rootless());
}

fn pi_files_keep_tokens_out(w: World) {
    let tok = marker(&w, "pi-mcp-token");
    let agent = w.home.join(".pi/agent");
    fs::create_dir_all(&agent).unwrap();
    let mcp = serde_json::json!({"mcpServers": {
        "gh": {
            "command": "npx",
            "args": ["-y", "server-github", "--token", format!("{tok}-args")],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": format!("{tok}-env"), "LOG_LEVEL": "debug"}
        },
        "remote": {
            "url": format!("https://bob:{tok}-url@127.0.0.1:9/mcp"),
            "headers": {"Authorization": format!("Bearer {tok}-headers")},
            "bearerToken": format!("{tok}-bearer")
        }
    }})
    .to_string();
    let settings = serde_json::json!({
        "defaultModel": "model-one",
        "packages": [format!("https://{tok}-package@127.0.0.1:9/ext.git")],
        "githubToken": format!("{tok}-settings")
    })
    .to_string();
    fs::write(agent.join("mcp.json"), &mcp).unwrap();
    fs::write(agent.join("settings.json"), &settings).unwrap();
    // The test image has no pi of its own: a pi of the machine's.
    let pi = w.file("tools/pi", "#!/bin/sh\n");
    fs::set_permissions(&pi, fs::Permissions::from_mode(0o755)).unwrap();
    w.write_config(&format!("[harness]\npi = \"{}\"", pi.display()));
    w.chown_all();
    let name = w.session("pimcp");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--harness", "pi"]);
    let look = format!(
        "cat {a}/mcp.json; echo; echo ===; cat {a}/settings.json; echo; echo ===; \
         cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {tok}; \
         grep -rls {tok} /tmp /run /root /home /etc 2>/dev/null | head -5; echo END",
        a = s(&agent)
    );
    let r = w.sh(&name, &look).ok();
    let out = r.stdout();
    let parts: Vec<&str> = out.split("===\n").collect();
    assert_eq!(parts.len(), 3, "{}", r.explain());
    assert_eq!(
        parts[2],
        "0\nEND\n",
        "a token is in the cage:\n{}",
        r.explain()
    );
    assert!(
        !out.contains(&tok),
        "a token is in the cage:\n{}",
        r.explain()
    );
    let copy: serde_json::Value = serde_json::from_str(parts[0]).unwrap();
    assert_eq!(copy["mcpServers"]["gh"]["command"], "npx", "{copy}");
    assert_eq!(
        copy["mcpServers"]["gh"]["env"],
        serde_json::json!({}),
        "{copy}"
    );
    assert_eq!(
        copy["mcpServers"]["remote"],
        serde_json::json!({"url": "https://127.0.0.1:9/mcp"}),
        "{copy}"
    );
    let copy: serde_json::Value = serde_json::from_str(parts[1]).unwrap();
    assert_eq!(
        copy,
        serde_json::json!({"defaultModel": "model-one",
                           "packages": ["https://127.0.0.1:9/ext.git"]}),
    );
    // The machine's files are as they were.
    assert_eq!(fs::read_to_string(agent.join("mcp.json")).unwrap(), mcp);
    assert_eq!(
        fs::read_to_string(agent.join("settings.json")).unwrap(),
        settings
    );
}

/// pi's `mcp.json` and `settings.json` reach a pi cage as copies without
/// their tokens (an MCP server's `env`, `headers`, `bearerToken`, the
/// user in its `url`, a token flag in its `args`, a key named for a
/// token): no file or process of the cage holds one.
#[test]
fn pi_mcp_and_settings_tokens_never_reach_the_cage() {
    pi_files_keep_tokens_out(World::new());
}

#[test]
fn pi_mcp_and_settings_tokens_never_reach_the_cage_rootless() {
    pi_files_keep_tokens_out(World::rootless());
}

fn own_uploads_only(w: World) {
    let name = w.session("uploads");
    let other = w.session("other");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &[]);
    let uploads = w.state.join("uploads");
    let theirs = uploads.join(&other).join("drop/from-here_x/theirs.txt");
    let mine = uploads.join(&name).join("drop/from-here_x/mine.txt");
    for (f, text) in [
        (&theirs, "their-received-file"),
        (&mine, "my-received-file"),
    ] {
        fs::create_dir_all(f.parent().unwrap()).unwrap();
        fs::write(f, text).unwrap();
    }
    w.chown_all();
    let r = w
        .sh(
            &name,
            &format!(
                "cat {}; echo; cat {} 2>/dev/null; echo ===; ls {}; true",
                s(&mine),
                s(&theirs),
                s(&uploads)
            ),
        )
        .ok();
    let out = r.stdout();
    assert!(out.contains("my-received-file"), "{}", r.explain());
    let listed = out.split_once("===\n").map_or("", |(_, l)| l);
    assert!(
        !out.contains("their-received-file") && !listed.contains(&other),
        "another session's received file is readable:\n{}",
        r.explain()
    );
}

/// An ordinary cage reads its own received files and no other session's
/// (as a sealed cage already did).
#[test]
fn an_ordinary_cage_reads_only_its_own_received_files() {
    own_uploads_only(World::new());
}

#[test]
fn an_ordinary_cage_reads_only_its_own_received_files_rootless() {
    own_uploads_only(World::rootless());
}

/// Every file under a folder, with its mode and its bytes (or link).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let meta = fs::symlink_metadata(&p).unwrap();
        let bytes = if meta.is_dir() {
            for e in fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
            Vec::new()
        } else if meta.file_type().is_symlink() {
            fs::read_link(&p)
                .unwrap()
                .into_os_string()
                .into_encoded_bytes()
        } else {
            fs::read(&p).unwrap()
        };
        out.insert(p, (meta.permissions().mode(), bytes));
    }
    out
}

/// pi's files a cage gets read-only, files and folders.
const PI_FILES: [&str; 6] = [
    "settings.json",
    "models.json",
    "mcp.json",
    "AGENTS.md",
    "SYSTEM.md",
    "APPEND_SYSTEM.md",
];
const PI_FOLDERS: [&str; 5] = ["extensions", "skills", "prompts", "themes", "bin"];

fn pi_read_only(w: World) {
    let image = real_pi_image();
    let agent = w.home.join(".pi/agent");
    for d in PI_FOLDERS {
        fs::create_dir_all(agent.join(d)).unwrap();
        fs::write(agent.join(d).join("kept.txt"), format!("machine's {d}\n")).unwrap();
    }
    for f in PI_FILES {
        let text = if f.ends_with(".json") {
            "{}\n"
        } else {
            "machine's\n"
        };
        fs::write(agent.join(f), text).unwrap();
    }
    w.chown_all();
    let name = w.session("piro");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--harness", "pi", "--image", &image]);
    // After the create, which makes the project's conversation folder.
    let before = snapshot(&agent);
    // Each try prints a word only if it worked.
    let mut script = String::new();
    let a = s(&agent);
    for f in PI_FILES {
        let p = format!("{a}/{f}");
        script.push_str(&format!(
            "echo x 2>/dev/null >> {p} && echo WROTE-{f}; (: > {p}) 2>/dev/null && echo TRUNCATED-{f}; \
             mv {p} {p}.moved 2>/dev/null && echo RENAMED-{f}; rm -f {p} 2>/dev/null && \
             [ ! -e {p} ] && echo DELETED-{f}; chmod 777 {p} 2>/dev/null && echo CHMOD-{f}; "
        ));
    }
    for d in PI_FOLDERS {
        let p = format!("{a}/{d}");
        script.push_str(&format!(
            "echo x > {p}/planted.js 2>/dev/null && echo CREATED-{d}; \
             mkdir {p}/planted 2>/dev/null && echo MKDIR-{d}; \
             echo x >> {p}/kept.txt 2>/dev/null && echo WROTE-{d}; \
             mv {p}/kept.txt {p}/moved.txt 2>/dev/null && echo RENAMED-IN-{d}; \
             rm -f {p}/kept.txt 2>/dev/null; [ ! -e {p}/kept.txt ] && echo DELETED-IN-{d}; \
             mv {p} {p}.moved 2>/dev/null && echo RENAMED-{d}; \
             rm -rf {p} 2>/dev/null; [ ! -e {p} ] && echo DELETED-{d}; "
        ));
    }
    script.push_str("echo TRIED");
    let r = w.sh(&name, &script).ok();
    assert_eq!(
        r.stdout(),
        "TRIED\n",
        "a caged pi changed a file it gets read-only:\n{}",
        r.explain()
    );
    assert_eq!(snapshot(&agent), before, "the machine's pi files changed");
}

/// A caged pi (the real pi image) cannot write, create, rename or delete
/// anything in the files of pi's agent folder it gets read-only, so it
/// cannot plant an extension (or a skill, a prompt, a program in `bin/`)
/// that the uncaged pi runs later; the machine's files stay as they were.
#[test]
fn a_caged_pi_cannot_change_its_read_only_files() {
    pi_read_only(World::new());
}

#[test]
fn a_caged_pi_cannot_change_its_read_only_files_rootless() {
    pi_read_only(World::rootless());
}
