//! Ethereum JSON-RPC failover through alloy's `RpcClient` on baton-tokio's transport.
//!
//! ```text
//! cargo run --release -p baton-tokio --features alloy --example alloy_failover -- \
//!     --rpc URL [--rpc URL ...] [--timeout SECS] (balance ADDR | send-raw | send)
//! ```
//!
//! - `balance ADDR`: the balance in wei (a read: retried and failed over freely).
//! - `send-raw`: signs a transfer of 1 wei from development account 0 to account 1 (the
//!   well-known keys of `ganache --wallet.deterministic`), broadcasts it with
//!   `eth_sendRawTransaction` (keyed by its hash: may be re-broadcast to another node of
//!   the chain) and prints its hash.
//! - `send`: the same transfer with `eth_sendTransaction` (the node signs: never sent to
//!   a second node after an ambiguous attempt).
//!
//! `--timeout` is the attempt timeout in seconds (default 10). Exit 0 on success; 1 on an
//! error, printed on stderr with whether the call may have executed; 2 for bad usage.

use std::error::Error as _;
use std::process::ExitCode;
use std::time::Duration;

use alloy_consensus::{SignableTransaction, TxEnvelope, TxLegacy};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{address, Address, TxKind, U256};
use alloy_rpc_client::RpcClient;
use alloy_signer::SignerSync;
use alloy_signer_local::PrivateKeySigner;
use alloy_transport::TransportError;
use baton_tokio::alloy::{policy, BatonTransport};

/// Development account 0 of `ganache --wallet.deterministic` (a public test key).
const KEY: &str = "0x4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d";
const FROM: Address = address!("0x90F8bf6A479f320ead074411a4B0e7944Ea8c9C1");
const TO: Address = address!("0xFFcf8FDEE72ac11b5c542428B35EEF5769C409f0");

enum Command {
    Balance(Address),
    SendRaw,
    Send,
}

struct Args {
    rpcs: Vec<String>,
    timeout: Duration,
    command: Command,
}

const USAGE: &str =
    "usage: alloy_failover --rpc URL [--rpc URL ...] [--timeout SECS] (balance ADDR | send-raw | send)";

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut rpcs, mut timeout, mut command) = (Vec::new(), Duration::from_secs(10), None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rpc" => rpcs.push(args.next().ok_or("--rpc needs a URL")?),
            "--timeout" => {
                let v = args.next().ok_or("--timeout needs seconds")?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| {
                        format!("--timeout: {v:?} is not a positive number of seconds")
                    })?;
                timeout = Duration::from_secs_f64(secs);
            }
            "balance" => {
                let addr = args.next().ok_or("balance needs an address")?;
                let addr = addr
                    .parse()
                    .map_err(|e| format!("balance: {addr:?} is not an address: {e}"))?;
                command = Some(Command::Balance(addr));
            }
            "send-raw" => command = Some(Command::SendRaw),
            "send" => command = Some(Command::Send),
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    if rpcs.is_empty() {
        return Err("at least one --rpc URL is needed".into());
    }
    let command = command.ok_or("a command is needed: balance ADDR, send-raw or send")?;
    Ok(Args {
        rpcs,
        timeout,
        command,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("alloy_failover: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let client = match baton_tokio::Client::new(policy(&args.rpcs).attempt_timeout(args.timeout)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("alloy_failover: {e}");
            return ExitCode::from(2);
        }
    };
    let transport = BatonTransport::new(client);
    let rpc = RpcClient::new(transport.clone(), true);
    let result = match args.command {
        Command::Balance(addr) => balance(&rpc, addr).await,
        Command::SendRaw => send_raw(&rpc, &transport).await,
        Command::Send => send(&rpc).await,
    };
    match result {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("alloy_failover: {}", explain(&e));
            ExitCode::from(1)
        }
    }
}

async fn balance(rpc: &RpcClient, addr: Address) -> Result<String, TransportError> {
    let wei: U256 = rpc.request("eth_getBalance", (addr, "latest")).await?;
    Ok(wei.to_string())
}

async fn send_raw(rpc: &RpcClient, transport: &BatonTransport) -> Result<String, TransportError> {
    let chain: U256 = rpc.request_noparams("eth_chainId").await?;
    let nonce: U256 = rpc
        .request("eth_getTransactionCount", (FROM, "pending"))
        .await?;
    let gas_price: U256 = rpc.request_noparams("eth_gasPrice").await?;
    let tx = TxLegacy {
        chain_id: Some(chain.to::<u64>()),
        nonce: nonce.to::<u64>(),
        gas_price: gas_price.to::<u128>(),
        gas_limit: 21_000,
        to: TxKind::Call(TO),
        value: U256::from(1),
        input: Default::default(),
    };
    let signer: PrivateKeySigner = KEY
        .parse()
        .map_err(alloy_transport::TransportErrorKind::custom)?;
    let signature = signer
        .sign_hash_sync(&tx.signature_hash())
        .map_err(alloy_transport::TransportErrorKind::custom)?;
    let raw = TxEnvelope::from(tx.into_signed(signature)).encoded_2718();
    let sent = transport.broadcast(&raw).await?;
    if sent.rebroadcast {
        eprintln!("alloy_failover: the answer was lost and the chain did not have the transaction: re-broadcast through the next endpoint");
    } else if sent.answer_lost {
        eprintln!("alloy_failover: the answer was lost; the chain has the transaction (sent once)");
    }
    Ok(format!("{:#x}", sent.hash))
}

async fn send(rpc: &RpcClient) -> Result<String, TransportError> {
    let tx = serde_json::json!({ "from": FROM, "to": TO, "value": "0x1", "gas": "0x5208" });
    let hash: alloy_primitives::B256 = rpc.request("eth_sendTransaction", (tx,)).await?;
    Ok(format!("{hash:#x}"))
}

/// The error, and whether the call may have executed (from baton's report when the error
/// is baton's).
fn explain(e: &TransportError) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = e.source();
    while let Some(s) = source {
        if let Some(b) = s.downcast_ref::<baton_tokio::Error>() {
            let verdict = if b.may_have_executed() {
                "it may have executed"
            } else {
                "it did not execute"
            };
            return format!("{e} ({verdict})");
        }
        source = s.source();
    }
    format!("{e} (the node answered: nothing more was sent)")
}
