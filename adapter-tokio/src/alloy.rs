//! An alloy transport that knows which Ethereum JSON-RPC calls are safe to repeat (feature
//! `alloy`).
//!
//! [`BatonTransport`] is a `tower::Service<RequestPacket>`, so alloy's `RpcClient` (and a
//! provider built on it) sends every JSON-RPC call through a baton [`Client`]: each call is
//! one baton call, a POST of the request packet to the client's endpoints. A POST is a
//! write to baton, so by default it fails over only when nothing was delivered. The method
//! name decides what more is allowed ([`MethodClass::of`]):
//!
//! - **Reads** (`eth_call`, `eth_get*`, `eth_chainId`, `eth_blockNumber`,
//!   `eth_estimateGas`, `eth_feeHistory`, `net_version`, ...) change nothing: they retry
//!   and fail over as safe calls do (both permissions `Always`).
//! - **A signed transaction** (`eth_sendRawTransaction`) carries its own identity, its
//!   hash (keccak-256 of the raw bytes): the call's idempotency key, shared by the
//!   endpoints of [`policy`] (one idempotency group: one chain). A broadcast fails over
//!   freely while nothing was delivered. When its answer is lost (a timeout, a broken
//!   connection), the transport first asks the chain (`eth_getTransactionByHash`, a
//!   read): when the chain has it, that is the answer; when not yet, it broadcasts once
//!   more, from the next endpoint. A re-broadcast answered "already known" or "nonce too
//!   low" is settled the same way: the hash when the chain has the transaction.
//!   [`Broadcast`] says which happened. Asking first matters: some nodes (ganache 7.9.2)
//!   mine an identical raw transaction twice when it is sent twice, moving the nonce by two.
//! - **Everything else is a write**, node-signed sends (`eth_sendTransaction`,
//!   `eth_sign*`, `personal_*`) and unknown methods alike: baton's default, so after an
//!   ambiguous attempt the call ends with an error that says it may have executed.
//!   Filters (`eth_newFilter`, `eth_getFilterChanges`, ...) live on one node: writes too.
//!
//! A batch is as safe as its least safe member; a batch of signed transactions (and
//! reads) is keyed by all their hashes.
//!
//! Node errors that are really outages ([`classify`]: `header not found`, code `-32005`
//! (limits), `-32603` with "timeout" in its message) trigger as a 503 does: a read fails
//! over, a write gets them as its answer. Any other JSON-RPC error (execution reverted,
//! invalid params) is the method's answer. The rule is the policy's response classifier,
//! which reads the body ([`Settings::classify_body`](baton_core::Settings::classify_body)),
//! so `baton_core::verify` judges a policy with the same function.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use baton_tokio::alloy::{policy, BatonTransport};
//! use baton_tokio::Client;
//! let client = Client::new(policy(["https://rpc-a.example/", "https://rpc-b.example/"]))?;
//! let rpc = alloy_rpc_client::RpcClient::new(BatonTransport::new(client), false);
//! let block: String = rpc.request_noparams("eth_blockNumber").await?;
//! # let _ = block; Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use alloy_json_rpc::{
    ErrorPayload, RequestPacket, Response as RpcResponse, ResponsePacket, ResponsePayload,
    SerializedRequest,
};
use alloy_primitives::{keccak256, B256};
use alloy_transport::{TransportError, TransportErrorKind, TransportFut};
use baton_core::{Endpoint, Permission, PolicyBuilder, ResponseView, Verdict};
use serde_json::value::RawValue;

use crate::Client;

/// Bytes of a JSON-RPC answer the classifier reads (`classify_body` of [`policy`]): 4 MiB,
/// enough for a batch of a few hundred answers; a longer answer is never an outage.
pub const CLASSIFY_BODY: usize = 4 << 20;

/// How safe a JSON-RPC method is to repeat, by its name alone.
///
/// ```
/// use baton_tokio::alloy::MethodClass;
/// assert_eq!(MethodClass::of("eth_getBalance"), MethodClass::Read);
/// assert_eq!(MethodClass::of("eth_sendRawTransaction"), MethodClass::SignedTransaction);
/// assert_eq!(MethodClass::of("eth_sendTransaction"), MethodClass::Write);
/// assert_eq!(MethodClass::of("eth_getFilterChanges"), MethodClass::Write);
/// assert_eq!(MethodClass::of("acme_somethingNew"), MethodClass::Write);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MethodClass {
    /// Changes nothing: may be repeated anywhere.
    Read,
    /// `eth_sendRawTransaction`: its hash identifies it on every node of the chain.
    SignedTransaction,
    /// Anything else, unknown methods included: baton's default for writes.
    Write,
}

/// Methods that read state and change nothing (beside every `eth_get*` but the filter
/// ones).
const READS: &[&str] = &[
    "eth_call",
    "eth_chainId",
    "eth_blockNumber",
    "eth_estimateGas",
    "eth_feeHistory",
    "eth_gasPrice",
    "eth_maxPriorityFeePerGas",
    "eth_blobBaseFee",
    "eth_createAccessList",
    "eth_syncing",
    "eth_protocolVersion",
    "eth_accounts",
    "eth_simulateV1",
    "net_version",
    "net_listening",
    "net_peerCount",
    "web3_clientVersion",
    "web3_sha3",
];

impl MethodClass {
    /// The class of `method`.
    pub fn of(method: &str) -> MethodClass {
        if method == "eth_sendRawTransaction" {
            MethodClass::SignedTransaction
        } else if READS.contains(&method)
            || (method.starts_with("eth_get") && !method.starts_with("eth_getFilter"))
        {
            MethodClass::Read
        } else {
            MethodClass::Write
        }
    }
}

/// The hash of a signed transaction request (`eth_sendRawTransaction` with its raw bytes
/// as the first parameter): keccak-256 of the bytes; `None` when the parameter is not hex.
///
/// ```
/// use baton_tokio::alloy::transaction_hash;
/// let req: alloy_json_rpc::SerializedRequest =
///     alloy_json_rpc::Request::new("eth_sendRawTransaction", 1u64.into(), ["0x01"]).try_into().unwrap();
/// let hash = transaction_hash(&req).unwrap();
/// assert_eq!(hash, alloy_primitives::keccak256([1u8]));
/// ```
pub fn transaction_hash(request: &SerializedRequest) -> Option<B256> {
    let params = request.params()?;
    let (raw,): (String,) = serde_json::from_str(params.get()).ok()?;
    let hex = raw.strip_prefix("0x").unwrap_or(&raw);
    Some(keccak256(decode_hex(hex)?))
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Whether a JSON-RPC error is a node's outage rather than the method's answer: the
/// errors nodes give when they are behind (`header not found`, "missing trie node"),
/// limited (`-32005`), or timed out (`-32603` with "timeout").
///
/// ```
/// use baton_tokio::alloy::is_outage;
/// assert!(is_outage(-32000, "header not found"));
/// assert!(is_outage(-32005, "daily request count exceeded"));
/// assert!(is_outage(-32603, "request timeout"));
/// assert!(!is_outage(3, "execution reverted"));
/// assert!(!is_outage(-32602, "invalid params"));
/// ```
pub fn is_outage(code: i64, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    code == -32005
        || message.contains("header not found")
        || message.contains("missing trie node")
        || (code == -32603 && message.contains("timeout"))
}

/// The policy's response classifier for JSON-RPC: a 200 whose body holds an outage error
/// ([`is_outage`]), alone or in a batch, triggers; anything else keeps baton's default.
///
/// ```
/// use baton_core::{Endpoint, ResponseView, Verdict};
/// use baton_tokio::alloy::classify;
/// let endpoint = Endpoint::new("a", "https://rpc-a.example/");
/// let headers = http::HeaderMap::new();
/// let view = |body: &'static str| ResponseView {
///     method: &http::Method::POST,
///     endpoint: &endpoint,
///     status: http::StatusCode::OK,
///     headers: &headers,
///     earlier_ambiguous: false,
///     body: Some(body.as_bytes()),
/// };
/// let behind = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}"#;
/// let reverted = r#"{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted"}}"#;
/// assert_eq!(classify(&view(behind)), Some(Verdict::Trigger));
/// assert_eq!(classify(&view(reverted)), None);
/// ```
pub fn classify(view: &ResponseView<'_>) -> Option<Verdict> {
    if !view.status.is_success() {
        return None;
    }
    let packet: ResponsePacket = serde_json::from_slice(view.body?).ok()?;
    let outage = packet.iter_errors().any(|e| is_outage(e.code, &e.message));
    outage.then_some(Verdict::Trigger)
}

/// A policy for the JSON-RPC nodes at `urls`, all of one chain: endpoints `rpc-1`,
/// `rpc-2`, ... in that order of priority, in one idempotency group (`chain`), with
/// [`classify`] as the response classifier reading up to [`CLASSIFY_BODY`] bytes. Adjust
/// it further (timeouts, attempts) before building the client.
///
/// ```
/// let policy = baton_tokio::alloy::policy(["https://rpc-a.example/", "https://rpc-b.example/"])
///     .build()
///     .unwrap();
/// assert_eq!(policy.endpoints()[1].group_name(), Some("chain"));
/// assert_eq!(policy.settings().classify_body, baton_tokio::alloy::CLASSIFY_BODY);
/// ```
pub fn policy<S: AsRef<str>>(urls: impl IntoIterator<Item = S>) -> PolicyBuilder {
    let mut b = baton_core::Policy::builder()
        .classify_fn(classify)
        .configure(|s| s.classify_body = CLASSIFY_BODY);
    for (i, url) in urls.into_iter().enumerate() {
        b = b.endpoint(Endpoint::new(format!("rpc-{}", i + 1), url.as_ref()).group("chain"));
    }
    b
}

/// What [`BatonTransport::broadcast`] learned: the transaction's hash, and how it got
/// there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broadcast {
    /// The transaction hash.
    pub hash: B256,
    /// The answer of a node that may have taken the transaction was lost (a timeout or a
    /// broken connection); the hash comes from the chain or from another node.
    pub answer_lost: bool,
    /// The transaction was broadcast once more, from the next endpoint, because the chain
    /// did not have it yet after the answer was lost (one hash: it lands at most once).
    pub rebroadcast: bool,
}

/// The alloy transport: every JSON-RPC call one baton call (see the [module](self) docs).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = baton_tokio::Client::new(baton_tokio::alloy::policy(["http://127.0.0.1:8545/"]))?;
/// let transport = baton_tokio::alloy::BatonTransport::new(client);
/// let rpc = alloy_rpc_client::RpcClient::new(transport, true);
/// let chain: String = rpc.request_noparams("eth_chainId").await?;
/// # let _ = chain; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct BatonTransport {
    client: Client,
}

impl BatonTransport {
    /// A transport over `client` (build it from [`policy`] so that its endpoints form one
    /// chain's idempotency group and its classifier knows node outages).
    pub fn new(client: Client) -> Self {
        BatonTransport { client }
    }

    /// The baton client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Broadcasts a signed transaction (`raw`: its encoded bytes) with
    /// `eth_sendRawTransaction`, and says how it went ([`Broadcast`]).
    pub async fn broadcast(&self, raw: &[u8]) -> Result<Broadcast, TransportError> {
        let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let request: SerializedRequest = alloy_json_rpc::Request::new(
            "eth_sendRawTransaction",
            1u64.into(),
            [format!("0x{hex}")],
        )
        .try_into()
        .map_err(TransportError::ser_err)?;
        let (packet, delivery) = self.send(RequestPacket::Single(request)).await?;
        let payload = packet
            .single_payload()
            .ok_or_else(|| TransportErrorKind::custom_str("a batch answer to one request"))?;
        match payload {
            ResponsePayload::Success(v) => Ok(Broadcast {
                hash: serde_json::from_str(v.get())
                    .map_err(|e| TransportError::deser_err(e, v.get()))?,
                answer_lost: delivery != Delivery::Once,
                rebroadcast: delivery == Delivery::Rebroadcast,
            }),
            ResponsePayload::Failure(e) => Err(TransportError::ErrorResp(e.clone())),
        }
    }

    /// Sends `packet` as one baton call (two for signed transactions whose answer was
    /// lost and that the chain does not have yet).
    async fn send(
        &self,
        packet: RequestPacket,
    ) -> Result<(ResponsePacket, Delivery), TransportError> {
        let (sent, class) = classes(&packet);
        let body = serde_json::to_vec(&packet).map_err(TransportError::ser_err)?;
        let lost = match self.post(&body, &class, None).await {
            Ok(response) => return Ok((answer(response).await?, Delivery::Once)),
            Err(e) if matches!(class, Class::Signed(_)) && e.may_have_executed() => e,
            Err(e) => return Err(TransportErrorKind::custom(e)),
        };
        // A signed transaction whose answer was lost: the chain may have it already.
        if let Some(known) = self.known(&sent).await {
            return Ok((known, Delivery::Recovered));
        }
        // Not yet: once more, from the endpoint after the one that lost the answer.
        let next = self.next_endpoint(&lost);
        let response = self
            .post(&body, &class, next)
            .await
            .map_err(TransportErrorKind::custom)?;
        let mut packet = answer(response).await?;
        self.settle_duplicates(&sent, &mut packet).await;
        Ok((packet, Delivery::Rebroadcast))
    }

    /// One baton call of `body` with the permissions of `class`.
    async fn post(
        &self,
        body: &[u8],
        class: &Class,
        prefer: Option<String>,
    ) -> Result<crate::Response, crate::Error> {
        let mut call = self
            .client
            .post("/")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        call = match class {
            Class::Read => call.retry(Permission::Always).failover(Permission::Always),
            // Keyed, but sent again only where nothing was delivered: after a lost answer
            // the transport asks the chain before it broadcasts again (some nodes, ganache
            // among them, mine an identical transaction twice).
            Class::Signed(key) => call
                .idempotency_key(key.clone())
                .retry(Permission::IfUndelivered)
                .failover(Permission::IfUndelivered),
            Class::Write => call,
        };
        if let Some(id) = prefer {
            call = call.prefer(id);
        }
        call.send().await
    }

    /// The endpoint after the one `lost`'s last attempt went to, in policy order.
    fn next_endpoint(&self, lost: &crate::Error) -> Option<String> {
        let last = lost.report().attempts.last()?;
        let endpoints = self.client.policy().endpoints();
        let next = &endpoints[(last.endpoint + 1) % endpoints.len()];
        Some(next.id().to_string())
    }

    /// The answer to a packet of signed transactions only, when the chain has every one
    /// of them: each request answered with its hash.
    async fn known(&self, sent: &[Sent]) -> Option<ResponsePacket> {
        let mut answers = Vec::with_capacity(sent.len());
        for s in sent {
            let hash = s.hash?;
            if !self.on_chain(hash).await {
                return None;
            }
            let payload = ResponsePayload::Success(serde_json::value::to_raw_value(&hash).ok()?);
            answers.push(RpcResponse {
                id: s.id.clone(),
                payload,
            });
        }
        Some(match answers.len() {
            1 => ResponsePacket::Single(answers.pop()?),
            _ => ResponsePacket::Batch(answers),
        })
    }

    /// For each signed transaction whose broadcast was answered "already known" or "nonce
    /// too low": the hash, when the chain has the transaction.
    async fn settle_duplicates(&self, sent: &[Sent], answer: &mut ResponsePacket) {
        let responses: Vec<&mut RpcResponse> = match answer {
            ResponsePacket::Single(r) => vec![r],
            ResponsePacket::Batch(b) => b.iter_mut().collect(),
        };
        for r in responses {
            let Some(hash) = sent.iter().find(|s| s.id == r.id).and_then(|s| s.hash) else {
                continue;
            };
            let ResponsePayload::Failure(e) = &r.payload else {
                continue;
            };
            if is_duplicate(e) && self.on_chain(hash).await {
                if let Ok(v) = serde_json::value::to_raw_value(&hash) {
                    r.payload = ResponsePayload::Success(v);
                }
            }
        }
    }

    /// Whether a node of the chain knows the transaction `hash` (`eth_getTransactionByHash`
    /// answers an object, not null), asked as a read.
    async fn on_chain(&self, hash: B256) -> bool {
        let request = alloy_json_rpc::Request::new("eth_getTransactionByHash", 1u64.into(), [hash]);
        let Ok(request): Result<SerializedRequest, _> = request.try_into() else {
            return false;
        };
        let Ok(body) = serde_json::to_vec(&request) else {
            return false;
        };
        let Ok(response) = self.post(&body, &Class::Read, None).await else {
            return false;
        };
        matches!(
            answer(response).await.ok().as_ref().and_then(ResponsePacket::single_payload),
            Some(ResponsePayload::Success(v)) if v.get() != "null"
        )
    }
}

/// How a packet was delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// One call answered it.
    Once,
    /// Its answer was lost; the chain had its transactions.
    Recovered,
    /// Its answer was lost and the chain did not have it yet: sent once more.
    Rebroadcast,
}

/// The JSON-RPC answer in a response; a status other than 2xx is an HTTP error.
async fn answer(response: crate::Response) -> Result<ResponsePacket, TransportError> {
    let status = response.status();
    let bytes = response.bytes().await.map_err(TransportErrorKind::custom)?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        return Err(TransportErrorKind::http_error(status.as_u16(), text));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| TransportError::deser_err(e, String::from_utf8_lossy(&bytes)))
}

/// A node's answer that a transaction it was sent is one it has (or one already mined).
fn is_duplicate(e: &ErrorPayload<Box<RawValue>>) -> bool {
    let m = e.message.to_ascii_lowercase();
    [
        "already known",
        "known transaction",
        "already imported",
        "nonce too low",
        "nonce is too low",
        "correct nonce",
        "already exists",
    ]
    .iter()
    .any(|s| m.contains(s))
}

/// One request of a packet: its id, and its hash when it is a signed transaction.
struct Sent {
    id: alloy_json_rpc::Id,
    hash: Option<B256>,
}

/// The call class of a packet (its least safe member).
enum Class {
    Read,
    Signed(String),
    Write,
}

fn classes(packet: &RequestPacket) -> (Vec<Sent>, Class) {
    let requests: &[SerializedRequest] = match packet {
        RequestPacket::Single(r) => std::slice::from_ref(r),
        RequestPacket::Batch(b) => b,
    };
    let mut sent = Vec::with_capacity(requests.len());
    let mut worst = MethodClass::Read;
    for r in requests {
        let mut class = MethodClass::of(r.method());
        let hash = match class {
            MethodClass::SignedTransaction => transaction_hash(r),
            _ => None,
        };
        if class == MethodClass::SignedTransaction && hash.is_none() {
            // Not a transaction the transport can identify: a write.
            class = MethodClass::Write;
        }
        worst = worst.max(class);
        sent.push(Sent {
            id: r.id().clone(),
            hash,
        });
    }
    let class = match worst {
        MethodClass::Read => Class::Read,
        MethodClass::Write => Class::Write,
        MethodClass::SignedTransaction => {
            let hashes: Vec<B256> = sent.iter().filter_map(|s| s.hash).collect();
            let key = match hashes.as_slice() {
                [one] => *one,
                many => keccak256(many.iter().flat_map(|h| h.0).collect::<Vec<u8>>()),
            };
            Class::Signed(format!("{key:#x}"))
        }
    };
    (sent, class)
}

impl tower_service::Service<RequestPacket> for BatonTransport {
    type Response = ResponsePacket;
    type Error = TransportError;
    type Future = TransportFut<'static>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), TransportError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, packet: RequestPacket) -> Self::Future {
        let this = self.clone();
        let fut: Pin<Box<dyn Future<Output = _> + Send>> =
            Box::pin(async move { this.send(packet).await.map(|(packet, _)| packet) });
        fut
    }
}
