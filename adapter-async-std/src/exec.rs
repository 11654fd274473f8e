//! The executor of HTTP/2 connections.
//!
//! An HTTP/1.1 connection is driven inline by the future that uses it (no task). An
//! HTTP/2 connection is shared by every call to its endpoint at once, so it needs a task
//! of its own that reads frames for all of them: hyper's HTTP/2 client spawns that task
//! (and, for a request body still streaming, a task that feeds it) on the executor it is
//! given. That executor is this one: an `async-executor` run by one thread named
//! `baton-h2`, started the first time an HTTP/2 connection opens, the same whether the
//! calls run under async-std or smol (and never a tokio runtime). The tasks only move
//! bytes between the socket (registered with async-io's reactor) and the streams; no
//! policy runs there, and no timer: baton sets no HTTP/2 keep-alive.
//!
//! One thread is also a safety property: a `GOAWAY` is read by h2's connection task
//! between two polls of hyper's dispatch task, never inside one, so it reaches a request
//! only through its stream, and `classify` reads it as proof (`goaway_per_stream`). An
//! executor of several threads would have to turn that off.

use std::future::Future;
use std::sync::OnceLock;

use async_executor::Executor;

static EXECUTOR: Executor<'static> = Executor::new();

/// Spawns hyper's HTTP/2 tasks on baton's executor thread.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Exec;

impl<F> hyper::rt::Executor<F> for Exec
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        EXECUTOR.spawn(fut).detach();
    }
}

/// Starts the executor's thread (once); an HTTP/2 connection opens only after this
/// succeeded. The error says why the thread could not start.
pub(crate) fn start() -> std::io::Result<()> {
    static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
    STARTED
        .get_or_init(|| {
            std::thread::Builder::new()
                .name("baton-h2".into())
                .spawn(|| async_io::block_on(EXECUTOR.run(std::future::pending::<()>())))
                .map(drop)
                .map_err(|e| format!("cannot start the HTTP/2 executor thread: {e}"))
        })
        .clone()
        .map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawned_tasks_run_on_the_executor_thread() {
        let (tx, rx) = std::sync::mpsc::channel();
        start().unwrap();
        hyper::rt::Executor::execute(&Exec, async move {
            let _ = tx.send(std::thread::current().name().map(str::to_owned));
        });
        let name = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        assert_eq!(name.as_deref(), Some("baton-h2"));
    }
}
