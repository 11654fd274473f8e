//! Reading a short body before the engine decides (`Settings::classify_body`): JSON-RPC
//! providers report outages as errors inside a 200's body, so a classifier that tells an
//! outage from an answer must see it.
//!
//! The body is read inside the attempt's send, so under the attempt's timer: a provider
//! that sends the head and stalls the body times the attempt out (ambiguous, as any
//! failure after the request was written). A body that ends within the limit is kept
//! whole ([`Peeked`], in the response's extensions) and the response handed on reads it
//! from memory; a longer one is handed on unread past the limit (the bytes read so far
//! first, then the rest from the connection), and the classifier sees no body.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

/// A body read whole before the engine decided, kept in the response's extensions.
#[derive(Debug, Clone)]
pub(crate) struct Peeked(pub(crate) Bytes);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `response` with its body read when it is at most `limit` bytes (`limit` 0: as is). A
/// failure reading the body is the send's failure.
pub(crate) async fn body(
    response: reqwest::Response,
    limit: usize,
) -> Result<reqwest::Response, reqwest::Error> {
    if limit == 0 || response.content_length().is_some_and(|n| n > limit as u64) {
        return Ok(response);
    }
    let url = response.url().clone();
    let (mut parts, mut body) = http::Response::from(response).into_parts();
    let mut read = BytesMut::new();
    let whole = loop {
        match body.frame().await {
            None => break true,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    read.extend_from_slice(&data);
                }
                if read.len() > limit {
                    break false;
                }
            }
            // reqwest's body error is a reqwest::Error already.
            Some(Err(e)) => return Err(e),
        }
    };
    let read = read.freeze();
    // The response URL travels in an extension reqwest sets from its builder.
    let located = {
        use reqwest::ResponseBuilderExt;
        http::Response::builder()
            .url(url)
            .body(())
            .unwrap_or_default()
    };
    parts.extensions.extend(located.into_parts().0.extensions);
    let body = if whole {
        parts.extensions.insert(Peeked(read.clone()));
        reqwest::Body::from(read)
    } else {
        reqwest::Body::wrap(Prefixed {
            first: Some(read),
            rest: body,
        })
    };
    Ok(reqwest::Response::from(http::Response::from_parts(
        parts, body,
    )))
}

/// The bytes already read, then the rest of the body.
struct Prefixed {
    first: Option<Bytes>,
    rest: reqwest::Body,
}

impl Body for Prefixed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        Pin::new(&mut self.rest)
            .poll_frame(cx)
            .map_err(|e| Box::new(e) as BoxError)
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let extra = self.first.as_ref().map_or(0, |b| b.len() as u64);
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + extra);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + extra);
        }
        hint
    }
}
