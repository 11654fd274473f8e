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
        let authority = self.0.authority().map_or("?", |a| a.as_str());
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
        let has_port = match host_port.rfind(']') {
            Some(end) => host_port[end..].contains(':'),
            None => host_port.contains(':'),
        };
        if has_port {
            write!(f, "{scheme}://{host_port}")
        } else {
            let port = if scheme == "https" { 443 } else { 80 };
            write!(f, "{scheme}://{host_port}:{port}")
        }
    }
}

impl fmt::Debug for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Shows a request's target in `Debug` as far as SPEC 4 allows: an absolute URL as its
/// origin ([`Origin`]), a path (which may hold a key, or a customer's id) as `<path>`.
///
/// ```
/// use baton_core::Target;
/// let absolute: http::Uri = "https://u:pw@rpc.example/v3/KEY?k=S".parse().unwrap();
/// assert_eq!(format!("{:?}", Target(&absolute)), "https://rpc.example:443");
/// let path: http::Uri = "/v3/KEY".parse().unwrap();
/// assert_eq!(format!("{:?}", Target(&path)), "<path>");
/// ```
#[derive(Clone, Copy)]
pub struct Target<'a>(pub &'a Uri);

impl fmt::Debug for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.authority() {
            Some(_) => fmt::Display::fmt(&Origin(self.0), f),
            None => f.write_str("<path>"),
        }
    }
}

/// Shows a header map in `Debug` by its names only: a value may be a credential.
///
/// ```
/// use baton_core::HeaderNames;
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-api-key", "SECRET".parse().unwrap());
/// assert_eq!(format!("{:?}", HeaderNames(&headers)), r#"["x-api-key"]"#);
/// ```
#[derive(Clone, Copy)]
pub struct HeaderNames<'a>(pub &'a http::HeaderMap);

impl fmt::Debug for HeaderNames<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// A URL as text, reduced to `scheme://host:port`; text that does not parse as a URL is
/// shown as `<url>` (it might be anything, a key included).
///
/// ```
/// use baton_core::redact_url;
/// assert_eq!(redact_url("http://u:SECRET@127.0.0.1:1/v2/KEY"), "http://127.0.0.1:1");
/// assert_eq!(redact_url("not a url SECRET"), "<url>");
/// assert_eq!(redact_url("http://u:PW@127.0.0.1:99999/v2/KEY"), "http://127.0.0.1:99999");
/// assert_eq!(redact_url("https://user:se#cret@host/KEY"), "https://<hidden>");
/// assert_eq!(redact_url("http://127.0.0.1:99999/v2/KEY"), "http://127.0.0.1:99999");
/// ```
pub fn redact_url(url: &str) -> String {
    match url.parse::<Uri>() {
        // An `@` the parsed authority does not hold: the userinfo held a `/`, `?` or `#`
        // and the parser cut it; what looks like the host is part of the credential.
        Ok(u) if url.contains('@') && !u.authority().is_some_and(|a| a.as_str().contains('@')) => {
            format!("{}://<hidden>", u.scheme_str().unwrap_or("http"))
        }
        Ok(u) if u.scheme().is_some() && u.host().is_some() => Origin(&u).to_string(),
        _ => rough_origin(url).unwrap_or_else(|| "<url>".to_string()),
    }
}

/// `scheme://host[:port]` cut out of text that is not a valid URL (a bad port, a space).
/// When the text holds an `@` anywhere, where the userinfo ends cannot be told (a password
/// may hold `/`, `?` or `#`), so the host is shown as `<hidden>`.
fn rough_origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return None;
    }
    if rest.contains('@') {
        return Some(format!("{scheme}://<hidden>"));
    }
    let host = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if host.is_empty() || host.contains(char::is_whitespace) {
        return None;
    }
    Some(format!("{scheme}://{host}"))
}

/// `text` with every `http://` or `https://` URL in it reduced to `scheme://host:port`:
/// for the messages of HTTP clients, which quote the URL they were given.
///
/// ```
/// use baton_core::scrub_urls;
/// let text = "error sending request for url (http://u:PW@127.0.0.1:1/v2/KEY?q=1)";
/// assert_eq!(scrub_urls(text), "error sending request for url (http://127.0.0.1:1)");
/// assert_eq!(scrub_urls("at http://[::1]:8545/v2/KEY?k=a,KEY2 now"), "at http://[::1]:8545 now");
/// // A `)` or `'` inside the path or query does not end the URL.
/// let text = "for url (https://rpc.example/q?f=(a)&key=SECRET)";
/// assert_eq!(scrub_urls(text), "for url (https://rpc.example:443)");
/// let text = "url 'https://api.example/Orders('A1')/KEY'.";
/// assert_eq!(scrub_urls(text), "url 'https://api.example:443'.");
/// ```
pub fn scrub_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let next = ["http://", "https://"]
            .iter()
            .filter_map(|p| rest.to_ascii_lowercase().find(p))
            .min();
        let Some(start) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        // The whole token, to white space, a double quote or an angle bracket: a URL's
        // path and query may hold `,`, `;`, `[`, `(`, `)`, `'` and, in a query, a backtick
        // unencoded (the `url` crate leaves them so), so none of those ends it.
        let end = tail
            .find(|c: char| c.is_whitespace() || "\"<>".contains(c))
            .unwrap_or(tail.len());
        // Closing punctuation of the text around it (`(url)`, `'url'`, `` `url` ``,
        // `url.`) is kept after the origin: it reveals nothing of a path.
        let token = &tail[..end];
        let url = token.trim_end_matches([')', ']', '\'', '`', '.', ',', ';', ':']);
        out.push_str(&redact_url(url));
        out.push_str(&token[url.len()..]);
        rest = &tail[end..];
    }
}

/// Writes every source of `error`, each after `": "`, with URLs reduced to their origins:
/// what the `{:#}` form of every baton error adds to its own text (an error's own text
/// never repeats its source's, so that a printer that walks the chain, such as anyhow's
/// `{:#}`, shows each part once).
///
/// ```
/// use std::fmt;
/// #[derive(Debug)]
/// struct Call(std::io::Error);
/// impl fmt::Display for Call {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("call failed")?;
///         if f.alternate() {
///             baton_core::write_causes(f, self)?;
///         }
///         Ok(())
///     }
/// }
/// impl std::error::Error for Call {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
/// let e = Call(std::io::Error::other("no route to https://rpc.example/v2/KEY"));
/// assert_eq!(e.to_string(), "call failed");
/// assert_eq!(format!("{e:#}"), "call failed: no route to https://rpc.example:443");
/// ```
pub fn write_causes(f: &mut fmt::Formatter<'_>, error: &dyn std::error::Error) -> fmt::Result {
    let mut source = error.source();
    while let Some(e) = source {
        // Clients quote URLs in their errors; paths and queries hold keys (SPEC 4).
        write!(f, ": {}", scrub_urls(&e.to_string()))?;
        source = e.source();
    }
    Ok(())
}

/// The text of `error` and of every cause after it, joined with `": "`, with URLs reduced
/// to their origins: the whole story of an error kept as text (an error turned into a
/// message, a [`Scrubbed`] error).
///
/// ```
/// let why = baton_core::request_uri("ftp://a.example/KEY").unwrap_err();
/// let e = baton_core::InvalidRequest::from(why);
/// assert_eq!(
///     baton_core::chain_text(&e),
///     r#"invalid request: unsupported scheme "ftp" in the request URL (only http and https)"#
/// );
/// ```
pub fn chain_text(error: &dyn std::error::Error) -> String {
    let mut text = scrub_urls(&error.to_string());
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&scrub_urls(&e.to_string()));
        source = e.source();
    }
    text
}

/// An error whose text is shown with every URL in it reduced to `scheme://host:port`
/// (SPEC 4: paths and queries of provider URLs hold keys). Its text is the original's
/// with every cause after it (its `{:#}`), since its `source()` is `None` (the original's
/// chain may quote the URL again). The original error is kept for programs
/// ([`Scrubbed::inner`]); `Debug` shows the scrubbed text only. Adapters wrap the errors of
/// the clients and services they drive in it.
///
/// ```
/// let e = baton_core::Scrubbed::new(Box::new(std::io::Error::other(
///     "error sending request for url (https://rpc.example/v2/KEY)",
/// )));
/// assert_eq!(e.to_string(), "error sending request for url (https://rpc.example:443)");
/// assert!(e.inner().to_string().contains("KEY"));
/// // The causes follow.
/// let why = baton_core::request_uri("ftp://a.example/KEY").unwrap_err();
/// let e = baton_core::Scrubbed::new(Box::new(baton_core::InvalidRequest::from(why)));
/// assert_eq!(e.to_string(), r#"invalid request: unsupported scheme "ftp" in the request URL (only http and https)"#);
/// ```
pub struct Scrubbed {
    text: String,
    inner: Box<dyn std::error::Error + Send + Sync>,
}

impl Scrubbed {
    /// `inner`, shown with its URLs scrubbed.
    pub fn new(inner: Box<dyn std::error::Error + Send + Sync>) -> Self {
        Scrubbed {
            text: chain_text(&*inner),
            inner,
        }
    }

    /// The original error (its text may quote a URL in full).
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.inner
    }
}

impl fmt::Display for Scrubbed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Scrubbed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Scrubbed").field(&self.text).finish()
    }
}

impl std::error::Error for Scrubbed {}
