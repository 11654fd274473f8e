//! Proxies from the environment (SPEC 3), decided once for every adapter.
//!
//! `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and `NO_PROXY` (the lower-case form of each is
//! read first, as curl does) say, per request URL, whether to go direct, to **forward** an
//! `http` request to the proxy in absolute form (`GET http://host/path HTTP/1.1`), or to
//! open a **tunnel** with `CONNECT host:port` for an `https` one. Core never reads the
//! environment: an adapter passes a lookup function ([`ProxyEnv::from_env`]) once, when its
//! client is built, and asks [`ProxyEnv::route`] per attempt. `env_proxies = false` in the
//! settings turns all of it off.
//!
//! Decisions: only `http://` proxies are supported (an `https://` or `socks5://` proxy is
//! rejected when the client is built, naming the variable); a proxy URL's userinfo becomes
//! `Proxy-Authorization: Basic` (sent to the proxy only: on the forwarded request, or on
//! the `CONNECT`, never inside the tunnel); `NO_PROXY` is a comma-separated list of `*`,
//! host names (matching the name and its subdomains; a leading `.` is ignored), IP
//! addresses and CIDR blocks (`10.0.0.0/8`, `::1/128`), each optionally with `:port`.
//! Loopback is not exempt unless listed (curl and reqwest differ there; listing it is
//! explicit). A forwarded `http` request is read by the proxy in clear text, so an `http`
//! endpoint with per-endpoint headers (credentials, userinfo) or a credential slot that
//! would be forwarded is
//! refused when the client is built ([`ProxyEnv::check`]): a proxy never receives an
//! endpoint's credentials except inside a tunnel.

use core::net::IpAddr;

use http::header::HeaderValue;
use http::Uri;

use crate::policy::ConfigError;

/// One proxy: where it is and the credential it wants.
///
/// ```
/// use baton_core::ProxyEnv;
/// let env = ProxyEnv::from_env(|name| (name == "HTTP_PROXY").then(|| "http://u:p@proxy.example:3128".into())).unwrap();
/// let route = env.route(&"http://api.example/v1".parse().unwrap());
/// let proxy = route.proxy().unwrap();
/// assert_eq!((proxy.host(), proxy.port()), ("proxy.example", 3128));
/// assert!(proxy.authorization().is_some());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Proxy {
    host: String,
    port: u16,
    authorization: Option<HeaderValue>,
    /// The proxy URL's userinfo as written (for clients that take a URL with it).
    userinfo: Option<String>,
    /// The variable it came from.
    variable: &'static str,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("authorization", &self.authorization.is_some())
            .finish()
    }
}

impl Proxy {
    /// The proxy's host (an IPv6 literal without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The proxy's port (default 80).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `Proxy-Authorization` for the proxy, from the proxy URL's userinfo.
    pub fn authorization(&self) -> Option<&HeaderValue> {
        self.authorization.as_ref()
    }

    /// `http://user:password@host:port`, for clients that take the credential in the proxy
    /// URL (ureq). Never show it.
    pub fn url_with_credentials(&self) -> String {
        match &self.userinfo {
            Some(u) => self.url().replacen("http://", &format!("http://{u}@"), 1),
            None => self.url(),
        }
    }

    /// `http://host:port`, for clients that take a proxy URL (without its credential).
    pub fn url(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}", self.host, self.port)
        } else {
            format!("http://{}:{}", self.host, self.port)
        }
    }

    fn parse(variable: &'static str, text: &str) -> Result<Proxy, ConfigError> {
        let bad = |reason: String| ConfigError::InvalidProxy {
            variable,
            value: crate::redact::redact_url(text),
            reason,
        };
        // A bare `host:port` means http, as curl and reqwest read it.
        let full = if text.contains("://") {
            text.to_string()
        } else {
            format!("http://{text}")
        };
        let uri: Uri = full
            .parse()
            .map_err(|_| bad("not a proxy URL".to_string()))?;
        if uri.scheme_str() != Some("http") {
            return Err(bad(format!(
                "only http:// proxies are supported, not {}://",
                uri.scheme_str().unwrap_or("?")
            )));
        }
        let authority = uri.authority().ok_or_else(|| bad("no host".into()))?;
        let (userinfo, host_port) = match authority.as_str().rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority.as_str()),
        };
        let port_text = match host_port.rfind(']') {
            Some(end) => host_port[end + 1..].strip_prefix(':'),
            None => host_port.rsplit_once(':').map(|(_, p)| p),
        };
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if host.is_empty() {
            return Err(bad("no host".into()));
        }
        let port = match port_text {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad("port outside 1-65535".into()))?,
            None => 80,
        };
        let authorization = userinfo.map(|u| {
            let mut v = crate::policy::basic_credential(u);
            v.set_sensitive(true);
            v
        });
        Ok(Proxy {
            host,
            port,
            authorization,
            userinfo: userinfo.map(str::to_string),
            variable,
        })
    }
}

/// How one request goes out.
///
/// ```
/// use baton_core::{ProxyEnv, Route};
/// assert_eq!(ProxyEnv::none().route(&"https://a.example/".parse().unwrap()), Route::Direct);
/// assert!(Route::Direct.proxy().is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    /// Straight to the endpoint.
    Direct,
    /// An `http` request, sent to the proxy in absolute form.
    Forward(&'a Proxy),
    /// An `https` request, through a `CONNECT` tunnel opened at the proxy.
    Tunnel(&'a Proxy),
}

impl<'a> Route<'a> {
    /// The proxy, unless direct.
    pub fn proxy(&self) -> Option<&'a Proxy> {
        match self {
            Route::Direct => None,
            Route::Forward(p) | Route::Tunnel(p) => Some(p),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Exempt {
    All,
    Name(String, Option<u16>),
    Net(IpAddr, u8, Option<u16>),
}

/// The proxy settings of the environment, read once.
///
/// ```
/// use baton_core::{ProxyEnv, Route};
/// let vars = [("https_proxy", "http://proxy.example:8080"), ("no_proxy", "internal.example,10.0.0.0/8")];
/// let env = ProxyEnv::from_env(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string())).unwrap();
/// assert!(matches!(env.route(&"https://pay.example/".parse().unwrap()), Route::Tunnel(_)));
/// assert_eq!(env.route(&"https://api.internal.example/".parse().unwrap()), Route::Direct);
/// assert_eq!(env.route(&"https://10.1.2.3/".parse().unwrap()), Route::Direct);
/// assert_eq!(env.route(&"http://pay.example/".parse().unwrap()), Route::Direct); // no HTTP_PROXY
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyEnv {
    http: Option<Proxy>,
    https: Option<Proxy>,
    no_proxy: Vec<Exempt>,
}

impl ProxyEnv {
    /// No proxy at all (`env_proxies = false`).
    pub fn none() -> ProxyEnv {
        ProxyEnv::default()
    }

    /// Reads `http_proxy`/`HTTP_PROXY`, `https_proxy`/`HTTPS_PROXY`, `all_proxy`/`ALL_PROXY`
    /// and `no_proxy`/`NO_PROXY` through `lookup` (an adapter passes
    /// `|name| std::env::var(name).ok()`). Empty values count as unset.
    ///
    /// Under CGI (`REQUEST_METHOD` set) the upper-case `HTTP_PROXY` is not read: there it is
    /// the incoming request's `Proxy` header, the caller's to choose ("httpoxy"), as
    /// reqwest, curl and Go also decide. The lower-case `http_proxy` is still read.
    ///
    /// ```
    /// use baton_core::ProxyEnv;
    /// let cgi = [("REQUEST_METHOD", "GET"), ("HTTP_PROXY", "http://evil.example:1")];
    /// let env = ProxyEnv::from_env(|n| cgi.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string()));
    /// assert!(env.unwrap().is_empty());
    /// ```
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<ProxyEnv, ConfigError> {
        let cgi = lookup("REQUEST_METHOD").is_some();
        let get = |lower: &str, upper: &str| {
            let upper = || {
                (!(cgi && upper == "HTTP_PROXY"))
                    .then(|| lookup(upper))
                    .flatten()
            };
            lookup(lower)
                .or_else(upper)
                .filter(|v| !v.trim().is_empty())
        };
        let all = get("all_proxy", "ALL_PROXY")
            .map(|v| Proxy::parse("ALL_PROXY", v.trim()))
            .transpose()?;
        let http = get("http_proxy", "HTTP_PROXY")
            .map(|v| Proxy::parse("HTTP_PROXY", v.trim()))
            .transpose()?
            .or_else(|| all.clone());
        // (A proxy taken from ALL_PROXY keeps that name for its errors.)
        let https = get("https_proxy", "HTTPS_PROXY")
            .map(|v| Proxy::parse("HTTPS_PROXY", v.trim()))
            .transpose()?
            .or(all);
        let no_proxy = get("no_proxy", "NO_PROXY")
            .map(|v| v.split(',').filter_map(exempt).collect())
            .unwrap_or_default();
        Ok(ProxyEnv {
            http,
            https,
            no_proxy,
        })
    }

    /// The proxies a client of `policy` routes through, decided the same way on every
    /// adapter: read from the process environment when the policy's `env_proxies` is on
    /// (else none), then [checked](ProxyEnv::check) against the policy's endpoints. An
    /// adapter calls it once, when its client is built.
    ///
    /// ```
    /// use baton_core::{Endpoint, Policy, ProxyEnv};
    /// let policy = Policy::builder()
    ///     .endpoint(Endpoint::new("a", "https://a.example/"))
    ///     .configure(|s| s.env_proxies = false)
    ///     .build()
    ///     .unwrap();
    /// assert!(ProxyEnv::for_policy(&policy).unwrap().is_empty());
    /// ```
    pub fn for_policy(policy: &crate::Policy) -> Result<ProxyEnv, ConfigError> {
        let env = if policy.settings().env_proxies {
            ProxyEnv::from_env(|name| std::env::var(name).ok())?
        } else {
            ProxyEnv::none()
        };
        env.check(policy)?;
        Ok(env)
    }

    /// Whether any proxy is configured.
    pub fn is_empty(&self) -> bool {
        self.http.is_none() && self.https.is_none()
    }

    /// Refuses a policy whose endpoint credentials would reach a proxy (SPEC 3: a proxy
    /// never receives an endpoint's credentials except inside a tunnel): an `http`
    /// endpoint with per-endpoint headers (or userinfo) or a credential slot (its token)
    /// that the environment forwards through a proxy. The error names the endpoint, the
    /// variable and the ways out.
    pub fn check(&self, policy: &crate::Policy) -> Result<(), ConfigError> {
        for e in policy.endpoints() {
            let what = if e.credential_settings().is_some() {
                "a credential slot (its token)"
            } else if !e.headers().is_empty() {
                "per-endpoint headers (credentials)"
            } else {
                continue;
            };
            if let Route::Forward(p) = self.route(e.uri()) {
                return Err(ConfigError::InvalidProxy {
                    variable: p.variable,
                    value: p.url(),
                    reason: format!(
                        "endpoint {:?} has {what} and an http URL: forwarded through this \
                         proxy they would reach it in clear text; use https (a tunnel), list \
                         the host in NO_PROXY, or set env_proxies = false",
                        e.id()
                    ),
                });
            }
        }
        Ok(())
    }

    /// The proxy for requests of `scheme` (`http` or `https`), before `NO_PROXY`.
    pub fn proxy_for(&self, scheme: &str) -> Option<&Proxy> {
        if scheme.eq_ignore_ascii_case("https") {
            self.https.as_ref()
        } else {
            self.http.as_ref()
        }
    }

    /// How a request to `uri` goes out.
    pub fn route(&self, uri: &Uri) -> Route<'_> {
        let proxy = match uri.scheme_str() {
            Some("https") => self.https.as_ref().map(Route::Tunnel),
            _ => self.http.as_ref().map(Route::Forward),
        };
        match proxy {
            Some(route) if !self.exempt(uri) => route,
            _ => Route::Direct,
        }
    }

    fn exempt(&self, uri: &Uri) -> bool {
        let host = uri
            .host()
            .unwrap_or("")
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        let ip = host.parse::<IpAddr>().ok();
        self.no_proxy.iter().any(|e| match e {
            Exempt::All => true,
            Exempt::Name(name, p) => {
                p.is_none_or(|p| p == port)
                    && (host == *name || host.ends_with(&format!(".{name}")))
            }
            Exempt::Net(net, bits, p) => {
                p.is_none_or(|p| p == port) && ip.is_some_and(|ip| in_net(ip, *net, *bits))
            }
        })
    }
}

fn exempt(entry: &str) -> Option<Exempt> {
    let entry = entry.trim().to_ascii_lowercase();
    if entry.is_empty() {
        return None;
    }
    if entry == "*" {
        return Some(Exempt::All);
    }
    // `[v6]:port`, `[v6]/bits`, `v4:port`, `name:port`; a bare IPv6 address has several
    // colons. An entry whose port or prefix length is not a number it can be is dropped
    // (it exempts nothing), never widened to every port or narrowed to one address.
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        match (tail.strip_prefix(':'), tail.strip_prefix('/')) {
            (Some(p), _) => (h.to_string(), Some(p.parse().ok()?)),
            (None, Some(bits)) => (format!("{h}/{bits}"), None),
            (None, None) if tail.is_empty() => (h.to_string(), None),
            (None, None) => return None,
        }
    } else if entry.matches(':').count() == 1 {
        let (h, p) = entry.split_once(':')?;
        (h.to_string(), Some(p.parse().ok()?))
    } else {
        (entry.clone(), None)
    };
    let (addr, bits) = match host.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (host.as_str(), None),
    };
    if let Ok(ip) = addr.parse::<IpAddr>() {
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b.parse::<u8>().ok().filter(|b| *b <= max)?,
        };
        return Some(Exempt::Net(ip, bits, port));
    }
    // A fully qualified name's trailing dot is the same name (`internal.example.`).
    let name = host
        .trim_start_matches("*.")
        .trim_start_matches('.')
        .trim_end_matches('.')
        .to_string();
    Some(Exempt::Name(name, port))
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    let (a, b, width) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b)), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    if bits == 0 {
        return true;
    }
    let shift = width - u32::from(bits);
    (a >> shift) == (b >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Result<ProxyEnv, ConfigError> {
        ProxyEnv::from_env(|n| {
            vars.iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        })
    }

    fn uri(s: &str) -> Uri {
        s.parse().unwrap()
    }

    #[test]
    fn lower_case_wins_and_all_proxy_fills_in() {
        let e = env(&[
            ("http_proxy", "http://lower:1"),
            ("HTTP_PROXY", "http://upper:2"),
            ("ALL_PROXY", "all:3"),
        ])
        .unwrap();
        assert_eq!(e.route(&uri("http://a/")).proxy().unwrap().host(), "lower");
        assert_eq!(e.route(&uri("https://a/")).proxy().unwrap().port(), 3);
        assert!(matches!(e.route(&uri("https://a/")), Route::Tunnel(_)));
        assert!(matches!(e.route(&uri("http://a/")), Route::Forward(_)));
    }

    #[test]
    fn no_proxy_matches_names_subdomains_ips_cidrs_and_ports() {
        let e = env(&[
            ("ALL_PROXY", "http://p:1"),
            (
                "NO_PROXY",
                ".corp.example, 127.0.0.1, 10.0.0.0/8, ::1, api.example:8443",
            ),
        ])
        .unwrap();
        for direct in [
            "http://corp.example/",
            "http://x.corp.example/",
            "http://127.0.0.1:9/",
            "http://10.200.0.1/",
            "http://[::1]:80/",
            "https://api.example:8443/",
        ] {
            assert_eq!(e.route(&uri(direct)), Route::Direct, "{direct}");
        }
        for proxied in [
            "http://notcorp.example/",
            "http://127.0.0.2/",
            "https://api.example/",
        ] {
            assert!(e.route(&uri(proxied)).proxy().is_some(), "{proxied}");
        }
        let e = env(&[("HTTPS_PROXY", "http://p:1"), ("no_proxy", "*")]).unwrap();
        assert_eq!(e.route(&uri("https://a/")), Route::Direct);
    }

    /// A bracketed IPv6 network keeps its prefix; a port or prefix that cannot be is
    /// dropped (exempts nothing); a trailing dot names the same host.
    #[test]
    fn no_proxy_edge_forms() {
        let e = env(&[
            ("ALL_PROXY", "http://p:1"),
            (
                "NO_PROXY",
                "[fd00::]/8, [::2]:abc, 10.0.0.0/abc, 10.1.0.0/33, [::3]x, internal.example.",
            ),
        ])
        .unwrap();
        for direct in [
            "http://[fd00::1]/",
            "http://[fdff::9]:8080/",
            "http://internal.example/",
            "http://internal.example./",
            "http://a.internal.example/",
        ] {
            assert_eq!(e.route(&uri(direct)), Route::Direct, "{direct}");
        }
        for proxied in [
            "http://[fe00::1]/",
            "http://[::2]:80/",
            "http://10.0.0.0/",
            "http://10.1.0.0/",
            "http://[::3]/",
        ] {
            assert!(e.route(&uri(proxied)).proxy().is_some(), "{proxied}");
        }
    }

    #[test]
    fn unsupported_proxies_are_rejected_naming_the_variable_without_credentials() {
        let e = env(&[("HTTPS_PROXY", "socks5://u:SECRET@p:1080")]).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("HTTPS_PROXY") && text.contains("socks5"),
            "{text}"
        );
        assert!(!text.contains("SECRET"), "{text}");
        assert!(env(&[("HTTP_PROXY", "http://p:99999")]).is_err());
    }

    #[test]
    fn an_http_endpoint_whose_credentials_would_be_forwarded_is_refused() {
        let e = env(&[("HTTP_PROXY", "http://p:3128"), ("NO_PROXY", "safe")]).unwrap();
        let policy = |endpoint: crate::Endpoint| {
            crate::Policy::builder().endpoint(endpoint).build().unwrap()
        };
        let slot = || crate::credential::CredentialSettings::default();
        let token = crate::Endpoint::new("a", "http://a/").credential(slot());
        let text = e.check(&policy(token)).unwrap_err().to_string();
        assert!(
            text.contains("\"a\"") && text.contains("credential slot"),
            "{text}"
        );
        let header = crate::Endpoint::new("a", "http://a/").header("authorization", "Bearer x");
        let text = e.check(&policy(header)).unwrap_err().to_string();
        assert!(
            text.contains("per-endpoint headers") && !text.contains("Bearer"),
            "{text}"
        );
        // In a tunnel (https), or not through the proxy at all: nothing reaches it.
        let tunnelled = crate::Endpoint::new("a", "https://a/").credential(slot());
        assert!(e.check(&policy(tunnelled)).is_ok());
        let direct = crate::Endpoint::new("a", "http://safe/").credential(slot());
        assert!(e.check(&policy(direct)).is_ok());
    }

    #[test]
    fn proxy_userinfo_becomes_proxy_authorization() {
        let e = env(&[("HTTP_PROXY", "http://alice:pw@p:3128")]).unwrap();
        let p = e.route(&uri("http://a/")).proxy().unwrap().clone();
        assert_eq!(p.authorization().unwrap(), "Basic YWxpY2U6cHc=");
        assert!(!format!("{p:?}").contains("YWxp"));
        assert_eq!(p.url(), "http://p:3128");
    }
}
