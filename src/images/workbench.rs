//! Our two images, the workbench and the desktop (docs/images.md, "Images"):
//! their names, the Containerfile they are built from,
//! the label that says which one, the `podman build` command line, the
//! record a build leaves in the state folder, and the decisions made from
//! what podman and that record say. Pure: `ops::image` does the I/O.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The Containerfile of both images, compiled in.
pub const CONTAINERFILE: &str = include_str!("../../assets/workbench.Containerfile");

/// The label an image of ours carries: the sha256 of the Containerfile text
/// it was built from.
pub const LABEL: &str = "xyz.vpavlin.shrooms.containerfile";

/// Where our images are tagged unless the config's `images_repo` says otherwise.
pub const DEFAULT_REPO: &str = "localhost/shrooms-workbench";

/// One of the Containerfile's two stages, and so one of our two images.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Workbench,
    Desktop,
}

impl Stage {
    pub const ALL: [Stage; 2] = [Stage::Workbench, Stage::Desktop];

    /// The stage's name in the Containerfile (`--target`), and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Workbench => "workbench",
            Stage::Desktop => "desktop",
        }
    }

    /// The tag of its image.
    pub fn tag(self) -> &'static str {
        match self {
            Stage::Workbench => "latest",
            Stage::Desktop => "desktop",
        }
    }

    pub fn parse(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|st| st.name() == s)
    }
}

/// `<repo>:latest` or `<repo>:desktop`.
pub fn image_name(repo: &str, stage: Stage) -> String {
    format!("{repo}:{}", stage.tag())
}

/// Which of ours an image name is, if it is one: the exact name, the repo
/// without a tag (podman reads that as `:latest`), or a short name podman
/// resolves to a local `localhost/` one.
pub fn stage_of(repo: &str, image: &str) -> Option<Stage> {
    let image = image.trim();
    let full = if !image.contains('/') && repo.starts_with("localhost/") {
        format!("localhost/{image}")
    } else {
        image.to_string()
    };
    let full = if has_tag(&full) || full.contains('@') {
        full
    } else {
        format!("{full}:latest")
    };
    Stage::ALL
        .into_iter()
        .find(|st| image_name(repo, *st) == full)
}

/// Does a reference carry a tag (a `:` after its last `/`)?
fn has_tag(reference: &str) -> bool {
    let last = reference.rsplit('/').next().unwrap_or(reference);
    last.contains(':')
}

/// The sha256 of a Containerfile's text, as lowercase hex.
pub fn hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The hash of the embedded Containerfile and its base's recipe: what
/// this binary's images carry.
pub fn embedded_hash() -> String {
    input_hash(CONTAINERFILE)
}

// ---- the base: Debian from the machine's own apt mirror ---------------------

/// The build argument a Containerfile declares (`ARG SHROOMS_BASE`) to be
/// built `FROM` the Debian base made here with mmdebstrap; its value is the
/// base's name. A Containerfile without it is built without a base.
pub const BASE_ARG: &str = "SHROOMS_BASE";

/// The base's Debian release and mmdebstrap variant.
pub const BASE_SUITE: &str = "bookworm";
pub const BASE_VARIANT: &str = "apt";

/// The base's packages, from Debian: the workbench's tools (docs/images.md,
/// "Images"), and Debian's Node.js and npm, which only fetch Node 22, npm
/// and pi from the npm registry in the Containerfile (Debian 12's Node is 18).
pub const BASE_PACKAGES: [&str; 14] = [
    "ca-certificates",
    "git",
    "curl",
    "build-essential",
    "python3",
    "python3-pip",
    "python3-venv",
    "ripgrep",
    "jq",
    "gh",
    "nodejs",
    "npm",
    "procps",
    "less",
];

/// `SOURCE_DATE_EPOCH` for mmdebstrap: fixed, so that the same packages
/// give the same tarball (mmdebstrap(1), "SOURCE_DATE_EPOCH").
pub const BASE_EPOCH: u64 = 1_735_689_600;

/// The label of a base: its key.
pub const BASE_LABEL: &str = "xyz.vpavlin.shrooms.base";
/// The label of a base: its packages, `name=version` each, as `dpkg-query
/// -W` lists them, one space between.
pub const MANIFEST_LABEL: &str = "xyz.vpavlin.shrooms.manifest";

/// Removed from the tree before it is packed: they are the machine's, and
/// a cage is given its own.
const BASE_HOOK: &str = r#"rm -f "$1/etc/resolv.conf" "$1/etc/hostname""#;

/// What the base is made of, apart from the mirror: this binary's recipe.
fn base_recipe() -> String {
    format!(
        "suite={BASE_SUITE}\nvariant={BASE_VARIANT}\npackages={}\nepoch={BASE_EPOCH}\nhook={BASE_HOOK}\n",
        BASE_PACKAGES.join(",")
    )
}

/// The build argument that carries the certificate authorities the
/// machine adds to its own trust, for a Containerfile that declares it.
pub const LOCAL_CA_ARG: &str = "SHROOMS_LOCAL_CA";

/// Does this Containerfile declare `ARG SHROOMS_BASE` (with or without a
/// default)?
pub fn uses_base(text: &str) -> bool {
    declares_arg(text, BASE_ARG)
}

/// Does this Containerfile declare `ARG <name>`?
pub fn declares_arg(text: &str, name: &str) -> bool {
    text.lines().any(|l| {
        let mut words = l.split_whitespace();
        matches!(words.next(), Some(w) if w.eq_ignore_ascii_case("ARG"))
            && words
                .next()
                .is_some_and(|a| a.split('=').next() == Some(name))
    })
}

/// The hash an image built from this text carries: the text's, and, when
/// it is built on the base, the base's recipe's too, so that a binary with
/// another package list builds its images again. The mirror is the
/// machine's, not the recipe's: it names the base (`base_key`), not the
/// image.
pub fn input_hash(text: &str) -> String {
    if uses_base(text) {
        hash(&format!("{text}\n{}", base_recipe()))
    } else {
        hash(text)
    }
}

/// The key of a base: its recipe and the mirror it is made from. The same
/// key is the same base; another one is built beside it.
pub fn base_key(mirror: &str) -> String {
    hash(&format!("{}mirror={mirror}\n", base_recipe()))[..16].to_string()
}

/// `<repo>-base:<key>`.
pub fn base_name(repo: &str, key: &str) -> String {
    format!("{repo}-base:{key}")
}

/// `mmdebstrap` without the program: the base as a tarball at `out`, made
/// in root mode by root and in a user namespace of its own by anyone else
/// (its subordinate ids; mmdebstrap(1), "MODES").
pub fn mmdebstrap_argv(mirror: &str, out: &Path, root: bool) -> Vec<String> {
    vec![
        format!("--mode={}", if root { "root" } else { "unshare" }),
        format!("--variant={BASE_VARIANT}"),
        format!("--include={}", BASE_PACKAGES.join(",")),
        format!("--customize-hook={BASE_HOOK}"),
        BASE_SUITE.into(),
        out.to_string_lossy().into_owned(),
        mirror.into(),
    ]
}

/// `podman import` of the base's tarball, labelled with its key and
/// packages.
pub fn import_argv(tar: &Path, name: &str, key: &str, manifest: &str) -> Vec<String> {
    vec![
        "import".into(),
        "--change".into(),
        r#"CMD ["sleep", "infinity"]"#.into(),
        "--change".into(),
        format!("LABEL {BASE_LABEL}={key}"),
        "--change".into(),
        format!("LABEL {MANIFEST_LABEL}=\"{manifest}\""),
        tar.to_string_lossy().into_owned(),
        name.into(),
    ]
}

/// The packages installed in a tree, from its `var/lib/dpkg/status`:
/// `name=version` each, one space between, sorted by name, as `dpkg-query -W`
/// lists them. Characters other than a version's are dropped, so the list
/// fits in a label's quotes.
pub fn manifest(status: &str) -> String {
    let mut out = Vec::new();
    for stanza in status.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|r| r.strip_prefix(':'))
                    .map(str::trim)
            })
        };
        if field("Status").is_some_and(|s| s.ends_with(" installed"))
            && let (Some(p), Some(v)) = (field("Package"), field("Version"))
        {
            let clean = |s: &str| -> String {
                s.chars()
                    .filter(|c| c.is_ascii_alphanumeric() || ".+-~:_".contains(*c))
                    .collect()
            };
            out.push(format!("{}={}", clean(p), clean(v)));
        }
    }
    out.sort();
    out.join(" ")
}

/// The mirror of this machine's Debian release in its apt sources: the
/// first `URIs:` of a deb822 entry (`/etc/apt/sources.list.d/*.sources`)
/// whose `Suites:` name `codename`, else the first one-line `deb` entry
/// (`sources.list`) for it. Each file is given as its text, in the order
/// apt reads them.
pub fn apt_mirror(codename: &str, deb822: &[String], one_line: &[String]) -> Option<String> {
    for text in deb822 {
        for stanza in text.split("\n\n") {
            let mut uris = None;
            let mut suites = "";
            let mut types = "";
            let mut enabled = true;
            for l in stanza.lines() {
                let l = l.trim();
                if l.starts_with('#') {
                    continue;
                }
                let Some((k, v)) = l.split_once(':') else {
                    continue;
                };
                match k.trim().to_ascii_lowercase().as_str() {
                    "uris" => uris = v.split_whitespace().next(),
                    "suites" => suites = v,
                    "types" => types = v,
                    "enabled" => enabled = !v.trim().eq_ignore_ascii_case("no"),
                    _ => {}
                }
            }
            if enabled
                && types.split_whitespace().any(|t| t == "deb")
                && suites.split_whitespace().any(|s| s == codename)
                && let Some(u) = uris
            {
                return Some(u.to_string());
            }
        }
    }
    for text in one_line {
        for l in text.lines() {
            let mut w = l.split_whitespace().peekable();
            if w.next() != Some("deb") {
                continue;
            }
            if w.peek().is_some_and(|o| o.starts_with('[')) {
                for o in w.by_ref() {
                    if o.ends_with(']') {
                        break;
                    }
                }
            }
            if let (Some(uri), Some(suite)) = (w.next(), w.next())
                && suite == codename
            {
                return Some(uri.to_string());
            }
        }
    }
    None
}

/// `podman build` for one stage, without the program: on
/// the machine's network, the Containerfile on standard input, an empty
/// folder as the context (nothing is COPYed in).
/// `base`: the `SHROOMS_BASE` build argument, for a file built on it;
/// `local_ca`: the `SHROOMS_LOCAL_CA` one (PEM text), for a file that
/// declares it, on a machine that adds authorities of its own.
pub fn build_argv(
    stage: Stage,
    name: &str,
    hash: &str,
    context: &Path,
    base: Option<&str>,
    local_ca: Option<&str>,
) -> Vec<String> {
    let mut argv: Vec<String> = vec!["build".into(), "--network".into(), "host".into()];
    if let Some(base) = base {
        argv.push("--build-arg".into());
        argv.push(format!("{BASE_ARG}={base}"));
    }
    if let Some(pem) = local_ca {
        argv.push("--build-arg".into());
        argv.push(format!("{LOCAL_CA_ARG}={pem}"));
    }
    argv.extend([
        "--target".into(),
        stage.name().into(),
        "--label".into(),
        format!("{LABEL}={hash}"),
        "-t".into(),
        name.into(),
        "-f".into(),
        "-".into(),
        context.to_string_lossy().into_owned(),
    ]);
    argv
}

/// The text given to `podman build`: the Containerfile with `LABEL
/// <LABEL>=<hash>` as the last instruction of each stage. `--label` alone is
/// not enough on podman 4.3: when every step of a single-stage target is
/// in the build cache, the cached image is tagged as it is, with the label
/// of the build that made it, so a Containerfile changed outside the target
/// stage (a comment, the desktop stage) would leave the workbench stale
/// forever. As an instruction, the label is part of the cache key; only
/// that last, empty layer is made again. Lines that continue an
/// instruction (`\`) are never taken for a FROM; heredocs are not read.
pub fn labelled(text: &str, hash: &str) -> String {
    let label = format!("LABEL {LABEL}={hash}\n");
    let mut out = String::with_capacity(text.len() + 4 * label.len());
    let mut stages = 0;
    let mut continued = false;
    for line in text.lines() {
        let t = line.trim();
        let is_from = !continued
            && t.split_whitespace()
                .next()
                .is_some_and(|w| w.eq_ignore_ascii_case("FROM"));
        if is_from {
            if stages > 0 {
                out.push_str(&label);
            }
            stages += 1;
        }
        out.push_str(line);
        out.push('\n');
        // Comments and empty lines inside a continued instruction do not end it.
        if !t.is_empty() && !t.starts_with('#') {
            continued = t.ends_with('\\');
        }
    }
    if stages > 0 {
        out.push_str(&label);
    }
    out
}

/// A step of a build, as `podman build` announces it: `STEP 3/9: RUN
/// apt-get ...`, with `[2/2] ` in front in a build of more than one stage
/// (podman 4.3 and 5 alike; buildah's imagebuildah prints these lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step<'a> {
    /// `[2/2]`: the stage and how many there are, when there are several.
    pub stage: Option<(u32, u32)>,
    /// `3/9`: the step in its stage and how many it has.
    pub n: u32,
    pub of: u32,
    /// What the step does: `RUN apt-get ...`.
    pub what: &'a str,
}

/// `A/B` of two numbers.
fn fraction(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once('/')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
    if !digits(a) || !digits(b) {
        return None;
    }
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The step a line of `podman build`'s output starts, if it starts one.
pub fn step_of(line: &str) -> Option<Step<'_>> {
    let (stage, rest) = match line.strip_prefix('[') {
        Some(r) => {
            let (stage, after) = r.split_once("] ")?;
            (Some(fraction(stage)?), after)
        }
        None => (None, line),
    };
    let rest = rest.strip_prefix("STEP ")?;
    let (n, what) = rest.split_once(':')?;
    let (n, of) = fraction(n)?;
    Some(Step {
        stage,
        n,
        of,
        what: what.trim(),
    })
}

/// Is this line of `podman build`'s output the start of a step? Shown as
/// the progress of a build whose output is not a terminal.
pub fn is_step_line(line: &str) -> bool {
    step_of(line).is_some()
}

/// The config's `images_repo`: an image name without a tag or digest, in
/// the lowercase letters, digits and separators podman takes.
pub fn validate_repo(repo: &str) -> Result<(), String> {
    let example = "like \"localhost/shrooms-workbench\"";
    if repo.trim().is_empty() {
        return Err(format!(
            "is empty: give an image name without a tag, {example}"
        ));
    }
    if repo.contains('@') || has_tag(repo) {
        return Err(format!(
            "{repo:?} has a tag or digest: give the name without one ({example}); \
             the tags are `latest` (workbench) and `desktop`"
        ));
    }
    let parts: Vec<&str> = repo.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        // The first part may be a registry with a port ("host:5000").
        let allowed = |c: char| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || "._-".contains(c)
                || (i == 0 && parts.len() > 1 && c == ':')
        };
        if part.is_empty() || !part.chars().all(allowed) {
            return Err(format!(
                "{repo:?} is not an image name: use lowercase letters, digits, `.`, `_`, `-` \
                 and `/` ({example})"
            ));
        }
    }
    Ok(())
}

/// What the state folder records about one of our images
/// (`images/<stage>.json`), written under its build lock.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BuildRecord {
    /// When the last build started (Unix seconds); cleared when it ends.
    /// Whether a build runs is told by the lock, never by this: a build
    /// whose process died leaves it set.
    pub building_since: Option<u64>,
    /// The hash of the Containerfile being built.
    pub building_hash: Option<String>,
    /// Built from `--containerfile`, not the embedded file.
    pub building_custom: bool,
    /// The process that builds (for a look with `ps`, and the tests).
    pub pid: Option<u32>,
    /// The hash the image was last built from successfully.
    pub built_hash: Option<String>,
    /// ... from `--containerfile`: then that hash, not the embedded file's,
    /// is what the image is compared with (an owner's own variant is never
    /// built over by the embedded one).
    pub built_custom: bool,
    pub built_at: Option<u64>,
    /// The last line of the last build, if it failed; cleared when a build starts.
    pub error: Option<String>,
    pub error_hash: Option<String>,
    /// The key of the base the failed build was made on, if it used one.
    pub error_base: Option<String>,
    pub failed_at: Option<u64>,
}

impl BuildRecord {
    /// A build starts: what it builds, and no error of an earlier one.
    pub fn start(&mut self, hash: &str, custom: bool, now: u64) {
        self.building_since = Some(now);
        self.building_hash = Some(hash.to_string());
        self.building_custom = custom;
        self.pid = None;
        self.error = None;
        self.error_hash = None;
        self.error_base = None;
        self.failed_at = None;
    }

    fn stop(&mut self) {
        self.building_since = None;
        self.building_hash = None;
        self.building_custom = false;
        self.pid = None;
    }

    pub fn succeeded(&mut self, hash: &str, custom: bool, now: u64) {
        self.stop();
        self.built_hash = Some(hash.to_string());
        self.built_custom = custom;
        self.built_at = Some(now);
    }

    pub fn failed(&mut self, hash: &str, base: Option<&str>, line: &str, now: u64) {
        self.stop();
        self.error = Some(line.to_string());
        self.error_hash = Some(hash.to_string());
        self.error_base = base.map(str::to_string);
        self.failed_at = Some(now);
    }

    /// The last build failed with these very inputs (the Containerfile's
    /// hash, the base's key): a build from them would fail the same way,
    /// so none is started for a cage; only `image build` tries again.
    pub fn failed_with(&self, hash: &str, base: Option<&str>) -> Option<&str> {
        match &self.error {
            Some(line)
                if self.error_hash.as_deref() == Some(hash)
                    && self.error_base.as_deref() == base =>
            {
                Some(line)
            }
            _ => None,
        }
    }

    /// The hash our image must carry to be current: the last
    /// `--containerfile` build's, else this binary's embedded file's.
    pub fn wanted_hash(&self, embedded: &str) -> String {
        match (&self.built_hash, self.built_custom) {
            (Some(h), true) => h.clone(),
            _ => embedded.to_string(),
        }
    }
}

/// One image as `image status` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageStatus {
    pub name: String,
    /// The machine's image: the config's `image`.
    pub machine: bool,
    /// Which of ours it is, if it is one.
    pub stage: Option<Stage>,
    pub present: bool,
    /// Ours: its label is the hash it should carry. Not ours: there is
    /// nothing to compare, so it is current when it is present.
    pub current: bool,
    /// Ours: a build of it runs now (its lock is held).
    pub building: bool,
    /// RFC 3339 with the local offset in JSON.
    #[serde(serialize_with = "crate::state::when::ser_rfc3339_opt")]
    pub building_since: Option<u64>,
    /// The last line of its last build, when that failed.
    pub error: Option<String>,
    /// The hash its label carries, and the one it should.
    pub label: Option<String>,
    pub wanted: Option<String>,
}

/// What podman says of an image that is on the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Present {
    pub id: String,
    pub label: Option<String>,
}

/// An image's status from what podman, the lock and the record say.
pub fn derive(
    name: &str,
    machine: bool,
    stage: Option<Stage>,
    image: Option<&Present>,
    building: bool,
    record: &BuildRecord,
    embedded: &str,
) -> ImageStatus {
    let present = image.is_some();
    let label = image.and_then(|i| i.label.clone());
    match stage {
        None => ImageStatus {
            name: name.to_string(),
            machine,
            stage,
            present,
            current: present,
            building: false,
            building_since: None,
            error: None,
            label,
            wanted: None,
        },
        Some(_) => {
            let wanted = record.wanted_hash(embedded);
            ImageStatus {
                name: name.to_string(),
                machine,
                stage,
                present,
                current: present && label.as_deref() == Some(wanted.as_str()),
                building,
                building_since: if building {
                    record.building_since
                } else {
                    None
                },
                error: if building { None } else { record.error.clone() },
                label,
                wanted: Some(wanted),
            }
        }
    }
}

/// What `cage create` does about its image (docs/images.md, "Images").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForCage {
    /// Make the cage from it.
    Use,
    /// Ours, present but stale: build it again in the background, and make
    /// the cage from the old one meanwhile ("The old image serves until the
    /// new one is ready").
    UseAndRebuild,
    /// Ours, missing, a build runs: not ready yet.
    Wait,
    /// Ours, missing, the last build failed with the inputs a build would
    /// have now: say so, and start nothing (until the inputs change or
    /// `image build` is asked for).
    Report(String),
    /// Ours, missing, no build runs: start one; not ready yet.
    Build,
    /// Not ours and missing: never built or pulled.
    Missing,
}

/// `hash` and `base`: the inputs of the build a cage would start (the
/// embedded Containerfile's hash, the base's key on this machine).
pub fn for_cage(
    status: &ImageStatus,
    record: &BuildRecord,
    hash: &str,
    base: Option<&str>,
) -> ForCage {
    match (status.stage, status.present) {
        (None, false) => ForCage::Missing,
        (None, true) => ForCage::Use,
        (Some(_), true) if status.current || status.building => ForCage::Use,
        (Some(_), true) => ForCage::UseAndRebuild,
        (Some(_), false) if status.building => ForCage::Wait,
        (Some(_), false) => match record.failed_with(hash, base) {
            Some(line) => ForCage::Report(line.to_string()),
            None => ForCage::Build,
        },
    }
}

/// A build of `stage` that failed with `line` (`building the workbench
/// image: <its last line>`).
pub fn failure(stage: Stage, line: &str) -> crate::error::BuildFailure {
    crate::error::BuildFailure {
        stage: stage.name(),
        line: line.to_string(),
    }
}

/// podman's own last line of a failed build names only the step ("Error:
/// building at STEP \"RUN ...\": ... exit status 6"); the cause is the
/// step's own last line before it (curl's, npm's). Lines that are podman's
/// progress are not a cause. Only the line a person is shown hangs on these
/// words (podman-build(1) gives no cause as data); that the build failed is
/// its exit status alone.
pub fn may_be_the_cause(line: &str) -> bool {
    !(line.starts_with("STEP ")
        || line.starts_with("--> ")
        || line.starts_with("COMMIT")
        || line.starts_with("Successfully tagged")
        // podman's own warnings ("Using cgroups-v1 which is deprecated")
        || line.starts_with("time=")
        || line.starts_with("WARN")
        || line.contains("level=warning")
        || is_podmans_step_error(line))
}

fn is_podmans_step_error(line: &str) -> bool {
    line.starts_with("Error: building at STEP") || line.starts_with("error building at STEP")
}

/// Pure: did a failed build's last line (`last`) say that podman, looking
/// for a cached step, met an image whose top layer another podman removed
/// between listing the images and looking at one? It is a race in
/// buildah's cache lookup, not a fault of the build: buildah issues #5615
/// and #5674, fixed in buildah 1.43 by passing over such an image, which
/// the podman of Debian 12 (4.3, buildah 1.28) and 5.x before it lack.
pub fn lost_a_cache_race(last: &str) -> bool {
    last.contains("checking if cached image exists from a previous build")
        && last.contains("layer not known")
}

/// The line a failed build is reported with: podman's last line, with the
/// step's own cause in front when podman's names only the step.
pub fn failure_line(cause: &str, last: &str) -> String {
    if is_podmans_step_error(last) && !cause.is_empty() && cause != last {
        format!("{cause} ({last})")
    } else {
        last.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_lookup_that_met_a_removed_image_is_told_from_a_failed_build() {
        let raced = "Error: checking if cached image exists from a previous build: getting top \
                     layer info: layer not known";
        assert!(lost_a_cache_race(raced));
        for other in [
            "Error: building at STEP \"RUN false\": while running runtime: exit status 1",
            "Error: layer not known",
            "Error: checking if cached image exists from a previous build: no space left",
            "",
        ] {
            assert!(!lost_a_cache_race(other), "{other}");
        }
    }

    #[test]
    fn the_cause_of_a_failed_step_comes_first() {
        let step = "Error: building at STEP \"RUN curl x\": while running runtime: exit status 6";
        let lines = [
            "STEP 1/3: FROM base",
            "STEP 2/3: RUN curl x",
            "curl: (6) Could not resolve host: cli.github.com",
            step,
        ];
        let mut cause = String::new();
        for l in lines {
            if may_be_the_cause(l) {
                cause = l.to_string();
            }
        }
        assert_eq!(
            failure_line(&cause, step),
            format!("curl: (6) Could not resolve host: cli.github.com ({step})")
        );
        // A step that says nothing of its own: podman's line alone.
        let mut cause = String::new();
        for l in ["STEP 1/2: FROM base", "STEP 2/2: RUN false", step] {
            if may_be_the_cause(l) {
                cause = l.to_string();
            }
        }
        assert_eq!(failure_line(&cause, step), step);
        assert_eq!(
            failure_line("x", "Error: no such file"),
            "Error: no such file"
        );
        assert!(!may_be_the_cause(
            "time=\"2026-11-29\" level=warning msg=\"Using cgroups-v1 which is deprecated\""
        ));
    }

    const REPO: &str = "localhost/shrooms-workbench";

    #[test]
    fn names_and_which_are_ours() {
        assert_eq!(
            image_name(REPO, Stage::Workbench),
            "localhost/shrooms-workbench:latest"
        );
        assert_eq!(
            image_name(REPO, Stage::Desktop),
            "localhost/shrooms-workbench:desktop"
        );
        for (image, stage) in [
            ("localhost/shrooms-workbench:latest", Some(Stage::Workbench)),
            ("localhost/shrooms-workbench", Some(Stage::Workbench)),
            ("shrooms-workbench:latest", Some(Stage::Workbench)),
            ("shrooms-workbench:desktop", Some(Stage::Desktop)),
            ("localhost/shrooms-workbench:desktop", Some(Stage::Desktop)),
            ("localhost/shrooms-workbench:other", None),
            ("docker.io/library/shrooms-workbench:latest", None),
            ("localhost/shrooms-workbench-x:latest", None),
            ("localhost/mine:1", None),
        ] {
            assert_eq!(stage_of(REPO, image), stage, "{image}");
        }
        assert_eq!(
            stage_of("localhost/shrooms-it-7", "localhost/shrooms-it-7:desktop"),
            Some(Stage::Desktop)
        );
        assert_eq!(
            stage_of("localhost/shrooms-it-7", "localhost/shrooms-workbench"),
            None
        );
    }

    #[test]
    fn the_hash_is_sha256_hex_of_the_text() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(embedded_hash().len(), 64);
        assert_ne!(hash("FROM a\n"), hash("FROM a\n\n"));
    }

    #[test]
    fn the_embedded_containerfile_has_both_stages() {
        assert!(CONTAINERFILE.contains("ARG SHROOMS_BASE\nFROM ${SHROOMS_BASE} AS workbench"));
        assert!(uses_base(CONTAINERFILE));
        // No registry is named: the base is made on the machine.
        assert!(!CONTAINERFILE.contains("docker.io"));
        assert!(CONTAINERFILE.contains("FROM workbench AS desktop"));
        assert!(CONTAINERFILE.contains("ENV APPIMAGE_EXTRACT_AND_RUN=1"));
        assert!(CONTAINERFILE.contains("CMD [\"sleep\", \"infinity\"]"));
        assert!(!CONTAINERFILE.to_lowercase().contains("claude-code"));
    }

    #[test]
    fn build_argv_golden() {
        let argv = build_argv(
            Stage::Desktop,
            "localhost/shrooms-workbench:desktop",
            "abc123",
            Path::new("/state/images/context"),
            Some("localhost/shrooms-workbench-base:0123"),
            Some("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"),
        );
        assert_eq!(
            argv,
            [
                "build",
                "--network",
                "host",
                "--build-arg",
                "SHROOMS_BASE=localhost/shrooms-workbench-base:0123",
                "--build-arg",
                "SHROOMS_LOCAL_CA=-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
                "--target",
                "desktop",
                "--label",
                "xyz.vpavlin.shrooms.containerfile=abc123",
                "-t",
                "localhost/shrooms-workbench:desktop",
                "-f",
                "-",
                "/state/images/context"
            ]
        );
    }

    #[test]
    fn every_stage_ends_with_the_label() {
        let text = "# syntax comment\nARG X=1\nFROM a AS workbench\nRUN echo \\\n  from here\n\
                    from   b AS desktop\nENV A=1";
        assert_eq!(
            labelled(text, "h1"),
            "# syntax comment\nARG X=1\nFROM a AS workbench\nRUN echo \\\n  from here\n\
             LABEL xyz.vpavlin.shrooms.containerfile=h1\n\
             from   b AS desktop\nENV A=1\n\
             LABEL xyz.vpavlin.shrooms.containerfile=h1\n"
        );
        let embedded = labelled(CONTAINERFILE, "h");
        assert_eq!(
            embedded
                .matches("LABEL xyz.vpavlin.shrooms.containerfile=h\n")
                .count(),
            2
        );
        assert!(
            embedded
                .contains("LABEL xyz.vpavlin.shrooms.containerfile=h\nFROM workbench AS desktop\n")
        );
        assert_eq!(labelled("# nothing\n", "h"), "# nothing\n");
    }

    #[test]
    fn step_lines() {
        for yes in [
            "STEP 1/3: FROM localhost/x AS workbench",
            "[1/2] STEP 2/2: RUN echo hi",
            "[2/2] STEP 10/12: ENV A=1",
        ] {
            assert!(is_step_line(yes), "{yes}");
        }
        for no in [
            "--> 006d55b27b3",
            "--> Using cache 53a2860b6f1ab823f781876f1dd3fcd69b982faa3dc66694e1dcc61a41e096a9",
            "[2/2] COMMIT localhost/x:desktop",
            "STEP one",
            "STEP 1/x: RUN a",
            "[a/2] STEP 1/2: RUN a",
            "Successfully tagged localhost/x:latest",
            "Error: building at STEP \"RUN false\": exit status 1",
            "hi",
            "",
        ] {
            assert!(!is_step_line(no), "{no}");
        }
    }

    #[test]
    fn steps_golden() {
        // podman 4.3.1 here, a single-stage target.
        assert_eq!(
            step_of("STEP 3/9: RUN apt-get update && apt-get install -y git"),
            Some(Step {
                stage: None,
                n: 3,
                of: 9,
                what: "RUN apt-get update && apt-get install -y git",
            })
        );
        // podman 4.3.1, `--target desktop`: the stage in front.
        assert_eq!(
            step_of(
                "[2/2] STEP 1/2: FROM 53a2860b6f1ab823f781876f1dd3fcd69b982faa3dc66694e1dcc61a41e096a9 AS desktop"
            ),
            Some(Step {
                stage: Some((2, 2)),
                n: 1,
                of: 2,
                what: "FROM 53a2860b6f1ab823f781876f1dd3fcd69b982faa3dc66694e1dcc61a41e096a9 AS desktop",
            })
        );
        // podman 5.x prints the same forms.
        assert_eq!(
            step_of("[1/2] STEP 12/14: LABEL xyz.vpavlin.shrooms.containerfile=abc"),
            Some(Step {
                stage: Some((1, 2)),
                n: 12,
                of: 14,
                what: "LABEL xyz.vpavlin.shrooms.containerfile=abc",
            })
        );
        // A step's own output that looks like one is only one at the start.
        assert_eq!(step_of("echo STEP 1/2: x"), None);
    }

    #[test]
    fn repos() {
        for ok in [
            "localhost/shrooms-workbench",
            "localhost/shrooms-it-1-2",
            "registry.example:5000/me/wb",
            "wb",
        ] {
            assert_eq!(validate_repo(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            " ",
            "localhost/wb:latest",
            "localhost/wb@sha256:abc",
            "Localhost/WB",
            "localhost//wb",
            "localhost/wb/",
            "local host/wb",
        ] {
            assert!(validate_repo(bad).is_err(), "{bad:?}");
        }
    }

    fn present(label: Option<&str>) -> Present {
        Present {
            id: "id1".into(),
            label: label.map(str::to_string),
        }
    }

    #[test]
    fn status_of_ours() {
        let emb = "E";
        let rec = BuildRecord::default();
        let name = "localhost/shrooms-workbench:latest";
        let w = Some(Stage::Workbench);

        let s = derive(name, true, w, None, false, &rec, emb);
        assert!(!s.present && !s.current && !s.building && s.error.is_none());
        assert_eq!(s.wanted.as_deref(), Some("E"));

        let s = derive(name, true, w, Some(&present(Some("E"))), false, &rec, emb);
        assert!(s.present && s.current);

        let s = derive(name, true, w, Some(&present(Some("old"))), false, &rec, emb);
        assert!(s.present && !s.current);
        let s = derive(name, true, w, Some(&present(None)), false, &rec, emb);
        assert!(!s.current, "an image without the label is stale");

        // A --containerfile build is current by its own hash.
        let mut custom = BuildRecord::default();
        custom.succeeded("C", true, 5);
        let s = derive(
            name,
            true,
            w,
            Some(&present(Some("C"))),
            false,
            &custom,
            emb,
        );
        assert!(s.current);
        assert_eq!(s.wanted.as_deref(), Some("C"));
        // ... and the embedded file's build after it by the embedded hash.
        custom.succeeded("E", false, 6);
        let s = derive(
            name,
            true,
            w,
            Some(&present(Some("C"))),
            false,
            &custom,
            emb,
        );
        assert!(!s.current);
    }

    #[test]
    fn building_comes_from_the_lock_not_the_record() {
        let mut rec = BuildRecord::default();
        rec.start("E", false, 100);
        let name = "n:latest";
        let w = Some(Stage::Workbench);
        let s = derive(name, false, w, None, true, &rec, "E");
        assert!(s.building);
        assert_eq!(s.building_since, Some(100));
        // The builder died: its record still says so, the lock does not.
        let s = derive(name, false, w, None, false, &rec, "E");
        assert!(!s.building);
        assert_eq!(s.building_since, None);
        assert_eq!(s.error, None);
    }

    #[test]
    fn errors_are_shown_until_a_build_starts() {
        let mut rec = BuildRecord::default();
        rec.failed("E", None, "Error: boom", 7);
        let w = Some(Stage::Workbench);
        let s = derive("n", false, w, None, false, &rec, "E");
        assert_eq!(s.error.as_deref(), Some("Error: boom"));
        let s = derive("n", false, w, None, true, &rec, "E");
        assert_eq!(s.error, None, "not while a build runs");
        rec.start("E", false, 8);
        assert_eq!(rec.error, None);
        assert_eq!(rec.failed_with("E", None), None);
    }

    #[test]
    fn not_ours() {
        let rec = BuildRecord::default();
        let s = derive("localhost/mine:1", true, None, None, false, &rec, "E");
        assert!(!s.present && !s.current && s.wanted.is_none());
        let s = derive(
            "localhost/mine:1",
            true,
            None,
            Some(&present(None)),
            false,
            &rec,
            "E",
        );
        assert!(s.present && s.current);
    }

    #[test]
    fn what_cage_create_does() {
        let w = Some(Stage::Workbench);
        let mut rec = BuildRecord::default();
        let st = |img: Option<&Present>, building: bool, rec: &BuildRecord| {
            derive("n", true, w, img, building, rec, "E")
        };
        let cur = present(Some("E"));
        let old = present(Some("O"));
        let fc = |s: &ImageStatus, rec: &BuildRecord| for_cage(s, rec, "E", Some("k1"));
        assert_eq!(fc(&st(Some(&cur), false, &rec), &rec), ForCage::Use);
        assert_eq!(
            fc(&st(Some(&old), false, &rec), &rec),
            ForCage::UseAndRebuild
        );
        assert_eq!(fc(&st(Some(&old), true, &rec), &rec), ForCage::Use);
        assert_eq!(fc(&st(None, true, &rec), &rec), ForCage::Wait);
        assert_eq!(fc(&st(None, false, &rec), &rec), ForCage::Build);
        rec.failed("E", Some("k1"), "Error: boom", 1);
        // Reported every time, never built again from the same inputs ...
        for _ in 0..2 {
            assert_eq!(
                fc(&st(None, false, &rec), &rec),
                ForCage::Report("Error: boom".into())
            );
        }
        // ... but built when they change: another base, another file.
        assert_eq!(
            for_cage(&st(None, false, &rec), &rec, "E", Some("k2")),
            ForCage::Build
        );
        assert_eq!(
            for_cage(&st(None, false, &rec), &rec, "F", Some("k1")),
            ForCage::Build
        );

        let foreign = |img: Option<&Present>| derive("m:1", true, None, img, false, &rec, "E");
        assert_eq!(fc(&foreign(None), &rec), ForCage::Missing);
        assert_eq!(fc(&foreign(Some(&present(None))), &rec), ForCage::Use);
        assert_eq!(
            failure(Stage::Desktop, "Error: x").to_string(),
            "building the desktop image: Error: x"
        );
    }

    #[test]
    fn the_base_is_keyed_by_its_recipe_and_mirror() {
        let a = base_key("http://mirror.example/debian");
        assert_eq!(a.len(), 16);
        assert_eq!(a, base_key("http://mirror.example/debian"));
        assert_ne!(a, base_key("http://other.example/debian"));
        assert_eq!(
            base_name("localhost/shrooms-workbench", &a),
            format!("localhost/shrooms-workbench-base:{a}")
        );
        assert!(validate_repo("localhost/shrooms-workbench-base").is_ok());
        // The recipe is in the images' hash; a file without the base is not.
        assert_ne!(input_hash(CONTAINERFILE), hash(CONTAINERFILE));
        assert_eq!(input_hash("FROM x\n"), hash("FROM x\n"));
        assert!(uses_base("arg SHROOMS_BASE=x\nFROM $SHROOMS_BASE\n"));
        assert!(!uses_base("ARG SHROOMS_BASEX\n# ARG SHROOMS_BASE\n"));
    }

    #[test]
    fn mmdebstrap_and_import_golden() {
        let argv = mmdebstrap_argv("http://m/debian", Path::new("/s/base.tar"), false);
        assert_eq!(argv[0], "--mode=unshare");
        assert_eq!(
            mmdebstrap_argv("m", Path::new("/t"), true)[0],
            "--mode=root"
        );
        assert_eq!(argv[1], "--variant=apt");
        assert!(argv[2].starts_with("--include=ca-certificates,git,curl,"));
        assert_eq!(
            argv[3],
            r#"--customize-hook=rm -f "$1/etc/resolv.conf" "$1/etc/hostname""#
        );
        assert_eq!(argv[4..], ["bookworm", "/s/base.tar", "http://m/debian"]);
        let argv = import_argv(Path::new("/s/base.tar"), "r-base:k", "k", "a=1 b=2:3");
        assert_eq!(
            argv,
            [
                "import",
                "--change",
                r#"CMD ["sleep", "infinity"]"#,
                "--change",
                "LABEL xyz.vpavlin.shrooms.base=k",
                "--change",
                r#"LABEL xyz.vpavlin.shrooms.manifest="a=1 b=2:3""#,
                "/s/base.tar",
                "r-base:k"
            ]
        );
    }

    #[test]
    fn the_manifest_lists_installed_packages() {
        let status = "Package: zlib1g\nStatus: install ok installed\nVersion: 1:1.2.13.dfsg-1\n\n\
                      Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n\n\
                      Package: apt\nStatus: install ok installed\nArchitecture: amd64\n\
                      Version: 2.6.1\nDescription: x\n more \"quoted\"\n";
        assert_eq!(manifest(status), "apt=2.6.1 zlib1g=1:1.2.13.dfsg-1");
        assert_eq!(manifest(""), "");
    }

    #[test]
    fn the_mirror_comes_from_apt_sources() {
        let deb822 = "Types: deb\n# a comment\nURIs: http://m.example/debian\n\
                      Suites: bookworm bookworm-updates\nComponents: main\n\n\
                      Types: deb\nURIs: http://m.example/debian-security\n\
                      Suites: bookworm-security\n";
        assert_eq!(
            apt_mirror("bookworm", &[deb822.into()], &[]).as_deref(),
            Some("http://m.example/debian")
        );
        assert_eq!(apt_mirror("trixie", &[deb822.into()], &[]), None);
        let disabled = "Types: deb\nURIs: http://off/\nSuites: bookworm\nEnabled: no\n";
        let src = "Types: deb-src\nURIs: http://src/\nSuites: bookworm\n";
        let list = "# deb http://old/ bookworm main\n\
                    deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main\n";
        assert_eq!(
            apt_mirror("bookworm", &[disabled.into(), src.into()], &[list.into()]).as_deref(),
            Some("http://one.example/debian")
        );
        assert_eq!(
            apt_mirror("bookworm", &[], &["deb http://two/ bookworm main".into()]).as_deref(),
            Some("http://two/")
        );
    }
}
