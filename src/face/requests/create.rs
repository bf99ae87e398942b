//! `cage create` and `POST /v1/sessions`: a session recorded, its cage made.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use utoipa::ToSchema;

use crate::cage::harness::Harness;
use crate::error::{CwdFor, Error, InputProblem, Result};
use crate::face::cli::{CreateArgs, HarnessArg};
use crate::ops::create::CreateRequest;
use crate::ops::make::CageChoice;

impl TryFrom<CreateArgs> for CreateRequest {
    type Error = Error;

    fn try_from(a: CreateArgs) -> Result<CreateRequest> {
        // Without --dir: the folder it is run in, as a container tool's
        // users expect; refused as --dir would be, and said so.
        let dir_from_cwd = a.dir.is_none();
        let dir = match a.dir {
            Some(d) => d,
            None => std::env::current_dir().map_err(|e| {
                Error::input(InputProblem::CwdUnreadable {
                    cause: e.to_string(),
                    for_: CwdFor::Project,
                })
            })?,
        };
        Ok(CreateRequest {
            name: a.name,
            dir,
            dir_from_cwd,
            harness: match a.harness {
                HarnessArg::Claude => Harness::Claude,
                HarnessArg::Pi => Harness::Pi,
                HarnessArg::Codex => Harness::Codex,
                HarnessArg::Opencode => Harness::Opencode,
            },
            choice: CageChoice {
                unseal: a.unseal,
                ..CageChoice::try_from(a.cage)?
            },
            dry_run: a.dry_run,
            auto_approve: false,
        })
    }
}

/// The cage options over HTTP, as `cage create` takes them.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CageBody {
    /// The image; the config's `image` when left out.
    pub image: Option<String>,
    /// The machine's nix store, read-only.
    pub nix: Option<bool>,
    /// GitHub through the gateway: the machine's token added outside the cage.
    pub github: Option<bool>,
    /// A shared folder (podman volume) at /shared.
    pub shared: Option<bool>,
    /// Mesh networks to join.
    pub meshes: Option<Vec<String>>,
    /// A sealed cage: no network but the model's, an outbox for what leaves.
    pub sealed: Option<bool>,
    /// For a sealed cage: the Claude Code conversation of the project to
    /// bring in (its id: letters, digits, - and _), as `--conversation`.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,128}$")]
    pub conversation: Option<String>,
    /// The network policy, as `--net`: "open", "internet" or
    /// "allow:NAME,HOST:PORT,..."; left out, the config's `net`.
    pub net: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    /// The session's name.
    #[schema(pattern = "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")]
    pub name: String,
    /// The project folder: absolute, or under the home as `~/...`.
    pub dir: String,
    pub harness: Option<Harness>,
    pub auto_approve: Option<bool>,
    /// The cage's options; left out, the defaults (what `cage create`
    /// gives without options: a cage unless the config has `cages = false`).
    pub cage: Option<CageBody>,
}

/// A create over HTTP: its body, and the home its `dir` may be under.
impl TryFrom<(CreateBody, &Path)> for CreateRequest {
    type Error = Error;

    fn try_from((body, home): (CreateBody, &Path)) -> Result<CreateRequest> {
        let dir = project_dir(home, &body.dir)?;
        Ok(CreateRequest {
            name: body.name,
            dir,
            harness: body.harness.unwrap_or(Harness::Claude),
            choice: CageChoice::try_from(body.cage.unwrap_or_default())?,
            dry_run: false,
            auto_approve: body.auto_approve.unwrap_or(false),
            dir_from_cwd: false,
        })
    }
}

/// `dir`: absolute, or under the home with `~/`.
fn project_dir(home: &Path, dir: &str) -> Result<PathBuf> {
    if dir == "~" {
        return Ok(home.to_path_buf());
    }
    if let Some(rest) = dir.strip_prefix("~/") {
        return Ok(home.join(rest));
    }
    if dir.starts_with('/') {
        return Ok(PathBuf::from(dir));
    }
    Err(Error::input(InputProblem::DirNotAbsolute {
        dir: dir.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirs_absolute_or_under_home() {
        let home = Path::new("/home/u");
        assert_eq!(
            project_dir(home, "~/src/webapp").unwrap(),
            PathBuf::from("/home/u/src/webapp")
        );
        assert_eq!(project_dir(home, "~").unwrap(), PathBuf::from("/home/u"));
        assert_eq!(
            project_dir(home, "/srv/x").unwrap(),
            PathBuf::from("/srv/x")
        );
        for bad in ["src", "~other/x", ""] {
            assert_eq!(
                project_dir(home, bad).unwrap_err().kind,
                crate::error::Kind::BadInput,
                "{bad:?}"
            );
        }
    }

    /// The command line and a body asking for the same cage make the same
    /// request.
    #[test]
    fn the_flags_and_the_body_make_one_request() {
        use clap::Parser;
        let cli = crate::face::cli::Cli::try_parse_from([
            "shrooms-agent",
            "cage",
            "create",
            "web",
            "--dir",
            "/home/u/web",
            "--harness",
            "pi",
            "--nix",
            "--mesh",
            "lab",
            "--net",
            "internet",
        ])
        .unwrap();
        let crate::face::cli::Command::Cage(crate::face::cli::CageCommand::Create(a)) = cli.command
        else {
            panic!("not a create");
        };
        let from_flags = CreateRequest::try_from(a).unwrap();
        let body: CreateBody = serde_json::from_str(
            r#"{"name": "web", "dir": "~/web", "harness": "pi",
                "cage": {"nix": true, "meshes": ["lab"], "net": "internet"}}"#,
        )
        .unwrap();
        let from_body = CreateRequest::try_from((body, Path::new("/home/u"))).unwrap();
        for r in [&from_flags, &from_body] {
            assert_eq!(r.name, "web");
            assert_eq!(r.dir, PathBuf::from("/home/u/web"));
            assert_eq!(r.harness, Harness::Pi);
            assert!(r.choice.nix && !r.choice.github && !r.choice.sealed);
            assert_eq!(r.choice.meshes, ["lab"]);
            assert_eq!(
                r.choice.net,
                Some(crate::net::netpolicy::NetPolicy::parse("internet").unwrap())
            );
            assert!(!r.dry_run && !r.dir_from_cwd && !r.auto_approve);
        }
    }
}
