//! A keyed POST through baton-blocking: the primary refuses the connection (nothing was
//! sent there), so the call fails over to the backup, and the report says where it went.
//! Runs offline against local providers: `cargo run -p baton-blocking --example blocking_failover`.

use baton_blocking::{Client, Endpoint, Policy, ResponseExt, UrlMode};
use testkit::{Behaviour, Provider};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backup = Provider::start(Behaviour::ok().body("charged"));
    // Tried in order. A refused connection proves nothing was sent, so even this POST may
    // go on to the backup; proxies from the environment are ignored (the providers are
    // local).
    let policy = Policy::builder()
        .endpoint(Endpoint::new("primary", testkit::refused_url()))
        .endpoint(Endpoint::new("backup", backup.url()))
        // Base URLs: the request's path ("/charges") is appended to the endpoint's.
        .url_mode(UrlMode::Base)
        .configure(|s| s.env_proxies = false);
    let client = Client::new(policy)?;
    let mut response = client
        .post("/charges")
        .idempotency_key("order-42")
        .send("{\"amount\": 100}")?;
    println!(
        "{} from {:?} after {} attempt(s); may have executed: {:?}",
        response.status(),
        response.endpoint(),
        response.report().map_or(0, |r| r.attempts.len()),
        response.may_have_executed()
    );
    println!("body: {}", response.body_mut().read_to_string()?);
    Ok(())
}
