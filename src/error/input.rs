//! A word of the command line, a path, a name or a variable of the
//! environment refused before anything was done with it, and why. All bad
//! input (exit 2).

use std::ffi::OsString;
use std::path::PathBuf;

/// Why the current folder was wanted, for the words of one that cannot be
/// read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CwdFor {
    /// As the project of a new cage (no `--dir`).
    Project,
    /// To find the session it holds (no session named).
    Session,
}

/// What is wrong with `--by`, who a history entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByProblem {
    Empty,
    Control,
    TooLong { max: usize },
}

/// What was refused, and what it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputProblem {
    /// A word of a command to run that is not UTF-8.
    ArgNotUtf8 { arg: OsString },
    /// A shell clap knows and this program has no completions for.
    NoCompletions { shell: String },
    /// The current folder, wanted `for` something, cannot be read.
    CwdUnreadable { cause: String, for_: CwdFor },
    /// A project folder given neither absolute nor under the home.
    DirNotAbsolute { dir: String },
    /// A path to mount that is not UTF-8.
    PathNotUtf8 { path: PathBuf },
    /// A path to mount that is not absolute or not on one line.
    PathNotMountable { path: String },
    /// An image reference podman could not read.
    NotImageName { image: String },
    /// A variable of the environment naming a path, given a relative one.
    RelativeVariable { name: String, value: String },
    /// A word with a NUL byte, which no shell can be given.
    ShellNul { word: String, cause: String },
    /// `--by`, refused.
    By { who: String, problem: ByProblem },
    /// Run as root without `allow_root` in the config file `config`.
    AsRoot { config: PathBuf },
    /// Not `MACHINE/SESSION` (nor `MACHINE/*`, where `wildcard` allows it).
    NotASender { text: String, wildcard: bool },
    /// `cage prune` without `--yes` and no terminal to ask on (`would`:
    /// what it would remove, counted).
    PruneUnasked { would: String },
    /// A move's body that says neither a cage nor none.
    MoveWhere,
    /// A command line clap could not take: what was wrong, clap's tips and
    /// the usage, in clap's words.
    Usage {
        what: String,
        tips: Vec<String>,
        usage: Option<String>,
    },
    /// An image to build that is none of ours (`workbench`, `desktop`:
    /// the names of ours).
    NotOurImage {
        image: String,
        workbench: String,
        desktop: String,
    },
}

impl InputProblem {
    pub(super) fn words(&self) -> String {
        match self {
            InputProblem::ArgNotUtf8 { arg } => {
                format!("the argument {arg:?} is not valid UTF-8")
            }
            InputProblem::NoCompletions { shell } => {
                format!("no completions for {shell}: bash, zsh, fish, elvish or powershell")
            }
            InputProblem::CwdUnreadable { cause, for_ } => format!(
                "the current folder cannot be read ({cause}): {}",
                match for_ {
                    CwdFor::Project => "pass --dir with the project folder",
                    CwdFor::Session => "give the session's name",
                }
            ),
            InputProblem::DirNotAbsolute { dir } => format!(
                "dir {dir:?}: give the project folder as an absolute path, or under the home as \
                 ~/..."
            ),
            InputProblem::PathNotUtf8 { path } => format!(
                "the path {} is not valid UTF-8, which podman's --mount cannot carry",
                path.display()
            ),
            InputProblem::PathNotMountable { path } => {
                format!("the path {path:?} cannot be mounted: it must be absolute and on one line")
            }
            InputProblem::NotImageName { image } => format!(
                "{image:?} is not an image name: give one like \"localhost/mine:1\" or \
                 \"docker.io/library/debian:bookworm\" (lowercase letters, digits and `._-` \
                 between the `/`, then an optional `:tag` or `@sha256:...`)"
            ),
            InputProblem::RelativeVariable { name, value } => format!(
                "{name} is {value:?}, a relative path: it would name another folder from every \
                 working folder; set it to an absolute path (starting with /), or unset it"
            ),
            InputProblem::ShellNul { word, cause } => {
                format!("{word:?} cannot be given to a shell ({cause}): leave the NUL byte out")
            }
            InputProblem::PruneUnasked { would } => format!(
                "cage prune removed nothing: it asks before it removes, and there is no terminal \
                 to ask on. It would remove {would}; pass --yes to remove them, or --dry-run to \
                 list them"
            ),
            InputProblem::Usage { what, tips, usage } => {
                let tips: String = tips.iter().map(|t| format!("; tip: {t}")).collect();
                let usage = usage
                    .as_ref()
                    .map(|u| format!("; usage: {u}"))
                    .unwrap_or_default();
                format!("{what}{tips}{usage}")
            }
            InputProblem::MoveWhere => "say where: {\"cage\": {...}} for a cage with those \
                                        options, {\"cage\": null} to take it out"
                .to_string(),
            InputProblem::NotOurImage {
                image,
                workbench,
                desktop,
            } => format!(
                "{image:?} is not an image of ours: give \"workbench\" or \"desktop\" ({workbench} \
                 or {desktop})"
            ),
            InputProblem::NotASender { text, wildcard } => format!(
                "{text:?} is not a sender: write it as MACHINE/SESSION{}",
                if *wildcard { " or MACHINE/*" } else { "" }
            ),
            InputProblem::AsRoot { config } => format!(
                "shrooms-agent runs as root, so its podman is rootful: podman and what it starts \
                 run as root, and each cage, in a user namespace of its own, is given its project \
                 (chowned to the cage's own uid at each start). Run shrooms-agent as your own \
                 user, with rootless podman (the user needs ranges in /etc/subuid and \
                 /etc/subgid); or, to accept that, set allow_root = true in {}",
                config.display()
            ),
            InputProblem::By { who, problem } => by_words(who, *problem),
        }
    }
}

/// Pure: the words of a refused `--by`.
fn by_words(who: &str, problem: ByProblem) -> String {
    let n = who.chars().count();
    let shown: String = who.chars().take(40).collect();
    let more = if n > 40 { "..." } else { "" };
    let why = match problem {
        ByProblem::Empty => {
            "is empty: say who, like --by alice, or leave --by out for your user name".to_string()
        }
        ByProblem::Control => "holds a control character (a line break, a tab, an escape): `cage \
                               history` prints an entry a line; give who on one line, in plain \
                               characters"
            .to_string(),
        ByProblem::TooLong { max } => format!("is {n} characters long; give at most {max}"),
    };
    format!("--by {shown:?}{more} {why}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each refusal in the words it had when it was made as a sentence
    /// where it was found; each bad input (exit 2).
    #[test]
    fn every_input_refusal_is_worded_as_before() {
        let w = |p| Error::input(p).message();
        assert_eq!(
            w(InputProblem::CwdUnreadable {
                cause: "No such file or directory (os error 2)".into(),
                for_: CwdFor::Project
            }),
            "the current folder cannot be read (No such file or directory (os error 2)): pass \
             --dir with the project folder"
        );
        assert_eq!(
            w(InputProblem::DirNotAbsolute { dir: "p".into() }),
            "dir \"p\": give the project folder as an absolute path, or under the home as ~/..."
        );
        assert_eq!(
            w(InputProblem::PathNotMountable {
                path: "a\nb".into()
            }),
            "the path \"a\\nb\" cannot be mounted: it must be absolute and on one line"
        );
        assert_eq!(
            w(InputProblem::RelativeVariable {
                name: "HOME".into(),
                value: "h".into()
            }),
            "HOME is \"h\", a relative path: it would name another folder from every working \
             folder; set it to an absolute path (starting with /), or unset it"
        );
        assert_eq!(
            w(InputProblem::By {
                who: "x".repeat(45),
                problem: ByProblem::TooLong { max: 40 }
            }),
            format!(
                "--by \"{}\"... is 45 characters long; give at most 40",
                "x".repeat(40)
            )
        );
        assert_eq!(
            w(InputProblem::By {
                who: " ".into(),
                problem: ByProblem::Empty
            }),
            "--by \" \" is empty: say who, like --by alice, or leave --by out for your user name"
        );
        assert_eq!(
            w(InputProblem::NotASender {
                text: "a".into(),
                wildcard: true
            }),
            "\"a\" is not a sender: write it as MACHINE/SESSION or MACHINE/*"
        );
        assert_eq!(
            w(InputProblem::PruneUnasked {
                would: "2 containers".into()
            }),
            "cage prune removed nothing: it asks before it removes, and there is no terminal to \
             ask on. It would remove 2 containers; pass --yes to remove them, or --dry-run to \
             list them"
        );
        assert_eq!(
            w(InputProblem::Usage {
                what: "unexpected argument '--x' found".into(),
                tips: vec!["to pass '--x' as a value, use '-- --x'".into()],
                usage: Some("shrooms-agent cage ls [OPTIONS]".into())
            }),
            "unexpected argument '--x' found; tip: to pass '--x' as a value, use '-- --x'; usage: \
             shrooms-agent cage ls [OPTIONS]"
        );
        assert_eq!(
            w(InputProblem::By {
                who: "a\tb".into(),
                problem: ByProblem::Control
            }),
            "--by \"a\\tb\" holds a control character (a line break, a tab, an escape): `cage \
             history` prints an entry a line; give who on one line, in plain characters"
        );
        assert_eq!(
            w(InputProblem::MoveWhere),
            "say where: {\"cage\": {...}} for a cage with those options, {\"cage\": null} to \
             take it out"
        );
        assert_eq!(
            w(InputProblem::NotOurImage {
                image: "x".into(),
                workbench: "w:1".into(),
                desktop: "d:1".into()
            }),
            "\"x\" is not an image of ours: give \"workbench\" or \"desktop\" (w:1 or d:1)"
        );
        assert_eq!(
            w(InputProblem::AsRoot {
                config: "/c.toml".into()
            }),
            "shrooms-agent runs as root, so its podman is rootful: podman and what it starts run \
             as root, and each cage, in a user namespace of its own, is given its project \
             (chowned to the cage's own uid at each start). Run shrooms-agent as your own user, \
             with rootless podman (the user needs ranges in /etc/subuid and /etc/subgid); or, to \
             accept that, set allow_root = true in /c.toml"
        );
        assert_eq!(
            w(InputProblem::NotImageName { image: "A".into() }),
            "\"A\" is not an image name: give one like \"localhost/mine:1\" or \
             \"docker.io/library/debian:bookworm\" (lowercase letters, digits and `._-` between \
             the `/`, then an optional `:tag` or `@sha256:...`)"
        );
        assert_eq!(
            Error::input(InputProblem::NoCompletions { shell: "x".into() })
                .kind
                .exit_code(),
            2
        );
    }
}
