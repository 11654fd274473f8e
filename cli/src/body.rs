//! Response bodies as they arrive: written out in constant memory (`request`), or
//! collected up to a limit (`batch`), decoded first when `--compressed` asked for an
//! encoding.
//!
//! Content encoding is the same on every runtime: no adapter asks for an encoding or
//! decodes one by default, so the bytes are passed through as the provider sent them.
//! `--compressed` (curl's name) adds `accept-encoding: gzip, deflate` and decodes a
//! `gzip` or `deflate` body here, as it streams; any other encoding is passed through.
//! Decoded bytes are what counts against `--max-body`, so a decompression bomb stops at
//! the limit.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use flate2::write::{MultiGzDecoder, ZlibDecoder};

/// Why writing a body stopped.
#[derive(Debug)]
pub enum Stop {
    /// The (decoded) body is larger than the limit.
    TooLarge(usize),
    /// The body could not be decoded.
    Decode(io::Error),
    /// The output could not be written.
    Output(io::Error),
}

/// The value `accept-encoding` gets with `--compressed`.
pub const ACCEPT_ENCODING: &str = "gzip, deflate";

/// A writer that decodes the body's `content-encoding` (when asked to) before `W`.
pub enum Decoded<W: Write> {
    /// Bytes as sent.
    Plain(W),
    /// An encoded body none of whose bytes came yet: its decoder starts with the first
    /// byte. A body with no bytes at all (the answer to a HEAD, a 204 or 304 that names
    /// its encoding) is empty, not a broken stream. (`None` only while the decoder takes
    /// the writer.)
    Pending(Option<W>, Encoding),
    /// `gzip` / `x-gzip`: one member, or several (RFC 1952 allows a concatenation).
    Gzip(MultiGzDecoder<Marked<W>>),
    /// `deflate` (zlib format, RFC 9110).
    Deflate(ZlibDecoder<Marked<W>>),
}

/// A `content-encoding` the CLI decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `gzip` / `x-gzip`.
    Gzip,
    /// `deflate`.
    Deflate,
}

/// The error of a writer the decoder already took (never met: the decoder replaces it).
fn taken() -> Stop {
    Stop::Output(io::Error::other("the body's writer was taken"))
}

/// The output under a decoder: its errors come back through the decoder, so they carry a
/// marker ([`OutputFailed`]) that tells a failed write from a body that cannot be decoded.
pub struct Marked<W>(W);

impl<W: Write> Write for Marked<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.write(bytes).map_err(marked)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(marked)
    }
}

/// The marker a failed write of the output carries through a decoder.
#[derive(Debug)]
struct OutputFailed(io::Error);

impl std::fmt::Display for OutputFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for OutputFailed {}

/// `e` with the output's marker (a [`Limited`] writer's own marker is kept as it is).
fn marked(e: io::Error) -> io::Error {
    match limit_of(&e) {
        Some(_) => e,
        None => io::Error::new(e.kind(), OutputFailed(e)),
    }
}

impl<W: Write> Decoded<W> {
    /// Decodes `content_encoding` into `out` when `compressed` asked for it.
    pub fn new(out: W, compressed: bool, content_encoding: Option<&str>) -> Self {
        let enc = content_encoding.map(|e| e.trim().to_ascii_lowercase());
        match enc.as_deref() {
            Some("gzip" | "x-gzip") if compressed => Decoded::Pending(Some(out), Encoding::Gzip),
            Some("deflate") if compressed => Decoded::Pending(Some(out), Encoding::Deflate),
            _ => Decoded::Plain(out),
        }
    }

    /// Writes one chunk of the body as received.
    pub fn chunk(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        if bytes.is_empty() {
            return Ok(());
        }
        if let Decoded::Pending(w, enc) = self {
            let w = Marked(w.take().ok_or_else(taken)?);
            *self = match enc {
                Encoding::Gzip => Decoded::Gzip(MultiGzDecoder::new(w)),
                Encoding::Deflate => Decoded::Deflate(ZlibDecoder::new(w)),
            };
        }
        let r = match self {
            Decoded::Plain(w) => return w.write_all(bytes).map_err(output_or_limit),
            Decoded::Pending(..) => return Err(taken()),
            Decoded::Gzip(d) => d.write_all(bytes),
            Decoded::Deflate(d) => d.write_all(bytes),
        };
        r.map_err(decode_or_limit)
    }

    /// The body ended: writes out what the decoder holds and flushes the output (a
    /// decoder's `finish` does not flush the writer under it); returns the output.
    pub fn finish(self) -> Result<W, Stop> {
        let mut w = match self {
            Decoded::Plain(w) => w,
            Decoded::Pending(w, _) => w.ok_or_else(taken)?,
            Decoded::Gzip(d) => d.finish().map_err(decode_or_limit)?.0,
            Decoded::Deflate(d) => d.finish().map_err(decode_or_limit)?.0,
        };
        w.flush().map(|()| w).map_err(output_or_limit)
    }
}

/// The marker a [`Limited`] writer's error carries.
#[derive(Debug)]
struct OverLimit(usize);

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the body is larger than {} bytes", self.0)
    }
}

impl std::error::Error for OverLimit {}

fn limit_of(e: &io::Error) -> Option<usize> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<OverLimit>())
        .map(|o| o.0)
}

fn output_or_limit(e: io::Error) -> Stop {
    match limit_of(&e) {
        Some(max) => Stop::TooLarge(max),
        None => Stop::Output(e),
    }
}

fn decode_or_limit(e: io::Error) -> Stop {
    if let Some(max) = limit_of(&e) {
        return Stop::TooLarge(max);
    }
    if e.get_ref().is_some_and(|inner| inner.is::<OutputFailed>()) {
        let kind = e.kind();
        return match e.into_inner().map(|inner| inner.downcast::<OutputFailed>()) {
            Some(Ok(failed)) => Stop::Output(failed.0),
            _ => Stop::Output(kind.into()),
        };
    }
    Stop::Decode(e)
}

/// Collects a body in memory, up to `max` bytes.
#[derive(Debug, Default)]
pub struct Limited {
    /// What was collected.
    pub buf: Vec<u8>,
    max: usize,
}

impl Limited {
    /// An empty buffer that refuses more than `max` bytes.
    pub fn new(max: usize) -> Self {
        Limited {
            buf: Vec::new(),
            max,
        }
    }
}

impl Write for Limited {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buf.len() + bytes.len() > self.max {
            return Err(io::Error::other(OverLimit(self.max)));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A progress meter on stderr: bytes, rate and elapsed time, redrawn at most every
/// 200 ms on one line, and a last line when the body ends.
pub struct Progress {
    start: Instant,
    last: Option<Instant>,
    bytes: u64,
    out: Box<dyn Write>,
}

impl Progress {
    /// A meter writing to `out`.
    pub fn new(out: Box<dyn Write>, start: Instant) -> Self {
        Progress {
            start,
            last: None,
            bytes: 0,
            out,
        }
    }

    /// Counts `n` more bytes received at `now`; redraws when due.
    pub fn add(&mut self, n: usize, now: Instant) {
        self.bytes += n as u64;
        if self
            .last
            .is_none_or(|l| now.duration_since(l) >= Duration::from_millis(200))
        {
            self.last = Some(now);
            let line = meter_line(self.bytes, now.duration_since(self.start));
            let _ = write!(self.out, "\r{line}");
            let _ = self.out.flush();
        }
    }

    /// The last line.
    pub fn done(mut self, now: Instant) {
        let line = meter_line(self.bytes, now.duration_since(self.start));
        let _ = writeln!(self.out, "\r{line}");
    }
}

/// `  12.3 MiB   4.1 MiB/s   0:03` (bytes so far, average rate, elapsed).
pub fn meter_line(bytes: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 { bytes as f64 / secs } else { 0.0 };
    let total = elapsed.as_secs();
    format!(
        "{:>10} {:>10}/s {:>3}:{:02}",
        size(bytes as f64),
        size(rate),
        total / 60,
        total % 60
    )
}

fn size(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Standard base64 (RFC 4648, with padding), for a batch body that is not UTF-8.
pub fn base64(data: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(TABLE[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_is_decoded_only_when_asked_and_streams_in_pieces() {
        let packed = gzip(b"hello, baton");
        let mut d = Decoded::new(Vec::new(), true, Some("gzip"));
        for piece in packed.chunks(3) {
            d.chunk(piece).unwrap();
        }
        assert_eq!(d.finish().unwrap(), b"hello, baton");
        let mut d = Decoded::new(Vec::new(), false, Some("gzip"));
        d.chunk(&packed).unwrap();
        assert_eq!(d.finish().unwrap(), packed, "passed through as sent");
    }

    #[test]
    fn a_decompression_bomb_stops_at_the_limit() {
        let packed = gzip(&vec![0u8; 10 * 1024 * 1024]);
        assert!(packed.len() < 64 * 1024);
        let mut d = Decoded::new(Limited::new(1024 * 1024), true, Some("gzip"));
        let stop = packed
            .chunks(4096)
            .find_map(|p| d.chunk(p).err())
            .expect("stopped");
        assert!(matches!(stop, Stop::TooLarge(1_048_576)), "{stop:?}");
    }

    /// A body with no bytes (a HEAD's answer, a 204 naming its encoding) is empty, and a
    /// gzip body of several members is each member in turn. Before, the first failed with
    /// "incomplete deflate stream" and the second after its first member.
    #[test]
    fn an_empty_body_and_several_gzip_members_decode() {
        for enc in ["gzip", "deflate"] {
            let mut d = Decoded::new(Vec::new(), true, Some(enc));
            d.chunk(b"").unwrap();
            assert_eq!(d.finish().unwrap(), b"", "{enc}");
        }
        let mut both = gzip(b"first, ");
        both.extend(gzip(b"second"));
        let mut d = Decoded::new(Vec::new(), true, Some("gzip"));
        for piece in both.chunks(5) {
            d.chunk(piece).unwrap();
        }
        assert_eq!(d.finish().unwrap(), b"first, second");
    }

    #[test]
    fn corrupt_gzip_is_a_decode_error() {
        let mut d = Decoded::new(Vec::new(), true, Some("gzip"));
        let r = d
            .chunk(b"not gzip at all")
            .and_then(|()| d.finish().map(|_| ()));
        assert!(matches!(r, Err(Stop::Decode(_))), "{r:?}");
    }

    /// An output that fails every write (a full disk), or only its flush.
    struct Full {
        flushes_only: bool,
        flushed: bool,
    }

    impl Write for Full {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            match self.flushes_only {
                true => Ok(bytes.len()),
                false => Err(io::ErrorKind::StorageFull.into()),
            }
        }

        fn flush(&mut self) -> io::Result<()> {
            self.flushed = true;
            match self.flushes_only {
                true => Err(io::ErrorKind::StorageFull.into()),
                false => Ok(()),
            }
        }
    }

    #[test]
    fn a_failed_write_under_a_decoder_is_the_output_not_the_body() {
        let packed = gzip(&[7u8; 64 * 1024]);
        for flushes_only in [false, true] {
            let out = Full {
                flushes_only,
                flushed: false,
            };
            let mut d = Decoded::new(out, true, Some("gzip"));
            let r = packed
                .chunks(4096)
                .try_for_each(|p| d.chunk(p))
                .and_then(|()| d.finish().map(|_| ()));
            assert!(
                matches!(r, Err(Stop::Output(_))),
                "flushes only {flushes_only}: {r:?}"
            );
        }
    }

    #[test]
    fn finishing_a_decoded_body_flushes_the_output() {
        let out = Full {
            flushes_only: false,
            flushed: false,
        };
        let mut d = Decoded::new(out, true, Some("gzip"));
        d.chunk(&gzip(b"")).unwrap();
        assert!(d.finish().unwrap().flushed);
    }

    #[test]
    fn meter_shows_bytes_rate_and_time() {
        let line = meter_line(3 * 1024 * 1024, Duration::from_secs(2));
        assert!(
            line.contains("3.0 MiB") && line.contains("1.5 MiB/s") && line.contains("0:02"),
            "{line}"
        );
    }

    #[test]
    fn base64_matches_rfc_4648() {
        for (raw, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(raw.as_bytes()), enc);
        }
    }
}
