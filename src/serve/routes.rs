//! The routes (issue 6, point 2): each parses its input, calls the
//! operation the CLI calls, and maps the typed result or error to a
//! response. Nothing here decides what an operation decides.

use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use super::Shared;
use super::http::{Conn, Request, Response, decode};
use crate::error::Error;
use crate::harness::Harness;
use crate::ops;

/// A JSON body may be at most this long (1 MiB).
pub const MAX_JSON: u64 = 1024 * 1024;

/// The OpenAPI document, served as it is.
pub const OPENAPI: &str = include_str!("../../assets/openapi.json");

/// Route a request to its handler; 404 and 405 for the rest.
pub fn route(req: &Request, conn: &mut Conn, shared: &Shared) -> Response {
    let segments: Vec<String> = match req.path.strip_prefix('/') {
        Some(p) => p.split('/').map(decode).collect(),
        None => return Response::error(404, &format!("no such route: {}", req.for_log())),
    };
    let seg: Vec<&str> = segments.iter().map(String::as_str).collect();
    let m = req.method.as_str();
    let allowed: &[&str] = match seg.as_slice() {
        ["v1", "harnesses"] | ["v1", "openapi.json"] => &["GET"],
        ["v1", "sessions"] => &["GET", "POST"],
        ["v1", "sessions", _] => &["GET", "DELETE"],
        ["v1", "sessions", _, "cage"]
        | ["v1", "sessions", _, "cage", "limits"]
        | ["v1", "sessions", _, "outbox", "send"]
        | ["v1", "sessions", _, "drop"]
        | ["v1", "images", "build"] => &["POST"],
        ["v1", "_test", "panic"] if shared.test_panic => &["GET"],
        _ => {
            return Response::error(404, &format!("no such route: {}", req.for_log()));
        }
    };
    if !allowed.contains(&m) {
        let list = allowed.join(", ");
        return Response::error(
            405,
            &format!("{m} is not allowed on {}: use {list}", req.for_log()),
        )
        .with_header("Allow", &list);
    }
    let result = match (m, seg.as_slice()) {
        ("GET", ["v1", "harnesses"]) => Ok(Response::json(200, &shared.state.harnesses())),
        ("GET", ["v1", "openapi.json"]) => Ok(Response {
            status: 200,
            content_type: "application/json",
            headers: Vec::new(),
            body: OPENAPI.as_bytes().to_vec(),
        }),
        ("GET", ["v1", "sessions"]) => list(shared),
        ("POST", ["v1", "sessions"]) => create(req, conn, shared),
        ("GET", ["v1", "sessions", name]) => ops::show::show(&shared.context(), name)
            .map(|s| Response::json(200, &s))
            .map_err(Fail::Op),
        ("DELETE", ["v1", "sessions", name]) => ops::rm::rm(&shared.context(), name)
            .map(|_| Response::no_content())
            .map_err(Fail::Op),
        ("POST", ["v1", "sessions", name, "cage"]) => move_cage(req, conn, shared, name),
        ("POST", ["v1", "sessions", name, "cage", "limits"]) => limits(req, conn, shared, name),
        ("POST", ["v1", "sessions", name, "outbox", "send"]) => send(req, conn, shared, name),
        ("POST", ["v1", "sessions", name, "drop"]) => drop_file(req, conn, shared, name),
        ("POST", ["v1", "images", "build"]) => build(req, conn, shared),
        ("GET", ["v1", "_test", "panic"]) => panic!("a panic asked for by the test route"),
        _ => Err(Fail::Op(Error::failed("unrouted"))),
    };
    match result {
        Ok(r) => r,
        Err(Fail::Op(e)) => Response::from_error(&e),
        Err(Fail::Http(r)) => r,
    }
}

/// Why a route did not succeed: an operation's error (its kind's status),
/// or an answer of HTTP's own (408 for a body that did not arrive in time).
enum Fail {
    Op(Error),
    Http(Response),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::Op(e)
    }
}

/// `Option<Option<T>>` from a field: missing is `None`, `null` is `Some(None)`.
fn present<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Read and parse a JSON body: Content-Length needed, at most 1 MiB (413,
/// unread), unknown fields refused by the types' `deny_unknown_fields`.
fn json_body<T: DeserializeOwned>(req: &Request, conn: &mut Conn) -> Result<T, Fail> {
    if req.transfer_encoding {
        return Err(
            Error::bad_input("a body needs Content-Length (a chunked body is not taken)").into(),
        );
    }
    let len = req.content_length.unwrap_or(0);
    if len > MAX_JSON {
        return Err(Error::too_large(format!(
            "the body is {len} bytes; a JSON body may be at most {MAX_JSON} (1 MiB)"
        ))
        .into());
    }
    let bytes = conn.read_body(len).map_err(|e| {
        if super::http::is_timeout(&e) {
            Fail::Http(Response::error(408, "the body did not arrive in time"))
        } else {
            Fail::Op(Error::bad_input(format!("reading the body: {e}")))
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|e| Fail::Op(Error::bad_input(format!("the body: {e}"))))
}

/// Who asked, for a session's history.
fn by(shared: &Shared, req: &Request) -> String {
    format!(
        "{} over HTTP from {}",
        shared.base.settings.user,
        req.peer.ip()
    )
}

#[derive(Serialize)]
struct SessionList {
    sessions: Vec<ops::show::Shown>,
}

/// `cage show` for each session `cage ls` lists.
fn list(shared: &Shared) -> Result<Response, Fail> {
    let ctx = shared.context();
    let listing = ops::ls::ls(&ctx)?;
    let mut sessions = Vec::new();
    for row in listing.sessions {
        match ops::show::show(&ctx, &row.session) {
            Ok(s) => sessions.push(s),
            // Removed meanwhile.
            Err(e) if e.kind == crate::error::Kind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Response::json(200, &SessionList { sessions }))
}

/// A session's info, and the warnings of what was just done to it.
#[derive(Serialize)]
struct ShownWith {
    #[serde(flatten)]
    shown: ops::show::Shown,
    warnings: Vec<String>,
}

/// The cage options over HTTP (seed, "Starting a caged session").
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CageBody {
    image: Option<String>,
    nix: Option<bool>,
    github: Option<bool>,
    shared: Option<bool>,
    meshes: Option<Vec<String>>,
    sealed: Option<bool>,
}

impl CageBody {
    fn choice(self) -> ops::make::CageChoice {
        ops::make::CageChoice {
            image: self.image,
            sealed: self.sealed.unwrap_or(false),
            sealed_token: None,
            conversation: None,
            github: self.github.unwrap_or(false),
            nix: self.nix.unwrap_or(false),
            shared: self.shared.unwrap_or(false),
            meshes: self.meshes.unwrap_or_default(),
            // A folder a sealed session worked in gets an ordinary cage
            // only by the owner's decision, at the machine (`--unseal`).
            unseal: false,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    dir: String,
    harness: Option<Harness>,
    auto_approve: Option<bool>,
    cage: Option<CageBody>,
}

/// `dir`: absolute, or under the home with `~/`.
fn project_dir(home: &std::path::Path, dir: &str) -> Result<PathBuf, Error> {
    if dir == "~" {
        return Ok(home.to_path_buf());
    }
    if let Some(rest) = dir.strip_prefix("~/") {
        return Ok(home.join(rest));
    }
    if dir.starts_with('/') {
        return Ok(PathBuf::from(dir));
    }
    Err(Error::bad_input(format!(
        "dir {dir:?}: give the project folder as an absolute path, or under the home as ~/..."
    )))
}

fn create(req: &Request, conn: &mut Conn, shared: &Shared) -> Result<Response, Fail> {
    let body: CreateBody = json_body(req, conn)?;
    let dir = project_dir(&shared.base.settings.home, &body.dir)?;
    let ctx = shared.context();
    let request = ops::create::CreateRequest {
        name: body.name.clone(),
        dir,
        harness: body.harness.unwrap_or(Harness::Claude),
        choice: body.cage.unwrap_or_default().choice(),
        dry_run: false,
        auto_approve: body.auto_approve.unwrap_or(false),
    };
    let created = ops::create::create(&ctx, &request)?;
    let shown = ops::show::show(&ctx, &body.name)?;
    Ok(Response::json(
        201,
        &ShownWith {
            shown,
            warnings: created.warnings,
        },
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveBody {
    #[serde(default, deserialize_with = "present")]
    cage: Option<Option<CageBody>>,
}

fn move_cage(
    req: &Request,
    conn: &mut Conn,
    shared: &Shared,
    name: &str,
) -> Result<Response, Fail> {
    let body: MoveBody = json_body(req, conn)?;
    let cage = body.cage.ok_or_else(|| {
        Error::bad_input(
            "say where: {\"cage\": {...}} for a cage with those options, {\"cage\": null} to take it out",
        )
    })?;
    let ctx = shared.context();
    let request = ops::moves::MoveRequest {
        name: name.to_string(),
        out: cage.is_none(),
        choice: cage.map(CageBody::choice).unwrap_or_default(),
        by: Some(by(shared, req)),
        // Over HTTP a sealed session is never taken out of its seal: that
        // is the owner's decision, at the machine (`cage move --unseal`).
        unseal: false,
    };
    let moved = ops::moves::move_session(&ctx, &request)?;
    let shown = ops::show::show(&ctx, name)?;
    Ok(Response::json(
        200,
        &ShownWith {
            shown,
            warnings: moved.warnings,
        },
    ))
}

/// `16g` or `"16g"`, `8` or `"8"`: numbers and strings both read.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Loose {
    Text(String),
    Whole(u64),
    Number(f64),
}

impl Loose {
    fn text(self) -> String {
        match self {
            Loose::Text(s) => s,
            Loose::Whole(n) => n.to_string(),
            Loose::Number(f) => f.to_string(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsBody {
    memory: Option<Loose>,
    cpus: Option<Loose>,
    pids: Option<Loose>,
}

fn limits(req: &Request, conn: &mut Conn, shared: &Shared, name: &str) -> Result<Response, Fail> {
    let body: LimitsBody = json_body(req, conn)?;
    let request = ops::limits::LimitsRequest {
        name: name.to_string(),
        asked: crate::settings::LimitsAsked::parse(
            body.memory.map(Loose::text).as_deref(),
            body.cpus.map(Loose::text).as_deref(),
            body.pids.map(Loose::text).as_deref(),
        )?,
        reset: false,
        by: Some(by(shared, req)),
    };
    let r = ops::limits::limits(&shared.context(), &request)?;
    Ok(Response::json(200, &r))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendBody {
    to: String,
    only: Option<String>,
}

fn send(req: &Request, conn: &mut Conn, shared: &Shared, name: &str) -> Result<Response, Fail> {
    let body: SendBody = json_body(req, conn)?;
    let request = ops::outbox::SendRequest {
        name: name.to_string(),
        to: body.to,
        only: body.only.map(PathBuf::from),
    };
    let sent = ops::outbox::send(&shared.context(), &request)?;
    Ok(Response::json(200, &sent))
}

/// A file from another session (issue 6, point 4). The sender's machine
/// is told from the peer's address by `Shared::machine_of`.
fn drop_file(
    req: &Request,
    conn: &mut Conn,
    shared: &Shared,
    name: &str,
) -> Result<Response, Fail> {
    if req.transfer_encoding {
        return Err(
            Error::bad_input("a file needs Content-Length (a chunked body is not taken)").into(),
        );
    }
    let length = req
        .content_length
        .ok_or_else(|| Error::bad_input("a file needs Content-Length"))?;
    let file_name = req.query("name").unwrap_or("");
    let from_session = req.header_str("x-shrooms-from-session");
    let drop = ops::files::Drop {
        session: name,
        from_machine: shared.machine_of(req.peer.ip()),
        from_session,
        name: file_name,
        length,
        note: req.query("note"),
    };
    let ctx = shared.context();
    // It must keep a pace of 256 KiB a second after a grace, at every
    // read, so a sender that trickles cannot hold a worker for long.
    conn.pace(shared.upload_grace);
    let mut body = conn.body(length);
    match ops::files::receive(&ctx, &drop, &mut body) {
        Ok(received) => Ok(Response::json(201, &received)),
        // Out of time: the partial file is removed by `receive`.
        Err(e) if conn.timed_out() => Err(Fail::Http(Response::error(
            408,
            &format!("the file did not arrive in time: {}", e.message),
        ))),
        Err(e) => Err(Fail::Op(e)),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildBody {
    image: String,
}

fn build(req: &Request, conn: &mut Conn, shared: &Shared) -> Result<Response, Fail> {
    let body: BuildBody = json_body(req, conn)?;
    let repo = &shared.base.settings.images_repo;
    let stage = crate::images::Stage::parse(&body.image)
        .or_else(|| crate::images::stage_of(repo, &body.image))
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{:?} is not an image of ours: give \"workbench\" or \"desktop\" ({} or {})",
                body.image,
                crate::images::image_name(repo, crate::images::Stage::Workbench),
                crate::images::image_name(repo, crate::images::Stage::Desktop)
            ))
        })?;
    let request = ops::image::BuildRequest {
        stages: vec![stage],
        wait: false,
        containerfile: None,
    };
    let report = ops::image::build(&shared.context(), &request, &mut |_| {})?;
    shared.state.poke();
    Ok(Response::json(202, &report))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document says what every route can answer: a bearer scheme
    /// (optional: a serve without a token wants none), 403 on every
    /// operation (a serve without a token refuses web pages on any route),
    /// 503 on every one (a full queue, or an address's connections at
    /// their bound), 409 where two creations of one name meet.
    #[test]
    fn the_openapi_document_lists_auth_and_refusals() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
        let scheme = &doc["components"]["securitySchemes"]["bearer"];
        assert_eq!(scheme["type"], "http", "{scheme:#}");
        assert_eq!(scheme["scheme"], "bearer", "{scheme:#}");
        let security = doc["security"].as_array().expect("a top-level security");
        assert!(
            security.contains(&serde_json::json!({"bearer": []})),
            "{security:?}"
        );
        assert!(security.contains(&serde_json::json!({})), "{security:?}");
        let mut operations = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                if method == "parameters" {
                    continue;
                }
                let responses = op["responses"].as_object().unwrap();
                for status in ["401", "403", "500", "503"] {
                    assert!(
                        responses.contains_key(status),
                        "{method} {path} does not list {status}"
                    );
                }
                operations += 1;
            }
        }
        assert_eq!(operations, 11);
        assert!(
            doc["paths"]["/v1/sessions"]["post"]["responses"]
                .as_object()
                .unwrap()
                .contains_key("409")
        );
    }

    #[test]
    fn dirs_absolute_or_under_home() {
        let home = std::path::Path::new("/home/u");
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

    #[test]
    fn a_move_says_where_or_is_refused() {
        let parse = |t: &str| serde_json::from_str::<MoveBody>(t);
        assert!(parse("{}").unwrap().cage.is_none());
        assert!(matches!(
            parse(r#"{"cage": null}"#).unwrap().cage,
            Some(None)
        ));
        let into = parse(r#"{"cage": {"nix": true}}"#)
            .unwrap()
            .cage
            .unwrap()
            .unwrap();
        assert!(into.choice().nix);
        let e = parse(r#"{"cage": {"nix": true, "gpu": 1}}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `gpu`"), "{e}");
        let e = parse(r#"{"where": null}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `where`"), "{e}");
    }

    #[test]
    fn limits_take_strings_and_numbers() {
        let l: LimitsBody =
            serde_json::from_str(r#"{"memory": "16g", "cpus": 1.5, "pids": 100}"#).unwrap();
        assert_eq!(l.memory.unwrap().text(), "16g");
        assert_eq!(l.cpus.unwrap().text(), "1.5");
        assert_eq!(l.pids.unwrap().text(), "100");
        assert!(serde_json::from_str::<LimitsBody>(r#"{"cpus": true}"#).is_err());
    }
}
