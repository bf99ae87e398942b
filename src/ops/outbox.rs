//! `outbox pack`: a sealed session's outbox as a .tar.gz, through the one
//! packer (`crate::cage::pack`), which never follows a link; and `outbox send`
//! which packs the same way and posts the archive to a
//! session on another machine's `serve`. To a session of this machine it
//! receives the drop itself (`acts::drop`, what `serve`'s drop route
//! runs), with this machine as the sender's: no HTTP to its own `serve`,
//! which may not run, may want a token, and whose workers may all be
//! waiting on sends like this one.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::acts::send::{Delivery, Destination};
use super::plan::Step;
use super::{Context, cage_of};
use crate::error::{Doing, Error, Result};

#[derive(Debug, Clone, Serialize)]
pub struct PackResult {
    pub session: String,
    pub archive: PathBuf,
    #[serde(flatten)]
    pub packed: crate::cage::pack::Packed,
}

/// `outbox pack`: the archive at `output`, a new file, or over a regular
/// file with `replace` (`--force`).
pub fn pack(
    ctx: &Context,
    name: &str,
    only: Option<&Path>,
    output: &Path,
    replace: bool,
) -> Result<PackResult> {
    let record = ctx.store.load(name)?;
    let outbox = outbox_of(&record)?;
    let packed = crate::cage::pack::pack(&outbox, only, output, replace)?
        .ok_or_else(|| Error::pack(crate::error::PackProblem::Empty { sending: false }))?;
    Ok(PackResult {
        session: record.name.clone(),
        archive: output.to_path_buf(),
        packed,
    })
}

/// A sealed session's outbox, or the error for a session that has none.
fn outbox_of(record: &crate::state::session::Record) -> Result<PathBuf> {
    let sealed = cage_of(record)?
        .sealed
        .as_ref()
        .ok_or_else(|| Error::session(&record.name, crate::error::SessionProblem::NotSealed))?;
    Ok(sealed.outbox.clone())
}

/// The most a machine takes in one file, so the most `send` posts.
pub const MAX_SEND: u64 = crate::state::session::MAX_FILE;

#[derive(Debug, Clone)]
pub struct SendRequest {
    pub name: String,
    /// `MACHINE/SESSION`.
    pub to: String,
    pub only: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Sent {
    pub session: String,
    pub to: String,
    /// The archive's name, `<session>-outbox-<YYYYMMDD-HHMMSS>.tar.gz`.
    pub archive: String,
    /// Where the receiving machine put it.
    pub path: String,
    pub size: u64,
    #[serde(flatten)]
    pub packed: crate::cage::pack::Packed,
    /// `sent NAME (N files) to MACHINE/SESSION[; N left out (...)]`.
    pub result: String,
}

/// `outbox send`: pack the outbox (or one folder of it) into a temporary
/// archive in the state folder, hand it to the session (this machine's:
/// directly; another machine's: posted to its `serve` at
/// `/v1/sessions/SESSION/drop`), and remove it. Nothing is sent when the
/// session is not sealed, the machine is unknown, the outbox has nothing
/// to pack, or the archive is over 100 MiB.
pub fn send(ctx: &Context, req: &SendRequest) -> Result<Sent> {
    let facts = send_facts(ctx, req)?;
    let d = &facts.delivery;
    let (from, archive, machine, session) = (
        d.from.clone(),
        d.archive.clone(),
        d.machine.clone(),
        d.session.clone(),
    );
    let ran = super::plan::execute(ctx, None, decide_send(facts)?)?;
    let (Some(packed), Some((path, size))) = (ran.packed, ran.delivered) else {
        return Err(Error::unmet("a send that packed or delivered nothing"));
    };
    let left = packed.left_out.len() + packed.left_out_unlisted;
    let mut line = format!(
        "sent {archive} ({}) to {machine}/{session}",
        crate::state::when::count(packed.files as u64, "file", "files")
    );
    if left > 0 {
        line.push_str(&format!(
            "; {left} left out (see {} in it)",
            crate::cage::pack::README_NAME
        ));
    }
    Ok(Sent {
        session: from,
        to: format!("{machine}/{session}"),
        archive,
        path,
        size,
        packed,
        result: line,
    })
}

/// What a send of `req` decides from.
fn send_facts(ctx: &Context, req: &SendRequest) -> Result<SendFacts> {
    let record = ctx.store.load(&req.name)?;
    let (machine, session) = super::session_address::parse_target(&req.to)?;
    let archive = format!(
        "{}-outbox-{}.tar.gz",
        record.name,
        timestamp(crate::state::when::now())
    );
    let tmp_root = ctx.store.tmp_dir();
    let tmp = tmp_root.join(format!(
        "{}{}-{}",
        crate::state::session::SEND_TMP,
        std::process::id(),
        unique()
    ));
    Ok(SendFacts {
        outbox: outbox_of(&record),
        destination: destination(ctx, &machine),
        only: req.only.clone(),
        delivery: Delivery {
            destination: Destination::Here,
            machine,
            session,
            path: tmp.join(&archive),
            archive,
            from: record.name,
        },
        tmp_root,
        tmp,
    })
}

/// The steps a send of `req` would run, in a few words, for the tests.
#[cfg(test)]
pub(super) fn planned_send(ctx: &Context, req: &SendRequest) -> Result<Vec<String>> {
    let steps = decide_send(send_facts(ctx, req)?)?;
    Ok(steps.iter().map(Step::describe).collect())
}

/// What a send decides from; what it could not find is kept as the
/// refusal it is.
struct SendFacts {
    outbox: Result<PathBuf>,
    destination: Result<Destination>,
    only: Option<PathBuf>,
    /// Where the archive goes (its destination set once decided).
    delivery: Delivery,
    tmp_root: PathBuf,
    /// The send's own folder, in `tmp_root`.
    tmp: PathBuf,
}

/// Pure: a refusal, or the steps of a send: its own folder, the archive
/// packed there, delivered, and the folder removed (a failure to remove
/// it once delivered is a warning; a command after a crash removes it).
fn decide_send(f: SendFacts) -> Result<Vec<Step<'static>>> {
    let outbox = f.outbox?;
    let destination = f.destination?;
    Ok(vec![
        Step::PrivateDir {
            path: f.tmp_root,
            keep: true,
        },
        Step::PrivateDir {
            path: f.tmp.clone(),
            keep: false,
        },
        Step::Pack {
            outbox,
            only: f.only,
            to: f.delivery.path.clone(),
            max: MAX_SEND,
        },
        Step::Deliver(Box::new(Delivery {
            destination,
            ..f.delivery
        })),
        Step::RemoveFile {
            path: f.tmp,
            best_effort: true,
        },
    ])
}

/// Where MACHINE is: this machine (its `machine_name`, even if
/// `[machines]` names it too), else the `serve` that `[machines]` names,
/// with its token if it has one. (A `[machines]` address on loopback is
/// not taken for this machine: it may be a tunnel to another.)
fn destination(ctx: &Context, machine: &str) -> Result<Destination> {
    let s = &ctx.settings;
    if machine == s.machine_name {
        return Ok(Destination::Here);
    }
    if let Some(m) = s.machines.get(machine) {
        // Read as the receiving serve reads its own (`crate::settings::token`).
        let token = match &m.token_file {
            None => None,
            Some(f) => Some(crate::settings::token::read(f).map_err(|e| {
                e.context(Doing::TokenFileOf {
                    machine: machine.to_string(),
                })
            })?),
        };
        return Ok(Destination::Serve {
            url: m.url.clone(),
            token,
        });
    }
    Err(Error::remote(
        machine,
        crate::error::RemoteProblem::NoSuchMachine {
            here: s.machine_name.clone(),
            known: s.machines.keys().cloned().collect(),
        },
    ))
}

/// A number unlike any other this process uses, for temporary names.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// Unix seconds as `YYYYMMDD-HHMMSS`, in UTC.
pub fn timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A context whose config names machine beta, its token in `file`.
    fn with_beta(file: &Path) -> Context {
        let text = format!(
            "machine_name = \"alpha\"\n[machines]\nbeta = {{ url = \"http://127.0.0.1:1\", token_file = {:?} }}\n",
            file.display().to_string()
        );
        let settings = crate::settings::Settings::from_text(
            Some(&text),
            Path::new("/cfg/config.toml"),
            PathBuf::from("/state"),
            PathBuf::from("/home/u"),
            &crate::settings::Env::new(),
        )
        .unwrap();
        Context::new(settings, crate::settings::Env::new(), Vec::new())
    }

    /// The token sent is the one the receiving serve takes: the file's
    /// first line; a file open to others is refused as serve refuses it.
    #[test]
    fn the_token_sent_is_read_as_serve_reads_it() {
        use crate::settings::token::tests::token_file;
        let f = token_file("send-two-lines", "s3cret\nsecond line\n", 0o600);
        assert_eq!(
            destination(&with_beta(&f), "beta").unwrap(),
            Destination::Serve {
                url: "http://127.0.0.1:1".into(),
                token: Some("s3cret".into())
            }
        );
        let f = token_file("send-open", "s3cret\n", 0o644);
        let e = destination(&with_beta(&f), "beta").unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::BadInput);
        assert!(
            e.message().contains("machine beta")
                && e.message()
                    .contains("the file is open to others (mode 644)")
                && e.message().contains(&format!("chmod 600 {}", f.display())),
            "{}",
            e.message()
        );
        let f = token_file("send-empty", "\n", 0o600);
        let e = destination(&with_beta(&f), "beta").unwrap_err();
        assert!(e.message().contains("empty"), "{}", e.message());
    }

    #[test]
    fn timestamps_in_utc() {
        assert_eq!(timestamp(0), "19700101-000000");
        assert_eq!(timestamp(951_782_400), "20000229-000000");
        assert_eq!(timestamp(1_767_225_599), "20251231-235959");
        assert_eq!(timestamp(1_782_994_245), "20260702-121045");
    }
}
