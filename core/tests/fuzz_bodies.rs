//! The cargo-fuzz target bodies, run on stable over a few thousand random inputs each, so
//! they keep compiling and keep passing where no nightly toolchain exists.

use std::time::Instant;

use baton_core::fuzzing;

/// Deterministic pseudo-random byte strings of varied length.
fn inputs(seed: u64, count: usize, max_len: usize) -> impl Iterator<Item = Vec<u8>> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    (0..count).map(move |_| {
        let len = (next() as usize) % max_len;
        (0..len).map(|_| next() as u8).collect()
    })
}

#[test]
fn fuzz_call_sequence_bodies_hold_on_random_inputs() {
    for data in inputs(1, 3_000, 600) {
        fuzzing::call_sequence(&data, Instant::now());
    }
}

#[test]
fn fuzz_shared_health_bodies_hold_on_random_inputs() {
    for data in inputs(2, 2_000, 1_200) {
        fuzzing::shared_health(&data, Instant::now());
    }
}

#[test]
fn fuzz_retry_after_bodies_hold_on_random_inputs() {
    for data in inputs(3, 5_000, 40) {
        fuzzing::retry_after(&data);
    }
    for text in [
        &b"Wed, 21 Oct 2015 07:28:00 GMT"[..],
        b"Sun, 06 Nov 1994 08:49:37 GMT",
        b"Sunday, 06-Nov-94 08:49:37 GMT",
        b"Sun Nov  6 08:49:37 1994",
        b"99999999999999999999999",
        b"0",
        b" 12 ",
    ] {
        fuzzing::retry_after(text);
    }
}

#[test]
fn fuzz_config_bodies_hold_on_random_inputs() {
    for data in inputs(4, 3_000, 800) {
        fuzzing::config(&data, Instant::now());
    }
}
