//! The byte stream under one HTTP/1.1 connection, and the bridge to hyper's I/O traits.
//!
//! A connection is a non-blocking TCP socket registered with `async-io`'s reactor (so it
//! works under async-std and smol alike), optionally wrapped in a `futures-rustls` client
//! session. hyper 1.x reads and writes through its own `hyper::rt::{Read, Write}` traits;
//! [`Io`] implements them over the `futures-io` traits without `unsafe`: reads land in a
//! scratch buffer owned by the connection and are copied into hyper's buffer with the safe
//! `put_slice` (one copy of at most 16 KiB per read, negligible next to a system call).

use std::io;
use std::net::TcpStream;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use async_io::Async;
use futures_io::{AsyncRead, AsyncWrite};
use hyper::rt::ReadBufCursor;

/// Size of the per-connection read scratch buffer.
const SCRATCH: usize = 16 * 1024;

/// A plain or TLS stream over a reactor-registered TCP socket.
pub(crate) enum Stream {
    /// Plain TCP.
    Plain(Async<TcpStream>),
    /// TLS over TCP (boxed: a client session is large).
    Tls(Box<futures_rustls::client::TlsStream<Async<TcpStream>>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

/// hyper's view of a [`Stream`].
pub(crate) struct Io {
    stream: Stream,
    scratch: Box<[u8]>,
}

impl Io {
    pub(crate) fn new(stream: Stream) -> Self {
        Io {
            stream,
            scratch: vec![0; SCRATCH].into_boxed_slice(),
        }
    }
}

impl hyper::rt::Read for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let want = buf.remaining().min(this.scratch.len());
        if want == 0 {
            return Poll::Ready(Ok(()));
        }
        let n = ready!(Pin::new(&mut this.stream).poll_read(cx, &mut this.scratch[..want]))?;
        buf.put_slice(&this.scratch[..n]);
        Poll::Ready(Ok(()))
    }
}

impl hyper::rt::Write for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        // Plain sockets use writev; rustls copies into its own records anyway, so hyper
        // flattening the head and body into one buffer is cheaper there.
        matches!(self.stream, Stream::Plain(_))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_close(cx)
    }
}
