//! Destination rules (SPEC 3): where one attempt goes and which headers it carries.
//!
//! Pure functions over `http` types, shared by every adapter so that all runtimes build the
//! same request for the same attempt: the URL mode (complete destination or base + request
//! path), the Host rule, per-endpoint headers (credentials) that never reach another
//! endpoint, and the request-id, idempotency-key and attempt-number headers.

use http::header::{HeaderMap, HeaderValue, HOST};
use http::uri::{Authority, PathAndQuery, Uri};

use crate::policy::{Policy, UrlMode};

/// Why a request could not be built for an endpoint (the call ends as rejected locally).
///
/// ```
/// use baton_core::DestinationError;
/// let e = DestinationError::Scheme("ftp".into());
/// assert!(e.to_string().contains("ftp"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DestinationError {
    /// The caller's URL has a scheme other than http or https.
    #[error("unsupported scheme {0:?} in the request URL (only http and https)")]
    Scheme(String),
    /// The joined URL is not valid.
    #[error("cannot build the URL for endpoint {endpoint:?}: {reason}")]
    Url {
        /// Endpoint id.
        endpoint: String,
        /// What went wrong.
        reason: String,
    },
    /// The caller's request URL is not a valid path or absolute URL.
    #[error("invalid request URL: {0}")]
    Request(String),
    /// A header value for this attempt is not valid.
    #[error("invalid value for header {0}")]
    Header(String),
    /// The endpoint index does not exist.
    #[error("no endpoint #{0}")]
    Endpoint(usize),
}

/// Why a request cannot be sent at all, found while the caller built it (its URL, a
/// header, its body): every adapter rejects the call's first attempt locally with it, so
/// nothing is sent and the call ends as an invalid call. The adapters keep it as the
/// rejected attempt's error, so a caller can match on a refusal of the destination rules
/// instead of reading text.
///
/// ```
/// use std::error::Error;
/// use baton_core::{request_uri, DestinationError, InvalidRequest};
/// let why = InvalidRequest::from(request_uri("ftp://a.example/x").unwrap_err());
/// // The destination rules' reason is its source (a chain says each part once).
/// assert_eq!(why.to_string(), "invalid request");
/// let source = why.source().and_then(|e| e.downcast_ref::<DestinationError>());
/// assert_eq!(source, Some(&DestinationError::Scheme("ftp".into())));
/// assert_eq!(source.unwrap().to_string(), r#"unsupported scheme "ftp" in the request URL (only http and https)"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidRequest {
    /// The destination rules refused the request's URL or a header (SPEC 3).
    #[error("invalid request")]
    Destination(#[source] DestinationError),
    /// Anything else, in words: a header name or value that is not valid, a body that
    /// could not be encoded or read.
    #[error("invalid request: {0}")]
    Other(String),
}

impl From<DestinationError> for InvalidRequest {
    fn from(e: DestinationError) -> Self {
        InvalidRequest::Destination(e)
    }
}

impl From<String> for InvalidRequest {
    fn from(why: String) -> Self {
        InvalidRequest::Other(why)
    }
}

/// The scheme rule of [`attempt_uri`] alone: a request URL with a scheme names http or
/// https. For a driver that keeps its complete-mode endpoint URLs in its HTTP client's own
/// form (parsed once) and so does not call [`attempt_uri`] on the healthy path.
///
/// ```
/// use baton_core::{check_scheme, DestinationError};
/// assert!(check_scheme(&"/charges".parse().unwrap()).is_ok());
/// assert!(check_scheme(&"https://a.example/x".parse().unwrap()).is_ok());
/// assert_eq!(
///     check_scheme(&"ftp://a.example/x".parse().unwrap()),
///     Err(DestinationError::Scheme("ftp".into()))
/// );
/// ```
pub fn check_scheme(request: &Uri) -> Result<(), DestinationError> {
    match request.scheme_str() {
        Some(s) if s != "http" && s != "https" => Err(DestinationError::Scheme(s.to_string())),
        _ => Ok(()),
    }
}

/// The URL of an attempt at endpoint `index` for a request whose URL is `request`.
///
/// In complete mode the endpoint URL is used as is. In base mode the request's path is
/// joined to the base path and the queries are concatenated, base first.
///
/// ```
/// use baton_core::{attempt_uri, Endpoint, Policy, UrlMode};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://api.example/v1?tenant=7"))
///     .url_mode(UrlMode::Base)
///     .build()
///     .unwrap();
/// let uri = attempt_uri(&policy, 0, &"/charges?limit=3".parse().unwrap()).unwrap();
/// assert_eq!(uri, "https://api.example/v1/charges?tenant=7&limit=3");
/// ```
pub fn attempt_uri(policy: &Policy, index: usize, request: &Uri) -> Result<Uri, DestinationError> {
    let endpoint = policy
        .endpoints()
        .get(index)
        .ok_or(DestinationError::Endpoint(index))?;
    check_scheme(request)?;
    let base = endpoint.uri();
    if policy.settings().url_mode == UrlMode::Complete {
        return Ok(base.clone());
    }
    let req_path = request.path();
    if leaves_base(req_path) {
        return Err(DestinationError::Url {
            endpoint: endpoint.id().to_string(),
            reason: "the request path has a dot segment or a backslash (also percent-encoded), \
                     which would leave the endpoint's base path"
                .into(),
        });
    }
    // Exactly one slash between the two (SPEC 1): `//charges` is `/charges`, never a
    // path that starts with an empty segment.
    let base_path = base.path().trim_end_matches('/');
    let req_path = req_path.trim_start_matches('/');
    let mut pq = String::with_capacity(base_path.len() + req_path.len() + 16);
    pq.push_str(base_path);
    pq.push('/');
    pq.push_str(req_path);
    match (base.query(), request.query()) {
        (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() => {
            pq.push('?');
            pq.push_str(a);
            pq.push('&');
            pq.push_str(b);
        }
        (Some(a), _) if !a.is_empty() => {
            pq.push('?');
            pq.push_str(a);
            if let Some(b) = request.query().filter(|b| !b.is_empty()) {
                pq.push('&');
                pq.push_str(b);
            }
        }
        (_, Some(b)) => {
            pq.push('?');
            pq.push_str(b);
        }
        _ => {}
    }
    let err = |reason: String| DestinationError::Url {
        endpoint: endpoint.id().to_string(),
        reason,
    };
    let pq = PathAndQuery::try_from(pq).map_err(|e| err(e.to_string()))?;
    let mut parts = base.clone().into_parts();
    parts.path_and_query = Some(pq);
    Uri::from_parts(parts).map_err(|e| err(e.to_string()))
}

/// Whether a request path could leave a base path once joined (SPEC 1): a `.` or `..`
/// segment, also percent-encoded (`%2e`), also between encoded slashes (`%2f`, which a
/// server that decodes before it resolves reads as a slash) or before a `;` parameter
/// (`..;`, which some servers read as `..`), or a backslash (`\\`, `%5c`), which some
/// servers and clients read as a slash.
fn leaves_base(path: &str) -> bool {
    // Most paths have none of `.`, `\\` or `%`, and so none of the above: answered without
    // the copies and the substring search below, which ran on every attempt.
    if !path.bytes().any(|b| matches!(b, b'.' | b'\\' | b'%')) {
        return false;
    }
    leaves_base_slow(path)
}

/// [`leaves_base`] for a path with a `.`, a `\\` or a `%`.
#[cold]
#[inline(never)]
fn leaves_base_slow(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    if lower.contains('\\') || lower.contains("%5c") {
        return true;
    }
    lower.replace("%2f", "/").split('/').any(|seg| {
        let seg = seg.split(';').next().unwrap_or(seg).replace("%2e", ".");
        seg == "." || seg == ".."
    })
}

/// A request head of `method`, `uri`, `headers` and `version`, as `http` keeps it: what an
/// adapter keeps of a call's request for every attempt (the engine reads it as a
/// [`RequestInfo`](crate::RequestInfo)).
///
/// ```
/// let head = baton_core::request_head(
///     http::Method::GET,
///     http::Uri::from_static("/status"),
///     http::HeaderMap::new(),
///     http::Version::HTTP_11,
/// );
/// assert_eq!(head.uri.path(), "/status");
/// ```
pub fn request_head(
    method: http::Method,
    uri: Uri,
    headers: HeaderMap,
    version: http::Version,
) -> http::request::Parts {
    let (mut head, ()) = http::Request::new(()).into_parts();
    head.method = method;
    head.uri = uri;
    head.headers = headers;
    head.version = version;
    head
}

/// A request builder's URL: [`request_uri`] of `text`, or `/` with why `text` is invalid
/// (what every adapter's request builder keeps, so that the call fails before any send
/// instead of the builder panicking).
///
/// ```
/// use baton_core::request_target;
/// assert_eq!(request_target("/v1/charges").0, "/v1/charges");
/// let (uri, invalid) = request_target("/a b");
/// assert_eq!((uri.path(), invalid.is_some()), ("/", true));
/// ```
pub fn request_target(text: &str) -> (Uri, Option<InvalidRequest>) {
    match request_uri(text) {
        Ok(uri) => (uri, None),
        Err(e) => (Uri::from_static("/"), Some(e.into())),
    }
}

/// A request URL as a caller writes it: an absolute `http`/`https` URL, or a path with an
/// optional query. A relative path (`charges`, no leading slash) is taken as relative to
/// the endpoint's base (`/charges`); an empty one is `/`. The error never quotes the text
/// (a path may hold ids).
///
/// ```
/// use baton_core::request_uri;
/// assert_eq!(request_uri("charges?limit=3").unwrap(), "/charges?limit=3");
/// assert_eq!(request_uri("https://a.example/x").unwrap().host(), Some("a.example"));
/// assert!(request_uri("/a b").is_err());
/// // A URL in the query leaves the request a path.
/// assert_eq!(request_uri("/cb?next=https://app/x").unwrap(), "/cb?next=https://app/x");
/// assert!(request_uri("ftp://a.example/x").is_err());
/// ```
pub fn request_uri(text: &str) -> Result<Uri, DestinationError> {
    let bad = |e: http::uri::InvalidUri| DestinationError::Request(e.to_string());
    if has_scheme(text) {
        let uri: Uri = text.parse().map_err(bad)?;
        return match uri.scheme_str() {
            Some("http" | "https") if uri.host().is_some_and(|h| !h.is_empty()) => Ok(uri),
            Some("http" | "https") => Err(DestinationError::Request("no host".into())),
            Some(s) => Err(DestinationError::Scheme(s.to_string())),
            None => Err(DestinationError::Request("not a URL".into())),
        };
    }
    let pq = if text.starts_with('/') {
        PathAndQuery::try_from(text)
    } else {
        PathAndQuery::try_from(format!("/{text}"))
    }
    .map_err(bad)?;
    Ok(Uri::from(pq))
}

/// Whether `text` is written as an absolute URL: its first `/`, `?` or `#` starts the
/// `//` of a `://`. A `://` further on (a query's `?next=https://...`, a path segment)
/// leaves it a path; what comes before the `://` is then parsed as a scheme, and refused
/// when it is not `http` or `https`. A byte scan: no substring search for every call's
/// URL, run cold between network reads.
fn has_scheme(text: &str) -> bool {
    let b = text.as_bytes();
    let n = b
        .iter()
        .take_while(|c| !matches!(c, b'/' | b'?' | b'#'))
        .count();
    n > 0 && b[n - 1] == b':' && b[n..].starts_with(b"//")
}

/// The host of the "original URL" (the request's URL resolved against the first
/// endpoint), used by the Host rule.
pub fn original_authority<'a>(policy: &'a Policy, request: &'a Uri) -> Option<&'a Authority> {
    request
        .authority()
        .or_else(|| policy.endpoints().first().and_then(|e| e.uri().authority()))
}

/// One call's identity as header values: its request id and, when it has one, its
/// idempotency key. Made once per call (`Call::identity_headers`) and sent unchanged on
/// every attempt and redirect hop. Each value is one shared buffer that holds its bytes
/// inline (values up to 64 bytes: every generated request id and the usual keys), so the
/// value costs one allocation per call and every attempt's copy is a reference count: a
/// value parsed from a string would allocate again at its first copy.
///
/// ```
/// use baton_core::{Endpoint, IdentityHeaders, Policy};
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "https://a.example/")).build().unwrap();
/// let identity = IdentityHeaders::new(&policy, "req-12345678", None).unwrap();
/// assert_eq!(identity.request_id(), "req-12345678");
/// assert!(identity.idempotency_key().is_none());
/// // A value that cannot be a header is refused, naming the header.
/// let bad = IdentityHeaders::new(&policy, "req-12345678", Some("line\nbreak")).unwrap_err();
/// assert!(bad.to_string().contains("idempotency-key"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityHeaders {
    request_id: HeaderValue,
    idempotency_key: Option<HeaderValue>,
}

impl IdentityHeaders {
    /// The header values of `request_id` and `idempotency_key`; an error names the header
    /// whose value is not valid (a call's own id and key always are: both are checked
    /// when the call starts).
    pub fn new(
        policy: &Policy,
        request_id: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Self, DestinationError> {
        let key = idempotency_key.map(str::as_bytes);
        Self::of_bytes(policy, request_id.as_bytes(), key)
    }

    /// [`IdentityHeaders::new`] from the bytes of the id and key: a call's id is kept as
    /// bytes, and reading it back as text would check its UTF-8 again on every call.
    pub(crate) fn of_bytes(
        policy: &Policy,
        request_id: &[u8],
        idempotency_key: Option<&[u8]>,
    ) -> Result<Self, DestinationError> {
        let request_id = shared_value(policy.request_id_header().as_str(), request_id)?;
        let idempotency_key = idempotency_key
            .map(|k| shared_value(policy.idempotency_key_header().as_str(), k))
            .transpose()?;
        Ok(IdentityHeaders {
            request_id,
            idempotency_key,
        })
    }

    /// The request id's value.
    pub fn request_id(&self) -> &HeaderValue {
        &self.request_id
    }

    /// The idempotency key's value, if the call has a key.
    pub fn idempotency_key(&self) -> Option<&HeaderValue> {
        self.idempotency_key.as_ref()
    }
}

fn header_value(name: &str, v: &str) -> Result<HeaderValue, DestinationError> {
    HeaderValue::from_str(v).map_err(|_| DestinationError::Header(name.to_string()))
}

/// Longest value an identity header keeps inline in its shared buffer.
const INLINE_VALUE: usize = 64;

/// The bytes of a short identity header value, held inside its shared buffer.
struct InlineValue {
    len: u8,
    buf: [u8; INLINE_VALUE],
}

impl AsRef<[u8]> for InlineValue {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

/// A header value whose copies share one buffer (see [`IdentityHeaders`]).
fn shared_value(name: &str, v: &[u8]) -> Result<HeaderValue, DestinationError> {
    let bytes = match u8::try_from(v.len()) {
        Ok(len) if v.len() <= INLINE_VALUE => {
            let mut buf = [0u8; INLINE_VALUE];
            buf[..v.len()].copy_from_slice(v);
            bytes::Bytes::from_owner(InlineValue { len, buf })
        }
        _ => bytes::Bytes::from_owner(v.to_vec()),
    };
    HeaderValue::from_maybe_shared(bytes).map_err(|_| DestinationError::Header(name.to_string()))
}

/// Sets the headers of one attempt at endpoint `index` in `headers` (a copy of the caller's
/// headers):
///
/// - the request id and, when present, the idempotency key (`identity`), unchanged on every
///   attempt;
/// - the attempt number, when the policy enables that header;
/// - Host: absent stays absent; equal to the original URL's host, it follows the endpoint;
///   any other value is the caller's and is kept;
/// - per-endpoint headers, overriding caller headers of the same name.
///
/// ```
/// use baton_core::{apply_attempt_headers, Endpoint, IdentityHeaders, Policy};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/").header("authorization", "Bearer A"))
///     .endpoint(Endpoint::new("b", "https://b.example/").header("authorization", "Bearer B"))
///     .build()
///     .unwrap();
/// let request: http::Uri = "https://a.example/".parse().unwrap();
/// let mut headers = http::HeaderMap::new();
/// headers.insert("host", "a.example".parse().unwrap());
/// let identity = IdentityHeaders::new(&policy, "req-12345678", Some("key-1")).unwrap();
/// apply_attempt_headers(&policy, 1, &request, &identity, 2, &mut headers).unwrap();
/// assert_eq!(headers["authorization"], "Bearer B");
/// assert_eq!(headers["host"], "b.example");
/// assert_eq!(headers["x-request-id"], "req-12345678");
/// assert_eq!(headers["idempotency-key"], "key-1");
/// ```
pub fn apply_attempt_headers(
    policy: &Policy,
    index: usize,
    request: &Uri,
    identity: &IdentityHeaders,
    attempt: u32,
    headers: &mut HeaderMap,
) -> Result<(), DestinationError> {
    let endpoint = policy
        .endpoints()
        .get(index)
        .ok_or(DestinationError::Endpoint(index))?;
    // The Host rule first: it reads only the caller's Host (none of the identity and
    // attempt headers below can be Host: the policy refuses that name), and on a caller's
    // map with no headers at all it is then skipped without hashing the name.
    if !headers.is_empty() {
        host_rule(policy, endpoint, request, headers)?;
    }
    headers.insert(
        policy.request_id_header().clone(),
        identity.request_id.clone(),
    );
    if let Some(key) = &identity.idempotency_key {
        headers.insert(policy.idempotency_key_header().clone(), key.clone());
    }
    if let Some(h) = policy.attempt_header() {
        headers.insert(h.clone(), HeaderValue::from(attempt));
    }
    for name in endpoint.headers().keys() {
        headers.remove(name);
    }
    for (name, v) in endpoint.headers() {
        headers.append(name.clone(), v.clone());
    }
    Ok(())
}

/// Inserts Host `host` into a request's headers (an attempt's, a redirect hop's, a
/// probe's) when they have none: for a transport that writes the request as it is (bare
/// hyper), where nothing else adds Host. A Host the caller gave, or the Host rule of
/// [`apply_attempt_headers`] set, is kept. Clients that add their own Host (reqwest,
/// hyper-util, ureq) do not need it.
///
/// ```
/// use baton_core::insert_host_if_absent;
/// use http::{HeaderMap, HeaderValue};
/// let endpoint = HeaderValue::from_static("b.example:8443");
/// let mut none = HeaderMap::new();
/// insert_host_if_absent(&mut none, &endpoint);
/// assert_eq!(none["host"], "b.example:8443");
/// let mut given = HeaderMap::new();
/// given.insert("host", HeaderValue::from_static("virtual.example"));
/// insert_host_if_absent(&mut given, &endpoint);
/// assert_eq!(given["host"], "virtual.example");
/// ```
pub fn insert_host_if_absent(headers: &mut HeaderMap, host: &HeaderValue) {
    // Here rather than in the adapter: generic code is compiled into each crate that
    // uses it, so inserting here runs the same copy of `http`'s insertion code as the
    // attempt's own headers above.
    if !headers.contains_key(HOST) {
        headers.insert(HOST, host.clone());
    }
}

/// The Host rule of [`apply_attempt_headers`]: a caller's Host equal to the original URL's
/// host follows the endpoint; any other value is kept. Out of line: most calls set no Host.
#[inline(never)]
fn host_rule(
    policy: &Policy,
    endpoint: &crate::Endpoint,
    request: &Uri,
    headers: &mut HeaderMap,
) -> Result<(), DestinationError> {
    if let Some(current) = headers.get(HOST) {
        let original = original_authority(policy, request);
        let follows = original.is_some_and(|a| {
            current.to_str().is_ok_and(|c| {
                c.eq_ignore_ascii_case(a.as_str()) || c.eq_ignore_ascii_case(a.host())
            })
        });
        if follows {
            if let Some(target) = endpoint.uri().authority() {
                headers.insert(HOST, header_value("host", target.as_str())?);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Endpoint;

    fn ids(p: &Policy) -> IdentityHeaders {
        IdentityHeaders::new(p, "abcdefgh", None).unwrap()
    }

    fn policy(mode: UrlMode, urls: &[&str]) -> Policy {
        let mut b = Policy::builder().url_mode(mode);
        for (i, u) in urls.iter().enumerate() {
            b = b.endpoint(Endpoint::new(format!("e{i}"), *u));
        }
        b.build().unwrap()
    }

    /// Only a leading `scheme://` makes a request URL absolute: a URL in the query or the
    /// path (an OAuth callback's `redirect_uri`) leaves it a path, as the same URI
    /// handed over as an `http::Uri` is.
    #[test]
    fn a_url_inside_the_query_or_path_leaves_the_request_a_path() {
        for text in [
            "/oauth/cb?next=https://app.example/x",
            "cb?redirect_uri=http://localhost:8080/",
            "/proxy/https://a.example/",
        ] {
            let uri = request_uri(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(uri.scheme().is_none(), "{text}");
            assert!(uri.path().starts_with('/'), "{text}");
        }
        assert_eq!(
            request_uri("HTTPS://a.example/x").unwrap().host(),
            Some("a.example")
        );
        assert!(matches!(
            request_uri("git+ssh://a/x"),
            Err(DestinationError::Scheme(_))
        ));
        assert!(matches!(
            request_uri("https://"),
            Err(DestinationError::Request(_))
        ));
        assert!(request_uri("://a.example/").is_err());
    }

    #[test]
    fn complete_mode_ignores_the_request_path() {
        let p = policy(UrlMode::Complete, &["https://rpc.example/key/abc"]);
        let u = attempt_uri(&p, 0, &"/whatever?x=1".parse().unwrap()).unwrap();
        assert_eq!(u, "https://rpc.example/key/abc");
    }

    #[test]
    fn base_mode_joins_paths_without_double_slashes() {
        let p = policy(
            UrlMode::Base,
            &["https://api.example/v1/", "https://b.example"],
        );
        let u = attempt_uri(&p, 0, &"/charges".parse().unwrap()).unwrap();
        assert_eq!(u, "https://api.example/v1/charges");
        let u = attempt_uri(&p, 1, &"/charges?a=1".parse().unwrap()).unwrap();
        assert_eq!(u, "https://b.example/charges?a=1");
    }

    #[test]
    fn base_mode_puts_base_query_first() {
        let p = policy(UrlMode::Base, &["https://api.example/v1?k=1"]);
        let u = attempt_uri(&p, 0, &"/x?b=2".parse().unwrap()).unwrap();
        assert_eq!(u, "https://api.example/v1/x?k=1&b=2");
        let u = attempt_uri(&p, 0, &"/x".parse().unwrap()).unwrap();
        assert_eq!(u, "https://api.example/v1/x?k=1");
    }

    #[test]
    fn base_mode_takes_path_of_an_absolute_request_url() {
        let p = policy(UrlMode::Base, &["http://b.example/api"]);
        let u = attempt_uri(&p, 0, &"http://a.example/users/7".parse().unwrap()).unwrap();
        assert_eq!(u, "http://b.example/api/users/7");
    }

    #[test]
    fn request_paths_that_would_leave_the_base_are_rejected() {
        let p = policy(UrlMode::Base, &["http://b.example/api/v1"]);
        for path in [
            "/../../x",
            "/a/./b",
            "/%2e%2e/x",
            "/.%2E/x",
            "/\\evil",
            "/a%5cb",
            "/..",
        ] {
            // Rejected when parsed, or when joined: never sent.
            if let Ok(uri) = request_uri(path) {
                let e = attempt_uri(&p, 0, &uri).unwrap_err();
                assert!(matches!(e, DestinationError::Url { .. }), "{path}: {e}");
            }
        }
        // Between encoded slashes, or before a `;` parameter: parsed, then refused.
        for path in [
            "/..%2f..%2fadmin",
            "/%2e%2e%2Fadmin",
            "/a/..%2F",
            "/..;/admin",
        ] {
            let e = attempt_uri(&p, 0, &request_uri(path).unwrap()).unwrap_err();
            assert!(matches!(e, DestinationError::Url { .. }), "{path}: {e}");
        }
        for path in ["/a..b/c", "/v2/.well-known", "/x%2e", "/a%2fb", "/a;v=1"] {
            assert!(
                attempt_uri(&p, 0, &request_uri(path).unwrap()).is_ok(),
                "{path}"
            );
        }
        let u = attempt_uri(&p, 0, &request_uri("x").unwrap()).unwrap();
        assert_eq!(u, "http://b.example/api/v1/x");
    }

    /// SPEC 1: exactly one slash between the base path and the request's, however many
    /// either side has.
    #[test]
    fn base_and_request_paths_are_joined_with_exactly_one_slash() {
        for (base, path, want) in [
            (
                "https://api.example/v1",
                "//charges",
                "https://api.example/v1/charges",
            ),
            (
                "https://api.example/v1//",
                "/charges",
                "https://api.example/v1/charges",
            ),
            (
                "https://b.example",
                "//evil.example/x",
                "https://b.example/evil.example/x",
            ),
            ("https://b.example/", "", "https://b.example/"),
            ("https://b.example/v1", "/", "https://b.example/v1/"),
        ] {
            let p = policy(UrlMode::Base, &[base]);
            let uri = request_uri(path).unwrap();
            assert_eq!(attempt_uri(&p, 0, &uri).unwrap(), want, "{base} + {path}");
        }
    }

    #[test]
    fn unsupported_request_scheme_is_rejected_locally() {
        let p = policy(UrlMode::Base, &["http://b.example/api"]);
        let e = attempt_uri(&p, 0, &"ftp://a.example/x".parse().unwrap()).unwrap_err();
        assert_eq!(e, DestinationError::Scheme("ftp".into()));
    }

    #[test]
    fn host_header_absent_stays_absent_and_foreign_host_is_kept() {
        let p = policy(
            UrlMode::Complete,
            &["http://a.example/", "http://b.example/"],
        );
        let req: Uri = "/".parse().unwrap();
        let mut h = HeaderMap::new();
        apply_attempt_headers(&p, 1, &req, &ids(&p), 1, &mut h).unwrap();
        assert!(h.get(HOST).is_none());
        let mut h = HeaderMap::new();
        h.insert(HOST, "virtual.example".parse().unwrap());
        apply_attempt_headers(&p, 1, &req, &ids(&p), 1, &mut h).unwrap();
        assert_eq!(h[HOST], "virtual.example");
    }

    #[test]
    fn host_header_equal_to_original_follows_the_endpoint_with_port() {
        let p = policy(
            UrlMode::Complete,
            &["http://127.0.0.1:81/", "http://127.0.0.1:82/"],
        );
        let req: Uri = "/".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert(HOST, "127.0.0.1:81".parse().unwrap());
        apply_attempt_headers(&p, 1, &req, &ids(&p), 1, &mut h).unwrap();
        assert_eq!(h[HOST], "127.0.0.1:82");
    }

    #[test]
    fn endpoint_headers_override_caller_headers_and_attempt_header_counts() {
        let p = Policy::builder()
            .endpoint(Endpoint::new("a", "http://a/").header("x-api-key", "A"))
            .endpoint(Endpoint::new("b", "http://b/"))
            .configure(|s| s.attempt_header = Some("x-attempt".into()))
            .build()
            .unwrap();
        let req: Uri = "/".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-api-key", "caller".parse().unwrap());
        apply_attempt_headers(&p, 0, &req, &ids(&p), 3, &mut h).unwrap();
        assert_eq!(h.get_all("x-api-key").iter().count(), 1);
        assert_eq!(h["x-api-key"], "A");
        assert_eq!(h["x-attempt"], "3");
        let mut h2 = HeaderMap::new();
        apply_attempt_headers(&p, 1, &req, &ids(&p), 1, &mut h2).unwrap();
        assert!(h2.get("x-api-key").is_none());
    }
}
