//! Credentials on async-std and smol (SPEC 9): each send of an attempt to an endpoint with
//! a credential slot carries its token (to its own origin only); a refusal of the current
//! token invalidates it and the request is sent once more with a refreshed one when a
//! spare copy of it exists (a body of bytes, or none).

use std::sync::Arc;
use std::time::Instant;

use baton_core::credential::{Credential, Lease};
use http::HeaderMap;

use crate::attempt::{self, AttemptCtx, AttemptEnd};
use crate::body::OutBody;
use crate::classify::{Phase, TransportError};
use crate::Inner;

/// The client's token provider: called with the endpoint id by the one call that
/// refreshes that endpoint's slot.
pub(crate) type TokenProvider = baton_core::credential::AsyncProvider;

fn set(headers: &mut HeaderMap, slot: &Credential, lease: &Lease) {
    let s = slot.settings();
    if let Some(v) = lease.header_value(s) {
        headers.insert(s.header.clone(), v);
    }
}

/// Runs one send of an attempt, with the endpoint's token when it has a credential slot
/// (`spare`: a copy of the request for the one re-send after a refusal).
pub(crate) async fn run(
    inner: Arc<Inner>,
    ctx: AttemptCtx,
    mut req: http::Request<OutBody>,
    spare: Option<http::Request<OutBody>>,
) -> AttemptEnd {
    let slot = inner.engine.credential(ctx.route.endpoint);
    let ep = inner.engine.policy().endpoints().get(ctx.route.endpoint);
    let (Some(slot), Some(tokens), Some(ep)) = (slot, &inner.tokens, ep) else {
        return attempt::run(ctx, req).await;
    };
    // The provider gets the attempt's time; past it, a valid token, or nothing is sent.
    // Counted from the attempt's start here: a token lease and a re-send after a refusal
    // stay within the attempt's time as the engine counts it (not plus its connect time).
    let respond_by = ctx.respond_by(ctx.start);
    let lease = || {
        let deadline = async move {
            async_io::Timer::at(respond_by).await;
        };
        slot.lease_until(Instant::now, || tokens(ep.id()), deadline)
    };
    let first = match lease().await {
        Ok(l) => l,
        Err(e) => {
            let id = ctx.route.endpoint_id.clone();
            return AttemptEnd::Failed(TransportError::new(
                id,
                ctx.number,
                Phase::NotSent,
                false,
                Box::new(e),
            ));
        }
    };
    set(req.headers_mut(), slot, &first);
    let again = AttemptCtx {
        start: ctx.start,
        ..ctx.clone()
    };
    let end = attempt::run(ctx, req).await;
    let AttemptEnd::Response(ex) = &end else {
        return end;
    };
    // Called whatever the spare: a refusal invalidates the token either way.
    let resend = slot.answered(&first, ex.head.status);
    let Some(mut spare) = spare.filter(|_| resend) else {
        return end;
    };
    let Ok(second) = lease().await else {
        return end;
    };
    let now = Instant::now();
    let left = respond_by.saturating_duration_since(now);
    // The attempt's time ran out (its connect took it): the refusal is the answer.
    if left.is_zero() {
        return end;
    }
    drop(end);
    set(spare.headers_mut(), slot, &second);
    let ctx = AttemptCtx {
        start: now,
        timeout: left,
        connect_timeout: again.connect_timeout.min(left),
        ends_by: Some(respond_by),
        ..again
    };
    let resent = attempt::run(ctx, spare).await;
    // A refused fresh token is invalidated too (no third send): the next call refreshes.
    if let AttemptEnd::Response(ex) = &resent {
        slot.answered(&second, ex.head.status);
    }
    resent
}

/// A copy of `req` with a body of bytes (or none) for the re-send after a refusal; `None`
/// for other bodies, which a refusal then answers.
pub(crate) fn spare(req: &http::Request<OutBody>) -> Option<http::Request<OutBody>> {
    let body = req.body().try_clone()?;
    let mut copy = http::Request::new(body);
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    Some(copy)
}
