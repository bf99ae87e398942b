//! The checks and paths particular to sealed cages, for code nobody vouches
//! for (docs/sealed.md, "Sealed cages").

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ConversationProblem, Doing, Error, FolderProblem, Mounted, Result};
use crate::state::session::Store;

/// Folders whose presence marks a home, not a project: a sealed cage's
/// project is mounted read-write, so it must hold none of them.
pub const HOME_MARKS: [&str; 5] = [".ssh", ".gnupg", ".aws", ".config/gh", ".claude"];

/// Refuse, for any cage, a project that would lend it what a cage keeps
/// out: the home directory or a folder above it, and a folder that holds
/// or is inside the tool's state folder (other cages' env files, the sealed
/// token). `dir` is canonical (links resolved), so a link is judged by
/// where it leads.
pub fn check_any_project(dir: &Path, home: &Path, state: &Path, mounted: Mounted) -> Result<()> {
    let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    let state = std::fs::canonicalize(state).unwrap_or_else(|_| state.to_path_buf());
    if home.starts_with(dir) {
        let holds = dir != home;
        return Err(Error::folder(dir, FolderProblem::Home { holds, mounted }));
    }
    if state.starts_with(dir) || dir.starts_with(&state) {
        return Err(Error::folder(
            dir,
            FolderProblem::StateFolder { state, mounted },
        ));
    }
    Ok(())
}

/// Folders of the home that no cage's project may be or be inside, and
/// what they hold: a cage there would read every project's conversations,
/// keys or logins, or write what the machine later obeys.
pub const KEPT_OUT: &[(&str, &str)] = &[
    ("shrooms-outbox", "the sealed cages' outboxes"),
    (
        ".claude",
        "Claude Code's folder, with every project's conversations",
    ),
    (".pi", "pi's folder, with every project's sessions"),
    (".ssh", "your SSH keys"),
    (".gnupg", "your GnuPG keys"),
    (".aws", "your AWS keys"),
    (".config/gh", "your GitHub login"),
    (".config/shrooms-agent", "shrooms-agent's config"),
    // Folders whose files the machine runs or trusts without being asked
    // (docs/security.md, "Protected paths"): what a cage left there would run as
    // you, outside any cage.
    (
        ".config/systemd",
        "your systemd user units, which the machine starts (systemd.unit(5))",
    ),
    (
        ".config/environment.d",
        "the environment of your services (environment.d(5))",
    ),
    (
        ".config/autostart",
        "the programs your desktop starts at login",
    ),
    (
        ".local/share/applications",
        "the desktop entries your desktop runs",
    ),
    (".local/bin", "programs on your PATH"),
    ("bin", "programs on your PATH"),
    (
        ".cargo",
        "cargo's programs on your PATH and its config, which cargo obeys",
    ),
    (
        ".config/git",
        "git's own config and hooks, which every git of yours obeys",
    ),
    (
        ".config/containers",
        "podman's config, which every cage's podman obeys",
    ),
    (".local/share/containers", "podman's containers and images"),
    (".config/direnv", "direnv's config, which direnv obeys"),
    (
        ".local/share/direnv",
        "direnv's list of the .envrc files it runs",
    ),
    (".bashrc.d", "files every bash of yours runs at its start"),
    (".config/fish", "files every fish shell of yours runs"),
    (".config/zsh", "files every zsh of yours runs"),
    (".config/nvim", "Neovim's config, which it runs"),
    (".vim", "Vim's config, which it runs"),
    (".emacs.d", "Emacs's config, which it runs"),
];

/// The harnesses' own folders, kept out as [`KEPT_OUT`]'s are, wherever
/// their variables put them (`CODEX_HOME`, `XDG_CONFIG_HOME`,
/// `XDG_DATA_HOME`, which may lead outside the home): what a cage left
/// there, your own `codex` or `opencode` on the machine runs or obeys.
pub fn harness_folders(s: &crate::settings::Settings) -> Vec<(PathBuf, &'static str)> {
    vec![
        (
            s.codex_dir.clone(),
            "Codex CLI's folder: its config (MCP servers' commands, notify), rules, skills, \
             login and every project's sessions",
        ),
        (
            s.opencode_dir.clone(),
            "opencode's config folder: its settings and plugins, which opencode runs at its start",
        ),
        (
            s.opencode_data_dir.clone(),
            "opencode's data folder: its login and every project's sessions",
        ),
    ]
}

/// Refuse, for any cage, a project inside one of [`KEPT_OUT`] or of
/// `elsewhere` (absolute folders, kept out the same way), or one that
/// holds a file the machine obeys or a token (`guarded`: the config file,
/// token files), wherever links lead: with a dotfiles repository, the
/// config can be a link into the very folder a cage would write, and a
/// cage could then name its own program as `podman`.
pub fn check_kept_out(
    dir: &Path,
    home: &Path,
    elsewhere: &[(PathBuf, &'static str)],
    guarded: &[PathBuf],
) -> Result<()> {
    let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    let folders = KEPT_OUT
        .iter()
        .map(|(folder, holds)| (home.join(folder), *holds))
        .chain(elsewhere.iter().cloned());
    for (named, holds) in folders {
        // Where it is, and where it would be made (a cage on ~/.config
        // could make ~/.config/shrooms-agent/config.toml itself).
        let path = resolved(&named);
        if dir.starts_with(&path) || path.starts_with(dir) || named.starts_with(dir) {
            return Err(Error::folder(dir, FolderProblem::KeptOut { path, holds }));
        }
    }
    for file in guarded {
        // A file not made yet counts where it would be made.
        let real = resolved(file);
        if real.starts_with(dir) || file.starts_with(dir) {
            let file = file.clone();
            return Err(Error::folder(dir, FolderProblem::Guarded { real, file }));
        }
    }
    Ok(())
}

/// Where a path leads, links resolved; for a path that does not exist (yet),
/// its nearest existing folder resolved, and the rest of the names after it.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let mut rest = Vec::new();
    let mut at = path;
    while let Some(parent) = at.parent() {
        if let Some(name) = at.file_name() {
            rest.push(name.to_os_string());
        }
        if let Ok(real) = std::fs::canonicalize(parent) {
            return rest.iter().rev().fold(real, |p, n| p.join(n));
        }
        at = parent;
    }
    path.to_path_buf()
}

/// Refuse a sealed cage's project where the code under review could reach
/// a home's secrets: anything `check_any_project`
/// refuses, a folder inside a hidden folder of the home (~/.ssh, ~/.config,
/// ~/.claude, ~/.local ...), inside the outboxes, or holding a home's
/// secrets.
pub fn check_project(dir: &Path, home: &Path, state: &Path) -> Result<()> {
    check_any_project(dir, home, state, Mounted::Sealed)?;
    let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    if let Ok(rel) = dir.strip_prefix(&home) {
        let hidden = rel
            .components()
            .find(|c| c.as_os_str().to_string_lossy().starts_with('.'));
        if let Some(h) = hidden {
            let hidden = home.join(h.as_os_str());
            return Err(Error::folder(dir, FolderProblem::InHidden { hidden }));
        }
    }
    for mark in HOME_MARKS {
        // An empty `.claude` folder is what protected paths leave in a
        // project (docs/security.md, "Protected paths"), not a home's.
        let empty_claude = mark == ".claude"
            && std::fs::symlink_metadata(dir.join(mark)).is_ok_and(|m| m.is_dir())
            && std::fs::read_dir(dir.join(mark)).is_ok_and(|mut d| d.next().is_none());
        if std::fs::symlink_metadata(dir.join(mark)).is_ok() && !empty_claude {
            return Err(Error::folder(dir, FolderProblem::HomeMark { mark }));
        }
    }
    Ok(())
}

pub use crate::settings::token::read_sealed as read_token;

/// `~/shrooms-outbox/<session>`: a sealed session's results, `/outbox`
/// inside.
pub fn outbox_dir(home: &Path, session: &str) -> PathBuf {
    home.join("shrooms-outbox").join(session)
}

/// A folder a sealed session worked in: the code under review could leave
/// something there that runs later, outside the cage, so it stays untrusted. Known by its device, inode and birth time as
/// well as its path, so that the folder deleted and cloned again ("clone
/// again to go on") is a new folder, trusted again. (An inode number is
/// soon given again on ext4; the birth time tells the two apart, where the
/// file system keeps one.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Untrusted {
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
    /// Nanoseconds since the epoch, where the file system tells.
    #[serde(default)]
    pub born_ns: Option<u128>,
    pub session: String,
}

fn born_ns(meta: &std::fs::Metadata) -> Option<u128> {
    meta.created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
}

impl Untrusted {
    /// Still the folder that was untrusted: the same one at that path.
    fn still_there(&self) -> bool {
        std::fs::symlink_metadata(&self.path).is_ok_and(|m| self.is(&m))
    }

    /// This folder, wherever it is now (renamed, moved).
    fn is(&self, m: &std::fs::Metadata) -> bool {
        m.is_dir() && m.dev() == self.dev && m.ino() == self.ino && born_ns(m) == self.born_ns
    }
}

/// The untrusted folders kept, at the most: the newest.
const MAX_UNTRUSTED: usize = 1000;

fn read_untrusted(store: &Store) -> Result<Vec<Untrusted>> {
    let file = store.untrusted_folders();
    match std::fs::read(&file) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            Error::state(
                &file,
                crate::error::StateProblem::UntrustedDamaged {
                    cause: e.to_string(),
                },
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::act(Doing::Read(file.to_path_buf()), &e)),
    }
}

/// Change the list under its lock. A folder not at its path is kept all
/// the same (it may have been renamed or moved, and is known by what it is
/// wherever it goes); the oldest entries go past [`MAX_UNTRUSTED`].
fn change_untrusted(store: &Store, change: impl FnOnce(&mut Vec<Untrusted>)) -> Result<()> {
    store.ensure()?;
    let lock = store.untrusted_folders().with_extension("lock");
    let _held = crate::state::lock::take(&lock)?;
    let mut list = read_untrusted(store)?;
    change(&mut list);
    if list.len() > MAX_UNTRUSTED {
        list.drain(..list.len() - MAX_UNTRUSTED);
    }
    let text = serde_json::to_vec_pretty(&list)
        .map_err(|e| Error::act("writing the untrusted folders", &e))?;
    crate::state::session::write_atomic(&store.untrusted_folders(), &text, 0o600)
}

/// Remember `dir` as a sealed session's project.
pub fn remember_untrusted(store: &Store, dir: &Path, session: &str) -> Result<()> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| Error::act(Doing::LookAt(dir.to_path_buf()), &e))?;
    let entry = Untrusted {
        path: dir.to_path_buf(),
        dev: meta.dev(),
        ino: meta.ino(),
        born_ns: born_ns(&meta),
        session: session.to_string(),
    };
    change_untrusted(store, |list| {
        // The same folder again goes last (the newest), under its path now.
        list.retain(|u| !(u.dev == entry.dev && u.ino == entry.ino && u.born_ns == entry.born_ns));
        list.push(entry);
    })
}

/// Forget the untrusted folders that are `dir` or inside it (the owner gave
/// it an ordinary cage with `--unseal`, or took `unsealing` out of its
/// seal), but not a folder above it, nor one where another sealed session
/// still works.
pub fn forget_untrusted(store: &Store, dir: &Path, unsealing: Option<&str>) -> Result<()> {
    let sealed_elsewhere = |session: &str| {
        Some(session) != unsealing
            && store
                .load(session)
                .ok()
                .and_then(|r| r.cage)
                .is_some_and(|c| c.sealed.is_some())
    };
    let here = std::fs::symlink_metadata(dir).ok();
    change_untrusted(store, |list| {
        list.retain(|u| {
            let this = u.path.starts_with(dir) || here.as_ref().is_some_and(|m| u.is(m));
            !this || sealed_elsewhere(&u.session)
        });
    })
}

/// Refuse a cage that would share a folder with a session on the other
/// side of a seal: a sealed cage where a session that is not sealed works
/// (on, inside or above its folder), or the reverse. What the code under
/// review writes there would run in the other, with its settings, keys and
/// network. `session` itself (being moved) does not count; `others` are
/// the records that read.
pub fn check_seal_neighbours(
    others: &[crate::state::session::Record],
    session: &str,
    dir: &Path,
    sealed: bool,
) -> Result<()> {
    for other in others {
        if other.name == session || !(other.dir.starts_with(dir) || dir.starts_with(&other.dir)) {
            continue;
        }
        let other_sealed = other.cage.as_ref().is_some_and(|c| c.sealed.is_some());
        if other_sealed != sealed {
            return Err(Error::folder(
                dir,
                FolderProblem::SealNeighbour {
                    other: other.name.clone(),
                    other_dir: other.dir.clone(),
                    other_sealed,
                },
            ));
        }
    }
    Ok(())
}

/// The untrusted folder that `dir` (canonical) is, is inside or holds, if
/// any: an ordinary cage there would run what the code under review left.
/// `dir` and the folders above it are known by what they are, so a folder
/// renamed or moved after its review is still found.
pub fn untrusted_near(store: &Store, dir: &Path) -> Result<Option<Untrusted>> {
    let list = read_untrusted(store)?;
    for at in dir.ancestors() {
        let Ok(m) = std::fs::symlink_metadata(at) else {
            continue;
        };
        if let Some(u) = list.iter().find(|u| u.is(&m)) {
            let mut found = u.clone();
            // Where it is now, for the message.
            found.path = at.to_path_buf();
            return Ok(Some(found));
        }
    }
    Ok(list
        .into_iter()
        .find(|u| u.path.starts_with(dir) && u.still_there()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn temp(name: &str) -> PathBuf {
        tempfile::Builder::new()
            .prefix(&format!("shrooms-sealed-{name}-"))
            .tempdir()
            .unwrap()
            .keep()
    }

    #[test]
    fn projects_that_are_homes_are_refused() {
        let root = temp("proj");
        let home = root.join("home/u");
        let project = home.join("src/p");
        fs::create_dir_all(&project).unwrap();
        let state = home.join(".local/share/shrooms-agent");
        fs::create_dir_all(&state).unwrap();
        for inside in [".ssh/x", ".config", ".claude/projects", ".local/share"] {
            let p = home.join(inside);
            fs::create_dir_all(&p).unwrap();
            let e = check_project(&p, &home, &state).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput, "{inside}");
        }
        let e = check_any_project(&state, &home, &state, Mounted::Any).unwrap_err();
        assert!(e.message().contains("state folder"), "{}", e.message());
        assert!(check_any_project(&project, &home, &state, Mounted::Any).is_ok());
        assert!(check_any_project(&home, &home, &state, Mounted::Any).is_err());
        assert!(check_project(&project, &home, &state).is_ok());
        assert!(check_project(&home, &home, &state).is_err());
        assert!(check_project(&root.join("home"), &home, &state).is_err());
        assert!(check_project(Path::new("/"), &home, &state).is_err());
        for mark in HOME_MARKS {
            let p = root.join(format!("with{}", mark.replace('/', "_")));
            fs::create_dir_all(p.join(mark)).unwrap();
            if mark == ".claude" {
                // empty, as protected paths leave it: no mark of a home
                assert!(check_project(&p, &home, &state).is_ok());
                fs::write(p.join(mark).join("settings.json"), "{}").unwrap();
            }
            let e = check_project(&p, &home, &state).unwrap_err();
            assert!(e.message().contains(mark), "{}", e.message());
        }
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn folders_the_machine_runs_or_trusts_are_kept_out() {
        let root = temp("runs");
        let home = root.join("home/u");
        fs::create_dir_all(&home).unwrap();
        for (folder, holds) in [
            (".config/systemd/user", "systemd user units"),
            (".config/autostart", "desktop starts at login"),
            (".local/bin", "programs on your PATH"),
            ("bin/tools", "programs on your PATH"),
            (".config/git", "git's own config and hooks"),
            (".config/environment.d", "environment of your services"),
            (".local/share/applications", "desktop entries"),
            (".config/fish/conf.d", "fish"),
            (".bashrc.d", "bash"),
            (".config/containers", "podman's config"),
            (".local/share/direnv", "direnv"),
            (".cargo/bin", "cargo"),
        ] {
            let p = home.join(folder);
            fs::create_dir_all(&p).unwrap();
            let p = fs::canonicalize(&p).unwrap();
            let e = check_kept_out(&p, &home, &[], &[]).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput, "{folder}");
            assert!(e.message().contains(holds), "{folder}: {}", e.message());
            assert!(
                e.message()
                    .contains("a cage's project is mounted read-write"),
                "{}",
                e.message()
            );
        }
        // A folder beside them is a project like any other.
        let p = home.join(".local/src/web");
        fs::create_dir_all(&p).unwrap();
        assert!(check_kept_out(&fs::canonicalize(&p).unwrap(), &home, &[], &[]).is_ok());
        // ~/bin, a link into a dotfiles repository: that repository holds it.
        let dotfiles = home.join("dotfiles");
        fs::create_dir_all(dotfiles.join("bin")).unwrap();
        fs::remove_dir_all(home.join("bin")).unwrap();
        std::os::unix::fs::symlink(dotfiles.join("bin"), home.join("bin")).unwrap();
        let e = check_kept_out(&fs::canonicalize(&dotfiles).unwrap(), &home, &[], &[]).unwrap_err();
        assert!(e.message().contains("holds"), "{}", e.message());
        fs::remove_dir_all(root).unwrap();
    }

    /// Codex's and opencode's folders, as a whole and wherever their
    /// variables put them (here `CODEX_HOME` outside the home, opencode's
    /// config folder a link into a dotfiles repository): a cage there
    /// would write what your own `codex` or `opencode` runs (a plugin, a
    /// rule, an MCP server) or read every project's sessions.
    #[test]
    fn the_harnesses_folders_are_kept_out_wherever_they_are() {
        use crate::settings::{Env, Overrides, Settings};
        let root = fs::canonicalize(temp("harnesses")).unwrap();
        let home = root.join("home/u");
        let codex = root.join("elsewhere/codex");
        let dotfiles = home.join("dotfiles");
        for d in [
            codex.join("rules"),
            codex.join("skills"),
            codex.join("sessions"),
            dotfiles.join("opencode/plugins"),
            home.join(".config"),
            home.join("data/opencode/storage"),
        ] {
            fs::create_dir_all(d).unwrap();
        }
        std::os::unix::fs::symlink(dotfiles.join("opencode"), home.join(".config/opencode"))
            .unwrap();
        let env: Env = [
            ("CODEX_HOME", codex.clone()),
            ("XDG_DATA_HOME", home.join("data")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string_lossy().into_owned()))
        .collect();
        let s = Settings::resolve(
            None,
            &root.join("config.toml"),
            root.join("state"),
            home.clone(),
            &env,
            &Overrides::default(),
        )
        .unwrap();
        let folders = harness_folders(&s);
        let refused = |p: &Path| {
            let p = fs::canonicalize(p).unwrap();
            let e = check_kept_out(&p, &home, &folders, &[]).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::BadInput, "{}", p.display());
            e.message()
        };
        let r = |p: &Path| p.display().to_string();
        let codex_holds = "which holds Codex CLI's folder: its config (MCP servers' commands, \
                           notify), rules, skills, login and every project's sessions; a cage's \
                           project is mounted read-write: give it a project folder of its own";
        for p in [
            codex.join("rules"),
            codex.join("skills"),
            codex.join("sessions"),
        ] {
            assert_eq!(
                refused(&p),
                format!("{} is inside {}, {codex_holds}", r(&p), r(&codex))
            );
        }
        assert_eq!(
            refused(&codex),
            format!("{} is {}, {codex_holds}", r(&codex), r(&codex))
        );
        // A project holding one is refused too.
        let elsewhere = root.join("elsewhere");
        assert_eq!(
            refused(&elsewhere),
            format!("{} holds {}, {codex_holds}", r(&elsewhere), r(&codex))
        );
        // ~/.config/opencode/plugins, by the link and where it leads: the
        // dotfiles repository holds it.
        let plugins = dotfiles.join("opencode/plugins");
        let opencode_holds = "which holds opencode's config folder: its settings and plugins, \
                              which opencode runs at its start; a cage's project is mounted \
                              read-write: give it a project folder of its own";
        for p in [home.join(".config/opencode/plugins"), plugins.clone()] {
            assert_eq!(
                refused(&p),
                format!(
                    "{} is inside {}, {opencode_holds}",
                    r(&plugins),
                    r(&dotfiles.join("opencode"))
                )
            );
        }
        assert_eq!(
            refused(&dotfiles),
            format!(
                "{} holds {}, {opencode_holds}",
                r(&dotfiles),
                r(&dotfiles.join("opencode"))
            )
        );
        let storage = home.join("data/opencode/storage");
        assert_eq!(
            refused(&storage),
            format!(
                "{} is inside {}, which holds opencode's data folder: its login and every \
                 project's sessions; a cage's project is mounted read-write: give it a project \
                 folder of its own",
                r(&storage),
                r(&home.join("data/opencode"))
            )
        );
        // A folder beside them is a project like any other.
        let project = root.join("elsewhere/web");
        fs::create_dir_all(&project).unwrap();
        assert!(check_kept_out(&fs::canonicalize(&project).unwrap(), &home, &folders, &[]).is_ok());
        // Without them, the folders were accepted: what the check adds.
        assert!(check_kept_out(&fs::canonicalize(&plugins).unwrap(), &home, &[], &[]).is_ok());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn no_cage_is_given_a_folder_kept_out_or_a_file_the_machine_obeys() {
        let root = temp("kept");
        let home = root.join("home/u");
        let project = home.join("dotfiles");
        fs::create_dir_all(&project).unwrap();
        let project = fs::canonicalize(&project).unwrap();
        for (folder, _) in KEPT_OUT {
            for p in [home.join(folder), home.join(folder).join("deeper")] {
                fs::create_dir_all(&p).unwrap();
                let p = fs::canonicalize(&p).unwrap();
                let e = check_kept_out(&p, &home, &[], &[]).unwrap_err();
                assert_eq!(e.kind, crate::error::Kind::BadInput, "{}", p.display());
                assert!(e.message().contains(folder), "{}", e.message());
            }
        }
        assert!(check_kept_out(&project, &home, &[], &[]).is_ok());
        // A folder that holds one: ~/.config holds ~/.config/gh.
        let config_dir = fs::canonicalize(home.join(".config")).unwrap();
        let e = check_kept_out(&config_dir, &home, &[], &[]).unwrap_err();
        assert!(e.message().contains("holds"), "{}", e.message());
        // A guarded file not made yet, where the project would hold it.
        let e =
            check_kept_out(&project, &home, &[], &[project.join("later/config.toml")]).unwrap_err();
        assert!(e.message().contains("later/config.toml"), "{}", e.message());
        // The config, a link into the project (a dotfiles setup).
        fs::write(project.join("config.toml"), "").unwrap();
        let config = home.join(".config/shrooms-agent/config.toml");
        std::os::unix::fs::symlink(project.join("config.toml"), &config).unwrap();
        let e = check_kept_out(&project, &home, &[], std::slice::from_ref(&config)).unwrap_err();
        assert!(e.message().contains("where"), "{}", e.message());
        // A guarded file elsewhere, or one that does not exist, is no reason.
        let elsewhere = root.join("token");
        fs::write(&elsewhere, "t").unwrap();
        assert!(check_kept_out(&project, &home, &[], &[elsewhere, root.join("none")]).is_ok());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn tokens() {
        let root = temp("token");
        let t = root.join("tok");
        let e = read_token(&t).unwrap_err();
        assert!(
            e.message().contains("claude setup-token")
                && e.message().contains("install -m 600 /dev/stdin")
        );
        fs::write(&t, "secret\n").unwrap();
        fs::set_permissions(&t, fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_token(&t).unwrap_err();
        assert!(
            e.message().contains(&format!("chmod 600 {}", t.display())),
            "{}",
            e.message()
        );
        fs::set_permissions(&t, fs::Permissions::from_mode(0o602)).unwrap();
        assert!(
            read_token(&t)
                .unwrap_err()
                .message()
                .contains("changed by others")
        );
        fs::set_permissions(&t, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_token(&t).unwrap(), "secret");
        fs::write(&t, "  \n").unwrap();
        assert!(read_token(&t).unwrap_err().message().contains("is empty"));
        fs::remove_dir_all(root).unwrap();
    }
}

/// What was copied of a conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CopiedConversation {
    pub files: usize,
    /// Bytes copied, in all.
    pub bytes: u64,
    /// Names not copied (links, devices, anything not a regular file).
    pub skipped: Vec<String>,
}

/// A conversation id as Claude Code names them: letters, digits, - and _
/// (no path: it names a file of the project's folder only).
pub fn check_conversation_id(id: &str) -> Result<()> {
    let id_ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if id_ok {
        Ok(())
    } else {
        Err(Error::conversation(id, ConversationProblem::NotAnId))
    }
}

/// Copy one Claude Code conversation into a sealed cage's config folder
/// once, and no other conversation, so that the code under review can read
/// only the session's own: `<from>/<id>.jsonl` and `<from>/<id>/`, regular files only, no
/// link followed (each file is opened with O_NOFOLLOW).
pub fn copy_conversation(from: &Path, id: &str, to: &Path) -> Result<CopiedConversation> {
    check_conversation_id(id)?;
    // Everything below `from` is opened by descriptor, never by path: an
    // ordinary cage on the same project writes in `from`, and could put a
    // link in place of a folder between a check and a read.
    let transcript = from.join(format!("{id}.jsonl"));
    let missing = || {
        let transcript = transcript.clone();
        Error::conversation(id, ConversationProblem::Missing { transcript })
    };
    let root = crate::cage::pack::open_dir(from).map_err(|_| missing())?;
    let name = std::ffi::OsString::from(format!("{id}.jsonl"));
    let src =
        crate::cage::pack::open_at(&root, &name, rustix::fs::OFlags::NONBLOCK).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                let transcript = transcript.clone();
                Error::conversation(id, ConversationProblem::NotAFile { transcript })
            } else {
                missing()
            }
        })?;
    crate::state::session::make_private_dir(to)?;
    let mut copied = CopiedConversation::default();
    copied.bytes += copy_open_file(src, &to.join(&name), MAX_COPY)
        .map_err(|e| e.context(Doing::At(transcript.to_path_buf())))?;
    copied.files += 1;
    if let Ok(beside) = crate::cage::pack::open_at(
        &root,
        std::ffi::OsStr::new(id),
        rustix::fs::OFlags::DIRECTORY,
    ) {
        copy_tree(&beside, &to.join(id), id, 0, &mut copied)?;
    }
    Ok(copied)
}

/// A conversation copied into a sealed cage is at most this many files and
/// bytes: an ordinary cage on the same project writes the folder, and could
/// make it grow without end and fill the state folder's disk.
const MAX_COPY_FILES: usize = 10_000;
const MAX_COPY: u64 = 1024 * 1024 * 1024;

fn copy_tree(
    from: &std::fs::File,
    to: &Path,
    rel: &str,
    depth: usize,
    copied: &mut CopiedConversation,
) -> Result<()> {
    const MAX_DEPTH: usize = 16;
    const MAX_NAMES: usize = 100_000;
    if depth > MAX_DEPTH {
        copied
            .skipped
            .push(format!("{rel} (deeper than {MAX_DEPTH} levels)"));
        return Ok(());
    }
    crate::state::session::make_private_dir(to)?;
    let (names, _) = crate::cage::pack::list(from, MAX_NAMES)
        .map_err(|e| Error::act(Doing::Read(rel.into()), &e))?;
    for (name, listed) in names {
        let rel_name = format!("{rel}/{}", name.to_string_lossy());
        if copied.files >= MAX_COPY_FILES || copied.bytes >= MAX_COPY {
            copied.skipped.push(format!(
                "{rel_name} (over {MAX_COPY_FILES} files or {} MiB in all)",
                MAX_COPY / 1024 / 1024
            ));
            continue;
        }
        // What the listing says is neither a file nor a folder (a FIFO, a
        // device node a cage made) is not even opened.
        if listed.is_some_and(|t| {
            !matches!(
                t,
                crate::cage::pack::Type::File | crate::cage::pack::Type::Dir
            )
        }) {
            copied.skipped.push(rel_name);
            continue;
        }
        // A folder opens with O_DIRECTORY, a file without; a link opens as
        // neither (O_NOFOLLOW: ELOOP) and is skipped.
        if let Ok(dir) = crate::cage::pack::open_at(from, &name, rustix::fs::OFlags::DIRECTORY) {
            copy_tree(&dir, &to.join(&name), &rel_name, depth + 1, copied)?;
            continue;
        }
        let room = MAX_COPY - copied.bytes;
        match crate::cage::pack::open_at(from, &name, rustix::fs::OFlags::NONBLOCK)
            .map_err(|e| Error::act(Doing::Open((&rel_name).into()), &e))
            .and_then(|f| copy_open_file(f, &to.join(&name), room))
        {
            Ok(n) => {
                copied.files += 1;
                copied.bytes += n;
            }
            Err(_) => copied.skipped.push(rel_name),
        }
    }
    Ok(())
}

/// Copy an opened file, if it is a regular one of at most `room` bytes, to
/// a new file (0600): as long as it was when opened, however it grows
/// meanwhile. Returns the bytes copied.
fn copy_open_file(src: std::fs::File, to: &Path, room: u64) -> Result<u64> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let meta = src
        .metadata()
        .map_err(|e| Error::act("reading the file's metadata", &e))?;
    if !meta.is_file() {
        return Err(Error::failed("not a regular file, so it is not copied"));
    }
    if meta.len() > room {
        return Err(Error::failed(format!(
            "{} bytes, over what is left of the {} MiB copied in all",
            meta.len(),
            MAX_COPY / 1024 / 1024
        )));
    }
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)
        .map_err(|e| Error::act(Doing::Write(to.to_path_buf()), &e))?;
    std::io::copy(&mut src.take(meta.len()), &mut dst)
        .map_err(|e| Error::act(Doing::CopyTo(to.to_path_buf()), &e))
}

#[cfg(test)]
mod conversation_tests {
    use super::*;
    use std::fs;

    #[test]
    fn one_conversation_regular_files_only() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().to_path_buf();
        let from = root.join("projects/-p");
        fs::create_dir_all(from.join("abc/subagents")).unwrap();
        fs::write(from.join("abc.jsonl"), "mine").unwrap();
        fs::write(from.join("abc/subagents/agent-1.jsonl"), "sub").unwrap();
        fs::write(from.join("other.jsonl"), "not mine").unwrap();
        fs::write(root.join("secret"), "secret").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), from.join("abc/link")).unwrap();
        let to = root.join("sealed/projects/-p");
        let c = copy_conversation(&from, "abc", &to).unwrap();
        assert_eq!(c.files, 2);
        assert_eq!(c.skipped, vec!["abc/link".to_string()]);
        assert_eq!(fs::read_to_string(to.join("abc.jsonl")).unwrap(), "mine");
        assert_eq!(
            fs::read_to_string(to.join("abc/subagents/agent-1.jsonl")).unwrap(),
            "sub"
        );
        assert!(!to.join("other.jsonl").exists());
        assert!(fs::symlink_metadata(to.join("abc/link")).is_err());
        // a transcript that is a link is refused, not followed
        std::os::unix::fs::symlink(root.join("secret"), from.join("lnk.jsonl")).unwrap();
        assert!(copy_conversation(&from, "lnk", &root.join("x")).is_err());
        assert!(copy_conversation(&from, "../x", &root.join("x")).is_err());
        assert!(copy_conversation(&from, "missing", &root.join("x")).is_err());
        // the folder beside a transcript, a link to elsewhere: not followed;
        // a FIFO in the folder is not even opened (it would block)
        fs::create_dir_all(root.join("secretdir")).unwrap();
        fs::write(root.join("secretdir/key"), "key").unwrap();
        fs::write(from.join("def.jsonl"), "def").unwrap();
        std::os::unix::fs::symlink(root.join("secretdir"), from.join("def")).unwrap();
        let to2 = root.join("sealed2");
        let c = copy_conversation(&from, "def", &to2).unwrap();
        assert_eq!(c.files, 1);
        assert!(!to2.join("def").exists());
        rustix::fs::mknodat(
            rustix::fs::CWD,
            from.join("abc/pipe"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let c = copy_conversation(&from, "abc", &root.join("sealed3")).unwrap();
        assert!(
            c.skipped.contains(&"abc/pipe".to_string()),
            "{:?}",
            c.skipped
        );
        // at most MAX_COPY_FILES files: a folder a cage filled is cut short
        fs::write(from.join("many.jsonl"), "t").unwrap();
        fs::create_dir_all(from.join("many")).unwrap();
        for i in 0..MAX_COPY_FILES + 5 {
            fs::write(from.join(format!("many/{i}")), "").unwrap();
        }
        let c = copy_conversation(&from, "many", &root.join("sealed4")).unwrap();
        assert_eq!(c.files, MAX_COPY_FILES);
        assert_eq!(c.skipped.len(), 6, "{:?}", &c.skipped[..3]);
        fs::remove_dir_all(root).unwrap();
    }
}
