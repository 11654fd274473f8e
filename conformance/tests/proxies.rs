//! SPEC 3: every adapter routes through the environment's proxies the same way: `http`
//! forwarded in absolute form, `https` through `CONNECT`, `NO_PROXY` and `env_proxies =
//! false` honoured, the proxy's credential sent to the proxy only, and no endpoint header
//! on a `CONNECT`.
//!
//! The environment is process-wide, so this file is its own test binary and runs its
//! cases one after another in a single test.

use std::time::Duration;

use baton_core::{Endpoint, Policy, PolicyBuilder};
use testkit::{Behaviour, Provider, ProxyServer};

const ADAPTERS: [&str; 4] = ["tokio", "blocking", "async-std", "smol"];

/// Sends one GET through `adapter`; the status, or the error's text.
fn get(adapter: &str, policy: PolicyBuilder) -> Result<u16, String> {
    match adapter {
        "tokio" => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let client = baton_tokio::Client::new(policy).map_err(|e| e.to_string())?;
            rt.block_on(async {
                client
                    .get("/")
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .map_err(|e| e.to_string())
            })
        }
        "blocking" => {
            let client = baton_blocking::Client::builder(policy)
                .build()
                .map_err(|e| e.to_string())?;
            client
                .get("/")
                .call()
                .map(|r| r.status().as_u16())
                .map_err(|e| e.to_string())
        }
        runtime => {
            let client = baton_async_std::Client::new(policy).map_err(|e| e.to_string())?;
            let fut = async move {
                client
                    .get("/")
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .map_err(|e| e.to_string())
            };
            if runtime == "smol" {
                smol::block_on(fut)
            } else {
                async_std::task::block_on(fut)
            }
        }
    }
}

fn policy(url: &str) -> PolicyBuilder {
    policy_of(Endpoint::new("a", url).header("x-api-key", "SECRET-A"))
}

fn policy_of(endpoint: Endpoint) -> PolicyBuilder {
    Policy::builder().endpoint(endpoint).configure(|s| {
        s.attempt_timeout = Duration::from_secs(2);
        s.connect_timeout = Duration::from_secs(1);
    })
}

fn clear_env() {
    for v in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        std::env::remove_var(v);
    }
}

#[test]
fn every_adapter_routes_through_environment_proxies_the_same_way() {
    clear_env();
    let upstream = Provider::start(Behaviour::ok().body("hi"));
    let proxy = ProxyServer::start();
    let port = upstream.port();

    // http: forwarded in absolute form, with the proxy's credential for the proxy only;
    // an endpoint with credentials is refused (they would reach the proxy in clear text).
    std::env::set_var("HTTP_PROXY", format!("http://alice:pw@{}", proxy.addr()));
    for adapter in ADAPTERS {
        let e = get(adapter, policy(&upstream.url())).unwrap_err();
        assert!(
            e.contains("\"a\"") && e.contains("HTTP_PROXY"),
            "{adapter}: {e}"
        );
        assert!(
            proxy.requests().is_empty(),
            "{adapter}: something reached the proxy"
        );
    }
    for adapter in ADAPTERS {
        let before = proxy.requests().len();
        upstream.clear();
        let plain = policy_of(Endpoint::new("a", upstream.url()));
        assert_eq!(get(adapter, plain), Ok(200), "{adapter}");
        let seen = &proxy.requests()[before..];
        assert_eq!(seen.len(), 1, "{adapter}: {seen:?}");
        assert_eq!(seen[0].method, "GET", "{adapter}");
        assert_eq!(
            seen[0].target,
            format!("http://127.0.0.1:{port}/"),
            "{adapter}: not absolute form"
        );
        assert_eq!(
            seen[0].header("proxy-authorization"),
            Some("Basic YWxpY2U6cHc="),
            "{adapter}"
        );
        let at_upstream = upstream.requests();
        assert_eq!(at_upstream.len(), 1, "{adapter}");
        assert!(
            at_upstream[0].header("proxy-authorization").is_none(),
            "{adapter}"
        );
    }

    // NO_PROXY and env_proxies = false: direct.
    std::env::set_var("NO_PROXY", "localhost,127.0.0.1");
    for adapter in ADAPTERS {
        let before = proxy.requests().len();
        assert_eq!(get(adapter, policy(&upstream.url())), Ok(200), "{adapter}");
        assert_eq!(
            proxy.requests().len(),
            before,
            "{adapter}: NO_PROXY ignored"
        );
    }
    std::env::remove_var("NO_PROXY");
    for adapter in ADAPTERS {
        let before = proxy.requests().len();
        let p = policy(&upstream.url()).configure(|s| s.env_proxies = false);
        assert_eq!(get(adapter, p), Ok(200), "{adapter}");
        assert_eq!(
            proxy.requests().len(),
            before,
            "{adapter}: env_proxies = false ignored"
        );
    }

    // https: a CONNECT tunnel carrying none of the endpoint's headers. The upstream speaks
    // plain HTTP, so the TLS handshake inside the tunnel fails: undelivered everywhere.
    clear_env();
    std::env::set_var("HTTPS_PROXY", proxy.url());
    let https = format!("https://127.0.0.1:{port}");
    for adapter in ADAPTERS {
        let before = proxy.requests().len();
        let result = get(adapter, policy(&https));
        assert!(result.is_err(), "{adapter}: {result:?}");
        let seen = &proxy.requests()[before..];
        assert!(!seen.is_empty(), "{adapter}: the tunnel was not asked for");
        for r in seen {
            assert_eq!(r.method, "CONNECT", "{adapter}");
            assert_eq!(r.target, format!("127.0.0.1:{port}"), "{adapter}");
            assert!(r.header("x-api-key").is_none(), "{adapter}: {r:?}");
        }
    }

    // A proxy scheme baton does not speak is a named configuration error.
    std::env::set_var("HTTPS_PROXY", "socks5://proxy.example:1080");
    for adapter in ADAPTERS {
        let e = get(adapter, policy(&https)).unwrap_err();
        assert!(e.contains("HTTPS_PROXY"), "{adapter}: {e}");
    }
    clear_env();
}
