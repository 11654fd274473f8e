//! Times 3,000 sequential GETs of one contender alone in a fresh process, against its own
//! loopback provider: `baton` (a baton-blocking `Client`), `agent` (that client's own ureq
//! agent, with the phase-observing connector and resolver, used directly) or `plain` (a
//! stock `ureq::Agent` with the same configuration). Run each in turn to compare costs
//! without the contenders sharing a provider or a process:
//!
//! ```text
//! cargo build --release -p baton-blocking --example isolated_calls
//! for w in baton agent plain; do target/release/examples/isolated_calls $w; done
//! ```

use baton_blocking::Client;
use baton_core::{Endpoint, Policy};
use testkit::{Behaviour, Provider};

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "plain".into());
    let provider = Provider::start(Behaviour::ok());
    provider.set_recording(false);
    let url = format!("{}/", provider.url());
    let config = ureq::Agent::config_builder()
        .proxy(None)
        .http_status_as_error(false)
        .build();
    let client = Client::builder(Policy::builder().endpoint(Endpoint::new("a", url.clone())))
        .config(config.clone())
        .build()
        .expect("client");
    let agent = client.agent().clone();
    let plain: ureq::Agent = config.into();
    let calls = 3_000;
    let start = std::time::Instant::now();
    for _ in 0..calls {
        let body = match which.as_str() {
            "baton" => client
                .get("/")
                .call()
                .map(|mut r| r.body_mut().read_to_string().ok())
                .map_err(|e| e.to_string()),
            "agent" => agent
                .get(&url)
                .call()
                .map(|mut r| r.body_mut().read_to_string().ok())
                .map_err(|e| e.to_string()),
            _ => plain
                .get(&url)
                .call()
                .map(|mut r| r.body_mut().read_to_string().ok())
                .map_err(|e| e.to_string()),
        };
        assert_eq!(
            body.as_ref().ok().and_then(|b| b.as_deref()),
            Some("ok"),
            "{which}: {body:?}"
        );
    }
    let took = start.elapsed();
    println!(
        "{which}: {calls} calls in {took:?} ({:.0} calls/s)",
        calls as f64 / took.as_secs_f64()
    );
}
