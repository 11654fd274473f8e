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

/// SPEC 7: a call deadline bounds each connection's call, not the stream's body, on every
/// runtime: a feed slower than the deadline is read on one connection. Before, the
/// blocking runtime's ureq global timeout cut the body at the deadline and reconnected.
#[test]
fn a_call_deadline_does_not_cut_a_stream_body_on_any_runtime() {
    use std::time::Duration;
    use testkit::sse::EventServer;
    const FEED: usize = 6;
    let policy = |url: String| {
        let settings = baton_core::Settings {
            deadline: Some(Duration::from_millis(150)),
            ..Default::default()
        };
        baton_core::Policy::builder()
            .settings(settings)
            .endpoint(baton_core::Endpoint::new("a", url))
    };
    let server = || {
        EventServer::builder("a", FEED)
            .interval(Duration::from_millis(60))
            .start()
    };
    let settings = baton_core::sse::StreamSettings::default;
    let check = |runtime: &str, server: &EventServer, events: usize| {
        assert_eq!(events, FEED, "{runtime}");
        assert_eq!(server.seen().len(), 1, "{runtime}: the body was cut");
    };
    // blocking
    let s = server();
    let client = baton_blocking::Client::new(policy(s.url())).expect("client");
    let events = client.get("/feed").events(settings());
    check(
        "blocking",
        &s,
        events.take(FEED).filter(|e| e.is_ok()).count(),
    );
    // tokio
    let s = server();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let n = runtime.block_on(async {
        let client = baton_tokio::Client::new(policy(s.url())).expect("client");
        let mut events = client.get("/feed").events(settings());
        let mut n = 0;
        while n < FEED && matches!(events.next().await, Some(Ok(_))) {
            n += 1;
        }
        n
    });
    check("tokio", &s, n);
    // async-std
    let s = server();
    let n = async_std::task::block_on(async {
        let client = baton_async_std::Client::new(policy(s.url())).expect("client");
        let mut events = client.get("/feed").events(settings());
        let mut n = 0;
        while n < FEED && matches!(events.next().await, Some(Ok(_))) {
            n += 1;
        }
        n
    });
    check("async-std", &s, n);
}
