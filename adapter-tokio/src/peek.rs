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

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;

/// A body read whole before the engine decided, kept in the response's extensions.
#[derive(Debug, Clone)]
pub(crate) struct Peeked(pub(crate) Bytes);

/// Whether `response` is an event stream (`text/event-stream`): its body ends only when
/// the stream does, so it is never read ahead. Read ahead, a stream quieter than the limit
/// held its own opening until the attempt timer fired, and reconnected forever.
fn is_event_stream(response: &reqwest::Response) -> bool {
    let content_type = response.headers().get(http::header::CONTENT_TYPE);
    let essence = content_type.and_then(|v| v.to_str().ok()).map(|v| {
        let essence = v.split(';').next().unwrap_or_default();
        essence.trim().eq_ignore_ascii_case("text/event-stream")
    });
    essence.unwrap_or(false)
}

/// `response` with its body read when it is at most `limit` bytes (`limit` 0: as is). A
/// failure reading the body is the send's failure.
pub(crate) async fn body(
    response: reqwest::Response,
    limit: usize,
) -> Result<reqwest::Response, reqwest::Error> {
    if limit == 0
        || response.content_length().is_some_and(|n| n > limit as u64)
        || is_event_stream(&response)
    {
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
        reqwest::Body::wrap(crate::body::Prefixed::new(read, body))
    };
    Ok(reqwest::Response::from(http::Response::from_parts(
        parts, body,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A body in chunks, of no stated length (chunked transfer coding).
    struct Chunks(VecDeque<Bytes>);

    impl http_body::Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
        }
    }

    fn response(chunks: &[&'static str]) -> reqwest::Response {
        let body = Chunks(
            chunks
                .iter()
                .map(|c| Bytes::from_static(c.as_bytes()))
                .collect(),
        );
        http::Response::new(reqwest::Body::wrap(body)).into()
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_kept_and_a_longer_one_reaches_the_caller_whole() {
        let r = body(response(&["0123", "4567"]), 16).await.unwrap();
        let peeked = r.extensions().get::<Peeked>().map(|p| p.0.clone());
        assert_eq!(peeked.as_deref(), Some(&b"01234567"[..]));
        assert_eq!(r.bytes().await.unwrap(), "01234567");
        // Past the limit: not kept; the bytes read ahead, then the rest.
        let r = body(response(&["0123456789", "abcdefghij", "klm"]), 16)
            .await
            .unwrap();
        assert!(r.extensions().get::<Peeked>().is_none());
        assert_eq!(r.bytes().await.unwrap(), "0123456789abcdefghijklm");
        // Limit 0: untouched.
        let r = body(response(&["x"]), 0).await.unwrap();
        assert!(r.extensions().get::<Peeked>().is_none());
    }
}
