//! A keyed JSON POST through baton-tokio: the primary refuses the connection (nothing was sent
//! there), so the call fails over to the backup, and the report says where it went. Runs
//! offline against local providers: `cargo run -p baton-tokio --example tokio_failover`.

use baton_tokio::{Client, Endpoint, Policy, UrlMode};
use testkit::{Behaviour, Provider};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backup = Provider::start(Behaviour::ok().body("charged"));
    let client = Client::new(
        Policy::builder()
            .endpoint(Endpoint::new("primary", testkit::refused_url()))
            .endpoint(Endpoint::new("backup", backup.url()))
            // Base URLs: the request's path ("/charges") is appended to the endpoint's.
            .url_mode(UrlMode::Base)
            .configure(|s| s.env_proxies = false),
    )?;
    let response = client
        .post("/charges")
        .idempotency_key("order-42")
        .json(&serde_json::json!({ "amount": 100 }))
        .send()
        .await?;
    println!(
        "{} from {} after {} attempt(s); may have executed: {}",
        response.status(),
        response.endpoint(),
        response.report().attempts.len(),
        response.may_have_executed()
    );
    println!("body: {}", response.text().await?);
    Ok(())
}
