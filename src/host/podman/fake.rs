//! A recording stand-in for podman, for unit tests of the operations'
//! decisions (after cargo's test support, which builds small programs that
//! record how they were called). It is a real program, a shell script
//! written into a folder of its own, so the calls go through the very path
//! of real ones (`Podman`, the runner: the argv, the exit status, stderr,
//! the kind of a failure). It answers from a script of rules, argv pattern
//! to stdout, stderr and exit status, the first that matches winning, and
//! records every argv it is called with. A call no rule answers fails with
//! status 99, and shows in the recorded calls.
//!
//! Faults are injected by the call's number (1 is the first recorded):
//! [`FakePodman::fail_call`] makes that call fail as podman fails (status
//! 125), and [`FakePodman::crash_after`] has it answer as usual and then
//! the tool "die": the runner panics with [`Crash`] right after the call
//! returns ([`crash_point`]), so that nothing after it runs, as after a
//! SIGKILL; the test catches the panic. (Destructors run on the way out,
//! which a SIGKILL would not run; the only ones on these paths close files,
//! which the kernel does for a killed process too: a lock is let go.)

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::Podman;

/// Word separator of the recorded calls (ASCII unit separator).
const US: char = '\u{1f}';

struct Rule {
    words: Vec<String>,
    /// Matches any argv that begins with `words`.
    prefix: bool,
    stdout: String,
    stderr: String,
    status: i32,
}

/// What a rule answers.
pub struct Answer {
    stdout: String,
    stderr: String,
    status: i32,
}

impl Answer {
    /// Success, printing `stdout`.
    pub fn out(stdout: impl Into<String>) -> Answer {
        Answer {
            stdout: stdout.into(),
            stderr: String::new(),
            status: 0,
        }
    }
    /// Success, printing nothing.
    pub fn ok() -> Answer {
        Answer::out("")
    }
    /// Failure with this status and stderr.
    pub fn fail(status: i32, stderr: impl Into<String>) -> Answer {
        Answer {
            stdout: String::new(),
            stderr: stderr.into(),
            status,
        }
    }
}

pub struct FakePodman {
    dir: PathBuf,
    rules: Vec<Rule>,
}

impl FakePodman {
    /// A fake in a new folder under `parent`.
    pub fn new(parent: &Path) -> FakePodman {
        let dir = parent.join("fake-podman");
        std::fs::create_dir_all(&dir).unwrap();
        FakePodman {
            dir,
            rules: Vec::new(),
        }
    }

    /// Answer exactly this argv.
    pub fn on(mut self, argv: &[&str], answer: Answer) -> FakePodman {
        self.push(argv, false, answer);
        self
    }

    /// Answer every argv that begins with these words.
    pub fn on_prefix(mut self, argv: &[&str], answer: Answer) -> FakePodman {
        self.push(argv, true, answer);
        self
    }

    fn push(&mut self, argv: &[&str], prefix: bool, a: Answer) {
        self.rules.push(Rule {
            words: argv.iter().map(|w| w.to_string()).collect(),
            prefix,
            stdout: a.stdout,
            stderr: a.stderr,
            status: a.status,
        });
    }

    /// Write the program; the `Podman` that calls it.
    pub fn podman(&self) -> Podman {
        let quote = |w: &str| crate::host::process::shell_quote(w).unwrap().into_owned();
        let calls = quote(&self.dir.join("calls").to_string_lossy());
        let fail_at = quote(&self.dir.join("fail-at").to_string_lossy());
        let crash_at = quote(&self.dir.join("crash-at").to_string_lossy());
        let crashed = quote(&self.dir.join(CRASHED).to_string_lossy());
        let mut cases = String::new();
        for (i, r) in self.rules.iter().enumerate() {
            let out = self.dir.join(format!("out-{i}"));
            let err = self.dir.join(format!("err-{i}"));
            std::fs::write(&out, &r.stdout).unwrap();
            std::fs::write(&err, &r.stderr).unwrap();
            let mut pattern: String = r
                .words
                .iter()
                .map(|w| format!("{}{US}", quote(w)))
                .collect();
            if r.prefix {
                pattern.push('*');
            }
            if pattern.is_empty() {
                pattern = "''".into();
            }
            cases.push_str(&format!(
                "{pattern}) cat {}; cat {} >&2; st={} ;;\n",
                quote(&out.to_string_lossy()),
                quote(&err.to_string_lossy()),
                r.status
            ));
        }
        let program = self.dir.join("podman");
        let script = format!(
            "#!/bin/sh\n\
             key=''\n\
             for a in \"$@\"; do key=\"$key$a{US}\"; done\n\
             printf '%s\\n' \"$key\" >> {calls}\n\
             n=$(wc -l < {calls})\n\
             if [ \"$n\" = \"$(cat {fail_at} 2>/dev/null)\" ]; then\n\
             echo 'Error: a failure injected by the test' >&2; exit 125\n\
             fi\n\
             st=0\n\
             case \"$key\" in\n{cases}\
             *) echo \"Error: the fake podman has no answer for: $*\" >&2; st=99 ;;\n\
             esac\n\
             if [ \"$n\" = \"$(cat {crash_at} 2>/dev/null)\" ]; then : > {crashed}; fi\n\
             exit $st\n"
        );
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        Podman::new(program)
    }

    /// Every argv it was called with, in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.dir.join("calls"))
            .unwrap_or_default()
            .lines()
            .map(|l| match l.strip_suffix(US) {
                Some(words) => words.split(US).map(str::to_string).collect(),
                None => Vec::new(),
            })
            .collect()
    }

    /// Forget the calls so far (after a test's setup), and any fault.
    pub fn clear(&self) {
        for f in ["calls", "fail-at", "crash-at", CRASHED] {
            let _ = std::fs::remove_file(self.dir.join(f));
        }
    }

    /// Make the `n`th call from now (1: the next) fail, once.
    pub fn fail_call(&self, n: usize) {
        std::fs::write(self.dir.join("fail-at"), format!("{}\n", self.count() + n)).unwrap();
    }

    /// Have the tool die right after the `n`th call from now.
    pub fn crash_after(&self, n: usize) {
        std::fs::write(self.dir.join("crash-at"), format!("{}\n", self.count() + n)).unwrap();
    }

    /// Calls recorded so far.
    pub fn count(&self) -> usize {
        self.calls().len()
    }
}

pub use crate::host::process::crash::{CRASHED, until_crash};
