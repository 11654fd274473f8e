//! A call's identity header values cost one allocation each per call, whatever the number of
//! attempts: every attempt's copy (`apply_attempt_headers`, which redirect hops use too)
//! shares the value's buffer (issue 18: one request-id header value per call). Counted with
//! a counting global allocator, so this file is a test binary of its own with a single test
//! (no other test allocates meanwhile).

use std::alloc::System;

use baton_core::{apply_attempt_headers, Endpoint, IdentityHeaders, Policy};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn identity_values_are_made_once_and_shared_by_every_attempt() {
    let policy = Policy::builder()
        .endpoint(Endpoint::new("a", "https://a.example/"))
        .build()
        .unwrap();
    let id = "01JD5Q7ZK3M8N2P4R6T8V0W2XY"; // a generated id's length (26)
    let long_key = "k".repeat(100); // past the inline buffer: still one shared value
    for (key, made) in [
        (None, 1),
        (Some("order-4711-attempt-key"), 2),
        (Some(&*long_key), 3),
    ] {
        let region = Region::new(GLOBAL);
        let identity = IdentityHeaders::new(&policy, id, key).unwrap();
        let after_new = region.change().allocations;
        let copies: Vec<_> = (0..5)
            .map(|_| {
                (
                    identity.request_id().clone(),
                    identity.idempotency_key().cloned(),
                )
            })
            .collect();
        let after_copies = region.change().allocations;
        // The long key: its bytes and their shared buffer.
        assert_eq!(after_new, made, "making the values (key {key:?})");
        // The Vec of copies is the one allocation copying adds: the values share.
        assert_eq!(after_copies - after_new, 1, "five copies (key {key:?})");
        assert!(copies
            .iter()
            .all(|(v, k)| v == id && k.as_ref().map(|k| k.as_bytes()) == key.map(str::as_bytes)));
        // Every attempt's headers, as the adapters build them: after the first (which may
        // copy the header names into their shared form), the values are shared, not made.
        let uri: http::Uri = "/".parse().unwrap();
        let mut headers = http::HeaderMap::with_capacity(16);
        apply_attempt_headers(&policy, 0, &uri, &identity, 1, &mut headers).unwrap();
        let region = Region::new(GLOBAL);
        for attempt in 2..=6 {
            apply_attempt_headers(&policy, 0, &uri, &identity, attempt, &mut headers).unwrap();
        }
        assert_eq!(
            region.change().allocations,
            0,
            "five attempts (key {key:?})"
        );
        assert_eq!(headers["x-request-id"], id);
    }
}
