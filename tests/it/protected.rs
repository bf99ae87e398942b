//! Protected paths (docs/security.md, "Protected paths"): what a cage plants in the
//! files the machine runs later (git's hooks and config, .envrc, the
//! editor's and the harness's project settings) does not run when the
//! user's own git runs on the machine afterwards; git inside the cage
//! still commits, branches and fetches.

use std::path::Path;

use crate::common::*;

/// git on the machine, as the world's user, with no config of the user's
/// or the system's: only the repository's own. The project is marked safe
/// (`safe.directory`): as root, a rootful cage's project belongs to the
/// cage's own uid (docs/configuration.md, "As root"), and git would otherwise refuse to
/// read that repository's config and hooks at all; a user who trusts it
/// that way is the case where a planted hook would run.
fn host_git(w: &World, project: &Path, args: &[&str]) -> std::process::Output {
    let p = project.to_string_lossy().into_owned();
    let mut all = vec!["-c", "safe.directory=*", "-C", p.as_str()];
    all.extend_from_slice(args);
    as_user(
        w.user,
        "git",
        &all,
        &[
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_AUTHOR_NAME", "u"),
            ("GIT_AUTHOR_EMAIL", "u@example.invalid"),
            ("GIT_COMMITTER_NAME", "u"),
            ("GIT_COMMITTER_EMAIL", "u@example.invalid"),
        ],
    )
}

pub fn host_git_ok(w: &World, project: &Path, args: &[&str]) -> String {
    let out = host_git(w, project, args);
    assert!(
        out.status.success(),
        "git {args:?} on the machine:\n{}",
        show_output(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the cage tries: git's everyday work (each line says `ok`), then
/// each way to plant something the machine's git would obey (in `.git`,
/// which is now the session's own: git on the machine never reads it),
/// then what is read-only in the cage (each line says `done` or
/// `refused`).
const SCRIPT: &str = r##"
G="git -c user.name=cage -c user.email=cage@example.invalid"
try() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n: done"; else echo "$n: refused"; fi; }
git status --porcelain >/dev/null && echo "status: ok"
echo caged > caged.txt && git add caged.txt && echo "add: ok"
git diff --cached --quiet || echo "diff: ok"
$G commit -q -m caged && echo "commit: ok"
git log --format=%s | head -1 | grep -q caged && echo "log: ok"
git branch topic && echo "branch: ok"
git checkout -q -b topic2 && echo "checkout-b: ok"
git switch -q main && echo "switch: ok"
echo more >> caged.txt && $G stash -q && $G stash pop -q && echo "stash: ok"
git checkout -q caged.txt
git fetch -q origin && git rev-parse -q --verify origin/feature >/dev/null && echo "fetch: ok"
git remote add other /nowhere && echo "remote-add: ok"
try hook sh -c 'printf "#!/bin/sh\ntouch MARKS/hook\n" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit'
try fsmonitor-config git config core.fsmonitor "touch MARKS/fsmonitor-config"
try fsmonitor-edit sh -c 'printf "[core]\n\tfsmonitor = touch MARKS/fsmonitor-edit\n" >> .git/config'
try hookspath sh -c 'mkdir -p planted && printf "#!/bin/sh\ntouch MARKS/hookspath\n" > planted/pre-commit && chmod +x planted/pre-commit && git config core.hooksPath planted'
try worktree-config sh -c 'git config extensions.worktreeConfig true && git config --worktree core.fsmonitor "touch MARKS/worktree"'
try commondir sh -c 'mkdir -p .git/x/hooks && cp -r .git/objects .git/refs .git/HEAD .git/x/ && printf "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch MARKS/commondir\n" > .git/x/config && printf "#!/bin/sh\ntouch MARKS/commondir-hook\n" > .git/x/hooks/pre-commit && chmod +x .git/x/hooks/pre-commit && echo x > .git/commondir'
try repo-config sh -c 'printf "[core]\n\tfsmonitor = touch MARKS/repo\n" >> /.shrooms-repo/config'
try repo-commondir sh -c 'echo /tmp > /.shrooms-repo/commondir'
try repo-hooks sh -c 'printf "#!/bin/sh\ntouch MARKS/repo-hook\n" > /.shrooms-repo/hooks/pre-commit'
try include-of-include sh -c 'printf "[core]\n\tfsmonitor = touch MARKS/include\n" > tools/b.conf'
try envrc sh -c 'echo "touch MARKS/envrc" > .envrc'
try claude-settings sh -c 'echo "{\"hooks\":{}}" > .claude/settings.json'
try claude-local sh -c 'echo "{}" > .claude/settings.local.json'
try vscode sh -c 'mkdir -p .vscode && echo "{}" > .vscode/tasks.json'
try pi sh -c 'mkdir -p .pi/extensions && echo "x" > .pi/extensions/x.ts'
try codex-config sh -c 'mkdir -p .codex && printf "notify = [\"touch\", \"MARKS/codex\"]\n" > .codex/config.toml'
try codex-rules sh -c 'mkdir -p .codex/rules && echo x > .codex/rules/x.rules'
try opencode-plugin sh -c 'mkdir -p .opencode/plugins && echo "x" > .opencode/plugins/x.js'
try opencode-json sh -c 'echo "{\"mcp\":{\"x\":{\"type\":\"local\",\"command\":[\"touch\",\"MARKS/opencode\"]}}}" > opencode.json'
try opencode-jsonc sh -c 'echo "{}" > opencode.jsonc'
"##;

/// Then, once the machine's git has run: what would take the project's
/// `.git` and the protected folders from under their mounts and put the
/// cage's in their place.
const SWAPS: &str = r##"
try() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n: done"; else echo "$n: refused"; fi; }
try rename-git mv .git .git-old
try remove-git rm -rf .git
try rename-claude mv .claude .claude-old
try rename-opencode mv .opencode .opencode-old
try remove-opencode-json rm -f opencode.json
try rename-tools mv tools tools-old
"##;

const WORK: &[&str] = &[
    "status",
    "add",
    "diff",
    "commit",
    "log",
    "branch",
    "checkout-b",
    "switch",
    "stash",
    "fetch",
    "remote-add",
];
const ATTACKS: &[&str] = &[
    "repo-config",
    "repo-commondir",
    "repo-hooks",
    "include-of-include",
    "envrc",
    "claude-settings",
    "claude-local",
    "vscode",
    "pi",
    "codex-config",
    "codex-rules",
    "opencode-plugin",
    "opencode-json",
    "opencode-jsonc",
];
const SWAPPED: &[&str] = &[
    "rename-git",
    "rename-claude",
    "rename-tools",
    "rename-opencode",
    "remove-opencode-json",
];

/// A repository with a commit, a bare one in the project as its origin
/// with a branch the cage has not fetched yet, an .envrc and Claude Code's
/// project settings.
/// (A sealed cage's project may not hold Claude Code's settings: it is
/// refused as looking like a home; `.claude` is then made empty.)
fn project_with_a_repository(w: &World, name: &str, claude: bool) -> std::path::PathBuf {
    let project = w.dir(&format!("projects/{name}"));
    w.file(&format!("projects/{name}/.envrc"), "export A=1\n");
    if claude {
        w.file(&format!("projects/{name}/.claude/settings.json"), "{}\n");
    }
    host_git_ok(w, &project, &["init", "-q", "-b", "main"]);
    // An include of an include, both in the project.
    w.file(
        &format!("projects/{name}/tools/a.conf"),
        "[include]\n\tpath = b.conf\n",
    );
    w.file(&format!("projects/{name}/tools/b.conf"), "");
    host_git_ok(w, &project, &["config", "include.path", "../tools/a.conf"]);
    host_git_ok(
        w,
        &project,
        &["commit", "-q", "--allow-empty", "-m", "first"],
    );
    host_git_ok(
        w,
        &project,
        &["init", "-q", "--bare", "-b", "main", "origin.git"],
    );
    host_git_ok(w, &project, &["remote", "add", "origin", "origin.git"]);
    host_git_ok(
        w,
        &project,
        &["push", "-q", "origin", "main", "main:feature"],
    );
    project
}

/// The Debian image of scripts/test-harnesses with the machine's git
/// copied in (it has git's libraries, not git), made once per user and
/// kept, as that image is.
pub fn git_image(user: Option<&'static TestUser>) -> String {
    use std::sync::OnceLock;
    static ROOT: OnceLock<String> = OnceLock::new();
    static USER: OnceLock<String> = OnceLock::new();
    let cell = if user.is_some() { &USER } else { &ROOT };
    cell.get_or_init(|| with_git(user, &debian_image(), "shrooms-test-debian-git"))
        .clone()
}

/// The pi image of scripts/test-harnesses (the same Debian tree) with the
/// machine's git copied in, as `git_image`.
pub fn pi_git_image(user: Option<&'static TestUser>) -> String {
    use std::sync::OnceLock;
    static ROOT: OnceLock<String> = OnceLock::new();
    static USER: OnceLock<String> = OnceLock::new();
    let cell = if user.is_some() { &USER } else { &ROOT };
    cell.get_or_init(|| with_git(user, &real_pi_image(), "shrooms-test-debian-pi-git"))
        .clone()
}

/// The Debian image of scripts/test-harnesses (the podman-5 lane imports
/// it into its own storage).
fn debian_image() -> String {
    std::env::var("SHROOMS_TEST_DEBIAN_IMAGE").unwrap_or_else(|_| {
        panic!("SHROOMS_TEST_DEBIAN_IMAGE is not set: run the tests through scripts/test")
    })
}

/// `base` with the machine's git copied in, as `repo:<base's tag>`, built
/// unless there. The git is this machine's, or the one
/// `SHROOMS_TEST_GIT_FOR_IMAGES` names (the podman-5 lane's machine is a
/// newer Debian than the image: it hands over the main lane's).
fn with_git(user: Option<&'static TestUser>, base: &str, repo: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let tag = base.rsplit(':').next().unwrap_or("latest");
    let image = format!("localhost/{repo}:{tag}");
    if podman(user, &["image", "exists", &image]).status.success() {
        return image;
    }
    let ctx = std::env::temp_dir().join(format!(
        "shrooms-it-gitimage-{}-{}-{repo}",
        std::process::id(),
        user.is_some()
    ));
    let _ = std::fs::remove_dir_all(&ctx);
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::set_permissions(&ctx, std::fs::Permissions::from_mode(0o755)).unwrap();
    let git =
        std::env::var("SHROOMS_TEST_GIT_FOR_IMAGES").unwrap_or_else(|_| "/usr/bin/git".to_string());
    std::fs::copy(&git, ctx.join("git")).unwrap();
    // A fetch from a local repository runs git-upload-pack from git's
    // own folder; git answers to the name it is called by.
    std::fs::write(
        ctx.join("Containerfile"),
        format!(
            "FROM {base}\nCOPY git /usr/bin/git\n\
                 COPY git /usr/lib/git-core/git-upload-pack\n"
        ),
    )
    .unwrap();
    let c = ctx.to_string_lossy().into_owned();
    let out = podman(user, &["build", "-q", "-t", &image, &c]);
    assert!(
        out.status.success(),
        "building {image}:\n{}",
        show_output(&out)
    );
    let _ = std::fs::remove_dir_all(&ctx);
    image
}

/// `script` in the session's cage (`MARKS`: the marks folder), the cage
/// stopped, then the machine's `git status` and `git commit` in the
/// project: what the cage printed, and the two.
fn cage_then_the_machines_git(
    w: &World,
    name: &str,
    project: &Path,
    script: &str,
    marks: &Path,
) -> (String, std::process::Output, std::process::Output) {
    let script = script.replace("MARKS", &marks.to_string_lossy());
    let out = w.sh(name, &script).ok().stdout();
    w.run(&["cage", "stop", name]).ok();
    let status = host_git(w, project, &["status", "--porcelain"]);
    let commit = host_git(w, project, &["commit", "-q", "--allow-empty", "-m", "host"]);
    (out, status, commit)
}

fn plants_nothing_the_machines_git_runs(w: World, sealed: bool) {
    let image = git_image(w.user);
    let name = w.session(if sealed { "protects" } else { "protect" });
    let project = project_with_a_repository(&w, &name, !sealed);
    let marks = w.dir("marks");
    let token = crate::sealed::token_file(&w).to_string_lossy().into_owned();
    // opencode's settings, the user's own: read-only in the cage (where
    // the project has none, a turn that makes one is said after it).
    for file in ["opencode.json", "opencode.jsonc"] {
        w.file(&format!("projects/{name}/{file}"), "{}\n");
    }
    let mut flags = vec!["--image", image.as_str()];
    if sealed {
        flags.extend(["--sealed", "--sealed-token", &token]);
    }
    w.create(&name, &project, &flags);
    // The machine's own git, afterwards: nothing the cage tried to plant
    // runs (looked at first: it is what the protection is for).
    let (out, status, commit) = cage_then_the_machines_git(&w, &name, &project, SCRIPT, &marks);
    let planted: Vec<String> = std::fs::read_dir(&marks)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        planted.is_empty(),
        "the machine's git ran what the cage planted: {planted:?}\n{out}"
    );
    for step in WORK {
        assert!(
            out.lines().any(|l| l == format!("{step}: ok")),
            "{step} did not work in the cage:\n{out}"
        );
    }
    for attack in ATTACKS {
        assert!(
            out.lines().any(|l| l == format!("{attack}: refused")),
            "{attack} was not refused in the cage:\n{out}"
        );
    }
    for (what, o) in [("status", &status), ("commit", &commit)] {
        assert!(o.status.success(), "git {what}:\n{}", show_output(o));
    }
    // The user's branch is the user's: the cage's commits came in under
    // the session's own names.
    let log = host_git_ok(&w, &project, &["log", "--format=%s", "main"]);
    assert_eq!(log, "host\nfirst\n");
    let theirs = host_git_ok(
        &w,
        &project,
        &["log", "--format=%s", &format!("cage/{name}/main")],
    );
    assert_eq!(theirs, "caged\nfirst\n");
    host_git_ok(
        &w,
        &project,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("cage/{name}/topic2"),
        ],
    );
    host_git_ok(&w, &project, &["fsck", "--strict", "--no-dangling"]);
    let out = w.sh(&name, SWAPS).ok().stdout();
    for attack in SWAPPED {
        assert!(
            out.lines().any(|l| l == format!("{attack}: refused")),
            "{attack} was not refused in the cage:\n{out}"
        );
    }
    host_git_ok(&w, &project, &["status", "--porcelain"]);
    let planted: Vec<String> = std::fs::read_dir(&marks)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(planted.is_empty(), "{planted:?}");
    // The folders it could not make were made empty, and are no
    // repository of the cage's making; opencode's settings are the user's,
    // nothing the cage wrote.
    for folder in [".vscode", ".codex", ".opencode"] {
        assert!(project.join(folder).is_dir(), "{folder}");
        assert_eq!(
            std::fs::read_dir(project.join(folder)).unwrap().count(),
            0,
            "{folder}"
        );
    }
    for file in ["opencode.json", "opencode.jsonc"] {
        assert_eq!(
            std::fs::read_to_string(project.join(file)).unwrap(),
            "{}\n",
            "{file}"
        );
    }
}

#[test]
fn protected_paths_plant_nothing_the_machines_git_runs() {
    plants_nothing_the_machines_git_runs(World::new(), false);
}

#[test]
fn protected_paths_plant_nothing_the_machines_git_runs_rootless() {
    plants_nothing_the_machines_git_runs(World::rootless(), false);
}

#[test]
fn protected_paths_plant_nothing_the_machines_git_runs_sealed() {
    plants_nothing_the_machines_git_runs(World::new(), true);
}

#[test]
fn protected_paths_plant_nothing_the_machines_git_runs_sealed_rootless() {
    plants_nothing_the_machines_git_runs(World::rootless(), true);
}

/// A repository of its own outside the projects, with a commit: what a
/// submodule is cloned from, or whose linked worktree a project is.
fn repository_elsewhere(w: &World, name: &str) -> std::path::PathBuf {
    let repo = w.dir(&format!("repos/{name}"));
    host_git_ok(w, &repo, &["init", "-q", "-b", "main"]);
    w.file(&format!("repos/{name}/r.txt"), "r\n");
    host_git_ok(w, &repo, &["add", "r.txt"]);
    host_git_ok(w, &repo, &["commit", "-q", "-m", "elsewhere"]);
    repo
}

/// git on the machine that may clone from a local path (`submodule add`).
fn host_git_local(w: &World, dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["-c", "protocol.file.allow=always"];
    all.extend_from_slice(args);
    host_git_ok(w, dir, &all)
}

/// What a cage tries in a project with submodules: `lib` checked out (its
/// `.git` a file naming `../.git/modules/lib`), `vendor` recorded but never
/// cloned (an empty folder, as a clone without `--recursive` leaves it),
/// `extra` taken out with `submodule deinit` (its repository kept under
/// `.git/modules`). The machine's `git status` at the top looks into each
/// populated submodule and runs git there, with that repository's config.
const SUBMODULES: &str = r##"
try() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n: done"; else echo "$n: refused"; fi; }
git status --porcelain >/dev/null && echo "status: ok"
git -C lib log --format=%s -1 | grep -qx elsewhere && echo "lib-log: ok"
try lib-gitfile sh -c 'mkdir -p planted && cp -r .git/modules/lib planted/lib && printf "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = touch MARKS/lib\n" > planted/lib/config && echo "gitdir: ../planted/lib" > lib/.git'
try modules-config sh -c 'printf "[core]\n\tfsmonitor = touch MARKS/modules\n" >> .git/modules/lib/config'
try modules-hook sh -c 'printf "#!/bin/sh\ntouch MARKS/modules-hook\n" > .git/modules/lib/hooks/pre-commit && chmod +x .git/modules/lib/hooks/pre-commit'
try repo-modules sh -c 'printf "[core]\n\tfsmonitor = touch MARKS/repo-modules\n" >> /.shrooms-repo/modules/lib/config'
try vendor-init sh -c 'git init -q vendor && git -C vendor config core.fsmonitor "touch MARKS/vendor"'
try vendor-gitfile sh -c 'mkdir -p planted/vendor && git init -q --bare planted/vendor && git --git-dir=planted/vendor config core.bare false && git --git-dir=planted/vendor config core.fsmonitor "touch MARKS/vendor-gitfile" && echo "gitdir: ../planted/vendor" > vendor/.git'
try extra-gitfile sh -c 'mkdir -p planted/extra && git init -q --bare planted/extra && git --git-dir=planted/extra config core.bare false && git --git-dir=planted/extra config core.fsmonitor "touch MARKS/extra" && echo "gitdir: ../planted/extra" > extra/.git'
"##;

/// Then, once the machine's git has run: what would take a submodule's
/// `.git` file, or the submodule, from under its mount.
const SUBMODULE_SWAPS: &str = r##"
try() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n: done"; else echo "$n: refused"; fi; }
try lib-remove sh -c 'rm -f lib/.git && mkdir lib/.git'
try lib-rename mv lib lib-old
try vendor-rename mv vendor vendor-old
"##;

const SUBMODULE_ATTACKS: &[&str] = &[
    "lib-gitfile",
    "modules-config",
    "modules-hook",
    "repo-modules",
    "vendor-init",
    "vendor-gitfile",
    "extra-gitfile",
];

/// What a cage tries in a project that is a linked worktree (its `.git` a
/// file naming `<repository>/.git/worktrees/<name>`, the repository
/// outside the project): git's work on the worktree's branch, then its
/// `.git` file, its admin folder (HEAD, `commondir`, `config.worktree`)
/// and the repository's config, each of which the machine's git reads.
const WORKTREE: &str = r##"
G="git -c user.name=cage -c user.email=cage@example.invalid"
try() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n: done"; else echo "$n: refused"; fi; }
git status --porcelain >/dev/null && echo "status: ok"
git rev-parse --abbrev-ref HEAD | grep -qx wt && echo "branch: ok"
echo caged > caged.txt && git add caged.txt && $G commit -q -m caged-in-worktree && echo "commit: ok"
try worktree-config sh -c 'git config extensions.worktreeConfig true && git config --worktree core.fsmonitor "touch MARKS/worktree-config"'
try gitfile sh -c 'echo "gitdir: /tmp" > .git'
try gitfile-remove rm -f .git
try admin-commondir sh -c 'echo /tmp > /.shrooms-repo/worktrees/WT/commondir'
try admin-config sh -c 'printf "[core]\n\tfsmonitor = touch MARKS/admin\n" > /.shrooms-repo/worktrees/WT/config.worktree'
try repo-config sh -c 'printf "[core]\n\tfsmonitor = touch MARKS/repo\n" >> /.shrooms-repo/config'
"##;

const WORKTREE_ATTACKS: &[&str] = &[
    "gitfile",
    "gitfile-remove",
    "admin-commondir",
    "admin-config",
    "repo-config",
];

fn each_refused(out: &str, attacks: &[&str]) {
    for attack in attacks {
        assert!(
            out.lines().any(|l| l == format!("{attack}: refused")),
            "{attack} was not refused in the cage:\n{out}"
        );
    }
}

fn nothing_planted_ran(marks: &Path, out: &str) {
    let planted: Vec<String> = std::fs::read_dir(marks)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        planted.is_empty(),
        "the machine's git ran what the cage planted: {planted:?}\n{out}"
    );
}

/// The flags of a cage made with the git image, sealed or not.
fn git_cage_flags(w: &World, sealed: bool) -> Vec<String> {
    let mut flags = vec!["--image".to_string(), git_image(w.user)];
    if sealed {
        let token = crate::sealed::token_file(w).to_string_lossy().into_owned();
        flags.extend(["--sealed".into(), "--sealed-token".into(), token]);
    }
    flags
}

/// A project with submodules (`SUBMODULES`): whatever the cage writes in
/// a submodule's `.git` file, the repositories under `.git/modules`, or a
/// submodule git has not checked out, the machine's `git status` and `git
/// commit` at the top run none of it; git in the cage still reads the
/// checked-out submodule.
fn submodules_run_nothing_the_cage_wrote(w: World, sealed: bool) {
    let flags = git_cage_flags(&w, sealed);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let marks = w.dir("marks");
    let name = w.session("submods");
    let sub = repository_elsewhere(&w, &format!("{name}-sub"));
    let s = sub.to_string_lossy().into_owned();
    let project = w.dir(&format!("projects/{name}"));
    host_git_ok(&w, &project, &["init", "-q", "-b", "main"]);
    for path in ["lib", "vendor", "extra"] {
        host_git_local(&w, &project, &["submodule", "add", "-q", &s, path]);
    }
    host_git_ok(&w, &project, &["commit", "-q", "-m", "submodules"]);
    host_git_ok(
        &w,
        &project,
        &["submodule", "deinit", "-q", "-f", "vendor", "extra"],
    );
    // vendor as a clone without --recursive leaves it; extra's repository
    // kept under .git/modules, as deinit leaves it.
    std::fs::remove_dir_all(project.join(".git/modules/vendor")).unwrap();
    w.create(&name, &project, &flags);
    let (out, status, commit) = cage_then_the_machines_git(&w, &name, &project, SUBMODULES, &marks);
    nothing_planted_ran(&marks, &out);
    for step in ["status", "lib-log"] {
        assert!(
            out.lines().any(|l| l == format!("{step}: ok")),
            "{step}:\n{out}"
        );
    }
    each_refused(&out, SUBMODULE_ATTACKS);
    for (what, o) in [("status", &status), ("commit", &commit)] {
        assert!(o.status.success(), "git {what}:\n{}", show_output(o));
    }
    let out = w.sh(&name, SUBMODULE_SWAPS).ok().stdout();
    each_refused(&out, &["lib-remove", "lib-rename", "vendor-rename"]);
    if sealed {
        return;
    }
    // A submodule added on the machine after the cage was made: the cage
    // is not started until `cage move` makes it again with it read-only.
    host_git_local(&w, &project, &["submodule", "add", "-q", &s, "late"]);
    w.chown_all();
    let r = w.sh(&name, "echo ran").code_is(125);
    assert!(
        r.stderr()
            .contains("submodules it was made without (late/.git)")
            && r.stderr().contains(&format!("cage move {name}"))
            && !r.stdout().contains("ran"),
        "{}",
        r.explain()
    );
    w.run(&["cage", "move", &name, "--image", flags[1]]).ok();
    let late = "try() { n=$1; shift; if \"$@\" >/dev/null 2>&1; then echo \"$n: done\"; else echo \"$n: refused\"; fi; }\n\
                try late-gitfile sh -c 'echo \"gitdir: /tmp\" > late/.git'";
    let out = w.sh(&name, late).ok().stdout();
    each_refused(&out, &["late-gitfile"]);
    // Left writable by the user's choice, it is the cage's, and the start
    // is not refused for it.
    w.run(&[
        "cage",
        "move",
        &name,
        "--image",
        flags[1],
        "--writable",
        "late/.git",
    ])
    .ok();
    let out = w.sh(&name, late).ok().stdout();
    assert!(out.contains("late-gitfile: done"), "{out}");
}

#[test]
fn submodules_run_nothing_the_cage_wrote_on_the_machine() {
    submodules_run_nothing_the_cage_wrote(World::new(), false);
}

#[test]
fn submodules_run_nothing_the_cage_wrote_on_the_machine_rootless() {
    submodules_run_nothing_the_cage_wrote(World::rootless(), false);
}

#[test]
fn submodules_run_nothing_the_cage_wrote_on_the_machine_sealed() {
    submodules_run_nothing_the_cage_wrote(World::new(), true);
}

#[test]
fn submodules_run_nothing_the_cage_wrote_on_the_machine_sealed_rootless() {
    submodules_run_nothing_the_cage_wrote(World::rootless(), true);
}

/// A project that is a linked worktree of a repository outside it
/// (`WORKTREE`): git in the cage works on the worktree's branch; its
/// `.git` file, the worktree's admin folder and the repository stay out
/// of the cage's reach, and a `config.worktree` of its own runs nothing on
/// the machine; the cage's commit comes into the repository as the
/// session's branch, the user's branch untouched.
fn a_linked_worktree_runs_nothing_the_cage_wrote(w: World, sealed: bool) {
    let flags = git_cage_flags(&w, sealed);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let marks = w.dir("marks");
    let name = w.session("worktree");
    let repo = repository_elsewhere(&w, &format!("{name}-main"));
    let project = w.root.join(format!("projects/{name}"));
    let p = project.to_string_lossy().into_owned();
    host_git_ok(&w, &repo, &["worktree", "add", "-q", "-b", "wt", &p]);
    w.chown_all();
    w.create(&name, &project, &flags);
    let script = WORKTREE
        .replace("MARKS", &marks.to_string_lossy())
        .replace("WT", &name);
    let out = w.sh(&name, &script).ok().stdout();
    w.run(&["cage", "stop", &name]).ok();
    let statuses = [
        host_git(&w, &project, &["status", "--porcelain"]),
        host_git(
            &w,
            &project,
            &["commit", "-q", "--allow-empty", "-m", "host"],
        ),
        host_git(&w, &repo, &["status", "--porcelain"]),
    ];
    nothing_planted_ran(&marks, &out);
    for step in ["status", "branch", "commit"] {
        assert!(
            out.lines().any(|l| l == format!("{step}: ok")),
            "{step}:\n{out}"
        );
    }
    each_refused(&out, WORKTREE_ATTACKS);
    for o in &statuses {
        assert!(o.status.success(), "{}", show_output(o));
    }
    let theirs = host_git_ok(
        &w,
        &repo,
        &["log", "--format=%s", &format!("cage/{name}/wt")],
    );
    assert_eq!(theirs, "caged-in-worktree\nelsewhere\n");
    let wt = host_git_ok(&w, &project, &["log", "--format=%s", "wt"]);
    assert_eq!(wt, "host\nelsewhere\n");
    host_git_ok(&w, &repo, &["fsck", "--strict", "--no-dangling"]);
}

#[test]
fn a_linked_worktree_runs_nothing_the_cage_wrote_on_the_machine() {
    a_linked_worktree_runs_nothing_the_cage_wrote(World::new(), false);
}

#[test]
fn a_linked_worktree_runs_nothing_the_cage_wrote_on_the_machine_rootless() {
    a_linked_worktree_runs_nothing_the_cage_wrote(World::rootless(), false);
}

#[test]
fn a_linked_worktree_runs_nothing_the_cage_wrote_on_the_machine_sealed() {
    a_linked_worktree_runs_nothing_the_cage_wrote(World::new(), true);
}

#[test]
fn a_linked_worktree_runs_nothing_the_cage_wrote_on_the_machine_sealed_rootless() {
    a_linked_worktree_runs_nothing_the_cage_wrote(World::rootless(), true);
}

/// A folder that is no repository gets an empty `.git`, and the cage a git
/// directory of its own there: a `git init` in the cage makes a repository
/// of the session's, and the machine's `.git` stays empty, which git on the
/// machine looks past. A `git init` of the user's on the machine afterwards
/// is taken at the next start: git in the cage sees the user's commit,
/// commits on it, and the commit comes into the user's repository. (Made
/// before git in a cage had its own, the whole `.git` was read-only and
/// such a commit failed.) `--writable .git` leaves it alone, and says so.
fn a_repository_made_after_the_cage(w: World) {
    let image = git_image(w.user);
    let name = w.session("nogit");
    let project = w.dir(&format!("projects/{name}"));
    w.create(&name, &project, &["--image", &image]);
    let r = w.sh(&name, "git init -q . && echo made");
    assert!(r.stdout().contains("made"), "{}", r.explain());
    assert_eq!(std::fs::read_dir(project.join(".git")).unwrap().count(), 0);
    host_git_ok(&w, &project, &["init", "-q", "-b", "main"]);
    w.file(&format!("projects/{name}/a.txt"), "a\n");
    host_git_ok(&w, &project, &["add", "a.txt"]);
    host_git_ok(&w, &project, &["commit", "-q", "-m", "by the user"]);
    let r = w
        .sh(
            &name,
            "git status --porcelain && git log --format=%s && echo b > b.txt && git add b.txt && \
             git -c user.name=c -c user.email=c@example.invalid commit -qm by-the-cage && echo committed",
        )
        .ok();
    assert!(
        r.stdout().contains("by the user\n") && r.stdout().contains("committed"),
        "{}",
        r.explain()
    );
    let log = host_git_ok(
        &w,
        &project,
        &["log", "--format=%s", &format!("cage/{name}/main")],
    );
    assert_eq!(log, "by-the-cage\nby the user\n", "{}", r.explain());
    assert!(
        r.stderr().contains(&format!("as cage/{name}/main")),
        "{}",
        r.explain()
    );
    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(
        show["after_turn"]["git"]["brought"][0]["into"],
        format!("refs/heads/cage/{name}/main"),
        "{show}"
    );
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    assert!(
        history.contains(&format!("as cage/{name}/main")),
        "{history}"
    );
}

#[test]
fn a_repository_made_after_the_cage_works_in_it() {
    a_repository_made_after_the_cage(World::new());
}

#[test]
fn a_repository_made_after_the_cage_works_in_it_rootless() {
    a_repository_made_after_the_cage(World::rootless());
}

#[test]
fn writable_git_leaves_the_repository_to_the_cage_and_says_so() {
    let w = World::new();
    let image = git_image(None);
    let name = w.session("nogitw");
    let project = w.dir(&format!("projects/{name}"));
    let d = project.to_string_lossy().into_owned();
    let r = w
        .run(&[
            "cage",
            "create",
            &name,
            "--dir",
            &d,
            "--image",
            &image,
            "--writable",
            ".git",
        ])
        .ok();
    assert!(
        r.stderr().contains("--writable .git: the cage can change"),
        "{}",
        r.explain()
    );
    w.sh(&name, "git init -q .").ok();
    assert!(project.join(".git/config").is_file());
    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(
        show["cage"]["options"]["writable"],
        serde_json::json!([".git"]),
        "{show}"
    );
}

/// A protected path that is a link is refused, never followed: the cage
/// would get what it leads to. The refusal names `--writable`.
#[test]
fn a_link_in_a_protected_path_is_refused() {
    let w = World::new();
    let name = w.session("protlink");
    let project = w.dir(&format!("projects/{name}"));
    let secret = w.dir("secret");
    std::os::unix::fs::symlink(&secret, project.join(".vscode")).unwrap();
    let d = project.to_string_lossy().into_owned();
    let r = w.run(&["cage", "create", &name, "--dir", &d]).code_is(2);
    assert!(
        r.stderr().contains(".vscode is a link to") && r.stderr().contains("--writable .vscode"),
        "{}",
        r.explain()
    );
    assert!(w.containers_of(&name).is_empty());
    assert!(!w.record_path(&name).exists());
}

/// Folders whose files the machine runs or trusts are no project: a cage
/// there would write what runs as the user, outside any cage. Nothing is
/// made.
fn a_folder_the_machine_runs_is_refused(w: World) {
    for (folder, holds) in [
        (
            ".config/systemd/user",
            "your systemd user units, which the machine starts",
        ),
        (".local/bin", "programs on your PATH"),
        (".config/git", "git's own config and hooks"),
    ] {
        let name = w.session("runs");
        let dir = w.dir_in_home(folder);
        let d = dir.to_string_lossy().into_owned();
        let r = w.run(&["cage", "create", &name, "--dir", &d]).code_is(2);
        assert!(
            r.stderr().contains(holds)
                && r.stderr()
                    .contains("a cage's project is mounted read-write"),
            "{}",
            r.explain()
        );
        assert!(w.containers_of(&name).is_empty());
        assert!(!w.record_path(&name).exists());
    }
}

#[test]
fn a_folder_the_machine_runs_is_refused_as_a_project() {
    a_folder_the_machine_runs_is_refused(World::new());
}

#[test]
fn a_folder_the_machine_runs_is_refused_as_a_project_rootless() {
    a_folder_the_machine_runs_is_refused(World::rootless());
}

/// `--writable` is the session's choice for one cage: `cage move` with it
/// gives a cage that can write there (kept in the record and shown), and
/// a move without it protects the path again.
#[test]
fn writable_is_chosen_per_cage_and_kept_in_the_record() {
    let w = World::new();
    let name = w.session("writable");
    let project = w.dir(&format!("projects/{name}"));
    w.dir(&format!("projects/{name}/.vscode"));
    w.create(&name, &project, &[]);
    let write = "echo '{}' > .vscode/tasks.json && echo wrote";
    let r = w.sh(&name, write);
    assert!(!r.stdout().contains("wrote"), "{}", r.explain());
    let r = w
        .run(&["cage", "move", &name, "--writable", ".vscode"])
        .ok();
    assert!(
        r.stderr()
            .contains("--writable .vscode: the cage can change"),
        "{}",
        r.explain()
    );
    assert!(w.sh(&name, write).ok().stdout().contains("wrote"));
    assert_eq!(
        w.record(&name)["cage"]["options"]["writable"],
        serde_json::json!([".vscode"])
    );
    let show = w.run(&["cage", "show", &name]).ok().stdout();
    assert!(
        show.contains("writable  .vscode (protected paths left writable)"),
        "{show}"
    );
    w.run(&["cage", "move", &name]).ok();
    let r = w.sh(&name, "echo x > .vscode/other && echo wrote");
    assert!(!r.stdout().contains("wrote"), "{}", r.explain());
    assert!(w.record(&name)["cage"]["options"]["writable"].is_null());
}

/// `cage bring`: the session's commits come in on demand (a branch of the
/// session's the user's repository lost comes back), `--json` says what
/// came in; `--ff` fast-forwards the user's checked-out branch only when
/// that changes nothing under the user (refused while a file differs, or
/// when the user's branch has moved on); `cage move` and `cage rm` bring
/// what is pending in before the cage's git directory goes.
fn commits_come_in_on_demand_and_before_the_cage_goes(w: World) {
    let image = git_image(w.user);
    let name = w.session("bring");
    let project = w.dir(&format!("projects/{name}"));
    host_git_ok(&w, &project, &["init", "-q", "-b", "main"]);
    w.file(&format!("projects/{name}/a.txt"), "a\n");
    host_git_ok(&w, &project, &["add", "a.txt"]);
    host_git_ok(&w, &project, &["commit", "-q", "-m", "first"]);
    w.create(&name, &project, &["--image", &image]);
    let commit = |msg: &str| {
        format!(
            "echo {msg} >> caged.txt && git add caged.txt && \
             git -c user.name=c -c user.email=c@example.invalid commit -qm {msg}"
        )
    };
    w.sh(&name, &commit("c1")).ok();
    let theirs = format!("cage/{name}/main");
    let c1 = host_git_ok(&w, &project, &["rev-parse", &theirs]);
    // Gone from the user's repository: brought in again on demand.
    host_git_ok(&w, &project, &["branch", "-q", "-D", &theirs]);
    let r = w.run(&["cage", "bring", &name, "--json"]).ok().json();
    assert_eq!(
        r["git"]["brought"][0]["into"],
        format!("refs/heads/{theirs}"),
        "{r}"
    );
    assert_eq!(host_git_ok(&w, &project, &["rev-parse", &theirs]), c1);
    let r = w.run(&["cage", "bring", &name]).ok();
    assert!(r.stdout().contains("no new commits"), "{}", r.explain());
    if w.user.is_none() {
        // The same over HTTP (root's serve, with its token).
        host_git_ok(&w, &project, &["branch", "-q", "-D", &theirs]);
        let s = w.serve(&[], &[]);
        let r = post(&format!("{}/v1/sessions/{name}/bring", s.url), "{}").is(200);
        assert_eq!(
            r.json()["git"]["brought"][0]["into"],
            format!("refs/heads/{theirs}"),
            "{r:#?}"
        );
        assert_eq!(host_git_ok(&w, &project, &["rev-parse", &theirs]), c1);
    }

    // --ff while a file of the work tree is not the session's commit:
    // refused, nothing moved.
    w.file(&format!("projects/{name}/a.txt"), "changed by the user\n");
    let r = w.run(&["cage", "bring", &name, "--ff"]).code_is(1);
    assert!(
        r.stderr().contains("your work tree is not") && r.stderr().contains(&theirs),
        "{}",
        r.explain()
    );
    let first = host_git_ok(&w, &project, &["rev-parse", "main"]);
    assert_ne!(first, c1);
    // As the session left it: the fast-forward moves the branch and the
    // index, and the user's work tree is clean at the session's commit.
    w.file(&format!("projects/{name}/a.txt"), "a\n");
    let r = w.run(&["cage", "bring", &name, "--ff"]).ok();
    assert!(
        r.stdout().contains("fast-forwarded your main"),
        "{}",
        r.explain()
    );
    assert_eq!(host_git_ok(&w, &project, &["rev-parse", "main"]), c1);
    assert_eq!(host_git_ok(&w, &project, &["status", "--porcelain"]), "");
    // The user's main moves on, the session's too: no fast-forward.
    host_git_ok(
        &w,
        &project,
        &["commit", "-q", "--allow-empty", "-m", "by the user"],
    );
    w.sh(&name, &commit("c2")).ok();
    let r = w
        .run(&["cage", "bring", &name, "--ff", "--json"])
        .code_is(1);
    assert!(r.stderr().contains("not a fast-forward"), "{}", r.explain());
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    assert!(history.contains(&format!("as {theirs}")), "{history}");

    // Pending when the cage goes: a move brings it in first, and so does rm.
    host_git_ok(&w, &project, &["branch", "-q", "-D", &theirs]);
    let r = w.run(&["cage", "move", &name, "--image", &image]).ok();
    assert!(
        r.stderr().contains(&format!("as {theirs}"))
            || r.stdout().contains(&format!("as {theirs}")),
        "{}",
        r.explain()
    );
    let c2 = host_git_ok(&w, &project, &["rev-parse", &theirs]);
    w.sh(&name, &commit("c3")).ok();
    host_git_ok(&w, &project, &["branch", "-q", "-D", &theirs]);
    let r = w.run(&["cage", "rm", &name]).ok();
    assert!(
        r.stdout().contains(&format!("as {theirs}")),
        "{}",
        r.explain()
    );
    let c3 = host_git_ok(&w, &project, &["rev-parse", &theirs]);
    assert_ne!(c3, c2);
    let log = host_git_ok(&w, &project, &["log", "--format=%s", &theirs]);
    // The new cage's git directory started from the user's branches (docs/security.md,
    // "Git in a cage"): c3 is on the user's main, c2 came in at the move.
    assert_eq!(log, "c3\nby the user\nc1\nfirst\n", "{log}");
}

#[test]
fn commits_come_in_on_demand_and_before_the_cage_goes_rootful() {
    commits_come_in_on_demand_and_before_the_cage_goes(World::new());
}

#[test]
fn commits_come_in_on_demand_and_before_the_cage_goes_rootless() {
    commits_come_in_on_demand_and_before_the_cage_goes(World::rootless());
}

/// What a cage tries on the files other tools run later (docs/security.md, "What the
/// machine runs later"): those named after the turn it writes; those
/// read-only it cannot.
const LATER: &str = r##"
try() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n: done"; else echo "$n: refused"; fi; }
try env sh -c 'echo NODE_OPTIONS=--require=/tmp/x.js > .env'
try env-local sh -c 'echo B=1 > .env.local'
try envrc-local sh -c 'echo "touch /tmp/x" > .envrc.local'
try workspace sh -c 'echo "{}" > web.code-workspace'
try flake sh -c 'echo "{}" > flake.nix'
try shell-nix sh -c 'echo "{}" > shell.nix'
try mise sh -c 'echo "[tasks]" > mise.toml'
try husky sh -c 'mkdir -p .husky && echo "touch /tmp/x" > .husky/pre-commit'
try makefile sh -c 'printf "all:\n\ttouch /tmp/x\n" > Makefile'
try idea sh -c 'echo x > .idea/workspace.xml'
try devcontainer sh -c 'echo "{\"initializeCommand\": \"touch /tmp/x\"}" > .devcontainer/devcontainer.json'
try direnv sh -c 'echo x > .direnv/layout'
try lefthook-local sh -c 'echo "pre-commit: {}" > lefthook-local.yml'
try helix sh -c 'echo x > .helix/languages.toml'
try zed sh -c 'echo x > .zed/tasks.json'
try vscode sh -c 'echo x > .vscode/tasks.json'
"##;

fn files_run_later_are_named_or_read_only(w: World) {
    let name = w.session("later");
    let project = w.dir(&format!("projects/{name}"));
    for (path, text) in [
        (".env", "A=1\n"),
        ("Makefile", "all:\n"),
        (".idea/workspace.xml", "<project/>\n"),
        (".devcontainer/devcontainer.json", "{}\n"),
        (".direnv/layout", "\n"),
        ("lefthook-local.yml", "\n"),
        (".helix/languages.toml", "\n"),
        (".zed/tasks.json", "[]\n"),
    ] {
        w.file(&format!("projects/{name}/{path}"), text);
    }
    w.create(&name, &project, &[]);
    let r = w.sh(&name, LATER).ok();
    let out = r.stdout();
    for done in [
        "env",
        "env-local",
        "envrc-local",
        "workspace",
        "flake",
        "shell-nix",
        "mise",
        "husky",
        "makefile",
    ] {
        assert!(
            out.lines().any(|l| l == format!("{done}: done")),
            "{done}:\n{out}"
        );
    }
    each_refused(
        &out,
        &[
            "idea",
            "devcontainer",
            "direnv",
            "lefthook-local",
            "helix",
            "zed",
            "vscode",
        ],
    );
    let named = [
        (".env", "changed"),
        (".env.local", "created"),
        (".envrc.local", "created"),
        ("web.code-workspace", "created"),
        ("flake.nix", "created"),
        ("shell.nix", "created"),
        ("mise.toml", "created"),
        (".husky/pre-commit", "created"),
    ];
    let err = r.stderr();
    for (path, change) in named {
        assert!(
            err.contains(&format!(
                "the cage {change} {path}, which a tool on this machine"
            )),
            "{path} {change}:\n{}",
            r.explain()
        );
    }
    assert!(!err.contains("Makefile"), "{}", r.explain());
    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    let files: Vec<(String, String)> = show["after_turn"]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("{show}"))
        .iter()
        .map(|f| {
            assert!(f["why"].as_str().is_some_and(|w| !w.is_empty()), "{f}");
            (
                f["path"].as_str().unwrap().to_string(),
                f["change"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut want: Vec<(String, String)> = named
        .iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect();
    want.sort();
    assert_eq!(files, want, "{show}");
    let text = w.run(&["cage", "show", &name]).ok().stdout();
    assert!(
        text.contains("after it  the cage created .envrc.local"),
        "{text}"
    );
    let history = w.run(&["cage", "history", &name]).ok().stdout();
    for (path, change) in named {
        assert!(
            history.contains(&format!("the cage {change} {path}")),
            "{history}"
        );
    }
    if w.user.is_none() {
        let s = w.serve(&[], &[]);
        let page = get(&format!("{}/", s.url)).is(200).body;
        for (path, change) in named {
            assert!(
                page.contains(&format!("{change} <code>{path}</code>, which a tool")),
                "{page}"
            );
        }
    }
    // A turn that writes none of them names none, and says so in the
    // record: the last turn's list is the last turn's.
    let r = w.sh(&name, "echo quiet").ok();
    assert!(!r.stderr().contains("the cage"), "{}", r.explain());
    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert!(show["after_turn"].is_null(), "{show}");
}

#[test]
fn files_run_later_are_named_or_read_only_rootful() {
    files_run_later_are_named_or_read_only(World::new());
}

#[test]
fn files_run_later_are_named_or_read_only_rootless() {
    files_run_later_are_named_or_read_only(World::rootless());
}
