//! The SSE parser over random streams split at random chunk boundaries yields the same
//! events, last event ID and reconnection time as over the whole input.

use baton_core::sse::{Event, Parser};
use proptest::prelude::*;

/// Pieces a stream is made of: fields, comments, blank lines, every line end, a BOM,
/// NULs, multi-byte characters, and stray bytes.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"data: x".to_vec()),
        Just(b"data:y".to_vec()),
        Just(b"data".to_vec()),
        Just(b"event: tick".to_vec()),
        Just(b"id: 42".to_vec()),
        Just(b"id".to_vec()),
        Just(b"id: a\0b".to_vec()),
        Just(b"retry: 250".to_vec()),
        Just(b"retry: 2x".to_vec()),
        Just(b": comment".to_vec()),
        Just("data: caf\u{e9} \u{1F600}".as_bytes().to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n\n".to_vec()),
        prop::collection::vec(any::<u8>(), 0..6),
    ]
}

fn whole(input: &[u8]) -> (Vec<Event>, String, Option<std::time::Duration>) {
    let mut p = Parser::new();
    let mut out = Vec::new();
    p.feed(input, &mut out).unwrap();
    (out, p.last_event_id().to_string(), p.retry())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_chunking_gives_the_same_events(
        pieces in prop::collection::vec(piece(), 0..40),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let input: Vec<u8> = pieces.concat();
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
        at.sort_unstable();
        let mut p = Parser::new();
        let mut out = Vec::new();
        let mut from = 0;
        for &to in at.iter().chain(std::iter::once(&input.len())) {
            p.feed(&input[from..to], &mut out).unwrap();
            from = to;
        }
        let (events, id, retry) = whole(&input);
        prop_assert_eq!(out, events);
        prop_assert_eq!(p.last_event_id(), id.as_str());
        prop_assert_eq!(p.retry(), retry);
    }

    #[test]
    fn byte_by_byte_is_the_same_as_whole(pieces in prop::collection::vec(piece(), 0..30)) {
        let input: Vec<u8> = pieces.concat();
        let mut p = Parser::new();
        let mut out = Vec::new();
        for b in &input {
            p.feed(std::slice::from_ref(b), &mut out).unwrap();
        }
        prop_assert_eq!(out, whole(&input).0);
    }
}
