//! Every vector through baton-blocking (ureq, on the calling thread) against real
//! loopback providers.

use std::io::Read;

use baton_blocking::ResponseExt;
use conformance::real::{Scenario, Tally, BODY_TIMEOUT};
use conformance::{vectors, Observed};

fn run(sc: &Scenario) -> Result<Vec<Observed>, String> {
    // A stalled body must not stall the runner: ureq's body timeout is kept by the adapter.
    let config = ureq::Agent::config_builder()
        .timeout_recv_body(Some(BODY_TIMEOUT))
        .build();
    let client = baton_blocking::Client::builder(sc.policy()?)
        .config(config)
        .build()
        .map_err(|e| format!("build: {e}"))?;
    let mut out = Vec::new();
    for (k, c) in sc.vector.calls.iter().enumerate() {
        if let Some(w) = c.wait_before {
            std::thread::sleep(w);
        }
        let mark = sc.begin(k);
        let mut req = client
            .request(c.http_method()?, &c.path)
            .options(c.options());
        for (name, value) in &c.headers {
            req = req.header(name, value);
        }
        let result = match &c.body {
            None => req.call(),
            Some(body) if c.one_shot => req.send_reader(std::io::Cursor::new(body.clone())),
            Some(body) => req.send(body.clone()),
        };
        let o = match result {
            Ok(mut resp) => {
                let report = resp.report().cloned().ok_or("response without a report")?;
                let mut buf = Vec::new();
                let body = resp.body_mut().as_reader().read_to_end(&mut buf);
                sc.observe(&mark, &report, Some(body.is_err()))
            }
            Err(e) => sc.observe(&mark, e.report(), None),
        };
        out.push(o);
    }
    Ok(out)
}

#[test]
fn every_vector_passes_on_blocking() {
    let all = vectors();
    let mut tally = Tally::new("blocking");
    tally.run_all(&all, run);
    tally.finish();
}
