//! Minimal HTTP/1.1 request parsing (server side) for the providers.

use std::io::{self, BufRead, Read};

/// Longest accepted request line or header line, in bytes.
const MAX_LINE: u64 = 16 * 1024;
/// Largest accepted request head (request line plus headers), in bytes.
const MAX_HEAD: usize = 64 * 1024;
/// Most header lines accepted in one request.
const MAX_HEADERS: usize = 256;
/// Largest accepted request body, in bytes.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Why no request could be read from a connection.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed the connection cleanly between requests.
    Closed,
    /// An I/O error, or the peer closed in the middle of a request.
    Io,
    /// The bytes were not a well-formed HTTP/1.x request (answered with 400).
    Malformed,
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Io
    }
}

/// How the request body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body.
    None,
    /// `Content-Length: n`.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: Option<String>,
    /// `true` for HTTP/1.1, `false` for HTTP/1.0.
    pub(crate) http11: bool,
    /// All header fields in order, names lowercased.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) framing: Framing,
}

impl Head {
    /// Whether the comma-separated header `name` contains `token` (case-insensitive).
    pub(crate) fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// Whether the connection may stay open after this request.
    pub(crate) fn keep_alive(&self) -> bool {
        if self.http11 {
            !self.has_token("connection", "close")
        } else {
            self.has_token("connection", "keep-alive")
        }
    }

    /// Whether the client waits for `100 Continue` before sending the body.
    pub(crate) fn expects_continue(&self) -> bool {
        self.http11 && self.framing != Framing::None && self.has_token("expect", "100-continue")
    }
}

/// Reads one line (up to and including `\n`) into `line`, without the line ending.
/// Returns `Ok(false)` on a clean end of stream before any byte.
fn read_line<R: BufRead>(r: &mut R, line: &mut Vec<u8>) -> Result<bool, ReadError> {
    line.clear();
    let n = r.by_ref().take(MAX_LINE).read_until(b'\n', line)?;
    if n == 0 {
        return Ok(false);
    }
    if line.last() != Some(&b'\n') {
        // Either the peer closed mid-line or the line is too long.
        return Err(if n as u64 >= MAX_LINE {
            ReadError::Malformed
        } else {
            ReadError::Io
        });
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(true)
}

fn utf8(bytes: &[u8]) -> Result<&str, ReadError> {
    std::str::from_utf8(bytes).map_err(|_| ReadError::Malformed)
}

/// Splits a request target into path and query. Absolute-form targets
/// (`http://host/p?q`) are reduced to their path and query.
fn split_target(target: &str) -> (String, Option<String>) {
    let mut rest = target;
    if let Some(i) = rest.find("://") {
        let after = &rest[i + 3..];
        rest = match after.find(['/', '?']) {
            Some(j) => &after[j..],
            None => "/",
        };
    }
    match rest.split_once('?') {
        Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
        None => (rest.to_owned(), None),
    }
}

/// Reads a request head. `line` is a reusable scratch buffer.
pub(crate) fn read_head<R: BufRead>(r: &mut R, line: &mut Vec<u8>) -> Result<Head, ReadError> {
    // Tolerate empty lines before the request line (RFC 9112 section 2.2).
    loop {
        if !read_line(r, line)? {
            return Err(ReadError::Closed);
        }
        if !line.is_empty() {
            break;
        }
    }
    let mut total = line.len();
    let request_line = utf8(line)?;
    let mut parts = request_line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) if !m.is_empty() && !t.is_empty() => (m, t, v),
        _ => return Err(ReadError::Malformed),
    };
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(ReadError::Malformed),
    };
    let method = method.to_owned();
    let (path, query) = split_target(target);

    let mut headers = Vec::new();
    loop {
        if !read_line(r, line)? {
            return Err(ReadError::Io);
        }
        if line.is_empty() {
            break;
        }
        total += line.len();
        if total > MAX_HEAD || headers.len() >= MAX_HEADERS {
            return Err(ReadError::Malformed);
        }
        if line[0] == b' ' || line[0] == b'\t' {
            // Obsolete line folding is rejected (RFC 9112 section 5.2).
            return Err(ReadError::Malformed);
        }
        let text = utf8(line)?;
        let (name, value) = text.split_once(':').ok_or(ReadError::Malformed)?;
        if name.is_empty() || name.contains([' ', '\t']) {
            return Err(ReadError::Malformed);
        }
        headers.push((
            name.to_ascii_lowercase(),
            value.trim_matches([' ', '\t']).to_owned(),
        ));
    }

    let mut head = Head {
        method,
        path,
        query,
        http11,
        headers,
        framing: Framing::None,
    };
    head.framing = framing(&head)?;
    Ok(head)
}

fn framing(head: &Head) -> Result<Framing, ReadError> {
    let te: Vec<&str> = head
        .headers
        .iter()
        .filter(|(n, _)| n == "transfer-encoding")
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if let Some(last) = te.last() {
        // A request whose final coding is not chunked has no determinable length.
        return if last.eq_ignore_ascii_case("chunked") {
            Ok(Framing::Chunked)
        } else {
            Err(ReadError::Malformed)
        };
    }
    let mut length: Option<usize> = None;
    for (_, v) in head.headers.iter().filter(|(n, _)| n == "content-length") {
        for part in v.split(',') {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ReadError::Malformed);
            }
            let n: usize = part.parse().map_err(|_| ReadError::Malformed)?;
            if length.is_some_and(|l| l != n) || n > MAX_BODY {
                return Err(ReadError::Malformed);
            }
            length = Some(n);
        }
    }
    Ok(match length {
        Some(0) | None => Framing::None,
        Some(n) => Framing::Length(n),
    })
}

/// Reads the request body described by `framing`.
pub(crate) fn read_body<R: BufRead>(
    r: &mut R,
    framing: Framing,
    line: &mut Vec<u8>,
) -> Result<Vec<u8>, ReadError> {
    match framing {
        Framing::None => Ok(Vec::new()),
        Framing::Length(n) => {
            let mut body = vec![0; n];
            r.read_exact(&mut body)?;
            Ok(body)
        }
        Framing::Chunked => {
            let mut body = Vec::new();
            loop {
                if !read_line(r, line)? {
                    return Err(ReadError::Io);
                }
                let text = utf8(line)?;
                let size = text.split(';').next().unwrap_or("").trim();
                if size.is_empty() || size.len() > 16 {
                    return Err(ReadError::Malformed);
                }
                let size = usize::from_str_radix(size, 16).map_err(|_| ReadError::Malformed)?;
                if size == 0 {
                    // Trailer section: ignored, read up to the final empty line.
                    loop {
                        if !read_line(r, line)? {
                            return Err(ReadError::Io);
                        }
                        if line.is_empty() {
                            return Ok(body);
                        }
                    }
                }
                if body.len() + size > MAX_BODY {
                    return Err(ReadError::Malformed);
                }
                let start = body.len();
                body.resize(start + size, 0);
                r.read_exact(&mut body[start..])?;
                if !read_line(r, line)? {
                    return Err(ReadError::Io);
                }
                if !line.is_empty() {
                    return Err(ReadError::Malformed);
                }
            }
        }
    }
}

/// The reason phrase written for `status`.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        425 => "Too Early",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<(Head, Vec<u8>), ReadError> {
        let mut r = io::BufReader::new(raw.as_bytes());
        let mut line = Vec::new();
        let head = read_head(&mut r, &mut line)?;
        let body = read_body(&mut r, head.framing, &mut line)?;
        Ok((head, body))
    }

    #[test]
    fn parses_target_forms() {
        assert_eq!(
            split_target("/a/b?x=1&y"),
            ("/a/b".into(), Some("x=1&y".into()))
        );
        assert_eq!(split_target("/"), ("/".into(), None));
        assert_eq!(
            split_target("http://h:1/p?q"),
            ("/p".into(), Some("q".into()))
        );
        assert_eq!(split_target("http://h:1"), ("/".into(), None));
        assert_eq!(split_target("*"), ("*".into(), None));
    }

    #[test]
    fn parses_head_and_length_body() {
        let (h, b) = parse(
            "\r\nPOST /x?q HTTP/1.1\r\nHost: a\r\nX-Y:  v v \r\nContent-Length: 3\r\n\r\nabc",
        )
        .unwrap();
        assert_eq!(h.method, "POST");
        assert_eq!(h.path, "/x");
        assert_eq!(h.query.as_deref(), Some("q"));
        assert!(h.http11 && h.keep_alive());
        assert_eq!(h.headers[1], ("x-y".to_owned(), "v v".to_owned()));
        assert_eq!(b, b"abc");
    }

    #[test]
    fn parses_chunked_with_extensions_and_trailers() {
        let (_, b) = parse(
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
             4;ext=1\r\nWiki\r\nA\r\npedia in c\r\n0\r\nX-T: 1\r\n\r\n",
        )
        .unwrap();
        assert_eq!(b, b"Wikipedia in c");
    }

    #[test]
    fn rejects_malformed() {
        for raw in [
            "GET /\r\n\r\n",
            "GET / HTTP/2.0\r\n\r\n",
            "GET / HTTP/1.1\r\nbad header\r\n\r\n",
            "GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ] {
            assert!(matches!(parse(raw), Err(ReadError::Malformed)), "{raw:?}");
        }
    }

    #[test]
    fn connection_semantics() {
        let (h, _) = parse("GET / HTTP/1.1\r\nConnection: foo, Close\r\n\r\n").unwrap();
        assert!(!h.keep_alive());
        let (h, _) = parse("GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(!h.keep_alive());
        let (h, _) = parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap();
        assert!(h.keep_alive());
    }

    #[test]
    fn clean_and_unclean_eof() {
        assert!(matches!(parse(""), Err(ReadError::Closed)));
        assert!(matches!(
            parse("GET / HTTP/1.1\r\nHost"),
            Err(ReadError::Io)
        ));
        assert!(matches!(
            parse("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"),
            Err(ReadError::Io)
        ));
    }
}
