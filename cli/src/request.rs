//! `baton request [PATH]`: one call; the response body (and nothing else) to stdout, or
//! to `-o FILE`, written as it arrives in constant memory.
//!
//! With `-i` the status line, the answering endpoint and the response headers go to
//! stderr before the body; with `--events` every engine event does (the final `result`
//! event carries the status). Errors always go to stderr as one `baton: ...` line naming
//! the attempts, the request id and the last cause.
//!
//! A body that breaks after the headers ends with exit status 7, and the part already
//! received has been written by then (like curl's exit 18): a caller that needs the whole
//! body or nothing checks the status (or writes to a file with `-o` and discards it on
//! failure). A body that cannot be written ends with 23.
//!
//! A progress meter (bytes, rate, elapsed) is drawn on stderr when stdout is not a
//! terminal and stderr is, unless `--silent`; it never goes to stdout.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use baton_core::Report;

use crate::args::RequestArgs;
use crate::body::{Decoded, Progress, Stop};
use crate::call::{CallSpec, ResponseHead};
use crate::runner::{content_encoding, BodySink, Runner};
use crate::{config, events};

/// Runs the call; returns the exit status.
pub fn run(args: RequestArgs) -> u8 {
    let t0 = Instant::now();
    let mut spec = match CallSpec::from_args(&args.call, &args.path) {
        Ok(s) => s,
        Err(e) => return crate::usage_error(&e),
    };
    if args.compressed {
        spec.ask_compressed();
    }
    let config = match config::resolve(&args.client) {
        Ok(c) => c,
        Err(e) => return crate::usage_error(&e),
    };
    let to_terminal = args.output.is_none() && std::io::stdout().is_terminal();
    let meter = !args.silent && !to_terminal && std::io::stderr().is_terminal();
    let sink = args.client.events.then(|| events::stderr_sink(t0));
    let runner = match Runner::new(args.client.runtime, config, sink) {
        Ok(r) => r,
        Err(e) => return crate::usage_error(&e),
    };
    let out = match &args.output {
        Some(path) => match Output::open(path) {
            Ok(out) => out,
            Err(e) => return crate::usage_error(&format!("--output {}: {e}", path.display())),
        },
        None => Output::Stdout,
    };
    let mut body = StreamOut {
        out: Some(out),
        failed: None,
        decoder: None,
        progress: meter.then(|| Progress::new(Box::new(std::io::stderr()), Instant::now())),
        include: args.include,
        compressed: args.compressed,
    };
    let result = runner.run_into(&spec, &mut body);
    if let Some(p) = body.progress.take() {
        p.done(Instant::now());
    }
    // No head arrived: the file is left as it was (one this call created is removed).
    if let Some(Output::File {
        created: Some(path),
        ..
    }) = body.out.take()
    {
        let _ = std::fs::remove_file(path);
    }
    if let Some(f) = &result.failure {
        eprintln!("baton: {}", f.message);
    }
    result.exit_code()
}

/// Where the body goes.
enum Output {
    Stdout,
    /// `-o FILE`, opened but not yet emptied; `created`: the path, when this call made it.
    File {
        file: std::fs::File,
        created: Option<std::path::PathBuf>,
    },
}

impl Output {
    /// `-o FILE`, opened once the client is built, before anything is sent (a path that
    /// cannot be written is a usage error then), but emptied only when a response head
    /// arrives: a call that fails before it leaves an existing file as it was, and removes
    /// one it created. Whatever is at the path already (a file, a symlink, even a dangling
    /// one, a device, a pipe) was not created here and is never removed (a file made
    /// through a dangling symlink is left behind, empty).
    fn open(path: &std::path::Path) -> std::io::Result<Output> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true);
        if std::fs::symlink_metadata(path).is_err() {
            // Created here only if nothing appeared at the path meanwhile.
            match options.clone().create_new(true).open(path) {
                Ok(file) => {
                    let created = Some(path.to_path_buf());
                    return Ok(Output::File { file, created });
                }
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
                Err(_) => {}
            }
        }
        let file = options.create(true).open(path)?;
        Ok(Output::File {
            file,
            created: None,
        })
    }

    /// The writer for a body that is arriving (a regular file emptied first: a device or
    /// a pipe cannot be, and need not be).
    fn writer(self) -> std::io::Result<Box<dyn Write>> {
        match self {
            Output::Stdout => Ok(Box::new(std::io::stdout())),
            Output::File { file, .. } => {
                if file.metadata()?.is_file() {
                    file.set_len(0)?;
                }
                Ok(Box::new(std::io::BufWriter::new(file)))
            }
        }
    }
}

/// Writes the body out as it arrives (decoded with `--compressed`).
struct StreamOut {
    /// Until a response head arrives.
    out: Option<Output>,
    /// Emptying the file failed when the head arrived.
    failed: Option<std::io::Error>,
    decoder: Option<Decoded<Box<dyn Write>>>,
    progress: Option<Progress>,
    include: bool,
    compressed: bool,
}

impl BodySink for StreamOut {
    fn head(&mut self, head: &ResponseHead, report: &Report) {
        if self.include {
            print_head(head, report);
        }
        if let Some(out) = self.out.take() {
            match out.writer() {
                Ok(w) => {
                    self.decoder = Some(Decoded::new(w, self.compressed, content_encoding(head)))
                }
                Err(e) => self.failed = Some(e),
            }
        }
    }

    fn chunk(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        if let Some(e) = self.failed.take() {
            return Err(Stop::Output(e));
        }
        if let Some(p) = &mut self.progress {
            p.add(bytes.len(), Instant::now());
        }
        match &mut self.decoder {
            Some(d) => d.chunk(bytes),
            None => Ok(()),
        }
    }

    fn end(&mut self) -> Result<(), Stop> {
        if let Some(e) = self.failed.take() {
            return Err(Stop::Output(e));
        }
        match self.decoder.take() {
            Some(d) => d.finish().map(drop),
            None => Ok(()),
        }
    }
}

/// `-i`: the status line, the endpoint and the headers, to stderr.
fn print_head(head: &ResponseHead, report: &Report) {
    let reason = http::StatusCode::from_u16(head.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "< HTTP {} {reason} (endpoint {:?}, {} attempt(s), {:.1} ms, request id {})",
        head.status,
        head.endpoint,
        report.attempts.len(),
        report.elapsed.as_secs_f64() * 1e3,
        report.request_id,
    );
    for (k, v) in &head.headers {
        let _ = writeln!(err, "< {k}: {v}");
    }
}
