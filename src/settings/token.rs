//! A `serve` token file, read the same way at both ends: by `serve
//! --token-file`, which checks the token, and by `outbox send`, which sends
//! it to a machine of `[machines]` (its `token_file`). Read two ways, the
//! same file could hold one token for the receiver and another for the
//! sender (a second line, say), and a file open to others would be refused
//! by one and used by the other.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::error::{Doing, Error, Result, TokenProblem};

/// The token: the file's first line, trimmed. The file must be readable
/// and writable by its owner only, and the line not empty. The errors are
/// bad input and start with the file's path; callers say what file it is.
pub fn read(file: &Path) -> Result<String> {
    let meta = std::fs::metadata(file)
        .map_err(|e| Error::act_on_input(Doing::At(file.to_path_buf()), &e))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::token(file, TokenProblem::ServeOpen { mode }));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| Error::act_on_input(Doing::At(file.to_path_buf()), &e))?;
    let token = text.lines().next().unwrap_or("").trim();
    if token.is_empty() {
        return Err(Error::token(file, TokenProblem::ServeEmpty));
    }
    Ok(token.to_string())
}

/// Read the machine's sealed token (docs/sealed.md, "Sealed cages"): it must
/// exist, be non-empty and be readable only by its owner.
pub fn read_sealed(path: &Path) -> Result<String> {
    let refused = |problem| Error::token(path, problem);
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refused(TokenProblem::SealedMissing));
        }
        Err(e) => {
            return Err(Error::act_on_input(
                Doing::SealedToken(path.to_path_buf()),
                &e,
            ));
        }
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o066 != 0 {
        return Err(refused(TokenProblem::SealedOpen { mode }));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::act_on_input(Doing::SealedToken(path.to_path_buf()), &e))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(refused(TokenProblem::SealedEmpty));
    }
    if token.contains(['\n', '\r']) {
        return Err(refused(TokenProblem::SealedLines));
    }
    Ok(token.to_string())
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A token file in a folder of its own, with this mode.
    pub fn token_file(name: &str, text: &str, mode: u32) -> PathBuf {
        let dir = tempfile::Builder::new()
            .prefix(&format!("shrooms-token-{name}-"))
            .tempdir()
            .unwrap()
            .keep();
        let f = dir.join("token");
        std::fs::write(&f, text).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        f
    }

    fn clean(f: &Path) {
        let _ = std::fs::remove_dir_all(f.parent().unwrap());
    }

    #[test]
    fn token_files_must_be_private_and_not_empty() {
        let f = token_file("ok", "s3cret\nignored\n", 0o600);
        assert_eq!(read(&f).unwrap(), "s3cret");
        clean(&f);
        let f = token_file("owner-read-only", "  s3cret  \n", 0o400);
        assert_eq!(read(&f).unwrap(), "s3cret");
        clean(&f);
        for (name, mode) in [
            ("group-read", 0o640),
            ("others-read", 0o604),
            ("group-write", 0o620),
            ("all", 0o666),
        ] {
            let f = token_file(name, "s3cret\n", mode);
            let e = read(&f).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput, "{name}");
            assert_eq!(e.kind.exit_code(), 2);
            assert!(
                e.message().starts_with(&f.display().to_string())
                    && e.message().contains("open to others")
                    && e.message().contains(&format!("chmod 600 {}", f.display())),
                "{name}: {}",
                e.message()
            );
            clean(&f);
        }
        for (name, text) in [
            ("empty", ""),
            ("blank", "  \n\n"),
            ("blank-first", "\ns3cret\n"),
        ] {
            let f = token_file(name, text, 0o600);
            let e = read(&f).unwrap_err();
            assert_eq!(e.kind.exit_code(), 2, "{name}");
            assert!(
                e.message().contains(&f.display().to_string()) && e.message().contains("empty"),
                "{name}: {}",
                e.message()
            );
            clean(&f);
        }
        let scratch = tempfile::tempdir().unwrap();
        let missing = scratch.path().join("nothing-here");
        assert_eq!(read(&missing).unwrap_err().kind.exit_code(), 2);
    }
}
