//! The one rule for "does this name say it holds a credential?": used by
//! `pass_env`'s check (a name it matches must be listed under
//! `pass_secrets`), by `--dry-run`'s redaction of the env file, and by the
//! copies of a harness's settings files, whose credential keys stay out of a
//! cage (`cage_files`). And what is taken out of a URL before it may reach a
//! cage: its user information.
//!
//! A name is cut into words at every character that is not a letter or a
//! digit and where camelCase changes case (`AWS_SECRET_ACCESS_KEY`,
//! `apiKeyHelper`, `X-Api-Key`), and each word is matched, upper-cased:
//! - anywhere in a word: PASSWORD, PASSWD, PASSPHRASE, PASSCODE,
//!   CREDENTIAL, KEYFILE, KEYSTORE, KEYTAB (`PGPASSWORD`,
//!   `GOOGLE_APPLICATION_CREDENTIALS`, `GOOGLE_CLOUD_KEYFILE_JSON`,
//!   `KEYSTORE_BASE64`: a key store's contents, or where they are);
//! - a whole word or a word's end: KEY(S), TOKEN, SECRET(S), PWD, AUTH,
//!   COOKIE(S) (`OPENAI_APIKEY`, `CLAUDE_CODE_OAUTH_TOKEN`, `MYSQL_PWD`).
//!   Not `TOKENS`: a count (`MAX_THINKING_TOKENS`); not a word's start:
//!   `KEYBOARD`, `TOKENIZER`, `SECRETARY`, `AUTHOR` are not credentials;
//! - a whole word only: PASS, SSHPASS, PW, PRIVATE, PAT, JWT, BEARER,
//!   AUTHORIZATION, AUTHN, AUTHZ, DSN, WEBHOOK(S), OTP, TOTP, MNEMONIC, and
//!   the names of private key files, RSA, DSA, ECDSA, ED25519 (`DB_PASS`,
//!   `SSHPASS`, `LDAP_BIND_PW`, `SSH_PRIVATE_KEY`, `GITLAB_PAT`,
//!   `SENTRY_DSN`, `SLACK_WEBHOOK_URL`: a webhook's URL is its secret;
//!   `ID_RSA`: a key's contents). Not inside a word: `COMPASS`, `BYPASS`;
//! - two words together that name a URL of a data store, which carries its
//!   password (`DATABASE_URL`, `REDIS_URL`, `MONGODB_URI`) or a connection
//!   string (`AZURE_STORAGE_CONNECTION_STRING`).
//!
//! A variable's name ([`is_credential_variable`]) is held to more: SESSION
//! and LOGIN as whole words hold a session or a login token there
//! (`BW_SESSION`, `OP_SESSION_<account>`, `SONAR_LOGIN`), but in a settings
//! file's keys they name hooks and options (`SessionStart`,
//! `forceLoginMethod`), so those keys keep them. The desktop's own session
//! variables (`XDG_SESSION_TYPE`, `DBUS_SESSION_BUS_ADDRESS`...) hold none.
//!
//! `PWD` and `OLDPWD` alone are the shell's working folders, not
//! credentials. A name that matches by mistake (`MONKEY_PATCH`) can still
//! be passed, under `pass_secrets`.

/// Found anywhere in a word.
const WITHIN: &[&str] = &[
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "PASSCODE",
    "CREDENTIAL",
    "KEYFILE",
    "KEYSTORE",
    "KEYTAB",
];

/// A whole word, or the end of one.
const AT_END: &[&str] = &[
    "KEY", "KEYS", "TOKEN", "SECRET", "SECRETS", "PWD", "AUTH", "COOKIE", "COOKIES",
];

/// A whole word only.
const WHOLE: &[&str] = &[
    "PASS",
    "SSHPASS",
    "PW",
    "PRIVATE",
    "PAT",
    "JWT",
    "BEARER",
    "AUTHORIZATION",
    "AUTHN",
    "AUTHZ",
    "DSN",
    "WEBHOOK",
    "WEBHOOKS",
    "OTP",
    "TOTP",
    "MNEMONIC",
    "RSA",
    "DSA",
    "ECDSA",
    "ED25519",
];

/// A whole word, in a variable's name only (see the module's words).
const WHOLE_IN_VARIABLES: &[&str] = &["SESSION", "LOGIN"];

/// Variables of the desktop's session, which hold no credential.
const SESSION_VARIABLES: &[&str] = &[
    "XDG_SESSION_ID",
    "XDG_SESSION_TYPE",
    "XDG_SESSION_CLASS",
    "XDG_SESSION_DESKTOP",
    "XDG_SESSION_PATH",
    "DESKTOP_SESSION",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SESSION_BUS_PID",
    "SHROOMS_AGENT_SESSION",
];

/// Data stores whose URL carries the password: `<STORE>_URL`, `<STORE>_URI`.
const STORES: &[&str] = &[
    "DATABASE",
    "DB",
    "REDIS",
    "MONGO",
    "MONGODB",
    "POSTGRES",
    "POSTGRESQL",
    "PG",
    "MYSQL",
    "MARIADB",
    "AMQP",
    "RABBITMQ",
    "BROKER",
];

/// Whole names that match a word above and hold no credential.
const NOT_CREDENTIALS: &[&str] = &["PWD", "OLDPWD"];

/// The words of a name, upper-cased: cut at anything not a letter or a
/// digit, and where camelCase starts a word (`apiKeyHelper`, `PGPassword`).
pub fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in name.split(|c: char| !c.is_ascii_alphanumeric()) {
        let chars: Vec<char> = part.chars().collect();
        let mut word = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let starts = i > 0
                && c.is_ascii_uppercase()
                && (chars[i - 1].is_ascii_lowercase()
                    || chars[i - 1].is_ascii_digit()
                    || (chars[i - 1].is_ascii_uppercase()
                        && chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase())));
            if starts && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            word.push(c.to_ascii_uppercase());
        }
        if !word.is_empty() {
            out.push(word);
        }
    }
    out
}

/// Does this name (of a variable, a JSON key, a header) say that it holds a
/// credential? The module's rule.
pub fn is_credential_name(name: &str) -> bool {
    if NOT_CREDENTIALS.contains(&name.to_ascii_uppercase().as_str()) {
        return false;
    }
    let words = words(name);
    let one = |w: &str| {
        WITHIN.iter().any(|s| w.contains(s))
            || AT_END.iter().any(|s| w.ends_with(s))
            || WHOLE.contains(&w)
    };
    let two = |a: &str, b: &str| {
        (STORES.contains(&a) && matches!(b, "URL" | "URI"))
            || (matches!(a, "CONNECTION" | "CONN") && matches!(b, "STRING" | "STR"))
    };
    words.iter().any(|w| one(w) || w == "CONNECTIONSTRING")
        || words.windows(2).any(|p| two(&p[0], &p[1]))
}

/// Does this name of a variable say that it holds a credential? The
/// module's rule, and SESSION and LOGIN as whole words: what `pass_env`
/// refuses and `--dry-run` hides.
pub fn is_credential_variable(name: &str) -> bool {
    is_credential_name(name)
        || (!SESSION_VARIABLES.contains(&name.to_ascii_uppercase().as_str())
            && words(name)
                .iter()
                .any(|w| WHOLE_IN_VARIABLES.contains(&w.as_str())))
}

/// Where the value's URLs carry user information: the byte range of each
/// `user[:password]@` in an authority. Every URL of the value counts
/// (after each `scheme://`, its authority up to the path, query, fragment,
/// white space or a quote; in it, up to the last `@`), and a value with no
/// URL in it as curl reads a proxy, `user:pw@proxy:3128`, from its start.
/// In order, apart.
fn userinfo_ranges(value: &str) -> Vec<std::ops::Range<usize>> {
    let authority_end = |rest: &str| {
        rest.find(|c: char| matches!(c, '/' | '?' | '#' | '"' | '\'') || c.is_whitespace())
            .unwrap_or(rest.len())
    };
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = value[from..].find("://") {
        let start = from + i + 3;
        let rest = &value[start..];
        let end = authority_end(rest);
        if let Some(at) = rest[..end].rfind('@') {
            out.push(start..start + at + 1);
        }
        from = start;
    }
    if out.is_empty() && !value.contains("://") {
        // Without a scheme, only `user:password@`: `me@example.org` is an
        // address, `git@host:org/repo` a place.
        let end = authority_end(value);
        if let Some(at) = value[..end].rfind('@')
            && value[..at].contains(':')
        {
            out.push(0..at + 1);
        }
    }
    out
}

/// Does the value hold a URL with user information (`user:password@`)?
pub fn has_userinfo(value: &str) -> bool {
    !userinfo_ranges(value).is_empty()
}

/// The value without its URLs' user information, user and password both
/// (`http://u:p@proxy:3128` -> `http://proxy:3128`), every URL of it: a
/// proxy's or a service's user name can be a token itself
/// (`https://TOKEN@host`).
pub fn without_userinfo(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut kept = 0;
    for r in userinfo_ranges(value) {
        out.push_str(&value[kept..r.start]);
        kept = r.end;
    }
    out.push_str(&value[kept..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Credential-looking names, the attack round's and their like: every
    /// one matches. The five first passed `pass_env` before this rule.
    const CREDENTIALS: &[&str] = &[
        "AWS_SECRET_ACCESS_KEY",
        "PGPASSWORD",
        "OPENAI_KEY",
        "STRIPE_SECRET_KEY",
        "DATABASE_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "MYSQL_PWD",
        "OPENAI_APIKEY",
        "GITHUB_PAT",
        "GITLAB_PAT",
        "NPM_TOKEN",
        "NPM_CONFIG__AUTH",
        "DOCKER_AUTH_CONFIG",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SSH_PRIVATE_KEY",
        "TWINE_PASSWORD",
        "CARGO_REGISTRY_TOKEN",
        "HF_TOKEN",
        "VAULT_TOKEN",
        "AZURE_CLIENT_SECRET",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "SLACK_WEBHOOK_URL",
        "SENTRY_DSN",
        "AZURE_STORAGE_CONNECTION_STRING",
        "REDIS_URL",
        "MONGODB_URI",
        "DB_PASS",
        "SMTP_PASSWD",
        "GPG_PASSPHRASE",
        "JWT_SIGNING_KEY",
        "HTTP_AUTHORIZATION",
        "SESSION_COOKIE",
        "X_SECRET",
        "TOKEN",
        // The fourth round's: each passed `pass_env` before it.
        "SSHPASS",
        "LDAP_BIND_PW",
        "DB_PW",
        "ID_RSA",
        "SSH_ID_ED25519",
        "KEYSTORE_BASE64",
        "ANDROID_KEYSTORE",
        "GOOGLE_CLOUD_KEYFILE_JSON",
        "KRB5_KEYTAB",
        "VAULT_OTP",
        "WALLET_MNEMONIC",
        "SMS_PASSCODE",
        // JSON keys and headers, camelCase and dashed
        "apiKeyHelper",
        "awsCredentialExport",
        "bearerToken",
        "clientSecret",
        "PGPassword",
        "X-Api-Key",
        "Authorization",
        "Private-Token",
    ];

    /// Names that say nothing of a credential: none matches.
    const PLAIN: &[&str] = &[
        "LANG",
        "PWD",
        "OLDPWD",
        "TOKENIZER_PATH",
        "TOKENIZERS_PARALLELISM",
        "MY_KEYBOARD",
        "XKB_KEYMAP",
        "SECRETARY",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "MAX_THINKING_TOKENS",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
        "OPENAI_BASE_URL",
        "BYPASS_CACHE",
        "COMPASS_HOME",
        "PASSTHROUGH",
        "DATABASE_NAME",
        "DB_HOST",
        "PGHOST",
        "NODE_ENV",
        "includeCoAuthoredBy",
        "reserveTokens",
        "keybindings",
        "defaultModel",
        "mcpServers",
        "POWER_PROFILE",
        "PWA_MODE",
        "SESSION_NAME",
        "SessionStart",
        "forceLoginMethod",
        "XDG_SESSION_TYPE",
    ];

    /// Variables' names the rule of names does not take, the rule of
    /// variables does: a session's or a login's token.
    const VARIABLES: &[&str] = &[
        "BW_SESSION",
        "OP_SESSION_myaccount",
        "OP_SESSION_MY_TEAM",
        "SONAR_LOGIN",
        "NPM_LOGIN",
        "TF_SESSION",
        "SESSION",
    ];

    /// Variables of no credential, by either rule.
    const PLAIN_VARIABLES: &[&str] = &[
        "XDG_SESSION_ID",
        "XDG_SESSION_TYPE",
        "xdg_session_type",
        "XDG_SESSION_CLASS",
        "XDG_SESSION_DESKTOP",
        "DESKTOP_SESSION",
        "DBUS_SESSION_BUS_ADDRESS",
        "SHROOMS_AGENT_SESSION",
        "LOGNAME",
        "SESSIONS_DIR",
        "TMUX_PANE",
    ];

    #[test]
    fn credential_names_match() {
        for n in CREDENTIALS {
            assert!(is_credential_name(n), "{n} is a credential");
        }
        for n in PLAIN {
            assert!(!is_credential_name(n), "{n} is not a credential");
        }
    }

    #[test]
    fn credential_variables_match() {
        for n in CREDENTIALS.iter().chain(VARIABLES) {
            assert!(is_credential_variable(n), "{n} is a credential");
        }
        for n in VARIABLES {
            assert!(!is_credential_name(n), "{n} as a settings key is not");
        }
        for n in PLAIN_VARIABLES {
            assert!(!is_credential_variable(n), "{n} is not a credential");
        }
    }

    #[test]
    fn the_harness_settings_passed_by_design_are_not_credentials() {
        use crate::cage::harness::Harness;
        for h in Harness::ALL {
            for n in h.settings_env() {
                assert!(!is_credential_name(n), "{n}");
            }
        }
    }

    #[test]
    fn words_of_names() {
        assert_eq!(words("apiKeyHelper"), ["API", "KEY", "HELPER"]);
        assert_eq!(words("PGPassword"), ["PG", "PASSWORD"]);
        assert_eq!(
            words("AWS_SECRET_ACCESS_KEY"),
            ["AWS", "SECRET", "ACCESS", "KEY"]
        );
        assert_eq!(words("NPM_CONFIG__AUTH"), ["NPM", "CONFIG", "AUTH"]);
        assert_eq!(words("X-Api-Key"), ["X", "API", "KEY"]);
        assert_eq!(words("oauth2Token"), ["OAUTH2", "TOKEN"]);
    }

    #[test]
    fn userinfo_goes_user_and_password() {
        let cases = [
            ("http://u:p@proxy:3128", "http://proxy:3128"),
            ("http://u:p@proxy:3128/", "http://proxy:3128/"),
            ("https://tok@host/a@b", "https://host/a@b"),
            ("socks5h://a%40b:p@w@proxy:1080", "socks5h://proxy:1080"),
            ("u:p@proxy:3128", "proxy:3128"),
            ("http://proxy:3128", "http://proxy:3128"),
            ("http://proxy/x?y=a@b", "http://proxy/x?y=a@b"),
            ("me@example.org", "me@example.org"),
            ("", ""),
            // Every URL of a value, not only a proxy's.
            (
                "https://bob:secret@pypi.example/simple",
                "https://pypi.example/simple",
            ),
            (
                "https://a:b@one.example/s https://c:d@two.example/s",
                "https://one.example/s https://two.example/s",
            ),
            ("http://a@h1,http://b@h2", "http://h1,http://h2"),
            (
                "-Dproxy=\"http://u:p@h:1\" -Dx=y",
                "-Dproxy=\"http://h:1\" -Dx=y",
            ),
            ("git+https://tok@git.example", "git+https://git.example"),
            ("https://host:443", "https://host:443"),
            ("git@host:org/repo.git", "git@host:org/repo.git"),
            ("sr_RS:sr@latin", "latin"),
        ];
        for (given, want) in cases {
            assert_eq!(without_userinfo(given), want, "{given}");
            assert_eq!(has_userinfo(given), given != want, "{given}");
        }
    }
}
