//! The alloy transport against a real node: ganache (npm `ganache` 7.9.2, started by each
//! test on a port of its own with `--wallet.deterministic --chain.chainId 1337`) behind
//! testkit's fault proxies. One node behind two proxies is two providers of one chain.
//!
//! `.ci/run` installs ganache where it is absent; without it these tests fail, naming it.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_consensus::{SignableTransaction, TxEnvelope, TxLegacy};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{address, Address, TxKind, B256, U256};
use alloy_rpc_client::RpcClient;
use alloy_signer::SignerSync;
use alloy_signer_local::PrivateKeySigner;
use baton_tokio::alloy::{policy, BatonTransport};
use testkit::{FaultMode, FaultProxy};

const KEY: &str = "0x4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d";
const FROM: Address = address!("0x90F8bf6A479f320ead074411a4B0e7944Ea8c9C1");
const TO: Address = address!("0xFFcf8FDEE72ac11b5c542428B35EEF5769C409f0");
const CHAIN: u64 = 1337;

/// A ganache node on 127.0.0.1, killed on drop.
struct Ganache {
    child: Child,
    port: u16,
}

impl Ganache {
    fn start() -> Ganache {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("ganache")
            .args([
                "--wallet.deterministic",
                "--chain.chainId",
                "1337",
                "--server.host",
                "127.0.0.1",
                "--server.port",
                &port.to_string(),
                "--logging.quiet",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "ganache 7.9.2 must be installed: npm install -g ganache@7.9.2 (.ci/run does it)",
            );
        let node = Ganache { child, port };
        let until = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(node.addr()).is_err() {
            assert!(Instant::now() < until, "ganache did not listen within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        node
    }

    fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr())
    }
}

impl Drop for Ganache {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rpc_over(urls: &[String], timeout: Duration) -> (RpcClient, BatonTransport) {
    let client = baton_tokio::Client::new(policy(urls).attempt_timeout(timeout)).unwrap();
    let transport = BatonTransport::new(client);
    (RpcClient::new(transport.clone(), true), transport)
}

async fn nonce(node: &Ganache) -> u64 {
    let (rpc, _) = rpc_over(&[node.url()], Duration::from_secs(10));
    let n: U256 = rpc
        .request("eth_getTransactionCount", (FROM, "latest"))
        .await
        .unwrap();
    n.to::<u64>()
}

/// A signed legacy transfer of 1 wei from account 0 with `nonce`.
fn signed_transfer(nonce: u64) -> Vec<u8> {
    let tx = TxLegacy {
        chain_id: Some(CHAIN),
        nonce,
        gas_price: 20_000_000_000,
        gas_limit: 21_000,
        to: TxKind::Call(TO),
        value: U256::from(1),
        input: Default::default(),
    };
    let signer: PrivateKeySigner = KEY.parse().unwrap();
    let signature = signer.sign_hash_sync(&tx.signature_hash()).unwrap();
    TxEnvelope::from(tx.into_signed(signature)).encoded_2718()
}

/// The example binary, built beside this test by `cargo test` (which builds the
/// package's examples; with `--test alloy` alone, build it first:
/// `cargo build -p baton-tokio --features alloy --example alloy_failover`).
fn example() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let path = dir.join("examples").join("alloy_failover");
    assert!(path.exists(), "{} is not built", path.display());
    path
}

fn run_example(args: &[&str]) -> std::process::Output {
    let path = example();
    Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_fail_over_when_the_first_provider_refuses_or_black_holes() {
    let node = Ganache::start();
    for mode in ["refuse", "black hole"] {
        let first = FaultProxy::start(node.addr());
        let second = FaultProxy::start(node.addr());
        match mode {
            "refuse" => first.stop(),
            _ => first.set(FaultMode::BlackHole),
        }
        let (rpc, _) = rpc_over(&[first.url(), second.url()], Duration::from_millis(500));
        let wei: U256 = rpc
            .request("eth_getBalance", (FROM, "latest"))
            .await
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(wei > U256::ZERO, "{mode}");
        let block: U256 = rpc.request_noparams("eth_blockNumber").await.unwrap();
        assert!(block >= U256::ZERO);
        assert_eq!(
            first.forwarded(),
            0,
            "{mode}: nothing reached the node through it"
        );
        assert!(second.forwarded() >= 2, "{mode}");
    }
}

/// Runs `send-raw` through a first provider that does `fault` to the broadcast and a
/// healthy second one; returns its stdout, stderr and the two proxies.
async fn send_raw_through(
    node: &Ganache,
    fault: FaultMode,
) -> (String, String, FaultProxy, FaultProxy) {
    let first = FaultProxy::start(node.addr());
    let second = FaultProxy::start(node.addr());
    first.set_for(fault, "eth_sendRawTransaction");
    let (u1, u2) = (first.url(), second.url());
    let out = tokio::task::spawn_blocking(move || {
        run_example(&["--rpc", &u1, "--rpc", &u2, "--timeout", "1", "send-raw"])
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{fault:?}: {stdout} {stderr}");
    (stdout, stderr, first, second)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_transaction_whose_answer_was_lost_lands_once() {
    let node = Ganache::start();
    let (rpc, _) = rpc_over(&[node.url()], Duration::from_secs(5));
    // Swallowed: the node took it; the chain has it, so it is not broadcast again.
    let before = nonce(&node).await;
    let (stdout, stderr, first, second) = send_raw_through(&node, FaultMode::Swallow).await;
    let hash: B256 = stdout.parse().unwrap_or_else(|e| panic!("{stdout:?}: {e}"));
    assert!(stderr.contains("the chain has the transaction"), "{stderr}");
    assert_eq!(
        nonce(&node).await,
        before + 1,
        "the transaction landed once"
    );
    assert_eq!(first.forwarded_with("eth_sendRawTransaction"), 1);
    assert_eq!(second.forwarded_with("eth_sendRawTransaction"), 0);
    let receipt: serde_json::Value = rpc
        .request("eth_getTransactionReceipt", (hash,))
        .await
        .unwrap();
    assert!(
        receipt.is_object(),
        "the printed hash is the chain's: {receipt}"
    );
    // Black-holed: the node never saw it; re-broadcast through the second, once.
    let before = nonce(&node).await;
    let (stdout, stderr, first, second) = send_raw_through(&node, FaultMode::BlackHole).await;
    let hash: B256 = stdout.parse().unwrap_or_else(|e| panic!("{stdout:?}: {e}"));
    assert!(
        stderr.contains("re-broadcast through the next endpoint"),
        "{stderr}"
    );
    assert_eq!(
        nonce(&node).await,
        before + 1,
        "the transaction landed once"
    );
    assert_eq!(first.forwarded_with("eth_sendRawTransaction"), 0);
    assert_eq!(second.forwarded_with("eth_sendRawTransaction"), 1);
    let receipt: serde_json::Value = rpc
        .request("eth_getTransactionReceipt", (hash,))
        .await
        .unwrap();
    assert!(
        receipt.is_object(),
        "the printed hash is the chain's: {receipt}"
    );
    // A batch mixing a read with the transaction: after the lost answer nothing is sent
    // again (the read would need an answer of its own), and the error says so.
    let before = nonce(&node).await;
    let first = FaultProxy::start(node.addr());
    let second = FaultProxy::start(node.addr());
    first.set_for(FaultMode::Swallow, "eth_sendRawTransaction");
    let (_, transport) = rpc_over(&[first.url(), second.url()], Duration::from_secs(1));
    let hex: String = signed_transfer(before)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let send: alloy_json_rpc::SerializedRequest =
        alloy_json_rpc::Request::new("eth_sendRawTransaction", 1u64.into(), [format!("0x{hex}")])
            .try_into()
            .unwrap();
    let read: alloy_json_rpc::SerializedRequest =
        alloy_json_rpc::Request::new("eth_getBalance", 2u64.into(), (FROM, "latest"))
            .try_into()
            .unwrap();
    let batch = alloy_json_rpc::RequestPacket::Batch(vec![send, read]);
    let err = {
        use tower_service::Service;
        transport.clone().call(batch).await.unwrap_err()
    };
    assert!(format!("{err:#}").contains("may have executed"), "{err:#}");
    assert_eq!(nonce(&node).await, before + 1, "it landed once");
    assert_eq!(second.forwarded_with("eth_sendRawTransaction"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_signed_send_moves_only_when_undelivered() {
    let node = Ganache::start();
    // Swallowed: the node signed and sent it; the second provider never sees it.
    let before = nonce(&node).await;
    let first = FaultProxy::start(node.addr());
    let second = FaultProxy::start(node.addr());
    first.set_for(FaultMode::Swallow, "eth_sendTransaction");
    let (u1, u2) = (first.url(), second.url());
    let out = tokio::task::spawn_blocking(move || {
        run_example(&["--rpc", &u1, "--rpc", &u2, "--timeout", "1", "send"])
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("may have executed"), "{stderr}");
    assert_eq!(second.forwarded_with("eth_sendTransaction"), 0);
    assert_eq!(nonce(&node).await, before + 1, "it did execute, once");
    // Refused: nothing was sent there, so it goes once through the second.
    let before = nonce(&node).await;
    let refused = FaultProxy::start(node.addr());
    refused.stop();
    let second = FaultProxy::start(node.addr());
    let (u1, u2) = (refused.url(), second.url());
    let out = tokio::task::spawn_blocking(move || {
        run_example(&["--rpc", &u1, "--rpc", &u2, "--timeout", "1", "send"])
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(second.forwarded_with("eth_sendTransaction"), 1);
    assert_eq!(nonce(&node).await, before + 1);
}

/// A packet of one request, sent through the transport as alloy's client would.
async fn one(
    transport: &BatonTransport,
    method: &'static str,
    params: serde_json::Value,
) -> alloy_json_rpc::ResponsePacket {
    use tower_service::Service;
    let request: alloy_json_rpc::SerializedRequest =
        alloy_json_rpc::Request::new(method, 7u64.into(), params)
            .try_into()
            .unwrap();
    transport.clone().call(request.into()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_outages_fail_over_reads_and_method_errors_are_answers() {
    use alloy_json_rpc::ResponsePayload;
    let node = Ganache::start();
    let healthy = FaultProxy::start(node.addr());
    let error = |code: i64, message: &str| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":7,"error":{{"code":{code},"message":"{message}"}}}}"#
        );
        testkit::Provider::start(testkit::Behaviour::status(200).body(body))
    };
    for (code, message) in [
        (-32000, "header not found"),
        (-32005, "limit exceeded"),
        (-32603, "request timeout"),
    ] {
        let behind = error(code, message);
        let urls = [format!("{}/", behind.url()), healthy.url()];
        let (_, transport) = rpc_over(&urls, Duration::from_secs(2));
        // A read fails over to the healthy node.
        let answer = one(&transport, "eth_blockNumber", serde_json::json!([])).await;
        assert!(
            matches!(answer.single_payload(), Some(ResponsePayload::Success(_))),
            "{message}: {answer:?}"
        );
        // A node-signed send keeps the outage as its answer (it was processed there).
        let before = healthy.forwarded_with("eth_sendTransaction");
        let answer = one(
            &transport,
            "eth_sendTransaction",
            serde_json::json!([{"from": FROM, "to": TO, "value": "0x1"}]),
        )
        .await;
        assert_eq!(answer.first_error_code(), Some(code), "{message}");
        assert_eq!(
            healthy.forwarded_with("eth_sendTransaction"),
            before,
            "{message}"
        );
    }
    // The method's own error is the answer, for a read too.
    let reverted = error(3, "execution reverted");
    let urls = [format!("{}/", reverted.url()), healthy.url()];
    let (_, transport) = rpc_over(&urls, Duration::from_secs(2));
    let before = healthy.forwarded();
    let answer = one(
        &transport,
        "eth_call",
        serde_json::json!([{"to": TO}, "latest"]),
    )
    .await;
    assert_eq!(answer.first_error_message(), Some("execution reverted"));
    assert_eq!(
        healthy.forwarded(),
        before,
        "no failover for the method's answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_batch_survives_the_first_provider_stopping_mid_run() {
    const READS: usize = 200;
    const SENDS: u64 = 100;
    let node = Ganache::start();
    let start = nonce(&node).await;
    let first = Arc::new(FaultProxy::start(node.addr()));
    let second = FaultProxy::start(node.addr());
    let (rpc, transport) = rpc_over(&[first.url(), second.url()], Duration::from_secs(2));
    let done = Arc::new(AtomicUsize::new(0));
    let reads = {
        let (rpc, done) = (rpc.clone(), done.clone());
        tokio::spawn(async move {
            let mut answered = 0;
            for _ in 0..READS {
                let wei: Result<U256, _> = rpc.request("eth_getBalance", (TO, "latest")).await;
                answered += usize::from(wei.is_ok_and(|w| w > U256::ZERO));
                done.fetch_add(1, Ordering::SeqCst);
            }
            answered
        })
    };
    let sends = {
        let done = done.clone();
        tokio::spawn(async move {
            let mut sent = Vec::new();
            for i in 0..SENDS {
                let raw = signed_transfer(start + i);
                let result = transport.broadcast(&raw).await;
                sent.push((alloy_primitives::keccak256(&raw), result));
                done.fetch_add(1, Ordering::SeqCst);
            }
            sent
        })
    };
    while done.load(Ordering::SeqCst) < 150 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stopping = first.clone();
    tokio::task::spawn_blocking(move || stopping.stop())
        .await
        .unwrap();
    let answered = reads.await.unwrap();
    let sent = sends.await.unwrap();
    assert_eq!(answered, READS, "every read answered");
    assert!(second.forwarded() > 0, "the second provider took over");
    let (check, _) = rpc_over(&[node.url()], Duration::from_secs(5));
    for (i, (hash, result)) in sent.iter().enumerate() {
        // A broadcast whose answer was lost either comes back with its hash, or says it may
        // have executed (when the chain could not yet tell): never a plain refusal.
        match result {
            Ok(b) => assert_eq!(b.hash, *hash, "transaction {i}"),
            Err(e) => assert!(
                format!("{e:#}").contains("may have executed"),
                "transaction {i}: {e:#}"
            ),
        }
        let receipt: serde_json::Value = check
            .request("eth_getTransactionReceipt", (hash,))
            .await
            .unwrap();
        assert!(receipt.is_object(), "transaction {i} is on chain");
    }
    assert_eq!(
        nonce(&node).await,
        start + SENDS,
        "every transaction on chain exactly once"
    );
}

/// A write answered 503 (a gateway that passed it on: it may have executed) is an error
/// no alloy retry layer reads as retryable, so a node-signed send is never signed and
/// sent again above baton. A read's 503 stays alloy's retryable HTTP error. Before, the
/// write's 503 was an `HttpError(503)`, which alloy's `RetryBackoffLayer` re-sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_may_have_executed_is_not_retryable_above_baton() {
    use tower_service::Service;
    let gateway = testkit::Provider::start(testkit::Behaviour::status(503));
    let (_, transport) = rpc_over(&[format!("{}/", gateway.url())], Duration::from_secs(2));
    let request = |method: &'static str, params| {
        let r: alloy_json_rpc::SerializedRequest =
            alloy_json_rpc::Request::new(method, 7u64.into(), params)
                .try_into()
                .unwrap();
        r.into()
    };
    let write = request(
        "eth_sendTransaction",
        serde_json::json!([{"from": FROM, "to": TO}]),
    );
    let err = transport.clone().call(write).await.unwrap_err();
    let alloy_json_rpc::RpcError::Transport(kind) = &err else {
        panic!("{err:?}")
    };
    assert!(!kind.is_retry_err(), "{err}");
    assert!(err.to_string().contains("may have executed"), "{err}");
    assert_eq!(gateway.requests().len(), 1, "the write was sent once");
    let read = request("eth_blockNumber", serde_json::json!([]));
    let err = transport.clone().call(read).await.unwrap_err();
    let alloy_json_rpc::RpcError::Transport(kind) = &err else {
        panic!("{err:?}")
    };
    assert!(kind.is_retry_err(), "{err}");
}
