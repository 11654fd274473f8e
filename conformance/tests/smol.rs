//! Every vector through baton-async-std under smol's executor, against real loopback
//! providers.

#[path = "common/async_io.rs"]
mod async_io;

use conformance::real::Tally;
use conformance::vectors;

#[test]
fn every_vector_passes_on_smol() {
    let all = vectors();
    let mut tally = Tally::new("smol");
    tally.run_all(&all, |sc| {
        smol::block_on(async_io::run(sc, |d| async move {
            smol::Timer::after(d).await;
        }))
    });
    tally.finish();
}
