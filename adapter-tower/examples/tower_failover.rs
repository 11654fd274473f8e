//! A keyed POST through the baton tower layer in front of hyper-util's `Client`: the
//! primary refuses the connection (nothing was sent there), so the call fails over to the
//! backup, and the report in the response's extensions says where it went. Runs offline
//! against local providers: `cargo run -p baton-tower --example tower_failover`.

use std::time::Duration;

use baton_core::{CallOptions, Endpoint, Policy, Report, UrlMode};
use baton_tower::{BatonLayer, ReplayBody};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use testkit::{Behaviour, Provider};
use tower_layer::Layer;
use tower_service::Service;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backup = Provider::start(Behaviour::ok().body("charged"));
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_secs(2)));
    let client: Client<_, ReplayBody<Full<Bytes>>> =
        Client::builder(TokioExecutor::new()).build(connector);
    let layer = BatonLayer::new(
        Policy::builder()
            .endpoint(Endpoint::new("primary", testkit::refused_url()))
            .endpoint(Endpoint::new("backup", backup.url()))
            // Base URLs: the request's path ("/charges") is appended to the endpoint's.
            .url_mode(UrlMode::Base),
    )?;
    let mut service = layer.layer(client);

    let mut request =
        http::Request::post("/charges").body(Full::new(Bytes::from("{\"amount\": 100}")))?;
    request.extensions_mut().insert(CallOptions {
        idempotency_key: Some("order-42".into()),
        ..CallOptions::default()
    });
    let response = service.call(request).await?;
    let report = response
        .extensions()
        .get::<Report>()
        .cloned()
        .ok_or("no report")?;
    println!(
        "{} from {} after {} attempt(s); may have executed: {}",
        response.status(),
        report.result_endpoint().unwrap_or("?"),
        report.attempts.len(),
        report.may_have_executed
    );
    let body = response.into_body().collect().await?.to_bytes();
    println!("body: {}", String::from_utf8_lossy(&body));
    Ok(())
}
