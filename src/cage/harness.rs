//! What the tool knows about each harness: where it keeps its data, which of
//! its files it runs or obeys (let in read-only), how it names a project's
//! conversation folder, and which of its settings travel by environment.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::settings::Settings;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Harness {
    Claude,
    Pi,
    Codex,
    Opencode,
}

/// Seed, "A caged session can still ... write the harness's data": what
/// Claude Code runs or obeys on the machine, mounted read-only over the
/// cage's private ~/.claude so that a cage cannot plant a hook. Its
/// settings files are let in read-only too, but as a filtered copy
/// (`cage_files::CLAUDE_COPIED`): they can hold credentials.
const CLAUDE_READ_ONLY: &[&str] = &[
    "CLAUDE.md",
    "hooks",
    "skills",
    "plugins",
    "commands",
    "agents",
    "output-styles",
    "bin",
];

/// The same list for pi's agent folder. Its `models.json` goes in as a
/// copy pointed at the model gateway (`pi_models`), and its `settings.json`
/// and `mcp.json` as copies without credentials
/// (`cage_files::PI_COPIED`), read-only too: they can hold keys.
const PI_READ_ONLY: &[&str] = &[
    "extensions",
    "skills",
    "prompts",
    "themes",
    "AGENTS.md",
    "SYSTEM.md",
    "APPEND_SYSTEM.md",
    "bin",
];

/// The same list for Codex CLI's folder (`$CODEX_HOME`, else ~/.codex;
/// developers.openai.com/codex/config-reference): its instructions
/// (`AGENTS.md`, `AGENTS.override.md`), its custom prompts and skills, and
/// its command rules. Its `config.toml` goes in as a copy without
/// credentials, pointed at the model gateway (`codex_config`); its
/// `auth.json`, which holds the machine's key or ChatGPT tokens, never
/// enters.
const CODEX_READ_ONLY: &[&str] = &[
    "AGENTS.md",
    "AGENTS.override.md",
    "prompts",
    "skills",
    "rules",
];

/// The same list for opencode's config folder
/// (`$XDG_CONFIG_HOME/opencode`, else ~/.config/opencode;
/// opencode.ai/docs/config): its rules, agents, commands, modes, plugins,
/// tools, skills and themes, in their singular and plural folder names.
/// Its `opencode.json` goes in as a copy without credentials, pointed at
/// the model gateway (`opencode_config`); its login, in its data folder,
/// never enters.
const OPENCODE_READ_ONLY: &[&str] = &[
    "AGENTS.md",
    "agent",
    "agents",
    "command",
    "commands",
    "mode",
    "modes",
    "plugin",
    "plugins",
    "tool",
    "tools",
    "skill",
    "skills",
    "themes",
];

/// Claude Code's own settings that travel by environment
/// (docs/cages.md, "Environment"): its model choices, output and thinking limits,
/// and its telemetry switches. From Anthropic's list of Claude Code's
/// environment variables (docs.anthropic.com, "Claude Code settings",
/// "Environment variables", code.claude.com/docs/en/env-vars); credentials, base URLs
/// and provider switches are deliberately not here.
const CLAUDE_SETTINGS_ENV: &[&str] = &[
    // model choices
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
    "CLAUDE_CODE_EFFORT_LEVEL",
    // output and thinking limits
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "MAX_THINKING_TOKENS",
    "MAX_MCP_OUTPUT_TOKENS",
    "CLAUDE_CODE_FILE_READ_MAX_OUTPUT_TOKENS",
    "CLAUDE_CODE_DISABLE_THINKING",
    "BASH_MAX_OUTPUT_LENGTH",
    "TASK_MAX_OUTPUT_LENGTH",
    // telemetry switches
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "DISABLE_BUG_COMMAND",
    "DISABLE_FEEDBACK_COMMAND",
    "DISABLE_AUTOUPDATER",
    "DISABLE_COST_WARNINGS",
    "DISABLE_NON_ESSENTIAL_MODEL_CALLS",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "CLAUDE_CODE_ENABLE_TELEMETRY",
];

/// pi reads no model or limit from the environment (those are flags or
/// settings.json); these are its telemetry and update switches, from its
/// docs/environment-variables.md.
const PI_SETTINGS_ENV: &[&str] = &["PI_TELEMETRY", "PI_SKIP_VERSION_CHECK", "PI_OFFLINE"];

/// Codex CLI takes its model, limits and switches from its `config.toml`
/// (the cage's copy) and its flags; none of its own variables is passed.
const CODEX_SETTINGS_ENV: &[&str] = &[];

/// opencode's switches of what it fetches at start (its models catalogue,
/// its updates), from its docs' environment variables (opencode.ai/docs/cli).
const OPENCODE_SETTINGS_ENV: &[&str] = &[
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
];

impl Harness {
    pub fn name(self) -> &'static str {
        match self {
            Harness::Claude => "claude",
            Harness::Pi => "pi",
            Harness::Codex => "codex",
            Harness::Opencode => "opencode",
        }
    }

    /// Every harness.
    #[cfg(test)]
    pub const ALL: [Harness; 4] = [
        Harness::Claude,
        Harness::Pi,
        Harness::Codex,
        Harness::Opencode,
    ];

    /// The command a user types for the harness in a shell: the name of
    /// the link to its program in a cage's link folder, which is on the
    /// cage's PATH (`spec::HARNESS_BIN_IN_CAGE`).
    pub fn command(self) -> &'static str {
        // Each harness's own program name, as its installers put it on PATH.
        self.name()
    }

    /// The harness's data folder on the machine, which the cage sees at the
    /// same path, as the settings resolved it: Claude Code's
    /// (`$CLAUDE_CONFIG_DIR`, else ~/.claude) or pi's
    /// (`$PI_CODING_AGENT_DIR`, else ~/.pi/agent).
    pub fn config_dir(self, settings: &Settings) -> PathBuf {
        match self {
            Harness::Claude => settings.claude_dir.clone(),
            Harness::Pi => settings.pi_dir.clone(),
            Harness::Codex => settings.codex_dir.clone(),
            Harness::Opencode => settings.opencode_dir.clone(),
        }
    }

    /// Entries of the data folder let in read-only, over the private copy.
    pub fn read_only_entries(self) -> &'static [&'static str] {
        match self {
            Harness::Claude => CLAUDE_READ_ONLY,
            Harness::Pi => PI_READ_ONLY,
            Harness::Codex => CODEX_READ_ONLY,
            Harness::Opencode => OPENCODE_READ_ONLY,
        }
    }

    /// The folder of this project's conversations, inside the data folder;
    /// None where the harness's name for it cannot be known, or it keeps
    /// none of its own.
    pub fn conversation_dir(self, config_dir: &Path, project: &Path) -> Option<PathBuf> {
        match self {
            Harness::Claude => {
                claude_project_folder(project).map(|f| config_dir.join("projects").join(f))
            }
            Harness::Pi => Some(config_dir.join("sessions").join(pi_session_folder(project))),
            // Codex files its conversations by date, not by project
            // (`sessions/YYYY/MM/DD/rollout-*.jsonl`, beside SQLite
            // indexes of them all): no folder holds this project's alone,
            // so they stay in the cage's own copy of the folder.
            // opencode keeps them in one database of its data folder, the
            // cage's own.
            Harness::Codex | Harness::Opencode => None,
        }
    }

    /// The harness's own settings passed in from the invoking environment.
    pub fn settings_env(self) -> &'static [&'static str] {
        match self {
            Harness::Claude => CLAUDE_SETTINGS_ENV,
            Harness::Pi => PI_SETTINGS_ENV,
            Harness::Codex => CODEX_SETTINGS_ENV,
            Harness::Opencode => OPENCODE_SETTINGS_ENV,
        }
    }
}

/// Claude Code names a project's folder under ~/.claude/projects by its
/// absolute path with every character other than an ASCII letter or digit
/// replaced by `-` (`/home/u/src/web.app` -> `-home-u-src-web-app`; see
/// anthropics/claude-code#9221). Past 200 characters it cuts the name and
/// appends a hash whose algorithm changed between versions, so such a
/// folder cannot be named from outside: None then.
pub fn claude_project_folder(project: &Path) -> Option<String> {
    let name: String = project
        .to_string_lossy()
        .encode_utf16()
        .map(|u| {
            let c = char::from_u32(u32::from(u)).unwrap_or('-');
            if c.is_ascii_alphanumeric() { c } else { '-' }
        })
        .collect();
    (name.len() <= CLAUDE_MAX_FOLDER).then_some(name)
}

/// Claude Code's `MAX_SANITIZED_LENGTH`.
const CLAUDE_MAX_FOLDER: usize = 200;

/// pi names a working folder's session folder `--<path>--`: the absolute
/// path without its leading `/`, with `/`, `\` and `:` replaced by `-`
/// (pi-coding-agent's session manager).
pub fn pi_session_folder(project: &Path) -> String {
    let p = project.to_string_lossy();
    let p = p.strip_prefix(['/', '\\']).unwrap_or(&p);
    let body: String = p
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("--{body}--")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_folder_names() {
        let f = |p: &str| claude_project_folder(Path::new(p));
        assert_eq!(f("/home/u/src/web.app").unwrap(), "-home-u-src-web-app");
        assert_eq!(f("/tmp/a_b c").unwrap(), "-tmp-a-b-c");
        // one '-' per UTF-16 unit, as Claude Code's JavaScript does
        assert_eq!(f("/tmp/\u{e9}").unwrap(), "-tmp--");
        assert_eq!(f("/tmp/\u{1F600}").unwrap(), "-tmp---");
        let long = format!("/{}", "a".repeat(199));
        assert_eq!(f(&long).unwrap().len(), 200);
        assert_eq!(f(&format!("/{}", "a".repeat(200))), None);
    }

    #[test]
    fn pi_folder_names() {
        assert_eq!(
            pi_session_folder(Path::new("/home/u/src/web.app")),
            "--home-u-src-web.app--"
        );
    }

    #[test]
    fn config_dirs() {
        let load = |pairs: &[(&str, &str)]| {
            let env: crate::settings::Env = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let s = Settings::from_text(
                None,
                Path::new("/cfg/config.toml"),
                PathBuf::from("/state"),
                PathBuf::from("/home/u"),
                &env,
            )
            .unwrap();
            (Harness::Claude.config_dir(&s), Harness::Pi.config_dir(&s))
        };
        assert_eq!(
            load(&[]),
            ("/home/u/.claude".into(), "/home/u/.pi/agent".into())
        );
        assert_eq!(
            load(&[
                ("CLAUDE_CONFIG_DIR", "/data/claude"),
                ("PI_CODING_AGENT_DIR", "/data/pi")
            ]),
            ("/data/claude".into(), "/data/pi".into())
        );
        // A relative folder would be read from wherever the command runs.
        assert_eq!(
            load(&[("CLAUDE_CONFIG_DIR", "rel"), ("PI_CODING_AGENT_DIR", "")]),
            ("/home/u/.claude".into(), "/home/u/.pi/agent".into())
        );
    }
}
