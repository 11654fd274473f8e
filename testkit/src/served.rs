//! What a server on threads of its own keeps in order to stop (the HTTP/2 provider and
//! the TLS front): the flag its loops read, a handle of every accepted socket (to shut
//! them down, which ends reads blocked on them), and every connection thread (to join).

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The connections of one server.
#[derive(Default)]
pub(crate) struct Served {
    stop: AtomicBool,
    sockets: Mutex<Vec<TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Served {
    /// Whether the server is stopping.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Serves `stream` on a thread of its own; the socket is shut when `serve` returns
    /// (the handle kept here would otherwise hold it open).
    pub(crate) fn spawn(&self, stream: TcpStream, serve: impl FnOnce(TcpStream) + Send + 'static) {
        let handle = stream.try_clone();
        if let Ok(h) = &handle {
            if let Ok(kept) = h.try_clone() {
                lock(&self.sockets).push(kept);
            }
        }
        let thread = std::thread::spawn(move || {
            serve(stream);
            if let Ok(h) = handle {
                let _ = h.shutdown(Shutdown::Both);
            }
        });
        lock(&self.threads).push(thread);
    }

    /// Stops: raises the flag, wakes the accept loop listening on `addr` (by connecting)
    /// and joins it, shuts every socket, joins every connection thread.
    pub(crate) fn stop(&self, addr: SocketAddr, accept: Option<JoinHandle<()>>) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
        if let Some(h) = accept {
            let _ = h.join();
        }
        for s in lock(&self.sockets).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads: Vec<_> = lock(&self.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}
