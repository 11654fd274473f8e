//! Every fault, exercised with a raw `std::net::TcpStream` client.

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use testkit::{Behaviour, Provider};

/// A minimal HTTP/1.1 client over one connection.
struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let writer = TcpStream::connect(addr).expect("connect");
        writer
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let reader = BufReader::new(writer.try_clone().unwrap());
        Client { writer, reader }
    }

    fn timeout(&self, d: Duration) {
        self.writer.set_read_timeout(Some(d)).unwrap();
    }

    fn send(&mut self, raw: &str) {
        self.writer.write_all(raw.as_bytes()).expect("send");
    }

    fn get(&mut self, path: &str, extra: &str) {
        self.send(&format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n"));
    }

    fn read_head(&mut self) -> io::Result<(u16, Vec<(String, String)>)> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                ErrorKind::UnexpectedEof,
                "eof before status",
            ));
        }
        let status: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(io::Error::new(ErrorKind::UnexpectedEof, "eof in head"));
            }
            let l = line.trim_end();
            if l.is_empty() {
                return Ok((status, headers));
            }
            let (n, v) = l.split_once(':').unwrap();
            headers.push((n.to_ascii_lowercase(), v.trim().to_owned()));
        }
    }

    fn read_response(&mut self) -> io::Result<Response> {
        let (status, headers) = self.read_head()?;
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map_or(0, |(_, v)| v.parse().unwrap());
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body)?;
        Ok(Response {
            status,
            headers,
            body,
        })
    }

    /// Reads whatever comes until EOF or error.
    fn read_rest(&mut self) -> (Vec<u8>, io::Result<()>) {
        let mut buf = Vec::new();
        let r = self.reader.read_to_end(&mut buf).map(|_| ());
        (buf, r)
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

#[test]
fn healthy_ok_records_everything() {
    let p = Provider::start(Behaviour::ok());
    assert!(p.url().starts_with("http://127.0.0.1:"));
    assert_eq!(p.url(), format!("http://127.0.0.1:{}", p.port()));
    let before = Instant::now();
    let mut c = Client::connect(p.addr());
    c.send(
        "POST /v1/pay?a=1&b=2 HTTP/1.1\r\nHost: t\r\nIdempotency-Key: key-1\r\n\
         X-Dup: 1\r\nX-Dup: 2\r\nContent-Length: 5\r\n\r\nhello",
    );
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"ok");
    assert_eq!(r.header("content-type"), Some("text/plain"));

    assert_eq!(p.request_count(), 1);
    let reqs = p.requests();
    let q = &reqs[0];
    assert_eq!(q.method, "POST");
    assert_eq!(q.path, "/v1/pay");
    assert_eq!(q.query.as_deref(), Some("a=1&b=2"));
    assert_eq!(q.body, b"hello");
    assert_eq!(q.body_text(), "hello");
    assert_eq!(q.connection, 1);
    assert!(q.received_at >= before && q.received_at <= Instant::now());
    assert_eq!(q.header("IDEMPOTENCY-KEY"), Some("key-1"));
    assert_eq!(
        q.headers,
        vec![
            ("host".to_owned(), "t".to_owned()),
            ("idempotency-key".to_owned(), "key-1".to_owned()),
            ("x-dup".to_owned(), "1".to_owned()),
            ("x-dup".to_owned(), "2".to_owned()),
            ("content-length".to_owned(), "5".to_owned()),
        ]
    );
    assert_eq!(p.count_with_header("Idempotency-Key", "key-1"), 1);
    assert_eq!(p.count_with_header("x-dup", "2"), 1);
    assert_eq!(p.count_with_header("idempotency-key", "key-2"), 0);
}

#[test]
fn status_headers_and_body() {
    let p = Provider::start(
        Behaviour::status(503)
            .header("Retry-After", "7")
            .header("X-A", "b")
            .body("busy"),
    );
    let mut c = Client::connect(p.addr());
    c.get("/", "");
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("7"));
    assert_eq!(r.header("x-a"), Some("b"));
    assert_eq!(r.header("content-length"), Some("4"));
    assert_eq!(r.body, b"busy");
    // The connection stays usable.
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().status, 503);
    assert_eq!(p.connection_count(), 1);
}

#[test]
fn no_content_and_head_have_no_body() {
    let p = Provider::builder()
        .then(Behaviour::status(204))
        .otherwise(Behaviour::ok())
        .start();
    let mut c = Client::connect(p.addr());
    c.get("/", "");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.header("content-length")), (204, None));
    c.send("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
    let (status, headers) = c.read_head().unwrap();
    assert_eq!(status, 200);
    assert!(headers.contains(&("content-length".into(), "2".into())));
    // The next response follows directly: no body bytes were sent for HEAD.
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().body, b"ok");
}

#[test]
fn delay_answers_late() {
    let p = Provider::start(Behaviour::ok().delay(Duration::from_millis(300)));
    let mut c = Client::connect(p.addr());
    let start = Instant::now();
    c.timeout(Duration::from_millis(100));
    c.get("/", "");
    let e = c.read_response().unwrap_err();
    assert!(is_timeout(&e), "{e:?}");
    // Recorded before the delay: the ambiguous case for a client that timed out.
    assert!(p.wait_for_requests(1, Duration::from_secs(2)));
    c.timeout(Duration::from_secs(3));
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200);
    assert!(start.elapsed() >= Duration::from_millis(300));
}

#[test]
fn headers_then_stall() {
    let p = Provider::start(
        Behaviour::status(200)
            .body("0123456789")
            .stall_after_headers(),
    );
    let mut c = Client::connect(p.addr());
    c.get("/", "");
    let (status, headers) = c.read_head().unwrap();
    assert_eq!(status, 200);
    assert!(headers.contains(&("content-length".into(), "10".into())));
    c.timeout(Duration::from_millis(200));
    let mut buf = [0u8; 1];
    let e = c.reader.read(&mut buf).unwrap_err();
    assert!(is_timeout(&e), "{e:?}");
    assert_eq!(p.request_count(), 1);
}

#[test]
fn half_body_then_close() {
    let p = Provider::start(
        Behaviour::status(200)
            .body("0123456789")
            .close_after_half_body(),
    );
    let mut c = Client::connect(p.addr());
    c.get("/", "");
    let (status, headers) = c.read_head().unwrap();
    assert_eq!(status, 200);
    assert!(headers.contains(&("content-length".into(), "10".into())));
    let (rest, r) = c.read_rest();
    r.unwrap();
    assert_eq!(rest, b"01234");
    assert_eq!(p.request_count(), 1);
}

#[test]
fn reset_after_read_is_recorded() {
    let p = Provider::start(Behaviour::reset());
    let mut c = Client::connect(p.addr());
    c.send("POST /charge HTTP/1.1\r\nHost: t\r\nIdempotency-Key: k\r\nContent-Length: 2\r\n\r\n{}");
    let (rest, r) = c.read_rest();
    assert!(rest.is_empty());
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    // The ambiguous case: the server did read (and may have executed) the request.
    assert_eq!(p.request_count(), 1);
    assert_eq!(p.count_with_header("idempotency-key", "k"), 1);
    assert_eq!(p.requests()[0].body, b"{}");
}

#[test]
fn close_without_answer() {
    let p = Provider::start(Behaviour::close());
    let mut c = Client::connect(p.addr());
    c.get("/", "");
    let (rest, r) = c.read_rest();
    r.unwrap();
    assert!(rest.is_empty());
    assert_eq!(p.request_count(), 1);
}

#[test]
fn black_hole_reads_records_and_never_answers() {
    let p = Provider::start(Behaviour::black_hole());
    let mut c = Client::connect(p.addr());
    c.timeout(Duration::from_millis(200));
    c.get("/", "X-Request-Id: r1\r\n");
    let mut buf = [0u8; 1];
    let e = c.reader.read(&mut buf).unwrap_err();
    assert!(is_timeout(&e), "{e:?}");
    assert!(p.wait_for_requests(1, Duration::from_secs(2)));
    assert_eq!(p.count_with_header("x-request-id", "r1"), 1);
    // Dropping the provider releases the connection: the client sees EOF.
    let start = Instant::now();
    drop(p);
    assert!(start.elapsed() < Duration::from_secs(1));
    c.timeout(Duration::from_secs(2));
    assert_eq!(c.reader.read(&mut buf).unwrap(), 0);
}

#[test]
fn refused_records_nothing() {
    let addr = testkit::refused_addr();
    assert_eq!(
        TcpStream::connect(addr).unwrap_err().kind(),
        ErrorKind::ConnectionRefused
    );
    let url = testkit::refused_url();
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(url, format!("http://127.0.0.1:{port}"));

    let p = Provider::start(Behaviour::refuse());
    assert_eq!(
        TcpStream::connect(p.addr()).unwrap_err().kind(),
        ErrorKind::ConnectionRefused
    );
    assert_eq!(p.request_count(), 0);
    assert!(p.requests().is_empty());
    assert_eq!(p.connection_count(), 0);
}

#[test]
fn unresolvable_url_does_not_resolve() {
    let url = testkit::unresolvable_url();
    assert_eq!(url, "http://baton-test.invalid:80");
    assert!(testkit::UNRESOLVABLE_HOST.ends_with(".invalid"));
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(
            (testkit::UNRESOLVABLE_HOST, 80)
                .to_socket_addrs()
                .map(|a| a.count()),
        );
    });
    // A resolver without network may be slow; only a successful resolution is wrong.
    if let Ok(result) = rx.recv_timeout(Duration::from_secs(3)) {
        assert!(!matches!(result, Ok(n) if n > 0), "{result:?}");
    }
}

#[test]
fn keep_alive_and_connection_close() {
    let p = Provider::start(Behaviour::ok());
    let mut c = Client::connect(p.addr());
    for i in 0..50 {
        c.get(&format!("/n/{i}"), "");
        assert_eq!(c.read_response().unwrap().body, b"ok");
    }
    c.get("/last", "Connection: close\r\n");
    let r = c.read_response().unwrap();
    assert_eq!(r.header("connection"), Some("close"));
    let (rest, res) = c.read_rest();
    res.unwrap();
    assert!(rest.is_empty(), "server closed after Connection: close");
    assert_eq!(p.connection_count(), 1);
    let reqs = p.requests();
    assert_eq!(reqs.len(), 51);
    assert!(reqs.iter().all(|r| r.connection == 1));
    assert_eq!(reqs[7].path, "/n/7");
    assert!(reqs
        .windows(2)
        .all(|w| w[0].received_at <= w[1].received_at));

    // A second connection gets number 2.
    let mut c2 = Client::connect(p.addr());
    c2.get("/", "");
    c2.read_response().unwrap();
    assert_eq!(p.requests().last().unwrap().connection, 2);
}

#[test]
fn http10_closes_unless_keep_alive() {
    let p = Provider::start(Behaviour::ok());
    let mut c = Client::connect(p.addr());
    c.send("GET / HTTP/1.0\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 200);
    assert!(c.read_rest().0.is_empty());

    let mut c = Client::connect(p.addr());
    c.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    c.read_response().unwrap();
    c.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    c.read_response().unwrap();
    assert_eq!(p.request_count(), 3);
}

#[test]
fn pipelined_requests_with_bodies() {
    let p = Provider::start(Behaviour::ok());
    let mut c = Client::connect(p.addr());
    c.send(
        "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc\
         POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\n\
         GET /c HTTP/1.1\r\n\r\n",
    );
    for _ in 0..3 {
        assert_eq!(c.read_response().unwrap().status, 200);
    }
    let reqs = p.requests();
    let got: Vec<(&str, &[u8])> = reqs
        .iter()
        .map(|r| (r.path.as_str(), r.body.as_slice()))
        .collect();
    assert_eq!(got, vec![("/a", &b"abc"[..]), ("/b", b"de"), ("/c", b"")]);
}

#[test]
fn chunked_request_body() {
    let p = Provider::start(Behaviour::ok());
    let mut c = Client::connect(p.addr());
    c.send("POST /rpc HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    c.send("4\r\nWiki\r\n");
    c.send("5;name=value\r\npedia\r\n");
    c.send("E\r\n in\r\n\r\nchunks.\r\n");
    c.send("0\r\nX-Trailer: t\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 200);
    assert_eq!(p.requests()[0].body_text(), "Wikipedia in\r\n\r\nchunks.");
}

#[test]
fn expect_continue() {
    let p = Provider::start(Behaviour::status(201));
    let mut c = Client::connect(p.addr());
    c.send("PUT /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
    assert_eq!(c.read_head().unwrap().0, 100);
    c.send("body");
    assert_eq!(c.read_response().unwrap().status, 201);
    assert_eq!(p.requests()[0].body, b"body");
}

#[test]
fn malformed_request_gets_400_and_is_not_recorded() {
    let p = Provider::start(Behaviour::ok());
    let mut c = Client::connect(p.addr());
    c.send("NONSENSE\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 400);
    assert!(c.read_rest().0.is_empty());
    assert_eq!(p.request_count(), 0);
}

#[test]
fn script_by_request_number() {
    let p = Provider::builder()
        .then(Behaviour::reset())
        .then(Behaviour::status(503).header("Retry-After", "1"))
        .then_n(2, Behaviour::status(429))
        .otherwise(Behaviour::status(200).body("fine"))
        .start();

    let mut c = Client::connect(p.addr());
    c.get("/", "");
    assert_eq!(
        c.read_rest().1.unwrap_err().kind(),
        ErrorKind::ConnectionReset
    );

    let mut c = Client::connect(p.addr());
    c.get("/", "");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.header("retry-after")), (503, Some("1")));
    for expected in [429, 429, 200, 200, 200] {
        c.get("/", "");
        assert_eq!(c.read_response().unwrap().status, expected);
    }
    assert_eq!(p.request_count(), 7);
    assert_eq!(
        p.requests()
            .iter()
            .map(|r| r.connection)
            .collect::<Vec<_>>(),
        vec![1, 2, 2, 2, 2, 2, 2]
    );

    // A new script counts from the moment it is installed.
    p.set_script([Behaviour::status(500)], Behaviour::status(202));
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().status, 500);
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().status, 202);
}

#[test]
fn default_of_builder_is_ok() {
    let p = Provider::builder().then(Behaviour::status(500)).start();
    let mut c = Client::connect(p.addr());
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().status, 500);
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().body, b"ok");
}

#[test]
#[should_panic(expected = "provider state")]
fn refuse_cannot_be_scripted() {
    let _ = Provider::builder().then(Behaviour::refuse());
}

#[test]
#[should_panic(expected = "empty script")]
fn refuse_default_needs_empty_script() {
    let p = Provider::start(Behaviour::ok());
    p.set_script([Behaviour::ok()], Behaviour::refuse());
}

#[test]
fn run_time_switching_healthy_refusing_black_hole_back() {
    let p = Provider::start(Behaviour::ok());
    let port = p.port();

    // Healthy, on a keep-alive connection.
    let mut old = Client::connect(p.addr());
    old.get("/", "");
    assert_eq!(old.read_response().unwrap().status, 200);

    // Refusing: new connections are refused, the open one is closed.
    p.set_behaviour(Behaviour::refuse());
    assert_eq!(
        TcpStream::connect(p.addr()).unwrap_err().kind(),
        ErrorKind::ConnectionRefused
    );
    let (rest, _) = old.read_rest();
    assert!(rest.is_empty());

    // Black-holed, on the same port.
    p.set_behaviour(Behaviour::black_hole());
    assert_eq!(p.port(), port);
    let mut c = Client::connect(p.addr());
    c.timeout(Duration::from_millis(150));
    c.get("/", "");
    let mut buf = [0u8; 1];
    assert!(is_timeout(&c.reader.read(&mut buf).unwrap_err()));

    // Back to healthy: existing connections get the new behaviour on their next request.
    p.set_behaviour(Behaviour::ok());
    let mut c = Client::connect(p.addr());
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().status, 200);
    p.set_behaviour(Behaviour::status(503));
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().status, 503);

    // Same behaviour twice, and refuse twice, are no-ops for the listener.
    p.set_behaviour(Behaviour::refuse());
    p.set_behaviour(Behaviour::refuse());
    p.set_behaviour(Behaviour::ok());
    p.set_behaviour(Behaviour::ok());
    let mut c = Client::connect(p.addr());
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().status, 200);
    assert_eq!(p.request_count(), 5);
}

#[test]
fn refuse_then_rebind_after_server_closed_connections() {
    // Connections closed by the server leave TIME_WAIT entries on its port;
    // re-binding must still work.
    let p = Provider::start(Behaviour::ok());
    for _ in 0..5 {
        let mut c = Client::connect(p.addr());
        c.get("/", "Connection: close\r\n");
        c.read_response().unwrap();
        let _ = c.read_rest();
    }
    p.set_behaviour(Behaviour::refuse());
    p.set_behaviour(Behaviour::ok());
    let mut c = Client::connect(p.addr());
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().status, 200);
}

#[test]
fn clear_and_recording_switch() {
    let p = Provider::start(Behaviour::ok());
    let mut c = Client::connect(p.addr());
    c.get("/", "X-Request-Id: a\r\n");
    c.read_response().unwrap();
    p.clear();
    assert_eq!(p.request_count(), 0);
    assert!(p.requests().is_empty());
    p.set_recording(false);
    c.get("/", "X-Request-Id: b\r\n");
    c.read_response().unwrap();
    assert_eq!(p.request_count(), 1);
    assert!(p.requests().is_empty());
    p.set_recording(true);
    c.get("/", "X-Request-Id: b\r\n");
    c.read_response().unwrap();
    assert_eq!(p.count_with_header("x-request-id", "b"), 1);
    assert_eq!(p.request_count(), 2);
}

#[test]
fn drop_closes_port_and_releases_stuck_connections() {
    let p = Provider::builder()
        .then(Behaviour::ok().stall_after_headers())
        .then(Behaviour::black_hole())
        .then(Behaviour::ok().delay(Duration::from_secs(30)))
        .start();
    let addr = p.addr();
    let mut clients: Vec<Client> = (0..3).map(|_| Client::connect(addr)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.get("/", "");
        // Script order is the order the provider read the requests.
        assert!(p.wait_for_requests(i + 1, Duration::from_secs(2)));
    }
    let mut idle = Client::connect(addr);
    idle.get("/", "");
    idle.read_response().unwrap();

    let start = Instant::now();
    drop(p);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        TcpStream::connect(addr).unwrap_err().kind(),
        ErrorKind::ConnectionRefused
    );
    // Every connection was closed by the server.
    clients.push(idle);
    for c in &mut clients {
        let (_, r) = c.read_rest();
        r.unwrap();
    }
}

#[test]
fn many_providers_start_and_stop() {
    for _ in 0..20 {
        let p = Provider::start(Behaviour::ok());
        let mut c = Client::connect(p.addr());
        c.get("/", "");
        c.read_response().unwrap();
    }
}

#[test]
fn throughput_several_keep_alive_connections() {
    let p = Provider::start(Behaviour::ok());
    let addr = p.addr();
    let per_conn = 1000;
    let start = Instant::now();
    let workers: Vec<_> = (0..4)
        .map(|w| {
            thread::spawn(move || {
                let mut c = Client::connect(addr);
                for i in 0..per_conn {
                    c.get("/", &format!("X-Request-Id: {w}-{i}\r\n"));
                    assert_eq!(c.read_response().unwrap().body, b"ok");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let elapsed = start.elapsed();
    assert_eq!(p.request_count(), 4 * per_conn);
    assert_eq!(p.connection_count(), 4);
    assert_eq!(p.count_with_header("x-request-id", "3-999"), 1);
    // Thousands per second even in a debug build on 2 cores.
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
}

#[test]
fn provider_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Provider>();
    let p = std::sync::Arc::new(Provider::start(Behaviour::ok()));
    let p2 = std::sync::Arc::clone(&p);
    thread::spawn(move || p2.set_behaviour(Behaviour::status(418)))
        .join()
        .unwrap();
    let mut c = Client::connect(p.addr());
    c.get("/", "");
    assert_eq!(c.read_response().unwrap().status, 418);
}

#[test]
fn close_with_unread_pipelined_data_is_not_a_reset() {
    let p = Provider::start(Behaviour::ok().body("x".repeat(100_000)));
    let mut c = Client::connect(p.addr());
    c.send("GET /1 HTTP/1.1\r\nConnection: close\r\n\r\nGET /2 HTTP/1.1\r\n\r\n");
    thread::sleep(Duration::from_millis(50));
    let r = c.read_response().unwrap();
    assert_eq!(r.body.len(), 100_000);
    let (rest, res) = c.read_rest();
    res.unwrap();
    assert!(rest.is_empty());
    assert_eq!(p.request_count(), 1);
}

#[test]
fn refusing_ports_are_never_handed_to_another_provider() {
    let refusing = Provider::start(Behaviour::refuse());
    let fixed = testkit::refused_addr();
    let others: Vec<Provider> = (0..200).map(|_| Provider::start(Behaviour::ok())).collect();
    for p in &others {
        assert_ne!(p.addr(), refusing.addr());
        assert_ne!(p.addr(), fixed);
    }
    for addr in [refusing.addr(), fixed] {
        let err = std::net::TcpStream::connect(addr).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    }
    // Switching a live provider to refuse keeps its port too.
    let switched = Provider::start(Behaviour::ok());
    switched.set_behaviour(Behaviour::refuse());
    let more: Vec<Provider> = (0..100).map(|_| Provider::start(Behaviour::ok())).collect();
    assert!(more.iter().all(|p| p.addr() != switched.addr()));
    switched.set_behaviour(Behaviour::ok());
}
