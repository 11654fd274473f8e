//! What of a URL may be shown (SPEC 4): `scheme://host:port`, never userinfo, path or query.
//!
//! RPC providers put API keys in the path (`/v2/<KEY>`) and some endpoints carry
//! `user:password@`; request paths in base mode may hold customer ids. Everything baton
//! renders as text (errors, events, reports, `Debug`, CLI output) names an endpoint by its
//! id, or shows a URL through [`Origin`].

use std::fmt;

use http::Uri;

/// Displays `scheme://host:port` of a URL (the port made explicit), nothing else.
///
/// ```
/// use baton_core::Origin;
/// let uri: http::Uri = "https://user:pw@rpc.example/v2/KEY?x=1".parse().unwrap();
/// assert_eq!(Origin(&uri).to_string(), "https://rpc.example:443");
/// ```
#[derive(Clone, Copy)]
pub struct Origin<'a>(pub &'a Uri);

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = self.0.scheme_str().unwrap_or("http");
        let host = self.0.host().unwrap_or("?");
        let port = self
            .0
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        write!(f, "{scheme}://{host}:{port}")
    }
}

impl fmt::Debug for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A URL as text, reduced to `scheme://host:port`; text that does not parse as a URL is
/// shown as `<url>` (it might be anything, a key included).
///
/// ```
/// use baton_core::redact_url;
/// assert_eq!(redact_url("http://u:SECRET@127.0.0.1:1/v2/KEY"), "http://127.0.0.1:1");
/// assert_eq!(redact_url("not a url SECRET"), "<url>");
/// ```
pub fn redact_url(url: &str) -> String {
    match url.parse::<Uri>() {
        Ok(u) if u.scheme().is_some() && u.host().is_some() => Origin(&u).to_string(),
        _ => "<url>".to_string(),
    }
}

/// `text` with every occurrence of `url` (and of its form without userinfo, which some
/// clients print) replaced by its origin: for error messages of HTTP clients that quote the
/// URL they were given.
///
/// ```
/// use baton_core::scrub_url;
/// let text = "error sending request for url (http://u:PW@127.0.0.1:1/v2/KEY)";
/// assert_eq!(
///     scrub_url(text, "http://u:PW@127.0.0.1:1/v2/KEY"),
///     "error sending request for url (http://127.0.0.1:1)"
/// );
/// ```
pub fn scrub_url(text: &str, url: &str) -> String {
    let shown = redact_url(url);
    let mut out = text.replace(url, &shown);
    if let Ok(u) = url.parse::<Uri>() {
        if let (Some(scheme), Some(authority)) = (u.scheme_str(), u.authority()) {
            let bare = authority
                .as_str()
                .rsplit_once('@')
                .map_or(authority.as_str(), |(_, h)| h);
            let tail = u.path_and_query().map_or("", |pq| pq.as_str());
            let without_userinfo = format!("{scheme}://{bare}{tail}");
            out = out.replace(&without_userinfo, &shown);
        }
    }
    out
}
