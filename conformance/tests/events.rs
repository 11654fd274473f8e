//! The event-stream fault run (`conformance::events`) on every runtime: every scenario's
//! events delivered once and in order, ids only where they belong, unsafe streams never
//! re-sent blind; how long each fault took to heal is printed (`--nocapture`).

use conformance::events::{specs, Healing, Run};

fn report(runtime: &str, results: Vec<Result<Healing, String>>) {
    let mut all = Healing::default();
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok(h) => all.gaps.extend(h.gaps),
            Err(e) => failures.push(e),
        }
    }
    eprintln!("{runtime}: {}", all.summary());
    // Beyond the waits it chose, a fault costs a reconnection (loopback connect, the
    // server's 5 ms before its first event): never a hidden wait.
    let worst = all
        .gaps
        .iter()
        .map(|g| g.0.saturating_sub(g.1))
        .max()
        .unwrap_or_default();
    assert!(
        worst < std::time::Duration::from_millis(500),
        "{runtime}: a fault took {worst:?} beyond its waits"
    );
    assert!(failures.is_empty(), "{runtime}:\n{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_event_streams_survive_every_fault() {
    let mut results = Vec::new();
    for spec in specs() {
        let mut run: Run = spec.start();
        let client = baton_tokio::Client::new(run.policy()).expect("client");
        let mut req = client.request(run.method(), "/feed");
        if let Some(body) = run.body() {
            req = req.body(body);
        }
        let mut events = req.events(run.settings()).on_notice(run.notice_sink());
        while run.record(events.next().await) {}
        results.push(run.finish());
    }
    report("tokio", results);
}

#[test]
fn blocking_event_streams_survive_every_fault() {
    let mut results = Vec::new();
    for spec in specs() {
        let mut run: Run = spec.start();
        let client = baton_blocking::Client::new(run.policy()).expect("client");
        let body = run.body().map(|b| b.as_bytes().to_vec());
        let mut events = client
            .request(run.method(), "/feed")
            .events_with_body(body, run.settings())
            .on_notice(run.notice_sink());
        while run.record(events.next()) {}
        results.push(run.finish());
    }
    report("blocking", results);
}

async fn async_std_style(spec: &conformance::events::Spec) -> Result<Healing, String> {
    let mut run: Run = spec.start();
    let client = baton_async_std::Client::new(run.policy()).expect("client");
    let mut req = client.request(run.method(), "/feed");
    if let Some(body) = run.body() {
        req = req.body(body);
    }
    let mut events = req.events(run.settings()).on_notice(run.notice_sink());
    while run.record(events.next().await) {}
    run.finish()
}

#[test]
fn async_std_event_streams_survive_every_fault() {
    let results = specs()
        .iter()
        .map(|s| async_std::task::block_on(async_std_style(s)))
        .collect();
    report("async-std", results);
}

#[test]
fn smol_event_streams_survive_every_fault() {
    let results = specs()
        .iter()
        .map(|s| smol::block_on(async_std_style(s)))
        .collect();
    report("smol", results);
}
