//! The healthy call that the `healthy_calls` and `healthy_floor` examples run: three
//! endpoints, a GET, `Call::new`, a poll that sends the first attempt, a 200 response at
//! `t`, the poll that says done and `take_done`.

use baton_core::{Action, BodyKind, Call, CallOptions, Engine, Head, Input, RequestInfo};
use std::time::Instant;

/// One healthy call at time `t`; true when it was answered.
#[inline(never)]
pub fn healthy_call(engine: &Engine, info: &RequestInfo<'_>, t: Instant) -> bool {
    let mut call = Call::new(engine, info, BodyKind::Empty, CallOptions::default(), t);
    let Action::Send(a) = call.poll() else {
        return false;
    };
    let response = Head::new(http::StatusCode::OK);
    call.handle(
        Input::Response {
            attempt: a.number,
            response,
            wall: None,
        },
        t,
    );
    let done = call.poll() == Action::Done;
    // Seen where it was written, as the floor's result is: passed by value, the result
    // would be copied once more only to be seen.
    let result = call.take_done();
    std::hint::black_box(&result);
    done
}
