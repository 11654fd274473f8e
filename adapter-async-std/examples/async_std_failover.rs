//! A keyed POST through baton-async-std, once on async-std's executor and once on smol's:
//! the primary refuses the connection (nothing was sent there), so the call fails over to
//! the backup, and the report says where it went. Runs offline against local providers:
//! `cargo run -p baton-async-std --example async_std_failover`.

use baton_async_std::Client;
use baton_core::{Endpoint, Policy, PolicyBuilder, UrlMode};
use testkit::{Behaviour, Provider};

async fn charge(client: &Client) -> Result<String, baton_async_std::Error> {
    let response = client
        .post("/charges")
        .idempotency_key("order-42")
        .body("{\"amount\": 100}")
        .send()
        .await?;
    let line = format!(
        "{} from {} after {} attempt(s); may have executed: {}",
        response.status(),
        response.endpoint(),
        response.report().attempts.len(),
        response.may_have_executed()
    );
    Ok(format!("{line}; body: {}", response.text().await?))
}

/// A primary that refuses connections, then `backup`, as base URLs (the request's path,
/// "/charges", is appended to the endpoint's); proxies from the environment are ignored
/// (the providers are local).
fn failover(backup: &Provider) -> PolicyBuilder {
    Policy::builder()
        .endpoint(Endpoint::new("primary", testkit::refused_url()))
        .endpoint(Endpoint::new("backup", backup.url()))
        .url_mode(UrlMode::Base)
        .configure(|s| s.env_proxies = false)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backup = Provider::start(Behaviour::ok().body("charged"));
    // One client serves both runtimes: it holds no runtime of its own.
    let client = Client::new(failover(&backup))?;
    println!("async-std: {}", async_std::task::block_on(charge(&client))?);
    println!("smol:      {}", smol::block_on(charge(&client))?);
    Ok(())
}
