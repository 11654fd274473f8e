//! Redirects (SPEC 3): which 3xx answers an attempt follows, to where, with which method,
//! body and headers.
//!
//! Redirects are the engine's decision, so every adapter follows the same ones (each turns
//! its HTTP client's own following off). A followed redirect is part of its attempt, not a
//! new attempt: the attempt still belongs to its endpoint for health and permission, and
//! the hops are reported to the call with [`Call::redirected`](crate::Call::redirected)
//! before the attempt's outcome.
//!
//! The rules, in the order [`Redirects::next`] applies them:
//! - only 301, 302, 303, 307 and 308 with a `Location` that resolves (RFC 3986) to an
//!   absolute `http`/`https` URL with a host and no userinfo are redirects; any other
//!   response is the attempt's answer (a `Location` with `user:password@` would put
//!   credentials the policy never gave into the request, and a forward proxy's request
//!   line);
//! - at most `max_redirects` hops per attempt (0: every 3xx is the answer); the 3xx that
//!   would exceed it is the answer, and so is one that leads back to a URL this attempt
//!   already visited (a loop);
//! - `https` to `http` is never followed;
//! - a hop to another origin than the endpoint's (scheme, host, port) is followed only when
//!   `cross_origin_redirects` is `follow` (the default); once an attempt has left its
//!   endpoint's origin, every later hop counts as cross-origin;
//! - 307 and 308 keep the method and the body, which needs a fresh copy: a one-shot body
//!   makes the 3xx the answer (the replay rule of SPEC 2.4); 301, 302 and 303 turn any
//!   method but GET and HEAD into a GET without a body, as common clients do.
//!
//! Headers of a hop ([`Redirects::prepare`]): the request id and idempotency key always
//! stay (it is the same call). A cross-origin hop drops the endpoint's headers (its
//! credentials, userinfo included), the Host header (the client sets the new host) and the
//! caller's `Authorization`, `Proxy-Authorization` and `Cookie`, which belong to the
//! endpoint's origin. A hop without a body drops the body's headers.
//!
//! A failure after a hop was followed is ambiguous whatever its phase: the endpoint has
//! already answered the request, so it may have done the work.

use std::fmt;

use http::header::{
    HeaderMap, AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST,
    LOCATION, PROXY_AUTHORIZATION, TRANSFER_ENCODING,
};
use http::uri::{Authority, Scheme};
use http::{Method, StatusCode, Uri};

use crate::call::{Attempt, BodyKind};
use crate::policy::Policy;
use crate::redact::Origin;

/// Whether redirects to another origin than the endpoint's are followed.
///
/// ```
/// use baton_core::CrossOrigin;
/// assert_eq!(CrossOrigin::default(), CrossOrigin::Follow);
/// assert_eq!(CrossOrigin::Return.as_str(), "return");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum CrossOrigin {
    /// Follow them, without the endpoint's headers (the default).
    #[default]
    Follow,
    /// Return the 3xx as the answer.
    Return,
}

impl CrossOrigin {
    /// The setting's value as written in configuration files.
    pub fn as_str(self) -> &'static str {
        match self {
            CrossOrigin::Follow => "follow",
            CrossOrigin::Return => "return",
        }
    }
}

/// One followed redirect of one attempt, as the report and the events name it.
///
/// `Debug` and `Display` show only `scheme://host:port` of both URLs (paths and queries of
/// provider URLs hold API keys); the full URLs are there for programs.
///
/// ```
/// use baton_core::Redirect;
/// let r = Redirect {
///     attempt: 1,
///     status: http::StatusCode::FOUND,
///     from: "https://a.example/v2/SECRET".parse().unwrap(),
///     to: "https://b.example/landing?token=SECRET".parse().unwrap(),
///     cross_origin: true,
/// };
/// assert_eq!(r.to_string(), "#1 302 https://a.example:443 -> https://b.example:443 (cross-origin)");
/// assert!(!format!("{r:?}").contains("SECRET"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The attempt that followed it.
    pub attempt: u32,
    /// The 3xx status.
    pub status: StatusCode,
    /// The URL that answered with the redirect.
    pub from: Uri,
    /// The URL followed to.
    pub to: Uri,
    /// Whether the hop (or an earlier one of the attempt) left the endpoint's origin.
    pub cross_origin: bool,
}

impl fmt::Display for Redirect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{} {} {} -> {}",
            self.attempt,
            self.status.as_u16(),
            Origin(&self.from),
            Origin(&self.to)
        )?;
        if self.cross_origin {
            f.write_str(" (cross-origin)")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Redirect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redirect")
            .field("attempt", &self.attempt)
            .field("status", &self.status.as_u16())
            .field("from", &format_args!("{}", Origin(&self.from)))
            .field("to", &format_args!("{}", Origin(&self.to)))
            .field("cross_origin", &self.cross_origin)
            .finish()
    }
}

/// The next request of an attempt that follows a redirect.
///
/// ```
/// use baton_core::{BodyKind, Endpoint, Policy, Redirects};
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "https://a.example/")).build().unwrap();
/// let url: http::Uri = "https://a.example/old".parse().unwrap();
/// let mut r = Redirects::new(&policy, 0, 1, BodyKind::Replayable, &url, &http::Method::PUT);
/// let mut h = http::HeaderMap::new();
/// h.insert("location", "/new".parse().unwrap());
/// let hop = r.next(http::StatusCode::PERMANENT_REDIRECT, &h).unwrap();
/// assert_eq!(hop.uri, "https://a.example/new");
/// assert_eq!((hop.method, hop.body, hop.cross_origin), (http::Method::PUT, true, false));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Hop {
    /// Where to send it.
    pub uri: Uri,
    /// With which method.
    pub method: Method,
    /// Whether it carries (a fresh copy of) the body.
    pub body: bool,
    /// Whether the attempt has left its endpoint's origin.
    pub cross_origin: bool,
}

/// Shows the URL as its origin only: a path or query may hold a key (SPEC 4).
///
/// ```
/// use baton_core::{BodyKind, Endpoint, Policy, Redirects};
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "https://a.example/")).build().unwrap();
/// let url: http::Uri = "https://a.example/v2/KEY".parse().unwrap();
/// let mut r = Redirects::new(&policy, 0, 1, BodyKind::Empty, &url, &http::Method::GET);
/// let mut h = http::HeaderMap::new();
/// h.insert("location", "/v3/KEY?token=SECRET".parse().unwrap());
/// let hop = r.next(http::StatusCode::FOUND, &h).unwrap();
/// let shown = format!("{hop:?} {r:?}");
/// assert!(!shown.contains("KEY") && !shown.contains("SECRET"), "{shown}");
/// assert!(shown.contains("https://a.example"), "{shown}");
/// ```
impl fmt::Debug for Hop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hop")
            .field("uri", &format_args!("{}", Origin(&self.uri)))
            .field("method", &self.method)
            .field("body", &self.body)
            .field("cross_origin", &self.cross_origin)
            .finish()
    }
}

/// Shows URLs as their origins only, as [`Hop`]'s `Debug` does.
impl fmt::Debug for Redirects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redirects")
            .field("endpoint", &self.endpoint)
            .field("attempt", &self.attempt)
            .field("max", &self.max)
            .field("cross_origin", &self.cross_origin)
            .field("body", &self.body)
            .field("current", &format_args!("{}", Origin(&self.current)))
            .field("method", &self.method)
            .field("left", &self.left)
            .field("followed", &self.followed)
            .field("visited", &self.visited.len())
            .finish()
    }
}

/// The redirects of one attempt: an adapter makes one per attempt and asks it about every
/// response before reporting the attempt's outcome.
///
/// ```
/// use baton_core::{BodyKind, Endpoint, Policy, Redirects};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/pay").header("x-api-key", "A"))
///     .build()
///     .unwrap();
/// let url: http::Uri = "https://a.example/pay".parse().unwrap();
/// let mut r = Redirects::new(&policy, 0, 1, BodyKind::Replayable, &url, &http::Method::POST);
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert("location", "https://b.example/elsewhere".parse().unwrap());
/// let hop = r.next(http::StatusCode::FOUND, &headers).unwrap();
/// assert_eq!(hop.method, http::Method::GET); // 302 turns a POST into a GET
/// assert!(!hop.body && hop.cross_origin);
///
/// let mut sent = http::HeaderMap::new();
/// sent.insert("x-api-key", "A".parse().unwrap());
/// sent.insert("x-request-id", "req-12345678".parse().unwrap());
/// r.prepare(&policy, &hop, &mut sent);
/// assert!(sent.get("x-api-key").is_none()); // never to another origin
/// assert_eq!(sent["x-request-id"], "req-12345678");
/// assert_eq!(r.followed().len(), 1);
/// ```
#[derive(Clone)]
pub struct Redirects {
    endpoint: usize,
    attempt: u32,
    max: u32,
    cross_origin: CrossOrigin,
    body: BodyKind,
    origin: (Scheme, Authority),
    current: Uri,
    method: Method,
    left: bool,
    followed: Vec<Redirect>,
    /// Requests made so far in this attempt (method, URL), for loop detection.
    visited: Vec<(Method, Uri)>,
}

impl Redirects {
    /// The redirect state of attempt `attempt` at endpoint `endpoint`, whose first request
    /// goes to `uri` with `method` and a body of kind `body`.
    pub fn new(
        policy: &Policy,
        endpoint: usize,
        attempt: u32,
        body: BodyKind,
        uri: &Uri,
        method: &Method,
    ) -> Self {
        let settings = policy.settings();
        Redirects {
            endpoint,
            attempt,
            max: settings.max_redirects,
            cross_origin: settings.cross_origin_redirects,
            body,
            origin: origin_of(uri),
            current: uri.clone(),
            method: method.clone(),
            left: false,
            followed: Vec::new(),
            visited: Vec::new(),
        }
    }

    /// The redirect state of `attempt`, whose first request goes to `uri`.
    pub fn for_attempt(
        policy: &Policy,
        attempt: &Attempt,
        body: BodyKind,
        uri: &Uri,
        method: &Method,
    ) -> Self {
        Redirects::new(policy, attempt.endpoint, attempt.number, body, uri, method)
    }

    /// Whether a response with `status` and `headers` is a redirect to follow, and where.
    /// `None`: the response is the attempt's answer. A followed hop is recorded.
    pub fn next(&mut self, status: StatusCode, headers: &HeaderMap) -> Option<Hop> {
        if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
            return None;
        }
        if self.followed.len() >= self.max as usize {
            return None;
        }
        let location = headers.get(LOCATION)?.to_str().ok()?;
        let to = resolve(&self.current, location)?;
        if self.current.scheme() == Some(&Scheme::HTTPS) && to.scheme() == Some(&Scheme::HTTP) {
            return None;
        }
        let cross = self.left || origin_of(&to) != self.origin;
        if cross && self.cross_origin == CrossOrigin::Return {
            return None;
        }
        let keep = matches!(status.as_u16(), 307 | 308);
        if keep && self.body == BodyKind::OneShot {
            return None;
        }
        let method = if keep || self.method == Method::GET || self.method == Method::HEAD {
            self.method.clone()
        } else {
            Method::GET
        };
        // A loop is the same request again: `POST /pay` -> `303 /pay` (GET the result
        // there) is not one.
        if self.visited.is_empty() {
            self.visited
                .push((self.method.clone(), self.current.clone()));
        }
        if self.visited.iter().any(|(m, u)| *m == method && *u == to) {
            return None;
        }
        self.visited.push((method.clone(), to.clone()));
        let body = keep && self.body != BodyKind::Empty;
        self.followed.push(Redirect {
            attempt: self.attempt,
            status,
            from: std::mem::replace(&mut self.current, to.clone()),
            to: to.clone(),
            cross_origin: cross,
        });
        self.method = method.clone();
        self.left = cross;
        if !body {
            // A hop without the body drops it for the rest of the chain.
            self.body = BodyKind::Empty;
        }
        Some(Hop {
            uri: to,
            method,
            body,
            cross_origin: cross,
        })
    }

    /// Takes back the last hop [`next`](Self::next) returned, when the adapter could not
    /// follow it after all (a copy of the body failed): the 3xx is then the answer.
    pub fn unfollow(&mut self) {
        // (The body kind is left as it is: a hop is unfollowed only when its request could
        // not be built, and the adapter then returns the 3xx without asking again.)
        if let Some(last) = self.followed.pop() {
            self.visited.pop();
            self.current = last.from;
            self.left = self.followed.last().is_some_and(|r| r.cross_origin);
        }
    }

    /// Turns the headers sent on the previous request of this attempt into those of `hop`.
    pub fn prepare(&self, policy: &Policy, hop: &Hop, headers: &mut HeaderMap) {
        if hop.cross_origin {
            if let Some(endpoint) = policy.endpoints().get(self.endpoint) {
                for name in endpoint.headers().keys() {
                    headers.remove(name);
                }
            }
            for name in [HOST, AUTHORIZATION, PROXY_AUTHORIZATION, COOKIE] {
                headers.remove(name);
            }
        }
        if !hop.body {
            for name in [
                CONTENT_TYPE,
                CONTENT_LENGTH,
                CONTENT_ENCODING,
                TRANSFER_ENCODING,
            ] {
                headers.remove(name);
            }
        }
    }

    /// The headers of `hop`, for a driver that builds each request of the attempt from the
    /// caller's headers (`caller`): the attempt's headers by the destination rules
    /// ([`apply_attempt_headers`](crate::apply_attempt_headers) with the call's
    /// `identity`; `request` is the caller's URL), then [prepared](Redirects::prepare)
    /// for the hop.
    ///
    /// ```
    /// use baton_core::{BodyKind, Endpoint, IdentityHeaders, Policy, Redirects};
    /// let policy = Policy::builder()
    ///     .endpoint(Endpoint::new("a", "https://a.example/").header("x-api-key", "A"))
    ///     .build()
    ///     .unwrap();
    /// let url: http::Uri = "https://a.example/pay".parse().unwrap();
    /// let mut r = Redirects::new(&policy, 0, 1, BodyKind::Empty, &url, &http::Method::GET);
    /// let mut answer = http::HeaderMap::new();
    /// answer.insert("location", "https://b.example/x".parse().unwrap());
    /// let hop = r.next(http::StatusCode::FOUND, &answer).unwrap();
    /// let identity = IdentityHeaders::new(&policy, "req-12345678", None).unwrap();
    /// let h = r.hop_headers(&policy, &hop, &url, &identity, &http::HeaderMap::new()).unwrap();
    /// assert_eq!(h["x-request-id"], "req-12345678");
    /// assert!(h.get("x-api-key").is_none()); // another origin: no endpoint credential
    /// ```
    pub fn hop_headers(
        &self,
        policy: &Policy,
        hop: &Hop,
        request: &Uri,
        identity: &crate::IdentityHeaders,
        caller: &HeaderMap,
    ) -> Result<HeaderMap, crate::DestinationError> {
        let mut headers = caller.clone();
        crate::apply_attempt_headers(
            policy,
            self.endpoint,
            request,
            identity,
            self.attempt,
            &mut headers,
        )?;
        self.prepare(policy, hop, &mut headers);
        Ok(headers)
    }

    /// The hops followed so far, in order.
    pub fn followed(&self) -> &[Redirect] {
        &self.followed
    }

    /// The hops followed, for [`Input::Redirected`](crate::Input::Redirected).
    pub fn into_followed(self) -> Vec<Redirect> {
        self.followed
    }

    /// The hops followed, as the input that tells the call what attempt `attempt` did
    /// (what every async driver hands [`Call::handle`](crate::Call::handle) when the
    /// attempt lands).
    pub fn into_input<R>(self, attempt: u32) -> crate::Input<R> {
        crate::Input::Redirected {
            attempt,
            redirects: self.followed,
        }
    }

    /// The URL the last request of this attempt went to.
    pub fn current(&self) -> &Uri {
        &self.current
    }
}

/// Whether `a` and `b` have the same origin (scheme, host, port; default ports explicit).
/// Whether two URLs have the same origin (scheme, host and port, the port made explicit):
/// the test that keeps an endpoint's headers and client identity on its own origin
/// (SPEC 3, SPEC 9).
///
/// ```
/// let a: http::Uri = "https://a.example/pay".parse().unwrap();
/// let b: http::Uri = "https://a.example:443/other".parse().unwrap();
/// let c: http::Uri = "https://c.example/".parse().unwrap();
/// assert!(baton_core::same_origin(&a, &b));
/// assert!(!baton_core::same_origin(&a, &c));
/// ```
pub fn same_origin(a: &Uri, b: &Uri) -> bool {
    origin_of(a) == origin_of(b)
}

/// `scheme` and `authority` with the port made explicit, so `https://a` and
/// `https://a:443` are the same origin.
fn origin_of(uri: &Uri) -> (Scheme, Authority) {
    let scheme = uri.scheme().cloned().unwrap_or(Scheme::HTTP);
    let host = uri.host().unwrap_or("").to_ascii_lowercase();
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == Scheme::HTTPS { 443 } else { 80 });
    let authority = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let authority = Authority::try_from(authority)
        .unwrap_or_else(|_| Authority::from_static("invalid.invalid:0"));
    (scheme, authority)
}

/// Resolves a `Location` value against the URL that answered (RFC 3986 section 5.2),
/// dropping any fragment. `None` when the result is not an absolute `http`/`https` URL
/// with a host, or when it carries userinfo (`https://user:pw@host/`): such a hop would
/// put credentials the policy never gave into a URL (and into a forward proxy's request
/// line), so the 3xx is the answer instead, as browsers refuse such a redirect across
/// origins.
pub(crate) fn resolve(base: &Uri, reference: &str) -> Option<Uri> {
    let reference = reference.split('#').next().unwrap_or("").trim();
    let scheme_len = reference
        .find(':')
        .filter(|&i| {
            let s = &reference[..i];
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        })
        .map(|i| i + 1);
    let base_scheme = base.scheme_str()?;
    let base_authority = base.authority()?.as_str();
    let joined = if let Some(n) = scheme_len {
        let (scheme, rest) = reference.split_at(n);
        let scheme = scheme[..n - 1].to_ascii_lowercase();
        let rest = rest.strip_prefix("//")?;
        let (authority, tail) = split_authority(rest);
        format!("{scheme}://{authority}{}", normalize_tail(tail, "/"))
    } else if let Some(rest) = reference.strip_prefix("//") {
        let (authority, tail) = split_authority(rest);
        format!("{base_scheme}://{authority}{}", normalize_tail(tail, "/"))
    } else if reference.is_empty() {
        format!("{base_scheme}://{base_authority}{}", path_and_query(base))
    } else if let Some(query) = reference.strip_prefix('?') {
        format!("{base_scheme}://{base_authority}{}?{query}", base.path())
    } else if reference.starts_with('/') {
        format!(
            "{base_scheme}://{base_authority}{}",
            normalize_tail(reference, "/")
        )
    } else {
        let dir = &base.path()[..base.path().rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        format!(
            "{base_scheme}://{base_authority}{}",
            normalize_tail(reference, dir)
        )
    };
    let uri: Uri = joined.parse().ok()?;
    let userinfo = uri.authority().is_some_and(|a| a.as_str().contains('@'));
    match (uri.scheme_str(), uri.host()) {
        (Some("http" | "https"), Some(h)) if !h.is_empty() && !userinfo => Some(uri),
        _ => None,
    }
}

fn path_and_query(uri: &Uri) -> &str {
    uri.path_and_query().map_or("/", |pq| pq.as_str())
}

fn split_authority(rest: &str) -> (&str, &str) {
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    rest.split_at(end)
}

/// `tail` (a path, maybe relative to `dir`, and a query) with dot segments removed.
fn normalize_tail(tail: &str, dir: &str) -> String {
    let (path, query) = match tail.find('?') {
        Some(i) => (&tail[..i], Some(&tail[i + 1..])),
        None => (tail, None),
    };
    let merged = if path.starts_with('/') || path.is_empty() {
        path.to_string()
    } else {
        format!("{dir}{path}")
    };
    let mut out = remove_dot_segments(&merged);
    if out.is_empty() {
        out.push('/');
    }
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// RFC 3986 section 5.2.4, on `/`-separated segments.
fn remove_dot_segments(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    let parts: Vec<&str> = path.split('/').collect();
    for (i, seg) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match *seg {
            "." => {
                if last {
                    segments.push("");
                }
            }
            ".." => {
                if segments.len() > 1 {
                    segments.pop();
                }
                if last {
                    segments.push("");
                }
            }
            s => segments.push(s),
        }
    }
    let joined = segments.join("/");
    if path.starts_with('/') && !joined.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Endpoint;

    fn base() -> Uri {
        "http://a.example/b/c/d;p?q".parse().unwrap()
    }

    #[test]
    fn location_resolves_like_rfc_3986() {
        let cases = [
            ("g", "http://a.example/b/c/g"),
            ("./g", "http://a.example/b/c/g"),
            ("g/", "http://a.example/b/c/g/"),
            ("/g", "http://a.example/g"),
            ("//g.example/x", "http://g.example/x"),
            ("?y", "http://a.example/b/c/d;p?y"),
            ("g?y", "http://a.example/b/c/g?y"),
            ("#s", "http://a.example/b/c/d;p?q"),
            ("../g", "http://a.example/b/g"),
            ("../../../g", "http://a.example/g"),
            ("/./g/../h", "http://a.example/h"),
            (
                "HTTPS://Other.example:8443/z#frag",
                "https://other.example:8443/z",
            ),
        ];
        for (reference, expected) in cases {
            let got = resolve(&base(), reference).unwrap();
            assert_eq!(got, expected.parse::<Uri>().unwrap(), "{reference}");
        }
    }

    #[test]
    fn unusable_locations_are_not_followed() {
        let userinfo = [
            "http://user:pw@x.example/",
            "//user:pw@g.example/x",
            "https://u@x/",
        ];
        for reference in ["ftp://x.example/", "mailto:a@b", "http://", "http:///x"]
            .into_iter()
            .chain(userinfo)
        {
            assert_eq!(resolve(&base(), reference), None, "{reference}");
        }
    }

    fn policy(max: u32, cross: CrossOrigin) -> Policy {
        Policy::builder()
            .endpoint(Endpoint::new("a", "https://a.example/").header("x-api-key", "A"))
            .configure(|s| {
                s.max_redirects = max;
                s.cross_origin_redirects = cross;
            })
            .build()
            .unwrap()
    }

    fn location(to: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(LOCATION, to.parse().unwrap());
        h
    }

    fn redirects(p: &Policy, body: BodyKind, method: Method) -> Redirects {
        Redirects::new(
            p,
            0,
            1,
            body,
            &"https://a.example/".parse().unwrap(),
            &method,
        )
    }

    #[test]
    fn temporary_and_permanent_keep_method_and_body() {
        let p = policy(10, CrossOrigin::Follow);
        for code in [307, 308] {
            let mut r = redirects(&p, BodyKind::Replayable, Method::POST);
            let status = StatusCode::from_u16(code).unwrap();
            let hop = r.next(status, &location("/v2")).unwrap();
            assert_eq!(
                (hop.method, hop.body, hop.cross_origin),
                (Method::POST, true, false)
            );
        }
    }

    #[test]
    fn one_shot_body_makes_307_the_answer() {
        let p = policy(10, CrossOrigin::Follow);
        let mut r = redirects(&p, BodyKind::OneShot, Method::POST);
        assert_eq!(
            r.next(StatusCode::TEMPORARY_REDIRECT, &location("/v2")),
            None
        );
        // A 303 needs no body: followed as a GET.
        let hop = r.next(StatusCode::SEE_OTHER, &location("/v2")).unwrap();
        assert_eq!((hop.method, hop.body), (Method::GET, false));
    }

    #[test]
    fn body_dropped_by_303_is_not_resent_by_a_later_307() {
        let p = policy(10, CrossOrigin::Follow);
        let mut r = redirects(&p, BodyKind::Replayable, Method::POST);
        let hop = r.next(StatusCode::SEE_OTHER, &location("/a")).unwrap();
        assert_eq!((hop.method, hop.body), (Method::GET, false));
        let hop = r
            .next(StatusCode::TEMPORARY_REDIRECT, &location("/b"))
            .unwrap();
        assert_eq!((hop.method, hop.body), (Method::GET, false));
    }

    #[test]
    fn post_303_to_the_same_url_is_not_a_loop() {
        let p = policy(10, CrossOrigin::Follow);
        let mut r = Redirects::new(
            &p,
            0,
            1,
            BodyKind::Replayable,
            &"https://a.example/pay".parse().unwrap(),
            &Method::POST,
        );
        let hop = r.next(StatusCode::SEE_OTHER, &location("/pay")).unwrap();
        assert_eq!(hop.method, Method::GET);
        // The GET redirected to itself again is a loop.
        assert_eq!(r.next(StatusCode::FOUND, &location("/pay")), None);
    }

    #[test]
    fn head_stays_head_on_303() {
        let p = policy(10, CrossOrigin::Follow);
        let mut r = redirects(&p, BodyKind::Empty, Method::HEAD);
        let hop = r.next(StatusCode::SEE_OTHER, &location("/x")).unwrap();
        assert_eq!(hop.method, Method::HEAD);
    }

    #[test]
    fn limit_loop_and_downgrade_end_the_chain() {
        let p = policy(2, CrossOrigin::Follow);
        let mut r = redirects(&p, BodyKind::Empty, Method::GET);
        assert!(r.next(StatusCode::FOUND, &location("/1")).is_some());
        assert!(r.next(StatusCode::FOUND, &location("/2")).is_some());
        assert_eq!(r.next(StatusCode::FOUND, &location("/3")), None, "limit");

        let p = policy(10, CrossOrigin::Follow);
        let mut r = redirects(&p, BodyKind::Empty, Method::GET);
        assert!(r.next(StatusCode::FOUND, &location("/1")).is_some());
        assert_eq!(r.next(StatusCode::FOUND, &location("/")), None, "loop");
        assert_eq!(
            r.next(StatusCode::FOUND, &location("http://a.example/x")),
            None,
            "https to http"
        );
        assert_eq!(r.next(StatusCode::OK, &location("/y")), None, "not a 3xx");
        assert_eq!(
            r.next(StatusCode::FOUND, &HeaderMap::new()),
            None,
            "no Location"
        );

        let p = policy(0, CrossOrigin::Follow);
        let mut r = redirects(&p, BodyKind::Empty, Method::GET);
        assert_eq!(r.next(StatusCode::FOUND, &location("/1")), None, "max 0");
    }

    #[test]
    fn cross_origin_drops_endpoint_headers_and_host_or_is_returned() {
        let p = policy(10, CrossOrigin::Follow);
        let mut r = redirects(&p, BodyKind::Empty, Method::GET);
        let hop = r
            .next(StatusCode::FOUND, &location("https://a.example:8443/"))
            .unwrap();
        assert!(hop.cross_origin, "another port is another origin");
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("x-api-key", "A"),
            ("host", "a.example"),
            ("authorization", "Basic x"),
            ("cookie", "s=1"),
            ("idempotency-key", "k"),
        ] {
            h.insert(k, v.parse().unwrap());
        }
        r.prepare(&p, &hop, &mut h);
        assert_eq!(h.len(), 1);
        assert_eq!(h["idempotency-key"], "k");
        // Back to the endpoint's origin: still treated as having left it.
        let hop = r
            .next(StatusCode::FOUND, &location("https://a.example/back"))
            .unwrap();
        assert!(hop.cross_origin);

        let p = policy(10, CrossOrigin::Return);
        let mut r = redirects(&p, BodyKind::Empty, Method::GET);
        assert_eq!(
            r.next(StatusCode::FOUND, &location("https://b.example/")),
            None
        );
        assert!(r
            .next(StatusCode::FOUND, &location("https://A.EXAMPLE:443/x"))
            .is_some());
    }
}
