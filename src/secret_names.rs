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
//! - anywhere in a word: PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL
//!   (`PGPASSWORD`, `GOOGLE_APPLICATION_CREDENTIALS`);
//! - a whole word or a word's end: KEY(S), TOKEN, SECRET(S), PWD, AUTH,
//!   COOKIE(S) (`OPENAI_APIKEY`, `CLAUDE_CODE_OAUTH_TOKEN`, `MYSQL_PWD`).
//!   Not `TOKENS`: a count (`MAX_THINKING_TOKENS`); not a word's start:
//!   `KEYBOARD`, `TOKENIZER`, `SECRETARY`, `AUTHOR` are not credentials;
//! - a whole word only: PASS, PRIVATE, PAT, JWT, BEARER, AUTHORIZATION,
//!   AUTHN, AUTHZ, DSN, WEBHOOK(S) (`DB_PASS`, `SSH_PRIVATE_KEY`,
//!   `GITLAB_PAT`, `SENTRY_DSN`, `SLACK_WEBHOOK_URL`: a webhook's URL is its
//!   secret). Not inside a word: `COMPASS`, `BYPASS`;
//! - two words together that name a URL of a data store, which carries its
//!   password (`DATABASE_URL`, `REDIS_URL`, `MONGODB_URI`) or a connection
//!   string (`AZURE_STORAGE_CONNECTION_STRING`).
//!
//! `PWD` and `OLDPWD` alone are the shell's working folders, not
//! credentials. A name that matches by mistake (`MONKEY_PATCH`) can still
//! be passed, under `pass_secrets`.

/// Found anywhere in a word.
const WITHIN: &[&str] = &["PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL"];

/// A whole word, or the end of one.
const AT_END: &[&str] = &[
    "KEY", "KEYS", "TOKEN", "SECRET", "SECRETS", "PWD", "AUTH", "COOKIE", "COOKIES",
];

/// A whole word only.
const WHOLE: &[&str] = &[
    "PASS",
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

/// Where a URL's user information is, if it has any: the byte range of
/// `user[:password]@` in the authority (after `scheme://`, or from the start
/// when there is no scheme, as curl reads `user:pw@proxy:3128`), up to the
/// last `@` before the path.
fn userinfo_range(value: &str) -> Option<std::ops::Range<usize>> {
    let scheme = value.find("://");
    let start = scheme.map_or(0, |i| i + 3);
    let rest = &value[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..end].rfind('@')?;
    // Without a scheme, only `user:password@`: `me@example.org` is an address.
    if scheme.is_none() && !rest[..at].contains(':') {
        return None;
    }
    Some(start..start + at + 1)
}

/// Does the value hold a URL with user information (`user:password@`)?
pub fn has_userinfo(value: &str) -> bool {
    userinfo_range(value).is_some()
}

/// The value without its URL's user information, user and password both
/// (`http://u:p@proxy:3128` -> `http://proxy:3128`): a proxy's or a
/// service's user name can be a token itself (`https://TOKEN@host`).
pub fn without_userinfo(value: &str) -> String {
    match userinfo_range(value) {
        Some(r) => format!("{}{}", &value[..r.start], &value[r.end..]),
        None => value.to_string(),
    }
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
    fn the_harness_settings_passed_by_design_are_not_credentials() {
        use crate::harness::Harness;
        for h in [Harness::Claude, Harness::Pi] {
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
        ];
        for (given, want) in cases {
            assert_eq!(without_userinfo(given), want, "{given}");
            assert_eq!(has_userinfo(given), given != want, "{given}");
        }
    }
}
