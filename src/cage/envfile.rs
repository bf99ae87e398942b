//! The env file handed to `podman exec --env-file`: the only way a value
//! reaches a cage, so that no value ever stands on a command line (seen in
//! `ps`: gptme #1789, wandb #12390).
//!
//! podman's parser (`pkg/env/env.go`, the same in 4.3 and 5.x) splits each
//! line at the first `=`, keeps the value verbatim (quotes and spaces too),
//! treats `#` as a comment only at the start of a line, copies podman's OWN
//! environment in for a bare `KEY` or `KEY*` line, and fails the whole run on
//! a line over 64 KiB. So every line written here is `NAME=value` with a
//! checked name and a single-line value under that size.

/// podman refuses a line longer than this (bufio's default token size).
pub const MAX_LINE: usize = 64 * 1024 - 1;

/// A variable name podman and shells both take: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Why a variable cannot be written to an env file, if it cannot.
pub fn unwritable(name: &str, value: &str) -> Option<&'static str> {
    if !valid_name(name) {
        Some("its name is not of letters, digits and _")
    } else if value.contains(['\n', '\r']) {
        Some("its value has a line break, which podman's env file cannot carry")
    } else if value.contains('\0') {
        Some("its value has a NUL byte")
    } else if name.len() + 1 + value.len() > MAX_LINE {
        Some("it is longer than podman's 64 KiB line limit")
    } else {
        None
    }
}

/// The file's text. Callers filter with `unwritable` first; anything that
/// still does not fit is dropped here rather than written wrongly.
pub fn render(vars: &[(String, String)]) -> String {
    let mut out = String::from("# written by shrooms-agent; mode 0600; do not edit\n");
    for (name, value) in vars {
        if unwritable(name, value).is_none() {
            out.push_str(name);
            out.push('=');
            out.push_str(value);
            out.push('\n');
        }
    }
    out
}

/// Whether a variable's value should be hidden when shown (`--dry-run`):
/// its name says it is a credential, by the same rule `pass_env`'s check
/// uses (`secret_names`), or it is a URL with a password or user in it.
pub fn looks_secret(name: &str, value: &str) -> bool {
    crate::cage::secret_names::is_credential_variable(name)
        || crate::cage::secret_names::has_userinfo(value)
}

/// The same text as `render`, with secret-looking values shown as
/// `<redacted>`: the same variables, those `render` leaves out left out
/// here too (a value that cannot be written is never shown as passing).
pub fn render_redacted(vars: &[(String, String)]) -> String {
    let shown: Vec<(String, String)> = vars
        .iter()
        .filter(|(n, v)| unwritable(n, v).is_none())
        .map(|(n, v)| {
            if looks_secret(n, v) {
                (n.clone(), "<redacted>".to_string())
            } else {
                (n.clone(), v.clone())
            }
        })
        .collect();
    render(&shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn names() {
        assert!(valid_name("A"));
        assert!(valid_name("_x9"));
        assert!(valid_name("LC_ALL"));
        assert!(!valid_name(""));
        assert!(!valid_name("9A"));
        assert!(!valid_name("A-B"));
        assert!(!valid_name("A*"));
        assert!(!valid_name("A=B"));
    }

    #[test]
    fn golden_file() {
        let text = render(&v(&[
            ("HOME", "/home/u"),
            ("LANG", "en_US.UTF-8"),
            ("QUOTED", "\"kept as is\" # not a comment"),
        ]));
        assert_eq!(
            text,
            "# written by shrooms-agent; mode 0600; do not edit\n\
             HOME=/home/u\n\
             LANG=en_US.UTF-8\n\
             QUOTED=\"kept as is\" # not a comment\n"
        );
    }

    #[test]
    fn never_a_bare_name_or_a_multiline_value() {
        let text = render(&v(&[
            ("OK", ""),
            ("BAD", "a\nb"),
            ("BAD2", "a\rb"),
            ("bad-name", "x"),
        ]));
        assert_eq!(
            text,
            "# written by shrooms-agent; mode 0600; do not edit\nOK=\n"
        );
        for line in text.lines().skip(1) {
            assert!(line.contains('='), "bare line {line:?}");
        }
    }

    #[test]
    fn long_values_are_left_out() {
        let long = "x".repeat(MAX_LINE);
        assert!(unwritable("A", &long).is_some());
        assert!(unwritable("A", &"x".repeat(MAX_LINE - 2)).is_none());
    }

    /// Found by the fuzz target `env_file`: a secret-looking value that
    /// cannot be written (a line break) was left out of the file but shown
    /// as `NAME=<redacted>` by `--dry-run`.
    #[test]
    fn what_is_left_out_is_not_shown_redacted() {
        let vars = v(&[("B", "x:y@h\rz"), ("API_KEY", "a\nb"), ("OK", "1")]);
        assert_eq!(render(&vars), render_redacted(&vars));
        assert!(!render_redacted(&vars).contains("B="));
    }

    #[test]
    fn redaction() {
        let text = render_redacted(&v(&[
            ("FOO_API_KEY", "sk-1"),
            ("MY_TOKEN", "t"),
            ("HTTPS_PROXY", "http://u:p@proxy:3128"),
            ("NO_PROXY", "localhost"),
            ("LANG", "C"),
        ]));
        assert!(!text.contains("sk-1"));
        assert!(!text.contains("u:p@"));
        assert!(text.contains("FOO_API_KEY=<redacted>\n"));
        assert!(text.contains("HTTPS_PROXY=<redacted>\n"));
        assert!(text.contains("NO_PROXY=localhost\n"));
        assert!(text.contains("LANG=C\n"));
        // The names pass_env refuses are the names shown redacted.
        for name in [
            "AWS_SECRET_ACCESS_KEY",
            "PGPASSWORD",
            "OPENAI_KEY",
            "STRIPE_SECRET_KEY",
            "DATABASE_URL",
        ] {
            let text = render_redacted(&v(&[(name, "hidden")]));
            assert!(text.contains(&format!("{name}=<redacted>\n")), "{text}");
        }
        let text = render_redacted(&v(&[("GIT_AUTHOR_EMAIL", "me@example.org")]));
        assert!(text.contains("=me@example.org\n"), "{text}");
    }
}
