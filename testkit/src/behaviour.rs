//! What a provider does with one request.

use std::fmt;
use std::time::Duration;

use crate::http::reason;

/// What the provider does once it has read (and recorded) a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Write the whole response.
    Respond,
    /// Write the response head, then never the body.
    StallAfterHeaders,
    /// Write the head and the first half of the body, then close.
    HalfBodyThenClose,
    /// Write the head without a length (the body ends when the connection closes) and
    /// the first half of the body, then reset the connection.
    UnframedHalfBodyThenReset,
    /// Close the connection (FIN) without writing anything.
    Close,
    /// Reset the connection (RST) without writing anything.
    Reset,
    /// Never write, keep the connection open.
    BlackHole,
    /// Provider state: the listener is closed, connections are refused.
    Refuse,
}

/// What a [`Provider`](crate::Provider) does with a request: a response (possibly
/// delayed, stalled or cut short) or a transport fault.
///
/// Build one with a constructor and refine it with the chaining methods:
///
/// | constructor / modifier | the provider, after reading and recording the request | class |
/// |---|---|---|
/// | [`ok`](Self::ok) | answers `200`, `content-type: text/plain`, body `ok` | — |
/// | [`status`](Self::status)`(s)` + [`header`](Self::header) / [`body`](Self::body) | answers `s` with those headers and body (`Content-Length` added) | — |
/// | [`.delay(d)`](Self::delay) | waits `d` first (then does the rest) | ambiguous past the client's timeout |
/// | [`.stall_after_headers()`](Self::stall_after_headers) | sends the head, never the body, keeps the socket open | ambiguous |
/// | [`.close_after_half_body()`](Self::close_after_half_body) | sends the head and half the body, then closes | ambiguous |
/// | [`.reset_after_half_unframed_body()`](Self::reset_after_half_unframed_body) | sends the head without a length and half the body, then resets | ambiguous (body error) |
/// | [`close`](Self::close) | closes the connection (FIN) without answering | ambiguous |
/// | [`reset`](Self::reset) | resets the connection (RST) without answering | ambiguous |
/// | [`black_hole`](Self::black_hole) | never answers, keeps the socket open | ambiguous |
/// | [`refuse`](Self::refuse) | (a provider state) closes its listening port: connects are refused | undelivered |
///
/// ```
/// use std::time::Duration;
/// use testkit::Behaviour;
///
/// let slow = Behaviour::ok().delay(Duration::from_millis(50));
/// let limited = Behaviour::status(429).header("Retry-After", "1").body("slow down");
/// let cut = Behaviour::status(200).body("0123456789").close_after_half_body();
/// let gone = Behaviour::reset();
/// # let _ = (slow, limited, cut, gone);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Behaviour {
    pub(crate) action: Action,
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    pub(crate) delay: Duration,
}

impl fmt::Debug for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Behaviour");
        d.field("action", &self.action);
        if matches!(
            self.action,
            Action::Respond | Action::StallAfterHeaders | Action::HalfBodyThenClose
        ) {
            d.field("status", &self.status)
                .field("headers", &self.headers)
                .field("body", &String::from_utf8_lossy(&self.body));
        }
        d.field("delay", &self.delay).finish()
    }
}

impl Default for Behaviour {
    /// [`Behaviour::ok`].
    fn default() -> Self {
        Self::ok()
    }
}

impl Behaviour {
    fn with_action(action: Action) -> Self {
        Behaviour {
            action,
            status: 200,
            headers: Vec::new(),
            body: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    /// A healthy answer: `200 OK`, `content-type: text/plain`, body `ok`.
    ///
    /// The response bytes are serialised once when the behaviour is installed, so this is
    /// the fast path for benchmarks.
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::ok());
    /// # drop(p);
    /// ```
    pub fn ok() -> Self {
        Self::status(200)
            .header("content-type", "text/plain")
            .body("ok")
    }

    /// An answer with this status code, no headers other than `Content-Length`, and an
    /// empty body; add to it with [`header`](Self::header) and [`body`](Self::body).
    ///
    /// For `1xx`, `204` and `304` no `Content-Length` is added and no body is sent.
    ///
    /// # Panics
    /// If `status` is not in `100..=999`.
    ///
    /// ```
    /// let b = testkit::Behaviour::status(503).header("Retry-After", "2");
    /// # drop(b);
    /// ```
    pub fn status(status: u16) -> Self {
        assert!(
            (100..=999).contains(&status),
            "testkit: invalid HTTP status {status}"
        );
        Behaviour {
            status,
            ..Self::with_action(Action::Respond)
        }
    }

    /// Read the request, then close the connection (TCP FIN) without writing a byte.
    /// The client should classify this as *ambiguous*.
    ///
    /// ```
    /// let b = testkit::Behaviour::close();
    /// # drop(b);
    /// ```
    pub fn close() -> Self {
        Self::with_action(Action::Close)
    }

    /// Read the request, then reset the connection (`SO_LINGER` 0, then close, so the
    /// kernel sends a TCP RST). The request was recorded: this is the *ambiguous* case.
    ///
    /// ```
    /// let b = testkit::Behaviour::reset();
    /// # drop(b);
    /// ```
    pub fn reset() -> Self {
        Self::with_action(Action::Reset)
    }

    /// Accept the connection and read the request, but never write anything; the
    /// connection stays open until the client closes it or the provider is dropped.
    /// The client should classify its timeout as *ambiguous*.
    ///
    /// ```
    /// let b = testkit::Behaviour::black_hole();
    /// # drop(b);
    /// ```
    pub fn black_hole() -> Self {
        Self::with_action(Action::BlackHole)
    }

    /// A provider *state*, not a per-request fault: the provider closes its listening
    /// socket, so new connections are refused (*undelivered*), and closes the connections
    /// it had open. Switching to another behaviour later re-binds the same port.
    ///
    /// Only valid as the behaviour given to [`Provider::start`](crate::Provider::start),
    /// [`Provider::set_behaviour`](crate::Provider::set_behaviour), or as the default of
    /// a builder or [`Provider::set_script`](crate::Provider::set_script) whose script is
    /// empty: a request that has already arrived can no longer be refused.
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::refuse());
    /// assert_eq!(
    ///     std::net::TcpStream::connect(p.addr()).unwrap_err().kind(),
    ///     std::io::ErrorKind::ConnectionRefused,
    /// );
    /// ```
    pub fn refuse() -> Self {
        Self::with_action(Action::Refuse)
    }

    /// Adds a response header (kept in order, sent as given). Setting `Content-Length`
    /// yourself replaces the automatic one (it may then lie); `Connection: close` makes
    /// the provider close the connection after the response.
    /// Ignored by behaviours that write no response.
    ///
    /// ```
    /// let b = testkit::Behaviour::status(429).header("Retry-After", "1");
    /// # drop(b);
    /// ```
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        assert!(
            !name.is_empty()
                && !name.contains([':', '\r', '\n', ' '])
                && !value.contains(['\r', '\n']),
            "testkit: invalid header {name:?}: {value:?}"
        );
        self.headers.push((name, value));
        self
    }

    /// Sets the response body. Ignored by behaviours that write no response.
    ///
    /// ```
    /// let b = testkit::Behaviour::status(200).body(r#"{"jsonrpc":"2.0","id":1,"result":"0x1"}"#);
    /// # drop(b);
    /// ```
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Waits this long after reading the request before doing anything else (answering,
    /// stalling, resetting, ...). The wait ends early when the provider is dropped.
    ///
    /// ```
    /// let b = testkit::Behaviour::ok().delay(std::time::Duration::from_millis(300));
    /// # drop(b);
    /// ```
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Sends the response head (status and headers, including `Content-Length`), then
    /// stalls: never sends the body and keeps the connection open until the client closes
    /// it or the provider is dropped.
    ///
    /// ```
    /// let b = testkit::Behaviour::ok().stall_after_headers();
    /// # drop(b);
    /// ```
    pub fn stall_after_headers(mut self) -> Self {
        self.action = Action::StallAfterHeaders;
        self
    }

    /// Sends the response head (with `Content-Length` of the full body) and the first
    /// half of the body (rounded down), then closes the connection.
    ///
    /// ```
    /// let b = testkit::Behaviour::status(200).body("0123456789").close_after_half_body();
    /// # drop(b);
    /// ```
    pub fn close_after_half_body(mut self) -> Self {
        self.action = Action::HalfBodyThenClose;
        self
    }

    /// Sends the response head without `Content-Length` (with `connection: close`: the
    /// body ends when the connection does) and the first half of the body, waits 50 ms,
    /// then resets the connection (RST). A client must not take the half for the whole.
    ///
    /// ```
    /// let b = testkit::Behaviour::status(200).body("0123456789").reset_after_half_unframed_body();
    /// # drop(b);
    /// ```
    pub fn reset_after_half_unframed_body(mut self) -> Self {
        self.action = Action::UnframedHalfBodyThenReset;
        self
    }

    /// Whether this is the [`refuse`](Self::refuse) state.
    pub fn is_refuse(&self) -> bool {
        self.action == Action::Refuse
    }

    /// Serialises the behaviour for the connection threads.
    pub(crate) fn prepare(&self) -> Prepared {
        let status = self.status;
        let no_body = (100..200).contains(&status) || status == 204 || status == 304;
        let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status)).into_bytes();
        let mut has_length = false;
        let mut close = false;
        for (name, value) in &self.headers {
            if name.eq_ignore_ascii_case("content-length") {
                has_length = true;
            }
            if name.eq_ignore_ascii_case("connection")
                && value
                    .split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("close"))
            {
                close = true;
            }
            head.extend_from_slice(name.as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        let unframed = self.action == Action::UnframedHalfBodyThenReset;
        if !has_length && !no_body && !unframed {
            head.extend_from_slice(format!("content-length: {}\r\n", self.body.len()).as_bytes());
        }
        let body: &[u8] = if no_body { &[] } else { &self.body };
        let build = |extra: &[u8]| {
            let mut out = Vec::with_capacity(head.len() + extra.len() + 2 + body.len());
            out.extend_from_slice(&head);
            out.extend_from_slice(extra);
            out.extend_from_slice(b"\r\n");
            let head_len = out.len();
            out.extend_from_slice(body);
            Wire {
                bytes: out,
                head_len,
            }
        };
        let keep_alive = build(b"");
        let closing = if close {
            keep_alive.clone()
        } else {
            build(b"connection: close\r\n")
        };
        Prepared {
            action: self.action,
            delay: self.delay,
            keep_alive,
            closing,
            close_after: close,
        }
    }
}

/// A serialised response.
#[derive(Debug, Clone)]
pub(crate) struct Wire {
    /// Head and body.
    pub(crate) bytes: Vec<u8>,
    /// Length of the head, including the final empty line.
    pub(crate) head_len: usize,
}

/// A behaviour ready for the connection threads.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) action: Action,
    pub(crate) delay: Duration,
    /// The response for a connection that stays open.
    pub(crate) keep_alive: Wire,
    /// The response for a connection that closes after it (`connection: close` added).
    pub(crate) closing: Wire,
    /// The user's headers ask to close the connection after the response.
    pub(crate) close_after: bool,
}
