//! `cage create`, `cage move` and `cage rename`: a cage made, or made
//! again, from the cage flags.

use std::process::ExitCode;

use crate::cage::harness;
use crate::error::{Error, Result};
use crate::face::cli::{CageArgs, CreateArgs, HarnessArg, MoveArgs, RenameArgs};
use crate::face::output;
use crate::net::netpolicy;
use crate::ops::{self, Context};

pub fn create(ctx: &Context, a: CreateArgs, json: bool) -> Result<ExitCode> {
    // Without --dir: the folder it is run in, as a container tool's
    // users expect; refused as --dir would be, and said so.
    let dir_from_cwd = a.dir.is_none();
    let dir = match a.dir {
        Some(d) => d,
        None => std::env::current_dir().map_err(|e| {
            Error::bad_input(format!(
                "the current folder cannot be read ({e}): pass --dir with the project folder"
            ))
        })?,
    };
    let req = ops::create::CreateRequest {
        name: a.name,
        dir,
        dir_from_cwd,
        harness: match a.harness {
            HarnessArg::Claude => harness::Harness::Claude,
            HarnessArg::Pi => harness::Harness::Pi,
        },
        choice: ops::make::CageChoice {
            unseal: a.unseal,
            ..choice(a.cage)?
        },
        dry_run: a.dry_run,
        auto_approve: false,
    };
    let created = ops::create::create(ctx, &req)?;
    output::warnings(&created.warnings);
    // A dry run the real command would refuse: the argv, then the
    // refusal, with its exit code.
    if let Some(e) = &created.refused {
        output::error_after(e, json, &created, output::created);
        return Ok(ExitCode::from(e.kind.exit_code()));
    }
    output::show(&created, json, output::created);
    Ok(ExitCode::SUCCESS)
}

pub fn move_session(ctx: &Context, a: MoveArgs, json: bool) -> Result<ExitCode> {
    let req = ops::moves::MoveRequest {
        name: a.name,
        out: a.out,
        choice: choice(a.cage)?,
        by: a.by,
        unseal: a.unseal,
        dir: a.dir,
    };
    let r = ops::moves::move_session(ctx, &req)?;
    output::warnings(&r.warnings);
    output::show(&r, json, |r| format!("{}: {}\n", r.session, r.what));
    Ok(ExitCode::SUCCESS)
}

pub fn rename(ctx: &Context, a: RenameArgs, json: bool) -> Result<ExitCode> {
    let req = ops::rename::RenameRequest {
        name: a.name,
        to: a.new,
        by: a.by,
    };
    let r = ops::rename::rename(ctx, &req)?;
    output::warnings(&r.warnings);
    output::show(&r, json, |r| format!("{}: {}\n", r.session, r.what));
    Ok(ExitCode::SUCCESS)
}

/// The cage flags as the operations take them.
fn choice(a: CageArgs) -> Result<ops::make::CageChoice> {
    Ok(ops::make::CageChoice {
        image: a.image,
        sealed: a.sealed,
        sealed_token: a.sealed_token,
        conversation: a.conversation,
        github: a.github,
        nix: a.nix,
        shared: a.shared,
        meshes: a.meshes,
        unseal: false,
        writable: a.writable,
        net: a
            .net
            .as_deref()
            .map(netpolicy::NetPolicy::parse)
            .transpose()?,
    })
}
