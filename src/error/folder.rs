//! A project folder refused for a cage, and why, as data: what it is, is
//! inside or holds (the home, the state folder, a folder kept out of
//! cages, a file this program reads, what a cage gets mounted), and the
//! sessions it would share ground with.

use std::path::{Path, PathBuf};

use super::Face;

/// Why a folder a cage writes must not be one the machine keeps: the
/// words that follow what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mounted {
    /// Any cage's project.
    Any,
    /// A sealed cage's.
    Sealed,
}

/// Pure: the words of a folder that is no folder of the user's own.
fn not_own_words(dir: &Path, what: &NotOwn) -> String {
    let d = dir.display();
    let is = match what {
        NotOwn::SharedTemporary => "a temporary folder every user of this machine shares: a cage \
                                    there could write to what other programs keep in it, such \
                                    as tmux's socket in /tmp/tmux-UID, a way out of the cage"
            .to_string(),
        NotOwn::Runtime { rt, holds } => format!(
            "{} your runtime folder {} ($XDG_RUNTIME_DIR), with the sockets of your session's \
             programs: a cage there could drive them, a way out of the cage",
            if *holds { "a folder holding" } else { "in" },
            rt.display()
        ),
        NotOwn::RuntimeTree { tree, inside } => format!(
            "{}{tree}, the system's and every user's runtime files, not a folder of your own",
            if *inside { "in " } else { "" }
        ),
        NotOwn::SystemTree => "a tree of the system, not a folder of your own".to_string(),
    };
    let or_below = if *what == NotOwn::SharedTemporary {
        format!(" or {d}/<project>")
    } else {
        String::new()
    };
    format!(
        "{d} is {is}; a cage's project is mounted read-write: give it a folder of your own, such \
         as a new folder in your home directory{or_below}"
    )
}

/// Pure: the words of a folder that is no project for a cage made as root.
fn root_not_own_words(dir: &Path, what: &RootNotOwn) -> String {
    let is = match what {
        RootNotOwn::Home { name, home, holds } => format!(
            "{} {name}'s home {}",
            if *holds { "a folder holding" } else { "in" },
            home.display()
        ),
        RootNotOwn::SystemTree { tree } => {
            format!("in {tree}, a tree of the machine's own programs, configuration and data")
        }
        RootNotOwn::OthersFolder { uid } => format!("a folder of uid {uid}'s, not root's"),
    };
    format!(
        "{} is {is}; as root, a cage's project is a folder root owns, outside the system's trees \
         and other users' homes, since the cage writes it and is given it at each start: make \
         one (such as /root/<project>, or /srv/<project>) and give that",
        dir.display()
    )
}

impl Mounted {
    fn words(self) -> &'static str {
        match self {
            Mounted::Any => "the project is mounted read-write, where the cage can write",
            Mounted::Sealed => {
                "a sealed cage's project is mounted read-write, where the code under review can \
                 write"
            }
        }
    }
}

/// What makes a folder no folder of the user's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotOwn {
    /// A temporary folder every user shares (`/tmp` itself).
    SharedTemporary,
    /// In the user's runtime folder (`rt`), or holding it (`holds`).
    Runtime { rt: PathBuf, holds: bool },
    /// `/run`, `/proc` or `/sys` (`tree`), or `inside` one.
    RuntimeTree { tree: &'static str, inside: bool },
    /// A tree of the system itself (`/usr`, ...).
    SystemTree,
}

/// What makes a folder no project for a cage made as root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootNotOwn {
    /// In user `name`'s home `home`, or holding it (`holds`).
    Home {
        name: String,
        home: PathBuf,
        holds: bool,
    },
    /// In a tree of the machine's own (`tree`).
    SystemTree { tree: String },
    /// A folder of another user's (`uid`).
    OthersFolder { uid: u32 },
}

/// What makes a project folder no folder for a cage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FolderProblem {
    /// Not a folder of the user's own.
    NotOwn(NotOwn),
    /// As root, not a folder of root's own.
    RootNotOwn(RootNotOwn),
    /// The home directory itself (`holds`: a folder above it).
    Home { holds: bool, mounted: Mounted },
    /// It holds or is inside this program's state folder.
    StateFolder { state: PathBuf, mounted: Mounted },
    /// Inside a hidden folder of the home (a sealed cage's).
    InHidden { hidden: PathBuf },
    /// It holds a folder that marks a home (`.ssh`, ...; a sealed cage's).
    HomeMark { mark: &'static str },
    /// It is, is inside or holds a folder of the home kept out of every
    /// cage, which holds what `holds` says.
    KeptOut { path: PathBuf, holds: &'static str },
    /// It holds a file this program reads (`real`, where `file` leads).
    Guarded { real: PathBuf, file: PathBuf },
    /// It is, is inside or holds the folder a session on the other side
    /// of a seal works in.
    SealNeighbour {
        other: String,
        other_dir: PathBuf,
        other_sealed: bool,
    },
    /// It is, is inside or holds the folder sealed session `session`
    /// worked in (for an ordinary cage).
    Untrusted { path: PathBuf, session: String },
    /// It holds what the cage gets mounted from outside (`led_to`, where
    /// `src` leads).
    HoldsMount { led_to: PathBuf, src: PathBuf },
    /// It holds what session `other`'s cage mounts.
    HoldsOthersMount { path: PathBuf, other: String },
    /// It is inside or above session `other`'s project.
    Overlaps { other: String, other_dir: PathBuf },
    /// It cannot be used at all (it is not there, or not to be read): the
    /// error of the look.
    Unusable { cause: super::Cause },
    /// It is not a folder.
    NotAFolder,
    /// Its path is not UTF-8.
    NotUtf8,
    /// No session has it as its project folder (`cage run` without a
    /// name, there).
    NoSessionHere,
    /// These sessions all have it as their project folder.
    SessionsHere { sessions: Vec<String> },
}

/// Pure: how `dir` stands to `path`: is it, is inside it, or holds it.
fn relation(dir: &Path, path: &Path) -> &'static str {
    if dir == path {
        "is"
    } else if dir.starts_with(path) {
        "is inside"
    } else {
        "holds"
    }
}

/// Pure: " (where FILE leads)" when a link led from `file` to `real`.
fn leads(real: &Path, file: &Path) -> String {
    if real == file {
        String::new()
    } else {
        format!(" (where {} leads)", file.display())
    }
}

/// Pure: the words of a folder shared with a session on the other side of
/// a seal.
fn seal_neighbour(other: &str, other_dir: &Path, other_sealed: bool) -> String {
    format!(
        "session {other} works in {}{}; what the code under review leaves there would run in {}: \
         give the review a folder of its own (clone again), or remove session {other} first",
        other_dir.display(),
        if other_sealed {
            ", sealed"
        } else {
            ", not sealed"
        },
        if other_sealed { "this cage" } else { "it" }
    )
}

/// Pure: the words of an ordinary cage's folder where a sealed session
/// worked.
fn untrusted(dir: &Path, path: &Path, session: &str, face: Face) -> String {
    format!(
        "{} {} {}, where sealed session {session} worked; the folder is untrusted after a sealed \
         session: what the code under review left there (a git hook, a Makefile, an .envrc) \
         would run in an ordinary cage, with your settings and network. Read it, then delete it \
         or clone again; to give it an ordinary cage all the same, pass {}",
        dir.display(),
        relation(dir, path),
        path.display(),
        face.machine_option("--unseal")
    )
}

/// Pure: the words of `cage run` without a name in `dir`, where these
/// sessions (none, or several) have it as their project folder.
fn run_here(dir: &Path, sessions: &[String]) -> String {
    let d = dir.display();
    if sessions.is_empty() {
        format!(
            "no session has {d} as its project folder, so `cage run` without a name has nothing \
             to run: give the session's name (`shrooms-agent cage ls` lists them), cd to its \
             project folder, or make one here with `shrooms-agent cage create NAME`"
        )
    } else {
        format!(
            "{} sessions have {d} as their project folder ({}): give the name of the one to run, \
             `shrooms-agent cage run NAME`",
            sessions.len(),
            sessions.join(", ")
        )
    }
}

impl FolderProblem {
    /// The field of the request it is about: the folder given, where it
    /// is no folder at all.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            FolderProblem::Unusable { .. } | FolderProblem::NotAFolder => Some("dir"),
            _ => None,
        }
    }

    pub(super) fn words(&self, dir: &Path, face: Face) -> String {
        let d = dir.display();
        match self {
            FolderProblem::NotOwn(what) => not_own_words(dir, what),
            FolderProblem::RootNotOwn(what) => root_not_own_words(dir, what),
            FolderProblem::Home { holds, mounted } => format!(
                "{d} {} your home directory; {}: give it a project folder of its own",
                if *holds { "holds" } else { "is" },
                mounted.words()
            ),
            FolderProblem::StateFolder { state, mounted } => format!(
                "{d} holds or is inside shrooms-agent's state folder {}, with every cage's keys; \
                 {}: give it a project folder of its own",
                state.display(),
                mounted.words()
            ),
            FolderProblem::InHidden { hidden } => format!(
                "{d} is inside {}, a hidden folder of your home, where settings and keys live; \
                 {}: give it a project folder of its own",
                hidden.display(),
                Mounted::Sealed.words()
            ),
            FolderProblem::HomeMark { mark } => format!(
                "{d} holds {mark}, like a home directory; {}: give it a folder without it",
                Mounted::Sealed.words()
            ),
            FolderProblem::KeptOut { path, holds } => format!(
                "{d} {} {}, which holds {holds}; a cage's project is mounted read-write: give it \
                 a project folder of its own",
                relation(dir, path),
                path.display()
            ),
            FolderProblem::Guarded { real, file } => format!(
                "{d} holds {}{}, which shrooms-agent reads and a cage could change; give it a \
                 project folder without it, or keep that file elsewhere",
                real.display(),
                leads(real, file)
            ),
            FolderProblem::SealNeighbour {
                other,
                other_dir,
                other_sealed,
            } => seal_neighbour(other, other_dir, *other_sealed),
            FolderProblem::Untrusted { path, session } => untrusted(dir, path, session, face),
            FolderProblem::Unusable { cause } => format!(
                "the project folder {d} cannot be used: {}; {} must name an existing folder",
                cause.said,
                face.field("dir")
            ),
            FolderProblem::NotAFolder => format!(
                "{d} is not a folder; {} must name an existing folder",
                face.field("dir")
            ),
            FolderProblem::NotUtf8 => format!("the project folder {d} is not valid UTF-8"),
            FolderProblem::NoSessionHere => run_here(dir, &[]),
            FolderProblem::SessionsHere { sessions } => run_here(dir, sessions),
            FolderProblem::HoldsMount { led_to, src } => format!(
                "{d} holds {}{}, which the cage gets mounted from outside; a cage could put a \
                 link in its place: give it a project folder without it",
                led_to.display(),
                leads(led_to, src)
            ),
            FolderProblem::HoldsOthersMount { path, other } => format!(
                "{d} holds {}, which session {other}'s cage mounts; a cage could put a link in \
                 its place: give it a project folder without it",
                path.display()
            ),
            FolderProblem::Overlaps { other, other_dir } => format!(
                "{d} is {} {}, the project of session {other}; a cage could put a link in place \
                 of a folder the other mounts: give both the same folder, or folders side by side",
                if dir.starts_with(other_dir) {
                    "inside"
                } else {
                    "above"
                },
                other_dir.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each refusal in the words it had when it was made as a sentence
    /// where it was found; a link that led elsewhere is named.
    #[test]
    fn every_folder_refusal_is_worded_as_before() {
        assert_eq!(
            Error::folder(
                Path::new("/usr/lib"),
                FolderProblem::RootNotOwn(RootNotOwn::SystemTree {
                    tree: "/usr".into()
                })
            )
            .message(),
            "/usr/lib is in /usr, a tree of the machine's own programs, configuration and data; as \
             root, a cage's project is a folder root owns, outside the system's trees and other \
             users' homes, since the cage writes it and is given it at each start: make one (such \
             as /root/<project>, or /srv/<project>) and give that"
        );
        assert_eq!(
            Error::folder(Path::new("/usr"), FolderProblem::NotOwn(NotOwn::SystemTree)).message(),
            "/usr is a tree of the system, not a folder of your own; a cage's project is mounted \
             read-write: give it a folder of your own, such as a new folder in your home directory"
        );
        let dir = Path::new("/home/u/p");
        let w = |p: FolderProblem| Error::folder(dir, p).message();
        let p = PathBuf::from;
        assert_eq!(
            Error::folder(
                Path::new("/tmp"),
                FolderProblem::NotOwn(NotOwn::SharedTemporary)
            )
            .message(),
            "/tmp is a temporary folder every user of this machine shares: a cage there could \
             write to what other programs keep in it, such as tmux's socket in /tmp/tmux-UID, a \
             way out of the cage; a cage's project is mounted read-write: give it a folder of \
             your own, such as a new folder in your home directory or /tmp/<project>"
        );
        assert_eq!(
            w(FolderProblem::NotOwn(NotOwn::Runtime {
                rt: p("/run/user/1"),
                holds: true
            })),
            "/home/u/p is a folder holding your runtime folder /run/user/1 ($XDG_RUNTIME_DIR), \
             with the sockets of your session's programs: a cage there could drive them, a way \
             out of the cage; a cage's project is mounted read-write: give it a folder of your \
             own, such as a new folder in your home directory"
        );
        assert_eq!(
            w(FolderProblem::NotOwn(NotOwn::RuntimeTree {
                tree: "/run",
                inside: true
            })),
            "/home/u/p is in /run, the system's and every user's runtime files, not a folder of \
             your own; a cage's project is mounted read-write: give it a folder of your own, \
             such as a new folder in your home directory"
        );
        assert_eq!(
            w(FolderProblem::RootNotOwn(RootNotOwn::Home {
                name: "u".into(),
                home: p("/home/u"),
                holds: false
            })),
            "/home/u/p is in u's home /home/u; as root, a cage's project is a folder root owns, \
             outside the system's trees and other users' homes, since the cage writes it and is \
             given it at each start: make one (such as /root/<project>, or /srv/<project>) and \
             give that"
        );
        assert_eq!(
            Error::folder(
                dir,
                FolderProblem::RootNotOwn(RootNotOwn::OthersFolder { uid: 5 })
            )
            .kind
            .exit_code(),
            2
        );
        assert_eq!(
            w(FolderProblem::Home {
                holds: true,
                mounted: Mounted::Any
            }),
            "/home/u/p holds your home directory; the project is mounted read-write, where the \
             cage can write: give it a project folder of its own"
        );
        assert_eq!(
            w(FolderProblem::StateFolder {
                state: p("/home/u/p/s"),
                mounted: Mounted::Sealed
            }),
            "/home/u/p holds or is inside shrooms-agent's state folder /home/u/p/s, with every \
             cage's keys; a sealed cage's project is mounted read-write, where the code under \
             review can write: give it a project folder of its own"
        );
        assert_eq!(
            w(FolderProblem::KeptOut {
                path: p("/home/u"),
                holds: "your SSH keys"
            }),
            "/home/u/p is inside /home/u, which holds your SSH keys; a cage's project is mounted \
             read-write: give it a project folder of its own"
        );
        assert_eq!(
            w(FolderProblem::Guarded {
                real: p("/home/u/p/c.toml"),
                file: p("/home/u/.config/c.toml")
            }),
            "/home/u/p holds /home/u/p/c.toml (where /home/u/.config/c.toml leads), which \
             shrooms-agent reads and a cage could change; give it a project folder without it, \
             or keep that file elsewhere"
        );
        assert_eq!(
            w(FolderProblem::SealNeighbour {
                other: "rev".into(),
                other_dir: p("/home/u/p/x"),
                other_sealed: true
            }),
            "session rev works in /home/u/p/x, sealed; what the code under review leaves there \
             would run in this cage: give the review a folder of its own (clone again), or \
             remove session rev first"
        );
        let untrusted = Error::folder(
            dir,
            FolderProblem::Untrusted {
                path: p("/home/u/p"),
                session: "rev".into(),
            },
        );
        assert!(untrusted.message().starts_with(
            "/home/u/p is /home/u/p, where sealed session rev worked; the folder is untrusted"
        ));
        assert!(untrusted.message().ends_with("pass --unseal"));
        assert!(
            untrusted
                .words(Face::Http)
                .ends_with("pass `--unseal` (on the command line, at the machine)")
        );
        assert_eq!(
            w(FolderProblem::Overlaps {
                other: "web".into(),
                other_dir: p("/home/u")
            }),
            "/home/u/p is inside /home/u, the project of session web; a cage could put a link in \
             place of a folder the other mounts: give both the same folder, or folders side by side"
        );
        assert_eq!(
            w(FolderProblem::SessionsHere {
                sessions: vec!["a".into(), "b".into()]
            }),
            "2 sessions have /home/u/p as their project folder (a, b): give the name of the one \
             to run, `shrooms-agent cage run NAME`"
        );
        assert!(
            w(FolderProblem::NoSessionHere)
                .starts_with("no session has /home/u/p as its project folder, so `cage run`")
        );
        let e = Error::folder(dir, FolderProblem::NotAFolder);
        assert_eq!(
            e.message(),
            "/home/u/p is not a folder; --dir must name an existing folder"
        );
        assert_eq!(e.field(), Some("dir"));
        let cause = super::super::Cause::of(&std::io::Error::from(std::io::ErrorKind::NotFound));
        let e = Error::folder(dir, FolderProblem::Unusable { cause });
        assert!(
            e.message()
                .starts_with("the project folder /home/u/p cannot be used: ")
                && e.message()
                    .ends_with("; --dir must name an existing folder"),
            "{}",
            e.message()
        );
        assert_eq!(
            Error::folder(dir, FolderProblem::HomeMark { mark: ".ssh" })
                .kind
                .exit_code(),
            2
        );
    }
}
