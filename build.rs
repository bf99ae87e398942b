//! Builds a cage's first process, `init/shrooms-init.rs`, as a program of
//! its own, linked statically (an image may have no C library: a cage of
//! busybox alone), for the program to carry and put in its state folder
//! (`src/cage/tools.rs`). It is compiled by the same rustc, for the same
//! target, without cargo: it needs no crate but std.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "init/shrooms-init.rs";
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let program = out.join("shrooms-init");
    let mut c = Command::new(rustc);
    c.args([
        "--edition",
        "2024",
        "--crate-type",
        "bin",
        "--target",
        &target,
        "-C",
        "opt-level=s",
        "-C",
        "panic=abort",
        "-C",
        "strip=symbols",
        "-C",
        "target-feature=+crt-static",
        "-o",
    ])
    .arg(&program)
    .arg(source);
    // The linker cargo would use for the target, where one is named.
    let key = format!(
        "CARGO_TARGET_{}_LINKER",
        target.to_uppercase().replace(['-', '.'], "_")
    );
    if let Some(linker) = std::env::var_os(&key) {
        c.arg("-C").arg({
            let mut a = std::ffi::OsString::from("linker=");
            a.push(linker);
            a
        });
    }
    // Not the flags of the program's own build (a fuzz build's sanitizer
    // and coverage flags): this program is built alone, as it ships.
    c.env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER");
    let status = c
        .status()
        .unwrap_or_else(|e| panic!("running rustc for {source}: {e}"));
    assert!(
        status.success(),
        "building {source} as a static program failed ({status}): it needs the C library's \
         static archive (Debian: apt install libc6-dev)"
    );
    // Its name in a state folder's tools/ is by its content: hashed here
    // once, not at every command that starts a cage (1.2 MB of sha256).
    let bytes =
        std::fs::read(&program).unwrap_or_else(|e| panic!("reading {}: {e}", program.display()));
    let digest = <sha2::Sha256 as sha2::Digest>::digest(&bytes);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=SHROOMS_INIT_SHA256_PREFIX={hex}");
}
