//! Serves an HTTP/2 provider on loopback, h2c and behind TLS (h2 and http/1.1 by ALPN), with
//! a test CA written to a temporary directory, for trying clients by hand:
//!
//! ```text
//! cargo run -p testkit --example h2_provider
//! curl --cacert /tmp/testkit-h2-provider/ca.pem https://127.0.0.1:PORT/
//! curl --http2-prior-knowledge http://127.0.0.1:PORT/
//! ```
//!
//! It stops after 60 seconds.

use std::time::Duration;

use testkit::{Behaviour, H2Behaviour, H2Provider, Provider, TestPki, TlsFront};

fn main() {
    let pki = TestPki::new();
    let files = pki.write(&std::env::temp_dir().join("testkit-h2-provider"));
    let h2 = H2Provider::start(H2Behaviour::ok());
    let h1 = Provider::start(Behaviour::ok());
    let front = TlsFront::start(
        pki.server_config(&pki.server, &["h2", "http/1.1"], false),
        Some(h1.addr()),
        Some(h2.addr()),
    );
    println!("ca file: {}", files.ca.display());
    println!("h2c:     {}", h2.url());
    println!("tls:     {}", front.url());
    std::thread::sleep(Duration::from_secs(60));
}
