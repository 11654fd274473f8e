//! The client's configuration: the TOML file (`--config`) and the flags that override it.
//!
//! The file holds `[[endpoint]]` tables (id, url, optional group, tier and weight, timeouts,
//! attempts per round, backoff, headers, `http_version`, `[endpoint.tls]`) and a
//! `[policy]` table that is exactly the serde form of `baton_core::Settings` (every key
//! optional, defaults of SPEC 8, unknown keys rejected). `cli/examples/policy.toml` is a
//! complete commented example. Flags are applied on top, then the core validates the
//! whole policy when the client is built (a bad setting is named with its value).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use baton_core::{
    BreakerRule, Endpoint, Hedge, Permission, PermissionOverride, Policy, PolicyBuilder, Settings,
    Unavailable, UrlMode,
};
use serde::Deserialize;

use crate::args::{ClientArgs, CooldownMode};

/// The `--config` file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Endpoints in priority order.
    #[serde(default, rename = "endpoint")]
    pub endpoints: Vec<EndpointConfig>,
    /// The policy (`baton_core::Settings`).
    #[serde(default)]
    pub policy: Settings,
    /// Permissions per method (`[permissions.POST]`): the policy's permission function.
    #[serde(default)]
    pub permissions: BTreeMap<String, PermissionConfig>,
}

/// One `[permissions.METHOD]` table: the retry and failover permissions of every call of
/// that method (`never`, `if_undelivered`, `always`); a key left out defers to the spec's
/// inference (SPEC 2.2). A call's own `--retry` / `--failover` still wins.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionConfig {
    /// Retry permission.
    #[serde(default)]
    pub retry: Option<Permission>,
    /// Failover permission.
    #[serde(default)]
    pub failover: Option<Permission>,
}

/// One `[[endpoint]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// Unique id.
    pub id: String,
    /// Absolute http/https URL (a complete destination, or a base with `url_mode = "base"`).
    pub url: String,
    /// Idempotency group (SPEC 1.1).
    #[serde(default)]
    pub group: Option<String>,
    /// This endpoint's connect timeout.
    #[serde(default, deserialize_with = "opt_duration")]
    pub connect_timeout: Option<Duration>,
    /// This endpoint's attempt timeout.
    #[serde(default, deserialize_with = "opt_duration")]
    pub attempt_timeout: Option<Duration>,
    /// Priority tier (lower first; default: the endpoint's own, at its list position).
    #[serde(default)]
    pub tier: Option<u32>,
    /// Weight within the tier (default 1).
    #[serde(default)]
    pub weight: Option<u32>,
    /// This endpoint's attempts per round.
    #[serde(default)]
    pub attempts_per_endpoint: Option<u32>,
    /// This endpoint's HTTP version (`auto`, `http1`, `http2`; else the policy's).
    #[serde(default)]
    pub http_version: Option<baton_core::HttpVersion>,
    /// This endpoint's TLS files (`[endpoint.tls]`: `ca_file`, `client_cert`,
    /// `client_key`; over the policy's key by key).
    #[serde(default)]
    pub tls: Option<baton_core::Tls>,
    /// This endpoint's backoff (`[endpoint.backoff]`, the keys of `[policy.backoff]`).
    #[serde(default)]
    pub backoff: Option<baton_core::BackoffOverride>,
    /// Headers sent to this endpoint only (credentials).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A token command (`[endpoint.auth]`): the endpoint's credential, refreshed by the
    /// engine (SPEC 9).
    #[serde(default)]
    pub auth: Option<crate::auth::AuthConfig>,
}

pub(crate) fn opt_duration<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> Result<Option<Duration>, D::Error> {
    #[derive(Deserialize)]
    struct Wrap(#[serde(with = "baton_core::serde_duration")] Duration);
    Ok(Option::<Wrap>::deserialize(de)?.map(|w| w.0))
}

impl EndpointConfig {
    fn to_endpoint(&self) -> Endpoint {
        let mut e = Endpoint::new(self.id.clone(), self.url.clone());
        if let Some(g) = &self.group {
            e = e.group(g.clone());
        }
        if let Some(t) = self.connect_timeout {
            e = e.connect_timeout(t);
        }
        if let Some(t) = self.attempt_timeout {
            e = e.attempt_timeout(t);
        }
        if let Some(t) = self.tier {
            e = e.tier(t);
        }
        if let Some(w) = self.weight {
            e = e.weight(w);
        }
        if let Some(n) = self.attempts_per_endpoint {
            e = e.attempts_per_endpoint(n);
        }
        if let Some(b) = self.backoff {
            e = e.backoff(b);
        }
        for (k, v) in &self.headers {
            e = e.header(k, v);
        }
        if let Some(v) = self.http_version {
            e = e.http_version(v);
        }
        if let Some(t) = &self.tls {
            e = e.tls(t.clone());
        }
        e
    }
}

/// Reads and parses a config file.
pub fn load(path: &Path) -> Result<ConfigFile, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("config file {}: {e}", path.display()))
}

/// A TOML error as its message and where it is (`line L, column C`), without the source
/// line the parser's own text quotes: that line may hold an endpoint URL's key or a
/// header's secret (SPEC 4), whatever the typo on it.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = without_string_value(e.message().trim_end());
    let Some(span) = e.span() else {
        return message.to_string();
    };
    let before = &text.as_bytes()[..span.start.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    format!("line {line}, column {column}: {message}")
}

/// A wrong-type message without the string it quotes (`invalid type: string "Bearer ...",
/// expected a map` for `headers = "Bearer ..."`): a string where a table belongs is likely
/// a secret value.
fn without_string_value(message: &str) -> String {
    const QUOTED: &str = "invalid type: string \"";
    match (message.find(QUOTED), message.rfind("\", expected")) {
        (Some(at), Some(end)) if end >= at + QUOTED.len() => {
            format!(
                "{}invalid type: a string{}",
                &message[..at],
                &message[end + 1..]
            )
        }
        _ => message.to_string(),
    }
}

/// Parses config text. Header names are case-insensitive: two keys of one endpoint's
/// `[endpoint.headers]` that differ only in case would send the header twice, so they are
/// refused.
pub fn parse(text: &str) -> Result<ConfigFile, String> {
    let file: ConfigFile = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    for e in &file.endpoints {
        let names: Vec<&String> = e.headers.keys().collect();
        for (i, a) in names.iter().enumerate() {
            if let Some(b) = names[i + 1..].iter().find(|b| b.eq_ignore_ascii_case(a)) {
                return Err(format!(
                    "endpoint {:?}: headers {a:?} and {b:?} name one header; write it once",
                    e.id
                ));
            }
        }
    }
    Ok(file)
}

/// Endpoints and settings, after the file and the flags.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Endpoints in priority order.
    pub endpoints: Vec<Endpoint>,
    /// The policy's plain settings.
    pub settings: Settings,
    /// Permissions per method (the file's `[permissions]`).
    pub permissions: Vec<(http::Method, PermissionOverride)>,
    /// The token commands of the endpoints that have one.
    pub auth: crate::auth::Commands,
}

impl ClientConfig {
    /// The policy builder of this configuration: endpoints, settings, and a permission
    /// function when the file has `[permissions]`.
    pub fn policy(self) -> PolicyBuilder {
        let builder = Policy::builder()
            .endpoints(self.endpoints)
            .settings(self.settings);
        if self.permissions.is_empty() {
            return builder;
        }
        let table = self.permissions;
        builder.permission_fn(move |req| {
            table
                .iter()
                .find(|(m, _)| m == req.method)
                .map_or_else(PermissionOverride::default, |(_, p)| *p)
        })
    }
}

/// The `[permissions]` tables with their methods parsed; a bad method name is an error
/// naming it.
fn permissions(
    table: &BTreeMap<String, PermissionConfig>,
) -> Result<Vec<(http::Method, PermissionOverride)>, String> {
    table
        .iter()
        .map(|(name, p)| {
            let method = http::Method::from_bytes(name.as_bytes())
                .map_err(|_| format!("[permissions.{name}]: {name:?} is not an HTTP method"))?;
            // Methods are case-sensitive: `post` would be an extension method no POST
            // ever matches.
            let upper = name.to_ascii_uppercase();
            if upper != *name && crate::runner::STANDARD_METHODS.contains(&upper.as_str()) {
                return Err(format!(
                    "[permissions.{name}]: methods are case-sensitive; write [permissions.{upper}]"
                ));
            }
            let over = PermissionOverride {
                retry: p.retry,
                failover: p.failover,
            };
            Ok((method, over))
        })
        .collect()
}

/// Parses one `-e ID=URL`. A value that is not one (a bare URL, whose `=` may sit in its
/// query) is quoted with its URLs cut to their origins: the path or query of a forgotten
/// `ID=` may hold a key.
fn endpoint_flag(text: &str) -> Result<Endpoint, String> {
    match text.split_once('=') {
        Some((id, url)) if !id.is_empty() && !url.is_empty() && !id.contains("://") => {
            Ok(Endpoint::new(id, url))
        }
        _ => Err(format!(
            "--endpoint {:?}: expected ID=URL, e.g. primary=https://a.example/",
            baton_core::scrub_urls(text)
        )),
    }
}

/// Combines `--config` and the flags.
pub fn resolve(args: &ClientArgs) -> Result<ClientConfig, String> {
    let file = match &args.config {
        Some(path) => load(path)?,
        None => ConfigFile::default(),
    };
    let (endpoints, auths): (Vec<Endpoint>, Vec<Option<crate::auth::AuthConfig>>) =
        if args.endpoints.is_empty() {
            file.endpoints
                .iter()
                .map(|e| (e.to_endpoint(), e.auth.clone()))
                .unzip()
        } else {
            let eps = args
                .endpoints
                .iter()
                .map(|e| endpoint_flag(e))
                .collect::<Result<Vec<_>, _>>()?;
            let none = vec![None; eps.len()];
            (eps, none)
        };
    let (endpoints, auth) = with_auth(endpoints, auths, args.auth_command.as_deref())?;
    if endpoints.is_empty() {
        return Err(
            "no endpoints: give at least one -e ID=URL, or a --config file with [[endpoint]] tables"
                .into(),
        );
    }
    let permissions = permissions(&file.permissions)?;
    let mut s = file.policy;
    apply_flags(&mut s, args);
    Ok(ClientConfig {
        endpoints,
        settings: s,
        permissions,
        auth,
    })
}

/// Gives every endpoint with a token command (its own `[endpoint.auth]`, else
/// `--auth-command`) a credential slot; returns the commands by endpoint id.
fn with_auth(
    endpoints: Vec<Endpoint>,
    auths: Vec<Option<crate::auth::AuthConfig>>,
    every: Option<&str>,
) -> Result<(Vec<Endpoint>, crate::auth::Commands), String> {
    let every = every.map(crate::auth::AuthConfig::shell);
    let mut commands = BTreeMap::new();
    let mut out = Vec::with_capacity(endpoints.len());
    for (e, own) in endpoints.into_iter().zip(auths) {
        match own.or_else(|| every.clone()) {
            Some(a) => {
                let settings = a.settings(e.id())?;
                commands.insert(e.id().to_owned(), a.command);
                out.push(e.credential(settings));
            }
            None => out.push(e),
        }
    }
    Ok((out, crate::auth::Commands::new(commands)))
}

/// Applies the policy flags over the settings.
pub fn apply_flags(s: &mut Settings, args: &ClientArgs) {
    if args.base {
        s.url_mode = UrlMode::Base;
    }
    if let Some(d) = args.timeout {
        s.attempt_timeout = d;
    }
    if let Some(d) = args.connect_timeout {
        s.connect_timeout = d;
    }
    if let Some(d) = args.deadline {
        s.deadline = Some(d);
    }
    if let Some(d) = args.body_timeout {
        s.body_timeout = Some(d);
    }
    if let Some(n) = args.attempts_per_endpoint {
        s.attempts_per_endpoint = Some(n);
    }
    if let Some(n) = args.max_attempts {
        s.max_attempts = Some(n);
    }
    if args.http1_1 {
        s.http_version = baton_core::HttpVersion::Http1;
    }
    if args.http2 {
        s.http_version = baton_core::HttpVersion::Auto;
    }
    if args.http2_prior_knowledge {
        s.http_version = baton_core::HttpVersion::Http2;
    }
    if let Some(f) = &args.cacert {
        s.tls.ca_file = Some(f.clone());
    }
    if args.cert.is_some() || args.key.is_some() {
        s.tls.client_cert = args.cert.clone();
        s.tls.client_key = args.key.clone();
    }
    if args.no_env_proxies {
        s.env_proxies = false;
    }
    if let Some(n) = args.max_redirects {
        s.max_redirects = n;
    }
    // Each set on its own (SPEC 2.3): extending the set of reads never makes keyed writes
    // repeat. An invalid code is reported by core's validation (only 4xx and 5xx trigger).
    for &c in &args.trigger_status {
        insert_code(&mut s.trigger_statuses, c);
    }
    for &c in &args.key_trigger_status {
        insert_code(&mut s.key_trigger_statuses, c);
    }
    for &c in &args.not_processed {
        insert_code(&mut s.not_processed, c);
    }
    if let Some(n) = args.cooldown_threshold {
        s.breaker.rule = BreakerRule::Consecutive { failures: n };
    }
    if let Some(d) = args.cooldown {
        s.breaker.open = d;
        if s.breaker.max_open < d {
            s.breaker.max_open = d;
        }
    }
    if let Some(m) = args.cooldown_mode {
        s.unavailable = match m {
            CooldownMode::Last => Unavailable::TryLast,
            CooldownMode::Skip => Unavailable::Skip,
        };
    }
    if let Some(d) = args.hedge_after {
        s.hedge = Some(Hedge {
            after: d,
            ..s.hedge.unwrap_or(Hedge::after(d))
        });
    }
}

fn insert_code(set: &mut baton_core::StatusSet, code: u16) {
    // The flags only accept 100..=999 (clap checks the range), which `insert` always
    // takes; whether the code may trigger at all is the core's validation.
    set.insert(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_policy_file_holds_the_demo_settings() {
        let file = parse(include_str!("../examples/demo.toml")).unwrap();
        let expected = Settings {
            url_mode: UrlMode::Base,
            attempt_timeout: Duration::from_millis(400),
            connect_timeout: Duration::from_millis(400),
            breaker: baton_core::Breaker {
                rule: BreakerRule::Consecutive { failures: 2 },
                open: Duration::from_secs(1),
                ..baton_core::Breaker::default()
            },
            ..Settings::default()
        };
        assert_eq!(file.policy, expected);
        let ids: Vec<&str> = file.endpoints.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["primary", "backup"]);
    }

    #[test]
    fn permissions_tables_become_the_permission_function() {
        let file = parse(
            "[[endpoint]]\nid = \"a\"\nurl = \"https://a.example/\"\n\
             [permissions.POST]\nfailover = \"always\"\n",
        )
        .unwrap();
        let table = permissions(&file.permissions).unwrap();
        assert_eq!(table.len(), 1);
        assert_eq!(table[0].0, http::Method::POST);
        assert_eq!(table[0].1.failover, Some(Permission::Always));
        assert_eq!(table[0].1.retry, None);

        let bad = parse("[permissions.\"P OST\"]\nretry = \"always\"\n").unwrap();
        let err = permissions(&bad.permissions).unwrap_err();
        assert!(err.contains("[permissions.P OST]"), "{err}");
        let lower = parse("[permissions.post]\nretry = \"always\"\n").unwrap();
        let err = permissions(&lower.permissions).unwrap_err();
        assert!(err.contains("write [permissions.POST]"), "{err}");
        let unknown = parse("[permissions.POST]\nretries = \"always\"\n").unwrap_err();
        assert!(unknown.contains("retries"), "{unknown}");
    }

    #[test]
    fn example_policy_file_parses_and_builds() {
        let text = include_str!("../examples/policy.toml");
        let file = parse(text).unwrap();
        assert_eq!(file.endpoints.len(), 3);
        let eps: Vec<Endpoint> = file.endpoints.iter().map(|e| e.to_endpoint()).collect();
        assert_eq!(eps[0].group_name(), Some("pay"));
        assert_eq!(
            eps[0].attempt_timeout_override(),
            Some(Duration::from_secs(10))
        );
        assert!(eps[0].headers().contains_key("authorization"));
        assert_eq!((eps[0].tier_of(), eps[0].weight_of()), (Some(0), 2));
        assert_eq!((eps[2].tier_of(), eps[2].weight_of()), (Some(1), 1));
        let s = &file.policy;
        assert_eq!(s.url_mode, UrlMode::Base);
        assert_eq!(s.attempt_timeout, Duration::from_secs(10));
        assert_eq!(s.breaker.rule, BreakerRule::Consecutive { failures: 3 });
        assert!(s.not_processed.contains_code(429));
        let rl = s.rate_limit.expect("the example sets a rate limit");
        assert_eq!(rl.scope, baton_core::LimitScope::Endpoint);
        assert_eq!(
            rl.limiter,
            baton_core::Limiter::TokenBucket {
                capacity: 50,
                per_second: 25.0
            }
        );
        let policy = baton_core::Policy::builder()
            .endpoints(eps)
            .settings(file.policy)
            .build();
        assert!(policy.is_ok(), "{policy:?}");
    }

    /// SPEC 8: proportional jitter chosen without a factor uses 0.25; a factor can be
    /// given, and an unknown form is an error naming the value.
    #[test]
    fn jitter_takes_its_names_and_a_factor() {
        let jitter = |value: &str| {
            parse(&format!("[policy.backoff]\njitter = {value}\n")).map(|f| f.policy.backoff.jitter)
        };
        assert_eq!(
            jitter("\"proportional\""),
            Ok(baton_core::Jitter::PROPORTIONAL)
        );
        assert_eq!(
            jitter("{ proportional = 0.1 }"),
            Ok(baton_core::Jitter::Proportional(0.1))
        );
        assert_eq!(jitter("\"none\""), Ok(baton_core::Jitter::None));
        assert_eq!(jitter("\"full\""), Ok(baton_core::Jitter::Full));
        let err = jitter("\"wobbly\"").unwrap_err();
        assert!(
            err.contains("wobbly") && err.contains("proportional"),
            "{err}"
        );
        let err = jitter("{ proportional = 0.1, colour = 1 }").unwrap_err();
        assert!(err.contains("colour"), "{err}");
    }

    /// An unknown key inside a breaker rule or a limiter table is an error, as in every
    /// other table; a failure-rate rule's keys left out take SPEC 8's defaults.
    #[test]
    fn rule_and_limiter_tables_reject_unknown_keys_and_default_the_rest() {
        let typo = "[policy.breaker.rule.failure_rate]\nslow_cal = \"2s\"\n";
        let err = parse(typo).unwrap_err();
        assert!(err.contains("slow_cal"), "{err}");
        let misplaced = "[policy.breaker.rule.consecutive]\nfailures = 3\nopen = \"60s\"\n";
        let err = parse(misplaced).unwrap_err();
        assert!(err.contains("open"), "{err}");
        let burst = "[policy.rate_limit.limiter.token_bucket]\ncapacity = 5\n\
                     per_second = 1.0\nburst = 100\n";
        let err = parse(burst).unwrap_err();
        assert!(err.contains("burst"), "{err}");
        let empty = parse("[policy.breaker.rule.failure_rate]\n").unwrap();
        assert_eq!(empty.policy.breaker.rule, BreakerRule::failure_rate());
    }

    #[test]
    fn one_header_written_twice_in_two_cases_is_refused() {
        let text = "[[endpoint]]\nid = \"a\"\nurl = \"https://a.example/\"\n\
                    [endpoint.headers]\nAuthorization = \"Bearer a\"\nauthorization = \"Bearer b\"\n";
        let err = parse(text).unwrap_err();
        assert!(
            err.contains("\"a\"") && err.contains("Authorization"),
            "{err}"
        );
        assert!(!err.contains("Bearer"), "{err}");
    }

    /// Every seed round-trips through a policy file, those above 2^63 - 1 as text: a
    /// counterexample written with one replays.
    #[test]
    fn every_seed_round_trips_through_toml() {
        for seed in [0, 7, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX] {
            let settings = Settings {
                seed: Some(seed),
                ..Settings::default()
            };
            let text = toml::to_string(&settings).unwrap();
            let back: Settings = toml::from_str(&text).unwrap();
            assert_eq!(back.seed, Some(seed), "{text}");
        }
        let err = parse("[policy]\nseed = \"many\"\n").unwrap_err();
        assert!(err.contains("seed"), "{err}");
    }

    /// A `-e` value without its `ID=` is refused without quoting the URL's path or query.
    #[test]
    fn a_bare_endpoint_url_is_refused_without_its_secrets() {
        for bare in [
            "https://rpc.example/v3/SECRETKEY",
            "https://rpc.example/v3?key=SECRETKEY",
            "https://u:SECRETPW@rpc.example/",
        ] {
            let err = endpoint_flag(bare).unwrap_err();
            assert!(err.contains("expected ID=URL"), "{err}");
            assert!(!err.contains("SECRET"), "{err}");
        }
        assert!(endpoint_flag("a=https://rpc.example/v3/KEY").is_ok());
    }

    /// A bad value inside a duration or the budget's table is reported as itself, not as
    /// "data did not match any variant".
    #[test]
    fn bad_durations_and_budget_tables_say_what_is_wrong() {
        let err = parse("[policy]\nattempt_timeout = true\n").unwrap_err();
        assert!(err.contains("a duration such as"), "{err}");
        let err = parse("[policy.budget]\nwindow = \"10 sec\"\n").unwrap_err();
        assert!(err.contains("10 sec") && !err.contains("variant"), "{err}");
        let err = parse("[policy.budget]\nration = 0.3\n").unwrap_err();
        assert!(err.contains("ration") && !err.contains("variant"), "{err}");
        let off = parse("[policy]\nbudget = false\n").unwrap();
        assert_eq!(off.policy.budget, None);
        let on = parse("[policy]\nbudget = true\nattempt_timeout = 2\n").unwrap();
        assert_eq!(on.policy.budget, Some(baton_core::Budget::default()));
        assert_eq!(on.policy.attempt_timeout, Duration::from_secs(2));
        let half = parse("[policy]\nattempt_timeout = 0.5\n").unwrap();
        assert_eq!(half.policy.attempt_timeout, Duration::from_millis(500));
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_name() {
        let err = parse("[policy]\nattempt_timout = \"1s\"\n").unwrap_err();
        assert!(err.contains("attempt_timout"), "{err}");
        let err = parse("[[endpoint]]\nid = \"a\"\nurl = \"http://a/\"\ncolour = 1\n").unwrap_err();
        assert!(err.contains("colour"), "{err}");
    }

    #[test]
    fn flags_override_the_file() {
        let args = ClientArgs {
            endpoints: vec!["x=http://127.0.0.1:1/".into()],
            timeout: Some(Duration::from_millis(300)),
            cooldown_threshold: Some(1),
            cooldown: Some(Duration::from_secs(600)),
            cooldown_mode: Some(CooldownMode::Skip),
            trigger_status: vec![500],
            base: true,
            ..ClientArgs::default()
        };
        let c = resolve(&args).unwrap();
        assert_eq!(c.endpoints[0].id(), "x");
        let s = c.settings;
        assert_eq!(s.attempt_timeout, Duration::from_millis(300));
        assert_eq!(s.breaker.rule, BreakerRule::Consecutive { failures: 1 });
        assert_eq!(s.breaker.max_open, Duration::from_secs(600));
        assert_eq!(s.unavailable, Unavailable::Skip);
        // SPEC 2.3: the sets are apart; --trigger-status never reaches keyed writes.
        assert!(
            s.trigger_statuses.contains_code(500) && !s.key_trigger_statuses.contains_code(500)
        );
        assert_eq!(s.url_mode, UrlMode::Base);
    }

    #[test]
    fn endpoint_tables_take_http_version_and_tls_files() {
        let file = parse(
            "[[endpoint]]\nid = \"push\"\nurl = \"https://push.example/\"\n\
             http_version = \"http2\"\n[endpoint.tls]\nclient_cert = \"c.pem\"\n\
             client_key = \"c.key\"\n[policy]\nhttp_version = \"http1\"\n\
             [policy.tls]\nca_file = \"ca.pem\"\n",
        )
        .unwrap();
        let policy = Policy::builder()
            .endpoints(file.endpoints.iter().map(|e| e.to_endpoint()))
            .settings(file.policy.clone())
            .build()
            .unwrap();
        assert_eq!(policy.http_version_for(0), baton_core::HttpVersion::Http2);
        assert_eq!(
            policy.settings().http_version,
            baton_core::HttpVersion::Http1
        );
        let tls = policy.tls_for(0);
        assert_eq!(tls.ca_file.as_deref(), Some(Path::new("ca.pem")));
        assert_eq!(tls.client_key.as_deref(), Some(Path::new("c.key")));
        let err = parse("[policy]\nhttp_version = \"http3\"\n").unwrap_err();
        assert!(err.contains("http3"), "{err}");
    }

    #[test]
    fn endpoint_flag_needs_id_and_url() {
        assert!(endpoint_flag("a=http://x/").is_ok());
        assert!(endpoint_flag("http://x/").is_err());
        assert!(endpoint_flag("=http://x/").is_err());
    }
}
