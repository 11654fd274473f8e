//! Every vector through baton-async-std under async-std's executor, against real loopback
//! providers.

#[path = "common/async_io.rs"]
mod async_io;

use conformance::real::Tally;
use conformance::vectors;

#[test]
fn every_vector_passes_on_async_std() {
    let all = vectors();
    let mut tally = Tally::new("async-std");
    tally.run_all(&all, |sc| {
        async_std::task::block_on(async_io::run(sc, async_std::task::sleep))
    });
    tally.finish();
}
