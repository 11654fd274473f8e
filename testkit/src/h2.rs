//! A fault-injecting HTTP/2 provider: h2c with prior knowledge on `127.0.0.1:0`, and over
//! TLS with ALPN `h2` behind a [`TlsFront`](crate::TlsFront).
//!
//! It speaks the frames itself (RFC 9113: the connection preface, SETTINGS, HEADERS and
//! CONTINUATION with HPACK, DATA, WINDOW_UPDATE, PING, RST_STREAM, GOAWAY), so each fault
//! is exactly the protocol event it names:
//!
//! | behaviour | what the client gets | processed |
//! |---|---|---|
//! | [`H2Behaviour::status`] (`.header`, `.body`, `.delay`) | a response | yes |
//! | [`H2Behaviour::refuse_stream`] | `RST_STREAM(REFUSED_STREAM)` on the request's HEADERS | no |
//! | [`H2Behaviour::go_away_below`] | `GOAWAY` whose last stream id is the last stream processed before this one (below it), then the connection closes | no |
//! | [`H2Behaviour::go_away_at`] | the whole request is read, then `GOAWAY` whose last stream id is this stream, and the connection closes without an answer | yes |
//! | [`H2Behaviour::reset_after_request`] | the whole request is read, then `RST_STREAM(INTERNAL_ERROR)` | yes |
//! | [`H2Behaviour::black_hole`] | the whole request is read, never an answer | yes |
//!
//! A request is *processed* when its whole body arrived and the provider acted on it; the
//! provider counts and records only those ([`H2Provider::processed`],
//! [`H2Provider::requests`]). Behaviours follow the script per request number over all
//! connections (the number counts HEADERS as they arrive). Streams of one connection are
//! handled in the order their frames arrive, on the connection's thread (a delay holds
//! that connection's other streams). Response bodies up to 64 KiB (the default flow-
//! control window) are sent without waiting for WINDOW_UPDATE.
//!
//! [`H2ProviderBuilder::max_concurrent_streams`] advertises a stream limit;
//! [`H2Provider::shut_down_gracefully`] sends every connection a `GOAWAY` with the last
//! stream it has seen, finishes those streams, closes, and stops accepting.
//!
//! ```
//! use testkit::{H2Behaviour, H2Provider};
//! let p = H2Provider::builder()
//!     .then(H2Behaviour::refuse_stream())
//!     .otherwise(H2Behaviour::status(200).body("ok"))
//!     .start();
//! assert!(p.url().starts_with("http://127.0.0.1:"));
//! assert_eq!(p.processed(), 0);
//! ```

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::served::{lock, Served};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
const NO_ERROR: u32 = 0x0;
const INTERNAL_ERROR: u32 = 0x2;
const REFUSED_STREAM: u32 = 0x7;
const MAX_FRAME: usize = 16_384;

/// What the provider does with one request (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H2Behaviour {
    kind: Kind,
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    delay: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Answer,
    RefuseStream,
    GoAwayBelow,
    GoAwayAt,
    ResetAfterRequest,
    BlackHole,
}

impl H2Behaviour {
    fn of(kind: Kind) -> Self {
        H2Behaviour {
            kind,
            status: 200,
            headers: Vec::new(),
            body: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    /// Answer with `status` (no body unless [`body`](Self::body) gives one).
    pub fn status(status: u16) -> Self {
        H2Behaviour {
            status,
            ..Self::of(Kind::Answer)
        }
    }

    /// `200` with the body `ok`.
    pub fn ok() -> Self {
        Self::status(200).body("ok")
    }

    /// `RST_STREAM(REFUSED_STREAM)` on the HEADERS, before any processing.
    pub fn refuse_stream() -> Self {
        Self::of(Kind::RefuseStream)
    }

    /// `GOAWAY` below the request's stream, then close.
    pub fn go_away_below() -> Self {
        Self::of(Kind::GoAwayBelow)
    }

    /// The whole request, then `GOAWAY` at its stream, then close.
    pub fn go_away_at() -> Self {
        Self::of(Kind::GoAwayAt)
    }

    /// The whole request, then `RST_STREAM(INTERNAL_ERROR)`.
    pub fn reset_after_request() -> Self {
        Self::of(Kind::ResetAfterRequest)
    }

    /// The whole request, then nothing.
    pub fn black_hole() -> Self {
        Self::of(Kind::BlackHole)
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.to_string()));
        self
    }

    /// Sets the response body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Waits this long before acting (on the connection's thread).
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }

    /// Whether a request met with this behaviour counts as processed.
    pub fn processes(&self) -> bool {
        !matches!(self.kind, Kind::RefuseStream | Kind::GoAwayBelow)
    }
}

/// One processed request.
#[derive(Debug, Clone)]
pub struct H2Request {
    /// `:method`.
    pub method: String,
    /// `:path`.
    pub path: String,
    /// Every other header, in order (names lower-case).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// The stream id.
    pub stream: u32,
    /// The connection's number (1 for the first accepted).
    pub connection: u64,
}

impl H2Request {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Builds an [`H2Provider`].
#[derive(Debug)]
pub struct H2ProviderBuilder {
    script: Vec<H2Behaviour>,
    otherwise: Option<H2Behaviour>,
    max_concurrent_streams: Option<u32>,
    recording: bool,
}

impl Default for H2ProviderBuilder {
    fn default() -> Self {
        H2ProviderBuilder {
            script: Vec::new(),
            otherwise: None,
            max_concurrent_streams: None,
            recording: true,
        }
    }
}

impl H2ProviderBuilder {
    /// The next request number gets this behaviour.
    pub fn then(mut self, b: H2Behaviour) -> Self {
        self.script.push(b);
        self
    }

    /// The next `n` requests get this behaviour.
    pub fn then_n(mut self, n: usize, b: H2Behaviour) -> Self {
        self.script.extend(std::iter::repeat_n(b, n));
        self
    }

    /// Every request after the script (default [`H2Behaviour::ok`]).
    pub fn otherwise(mut self, b: H2Behaviour) -> Self {
        self.otherwise = Some(b);
        self
    }

    /// Whether processed requests are kept ([`H2Provider::requests`]; default on). Off,
    /// only their count is (for long benchmarks).
    pub fn recording(mut self, on: bool) -> Self {
        self.recording = on;
        self
    }

    /// Advertises `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub fn max_concurrent_streams(mut self, n: u32) -> Self {
        self.max_concurrent_streams = Some(n);
        self
    }

    /// Binds `127.0.0.1:0` and starts serving.
    ///
    /// # Panics
    /// If no port can be bound.
    pub fn start(self) -> H2Provider {
        let listener = TcpListener::bind((crate::pki::LOOPBACK, 0)).expect("testkit: bind h2");
        let addr = listener.local_addr().expect("testkit: local_addr");
        let shared = Arc::new(Shared {
            script: Mutex::new((self.script, 0)),
            otherwise: self.otherwise.unwrap_or_else(H2Behaviour::ok),
            max_concurrent_streams: self.max_concurrent_streams,
            requests: Mutex::new(Vec::new()),
            recording: self.recording,
            processed: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            graceful: AtomicBool::new(false),
            served: Served::default(),
        });
        let s = shared.clone();
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.served.stopping() || s.graceful.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let number = s.connections.fetch_add(1, Ordering::SeqCst) + 1;
                let s2 = s.clone();
                s.served.spawn(stream, move |stream| {
                    let _ = Conn::new(&s2, stream, number).and_then(|mut c| c.serve());
                });
            }
        });
        H2Provider {
            addr,
            shared,
            accept: Some(accept),
        }
    }
}

struct Shared {
    script: Mutex<(Vec<H2Behaviour>, usize)>,
    otherwise: H2Behaviour,
    max_concurrent_streams: Option<u32>,
    requests: Mutex<Vec<H2Request>>,
    recording: bool,
    processed: AtomicU64,
    connections: AtomicU64,
    graceful: AtomicBool,
    served: Served,
}

impl Shared {
    fn next_behaviour(&self) -> H2Behaviour {
        let mut script = lock(&self.script);
        let n = script.1;
        script.1 += 1;
        script
            .0
            .get(n)
            .cloned()
            .unwrap_or_else(|| self.otherwise.clone())
    }
}

/// An HTTP/2 provider on loopback (see the module docs).
pub struct H2Provider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for H2Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H2Provider")
            .field("addr", &self.addr)
            .finish()
    }
}

impl H2Provider {
    /// A builder.
    pub fn builder() -> H2ProviderBuilder {
        H2ProviderBuilder::default()
    }

    /// A provider that always behaves so.
    pub fn start(b: H2Behaviour) -> H2Provider {
        Self::builder().otherwise(b).start()
    }

    /// The address (h2c with prior knowledge).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests processed so far.
    pub fn processed(&self) -> usize {
        self.shared.processed.load(Ordering::SeqCst) as usize
    }

    /// The processed requests, in order.
    pub fn requests(&self) -> Vec<H2Request> {
        lock(&self.shared.requests).clone()
    }

    /// Processed requests carrying header `name` = `value`.
    pub fn count_with_header(&self, name: &str, value: &str) -> usize {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.header(name) == Some(value))
            .count()
    }

    /// Connections accepted so far.
    pub fn connection_count(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Sends every open connection a `GOAWAY` with the last stream it has seen, finishes
    /// those streams, closes them, and accepts no new connection.
    pub fn shut_down_gracefully(&self) {
        self.shared.graceful.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

impl Drop for H2Provider {
    fn drop(&mut self) {
        self.shared.served.stop(self.addr, self.accept.take());
    }
}

struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

#[derive(Default)]
struct Stream {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    behaviour: Option<H2Behaviour>,
}

struct Conn<'a> {
    shared: &'a Shared,
    sock: TcpStream,
    number: u64,
    buf: Vec<u8>,
    decoder: httlib_hpack::Decoder<'static>,
    encoder: httlib_hpack::Encoder<'static>,
    streams: HashMap<u32, Stream>,
    /// A header block in progress (HEADERS without END_HEADERS): its stream, flags, bytes.
    partial: Option<(u32, u8, Vec<u8>)>,
    last_processed: u32,
    last_seen: u32,
    going_away: bool,
}

enum Step {
    Continue,
    Close,
}

impl<'a> Conn<'a> {
    fn new(shared: &'a Shared, sock: TcpStream, number: u64) -> io::Result<Conn<'a>> {
        sock.set_nodelay(true)?;
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        Ok(Conn {
            shared,
            sock,
            number,
            buf: Vec::with_capacity(MAX_FRAME + 9),
            decoder: httlib_hpack::Decoder::default(),
            encoder: httlib_hpack::Encoder::default(),
            streams: HashMap::new(),
            partial: None,
            last_processed: 0,
            last_seen: 0,
            going_away: false,
        })
    }

    fn serve(&mut self) -> io::Result<()> {
        let mut settings = Vec::new();
        if let Some(n) = self.shared.max_concurrent_streams {
            settings.extend_from_slice(&0x3u16.to_be_bytes());
            settings.extend_from_slice(&n.to_be_bytes());
        }
        self.send(SETTINGS, 0, 0, &settings)?;
        while !self.fill(PREFACE.len())? {}
        if &self.buf[..PREFACE.len()] != PREFACE {
            return Ok(());
        }
        self.buf.drain(..PREFACE.len());
        loop {
            if self.shared.served.stopping() {
                return Ok(());
            }
            if self.shared.graceful.load(Ordering::SeqCst) && !self.going_away {
                self.going_away = true;
                let last = self.last_seen;
                self.go_away(last, NO_ERROR)?;
            }
            if self.going_away && self.streams.is_empty() {
                self.close();
                return Ok(());
            }
            let Some(frame) = self.next_frame()? else {
                continue;
            };
            if let Step::Close = self.on_frame(frame)? {
                self.close();
                return Ok(());
            }
        }
    }

    /// Closes the connection as a server does after its `GOAWAY`: the write side first,
    /// then what the client still sends (a body's `DATA` already on its way) is read and
    /// dropped until it closes too, for at most a second. Closing with unread bytes would
    /// make the kernel answer with a reset, which can discard the `GOAWAY` before the
    /// client reads it: the client would then see a reset, not the proof the frame gives.
    fn close(&mut self) {
        let _ = self.sock.shutdown(Shutdown::Write);
        let until = Instant::now() + Duration::from_secs(1);
        let mut chunk = [0u8; 16 * 1024];
        while Instant::now() < until && !self.shared.served.stopping() {
            match self.sock.read(&mut chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
        let _ = self.sock.shutdown(Shutdown::Both);
    }

    /// Reads until `n` bytes are buffered; a read timeout only re-checks the flags.
    fn fill(&mut self, n: usize) -> io::Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        while self.buf.len() < n {
            if self.shared.served.stopping() {
                return Err(io::ErrorKind::ConnectionAborted.into());
            }
            match self.sock.read(&mut chunk) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(false)
                }
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// The next whole frame, or `None` when the read timed out first.
    fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        if !self.fill(9)? {
            return Ok(None);
        }
        let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
        if !self.fill(9 + len)? {
            return Ok(None);
        }
        let head: Vec<u8> = self.buf.drain(..9).collect();
        let payload = self.buf.drain(..len).collect();
        Ok(Some(Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            payload,
        }))
    }

    fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> io::Result<()> {
        let len = (payload.len() as u32).to_be_bytes();
        let mut frame = Vec::with_capacity(9 + payload.len());
        frame.extend_from_slice(&len[1..]);
        frame.push(kind);
        frame.push(flags);
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.extend_from_slice(payload);
        self.sock.write_all(&frame)
    }

    fn go_away(&mut self, last: u32, code: u32) -> io::Result<()> {
        let mut p = last.to_be_bytes().to_vec();
        p.extend_from_slice(&code.to_be_bytes());
        self.send(GOAWAY, 0, 0, &p)
    }

    fn reset(&mut self, stream: u32, code: u32) -> io::Result<()> {
        self.send(RST_STREAM, 0, stream, &code.to_be_bytes())
    }

    fn on_frame(&mut self, f: Frame) -> io::Result<Step> {
        if let Some((stream, flags, mut block)) = self.partial.take() {
            if f.kind != CONTINUATION || f.stream != stream {
                return Ok(Step::Close);
            }
            block.extend_from_slice(&f.payload);
            if f.flags & END_HEADERS == 0 {
                self.partial = Some((stream, flags, block));
                return Ok(Step::Continue);
            }
            return self.on_headers(stream, flags, &block);
        }
        match f.kind {
            SETTINGS if f.flags & ACK == 0 => self.send(SETTINGS, ACK, 0, &[])?,
            PING if f.flags & ACK == 0 => self.send(PING, ACK, 0, &f.payload)?,
            GOAWAY => return Ok(Step::Close),
            RST_STREAM => {
                self.streams.remove(&f.stream);
            }
            HEADERS => {
                let block = header_block(&f);
                if f.flags & END_HEADERS == 0 {
                    self.partial = Some((f.stream, f.flags, block));
                    return Ok(Step::Continue);
                }
                return self.on_headers(f.stream, f.flags, &block);
            }
            DATA => return self.on_data(&f),
            _ => {}
        }
        Ok(Step::Continue)
    }

    fn on_headers(&mut self, id: u32, flags: u8, block: &[u8]) -> io::Result<Step> {
        let mut decoded = Vec::new();
        if self
            .decoder
            .decode(&mut block.to_vec(), &mut decoded)
            .is_err()
        {
            return Ok(Step::Close);
        }
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        let fields: Vec<(String, String)> = decoded
            .into_iter()
            .map(|(k, v, _)| (text(k), text(v)))
            .collect();
        if let Some(stream) = self.streams.get_mut(&id) {
            // Trailers end the stream.
            stream.headers.extend(fields);
            return self.end_of_request(id);
        }
        self.last_seen = self.last_seen.max(id);
        let behaviour = self.shared.next_behaviour();
        std::thread::sleep(behaviour.delay);
        match behaviour.kind {
            Kind::RefuseStream => {
                self.reset(id, REFUSED_STREAM)?;
                return Ok(Step::Continue);
            }
            Kind::GoAwayBelow => {
                let last = self.last_processed;
                self.go_away(last, NO_ERROR)?;
                return Ok(Step::Close);
            }
            _ => {}
        }
        self.streams.insert(
            id,
            Stream {
                headers: fields,
                body: Vec::new(),
                behaviour: Some(behaviour),
            },
        );
        if flags & END_STREAM != 0 {
            return self.end_of_request(id);
        }
        Ok(Step::Continue)
    }

    fn on_data(&mut self, f: &Frame) -> io::Result<Step> {
        let data = strip_padding(f);
        if !f.payload.is_empty() {
            // Give the flow-control credit back at once.
            let credit = (f.payload.len() as u32).to_be_bytes();
            self.send(WINDOW_UPDATE, 0, 0, &credit)?;
            if f.flags & END_STREAM == 0 {
                self.send(WINDOW_UPDATE, 0, f.stream, &credit)?;
            }
        }
        let Some(stream) = self.streams.get_mut(&f.stream) else {
            return Ok(Step::Continue);
        };
        stream.body.extend_from_slice(data);
        if f.flags & END_STREAM != 0 {
            return self.end_of_request(f.stream);
        }
        Ok(Step::Continue)
    }

    /// The whole request arrived: record it (processed) and act.
    fn end_of_request(&mut self, id: u32) -> io::Result<Step> {
        let Some(mut stream) = self.streams.remove(&id) else {
            return Ok(Step::Continue);
        };
        let behaviour = stream.behaviour.take().unwrap_or_else(H2Behaviour::ok);
        let pseudo = |name: &str| {
            stream
                .headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let request = H2Request {
            method: pseudo(":method"),
            path: pseudo(":path"),
            headers: stream
                .headers
                .iter()
                .filter(|(k, _)| !k.starts_with(':'))
                .cloned()
                .collect(),
            body: std::mem::take(&mut stream.body),
            stream: id,
            connection: self.number,
        };
        self.shared.processed.fetch_add(1, Ordering::SeqCst);
        if self.shared.recording {
            lock(&self.shared.requests).push(request);
        }
        self.last_processed = self.last_processed.max(id);
        match behaviour.kind {
            Kind::GoAwayAt => {
                self.go_away(id, INTERNAL_ERROR)?;
                Ok(Step::Close)
            }
            Kind::ResetAfterRequest => {
                self.reset(id, INTERNAL_ERROR)?;
                Ok(Step::Continue)
            }
            Kind::BlackHole => Ok(Step::Continue),
            _ => {
                self.respond(id, &behaviour)?;
                Ok(Step::Continue)
            }
        }
    }

    fn respond(&mut self, id: u32, b: &H2Behaviour) -> io::Result<()> {
        let status = b.status.to_string();
        let length = b.body.len().to_string();
        let mut fields: Vec<(&[u8], &[u8])> = vec![(b":status", status.as_bytes())];
        for (k, v) in &b.headers {
            fields.push((k.as_bytes(), v.as_bytes()));
        }
        fields.push((b"content-length", length.as_bytes()));
        // Literals, unindexed and without Huffman coding: what the provider answers matters
        // to the tests, not how small it is.
        let mut block = Vec::new();
        for (k, v) in fields {
            let field = (k.to_vec(), v.to_vec(), 0u8);
            if self.encoder.encode(field, &mut block).is_err() {
                return Err(io::Error::other("testkit: a header the encoder refuses"));
            }
        }
        let flags = END_HEADERS | if b.body.is_empty() { END_STREAM } else { 0 };
        self.send(HEADERS, flags, id, &block)?;
        let chunks: Vec<&[u8]> = b.body.chunks(MAX_FRAME).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            self.send(DATA, if last { END_STREAM } else { 0 }, id, chunk)?;
        }
        Ok(())
    }
}

/// The header block of a HEADERS frame, without its padding and priority fields.
fn header_block(f: &Frame) -> Vec<u8> {
    let mut p: &[u8] = &f.payload;
    let mut pad = 0usize;
    if f.flags & PADDED != 0 && !p.is_empty() {
        pad = p[0] as usize;
        p = &p[1..];
    }
    if f.flags & PRIORITY != 0 && p.len() >= 5 {
        p = &p[5..];
    }
    p[..p.len().saturating_sub(pad)].to_vec()
}

/// A DATA frame's data, without its padding.
fn strip_padding(f: &Frame) -> &[u8] {
    let p: &[u8] = &f.payload;
    if f.flags & PADDED != 0 && !p.is_empty() {
        let pad = p[0] as usize;
        return &p[1..p.len().saturating_sub(pad).max(1)];
    }
    p
}
