//! TLS on the listener over real sockets, with a CA made in the test
//! (rcgen): HTTPS is served and plain HTTP is not; a verified client
//! certificate stands in for its role's token and is refused on another
//! role's routes; `require_client_cert` refuses the handshake without one;
//! a reload puts renewed files in force, and files that do not load are
//! refused and change nothing.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use scorer_core::clock::ManualClock;
use scorer_engine::Engine;
use scorer_engine::config::Config;
use scorer_engine::config::auth::Role;
use serde_json::{Value, json};
use service::http::{AppState, ConnectionLimits, ServerTls, app};
use tokio::net::TcpListener;

const ROUTER_TOKEN: &str = "router-token-0123456789";
const READER_TOKEN: &str = "reader-token-0123456789";

/// A CA able to sign server and client certificates.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = p.self_signed(&key).expect("CA");
        Self { cert, key }
    }

    /// Certificate and key PEM for `dns_name`, for a server or a client.
    fn issue(&self, dns_name: &str, server: bool) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(vec![dns_name.to_owned()]).expect("params");
        p.distinguished_name.push(DnType::CommonName, dns_name);
        p.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let cert = p.signed_by(&key, &self.cert, &self.key).expect("sign");
        (cert.pem(), key.serialize_pem())
    }

    fn pem(&self) -> String {
        self.cert.pem()
    }
}

/// Writes the server's files for `ca` into `dir` and returns a config
/// serving them, with client certificates verified against `clients`.
fn tls_config(dir: &Path, ca: &Ca, clients: Option<&Ca>) -> Config {
    let (cert, key) = ca.issue("localhost", true);
    std::fs::write(dir.join("server.crt"), cert).expect("write");
    std::fs::write(dir.join("server.key"), key).expect("write");
    let mut c = common::no_warmup();
    c.server.tls.cert_path = Some(dir.join("server.crt"));
    c.server.tls.key_path = Some(dir.join("server.key"));
    if let Some(clients) = clients {
        std::fs::write(dir.join("clients.crt"), clients.pem()).expect("write");
        c.server.tls.client_ca_path = Some(dir.join("clients.crt"));
    }
    c
}

/// Serves `cfg` over TLS; the reload source re-reads `cfg` unchanged.
async fn start(cfg: Config) -> (SocketAddr, AppState) {
    let tls = ServerTls::load(&cfg.server.tls)
        .expect("TLS loads")
        .map(Arc::new);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let limits = ConnectionLimits::from_config(&cfg.server);
    let clock = Arc::new(ManualClock::new(1_000, common::WALL));
    let source = cfg.clone();
    let state = AppState::new(Engine::new(cfg), clock)
        .with_config_source(Arc::new(move || Ok(source.clone())))
        .with_tls(tls.clone());
    tokio::spawn(service::http::serve(
        listener,
        app(state.clone()),
        limits,
        tls,
        std::future::pending(),
    ));
    (addr, state)
}

/// An HTTPS client trusting `ca`, presenting `identity` (certificate and
/// key PEM) if given, reaching `localhost` at `addr`.
fn client(addr: SocketAddr, ca: &Ca, identity: Option<(String, String)>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .resolve("localhost", addr)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).expect("CA"));
    if let Some((cert, key)) = identity {
        b = b.identity(reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes()).expect("id"));
    }
    b.build().expect("client")
}

/// Status and JSON body, or the transport error's text.
async fn call(
    c: &reqwest::Client,
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Result<(u16, Value), String> {
    let url = format!("https://localhost:{}{path}", addr.port());
    let mut req = match method {
        "GET" => c.get(&url),
        _ => c.post(&url),
    };
    match path {
        "/v1/score" => req = req.json(&json!({"key": "user:1", "candidates": ["w1"]})),
        "/v1/telemetry" => {
            req = req.json(&json!({"snapshots": [{"worker_id": "w1",
                "timestamp_ms": common::WALL, "cpu_usage": 0.2, "queue_depth": 1,
                "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0}]}));
        }
        _ => {}
    }
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| format!("{e:?}"))?;
    let status = resp.status().as_u16();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

#[tokio::test]
async fn https_is_served_and_plain_http_is_not() {
    let dir = tempfile::tempdir().expect("tmp");
    let ca = Ca::new("server CA");
    let (addr, _st) = start(tls_config(dir.path(), &ca, None)).await;
    let c = client(addr, &ca, None);
    assert_eq!(
        call(&c, addr, "GET", "/healthz", None).await.unwrap().0,
        200
    );
    let (s, b) = call(&c, addr, "POST", "/v1/telemetry", None).await.unwrap();
    assert_eq!(s, 200, "{b}");
    let (s, b) = call(&c, addr, "POST", "/v1/score", None).await.unwrap();
    assert_eq!(s, 200, "{b}");
    // Plain HTTP to the TLS port gets no HTTP answer.
    let plain = reqwest::get(format!("http://{addr}/healthz")).await;
    assert!(plain.is_err(), "plain HTTP answered: {plain:?}");
    // A client that does not trust the server's CA refuses it.
    let stranger = client(addr, &Ca::new("another CA"), None);
    assert!(
        call(&stranger, addr, "GET", "/healthz", None)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_client_certificate_stands_in_for_its_roles_token() {
    let dir = tempfile::tempdir().expect("tmp");
    let (server_ca, clients) = (Ca::new("server CA"), Ca::new("client CA"));
    let mut cfg = tls_config(dir.path(), &server_ca, Some(&clients));
    cfg.auth.router.insert("edge".into(), ROUTER_TOKEN.into());
    cfg.auth.reader.insert("dash".into(), READER_TOKEN.into());
    cfg.auth
        .certificates
        .insert("router-1.scorer.internal".into(), Role::Router);
    let (addr, _st) = start(cfg).await;
    let agent = client(addr, &server_ca, None);
    let (s, b) = call(&agent, addr, "POST", "/v1/telemetry", None)
        .await
        .unwrap();
    assert_eq!(s, 200, "{b}");

    let router = client(
        addr,
        &server_ca,
        Some(clients.issue("router-1.scorer.internal", false)),
    );
    let (s, b) = call(&router, addr, "POST", "/v1/score", None)
        .await
        .unwrap();
    assert_eq!(s, 200, "the router's certificate scores: {b}");
    // Its name is its router id: it may report its own load, not edge's.
    let url = format!("https://localhost:{}/v1/router/load", addr.port());
    for (id, want) in [("router-1.scorer.internal", 200), ("edge", 403)] {
        let body = json!({"router_id": id, "outstanding": [{"worker_id": "w1", "outstanding": 1}]});
        let resp = router.post(&url).json(&body).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), want, "{id}");
    }
    let (s, b) = call(&router, addr, "GET", "/v1/workers", None)
        .await
        .unwrap();
    assert_eq!(s, 403, "a router certificate on a reader route: {b}");
    assert_eq!(b["error"]["code"], "forbidden");
    // A token, when sent, decides over the certificate.
    let (s, _) = call(&router, addr, "GET", "/v1/workers", Some(READER_TOKEN))
        .await
        .unwrap();
    assert_eq!(s, 200);

    // Signed by the CA, but its name has no role.
    let unnamed = client(
        addr,
        &server_ca,
        Some(clients.issue("intruder.scorer.internal", false)),
    );
    let (s, b) = call(&unnamed, addr, "POST", "/v1/score", None)
        .await
        .unwrap();
    assert_eq!(s, 401, "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("[auth.certificates]")),
        "{b}"
    );
    // No certificate: the token still works, and its absence is refused.
    let plain = client(addr, &server_ca, None);
    assert_eq!(
        call(&plain, addr, "POST", "/v1/score", None)
            .await
            .unwrap()
            .0,
        401
    );
    assert_eq!(
        call(&plain, addr, "POST", "/v1/score", Some(ROUTER_TOKEN))
            .await
            .unwrap()
            .0,
        200
    );
    // A certificate from another CA does not get through the handshake.
    let forged = client(
        addr,
        &server_ca,
        Some(Ca::new("forger").issue("router-1.scorer.internal", false)),
    );
    assert!(
        call(&forged, addr, "POST", "/v1/score", None)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn require_client_cert_refuses_the_handshake_without_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let (server_ca, clients) = (Ca::new("server CA"), Ca::new("client CA"));
    let mut cfg = tls_config(dir.path(), &server_ca, Some(&clients));
    cfg.server.tls.require_client_cert = true;
    let (addr, _st) = start(cfg).await;
    let without = client(addr, &server_ca, None);
    assert!(call(&without, addr, "GET", "/healthz", None).await.is_err());
    let with = client(
        addr,
        &server_ca,
        Some(clients.issue("any.scorer.internal", false)),
    );
    assert_eq!(
        call(&with, addr, "GET", "/healthz", None).await.unwrap().0,
        200
    );
}

#[tokio::test]
async fn a_reload_serves_renewed_files_and_refuses_broken_ones() {
    let dir = tempfile::tempdir().expect("tmp");
    let (old_ca, new_ca) = (Ca::new("old CA"), Ca::new("new CA"));
    let (addr, _st) = start(tls_config(dir.path(), &old_ca, None)).await;
    let trusts_old = client(addr, &old_ca, None);
    let trusts_new = client(addr, &new_ca, None);
    assert!(
        call(&trusts_new, addr, "GET", "/healthz", None)
            .await
            .is_err()
    );

    // Renew in place, as certbot or cert-manager do, then reload.
    tls_config(dir.path(), &new_ca, None);
    let (s, b) = call(&trusts_old, addr, "POST", "/v1/admin/reload", None)
        .await
        .unwrap();
    assert_eq!(s, 200, "{b}");
    let fresh_new = client(addr, &new_ca, None);
    assert_eq!(
        call(&fresh_new, addr, "GET", "/healthz", None)
            .await
            .unwrap()
            .0,
        200
    );
    let fresh_old = client(addr, &old_ca, None);
    assert!(
        call(&fresh_old, addr, "GET", "/healthz", None)
            .await
            .is_err()
    );

    // A key file that does not parse: refused, and the served certificate stays.
    std::fs::write(dir.path().join("server.key"), "not a key").expect("write");
    let (s, b) = call(&fresh_new, addr, "POST", "/v1/admin/reload", None)
        .await
        .unwrap();
    assert_eq!(s, 422, "{b}");
    assert_eq!(b["error"]["code"], "invalid_config");
    assert!(
        b["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("server.tls.key_path")),
        "{b}"
    );
    let again = client(addr, &new_ca, None);
    assert_eq!(
        call(&again, addr, "GET", "/healthz", None).await.unwrap().0,
        200
    );
}

#[test]
fn files_that_do_not_load_name_their_key() {
    let dir = tempfile::tempdir().expect("tmp");
    let ca = Ca::new("CA");
    let cfg = tls_config(dir.path(), &ca, Some(&ca));
    std::fs::write(dir.path().join("clients.crt"), "").expect("write");
    let e = ServerTls::load(&cfg.server.tls).unwrap_err();
    assert_eq!(e.key, "server.tls.client_ca_path", "{e}");
    let mut missing = cfg.server.tls.clone();
    missing.cert_path = Some(dir.path().join("nope.crt"));
    let e = ServerTls::load(&missing).unwrap_err();
    assert_eq!(e.key, "server.tls.cert_path", "{e}");
    assert!(e.reason.contains("nope.crt"), "{e}");
}
