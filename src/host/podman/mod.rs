//! Talking to podman: one function per verb (after
//! toolbox's `podman.go`), state read with `--format json` into typed
//! structs, and every call an explicit argument list through the runner.

pub mod argv;
pub mod cni;
pub(crate) use crate::cage::envfile;
#[cfg(test)]
pub mod fake;
pub mod inspect;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{After, Cause, Error, Kind, Result};
use crate::host::process::{Captured, Process};

/// Calls that should answer quickly get this long before they are called hung.
pub(crate) const QUICK: Duration = Duration::from_secs(60);
/// The most of `podman top`'s answer read: a cage's processes' command
/// lines, which the cage chooses (16 MiB; a cage running more than that
/// is not idle, and is told so by the error).
const MAX_TOP: usize = 16 << 20;
/// `podman create` and `start` may set up storage and networks.
const SLOW: Duration = Duration::from_secs(300);

/// The waits before trying a failed `podman rm` again (`Podman::rm_force`).
const RM_RETRY_WAITS: [Duration; 3] = [
    Duration::from_millis(300),
    Duration::from_secs(1),
    Duration::from_secs(3),
];

/// Did podman run and fail on its own account (status 125: "the command
/// fails for any other reason", podman-rm(1))?
fn podman_own_failure(e: &Error) -> bool {
    e.exited().is_some_and(|x| x.status == Some(125))
}

/// A podman call as its failure names it: `podman`, its verb (the words
/// before the first option) and the name it acts on (`--name`'s, else the
/// first word after `--`), never the rest of its arguments:
/// `podman container exists shrooms-web-1a2b`.
fn call_of(args: &[String]) -> String {
    let mut words = vec!["podman"];
    words.extend(
        args.iter()
            .take_while(|a| !a.starts_with('-'))
            .map(String::as_str),
    );
    let named = args
        .iter()
        .position(|a| a == "--name")
        .or_else(|| args.iter().position(|a| a == "--"))
        .and_then(|i| args.get(i + 1));
    words.extend(named.map(String::as_str));
    words.join(" ")
}

/// The podman program, ready to be called.
#[derive(Debug, Clone)]
pub struct Podman {
    program: PathBuf,
}

impl Podman {
    pub fn new(program: impl Into<PathBuf>) -> Podman {
        Podman {
            program: program.into(),
        }
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// A podman call labelled by its verb, for `podman <verb>: <reason>`;
    /// when it runs and fails, its error is [`Kind::PodmanFailed`].
    pub fn process(&self, args: &[String]) -> Process {
        let verb = args.first().map(String::as_str).unwrap_or("");
        Process::new(&self.program, format!("podman {verb}"))
            .args(args.iter().cloned())
            .fails_as(Kind::PodmanFailed)
            .call(call_of(args))
    }

    fn run(&self, args: &[String], timeout: Duration) -> Result<Captured> {
        self.process(args).timeout(timeout).run()
    }

    fn strs(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    /// `podman info --format json`, parsed.
    pub fn info(&self) -> Result<inspect::Info> {
        let out = self.run(&Self::strs(&["info", "--format", "json"]), QUICK)?;
        serde_json::from_str(&out.stdout)
            .map_err(|e| Error::act("podman info: unexpected output", &e))
    }

    pub fn create(&self, argv: &[String]) -> Result<()> {
        self.run(argv, SLOW).map(drop)
    }

    /// `podman start`. A start refused because CNI still holds this very
    /// container's address from its last run (see [`cni`]) has that lease
    /// given back and is made once more; should it be refused again, the
    /// error says which lease and what to do.
    pub fn start(&self, container: &str) -> Result<()> {
        self.start_with_leases(container, Path::new(cni::LEASES))
    }

    fn start_with_leases(&self, container: &str, leases: &Path) -> Result<()> {
        let args = argv::start(container);
        let e = match self.run(&args, SLOW) {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        let Some((addr, id)) = e.exited().and_then(|x| cni::own_duplicate(&x.stderr)) else {
            return Err(e);
        };
        let held = |cause| After::CniLease {
            container: container.to_string(),
            addr,
            leases: leases.to_path_buf(),
            cause,
        };
        if let Err(io) = cni::release(leases, addr, &id) {
            return Err(e.then(held(Some(Cause::of(&io)))));
        }
        self.run(&args, SLOW)
            .map(drop)
            .map_err(|again| again.then(held(None)))
    }

    pub fn stop(&self, container: &str) -> Result<()> {
        self.run(&argv::stop(container), SLOW).map(drop)
    }

    /// `podman rm -f --ignore`; a container that is already gone is not an
    /// error (`--ignore`, podman-rm(1)).
    ///
    /// Tried again, after a short wait, when podman itself failed (status
    /// 125, podman-rm(1)): podman 4.3 sometimes fails to unmount a container
    /// it has just stopped ("unlinkat .../userdata/shm: device or resource
    /// busy", containers/podman#11594, fixed in 4.4), and the same removal a
    /// moment later succeeds. Removal is idempotent, so trying again is safe;
    /// a timeout or another status is not tried again.
    pub fn rm_force(&self, container: &str) -> Result<()> {
        let args = argv::rm_force(container);
        let mut waits = RM_RETRY_WAITS.iter();
        loop {
            match self.run(&args, SLOW) {
                Ok(_) => return Ok(()),
                Err(e) if podman_own_failure(&e) => match waits.next() {
                    Some(wait) => std::thread::sleep(*wait),
                    None => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
    }

    /// Is there a container, volume or image of this name? `podman
    /// container|volume|image exists` answers by its exit status alone:
    /// 0 yes, 1 no, anything else is podman's own failure
    /// (podman-container-exists(1) and its siblings).
    fn exists(&self, args: &[String]) -> Result<bool> {
        let process = self.process(args).timeout(QUICK);
        let out = process.capture()?;
        match out.code {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(process.failure(&out)),
        }
    }

    /// Is there an image of this name? (`podman image exists`)
    pub fn image_exists(&self, image: &str) -> Result<bool> {
        self.exists(&argv::image_exists(image))
    }

    /// Is there a container of this name? (`podman container exists`)
    pub fn container_exists(&self, container: &str) -> Result<bool> {
        self.exists(&argv::container_exists(container))
    }

    /// An inspect's output, or None when the thing is not there. The
    /// inspect comes first, so that a thing that is there costs one call;
    /// only when it fails is podman asked whether the thing exists, to tell
    /// "not there" from podman's failure by exit status, never by the words
    /// of its stderr (which change between versions).
    fn inspect_or_absent(&self, inspect: &[String], exists: &[String]) -> Result<Option<String>> {
        let process = self.process(inspect).timeout(QUICK);
        let out = process.capture()?;
        if out.success() {
            return Ok(Some(out.stdout));
        }
        let failed = process.failure(&out);
        match self.exists(exists) {
            Ok(false) => Ok(None),
            // There now: it may have appeared since the inspect (an image
            // whose build just ended), so it is asked once more, and that
            // answer stands.
            Ok(true) => {
                let again = process.capture()?;
                if again.success() {
                    Ok(Some(again.stdout))
                } else {
                    Err(process.failure(&again))
                }
            }
            // podman cannot say: the inspect's failure is the one to report.
            Err(_) => Err(failed),
        }
    }

    /// The state of one container, or None when there is no such container.
    pub fn container(&self, container: &str) -> Result<Option<inspect::ContainerState>> {
        Ok(self.inspect(container)?.map(|c| c.state))
    }

    /// What podman says of one container, or None when there is none.
    pub fn inspect(&self, container: &str) -> Result<Option<inspect::ContainerInspect>> {
        let Some(stdout) = self.inspect_or_absent(
            &argv::inspect_container(container),
            &argv::container_exists(container),
        )?
        else {
            return Ok(None);
        };
        let list: Vec<inspect::ContainerInspect> = serde_json::from_str(&stdout)
            .map_err(|e| Error::act("podman inspect: unexpected output", &e))?;
        Ok(list.into_iter().next())
    }

    /// Remove a folder inside the user namespace (`podman unshare rm -rf`),
    /// for files a rootless cage made under its other uids.
    pub fn unshare_rm(&self, path: &Path) -> Result<()> {
        let args = vec![
            "unshare".to_string(),
            "rm".to_string(),
            "-rf".to_string(),
            "--".to_string(),
            path.to_string_lossy().into_owned(),
        ];
        self.run(&args, SLOW).map(drop)
    }

    /// `podman update` of a container's limits.
    pub fn update(&self, argv: &[String]) -> Result<()> {
        self.run(argv, QUICK).map(drop)
    }

    /// The processes in a running container: `podman top NAME args` prints
    /// a header and one row per process (no JSON; 4.3 and 5.x alike).
    pub fn top_args(&self, container: &str) -> Result<Vec<String>> {
        // The cage chooses its processes' command lines: read within a
        // bound (a cage of 2048 processes of 8 KiB each is 16 MiB).
        let out = self
            .process(&argv::top_args(container))
            .timeout(QUICK)
            .max_output(MAX_TOP)
            .run()?;
        Ok(out
            .stdout
            .lines()
            .skip(1)
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect())
    }

    /// A volume, or None when there is none of that name.
    pub fn volume(&self, name: &str) -> Result<Option<inspect::VolumeInspect>> {
        let Some(stdout) =
            self.inspect_or_absent(&argv::volume_inspect(name), &argv::volume_exists(name))?
        else {
            return Ok(None);
        };
        let list: Vec<inspect::VolumeInspect> = serde_json::from_str(&stdout)
            .map_err(|e| Error::act("podman volume inspect: unexpected output", &e))?;
        Ok(list.into_iter().next())
    }

    /// Make a local volume with a label.
    pub fn volume_create(&self, name: &str, label: &str) -> Result<()> {
        self.run(&argv::volume_create(name, label), QUICK).map(drop)
    }

    /// Every container carrying the session label.
    pub fn ps_cages(&self) -> Result<Vec<inspect::PsEntry>> {
        self.ps_cages_beside(|| ()).0
    }

    /// `ps_cages`, with `beside` run meanwhile (work that does not change
    /// what podman lists).
    pub fn ps_cages_beside<T>(
        &self,
        beside: impl FnOnce() -> T,
    ) -> (Result<Vec<inspect::PsEntry>>, T) {
        let (out, local) = self
            .process(&argv::ps_cages())
            .timeout(QUICK)
            .run_beside(beside);
        (out.and_then(|out| Self::ps_entries(&out.stdout)), local)
    }

    fn ps_entries(stdout: &str) -> Result<Vec<inspect::PsEntry>> {
        let text = stdout.trim();
        if text.is_empty() || text == "null" {
            return Ok(Vec::new());
        }
        serde_json::from_str(text).map_err(|e| Error::act("podman ps: unexpected output", &e))
    }

    /// An image's configuration, or None when it is not on this machine.
    /// A name podman could not even read is the name's fault, told before
    /// podman is asked.
    pub fn image(&self, image: &str) -> Result<Option<inspect::ImageInspect>> {
        if !is_image_reference(image) {
            return Err(Error::input(crate::error::InputProblem::NotImageName {
                image: image.to_string(),
            }));
        }
        let Some(stdout) =
            self.inspect_or_absent(&argv::image_inspect(image), &argv::image_exists(image))?
        else {
            return Ok(None);
        };
        let list: Vec<inspect::ImageInspect> = serde_json::from_str(&stdout)
            .map_err(|e| Error::act("podman image inspect: unexpected output", &e))?;
        Ok(list.into_iter().next())
    }
}

/// Pure: can podman read this as an image reference? The grammar of
/// container image references (the distribution project's
/// `reference/regexp.go`, which podman parses names with): `[DOMAIN/]PATH
/// [:TAG][@DIGEST]`, PATH's parts lowercase letters and digits joined by
/// `.`, `_`, `__` or dashes, at most 255 characters before the tag.
pub fn is_image_reference(reference: &str) -> bool {
    let (rest, digest) = match reference.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (reference, None),
    };
    if let Some(d) = digest
        && !is_digest(d)
    {
        return false;
    }
    // A tag is a `:` after the last `/` (before it, a `:` is a port).
    let (name, tag) = match rest.rfind(':') {
        Some(i) if !rest[i + 1..].contains('/') => (&rest[..i], Some(&rest[i + 1..])),
        _ => (rest, None),
    };
    if let Some(t) = tag {
        let mut chars = t.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !(first_ok && rest_ok && t.len() <= 128) {
            return false;
        }
    }
    if name.is_empty() || name.len() > 255 {
        return false;
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    // The first part is a registry when more follow and it looks like a
    // host: a `.`, a port, `localhost`, or capitals (which a path may not
    // hold).
    if parts.len() > 1 {
        let first = parts[0];
        if first.contains(['.', ':'])
            || first == "localhost"
            || first.chars().any(|c| c.is_ascii_uppercase())
        {
            if !is_domain(first) {
                return false;
            }
            parts.remove(0);
        }
    }
    parts.iter().all(|p| is_path_component(p))
}

/// `[a-z0-9]+` joined by `.`, `_`, `__` or any number of `-`.
fn is_path_component(part: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = part.as_bytes();
    if b.is_empty() || !alnum(b[0] as char) || !alnum(b[b.len() - 1] as char) {
        return false;
    }
    let mut separator = String::new();
    for c in part.chars() {
        if alnum(c) {
            let ok = separator.is_empty()
                || separator == "."
                || separator == "_"
                || separator == "__"
                || separator.chars().all(|s| s == '-');
            if !ok {
                return false;
            }
            separator.clear();
        } else if "._-".contains(c) {
            separator.push(c);
        } else {
            return false;
        }
    }
    true
}

/// A registry host: names of letters, digits and inner dashes joined by
/// dots, or an IPv6 address in brackets, then an optional `:PORT`.
fn is_domain(domain: &str) -> bool {
    let (host, port) = match domain.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => (h, Some(p)),
        _ => (domain, None),
    };
    if let Some(p) = port
        && (p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return false;
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return !inner.is_empty() && inner.chars().all(|c| c.is_ascii_hexdigit() || c == ':');
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        })
}

/// `ALGORITHM:HEX`, the algorithm letters and digits joined by `+._-`, the
/// hex at least 32 digits, and 64 for sha256.
fn is_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let algorithm_ok = algorithm.split(['+', '.', '_', '-']).all(|c| {
        c.starts_with(|x: char| x.is_ascii_alphabetic())
            && c.chars().all(|x| x.is_ascii_alphanumeric())
    });
    let length_ok = match algorithm {
        "sha256" => hex.len() == 64,
        _ => hex.len() >= 32,
    };
    algorithm_ok && length_ok && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::fs::PermissionsExt;

    /// A stand-in for podman: a script written into a folder of its own
    /// that answers by its argv (a `case` on "$*") and records each call,
    /// one argv a line, its words separated by US (0x1f).
    struct Fake {
        dir: PathBuf,
        podman: Podman,
    }

    impl Fake {
        fn new(name: &str, cases: &str) -> Fake {
            let dir = tempfile::Builder::new()
                .prefix(&format!("shrooms-fake-podman-{name}-"))
                .tempdir()
                .unwrap()
                .keep();
            let program = dir.join("podman");
            let script = format!(
                "#!/bin/sh\n\
                 {{ for a in \"$@\"; do printf '%s\\037' \"$a\"; done; echo; }} >> '{}/calls'\n\
                 case \"$*\" in\n{cases}\n*) echo \"Error: unexpected call: $*\" >&2; exit 99 ;;\nesac\n",
                dir.display()
            );
            std::fs::write(&program, script).unwrap();
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
            Fake {
                podman: Podman::new(&program),
                dir,
            }
        }

        fn calls(&self) -> Vec<Vec<String>> {
            std::fs::read_to_string(self.dir.join("calls"))
                .unwrap_or_default()
                .lines()
                .map(|l| {
                    l.split('\u{1f}')
                        .filter(|w| !w.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .collect()
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    /// Whatever podman says on stderr, "not there" is decided by `exists`'
    /// exit status alone.
    const NO_SUCH_WORDS: &str =
        "echo 'Error: no such container, no such volume, image not known' >&2";

    #[test]
    fn a_container_that_is_there_costs_one_inspect() {
        let f = Fake::new(
            "there",
            r#"inspect\ --type\ container\ --format\ json\ --\ c1) echo '[{"State":{"Running":true,"Pid":42}}]' ;;"#,
        );
        let state = f.podman.container("c1").unwrap().expect("there");
        assert!(state.running);
        assert_eq!(
            f.calls(),
            [argv(&[
                "inspect",
                "--type",
                "container",
                "--format",
                "json",
                "--",
                "c1"
            ])]
        );
    }

    #[test]
    fn a_container_is_absent_only_when_exists_says_1() {
        let f = Fake::new(
            "absent",
            "inspect*) echo 'Error: something changed its words' >&2; exit 125 ;;\n\
             container\\ exists\\ --\\ c1) exit 1 ;;",
        );
        assert!(f.podman.container("c1").unwrap().is_none());
        assert_eq!(
            f.calls(),
            [
                argv(&[
                    "inspect",
                    "--type",
                    "container",
                    "--format",
                    "json",
                    "--",
                    "c1"
                ]),
                argv(&["container", "exists", "--", "c1"]),
            ]
        );
    }

    #[test]
    fn a_container_that_is_there_but_fails_to_inspect_is_podmans_failure() {
        // The words "no such" no longer mean absence: exists says it is there.
        let f = Fake::new(
            "failed",
            &format!(
                "inspect*) {NO_SUCH_WORDS}; exit 125 ;;\ncontainer\\ exists\\ --\\ c1) exit 0 ;;"
            ),
        );
        let e = f.podman.container("c1").unwrap_err();
        assert_eq!(e.kind, Kind::PodmanFailed);
        assert_eq!(
            e.message(),
            "podman inspect: Error: no such container, no such volume, image not known"
        );
        let exited = e.exited().expect("its exit is kept");
        assert_eq!(exited.status, Some(125));
        assert!(exited.stderr.contains("image not known"));
        // inspect, exists, and inspect once more.
        assert_eq!(f.calls().len(), 3);
    }

    /// What appears between the inspect and `exists` (an image whose build
    /// just ended) is inspected once more, not reported as a failure.
    #[test]
    fn what_appears_after_a_failed_inspect_is_inspected_again() {
        let scratch = tempfile::tempdir().unwrap();
        let marker = scratch.path().join("seen");
        let f = Fake::new(
            "appears",
            &format!(
                "image\\ inspect*) if [ -e '{m}' ]; then echo '[{{\"Id\":\"abc\"}}]'; \
                 else touch '{m}'; echo 'Error: image not known' >&2; exit 125; fi ;;\n\
                 image\\ exists\\ --\\ img) exit 0 ;;",
                m = marker.display()
            ),
        );
        let image = f.podman.image("img").unwrap().expect("there");
        assert_eq!(image.id, "abc");
        assert_eq!(
            f.calls(),
            [
                argv(&["image", "inspect", "--format", "json", "--", "img"]),
                argv(&["image", "exists", "--", "img"]),
                argv(&["image", "inspect", "--format", "json", "--", "img"]),
            ]
        );
    }

    #[test]
    fn when_exists_fails_too_the_inspect_failure_is_reported() {
        let f = Fake::new(
            "both",
            "inspect*) echo 'Error: storage is locked' >&2; exit 125 ;;\n\
             container\\ exists*) echo 'Error: also broken' >&2; exit 125 ;;",
        );
        let e = f.podman.container("c1").unwrap_err();
        assert_eq!(
            (e.kind, e.message().as_str()),
            (
                Kind::PodmanFailed,
                "podman inspect: Error: storage is locked"
            )
        );
    }

    #[test]
    fn volumes_are_told_absent_by_exists() {
        let f = Fake::new(
            "volume",
            &format!(
                "volume\\ inspect\\ --format\\ json\\ --\\ here) echo '[{{\"Name\":\"here\",\"Driver\":\"local\",\"Mountpoint\":\"/v\"}}]' ;;\n\
                 volume\\ inspect*) {NO_SUCH_WORDS}; exit 125 ;;\n\
                 volume\\ exists\\ --\\ gone) exit 1 ;;\n\
                 volume\\ exists\\ --\\ broken) exit 0 ;;"
            ),
        );
        assert_eq!(
            f.podman.volume("here").unwrap().expect("there").name,
            "here"
        );
        assert_eq!(f.calls().len(), 1, "no exists call when it is there");
        assert!(f.podman.volume("gone").unwrap().is_none());
        let e = f.podman.volume("broken").unwrap_err();
        assert_eq!(e.kind, Kind::PodmanFailed);
        assert_eq!(
            f.calls()[1..],
            [
                argv(&["volume", "inspect", "--format", "json", "--", "gone"]),
                argv(&["volume", "exists", "--", "gone"]),
                argv(&["volume", "inspect", "--format", "json", "--", "broken"]),
                argv(&["volume", "exists", "--", "broken"]),
                argv(&["volume", "inspect", "--format", "json", "--", "broken"]),
            ]
        );
    }

    #[test]
    fn images_are_told_absent_by_exists() {
        let f = Fake::new(
            "image",
            &format!(
                "image\\ inspect*) {NO_SUCH_WORDS}; exit 125 ;;\n\
                 image\\ exists\\ --\\ localhost/gone:1) exit 1 ;;\n\
                 image\\ exists\\ --\\ localhost/broken:1) exit 0 ;;\n\
                 image\\ exists*) exit 125 ;;"
            ),
        );
        assert!(f.podman.image("localhost/gone:1").unwrap().is_none());
        let e = f.podman.image("localhost/broken:1").unwrap_err();
        assert_eq!(e.kind, Kind::PodmanFailed);
        let e = f.podman.image("localhost/other:1").unwrap_err();
        assert_eq!(e.kind, Kind::PodmanFailed, "exists failing is no answer");
        assert_eq!(
            f.calls()[..2],
            [
                argv(&[
                    "image",
                    "inspect",
                    "--format",
                    "json",
                    "--",
                    "localhost/gone:1"
                ]),
                argv(&["image", "exists", "--", "localhost/gone:1"]),
            ]
        );
    }

    /// A name podman cannot read is bad input, told without asking podman.
    #[test]
    fn a_malformed_image_name_is_bad_input_and_calls_nothing() {
        let f = Fake::new("malformed", "");
        for bad in ["BAD name", "UPPER", "a//b", "-x", "x:", "x@sha256:12", ""] {
            let e = f.podman.image(bad).unwrap_err();
            assert_eq!(e.kind, Kind::BadInput, "{bad:?}");
            assert!(
                e.message().contains("is not an image name"),
                "{}",
                e.message()
            );
        }
        assert!(f.calls().is_empty());
    }

    #[test]
    fn podman_failures_keep_their_kind_status_and_stderr() {
        let f = Fake::new(
            "rm",
            "rm\\ -f\\ --ignore\\ --\\ c1) echo 'Error: busy' >&2; exit 2 ;;\n\
             stop*) exit 125 ;;",
        );
        let e = f.podman.rm_force("c1").unwrap_err();
        assert_eq!(
            (e.kind, e.message().as_str()),
            (Kind::PodmanFailed, "podman rm: Error: busy")
        );
        assert_eq!(e.exited().unwrap().status, Some(2));
        assert_eq!(
            e.podman(),
            Some(crate::error::PodmanCall {
                call: "podman rm c1".into(),
                status: Some(2)
            })
        );
        let e = f.podman.stop("c1").unwrap_err();
        assert_eq!(
            (e.kind, e.message().as_str()),
            (Kind::PodmanFailed, "podman stop: exited with status 125")
        );
        assert_eq!(e.podman().unwrap().call, "podman stop c1");
    }

    /// podman 4.3's "device or resource busy" on the first removal
    /// (containers/podman#11594): the removal is tried again and succeeds;
    /// a failure that lasts is told after the last try.
    #[test]
    fn a_removal_podman_fails_once_is_tried_again() {
        let f = Fake::new(
            "rm-busy",
            "rm\\ -f\\ --ignore\\ --\\ c1) if [ -e \"$0.once\" ]; then exit 0; fi; : >\"$0.once\"; \
             echo 'Error: unlinkat /x/userdata/shm: device or resource busy' >&2; exit 125 ;;\n\
             rm\\ -f\\ --ignore\\ --\\ c2) echo 'Error: stuck' >&2; exit 125 ;;",
        );
        f.podman.rm_force("c1").unwrap();
        assert_eq!(f.calls().len(), 2);
        let e = f.podman.rm_force("c2").unwrap_err();
        assert_eq!(e.message(), "podman rm: Error: stuck");
        assert_eq!(f.calls().len(), 2 + 1 + RM_RETRY_WAITS.len());
    }

    /// Each of these was checked against podman 4.3.1's `image exists`:
    /// 1 (no such image) for the good, 125 (cannot read the name) for the
    /// bad.
    #[test]
    fn image_references() {
        for good in [
            "debian",
            "localhost/shrooms-workbench:latest",
            "docker.io/library/node:22-bookworm",
            "registry.example:5000/a/b_c__d---e.f:v1.2_3",
            "Registry.Example/x",
            "localhost:5000/x",
            "x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "x:1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(is_image_reference(good), "{good}");
        }
        for bad in [
            "",
            "UPPER",
            "Foo",
            "a b",
            "a//b",
            "/a",
            "a/",
            "-a",
            "a-",
            "a..b",
            "a___b",
            "x:",
            "x:-1",
            "x:a b",
            "x@sha256:short",
            "x:1@sha256:0123456789abcdef0123456789abcdef",
            "x@sha256",
            "x@",
            "host:port/x",
            &"a".repeat(256),
            &format!("x:{}", "t".repeat(129)),
        ] {
            assert!(!is_image_reference(bad), "{bad}");
        }
    }

    /// A failed call names its verb and what it acted on, never the rest
    /// of its arguments (a create's mounts and environment file).
    #[test]
    fn a_call_is_named_by_its_verb_and_its_subject() {
        let call = |a: &[&str]| call_of(&argv(a));
        assert_eq!(
            call(&["container", "exists", "--", "c1"]),
            "podman container exists c1"
        );
        assert_eq!(call(&["info", "--format", "json"]), "podman info");
        assert_eq!(
            call(&[
                "create",
                "--name",
                "c1",
                "--env-file",
                "/s/env",
                "--",
                "img",
                "sh"
            ]),
            "podman create c1"
        );
        assert_eq!(
            call(&[
                "exec",
                "-i",
                "--env-file",
                "/s/env",
                "--",
                "c1",
                "claude",
                "-p"
            ]),
            "podman exec c1"
        );
        assert_eq!(
            call(&["unshare", "rm", "-rf", "--", "/x/y"]),
            "podman unshare rm /x/y"
        );
    }

    /// A start refused for the container's own CNI lease, left from its
    /// last run: the lease is given back, then the start made once more,
    /// and it succeeds. The fake refuses as podman 4.3.1 does for as long
    /// as the lease file is there.
    #[test]
    fn a_start_refused_for_its_own_left_lease_gives_it_back_and_starts() {
        const ID: &str = "83ee6418fe3156823894f4a74dee5f78829035eaf69310919824399262aa786f";
        let scratch = tempfile::tempdir().unwrap();
        let leases = scratch.path().to_path_buf();
        std::fs::create_dir_all(leases.join("podman")).unwrap();
        std::fs::write(leases.join("podman/lock"), "").unwrap();
        let lease = leases.join("podman/10.88.0.9");
        let refuse = |holder: &str| {
            format!(
                "\"start -- c1\") [ -e '{}' ] || exit 0; echo 'Error: unable to start container \
                 \"{ID}\": plugin type=\"bridge\" failed (add): cni plugin bridge failed: failed \
                 to allocate for range 0: 10.88.0.9 has been allocated to {holder}, duplicate \
                 allocation is not allowed' >&2; exit 125 ;;",
                lease.display()
            )
        };
        let f = Fake::new("lease", &refuse(ID));
        std::fs::write(&lease, format!("{ID}\r\neth0")).unwrap();
        f.podman.start_with_leases("c1", &leases).unwrap();
        assert!(!lease.exists());
        assert_eq!(
            f.calls(),
            [argv(&["start", "--", "c1"]), argv(&["start", "--", "c1"])]
        );

        // Another container's lease is not ours to give back: one call,
        // podman's error as it was.
        let other = ID.replace('8', "9");
        let f = Fake::new("lease-other", &refuse(&other));
        std::fs::write(&lease, format!("{other}\r\neth0")).unwrap();
        let e = f.podman.start_with_leases("c1", &leases).unwrap_err();
        assert!(
            e.message().contains("duplicate allocation"),
            "{}",
            e.message()
        );
        assert!(lease.exists());
        assert_eq!(f.calls(), [argv(&["start", "--", "c1"])]);

        // Refused again after the lease was given back: said, with what
        // to do.
        let f = Fake::new(
            "lease-again",
            &format!(
                "\"start -- c1\") echo 'Error: unable to start container \"{ID}\": failed to \
                 allocate for range 0: 10.88.0.9 has been allocated to {ID}, duplicate \
                 allocation is not allowed' >&2; exit 125 ;;"
            ),
        );
        let e = f.podman.start_with_leases("c1", &leases).unwrap_err();
        assert_eq!(e.kind, Kind::PodmanFailed);
        assert!(
            e.message().contains("its lease was given back"),
            "{}",
            e.message()
        );
        assert!(e.message().contains("netavark"), "{}", e.message());
        assert_eq!(f.calls().len(), 2);
        std::fs::remove_dir_all(&leases).unwrap();
    }
}
