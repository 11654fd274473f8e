//! Destination rules (SPEC 3) on the wire: URL modes, the Host rule, per-endpoint headers,
//! request id, idempotency key and attempt number, as the providers received them.

mod common;

use baton_core::{Endpoint, UrlMode};
use testkit::{Behaviour, Provider};

#[tokio::test]
async fn base_mode_joins_path_and_query_base_first() {
    let p = Provider::start(Behaviour::ok());
    let (client, _) = common::client(
        common::short()
            .endpoint(Endpoint::new("a", format!("{}/v1?tenant=7", p.url())))
            .url_mode(UrlMode::Base),
    );
    client.get("/charges?limit=3").send().await.unwrap();
    let r = &p.requests()[0];
    assert_eq!(r.path, "/v1/charges");
    assert_eq!(r.query.as_deref(), Some("tenant=7&limit=3"));
}

#[tokio::test]
async fn base_mode_takes_the_path_of_an_absolute_request_url() {
    let p = Provider::start(Behaviour::ok());
    let (client, _) = common::client(
        common::short()
            .endpoint(Endpoint::new("a", format!("{}/api", p.url())))
            .url_mode(UrlMode::Base),
    );
    client
        .get("http://somewhere.example/users/7")
        .send()
        .await
        .unwrap();
    assert_eq!(p.requests()[0].path, "/api/users/7");
}

#[tokio::test]
async fn complete_mode_ignores_the_request_path() {
    let p = Provider::start(Behaviour::ok());
    let (client, _) = common::client(
        common::short().endpoint(Endpoint::new("a", format!("{}/rpc/key-1", p.url()))),
    );
    client
        .post("/whatever?x=1")
        .body("{}")
        .send()
        .await
        .unwrap();
    let r = &p.requests()[0];
    assert_eq!(r.path, "/rpc/key-1");
    assert_eq!(r.query, None);
}

#[tokio::test]
async fn unsupported_scheme_is_rejected_locally() {
    let p = Provider::start(Behaviour::ok());
    let (client, _) = common::client(common::policy(&[("a", &p.url())]));
    let err = client.get("ftp://a.example/x").send().await.unwrap_err();
    assert!(matches!(
        err.kind(),
        Some(baton_core::ErrorKind::InvalidCall(_))
    ));
    assert_eq!(p.request_count(), 0);
    // The destination rules' reason is typed in the error's chain, as on every adapter.
    assert_eq!(
        testkit::in_chain::<baton_core::DestinationError>(&err),
        Some(&baton_core::DestinationError::Scheme("ftp".into())),
        "{err}"
    );
}

fn two(primary: &str, backup: &Provider) -> baton_tokio::Client {
    common::client(
        common::policy(&[("primary", primary), ("backup", &backup.url())])
            .configure(|s| s.attempt_header = Some("x-attempt".into())),
    )
    .0
}

#[tokio::test]
async fn host_header_follows_the_endpoint_only_when_it_named_the_original_host() {
    let backup = Provider::start(Behaviour::ok());
    let refused = testkit::refused_url();
    let original = refused.trim_start_matches("http://").to_string();
    let client = two(&refused, &backup);
    // Absent: reqwest sets the endpoint's own host.
    client.get("/").send().await.unwrap();
    // Equal to the original URL's host: follows the endpoint.
    client
        .get("/")
        .header("host", &original)
        .send()
        .await
        .unwrap();
    // Any other value is the caller's.
    client
        .get("/")
        .header("host", "virtual.example")
        .send()
        .await
        .unwrap();
    let backup_host = backup.url().trim_start_matches("http://").to_string();
    let hosts: Vec<String> = backup
        .requests()
        .iter()
        .map(|r| r.header("host").unwrap_or("").to_string())
        .collect();
    assert_eq!(
        hosts,
        [backup_host.clone(), backup_host, "virtual.example".into()]
    );
}

#[tokio::test]
async fn per_endpoint_credentials_never_reach_another_endpoint() {
    let primary = Provider::start(Behaviour::status(503));
    let backup = Provider::start(Behaviour::ok());
    let (client, _) = common::client(
        common::short()
            .endpoint(Endpoint::new("primary", primary.url()).header("authorization", "Bearer A"))
            .endpoint(Endpoint::new("backup", backup.url()).header("authorization", "Bearer B"))
            .endpoint(Endpoint::new("third", testkit::refused_url())),
    );
    let resp = client.get("/").bearer_auth("caller").send().await.unwrap();
    assert_eq!(resp.endpoint(), "backup");
    let p = &primary.requests()[0];
    let b = &backup.requests()[0];
    let auth = |r: &testkit::Request| {
        r.headers
            .iter()
            .filter(|(n, _)| n == "authorization")
            .map(|(_, v)| v.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(auth(p), ["Bearer A"]);
    assert_eq!(auth(b), ["Bearer B"]);
}

#[tokio::test]
async fn request_id_and_key_are_unchanged_on_every_attempt_and_the_attempt_number_counts() {
    let primary = Provider::builder()
        .then(Behaviour::reset())
        .then(Behaviour::status(503))
        .otherwise(Behaviour::ok())
        .start();
    let backup = Provider::start(Behaviour::ok());
    let client = two(&primary.url(), &backup);
    let resp = client
        .post("/")
        .header("x-request-id", "caller-chosen-id-1")
        .idempotency_key("pay-7")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.request_id(), "caller-chosen-id-1");
    let reqs = primary.requests();
    assert_eq!(reqs.len(), 3);
    for (i, r) in reqs.iter().enumerate() {
        assert_eq!(r.header("x-request-id"), Some("caller-chosen-id-1"));
        assert_eq!(r.header("idempotency-key"), Some("pay-7"));
        assert_eq!(r.header("x-attempt"), Some((i + 1).to_string().as_str()));
        assert_eq!(r.body, b"{}");
    }
    assert_eq!(backup.request_count(), 0);
}

#[tokio::test]
async fn generated_request_ids_differ_between_clients() {
    let p = Provider::start(Behaviour::ok());
    let (a, _) = common::client(common::policy(&[("a", &p.url())]));
    let (b, _) = common::client(common::policy(&[("a", &p.url())]));
    let ra = a.get("/").send().await.unwrap();
    let rb = b.get("/").send().await.unwrap();
    assert_ne!(ra.request_id(), rb.request_id(), "seeded from the OS");
    assert_eq!(
        p.requests()[0].header("x-request-id"),
        Some(ra.request_id())
    );
}

#[tokio::test]
async fn http_request_with_options_in_extensions() {
    let p = Provider::start(Behaviour::ok());
    let (client, _) = common::client(common::policy(&[("a", &p.url())]));
    let mut req = http::Request::post("/x")
        .header("content-type", "text/plain")
        .body("hello")
        .unwrap();
    req.extensions_mut().insert(baton_core::CallOptions {
        idempotency_key: Some("from-extensions".into()),
        ..Default::default()
    });
    let resp = client.execute(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let r = &p.requests()[0];
    assert_eq!(r.header("idempotency-key"), Some("from-extensions"));
    assert_eq!(r.body, b"hello");
}

#[tokio::test]
async fn reqwest_request_runs_through_baton() {
    let p = Provider::start(Behaviour::ok());
    let refused = testkit::refused_url();
    let (client, _) = common::client(common::policy(&[("a", &refused), ("b", &p.url())]));
    let req = reqwest::Client::new()
        .put(format!("{refused}/thing"))
        .body("data")
        .build()
        .unwrap();
    let resp = client
        .execute_reqwest(req, Default::default())
        .await
        .unwrap();
    assert_eq!(resp.endpoint(), "b");
    assert_eq!(p.requests()[0].method, "PUT");
}
