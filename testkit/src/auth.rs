//! A provider that checks a bearer token: `200` when a request carries
//! `Authorization: Bearer <the token it accepts now>`, `401` otherwise. The accepted token
//! can be changed at run time (a rotation); every request's `Authorization` is recorded.
//!
//! ```
//! let s = testkit::auth::AuthServer::start("t1");
//! s.accept("t2");
//! assert!(s.seen().is_empty());
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

struct State {
    accepted: Mutex<String>,
    seen: Mutex<Vec<Option<String>>>,
    stop: AtomicBool,
}

/// A running token-checking provider on `127.0.0.1:0`; dropping it stops it.
pub struct AuthServer {
    addr: SocketAddr,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for AuthServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl AuthServer {
    /// Serves, accepting `token`.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    pub fn start(token: &str) -> AuthServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State {
            accepted: Mutex::new(token.to_string()),
            seen: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let s = state.clone();
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let s = s.clone();
                std::thread::spawn(move || serve(stream, &s));
            }
        });
        AuthServer {
            addr,
            state,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Accepts `token` from now on (the old one gets 401).
    pub fn accept(&self, token: &str) {
        *self.state.accepted.lock().unwrap() = token.to_string();
    }

    /// Every request's `Authorization` header, in arrival order.
    pub fn seen(&self) -> Vec<Option<String>> {
        self.state.seen.lock().unwrap().clone()
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// Answers requests on one keep-alive connection until the client closes it.
fn serve(stream: TcpStream, state: &State) {
    let _ = stream.set_nodelay(true);
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut r = BufReader::new(stream);
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let (mut auth, mut length) = (None, 0usize);
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 || line.trim_end().is_empty() {
                break;
            }
            if let Some((k, v)) = line.trim_end().split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "authorization" => auth = Some(v.trim().to_string()),
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let ok = auth.as_deref() == Some(&format!("Bearer {}", state.accepted.lock().unwrap()));
        state.seen.lock().unwrap().push(auth);
        let answer: &[u8] = if ok {
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        } else {
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 0\r\n\r\n"
        };
        if out.write_all(answer).is_err() {
            return;
        }
    }
}
