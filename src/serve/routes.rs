//! The routes (docs/serve.md, "HTTP API"): each parses its input, calls the
//! operation the CLI calls, and maps the typed result or error to a
//! response. Nothing here decides what an operation decides.
//!
//! Each route is its handler with its `#[utoipa::path]` (method, path,
//! parameters, answers), listed once in [`api`]: utoipa-axum's `routes!`
//! makes the router's route and the OpenAPI document's operation from
//! that one declaration, so the two cannot disagree. The router and the
//! whole document (this module's routes, the status page's, the
//! document's own) are put together in `api`. A route's `{name}` and its
//! query come through typed extractors ([`InPath`], [`InQuery`]), whose
//! refusals are 400s with our JSON body like any other.

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{FromRequestParts, Request};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::Shared;
use super::body::{self, Unread};
use super::conn::ConnInfo;
use super::ready_view;
use super::reply::{ErrorBody, Response};
use super::state::Harnesses;
use crate::error::{Error, Subject};
use crate::face::requests::{
    BuildBody, CreateBody, LimitsBody, MoveBody, OnSession, RenameBody, SendBody,
};
use crate::ops;
use crate::state::session::Record;

/// Every route of this module, each from its handler's `#[utoipa::path]`.
/// One `routes!` holds the handlers of one path only: utoipa-axum routes
/// each handler of a `routes!` on every path of it.
pub fn api() -> OpenApiRouter {
    OpenApiRouter::new()
        .routes(routes!(harnesses))
        .routes(routes!(list, create))
        .routes(routes!(show, remove, patch_session))
        .routes(routes!(move_cage))
        .routes(routes!(limits))
        .routes(routes!(rename))
        .routes(routes!(send))
        .routes(routes!(received, drop_file, clear_received))
        .routes(routes!(egress))
        .routes(routes!(settings))
        .routes(routes!(accept_caged))
        .routes(routes!(bring))
        .routes(routes!(build))
}

/// The route a test asks for (`SHROOMS_AGENT_TEST_PANIC_ROUTE=1`): a
/// panic inside an operation, which serve answers 500 and outlives.
pub async fn test_panic(Extension(shared): Sh) -> Response {
    operation(&shared, |_| panic!("a panic asked for by the test route")).await
}

/// axum's `Path`, refused in our words and body (400, as any bad input).
pub struct InPath<T>(pub T);

impl<T, S> FromRequestParts<S> for InPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(t)) => Ok(InPath(t)),
            Err(e) => Err(Response::error(
                e.status().as_u16(),
                &format!("the path: {}", e.body_text()),
            )),
        }
    }
}

/// axum's `Query` (serde's names; `+` a space; bytes that are not UTF-8
/// U+FFFD), refused in our words and body (400).
pub struct InQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for InQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(t)) => Ok(InQuery(t)),
            Err(e) => Err(Response::error(
                e.status().as_u16(),
                &format!(
                    "the query: {}; this route's parameters are in /v1/openapi.json",
                    e.body_text()
                ),
            )),
        }
    }
}

/// A route's `{name}`: a session's name, as the path writes it
/// (percent-decoded); the operation says when it is not one.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub(super) struct Session {
    /// The session's name.
    #[param(pattern = "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")]
    pub(super) name: String,
}

/// Run a synchronous operation on a blocking thread, at most
/// [`super::OPERATIONS`] at once (503 past [`super::QUEUE`] waiting). A
/// request dropped while it waits (its client went away) never runs it;
/// a panic in it is answered 500.
pub(super) async fn operation<F>(shared: &Arc<Shared>, f: F) -> Response
where
    F: FnOnce(&Shared) -> Result<Response, Fail> + Send + 'static,
{
    use std::sync::atomic::Ordering;
    struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);
    impl Drop for Waiting<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    if shared.waiting.fetch_add(1, Ordering::SeqCst) >= super::QUEUE {
        shared.waiting.fetch_sub(1, Ordering::SeqCst);
        return Response::error(503, "serve is busy; try again in a moment")
            .with_header("retry-after", "1");
    }
    let waiting = Waiting(&shared.waiting);
    let Ok(permit) = shared.operations.clone().acquire_owned().await else {
        return Response::error(503, "serve is stopping");
    };
    drop(waiting);
    let s = shared.clone();
    let done = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        f(&s)
    })
    .await;
    match done {
        Ok(Ok(r)) => r,
        Ok(Err(Fail::Op(e))) => Response::from_error(&e),
        Ok(Err(Fail::Http(r))) => r,
        Err(_) => Response::error(500, "the request failed inside serve (a bug); see its log"),
    }
}

/// Why a route did not succeed: an operation's error (its kind's status),
/// or an answer of HTTP's own (408 for a body that did not arrive in time).
pub(super) enum Fail {
    Op(Error),
    Http(Response),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::Op(e)
    }
}

impl From<Unread> for Fail {
    fn from(u: Unread) -> Fail {
        match u {
            Unread::Op(e) => Fail::Op(e),
            Unread::Http(r) => Fail::Http(r),
        }
    }
}

/// Read a JSON body and parse it: Content-Length needed, at most 1 MiB
/// (413, unread), unknown fields refused by the types' `deny_unknown_fields`.
async fn json_body<T: DeserializeOwned>(
    info: &ConnInfo,
    headers: &HeaderMap,
    body: Body,
) -> Result<T, Fail> {
    let bytes = body::json(info, headers, body).await?;
    parse_body(&bytes).map_err(Fail::Op)
}

/// A body parsed as `serde_json::from_slice` parses it (nothing but
/// whitespace after the value), serde's words kept; the field serde
/// refused it at kept as data ([`refused_at`]).
fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let refused = |e: &serde_json::Error| Error::act_on_input("the body", e);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let t = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let error = refused(e.inner());
        match refused_at(e.path()) {
            Some(field) => error.about(Subject::BodyField(field)),
            None => error,
        }
    })?;
    de.end().map_err(|e| refused(&e))?;
    Ok(t)
}

/// The field a body was refused at, as the body writes it: the keys of
/// the path serde_path_to_error followed to serde's error, joined by `.`
/// (`cage.memory`; the unknown key itself for a field a type's
/// `deny_unknown_fields` refuses). None for the body as a whole (not
/// JSON, a field of its own missing): serde names a missing field in its
/// words only.
fn refused_at(path: &serde_path_to_error::Path) -> Option<String> {
    let keys: Vec<&str> = path
        .iter()
        .filter_map(|s| match s {
            serde_path_to_error::Segment::Map { key } => Some(key.as_str()),
            _ => None,
        })
        .collect();
    (!keys.is_empty()).then(|| keys.join("."))
}

/// Every JSON body serve reads, parsed from `bytes` as its route parses
/// it, then checked as far as its route checks before its operation runs
/// (the fuzz target `http_body`): each body's error, if any.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn check_bodies(bytes: &[u8]) -> Vec<Result<(), Error>> {
    let home = std::path::Path::new("/home/u");
    fn on<B>(body: B) -> OnSession<B> {
        OnSession {
            name: "s".to_string(),
            body,
            by: "u".to_string(),
        }
    }
    vec![
        parse_body::<CreateBody>(bytes).and_then(|b| {
            let request = ops::create::CreateRequest::try_from((b, home))?;
            assert!(request.dir.is_absolute(), "{:?}", request.dir);
            Ok(())
        }),
        parse_body::<MoveBody>(bytes)
            .and_then(|b| ops::moves::MoveRequest::try_from(on(b)).map(drop)),
        parse_body::<LimitsBody>(bytes)
            .and_then(|b| ops::limits::LimitsRequest::try_from(on(b)).map(drop)),
        parse_body::<SendBody>(bytes).map(drop),
        parse_body::<SettingsBody>(bytes).map(drop),
        parse_body::<AcceptCagedBody>(bytes).map(drop),
        parse_body::<BuildBody>(bytes).map(|b| {
            let _ = ops::image::BuildRequest::try_from((b, "localhost/shrooms-workbench"));
        }),
    ]
}

/// A route that reads a JSON body, then runs its operation.
async fn with_body<T, F>(shared: &Arc<Shared>, info: &ConnInfo, req: Request, f: F) -> Response
where
    T: DeserializeOwned + Send + 'static,
    F: FnOnce(&Shared, T) -> Result<Response, Fail> + Send + 'static,
{
    let (parts, body) = req.into_parts();
    match json_body::<T>(info, &parts.headers, body).await {
        Ok(t) => operation(shared, move |s| f(s, t)).await,
        Err(Fail::Op(e)) => Response::from_error(&e),
        Err(Fail::Http(r)) => r,
    }
}

/// Who asked, for a session's history.
pub(super) fn by(shared: &Shared, info: &ConnInfo) -> String {
    format!(
        "{} over HTTP from {}",
        shared.base.settings.user,
        info.peer.ip()
    )
}

pub(super) type Sh = Extension<Arc<Shared>>;
pub(super) type Info = Extension<ConnInfo>;

/// What the machine offers: the harnesses found, and what a cage can be
/// made of. Answered from what serve knows, refreshed in the background:
/// it never waits on podman.
#[utoipa::path(get, path = "/v1/harnesses", operation_id = "harnesses",
    responses((status = 200, description = "What this machine offers.", body = Harnesses)))]
async fn harnesses(Extension(shared): Sh) -> Response {
    Response::json(200, &shared.state.harnesses())
}

/// Every session (docs/cages.md, "The session object"), as `cage ls --json`
/// gives them: damaged records apart.
#[utoipa::path(get, path = "/v1/sessions", operation_id = "listSessions",
    responses((status = 200, description = "The sessions.", body = ops::listing::Listing)))]
async fn list(Extension(shared): Sh) -> axum::response::Response {
    use axum::response::IntoResponse;
    if let Some(live) = ready_view(&shared) {
        // The answer kept since the last change (`records`), else built
        // again on a blocking thread, never behind the operations that
        // wait on podman.
        let host = shared.state.host_facts();
        if let Some(body) = shared.records.kept(&live, &host) {
            return kept_listing(body);
        }
        let turn = shared.records.turn().await;
        if let Some(body) = shared.records.kept(&live, &host) {
            // Built while this request waited for its turn.
            return kept_listing(body);
        }
        let s = shared.clone();
        let built = tokio::task::spawn_blocking(move || s.records.build(&live, &host)).await;
        drop(turn);
        return match built {
            Ok(Ok(body)) => kept_listing(body),
            Ok(Err(e)) => Response::from_error(&e).into_response(),
            Err(_) => Response::error(500, "the request failed inside serve (a bug); see its log")
                .into_response(),
        };
    }
    operation(&shared, |shared| {
        let ctx = shared.context();
        ops::tidy::everything(&ctx);
        let listing = ops::listing::ls(&ctx);
        said(&ctx);
        Ok(Response::json(200, &listing?))
    })
    .await
    .into_response()
}

/// A listing's answer kept (JSON, its newline included), shared with the
/// other requests' answers rather than copied.
fn kept_listing(body: axum::body::Bytes) -> axum::response::Response {
    let mut r = axum::response::Response::new(axum::body::Body::from(body));
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    r
}

/// `cage show --json` of a record, its state from the live view: no podman
/// call.
fn session_live(
    ctx: &ops::Context,
    live: &super::live::Live,
    record: &Record,
) -> Result<ops::session_object::Session, Error> {
    let host = super::records::HostFacts::of(ctx.host_known());
    super::records::session(&ctx.store, live, &host, record)
}

/// The warnings an operation kept (a killed turn's cage it stopped on the
/// way), on serve's stderr, its log.
fn said(ctx: &ops::Context) {
    crate::face::output::warnings(&ctx.take_warnings());
}

/// What an operation over HTTP just saw of a session's cage, for the live
/// view (podman's event may come after the answer).
fn note(shared: &Shared, shown: &ops::session_object::Session) {
    if let (Some(live), Some(cage)) = (&shared.live, &shown.cage) {
        if cage.state == "missing" {
            live.forget(&cage.container);
        } else {
            live.note(&cage.container, &cage.state);
        }
    }
}

/// A session's info, and the warnings of what was just done to it.
#[derive(Serialize, ToSchema)]
struct ShownWith {
    #[serde(flatten)]
    shown: ops::session_object::Session,
    /// What the operation warns of (a choice the machine could not honour in full).
    #[schema(value_type = Vec<String>)]
    warnings: Vec<crate::error::Warning>,
}

/// `cage create` (its cage made at once, or none).
#[utoipa::path(post, path = "/v1/sessions", operation_id = "createSession",
    request_body = CreateBody,
    responses(
        (status = 201, description = "Made.", body = ShownWith),
        (status = 400, description = "A bad request, in the CLI's words.", body = ErrorBody),
        (status = 408, description = "The body did not arrive in time.", body = ErrorBody),
        (status = 409, description = "A session of that name exists, or is being made.", body = ErrorBody),
        (status = 413, description = "The body is over 1 MiB.", body = ErrorBody)))]
async fn create(Extension(shared): Sh, Extension(info): Info, req: Request) -> Response {
    with_body(&shared, &info, req, |shared, body: CreateBody| {
        let request =
            ops::create::CreateRequest::try_from((body, shared.base.settings.home.as_path()))?;
        let ctx = shared.context();
        let created = ops::create::create(&ctx, &request)?;
        let shown = ops::show::show(&ctx, &request.name);
        said(&ctx);
        let shown = shown?;
        note(shared, &shown);
        Ok(Response::json(
            201,
            &ShownWith {
                shown,
                warnings: created.warnings,
            },
        ))
    })
    .await
}

/// `cage show --json`.
#[utoipa::path(get, path = "/v1/sessions/{name}", operation_id = "showSession",
    params(Session),
    responses(
        (status = 200, description = "The session (docs/cages.md, \"The session object\").", body = ops::session_object::Session),
        (status = 400, description = "Not a session name.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody)))]
async fn show(Extension(shared): Sh, InPath(Session { name }): InPath<Session>) -> Response {
    if let Some(live) = ready_view(&shared) {
        let s = shared.clone();
        let shown = tokio::task::spawn_blocking(move || -> Result<Response, Error> {
            let ctx = s.context();
            let record = ctx.store.load(&name)?;
            Ok(Response::json(200, &session_live(&ctx, &live, &record)?))
        })
        .await;
        return match shown {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Response::from_error(&e),
            Err(_) => Response::error(500, "the request failed inside serve (a bug); see its log"),
        };
    }
    operation(&shared, move |shared| {
        let ctx = shared.context();
        ops::tidy::session(&ctx, &name);
        let shown = ops::show::show(&ctx, &name);
        said(&ctx);
        Ok(Response::json(200, &shown?))
    })
    .await
}

/// `cage rm`: the session, its container and what it kept.
#[utoipa::path(delete, path = "/v1/sessions/{name}", operation_id = "removeSession",
    params(Session),
    responses(
        (status = 204, description = "Removed."),
        (status = 400, description = "Not a session name.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 409, description = "The session is busy.", body = ErrorBody)))]
async fn remove(Extension(shared): Sh, InPath(Session { name }): InPath<Session>) -> Response {
    operation(&shared, move |shared| {
        let removed = ops::rm::rm(&shared.context(), &name)?;
        if let (Some(live), Some(c)) = (&shared.live, &removed.container) {
            live.forget(c);
        }
        Ok(Response::no_content())
    })
    .await
}

/// `cage move`: into a cage with these options, or out of its cage.
#[utoipa::path(post, path = "/v1/sessions/{name}/cage", operation_id = "moveSession",
    params(Session),
    request_body = MoveBody,
    responses(
        (status = 200, description = "Moved.", body = ShownWith),
        (status = 400, description = "A bad request.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 408, description = "The body did not arrive in time.", body = ErrorBody),
        (status = 409, description = "The session is busy.", body = ErrorBody),
        (status = 413, description = "The body is over 1 MiB.", body = ErrorBody)))]
async fn move_cage(
    Extension(shared): Sh,
    Extension(info): Info,
    InPath(Session { name }): InPath<Session>,
    req: Request,
) -> Response {
    let by = by(&shared, &info);
    with_body(&shared, &info, req, move |shared, body: MoveBody| {
        let request = ops::moves::MoveRequest::try_from(OnSession { name, body, by })?;
        let ctx = shared.context();
        let moved = ops::moves::move_session(&ctx, &request)?;
        remade(
            shared,
            &ctx,
            &request.name,
            moved.from.as_deref(),
            moved.warnings,
        )
    })
    .await
}

/// The answer of a route that gave a session a new container: the old
/// one forgotten by the live view, the session as it is now, the warnings.
fn remade(
    shared: &Shared,
    ctx: &ops::Context,
    name: &str,
    old: Option<&str>,
    warnings: Vec<crate::error::Warning>,
) -> Result<Response, Fail> {
    if let (Some(live), Some(old)) = (&shared.live, old) {
        live.forget(old);
    }
    let shown = ops::show::show(ctx, name);
    said(ctx);
    let shown = shown?;
    note(shared, &shown);
    Ok(Response::json(200, &ShownWith { shown, warnings }))
}

/// `cage rename`: the session under another name, its record, history,
/// received files and settings with it (a caged one in a new container).
#[utoipa::path(post, path = "/v1/sessions/{name}/rename", operation_id = "renameSession",
    params(Session),
    request_body = RenameBody,
    responses(
        (status = 200, description = "Renamed: the session under its new name (docs/cages.md, \"The session object\").", body = ShownWith),
        (status = 400, description = "A bad request: a new name that is not a session name (a path).", body = ErrorBody),
        (status = 403, description = "Asked by a caged session (X-Shrooms-Caged).", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 408, description = "The body did not arrive in time.", body = ErrorBody),
        (status = 409, description = "The new name is taken, or the session is busy.", body = ErrorBody),
        (status = 413, description = "The body is over 1 MiB.", body = ErrorBody)))]
async fn rename(
    Extension(shared): Sh,
    Extension(info): Info,
    InPath(Session { name }): InPath<Session>,
    req: Request,
) -> Response {
    let by = by(&shared, &info);
    with_body(&shared, &info, req, move |shared, body: RenameBody| {
        let ctx = shared.context();
        let request = ops::rename::RenameRequest::from(OnSession { name, body, by });
        let renamed = ops::rename::rename(&ctx, &request)?;
        remade(
            shared,
            &ctx,
            &renamed.session,
            renamed.old_container.as_deref(),
            renamed.warnings,
        )
    })
    .await
}

/// `cage limits`: the session's own limits, applied to a running cage, and
/// its token budget.
#[utoipa::path(post, path = "/v1/sessions/{name}/cage/limits", operation_id = "setLimits",
    params(Session),
    request_body = LimitsBody,
    responses(
        (status = 200, description = "Changed.", body = ops::limits::LimitsChanged),
        (status = 400, description = "A bad request.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 408, description = "The body did not arrive in time.", body = ErrorBody),
        (status = 409, description = "The session is busy, or in no cage.", body = ErrorBody),
        (status = 413, description = "The body is over 1 MiB.", body = ErrorBody)))]
async fn limits(
    Extension(shared): Sh,
    Extension(info): Info,
    InPath(Session { name }): InPath<Session>,
    req: Request,
) -> Response {
    let by = by(&shared, &info);
    with_body(&shared, &info, req, move |shared, body: LimitsBody| {
        let request = ops::limits::LimitsRequest::try_from(OnSession { name, body, by })?;
        let r = ops::limits::limits(&shared.context(), &request)?;
        Ok(Response::json(200, &r))
    })
    .await
}

/// `outbox send`: a sealed session's outbox, to a session of this or
/// another machine.
#[utoipa::path(post, path = "/v1/sessions/{name}/outbox/send", operation_id = "sendOutbox",
    params(Session),
    request_body = SendBody,
    responses(
        (status = 200, description = "Sent.", body = ops::outbox::Sent),
        (status = 400, description = "A bad request.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 408, description = "The body did not arrive in time.", body = ErrorBody),
        (status = 409, description = "The session is busy.", body = ErrorBody),
        (status = 413, description = "The body is over 1 MiB.", body = ErrorBody)))]
async fn send(
    Extension(shared): Sh,
    Extension(info): Info,
    InPath(Session { name }): InPath<Session>,
    req: Request,
) -> Response {
    with_body(&shared, &info, req, move |shared, body: SendBody| {
        let request = ops::outbox::SendRequest::from((name, body));
        let sent = ops::outbox::send(&shared.context(), &request)?;
        Ok(Response::json(200, &sent))
    })
    .await
}

/// A dropped file's name and note.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DropQuery {
    /// The file's name; made safe, and never over another file.
    name: String,
    /// A note from the sender (at most 4096 bytes), kept beside the file as NAME.note.
    note: Option<String>,
}

/// A file from another session (docs/machines.md, "Files between machines"). The sender's machine
/// is told from the peer's address by `Shared::machine_of`.
#[utoipa::path(post, path = "/v1/sessions/{name}/drop", operation_id = "dropFile",
    params(
        Session,
        DropQuery,
        ("X-Shrooms-From-Session" = String, Header, description = "The sending session. Its machine is told from the request's address."),
        ("X-Shrooms-Caged" = Option<String>, Header, description = "Set by a cage's socket: the caged session sending. It is the sender then, whatever X-Shrooms-From-Session says, and only a session that accepts caged senders takes the file.")),
    request_body(content = String, content_type = "application/octet-stream",
        description = "The file, with Content-Length; held to 256 KiB a second after a grace."),
    responses(
        (status = 201, description = "Kept.", body = ops::files::Received),
        (status = 400, description = "A bad request, or an upload that broke off.", body = ErrorBody),
        (status = 403, description = "The session takes no files from this sender, or no caged senders.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 408, description = "The file did not arrive in time.", body = ErrorBody),
        (status = 413, description = "Over the session's bounds.", body = ErrorBody)))]
async fn drop_file(
    Extension(shared): Sh,
    Extension(info): Info,
    InPath(Session { name }): InPath<Session>,
    InQuery(DropQuery {
        name: file_name,
        note,
    }): InQuery<DropQuery>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let length = match body::length(&parts.headers, "a file") {
        Ok(Some(n)) => n,
        Ok(None) => {
            return Response::from_error(&Error::body(
                "a file",
                crate::error::BodyProblem::NoLength,
            ));
        }
        Err(e) => return Response::from_error(&e),
    };
    let from_session = parts
        .headers
        .get("x-shrooms-from-session")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // Through a cage's socket: the caged session is the sender (see
    // `caged_refusal` for why serve may believe the header).
    let caged = parts
        .headers
        .get(crate::turn::cage_socket::CAGED_HEADER)
        .map(|v| v.to_str().map(str::to_string).unwrap_or_default());
    let from_machine = shared.machine_of(info.peer.ip());
    // It must keep a pace of 256 KiB a second after a grace, at every
    // read, so a sender that trickles cannot hold its place for long.
    let (mut upload, timed_out) = body::Upload::new(body, info, shared.upload_grace);
    operation(&shared, move |shared| {
        let drop = ops::files::Drop {
            session: &name,
            from_machine,
            from_session: from_session.as_deref(),
            caged: caged.as_deref(),
            name: &file_name,
            length,
            note: note.as_deref(),
        };
        match ops::files::receive(&shared.context(), &drop, &mut upload) {
            Ok(received) => Ok(Response::json(201, &received)),
            // Out of time: the partial file is removed by `receive`.
            Err(e) if timed_out.load(std::sync::atomic::Ordering::SeqCst) => {
                Err(Fail::Http(Response::error(
                    408,
                    &format!("the file did not arrive in time: {}", e.message()),
                )))
            }
            Err(e) => Err(Fail::Op(e)),
        }
    })
    .await
}

/// A session's settings, as the apps set them: each left out is left as it is.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SettingsBody {
    /// Take tasks and files from caged sessions, as `accept-caged` sets it.
    accept_caged: Option<bool>,
    /// Whom it takes files from (`MACHINE/SESSION` or `MACHINE/*`): the
    /// whole list, replacing the one kept.
    accept_files_from: Option<Vec<String>>,
    /// Kept for the apps, which show and set it.
    auto_approve: Option<bool>,
    /// Kept for the apps, which show and set it.
    starred: Option<bool>,
    /// A refused sender (`MACHINE/SESSION`) to dismiss without allowing it.
    ignore_file_request: Option<String>,
}

/// What a change of settings answers, by either route.
#[derive(utoipa::IntoResponses)]
// Never made: only its description is used, the document's.
#[allow(dead_code, clippy::large_enum_variant)]
enum SettingsAnswers<'a> {
    /// Set: the session (docs/cages.md, "The session object").
    #[response(status = 200)]
    Set(ops::session_object::Session),
    /// A bad request (an unknown field, a bad sender).
    #[response(status = 400)]
    Bad(ErrorBody<'a>),
    /// Asked by a caged session (X-Shrooms-Caged).
    #[response(status = 403)]
    Caged(ErrorBody<'a>),
    /// No such session.
    #[response(status = 404)]
    Missing(ErrorBody<'a>),
    /// The body did not arrive in time.
    #[response(status = 408)]
    Slow(ErrorBody<'a>),
    /// The session is busy.
    #[response(status = 409)]
    Busy(ErrorBody<'a>),
    /// The body is over 1 MiB.
    #[response(status = 413)]
    Large(ErrorBody<'a>),
}

/// Set what the body names, then answer the session object.
async fn change_settings(
    shared: Arc<Shared>,
    info: ConnInfo,
    name: String,
    req: Request,
) -> Response {
    with_body(&shared, &info, req, move |shared, body: SettingsBody| {
        let ctx = shared.context();
        let change = ops::files::SettingsChange {
            accept_caged: body.accept_caged,
            accept_files_from: body.accept_files_from,
            auto_approve: body.auto_approve,
            starred: body.starred,
            ignore_file_request: body.ignore_file_request,
        };
        ops::files::change_settings(&ctx, &name, change)?;
        let record = ctx.store.load(&name)?;
        let shown = match ready_view(shared) {
            Some(live) => session_live(&ctx, &live, &record)?,
            None => {
                let shown = ops::show::show(&ctx, &name);
                said(&ctx);
                shown?
            }
        };
        Ok(Response::json(200, &shown))
    })
    .await
}

/// A session's settings, the apps' way: `accept_caged`, whom it takes files
/// from, `auto_approve`, `starred`, a refused sender dismissed.
#[utoipa::path(post, path = "/v1/sessions/{name}/settings", operation_id = "changeSettings",
    params(Session),
    request_body = SettingsBody,
    responses(SettingsAnswers))]
async fn settings(
    Extension(shared): Sh,
    Extension(info): Info,
    InPath(Session { name }): InPath<Session>,
    req: Request,
) -> Response {
    change_settings(shared, info, name, req).await
}

/// The same as `POST /v1/sessions/{name}/settings`.
#[utoipa::path(patch, path = "/v1/sessions/{name}", operation_id = "patchSession",
    params(Session),
    request_body = SettingsBody,
    responses(SettingsAnswers))]
async fn patch_session(
    Extension(shared): Sh,
    Extension(info): Info,
    InPath(Session { name }): InPath<Session>,
    req: Request,
) -> Response {
    change_settings(shared, info, name, req).await
}

/// `files received`: what a session received.
#[utoipa::path(get, path = "/v1/sessions/{name}/drop", operation_id = "receivedFiles",
    params(Session),
    responses(
        (status = 200, description = "The files, by sender.", body = ops::files::ReceivedList),
        (status = 400, description = "Not a session name.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody)))]
async fn received(Extension(shared): Sh, InPath(Session { name }): InPath<Session>) -> Response {
    operation(&shared, move |shared| {
        Ok(Response::json(
            200,
            &ops::files::received(&shared.context(), &name)?,
        ))
    })
    .await
}

/// `cage history --net`: the session's egress log, oldest first.
#[utoipa::path(get, path = "/v1/sessions/{name}/egress", operation_id = "egressLog",
    params(Session),
    responses(
        (status = 200, description = "Each connection its cage opened or was refused (docs/network.md, \"The egress log\").", body = ops::history::Egress),
        (status = 400, description = "Not a session name.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody)))]
async fn egress(Extension(shared): Sh, InPath(Session { name }): InPath<Session>) -> Response {
    operation(&shared, move |shared| {
        Ok(Response::json(
            200,
            &ops::history::egress(&shared.context(), &name)?,
        ))
    })
    .await
}

/// Which received file to delete.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ClearQuery {
    /// The sender, MACHINE/SESSION, as listed.
    from: String,
    /// The file's name, as listed.
    file: String,
}

/// `files clear`: delete one received file, and its note.
#[utoipa::path(delete, path = "/v1/sessions/{name}/drop", operation_id = "clearReceived",
    params(
        Session,
        ClearQuery),
    responses(
        (status = 204, description = "Deleted."),
        (status = 400, description = "A bad request: a sender or a name that is not one (a path).", body = ErrorBody),
        (status = 403, description = "Asked by a caged session (X-Shrooms-Caged).", body = ErrorBody),
        (status = 404, description = "No such session, or no such file.", body = ErrorBody)))]
async fn clear_received(
    InPath(Session { name }): InPath<Session>,
    InQuery(ClearQuery { from, file }): InQuery<ClearQuery>,
    Extension(shared): Sh,
) -> Response {
    operation(&shared, move |shared| {
        ops::files::clear(&shared.context(), &name, &from, &file)?;
        Ok(Response::no_content())
    })
    .await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AcceptCagedBody {
    /// Take tasks and files from caged sessions (true) or refuse them (false).
    accept_caged: bool,
}

/// `cage accept-caged`: whether a session takes tasks and files from
/// caged sessions ("caged tasks").
#[utoipa::path(post, path = "/v1/sessions/{name}/accept-caged", operation_id = "acceptCaged",
    params(Session),
    request_body = AcceptCagedBody,
    responses(
        (status = 200, description = "Set.", body = ops::files::AcceptCaged),
        (status = 400, description = "A bad request.", body = ErrorBody),
        (status = 403, description = "Asked by a caged session (X-Shrooms-Caged).", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 408, description = "The body did not arrive in time.", body = ErrorBody),
        (status = 409, description = "The session is busy.", body = ErrorBody),
        (status = 413, description = "The body is over 1 MiB.", body = ErrorBody)))]
async fn accept_caged(
    Extension(shared): Sh,
    Extension(info): Info,
    InPath(Session { name }): InPath<Session>,
    req: Request,
) -> Response {
    with_body(&shared, &info, req, move |shared, body: AcceptCagedBody| {
        let r = ops::files::set_accept_caged(&shared.context(), &name, body.accept_caged)?;
        Ok(Response::json(200, &r))
    })
    .await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct BringBody {
    /// Also fast-forward your checked-out branch to the session's commit
    /// of the same branch (refused where that is not a fast-forward or
    /// would change your index or files).
    #[serde(default)]
    ff: bool,
}

/// `cage bring`: the session's commits brought into your repository as
/// `cage/<session>/<branch>` (docs/security.md, "Git in a cage").
#[utoipa::path(post, path = "/v1/sessions/{name}/bring", operation_id = "bringCommits",
    params(Session),
    request_body = BringBody,
    responses(
        (status = 200, description = "What came in, what was refused, what the fast-forward did.", body = ops::bring::Brought),
        (status = 400, description = "A bad request: a session without a cage, or without a git directory of its own.", body = ErrorBody),
        (status = 403, description = "Asked by a caged session (X-Shrooms-Caged).", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 408, description = "The body did not arrive in time.", body = ErrorBody),
        (status = 409, description = "The session is busy.", body = ErrorBody),
        (status = 413, description = "The body is over 1 MiB.", body = ErrorBody)))]
async fn bring(
    Extension(shared): Sh,
    Extension(info): Info,
    InPath(Session { name }): InPath<Session>,
    req: Request,
) -> Response {
    with_body(&shared, &info, req, move |shared, body: BringBody| {
        let r = ops::bring::bring(&shared.context(), &name, body.ff)?;
        Ok(Response::json(200, &r))
    })
    .await
}

/// Start building one of our images, in the background.
#[utoipa::path(post, path = "/v1/images/build", operation_id = "buildImage",
    request_body = BuildBody,
    responses(
        (status = 202, description = "Started, or running, or current.", body = ops::image::BuildReport),
        (status = 400, description = "Not an image of ours.", body = ErrorBody),
        (status = 408, description = "The body did not arrive in time.", body = ErrorBody),
        (status = 413, description = "The body is over 1 MiB.", body = ErrorBody)))]
async fn build(Extension(shared): Sh, Extension(info): Info, req: Request) -> Response {
    with_body(&shared, &info, req, |shared, body: BuildBody| {
        let repo = shared.base.settings.images_repo.as_str();
        let request = ops::image::BuildRequest::try_from((body, repo))?;
        let report = ops::image::build(&shared.context(), &request, &mut |_| {})?;
        shared.state.poke();
        Ok(Response::json(202, &report))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body serde refuses names the field it refused as data, in the
    /// 400's body: an unknown field by the name sent, a value of the wrong
    /// type by its field's path; a body refused as a whole names none.
    #[test]
    fn a_refused_body_names_its_field() {
        let refused = |body: &str| -> (u16, serde_json::Value) {
            let e = parse_body::<SettingsBody>(body.as_bytes()).unwrap_err();
            let r = Response::from_error(&e);
            (r.status, serde_json::from_slice(&r.body).unwrap())
        };
        let (status, body) = refused(r#"{"starred": true, "pinned": true}"#);
        assert_eq!(status, 400);
        assert_eq!(body["field"], "pinned", "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .starts_with("the body: unknown field `pinned`, expected one of"),
            "{body}"
        );
        assert_eq!(refused(r#"{"starred": "yes"}"#).1["field"], "starred");
        assert_eq!(
            refused(r#"{"accept_files_from": ["a/b", 3]}"#).1["field"],
            "accept_files_from"
        );
        // Nested: the path as the body writes it.
        let e = parse_body::<MoveBody>(br#"{"cage": {"nix": true, "gpu": 1}}"#).unwrap_err();
        assert_eq!(e.body_field(), Some("cage.gpu"));
        let e = parse_body::<LimitsBody>(br#"{"cpus": true}"#).unwrap_err();
        assert_eq!(e.body_field(), Some("cpus"));
        // The body as a whole: not JSON, a field of its own missing,
        // something after it.
        for whole in [r#"{"starred": true"#, "[]", r#"{"starred": true} {}"#] {
            let (status, body) = refused(whole);
            assert_eq!(status, 400, "{whole}");
            assert_eq!(body.get("field"), None, "{whole}: {body}");
        }
        let e = parse_body::<RenameBody>(b"{}").unwrap_err();
        assert_eq!(
            (e.body_field(), e.message().as_str()),
            (None, "the body: missing field `name` at line 1 column 2")
        );
        // The words serde_json::from_slice gives, unchanged.
        let bad = br#"{"starred": true} x"#;
        assert_eq!(
            parse_body::<SettingsBody>(bad).unwrap_err().message(),
            format!(
                "the body: {}",
                serde_json::from_slice::<SettingsBody>(bad).unwrap_err()
            )
        );
    }
}
