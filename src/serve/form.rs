//! `POST /limits/{name}`: the status page's form (docs/serve.md, "HTTP
//! API"), which sets a session's token budget, or removes it, as
//! `cage limits NAME --tokens` does and through the very same operation
//! as `POST /v1/sessions/{name}/cage/limits`; then sends the browser back
//! to the page (303). What it refuses changes nothing, and is answered
//! with a small HTML page saying why.
//!
//! A browser posts a form wherever any page it shows tells it to, cookies
//! or not (cross-site request forgery), and a serve without a token takes
//! its own user's browser as its own user: every check serve makes of a
//! request still applies (the peer's user, a token, one `Host` that is an
//! address or localhost, against DNS rebinding), and on top of them:
//!
//! - the page's secret: drawn when serve starts (getrandom(2)), put in
//!   each of the page's forms, compared in constant time. Another site's
//!   page cannot read the status page (the same-origin policy; serve sends
//!   no CORS header), so it cannot know it;
//! - an `Origin` other than serve's own, or a `Sec-Fetch-Site` other than
//!   `same-origin`, is refused: what a browser says of where the post
//!   came from (the Fetch standard, and Fetch Metadata), when it says it;
//! - a body of the form's type (`application/x-www-form-urlencoded`), of
//!   at most [`MAX_FORM`] bytes, with the secret and `tokens` once each and
//!   nothing else.

use axum::Extension;
use axum::extract::Request;
use axum::http::HeaderMap;
use axum::http::header::{CONTENT_TYPE, HOST, ORIGIN};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::body::{self, Unread};
use super::page;
use super::reply::{ErrorBody, Response, parse_query, same_secret};
use super::routes::{InPath, Info, Session, Sh, by, operation};
use crate::error::{Error, Face, Result};
use crate::ops;

/// The form's body, at most: its two short fields, with room to spare.
pub const MAX_FORM: u64 = 4096;

/// The page's secret's random bytes (written in hex).
const SECRET_BYTES: usize = 32;

/// The form's route, from its `#[utoipa::path]`.
pub fn api() -> OpenApiRouter {
    OpenApiRouter::new().routes(routes!(set_budget))
}

/// A new page secret: [`SECRET_BYTES`] random bytes, in hex.
pub fn draw_secret() -> Result<String> {
    let mut bytes = [0u8; SECRET_BYTES];
    let n = rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty());
    if n.ok() != Some(bytes.len()) {
        return Err(Error::no_random());
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether a route takes a request whose `Origin` is serve's own: the
/// status page, and its form's post (a browser names the origin on every
/// post, and may on the page's load after the form's 303).
pub fn takes_own_origin(method: &str, path: &str) -> bool {
    match method {
        "GET" => path == "/",
        "POST" => path
            .strip_prefix("/limits/")
            .is_some_and(|name| !name.is_empty() && !name.contains('/')),
        _ => false,
    }
}

/// Whether the request's one `Origin` is serve's own, as the browser
/// reached it: `http://` and the request's one `Host`.
pub fn own_origin(headers: &HeaderMap) -> bool {
    let (mut origins, mut hosts) = (headers.get_all(ORIGIN).iter(), headers.get_all(HOST).iter());
    match (origins.next(), origins.next(), hosts.next(), hosts.next()) {
        (Some(origin), None, Some(host), None) => origin
            .as_bytes()
            .strip_prefix(b"http://")
            .is_some_and(|o| o.eq_ignore_ascii_case(host.as_bytes())),
        _ => false,
    }
}

/// Pure: why a post does not come from serve's own page, as far as the
/// browser says: an `Origin` not serve's own, a `Sec-Fetch-Site` not
/// `same-origin` (either sent twice is refused too). A program that sends
/// neither is judged by the secret alone.
pub fn not_from_the_page(headers: &HeaderMap) -> Option<String> {
    if headers.contains_key(ORIGIN) && !own_origin(headers) {
        let origins: Vec<String> = headers
            .get_all(ORIGIN)
            .iter()
            .map(|o| {
                String::from_utf8_lossy(o.as_bytes())
                    .chars()
                    .take(100)
                    .collect()
            })
            .collect();
        return Some(format!(
            "this form is taken from serve's own status page only; this post came from \
             Origin: {}",
            origins.join(", ")
        ));
    }
    let mut sites = headers.get_all("sec-fetch-site").iter();
    match (sites.next(), sites.next()) {
        (None, _) => None,
        (Some(site), None) if site.as_bytes() == b"same-origin" => None,
        _ => Some(
            "this form is taken from serve's own status page only; the browser says this \
             post came from another site (Sec-Fetch-Site)"
                .into(),
        ),
    }
}

/// Pure: why a body is not of the form's type.
fn not_a_form(headers: &HeaderMap) -> Option<String> {
    let given = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = given.split(';').next().unwrap_or("").trim();
    (!essence.eq_ignore_ascii_case("application/x-www-form-urlencoded")).then(|| {
        format!(
            "this route takes the status page's form (Content-Type: \
             application/x-www-form-urlencoded), not {:?}",
            given.chars().take(100).collect::<String>()
        )
    })
}

/// What the form sends.
#[derive(ToSchema)]
pub struct BudgetForm {
    /// The status page's secret, as the page's form holds it.
    secret: String,
    /// The token budget, as `cage limits --tokens` takes it: a positive
    /// whole number, with `k` (thousands) or `M` (millions) after it if
    /// wanted (`500k`, `2M`), or `none` for no budget.
    tokens: String,
}

/// Why a post changed nothing: its status, and why in words.
type Refused = (u16, String);

/// Pure: the form's fields: `secret` and `tokens` once each, nothing else
/// (400); a form without its secret is no form of the page's (403).
fn read_form(body: &[u8]) -> std::result::Result<BudgetForm, Refused> {
    let bad = |why: String| (400, why);
    let text = std::str::from_utf8(body).map_err(|_| bad("the form is not UTF-8".into()))?;
    let (mut secret, mut tokens) = (None, None);
    for (name, value) in parse_query(text) {
        let field = match name.as_str() {
            "secret" => &mut secret,
            "tokens" => &mut tokens,
            _ => {
                return Err(bad(format!(
                    "the form has a field {:?}; it takes secret and tokens only",
                    name.chars().take(40).collect::<String>()
                )));
            }
        };
        if field.replace(value).is_some() {
            return Err(bad(format!("the form has {name} twice")));
        }
    }
    let secret = secret.ok_or_else(|| (403, NO_SECRET.to_string()))?;
    let tokens = tokens.ok_or_else(|| bad("the form has no tokens".into()))?;
    Ok(BudgetForm { secret, tokens })
}

const NO_SECRET: &str = "this form does not carry the status page's secret: set the budget \
                         from the page itself (reload it if serve was started again since)";

/// Pure: the budget a form's body asks for, once it carries the page's
/// secret (403 otherwise, before its other fields are read for meaning);
/// bad tokens are the operation's own 400.
pub fn checked(body: &[u8], secret: &str) -> std::result::Result<Option<u64>, Refused> {
    let form = read_form(body)?;
    if !same_secret(form.secret.as_bytes(), secret.as_bytes()) {
        return Err((403, NO_SECRET.into()));
    }
    ops::limits::parse_tokens(&form.tokens).map_err(|e| said(&e))
}

/// An operation's error as the form's answer gives it.
fn said(e: &Error) -> Refused {
    (e.http_status(), e.words(Face::Http))
}

/// Set a session's token budget from the status page: its form's post
/// (`application/x-www-form-urlencoded`: the page's `secret` and `tokens`),
/// which sets the budget through the same operation as
/// `POST /v1/sessions/{name}/cage/limits` with `tokens` alone, then sends
/// the browser back to the page.
///
/// For a browser, not a program: a program sets a budget with the limits
/// route. A post whose `Origin` is not serve's own, whose
/// `Sec-Fetch-Site` is not `same-origin`, or without the page's secret is
/// refused 403; bad tokens 400; every refusal is a small HTML page with
/// why, and changes nothing.
#[utoipa::path(post, path = "/limits/{name}", operation_id = "setBudgetFromPage",
    params(Session),
    request_body(content = BudgetForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Set: back to the status page.",
            headers(("location" = String, description = "/"))),
        (status = 400, description = "Bad tokens, or a form with other fields: changed nothing.",
            content((String = "text/html"), (ErrorBody = "application/json"))),
        (status = 403, description = "Not from serve's own status page (its Origin, its \
            Sec-Fetch-Site, no secret or a wrong one), or refused before the route.",
            content((String = "text/html"), (ErrorBody = "application/json"))),
        (status = 404, description = "No such session.", content_type = "text/html", body = String),
        (status = 408, description = "The form did not arrive in time.",
            content_type = "text/html", body = String),
        (status = 409, description = "The session is busy, or in no cage.",
            content_type = "text/html", body = String),
        (status = 413, description = "The form is over 4 KiB.",
            content_type = "text/html", body = String),
        (status = 415, description = "Not a form (application/x-www-form-urlencoded).",
            content_type = "text/html", body = String)))]
async fn set_budget(
    Extension(shared): Sh,
    Extension(info): Info,
    InPath(Session { name }): InPath<Session>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    if let Some(why) = not_from_the_page(&parts.headers) {
        return page::not_changed(403, &why);
    }
    if let Some(why) = not_a_form(&parts.headers) {
        return page::not_changed(415, &why);
    }
    match body::length(&parts.headers, "the form") {
        Err(e) => return page::not_changed(e.http_status(), &e.words(Face::Http)),
        Ok(Some(len)) if len > MAX_FORM => {
            let why = format!("the form is {len} bytes; it may be at most {MAX_FORM}");
            return page::not_changed(413, &why);
        }
        Ok(_) => {}
    }
    let bytes = match body::whole(&info, &parts.headers, body, MAX_FORM).await {
        Ok(b) => b,
        Err(Unread::Op(e)) => return page::not_changed(e.http_status(), &e.words(Face::Http)),
        Err(Unread::Http(r)) => {
            return page::not_changed(r.status, "the form did not arrive in time");
        }
    };
    let tokens = match checked(&bytes, &shared.page_secret) {
        Ok(t) => t,
        Err((status, why)) => return page::not_changed(status, &why),
    };
    let request = ops::limits::LimitsRequest {
        name,
        tokens: Some(tokens),
        by: Some(by(&shared, &info)),
        ..Default::default()
    };
    operation(&shared, move |shared| {
        Ok(match ops::limits::limits(&shared.context(), &request) {
            Ok(_) => back_to_the_page(),
            Err(e) => {
                let (status, why) = said(&e);
                page::not_changed(status, &why)
            }
        })
    })
    .await
}

/// 303 to the page, which the browser then loads afresh.
fn back_to_the_page() -> Response {
    let mut r = page::html(303, String::new());
    r.headers.push(("location", "/".into()));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    /// The browser's own post from the page passes, and so does a program
    /// that says nothing of where it came from; another site's page, or a
    /// browser that says the post is cross-site or same-site, does not.
    #[test]
    fn a_post_from_another_site_is_refused() {
        let host = ("host", "127.0.0.1:7387");
        for ok in [
            vec![
                host,
                ("origin", "http://127.0.0.1:7387"),
                ("sec-fetch-site", "same-origin"),
            ],
            vec![host, ("origin", "http://127.0.0.1:7387")],
            vec![host],
            vec![
                ("host", "localhost:7387"),
                ("origin", "http://LocalHost:7387"),
            ],
        ] {
            assert_eq!(not_from_the_page(&headers(&ok)), None, "{ok:?}");
        }
        for bad in [
            vec![host, ("origin", "http://attacker.example")],
            vec![host, ("origin", "null")],
            vec![host, ("origin", "http://127.0.0.1:7388")],
            vec![host, ("origin", "https://127.0.0.1:7387")],
            vec![("origin", "http://127.0.0.1:7387")],
            vec![
                host,
                ("origin", "http://127.0.0.1:7387"),
                ("origin", "http://attacker.example"),
            ],
            vec![host, ("sec-fetch-site", "cross-site")],
            vec![host, ("sec-fetch-site", "same-site")],
            vec![host, ("sec-fetch-site", "none")],
            vec![
                host,
                ("origin", "http://127.0.0.1:7387"),
                ("sec-fetch-site", "cross-site"),
            ],
            vec![
                host,
                ("sec-fetch-site", "same-origin"),
                ("sec-fetch-site", "cross-site"),
            ],
        ] {
            let why = not_from_the_page(&headers(&bad));
            assert!(
                why.as_deref()
                    .is_some_and(|w| w.contains("serve's own status page only")),
                "{bad:?}: {why:?}"
            );
        }
        let why = not_from_the_page(&headers(&[host, ("origin", "http://attacker.example")]));
        assert!(why.unwrap().contains("Origin: http://attacker.example"));
    }

    /// Serve's own origin lets the page and its form's post through the
    /// checks of every route, and no other route.
    #[test]
    fn only_the_page_and_its_form_take_serves_own_origin() {
        assert!(takes_own_origin("GET", "/"));
        assert!(takes_own_origin("POST", "/limits/webapp"));
        for (m, p) in [
            ("POST", "/"),
            ("GET", "/limits/webapp"),
            ("POST", "/limits/"),
            ("POST", "/limits/a/b"),
            ("POST", "/v1/sessions/webapp/cage/limits"),
            ("GET", "/v1/sessions"),
            ("DELETE", "/limits/webapp"),
        ] {
            assert!(!takes_own_origin(m, p), "{m} {p}");
        }
        assert!(own_origin(&headers(&[
            ("host", "[::1]:7387"),
            ("origin", "http://[::1]:7387")
        ])));
        assert!(!own_origin(&headers(&[("host", "127.0.0.1:7387")])));
        assert!(!own_origin(&headers(&[
            ("host", "127.0.0.1:7387"),
            ("host", "attacker.example"),
            ("origin", "http://127.0.0.1:7387")
        ])));
    }

    #[test]
    fn only_a_form_is_taken() {
        let form = |t: &'static str| not_a_form(&headers(&[("content-type", t)]));
        assert_eq!(form("application/x-www-form-urlencoded"), None);
        assert_eq!(
            form("Application/X-WWW-Form-URLEncoded; charset=UTF-8"),
            None
        );
        for bad in [
            "application/json",
            "text/plain",
            "multipart/form-data; boundary=x",
        ] {
            assert!(form(bad).is_some(), "{bad}");
        }
        assert!(not_a_form(&HeaderMap::new()).is_some());
    }

    /// The secret first: without it, or with a wrong one (however near),
    /// 403 whatever else the form says; then the tokens, as `cage limits
    /// --tokens` reads them, 400 in its words when bad; a form with other
    /// fields, or one twice, 400.
    #[test]
    fn a_form_needs_the_secret_then_good_tokens() {
        let secret = "0123456789abcdef";
        let ok = |body: &str| checked(body.as_bytes(), secret);
        assert_eq!(ok("secret=0123456789abcdef&tokens=2M"), Ok(Some(2_000_000)));
        assert_eq!(ok("tokens=500k&secret=0123456789abcdef"), Ok(Some(500_000)));
        assert_eq!(ok("secret=0123456789abcdef&tokens=none"), Ok(None));
        assert_eq!(
            ok("secret=0123456789abcdef&tokens=+1.5M+"),
            Ok(Some(1_500_000))
        );
        for forged in [
            "tokens=2M",
            "secret=&tokens=2M",
            "secret=0123456789abcdee&tokens=2M",
            "secret=0123456789abcde&tokens=2M",
            "secret=0123456789abcdef0&tokens=2M",
            "secret=x&tokens=0",
            "",
        ] {
            let (status, why) = ok(forged).unwrap_err();
            assert_eq!(status, 403, "{forged}");
            assert!(why.contains("status page's secret"), "{forged}: {why}");
        }
        let (status, why) = ok("secret=0123456789abcdef&tokens=0").unwrap_err();
        assert_eq!(status, 400);
        assert!(
            why.contains("tokens") && why.contains("0 would refuse"),
            "{why}"
        );
        let (status, why) = ok("secret=0123456789abcdef&tokens=lots").unwrap_err();
        assert_eq!(status, 400);
        assert!(why.contains("\"lots\" is not a number of tokens"), "{why}");
        for (body, says) in [
            ("secret=0123456789abcdef", "no tokens"),
            (
                "secret=0123456789abcdef&tokens=1M&tokens=2M",
                "tokens twice",
            ),
            (
                "secret=0123456789abcdef&secret=0123456789abcdef&tokens=1M",
                "secret twice",
            ),
            (
                "secret=0123456789abcdef&tokens=1M&memory=1g",
                "a field \"memory\"",
            ),
        ] {
            let (status, why) = ok(body).unwrap_err();
            assert_eq!(status, 400, "{body}");
            assert!(why.contains(says), "{body}: {why}");
        }
        assert_eq!(
            checked(b"secret=\xff&tokens=1M", secret).unwrap_err().0,
            400
        );
    }

    #[test]
    fn the_secret_is_fresh_hex() {
        let a = draw_secret().unwrap();
        let b = draw_secret().unwrap();
        assert_eq!(a.len(), 2 * SECRET_BYTES);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }

    /// What the browser is sent back: 303 to the page, never kept; a
    /// refusal, its status and why (escaped), with the page's headers.
    #[test]
    fn the_answers_are_the_pages() {
        let r = back_to_the_page();
        assert_eq!(r.status, 303);
        let header = |r: &Response, k: &str| {
            r.headers
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(header(&r, "location").as_deref(), Some("/"));
        assert_eq!(header(&r, "cache-control").as_deref(), Some("no-store"));
        let r = page::not_changed(400, "field \"tokens\": <b>lots</b>");
        assert_eq!(r.status, 400);
        assert_eq!(
            header(&r, "content-type").as_deref(),
            Some("text/html; charset=utf-8")
        );
        assert_eq!(
            header(&r, "content-security-policy").as_deref(),
            Some(page::CSP)
        );
        let body = String::from_utf8(r.body).unwrap();
        assert!(body.contains("(400 Bad Request)"), "{body}");
        assert!(
            body.contains("field &quot;tokens&quot;: &lt;b&gt;lots&lt;/b&gt;"),
            "{body}"
        );
        assert!(!body.contains("<form"), "{body}");
    }
}
