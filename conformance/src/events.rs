//! The event-stream fault run, the same on every runtime: real event-stream providers on
//! loopback ([`testkit::sse`]) that break connections in every way a stream meets (a reset
//! mid-event, a black hole, a 503 with `Retry-After`, a clean close, a provider killed),
//! with and without shared event ids, for safe and unsafe methods. A runtime's test opens
//! each [`Run`]'s stream with its own adapter, hands every item to [`Run::record`] and
//! calls [`Run::finish`], which checks what was delivered and measures how long each fault
//! took to heal.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_core::sse::{Notice, StreamItem, StreamSettings};
use baton_core::{Backoff, Endpoint, Jitter, Policy, PolicyBuilder};
use http::Method;
use testkit::sse::{Conn, EventServer, Ids};

/// Events in each feed.
pub const FEED: usize = 16;
/// The idle timeout of every run.
pub const IDLE: Duration = Duration::from_millis(300);

/// One scenario of the fault run.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Its name, for messages.
    pub name: &'static str,
    method: Method,
    ids: Ids,
    shared: bool,
    /// Each server's script (server `a` first).
    scripts: Vec<Vec<Conn>>,
    /// Kill server `a` once this many events were delivered.
    kill_a_after: Option<usize>,
    want: Want,
}

/// What a scenario must deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Want {
    /// The whole feed once, in order, then the end; `restarts` Restarted items between.
    Feed { restarts: usize },
    /// `n` events, then an interruption naming `n`.
    Interrupted(usize),
}

/// Every scenario.
pub fn specs() -> Vec<Spec> {
    let every_fault = vec![
        Conn::MidEvent(3),
        Conn::BlackHole(3),
        Conn::Busy(1),
        Conn::Events(3),
    ];
    vec![
        Spec {
            name:
                "shared ids: reset mid-event, black hole, 503 Retry-After, close, provider killed",
            method: Method::GET,
            ids: Ids::Shared,
            shared: true,
            scripts: vec![every_fault.clone(), vec![]],
            kill_a_after: Some(12),
            want: Want::Feed { restarts: 0 },
        },
        Spec {
            name: "own ids: the same faults, then a long Retry-After moves the stream on",
            method: Method::GET,
            ids: Ids::Own,
            shared: false,
            scripts: vec![
                vec![
                    Conn::MidEvent(3),
                    Conn::BlackHole(3),
                    Conn::Busy(1),
                    Conn::Events(3),
                    Conn::Busy(3600),
                ],
                vec![],
            ],
            kill_a_after: None,
            want: Want::Feed { restarts: 1 },
        },
        Spec {
            name: "own ids: provider killed, restart on the backup",
            method: Method::GET,
            ids: Ids::Own,
            shared: false,
            scripts: vec![vec![], vec![]],
            kill_a_after: Some(5),
            want: Want::Feed { restarts: 1 },
        },
        Spec {
            name: "POST with ids: resumes at its own provider only",
            method: Method::POST,
            ids: Ids::Own,
            shared: false,
            scripts: vec![vec![Conn::MidEvent(2), Conn::Events(4)], vec![]],
            kill_a_after: None,
            want: Want::Feed { restarts: 0 },
        },
        Spec {
            name: "POST without ids: interrupted, never re-sent",
            method: Method::POST,
            ids: Ids::None,
            shared: false,
            scripts: vec![vec![Conn::MidEvent(2)], vec![]],
            kill_a_after: None,
            want: Want::Interrupted(2),
        },
    ]
}

/// What the consumer got, when.
#[derive(Debug, Clone)]
enum Got {
    Event {
        endpoint: String,
        data: String,
        at: Instant,
    },
    Restarted {
        endpoint: String,
    },
    Error(String),
}

/// One scenario under way.
pub struct Run {
    spec: Spec,
    servers: Vec<EventServer>,
    got: Vec<Got>,
    notices: Arc<Mutex<Vec<(Instant, Notice)>>>,
    /// Waits inside the connections' calls (backoff, `Retry-After`), from the policy's
    /// event sink.
    call_waits: Arc<Mutex<Vec<(Instant, Duration)>>>,
    started: Instant,
    killed_at: Option<Instant>,
}

/// How long faults took to heal in one run: from the fault to the first event of the next
/// connection that opened, and the part of it that was a chosen wait: the stream's
/// reconnection delays and idle timeout, and the waits inside a connection's call (its
/// backoff, a `Retry-After` it honoured before retrying). The rest is connecting and the
/// server's interval before its first event (5 ms).
#[derive(Debug, Clone, Default)]
pub struct Healing {
    /// Per fault: (fault to next event, of which chosen waits).
    pub gaps: Vec<(Duration, Duration)>,
}

impl Healing {
    /// The median and worst of fault-to-next-event, and of its rest beyond the waits.
    pub fn summary(&self) -> String {
        let mut total: Vec<Duration> = self.gaps.iter().map(|g| g.0).collect();
        let mut rest: Vec<Duration> = self.gaps.iter().map(|g| g.0.saturating_sub(g.1)).collect();
        total.sort();
        rest.sort();
        let mid = |v: &[Duration]| v.get(v.len() / 2).copied().unwrap_or_default();
        let max = |v: &[Duration]| v.last().copied().unwrap_or_default();
        format!(
            "{} faults: fault to next event median {:.0?}, worst {:.0?}; beyond the chosen waits median {:.1?}, worst {:.1?}",
            self.gaps.len(),
            mid(&total),
            max(&total),
            mid(&rest),
            max(&rest)
        )
    }
}

impl Spec {
    /// Starts the scenario's servers.
    pub fn start(&self) -> Run {
        let servers = self
            .scripts
            .iter()
            .zip(["a", "b"])
            .map(|(script, name)| {
                let mut b = EventServer::builder(name, FEED)
                    .ids(self.ids)
                    .interval(Duration::from_millis(5));
                for c in script {
                    b = b.then(*c);
                }
                b.start()
            })
            .collect();
        Run {
            spec: self.clone(),
            servers,
            got: Vec::new(),
            notices: Arc::default(),
            call_waits: Arc::default(),
            started: Instant::now(),
            killed_at: None,
        }
    }
}

impl Run {
    /// The policy over the run's servers (`a` first), with short timeouts.
    pub fn policy(&self) -> PolicyBuilder {
        let mut b = Policy::builder()
            .connect_timeout(Duration::from_millis(300))
            .attempt_timeout(Duration::from_millis(800))
            .backoff(Backoff {
                initial: Duration::from_millis(10),
                multiplier: 2.0,
                max: Duration::from_millis(40),
                jitter: Jitter::Full,
            });
        for (s, id) in self.servers.iter().zip(["a", "b"]) {
            b = b.endpoint(Endpoint::new(id, s.url()));
        }
        let waits = self.call_waits.clone();
        b.on_event(move |e| {
            if let baton_core::EventKind::BackoffWait { delay, .. } = e.kind {
                waits.lock().unwrap().push((Instant::now(), delay));
            }
        })
    }

    /// The method the stream is opened with.
    pub fn method(&self) -> Method {
        self.spec.method.clone()
    }

    /// The request body: a small JSON document for POST, none for GET.
    pub fn body(&self) -> Option<&'static str> {
        (self.spec.method == Method::POST).then_some(r#"{"job":"report"}"#)
    }

    /// The stream settings: short reconnection delays and a 300 ms idle timeout.
    pub fn settings(&self) -> StreamSettings {
        StreamSettings {
            shared_event_ids: self.spec.shared,
            idle_timeout: Some(IDLE),
            backoff: Backoff {
                initial: Duration::from_millis(20),
                multiplier: 2.0,
                max: Duration::from_millis(200),
                jitter: Jitter::Proportional(0.25),
            },
            ..StreamSettings::default()
        }
    }

    /// An observer to give the stream's `on_notice`.
    pub fn notice_sink(&self) -> impl Fn(&Notice) + Send + Sync + 'static {
        let notices = self.notices.clone();
        move |n| notices.lock().unwrap().push((Instant::now(), n.clone()))
    }

    /// Takes the stream's next item (`None`: it ended); says whether to read on. Kills
    /// server `a` when the scenario says so.
    pub fn record<E: std::fmt::Display>(&mut self, item: Option<Result<StreamItem, E>>) -> bool {
        let go_on = match item {
            None => false,
            Some(Err(e)) => {
                self.got.push(Got::Error(e.to_string()));
                false
            }
            Some(Ok(StreamItem::Event { endpoint, event })) => {
                self.got.push(Got::Event {
                    endpoint: endpoint.to_string(),
                    data: event.data,
                    at: Instant::now(),
                });
                true
            }
            Some(Ok(StreamItem::Restarted { endpoint })) => {
                self.got.push(Got::Restarted {
                    endpoint: endpoint.to_string(),
                });
                true
            }
            Some(Ok(other)) => panic!("an item this run does not know: {other:?}"),
        };
        let delivered = self
            .got
            .iter()
            .filter(|g| matches!(g, Got::Event { .. }))
            .count();
        if self.spec.kill_a_after == Some(delivered) && self.killed_at.is_none() {
            self.killed_at = Some(Instant::now());
            self.servers[0].kill();
        }
        go_on && self.started.elapsed() < Duration::from_secs(30)
    }

    /// Checks what was delivered; returns how the faults healed.
    pub fn finish(self) -> Result<Healing, String> {
        let name = self.spec.name;
        let fail = |why: String| Err(format!("{name}: {why}\n  got: {:?}", self.got));
        let data: Vec<&str> = self
            .got
            .iter()
            .filter_map(|g| match g {
                Got::Event { data, .. } => Some(data.as_str()),
                _ => None,
            })
            .collect();
        let restarts = self
            .got
            .iter()
            .filter(|g| matches!(g, Got::Restarted { .. }))
            .count();
        let errors: Vec<&String> = self
            .got
            .iter()
            .filter_map(|g| match g {
                Got::Error(e) => Some(e),
                _ => None,
            })
            .collect();
        match &self.spec.want {
            Want::Feed { restarts: want } => {
                if !errors.is_empty() {
                    return fail(format!("the stream failed: {errors:?}"));
                }
                if restarts != *want {
                    return fail(format!("{restarts} restarts, expected {want}"));
                }
                // Each segment between restarts: the feed from 0, in order, without a gap;
                // the last one whole.
                // After a restart, every event comes from the endpoint it named.
                let mut segments: Vec<Vec<&str>> = vec![vec![]];
                let mut on: Option<&str> = None;
                for g in &self.got {
                    match g {
                        Got::Event { endpoint, .. } if on.is_some_and(|o| o != endpoint) => {
                            return fail(format!(
                                "an event from {endpoint} after a restart on {on:?}"
                            ));
                        }
                        Got::Event { data, .. } => segments.last_mut().unwrap().push(data),
                        Got::Restarted { endpoint } => {
                            on = Some(endpoint);
                            segments.push(vec![]);
                        }
                        Got::Error(_) => {}
                    }
                }
                for (i, seg) in segments.iter().enumerate() {
                    let whole = i + 1 == segments.len();
                    let want: Vec<String> = (0..if whole { FEED } else { seg.len() })
                        .map(|p| format!("event {p}"))
                        .collect();
                    if *seg != want {
                        return fail(format!(
                            "segment {i} is not the feed in order, each once: {seg:?}"
                        ));
                    }
                }
            }
            Want::Interrupted(n) => {
                if data.len() != *n
                    || errors.len() != 1
                    || !errors[0].contains(&format!("after {n} event(s)"))
                {
                    return fail(format!(
                        "expected {n} events then an interruption naming {n}"
                    ));
                }
                let seen: usize = self.servers.iter().map(|s| s.seen().len()).sum();
                if seen != 1 {
                    return fail(format!("the unsafe request was sent {seen} times"));
                }
            }
        }
        self.check_ids()?;
        Ok(self.healing())
    }

    /// A `Last-Event-ID` reaches only a server that issued it (or any, with shared ids), and
    /// an unsafe stream never reaches a second server.
    fn check_ids(&self) -> Result<(), String> {
        for (s, name) in self.servers.iter().zip(["a", "b"]) {
            for seen in s.seen() {
                if let Some(id) = &seen.last_event_id {
                    if !self.spec.shared && !id.starts_with(&format!("{name}-")) {
                        return Err(format!(
                            "{}: {name} was sent Last-Event-ID {id}",
                            self.spec.name
                        ));
                    }
                }
                if seen.accept.as_deref() != Some("text/event-stream") {
                    return Err(format!(
                        "{}: {name} was sent Accept {:?}",
                        self.spec.name, seen.accept
                    ));
                }
            }
        }
        if self.spec.method != Method::GET
            && self.spec.kill_a_after.is_none()
            && !self.servers[1].seen().is_empty()
        {
            return Err(format!(
                "{}: the unsafe stream reached the backup",
                self.spec.name
            ));
        }
        Ok(())
    }

    fn healing(&self) -> Healing {
        let notices = self.notices.lock().unwrap().clone();
        let call_waits = self.call_waits.lock().unwrap().clone();
        let events: Vec<Instant> = self
            .got
            .iter()
            .filter_map(|g| match g {
                Got::Event { at, .. } => Some(*at),
                _ => None,
            })
            .collect();
        let mut gaps = Vec::new();
        let cuts = self
            .servers
            .iter()
            .flat_map(|s| s.seen())
            .filter_map(|seen| Some((seen.cut_at?, seen.conn)));
        let kill = self.killed_at.map(|k| (k, Conn::Live));
        {
            for (cut, conn) in cuts.chain(kill) {
                // The next event is the first one of the next connection that opened.
                let opened = notices
                    .iter()
                    .find(|(t, n)| *t >= cut && matches!(n, Notice::Opened { .. }));
                let Some((opened, _)) = opened else { continue };
                let Some(next) = events.iter().find(|t| **t >= *opened) else {
                    continue;
                };
                let within = |t: &Instant| *t >= cut && t <= next;
                let mut waits: Duration = notices
                    .iter()
                    .filter(|(t, _)| within(t))
                    .filter_map(|(_, n)| match n {
                        Notice::Reconnecting { after, .. } => Some(*after),
                        _ => None,
                    })
                    .sum();
                waits += call_waits
                    .iter()
                    .filter(|(t, _)| within(t))
                    .map(|w| w.1)
                    .sum::<Duration>();
                if matches!(conn, Conn::BlackHole(_)) {
                    waits += IDLE;
                }
                gaps.push((*next - cut, waits));
            }
        }
        Healing { gaps }
    }
}
