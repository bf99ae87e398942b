//! `man`: the man page on stdout, or every page written to a folder.

use std::path::Path;
use std::process::ExitCode;

use crate::error::{Doing, Error, Result};
use crate::face::{manual, output};

pub fn run(dir: Option<&Path>) -> Result<ExitCode> {
    let Some(dir) = dir else {
        output::raw(&manual::top()?);
        return Ok(ExitCode::SUCCESS);
    };
    // As `install -D` would: the folder is made when it is not there.
    std::fs::create_dir_all(dir).map_err(|e| Error::act(Doing::Make(dir.to_path_buf()), &e))?;
    for page in manual::pages()? {
        let path = dir.join(&page.file);
        std::fs::write(&path, &page.text)
            .map_err(|e| Error::act(Doing::Write(path.to_path_buf()), &e))?;
    }
    Ok(ExitCode::SUCCESS)
}
