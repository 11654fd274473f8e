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
//!   low" is settled the same way: the hash when the chain has the transaction. When the
//!   transport cannot tell (no node answers the question, the second broadcast fails or
//!   is refused, or a batch mixes reads with the transactions), nothing more is sent and
//!   the error says the broadcast may have executed.
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
/// as the first parameter): keccak-256 of the bytes; `None` when the parameter is not hex,
/// or is a blob transaction (type 3, sent with its blobs: its hash is not that of these
/// bytes), which the transport then treats as a write.
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
    let bytes = decode_hex(hex)?;
    // A blob transaction (EIP-4844, type 3) travels with its blobs: its hash covers the
    // transaction alone, not these bytes. Not identified here: a write.
    if bytes.first() == Some(&0x03) {
        return None;
    }
    Some(keccak256(bytes))
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
/// // A contract's own revert reason is its answer, whatever it says.
/// assert!(!is_outage(3, "execution reverted: header not found"));
/// ```
pub fn is_outage(code: i64, message: &str) -> bool {
    // Code 3 is a revert: its message carries the contract's reason, not the node's state.
    if code == 3 {
        return false;
    }
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
///
/// ```no_run
/// # async fn demo(raw_signed_tx: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
/// let urls = ["https://rpc-a.example/", "https://rpc-b.example/"];
/// let client = baton_tokio::Client::new(baton_tokio::alloy::policy(urls))?;
/// let transport = baton_tokio::alloy::BatonTransport::new(client);
/// let sent = transport.broadcast(raw_signed_tx).await?;
/// // One hash whatever happened: the transaction lands at most once.
/// println!("transaction {}", sent.hash);
/// if sent.answer_lost {
///     // A node may have taken it before its answer was lost: the hash came from the
///     // chain or from another node, and `rebroadcast` says whether it was sent again.
///     println!("answer lost; broadcast again: {}", sent.rebroadcast);
/// }
/// # Ok(()) }
/// ```
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
        match self.post(&body, &class, None).await {
            Ok(response) if matches!(class, Class::Write) => {
                Ok((write_answer(response).await?, Delivery::Once))
            }
            Ok(response) => Ok((answer(response).await?, Delivery::Once)),
            Err(lost) if matches!(class, Class::Signed(_)) && lost.may_have_executed() => {
                self.recover(packet, &sent, lost).await
            }
            Err(e) => Err(TransportErrorKind::custom(e)),
        }
    }

    /// After the lost answer of a packet of signed transactions (`lost`, which may have
    /// executed): each transaction the chain has is answered with its hash; the others
    /// are broadcast once more, from the endpoint after the one that lost the answer.
    /// Whenever the transport cannot tell (a read beside the transactions, which would
    /// need an answer of its own; the chain not answering; the second broadcast failing),
    /// the call ends with `lost`, whose error says the broadcast may have executed.
    async fn recover(
        &self,
        packet: RequestPacket,
        sent: &[Sent],
        lost: crate::Error,
    ) -> Result<(ResponsePacket, Delivery), TransportError> {
        let mut known = Vec::new();
        let mut unknown = Vec::new();
        for s in sent {
            let Some(hash) = s.hash else {
                return Err(TransportErrorKind::custom(lost));
            };
            match self.on_chain(hash).await {
                Some(true) => known.push(hash_answer(&s.id, hash)),
                Some(false) => unknown.push(s.id.clone()),
                None => return Err(TransportErrorKind::custom(lost)),
            }
        }
        let single = matches!(packet, RequestPacket::Single(_));
        if unknown.is_empty() {
            return Ok((shaped(single, known), Delivery::Recovered));
        }
        let rest = only(packet, &unknown);
        let (rest_sent, class) = classes(&rest);
        let next = self.next_endpoint(&lost);
        let Ok(body) = serde_json::to_vec(&rest) else {
            return Err(TransportErrorKind::custom(lost));
        };
        let again = match self.post(&body, &class, next).await {
            Ok(response) => answer(response).await.ok(),
            Err(_) => None,
        };
        let Some(mut again) = again else {
            return Err(TransportErrorKind::custom(lost));
        };
        self.settle_duplicates(&rest_sent, &mut again).await;
        let again = match again {
            ResponsePacket::Single(r) => vec![r],
            ResponsePacket::Batch(b) => b,
        };
        // A refusal of the second broadcast that its hash does not settle proves nothing
        // about the first: the first error (it may have executed) is the answer.
        if again
            .iter()
            .any(|r| matches!(r.payload, ResponsePayload::Failure(_)))
        {
            return Err(TransportErrorKind::custom(lost));
        }
        known.extend(again);
        Ok((shaped(single, known), Delivery::Rebroadcast))
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
            // Pinned on the call, so a policy's permission function (which may well say
            // "POST: always", every JSON-RPC read being a POST) cannot move a write.
            Class::Write => call
                .retry(Permission::IfUndelivered)
                .failover(Permission::IfUndelivered),
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
            if is_duplicate(e) && self.on_chain(hash).await == Some(true) {
                if let Ok(v) = serde_json::value::to_raw_value(&hash) {
                    r.payload = ResponsePayload::Success(v);
                }
            }
        }
    }

    /// Whether a node of the chain knows the transaction `hash` (`eth_getTransactionByHash`
    /// answers an object, or null), asked as a read; `None` when no node answered that
    /// question.
    async fn on_chain(&self, hash: B256) -> Option<bool> {
        let request = alloy_json_rpc::Request::new("eth_getTransactionByHash", 1u64.into(), [hash]);
        let request: SerializedRequest = request.try_into().ok()?;
        let body = serde_json::to_vec(&request).ok()?;
        let response = self.post(&body, &Class::Read, None).await.ok()?;
        match answer(response).await.ok()?.single_payload()? {
            ResponsePayload::Success(v) => Some(v.get() != "null"),
            ResponsePayload::Failure(_) => None,
        }
    }
}

/// A request's answer: the transaction hash.
fn hash_answer(id: &alloy_json_rpc::Id, hash: B256) -> RpcResponse {
    let hash = serde_json::value::to_raw_value(&hash).unwrap_or_default();
    RpcResponse {
        id: id.clone(),
        payload: ResponsePayload::Success(hash),
    }
}

/// Answers in the shape of the request: one for a single request, a batch for a batch.
fn shaped(single: bool, mut answers: Vec<RpcResponse>) -> ResponsePacket {
    match (single, answers.len()) {
        (true, 1) => ResponsePacket::Single(answers.remove(0)),
        _ => ResponsePacket::Batch(answers),
    }
}

/// The requests of `packet` whose id is in `ids`, in the packet's shape.
fn only(packet: RequestPacket, ids: &[alloy_json_rpc::Id]) -> RequestPacket {
    match packet {
        RequestPacket::Single(r) => RequestPacket::Single(r),
        RequestPacket::Batch(b) => {
            RequestPacket::Batch(b.into_iter().filter(|r| ids.contains(r.id())).collect())
        }
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

/// The answer to a write (a node-signed send, an unknown method). A status other than 2xx
/// after an attempt that may have executed the write (a 503 from a gateway that passed it
/// on) is not alloy's `HttpError`: alloy's retry layer re-sends a 503 or 429, and a node
/// would sign and send the write again. It becomes an error that says the write may have
/// executed, which no retry layer reads as retryable.
async fn write_answer(response: crate::Response) -> Result<ResponsePacket, TransportError> {
    let (status, executed) = (response.status(), response.may_have_executed());
    if status.is_success() || !executed {
        return answer(response).await;
    }
    Err(TransportErrorKind::custom_str(&format!(
        "the node answered HTTP {} to a write that may have executed (request id {}): not sent again",
        status.as_u16(),
        response.request_id()
    )))
}

/// A node's answer that a transaction it was sent may be one it has: already known or
/// mined, or a pending one of the same nonce and price ("underpriced", as a replacement).
/// Only a hint: the hash is returned only when the chain has that very transaction.
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
        "underpriced",
        "can't be replaced",
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
