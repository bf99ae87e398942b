//! The router and its OpenAPI document, made together from the routes'
//! declarations: `routes`' operations, `page`'s status page, `form`'s
//! post of its form and the document's own route, each its handler with its `#[utoipa::path]`
//! (utoipa-axum's `OpenApiRouter`). Here too: the answers of the router
//! itself (404 for an unknown path, 405 with `Allow` for a method a path
//! does not take), and the refusal of a change asked through a cage's
//! socket, which needs the list of routes.

use std::sync::LazyLock;

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::routing::get;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::reply::{ErrorBody, Response, for_log};
use super::{form, page, routes};

/// What the document says of itself; its paths and types come from the
/// routes ([`made`]).
#[derive(OpenApi)]
#[openapi(
    info(
        title = "shrooms-agent serve",
        description = "The operations of shrooms-agent over HTTP: one request per connection, \
            JSON in and out. Every error is {\"error\": \"...\"} with the words the CLI prints. \
            A serve started with --token-file needs `Authorization: Bearer <token>` on every \
            request (401 otherwise); one started without it answers only its own user's \
            programs and refuses requests that look like they came from a web page (403). A \
            request whose method a path does not take is answered 405 with Allow; an unknown \
            path 404; a slow request 408; a busy serve 503."
    ),
    servers((url = "/")),
)]
struct ApiDoc;

/// The routes and the document: each route's method and path, its
/// parameters and answers, from its `#[utoipa::path]` alone. Made once:
/// the router, the route list and the served document all come from it.
static MADE: LazyLock<(axum::Router, utoipa::openapi::OpenApi)> = LazyLock::new(|| {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(page::api())
        .merge(form::api())
        .routes(routes!(openapi))
        .merge(routes::api())
        .split_for_parts()
});

/// The router: the routes, 405 with Allow for another method on a path
/// of them, 404 for the rest; and the panicking route for tests.
pub fn router(test_panic: bool) -> axum::Router {
    let mut router = MADE
        .0
        .clone()
        .method_not_allowed_fallback(|req: Request| async move {
            let allow: Vec<&str> = routes_of(req.uri().path()).map(|(m, _)| m).collect();
            not_allowed(&req, &allow.join(", "))
        });
    if test_panic {
        // Not in the document: a test's.
        router = router.route(
            "/v1/_test/panic",
            get(routes::test_panic)
                .fallback(|req: Request| async move { not_allowed(&req, "GET") }),
        );
    }
    router.fallback(|req: Request| async move {
        Response::error(
            404,
            &format!(
                "no such route: {}",
                for_log(req.uri().path(), req.uri().query())
            ),
        )
    })
}

fn not_allowed(req: &Request, allow: &str) -> Response {
    Response::error(
        405,
        &format!(
            "{} is not allowed on {}: use {allow}",
            req.method().as_str().chars().take(16).collect::<String>(),
            for_log(req.uri().path(), req.uri().query())
        ),
    )
    .with_header("allow", allow)
}

/// Every route, as the document lists them: method and path.
static ROUTES: LazyLock<Vec<(&'static str, String)>> = LazyLock::new(|| {
    let mut all = Vec::new();
    for (path, item) in &MADE.1.paths.paths {
        for (method, op) in [
            ("GET", &item.get),
            ("PUT", &item.put),
            ("POST", &item.post),
            ("DELETE", &item.delete),
            ("PATCH", &item.patch),
        ] {
            if op.is_some() {
                all.push((method, path.clone()));
            }
        }
    }
    all
});

/// The routes whose path `path` is (a `{...}` of theirs takes any one
/// segment), as the router matches it: on the path as sent, not decoded.
fn routes_of(path: &str) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    ROUTES
        .iter()
        .filter(move |(_, p)| {
            let want: Vec<&str> = p.split('/').skip(1).collect();
            want.len() == segs.len()
                && want
                    .iter()
                    .zip(&segs)
                    .all(|(w, s)| w.starts_with('{') || w == s)
        })
        .map(|(m, p)| (*m, p.as_str()))
}

/// The document as served, made once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| render(MADE.1.clone()));

/// The OpenAPI document, as `GET /v1/openapi.json` answers it.
pub fn document() -> &'static str {
    &DOCUMENT
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", operation_id = "openapi",
    responses((status = 200, description = "The OpenAPI document.", body = Object)))]
async fn openapi() -> Response {
    Response {
        status: 200,
        headers: Vec::new(),
        body: document().as_bytes().to_vec(),
    }
}

/// Why a request that carries `X-Shrooms-Caged` is refused before its
/// route, if it is: every route of serve's that changes something, but a
/// drop (which the header names the sender of); deleting a received file
/// is refused too. Routes serve does not have
/// (A2A's) get serve's own 404.
///
/// Who can send the header: serve answers only its own user's programs
/// (loopback, the Unix socket) or a holder of its token; no cage can reach
/// it (the agent port is closed in every cage, and the Unix socket is not
/// mounted in one), except through its own socket, which always sets the
/// header to its session. And the header only ever takes away: a sender
/// that leaves it out is refused nothing more than one that sends it.
pub fn caged_refusal(method: &str, path: &str, headers: &HeaderMap) -> Option<Response> {
    let caged = headers.get(crate::turn::cage_socket::CAGED_HEADER)?;
    if method == "GET" || method == "HEAD" {
        return None;
    }
    let route = routes_of(path).find(|(m, _)| *m == method)?;
    if route == ("POST", "/v1/sessions/{name}/drop") {
        return None;
    }
    Some(Response::error(
        403,
        &format!(
            "a caged session ({}) changes no settings: {method} {} is refused through a cage's \
             socket",
            String::from_utf8_lossy(caged.as_bytes())
                .chars()
                .take(64)
                .collect::<String>(),
            route.1
        ),
    ))
}

/// The answers any request can get before its route, with what each means.
const BEFORE_THE_ROUTE: [(&str, &str); 4] = [
    (
        "401",
        "This serve wants its token (Authorization: Bearer), and it was missing or wrong.",
    ),
    (
        "403",
        "Without a token: another user's program, or a request from a web page; a \
         change asked through a cage's socket (X-Shrooms-Caged); or an operation's refusal.",
    ),
    ("500", "A failure on the machine, in the CLI's words."),
    (
        "503",
        "Not ready (no podman, an image being built) or busy; see Retry-After.",
    ),
];

/// Every operation of the document lists the answers of
/// [`BEFORE_THE_ROUTE`] it does not list already, each with the error body.
fn answers_before_the_route(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{ContentBuilder, RefOr, ResponseBuilder};
    for item in doc.paths.paths.values_mut() {
        for op in [
            &mut item.get,
            &mut item.post,
            &mut item.delete,
            &mut item.put,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        {
            for (status, description) in BEFORE_THE_ROUTE {
                if !op.responses.responses.contains_key(status) {
                    let r = ResponseBuilder::new()
                        .description(description)
                        .content(
                            "application/json",
                            ContentBuilder::new()
                                .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                                    "ErrorBody",
                                ))))
                                .build(),
                        )
                        .build();
                    op.responses
                        .responses
                        .insert(status.to_string(), RefOr::T(r));
                }
            }
        }
    }
}

/// The document as served: every operation also lists the answers any
/// request can get before its route (401, 403, 500, 503) and the token.
fn render(mut doc: utoipa::openapi::OpenApi) -> String {
    use utoipa::openapi::security::{
        HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
    };
    let version = env!("CARGO_PKG_VERSION");
    doc.info.version = version.to_string();
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "The first line of the file given to `serve --token-file`. A serve \
                     started without one (loopback only) wants none.",
                ))
                .build(),
        ),
    );
    components.schemas.insert("ErrorBody".to_string(), {
        use utoipa::PartialSchema;
        ErrorBody::schema()
    });
    doc.security = Some(vec![
        SecurityRequirement::new("bearer", Vec::<String>::new()),
        SecurityRequirement::default(),
    ]);
    answers_before_the_route(&mut doc);
    let mut text = doc.to_pretty_json().unwrap_or_else(|e| {
        serde_json::json!({ "error": format!("making the document: {e}") }).to_string()
    });
    text.push('\n');
    text
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
        let doc: serde_json::Value = serde_json::from_str(document()).unwrap();
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
        assert_eq!(operations, 21);
        assert!(
            doc["paths"]["/v1/sessions"]["post"]["responses"]
                .as_object()
                .unwrap()
                .contains_key("409")
        );
    }

    /// The router and the document agree, path by path: each method the
    /// document gives a path is answered by its handler (not 404, not 405:
    /// without serve's state around it, a handler answers 500), each other
    /// method 405 with the document's methods in Allow; a path outside the
    /// document 404. And the document has the routes it had when they were
    /// listed by hand.
    #[test]
    fn the_document_and_the_routes_agree() {
        let doc: serde_json::Value = serde_json::from_str(document()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let router = router(false);
        let answer = |method: &str, uri: &str| {
            let req = axum::http::Request::builder()
                .method(method)
                .uri(uri)
                .body(axum::body::Body::empty())
                .unwrap();
            runtime
                .block_on(tower::ServiceExt::oneshot(router.clone(), req))
                .unwrap()
        };
        let mut documented = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            // In the order Allow gives them.
            let methods: Vec<&str> = ["GET", "PUT", "POST", "DELETE", "PATCH"]
                .into_iter()
                .filter(|m| item.get(m.to_lowercase()).is_some())
                .collect();
            let uri = path.replace("{name}", "some-session");
            for method in ["GET", "PUT", "POST", "DELETE", "PATCH"] {
                let r = answer(method, &uri);
                if methods.contains(&method) {
                    assert!(
                        ![404, 405].contains(&r.status().as_u16()),
                        "{method} {uri}: {}",
                        r.status()
                    );
                    documented.push(format!("{method} {path}"));
                } else {
                    assert_eq!(r.status().as_u16(), 405, "{method} {uri}");
                    assert_eq!(r.headers()["allow"], methods.join(", "), "{method} {uri}");
                }
            }
        }
        let r = answer("GET", "/v1/nothing");
        assert_eq!(r.status().as_u16(), 404);
        assert_eq!(
            answer("PUT", "/v1/sessions").headers()["allow"],
            "GET, POST"
        );
        documented.sort();
        let mut listed = [
            "GET /",
            "POST /limits/{name}",
            "GET /v1/harnesses",
            "GET /v1/openapi.json",
            "GET /v1/sessions",
            "POST /v1/sessions",
            "GET /v1/sessions/{name}",
            "DELETE /v1/sessions/{name}",
            "PATCH /v1/sessions/{name}",
            "POST /v1/sessions/{name}/cage",
            "POST /v1/sessions/{name}/cage/limits",
            "POST /v1/sessions/{name}/rename",
            "POST /v1/sessions/{name}/outbox/send",
            "GET /v1/sessions/{name}/drop",
            "POST /v1/sessions/{name}/drop",
            "DELETE /v1/sessions/{name}/drop",
            "GET /v1/sessions/{name}/egress",
            "POST /v1/sessions/{name}/settings",
            "POST /v1/sessions/{name}/accept-caged",
            "POST /v1/sessions/{name}/bring",
            "POST /v1/images/build",
        ];
        listed.sort();
        assert_eq!(documented, listed);
    }

    /// A path or a query that does not parse is refused by its typed
    /// extractor with our body and 400, before the route's operation.
    #[test]
    fn a_bad_path_or_query_is_our_400() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let router = router(false);
        for (uri, says) in [
            ("/v1/sessions/x/drop?from=here/y", "missing field `file`"),
            (
                "/v1/sessions/x/drop?from=a&file=b&file=c",
                "duplicate field `file`",
            ),
            ("/v1/sessions/%FF/drop?from=a&file=b", "the path: "),
        ] {
            let req = axum::http::Request::builder()
                .method("DELETE")
                .uri(uri)
                .body(axum::body::Body::empty())
                .unwrap();
            let r = runtime
                .block_on(tower::ServiceExt::oneshot(router.clone(), req))
                .unwrap();
            assert_eq!(r.status().as_u16(), 400, "{uri}");
            assert_eq!(r.headers()["content-type"], "application/json", "{uri}");
            let body = runtime
                .block_on(axum::body::to_bytes(r.into_body(), 4096))
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let error = body["error"].as_str().unwrap();
            assert!(error.contains(says), "{uri}: {error}");
        }
    }

    /// assets/openapi.json is the document serve makes, for readers of the
    /// repository and the tools that take a file. `SHROOMS_WRITE_OPENAPI=1`
    /// (scripts/generate-docs) writes it anew.
    #[test]
    fn the_committed_document_is_current() {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/openapi.json");
        let made = document();
        if std::env::var_os("SHROOMS_WRITE_OPENAPI").is_some() {
            std::fs::write(file, made).unwrap();
        }
        let committed = std::fs::read_to_string(file).unwrap_or_default();
        assert!(
            committed == made,
            "assets/openapi.json is stale: run scripts/generate-docs"
        );
    }
}
