//! The program's sources, for the tests that read them (`layers.rs`, `errors.rs`,
//! `unsafe_code.rs`).

use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`.
pub fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The text before a file's test module.
#[allow(dead_code)] // not every test that reads the sources leaves the tests out
pub fn before_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    }
}
