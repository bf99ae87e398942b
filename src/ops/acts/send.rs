//! An outbox's archive on its way (`outbox send`): packed within its
//! bound (`Step::Pack`), then handed to its session (`Step::Deliver`), of
//! this machine (received here, as `serve`'s drop route would) or of
//! another machine's `serve` (posted to its drop route).

use std::path::{Path, PathBuf};

use crate::error::{Doing, Error, PackProblem, Result};
use crate::ops::Context;

/// The answer a receiving `serve` gives a drop.
#[derive(Debug, serde::Deserialize)]
struct DropAnswer {
    path: String,
    size: u64,
}

/// Where an archive goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Destination {
    /// A session of this machine: stored by `drop::receive_now` here.
    Here,
    /// Another machine's `serve`, with its token if it has one.
    Serve { url: String, token: Option<String> },
}

/// Pack `outbox` (or `only` in it) into the new file `to`, refused when
/// there is nothing to pack or the archive is over `max` bytes
/// (`Step::Pack`).
pub fn pack_at_most(
    outbox: &Path,
    only: Option<&Path>,
    to: &Path,
    max: u64,
) -> Result<crate::cage::pack::Packed> {
    crate::state::session::before_write()
        .map_err(|e| Error::act(Doing::Write(to.to_path_buf()), &e))?;
    let packed = crate::cage::pack::pack(outbox, only, to, false)?
        .ok_or_else(|| Error::pack(PackProblem::Empty { sending: true }))?;
    crate::state::session::after_write();
    let size = std::fs::metadata(to)
        .map_err(|e| Error::act(Doing::Read(to.to_path_buf()), &e))?
        .len();
    if size > max {
        return Err(Error::pack(PackProblem::OverMachine { size, max }));
    }
    Ok(packed)
}

/// An archive on its way: from which session, to where (`Step::Deliver`).
#[derive(Debug)]
pub struct Delivery {
    pub destination: Destination,
    pub machine: String,
    pub session: String,
    pub archive: String,
    pub from: String,
    pub path: PathBuf,
}

#[cfg(test)]
impl Delivery {
    /// `MACHINE/SESSION`.
    pub fn to(&self) -> String {
        format!("{}/{}", self.machine, self.session)
    }
}

/// Hand the archive to its session, here or on another machine: where it
/// was put there, and its size.
pub fn deliver(ctx: &Context, d: &Delivery) -> Result<(String, u64)> {
    let size = std::fs::metadata(&d.path)
        .map_err(|e| Error::act(Doing::Read(d.path.to_path_buf()), &e))?
        .len();
    let answer = match &d.destination {
        Destination::Here => deliver_here(ctx, &d.session, &d.archive, &d.from, &d.path, size)?,
        Destination::Serve { url, token } => post(
            &d.machine,
            url,
            token.as_deref(),
            &d.session,
            &d.archive,
            &d.from,
            &d.path,
        )?,
    };
    Ok((answer.path, answer.size))
}

/// Hand the archive to a session of this machine: what `serve`'s drop
/// route does with a request (the same decision and acts as
/// `files::receive`, so the same checks, refusals remembered, names, modes
/// and bounds), with this machine as the sender's machine, within this
/// step rather than in a plan of its own.
fn deliver_here(
    ctx: &Context,
    session: &str,
    archive: &str,
    from: &str,
    path: &Path,
    size: u64,
) -> Result<DropAnswer> {
    let mut file =
        std::fs::File::open(path).map_err(|e| Error::act(Doing::Open(path.to_path_buf()), &e))?;
    let drop = super::drop::Drop {
        session,
        from_machine: Ok(ctx.settings.machine_name.clone()),
        from_session: Some(from),
        // Sent by the user on the machine, not through a cage's socket.
        caged: None,
        name: archive,
        length: size,
        note: None,
    };
    let received = super::drop::receive_now(ctx, &drop, &mut file)?;
    Ok(DropAnswer {
        path: received.path.to_string_lossy().into_owned(),
        size: received.size,
    })
}

/// POST the archive to `<url>/v1/sessions/<session>/drop?name=<archive>`,
/// with its length. A receiver that refuses it (403, 413...) answers
/// before reading it, and reads and drops the rest before it closes, so
/// the answer arrives whole.
fn post(
    machine: &str,
    url: &str,
    token: Option<&str>,
    session: &str,
    archive: &str,
    from: &str,
    path: &Path,
) -> Result<DropAnswer> {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let address = format!(
        "{url}/v1/sessions/{session}/drop?name={}",
        utf8_percent_encode(archive, NON_ALPHANUMERIC)
    );
    let file =
        std::fs::File::open(path).map_err(|e| Error::act(Doing::Open(path.to_path_buf()), &e))?;
    let length = file
        .metadata()
        .map_err(|e| Error::act(Doing::Read(path.to_path_buf()), &e))?
        .len();
    // reqwest (hyper's client, TLS by rustls), the stack `serve` runs on.
    let client = reqwest::blocking::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(600))
        .build()
        .map_err(|e| Error::act(Doing::SendTo(url.to_string()), &e))?;
    let mut request = client
        .post(&address)
        .header("Content-Type", "application/gzip")
        .header("X-Shrooms-From-Session", from)
        .body(reqwest::blocking::Body::sized(file, length));
    if let Some(t) = token {
        request = request.header("Authorization", format!("Bearer {t}"));
    }
    let response = match request.send() {
        Ok(r) => r,
        Err(e) => {
            // A serve that does not take this machine's token answers 401
            // before it reads the file; a client still sending the file can
            // lose that answer under the error of the unsent rest (RFC 9112,
            // 9.6). Asked again with no body, it says it again.
            let mut probe = client.get(format!("{url}/v1/sessions/{session}"));
            if let Some(t) = token {
                probe = probe.header("Authorization", format!("Bearer {t}"));
            }
            if let Ok(r) = probe.send()
                && r.status().as_u16() == 401
            {
                let text = r.text().unwrap_or_default();
                let said = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(str::to_string));
                return Err(not_taken(machine, url, 401, said.as_deref()));
            }
            return Err(Error::act(Doing::SendTo(url.to_string()), &e));
        }
    };
    let status = response.status().as_u16();
    let mut text = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::Read::take(response, 64 * 1024), &mut text);
    if status == 201 {
        return serde_json::from_str(&text).map_err(|e| {
            Error::remote(
                machine,
                crate::error::RemoteProblem::DropAnswerUnread {
                    url: url.to_string(),
                    cause: e.to_string(),
                },
            )
        });
    }
    let said = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string));
    Err(not_taken(machine, url, status, said.as_deref()))
}

/// The error for a receiving `serve`'s answer other than 201, with its
/// own words ([`Error::answered`]).
fn not_taken(machine: &str, url: &str, status: u16, said: Option<&str>) -> Error {
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    Error::answered(machine, url, status, reason, said)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The other machine's 404 and 401 are failures here, said to be its
    /// answers; its refusal (403) stays a refusal.
    #[test]
    fn the_other_machines_answers_are_its_own() {
        use crate::error::Kind;
        let url = "http://b:7387";
        let e = not_taken("beta", url, 404, Some("there is no session \"x\""));
        assert_eq!((e.kind, e.http_status()), (Kind::Failed, 500));
        assert!(
            e.message().starts_with(
                "machine beta (http://b:7387) answered 404 Not Found: there is no session \"x\""
            ),
            "{}",
            e.message()
        );
        let e = not_taken("beta", url, 401, Some("this serve needs its token"));
        assert_eq!((e.kind, e.http_status()), (Kind::Failed, 500));
        assert!(
            e.message().contains("answered 401 Unauthorized")
                && e.message().contains("[machines] beta a token_file"),
            "{}",
            e.message()
        );
        let e = not_taken("beta", url, 403, Some("session x takes no files from a/b"));
        assert_eq!(e.kind, Kind::Forbidden);
        let e = not_taken("beta", url, 502, None);
        assert_eq!(e.kind, Kind::Failed);
        assert!(
            e.message().contains("502 Bad Gateway: (no reason given)"),
            "{}",
            e.message()
        );
    }
}
