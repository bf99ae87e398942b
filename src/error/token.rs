//! A token file refused: a `serve` token (`serve --token-file`, a machine's
//! `token_file`) or the machine's sealed token, and why.

use std::path::Path;

/// What is wrong with a token file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenProblem {
    /// A `serve` token's file others can read or change (its permission
    /// bits).
    ServeOpen { mode: u32 },
    /// A `serve` token's file with no token on its first line.
    ServeEmpty,
    /// No sealed token at its path.
    SealedMissing,
    /// The sealed token's file others can read or change.
    SealedOpen { mode: u32 },
    /// The sealed token's file, empty.
    SealedEmpty,
    /// The sealed token's file with more than the one line of a token.
    SealedLines,
}

/// Pure: how the sealed token is made and put in its file.
fn how_sealed(file: &Path) -> String {
    format!(
        "make it once with `claude setup-token`, then paste the token it prints into `install -m \
         600 /dev/stdin {}` and press Ctrl-D",
        file.display()
    )
}

impl TokenProblem {
    pub(super) fn words(&self, file: &Path) -> String {
        let f = file.display();
        match self {
            TokenProblem::ServeOpen { mode } => format!(
                "{f}: the file is open to others (mode {mode:03o}); a token must be its owner's \
                 only: chmod 600 {f}"
            ),
            TokenProblem::ServeEmpty => format!(
                "{f}: the file is empty (the token is its first line); put a long random token \
                 in it"
            ),
            TokenProblem::SealedMissing => {
                format!("there is no sealed token at {f}: {}", how_sealed(file))
            }
            TokenProblem::SealedOpen { mode } => format!(
                "the sealed token {f} can be read or changed by others (mode {mode:04o}): `chmod \
                 600 {f}`"
            ),
            TokenProblem::SealedEmpty => {
                format!("the sealed token {f} is empty: {}", how_sealed(file))
            }
            TokenProblem::SealedLines => format!(
                "the sealed token {f} has more than one line: it should hold the one token \
                 `claude setup-token` printed"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each refusal in the words it had when it was made as a sentence
    /// where it was found.
    #[test]
    fn every_token_refusal_is_worded_as_before() {
        let f = Path::new("/t/token");
        let w = |p| Error::token(f, p).message();
        assert_eq!(
            w(TokenProblem::ServeOpen { mode: 0o644 }),
            "/t/token: the file is open to others (mode 644); a token must be its owner's only: \
             chmod 600 /t/token"
        );
        assert_eq!(
            w(TokenProblem::SealedOpen { mode: 0o644 }),
            "the sealed token /t/token can be read or changed by others (mode 0644): `chmod 600 \
             /t/token`"
        );
        assert_eq!(
            w(TokenProblem::SealedMissing),
            "there is no sealed token at /t/token: make it once with `claude setup-token`, then \
             paste the token it prints into `install -m 600 /dev/stdin /t/token` and press Ctrl-D"
        );
        assert_eq!(
            Error::token(f, TokenProblem::SealedLines).kind.exit_code(),
            2
        );
    }
}
